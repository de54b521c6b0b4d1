"""The YugabyteDB capture agent: the PostgreSQL agent over YugabyteDB's logical replication.

YugabyteDB (v2024.1.1+) serves PostgreSQL's replication protocol from its Virtual WAL, which
merges the tablets of the publication's tables, assembles each transaction across tablets and
ships committed transactions in commit-time order (spec B1). So :class:`YugabyteDbSource` is
:class:`~capture.postgresql.source.PostgresSource` (setup, snapshot, pgoutput decoding, batch
loop, offsets, acknowledgement, reconnects) with the differences below, each an override here or
a class flag, never a branch in the PostgreSQL code:

* **Plugin** (``plugin.name``): ``yboutput`` (default) wraps every row column as
  ``{"value", "set"}`` and sends columns not logged as ``u``, which land as ``null`` (silver
  keeps the stored value); ``pgoutput`` writes plain values (:mod:`.yboutput`).
* **Replica identity**: ``CHANGE`` (``yboutput`` only: changed columns and the key),
  ``DEFAULT`` (update: all columns, no ``before``; delete: the key), ``FULL`` (old and new rows),
  ``NOTHING`` (the server refuses updates and deletes). The server decides what it sends, fixed
  at slot creation; the agent writes what it receives, with ``before: null`` on updates
  without an old tuple (:class:`~capture.yugabytedb.yboutput.YbTableSchema`).
* **LSN type** (``slot.lsn.type``, fixed at slot creation): ``SEQUENCE`` LSNs are monotonic per
  slot; with ``HYBRID_TIME`` every record of a transaction carries the commit LSN, so records
  are ordered by their ``seq`` within it and END follows the last one.
* **Snapshot**: the slot's ``snapshot_name`` is a hybrid time; the snapshot transaction reads at
  it with ``SET LOCAL yb_read_time TO '<ht> ht'``, and after a restart at the slot's
  ``yb_restart_commit_ht`` again (the slot is not confirmed during the snapshot), so a resumed
  snapshot is still exactly the database at the consistent point.
* **Acknowledgement, per transaction**: the flush LSN confirmed is the end of the last
  transaction in bronze, never inside one. The server restarts from the slot's confirmed flush,
  whatever LSN the client asks for, so transactions already in bronze (committed at or before
  the offset's ``last_commit``) can arrive again and are skipped here.
* **No** ``pg_current_wal_lsn``, ``pg_logical_emit_message``, slot peeks or WAL sizes: the
  catch-up target of a batch is what the server sent until it went quiet
  (:class:`YbReplicationStream`), idle databases
  get no marker (heartbeats still land when the server moves), a slot the agent did not create
  is never dropped, and ``medallion status`` shows the slot without byte counts.
* The ``source`` block is PostgreSQL's with ``connector: "YugabyteDB"`` (seed 004).
"""

from __future__ import annotations

import collections
import datetime as dt
import logging
import struct
import time
from collections.abc import Mapping
from typing import Any, ClassVar

import psycopg
from psycopg import sql

from bronze.batch import BatchBuilder
from bronze.storage import LakePath, lake_path
from capture.captured_table import CapturedTable
from capture.current_state import LogCheck
from capture.postgresql.pgoutput import (
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    PgOutputMessage,
    Truncate,
    Update,
    decode_keepalive,
    decode_xlog_data,
)
from capture.postgresql.replication import ReplicationStream
from capture.postgresql.schema import TableSchema
from capture.postgresql.source import PostgresSource
from capture.yugabytedb import slot as yb_slot
from capture.yugabytedb.settings import YbSourceSettings
from capture.yugabytedb.yboutput import YbTableSchema, YbWrappedTableSchema
from pipeline.errors import CaptureError

__all__ = ["SOURCE_CONNECTOR", "YbReplicationStream", "YugabyteDbSource"]

logger = logging.getLogger(__name__)

SOURCE_CONNECTOR = "YugabyteDB"
"""``source.connector`` as the YugabyteDB connector writes it (bronze normalises the case)."""

CATCH_UP_QUIET_S = 0.3
"""A batch has what the server had when nothing more arrived for this long after it asked."""
CATCH_UP_MAX_FRAMES = 10_000
"""At most this many messages are read ahead to find the end (a batch takes fewer)."""
CATCH_UP_MAX_S = 10.0
"""At most this long is spent reading ahead."""


