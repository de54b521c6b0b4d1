"""The replication stream takes every message libpq already received in one call
(``_pgcopy.read_messages``) and hands them out one by one: the same messages, in the same order,
as psycopg's one-message reads (real PostgreSQL 15, two slots on the same changes)."""

from __future__ import annotations

import time

import psycopg
import pytest
from psycopg import sql

from capture.postgresql import copy_text
from capture.postgresql.replication import ReplicationStream
from tests.integration.test_pg_keepalive import Corner, corner

pytestmark = pytest.mark.postgres

__all__ = ["corner"]

_ROWS = 300
_HEADER = 25  # 'w', start LSN, end LSN, send time: the send time differs between reads


def _messages(c: Corner, slot: str) -> tuple[list[bytes], int]:
    """The pgoutput payloads of the slot's first transaction, and the most messages read ahead."""
    conn = psycopg.connect(c.dsn, autocommit=True, replication="database")
    stream = ReplicationStream(conn, "read-ahead", keepalive_s=0)
    stream.start(slot, 0, c.publication, messages=False)
    payloads: list[bytes] = []
    ahead = 0
    deadline = time.monotonic() + 30
    try:
        while not payloads or payloads[-1][:1] != b"C":
            assert time.monotonic() < deadline, "the transaction did not arrive"
            data = stream.read(0.5)
            ahead = max(ahead, len(stream._received))
            if data is not None and data[:1] == b"w":
                payloads.append(data[_HEADER:])
    finally:
        stream.close()
    return payloads, ahead


def test_read_ahead_gives_what_one_message_reads_give(
    corner: Corner, monkeypatch: pytest.MonkeyPatch
) -> None:
    second = corner.slot + "_b"
    with psycopg.connect(corner.dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", [second])
        with conn.transaction():
            for i in range(_ROWS):
                conn.execute(
                    sql.SQL("INSERT INTO {} VALUES (%s)").format(sql.Identifier(corner.table)), [i]
                )
    try:
        assert copy_text.libpq_bound()
        fast, ahead = _messages(corner, corner.slot)
        monkeypatch.setattr(copy_text, "_bound", False)
        slow, slow_ahead = _messages(corner, second)
    finally:
        with psycopg.connect(corner.dsn, autocommit=True) as conn:
            for _ in range(50):
                try:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", [second])
                    break
                except psycopg.errors.ObjectInUse:
                    time.sleep(0.1)
    kinds = bytes(p[0] for p in fast)
    assert kinds == b"BR" + b"I" * _ROWS + b"C"
    assert fast == slow
    assert ahead > 1 and slow_ahead == 0
