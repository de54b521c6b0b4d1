"""Db2 column types -> Debezium Connect schemas and values (the guide's Db2 type mappings).

``shared/spec/debezium-guide-1.2.md`` §2.5: ``BOOLEAN`` BOOLEAN; ``SMALLINT`` INT16;
``INTEGER`` INT32; ``BIGINT`` INT64; ``REAL`` FLOAT32; ``DOUBLE`` FLOAT64; ``CHAR``, ``VARCHAR``,
``CLOB``, ``GRAPHIC``, ``VARGRAPHIC``, ``DBCLOB``, ``LONG VARCHAR`` STRING (``CHAR`` blank-padded,
as Db2 returns it); ``XML`` STRING ``io.debezium.data.Xml``; ``BINARY``, ``VARBINARY``, ``BLOB``
and ``CHAR/VARCHAR FOR BIT DATA`` per ``binary.handling.mode``; ``DECIMAL`` Decimal with its
scale and ``DECFLOAT`` a variable-scale decimal, per ``decimal.handling.mode``. Temporal types
per ``time.precision.mode``: ``adaptive``: ``DATE`` Date, ``TIME`` Time (Db2 times have whole
seconds), ``TIMESTAMP(0-3)`` Timestamp, ``TIMESTAMP(4-6)`` MicroTimestamp, ``TIMESTAMP(7-12)``
NanoTimestamp (the driver hands microseconds over); ``connect``: Connect's Date, Time and
Timestamp (milliseconds). A timestamp has no zone: its wall clock is read as UTC.

Values arrive as pyodbc returns them through the Db2 CLI driver (int, bool, Decimal, float,
str, bytes, date, time, datetime); no driver is imported here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bronze import connect_schema as cs
from capture import column_types as ct
from capture.column_types import ColumnType, ValueModes

__all__ = ["Db2Column", "column_type"]

_EPOCH = dt.datetime(1970, 1, 1)


@dataclass(frozen=True, slots=True)
class Db2Column:
    """One column as ``SYSCAT.COLUMNS`` describes it.

    Attributes:
        name: ``COLNAME`` (case-sensitive).
        type_name: ``TYPENAME`` (``INTEGER``, ``CHARACTER``, ``VARCHAR``, ``TIMESTAMP``...).
        length: ``LENGTH`` (digits of a ``DECIMAL``, bytes or characters of a string).
        scale: ``SCALE`` (of a ``DECIMAL``; fractional digits of a ``TIMESTAMP``).
        nullable: ``NULLS = 'Y'``.
        key_seq: ``KEYSEQ``: the position in the primary key (None: not in it).
        bit_data: A ``CHAR``/``VARCHAR`` ``FOR BIT DATA`` (binary) column.
    """

    name: str
    type_name: str
    length: int = 0
    scale: int = 0
    nullable: bool = True
    key_seq: int | None = None
    bit_data: bool = False


def _micros(value: Any) -> int:
    if not isinstance(value, dt.datetime):
        raise TypeError(f"not a timestamp: {value!r}")
    delta = value.replace(tzinfo=None) - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _time_millis(value: Any) -> int:
    if not isinstance(value, dt.time):
        raise TypeError(f"not a time of day: {value!r}")
    return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000


def _days(value: Any) -> int:
    if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
        raise TypeError(f"not a date: {value!r}")
    return ct.days_from_civil(value.year, value.month, value.day)


def _decimal(value: Any) -> Decimal:
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    if not number.is_finite():
        # DECFLOAT holds NaN and Infinity; a Connect Decimal cannot.
        raise ValueError(f"{number} has no Connect Decimal representation")
    return number


def _temporal(column: Db2Column, mode: str) -> ColumnType:
    kind = column.type_name
    if kind == "DATE":
        return ColumnType(cs.connect_date() if mode == "connect" else cs.date(), _days, kind)
    if kind == "TIME":
        return ColumnType(
            cs.connect_time() if mode == "connect" else cs.time_millis(), _time_millis, kind
        )
    if mode == "connect" or column.scale <= 3:
        schema = cs.connect_timestamp() if mode == "connect" else cs.timestamp_millis()
        return ColumnType(schema, lambda v: _micros(v) // 1000, kind)
    if column.scale <= 6:
        return ColumnType(cs.micro_timestamp(), _micros, kind)
    return ColumnType(cs.nano_timestamp(), lambda v: _micros(v) * 1000, kind)


def _numeric(column: Db2Column, mode: str) -> ColumnType:
    kind = column.type_name
    if mode == "double":
        return ColumnType(cs.primitive("float64"), lambda v: ct.json_float(float(v)), kind)
    if mode == "string":
        return ColumnType(cs.primitive("string"), lambda v: format(Decimal(v), "f"), kind)
    if kind == "DECFLOAT":

        def variable(value: Any) -> dict[str, Any]:
            number = _decimal(value)
            exponent = number.as_tuple().exponent
            scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
            return {"scale": scale, "value": ct.decimal_bytes(number, scale)}

        return ColumnType(cs.variable_scale_decimal(), variable, kind)
    scale = column.scale
    schema = cs.decimal(scale, precision=column.length)
    return ColumnType(schema, lambda v: ct.decimal_bytes(_decimal(v), scale), kind, is_binary=True)


_SIMPLE: dict[str, tuple[str, Callable[[Any], Any]]] = {
    "BOOLEAN": ("boolean", bool),
    "SMALLINT": ("int16", int),
    "INTEGER": ("int32", int),
    "BIGINT": ("int64", int),
    "REAL": ("float32", lambda v: ct.json_float(float(v))),
    "DOUBLE": ("float64", lambda v: ct.json_float(float(v))),
}
_TEXT = frozenset(
    {
        "CHARACTER",
        "CHAR",
        "VARCHAR",
        "LONG VARCHAR",
        "CLOB",
        "GRAPHIC",
        "VARGRAPHIC",
        "LONG VARGRAPHIC",
        "DBCLOB",
    }
)


def column_type(column: Db2Column, handling: ValueModes) -> ColumnType:
    """The Debezium representation of one column.

    A type the guide does not map (``ROWID``, user-defined distinct types...) lands as its
    text with ``known`` False rather than being dropped.
    """
    kind = column.type_name.upper()
    if kind in _SIMPLE:
        connect, convert = _SIMPLE[kind]
        return ColumnType(cs.primitive(connect), convert, kind)
    if column.bit_data or kind in ("BINARY", "VARBINARY", "BLOB"):
        return ct.binary_column(handling.binary, column.type_name)
    if kind in _TEXT:
        return ColumnType(cs.primitive("string"), str, kind)
    if kind == "XML":
        return ColumnType(cs.xml(), str, kind)
    if kind in ("DATE", "TIME", "TIMESTAMP"):
        return _temporal(column, handling.time_precision)
    if kind in ("DECIMAL", "DECFLOAT"):
        return _numeric(column, handling.decimal)
    return ColumnType(cs.primitive("string"), str, kind, known=False)