class YbReplicationStream(ReplicationStream):
    """The replication stream, able to find how far the server has sent without
    ``pg_current_wal_lsn`` (YugabyteDB has none): :meth:`wal_end` reads ahead until the server
    goes quiet, keeps what it read for :meth:`read`, and ends it with a keepalive of its own
    carrying the end it found, which the batch loop takes as the server's."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: collections.deque[bytes] = collections.deque()
        self._pending_end = 0
        self._announced: bytes | None = None
        """The keepalive :meth:`wal_end` ends its read-ahead with (by identity: the server's
        own keepalives may hold the same bytes)."""

    def read(self, timeout: float) -> bytes | None:
        """The next message: one read ahead by :meth:`wal_end` first, then the server's."""
        if self._pending:
            return self._pending.popleft()
        return super().read(timeout)

    def wal_end(self, flush_lsn: int) -> int:
        """Read ahead until the server is quiet; return the end of what it sent (0: nothing).

        Args:
            flush_lsn: The LSN the status update asking for a keepalive confirms again.
        """
        if any(data is not self._announced for data in self._pending):
            # Still reading what the last call read ahead (a backlog): its end stands.
            return self._pending_end
        # At most the announcement of an end is left, unread when a keepalive of the server's
        # had already carried the batch loop there: left pending, it would answer every later
        # call, and the stream would never be read again (neither new changes nor a lost
        # connection).
        self._pending.clear()
        self.send_status(flush_lsn, reply=True)
        end = 0
        started = time.monotonic()
        quiet_since = started
        read = 0
        while (
            time.monotonic() - quiet_since < CATCH_UP_QUIET_S
            and read < CATCH_UP_MAX_FRAMES
            and time.monotonic() - started < CATCH_UP_MAX_S
        ):
            data = super().read(CATCH_UP_QUIET_S / 3)
            if data is None:
                continue
            quiet_since = time.monotonic()
            read += 1
            self._pending.append(data)
            kind = data[:1]
            if kind == b"w":
                end = max(end, decode_xlog_data(data)[0])
            elif kind == b"k":
                end = max(end, decode_keepalive(data)[0])
        if end:
            self._announced = _KEEPALIVE.pack(b"k", end, 0, 0)
            self._pending.append(self._announced)
        self._pending_end = end
        return end


_KEEPALIVE = struct.Struct("!cQqB")
"""A primary keepalive message (``k``, WAL end, send time, reply requested)."""


