"""Oracle column types as Debezium represents them (seed Oracle document, "Data type mappings").

One :class:`OracleColumn` per ``ALL_TAB_COLUMNS`` row; :func:`column_type` gives its
:class:`capture.column_types.ColumnType`. A converter takes either what python-oracledb returns
for a snapshot row (``int``/``Decimal``/``float``/``str``/``datetime``/``bytes``) or a value
parsed from ``SQL_REDO`` (:func:`redo_python` turns the text, ``TO_DATE(...)``,
``HEXTORAW(...)``... into the same Python types first), so the snapshot and the stream write one
representation:

======================================  ==========================================================
NUMBER(P,S<=0)                          INT8 (P-S<3), INT16 (<5), INT32 (<10), INT64 (<19), else
                                        ``Decimal`` bytes, scale S (negative: Debezium's
                                        schema) and precision P (``decimal.handling.mode``)
NUMBER(P,S>0), INTEGER (=NUMBER(38,0))  ``org.apache.kafka.connect.data.Decimal`` (scale S)
NUMBER, FLOAT(P)                        ``io.debezium.data.VariableScaleDecimal``
BINARY_FLOAT / BINARY_DOUBLE            FLOAT32 / FLOAT64
CHAR, NCHAR, VARCHAR2, NVARCHAR2, ROWID STRING
RAW                                     BYTES (``binary.handling.mode``)
DATE; TIMESTAMP(0-3/4-6/7-9)            ``io.debezium.time.Timestamp`` (ms) / ``MicroTimestamp`` /
                                        ``NanoTimestamp`` (``time.precision.mode=connect``: ms)
TIMESTAMP WITH (LOCAL) TIME ZONE        ``io.debezium.time.ZonedTimestamp`` text (UTC)
INTERVAL DAY TO SECOND / YEAR TO MONTH  ``io.debezium.time.MicroDuration`` (a month is
                                        365.25 / 12 days); ``interval.handling.mode=string``:
                                        ``io.debezium.time.Interval`` text, exact
======================================  ==========================================================

CLOB/NCLOB are STRING and BLOB is BYTES (``binary.handling.mode``) when ``lob.enabled``; a LOB
value the redo does not carry (:data:`capture.oracle.lob.UNAVAILABLE`) is written as
``unavailable.value.placeholder`` (for BYTES, the placeholder's bytes). Without ``lob.enabled``
they are not captured, as in Debezium ("LOB fields will not be captured nor emitted"). Other
types (LONG, BFILE, XMLTYPE, user-defined...) are unsupported by Debezium too: for those
:func:`column_type` returns None and the agent leaves the column out, with a warning.
"""

from __future__ import annotations

import base64
import datetime as dt
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation, localcontext
from typing import Any

from bronze import connect_schema as cs
from capture.column_types import (
    ColumnType,
    ValueModes,
    b64,
    days_from_civil,
    decimal_bytes,
    format_utc,
    json_float,
)
from capture.oracle.lob import LOB_TYPES, UNAVAILABLE
from capture.oracle.redo import RedoFunction, RedoValue

__all__ = ["OracleColumn", "OracleHandling", "column_type", "jdbc_type", "redo_python"]


@dataclass(frozen=True, slots=True)
class OracleHandling(ValueModes):
    """The value-handling modes of the source (:class:`capture.column_types.ValueModes`) and
    ``interval.handling.mode`` (``numeric`` or ``string``)."""

    interval: str = "numeric"

    @classmethod
    def from_config(cls, config: Any) -> OracleHandling:
        """Read the modes off an ``oracle`` source config."""
        modes = ValueModes.from_config(config)
        return cls(
            modes.decimal, modes.time_precision, modes.binary, str(config.interval_handling_mode)
        )


