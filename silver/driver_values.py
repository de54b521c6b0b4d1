"""Debezium values decoded in Python exactly as :mod:`silver.types` decodes them in Spark.

The driver decoder (:mod:`silver.driver_decode`) parses each event's JSON here and decodes the
fields of its image with the functions below. Each one mirrors one Spark step: ``from_json``'s
parse of a token into the field's :func:`silver.types.json_type` (Jackson's rules, as Spark's
``JacksonParser`` applies them: a token of the wrong kind is NULL for that field only, an
integer out of range is NULL, a ``tinyint`` takes 128..255 as Java's byte cast does), then the
decode of :mod:`silver.types` (``unbase64``, the two's-complement decimals, ``timestamp_add``
from the epoch, ...).

Where the two could differ and this module cannot tell how, it raises :class:`Fallback`
rather than guess: the whole part is then decoded by Spark, as before. That covers JSON that
Jackson and Python's ``json`` read differently (duplicate keys, unquoted ``NaN``, single
quotes, lone surrogates, trailing text, numbers of more than 1,000 characters), the text Spark
gives a JSON fraction or object in a string column (Jackson re-writes it through a double), a
``float`` that a double rounding could change, base64 that is not canonical (Spark's MIME
decoder skips or refuses what Python's would not), a ``ZonedTimestamp`` that is not
ISO-8601 with an offset, and arithmetic that overflows (Spark fails the job).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import struct
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, Final

__all__ = [
    "Fallback",
    "FloatText",
    "canonical_key",
    "parse",
    "token_text",
]

_JSON_NUMBER_CHARS: Final = 1000
"""Jackson's ``StreamReadConstraints.maxNumberLength``: a longer number fails the record."""

