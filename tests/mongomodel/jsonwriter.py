"""Model values as JSON text, the way the MongoDB Java driver's ``JsonWriter`` writes them.

Debezium serialises documents with ``BsonDocument.toJson(settings)``; the settings it uses:

* ``COMPACT_JSON_SETTINGS``: ``JsonMode.STRICT``, ``indent(true)`` with empty indent and newline
  characters: ``{"_id": {"$numberLong": "1004"},"name": "Anne","tags": ["a","b"]}`` (a comma
  without a space between elements); ``after``/``before``/``patch``/``filter``.
* ``SIMPLE_JSON_SETTINGS``: the same with ``JsonMode.RELAXED``: keys (``{"_": id}`` cut down to
  the id) since 1.7.
* ``EXTENDED_JSON_SETTINGS``: ``JsonMode.EXTENDED`` (canonical), ``json.serialization.mode=
  extended``.
* ``BsonDocument.toJson()`` (default settings, relaxed, no indent): ``{"a": 1, "b": [1, 2]}``;
  ``updatedFields`` in 2.x/3.x.
* Java driver 3.x (Debezium 1.2): ``"name" : value`` (``name_separator=" : "``).

``Double.toString`` is silver's :func:`~silver.documents_ejson.java_double_text` (pinned against
Java's output in tests/unit/test_documents.py); silver reads any spelling of a double.

Type converters per mode follow the driver's ``JsonWriterSettings`` defaults: STRICT writes
Int32 and Double as numbers (non-finite doubles bare), Int64 as ``$numberLong``, dates as
``{"$date": <ms>}``, binary ``{"$binary": "<b64>", "$type": "<HEX>"}``, regex ``$regex``/
``$options``; RELAXED writes Int64 as a number too, dates in 1970..9999 as ISO-8601 instants,
binary and regex in the v2 shapes; EXTENDED wraps every number.
"""

from __future__ import annotations

import base64
import datetime as dt
import math
import unicodedata
from typing import Any, Literal

from silver.documents_ejson import java_double_text as java_double
from tests.mongomodel import bson as B

__all__ = ["JsonWriter", "Mode"]

Mode = Literal["strict", "relaxed", "extended"]

_PLAIN_CATEGORIES = frozenset("Lu Ll Lt Lm Lo Nd Nl No Zs Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So".split())
"""Character categories the driver writes as themselves; the rest become ``\\uXXXX``."""
_LAST_MS_OF_9999 = 253402300799999


def _string(text: str) -> str:
    out = ['"']
    for char in text:
        if char == '"':
            out.append('\\"')
        elif char == "\\":
            out.append("\\\\")
        elif char in "\b\f\n\r\t":
            out.append({"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[char])
        elif ord(char) > 0xFFFF:
            # Java strings are UTF-16: a supplementary character is two surrogates, each of a
            # category the driver escapes.
            high, low = divmod(ord(char) - 0x10000, 0x400)
            out.append(f"\\u{0xD800 + high:04x}\\u{0xDC00 + low:04x}")
        elif unicodedata.category(char) in _PLAIN_CATEGORIES:
            out.append(char)
        else:
            out.append(f"\\u{ord(char):04x}")
    out.append('"')
    return "".join(out)


class JsonWriter:
    """Writes model values as one driver configuration does.

    Args:
        mode: ``strict``, ``relaxed`` or ``extended``.
        indent: ``indent(true)`` with empty characters (Debezium's settings), else the
            driver's default layout.
        name_separator: ``": "`` (driver 4+), ``" : "`` (driver 3.x, Debezium 1.2).
    """

    def __init__(self, mode: Mode, *, indent: bool, name_separator: str = ": ") -> None:
        self.mode = mode
        self.separator = "," if indent else ", "
        self.name_separator = name_separator

    def _object(self, pairs: list[tuple[str, str]]) -> str:
        body = self.separator.join(f"{_string(k)}{self.name_separator}{v}" for k, v in pairs)
        return "{" + body + "}"

    def write(self, value: Any) -> str:
        """The JSON text of one value (a document, array or scalar)."""
        mode = self.mode
        if isinstance(value, dict):
            return self._object([(k, self.write(v)) for k, v in value.items()])
        if isinstance(value, list):
            return "[" + self.separator.join(self.write(v) for v in value) + "]"
        if value is None:
            return "null"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, str):
            return _string(value)
        if isinstance(value, B.Int32):
            return (
                self._object([("$numberInt", _string(str(value.value)))])
                if mode == "extended"
                else str(value.value)
            )
        if isinstance(value, B.Int64):
            return (
                str(value.value)
                if mode == "relaxed"
                else self._object([("$numberLong", _string(str(value.value)))])
            )
        if isinstance(value, B.Double):
            text = java_double(value.value)
            if mode == "strict" or (mode == "relaxed" and math.isfinite(value.value)):
                return text
            return self._object([("$numberDouble", _string(text))])
        if isinstance(value, B.Decimal128):
            return self._object([("$numberDecimal", _string(value.text))])
        if isinstance(value, B.ObjectId):
            return self._object([("$oid", _string(value.hex))])
        if isinstance(value, B.Date):
            return self._date(value.millis)
        if isinstance(value, B.Binary):
            b64 = _string(base64.b64encode(value.data).decode("ascii"))
            subtype = _string(f"{value.subtype:02X}")
            if mode == "strict":
                return self._object([("$binary", b64), ("$type", subtype)])
            inner = self._object([("base64", b64), ("subType", subtype)])
            return self._object([("$binary", inner)])
        if isinstance(value, B.Regex):
            pattern, options = _string(value.pattern), _string(value.options)
            if mode == "strict":
                return self._object([("$regex", pattern), ("$options", options)])
            inner = self._object([("pattern", pattern), ("options", options)])
            return self._object([("$regularExpression", inner)])
        if isinstance(value, B.Timestamp):
            inner = self._object([("t", str(value.t)), ("i", str(value.i))])
            return self._object([("$timestamp", inner)])
        if isinstance(value, B.MinKey):
            return self._object([("$minKey", "1")])
        if isinstance(value, B.MaxKey):
            return self._object([("$maxKey", "1")])
        raise TypeError(f"not a model value: {value!r}")

    def _date(self, millis: int) -> str:
        if self.mode == "strict":
            return self._object([("$date", str(millis))])
        if self.mode == "relaxed" and 0 <= millis <= _LAST_MS_OF_9999:
            moment = dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=millis)
            # DateTimeFormatter.ISO_INSTANT: the fraction only when non-zero, in groups of 3.
            text = moment.strftime("%Y-%m-%dT%H:%M:%S")
            if moment.microsecond:
                text += f".{moment.microsecond // 1000:03d}"
            return self._object([("$date", _string(text + "Z"))])
        return self._object([("$date", self._object([("$numberLong", _string(str(millis)))]))])