@dataclass(frozen=True, slots=True)
class OracleColumn:
    """One ``ALL_TAB_COLUMNS`` row.

    Attributes:
        name: ``COLUMN_NAME``.
        data_type: ``DATA_TYPE`` (``NUMBER``, ``VARCHAR2``, ``TIMESTAMP(6)`` ...).
        precision: ``DATA_PRECISION`` (None: not declared).
        scale: ``DATA_SCALE`` (None: not declared).
        nullable: ``NULLABLE = 'Y'``.
        length: ``CHAR_LENGTH`` / ``DATA_LENGTH`` of a character or RAW type, when known (from
            DDL text; schema-change records only).
        default: ``DATA_DEFAULT``, the ``DEFAULT`` expression's text (contract C4,
            :mod:`capture.sql_defaults`); None without one.
    """

    name: str
    data_type: str
    precision: int | None
    scale: int | None
    nullable: bool
    length: int | None = None
    default: str | None = None


_FRACTION = re.compile(r"\((\d)\)")


def _micros(value: dt.datetime) -> int:
    days = days_from_civil(value.year, value.month, value.day)
    seconds = value.hour * 3600 + value.minute * 60 + value.second
    return (days * 86_400 + seconds) * 1_000_000 + value.microsecond


def _as_datetime(value: Any) -> dt.datetime:
    if isinstance(value, dt.datetime):
        if value.tzinfo is not None:
            value = value.astimezone(dt.UTC).replace(tzinfo=None)
        return value
    if isinstance(value, dt.date):
        return dt.datetime(value.year, value.month, value.day)
    raise TypeError(f"not a date/time: {value!r}")


def _number(value: Any) -> Decimal:
    if isinstance(value, Decimal):
        return value
    if isinstance(value, int):
        return Decimal(value)
    try:
        return Decimal(str(value).strip())
    except InvalidOperation:
        raise ValueError(f"not a number: {value!r}") from None


def _integer(value: Any) -> int:
    if isinstance(value, int):
        return value
    number = _number(value)
    if number != number.to_integral_value():
        raise ValueError(f"{value!r} is not an integer")
    return int(number)


def _numeric(column: OracleColumn, handling: OracleHandling) -> ColumnType:
    precision, scale, name = column.precision, column.scale, column.data_type
    if column.data_type in ("INTEGER", "SMALLINT", "INT"):
        precision, scale = 38, 0
    elif precision is None and scale is not None and column.data_type == "NUMBER":
        # How ALL_TAB_COLUMNS shows INTEGER, SMALLINT and NUMBER(*,S): no precision, a scale.
        # Oracle's JDBC metadata (what Debezium reads) reports precision 38 for these; only a
        # bare NUMBER (neither declared) is variable-scale.
        precision = 38
    if precision is None or column.data_type == "FLOAT":
        return _variable_scale(handling, name)
    scale = scale or 0
    if scale <= 0 and precision - scale < 19 and handling.decimal == "precise":
        width = precision - scale
        kind = "int8" if width < 3 else "int16" if width < 5 else "int32" if width < 10 else "int64"
        return ColumnType(cs.primitive(kind), _integer, name)
    if handling.decimal == "double":
        return ColumnType(cs.primitive("float64"), lambda v: float(_number(v)), name)
    if handling.decimal == "string":
        return ColumnType(cs.primitive("string"), lambda v: format(_number(v), "f"), name)
    # Debezium declares NUMBER(P,S<0) as it is, Decimal scale S (negative) and precision P:
    # unscaled values of P digits times 10^-S, which silver holds as decimal(P-S, 0).
    exponent = Decimal(1).scaleb(-scale)

    def exact(value: Any) -> str:
        number = _number(value)
        with localcontext() as context:
            context.prec = max(context.prec, len(number.as_tuple().digits) + abs(scale) + 1)
            fixed = number.quantize(exponent)
        return decimal_bytes(fixed, scale)

    return ColumnType(cs.decimal(scale, precision=precision), exact, name, is_binary=True)


def _variable_scale(handling: OracleHandling, name: str) -> ColumnType:
    if handling.decimal == "double":
        return ColumnType(cs.primitive("float64"), lambda v: float(_number(v)), name)
    if handling.decimal == "string":
        return ColumnType(cs.primitive("string"), lambda v: format(_number(v), "f"), name)

    def struct(value: Any) -> dict[str, Any]:
        number = _number(value)
        exponent = number.as_tuple().exponent
        scale = -exponent if isinstance(exponent, int) and exponent < 0 else 0
        return {"scale": scale, "value": decimal_bytes(number, scale)}

    return ColumnType(cs.variable_scale_decimal(), struct, name)


