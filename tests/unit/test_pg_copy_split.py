"""The text ``COPY`` splitter in C (``capture.postgresql._pgcopy.TextCopySplitter``) against its
Python reference (``copy_text.split_text_copy``) and psycopg's own row parser: rows written as
``COPY TO`` writes them (every escape, NULLs, empty strings, ``\\N`` as a string, multibyte
UTF-8) come back exactly, fed whole, cut at every byte boundary, or a byte at a time; any bytes
at all give the reference's columns or its error (reason, row, column), never a read past the
data; the buffers are valid Arrow string arrays."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from psycopg import _copy_base, pq
from psycopg.adapt import Transformer

from capture.postgresql._pgcopy import CopyDataError, TextCopySplitter
from capture.postgresql.copy_text import split_text_copy
from tests.property_profiles import examples

pytestmark = pytest.mark.unit

_TEXT_OID = 25
_OUT = {
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
}
"""What ``COPY TO`` escapes (CopyAttributeOutText); every other character is written as is."""


def copy_out(rows: list[list[str | None]]) -> bytes:
    """``rows`` as ``COPY ... TO STDOUT`` writes them in text format."""
    lines = (
        "\t".join("\\N" if v is None else "".join(_OUT.get(ch, ch) for ch in v) for v in row)
        for row in rows
    )
    return "".join(line + "\n" for line in lines).encode()


def c_split(chunks: list[bytes], width: int) -> list[list[str | None]]:
    """The C splitter's columns of the data fed as ``chunks``."""
    splitter = TextCopySplitter(width)
    for chunk in chunks:
        splitter.feed(chunk)
    buffers = splitter.finish()
    arrays = [
        pa.Array.from_buffers(
            pa.string(), splitter.rows, [pa.py_buffer(v), pa.py_buffer(o), pa.py_buffer(d)]
        )
        for v, o, d in buffers
    ]
    for array in arrays:
        array.validate(full=True)
    return [array.to_pylist() for array in arrays]


def outcome(split: Any, *args: Any) -> Any:
    """The columns, or the error's args."""
    try:
        return split(*args)
    except CopyDataError as exc:
        return ("error", *exc.args)


def psycopg_rows(data: bytes, width: int) -> list[list[str | None]]:
    """psycopg's own parse of each line (it reads the escapes ``COPY TO`` writes)."""
    tx = Transformer()
    tx.set_loader_types([_TEXT_OID] * width, pq.Format.TEXT)
    lines = data.split(b"\n")[:-1]
    return [list(_copy_base._parse_row_text(line + b"\n", tx)) for line in lines]


def columns_of(rows: list[list[str | None]], width: int) -> list[list[str | None]]:
    return [[row[i] for row in rows] for i in range(width)]


_CHARS = st.one_of(
    st.sampled_from(list("\\\t\n\r\b\f\v\x00\x01\x7fN.x0é中😀\u2028")),
    st.characters(codec="utf-8"),
)
_VALUES = st.one_of(
    st.none(),
    st.sampled_from(["", "\\N", "N", "\\", "\\.", "a\tb"]),
    st.text(_CHARS, max_size=10),
)


@st.composite
def _tables(draw: st.DrawFn) -> tuple[int, list[list[str | None]]]:
    width = draw(st.integers(1, 4))
    rows = draw(st.lists(st.lists(_VALUES, min_size=width, max_size=width), max_size=6))
    return width, rows


@settings(max_examples=examples(200, 5000))
@given(_tables())
@example((1, [[""]]))
@example((1, [[None]]))
@example((2, [["\\N", None], ["", "é"]]))
@example((3, [["\t\n\\", "\x00", "😀"]]))
def test_rows_written_by_copy_come_back_exactly(table: tuple[int, list[list[Any]]]) -> None:
    width, rows = table
    data = copy_out(rows)
    expected = columns_of(rows, width)
    assert split_text_copy(data, width) == expected
    assert c_split([data], width) == expected
    assert columns_of(psycopg_rows(data, width), width) == expected


