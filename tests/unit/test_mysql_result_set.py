"""The text-protocol row reader below PyMySQL (:mod:`capture.mysql.result_set`), on packets
built byte by byte as the MySQL client/server protocol writes them."""

from __future__ import annotations

import numpy as np
import pytest
from pymysql import err

from capture.mysql.result_set import frame_packets, split_columns
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
