"""The state and connections every part of the PostgreSQL agent shares: :class:`PostgresAgent`.

The agent is one :class:`~capture.postgresql.source.PostgresSource`, composed of
:class:`~capture.postgresql.snapshot.SnapshotReader` (the initial snapshot),
:class:`~capture.postgresql.stream.StreamReader` (pgoutput),
:class:`~capture.postgresql.current.CurrentReader` (reconciliation reads) and
:class:`~capture.postgresql.status.SlotStatus`, all on this base.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg

from capture.database_source import (
    OpenTransaction,
    SnapshotProgress,
)
from capture.incremental_snapshot import IncrementalSnapshots
from capture.postgresql import catalog as pg_catalog
from capture.postgresql import slot as pg_slot
from capture.postgresql.pgoutput import (
    Relation,
)
from capture.postgresql.position import PostgresPosition
from capture.postgresql.replication import ReplicationStream
from capture.postgresql.schema import TableSchema
from capture.postgresql.settings import PgSourceSettings
from capture.postgresql.types import SESSION_SETTINGS, PgType
from capture.server_errors import POSTGRES
from pipeline.errors import CaptureError

__all__ = ["CONNECTOR", "SNAPSHOT_MODES", "PgTx", "PostgresAgent", "SnapshotProgress"]

logger = logging.getLogger(__name__)

CONNECTOR = "postgresql"

SNAPSHOT_MODES = ("initial", "initial_only", "exported", "when_needed", "always")


@dataclass(slots=True)
class PgTx(OpenTransaction):
    """The transaction being read, with the PostgreSQL facts its positions need."""

    xid: int = 0
    commit_lsn: int = 0
    last_lsn: int = -1
    seq: int = 0


class PostgresAgent(IncrementalSnapshots):
    """State, connections, setup and table schemas of one PostgreSQL agent.

    Args:
        name: The configured source name.
        settings: Connection, slot, filters and value handling.
    """

    def __init__(self, name: str, settings: PgSourceSettings) -> None:
        super().__init__(name)
        self.retry_policy = settings.rules.retry
        self.masker = settings.rules.masker
        self.signals = settings.signals
        self._last_nudge = 0.0
        """``time.monotonic()`` of the last heartbeat marker written on an idle database."""
        self.partition = settings.server_name
        if settings.snapshot_mode not in (*SNAPSHOT_MODES, "never"):
            raise CaptureError(f"source {name}: unknown snapshot.mode {settings.snapshot_mode!r}")
        if "'" in settings.publication_name or "\\" in settings.publication_name:
            raise CaptureError(f"source {name}: publication.name must not contain quotes")
        self.settings = settings
        self._sql: psycopg.Connection[Any] | None = None
        self._repl: psycopg.Connection[Any] | None = None
        self._snap_conn: psycopg.Connection[Any] | None = None
        self._stream: ReplicationStream | None = None
        self._snapshot: SnapshotProgress[int] | None = None
        self._resume_lsn = 0
        self._last_commit: int | None = None
        self._cut: tuple[int, int] | None = None
        self._tx: PgTx | None = None
        self._acked = 0
        self._server_end = 0
        self._relations: dict[int, TableSchema | None] = {}
        self._known_columns: dict[str, frozenset[str]] = {}
        """Column names per table, as the snapshot or the last Relation message gave them: a
        Relation message with more is an ADD COLUMN (C4: its defaults must be what the
        existing rows show). Kept across reconnects: a replayed Relation is the historic one."""
        self._types: dict[int, PgType | None] = {}
        self._last_position: PostgresPosition | None = None
        self._server_version = 0

    def _connect(self, *, replication: bool = False) -> psycopg.Connection[Any]:
        s = self.settings
        options = " ".join(f"-c {k}={v}" for k, v in SESSION_SETTINGS.items())
        kwargs: dict[str, Any] = {
            "host": s.host,
            "port": s.port,
            "user": s.user,
            "dbname": s.dbname,
            "options": options,
            "application_name": f"medallion-{self.name}",
            "connect_timeout": 10,
            "autocommit": True,
        }
        if s.password is not None:
            kwargs["password"] = s.password.get_secret_value()
        if replication:
            kwargs["replication"] = "database"
        try:
            return psycopg.connect(**kwargs)
        except psycopg.OperationalError as exc:
            # libpq messages name host and port, never the password; the SQLSTATE decides
            # terminal (28P01 wrong password, 3D000 no database) or retryable (08001 down).
            doing = f"connect to PostgreSQL {s.host}:{s.port}/{s.dbname}"
            raise POSTGRES.classify(self.name, exc, doing) from exc

    def _side(self) -> psycopg.Connection[Any]:
        if self._sql is None or self._sql.closed:
            self._sql = self._connect()
        return self._sql

    def _close_connections(self) -> None:
        if self._stream is not None:
            self._stream.close()  # ends its keepalive thread before the connection goes
        for conn in (self._snap_conn, self._repl, self._sql):
            if conn is not None:
                try:
                    conn.close()
                except psycopg.Error:
                    pass  # the connection is already gone; nothing to release
        self._snap_conn = self._repl = self._sql = self._stream = None
        self._snap_rows = None

    def _check_server(self) -> None:
        self._server_version = pg_slot.check_server(self._side(), self.name)

    def _captured_tables(self, conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
        return pg_slot.captured_tables(conn, self.settings.table_filter)

    def _slot(self) -> pg_slot.SlotState | None:
        s = self.settings
        return pg_slot.slot_state(self._side(), self.name, s.slot_name, s.dbname)

    def _slot_is_ours(self) -> bool:
        """Whether the existing, inactive slot was created by this agent (a hook: PostgreSQL
        peeks for the marker message, YugabyteDB reads the record it keeps beside bronze)."""
        s = self.settings
        return pg_slot.slot_is_ours(self._side(), self.name, s.slot_name, s.publication_name)

    def _drop_slot(self) -> None:
        self._repl_close()
        pg_slot.drop_slot(self._side(), self.settings.slot_name)

    def _drop_slot_after_initial_only(self) -> None:
        # initial_only needed the slot only for its exported snapshot; once that snapshot is in
        # bronze, a slot nobody reads would retain WAL forever.
        try:
            self._drop_slot()
        except psycopg.Error as exc:
            logger.warning("source %s: could not drop the slot: %s", self.name, exc)
            return
        logger.info(
            "source %s: snapshot.mode initial_only: snapshot landed, slot %s dropped",
            self.name,
            self.settings.slot_name,
        )

    def _create_slot(self, *, export: bool) -> tuple[int, str | None]:
        """Create the slot on a new replication connection; return (consistent point, snapshot)."""
        self._repl = self._connect(replication=True)
        return pg_slot.create_slot(
            self._repl, self._side(), self.name, self.settings.slot_name, export=export
        )

    def _repl_close(self) -> None:
        if self._stream is not None:
            self._stream.close()  # ends its keepalive thread before the connection goes
        if self._repl is not None:
            self._repl.close()
        self._repl = self._stream = None

    def _table_schema(
        self,
        conn: psycopg.Connection[Any],
        schema: str,
        table: str,
        relation: Relation | None = None,
        *,
        track: bool = True,
    ) -> TableSchema | None:
        """Catalog facts of a table -> its TableSchema (None if the table is gone).

        ``track``: remember its columns to tell an ADD COLUMN in a later Relation message
        (off for reconciliation reads, which see today's catalog, not the stream's)."""
        described = pg_catalog.table_columns(conn, schema, table, relation)
        if described is None:
            return None
        columns, identity = described
        names = frozenset(c.name for c in columns)
        known = self._known_columns.get(f"{schema}.{table}")
        if track:
            self._known_columns[f"{schema}.{table}"] = names
        added = frozenset() if known is None or not track else names - known
        s = self.settings
        return self._schema_class()(
            s.server_name,
            schema,
            table,
            columns,
            identity,
            handling=s.handling,
            lookup=self._lookup_type,
            column_filter=s.table_filter,
            key_overrides=s.rules.key_overrides,
            masker=s.rules.masker,
            placeholder=s.toasted_value_placeholder,
            with_transaction=s.rules.provide_transaction_metadata,
            added=added,
        )

    def _schema_class(self) -> type[TableSchema]:
        """The class of captured tables (a hook: YugabyteDB's rows differ, see
        :mod:`capture.yugabytedb.yboutput`)."""
        return TableSchema

    def _stream_class(self) -> type[ReplicationStream]:
        """The class of the replication stream (a hook for YugabyteDB's agent)."""
        return ReplicationStream

    def _lookup_type(self, oid: int) -> PgType | None:
        if oid not in self._types:
            self._types[oid] = pg_catalog.lookup_type(self._side(), oid)
        return self._types[oid]
