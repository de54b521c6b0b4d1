"""PostgreSQL column types -> Debezium Connect schemas and values.

Every value arrives as the text the type's output function writes: pgoutput sends text tuples,
and the snapshot reads rows as text too, so one converter serves both and a row read by the
snapshot is byte-for-byte the row the stream would have sent. The agent pins the session
settings that shape that text (``TimeZone=UTC``, ``DateStyle=ISO``, ``IntervalStyle=iso_8601``,
``bytea_output=hex``, ``extra_float_digits=3``, ``lc_monetary=C``; see
:data:`SESSION_SETTINGS`), on the replication connection as on the snapshot connection.

Mappings follow the Debezium 1.2 guide §2.2 (``shared/spec/debezium-guide-1.2.md``):

* ``bool``, ``bit(1)`` -> BOOLEAN; ``bit(n>1)``, ``varbit`` -> ``io.debezium.data.Bits``.
* ``int2/int4/int8`` -> INT16/INT32/INT64, ``oid`` -> INT64, ``float4/float8`` -> FLOAT32/64.
* ``numeric``: ``decimal.handling.mode`` ``precise`` (Connect ``Decimal`` with its scale, or
  ``VariableScaleDecimal`` when the column declares none), ``double`` or ``string``; ``money``
  likewise, with 2 fraction digits.
* character types, ``citext``, ``inet``, ``cidr``, ``macaddr(8)``, ranges, ``tsvector`` and the
  non-point geometric types -> STRING.
* ``date``/``time``/``timestamp`` per ``time.precision.mode``; ``timetz`` -> ``ZonedTime``,
  ``timestamptz`` -> ``ZonedTimestamp`` (UTC).
* ``interval`` -> ``MicroDuration`` (365.25/12 days per month) or ``Interval`` text.
* ``bytea`` per ``binary.handling.mode``; ``json(b)`` -> ``Json``; ``xml`` -> ``Xml``;
  ``uuid`` -> ``Uuid``; ``ltree`` -> ``Ltree``; enums -> ``Enum`` with ``allowed``;
  ``hstore`` -> ``Json`` text or a MAP (``hstore.handling.mode``); ``point`` -> ``Point``;
  arrays -> ARRAY of the element's mapping; domains -> their base type.

A type not in this list is captured as its text with a warning (once per type), never dropped and
never a crash. An unparsable value of a known type raises :class:`ValueConversionError`, which
the agent reports with the table and column.
"""

from __future__ import annotations

import base64
import logging
import re
import struct
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any, Final

import orjson

from bronze import connect_schema as cs
from pipeline.errors import CaptureError

