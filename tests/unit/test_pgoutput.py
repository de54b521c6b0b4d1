"""The pgoutput decoder on hand-built protocol bytes (no server)."""

from __future__ import annotations

import struct

import pytest

from capture.postgresql.pgoutput import (
    PG_EPOCH_US,
    UNCHANGED_TOAST,
    Begin,
    BinaryDatum,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    ProtocolError,
    Relation,
    RelationColumn,
    StreamAbort,
    StreamCommit,
    StreamStart,
    StreamStop,
    Truncate,
    TypeInfo,
    Update,
    decode_keepalive,
    decode_message,
    decode_xlog_data,
    pg_time_to_unix_ms,
    standby_status_update,
)

pytestmark = pytest.mark.unit


def cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def tuple_data(*values: object) -> bytes:
    out = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            out += b"n"
        elif value is UNCHANGED_TOAST:
            out += b"u"
        elif isinstance(value, bytes):
            out += b"b" + struct.pack("!i", len(value)) + value
        else:
            data = str(value).encode()
            out += b"t" + struct.pack("!i", len(data)) + data
    return out


def test_begin_and_commit() -> None:
    assert decode_message(b"B" + struct.pack("!QqI", 0x16B3748, 123456, 742)) == Begin(
        0x16B3748, 123456, 742
    )
    raw = b"C" + struct.pack("!BQQq", 0, 0x16B3748, 0x16B3778, 99)
    assert decode_message(raw) == Commit(0, 0x16B3748, 0x16B3778, 99)


def test_relation_with_key_flags() -> None:
    raw = (
        b"R"
        + struct.pack("!I", 16384)
        + cstr("public")
        + cstr("orders")
        + b"d"
        + struct.pack("!h", 2)
        + b"\x01"
        + cstr("id")
        + struct.pack("!Ii", 23, -1)
        + b"\x00"
        + cstr("price")
        + struct.pack("!Ii", 1700, (10 << 16 | 2) + 4)
    )
    assert decode_message(raw) == Relation(
        16384,
        "public",
        "orders",
        "d",
        (RelationColumn("id", 23, -1, True), RelationColumn("price", 1700, 655366, False)),
    )


def test_relation_in_pg_catalog_has_empty_namespace() -> None:
    raw = b"R" + struct.pack("!I", 1) + cstr("") + cstr("t") + b"f" + struct.pack("!h", 0)
    message = decode_message(raw)
    assert isinstance(message, Relation) and message.namespace == ""


def test_type_and_origin() -> None:
    assert decode_message(b"Y" + struct.pack("!I", 90000) + cstr("public") + cstr("mood")) == (
        TypeInfo(90000, "public", "mood")
    )
    assert decode_message(b"O" + struct.pack("!Q", 77) + cstr("node_a")) == Origin(77, "node_a")


def test_insert_tuple_kinds() -> None:
    raw = b"I" + struct.pack("!I", 16384) + b"N" + tuple_data("1", None, "h\u00e9", b"\x00\x01")
    assert decode_message(raw) == Insert(16384, ("1", None, "h\u00e9", BinaryDatum(b"\x00\x01")))


def test_update_without_old_tuple_and_unchanged_toast() -> None:
    raw = b"U" + struct.pack("!I", 5) + b"N" + tuple_data("1", UNCHANGED_TOAST)
    message = decode_message(raw)
    assert message == Update(5, None, None, ("1", UNCHANGED_TOAST))
    assert isinstance(message, Update) and message.new[1] is UNCHANGED_TOAST


@pytest.mark.parametrize("kind", ["K", "O"])
def test_update_with_old_tuple(kind: str) -> None:
    raw = (
        b"U"
        + struct.pack("!I", 5)
        + kind.encode()
        + tuple_data("2", None)
        + b"N"
        + tuple_data("3", "b")
    )
    assert decode_message(raw) == Update(5, kind, ("2", None), ("3", "b"))


