"""A pure decoder of PostgreSQL's ``pgoutput`` logical replication messages.

The replication stream wraps each message in ``XLogData`` (``w``); the message itself is one of
the logical replication message formats of the PostgreSQL protocol documentation ("Logical
Replication Message Formats"): Begin, Commit, Origin, Relation, Type, Insert, Update, Delete,
Truncate, Message and, with ``proto_version`` 2 and ``streaming on``, the Stream Start/Stop/
Commit/Abort messages of large in-progress transactions. Inside a streamed block every
transaction-bound message carries the transaction id first, so :func:`decode_message` takes
``in_stream`` from the caller, who tracks Stream Start and Stream Stop.

Nothing here talks to a server, so every format is unit-tested on hand-built bytes::

    >>> import struct
    >>> decode_message(b"B" + struct.pack("!qqi", 0x1000, 0, 742))
    Begin(final_lsn=4096, commit_time_us=0, xid=742)

Column values of a tuple stay as sent: ``str`` for text (``t``), :class:`BinaryDatum` for binary
(``b``, only with the ``binary`` option), ``None`` for SQL NULL (``n``) and :data:`UNCHANGED_TOAST`
for an unchanged TOASTed value the WAL does not carry (``u``). Conversion to Debezium values is
:mod:`capture.postgresql.types`'s job.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Final

from pipeline.errors import CaptureError

__all__ = [
    "PG_EPOCH_US",
    "UNCHANGED_TOAST",
    "BinaryDatum",
    "Begin",
    "Commit",
    "Origin",
    "RelationColumn",
    "Relation",
    "TypeInfo",
    "Insert",
    "Update",
    "Delete",
    "Truncate",
    "LogicalMessage",
    "StreamStart",
    "StreamStop",
    "StreamCommit",
    "StreamAbort",
    "PgOutputMessage",
    "Value",
    "ProtocolError",
    "decode_message",
    "decode_xlog_data",
    "plain_change",
    "transaction_boundary",
    "decode_keepalive",
    "standby_status_update",
    "pg_time_to_unix_ms",
]

PG_EPOCH_US: Final = 946_684_800 * 1_000_000
"""Microseconds from the Unix epoch to PostgreSQL's epoch (2000-01-01 UTC)."""


class _UnchangedToast:
    """The ``u`` marker: a TOASTed value the update did not change, absent from the WAL."""

    __slots__ = ()
    _instance: _UnchangedToast | None = None

    def __new__(cls) -> _UnchangedToast:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNCHANGED_TOAST"

    def __reduce__(self) -> str:
        return "UNCHANGED_TOAST"


UNCHANGED_TOAST: Final = _UnchangedToast()
"""Stands for a column sent as ``u`` (unchanged TOAST value); compare with ``is``."""


@dataclass(frozen=True, slots=True)
class BinaryDatum:
    """A column value in the type's binary send format (``b``; only with ``binary 'true'``)."""

    data: bytes


Value = str | BinaryDatum | _UnchangedToast | None
"""One column value of a TupleData, as sent."""


class ProtocolError(CaptureError):
    """A replication message is truncated or has an unknown layout."""


# --- messages -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Begin:
    """Start of a transaction; ``final_lsn`` is the LSN of its commit record."""

    final_lsn: int
    commit_time_us: int
    """Commit time, microseconds since 2000-01-01 UTC."""
    xid: int


@dataclass(frozen=True, slots=True)
class Commit:
    """End of a transaction."""

    flags: int
    commit_lsn: int
    """LSN of the commit record (equals the Begin's ``final_lsn``)."""
    end_lsn: int
    """End of the commit record: the position to confirm once the transaction is durable."""
    commit_time_us: int


@dataclass(frozen=True, slots=True)
class Origin:
    """The transaction was replicated from another node (``origin`` name and its commit LSN)."""

    origin_lsn: int
    name: str


@dataclass(frozen=True, slots=True)
class RelationColumn:
    """One column of a Relation message."""

    name: str
    type_oid: int
    type_modifier: int
    is_key: bool
    """Part of the replica identity (the primary key under DEFAULT; every column under FULL)."""


