"""A text-protocol result set read below PyMySQL: whole columns as Arrow arrays.

PyMySQL parses each row of a result set in Python (a packet object per row, a length-coded
read, a decode and a converter per value): for a snapshot that is most of the agent's time. The
snapshot's chunks are read here instead. The query is sent and its column definitions are read
by PyMySQL (``query(..., unbuffered=True)``); the row packets that follow are read from the
connection's socket file in large blocks, framed in one pass (length, sequence number, the
16 MiB continuation: in C, :func:`capture.mysql._rowdecode.frame_rows`, which leaves a packet
out of sequence and a row longer than one packet to :func:`frame_packets`, its Python
reference), and their length-coded values are located with numpy one column at a time for all
rows at once. Each column becomes an Arrow ``binary`` array holding exactly the
bytes the server sent (SQL NULL as null); no Python object is made per value.

:meth:`TextResult.values` turns a column into the Python values PyMySQL would have returned,
with the decoding and converter PyMySQL chose for that column (its own ``converters`` list, so
the two cannot drift apart): the road for every column without a vectorized encoding, and for
the resume key.

The protocol (MySQL client/server protocol, "Text Resultset"; MariaDB the same): a column
count, one column definition per column, an EOF packet (PyMySQL does not ask for
``CLIENT_DEPRECATE_EOF``), one packet per row with each value a length-encoded string (``0xFB``
for NULL), and an EOF packet (``0xFE``, shorter than 9 bytes) or an error packet (``0xFF``). A
payload of exactly ``0xFFFFFF`` bytes continues in the next packet.
"""

from __future__ import annotations

import errno
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import pyarrow as pa
from pymysql import err
from pymysql.constants import CR
from pymysql.protocol import MysqlPacket

from capture.mysql import _rowdecode  # the bootstrap builds it (binlog.py says how if not)
from pipeline.errors import CaptureError

__all__ = [
    "TextResult",
    "frame_packets",
    "frame_read",
    "read_text_result",
    "split_columns",
    "split_values",
]

_MAX_PAYLOAD: Final = 0xFFFFFF
_BLOCK: Final = 1 << 18
"""Bytes asked of the socket file per read."""
_HEADER: Final = struct.Struct("<I")
_NULL: Final = 0xFB
_EOF: Final = 0xFE
_ERROR: Final = 0xFF
_MORE_RESULTS: Final = 8
"""``SERVER_MORE_RESULTS_EXISTS`` in an EOF packet's status flags."""


@dataclass(frozen=True, slots=True)
class TextResult:
    """The rows of one result set, column by column.

    Attributes:
        columns: Per column, the bytes of each value as the server sent them (null for NULL).
        converters: Per column, PyMySQL's ``(encoding, converter)`` for it (None: none).
        num_rows: Rows in the result.
    """

    columns: list[pa.Array]
    converters: list[tuple[str | None, Callable[[Any], Any] | None]]
    num_rows: int

    def values(self, i: int, start: int = 0, stop: int | None = None) -> list[Any]:
        """Column ``i``'s values (rows ``start`` to ``stop``) as PyMySQL returns them: decoded
        with its encoding, then through its converter, None for NULL."""
        encoding, convert = self.converters[i]
        column = self.columns[i]
        raw = column.slice(start, None if stop is None else stop - start).to_pylist()
        if encoding is None and convert is None:
            return raw
        out: list[Any] = []
        append = out.append
        for data in raw:
            if data is not None:
                if encoding is not None:
                    data = data.decode(encoding)
                if convert is not None:
                    data = convert(data)
            append(data)
        return out


