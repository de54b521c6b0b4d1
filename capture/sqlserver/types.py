"""SQL Server column types -> Debezium Connect schemas and values (seed 003's mapping tables).

``shared/spec/mysql-and-sqlserver.md`` §2.7: ``bit`` BOOLEAN; ``tinyint`` INT16 (SQL Server's
tinyint is unsigned 0-255); ``smallint`` INT16; ``int`` INT32; ``bigint`` INT64; ``real`` FLOAT32;
``float`` FLOAT64; character types STRING; ``xml`` STRING ``io.debezium.data.Xml``;
``datetimeoffset`` STRING ``io.debezium.time.ZonedTimestamp`` (UTC, to 100 ns);
``binary``/``varbinary``/``image`` per ``binary.handling.mode``;
``decimal``/``numeric``/``money``/``smallmoney`` per ``decimal.handling.mode``;
``uniqueidentifier`` STRING. Temporal types per
``time.precision.mode``: ``adaptive``: ``date`` Date; ``time(0-3)`` Time (ms), ``time(4-6)``
MicroTime, ``time(7)`` NanoTime; ``datetime``, ``smalldatetime``, ``datetime2(0-3)`` Timestamp,
``datetime2(4-6)`` MicroTimestamp, ``datetime2(7)`` NanoTimestamp; ``connect``: Connect's
Date/Time/Timestamp (milliseconds). Naive datetimes are the wall clock read as UTC.

Values arrive as pyodbc returns them (int, bool, Decimal, float, str, bytes, datetime, date,
time); no driver is imported here.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bronze import connect_schema as cs
from capture import column_types as ct
from capture.column_types import ColumnType, ValueModes

__all__ = ["ColumnFacts", "SqlServerHandling", "column_type"]

_EPOCH = dt.datetime(1970, 1, 1)


SqlServerHandling = ValueModes
"""The value-handling modes of the source (:class:`capture.column_types.ValueModes`)."""


@dataclass(frozen=True, slots=True)
class ColumnFacts:
    """One column as ``INFORMATION_SCHEMA.COLUMNS`` describes it.

    Attributes:
        name: Column name.
        data_type: ``DATA_TYPE`` (``int``, ``nvarchar``, ``datetime2``...).
        length: ``CHARACTER_MAXIMUM_LENGTH`` (-1 for ``max``).
        precision: ``NUMERIC_PRECISION``.
        scale: ``NUMERIC_SCALE``.
        fraction: ``DATETIME_PRECISION`` (fractional-second digits).
        nullable: ``IS_NULLABLE = 'YES'``.
        default: ``COLUMN_DEFAULT``: the ``DEFAULT`` as SQL Server prints it (``((0))``,
            ``('abc')``, ``(getdate())``); None without one.
    """

    name: str
    data_type: str
    length: int | None = None
    precision: int | None = None
    scale: int | None = None
    fraction: int | None = None
    nullable: bool = True
    default: str | None = None


def _as(kind: type[Any], value: Any) -> Any:
    """A temporal value as ``kind``: FreeTDS with TDS < 7.3 hands ``date``, ``time`` and
    ``datetime2`` over as text, which is parsed (a malformed text raises ValueError)."""
    if isinstance(value, str):
        return kind.fromisoformat(value.strip()[:26] if kind is not dt.date else value.strip())
    if kind is dt.date and isinstance(value, dt.date) or isinstance(value, kind):
        return value
    raise TypeError(f"not a {kind.__name__}: {value!r}")


def _micros_since_epoch(value: Any) -> int:
    delta = _as(dt.datetime, value).replace(tzinfo=None) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_micros(value: Any) -> int:
    value = _as(dt.time, value)
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000 + value.microsecond


def _zoned(value: Any) -> str:
    """``datetimeoffset`` as UTC text, to its 100 ns: the connection's output converter hands the
    server's text (``2018-06-20 15:13:16.945104100 +02:00``, as FreeTDS with TDS < 7.3 does too,
    with 7 digits), or a ``datetime`` with tzinfo (microseconds)."""
    nanos = 0
    if isinstance(value, str):
        text = value.strip()
        stamp, _, offset = text.rpartition(" ")
        if "." in stamp:
            head, frac = stamp.split(".")
            digits = (frac + "000000000")[:9]
            stamp, nanos = f"{head}.{digits[:6]}", int(digits[6:])
        value = dt.datetime.fromisoformat(f"{stamp}{offset}")
    if not isinstance(value, dt.datetime) or value.tzinfo is None:
        raise TypeError(f"not a datetimeoffset: {value!r}")
    micros = _micros_since_epoch(value.astimezone(dt.UTC))
    if not nanos:
        return ct.format_utc(micros)
    # java.time prints nine digits once the value has sub-microsecond digits
    seconds, fraction = divmod(micros, 1_000_000)
    return ct.format_utc(seconds * 1_000_000)[:-1] + f".{fraction * 1000 + nanos:09d}Z"


def _epoch_days(value: Any) -> int:
    day = _as(dt.date, value)
    return ct.days_from_civil(day.year, day.month, day.day)


def _temporal(facts: ColumnFacts, mode: str) -> ColumnType:
    kind, digits = facts.data_type, facts.fraction
    if kind == "date":
        days = cs.date() if mode != "connect" else cs.connect_date()
        return ColumnType(days, _epoch_days, kind)
    if kind == "time":
        precise = digits if digits is not None else 7
        if mode == "connect" or precise <= 3:
            schema = cs.connect_time() if mode == "connect" else cs.time_millis()
            return ColumnType(schema, lambda v: _time_micros(v) // 1000, kind)
        if precise <= 6:
            return ColumnType(cs.micro_time(), _time_micros, kind)
        return ColumnType(cs.nano_time(), lambda v: _time_micros(v) * 1000, kind)
    stamp = 3 if kind == "datetime" else 0 if kind == "smalldatetime" else digits
    stamp = 7 if stamp is None else stamp
    if mode == "connect" or stamp <= 3:
        schema = cs.connect_timestamp() if mode == "connect" else cs.timestamp_millis()
        return ColumnType(schema, lambda v: _micros_since_epoch(v) // 1000, kind)
    if stamp <= 6:
        return ColumnType(cs.micro_timestamp(), _micros_since_epoch, kind)
    return ColumnType(cs.nano_timestamp(), lambda v: _micros_since_epoch(v) * 1000, kind)


def _numeric(facts: ColumnFacts, mode: str) -> ColumnType:
    scale = facts.scale or 0
    if mode == "double":
        return ColumnType(
            cs.primitive("float64"), lambda v: ct.json_float(float(v)), facts.data_type
        )
    if mode == "string":
        return ColumnType(cs.primitive("string"), lambda v: str(Decimal(v)), facts.data_type)
    schema = cs.decimal(scale, precision=facts.precision)
    return ColumnType(schema, lambda v: ct.decimal_bytes(Decimal(v), scale), facts.data_type)


_SIMPLE: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "bit": ("boolean", bool),
    "tinyint": ("int16", int),
    "smallint": ("int16", int),
    "int": ("int32", int),
    "bigint": ("int64", int),
    "real": ("float32", lambda v: ct.json_float(float(v))),
    "float": ("float64", lambda v: ct.json_float(float(v))),
    "uniqueidentifier": ("string", lambda v: str(v).upper()),
}
_TEXT = frozenset({"char", "varchar", "text", "nchar", "nvarchar", "ntext", "sysname"})


def column_type(facts: ColumnFacts, handling: SqlServerHandling) -> ColumnType | None:
    """The Debezium representation of one column; None for ``sql_variant``.

    ``sql_variant`` has no mapping in Debezium (a JDBC type its converters do not know: the
    column is ignored) nor in pyodbc (ODBC type -150); the agent leaves it out, with a warning.
    The CLR types (``hierarchyid``, ``geometry``, ``geography``, user-defined ones; FreeTDS's
    ``SQL_LONGVARBINARY``, Microsoft's driver's -151) are not in the seed's tables: they land as
    their serialized bytes under ``binary.handling.mode``, with ``known`` False.
    """
    kind = facts.data_type.lower()
    if kind in _SIMPLE:
        connect, convert = _SIMPLE[kind]
        return ColumnType(cs.primitive(connect), convert, kind)
    if kind in _TEXT:
        return ColumnType(cs.primitive("string"), str, kind)
    if kind == "xml":
        return ColumnType(cs.xml(), str, kind)
    if kind == "datetimeoffset":
        return ColumnType(cs.zoned_timestamp(), _zoned, kind)
    if kind in ("date", "time", "datetime", "datetime2", "smalldatetime"):
        return _temporal(
            ColumnFacts(**{**_asdict(facts), "data_type": kind}), handling.time_precision
        )
    if kind in ("decimal", "numeric", "money", "smallmoney"):
        scale = facts.scale if facts.scale is not None else 4
        return _numeric(
            ColumnFacts(facts.name, kind, None, facts.precision, scale), handling.decimal
        )
    if kind in ("binary", "varbinary", "image", "timestamp", "rowversion"):
        return ct.binary_column(handling.binary, facts.data_type)
    if kind == "sql_variant":
        return None
    return dataclasses.replace(ct.binary_column(handling.binary, facts.data_type), known=False)


def _asdict(facts: ColumnFacts) -> dict[str, Any]:
    return {name: getattr(facts, name) for name in ColumnFacts.__slots__}
