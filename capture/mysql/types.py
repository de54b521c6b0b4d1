"""MySQL/MariaDB column types -> Debezium Connect schemas and values.

A MySQL row reaches the agent along two roads that disagree on almost every type: a snapshot
``SELECT`` through PyMySQL (the server's *text* protocol, converted by PyMySQL) and a binlog row
event decoded by mysql-replication (the server's *binary* row format). This module makes them
agree. :func:`snapshot_values` and :func:`stream_values` turn a row from either road into the same
Python values (undoing the library's quirks, applying Debezium's zero-date rule), and the
converter of :func:`column_type` turns such a value into the Debezium JSON value. The converters
accept every form either driver produces, so the agent can call them on values from either
road directly; the two ``*_values`` functions only repair what a converter cannot tell from
the value alone (nullability, ``none_sources`` reasons, path-specific decoding bugs).

Mappings (Debezium MySQL connector 2.x, ``shared/spec/mysql-and-sqlserver.md`` §1.7):

* ``tinyint``/``smallint`` -> INT16, ``mediumint``/``int`` -> INT32, ``bigint`` -> INT64;
  ``UNSIGNED`` widens one step (``tinyint`` INT16, ``smallint``/``mediumint`` INT32, ``int``
  INT64) and ``bigint unsigned`` is ``Decimal`` scale 0, precision 20
  (``bigint.unsigned.handling.mode=precise``, our default: exact up to 18446744073709551615) or
  INT64 (``long``, Debezium's default: values above 2^63-1 wrap to negative, as Java's
  ``long`` does; lossy). ``tinyint(1)``/``bool`` stay INT16: a snapshot sees ``TINYINT(1)`` and the
  binlog sees ``TINY``, and only Debezium's opt-in ``TinyIntOneToBooleanConverter`` turns them
  into BOOLEAN, so INT16 is what both roads give without it.
* ``bit(1)`` -> BOOLEAN; ``bit(n)`` -> ``io.debezium.data.Bits`` (``length`` n), little-endian,
  ``(n+7)//8`` bytes.
* ``float`` -> FLOAT32 (``float(p)`` with p > 23 -> FLOAT64), ``double`` -> FLOAT64. The server's
  text protocol prints a FLOAT with 6 significant digits (``FLT_DIG``; ``float(m,d)`` with ``d``
  decimals, ``double(m,d)`` likewise), so a snapshot can never see more than that. The binlog's
  exact value is rounded the same way (``'%.6g'`` of the float32, which is what the server's
  ``my_gcvt`` produces, ties to even included) so both roads give the same JSON number, e.g.
  ``1.23457`` for a stored ``1.2345678``. Debezium keeps the binlog's extra digits and so
  disagrees with its own snapshot; we prefer agreement.
* ``decimal``: ``precise`` -> Connect ``Decimal`` (``scale``, ``connect.decimal.precision``),
  ``double`` -> FLOAT64, ``string`` -> plain text at the column's scale.
* ``char``/``varchar``/``*text`` -> STRING decoded with the column's charset (else the table's,
  else utf8mb4); ``enum`` -> ``io.debezium.data.Enum``; ``set`` -> ``io.debezium.data.EnumSet``,
  the members comma-joined in definition order (``""`` for the empty set); ``json`` ->
  ``io.debezium.data.Json``: MariaDB's JSON is ``longtext`` and arrives as the text stored.
  MySQL's binary JSON arrives from mysql-replication as Python objects (with ``bytes`` keys and
  strings); they are serialised the way MySQL prints JSON (``{"a": [1, 2]}``, members in stored
  order), so the text matches a snapshot's; DECIMAL members become JSON doubles. That path is
  not exercised by the tests: no MySQL server runs on these machines.
* MariaDB ``uuid``/``inet4``/``inet6`` -> STRING in the server's text form (the binlog carries
  the stored bytes, which :func:`stream_values` formats as MariaDB prints them).
* ``binary``/``varbinary``/``*blob`` (and text types with ``CHARACTER SET binary``) -> BYTES per
  ``binary.handling.mode`` (``bytes``: base64 in JSON; ``base64``, ``base64-url-safe``, ``hex``:
  STRING). ``binary(n)`` is always n bytes: the server pads with 0x00 and a SELECT returns the
  padding, but the binlog drops trailing 0x00 bytes, so the converter pads to n.
* ``date`` -> ``io.debezium.time.Date`` (days); ``time`` -> ``MicroTime`` (µs) under
  ``adaptive_time_microseconds``, ``Time`` (ms) for ``time(0..3)`` / ``MicroTime`` for
  ``time(4..6)`` under ``adaptive``, Connect ``Time`` (ms) under ``connect``. A TIME is a signed
  duration (``-838:59:59`` .. ``838:59:59``): the value is its signed total length, so negative
  and > 24 h values come out as they are stored (Debezium's ``Duration`` arithmetic does the
  same; only 00:00..23:59:59.999999 is a time of day, as Debezium's documentation warns).
  Milliseconds are floored. ``datetime`` -> ``Timestamp`` (ms, ``datetime(0..3)``) or
  ``MicroTimestamp`` (µs, ``datetime(4..6)``), the wall clock read as UTC; Connect
  ``Timestamp`` (ms) under ``connect``. ``timestamp`` -> ``io.debezium.time.ZonedTimestamp``:
  ISO-8601 in UTC with ``Z``, formatted exactly like PostgreSQL ``timestamptz``
  (:mod:`capture.column_types`). ``year`` -> ``io.debezium.time.Year``.
* Zero and invalid dates (``0000-00-00``, a zero month or day, ``2020-02-30`` under
  ``ALLOW_INVALID_DATES``, the zero ``TIMESTAMP``) have no representation: null plus the
  server's text in the record's ``__medallion.unrepresentable`` header (contract C1), in
  nullable and NOT NULL columns alike (Debezium writes null or the epoch, which is a real date).
  The binlog road reads their text too (:func:`install_binlog_date_readers`). A real date of
  year 0 (``0000-01-01``) is day -719528, proleptic Gregorian as Debezium's.
* Spatial types -> ``io.debezium.data.geometry.Geometry`` ``{wkb, srid}``, split from MySQL's
  internal format (4-byte little-endian SRID, then WKB), which both roads return.

Any other type makes :func:`column_type` raise :class:`ValueConversionError`.

What mysql-replication 1.0.17 gets wrong or loses, checked against MariaDB 10.11 (and undone by
:func:`stream_values`, the converters or :func:`install_binlog_date_readers`): an empty SET is
None (reason ``'empty set'``); zero and invalid dates are None (their text lost) or raise; the
zero TIMESTAMP is ``datetime(1970, 1, 1)``; YEAR 0000 is 1900; a
negative TIME with a fraction F comes back with fraction 1 - F; BINARY(n), UUID, INET4 and INET6
lose their trailing 0x00 bytes (an all-zero INET6 comes back as ``''``); UUID/INET values are
bytes where a SELECT gives text; utf16/utf32 text is decoded little-endian; ucs2 text is left as
bytes; BIT is a string of ``0``/``1``; without ``binlog_row_metadata=FULL`` it returns signed
readings of UNSIGNED columns and None for every ENUM and SET value (the last is not repairable).
"""

