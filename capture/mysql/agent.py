"""The state and connections every part of the MySQL / MariaDB agent shares: :class:`MySqlAgent`.

The agent is one :class:`~capture.mysql.source.MySqlSource`, composed of
:class:`~capture.mysql.tables.TableTracker` (schema history and captured tables),
:class:`~capture.mysql.snapshot.SnapshotReader`, :class:`~capture.mysql.stream.StreamReader`
(the binlog), :class:`~capture.mysql.current.CurrentReader` (reconciliation reads) and
:class:`~capture.mysql.status.BinlogStatus`, all on this base.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import orjson
import pymysql

from capture.captured_table import CapturedTable
from capture.database_source import (
    OpenTransaction,
    SnapshotProgress,
)
from capture.incremental_snapshot import IncrementalSnapshots
from capture.mysql.ddl import SchemaState
from capture.mysql.history import HistoryEntry, SchemaHistory
from capture.mysql.position import MySqlPosition
from capture.mysql.schema import TableDef
from capture.mysql.server import (
    BinlogPoint,
    ServerDialect,
)
from capture.mysql.settings import MySqlSettings
from capture.mysql.tls import SharedTlsConnection
from capture.server_errors import MYSQL
from pipeline.errors import CaptureError, PipelineError

__all__ = [
    "CONNECTION_LOST",
    "CONNECTOR",
    "LOCKING_MODES",
    "SNAPSHOT_MODES",
    "MySqlAgent",
    "MySqlTable",
    "MySqlTx",
    "SnapshotProgress",
    "raw_row",
]

logger = logging.getLogger(__name__)

CONNECTOR = "mysql"
CONNECTION_LOST = (2003, 2006, 2013)
"""Client errors: cannot connect, server gone away, lost connection (retried, not refused)."""

SNAPSHOT_MODES = ("initial", "when_needed", "never", "schema_only", "schema_only_recovery")

LOCKING_MODES = ("minimal", "extended", "none")


@dataclass(slots=True)
class MySqlTx(OpenTransaction):
    """A binlog transaction group being read."""

    start: tuple[str, int] = ("", 0)
    """File and position of its first event (GTID or BEGIN): where a restart re-reads it."""
    gtid: str | None = None
    thread: int | None = None
    query: str | None = None


class MySqlTable(CapturedTable):
    """A captured table with the definition (from the schema history) it was built from."""

    def __init__(self, definition: TableDef, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.definition = definition


class MySqlAgent(IncrementalSnapshots):
    """State and connections of one MySQL / MariaDB agent.

    Args:
        name: The configured source name.
        settings: Connection, filters, snapshot and value handling.
    """

    def __init__(self, name: str, settings: MySqlSettings) -> None:
        super().__init__(name)
        self.retry_policy = settings.rules.retry
        self.masker = settings.rules.masker
        self.signals = settings.signals
        if settings.snapshot_mode not in SNAPSHOT_MODES:
            raise CaptureError(f"source {name}: unknown snapshot.mode {settings.snapshot_mode!r}")
        if settings.snapshot_locking_mode not in LOCKING_MODES:
            raise CaptureError(
                f"source {name}: unknown snapshot.locking.mode {settings.snapshot_locking_mode!r}"
            )
        self.settings = settings
        self.partition = settings.server_name
        self._history: SchemaHistory | None = None
        self._schema = SchemaState()
        self._tables: dict[tuple[str, str], MySqlTable | PipelineError | None] = {}
        self._conn: Any = None
        self._snap_conn: Any = None
        self._chunk_conn: Any = None
        """Incremental-snapshot chunks' connection (:mod:`capture.mysql.incremental`)."""
        self._stream: Any = None
        self._dialect: ServerDialect | None = None
        self._snapshot: SnapshotProgress[BinlogPoint] | None = None
        self._resume: BinlogPoint | None = None
        self._gtids: str | None = None
        self._cut: tuple[str, int, int] | None = None
        self._tx: MySqlTx | None = None
        self._last_position: MySqlPosition | None = None
        self._server_id: int | None = None
        self._file = ""
        self._pending_history: list[HistoryEntry] = []
        self._stream_at = 0
        self._query_warned = False

    def _connect(self, **extra: Any) -> Any:
        s = self.settings
        try:
            return SharedTlsConnection(**{**s.connection(), "autocommit": True, **extra})
        except pymysql.err.OperationalError as exc:
            # The errno decides: 1045/1049 terminal, 2003/2013 retryable.
            raise MYSQL.classify(self.name, exc, f"connect to MySQL {s.host}:{s.port}") from exc

    def _side(self) -> Any:
        if self._conn is None or not self._conn.open:
            self._conn = self._connect()
        return self._conn

    def _close_connections(self) -> None:
        if self._stream is not None:
            try:
                self._stream.close()
            except Exception:  # noqa: BLE001 - closing a connection that already failed
                pass
            self._stream = None
        for conn in (self._snap_conn, self._chunk_conn, self._conn):
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - already closed by the server
                    pass
        self._snap_conn = self._chunk_conn = self._conn = None
        self._snap_rows = None  # it reads through the snapshot connection just closed


def raw_row(values: Any) -> bytes:
    """What is kept of a row that could not be landed (for the quarantine)."""
    return orjson.dumps(values, default=str, option=orjson.OPT_NON_STR_KEYS)