@dataclass(frozen=True, slots=True)
class Relation:
    """A table's description, sent before its first change in each session and after DDL."""

    relation_id: int
    namespace: str
    """Schema name; pgoutput sends an empty string for ``pg_catalog``."""
    name: str
    replica_identity: str
    """``d`` default, ``n`` nothing, ``f`` full, ``i`` index."""
    columns: tuple[RelationColumn, ...]
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class TypeInfo:
    """A user-defined type's name, sent before a Relation that uses it."""

    type_oid: int
    namespace: str
    name: str
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class Insert:
    """A new row."""

    relation_id: int
    new: tuple[Value, ...]
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class Update:
    """A changed row.

    ``old_kind`` is ``K`` when ``old`` holds only the replica identity key (the key changed, or
    REPLICA IDENTITY INDEX), ``O`` when it holds the whole old row (REPLICA IDENTITY FULL), and
    None when no old tuple was sent (DEFAULT identity and an unchanged key).
    """

    relation_id: int
    old_kind: str | None
    old: tuple[Value, ...] | None
    new: tuple[Value, ...]
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class Delete:
    """A deleted row: its key (``K``) or whole old row (``O``)."""

    relation_id: int
    old_kind: str
    old: tuple[Value, ...]
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class Truncate:
    """One TRUNCATE statement over one or more tables."""

    relation_ids: tuple[int, ...]
    cascade: bool
    restart_identity: bool
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class LogicalMessage:
    """``pg_logical_emit_message``: transactional ones arrive inside their transaction."""

    transactional: bool
    lsn: int
    prefix: str
    content: bytes
    xid: int | None = None


@dataclass(frozen=True, slots=True)
class StreamStart:
    """Start of a block of an in-progress transaction (proto 2, ``streaming on``)."""

    xid: int
    first_segment: bool


@dataclass(frozen=True, slots=True)
class StreamStop:
    """End of a streamed block."""


@dataclass(frozen=True, slots=True)
class StreamCommit:
    """Commit of a streamed transaction."""

    xid: int
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time_us: int


@dataclass(frozen=True, slots=True)
class StreamAbort:
    """Abort of a streamed (sub)transaction."""

    xid: int
    subxid: int


PgOutputMessage = (
    Begin
    | Commit
    | Origin
    | Relation
    | TypeInfo
    | Insert
    | Update
    | Delete
    | Truncate
    | LogicalMessage
    | StreamStart
    | StreamStop
    | StreamCommit
    | StreamAbort
)
"""Every message :func:`decode_message` returns."""


# --- decoding -----------------------------------------------------------------------------------

_I16 = struct.Struct("!h")
_I32 = struct.Struct("!i")
_U32 = struct.Struct("!I")
_U64 = struct.Struct("!Q")
_BEGIN = struct.Struct("!QqI")
_COMMIT = struct.Struct("!BQQq")
_XLOG = struct.Struct("!QQq")
_KEEPALIVE = struct.Struct("!QqB")
_STATUS = struct.Struct("!QQQqB")
_COLUMN_TAIL = struct.Struct("!Ii")


