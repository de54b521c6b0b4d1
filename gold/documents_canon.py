"""A comparable form of Extended JSON documents, and which fields of two documents differ.

Reconciliation of MongoDB collections (:mod:`gold.reconcile_documents`) compares the source's
documents, which :mod:`gold.source_read.mongodb` writes with pymongo's own canonical Extended
JSON, with silver's ``document`` column, which silver writes with its own canonical writer
(``silver/documents_ejson.py``). Equal values may be spelled differently by the two writers
(a double ``1.0E10`` in Java's text, ``10000000000.0`` in Python's; ``{"$date": "…"}`` in ISO or
``{"$numberLong": …}``), so both texts are parsed here into one **normal form** that keeps every
distinction BSON makes and nothing else:

* each BSON type stays its own (Int32 ``5``, Int64 ``5`` and Double ``5.0`` differ, a string is
  not a symbol);
* doubles by value (``-0.0`` and ``0.0`` differ, every NaN is one NaN), Decimal128 by its exact
  text (``1.50`` and ``1.5`` differ, as in BSON), dates as milliseconds since the epoch, binary
  data as bytes and subtype, regular expressions with their options sorted;
* field order is kept (a document is ordered: ``{a, b}`` is not ``{b, a}``).

This module reads no capture or silver code: it is the reconciler's own reading of the Extended
JSON specification (canonical and relaxed v2, and the legacy v1 wrappers).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import orjson

__all__ = [
    "Absent",
    "FieldDifference",
    "Node",
    "differences",
    "normal",
    "normal_text",
    "parse",
    "render",
    "without_path",
]

Node = tuple[Any, ...]
"""A value in normal form: ``(type, …)``; objects are ``("object", ((name, node), …))``,
arrays ``("array", (node, …))``."""


class _Object(list[tuple[str, Any]]):
    """A JSON object as parsed: its members in order (duplicates kept)."""


class Absent:
    """The side of a difference where the field does not exist."""

    def __repr__(self) -> str:
        return "<absent>"


ABSENT = Absent()


def parse(text: str) -> Node:
    """Extended JSON text -> normal form.

    Raises:
        ValueError: Not JSON, or a type wrapper that is not valid Extended JSON.
    """
    return normal(json.loads(text, object_pairs_hook=_Object))


def normal_text(node: Node) -> str:
    """The normal form as one deterministic JSON text (equal texts <=> equal values)."""
    return orjson.dumps(node).decode()


def _double(value: float) -> Node:
    if math.isnan(value):
        return ("double", "NaN")
    if math.isinf(value):
        return ("double", "Infinity" if value > 0 else "-Infinity")
    return ("double", repr(float(value)))


def _decimal(text: Any) -> Node:
    try:
        value = Decimal(str(text))
    except InvalidOperation:
        raise ValueError(f"$numberDecimal {text!r} is not a decimal") from None
    if value.is_nan():
        return ("decimal", "NaN")
    return ("decimal", str(value))


def _int(text: Any, what: str, bits: int) -> int:
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise ValueError(f"{what} must be a string of digits, got {text!r}")
    value = int(text)
    if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
        raise ValueError(f"{what} {text!r} is out of range")
    return value


def _date(value: Any) -> Node:
    if isinstance(value, _Object):
        (name, inner), *rest = value
        if rest or name != "$numberLong":
            raise ValueError(f"$date {render_json(value)} is not a date")
        return ("date", _int(inner, "$date", 64))
    if isinstance(value, str):
        # relaxed form: ISO-8601 with a time zone (1970 to 9999)
        stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        if stamp.tzinfo is None:
            raise ValueError(f"$date {value!r} has no time zone")
        epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
        delta = stamp - epoch
        return ("date", (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000)
    if isinstance(value, int) and not isinstance(value, bool):
        return ("date", value)  # v1 strict: milliseconds as a bare number
    raise ValueError(f"$date {value!r} is not a date")


def _binary(data: Any, subtype: Any) -> Node:
    raw = base64.b64decode(str(data), validate=True)
    kind = int(str(subtype), 16)
    return ("binary", kind, base64.b64encode(raw).decode())


def _members(value: _Object) -> dict[str, Any]:
    return dict(value)


def _wrapper(obj: _Object) -> Node | None:
    """The normal form of a type wrapper, or None when ``obj`` is a plain document."""
    names = tuple(name for name, _ in obj)
    if not names or not names[0].startswith("$"):
        return None
    m = _members(obj)
    keys = frozenset(names)
    if keys == {"$numberInt"}:
        return ("int32", _int(m["$numberInt"], "$numberInt", 32))
    if keys == {"$numberLong"}:
        return ("int64", _int(m["$numberLong"], "$numberLong", 64))
    if keys == {"$numberDouble"}:
        try:
            return _double(float(str(m["$numberDouble"])))
        except ValueError:
            raise ValueError(f"$numberDouble {m['$numberDouble']!r} is not a number") from None
    if keys == {"$numberDecimal"}:
        return _decimal(m["$numberDecimal"])
    if keys == {"$date"}:
        return _date(m["$date"])
    if keys == {"$oid"}:
        text = str(m["$oid"]).lower()
        if len(text) != 24 or any(c not in "0123456789abcdef" for c in text):
            raise ValueError(f"$oid {m['$oid']!r} is not 24 hex digits")
        return ("oid", text)
    if keys == {"$binary"} and isinstance(m["$binary"], _Object):
        inner = _members(m["$binary"])
        return _binary(inner.get("base64"), inner.get("subType"))
    if keys == {"$binary", "$type"}:
        return _binary(m["$binary"], m["$type"])
    if keys == {"$uuid"}:
        raw = bytes.fromhex(str(m["$uuid"]).replace("-", ""))
        return ("binary", 4, base64.b64encode(raw).decode())
    if keys == {"$timestamp"}:
        inner = _members(m["$timestamp"])
        return ("timestamp", int(inner["t"]), int(inner["i"]))
    if keys == {"$regularExpression"}:
        inner = _members(m["$regularExpression"])
        return ("regex", str(inner["pattern"]), "".join(sorted(str(inner["options"]))))
    if keys == {"$regex", "$options"}:
        return ("regex", str(m["$regex"]), "".join(sorted(str(m["$options"]))))
    if keys == {"$symbol"}:
        return ("symbol", str(m["$symbol"]))
    if keys == {"$code"}:
        return ("code", str(m["$code"]))
    if keys == {"$code", "$scope"}:
        return ("code_w_scope", str(m["$code"]), normal(m["$scope"]))
    if keys == {"$dbPointer"}:
        inner = _members(m["$dbPointer"])
        return ("dbpointer", str(inner["$ref"]), normal(inner["$id"]))
    if keys == {"$minKey"}:
        return ("minkey",)
    if keys == {"$maxKey"}:
        return ("maxkey",)
    if keys == {"$undefined"}:
        return ("undefined",)
    return None  # a document whose first field starts with "$" (a DBRef, an operator)


def normal(value: Any) -> Node:
    """A parsed Extended JSON value -> normal form (see the module docstring).

    Raises:
        ValueError: A type wrapper that is not valid Extended JSON.
    """
    if isinstance(value, _Object):
        wrapped = _wrapper(value)
        if wrapped is not None:
            return wrapped
        return ("object", tuple((name, normal(v)) for name, v in value))
    if isinstance(value, list):
        return ("array", tuple(normal(v) for v in value))
    if isinstance(value, bool):
        return ("bool", value)
    if value is None:
        return ("null",)
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, int):
        # relaxed Extended JSON: Int32 when it fits, else Int64 (as the drivers read it)
        return ("int32" if -(2**31) <= value < 2**31 else "int64", value)
    if isinstance(value, float):
        return _double(value)
    raise ValueError(f"not an Extended JSON value: {value!r}")


def render_json(value: Any) -> str:
    """A parsed JSON value back as compact text (for messages)."""
    if isinstance(value, _Object):
        return "{" + ",".join(f"{json.dumps(k)}:{render_json(v)}" for k, v in value) + "}"
    if isinstance(value, list):
        return "[" + ",".join(render_json(v) for v in value) + "]"
    return json.dumps(value)


def render(node: Node | Absent) -> str:
    """A normal-form value as canonical Extended JSON text (for reports)."""
    if isinstance(node, Absent):
        return "<absent>"
    kind = node[0]
    if kind == "object":
        return "{" + ",".join(f"{json.dumps(k)}:{render(v)}" for k, v in node[1]) + "}"
    if kind == "array":
        return "[" + ",".join(render(v) for v in node[1]) + "]"
    simple = {
        "int32": lambda: {"$numberInt": str(node[1])},
        "int64": lambda: {"$numberLong": str(node[1])},
        "double": lambda: {"$numberDouble": node[1]},
        "decimal": lambda: {"$numberDecimal": node[1]},
        "date": lambda: {"$date": {"$numberLong": str(node[1])}},
        "oid": lambda: {"$oid": node[1]},
        "binary": lambda: {"$binary": {"base64": node[2], "subType": format(node[1], "02x")}},
        "timestamp": lambda: {"$timestamp": {"t": node[1], "i": node[2]}},
        "regex": lambda: {"$regularExpression": {"pattern": node[1], "options": node[2]}},
        "symbol": lambda: {"$symbol": node[1]},
        "code": lambda: {"$code": node[1]},
        "minkey": lambda: {"$minKey": 1},
        "maxkey": lambda: {"$maxKey": 1},
        "undefined": lambda: {"$undefined": True},
        "bool": lambda: node[1],
        "null": lambda: None,
        "string": lambda: node[1],
    }
    if kind in simple:
        return json.dumps(simple[kind](), separators=(",", ":"))
    if kind == "code_w_scope":
        return f'{{"$code":{json.dumps(node[1])},"$scope":{render(node[2])}}}'
    if kind == "dbpointer":
        return f'{{"$dbPointer":{{"$ref":{json.dumps(node[1])},"$id":{render(node[2])}}}}}'
    raise ValueError(f"not a normal-form value: {node!r}")


def without_path(node: Node, path: str) -> Node:
    """``node`` (a document) without the dotted ``path``, through documents and arrays of
    documents (as ``field.exclude.list`` walks them; arrays of arrays are not looked into)."""
    head, _, rest = path.partition(".")
    if node[0] == "array":
        return ("array", tuple(without_path(v, path) if v[0] == "object" else v for v in node[1]))
    if node[0] != "object":
        return node
    members = []
    for name, value in node[1]:
        if name == head:
            if not rest:
                continue
            value = without_path(value, rest)
        members.append((name, value))
    return ("object", tuple(members))


@dataclass(frozen=True, slots=True)
class FieldDifference:
    """One field (dotted path; ``(document)`` for the whole document) that differs.

    Attributes:
        path: ``address.city``, ``items.1.qty``; ``(document)`` for field order.
        source: The source's value in normal form (:class:`Absent`: not in the source).
        silver: Silver's value (:class:`Absent`: not in silver).
        what: ``value``, ``type``, ``only in source``, ``only in silver``, ``array length``,
            ``field order``.
    """

    path: str
    source: Node | Absent
    silver: Node | Absent
    what: str

    def describe(self) -> str:
        """``address.city (value): source "Oslo", silver "Bergen"``."""
        return (
            f"{self.path} ({self.what}): source {render(self.source)}, silver {render(self.silver)}"
        )


def _join(path: str, name: str) -> str:
    return name if not path else f"{path}.{name}"


def differences(source: Node, silver: Node, path: str = "") -> Iterator[FieldDifference]:
    """The fields where two documents in normal form differ, innermost first-found.

    Members are matched by name; arrays of equal length element by element (a different length
    is one difference of the whole array); a document whose members are equal but in another
    order is one ``field order`` difference.
    """
    if source == silver:
        return
    where = path or "(document)"
    if source[0] == silver[0] == "object":
        mine, theirs = dict(source[1]), dict(silver[1])
        for name, value in source[1]:
            if name not in theirs:
                yield FieldDifference(_join(path, name), value, ABSENT, "only in source")
            else:
                yield from differences(value, theirs[name], _join(path, name))
        for name, value in silver[1]:
            if name not in mine:
                yield FieldDifference(_join(path, name), ABSENT, value, "only in silver")
        if mine == theirs:
            yield FieldDifference(where, source, silver, "field order")
        return
    if source[0] == silver[0] == "array":
        if len(source[1]) != len(silver[1]):
            yield FieldDifference(where, source, silver, "array length")
            return
        for i, (a, b) in enumerate(zip(source[1], silver[1], strict=True)):
            yield from differences(a, b, _join(path, str(i)))
        return
    yield FieldDifference(where, source, silver, "value" if source[0] == silver[0] else "type")