from __future__ import annotations

import base64
import codecs
import datetime as dt
import importlib.metadata
import ipaddress
import json
import re
import struct
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation, localcontext
from typing import Any, Final

import pymysql.converters
from pymysql.constants import FIELD_TYPE

from bronze import connect_schema as cs
from capture.captured_table import ColumnDefault
from capture.column_types import (
    US_PER_DAY,
    ColumnType,
    Unrepresentable,
    ValueConversionError,
    b64,
    days_from_civil,
    decimal_bytes,
    format_utc,
    json_float,
)
from capture.mysql.ddl import tokenize
from capture.mysql.schema import ColumnDef, TableDef
from pipeline.errors import CaptureError, InternalError

__all__ = [
    "binlog_date",
    "binlog_datetime2",
    "SNAPSHOT_SESSION_SQL",
    "column_default",
    "install_binlog_date_readers",
    "MySqlHandling",
    "Unrepresentable",
    "ValueConversionError",
    "column_type",
    "snapshot_column",
    "snapshot_connect_kwargs",
    "snapshot_values",
    "stream_fixes",
    "stream_row",
    "stream_values",
]

SNAPSHOT_SESSION_SQL: Final[tuple[str, ...]] = (
    # TIMESTAMP values are read in UTC, like the binlog's epoch seconds.
    "SET time_zone = '+00:00'",
    # Clears PAD_CHAR_TO_FULL_LENGTH (CHAR values without their trailing spaces, like the
    # binlog). Also clears ANSI_QUOTES: the agent quotes identifiers with backticks.
    "SET SESSION sql_mode = ''",
)
"""Statements the agent runs on its snapshot connection before reading rows."""

_MODES: Final[Mapping[str, tuple[str, ...]]] = {
    "decimal": ("precise", "double", "string"),
    "time_precision": ("adaptive", "adaptive_time_microseconds", "connect"),
    "bigint_unsigned": ("long", "precise"),
    "binary": ("bytes", "base64", "base64-url-safe", "hex"),
}


@dataclass(frozen=True, slots=True)
class MySqlHandling:
    """The MySQL source's value-handling modes (from its
    :class:`capture.mysql.config.MySqlSourceConfig`).

    Attributes:
        decimal: ``decimal.handling.mode``: ``precise``, ``double`` or ``string``.
        time_precision: ``time.precision.mode``: ``adaptive``, ``adaptive_time_microseconds``
            or ``connect``.
        bigint_unsigned: ``bigint.unsigned.handling.mode``: ``long`` or ``precise``.
        binary: ``binary.handling.mode``: ``bytes``, ``base64``, ``base64-url-safe`` or ``hex``.
    """

    decimal: str = "precise"
    time_precision: str = "adaptive_time_microseconds"
    bigint_unsigned: str = "precise"
    binary: str = "bytes"

    def __post_init__(self) -> None:
        for attribute, allowed in _MODES.items():
            value = getattr(self, attribute)
            if value not in allowed:
                raise ValueError(f"{attribute} handling mode {value!r} is not one of {allowed}")

    @classmethod
    def from_config(cls, config: Any) -> MySqlHandling:
        """Read the modes off a source config (missing attributes keep their defaults)."""
        return cls(
            decimal=str(getattr(config, "decimal_handling_mode", "precise")),
            time_precision=str(
                getattr(config, "time_precision_mode", "adaptive_time_microseconds")
            ),
            bigint_unsigned=str(getattr(config, "bigint_unsigned_handling_mode", "precise")),
            binary=str(getattr(config, "binary_handling_mode", "bytes")),
        )


# --- type names -----------------------------------------------------------------------------------

_ALIASES: Final[Mapping[str, str]] = {
    "int1": "tinyint", "int2": "smallint", "int3": "mediumint", "middleint": "mediumint",
    "int4": "int", "integer": "int", "int8": "bigint", "bool": "tinyint", "boolean": "tinyint",
    "float4": "float", "float8": "double", "real": "double", "double precision": "double",
    "dec": "decimal", "numeric": "decimal", "fixed": "decimal", "character": "char",
    "nchar": "char", "national char": "char", "nvarchar": "varchar",
    "national varchar": "varchar", "character varying": "varchar", "long varchar": "mediumtext",
    "long": "mediumtext", "long varbinary": "mediumblob",
}  # fmt: skip
"""MySQL's own synonyms, in case a definition was not normalised by the DDL parser."""

_INT_BITS: Final[Mapping[str, int]] = {
    "tinyint": 8, "smallint": 16, "mediumint": 24, "int": 32, "bigint": 64,
}  # fmt: skip
_TEXT_TYPES: Final = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext"})
_BINARY_TYPES: Final = frozenset(
    {"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"}
)
_GEOMETRY_TYPES: Final = frozenset(
    {
        "geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
        "multipolygon", "geometrycollection", "geomcollection",
    }
)  # fmt: skip
_DATE_TYPES: Final = frozenset({"date", "datetime", "timestamp"})
_FIXED_BINARY_LENGTH: Final[Mapping[str, int]] = {"uuid": 16, "inet6": 16, "inet4": 4}


def _base_type(column: ColumnDef, table_charset: str | None = None) -> str:
    """The column's type after MySQL's synonym rules, ``CHARACTER SET binary`` made binary."""
    name = _ALIASES.get(column.type_name.lower(), column.type_name.lower())
    if name in _TEXT_TYPES and _charset(column, table_charset) == "binary":
        # CHAR(n) CHARACTER SET binary *is* BINARY(n) (the server rewrites it so).
        return {"char": "binary", "varchar": "varbinary"}.get(name, name.replace("text", "blob"))
    return name


# --- charsets -------------------------------------------------------------------------------------

_CODECS: Final[Mapping[str, str]] = {
    "utf8mb4": "utf-8", "utf8mb3": "utf-8", "utf8": "utf-8", "ascii": "ascii",
    "latin2": "iso8859-2", "latin5": "iso8859-9", "latin7": "iso8859-13", "greek": "iso8859-7",
    "hebrew": "iso8859-8", "ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le",
    "utf32": "utf-32-be", "koi8r": "koi8-r", "koi8u": "koi8-u", "sjis": "shift_jis",
    "ujis": "euc_jp", "eucjpms": "euc_jp", "euckr": "euc_kr", "tis620": "tis-620",
    "macroman": "mac_roman", "macce": "mac_latin2",
}  # fmt: skip
"""MySQL character sets whose Python codec has another name (the rest share the name)."""