class _Reader:
    """A cursor over one message; every read checks the bounds."""

    __slots__ = ("buf", "off")

    def __init__(self, buf: bytes, off: int) -> None:
        self.buf = buf
        self.off = off

    def _need(self, n: int) -> None:
        if self.off + n > len(self.buf):
            raise ProtocolError(
                f"pgoutput message {self.buf[:1]!r} is truncated: needs {n} more byte(s) at "
                f"offset {self.off} of {len(self.buf)}"
            )

    def unpack(self, st: struct.Struct) -> tuple[int, ...]:
        self._need(st.size)
        values = st.unpack_from(self.buf, self.off)
        self.off += st.size
        return values

    def byte(self) -> int:
        self._need(1)
        value = self.buf[self.off]
        self.off += 1
        return value

    def int16(self) -> int:
        return self.unpack(_I16)[0]

    def int32(self) -> int:
        return self.unpack(_I32)[0]

    def uint32(self) -> int:
        return self.unpack(_U32)[0]

    def uint64(self) -> int:
        return self.unpack(_U64)[0]

    def cstring(self) -> str:
        end = self.buf.find(b"\0", self.off)
        if end < 0:
            raise ProtocolError(
                f"pgoutput message {self.buf[:1]!r}: unterminated string at offset {self.off}"
            )
        text = self.buf[self.off : end].decode("utf-8")
        self.off = end + 1
        return text

    def raw(self, n: int) -> bytes:
        if n < 0:
            raise ProtocolError(f"pgoutput message {self.buf[:1]!r}: negative length {n}")
        self._need(n)
        data = self.buf[self.off : self.off + n]
        self.off += n
        return data

    def tuple_data(self) -> tuple[Value, ...]:
        # The hot loop of the stream (every row of every change): bounds are checked once per
        # value with local variables instead of through the helper methods.
        buf, off, size = self.buf, self.off, len(self.buf)
        if off + 2 > size:
            self._need(2)
        (count,) = _I16.unpack_from(buf, off)
        off += 2
        values: list[Value] = []
        append = values.append
        for _ in range(count):
            if off >= size:
                self.off = off
                self._need(1)
            kind = buf[off]
            off += 1
            if kind == 0x74:  # 't'
                if off + 4 > size:
                    self.off = off
                    self._need(4)
                length = int.from_bytes(buf[off : off + 4], "big", signed=True)
                off += 4
                end = off + length
                if length < 0 or end > size:
                    self.off = off
                    self._need(max(length, 0) or size)
                append(buf[off:end].decode("utf-8"))
                off = end
            elif kind == 0x6E:  # 'n'
                append(None)
            elif kind == 0x75:  # 'u'
                append(UNCHANGED_TOAST)
            elif kind == 0x62:  # 'b'
                self.off = off
                append(BinaryDatum(self.raw(self.int32())))
                off = self.off
            else:
                raise ProtocolError(f"unknown TupleData column kind {chr(kind)!r}")
        self.off = off
        return tuple(values)

    def done(self) -> None:
        if self.off != len(self.buf):
            raise ProtocolError(
                f"pgoutput message {self.buf[:1]!r} has {len(self.buf) - self.off} unexpected "
                "trailing byte(s)"
            )