def read_text_result(conn: Any, query: str) -> TextResult:
    """Run ``query`` (a SELECT, already formatted) on PyMySQL connection ``conn`` and read its
    whole result set.

    Raises:
        pymysql.err.MySQLError: As PyMySQL raises it: the server's error packet, a lost
            connection, a packet out of sequence.
        CaptureError: A row that does not parse as the protocol says.
    """
    conn.query(query, unbuffered=True)
    result = conn._result
    if result is None or not result.unbuffered_active:
        raise CaptureError("snapshot query returned no result set")
    converters = list(result.converters)
    data, starts, ends, status = _read_rows(conn, result)
    result.unbuffered_active = False
    result.connection = None
    result.has_next = bool(status & _MORE_RESULTS)
    return TextResult(split_values(data, starts, ends, len(converters)), converters, len(starts))


def _read_rows(conn: Any, result: Any) -> tuple[bytes, np.ndarray, np.ndarray, int]:
    """The row packets of the active result up to its EOF packet: the bytes read, each row's
    payload start and end in them, and the EOF's status flags."""
    buf = bytearray()
    framed: list[bytes] = []
    joined: list[bytes] = []
    pos = 0
    seq = conn._next_seq_id
    read = conn._rfile.read1
    while True:
        block = _read_block(conn, read)
        buf += block
        pos, seq, end = frame_read(buf, pos, seq, framed, joined)
        if end is None:
            continue
        conn._next_seq_id = seq
        kind, at = end
        if kind == _ERROR:
            result.unbuffered_active = False
            payload = bytes(buf[at:pos])
            MysqlPacket(payload, conn.encoding).raise_for_error()
            raise CaptureError("the server's error packet did not raise")  # pragma: no cover
        status = int.from_bytes(buf[at + 3 : at + 5], "little")
        break
    if pos != len(buf):
        conn._force_close()
        raise err.OperationalError(
            CR.CR_COMMANDS_OUT_OF_SYNC, "bytes after the end of a result set"
        )
    data = bytes(buf)
    pairs = np.frombuffer(b"".join(framed), dtype=np.int64).reshape(-1, 2)
    starts, ends = pairs[:, 0].copy(), pairs[:, 1].copy()
    if joined:
        # Rows longer than one packet: their payloads joined, after the bytes read.
        base = len(data)
        data += b"".join(joined)
        long_rows = np.nonzero(starts < 0)[0]
        sizes = np.array([len(j) for j in joined], dtype=np.int64)
        offsets = base + np.concatenate(([0], np.cumsum(sizes)[:-1]))
        starts[long_rows] = offsets
        ends[long_rows] = offsets + sizes
    return data, starts, ends, status


def _read_block(conn: Any, read: Callable[[int], bytes]) -> bytes:
    """The next bytes from the connection (at least one), with PyMySQL's error handling."""
    while True:
        try:
            block = read(_BLOCK)
            break
        except OSError as exc:
            if exc.errno == errno.EINTR:
                continue
            conn._force_close()
            raise err.OperationalError(
                CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({exc})"
            ) from exc
        except BaseException:
            conn._force_close()
            raise
    if not block:
        conn._force_close()
        raise err.OperationalError(
            CR.CR_SERVER_LOST, "Lost connection to MySQL server during query"
        )
    return block


def frame_read(
    buf: bytearray, pos: int, seq: int, framed: list[bytes], joined: list[bytes]
) -> tuple[int, int, tuple[int, int] | None]:
    """:func:`frame_packets` in C where it can be: the same framing, each row's payload start
    and end appended to ``framed`` as native int64 pairs (one bytes object per call or two).

    Raises:
        pymysql.err.InternalError: A packet out of sequence (as PyMySQL raises it).
    """
    rows, pos, seq, kind, at = _rowdecode.frame_rows(buf, pos, seq)
    framed.append(rows)
    if kind:
        return pos, seq, (kind, at)
    # A packet the C framing leaves here (not read whole yet, out of sequence, a row longer
    # than one packet): the Python framing takes it and whatever follows.
    frames: list[int] = []
    pos, seq, end = frame_packets(buf, pos, seq, frames, joined)
    if frames:
        framed.append(np.array(frames, dtype=np.int64).tobytes())
    return pos, seq, end


