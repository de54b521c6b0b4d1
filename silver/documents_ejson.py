"""MongoDB Extended JSON, in every dialect Debezium writes, read into one canonical form.

Debezium's MongoDB connector writes documents (``after``, ``before``, ``patch``, ``filter``,
``updateDescription.updatedFields``) and the key's ``id`` as JSON text, in a dialect that depends
on its version and settings (the Java driver's ``JsonMode``):

* Extended JSON v1 *strict*: documents of Debezium 1.x, and ``after``/``before`` under
  ``json.serialization.mode=legacy`` (the default of 2.x and 3.x). Int32 and Double are plain JSON
  numbers (a Double always with ``.`` or ``E``, non-finite ones as bare ``NaN``/``Infinity``),
  Int64 is ``{"$numberLong": "n"}``, a date ``{"$date": <ms>}``, binary
  ``{"$binary": "<base64>", "$type": "<hex>"}``, a regex ``{"$regex": .., "$options": ..}``.
* Extended JSON v2 *relaxed*: keys since 1.7, ``updatedFields`` under ``legacy``; Int32 **and
  Int64** are plain numbers, dates ``{"$date": "<ISO-8601>"}`` (``{"$numberLong"}`` outside years
  1970-9999), binary ``{"$binary": {"base64", "subType"}}``.
* Extended JSON v2 *canonical*: ``json.serialization.mode=extended``; every number is wrapped.
* Debezium 1.2's key serializer (the legacy ``JSONSerializers.getStrict()``): strict-like, with
  ``" : "`` separators and ``$type`` possibly a number.

:func:`parse` reads all of them into plain Python values in **canonical Extended JSON v2** form:
documents are ``dict`` (field order kept), arrays ``list``, strings/booleans/null as themselves,
and every other BSON value a :class:`Scalar`, a ``dict`` holding its canonical wrapper
(``{"$numberLong": "5"}``, ``{"$date": {"$numberLong": "1700000000000"}}``...). Two values are the
same BSON value exactly when they compare equal, and :func:`dumps` writes the canonical text
silver stores. The one ambiguity no reader can resolve is the relaxed dialect's plain integer
(Int32 or Int64?): it is read as Int32 (as the Java driver reads it), as a :class:`PlainInt`
so that :mod:`silver.documents_apply` can keep the Int64 type of the value it replaces.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import json
import math
from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from pipeline.errors import InternalError

__all__ = [
    "EjsonError",
    "PlainInt",
    "Scalar",
    "dumps",
    "id_text",
    "is_document",
    "java_double_text",
    "parse",
    "parse_document",
    "type_name",
]

_INT32_MIN, _INT32_MAX = -(2**31), 2**31 - 1
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_MS: Final = dt.timedelta(milliseconds=1)


class EjsonError(ValueError):
    """Text that is not valid (Extended) JSON, or a type wrapper with invalid content."""


class Scalar(dict[str, Any]):
    """A BSON value that is not a document, array, string, boolean or null.

    Holds the value's canonical Extended JSON v2 wrapper, e.g. ``{"$numberInt": "5"}``; being a
    ``dict``, it serialises as such, and it compares equal to the same wrapper.
    """

    __slots__ = ()


class PlainInt(Scalar):
    """An Int32 read from a plain JSON integer: in the relaxed dialect it may have been an Int64."""

    __slots__ = ()


def is_document(value: Any) -> bool:
    """Whether ``value`` is a document (not a :class:`Scalar` wrapper)."""
    return isinstance(value, dict) and not isinstance(value, Scalar)


def type_name(value: Any) -> str:
    """The BSON type name of a parsed value, for messages."""
    if isinstance(value, Scalar):
        return next(iter(value)).lstrip("$")
    if isinstance(value, dict):
        return "document"
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "bool"
    return "null" if value is None else type(value).__name__


# --- numbers -----------------------------------------------------------------------------------


def java_double_text(value: float) -> str:
    """``Double.toString(value)`` as Java 19+ writes it (shortest digits that round-trip).

    Plain notation for magnitudes in [1e-3, 1e7) with at least one fraction digit (``100.0``),
    else computerized scientific notation (``1.0E20``, ``1.0E-4``); ``NaN``, ``Infinity``.
    """
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    exact = Decimal(repr(abs(value))).normalize()
    _, digit_tuple, exponent = exact.as_tuple()
    digits = "".join(map(str, digit_tuple))
    if not isinstance(exponent, int):
        raise InternalError("silver.documents_ejson: expected isinstance(exponent, int)")
    point = len(digits) + exponent  # digits before the decimal point
    if 1e-3 <= abs(value) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        if point >= len(digits):
            return f"{sign}{digits}{'0' * (point - len(digits))}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"


def _int32(value: int) -> Scalar:
    return Scalar({"$numberInt": str(value)})


def _int64(value: int) -> Scalar:
    return Scalar({"$numberLong": str(value)})


def _double(value: float) -> Scalar:
    return Scalar({"$numberDouble": java_double_text(value)})


def _plain_int(text: str) -> Scalar:
    value = int(text)
    if _INT32_MIN <= value <= _INT32_MAX:
        return PlainInt({"$numberInt": str(value)})
    if _INT64_MIN <= value <= _INT64_MAX:
        return _int64(value)
    return _double(float(value))


def _plain_float(text: str) -> Scalar:
    return _double(float(text))


def _constant(text: str) -> Scalar:
    # Java's strict writer prints non-finite doubles as bare NaN / Infinity / -Infinity.
    return _double(float(text))


def _integer(value: Any, what: str) -> int:
    """An integer from a plain JSON number or an Int32/Int64 wrapper."""
    if isinstance(value, Scalar):
        for tag in ("$numberInt", "$numberLong"):
            if tag in value:
                return int(value[tag])
        if "$numberDouble" in value:
            number = float(value["$numberDouble"])
            if number.is_integer():
                return int(number)
    if isinstance(value, str) and value.lstrip("-").isdigit():
        return int(value)
    raise EjsonError(f"{what} must be an integer, got {json.dumps(value)}")


# --- type wrappers -----------------------------------------------------------------------------


def _number_int(d: Mapping[str, Any]) -> Scalar:
    value = _integer(d["$numberInt"], "$numberInt")
    if not _INT32_MIN <= value <= _INT32_MAX:
        raise EjsonError(f"$numberInt {value} is outside the Int32 range")
    return _int32(value)


def _number_long(d: Mapping[str, Any]) -> Scalar:
    value = _integer(d["$numberLong"], "$numberLong")
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise EjsonError(f"$numberLong {value} is outside the Int64 range")
    return _int64(value)


def _number_double(d: Mapping[str, Any]) -> Scalar:
    text = d["$numberDouble"]
    if not isinstance(text, str):
        raise EjsonError(f"$numberDouble must be a string, got {json.dumps(text)}")
    try:
        return _double(float(text))
    except ValueError:
        raise EjsonError(f"$numberDouble {text!r} is not a number") from None


def _number_decimal(d: Mapping[str, Any]) -> Scalar:
    text = d["$numberDecimal"]
    if not isinstance(text, str):
        raise EjsonError(f"$numberDecimal must be a string, got {json.dumps(text)}")
    try:
        Decimal(text)
    except InvalidOperation:
        raise EjsonError(f"$numberDecimal {text!r} is not a decimal") from None
    # Decimal128 keeps its exponent (1.0 and 1.00 are distinct representations): kept as written.
    return Scalar({"$numberDecimal": text})


def _iso_millis(text: str) -> int:
    try:
        moment = dt.datetime.fromisoformat(text.replace("z", "Z"))
    except ValueError:
        raise EjsonError(f"$date {text!r} is not an ISO-8601 date-time") from None
    if moment.tzinfo is None:
        raise EjsonError(f"$date {text!r} has no UTC offset")
    return (moment - _EPOCH) // _MS


def _date(d: Mapping[str, Any]) -> Scalar:
    raw = d["$date"]
    millis = _iso_millis(raw) if isinstance(raw, str) else _integer(raw, "$date")
    if not _INT64_MIN <= millis <= _INT64_MAX:
        raise EjsonError(f"$date {millis} ms is outside the Int64 range")
    return Scalar({"$date": {"$numberLong": str(millis)}})


def _oid(d: Mapping[str, Any]) -> Scalar:
    text = d["$oid"]
    if not isinstance(text, str) or len(text) != 24:
        raise EjsonError(f"$oid must be 24 hex digits, got {json.dumps(text)}")
    try:
        bytes.fromhex(text)
    except ValueError:
        raise EjsonError(f"$oid {text!r} is not hexadecimal") from None
    return Scalar({"$oid": text.lower()})


def _binary_scalar(data: Any, subtype: Any) -> Scalar:
    if not isinstance(data, str):
        raise EjsonError(f"$binary base64 must be a string, got {json.dumps(data)}")
    try:
        raw = base64.b64decode(data, validate=True)
    except binascii.Error:
        raise EjsonError(f"$binary {data!r} is not base64") from None
    if isinstance(subtype, str):
        try:
            code = int(subtype, 16)
        except ValueError:
            raise EjsonError(f"$binary subtype {subtype!r} is not hexadecimal") from None
    else:
        code = _integer(subtype, "$binary subtype")
    if not 0 <= code <= 0xFF:
        raise EjsonError(f"$binary subtype {code} is outside 0..255")
    return Scalar(
        {"$binary": {"base64": base64.b64encode(raw).decode("ascii"), "subType": f"{code:02x}"}}
    )


def _binary_v1(d: Mapping[str, Any]) -> Scalar:
    return _binary_scalar(d["$binary"], d["$type"])


def _binary_v2(d: Mapping[str, Any]) -> Scalar:
    inner = d["$binary"]
    if not isinstance(inner, dict) or set(inner) != {"base64", "subType"}:
        raise EjsonError(f"$binary must hold base64 and subType, got {json.dumps(inner)}")
    return _binary_scalar(inner["base64"], inner["subType"])


def _uuid(d: Mapping[str, Any]) -> Scalar:
    text = d["$uuid"]
    try:
        raw = bytes.fromhex(str(text).replace("-", ""))
    except ValueError:
        raise EjsonError(f"$uuid {text!r} is not hexadecimal") from None
    if len(raw) != 16:
        raise EjsonError(f"$uuid {text!r} is not 16 bytes")
    return _binary_scalar(base64.b64encode(raw).decode("ascii"), "04")


def _timestamp(d: Mapping[str, Any]) -> Scalar:
    inner = d["$timestamp"]
    if not isinstance(inner, dict) or set(inner) != {"t", "i"}:
        raise EjsonError(f"$timestamp must hold t and i, got {json.dumps(inner)}")
    t, i = _integer(inner["t"], "$timestamp t"), _integer(inner["i"], "$timestamp i")
    if not (0 <= t < 2**32 and 0 <= i < 2**32):
        raise EjsonError(f"$timestamp t={t} i={i} is outside 0..2^32-1")
    return Scalar({"$timestamp": {"t": t, "i": i}})


def _regex_scalar(pattern: Any, options: Any) -> Scalar:
    if not isinstance(pattern, str) or not isinstance(options, str):
        raise EjsonError("a regular expression needs a string pattern and options")
    return Scalar({"$regularExpression": {"pattern": pattern, "options": "".join(sorted(options))}})


def _regex_v1(d: Mapping[str, Any]) -> Scalar:
    return _regex_scalar(d["$regex"], d.get("$options", ""))


def _regex_v2(d: Mapping[str, Any]) -> Scalar:
    inner = d["$regularExpression"]
    if not isinstance(inner, dict) or set(inner) != {"pattern", "options"}:
        raise EjsonError(f"$regularExpression must hold pattern and options, got {inner!r}")
    return _regex_scalar(inner["pattern"], inner["options"])


def _flag(tag: str) -> Callable[[Mapping[str, Any]], Scalar]:
    def make(d: Mapping[str, Any]) -> Scalar:
        if _integer(d[tag], tag) != 1:
            raise EjsonError(f"{tag} must be 1")
        return Scalar({tag: 1})

    return make


def _undefined(d: Mapping[str, Any]) -> Scalar:
    if d["$undefined"] is not True:
        raise EjsonError("$undefined must be true")
    return Scalar({"$undefined": True})


def _text(tag: str) -> Callable[[Mapping[str, Any]], Scalar]:
    def make(d: Mapping[str, Any]) -> Scalar:
        if not isinstance(d[tag], str):
            raise EjsonError(f"{tag} must be a string")
        return Scalar({tag: d[tag]})

    return make


def _code_with_scope(d: Mapping[str, Any]) -> Scalar:
    if not isinstance(d["$code"], str) or not is_document(d["$scope"]):
        raise EjsonError("$code with $scope needs a string and a document")
    return Scalar({"$code": d["$code"], "$scope": d["$scope"]})


def _db_pointer(d: Mapping[str, Any]) -> Scalar:
    inner = d["$dbPointer"]
    if (
        not isinstance(inner, dict)
        or set(inner) != {"$ref", "$id"}
        or not isinstance(inner["$ref"], str)
        or not (isinstance(inner["$id"], Scalar) and "$oid" in inner["$id"])
    ):
        raise EjsonError("$dbPointer must hold a string $ref and an ObjectId $id")
    return Scalar({"$dbPointer": {"$ref": inner["$ref"], "$id": inner["$id"]}})


_WRAPPERS: Final[dict[frozenset[str], Callable[[Mapping[str, Any]], Scalar]]] = {
    frozenset({"$numberInt"}): _number_int,
    frozenset({"$numberLong"}): _number_long,
    frozenset({"$numberDouble"}): _number_double,
    frozenset({"$numberDecimal"}): _number_decimal,
    frozenset({"$date"}): _date,
    frozenset({"$oid"}): _oid,
    frozenset({"$binary", "$type"}): _binary_v1,
    frozenset({"$binary"}): _binary_v2,
    frozenset({"$uuid"}): _uuid,
    frozenset({"$timestamp"}): _timestamp,
    frozenset({"$regex", "$options"}): _regex_v1,
    frozenset({"$regex"}): _regex_v1,
    frozenset({"$regularExpression"}): _regex_v2,
    frozenset({"$minKey"}): _flag("$minKey"),
    frozenset({"$maxKey"}): _flag("$maxKey"),
    frozenset({"$undefined"}): _undefined,
    frozenset({"$symbol"}): _text("$symbol"),
    frozenset({"$code"}): _text("$code"),
    frozenset({"$code", "$scope"}): _code_with_scope,
    frozenset({"$dbPointer"}): _db_pointer,
}
"""Type wrappers by their key set, as the v1 strict and v2 relaxed/canonical dialects write them.
``{"$ref", "$id"}`` (v1's DBPointer) stays a document: it is also how a DBRef is written."""


def _object(pairs: list[tuple[str, Any]]) -> Any:
    if pairs and all(k.startswith("$") for k, _ in pairs):
        make = _WRAPPERS.get(frozenset(k for k, _ in pairs))
        if make is not None:
            return make(dict(pairs))
    return dict(pairs)


def parse(text: str) -> Any:
    """Read Extended JSON text of any dialect into its canonical form (module docstring).

    Raises:
        EjsonError: Not JSON, or a type wrapper with invalid content.

    Examples:
        >>> dumps(parse('{"_id" : {"$numberLong" : "1004"},"qty" : 2,"price" : 2.5}'))
        '{"_id":{"$numberLong":"1004"},"qty":{"$numberInt":"2"},"price":{"$numberDouble":"2.5"}}'
        >>> dumps(parse('{"at": {"$date": "2023-11-14T22:13:20Z"}}'))
        '{"at":{"$date":{"$numberLong":"1700000000000"}}}'
    """
    try:
        return json.loads(
            text,
            object_pairs_hook=_object,
            parse_int=_plain_int,
            parse_float=_plain_float,
            parse_constant=_constant,
        )
    except EjsonError:
        raise
    except (ValueError, TypeError, RecursionError) as exc:
        raise EjsonError(f"not JSON: {exc}") from None


def parse_document(text: Any, what: str) -> dict[str, Any]:
    """:func:`parse` text that must hold a document.

    Raises:
        EjsonError: ``text`` is not a string, not JSON, or not a document; the message names
            ``what``.
    """
    if not isinstance(text, str):
        raise EjsonError(f"{what} must be JSON text, got {type_name(text)}")
    try:
        value = parse(text)
    except EjsonError as exc:
        raise EjsonError(f"{what} is not Extended JSON: {exc}") from None
    if not is_document(value):
        raise EjsonError(f"{what} must be a document, got {type_name(value)}")
    return value


def dumps(value: Any) -> str:
    """Canonical Extended JSON v2 text of a parsed value (compact, UTF-8 kept)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


# --- document identity -------------------------------------------------------------------------


def _number_text(value: Scalar) -> str | None:
    """Text of a numeric value that is equal for equal numbers of any type, or None."""
    if "$numberInt" in value or "$numberLong" in value:
        return str(int(next(iter(value.values()))))
    if "$numberDouble" in value:
        number = float(value["$numberDouble"])
        if not math.isfinite(number):
            return None
        return str(int(number)) if number.is_integer() else repr(number)
    if "$numberDecimal" in value:
        exact = Decimal(value["$numberDecimal"])
        if not exact.is_finite():
            return None
        if exact == exact.to_integral_value():
            return str(int(exact))
        as_double = float(exact)
        if Decimal(as_double) == exact:
            return repr(as_double)
    return None


def _id_json(value: Any) -> str:
    if isinstance(value, Scalar):
        number = _number_text(value)
        if number is not None:
            return number
        if "$symbol" in value:
            return json.dumps(value["$symbol"], ensure_ascii=False)
        if "$numberDecimal" in value:
            exact = Decimal(value["$numberDecimal"])
            if exact.is_finite():  # 1.50 and 1.5 are one value
                return dumps({"$numberDecimal": format(exact.normalize(), "f")})
        for tag in ("$numberDouble", "$numberDecimal"):
            if tag in value:
                # NaN and the infinities compare equal across numeric types as well.
                return dumps({"$numberDouble": java_double_text(float(value[tag]))})
        return dumps(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{dumps(k)}:{_id_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_id_json(v) for v in value) + "]"
    return dumps(value)


def id_text(value: Any) -> str:
    """The identity text of an ``_id`` value: equal exactly when MongoDB sees the same ``_id``.

    MongoDB's ``_id`` index compares numbers by value across types (``1``, ``NumberLong(1)`` and
    ``1.0`` are one document), and strings and symbols alike. So numbers are written by value:
    an integer as digits, another double-representable number as its shortest double text
    (Debezium's own key text for Int32, Int64 and Double ids), any other Decimal128 as its
    canonical wrapper. Every other type is its canonical Extended JSON.

    Examples:
        >>> id_text(parse("1004")) == id_text(parse('{"$numberLong": "1004"}')) == "1004"
        True
        >>> id_text(parse('{"$oid": "596E275826F08B2730779E1F"}'))
        '{"$oid":"596e275826f08b2730779e1f"}'
    """
    return _id_json(value)