def _binary(handling: OracleHandling, name: str) -> ColumnType:
    mode = handling.binary

    def encode(value: Any) -> str:
        data = bytes(value) if not isinstance(value, str) else value.encode("utf-8")
        if mode == "hex":
            return data.hex()
        if mode == "base64-url-safe":
            return base64.urlsafe_b64encode(data).decode("ascii")
        return b64(data)

    schema = cs.primitive("string" if mode in ("hex", "base64", "base64-url-safe") else "bytes")
    return ColumnType(schema, encode, name, is_binary=mode == "bytes")


def _temporal(column: OracleColumn, handling: OracleHandling) -> ColumnType:
    name = column.data_type
    if name == "DATE":
        return ColumnType(cs.timestamp_millis(), lambda v: _micros(_as_datetime(v)) // 1000, name)
    if "TIME ZONE" in name:
        return ColumnType(
            cs.zoned_timestamp(), lambda v: format_utc(_micros(_as_datetime(v))), name
        )
    match = _FRACTION.search(name)
    digits = int(match.group(1)) if match else 6
    if handling.time_precision == "connect" or digits <= 3:
        return ColumnType(cs.timestamp_millis(), lambda v: _micros(_as_datetime(v)) // 1000, name)
    if digits <= 6:
        return ColumnType(cs.micro_timestamp(), lambda v: _micros(_as_datetime(v)), name)
    return ColumnType(cs.nano_timestamp(), lambda v: _micros(_as_datetime(v)) * 1000, name)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if hasattr(value, "read"):  # a LOB locator of the driver
        return str(value.read())
    return str(value)


def _lob(column: OracleColumn, handling: OracleHandling, placeholder: str) -> ColumnType:
    """CLOB/NCLOB as STRING, BLOB as :func:`_binary`; :data:`UNAVAILABLE` as the placeholder
    (a ``hex:`` placeholder is bytes given in hex)."""
    name = column.data_type
    if name != "BLOB":

        def text(value: Any) -> str:
            return placeholder if value is UNAVAILABLE else _text(value)

        return ColumnType(cs.primitive("string"), text, name)
    binary = _binary(handling, name)
    marker = (
        bytes.fromhex(placeholder[4:])
        if placeholder.startswith("hex:")
        else placeholder.encode("utf-8")
    )
    # BYTES carries the placeholder's bytes; a text mode (hex, base64) the placeholder text,
    # as the PostgreSQL agent writes unchanged TOAST, so silver recognises it either way.
    unavailable = binary.convert(marker) if binary.is_binary else placeholder

    def data(value: Any) -> Any:
        if value is UNAVAILABLE:
            return unavailable
        return binary.convert(value.read() if hasattr(value, "read") else value)

    return ColumnType(binary.schema, data, name, is_binary=binary.is_binary)


def column_type(
    column: OracleColumn,
    handling: OracleHandling,
    *,
    lobs: bool = False,
    placeholder: str = "__debezium_unavailable_value",
) -> ColumnType | None:
    """The Debezium representation of ``column``; None for a type Debezium does not capture
    (CLOB/NCLOB/BLOB unless ``lobs``: ``lob.enabled``)."""
    name = column.data_type
    if name in LOB_TYPES:
        return _lob(column, handling, placeholder) if lobs else None
    if name in ("NUMBER", "INTEGER", "SMALLINT", "INT", "FLOAT", "DECIMAL", "NUMERIC"):
        return _numeric(column, handling)
    if name == "BINARY_FLOAT":
        return ColumnType(cs.primitive("float32"), lambda v: json_float(float(v)), name)
    if name == "BINARY_DOUBLE":
        return ColumnType(cs.primitive("float64"), lambda v: json_float(float(v)), name)
    if name in ("CHAR", "NCHAR", "VARCHAR2", "NVARCHAR2", "VARCHAR", "ROWID"):
        return ColumnType(cs.primitive("string"), _text, name)
    if name == "RAW":
        return _binary(handling, name)
    if name == "DATE" or name.startswith("TIMESTAMP"):
        return _temporal(column, handling)
    if name.startswith("INTERVAL DAY"):
        if handling.interval == "string":
            return ColumnType(cs.interval(), _ds_iso, name)
        return ColumnType(cs.micro_duration(), _ds_micros, name)
    if name.startswith("INTERVAL YEAR"):
        if handling.interval == "string":
            return ColumnType(cs.interval(), _ym_iso, name)
        return ColumnType(cs.micro_duration(), _ym_micros, name)
    return None


_JDBC = {
    "NUMBER": 2,
    "FLOAT": 6,
    "BINARY_FLOAT": 100,
    "BINARY_DOUBLE": 101,
    "CHAR": 1,
    "NCHAR": -15,
    "VARCHAR2": 12,
    "VARCHAR": 12,
    "NVARCHAR2": -9,
    "RAW": -3,
    "DATE": 93,
    "CLOB": 2005,
    "NCLOB": 2011,
    "BLOB": 2004,
    "ROWID": -8,
}


def jdbc_type(data_type: str) -> int:
    """The ``java.sql.Types`` code Debezium's schema-change ``columns[].jdbcType`` carries
    (Oracle's own for BINARY_FLOAT/DOUBLE 100/101, TIMESTAMP WITH (LOCAL) TIME ZONE -101/-102,
    INTERVAL -103/-104; OTHER, 1111, for the rest)."""
    if data_type.startswith("TIMESTAMP"):
        if "LOCAL" in data_type:
            return -102
        return -101 if "TIME ZONE" in data_type else 93
    if data_type.startswith("INTERVAL"):
        return -103 if "YEAR" in data_type else -104
    return _JDBC.get(data_type, 1111)


_DAY_US = 86_400_000_000
_MONTH_US = _DAY_US * 365.25 / 12
"""Debezium's month for MicroDuration: 365.25 / 12 days."""


def _ds_micros(value: Any) -> int:
    """INTERVAL DAY TO SECOND: a ``timedelta`` (python-oracledb) in microseconds."""
    if not isinstance(value, dt.timedelta):
        raise TypeError(f"not an INTERVAL DAY TO SECOND: {value!r}")
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def _iso(years: int, months: int, days: int, hours: int, minutes: int, micros: int) -> str:
    """Debezium's ``Interval.toIsoString``: ``P<y>Y<m>M<d>DT<h>H<m>M<s>S``, each part carrying
    the interval's sign, seconds as ``BigDecimal.stripTrailingZeros().toPlainString()``."""
    seconds = Decimal(micros).scaleb(-6)
    text = format(seconds.normalize(), "f") if micros else "0"
    return f"P{years}Y{months}M{days}DT{hours}H{minutes}M{text}S"


def _ds_iso(value: Any) -> str:
    """INTERVAL DAY TO SECOND as ISO-8601 text (``interval.handling.mode=string``): exact."""
    total = _ds_micros(value)
    sign = -1 if total < 0 else 1
    rest, micros = divmod(abs(total), 60_000_000)
    rest, minutes = divmod(rest, 60)
    days, hours = divmod(rest, 24)
    return _iso(0, 0, sign * days, sign * hours, sign * minutes, sign * micros)


def _ym_iso(value: Any) -> str:
    """INTERVAL YEAR TO MONTH as ISO-8601 text (``interval.handling.mode=string``): exact."""
    years, months = (value.years, value.months) if hasattr(value, "years") else value
    return _iso(int(years), int(months), 0, 0, 0, 0)


def _ym_micros(value: Any) -> int:
    """INTERVAL YEAR TO MONTH: python-oracledb's ``IntervalYM(years, months)`` (or a
    ``(years, months)`` pair) in microseconds, a month being 365.25 / 12 days."""
    years, months = (value.years, value.months) if hasattr(value, "years") else value
    return round((int(years) * 12 + int(months)) * _MONTH_US)


# --- SQL_REDO values ---------------------------------------------------------------------------

_DATE_FORMATS = {
    "YYYY-MM-DD HH24:MI:SS": "%Y-%m-%d %H:%M:%S",
    "YYYY-MM-DD": "%Y-%m-%d",
    "DD-MON-RR": "%d-%b-%y",
    "DD-MON-YYYY HH24:MI:SS": "%d-%b-%Y %H:%M:%S",
}


def _timestamp_text(text: str) -> dt.datetime:
    """``YYYY-MM-DD HH24:MI:SS.FF`` (the session's NLS_TIMESTAMP_FORMAT); an empty fraction
    (``'2020-02-01 00:00:00.'``, as LogMiner prints a zero fraction) is allowed."""
    text = text.strip()
    main, _, fraction = text.partition(".")
    if " " in fraction:  # a zone after the fraction: TO_TIMESTAMP_TZ
        fraction, _, zone = fraction.partition(" ")
    else:
        zone = ""
    base = dt.datetime.strptime(main, "%Y-%m-%d %H:%M:%S")
    micros = int((fraction + "000000")[:6]) if fraction else 0
    value = base.replace(microsecond=micros)
    if zone:
        sign = -1 if zone.startswith("-") else 1
        hours, _, minutes = zone.lstrip("+-").partition(":")
        offset = dt.timedelta(hours=int(hours), minutes=int(minutes or 0)) * sign
        value = value.replace(tzinfo=dt.timezone(offset))
    return value


_DS = re.compile(r"^([+-])?(\d+) (\d+):(\d+):(\d+)(?:\.(\d*))?$")
_YM = re.compile(r"^([+-])?(\d+)-(\d+)$")


def _ds_text(text: str) -> dt.timedelta:
    """``+DD HH:MI:SS.FFFFFF`` (``TO_DSINTERVAL``) as a ``timedelta``."""
    match = _DS.match(text.strip())
    if match is None:
        raise ValueError(f"not an INTERVAL DAY TO SECOND literal: {text!r}")
    sign, days, hours, minutes, seconds, fraction = match.groups()
    micros = int(((fraction or "") + "000000")[:6])
    value = dt.timedelta(
        days=int(days), hours=int(hours), minutes=int(minutes), seconds=int(seconds)
    ) + dt.timedelta(microseconds=micros)
    return -value if sign == "-" else value


def _ym_text(text: str) -> tuple[int, int]:
    """``+YY-MM`` (``TO_YMINTERVAL``) as ``(years, months)``, both signed."""
    match = _YM.match(text.strip())
    if match is None:
        raise ValueError(f"not an INTERVAL YEAR TO MONTH literal: {text!r}")
    sign = -1 if match.group(1) == "-" else 1
    return sign * int(match.group(2)), sign * int(match.group(3))


def _unistr(text: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\" and text[i + 1 : i + 2] == "\\":
            out.append("\\")
            i += 2
        elif text[i] == "\\":
            out.append(chr(int(text[i + 1 : i + 5], 16)))
            i += 5
        else:
            out.append(text[i])
            i += 1
    joined = "".join(out)
    return joined.encode("utf-16", "surrogatepass").decode("utf-16")


def _function(value: RedoFunction) -> Any:
    name, args = value.name, value.args
    texts = [redo_python(a) for a in args]
    if name in ("EMPTY_CLOB", "EMPTY_BLOB"):
        return "" if name == "EMPTY_CLOB" else b""
    if any(t is None for t in texts):
        return None
    if name == "HEXTORAW":
        return bytes.fromhex(str(texts[0]))
    if name == "UNISTR":
        return _unistr(str(texts[0]))
    if name == "TO_DATE":
        fmt = _DATE_FORMATS.get(
            str(texts[1]).upper() if len(texts) > 1 else "YYYY-MM-DD HH24:MI:SS"
        )
        if fmt is None:
            raise ValueError(f"TO_DATE format {texts[1]!r} is not one the agent sets")
        return dt.datetime.strptime(str(texts[0]), fmt)
    if name in ("TO_TIMESTAMP", "TO_TIMESTAMP_TZ"):
        return _timestamp_text(str(texts[0]))
    if name == "TO_DSINTERVAL":
        return _ds_text(str(texts[0]))
    if name == "TO_YMINTERVAL":
        return _ym_text(str(texts[0]))
    raise ValueError(f"SQL_REDO function {name} is not supported")


def redo_python(value: RedoValue) -> Any:
    """A ``SQL_REDO`` value as the Python value python-oracledb would return for it: literal
    text stays text (the column's converter parses numbers), functions are evaluated."""
    if value is None or isinstance(value, str):
        return value
    return _function(value)