class YugabyteDbSource(PostgresSource):
    """Captures one YugabyteDB database through a ``yboutput`` or ``pgoutput`` slot.

    Args:
        name: The configured source name.
        settings: Connection, slot (plugin, LSN type), filters and value handling.
    """

    KIND: ClassVar[str] = "yugabytedb"
    SETTINGS: ClassVar[Any] = YbSourceSettings
    ORIGIN: ClassVar[str] = "yb"
    ACKNOWLEDGES: ClassVar[bool] = True
    REPORTS_LOG: ClassVar[bool] = True
    WRAPS_COLUMNS: ClassVar[frozenset[str]] = frozenset({"yboutput"})
    """Plugins whose rows are ``{"value", "set"}`` columns (``yboutput``)."""
    INCREMENTAL_SNAPSHOTS: ClassVar[bool] = False
    """No signals: seed 004 does not document them, and the config has no signaling keys."""
    COLUMNAR_SNAPSHOT: ClassVar[bool] = False
    """The per-row snapshot: the columnar one (``COPY (SELECT ...)``) is not verified against
    YugabyteDB's hybrid-time snapshot reads."""
    REPLAYS_FROM_CONFIRMED: ClassVar[bool] = True
    """The server restarts at the slot's confirmed flush, not at the LSN asked for: replayed
    transactions already in bronze are skipped by their commit LSN."""

    settings: YbSourceSettings

    def __init__(self, name: str, settings: YbSourceSettings) -> None:
        super().__init__(name, settings)
        self._replaying = False
        """Inside a transaction bronze already holds (skipped until its Commit)."""
        self._slot_record: LakePath | None = None
        """Where the agent records the slot it created (:meth:`bind_lake`; None: nowhere)."""

    def bind_lake(self, bronze_root: LakePath) -> None:
        """Also keep the record of the slot this agent creates beside bronze (``slots/``)."""
        super().bind_lake(bronze_root)
        self._slot_record = lake_path(bronze_root) / SLOT_RECORDS / f"{self.name}.json"

    # --- hooks of the PostgreSQL agent -----------------------------------------------------------

    def _schema_class(self) -> type[TableSchema]:
        if self.settings.plugin_name in self.WRAPS_COLUMNS:
            return YbWrappedTableSchema
        return YbTableSchema

    def _stream_class(self) -> type[ReplicationStream]:
        return YbReplicationStream

    def _check_server(self) -> None:
        row = (
            self._side()
            .execute("SELECT current_setting('server_version_num'), version()")
            .fetchone()
        )
        if row is None:
            raise CaptureError(f"source {self.name}: current_setting() returned no row")
        self._server_version = int(row[0])
        if "-YB-" not in str(row[1]):
            logger.warning(
                "source %s: the server does not report a YugabyteDB version (%s); only the "
                "pgoutput stream works on PostgreSQL",
                self.name,
                row[1],
            )

    def _slot(self) -> Any:
        s = self.settings
        return yb_slot.slot_state(self._side(), self.name, s.slot_name, s.dbname, s.plugin_name)

    def _create_slot(self, *, export: bool) -> tuple[int, str | None]:
        self._repl = self._connect(replication=True)
        s = self.settings
        point, hybrid_time = yb_slot.create_slot(
            self._repl, self.name, s.slot_name, s.plugin_name, s.slot_lsn_type
        )
        if self._slot_record is not None and hybrid_time is not None:
            yb_slot.record_slot(self._slot_record, s.slot_name, hybrid_time)
        return point, hybrid_time

    def _slot_is_ours(self) -> bool:
        """The record says this agent created the slot, and the slot was never confirmed since
        (its restart hybrid time is still the consistent point the record holds): nobody has
        consumed from it, so dropping and recreating it loses nothing. YugabyteDB has no slot
        peek for PostgreSQL's marker message."""
        if self._slot_record is None:
            return False
        s = self.settings
        recorded = yb_slot.recorded_slot(self._slot_record, s.slot_name)
        if recorded is None:
            return False
        return yb_slot.restart_read_time(self._side(), self.name, s.slot_name) == recorded

    def _read_at_point(self, conn: psycopg.Connection[Any], name: str | None) -> None:
        if name is None:
            raise CaptureError(f"source {self.name}: the new slot returned no snapshot point")
        conn.execute(_SET_READ_TIME.format(yb_slot.read_time_literal(self.name, name)))

    def _reread_at_point(self, conn: psycopg.Connection[Any]) -> None:
        at = yb_slot.restart_read_time(self._side(), self.name, self.settings.slot_name)
        conn.execute(_SET_READ_TIME.format(yb_slot.read_time_literal(self.name, at)))
        logger.info("source %s: the snapshot reads at the slot's hybrid time %s", self.name, at)

    def _current_wal(self) -> int:
        stream = self._stream
        if not isinstance(stream, YbReplicationStream):
            return 0
        return stream.wal_end(self._acked)

    def _nudge_idle_wal(self) -> None:
        """No marker: YugabyteDB has no WAL messages to write (heartbeats land when it moves)."""

    # --- reconciliation (CurrentStateReader) -----------------------------------------------------

    def _read_point(self, conn: psycopg.Connection[Any]) -> Any:
        """None: YugabyteDB has no WAL position to name the read's point by, so gold cannot ask
        the log whether the source is ahead of the cut (bronze still can tell)."""
        return None

    def changes_after(self, position: bytes, point: Any) -> LogCheck:
        """Unknown: YugabyteDB cannot peek a slot (no ``pg_logical_slot_peek_binary_changes``)."""
        return LogCheck(None, "YugabyteDB cannot peek a replication slot")

    @staticmethod
    def _slot_lag_query(conn: psycopg.Connection[Any], slot: str) -> dict[str, Any] | None:
        return yb_slot.slot_status(conn, slot)

    # --- the source block ------------------------------------------------------------------------

    def _source(self, tx: Any, table: TableSchema | None, lsn: int) -> dict[str, Any]:
        source = super()._source(tx, table, lsn)
        source["connector"] = SOURCE_CONNECTOR
        return source

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        source = super()._snapshot_source(table, last)
        source["connector"] = SOURCE_CONNECTOR
        return source

    # --- replayed transactions -------------------------------------------------------------------

    def _handle(
        self,
        builder: BatchBuilder,
        message: PgOutputMessage,
        lsn: int,
        raw: bytes,
        now: dt.datetime,
    ) -> None:
        if isinstance(message, Begin) and self.REPLAYS_FROM_CONFIRMED:
            last = self._last_commit
            self._replaying = last is not None and message.final_lsn <= last
            if self._replaying:
                logger.debug(
                    "source %s: skipping transaction %d (commit LSN %d): already in bronze",
                    self.name,
                    message.xid,
                    message.final_lsn,
                )
                return
        if self._replaying:
            if isinstance(message, Commit):
                self._replaying = False
                return
            if isinstance(message, (Insert, Update, Delete, Truncate, LogicalMessage)):
                return
        super()._handle(builder, message, lsn, raw, now)

    def _open(self, offset: Mapping[str, Any] | None) -> None:
        self._replaying = False
        super()._open(offset)


SLOT_RECORDS = "slots"
"""Beside bronze: ``<source>.json``, the slot the agent created and its consistent point."""

_SET_READ_TIME = sql.SQL("SET LOCAL yb_read_time TO {}")
"""Read the snapshot transaction at a hybrid time (spec B4); a superuser's setting."""