def decode_message(
    data: bytes | bytearray | memoryview, *, in_stream: bool = False
) -> PgOutputMessage:
    """Decode one pgoutput message (the payload of an XLogData message).

    Args:
        data: The message bytes, starting with its type byte.
        in_stream: True between Stream Start and Stream Stop, where transaction-bound messages
            carry the transaction id first.

    Returns:
        The decoded message.

    Raises:
        ProtocolError: The message is truncated, has trailing bytes or an unknown type.
    """
    buf = bytes(data)
    if not buf:
        raise ProtocolError("empty pgoutput message")
    tag = buf[0]
    r = _Reader(buf, 1)
    msg: PgOutputMessage
    xid: int | None
    if tag == 0x42:  # 'B'
        final_lsn, ts, begin_xid = r.unpack(_BEGIN)
        msg = Begin(final_lsn, ts, begin_xid)
    elif tag == 0x43:  # 'C'
        flags, commit_lsn, end_lsn, ts = r.unpack(_COMMIT)
        msg = Commit(flags, commit_lsn, end_lsn, ts)
    elif tag == 0x49:  # 'I'
        xid = r.uint32() if in_stream else None
        relid = r.uint32()
        if r.byte() != 0x4E:  # 'N'
            raise ProtocolError("Insert message without its 'N' tuple")
        msg = Insert(relid, r.tuple_data(), xid)
    elif tag == 0x55:  # 'U'
        xid = r.uint32() if in_stream else None
        relid = r.uint32()
        kind = r.byte()
        old_kind: str | None = None
        old: tuple[Value, ...] | None = None
        if kind in (0x4B, 0x4F):  # 'K', 'O'
            old_kind = chr(kind)
            old = r.tuple_data()
            kind = r.byte()
        if kind != 0x4E:
            raise ProtocolError(f"Update message: expected 'N' tuple, got {chr(kind)!r}")
        msg = Update(relid, old_kind, old, r.tuple_data(), xid)
    elif tag == 0x44:  # 'D'
        xid = r.uint32() if in_stream else None
        relid = r.uint32()
        kind = r.byte()
        if kind not in (0x4B, 0x4F):
            raise ProtocolError(f"Delete message: expected 'K' or 'O' tuple, got {chr(kind)!r}")
        msg = Delete(relid, chr(kind), r.tuple_data(), xid)
    elif tag == 0x52:  # 'R'
        xid = r.uint32() if in_stream else None
        relid = r.uint32()
        namespace = r.cstring()
        name = r.cstring()
        identity = chr(r.byte())
        count = r.int16()
        columns = []
        for _ in range(count):
            flags = r.byte()
            column = r.cstring()
            type_oid, typmod = r.unpack(_COLUMN_TAIL)
            columns.append(RelationColumn(column, type_oid, typmod, bool(flags & 1)))
        msg = Relation(relid, namespace, name, identity, tuple(columns), xid)
    elif tag == 0x59:  # 'Y'
        xid = r.uint32() if in_stream else None
        type_oid = r.uint32()
        msg = TypeInfo(type_oid, r.cstring(), r.cstring(), xid)
    elif tag == 0x54:  # 'T'
        xid = r.uint32() if in_stream else None
        count = r.int32()
        options = r.byte()
        relids = tuple(r.uint32() for _ in range(count))
        msg = Truncate(relids, bool(options & 1), bool(options & 2), xid)
    elif tag == 0x4D:  # 'M'
        xid = r.uint32() if in_stream else None
        flags = r.byte()
        lsn = r.uint64()
        prefix = r.cstring()
        content = r.raw(r.int32())
        msg = LogicalMessage(bool(flags & 1), lsn, prefix, content, xid)
    elif tag == 0x4F:  # 'O'
        origin_lsn = r.uint64()
        msg = Origin(origin_lsn, r.cstring())
    elif tag == 0x53:  # 'S'
        stream_xid = r.uint32()
        msg = StreamStart(stream_xid, r.byte() == 1)
    elif tag == 0x45:  # 'E'
        msg = StreamStop()
    elif tag == 0x63:  # 'c'
        stream_xid = r.uint32()
        flags, commit_lsn, end_lsn, ts = r.unpack(_COMMIT)
        msg = StreamCommit(stream_xid, flags, commit_lsn, end_lsn, ts)
    elif tag == 0x41:  # 'A'
        stream_xid = r.uint32()
        msg = StreamAbort(stream_xid, r.uint32())
    else:
        raise ProtocolError(f"unknown pgoutput message type {chr(tag)!r} (0x{tag:02x})")
    r.done()
    return msg


def plain_change(data: bytes, off: int) -> tuple[str, int, tuple[str | None, ...]] | None:
    """The common change at ``off`` of ``data``, without a message object: an Insert, or an
    Update without an old tuple, whose values are all text or NULL.

    The stream's columnar road (:mod:`capture.postgresql.stream_columns`) takes these; anything
    else (another message, an old tuple, an unchanged TOAST or binary value, and any message
    that is malformed) gives None, and :func:`decode_message` then decodes it, or names what is
    wrong with it.

    Args:
        data: The bytes holding the message (an XLogData message, say).
        off: Where the pgoutput message starts (its type byte).

    Returns:
        ``(op, relation id, values)``, ``op`` ``c`` for an Insert and ``u`` for an Update.
    """
    size = len(data)
    if off + 8 > size:
        return None
    tag = data[off]
    if tag == 0x49:  # 'I'
        op = "c"
    elif tag == 0x55:  # 'U'
        op = "u"
    else:
        return None
    relid = int.from_bytes(data[off + 1 : off + 5], "big")
    if data[off + 5] != 0x4E:  # 'N': an Update's old tuple ('K', 'O') goes the long way
        return None
    count = int.from_bytes(data[off + 6 : off + 8], "big", signed=True)
    pos = off + 8
    values: list[str | None] = []
    append = values.append
    for _ in range(count):
        if pos >= size:
            return None
        kind = data[pos]
        if kind == 0x74:  # 't'
            if pos + 5 > size:
                return None
            length = int.from_bytes(data[pos + 1 : pos + 5], "big", signed=True)
            pos += 5
            end = pos + length
            if length < 0 or end > size:
                return None
            try:
                append(data[pos:end].decode("utf-8"))
            except UnicodeDecodeError:
                return None
            pos = end
        elif kind == 0x6E:  # 'n'
            append(None)
            pos += 1
        else:  # 'u', 'b' or unknown
            return None
    if pos != size:
        return None
    return op, relid, tuple(values)


