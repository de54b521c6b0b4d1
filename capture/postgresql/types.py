"""PostgreSQL column types -> Debezium Connect schemas and values.

Every value arrives as the text the type's output function writes: pgoutput sends text tuples,
and the snapshot reads rows as text too, so one converter serves both and a row read by the
snapshot is byte-for-byte the row the stream would have sent. The agent pins the session
settings that shape that text (``TimeZone=UTC``, ``DateStyle=ISO``, ``IntervalStyle=iso_8601``,
``bytea_output=hex``, ``extra_float_digits=3``, ``lc_monetary=C``; see
:data:`SESSION_SETTINGS`), on the replication connection as on the snapshot connection.

Mappings follow the Debezium 1.2 guide §2.2 (``shared/spec/debezium-guide-1.2.md``):

* ``bool``, ``bit(1)`` -> BOOLEAN; ``bit(n>1)`` -> ``io.debezium.data.Bits`` (n bits,
  ``ceil(n/8)`` bytes little-endian); ``varbit`` -> STRING of ``0``/``1`` (Debezium's ``Bits``
  drops leading zero bits and so the length; the text keeps it, docs/types.md).
* ``int2/int4/int8`` -> INT16/INT32/INT64, ``oid`` -> INT64, ``float4/float8`` -> FLOAT32/64;
  ``NaN``/``Infinity``/``-Infinity`` are the JSON strings Jackson writes for them.
* ``numeric``: ``decimal.handling.mode`` ``precise`` (Connect ``Decimal`` with its scale, or
  ``VariableScaleDecimal`` when the column declares none), ``double`` or ``string``; ``money``
  likewise, with 2 fraction digits. A numeric ``NaN``/``Infinity`` under ``precise`` has no
  representation: :class:`Unrepresentable` (contract C1).
* character types, ``citext``, ``inet``, ``cidr``, ``macaddr(8)``, ranges, ``tsvector`` and the
  non-point geometric types -> STRING.
* ``date``/``time``/``timestamp`` per ``time.precision.mode``; ``timetz`` -> ``ZonedTime``,
  ``timestamptz`` -> ``ZonedTimestamp`` (UTC). ``±infinity`` dates are int32 max/min days,
  timestamps Debezium's sentinels (:data:`TIMESTAMP_POSITIVE_INFINITY_US`), timestamptz the
  text ``infinity``/``-infinity``; a timestamp beyond int64 microseconds is unrepresentable.
* ``interval`` -> ``Interval`` ISO-8601 text exactly as Debezium formats it (the default,
  exact), or ``MicroDuration`` (365.25/12 days per month: lossy).
* ``bytea`` per ``binary.handling.mode``; ``json(b)`` -> ``Json``; ``xml`` -> ``Xml``;
  ``uuid`` -> ``Uuid``; ``ltree`` -> ``Ltree``; enums -> ``Enum`` with ``allowed``;
  ``hstore`` -> ``Json`` text or a MAP (``hstore.handling.mode``); ``point`` -> ``Point``;
  arrays -> ARRAY of the element's mapping, nested once per declared dimension
  (``pg_attribute.attndims``); domains -> their base type.

A type not in this list is captured as its text with a warning (once per type), never dropped and
never a crash. An unparsable value of a known type raises :class:`ValueConversionError`, which
the agent reports with the table and column. A value that parses but has no representation in
the column's Connect type raises :class:`Unrepresentable`: the agent writes the field as null
and names the value in the record's ``__medallion.unrepresentable`` header (contract C1), so
the row still lands.
"""

from __future__ import annotations

import base64
import logging
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import orjson

from bronze import connect_schema as cs
from capture.column_types import (
    US_PER_DAY,
    ColumnType,
    Unrepresentable,
    b64,
    days_from_civil,
    decimal_bytes,
    format_utc,
    iso_fraction,
    json_float,
)

__all__ = [
    "SESSION_SETTINGS",
    "PgType",
    "ValueHandling",
    "TypeLookup",
    "DATE_POSITIVE_INFINITY",
    "DATE_NEGATIVE_INFINITY",
    "TIMESTAMP_POSITIVE_INFINITY_US",
    "TIMESTAMP_NEGATIVE_INFINITY_US",
    "column_type",
    "parse_array",
    "parse_hstore",
]