def test_delete_key_and_full() -> None:
    assert decode_message(b"D" + struct.pack("!I", 5) + b"K" + tuple_data("1", None)) == Delete(
        5, "K", ("1", None)
    )
    assert decode_message(b"D" + struct.pack("!I", 5) + b"O" + tuple_data("1", "a")) == Delete(
        5, "O", ("1", "a")
    )


def test_truncate_options() -> None:
    raw = b"T" + struct.pack("!iB", 2, 3) + struct.pack("!II", 10, 11)
    assert decode_message(raw) == Truncate((10, 11), True, True)
    raw = b"T" + struct.pack("!iB", 1, 0) + struct.pack("!I", 10)
    assert decode_message(raw) == Truncate((10,), False, False)


def test_logical_message() -> None:
    raw = b"M" + struct.pack("!BQ", 1, 0x500) + cstr("audit") + struct.pack("!i", 3) + b"abc"
    assert decode_message(raw) == LogicalMessage(True, 0x500, "audit", b"abc")
    raw = b"M" + struct.pack("!BQ", 0, 0x600) + cstr("p") + struct.pack("!i", 0)
    assert decode_message(raw) == LogicalMessage(False, 0x600, "p", b"")


def test_streamed_transaction_messages_carry_xid() -> None:
    assert decode_message(b"S" + struct.pack("!IB", 900, 1)) == StreamStart(900, True)
    raw = b"I" + struct.pack("!II", 900, 5) + b"N" + tuple_data("1")
    assert decode_message(raw, in_stream=True) == Insert(5, ("1",), 900)
    raw = b"D" + struct.pack("!II", 900, 5) + b"K" + tuple_data("1")
    assert decode_message(raw, in_stream=True) == Delete(5, "K", ("1",), 900)
    assert decode_message(b"E") == StreamStop()
    raw = b"c" + struct.pack("!IBQQq", 900, 0, 10, 20, 30)
    assert decode_message(raw) == StreamCommit(900, 0, 10, 20, 30)
    assert decode_message(b"A" + struct.pack("!II", 900, 901)) == StreamAbort(900, 901)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"B" + struct.pack("!Qq", 1, 2),  # truncated
        b"C" + struct.pack("!BQQq", 0, 1, 2, 3) + b"x",  # trailing byte
        b"I" + struct.pack("!I", 5) + b"X" + tuple_data("1"),  # no 'N'
        b"I" + struct.pack("!I", 5) + b"N" + struct.pack("!h", 1) + b"t" + struct.pack("!i", 9),
        b"I" + struct.pack("!I", 5) + b"N" + struct.pack("!h", 1) + b"z",
        b"R" + struct.pack("!I", 1) + b"public",  # unterminated string
        b"D" + struct.pack("!I", 5) + b"N" + tuple_data("1"),
        b"Z",
    ],
)
def test_malformed_messages_raise(raw: bytes) -> None:
    with pytest.raises(ProtocolError):
        decode_message(raw)


def test_replication_framing() -> None:
    payload = b"B" + struct.pack("!QqI", 1, 2, 3)
    frame = b"w" + struct.pack("!QQq", 100, 200, 300) + payload
    assert decode_xlog_data(frame) == (100, 200, 300, payload)
    assert decode_keepalive(b"k" + struct.pack("!QqB", 555, 7, 1)) == (555, 7, True)
    with pytest.raises(ProtocolError):
        decode_keepalive(b"w" + struct.pack("!QqB", 555, 7, 1))
    with pytest.raises(ProtocolError):
        decode_xlog_data(b"k123")


def test_standby_status_update_layout() -> None:
    now_us = PG_EPOCH_US + 1_000_000
    raw = standby_status_update(10, 20, 30, now_us, reply=True)
    assert raw[:1] == b"r"
    assert struct.unpack("!QQQqB", raw[1:]) == (10, 20, 30, 1_000_000, 1)
    assert pg_time_to_unix_ms(1_000_000) == 946_684_801_000
