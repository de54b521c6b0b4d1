"""The streaming replication transport: one ``START_REPLICATION ... LOGICAL`` over psycopg 3.

psycopg 3 has no replication API (psycopg#71); since 3.3 ``execute("START_REPLICATION ...")`` on
a ``replication=database`` connection leaves it in COPY_BOTH mode, and the stream is read and
answered with libpq's copy calls (``test-servers.md`` §1b). This class owns that connection
state: it sends standby status updates, reads CopyData messages with a timeout, and ends the
COPY cleanly so the server applies the last acknowledgement. What the messages mean is the
caller's business (:mod:`capture.postgresql.pgoutput` decodes them).

**Keepalive whatever the traffic.** The walsender drops a client it has not heard from for
``wal_sender_timeout`` (60 s by default; "terminating walsender process due to replication
timeout"). The agent reads the stream only inside a batch: between batches (the landing loop's
poll wait, a long bronze commit) nobody would answer. So a daemon thread sends a standby status
update, confirming the last acknowledged LSN again, whenever none was sent for a quarter of the
server's ``wal_sender_timeout`` (at most :data:`KEEPALIVE_MAX_S`). Every use of the libpq
connection holds one lock, so the thread never interleaves with the reader.
"""

from __future__ import annotations

import logging
import select
import threading
import time
from collections import deque
from typing import Any, Final

import psycopg
from psycopg import sql
from psycopg.pq import DiagnosticField

from capture.postgresql._pgcopy import read_messages
from capture.postgresql.copy_text import libpq_bound
from capture.postgresql.pgoutput import standby_status_update
from capture.postgresql.position import format_pg_lsn
from capture.server_errors import POSTGRES
from pipeline.errors import SourceUnavailable

__all__ = ["ReplicationStream", "publication_option"]

logger = logging.getLogger(__name__)

SEND_TIMEOUT_S = 10.0
"""How long a status update may wait for the socket before the connection counts as lost."""
STOP_TIMEOUT_S = 5.0
"""How long a clean stop waits for the server to end the COPY."""
KEEPALIVE_MAX_S = 10.0
"""Longest gap between two status updates the keepalive thread allows."""
READ_AHEAD: Final = 1024
"""Most CopyData messages taken from libpq's buffer in one call (what it already received)."""


def publication_option(publication: str, conn: psycopg.Connection[Any]) -> str:
    """The ``publication_names`` option value: the publication as a quoted identifier."""
    return sql.Identifier(publication).as_string(conn)


