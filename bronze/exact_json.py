"""JSON parsed with every number exact: orjson's speed, the stdlib's numbers where it matters.

orjson reads every number into a 64-bit integer or a double, with no error when it does not fit:
an integer literal beyond 64 bits becomes a float (``10^40`` becomes ``1e+40``, ``-2^63 - 1``
becomes ``-9.223372036854776e+18``) and a decimal with more digits than a double holds is rounded
(``12345678901234567890.123456789`` becomes ``1.2345678901234567e+19``; ``1e-320`` loses digits in
the double's subnormal range). Such literals are legal JSON, and Jackson (Kafka Connect's
``JsonConverter`` with ``decimal.format=NUMERIC``, Debezium) writes them. Wherever a parsed
document is written again, or its numbers are looked at, the literal must stay the number it is.

Parsing every document with the stdlib costs several times orjson's time, and so does a regular
expression over its text. So the text is scanned (one ``bytes.translate`` and six substring
searches, about orjson's parse time: 5 µs for a 436-byte PostgreSQL record on a loaded
machine) for the digit runs only a literal orjson reads inexactly can have, and only a text that
has one is parsed again with the stdlib, integers exact and each number with a fraction or
exponent a ``float`` when the double is exactly its value, else a :class:`decimal.Decimal` of its
text. The runs:

* twenty digits, or a minus and nineteen: an integer beyond 64 bits (orjson reads up to
  ``2^64 - 1`` exactly, and down to ``-2^63``);
* eight digits beside a point: a decimal of sixteen or more significant digits may have one (a
  double holds every decimal of fifteen: its nearest double prints back as the same value);
* sixteen digits before an exponent: a mantissa of sixteen or more significant digits without a
  point (``9007199254740993e0``, which orjson reads as ``9007199254740992.0``);
* a negative exponent of three digits: a value in or below the subnormal range.

A digit run inside a string, or a long fraction a double holds anyway, costs only the second
parse. :func:`dumps` writes such a document again, ``Decimal`` and big integers as the literals
they were read from.

    >>> loads(b'{"id": 10000000000000000000000000000000000000000}')["id"] == 10**40
    True
    >>> loads('{"ts_ns": 1700000000000000000, "x": 0.5}')
    {'ts_ns': 1700000000000000000, 'x': 0.5}
    >>> loads('{"n": 12345678901234567890.123456789}')
    {'n': Decimal('12345678901234567890.123456789')}
    >>> dumps(loads('{"n": 12345678901234567890.123456789, "id": 100000000000000000000}'))
    '{"n":12345678901234567890.123456789,"id":100000000000000000000}'
"""

from __future__ import annotations

import decimal
import json as _stdlib_json
from collections.abc import Mapping
from typing import Any, Final

import orjson

__all__ = ["loads", "exact", "stdlib_loads", "dumps", "number", "literals"]

# Every digit becomes 0: a run of digits is then a run of zeros, found by a substring search.
# One pass in C each; a regular expression costs several times orjson's parse.
_ZEROED_BYTES: Final = bytes.maketrans(b"123456789E", b"000000000e")
_ZEROED_TEXT: Final = str.maketrans("123456789E", "000000000e")
_LONG_INTEGER: Final = "0" * 20  # an integer beyond 2^64 - 1
_NEGATIVE: Final = "-" + "0" * 19  # a superset of "-9 and 18" (below -2^63)
_WHOLE_RUN: Final = "0" * 8 + "."  # sixteen significant digits need eight on one side of "."
_FRACTION_RUN: Final = "." + "0" * 8
_EXPONENT_RUN: Final = "0" * 16 + "e"  # the same without a point: 1234567890123456789e3
_TINY: Final = "e-000"  # 1e-308 and below: subnormal (fewer digits than a double) or zero
_LONG_INTEGER_B: Final = _LONG_INTEGER.encode()
_NEGATIVE_B: Final = _NEGATIVE.encode()
_WHOLE_RUN_B: Final = _WHOLE_RUN.encode()
_FRACTION_RUN_B: Final = _FRACTION_RUN.encode()
_EXPONENT_RUN_B: Final = _EXPONENT_RUN.encode()
_TINY_B: Final = _TINY.encode()