logger = logging.getLogger(__name__)

SESSION_SETTINGS: Final[Mapping[str, str]] = {
    "TimeZone": "UTC",
    "DateStyle": "ISO",
    "IntervalStyle": "iso_8601",
    "bytea_output": "hex",
    "extra_float_digits": "3",
    "lc_monetary": "C",
    "client_encoding": "UTF8",
}
"""Settings of every agent session: they fix the text form of values that the converters read."""


DATE_POSITIVE_INFINITY: Final = 2**31 - 1
"""``date 'infinity'`` as ``io.debezium.time.Date`` days (int32 max; contract C2)."""
DATE_NEGATIVE_INFINITY: Final = -(2**31)
"""``date '-infinity'`` (int32 min)."""
TIMESTAMP_POSITIVE_INFINITY_US: Final = 9_223_372_036_825_200_000
"""``timestamp 'infinity'`` in microseconds: Debezium's ``PGStatement.DATE_POSITIVE_INFINITY``
read as microseconds (``PostgresValueConverter.POSITIVE_INFINITY_INSTANT``)."""
TIMESTAMP_NEGATIVE_INFINITY_US: Final = -9_223_372_036_832_400_000
"""``timestamp '-infinity'`` in microseconds (Debezium's negative sentinel)."""
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1


# --- type descriptions --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PgType:
    """What ``pg_type`` says about a type (the fields the mapping needs).

    Attributes:
        oid: Type OID.
        name: ``typname`` (``_int4`` for ``int4[]``).
        namespace: Schema of the type.
        typtype: ``b`` base, ``e`` enum, ``d`` domain, ``c`` composite, ``r`` range,
            ``m`` multirange, ``p`` pseudo.
        element_oid: ``typelem`` of an array type (0 otherwise).
        base_oid: ``typbasetype`` of a domain (0 otherwise).
        base_typmod: ``typtypmod`` of a domain (-1 when none).
        enum_labels: Labels of an enum, in sort order.
        is_array: ``typcategory = 'A'``.
    """

    oid: int
    name: str
    namespace: str = "pg_catalog"
    typtype: str = "b"
    element_oid: int = 0
    base_oid: int = 0
    base_typmod: int = -1
    enum_labels: tuple[str, ...] = ()
    is_array: bool = False


TypeLookup = Callable[[int], PgType | None]
"""Finds a type by OID (from ``pg_type``); None when the server does not know it."""


@dataclass(frozen=True, slots=True)
class ValueHandling:
    """The source's value-handling modes (from its
    :class:`capture.postgresql.config.PostgresSourceConfig`)."""

    decimal: str = "precise"
    time_precision: str = "adaptive"
    binary: str = "bytes"
    hstore: str = "json"
    interval: str = "string"
    money_fraction_digits: int = 2

    @classmethod
    def from_config(cls, config: Any) -> ValueHandling:
        """Read the modes off a source config (missing attributes keep their defaults)."""
        return cls(
            decimal=str(getattr(config, "decimal_handling_mode", "precise")),
            time_precision=str(getattr(config, "time_precision_mode", "adaptive")),
            binary=str(getattr(config, "binary_handling_mode", "bytes")),
            hstore=str(getattr(config, "hstore_handling_mode", "json")),
            interval=str(getattr(config, "interval_handling_mode", "string")),
        )


# --- builtin OIDs (stable across PostgreSQL versions) ---------------------------------------------

BOOL, BYTEA, CHAR, NAME, INT8, INT2, INT4, TEXT, OID = 16, 17, 18, 19, 20, 21, 23, 25, 26
JSON, XML, POINT, LSEG, PATH, BOX, POLYGON, LINE = 114, 142, 600, 601, 602, 603, 604, 628
CIDR, FLOAT4, FLOAT8, CIRCLE, MACADDR8, MONEY, MACADDR, INET = (
    650,
    700,
    701,
    718,
    774,
    790,
    829,
    869,
)
BPCHAR, VARCHAR, DATE, TIME, TIMESTAMP, TIMESTAMPTZ, INTERVAL = (
    1042,
    1043,
    1082,
    1083,
    1114,
    1184,
    1186,
)
TIMETZ, BIT, VARBIT, NUMERIC, UUID, JSONB, PG_LSN = 1266, 1560, 1562, 1700, 2950, 3802, 3220
TSVECTOR, TSQUERY = 3614, 3615

