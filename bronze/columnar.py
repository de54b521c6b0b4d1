"""Vectorized pieces of the columnar landing path: JSON text of whole Arrow columns.

A columnar reader (the PostgreSQL and MySQL snapshots) converts a chunk of rows column by column
and assembles each row's envelope JSON with Arrow's string kernels instead of building one dict
and one JSON document per row. The JSON must be byte for byte what ``orjson.dumps`` writes for the
same values on the per-row path (bronze's contract does not depend on the path a row took), so
every helper here writes orjson's exact form:

* strings: ``"`` and ``\\`` escaped with a backslash; ``\\b \\t \\n \\f \\r`` in their short form;
  the other control characters below U+0020 as ``\\u00xx`` (lower-case hex); everything else,
  U+007F and non-ASCII included, as it is;
* objects: ``{"name":value,...}`` with no spaces, keys in the given order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from bronze.position_base import SEQ_WIDTH

__all__ = ["JSON_NULL", "json_object", "json_strings", "json_texts", "positions"]

JSON_NULL: Final = "null"

_SHORT_ESCAPES: Final = (("\b", "\\b"), ("\t", "\\t"), ("\n", "\\n"), ("\f", "\\f"), ("\r", "\\r"))
_LONG_ESCAPES: Final = tuple(
    (chr(c), f"\\u{c:04x}") for c in range(0x20) if chr(c) not in dict(_SHORT_ESCAPES)
)


def json_strings(values: pa.Array) -> pa.Array:
    """JSON string literals of a string column (null stays null), as orjson writes them."""
    data = _value_bytes(values)
    out = values
    for raw, escaped in (("\\", "\\\\"), ('"', '\\"')):
        if (data == ord(raw)).any():
            out = pc.replace_substring(out, raw, escaped)
    if (data < 0x20).any():
        for raw, escaped in (*_SHORT_ESCAPES, *_LONG_ESCAPES):
            if pc.any(pc.match_substring(out, raw)).as_py():
                out = pc.replace_substring(out, raw, escaped)
    return pc.binary_join_element_wise('"', out, '"', "")


def _value_bytes(values: pa.Array) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """The bytes of a string column's values (of its whole buffer when sliced: a superset,
    which only makes a check find a character the slice may not hold)."""
    buffer = values.buffers()[2]
    if buffer is None:
        return np.zeros(0, np.uint8)
    return np.frombuffer(buffer, np.uint8)


def json_texts(values: Sequence[object]) -> pa.Array:
    """JSON text of each Python value (``None`` is JSON null): the per-value fallback for a
    column whose conversion has no vectorized form."""
    dumps = orjson.dumps
    return pa.array([dumps(v).decode() for v in values], pa.string())


def json_object(
    names: Sequence[str],
    fragments: Sequence[pa.Array],
    count: int,
    *,
    head: str = "",
    tail: str = "",
) -> pa.Array:
    """``head{"name":fragment,...}tail`` for each of ``count`` rows (one string kernel call for
    the whole text); a null fragment is written as JSON null."""
    parts: list[pa.Array | str] = []
    text = head + "{"
    for index, (name, fragment) in enumerate(zip(names, fragments, strict=True)):
        text += ("" if index == 0 else ",") + orjson.dumps(name).decode() + ":"
        parts.append(text)
        parts.append(fragment if fragment.null_count == 0 else pc.fill_null(fragment, JSON_NULL))
        text = ""
    text += "}" + tail
    if not fragments:
        return pa.repeat(pa.scalar(text, pa.string()), count)
    parts.append(text)
    return pc.binary_join_element_wise(*parts, "")


def positions(base: bytes, first_seq: int, count: int) -> pa.Array:
    """Encoded positions ``base`` + ``seq`` (big-endian, :data:`SEQ_WIDTH` bytes) for ``count``
    consecutive sequences from ``first_seq``: what ``Position.encode()`` gives row by row."""
    seqs = np.arange(first_seq, first_seq + count, dtype=">u4")
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(SEQ_WIDTH), count, [None, pa.py_buffer(seqs.tobytes())]
    )
    return pc.binary_join_element_wise(pa.scalar(base, pa.binary()), fixed.cast(pa.binary()), b"")


def fill_template(
    parts: Sequence[str], slots: Sequence[str], values: Mapping[str, pa.Array]
) -> pa.Array:
    """``parts[0] + values[slots[0]] + parts[1] + ... + parts[-1]`` for each row: a JSON
    template (``len(parts) == len(slots) + 1``) filled from each slot's text column."""
    args: list[pa.Array | str] = []
    for part, slot in zip(parts, slots, strict=False):
        args += [part, values[slot]]
    args.append(parts[-1])
    return pc.binary_join_element_wise(*args, "")
