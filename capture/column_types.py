"""Engine-neutral pieces of the column-type mappings every database agent shares.

Each agent maps its database's types to Debezium Connect schemas in its own package
(:mod:`capture.postgresql.types`, :mod:`capture.mysql.types`); what those mappings have in common
lives here: the :class:`ColumnType` they produce, the two ways a value can fail
(:class:`ValueConversionError`, :class:`Unrepresentable`), and the value encodings Debezium uses
whatever the source (Connect ``Decimal`` bytes, JSON floats, base64, epoch days and UTC
timestamps in the proleptic Gregorian calendar). No database driver is imported here.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal, localcontext
from typing import Any, Final

from bronze import connect_schema as cs
from pipeline.errors import CaptureError

__all__ = [
    "binary_column",
    "ValueModes",
    "ColumnType",
    "US_PER_DAY",
    "Unrepresentable",
    "ValueConversionError",
    "b64",
    "civil_from_days",
    "days_from_civil",
    "decimal_bytes",
    "format_utc",
    "iso_fraction",
    "json_float",
]

US_PER_DAY: Final = 86_400_000_000
"""Microseconds in a day (no leap seconds, as in Connect and java.time)."""


class ValueConversionError(CaptureError):
    """A column value does not parse as its declared type."""


class Unrepresentable(ValueError):  # noqa: N818 - a value, not an error of the agent
    """A value that parses but has no representation in its column's Connect type (C1).

    A :class:`ValueError` so that the landing fast path (which catches those) falls back to the
    per-column path, where :class:`capture.captured_table.CapturedTable` writes the field as
    null and records ``reason`` and ``text`` in the ``__medallion.unrepresentable`` header.

    Attributes:
        reason: Why, naming the type and the handling mode.
        text: The database's text form of the value; None when the converter's input is that
            text (PostgreSQL), which the caller then uses.
    """

    def __init__(self, reason: str, text: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.text = text


@dataclass(frozen=True, slots=True)
class ColumnType:
    """How one column is represented in Debezium records.

    Attributes:
        schema: The Connect schema of the column, required (``optional`` False); use
            :meth:`field_schema` for a struct field.
        convert: Database value -> JSON-ready Debezium value.
        type_name: The database's type name (for messages).
        is_binary: The Connect type is BYTES (the TOAST placeholder must then be bytes too).
    """

    schema: dict[str, Any]
    convert: Callable[[Any], Any]
    type_name: str
    is_binary: bool = False
    known: bool = field(default=True)

    def field_schema(self, name: str, optional: bool) -> dict[str, Any]:
        """The struct field for a column called ``name``."""
        return cs.field(name, self.schema, optional=optional)


def b64(data: bytes) -> str:
    """Base64 text of ``data``, as Connect's JSON converter writes BYTES."""
    return base64.b64encode(data).decode("ascii")


_BINARY_ENCODERS: Final[dict[str, Callable[[bytes], str]]] = {
    "bytes": b64,
    "base64": b64,
    "base64-url-safe": lambda d: base64.urlsafe_b64encode(d).decode("ascii"),
    "hex": bytes.hex,
}


def binary_column(mode: str, type_name: str) -> ColumnType:
    """A binary column under ``binary.handling.mode`` ``mode``: BYTES (base64 in JSON) for
    ``bytes``, else a STRING in base64, URL-safe base64 or hex."""
    encode = _BINARY_ENCODERS[mode]
    schema = cs.primitive("bytes" if mode == "bytes" else "string")
    return ColumnType(schema, lambda v: encode(bytes(v)), type_name, is_binary=mode == "bytes")


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
    return b64(_unscaled_bytes(unscaled))


def days_from_civil(year: int, month: int, day: int) -> int:
    """Days since 1970-01-01 of a proleptic Gregorian date (astronomical year numbering)."""
    # Howard Hinnant's days_from_civil: proleptic Gregorian, any year (astronomical numbering).
    year -= month <= 2
    era = year // 400  # Python floors: Hinnant's C version adjusts for truncation instead
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146097 + doe - 719468


def civil_from_days(days: int) -> tuple[int, int, int]:
    """The proleptic Gregorian ``(year, month, day)`` of ``days`` since 1970-01-01."""
    days += 719468
    era = days // 146097
    doe = days - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    y = yoe + era * 400
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    d = doy - (153 * mp + 2) // 5 + 1
    m = mp + (3 if mp < 10 else -9)
    return y + (m <= 2), m, d


def iso_fraction(micros: int) -> str:
    """The fraction of a second as java.time's ISO formatters print it (``""``, ``.123``,
    ``.123456``)."""
    # java.time's ISO formatters print the fraction in groups of three digits.
    if micros == 0:
        return ""
    if micros % 1000 == 0:
        return f".{micros // 1000:03d}"
    return f".{micros:06d}"


def format_utc(epoch_micros: int) -> str:
    """``io.debezium.time.ZonedTimestamp`` text of an instant in microseconds since the epoch."""
    days, rest = divmod(epoch_micros, US_PER_DAY)
    y, mo, d = civil_from_days(days)
    seconds, micros = divmod(rest, 1_000_000)
    hh, rem = divmod(seconds, 3600)
    mm, ss = divmod(rem, 60)
    year = f"{y:04d}" if 0 <= y <= 9999 else f"{y:+05d}"
    return f"{year}-{mo:02d}-{d:02d}T{hh:02d}:{mm:02d}:{ss:02d}{iso_fraction(micros)}Z"


def json_float(value: float) -> float | str:
    """A float for a JSON FLOAT32/FLOAT64 field: NaN and ±Infinity as the strings Jackson
    (Kafka's JsonConverter) writes, since JSON numbers cannot hold them (orjson would write
    null, a silent NULL)."""
    if value - value == 0.0:
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


@dataclass(frozen=True, slots=True)
class ValueModes:
    """``decimal.handling.mode``, ``time.precision.mode`` and ``binary.handling.mode`` of a
    source whose agent needs no other value-handling option (SQL Server, Oracle)."""

    decimal: str = "precise"
    time_precision: str = "adaptive"
    binary: str = "bytes"

    @classmethod
    def from_config(cls, config: Any) -> ValueModes:
        """Read the three modes off a source config."""
        return cls(
            decimal=str(config.decimal_handling_mode),
            time_precision=str(config.time_precision_mode),
            binary=str(config.binary_handling_mode),
        )