_BUILTIN_NAMES: Final[dict[int, str]] = {
    BOOL: "bool", BYTEA: "bytea", CHAR: "char", NAME: "name", INT8: "int8", INT2: "int2",
    INT4: "int4", TEXT: "text", OID: "oid", JSON: "json", XML: "xml", POINT: "point",
    LSEG: "lseg", PATH: "path", BOX: "box", POLYGON: "polygon", LINE: "line", CIDR: "cidr",
    FLOAT4: "float4", FLOAT8: "float8", CIRCLE: "circle", MACADDR8: "macaddr8", MONEY: "money",
    MACADDR: "macaddr", INET: "inet", BPCHAR: "bpchar", VARCHAR: "varchar", DATE: "date",
    TIME: "time", TIMESTAMP: "timestamp", TIMESTAMPTZ: "timestamptz", INTERVAL: "interval",
    TIMETZ: "timetz", BIT: "bit", VARBIT: "varbit", NUMERIC: "numeric", UUID: "uuid",
    JSONB: "jsonb", PG_LSN: "pg_lsn", TSVECTOR: "tsvector", TSQUERY: "tsquery",
    3904: "int4range", 3926: "int8range", 3906: "numrange", 3908: "tsrange",
    3910: "tstzrange", 3912: "daterange",
}  # fmt: skip

_BUILTIN_ARRAYS: Final[dict[int, int]] = {
    1000: BOOL, 1001: BYTEA, 1002: CHAR, 1003: NAME, 1016: INT8, 1005: INT2, 1007: INT4,
    1009: TEXT, 1028: OID, 199: JSON, 143: XML, 1017: POINT, 651: CIDR, 1021: FLOAT4,
    1022: FLOAT8, 791: MONEY, 1040: MACADDR, 1041: INET, 1014: BPCHAR, 1015: VARCHAR,
    1182: DATE, 1183: TIME, 1115: TIMESTAMP, 1185: TIMESTAMPTZ, 1187: INTERVAL, 1270: TIMETZ,
    1561: BIT, 1563: VARBIT, 1231: NUMERIC, 2951: UUID, 3807: JSONB, 1020: BOX, 1018: LSEG,
    1019: PATH, 1027: POLYGON, 629: LINE, 719: CIRCLE, 775: MACADDR8, 3221: PG_LSN,
    3643: TSVECTOR, 3645: TSQUERY, 3905: 3904, 3927: 3926, 3907: 3906, 3909: 3908, 3911: 3910,
    3913: 3912,
}  # fmt: skip

_STRING_TYPES: Final = frozenset(
    {
        "char", "name", "text", "varchar", "bpchar", "citext", "inet", "cidr", "macaddr",
        "macaddr8", "int4range", "int8range", "numrange", "tsrange", "tstzrange", "daterange",
        "int4multirange", "int8multirange", "nummultirange", "tsmultirange", "tstzmultirange",
        "datemultirange", "tsvector", "tsquery", "pg_lsn", "line", "lseg", "box", "path",
        "polygon", "circle", "txid_snapshot", "pg_snapshot", "regclass", "regtype", "regproc",
        "xid", "xid8", "cid", "tid", "int2vector", "oidvector", "character",
    }
)  # fmt: skip
"""Types Debezium (or this agent, documented) carries as their text, without a warning."""

_warned_types: set[str] = set()


# --- value helpers ------------------------------------------------------------------------------


