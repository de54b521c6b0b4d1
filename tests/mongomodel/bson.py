"""BSON values of the model: typed, ordered, compared exactly.

Documents are ``dict`` (insertion order is field order), arrays ``list``, strings, booleans and
null are themselves; every other BSON type is one of the frozen classes below. :func:`freeze`
turns a value into a hashable form that keeps field order and type, so two documents are the
same BSON document exactly when their frozen forms are equal (``{"a": 1}`` Int32 differs from
``{"a": NumberLong(1)}`` and from ``{"a": 1.0}``; ``{a, b}`` differs from ``{b, a}``).

:func:`from_canonical` reads canonical Extended JSON v2 (what silver stores) into these values.
It is written from the Extended JSON specification, independently of
``silver.documents_ejson``, so the tests do not check silver against itself.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Binary",
    "Date",
    "Decimal128",
    "Double",
    "Int32",
    "Int64",
    "MaxKey",
    "MinKey",
    "ObjectId",
    "Regex",
    "Timestamp",
    "freeze",
    "from_canonical",
    "same",
]


@dataclass(frozen=True)
class Int32:
    value: int


@dataclass(frozen=True)
class Int64:
    value: int


@dataclass(frozen=True, eq=False)
class Double:
    value: float

    def _bits(self) -> bytes:
        # NaN is one value for the comparison; -0.0 and 0.0 stay distinct (BSON keeps the sign).
        return b"nan" if math.isnan(self.value) else struct.pack(">d", self.value)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Double) and self._bits() == other._bits()

    def __hash__(self) -> int:
        return hash(self._bits())


@dataclass(frozen=True)
class Decimal128:
    text: str


@dataclass(frozen=True)
class ObjectId:
    hex: str


@dataclass(frozen=True)
class Date:
    millis: int


@dataclass(frozen=True)
class Binary:
    data: bytes
    subtype: int


@dataclass(frozen=True)
class Timestamp:
    t: int
    i: int


@dataclass(frozen=True)
class Regex:
    pattern: str
    options: str


@dataclass(frozen=True)
class MinKey:
    pass


@dataclass(frozen=True)
class MaxKey:
    pass


def freeze(value: Any) -> Any:
    """A hashable form of ``value`` that keeps types and field order."""
    if isinstance(value, dict):
        return ("document", tuple((k, freeze(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("array", tuple(freeze(v) for v in value))
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int | float):
        raise TypeError(f"bare Python number {value!r} in a model document: wrap it")
    return value


def same(a: Any, b: Any) -> bool:
    """Whether two values are the same BSON value (type and field order included)."""
    return bool(freeze(a) == freeze(b))


def _integer(text: str) -> int:
    if not isinstance(text, str):
        raise ValueError(f"canonical numbers are strings, got {text!r}")
    return int(text)


def _wrapped(obj: dict[str, Any]) -> Any:
    keys = set(obj)
    if keys == {"$numberInt"}:
        return Int32(_integer(obj["$numberInt"]))
    if keys == {"$numberLong"}:
        return Int64(_integer(obj["$numberLong"]))
    if keys == {"$numberDouble"}:
        return Double(float(obj["$numberDouble"]))
    if keys == {"$numberDecimal"}:
        return Decimal128(obj["$numberDecimal"])
    if keys == {"$oid"}:
        return ObjectId(obj["$oid"])
    if keys == {"$date"}:
        return Date(_integer(obj["$date"]["$numberLong"]))
    if keys == {"$binary"}:
        inner = obj["$binary"]
        return Binary(base64.b64decode(inner["base64"]), int(inner["subType"], 16))
    if keys == {"$timestamp"}:
        return Timestamp(obj["$timestamp"]["t"], obj["$timestamp"]["i"])
    if keys == {"$regularExpression"}:
        inner = obj["$regularExpression"]
        return Regex(inner["pattern"], inner["options"])
    if keys == {"$minKey"}:
        return MinKey()
    if keys == {"$maxKey"}:
        return MaxKey()
    return None


def _convert(value: Any) -> Any:
    if isinstance(value, dict):
        if value and all(k.startswith("$") for k in value):
            typed = _wrapped(value)
            if typed is not None:
                return typed
        return {k: _convert(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_convert(v) for v in value]
    if isinstance(value, int | float) and not isinstance(value, bool):
        raise ValueError(f"canonical Extended JSON has no bare numbers, got {value!r}")
    return value


def from_canonical(text: str) -> Any:
    """Read canonical Extended JSON v2 text into model values (a bare number is an error)."""
    return _convert(json.loads(text))