# MySQL's latin1 is cp1252 with its five undefined bytes mapped to the same code points.
_LATIN1_TABLE: Final = "".join(
    chr(b) if b in (0x81, 0x8D, 0x8F, 0x90, 0x9D) else bytes([b]).decode("cp1252")
    for b in range(256)
)

# mysql-replication decodes these with Python's BOM-sniffing "utf16"/"utf32" codecs, which read
# little-endian without a BOM; MySQL's utf16/utf32 are big-endian. Re-encoding undoes it.
_LIBRARY_MISDECODED: Final[Mapping[str, str]] = {"utf16": "utf-16-le", "utf32": "utf-32-le"}


def _charset(column: ColumnDef, table_charset: str | None) -> str:
    return (column.charset or table_charset or "utf8mb4").lower()


def _decoder(charset: str) -> Callable[[bytes], str]:
    if charset == "latin1":
        return lambda data: codecs.charmap_decode(data, "strict", _LATIN1_TABLE)[0]
    codec = _CODECS.get(charset, charset)
    try:
        codecs.lookup(codec)
    except LookupError:
        raise ValueConversionError(f"character set {charset!r} has no Python codec") from None
    return lambda data: data.decode(codec)


# --- value helpers ------------------------------------------------------------------------------


def _as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        # mysql-replication decodes binary strings with UTF-8 when it lacks charset metadata.
        return value.encode("utf-8")
    return bytes(value)


def _bit_value(value: Any) -> int:
    if isinstance(value, (bytes, bytearray)):
        return int.from_bytes(value, "big")  # a SELECT: the big-endian bytes
    if isinstance(value, str):
        return int(value, 2)  # mysql-replication: the bits as "0101..."
    return int(value)


def _float32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


_DATETIME_RE = re.compile(r"(\d{4})-(\d\d)-(\d\d)(?:[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,6}))?)?")
_TIME_RE = re.compile(r"(-)?(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")
_EPOCH: Final = dt.datetime(1970, 1, 1)


def _parse_datetime(text: str) -> dt.datetime | None:
    """A DATE/DATETIME/TIMESTAMP as the server prints it; None for a zero or invalid date (and
    year 0, which Python's datetime cannot hold): those stay text (:func:`_text_micros`)."""
    m = _DATETIME_RE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not a MySQL date/time: {text!r}")
    y, mo, d, hh, mi, ss = (int(g or 0) for g in m.groups()[:6])
    try:
        return dt.datetime(y, mo, d, hh, mi, ss, int((m.group(7) or "").ljust(6, "0") or 0))
    except ValueError:
        return None