def frame_packets(
    buf: bytearray, pos: int, seq: int, frames: list[int], joined: list[bytes]
) -> tuple[int, int, tuple[int, int] | None]:
    """Frame the complete row packets of ``buf`` from ``pos``.

    Each row's payload start and end are appended to ``frames`` (two ints per row); a row
    longer than one packet is appended to ``joined`` whole and framed as ``(-1, -1)``.

    Args:
        buf: The bytes read so far.
        pos: Where the next packet header starts.
        seq: The sequence number the next packet must have.
        frames: Rows framed so far (appended to).
        joined: Payloads of rows longer than a packet (appended to).

    Returns:
        ``(pos, seq, end)``: where framing stopped (the first incomplete packet, or after the
        end), the next sequence number, and ``(0xFE or 0xFF, payload offset)`` of the EOF or
        error packet that ends the result (None when not read yet).

    Raises:
        pymysql.err.InternalError: A packet out of sequence (as PyMySQL raises it).
    """
    unpack = _HEADER.unpack_from
    size = len(buf)
    append = frames.append
    while pos + 4 <= size:
        header = unpack(buf, pos)[0]
        length = header & _MAX_PAYLOAD
        if (header >> 24) != seq:
            raise _out_of_sequence(header >> 24, seq)
        start = pos + 4
        stop = start + length
        if stop > size:
            break
        if length == _MAX_PAYLOAD:
            whole = _continued(buf, stop, (seq + 1) & 255)
            if whole is None:
                break  # the rest of the row is not read yet
            payload, pos, seq = whole
            joined.append(payload)
            append(-1)
            append(-1)
            continue
        seq = (seq + 1) & 255
        first = buf[start] if length else 0
        if first >= _EOF and (first == _ERROR or length < 9):
            return stop, seq, (first, start)
        append(start)
        append(stop)
        pos = stop
    return pos, seq, None


def _continued(buf: bytearray, pos: int, seq: int) -> tuple[bytes, int, int] | None:
    """A row payload that fills its first packet: the packets from ``pos`` joined to it, the
    position after them and the next sequence number; None when they are not all read."""
    parts = [bytes(buf[pos - _MAX_PAYLOAD : pos])]
    size = len(buf)
    while True:
        if pos + 4 > size:
            return None
        header = _HEADER.unpack_from(buf, pos)[0]
        if (header >> 24) != seq:
            raise _out_of_sequence(header >> 24, seq)
        length = header & _MAX_PAYLOAD
        stop = pos + 4 + length
        if stop > size:
            return None
        parts.append(bytes(buf[pos + 4 : stop]))
        pos, seq = stop, (seq + 1) & 255
        if length < _MAX_PAYLOAD:
            return b"".join(parts), pos, seq


def _out_of_sequence(got: int, expected: int) -> err.InternalError:
    return err.InternalError(f"Packet sequence number wrong - got {got} expected {expected}")


def split_values(data: bytes, starts: np.ndarray, ends: np.ndarray, width: int) -> list[pa.Array]:
    """:func:`split_columns` in C (:func:`capture.mysql._rowdecode.split_rows`: one pass per
    column over the rows, no numpy temporaries): the same columns, the same errors; the Python
    reference for data of 2 GiB or more (a view's offset is 32 bits).

    Raises:
        CaptureError: A row with another number of values, or a malformed length.
    """
    if len(data) + _INLINE >= 2**31:
        return split_columns(data, starts, ends, width)
    try:
        parts = _rowdecode.split_rows(
            data,
            np.ascontiguousarray(starts, dtype=np.int64),
            np.ascontiguousarray(ends, dtype=np.int64),
            width,
        )
    except ValueError as exc:
        raise CaptureError(str(exc)) from None
    values = pa.py_buffer(data)
    n = len(starts)
    return [
        pa.Array.from_buffers(
            pa.binary_view(),
            n,
            [None if validity is None else pa.py_buffer(validity), pa.py_buffer(views), values],
            null_count=nulls,
        )
        for views, validity, nulls in parts
    ]


