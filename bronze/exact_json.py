"""JSON parsed with every integer exact: orjson's speed, the stdlib's integers where it matters.

orjson has no big-integer mode: it reads an integer literal beyond 64 bits as a float
(``10^40`` becomes ``1e+40``, ``-2^63 - 1`` becomes ``-9.223372036854776e+18``), with no error.
Such literals are legal JSON, and Jackson (Kafka Connect's ``JsonConverter``, Debezium) writes
them. Wherever a parsed document is written again, or its integers are looked at, the literal
must stay the integer it is.

Checking every document for them costs a regular-expression scan of its text; parsing every
document with the stdlib costs several times orjson's time. So the text is scanned for a digit
run only a literal orjson reads inexactly can have, and only a text that has one is parsed again
with the stdlib (whose integers are exact). orjson reads integers up to ``2^64 - 1`` (twenty
digits) exactly: a float comes only from twenty or more digits, or from nineteen after a minus
sign starting with ``9`` (below ``-2^63``). A digit run inside a string, or a long fraction,
costs only the second parse.

    >>> loads(b'{"id": 10000000000000000000000000000000000000000}')["id"] == 10**40
    True
    >>> loads('{"ts_ns": 1700000000000000000}')
    {'ts_ns': 1700000000000000000}
"""

from __future__ import annotations

import json as _stdlib_json
import re
from typing import Any, Final

import orjson

__all__ = ["loads", "exact"]

_INEXACT_BYTES: Final = re.compile(rb"\d{20}|-9\d{18}")
_INEXACT_TEXT: Final = re.compile(r"\d{20}|-9\d{18}")


def _may_be_inexact(text: str | bytes | bytearray | memoryview) -> bool:
    if isinstance(text, str):
        return _INEXACT_TEXT.search(text) is not None
    return _INEXACT_BYTES.search(text) is not None


def exact(doc: Any, text: str | bytes | bytearray | memoryview) -> Any:
    """``doc``, orjson's parse of ``text``, or ``text`` parsed again when orjson may have read an
    integer literal in it as a float.

    Args:
        doc: What ``orjson.loads(text)`` returned.
        text: The JSON text, which orjson accepted.

    Returns:
        A document equal to ``doc`` but for such integers, which are Python ints.
    """
    if not _may_be_inexact(text):
        return doc
    return _stdlib_json.loads(bytes(text) if isinstance(text, memoryview | bytearray) else text)


def loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse JSON with exact integers (see the module docstring).

    Raises:
        orjson.JSONDecodeError: ``text`` is not JSON orjson accepts.
    """
    return exact(orjson.loads(text), text)