def _days_in_month(year: int, month: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def _text_micros(text: str) -> int:
    """Microseconds of a date/time the server printed that Python's datetime cannot build: a
    real date of year 0 (proleptic, as Debezium), or a zero/invalid date (``0000-00-00``,
    ``2020-00-15``, ``2020-02-30`` under ``ALLOW_INVALID_DATES``), which no date type holds."""
    m = _DATETIME_RE.fullmatch(text.strip())
    if m is None:
        raise ValueError(f"not a MySQL date/time: {text!r}")
    y, mo, d, hh, mi, ss = (int(g or 0) for g in m.groups()[:6])
    if 1 <= mo <= 12 and 1 <= d <= _days_in_month(y, mo):
        seconds = hh * 3600 + mi * 60 + ss
        micros = int((m.group(7) or "").ljust(6, "0") or 0)
        return days_from_civil(y, mo, d) * US_PER_DAY + seconds * 1_000_000 + micros
    kind = "zero" if y == mo == d == 0 else "invalid"
    raise Unrepresentable(
        f"{kind} date {text}: no date or timestamp type holds it (MySQL zero dates are null "
        "with this reason, contract C1)",
        text,
    )


def _epoch_micros(value: Any) -> int:
    if isinstance(value, str):
        parsed = _parse_datetime(value)
        if parsed is None:
            return _text_micros(value)
        value = parsed
    if isinstance(value, dt.datetime):
        days = days_from_civil(value.year, value.month, value.day)
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        return days * US_PER_DAY + seconds * 1_000_000 + value.microsecond
    if isinstance(value, dt.date):
        return days_from_civil(value.year, value.month, value.day) * US_PER_DAY
    raise TypeError(f"not a date/time value: {value!r}")


def _time_micros(value: Any) -> int:
    if isinstance(value, dt.timedelta):
        return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
    if isinstance(value, str):
        m = _TIME_RE.fullmatch(value.strip())
        if m is None:
            raise ValueError(f"not a MySQL time: {value!r}")
        seconds = int(m.group(2)) * 3600 + int(m.group(3)) * 60 + int(m.group(4))
        micros = seconds * 1_000_000 + int((m.group(5) or "").ljust(6, "0") or 0)
        return -micros if m.group(1) else micros
    if isinstance(value, dt.time):
        seconds = value.hour * 3600 + value.minute * 60 + value.second
        return seconds * 1_000_000 + value.microsecond
    raise TypeError(f"not a TIME value: {value!r}")


def _json_ready(value: Any) -> Any:
    # MySQL binary JSON as mysql-replication returns it: bytes keys and strings.
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8")
    if isinstance(value, Mapping):
        return {_json_ready(k): _json_ready(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(v) for v in value]
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, (dt.date, dt.time, dt.timedelta)):
        return str(value)
    return value


def _inet6_text(data: bytes) -> str:
    """INET6 as MariaDB prints it.

    Unlike RFC 5952 (and :mod:`ipaddress`), MariaDB shortens the longest run of zero groups
    even when it is a single group (the first run on ties), and prints ``::a.b.c.d`` /
    ``::ffff:a.b.c.d`` when that run is exactly the first six / five groups (before ``ffff``).
    """
    words = struct.unpack(">8H", data)
    start, length = -1, 0
    i = 0
    while i < 8:
        j = i
        while j < 8 and words[j] == 0:
            j += 1
        if j - i > length:
            start, length = i, j - i
        i = max(j, i + 1)
    if start == 0 and (length == 6 or (length == 5 and words[5] == 0xFFFF)):
        return ("::" if length == 6 else "::ffff:") + str(ipaddress.IPv4Address(data[12:]))
    if length == 0:
        return ":".join(f"{w:x}" for w in words)
    head = ":".join(f"{w:x}" for w in words[:start])
    tail = ":".join(f"{w:x}" for w in words[start + length :])
    return f"{head}::{tail}"


# --- converters -----------------------------------------------------------------------------------


def _guarded(name: str, type_name: str, convert: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """Wrap ``convert`` so any failure is a ValueConversionError naming the column."""

    def run(value: Any) -> Any:
        try:
            return convert(value)
        except (ValueConversionError, Unrepresentable):
            raise
        except (ValueError, TypeError, ArithmeticError, UnicodeError, struct.error) as exc:
            raise ValueConversionError(
                f"column {name!r} ({type_name}): cannot convert {value!r}: {exc}"
            ) from exc

    return run


def _integer(column: ColumnDef, name: str, handling: MySqlHandling) -> ColumnType:
    bits = _INT_BITS[name]
    if not column.unsigned:
        connect = {8: "int16", 16: "int16", 24: "int32", 32: "int32", 64: "int64"}[bits]
        return ColumnType(cs.primitive(connect), int, name)
    modulus = 1 << bits

    def unsigned(value: Any) -> int:
        number = int(value)
        # A row event decoded without signedness metadata carries the signed reading.
        return number + modulus if number < 0 else number

    if bits < 64:
        connect = {8: "int16", 16: "int32", 24: "int32", 32: "int64"}[bits]
        return ColumnType(cs.primitive(connect), unsigned, name)
    if handling.bigint_unsigned == "precise":
        return ColumnType(
            cs.decimal(0, precision=20),
            lambda v: decimal_bytes(Decimal(unsigned(v)), 0),
            name,
            is_binary=True,
        )

    def wrapped(value: Any) -> int:
        # Debezium reads BIGINT UNSIGNED into a Java long: values >= 2^63 wrap to negative.
        number = unsigned(value)
        return number - modulus if number >= 1 << 63 else number

    return ColumnType(cs.primitive("int64"), wrapped, name)


def _bit(column: ColumnDef) -> ColumnType:
    length = column.length or 1
    if length == 1:
        return ColumnType(cs.primitive("boolean"), lambda v: _bit_value(v) != 0, "bit")
    size = (length + 7) // 8
    return ColumnType(
        cs.bits(length),
        lambda v: b64(_bit_value(v).to_bytes(size, "little")),
        "bit",
        is_binary=True,
    )


def _floating(column: ColumnDef, name: str) -> ColumnType:
    single = name == "float" and (column.scale is not None or (column.length or 0) <= 24)
    wide = name == "double" or (column.scale is None and (column.length or 0) > 23)
    schema = cs.primitive("float64" if wide else "float32")
    scale = column.scale

    def convert(value: Any) -> float | str:
        number = float(value)
        if number - number != 0.0:
            return json_float(number)  # the server rejects NaN/Infinity; never a silent null
        if single:
            number = _float32(number)
        if scale is not None:
            # float(m,d)/double(m,d): the server prints d decimals.
            return float(f"{number:.{scale}f}")
        if single:
            # FLOAT: the server prints FLT_DIG (6) significant digits.
            return float(f"{number:.6g}")
        return number

    return ColumnType(schema, convert, name)


def _decimal(column: ColumnDef, handling: MySqlHandling) -> ColumnType:
    scale = column.scale or 0
    precision = column.length or 10  # MySQL's DECIMAL is DECIMAL(10,0)
    quantum = Decimal(1).scaleb(-scale)

    def exact(value: Any) -> Decimal:
        number = value if isinstance(value, Decimal) else Decimal(str(value))
        with localcontext() as context:
            context.prec = max(context.prec, precision + scale + 2)
            number = number.quantize(quantum)
        return abs(number) if number.is_zero() else number

    if handling.decimal == "double":
        return ColumnType(cs.primitive("float64"), lambda v: float(exact(v)), "decimal")
    if handling.decimal == "string":
        return ColumnType(cs.primitive("string"), lambda v: format(exact(v), "f"), "decimal")
    return ColumnType(
        cs.decimal(scale, precision=precision),
        lambda v: decimal_bytes(exact(v), scale),
        "decimal",
        is_binary=True,
    )


def _text(decode: Callable[[bytes], str]) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        if isinstance(value, str):
            return value
        return decode(bytes(value))

    return convert


def _set(column: ColumnDef, decode: Callable[[bytes], str]) -> ColumnType:
    members = column.values

    def convert(value: Any) -> str:
        if isinstance(value, (bytes, bytearray)):
            value = decode(bytes(value))
        if isinstance(value, str):
            return value  # the server prints members in definition order
        if isinstance(value, int):
            return ",".join(m for i, m in enumerate(members) if value & (1 << i))
        chosen = set(value)
        return ",".join(m for m in members if m in chosen)

    return ColumnType(cs.enum_set(members), convert, "set")


def _enum(column: ColumnDef, decode: Callable[[bytes], str]) -> ColumnType:
    members = column.values
    text = _text(decode)

    def convert(value: Any) -> str:
        if isinstance(value, int):
            return members[value - 1] if value > 0 else ""  # 0: the invalid-value member ''
        return text(value)

    return ColumnType(cs.enum(members), convert, "enum")


def _json_type(decode: Callable[[bytes], str]) -> ColumnType:
    text = _text(decode)

    def convert(value: Any) -> str:
        if isinstance(value, (str, bytes, bytearray)):
            return text(value)
        # MySQL's own text form (what a SELECT returns): ", " and ": " separators, members in
        # stored order, non-ASCII as is.
        return json.dumps(_json_ready(value), separators=(", ", ": "), ensure_ascii=False)

    return ColumnType(cs.json(), convert, "json")


def _binary(name: str, column: ColumnDef, handling: MySqlHandling) -> ColumnType:
    pad_to = (column.length or 1) if name == "binary" else 0

    def raw(value: Any) -> bytes:
        data = _as_bytes(value)
        # The binlog drops BINARY(n)'s trailing 0x00 padding; a SELECT returns it.
        return data.ljust(pad_to, b"\x00") if len(data) < pad_to else data

    mode = handling.binary
    if mode == "hex":
        return ColumnType(cs.primitive("string"), lambda v: raw(v).hex(), name)
    if mode == "base64-url-safe":
        return ColumnType(
            cs.primitive("string"),
            lambda v: base64.urlsafe_b64encode(raw(v)).decode("ascii"),
            name,
        )
    if mode == "base64":
        return ColumnType(cs.primitive("string"), lambda v: b64(raw(v)), name)
    return ColumnType(cs.primitive("bytes"), lambda v: b64(raw(v)), name, is_binary=True)


def _mariadb_string(name: str) -> ColumnType:
    size = _FIXED_BINARY_LENGTH[name]

    def convert(value: Any) -> str:
        if isinstance(value, str):
            return value  # the server's text form (a SELECT, or stream_values)
        return _format_fixed(name, bytes(value), size)

    return ColumnType(cs.primitive("string"), convert, name)


def _format_fixed(name: str, data: bytes, size: int) -> str:
    # The binlog carries the 4/16 stored bytes with trailing 0x00 bytes dropped.
    data = data.ljust(size, b"\x00")
    if name == "uuid":
        return str(uuid.UUID(bytes=data))
    if name == "inet4":
        return str(ipaddress.IPv4Address(data))
    return _inet6_text(data)


def _temporal(column: ColumnDef, name: str, handling: MySqlHandling) -> ColumnType:
    mode = handling.time_precision
    precision = column.length or 0
    if name == "date":
        schema = cs.connect_date() if mode == "connect" else cs.date()
        return ColumnType(schema, lambda v: _epoch_micros(v) // US_PER_DAY, name)
    if name == "time":
        if mode == "connect" or (mode == "adaptive" and precision <= 3):
            schema = cs.connect_time() if mode == "connect" else cs.time_millis()
            return ColumnType(schema, lambda v: _time_micros(v) // 1000, name)
        return ColumnType(cs.micro_time(), _time_micros, name)
    if name == "timestamp":
        return ColumnType(cs.zoned_timestamp(), lambda v: format_utc(_epoch_micros(v)), name)
    if mode == "connect" or precision <= 3:
        schema = cs.connect_timestamp() if mode == "connect" else cs.timestamp_millis()
        return ColumnType(schema, lambda v: _epoch_micros(v) // 1000, name)
    return ColumnType(cs.micro_timestamp(), _epoch_micros, name)


def _year(value: Any) -> int:
    if isinstance(value, dt.date):
        return value.year
    return int(value)


def _geometry(value: Any) -> dict[str, Any]:
    data = _as_bytes(value)
    if len(data) < 5:
        raise ValueError("a spatial value is a 4-byte SRID followed by WKB")
    return {"wkb": b64(data[4:]), "srid": int.from_bytes(data[:4], "little")}


def column_type(  # noqa: C901 - one dispatch over MySQL's type list
    column: ColumnDef, table_charset: str | None, handling: MySqlHandling
) -> ColumnType:
    """The Debezium representation of a MySQL/MariaDB column.

    Args:
        column: The column definition (from the schema history).
        table_charset: The table's default character set, for text columns without their own.
        handling: The source's value-handling modes.

    Returns:
        The required (``optional`` False) Connect schema and a converter from the value either
        driver returns (after :func:`snapshot_values` / :func:`stream_values`) to the
        JSON-ready Debezium value. The converter is never called with None and raises
        :class:`ValueConversionError` naming the column when a value does not fit the type.

    Raises:
        ValueConversionError: The type has no mapping (the agent quarantines the table).
    """
    name = _base_type(column, table_charset)
    if name in _INT_BITS:
        result = _integer(column, name, handling)
    elif name == "bit":
        result = _bit(column)
    elif name in ("float", "double"):
        result = _floating(column, name)
    elif name == "decimal":
        result = _decimal(column, handling)
    elif name in _TEXT_TYPES:
        decode = _decoder(_charset(column, table_charset))
        result = ColumnType(cs.primitive("string"), _text(decode), name)
    elif name == "enum":
        result = _enum(column, _decoder(_charset(column, table_charset)))
    elif name == "set":
        result = _set(column, _decoder(_charset(column, table_charset)))
    elif name == "json":
        result = _json_type(_decoder(_charset(column, table_charset)))
    elif name in _BINARY_TYPES:
        result = _binary(name, column, handling)
    elif name in ("date", "time", "datetime", "timestamp"):
        result = _temporal(column, name, handling)
    elif name == "year":
        result = ColumnType(cs.year(), _year, name)
    elif name in _GEOMETRY_TYPES:
        result = ColumnType(cs.geometry(), _geometry, name)
    elif name in _FIXED_BINARY_LENGTH:
        result = _mariadb_string(name)
    else:
        raise ValueConversionError(
            f"column {column.name!r}: MySQL type {column.type_name!r} has no Debezium mapping"
        )
    return ColumnType(
        result.schema,
        _guarded(column.name, name, result.convert),
        result.type_name,
        is_binary=result.is_binary,
    )


# --- the two roads --------------------------------------------------------------------------------


def _zero_text(column: ColumnDef, name: str) -> str:
    """The zero value of a temporal column as the server prints it (``0000-00-00``,
    ``0000-00-00 00:00:00[.000000]`` with the column's fractional digits)."""
    if name == "date":
        return "0000-00-00"
    fsp = column.length or 0
    return "0000-00-00 00:00:00" + ("." + "0" * fsp if fsp else "")


def _raw_text(data: bytes | str) -> str:
    return data.decode("ascii") if isinstance(data, bytes) else data


def snapshot_connect_kwargs() -> dict[str, Any]:
    """Extra ``pymysql.connect`` keyword arguments for the snapshot connection.

    Text is utf8mb4 (the server converts each column's charset). DATE, DATETIME and TIMESTAMP
    come back as the server's text, which :func:`snapshot_values` parses, so zero and invalid
    dates are recognised exactly (PyMySQL's own converters return some of them as text and
    others as values). Every other type keeps PyMySQL's conversion (DECIMAL as ``Decimal``,
    TIME as ``timedelta`` with its sign, BIT and binary strings as ``bytes``).
    """
    conv = dict(pymysql.converters.conversions)
    for field_type in (FIELD_TYPE.DATE, FIELD_TYPE.NEWDATE, FIELD_TYPE.DATETIME,
                       FIELD_TYPE.TIMESTAMP):  # fmt: skip
        conv[field_type] = _raw_text
    return {"charset": "utf8mb4", "use_unicode": True, "conv": conv}


def _check_width(table: TableDef, count: int, what: str) -> None:
    if count != len(table.columns):
        raise ValueConversionError(
            f"{table.collection}: {what} has {count} columns but the table definition has "
            f"{len(table.columns)} ({', '.join(c.name for c in table.columns)})"
        )


def snapshot_values(table: TableDef, row: Sequence[Any]) -> list[Any]:
    """A snapshot row (read with :func:`snapshot_connect_kwargs`) -> values by column index.

    Dates arrive as text and become ``date``/``datetime`` values; what Python cannot build (zero
    and invalid dates, year 0) stays the server's text, for the converter: a zero or invalid
    date has no representation (contract C1), so it becomes null with its text in the
    record's header. Everything else passes through.

    Raises:
        ValueConversionError: The row's column count differs from the definition.
    """
    _check_width(table, len(row), "the snapshot row")
    out: list[Any] = []
    for column, value in zip(table.columns, row, strict=True):
        name = _base_type(column, table.charset)
        if value is not None and name in _DATE_TYPES and isinstance(value, (str, bytes)):
            value = _snapshot_date(table, column, name, value)
        out.append(value)
    return out


def snapshot_column(table: TableDef, index: int, values: list[Any]) -> list[Any]:
    """:func:`snapshot_values` for one column of many rows: column ``index``'s values (as the
    snapshot connection returns them) -> the same values :func:`snapshot_values` gives.

    Raises:
        ValueConversionError: A date the server printed does not parse.
    """
    column = table.columns[index]
    name = _base_type(column, table.charset)
    if name not in _DATE_TYPES:
        return values
    return [
        _snapshot_date(table, column, name, v) if isinstance(v, (str, bytes)) else v for v in values
    ]


def _snapshot_date(table: TableDef, column: ColumnDef, name: str, value: str | bytes) -> Any:
    """A DATE/DATETIME/TIMESTAMP the snapshot read as text -> its date or datetime, or the text
    when Python cannot build it (zero and invalid dates, year 0)."""
    try:
        parsed = _parse_datetime(_raw_text(value))
    except ValueError as exc:
        raise ValueConversionError(f"{table.collection}.{column.name}: {exc}") from None
    if parsed is None:
        return _raw_text(value)
    return parsed.date() if name == "date" else parsed


def _fix_stream_time(value: dt.timedelta) -> dt.timedelta:
    # mysql-replication 1.0.17 reads a negative TIME2's fraction without undoing its two's
    # complement: -(I + F) seconds comes back as -(I + (1 - F)) for a fraction F > 0.
    if value >= dt.timedelta(0):
        return value
    magnitude = -value
    micros = magnitude.microseconds
    if micros == 0:
        return value
    whole = magnitude - dt.timedelta(microseconds=micros)
    return -(whole + dt.timedelta(microseconds=1_000_000 - micros))


def _stream_none(table: TableDef, column: ColumnDef, name: str, reason: str) -> Any:
    """What a None in a row image stands for."""
    if name == "set":
        if reason == "empty set":
            return frozenset()
        if not column.nullable:
            raise ValueConversionError(
                f"{table.collection}.{column.name}: a NOT NULL SET came back None "
                f"({reason!r}); the binlog needs binlog_row_metadata=FULL"
            )
        return None
    if name in ("date", "datetime") and (reason != "null" or not column.nullable):
        # A zero or invalid date the library could not build (its readers are replaced by
        # install_binlog_date_readers, which return the text instead; this is the fallback).
        raise ValueConversionError(
            f"{table.collection}.{column.name}: the binlog reader returned no value for a zero "
            f"or invalid {name} ({reason!r}); its text is lost"
        )
    return None


def _stream_value(column: ColumnDef, name: str, value: Any, table_charset: str | None) -> Any:
    """Undo mysql-replication's decoding quirks for one non-None value."""
    if name == "timestamp" and isinstance(value, dt.datetime) and value == _EPOCH:
        # The zero TIMESTAMP is epoch second 0, which no valid TIMESTAMP is (they start at
        # 1970-01-01 00:00:01 UTC): its text, as a SELECT prints it.
        return _zero_text(column, name)
    if name == "time" and isinstance(value, dt.timedelta):
        return _fix_stream_time(value)
    if name == "year" and value == 1900:
        return 0  # YEAR 0000 is stored as 0, which the library reads as 1900 + 0
    if name in _TEXT_TYPES and isinstance(value, str):
        misdecoded = _LIBRARY_MISDECODED.get(_charset(column, table_charset))
        if misdecoded is not None:
            return value.encode(misdecoded)  # raw bytes again; the converter decodes them
    if name in _FIXED_BINARY_LENGTH and isinstance(value, (bytes, bytearray, str)):
        # MariaDB UUID/INET4/INET6 travel as their stored bytes (the binlog drops trailing
        # 0x00 bytes; an all-zero value can come back as ''); a SELECT prints text.
        return _format_fixed(name, _as_bytes(value), _FIXED_BINARY_LENGTH[name])
    return value


def stream_values(
    table: TableDef, values: Mapping[str, Any], none_sources: Mapping[str, str]
) -> list[Any]:
    """A mysql-replication row image and its ``none_sources`` -> values by column index.

    Columns are matched by position (without ``binlog_row_metadata=FULL`` the names are
    ``UNKNOWN_COLn``). Undone here: an empty SET (None with reason ``'empty set'``) becomes the
    empty set; a zero/invalid DATE or DATETIME (None) and the zero TIMESTAMP (epoch second 0)
    follow the zero-date rule; YEAR 0000 (read as 1900) becomes 0; negative fractional TIMEs get
    their fraction back; utf16/utf32 text is re-decoded big-endian. A column left out of a
    MINIMAL/NOBLOB row image (reason ``'cols bitmap'``) is None, like a NULL: Debezium needs
    ``binlog_row_image=FULL``. ENUM and SET values need the binlog's column metadata
    (``binlog_row_metadata=FULL``): without it the library returns None for them. Signed
    readings of UNSIGNED columns (no signedness metadata) are left to the converters, which
    fix them on either road.

    Raises:
        ValueConversionError: The image's column count differs from the definition, or a NOT
            NULL SET came back None without the empty-set reason.
    """
    _check_width(table, len(values), "the binlog row image")
    return _corrected(table, values.items(), none_sources)


def stream_row(table: TableDef, values: list[Any], reasons: Mapping[int, str] | None) -> list[Any]:
    """:func:`stream_values` of a row image :mod:`capture.mysql.binlog` decoded itself: its
    values in column order and the ``none_sources`` reason of each None by column index (None
    when no value is None). Same rules, same errors; an image that needs no correction is
    returned as it is.

    Raises:
        ValueConversionError: As :func:`stream_values`.
    """
    _check_width(table, len(values), "the binlog row image")
    plan = _stream_plan(table)
    if reasons is None and not _PLAN_FIXES[id(table)] and None not in values:
        return values
    return _corrected(table, enumerate(values), reasons or {}, plan)


def stream_fixes(table: TableDef) -> bool:
    """Whether :func:`stream_row` may change a value of ``table``'s images that has no None
    (a column whose binlog values it corrects: TIMESTAMP, TIME, YEAR, utf16/utf32 text,
    MariaDB's UUID/INET types)."""
    _stream_plan(table)
    return _PLAN_FIXES[id(table)]


def _corrected(
    table: TableDef,
    values: Iterable[tuple[Any, Any]],
    reasons: Mapping[Any, str],
    plan: tuple[tuple[ColumnDef, str, bool], ...] | None = None,
) -> list[Any]:
    """The image's values in column order, each None explained and each value needing it fixed;
    ``values`` pairs each value with its key in ``reasons`` (why it is None)."""
    out: list[Any] = []
    steps = _stream_plan(table) if plan is None else plan
    for (column, name, fix), (key, value) in zip(steps, values, strict=True):
        if value is None:
            out.append(_stream_none(table, column, name, reasons.get(key, "null")))
        elif fix:
            out.append(_stream_value(column, name, value, table.charset))
        else:
            out.append(value)
    return out


_PLANS: dict[int, tuple[TableDef, tuple[tuple[ColumnDef, str, bool], ...]]] = {}
"""``id(table)`` -> (the table, its columns' (definition, base type, needs a fix))."""
_PLAN_FIXES: dict[int, bool] = {}
"""``id(table)`` -> whether any column of its plan may need :func:`_stream_value` (kept
beside ``_PLANS``, with the same keys)."""


def _stream_plan(table: TableDef) -> tuple[tuple[ColumnDef, str, bool], ...]:
    """Each column with its base type and whether :func:`_stream_value` may change its value;
    worked out once per table definition (a stream applies one to every row)."""
    entry = _PLANS.get(id(table))
    if entry is not None and entry[0] is table:
        return entry[1]
    plan = []
    for column in table.columns:
        name = _base_type(column, table.charset)
        fix = name in _STREAM_FIXED or name in _FIXED_BINARY_LENGTH
        if name in _TEXT_TYPES:
            fix = _charset(column, table.charset) in _LIBRARY_MISDECODED
        plan.append((column, name, fix))
    if len(_PLANS) >= 4096:
        _PLANS.clear()
        _PLAN_FIXES.clear()
    _PLANS[id(table)] = (table, tuple(plan))
    _PLAN_FIXES[id(table)] = any(fix for _, _, fix in plan)
    return _PLANS[id(table)][1]


_STREAM_FIXED: Final = frozenset({"timestamp", "time", "year"})
"""Base types whose binlog values :func:`_stream_value` corrects (besides text and UUID/INET)."""


# --- the binlog's zero and invalid dates ------------------------------------------------------


def _temporal_text(
    year: int, month: int, day: int, clock: tuple[int, int, int] | None, fraction: str = ""
) -> str:
    text = f"{year:04d}-{month:02d}-{day:02d}"
    if clock is not None:
        text += f" {clock[0]:02d}:{clock[1]:02d}:{clock[2]:02d}{fraction}"
    return text


def _date_or_text(year: int, month: int, day: int) -> dt.date | str:
    try:
        return dt.date(year, month, day)
    except ValueError:
        return _temporal_text(year, month, day, None)


def binlog_date(raw: int) -> dt.date | str:
    """A binlog DATE (3 bytes, little-endian, already read) -> the date, or its text when it is
    a zero or invalid date."""
    return _date_or_text(raw >> 9, (raw >> 5) & 0xF, raw & 0x1F)


def _read_date(self: Any) -> dt.date | str:
    return binlog_date(self.packet.read_uint24())


def _read_datetime(self: Any) -> dt.datetime | str:
    # The pre-5.6 DATETIME: YYYYMMDDhhmmss as a decimal integer.
    date, clock = divmod(self.packet.read_uint64(), 1_000_000)
    year, month_day = divmod(date, 10_000)
    month, day = divmod(month_day, 100)
    hh, rest = divmod(clock, 10_000)
    mi, ss = divmod(rest, 100)
    try:
        return dt.datetime(year, month, day, hh, mi, ss)
    except ValueError:
        return _temporal_text(year, month, day, (hh, mi, ss))


def binlog_datetime2(data: int, micros: int, fsp: int) -> dt.datetime | str:
    """A binlog DATETIME2 (its 5-byte big-endian integer and fraction in microseconds, already
    read) -> the datetime, or its text when it is a zero or invalid date."""
    # DATETIME2: sign (1 bit), year*13+month (17), day (5), hour (5), minute (6), second (6).
    year, month = divmod((data >> 22) & 0x1FFFF, 13)
    day, hh, mi, ss = (data >> 17) & 0x1F, (data >> 12) & 0x1F, (data >> 6) & 0x3F, data & 0x3F
    try:
        return dt.datetime(year, month, day, hh, mi, ss, micros)
    except ValueError:
        fraction = f".{micros // 10 ** (6 - fsp):0{fsp}d}" if fsp else ""
        return _temporal_text(year, month, day, (hh, mi, ss), fraction)


def _read_datetime2(self: Any, column: Any) -> dt.datetime | str:
    data = self.packet.read_int_be_by_size(5)
    micros = self._RowsEvent__read_fsp(column)
    return binlog_datetime2(data, micros, int(column.fsp or 0))


def install_binlog_date_readers() -> None:
    """Make mysql-replication return a zero or invalid DATE/DATETIME as the server's text.

    Its own readers return None for them (indistinguishable from NULL in a nullable column, and
    the value is lost) or raise for an invalid day such as ``2020-02-30``; the agent needs the
    text, as a snapshot SELECT prints it, for the C1 header, so that both roads agree. The
    three readers are name-mangled methods of ``RowsEvent`` (``__read_date`` ...), replaced on
    the class; idempotent. Valid values come back exactly as before.
    """
    from pymysqlreplication.row_event import RowsEvent

    replaced = ("_RowsEvent__read_date", "_RowsEvent__read_datetime", "_RowsEvent__read_datetime2")
    missing = [name for name in (*replaced, "_RowsEvent__read_fsp") if not hasattr(RowsEvent, name)]
    if missing:
        # A mysql-replication release that renamed its readers: replacing nothing would bring
        # back the silent NULL for zero dates, so refuse to run instead.
        raise CaptureError(
            f"mysql-replication {importlib.metadata.version('mysql-replication')} has no "
            f"RowsEvent.{', '.join(missing)}; medallion is tested with 1.0.17 "
            "(requirements.lock): install that version"
        )
    RowsEvent._RowsEvent__read_date = _read_date
    RowsEvent._RowsEvent__read_datetime = _read_datetime
    RowsEvent._RowsEvent__read_datetime2 = _read_datetime2


install_binlog_date_readers()


# --- column defaults (contract C4) -----------------------------------------------------------

_NOW_WORDS: Final = frozenset({"CURRENT_TIMESTAMP", "NOW", "LOCALTIME", "LOCALTIMESTAMP"})
_NO_VALUE: Final = object()
"""A default the agent cannot evaluate (an expression, a literal the server would convert)."""


def _literal(text: str) -> tuple[str, Any] | None:
    """A DEFAULT as written -> ``(kind, value)``: ``null``, ``string``, ``number`` (text),
    ``bits`` (int), ``bytes`` or ``now`` (fractional digits); None for any other expression."""
    try:
        tokens = list(tokenize(text))
    except re.error:  # pragma: no cover - the tokenizer's regex accepts any text
        return None
    while (
        len(tokens) >= 2
        and tokens[0].kind == "o"
        and tokens[0].text == "("
        and tokens[-1].kind == "o"
        and tokens[-1].text == ")"
    ):
        tokens = tokens[1:-1]  # DEFAULT (literal)
    if tokens and tokens[0].kind == "w" and tokens[-1].kind in ("s", "d") and len(tokens) == 2:
        if tokens[0].upper.startswith("_") or tokens[0].upper in ("N", "DATE", "TIME", "TIMESTAMP"):
            tokens = tokens[1:]  # _utf8mb4'x', N'x', DATE '2020-01-01'
    kinds = [t.kind for t in tokens]
    if kinds and all(k in ("s", "d") for k in kinds):
        return "string", "".join(t.text for t in tokens)  # adjacent literals concatenate
    if len(tokens) == 1:
        token = tokens[0]
        if token.upper == "NULL":
            return "null", None
        if token.upper in ("TRUE", "FALSE"):
            return "number", "1" if token.upper == "TRUE" else "0"
        if token.kind == "n":
            return "number", token.text
        if token.kind == "x":
            raw = token.text
            if raw[0] in "bB" or raw.startswith("0b"):
                return "bits", int(raw[2:].strip("'"), 2)
            return "bytes", bytes.fromhex(raw[2:].strip("'"))
        if token.upper in _NOW_WORDS:
            return "now", 0
    if len(tokens) == 2 and tokens[0].kind == "o" and tokens[0].text in "+-":
        if tokens[1].kind == "n":
            return "number", tokens[0].text + tokens[1].text
    if (
        len(tokens) in (3, 4)
        and tokens[0].upper in _NOW_WORDS
        and tokens[1].text == "("
        and tokens[-1].text == ")"
    ):
        return "now", int(tokens[2].text) if len(tokens) == 4 and tokens[2].kind == "n" else 0
    return None


def _from_literal(column: ColumnDef, name: str, kind: str, value: Any) -> Any:
    """The driver-form value the server stores for a literal default, or :data:`_NO_VALUE`."""
    text = value if kind in ("string", "number") else None
    if name in _INT_BITS or name in ("bit", "year"):
        if kind == "bits":
            return value
        if text is not None and re.fullmatch(r"[+-]?\d+", text.strip()):
            return int(text)
        return _NO_VALUE  # e.g. 1.5 into an INT: the server rounds
    if name == "decimal":
        try:
            number = Decimal(str(text))
        except InvalidOperation:
            return _NO_VALUE
        return number.quantize(Decimal(1).scaleb(-(column.scale or 0)), rounding=ROUND_HALF_UP)
    if name in ("float", "double"):
        try:
            return float(str(text))
        except ValueError:
            return _NO_VALUE
    if name in _TEXT_TYPES or name in ("json", "enum", "set") or name in _FIXED_BINARY_LENGTH:
        if text is None:
            return _NO_VALUE
        if name == "enum":
            match = [m for m in column.values if m.lower() == text.lower()]
            return match[0] if match else _NO_VALUE
        if name == "set":
            chosen = {p.lower() for p in text.split(",") if p}
            if not chosen <= {m.lower() for m in column.values}:
                return _NO_VALUE
            return ",".join(m for m in column.values if m.lower() in chosen)
        return text
    if name in _BINARY_TYPES:
        return value if kind == "bytes" else _NO_VALUE if text is None else text.encode()
    if name in ("date", "datetime", "time") and kind == "string":
        return text
    return _NO_VALUE  # TIMESTAMP literals are in the session's time zone; spatial values


_IMPLICIT_TEXT: Final[Mapping[str, str]] = {
    "date": "0000-00-00",
    "datetime": "0000-00-00 00:00:00",
    "timestamp": "0000-00-00 00:00:00",
    "time": "00:00:00",
    "uuid": "00000000-0000-0000-0000-000000000000",
    "inet4": "0.0.0.0",
    "inet6": "::",
}


def _implicit(column: ColumnDef, name: str) -> Any:
    """What the server gives existing rows for an added NOT NULL column without DEFAULT."""
    if name in _INT_BITS or name in ("bit", "year", "float", "double"):
        return 0
    if name == "decimal":
        return Decimal(0)
    if name in _TEXT_TYPES or name in ("json", "set"):
        return ""
    if name == "enum":
        return column.values[0] if column.values else _NO_VALUE
    if name in _BINARY_TYPES:
        return b""
    return _IMPLICIT_TEXT.get(name, _NO_VALUE)


def column_default(
    column: ColumnDef, ctype: ColumnType, table_charset: str | None
) -> ColumnDefault | None:
    """The C4 default of a MySQL/MariaDB column.

    For a column the table was created with, a constant ``DEFAULT`` (Debezium 3.x's
    ``default``). For a column ``ALTER TABLE ... ADD`` added (``added_ms``), the value the rows
    that existed then got, which the binlog does not carry: the literal default, the implicit
    one of a NOT NULL column without ``DEFAULT`` (0, ``''``, the first ENUM member),
    ``CURRENT_TIMESTAMP`` as the statement's time for a ``TIMESTAMP`` (its binlog time has
    whole seconds); else ``medallion.default.unreproducible`` with the reason, as for a renamed
    column, whose rows hold the old column's values.
    """
    name = _base_type(column, table_charset)
    if column.renamed_from is not None:
        return ColumnDefault(
            None,
            f"the column was renamed from {column.renamed_from}: the rows written before hold "
            "that column's values, not a default",
        )
    added = column.added_ms is not None
    literal = None if column.default is None else _literal(column.default)
    if not added:
        if literal is None or literal[0] in ("null", "now"):
            return None
        value = _from_literal(column, name, *literal)
        if value is _NO_VALUE:
            return None
        constant = _converted_default(ctype, value, column.default)
        return constant if constant.unreproducible is None else None
    why = _unknowable(column, name, literal)
    if why is not None:
        return ColumnDefault(None, why)
    if column.default is None:
        if column.nullable:
            return None
        value = _implicit(column, name)
    else:
        if literal is None:
            raise InternalError(f"column {column.name}: a default without its literal")
        if literal[0] == "null":
            return None
        if literal[0] == "now":
            instant = dt.datetime.fromtimestamp((column.added_ms or 0) // 1000, dt.UTC)
            value = instant.replace(tzinfo=None)
        else:
            value = _from_literal(column, name, *literal)
    if value is _NO_VALUE:
        return ColumnDefault(
            None,
            f"the column was added with DEFAULT {column.default}, which the server converts "
            "in a way the agent does not reproduce",
        )
    return _converted_default(ctype, value, column.default)


def _unknowable(column: ColumnDef, name: str, literal: tuple[str, Any] | None) -> str | None:
    """Why the value the existing rows got for an added column cannot be known, or None."""
    if column.generated:
        return "a generated column was added: the server computed the existing rows' values"
    if column.auto_increment:
        return "an AUTO_INCREMENT column was added: the server numbered the existing rows"
    if column.default is None:
        return None
    if literal is None:
        return (
            f"the column was added with the expression default {column.default}, which the "
            "server evaluated for the existing rows; the binlog does not carry the values"
        )
    if literal[0] == "now" and (name != "timestamp" or (column.length or 0) > 0):
        return (
            f"the column was added with DEFAULT {column.default}: existing rows got the "
            "statement's time, which the binlog gives in whole seconds and, for a DATETIME, in "
            "an unknown session time zone"
        )
    if literal[0] == "now" and not column.added_ms:
        return f"the column was added with DEFAULT {column.default} at an unknown time"
    return None


def _converted_default(ctype: ColumnType, value: Any, written: str | None) -> ColumnDefault:
    try:
        return ColumnDefault(ctype.convert(value))
    except Unrepresentable as exc:
        return ColumnDefault(
            None,
            f"rows that existed before the column was added hold {exc.text or written}, which "
            f"has no representation: {exc.reason}",
        )
    except (ValueConversionError, ValueError, TypeError, ArithmeticError):
        return ColumnDefault(None, f"the default {written} does not convert to the column's type")