def split_columns(data: bytes, starts: np.ndarray, ends: np.ndarray, width: int) -> list[pa.Array]:
    """The length-encoded values of each row payload (``data[starts[r]:ends[r]]``) as ``width``
    Arrow binary columns.

    Raises:
        CaptureError: A row with another number of values, or a malformed length.
    """
    # The data, then zeros: a view inlines 12 bytes, read whole even for a value at the end.
    buf = np.zeros(len(data) + _INLINE, dtype=np.uint8)
    buf[: len(data)] = np.frombuffer(data, dtype=np.uint8)
    n = len(starts)
    pos = starts.copy()
    columns: list[pa.Array] = []
    for i in range(width):
        if n and (pos >= ends).any():
            raise CaptureError(f"a result row ends before its column {i + 1} of {width}")
        first = buf[pos].astype(np.int64) if n else np.zeros(0, np.int64)
        length = first.copy()
        header = np.ones(n, dtype=np.int64)
        null = first == _NULL
        wide = np.nonzero(first >= _NULL)[0]
        if wide.size:
            codes = first[wide]
            if (codes == _ERROR).any():
                raise CaptureError(f"a result row's column {i + 1}: malformed length (0xFF)")
            length[wide[codes == _NULL]] = 0
            for code, size in ((0xFC, 2), (0xFD, 3), (0xFE, 8)):
                rows = wide[codes == code]
                if rows.size:
                    at = pos[rows] + 1
                    value = np.zeros(rows.size, dtype=np.uint64)
                    for k in range(size):
                        value |= buf[at + k].astype(np.uint64) << np.uint64(8 * k)
                    length[rows] = value.astype(np.int64)
                    header[rows] = 1 + size
        start = pos + header
        pos = start + length
        if n and ((pos > ends).any() or (length < 0).any()):  # < 0: an 8-byte length >= 2**63
            raise CaptureError(f"a result row's column {i + 1} runs past the row's end")
        columns.append(_binary(buf, start, length, null))
    if n and (pos != ends).any():
        raise CaptureError(f"a result row has more than its {width} columns")
    return columns


def _binary(buf: np.ndarray, start: np.ndarray, length: np.ndarray, null: np.ndarray) -> pa.Array:
    """The values at ``start`` (``length`` bytes each) of ``buf`` as one Arrow array (null where
    ``null``), without copying them: a ``binary_view`` array whose views point into ``buf``
    (values of up to 12 bytes are inlined in their view, as the format requires; ``buf`` ends
    with 12 bytes past the data)."""
    n = len(start)
    nulls = int(null.sum())
    validity = None if not nulls else pa.py_buffer(np.packbits(~null, bitorder="little"))
    if len(buf) >= 2**31:  # a view's offset is 32 bits: copy the values out instead
        data = buf.tobytes()
        values = [
            None if z else data[a : a + k]
            for a, k, z in zip(start.tolist(), length.tolist(), null.tolist(), strict=True)
        ]
        return pa.array(values, pa.large_binary())
    views = np.zeros((n, 16), dtype=np.uint8)
    words = views.view(np.int32)  # per view: length, then 12 inline bytes or prefix, 0, offset
    words[:, 0] = length
    if n:
        head = buf[start[:, None] + _INLINE_AT]
        head[_INLINE_AT >= length[:, None]] = 0  # inline bytes past the value are zero
        views[:, 4:] = head
        long_values = length > _INLINE
        words[long_values, 2] = 0  # the only data buffer
        words[long_values, 3] = start[long_values]
    return pa.Array.from_buffers(
        pa.binary_view(),
        n,
        [validity, pa.py_buffer(views), pa.py_buffer(buf)],
        null_count=nulls,
    )


_INLINE: Final = 12
"""Bytes a ``binary_view`` value of at most this length holds in its view."""
_INLINE_AT: Final = np.arange(_INLINE, dtype=np.int64)