_SURROGATE: Final = re.compile("[\ud800-\udfff]")
_BASE64: Final = re.compile(r"(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
_INT32: Final = (-(2**31), 2**31 - 1)
_INT64: Final = (-(2**63), 2**63 - 1)


class Fallback(Exception):  # noqa: N818 - a signal, not an error: Spark decodes instead
    """A value whose Spark decode this module cannot reproduce exactly (Spark decodes it)."""


class FloatText(str):
    """A JSON number with a fraction or exponent, as its literal text (a double only on use)."""

    __slots__ = ()


def _int(text: str) -> int:
    # "-0" is 0 to Jackson (its text "0"); a text column would read it differently if Spark
    # ever kept literal text, so it is not guessed.
    if len(text) > _JSON_NUMBER_CHARS or text == "-0":
        raise Fallback(f"integer literal {text[:20]}")
    return int(text)


def _float(text: str) -> FloatText:
    if len(text) > _JSON_NUMBER_CHARS:
        raise Fallback("number literal longer than Jackson reads")
    return FloatText(text)


def _constant(name: str) -> Any:
    raise Fallback(f"unquoted {name}")


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    found = dict(pairs)
    if len(found) != len(pairs):
        # Spark's struct takes the last, its map<string,string> fails the whole query.
        raise Fallback("duplicate key in a JSON object")
    return found


_DECODER: Final = json.JSONDecoder(
    parse_float=_float,
    parse_int=_int,
    parse_constant=_constant,
    object_pairs_hook=_object,
)


def parse(text: str) -> Any:
    """The JSON value of ``text`` with number literals kept exact.

    Returns:
        dict/list/str/bool/None, ``int`` for integer literals, :class:`FloatText` for the rest.

    Raises:
        Fallback: Jackson (with Spark's options) and Python may read the text differently.
    """
    try:
        return _DECODER.decode(text)
    except Fallback:
        raise
    except (ValueError, RecursionError) as exc:
        raise Fallback(f"JSON Python does not read: {type(exc).__name__}") from exc


def checked(text: str) -> str:
    """``text`` if it holds no lone surrogate (Jackson and Python spell those differently)."""
    if not text.isascii() and _SURROGATE.search(text):
        raise Fallback("lone surrogate in a JSON string")
    return text


def token_text(token: Any) -> str | None:
    """What Spark's ``from_json`` gives a ``string`` column (or map value) for ``token``.

    A JSON string is its content; an integer or boolean its canonical text (Jackson copies the
    token through a generator); null is NULL.

    Raises:
        Fallback: A fraction (re-written through a double), an object or an array.
    """
    if token is None:
        return None
    if isinstance(token, bool):
        return "true" if token else "false"
    if isinstance(token, FloatText):
        raise Fallback("text of a JSON fraction")
    if isinstance(token, str):
        return checked(token)
    if isinstance(token, int):
        return str(token)
    raise Fallback("text of a JSON object or array")


def _integer(token: Any) -> int | None:
    """An integer token (not a boolean), else None (the kind Spark refuses for an integer)."""
    if isinstance(token, int) and not isinstance(token, bool):
        return token
    return None


def _in_range(low: int, high: int) -> Callable[[Any], int | None]:
    def decode(token: Any) -> int | None:
        value = _integer(token)
        return value if value is not None and low <= value <= high else None

    return decode


def _byte(token: Any) -> int | None:
    # Jackson's getByteValue takes [-128, 255] and casts to a Java byte: 200 is -56.
    value = _integer(token)
    if value is None or not -128 <= value <= 255:
        return None
    return value - 256 if value > 127 else value


_NON_NUMBERS: Final[Mapping[str, float]] = {
    "NaN": float("nan"),
    "+INF": float("inf"),
    "+Infinity": float("inf"),
    "Infinity": float("inf"),
    "-INF": float("-inf"),
    "-Infinity": float("-inf"),
}
"""The strings Spark's JSON parser reads as non-finite floats (``allowNonNumericNumbers``)."""


def _double(token: Any) -> float | None:
    if isinstance(token, bool) or token is None:
        return None
    if isinstance(token, FloatText):
        return float(token)
    if isinstance(token, int):
        try:
            return float(token)
        except OverflowError as exc:  # Java: Infinity; not guessed
            raise Fallback("integer beyond a double") from exc
    if isinstance(token, str):
        return _NON_NUMBERS.get(token)
    return None


_FLOAT_MIN_NORMAL: Final = 2.0**-126
_FLOAT_OVERFLOW: Final = 2.0**128 - 2.0**103
"""Halfway between the largest float and 2^128: a double at or above it rounds to infinity."""
_SUBNORMAL_STEPS: Final = 2.0**149
"""Subnormal floats are the multiples of 2^-149."""
_MIDPOINT_BITS: Final = 1 << 28
"""A double whose 29 bits below a float's significand are 100...0 is a float midpoint."""


def _float32(token: Any) -> float | None:
    value = _double(token)
    if value is None or value != value or value in (float("inf"), float("-inf")):
        return value
    magnitude = abs(value)
    if magnitude >= _FLOAT_OVERFLOW:
        if magnitude == _FLOAT_OVERFLOW:
            raise Fallback("float literal halfway between the largest float and infinity")
        return value * float("inf")  # past halfway to 2^128: infinity, either way
    # Jackson may round the literal to a float once, where the double rounds it twice: the two
    # differ only for a double exactly halfway between two floats, which is left to Spark.
    if magnitude < _FLOAT_MIN_NORMAL:
        steps = magnitude * _SUBNORMAL_STEPS  # exact: a power of two
        if steps - int(steps) == 0.5:
            raise Fallback("subnormal float literal at a double rounding midpoint")
    elif struct.unpack("<Q", struct.pack("<d", value))[0] & ((1 << 29) - 1) == _MIDPOINT_BITS:
        raise Fallback("float literal at a double rounding midpoint")
    rounded: float = struct.unpack("<f", struct.pack("<f", value))[0]
    return rounded


def _boolean(token: Any) -> bool | None:
    return token if isinstance(token, bool) else None


def _string(token: Any) -> str | None:
    return token_text(token)


def base64_bytes(token: Any) -> bytes | None:
    """``unbase64`` of a ``bytes`` field's token (canonical base64 only)."""
    if token is None:
        return None
    if not isinstance(token, str) or not _BASE64.fullmatch(token):
        # Spark's MIME decoder skips foreign characters and fails on some endings.
        raise Fallback("bytes that are not canonical base64")
    return binascii.a2b_base64(token)


def _unscaled(token: Any) -> int | None:
    data = base64_bytes(token)
    return None if data is None else int.from_bytes(data, "big", signed=True)


def plain_text(unscaled: int, scale: int) -> str:
    """``silver.types._plain_text``: the unscaled integer's plain text at ``scale``."""
    magnitude = str(abs(unscaled))
    sign = "-" if unscaled < 0 else ""
    if scale <= 0:
        return sign + ("0" if magnitude == "0" else magnitude + "0" * -scale)
    padded = magnitude.rjust(max(len(magnitude), scale + 1), "0")
    point = len(padded) - scale
    return f"{sign}{padded[:point]}.{padded[point:]}"


_LARGEST_SCALE: Final = 1000
"""A scale beyond this is not decoded here (Spark pads that many zeros, or fails)."""


def decimal_codec(scale: int, precision: int) -> Callable[[Any], Decimal | None]:
    """A ``Decimal`` field as ``decimal(precision, scale')``: NULL when too wide (refused)."""
    shift = max(scale, 0)  # a negative scale is an integer column of precision - scale digits
    limit = 10**precision

    def decode(token: Any) -> Decimal | None:
        unscaled = _unscaled(token)
        if unscaled is None:
            return None
        stored = unscaled * 10 ** (shift - scale)
        if abs(stored) >= limit:
            return None
        return Decimal(f"{stored}E-{shift}")  # exact: no context rounds a constructor

    return decode


def decimal_text_codec(scale: int) -> Callable[[Any], str | None]:
    """A ``Decimal`` wider than 38 digits: its exact plain text."""
    if abs(scale) > _LARGEST_SCALE:
        raise Fallback(f"decimal scale {scale}")

    def decode(token: Any) -> str | None:
        unscaled = _unscaled(token)
        return None if unscaled is None else plain_text(unscaled, scale)

    return decode


def variable_scale_decimal(token: Any) -> str | None:
    """``VariableScaleDecimal`` ``{scale, value}``: the exact plain text (NULL if either is)."""
    if token is None:
        return None
    if not isinstance(token, dict):
        return None  # not an object: NULL, refused with the token's text
    raw_scale, value = token.get("scale"), token.get("value")
    if not isinstance(value, str) and value is not None:
        raise Fallback("VariableScaleDecimal value that is not a string")
    scale = _in_range(*_INT32)(raw_scale)
    unscaled = _unscaled(value)
    if scale is None or unscaled is None:
        raise Fallback("VariableScaleDecimal without its scale or value")  # text: the object
    if abs(scale) > _LARGEST_SCALE:
        raise Fallback(f"VariableScaleDecimal scale {scale}")
    return plain_text(unscaled, scale)


def _checked_int64(value: int) -> int:
    if not _INT64[0] <= value <= _INT64[1]:
        raise Fallback("timestamp beyond int64 microseconds (Spark fails the job)")
    return value


def _scaled(low: int, high: int, factor: int = 1, divisor: int = 1) -> Callable[[Any], int | None]:
    """An integer token in [low, high], times ``factor``, floor-divided by ``divisor``."""
    read = _in_range(low, high)

    def decode(token: Any) -> int | None:
        value = read(token)
        if value is None:
            return None
        return _checked_int64(value * factor // divisor)

    return decode


_ZONED: Final = re.compile(
    r"([-+]?[0-9]{4,6})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})"
    r"(?:\.([0-9]{1,9}))?(Z|[+-][0-9]{2}:[0-9]{2})"
)
"""Debezium's ``ZonedTimestamp`` text (ISO-8601 with an offset; a signed year of up to six
digits, as Spark's parser takes it: PostgreSQL BC timestamps); ASCII digits only."""


def _epoch_day(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date of any year (year 0 is 1 BC).

    Raises:
        Fallback: Not a date (Spark's cast gives NULL; not guessed).
    """
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    lengths = (31, 29 if leap else 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
    if not 1 <= month <= 12 or not 1 <= day <= lengths[month - 1]:
        raise Fallback("ZonedTimestamp that is not a valid date")
    # Howard Hinnant's days_from_civil: eras of 400 years, March-based years.
    y = year - (month <= 2)
    era = y // 400
    year_of_era = y - era * 400
    day_of_year = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    day_of_era = year_of_era * 365 + year_of_era // 4 - year_of_era // 100 + day_of_year
    return era * 146097 + day_of_era - 719468


TIMESTAMP_POSITIVE_INFINITY_MICROS: Final = 9223372036825200000
TIMESTAMP_NEGATIVE_INFINITY_MICROS: Final = -9223372036832400000


def zoned_timestamp(token: Any) -> int | None:
    """A ``ZonedTimestamp``'s UTC instant in microseconds (Spark's cast truncates nanoseconds)."""
    if token is None:
        return None
    if not isinstance(token, str):
        raise Fallback("ZonedTimestamp that is not a JSON string")
    if token == "infinity":
        return TIMESTAMP_POSITIVE_INFINITY_MICROS
    if token == "-infinity":
        return TIMESTAMP_NEGATIVE_INFINITY_MICROS
    found = _ZONED.fullmatch(token)
    if found is None:
        raise Fallback("ZonedTimestamp text other than ISO-8601 with an offset")
    year, month, day, hour, minute, second, fraction, zone = found.groups()
    if zone == "Z":
        offset = 0
    else:
        hours, minutes = int(zone[1:3]), int(zone[4:6])
        if hours > 18 or minutes > 59:
            raise Fallback("ZonedTimestamp offset")
        offset = (hours * 60 + minutes) * (-60 if zone[0] == "-" else 60)
    if int(hour) > 23 or int(minute) > 59 or int(second) > 59:
        raise Fallback("ZonedTimestamp that is not a valid time of day")
    days = _epoch_day(int(year), int(month), int(day))
    seconds = days * 86_400 + int(hour) * 3600 + int(minute) * 60 + int(second) - offset
    return seconds * 1_000_000 + int((fraction or "").ljust(6, "0")[:6])


FIELD_DECODERS: Final[Mapping[str, Callable[[Any], Any]]] = {
    "int8": _byte,
    "int16": _in_range(-(2**15), 2**15 - 1),
    "int32": _in_range(*_INT32),
    "int64": _in_range(*_INT64),
    "float32": _float32,
    "float64": _double,
    "boolean": _boolean,
    "string": _string,
    "bytes": base64_bytes,
}
"""Physical types (after JsonConverter's ``float``/``double`` names) decoded as such."""

DATE_DAYS: Final = _in_range(*_INT32)
MILLIS_OF_DAY: Final = _scaled(*_INT32, factor=1000)
MICROS_OF_DAY: Final = _in_range(*_INT64)
NANOS_OF_DAY: Final = _scaled(*_INT64, divisor=1000)
MILLIS_TIMESTAMP: Final = _scaled(*_INT64, factor=1000)
MICROS_TIMESTAMP: Final = _in_range(*_INT64)
NANOS_TIMESTAMP: Final = _scaled(*_INT64, divisor=1000)


# --- record keys ---------------------------------------------------------------------------------

_SHORT_ESCAPES: Final = {'"': '\\"', "\\": "\\\\"}


def _json_string(text: str) -> str:
    """``text`` as Spark's ``to_json`` (Jackson) writes it; control characters not guessed."""
    checked(text)
    if any(c < " " for c in text):
        raise Fallback("control character in a key")
    if '"' in text or "\\" in text:
        text = "".join(_SHORT_ESCAPES.get(c, c) for c in text)
    return f'"{text}"'


def _key_map(fields: Mapping[str, Any]) -> str:
    """``to_json`` of the ``map<string,string>`` ``from_json`` makes of a key object."""
    parts = []
    for name, token in fields.items():
        text = token_text(token)
        parts.append(f"{_json_string(name)}:{'null' if text is None else _json_string(text)}")
    return "{" + ",".join(parts) + "}"


def canonical_key(text: str | None) -> str | None:
    """``silver.job._canonical_key``: one spelling per record key.

    An object's fields as strings (a ``{schema, payload}`` wrapper unwrapped); a plain string
    or integer key its JSON text.

    Raises:
        Fallback: A key Spark could spell differently (fractions, nested values, whitespace
            around a scalar, JSON Python reads differently...).
    """
    if text is None:
        return None
    value = parse(text)
    if isinstance(value, dict):
        schema, payload = value.get("schema"), value.get("payload")
        if payload is not None and schema is not None:
            if not isinstance(payload, dict):
                raise Fallback("wrapped key whose payload is not an object")
            return _key_map(payload)
        return _key_map(value)
    if value is None:
        return None  # "null": no key
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise Fallback("key that is neither an object, a string nor an integer")
    if text != text.strip():
        raise Fallback("key with whitespace around it")
    checked(text)
    return text


def header_key(headers: list[dict[str, Any]] | None, name: str) -> str | None:
    """The canonical key the first header ``name`` holds (None without one)."""
    for header in headers or ():
        if header is not None and header.get("key") == name:
            return canonical_key(header.get("value"))
    return None


def base64_of(data: bytes) -> str:
    """The base64 text of ``data`` (the form Debezium writes a placeholder in a bytes field)."""
    return base64.b64encode(data).decode("ascii")