def transaction_boundary(data: bytes, off: int) -> Begin | Commit | None:
    """The Begin or Commit message at ``off`` of ``data`` (to its end), read from its fixed
    layout without copying the bytes; None for anything else, which :func:`decode_message`
    then decodes (or names what is wrong with it)."""
    size = len(data) - off
    if size == 1 + _BEGIN.size and data[off] == 0x42:  # 'B'
        final_lsn, ts, xid = _BEGIN.unpack_from(data, off + 1)
        return Begin(final_lsn, ts, xid)
    if size == 1 + _COMMIT.size and data[off] == 0x43:  # 'C'
        flags, commit_lsn, end_lsn, ts = _COMMIT.unpack_from(data, off + 1)
        return Commit(flags, commit_lsn, end_lsn, ts)
    return None


# --- the replication stream's own framing ---------------------------------------------------------


def decode_xlog_data(data: bytes | bytearray | memoryview) -> tuple[int, int, int, bytes]:
    """Split an ``XLogData`` (``w``) CopyData message.

    Returns:
        ``(data_start, wal_end, send_time_us, payload)``; the payload is a pgoutput message.

    Raises:
        ProtocolError: Not an XLogData message, or truncated.
    """
    buf = bytes(data)
    if buf[:1] != b"w" or len(buf) < 1 + _XLOG.size:
        raise ProtocolError(f"not an XLogData message: {buf[:25]!r}")
    start, end, ts = _XLOG.unpack_from(buf, 1)
    return start, end, ts, buf[1 + _XLOG.size :]


def decode_keepalive(data: bytes | bytearray | memoryview) -> tuple[int, int, bool]:
    """Decode a primary keepalive (``k``): ``(wal_end, send_time_us, reply_requested)``.

    Raises:
        ProtocolError: Not a keepalive message, or truncated.
    """
    buf = bytes(data)
    if buf[:1] != b"k" or len(buf) != 1 + _KEEPALIVE.size:
        raise ProtocolError(f"not a keepalive message: {buf[:18]!r}")
    wal_end, ts, reply = _KEEPALIVE.unpack_from(buf, 1)
    return wal_end, ts, bool(reply)


def standby_status_update(
    write_lsn: int, flush_lsn: int, apply_lsn: int, now_us: int, *, reply: bool = False
) -> bytes:
    """Build a Standby Status Update (``r``) CopyData message.

    Args:
        write_lsn: Last WAL position received and written.
        flush_lsn: Last WAL position durably stored: the slot's ``confirmed_flush_lsn`` moves
            here, and WAL before it may be recycled.
        apply_lsn: Last WAL position applied.
        now_us: The client's clock, microseconds since the Unix epoch.
        reply: Ask the server to answer with a keepalive right away.
    """
    return b"r" + _STATUS.pack(
        write_lsn, flush_lsn, apply_lsn, now_us - PG_EPOCH_US, 1 if reply else 0
    )


def pg_time_to_unix_ms(pg_us: int) -> int:
    """Convert a protocol timestamp (µs since 2000-01-01) to ms since the Unix epoch."""
    return (pg_us + PG_EPOCH_US) // 1000
