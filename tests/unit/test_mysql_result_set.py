"""The text-protocol row reader below PyMySQL (:mod:`capture.mysql.result_set`), on packets
built byte by byte as the MySQL client/server protocol writes them."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysql import err

from capture.mysql.result_set import frame_packets, frame_read, split_columns, split_values
from pipeline.errors import CaptureError


def _lenenc(value: bytes | None, *, wide: bool = False) -> bytes:
    """A length-encoded string (``wide``: the 8-byte length form whatever the size)."""
    if value is None:
        return b"\xfb"
    n = len(value)
    if wide:
        return b"\xfe" + n.to_bytes(8, "little") + value
    if n < 251:
        return bytes([n]) + value
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + value
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + value
    return b"\xfe" + n.to_bytes(8, "little") + value


def _packets(payloads: list[bytes], seq: int = 0) -> bytes:
    """Packets of ``payloads`` from sequence number ``seq`` (a payload of 16 MiB - 1 bytes or
    more continues in the next packets, as the server splits it)."""
    out = bytearray()
    for payload in payloads:
        while True:
            part, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
            out += len(part).to_bytes(3, "little") + bytes([seq & 255]) + part
            seq += 1
            if len(part) < 0xFFFFFF:
                break
    return bytes(out)


_EOF = b"\xfe\x00\x00\x22\x00"
_ROWS: list[list[bytes | None]] = [
    [b"1", b"plain", None],
    [b"-22", b"", b"x" * 251],
    [None, "é 中文 😀".encode(), b"y" * 70_000],
    [b"4", b"\xfb\xfc\xfe\xff", b"z" * 3],
]


def _frame(stream: bytes, block: int) -> tuple[bytes, list[int], tuple[int, int] | None]:
    """Frame ``stream`` as it arrives ``block`` bytes at a time."""
    buf = bytearray()
    frames: list[int] = []
    joined: list[bytes] = []
    pos, seq, end = 0, 1, None
    for at in range(0, len(stream), block):
        buf += stream[at : at + block]
        pos, seq, end = frame_packets(buf, pos, seq, frames, joined)
        if end is not None:
            break
    assert not joined
    return bytes(buf), frames, end


@pytest.mark.parametrize("block", [1, 7, 4096, 1 << 20])
def test_rows_are_framed_and_split_into_columns_whatever_the_reads(block: int) -> None:
    payloads = [b"".join(_lenenc(v) for v in row) for row in _ROWS]
    payloads.append(b"".join(_lenenc(v, wide=True) for v in _ROWS[0]))  # 0xFE first: a row
    stream = _packets([*payloads, _EOF], seq=1)
    data, frames, end = _frame(stream, block)
    assert end == (0xFE, len(stream) - len(_EOF))
    pairs = np.array(frames, dtype=np.int64).reshape(-1, 2)
    columns = split_columns(data, pairs[:, 0].copy(), pairs[:, 1].copy(), 3)
    want = [list(col) for col in zip(*_ROWS, _ROWS[0], strict=True)]
    assert [c.to_pylist() for c in columns] == want
    assert columns[0].null_count == 1


def test_an_error_packet_ends_the_rows() -> None:
    error = b"\xff\x7a\x04#21000Subquery returns more than 1 row"
    stream = _packets([_lenenc(b"1"), error], seq=1)
    _, frames, end = _frame(stream, 5)
    assert len(frames) == 2
    assert end == (0xFF, len(stream) - len(error))


def test_a_packet_out_of_sequence_is_refused() -> None:
    stream = _packets([_lenenc(b"1")], seq=2)
    with pytest.raises(err.InternalError, match="got 2 expected 1"):
        frame_packets(bytearray(stream), 0, 1, [], [])


def test_a_row_longer_than_one_packet_is_joined() -> None:
    big = b"b" * 0xFFFFFF
    payload = _lenenc(b"7") + _lenenc(big)  # 16 MiB + 5 bytes: a full packet, then the rest
    stream = bytearray(_packets([payload, _lenenc(b"8") + _lenenc(b"s"), _EOF], seq=1))
    frames: list[int] = []
    joined: list[bytes] = []
    pos, seq, end = frame_packets(stream[:100], 0, 1, frames, joined)
    assert (pos, end, frames) == (0, None, [])  # the first packet is not complete yet
    pos, seq, end = frame_packets(stream, 0, 1, frames, joined)
    assert end is not None and seq == 5
    assert joined == [payload]
    assert frames[:2] == [-1, -1]
    data = bytes(stream) + joined[0]
    starts = np.array([len(stream), frames[2]], dtype=np.int64)
    ends = np.array([len(data), frames[3]], dtype=np.int64)
    first, second = split_columns(data, starts, ends, 2)
    assert first.to_pylist() == [b"7", b"8"]
    assert second[1].as_py() == b"s"
    assert len(second[0].as_py()) == 0xFFFFFF


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (_lenenc(b"1"), "ends before its column 2"),
        (_lenenc(b"1") + b"\x05ab", "runs past the row's end"),
        (_lenenc(b"1") + _lenenc(b"2") + _lenenc(b"3"), "more than its 2 columns"),
        (_lenenc(b"1") + b"\xff", "malformed length"),
    ],
)
def test_a_row_that_does_not_parse_is_an_error(row: bytes, message: str) -> None:
    starts = np.array([0], dtype=np.int64)
    ends = np.array([len(row)], dtype=np.int64)
    with pytest.raises(CaptureError, match=message):
        split_columns(row, starts, ends, 2)


# --- the C framing (frame_read) against the Python reference (frame_packets) ----------------------


def _framed_by(stream: bytes, cuts: list[int], framing: str) -> tuple[list[int], Any]:
    """Frame ``stream`` as it arrives in the pieces ``cuts`` delimit, by ``frame_read`` (C) or
    ``frame_packets`` (Python): the frames, and the end or the error."""
    buf = bytearray()
    pos, seq, end = 0, 1, None
    framed: list[bytes] = []
    frames: list[int] = []
    joined: list[bytes] = []
    try:
        for a, b in itertools.pairwise([0, *sorted(cuts), len(stream)]):
            buf += stream[a:b]
            if framing == "c":
                pos, seq, end = frame_read(buf, pos, seq, framed, joined)
            else:
                pos, seq, end = frame_packets(buf, pos, seq, frames, joined)
            if end is not None:
                break
    except err.InternalError as exc:
        return (frames if framing == "py" else _ints(framed)), ("error", str(exc))
    got = frames if framing == "py" else _ints(framed)
    return got, (end, pos, seq, [len(j) for j in joined])


def _ints(framed: list[bytes]) -> list[int]:
    return np.frombuffer(b"".join(framed), dtype=np.int64).tolist()


_PAYLOADS = st.one_of(
    st.binary(max_size=40),
    st.binary(min_size=9, max_size=30).map(lambda b: b"\xfe" + b),  # 0xFE first: a row
    st.sampled_from([b"", b"\xfb", b"\xfe" + b"\x00" * 7]),  # empty, NULL, a short 0xFE
)


@given(
    payloads=st.lists(_PAYLOADS, max_size=12),
    last=st.sampled_from([_EOF, b"\xff\x7a\x04#21000boom"]),
    cuts=st.lists(st.integers(min_value=0, max_value=600), max_size=6),
    skew=st.sampled_from([0, 0, 1]),
)
@settings(max_examples=150, deadline=None)
def test_the_c_framing_frames_what_the_python_framing_frames(
    payloads: list[bytes], last: bytes, cuts: list[int], skew: int
) -> None:
    """Any packets (a row starting 0xFE, empty payloads, the ending EOF or error packet, a
    packet out of sequence when ``skew``), arriving in any pieces: the same frames, the same
    end, or the same error."""
    packets = [_packets([p], seq=1 + i) for i, p in enumerate(payloads)]
    if skew and packets:
        packets[-1] = _packets([payloads[-1]], seq=len(payloads) + 1)  # a sequence number skipped
    stream = b"".join(packets) + _packets([last], seq=1 + len(payloads) + skew)
    cuts = [c for c in cuts if c < len(stream)]
    assert _framed_by(stream, cuts, "c") == _framed_by(stream, cuts, "py")


def test_the_c_framing_hands_a_long_row_to_the_python_framing() -> None:
    big = b"b" * 0xFFFFFF
    payloads = [_lenenc(b"1"), _lenenc(b"7") + _lenenc(big), _lenenc(b"8"), _EOF]
    stream = _packets(payloads, seq=1)
    cuts = [3, 20, 5000, len(stream) - 30]
    got = _framed_by(stream, cuts, "c")
    assert got == _framed_by(stream, cuts, "py")
    frames, (end, _pos, seq, joined) = got
    assert frames[2:4] == [-1, -1] and joined == [len(payloads[1])] and end[0] == 0xFE


# --- the C split (split_values) against the Python reference (split_columns) ----------------------

_VALUES = st.one_of(
    st.none(),
    st.binary(max_size=20),
    st.binary(min_size=250, max_size=260),
)
"""Values of the 1- and 2-byte length forms (the 3-byte form: the test after it)."""


def _split_by(split: Any, data: bytes, bounds: list[tuple[int, int]], width: int) -> Any:
    starts = np.array([b[0] for b in bounds], dtype=np.int64)
    ends = np.array([b[1] for b in bounds], dtype=np.int64)
    try:
        columns = split(data, starts, ends, width)
    except CaptureError as exc:
        return ("error", str(exc))
    return [(c.to_pylist(), c.null_count, str(c.type)) for c in columns]


@given(
    rows=st.lists(st.lists(_VALUES, min_size=2, max_size=2), max_size=6),
    garbage=st.lists(st.binary(max_size=12), max_size=3),
    wide=st.booleans(),
    width=st.sampled_from([2, 2, 1, 3]),
)
@settings(max_examples=150, deadline=None)
def test_the_c_split_gives_the_python_columns_and_errors(
    rows: list[list[bytes | None]], garbage: list[bytes], wide: bool, width: int
) -> None:
    """Rows of two values (every length form, NULLs, the 8-byte form when ``wide``), rows of
    random bytes, split as 1, 2 or 3 columns: the same columns, or the same error."""
    payloads = [b"".join(_lenenc(v, wide=wide and v is not None) for v in row) for row in rows]
    payloads += garbage
    data = b"\x00" * 3 + b"".join(payloads)  # the rows start anywhere in the data
    bounds, at = [], 3
    for payload in payloads:
        bounds.append((at, at + len(payload)))
        at += len(payload)
    want = _split_by(split_columns, data, bounds, width)
    assert _split_by(split_values, data, bounds, width) == want


def test_the_c_split_keeps_a_long_value_in_place_and_inlines_a_short_one() -> None:
    rows: list[list[bytes | None]] = [[b"x" * 13, b"y" * 12], [None, b""], [b"z" * 70_000, b"w"]]
    payloads = [b"".join(_lenenc(v) for v in row) for row in rows]
    data = b"".join(payloads)
    sizes = np.array([len(p) for p in payloads], dtype=np.int64)
    ends = np.cumsum(sizes)
    starts = ends - sizes
    first, second = split_values(data, starts, ends, 2)
    assert first.to_pylist() == [b"x" * 13, None, b"z" * 70_000] and first.null_count == 1
    assert second.to_pylist() == [b"y" * 12, b"", b"w"] and second.null_count == 0
    assert [c.to_pylist() for c in split_columns(data, starts, ends, 2)] == [
        first.to_pylist(),
        second.to_pylist(),
    ]