def _may_be_inexact(text: str | bytes | bytearray | memoryview) -> bool:
    # Spelled out: any() over a generator costs as much as the six searches.
    if isinstance(text, str):
        z = text.translate(_ZEROED_TEXT)
        return (
            _LONG_INTEGER in z
            or _NEGATIVE in z
            or _WHOLE_RUN in z
            or _FRACTION_RUN in z
            or _EXPONENT_RUN in z
            or _TINY in z
        )
    b = (text if text.__class__ is bytes else bytes(text)).translate(_ZEROED_BYTES)
    return (
        _LONG_INTEGER_B in b
        or _NEGATIVE_B in b
        or _WHOLE_RUN_B in b
        or _FRACTION_RUN_B in b
        or _EXPONENT_RUN_B in b
        or _TINY_B in b
    )


def number(text: str) -> float | decimal.Decimal:
    """A JSON number literal with a fraction or exponent: the float when it is exactly the
    literal's value, else the literal as a :class:`decimal.Decimal`.

    Example:
        >>> number("1.50"), number("0.30000000000000004"), number("1e400")
        (1.5, 0.30000000000000004, Decimal('1E+400'))
    """
    value = float(text)
    exact = decimal.Decimal(text)
    # repr() is the shortest text that reads back as the double: equal values, equal doubles.
    if value == value and abs(value) != float("inf") and decimal.Decimal(repr(value)) == exact:
        return value
    return exact


def exact(doc: Any, text: str | bytes | bytearray | memoryview) -> Any:
    """``doc``, orjson's parse of ``text``, or ``text`` parsed again when orjson may have read a
    number in it inexactly.

    Args:
        doc: What ``orjson.loads(text)`` returned.
        text: The JSON text, which orjson accepted.

    Returns:
        A document equal to ``doc`` but for such numbers: integers are Python ints, and a number
        no double holds is a :class:`decimal.Decimal` of its literal.
    """
    if not _may_be_inexact(text):
        return doc
    return stdlib_loads(text)


def stdlib_loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse with the stdlib, numbers exact (see :func:`number`); for what orjson refuses too
    (a number beyond the double range).

    Raises:
        ValueError: ``text`` is not JSON (``json.JSONDecodeError``, or ``UnicodeDecodeError``).
    """
    data = bytes(text) if isinstance(text, memoryview | bytearray) else text
    return _stdlib_json.loads(data, parse_float=number)


def loads(text: str | bytes | bytearray | memoryview) -> Any:
    """Parse JSON with exact numbers (see the module docstring).

    Raises:
        orjson.JSONDecodeError: ``text`` is not JSON orjson accepts.
    """
    return exact(orjson.loads(text), text)


def _default(obj: Any) -> Any:
    if isinstance(obj, decimal.Decimal) and obj.is_finite():
        return orjson.Fragment(str(obj))  # str() of a Decimal is a JSON number: 1E-30, 1.50
    raise TypeError


def literals(doc: Any) -> Any:
    """``doc`` with every integer beyond 64 bits an ``orjson.Fragment`` of its literal: orjson
    refuses such an int before it asks its ``default`` (containers are copied, the rest kept)."""
    if doc.__class__ is int and not -(2**63) <= doc < 2**64:
        return orjson.Fragment(str(doc))
    if isinstance(doc, Mapping):
        return {k: literals(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [literals(v) for v in doc]
    return doc


def dumps(doc: Any, *, option: int = 0) -> str:
    """Compact JSON text of a document :func:`loads` returned: every number as its literal.

    Args:
        doc: The document.
        option: orjson options (``orjson.OPT_SORT_KEYS``...).

    Raises:
        TypeError: ``doc`` holds something with no JSON form.
    """
    try:
        return orjson.dumps(doc, default=_default, option=option).decode()
    except TypeError:  # an integer beyond 64 bits
        return orjson.dumps(literals(doc), default=_default, option=option).decode()
