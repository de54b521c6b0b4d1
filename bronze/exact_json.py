"""JSON parsed with every integer exact: orjson's speed, the stdlib's integers where it matters.

orjson has no big-integer mode: it reads an integer literal beyond 64 bits as a float
(``10^40`` becomes ``1e+40``, ``-2^63 - 1`` becomes ``-9.223372036854776e+18``), with no error.
Such literals are legal JSON, and Jackson (Kafka Connect's ``JsonConverter``, Debezium) writes
them. Wherever a parsed document is written again, or its integers are looked at, the literal
must stay the integer it is.

Parsing every document with the stdlib costs several times orjson's time, and so does a
regular expression over its text. So the text is scanned (one ``bytes.translate`` and a
substring search, about half of orjson's parse time) for a digit run only a literal orjson reads
inexactly can have, and only a text that has one is parsed again with the stdlib (whose
integers are exact). orjson reads integers up to ``2^64 - 1`` (twenty digits) exactly: a float
comes only from twenty or more digits, or from nineteen after a minus sign (below ``-2^63``).
A digit run inside a string, or a long fraction, costs only the second parse.

    >>> loads(b'{"id": 10000000000000000000000000000000000000000}')["id"] == 10**40
    True
    >>> loads('{"ts_ns": 1700000000000000000}')
    {'ts_ns': 1700000000000000000}
"""

from __future__ import annotations

import json as _stdlib_json
from typing import Any, Final

import orjson

__all__ = ["loads", "exact"]

# Every digit becomes 0: a run of digits is then a run of zeros, found by a substring search.
# One pass in C each; a regular expression costs several times orjson's parse.
_ZEROED_BYTES: Final = bytes.maketrans(b"123456789", b"000000000")
_ZEROED_TEXT: Final = str.maketrans("123456789", "000000000")
_LONG_RUN: Final = "0" * 20
_NEGATIVE_RUN: Final = "-" + "0" * 19
_LONG_RUN_BYTES: Final = _LONG_RUN.encode()
_NEGATIVE_RUN_BYTES: Final = _NEGATIVE_RUN.encode()


def _may_be_inexact(text: str | bytes | bytearray | memoryview) -> bool:
    # Twenty digits, or a minus and nineteen (a superset of "-9 and 18": a false positive costs
    # only the second parse).
    if isinstance(text, str):
        zeroed = text.translate(_ZEROED_TEXT)
        return _LONG_RUN in zeroed or _NEGATIVE_RUN in zeroed
    zeroed_bytes = bytes(text).translate(_ZEROED_BYTES)
    return _LONG_RUN_BYTES in zeroed_bytes or _NEGATIVE_RUN_BYTES in zeroed_bytes


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
