"""The replication connection stays up while nobody reads it (real PostgreSQL 15).

The walsender drops a client it has not heard from for ``wal_sender_timeout``. The agent reads
the stream only inside a batch, so between batches :class:`ReplicationStream`'s keepalive thread
must speak for it. Each test sets the timeout of its own walsender to 1 s (the setting is
per connection since PostgreSQL 12), leaves the stream unread for well over that, and asks the
server whether its walsender is still there; a stream without the thread is the control.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from capture.postgresql.replication import ReplicationStream

pytestmark = pytest.mark.postgres

TIMEOUT_MS = 1000
IDLE_S = 4.0  # 4 walsender timeouts: a silent client is dropped well within it


@dataclass
class Corner:
    dsn: str
    table: str
    slot: str
    publication: str


@pytest.fixture
def corner(pg_dsn: str) -> Iterator[Corner]:
    tag = uuid.uuid4().hex[:8]
    c = Corner(pg_dsn, f"ka_{tag}", f"ka_slot_{tag}", f"ka_pub_{tag}")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id int PRIMARY KEY)").format(sql.Identifier(c.table))
        )
        conn.execute(
            sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                sql.Identifier(c.publication), sql.Identifier(c.table)
            )
        )
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", [c.slot])
    yield c
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
            "WHERE slot_name = %s AND active_pid IS NOT NULL",
            [c.slot],
        )
        for _ in range(50):
            try:
                conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    [c.slot],
                )
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.1)
        conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(c.publication)))
        conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(c.table)))


def _stream(c: Corner, keepalive_s: float | None) -> tuple[ReplicationStream, int]:
    conn = psycopg.connect(
        c.dsn,
        autocommit=True,
        replication="database",
        options=f"-c wal_sender_timeout={TIMEOUT_MS}",
    )
    stream = ReplicationStream(conn, "keepalive", keepalive_s=keepalive_s)
    stream.start(c.slot, 0, c.publication, messages=False)
    return stream, conn.info.backend_pid


def _walsender_alive(dsn: str, pid: int) -> bool:
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SELECT count(*) FROM pg_stat_replication WHERE pid = %s", [pid])
        return row.fetchone() == (1,)


def test_an_unread_stream_stays_up_and_still_delivers(corner: Corner) -> None:
    stream, pid = _stream(corner, keepalive_s=None)  # the interval comes from the server
    try:
        time.sleep(IDLE_S)
        assert _walsender_alive(corner.dsn, pid)
        with psycopg.connect(corner.dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("INSERT INTO {} VALUES (1)").format(sql.Identifier(corner.table)))
        kinds = set()
        for _ in range(200):
            data = stream.read(0.05)
            if data is not None:
                kinds.add(data[:1])
            if b"w" in kinds:
                break
        assert b"w" in kinds, "the insert never arrived on the kept-alive stream"
    finally:
        stream.stop(0)
        stream.close()


def test_control_without_keepalive_the_server_drops_the_stream(corner: Corner) -> None:
    stream, pid = _stream(corner, keepalive_s=0)
    try:
        time.sleep(IDLE_S)
        assert not _walsender_alive(corner.dsn, pid)
    finally:
        stream.close()