class ReplicationStream:
    """A logical replication stream on a ``replication=database`` connection.

    Args:
        conn: The replication connection (autocommit); the stream owns it from now on.
        source: The source name, for messages.
    """

    def __init__(
        self, conn: psycopg.Connection[Any], source: str, *, keepalive_s: float | None = None
    ) -> None:
        self.conn = conn
        self.source = source
        self.streaming = False
        self.last_status = 0.0
        """``time.monotonic()`` of the last status update sent."""
        self.keepalive_s = keepalive_s
        """Gap after which the keepalive thread sends a status update; None: from the server's
        ``wal_sender_timeout``; 0: no keepalive thread."""
        self._flushed = 0
        self._lock = threading.RLock()
        self._stop_keepalive = threading.Event()
        self._keepalive: threading.Thread | None = None
        self._received: deque[bytes] = deque()
        """Messages libpq had received, taken in one call and not yet returned by :meth:`read`."""
        self._ended = False
        """The COPY ended after :attr:`_received`: :meth:`read` then says why."""

    def start(self, slot: str, lsn: int, publication: str, *, messages: bool) -> None:
        """``START_REPLICATION SLOT slot LOGICAL lsn`` with pgoutput protocol 1.

        Args:
            slot: The slot name.
            lsn: Where to start; the server starts at the slot's confirmed flush if later.
            publication: The publication to stream.
            messages: Ask for ``pg_logical_emit_message`` messages (PostgreSQL 14+).

        Raises:
            SourceUnavailable: The connection failed, or the slot is still held by a walsender
                of a killed predecessor (retryable).
            CaptureError: The server refused the command.
        """
        options = [
            sql.SQL("proto_version '1'"),
            sql.SQL("publication_names {}").format(
                sql.Literal(publication_option(publication, self.conn))
            ),
        ]
        if messages:
            options.append(sql.SQL("messages 'true'"))
        command = sql.SQL("START_REPLICATION SLOT {} LOGICAL {} ({})").format(
            sql.Identifier(slot), sql.SQL(format_pg_lsn(lsn)), sql.SQL(", ").join(options)
        )
        interval = self.keepalive_s
        if interval is None:
            interval = self._keepalive_interval()
        try:
            with self._lock:
                self.conn.execute(command)
        except psycopg.errors.ObjectInUse as exc:
            # A killed predecessor's walsender holds the slot until it notices the dead socket.
            raise SourceUnavailable(f"source {self.source}: {str(exc).strip()}") from exc
        except psycopg.OperationalError as exc:
            raise POSTGRES.classify(self.source, exc, "START_REPLICATION") from exc
        except psycopg.Error as exc:
            raise POSTGRES.classify(
                self.source, exc, "START_REPLICATION", unknown_retryable=False
            ) from exc
        self.streaming = True
        self._received.clear()
        self._ended = False
        self.last_status = time.monotonic()
        if interval > 0:
            self._stop_keepalive.clear()
            self._keepalive = threading.Thread(
                target=self._keep_alive,
                args=(interval,),
                name=f"medallion-keepalive-{self.source}",
                daemon=True,
            )
            self._keepalive.start()

    def _keepalive_interval(self) -> float:
        """A quarter of the server's ``wal_sender_timeout`` (0 = never times out), capped."""
        try:
            with self._lock:
                row = self.conn.execute(
                    "SELECT setting::bigint FROM pg_settings WHERE name = 'wal_sender_timeout'"
                ).fetchone()
        except psycopg.Error as exc:
            logger.debug("source %s: wal_sender_timeout unknown: %s", self.source, exc)
            return KEEPALIVE_MAX_S
        timeout_ms = int(row[0]) if row is not None else 0
        if timeout_ms <= 0:
            return KEEPALIVE_MAX_S
        return min(KEEPALIVE_MAX_S, timeout_ms / 4000)

    def _keep_alive(self, interval: float) -> None:
        """The keepalive thread: a status update whenever none went out for ``interval``."""
        while not self._stop_keepalive.wait(interval / 4):
            if time.monotonic() - self.last_status < interval:
                continue
            if not self._lock.acquire(blocking=False):
                continue  # the reader holds the connection, and answers the server itself
            try:
                if not self.streaming or self.conn.closed:
                    return
                self.send_status(self._flushed)
            except SourceUnavailable as exc:
                # The reader sees the same loss on its next read and reconnects.
                logger.debug("source %s: keepalive stopped: %s", self.source, exc)
                return
            finally:
                self._lock.release()

    def _end_keepalive(self) -> None:
        thread, self._keepalive = self._keepalive, None
        if thread is not None and thread is not threading.current_thread():
            self._stop_keepalive.set()
            thread.join()

    def send_status(self, flush_lsn: int, *, reply: bool = False) -> None:
        """Send a standby status update confirming ``flush_lsn`` (written = flushed = applied).

        Args:
            flush_lsn: Everything before it is durable downstream; the slot may recycle WAL.
            reply: Ask the server for an immediate keepalive.

        Raises:
            SourceUnavailable: The connection is lost.
        """
        with self._lock:
            self._send_status(flush_lsn, reply=reply)

    def _send_status(self, flush_lsn: int, *, reply: bool) -> None:
        if not self.streaming:
            return
        pg = self.conn.pgconn
        lsn = flush_lsn
        self._flushed = max(self._flushed, lsn)
        try:
            pg.put_copy_data(
                standby_status_update(lsn, lsn, lsn, time.time_ns() // 1000, reply=reply)
            )
            # psycopg runs libpq non-blocking: flush() may leave bytes queued, and an
            # acknowledgement still queued when the connection closes never reaches the slot.
            deadline = time.monotonic() + SEND_TIMEOUT_S
            while pg.flush() == 1:
                if time.monotonic() > deadline:
                    raise SourceUnavailable(f"source {self.source}: cannot send to the server")
                select.select([], [pg.socket], [], 0.1)
        except psycopg.Error as exc:
            raise POSTGRES.classify(self.source, exc, "send a status update") from exc
        self.last_status = time.monotonic()

    def read(self, timeout: float) -> bytes | None:
        """The next CopyData message (``w`` XLogData or ``k`` keepalive), or None after ``timeout``.

        Raises:
            SourceUnavailable: The connection is lost or the server ended the stream.
        """
        with self._lock:
            return self._read(timeout)

    def _read(self, timeout: float) -> bytes | None:
        if self._received:
            return self._received.popleft()
        pg = self.conn.pgconn
        if self._ended:
            n = -1
        else:
            pgconn = getattr(pg, "pgconn_ptr", None)  # psycopg's PGconn, not in its protocol
            try:
                if pgconn is not None and libpq_bound():
                    return self._read_many(pgconn, timeout)
                n, data = pg.get_copy_data(1)
                if n == 0:
                    ready, _, _ = select.select([pg.socket], [], [], timeout)
                    if not ready:
                        return None
                    pg.consume_input()
                    n, data = pg.get_copy_data(1)
                    if n == 0:
                        return None
            except psycopg.Error as exc:
                raise POSTGRES.classify(self.source, exc, "read the replication stream") from exc
            if n > 0:
                return bytes(data)
        self._ended = False
        result = pg.get_result()
        text = "" if result is None else result.error_message.decode(errors="replace")
        text = text.strip() or pg.error_message.decode(errors="replace").strip()
        state = None if result is None else result.error_field(DiagnosticField.SQLSTATE)
        code = state.decode() if state else None
        # Retryable whatever the code: the reconnect finds a terminal cause (a dropped
        # slot, a revoked privilege) and reports it with its own code.
        ended = SourceUnavailable(
            f"source {self.source}: replication stream ended"
            + (f" (SQLSTATE {code})" if code else "")
            + f": {text}"
        )
        ended.code = code
        raise ended

    def _read_many(self, pgconn: int, timeout: float) -> bytes | None:
        """:meth:`_read` through libpq in C: every message libpq already received in one call
        (the rest kept in :attr:`_received`), or None after ``timeout``."""
        pg = self.conn.pgconn
        messages, status = read_messages(pgconn, READ_AHEAD)
        if not messages and status == 0:
            ready, _, _ = select.select([pg.socket], [], [], timeout)
            if not ready:
                return None
            pg.consume_input()
            messages, status = read_messages(pgconn, READ_AHEAD)
            if not messages and status == 0:
                return None
        self._ended = status < 0
        if not messages:
            return self._read(timeout)
        self._received.extend(messages)
        return self._received.popleft()

    def stop(self, flush_lsn: int) -> None:
        """Confirm ``flush_lsn`` and end the COPY (CopyDone), so the server applied it.

        Closing the socket instead would leave it to chance whether the walsender read the last
        status update before it saw the connection go. Never raises: a stream that cannot stop
        cleanly is closed anyway.
        """
        self._end_keepalive()
        with self._lock:
            self._stop(flush_lsn)

    def _stop(self, flush_lsn: int) -> None:
        if not self.streaming or self.conn.closed:
            return
        pg = self.conn.pgconn
        try:
            self._send_status(flush_lsn, reply=False)
            pg.put_copy_end()
            pg.flush()
            deadline = time.monotonic() + STOP_TIMEOUT_S
            ended = False
            while not ended and time.monotonic() < deadline:
                n, _ = pg.get_copy_data(1)
                if n == 0:
                    select.select([pg.socket], [], [], 0.1)
                    pg.consume_input()
                # n < 0: the server ended the COPY, so it has read everything we sent.
                ended = n < 0
            while ended and pg.get_result() is not None:
                pass  # CommandComplete; then the connection is idle and can be closed
        except (psycopg.Error, SourceUnavailable) as exc:
            logger.debug("source %s: replication stream did not end cleanly: %s", self.source, exc)
        self.streaming = False
        self._received.clear()  # received, never returned: read again from the slot's position

    def close(self) -> None:
        """Close the connection (without a clean stop; see :meth:`stop`)."""
        self._end_keepalive()
        with self._lock:
            self.streaming = False
            try:
                self.conn.close()
            except psycopg.Error:
                pass  # already gone; nothing to release