@settings(max_examples=examples(60, 1000))
@given(_tables())
@example((2, [["a\\b", None], ["\\N", "x"]]))
def test_rows_cut_at_every_byte_come_back_exactly(table: tuple[int, list[list[Any]]]) -> None:
    width, rows = table
    data = copy_out(rows)
    expected = columns_of(rows, width)
    for cut in range(len(data) + 1):
        assert c_split([data[:cut], data[cut:]], width) == expected, cut
    assert c_split([data[i : i + 1] for i in range(len(data))], width) == expected


_RAW = st.lists(
    st.sampled_from(
        [b"a", b"N", b"\\", b"\t", b"\n", b"x", b"0", b"3", b"7", b"8", b"f", b"F", b".", b"b"]
        + [b"\xc3", b"\xa9", b"\xff", b"\xed\xa0\x80", b"\x00", b"\\N", b"\\x", b"\\0"]
    ),
    max_size=24,
).map(b"".join)


@settings(max_examples=examples(400, 10000))
@given(st.integers(1, 3), _RAW, st.integers(0, 30))
@example(1, b"\\", 0)
@example(1, b"\\N", 0)
@example(1, b"\\N\n", 0)
@example(1, b"\\x", 0)
@example(1, b"\\xf", 0)
@example(1, b"\\xfg\n", 0)
@example(1, b"\\101\\x41\\7a\n", 0)
@example(1, b"\\377\n", 0)
@example(1, b"\\000\n", 0)
@example(1, b"\\xc3\\xa9\n", 1)
@example(2, b"a\n", 0)
@example(1, b"a\tb\n", 0)
@example(1, b"\\.\n", 0)
@example(1, b"a\\\nb\n", 2)
def test_any_bytes_split_as_the_reference_does(width: int, data: bytes, cut: int) -> None:
    cut = min(cut, len(data))
    expected = outcome(split_text_copy, data, width)
    assert outcome(c_split, [data], width) == expected
    assert outcome(c_split, [data[:cut], data[cut:]], width) == expected


@pytest.mark.parametrize(
    ("data", "width", "error"),
    [
        (b"a\tb\n", 1, ("more fields than columns", 0, 0)),
        (b"a\n", 2, ("fewer fields than columns", 0, 0)),
        (b"a\tb\nc\td\te\n", 2, ("more fields than columns", 1, 1)),
        (b"a\nb", 1, ("the data ends inside a row", 1, None)),
        (b"a\\", 1, ("the data ends inside a row", 0, None)),
        (b"\\.\n", 1, ("the end-of-copy marker \\. inside the data", 0, 0)),
        (b"ok\t\\xff\n", 2, ("the value is not valid UTF-8", 0, 1)),
        (b"\\000\n", 1, ("the value is not valid UTF-8", 0, 0)),
        (b"\xc3(\n", 1, ("the value is not valid UTF-8", 0, 0)),
    ],
)
def test_malformed_data_names_row_and_column(
    data: bytes, width: int, error: tuple[Any, ...]
) -> None:
    assert outcome(split_text_copy, data, width) == ("error", *error)
    assert outcome(c_split, [data], width) == ("error", *error)


def test_escapes_read_as_copy_from_reads_them() -> None:
    data = b"\\101\\x41\\x4\\xz\\q\\\\\\N\t\\N\t\n"
    expected = [["AA\x04xzq\\N"], [None], [""]]
    assert split_text_copy(data, 3) == expected
    assert c_split([data], 3) == expected
    # \0 makes a NUL: an error for the value holding it, as COPY FROM's encoding check says
    assert outcome(c_split, [b"a\\0\n"], 1) == ("error", "the value is not valid UTF-8", 0, 0)


def test_a_large_feed_is_split_with_the_gil_released() -> None:
    """Feeds of 64 KiB and more run without the GIL (the same code): 20,000 rows."""
    rows = [[str(i), None if i % 7 == 0 else "é\t\\" * (i % 5), ""] for i in range(20_000)]
    data = copy_out(rows)
    assert len(data) > 65_536
    assert c_split([data], 3) == columns_of(rows, 3)


def test_splitter_refuses_bad_widths_and_reports_no_rows_for_no_data() -> None:
    with pytest.raises(ValueError, match="width"):
        TextCopySplitter(0)
    assert c_split([b""], 2) == [[], []]