_DATE_RE = re.compile(r"(\d{4,})-(\d\d)-(\d\d)")
_TIME_RE = re.compile(r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_OFFSET_RE = re.compile(r"([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?$")
_EPOCH_DAYS_0001: Final = -719162
"""Days from 1970-01-01 back to 0001-01-01 (the fast ISO path adds to it)."""


def _parse_date(text: str) -> int:
    bc = text.endswith(" BC")
    m = _DATE_RE.fullmatch(text[:-3] if bc else text)
    if m is None:
        raise ValueError(f"not an ISO date: {text!r}")
    year = int(m.group(1))
    if bc:
        year = 1 - year
    return days_from_civil(year, int(m.group(2)), int(m.group(3)))


def _date_days(text: str) -> int:
    """``date`` text -> days since the epoch; ``±infinity`` -> int32 max/min (contract C2)."""
    if len(text) == 10 and text[4] == "-":
        return days_from_civil(int(text[:4]), int(text[5:7]), int(text[8:]))
    if text == "infinity":
        return DATE_POSITIVE_INFINITY
    if text == "-infinity":
        return DATE_NEGATIVE_INFINITY
    return _parse_date(text)


def _time_micros(text: str) -> int:
    m = _TIME_RE.fullmatch(text)
    if m is None:
        raise ValueError(f"not a time: {text!r}")
    frac = m.group(4) or ""
    return (int(m.group(1)) * 3600 + int(m.group(2)) * 60 + int(m.group(3))) * 1_000_000 + int(
        frac.ljust(6, "0") or 0
    )


def _split_offset(text: str) -> tuple[str, int]:
    """Split ``...+hh[:mm[:ss]]`` into the text before the offset and the offset in seconds."""
    m = _OFFSET_RE.search(text)
    if m is None:
        raise ValueError(f"no UTC offset in {text!r}")
    seconds = int(m.group(2)) * 3600 + int(m.group(3) or 0) * 60 + int(m.group(4) or 0)
    return text[: m.start()], -seconds if m.group(1) == "-" else seconds


def _timestamp_micros(text: str) -> int:
    if len(text) >= 19 and text[4] == "-" and text[10] == " " and text[-1] != "C":
        # The common ISO form (years 1000-9999, no era): slices instead of regexes.
        days = days_from_civil(int(text[:4]), int(text[5:7]), int(text[8:10]))
        micros = (int(text[11:13]) * 3600 + int(text[14:16]) * 60 + int(text[17:19])) * 1_000_000
        if len(text) > 20:
            micros += int(text[20:].ljust(6, "0"))
        return days * US_PER_DAY + micros
    bc = text.endswith(" BC")
    body = text[:-3] if bc else text
    date_part, _, time_part = body.partition(" ")
    days = _parse_date(date_part + (" BC" if bc else ""))
    return days * US_PER_DAY + _time_micros(time_part)


def _outside_int64(text: str, type_name: str) -> Unrepresentable:
    return Unrepresentable(
        f"{type_name} {text} is outside the range of int64 microseconds since the epoch "
        "(years -290308 to 294247), which Connect timestamps and Spark hold"
    )


def _checked_timestamp_micros(text: str) -> int:
    """``timestamp`` text -> µs; ``±infinity`` -> Debezium's sentinels; beyond int64: C1."""
    if text[-1] == "y":
        if text == "infinity":
            return TIMESTAMP_POSITIVE_INFINITY_US
        if text == "-infinity":
            return TIMESTAMP_NEGATIVE_INFINITY_US
    micros = _timestamp_micros(text)
    if _INT64_MIN <= micros <= _INT64_MAX:
        return micros
    raise _outside_int64(text, "timestamp")


def _zoned_timestamp(text: str) -> str:
    if text == "infinity" or text == "-infinity":
        return text  # what Debezium writes (PostgresValueConverter.convertTimestampWithZone)
    bc = text.endswith(" BC")
    body = text[:-3] if bc else text
    local, offset = _split_offset(body)
    micros = _timestamp_micros(local + (" BC" if bc else "")) - offset * 1_000_000
    if not _INT64_MIN <= micros <= _INT64_MAX:
        raise _outside_int64(text, "timestamptz")
    return format_utc(micros)


def _zoned_time(text: str) -> str:
    local, offset = _split_offset(text)
    shifted = _time_micros(local) - offset * 1_000_000
    if shifted == US_PER_DAY:
        return "24:00:00Z"  # '24:00:00+00' stays the end of the day, as in Debezium
    micros = shifted % US_PER_DAY
    seconds, frac = divmod(micros, 1_000_000)
    hh, rem = divmod(seconds, 3600)
    mm, ss = divmod(rem, 60)
    return f"{hh:02d}:{mm:02d}:{ss:02d}{iso_fraction(frac)}Z"


_INTERVAL_RE = re.compile(
    r"P(?:(-?\d+)Y)?(?:(-?\d+)M)?(?:(-?\d+)W)?(?:(-?\d+)D)?"
    r"(?:T(?:(-?\d+)H)?(?:(-?\d+)M)?(?:(-?\d+(?:\.\d+)?)S)?)?"
)
_MICROS_PER_MONTH: Final = 2_629_800 * 1_000_000  # 365.25 / 12 days


def _interval_parts(text: str) -> tuple[int, int, int, int, int, Decimal]:
    m = _INTERVAL_RE.fullmatch(text)
    if m is None or text in ("P", "PT"):
        raise ValueError(f"not an ISO-8601 interval (IntervalStyle iso_8601): {text!r}")
    y, mo, w, d, h, mi = (int(g) if g else 0 for g in m.groups()[:6])
    seconds = Decimal(m.group(7) or 0)
    return y, mo, d + 7 * w, h, mi, seconds


def _interval_micros(text: str) -> int:
    y, mo, d, h, mi, s = _interval_parts(text)
    micros = (
        (y * 12 + mo) * _MICROS_PER_MONTH
        + d * US_PER_DAY
        + (h * 3600 + mi * 60) * 1_000_000
        + int(s * 1_000_000)
    )
    if _INT64_MIN <= micros <= _INT64_MAX:
        return micros
    raise Unrepresentable(
        f"interval {text} exceeds int64 microseconds (interval.handling.mode=numeric; "
        "the default mode string holds it exactly)"
    )


def _interval_string(text: str) -> str:
    """Debezium's ``Interval.toIsoString``: ``P<y>Y<m>M<d>DT<h>H<m>M<s>S``, every part signed as
    PostgreSQL keeps it, seconds as ``BigDecimal.stripTrailingZeros().toPlainString()``."""
    y, mo, d, h, mi, s = _interval_parts(text)
    sec = format(s.normalize(), "f") if s else "0"
    return f"P{y}Y{mo}M{d}DT{h}H{mi}M{sec}S"


def _pg_float(text: str) -> float | str:
    # float4/float8 output: 'NaN', 'Infinity', '-Infinity' are exactly Jackson's strings.
    last = text[-1]
    if last == "N" or last == "y":
        return text
    return float(text)


def parse_array(text: str, delimiter: str = ",") -> list[Any]:
    """Parse a PostgreSQL array literal (``{1,NULL,"a b"}``) into nested lists of str/None.

    ``delimiter`` is the element type's ``typdelim`` (``;`` for ``box``, ``,`` otherwise).

    >>> parse_array('{1,NULL,"x,\\\\"y"}')
    ['1', None, 'x,"y']
    >>> parse_array("[0:1]={a,b}")
    ['a', 'b']
    """
    if text.startswith("["):
        # Explicit bounds ("[0:1]={...}"); the lower bound does not change the element list.
        text = text[text.index("=") + 1 :]
    pos = 0

    def parse() -> list[Any]:
        nonlocal pos
        if text[pos] != "{":
            raise ValueError(f"array literal expected '{{' at {pos}: {text!r}")
        pos += 1
        items: list[Any] = []
        if text[pos] == "}":
            pos += 1
            return items
        while True:
            char = text[pos]
            if char == "{":
                items.append(parse())
            elif char == '"':
                pos += 1
                out = []
                while text[pos] != '"':
                    if text[pos] == "\\":
                        pos += 1
                    out.append(text[pos])
                    pos += 1
                pos += 1
                items.append("".join(out))
            else:
                start = pos
                while text[pos] != delimiter and text[pos] != "}":
                    pos += 1
                raw = text[start:pos].strip()
                items.append(None if raw == "NULL" else raw)
            if text[pos] == delimiter:
                pos += 1
            elif text[pos] == "}":
                pos += 1
                return items
            else:
                raise ValueError(f"array literal: unexpected {text[pos]!r} at {pos}: {text!r}")

    try:
        result = parse()
    except IndexError:
        raise ValueError(f"truncated array literal: {text!r}") from None
    return result


def parse_hstore(text: str) -> dict[str, str | None]:
    """Parse hstore's text form (``"a"=>"1", "b"=>NULL``).

    >>> parse_hstore('"a"=>"1", "b"=>NULL')
    {'a': '1', 'b': None}
    """
    out: dict[str, str | None] = {}
    pos, n = 0, len(text)

    def token() -> str | None:
        nonlocal pos
        while pos < n and text[pos] in " ,":
            pos += 1
        if text[pos] == '"':
            pos += 1
            chars = []
            while text[pos] != '"':
                if text[pos] == "\\":
                    pos += 1
                chars.append(text[pos])
                pos += 1
            pos += 1
            return "".join(chars)
        start = pos
        while pos < n and text[pos] not in " ,=":
            pos += 1
        word = text[start:pos]
        return None if word.upper() == "NULL" else word

    try:
        while True:
            while pos < n and text[pos] in " ,":
                pos += 1
            if pos >= n:
                return out
            key = token()
            while text[pos] == " ":
                pos += 1
            if text[pos : pos + 2] != "=>":
                raise ValueError(f"hstore: expected '=>' at {pos}: {text!r}")
            pos += 2
            value = token()
            out[str(key)] = value
    except IndexError:
        raise ValueError(f"truncated hstore value: {text!r}") from None


def _money(text: str, digits: int) -> Decimal:
    negative = text.startswith(("-", "("))
    cleaned = "".join(c for c in text if c.isdigit() or c == ".")
    value = Decimal(cleaned).quantize(Decimal(1).scaleb(-digits))
    return -value if negative else value


def _bits_little_endian(text: str) -> bytes:
    # Debezium: character i from the right is bit i; bytes little-endian (BitSet.toByteArray).
    if not text:
        return b""
    return int(text, 2).to_bytes((len(text) + 7) // 8, "little")


def _point(text: str) -> dict[str, Any]:
    x_text, _, y_text = text.strip("()").partition(",")
    x, y = float(x_text), float(y_text)
    wkb = b64(struct.pack("<BIdd", 1, 1, x, y))
    return {"x": json_float(x), "y": json_float(y), "wkb": wkb, "srid": None}


def _varbit(text: str) -> str:
    if text.strip("01"):
        raise ValueError(f"not a bit string: {text!r}")
    return text


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("bytea value is not in hex format (bytea_output=hex)")
    return bytes.fromhex(text[2:])


# --- the mapping --------------------------------------------------------------------------------


def _numeric_scale(typmod: int) -> tuple[int, int] | None:
    """``(precision, scale)`` of a ``numeric`` typmod; None without one. The scale is an 11-bit
    signed field (PostgreSQL 15 allows ``numeric(p, s)`` with s from -1000 to 1000)."""
    if typmod < 4:
        return None
    return ((typmod - 4) >> 16) & 0xFFFF, (((typmod - 4) & 0x7FF) ^ 1024) - 1024


_SPECIAL_DECIMAL_NAMES: Final[Mapping[str, str]] = {
    "NaN": "NAN",
    "Infinity": "POSITIVE_INFINITY",
    "-Infinity": "NEGATIVE_INFINITY",
}
"""``decimal.handling.mode=string``: Debezium writes ``SpecialValueDecimal``'s enum names."""


def _decimal_type(name: str, handling: ValueHandling, scale: int | None, precision: int | None,
                  parse: Callable[[str], Decimal]) -> ColumnType:  # fmt: skip
    mode = handling.decimal
    if mode == "double":

        def to_double(text: str) -> float | str:
            return json_float(float(parse(text)))

        return ColumnType(cs.primitive("float64"), to_double, name)
    if mode == "string":

        def to_string(text: str) -> str:
            special = _SPECIAL_DECIMAL_NAMES.get(text)
            return special if special is not None else format(parse(text), "f")

        return ColumnType(cs.primitive("string"), to_string, name)

    def not_finite(text: str) -> Unrepresentable:
        return Unrepresentable(
            f"{name} {text} has no representation in a Connect Decimal "
            "(decimal.handling.mode=precise; the modes double and string carry it)"
        )

    if scale is None:

        def to_variable(text: str) -> Any:
            value = parse(text)
            if not value.is_finite():
                raise not_finite(text)
            exponent = value.as_tuple().exponent
            s = max(0, -exponent) if isinstance(exponent, int) else 0
            return {"scale": s, "value": decimal_bytes(value, s)}

        return ColumnType(cs.variable_scale_decimal(), to_variable, name)
    fixed = scale

    def to_decimal(text: str) -> Any:
        value = parse(text)
        if not value.is_finite():
            raise not_finite(text)
        return decimal_bytes(value, fixed)

    return ColumnType(cs.decimal(fixed, precision=precision), to_decimal, name, is_binary=True)


def _parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None


def _timestamp_millis(text: str) -> int:
    return _checked_timestamp_micros(text) // 1000


def _time_millis(text: str) -> int:
    return _time_micros(text) // 1000


def _temporal(name: str, typmod: int, handling: ValueHandling) -> ColumnType:
    mode = handling.time_precision
    if name == "date":
        schema = cs.connect_date() if mode == "connect" else cs.date()
        return ColumnType(schema, _date_days, name)
    precision = 6 if typmod < 0 else typmod
    if name == "time":
        if mode == "connect" or (mode == "adaptive" and precision <= 3):
            schema = cs.connect_time() if mode == "connect" else cs.time_millis()
            return ColumnType(schema, _time_millis, name)
        return ColumnType(cs.micro_time(), _time_micros, name)
    if mode == "connect" or precision <= 3:
        schema = cs.connect_timestamp() if mode == "connect" else cs.timestamp_millis()
        return ColumnType(schema, _timestamp_millis, name)
    return ColumnType(cs.micro_timestamp(), _checked_timestamp_micros, name)


def _binary(handling: ValueHandling) -> ColumnType:
    mode = handling.binary
    if mode == "hex":
        return ColumnType(cs.primitive("string"), lambda t: _bytea(t).hex(), "bytea")
    if mode == "base64-url-safe":
        return ColumnType(
            cs.primitive("string"),
            lambda t: base64.urlsafe_b64encode(_bytea(t)).decode("ascii"),
            "bytea",
        )
    if mode == "base64":
        return ColumnType(cs.primitive("string"), lambda t: b64(_bytea(t)), "bytea")
    return ColumnType(cs.primitive("bytes"), lambda t: b64(_bytea(t)), "bytea", is_binary=True)


def _text(name: str) -> ColumnType:
    return ColumnType(cs.primitive("string"), str, name)


def _unknown(name: str) -> ColumnType:
    if name not in _warned_types:
        _warned_types.add(name)
        logger.warning(
            "PostgreSQL type %r has no Debezium mapping here; its values are captured as text",
            name,
        )
    return ColumnType(cs.primitive("string"), str, name, known=False)


def column_type(
    type_oid: int,
    typmod: int,
    handling: ValueHandling,
    lookup: TypeLookup | None = None,
    dims: int = 0,
) -> ColumnType:
    """The Debezium representation of a column of type ``type_oid`` (modifier ``typmod``).

    Args:
        type_oid: The column's type OID (from a Relation message or ``pg_attribute``).
        typmod: The type modifier (``atttypmod``; -1 when none).
        handling: The source's value-handling modes.
        lookup: Finds non-builtin types (enums, domains, extensions, arrays of them) in
            ``pg_type``; without it such types are captured as text.
        dims: Declared array dimensions (``pg_attribute.attndims``) of an array column: the
            schema nests one ARRAY per dimension. 0 (unknown, e.g. ``CREATE TABLE AS``) is 1.

    Returns:
        Schema and converter of the column. Unknown types become text with a warning.
    """
    info = lookup(type_oid) if lookup is not None and type_oid not in _BUILTIN_NAMES else None
    name = _BUILTIN_NAMES.get(type_oid) or (info.name if info is not None else f"oid:{type_oid}")
    if info is not None and info.typtype == "d" and info.base_oid:
        return column_type(
            info.base_oid, typmod if typmod >= 0 else info.base_typmod, handling, lookup, dims
        )
    element_oid = _BUILTIN_ARRAYS.get(type_oid)
    if element_oid is None and info is not None and info.is_array and info.element_oid:
        element_oid = info.element_oid
    if element_oid is not None:
        return _array_type(column_type(element_oid, typmod, handling, lookup), max(dims, 1))
    if info is not None and info.typtype == "e":
        return ColumnType(cs.enum(info.enum_labels), str, name)
    return _scalar(name, typmod, handling)


def _array_type(element: ColumnType, dims: int) -> ColumnType:
    """An array column of ``dims`` declared dimensions (contract C2: nested ARRAYs).

    A value whose dimensions differ from the declared ones, or with lower bounds other than 1
    (text starting ``[lo:hi]=``), has no faithful nested-list form: :class:`Unrepresentable`.
    An element without one makes the whole array unrepresentable.
    """
    convert_element = element.convert
    delimiter = ";" if element.type_name == "box" else ","  # pg_type.typdelim
    type_name = f"{element.type_name}{'[]' * dims}"
    schema = cs.with_optional(element.schema)
    for _ in range(dims - 1):
        schema = cs.array(schema)  # sub-arrays are never NULL in PostgreSQL
    schema = cs.array(schema)

    def walk(items: list[Any], depth: int) -> list[Any]:
        out: list[Any] = []
        for item in items:
            nested = item.__class__ is list
            if nested != (depth < dims):
                raise Unrepresentable(
                    f"{type_name} value has {'more' if nested else 'fewer'} dimensions than "
                    f"the {dims} the column declares (pg_attribute.attndims)"
                )
            if nested:
                out.append(walk(item, depth + 1))
            elif item is None:
                out.append(None)
            else:
                try:
                    out.append(convert_element(item))
                except Unrepresentable as exc:
                    raise Unrepresentable(f"{type_name} element {item}: {exc.reason}") from None
        return out

    def convert_array(text: str) -> list[Any]:
        if text[0] == "[":
            raise Unrepresentable(
                f"{type_name} value has lower bounds other than 1 ({text.partition('=')[0]}), "
                "which a Connect ARRAY cannot carry"
            )
        return walk(parse_array(text, delimiter), 1)

    return ColumnType(schema, convert_array, type_name)


def _scalar(name: str, typmod: int, handling: ValueHandling) -> ColumnType:  # noqa: C901
    if name == "bool":
        return ColumnType(cs.primitive("boolean"), lambda t: t == "t", name)
    if name in ("int2", "int4", "int8", "oid"):
        connect = {"int2": "int16", "int4": "int32", "int8": "int64", "oid": "int64"}[name]
        return ColumnType(cs.primitive(connect), int, name)
    if name in ("float4", "float8"):
        connect = "float32" if name == "float4" else "float64"
        return ColumnType(cs.primitive(connect), _pg_float, name)
    if name == "numeric":
        ps = _numeric_scale(typmod)
        return _decimal_type(
            name, handling, None if ps is None else ps[1], None if ps is None else ps[0],
            _parse_decimal,
        )  # fmt: skip
    if name == "money":
        digits = handling.money_fraction_digits
        return _decimal_type(name, handling, digits, None, lambda t: _money(t, digits))
    if name in ("date", "time", "timestamp"):
        return _temporal(name, typmod, handling)
    if name == "timestamptz":
        return ColumnType(cs.zoned_timestamp(), _zoned_timestamp, name)
    if name == "timetz":
        return ColumnType(cs.zoned_time(), _zoned_time, name)
    if name == "interval":
        if handling.interval == "string":
            return ColumnType(cs.interval(), _interval_string, name)
        return ColumnType(cs.micro_duration(), _interval_micros, name)
    if name == "bytea":
        return _binary(handling)
    if name in ("json", "jsonb"):
        return ColumnType(cs.json(), str, name)
    if name == "xml":
        return ColumnType(cs.xml(), str, name)
    if name == "uuid":
        return ColumnType(cs.uuid(), str, name)
    if name == "ltree":
        return ColumnType(cs.logical("string", "io.debezium.data.Ltree"), str, name)
    if name == "hstore":
        if handling.hstore == "map":
            return ColumnType(cs.map_schema("string", cs.primitive("string", optional=True)),
                              parse_hstore, name)  # fmt: skip
        return ColumnType(cs.json(), lambda t: orjson.dumps(parse_hstore(t)).decode(), name)
    if name == "bit" and typmod == 1:
        return ColumnType(cs.primitive("boolean"), lambda t: t == "1", name)
    if name == "bit":
        length = typmod if typmod > 0 else 2**31 - 1
        return ColumnType(
            cs.bits(length), lambda t: b64(_bits_little_endian(t)), name, is_binary=True
        )
    if name == "varbit":
        # Debezium's Bits drops leading zero bits, so B'0010' and B'10' would be one value;
        # the 0/1 text keeps every bit and the length (docs/types.md).
        return ColumnType(cs.primitive("string"), _varbit, name)
    if name == "point":
        return ColumnType(cs.point(), _point, name)
    if name in _STRING_TYPES:
        return _text(name)
    return _unknown(name)
