"""The MySQL / MariaDB capture agent: a consistent snapshot, then the ROW binlog.

:class:`MySqlSource` composes the agent's parts, one module each: :mod:`.agent` (state and
connections), :mod:`.tables` (schema history and captured tables), :mod:`.snapshot`,
:mod:`.stream`, :mod:`.current` (reconciliation reads) and :mod:`.status` (the binlog for
``medallion status``); :mod:`.settings` reads the config.

How it works (spec: ``mysql-and-sqlserver.md`` §1 and §3, ``test-servers.md`` §2):

1. **Server check.** ``log_bin`` on, ``binlog_format=ROW``, ``binlog_row_image=FULL`` and, where
   the server has it, ``binlog_row_metadata=FULL``; anything else stops the agent with the
   setting to change. Engine differences (MariaDB vs MySQL, 8.4's ``SHOW BINARY LOG STATUS``,
   GTID flavours) are the flags of :class:`capture.mysql.server.ServerDialect`, read once per
   connection.
2. **Schema history.** Every DDL read from the binlog, and every table's ``SHOW CREATE TABLE``
   at a snapshot, is parsed (:mod:`capture.mysql.ddl`) and stored with its position in
   ``bronze/schema_history`` (:mod:`capture.mysql.history`) before the batch holding it is
   committed. Each start replays the entries below the resume point, so every row is decoded
   with the table definition in force when it was written. With ``include.schema.changes`` each
   DDL also lands in bronze as a schema-change record (topic ``<prefix>``, key
   ``{databaseName}``, ``tableChanges`` as Debezium writes them).
3. **Snapshot** (``snapshot.mode`` ``initial``, ``when_needed``, ``never``, ``schema_only``,
   ``schema_only_recovery``). ``snapshot.locking.mode=minimal``: ``FLUSH TABLES WITH READ
   LOCK`` → ``REPEATABLE READ`` + ``START TRANSACTION WITH CONSISTENT SNAPSHOT`` → the binlog
   position → schemas → ``UNLOCK TABLES`` → the scan in that transaction; ``extended`` keeps the
   lock until the scan ends; ``none`` takes no lock (MariaDB then reads the position that
   belongs to the snapshot from ``binlog_snapshot_file``/``binlog_snapshot_position``, exact
   without a lock; MySQL's is only as good as no concurrent DDL). Tables are read in key order,
   ``snapshot.fetch.size`` rows per query, and the offset records the table and the last key
   read: a crash resumes after the last committed chunk, in a fresh transaction (rows changed
   since are corrected by the binlog from the snapshot position, which is always re-read).
4. **Stream** with mysql-replication from the offset's file and position (GTID sets are
   recorded in every offset and source block; resuming is by file + position, which the library
   honours for MariaDB only with ``is_mariadb`` off, see ``test-servers.md`` §2). The offset is the
   start of the first transaction not fully in bronze; a transaction cut by
   ``max.transaction.size`` is re-read from its start after a restart and the records already
   landed are skipped. A binlog file that is gone (purged) or a different server behind the
   same address is an error naming the position, or a new snapshot under ``when_needed``.
5. **Records** follow Debezium: ``source`` = version, connector ``mysql``, name, ts_ms (event
   time), snapshot, db, table, server_id, gtid, file, pos, row, thread, query; a primary-key
   change is delete + tombstone + create with ``__debezium.newkey``/``__debezium.oldkey``;
   ``TRUNCATE`` is ``op t``; BEGIN/END with ``provide.transaction.metadata`` (id = the GTID);
   heartbeats with ``heartbeat.interval.ms`` move the offset past changes of tables not captured.

Rows that cannot be decoded (a table unknown to the history, a column count that differs from
the definition, a value that does not convert) are quarantined with the reason and position;
the stream goes on. A statement the DDL parser cannot read stops the agent (a wrong definition
would silently misdecode every later row of that table).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from bronze.storage import LakePath, lake_path
from capture.mysql.agent import CONNECTOR, MySqlTable, SnapshotProgress
from capture.mysql.current import CurrentReader
from capture.mysql.history import SchemaHistory
from capture.mysql.incremental import IncrementalReader
from capture.mysql.position import MySqlPosition
from capture.mysql.server import (
    BinlogPoint,
    ServerDialect,
    binlog_files,
    check_server,
)
from capture.mysql.settings import MySqlSettings, default_server_id
from capture.mysql.snapshot import SnapshotReader, keyed_chunks
from capture.mysql.status import BinlogStatus
from capture.server_errors import MYSQL, ServerErrors
from pipeline.errors import CaptureError, InternalError, NotInstalledError

try:
    import pymysql
except ImportError as exc:  # pragma: no cover - the registry reports it
    raise NotInstalledError(
        "the mysql capture agent needs PyMySQL and mysql-replication: pip install '.[mysql]'"
    ) from exc

__all__ = [
    "MySqlSource",
    "MySqlSettings",
    "MySqlTable",
    "OFFSET_FORMAT",
    "default_server_id",
    "keyed_chunks",
]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""


class MySqlSource(SnapshotReader, IncrementalReader, CurrentReader, BinlogStatus):
    """Captures a MySQL or MariaDB server through its ROW binlog.

    A composition: the snapshot (:class:`~capture.mysql.snapshot.SnapshotReader`), the binlog
    stream (:class:`~capture.mysql.stream.StreamReader`), the reconciliation reads
    (:class:`~capture.mysql.current.CurrentReader`) and the binlog status
    (:class:`~capture.mysql.status.BinlogStatus`), over the schema history and captured tables
    (:class:`~capture.mysql.tables.TableTracker`) of one :class:`~capture.mysql.agent.MySqlAgent`;
    this class opens, restores and writes the offset, and runs the batch loop that hands from
    the snapshot to the stream.

    Args:
        name: The configured source name.
        settings: Connection, filters, snapshot and value handling.
    """

    KIND: ClassVar[str] = "mysql"
    SETTINGS: ClassVar[Any] = MySqlSettings
    ACKNOWLEDGES: ClassVar[bool] = False
    """The binlog keeps nothing per reader: bronze's committed offset is the only position."""
    REPORTS_LOG: ClassVar[bool] = True
    OUTAGES: ClassVar[tuple[type[BaseException], ...]] = (
        pymysql.err.OperationalError,
        pymysql.err.InterfaceError,
        ConnectionError,
    )
    ORIGIN: ClassVar[str] = "mysql"
    SERVER_ERRORS: ClassVar[ServerErrors | None] = MYSQL
    PAUSE_GC: ClassVar[bool] = True
    """mysql-replication's own events hold reference cycles (with the collector paused, a
    20,000-event batch of them held 540 MiB); the events of the hot path (GTID, XID, row
    events) come from :class:`capture.mysql.binlog.BinlogReader` without any, and the rare
    ones the library still builds are freed when the collector runs again after the batch."""

    def bind_lake(self, bronze_root: LakePath) -> None:
        """Keep the schema history in ``<bronze_root>/schema_history``."""
        self._history = SchemaHistory(lake_path(bronze_root) / "schema_history", self.name)

    def _open(self, offset: Mapping[str, Any] | None) -> None:
        if self._history is None:
            raise CaptureError(
                f"source {self.name}: no schema history location (the landing agent binds the "
                "lake before opening the source)"
            )
        s = self.settings
        self._close_connections()
        self._tx = None
        self._pending_history = []
        conn = self._side()
        dialect = self._dialect = ServerDialect.read(conn)
        check_server(conn, dialect, self.name)
        if offset is None:
            if s.snapshot_mode == "never":
                first = binlog_files(conn)[0][0]
                self._start_stream_at(BinlogPoint(first, 4), reset_schema=True)
                return
            self._start_snapshot(with_data=s.snapshot_mode not in ("schema_only",))
            return
        self._restore(offset)
        if s.snapshot_mode == "schema_only_recovery" and self._phase == "stream":
            self._recover_schema()
        lost = self._lost_reason(conn, dialect)
        if lost is not None:
            if s.snapshot_mode == "when_needed":
                logger.warning(
                    "source %s: %s; taking a new snapshot (when_needed)", self.name, lost
                )
                self._start_snapshot(with_data=True)
                return
            raise CaptureError(
                f"source {self.name}: {lost}. Set snapshot.mode to 'when_needed' to take a new "
                "snapshot, or restore the binlog files"
            )
        self._replay_history()
        if self._phase == "snapshot":
            self._resume_snapshot()

    def _lost_reason(self, conn: Any, dialect: ServerDialect) -> str | None:
        """Why bronze's offset cannot be resumed on this server, or None."""
        if self._server_id is not None and self._server_id != dialect.server_id:
            return (
                f"the server's server_id is {dialect.server_id}, bronze's offset was read from "
                f"server_id {self._server_id}: binlog coordinates are per server"
            )
        point = self._resume if self._phase == "stream" else self._snapshot_point()
        if point is None:
            return None
        files = dict(binlog_files(conn))
        if point.file not in files:
            oldest = min(files, default="none")
            return (
                f"binlog file {point.file} (position {point.pos}) is no longer on the server "
                f"(purged; the oldest is {oldest}): the changes after it are gone"
            )
        return None

    def _snapshot_point(self) -> BinlogPoint | None:
        return None if self._snapshot is None else self._snapshot.point

    def _restore(self, offset: Mapping[str, Any]) -> None:
        if offset.get("format") != OFFSET_FORMAT or offset.get("connector") != CONNECTOR:
            raise CaptureError(
                f"source {self.name}: committed offset is not a format-{OFFSET_FORMAT} mysql "
                f"offset: {dict(offset)!r:.200}"
            )
        self._phase = str(offset["phase"])
        self._server_id = offset.get("server_id")
        self._resume = BinlogPoint(str(offset["file"]), int(offset["pos"]), offset.get("gtids"))
        self._gtids = offset.get("gtids")
        cut = offset.get("tx")
        self._cut = (
            None if cut is None else (str(cut["file"]), int(cut["pos"]), int(cut["emitted"]))
        )
        position = offset.get("position")
        self._last_position = None if position is None else MySqlPosition.from_json(position)
        snap = offset.get("snapshot")
        self._snapshot = (
            None
            if snap is None
            else SnapshotProgress.from_json(
                snap, BinlogPoint(str(snap["file"]), int(snap["pos"]), snap.get("gtids"))
            )
        )
        self._signals_restore(offset.get("signals"))

    def _offset_now(self) -> dict[str, Any]:
        resume = self._resume
        if resume is None:
            raise InternalError("capture.mysql.source: expected resume is not None")
        return {
            "format": OFFSET_FORMAT,
            "connector": CONNECTOR,
            "server_id": self._server_id,
            "phase": self._phase,
            "file": resume.file,
            "pos": resume.pos,
            "gtids": self._gtids,
            "tx": None
            if self._cut is None
            else {"file": self._cut[0], "pos": self._cut[1], "emitted": self._cut[2]},
            "position": None if self._last_position is None else self._last_position.to_json(),
            "snapshot": self._snapshot_json(
                lambda point: {"file": point.file, "pos": point.pos, "gtids": point.gtids}
            ),
            "signals": self._signals_json(),
        }

    def close(self) -> None:
        """Close the connections."""
        self._close_connections()


_position = MySqlPosition._new