__all__ = [
    "SESSION_SETTINGS",
    "PgType",
    "ValueHandling",
    "ColumnType",
    "ValueConversionError",
    "TypeLookup",
    "column_type",
    "parse_array",
    "parse_hstore",
    "decimal_bytes",
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


class ValueConversionError(CaptureError):
    """A column value does not parse as its declared type."""


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
    """The source's value-handling modes (from :class:`pipeline.config.PostgresSourceConfig`)."""

    decimal: str = "precise"
    time_precision: str = "adaptive"
    binary: str = "bytes"
    hstore: str = "json"
    interval: str = "numeric"
    money_fraction_digits: int = 2

    @classmethod
    def from_config(cls, config: Any) -> ValueHandling:
        """Read the modes off a source config (missing attributes keep their defaults)."""
        return cls(
            decimal=str(getattr(config, "decimal_handling_mode", "precise")),
            time_precision=str(getattr(config, "time_precision_mode", "adaptive")),
            binary=str(getattr(config, "binary_handling_mode", "bytes")),
            hstore=str(getattr(config, "hstore_handling_mode", "json")),
            interval=str(getattr(config, "interval_handling_mode", "numeric")),
        )


@dataclass(frozen=True, slots=True)
class ColumnType:
    """How one column is represented in Debezium records.

    Attributes:
        schema: The Connect schema of the column, required (``optional`` False); use
            :meth:`field_schema` for a struct field.
        convert: Text value -> JSON-ready Debezium value.
        type_name: The PostgreSQL type name (for messages).
        is_binary: The Connect type is BYTES (the TOAST placeholder must then be bytes too).
    """

    schema: dict[str, Any]
    convert: Callable[[str], Any]
    type_name: str
    is_binary: bool = False
    known: bool = field(default=True)

    def field_schema(self, name: str, optional: bool) -> dict[str, Any]:
        """The struct field for a column called ``name``."""
        return cs.field(name, self.schema, optional=optional)


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
    1561: BIT, 1563: VARBIT, 1231: NUMERIC, 2951: UUID, 3807: JSONB,
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


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _unscaled_bytes(unscaled: int) -> bytes:
    # Java BigInteger.toByteArray(): minimal two's complement, big-endian.
    bits = unscaled.bit_length() if unscaled >= 0 else (~unscaled).bit_length()
    return unscaled.to_bytes(bits // 8 + 1, "big", signed=True)


def decimal_bytes(value: Decimal, scale: int) -> str:
    """Connect ``Decimal`` JSON value: base64 of the unscaled value at ``scale``.

    Exact for any number of digits: the default decimal context (28 digits) would round
    ``NUMERIC`` values that PostgreSQL holds exactly (up to 131072 digits before the point).

    >>> decimal_bytes(Decimal("1.50"), 2)
    'AJY='
    >>> wide = Decimal("-12345678901234567890123456789012345678901234.5678")
    >>> int.from_bytes(base64.b64decode(decimal_bytes(wide, 4)), "big", signed=True)
    -123456789012345678901234567890123456789012345678
    """
    with localcontext() as context:
        context.prec = max(context.prec, len(value.as_tuple().digits) + abs(scale) + 1)
        unscaled = int(value.scaleb(scale).to_integral_value())
    return _b64(_unscaled_bytes(unscaled))


def _days_from_civil(year: int, month: int, day: int) -> int:
    # Howard Hinnant's days_from_civil: proleptic Gregorian, any year (astronomical numbering).
    year -= month <= 2
    era = (year if year >= 0 else year - 399) // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def _civil_from_days(days: int) -> tuple[int, int, int]:
    days += 719468
    era = (days if days >= 0 else days - 146096) // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


_DATE_RE = re.compile(r"(\d{4,})-(\d\d)-(\d\d)")
_TIME_RE = re.compile(r"(\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_OFFSET_RE = re.compile(r"([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?$")
_US_PER_DAY = 86_400_000_000


def _parse_date(text: str) -> int:
    bc = text.endswith(" BC")
    m = _DATE_RE.fullmatch(text[:-3] if bc else text)
    if m is None:
        raise ValueError(f"not an ISO date: {text!r}")
    year = int(m.group(1))
    if bc:
        year = 1 - year
    return _days_from_civil(year, int(m.group(2)), int(m.group(3)))


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
    bc = text.endswith(" BC")
    body = text[:-3] if bc else text
    date_part, _, time_part = body.partition(" ")
    days = _parse_date(date_part + (" BC" if bc else ""))
    return days * _US_PER_DAY + _time_micros(time_part)


def _iso_fraction(micros: int) -> str:
    # java.time's ISO formatters print the fraction in groups of three digits.
    if micros == 0:
        return ""
    if micros % 1000 == 0:
        return f".{micros // 1000:03d}"
    return f".{micros:06d}"


def _format_utc(epoch_micros: int) -> str:
    days, rest = divmod(epoch_micros, _US_PER_DAY)
    y, mo, d = _civil_from_days(days)
    seconds, micros = divmod(rest, 1_000_000)
    hh, rem = divmod(seconds, 3600)
    mm, ss = divmod(rem, 60)
    year = f"{y:04d}" if 0 <= y <= 9999 else f"{y:+05d}"
    return f"{year}-{mo:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}{_iso_fraction(micros)}Z"


def _zoned_timestamp(text: str) -> str | None:
    if text in ("infinity", "-infinity"):
        return None
    bc = text.endswith(" BC")
    body = text[:-3] if bc else text
    local, offset = _split_offset(body)
    return _format_utc(_timestamp_micros(local + (" BC" if bc else "")) - offset * 1_000_000)


def _zoned_time(text: str) -> str:
    local, offset = _split_offset(text)
    micros = (_time_micros(local) - offset * 1_000_000) % _US_PER_DAY
    seconds, frac = divmod(micros, 1_000_000)
    hh, rem = divmod(seconds, 3600)
    mm, ss = divmod(rem, 60)
    return f"{hh:02d}:{mm:02d}:{ss:02d}{_iso_fraction(frac)}Z"


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
    return (
        (y * 12 + mo) * _MICROS_PER_MONTH
        + d * _US_PER_DAY
        + (h * 3600 + mi * 60) * 1_000_000
        + int(s * 1_000_000)
    )


def _interval_string(text: str) -> str:
    y, mo, d, h, mi, s = _interval_parts(text)
    sec = format(s.normalize(), "f") if s else "0"
    return f"P{y}Y{mo}M{d}DT{h}H{mi}M{sec}S"


def parse_array(text: str) -> list[Any]:
    """Parse a PostgreSQL array literal (``{1,NULL,"a b"}``) into nested lists of str/None.

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
                while text[pos] not in ",}":
                    pos += 1
                raw = text[start:pos].strip()
                items.append(None if raw == "NULL" else raw)
            if text[pos] == ",":
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
    return {"x": x, "y": y, "wkb": _b64(struct.pack("<BIdd", 1, 1, x, y)), "srid": None}


def _bytea(text: str) -> bytes:
    if not text.startswith("\\x"):
        raise ValueError("bytea value is not in hex format (bytea_output=hex)")
    return bytes.fromhex(text[2:])


# --- the mapping --------------------------------------------------------------------------------


def _numeric_scale(typmod: int) -> tuple[int, int] | None:
    if typmod < 4:
        return None
    return ((typmod - 4) >> 16) & 0xFFFF, (typmod - 4) & 0xFFFF


def _decimal_type(name: str, handling: ValueHandling, scale: int | None, precision: int | None,
                  parse: Callable[[str], Decimal]) -> ColumnType:  # fmt: skip
    mode = handling.decimal
    if mode == "double":

        def to_double(text: str) -> float:
            return float(parse(text))

        return ColumnType(cs.primitive("float64"), to_double, name)
    if mode == "string":

        def to_string(text: str) -> str:
            if text == "NaN":
                return "NAN"
            return format(parse(text), "f")

        return ColumnType(cs.primitive("string"), to_string, name)
    if scale is None:

        def to_variable(text: str) -> Any:
            value = parse(text)
            if not value.is_finite():
                return None
            exponent = value.as_tuple().exponent
            s = max(0, -exponent) if isinstance(exponent, int) else 0
            return {"scale": s, "value": decimal_bytes(value, s)}

        return ColumnType(cs.variable_scale_decimal(), to_variable, name)
    fixed = scale

    def to_decimal(text: str) -> Any:
        value = parse(text)
        if not value.is_finite():
            return None  # Connect Decimal cannot carry NaN
        return decimal_bytes(value, fixed)

    return ColumnType(cs.decimal(fixed, precision=precision), to_decimal, name, is_binary=True)


def _parse_decimal(text: str) -> Decimal:
    try:
        return Decimal(text)
    except InvalidOperation:
        raise ValueError(f"not a number: {text!r}") from None


def _temporal(name: str, typmod: int, handling: ValueHandling) -> ColumnType:
    mode = handling.time_precision
    if name == "date":
        schema = cs.connect_date() if mode == "connect" else cs.date()
        return ColumnType(schema, _parse_date, name)
    precision = 6 if typmod < 0 else typmod
    if name == "time":
        if mode == "connect" or (mode == "adaptive" and precision <= 3):
            schema = cs.connect_time() if mode == "connect" else cs.time_millis()
            return ColumnType(schema, lambda t: _time_micros(t) // 1000, name)
        return ColumnType(cs.micro_time(), _time_micros, name)

    # timestamp
    def infinite_none(convert: Callable[[str], int]) -> Callable[[str], int | None]:
        def wrapped(text: str) -> int | None:
            if text in ("infinity", "-infinity"):
                return None
            return convert(text)

        return wrapped

    if mode == "connect" or precision <= 3:
        schema = cs.connect_timestamp() if mode == "connect" else cs.timestamp_millis()
        return ColumnType(schema, infinite_none(lambda t: _timestamp_micros(t) // 1000), name)
    return ColumnType(cs.micro_timestamp(), infinite_none(_timestamp_micros), name)


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
        return ColumnType(cs.primitive("string"), lambda t: _b64(_bytea(t)), "bytea")
    return ColumnType(cs.primitive("bytes"), lambda t: _b64(_bytea(t)), "bytea", is_binary=True)


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
) -> ColumnType:
    """The Debezium representation of a column of type ``type_oid`` (modifier ``typmod``).

    Args:
        type_oid: The column's type OID (from a Relation message or ``pg_attribute``).
        typmod: The type modifier (``atttypmod``; -1 when none).
        handling: The source's value-handling modes.
        lookup: Finds non-builtin types (enums, domains, extensions, arrays of them) in
            ``pg_type``; without it such types are captured as text.

    Returns:
        Schema and converter of the column. Unknown types become text with a warning.
    """
    info = lookup(type_oid) if lookup is not None and type_oid not in _BUILTIN_NAMES else None
    name = _BUILTIN_NAMES.get(type_oid) or (info.name if info is not None else f"oid:{type_oid}")
    if info is not None and info.typtype == "d" and info.base_oid:
        return column_type(
            info.base_oid, typmod if typmod >= 0 else info.base_typmod, handling, lookup
        )
    element_oid = _BUILTIN_ARRAYS.get(type_oid)
    if element_oid is None and info is not None and info.is_array and info.element_oid:
        element_oid = info.element_oid
    if element_oid is not None:
        element = column_type(element_oid, typmod, handling, lookup)
        convert_element = element.convert

        def convert_array(text: str) -> list[Any]:
            def walk(items: list[Any]) -> list[Any]:
                return [
                    None if i is None else walk(i) if isinstance(i, list) else convert_element(i)
                    for i in items
                ]

            return walk(parse_array(text))

        return ColumnType(
            cs.array(cs.with_optional(element.schema)), convert_array, f"{element.type_name}[]"
        )
    if info is not None and info.typtype == "e":
        return ColumnType(cs.enum(info.enum_labels), str, name)
    return _scalar(name, typmod, handling)


def _scalar(name: str, typmod: int, handling: ValueHandling) -> ColumnType:  # noqa: C901
    if name == "bool":
        return ColumnType(cs.primitive("boolean"), lambda t: t == "t", name)
    if name in ("int2", "int4", "int8", "oid"):
        connect = {"int2": "int16", "int4": "int32", "int8": "int64", "oid": "int64"}[name]
        return ColumnType(cs.primitive(connect), int, name)
    if name in ("float4", "float8"):
        return ColumnType(cs.primitive("float32" if name == "float4" else "float64"), float, name)
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
    if name in ("bit", "varbit"):
        length = typmod if typmod > 0 else 2**31 - 1
        return ColumnType(
            cs.bits(length), lambda t: _b64(_bits_little_endian(t)), name, is_binary=True
        )
    if name == "point":
        return ColumnType(cs.point(), _point, name)
    if name in _STRING_TYPES:
        return _text(name)
    return _unknown(name)
