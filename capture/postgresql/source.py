"""The PostgreSQL capture agent: a consistent snapshot, then the pgoutput logical-decoding stream.

How it works (spec: ``debezium-guide-1.2.md`` §2.2, ``test-servers.md`` §1b):

1. **Setup, idempotent.** The publication is created per ``publication.autocreate.mode``
   (``all_tables``: ``FOR ALL TABLES``; ``filtered``: ``FOR TABLE`` the captured tables, kept in
   step with the filters; ``disabled``: it must exist). The slot is created if missing.
2. **Snapshot** (modes ``initial``, ``initial_only``, ``exported``, ``when_needed``, ``always``).
   ``CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT`` returns the slot's consistent point P and a
   snapshot name; a second session imports it (``SET TRANSACTION SNAPSHOT``) and reads each table
   in key order through a cursor, so rows are exactly the database at P: the stream from P then
   has no gap and no overlap. Rows are ``op r`` with ``source.snapshot`` ``true`` (``last`` on the
   final row) and positions ``(P, snapshot, P, seq)``. The offset records the table and the last
   key read, so a crash resumes after the last committed chunk. The exported snapshot does not
   survive the crash, so the remaining chunks are read from a fresh snapshot; rows changed after
   P may then be read in their newer state, which the stream from P (it always starts at P)
   re-applies in order, so silver still converges, and nothing already committed is read again.
3. **Stream.** ``START_REPLICATION SLOT s LOGICAL <lsn> (proto_version '1', publication_names
   ..., messages 'true')`` on a ``replication=database`` connection, read with psycopg 3's
   low-level copy calls (psycopg 3 has no replication API, psycopg#71). Each transaction's
   records get positions ``(commit LSN, stream, change LSN, seq)``: the commit LSN first, because
   the per-row LSN is not ordered across interleaved transactions.
4. **Acknowledgement.** The slot's flush LSN is sent only from :meth:`acknowledge`, which the
   landing agent calls after the bronze commit, and again after a restart. The offset's ``lsn``
   is the end of the last complete transaction; restarting there skips exactly the transactions
   already in bronze. A transaction cut by ``max.transaction.size`` is resent whole after a
   restart and its first ``emitted`` records are skipped.
5. **Faults.** A lost connection or a server restart is retried with backoff (Debezium's
   ``slot.max.retries``): the interrupted batch is read again from the previous batch's offset.
   A dropped or invalidated slot is an error naming the lost LSN, or a new snapshot under
   ``when_needed``/``always``. A slot that exists while bronze has no offset is dropped and
   recreated only if the agent can prove it created it (the ``medallion.slot`` marker message it
   writes right after creating a slot is still the first thing the slot decodes); any other slot
   is left alone with an error, since dropping another consumer's slot loses its changes.

Snapshot modes: ``initial`` and ``exported`` are the same here (the exported snapshot is already
lock-free); ``always`` snapshots again only when the slot is lost; ``initial_only`` drops its slot
once the snapshot is in bronze, so an unread slot does not retain WAL.

Records follow Debezium: ``source`` = version, connector, name, ts_ms (commit time), snapshot,
db, sequence, schema, table, txId, lsn, xmin, plus ``commit_lsn`` (as medallion's reference
streams write it); ``before`` per REPLICA IDENTITY (DEFAULT and INDEX: the key, FULL: the row,
NOTHING: none); unchanged TOAST columns carry ``toasted.value.placeholder``; a primary-key change
is delete + tombstone + create with ``__debezium.newkey``/``__debezium.oldkey``; TRUNCATE is
``op t`` per table; ``pg_logical_emit_message`` is ``op m``; BEGIN/END with
``provide.transaction.metadata``; heartbeats with ``heartbeat.interval.ms``.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import orjson
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from bronze import schema as S
from bronze.batch import BatchBuilder
from bronze.envelope import (
    ConnectRecord,
    Op,
    heartbeat,
    message_record,
    truncate_record,
)
from bronze.positions import Phase, PostgresPosition, format_pg_lsn
from capture.base import SourceBatch
from capture.database_source import (
    VERSION,
    DatabaseSource,
    OpenTransaction,
    data_record,
    delete_records,
    update_records,
    with_last,
)
from capture.masking import ColumnMasker
from capture.postgresql import catalog as pg_catalog
from capture.postgresql import slot as pg_slot
from capture.postgresql.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputMessage,
    ProtocolError,
    Relation,
    Truncate,
    TypeInfo,
    Update,
    decode_keepalive,
    decode_message,
    decode_xlog_data,
    pg_time_to_unix_ms,
)
from capture.postgresql.replication import ReplicationStream
from capture.postgresql.schema import KeyOverrides, TableFilter, TableSchema
from capture.postgresql.slot import parse_lsn
from capture.postgresql.types import SESSION_SETTINGS, PgType, ValueConversionError, ValueHandling
from pipeline.errors import CaptureError, NotInstalledError, PipelineError, SourceUnavailable

try:
    import psycopg
    from psycopg import sql
    from psycopg.types.string import TextLoader
except ImportError as exc:  # pragma: no cover - the registry reports it
    raise NotInstalledError(
        "the postgresql capture agent needs psycopg 3: pip install '.[postgres]'"
    ) from exc

__all__ = ["PostgresSource", "PgSourceSettings", "OFFSET_FORMAT", "parse_lsn"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""

CONNECTOR = "postgresql"
SNAPSHOT_CURSOR = "medallion_snapshot"
_TID_OID = 27
STATUS_INTERVAL_S = 10.0
"""Standby status updates at least this often (``wal_sender_timeout`` defaults to 60 s)."""
CATCH_UP_TIMEOUT_S = 10.0
"""A batch that saw nothing from the server for this long stops waiting for it to confirm it
sent everything up to the WAL position seen when the batch started."""
SNAPSHOT_FETCH_SIZE = 10_240
"""Rows per ``FETCH`` of the snapshot cursor (Debezium's ``snapshot.fetch.size`` for PG)."""
_SNAPSHOT_MODES = ("initial", "initial_only", "exported", "when_needed", "always")


@dataclass(frozen=True, slots=True)
class PgSourceSettings:
    """Everything the agent needs from a ``postgresql`` source config.

    Build it with :meth:`from_config`; tests may build it directly. ``password`` is the config's
    ``SecretStr`` and is revealed only when connecting.
    """

    host: str
    port: int
    user: str
    dbname: str
    password: Any = None
    server_name: str = "postgres"
    slot_name: str = "debezium"
    publication_name: str = "dbz_publication"
    publication_autocreate_mode: str = "all_tables"
    snapshot_mode: str = "initial"
    table_filter: TableFilter = field(default_factory=TableFilter)
    key_overrides: KeyOverrides = field(default_factory=KeyOverrides)
    handling: ValueHandling = field(default_factory=ValueHandling)
    masker: ColumnMasker | None = None
    tombstones_on_delete: bool = True
    provide_transaction_metadata: bool = False
    skipped_operations: frozenset[str] = frozenset({"t"})
    heartbeat_interval_ms: int = 0
    heartbeat_action_query: str | None = None
    toasted_value_placeholder: str = "__debezium_unavailable_value"
    slot_drop_on_stop: bool = False
    snapshot_fetch_size: int = SNAPSHOT_FETCH_SIZE

    @classmethod
    def from_config(cls, config: Any) -> PgSourceSettings:
        """Read a validated :class:`pipeline.config.PostgresSourceConfig`."""
        return cls(
            host=str(config.database_hostname),
            port=int(config.database_port),
            user=str(config.database_user),
            dbname=str(config.database_dbname),
            password=config.database_password,
            server_name=str(config.logical_name),
            slot_name=str(config.slot_name),
            publication_name=str(config.publication_name),
            publication_autocreate_mode=str(config.publication_autocreate_mode),
            snapshot_mode=str(config.snapshot_mode),
            table_filter=TableFilter.from_config(config),
            key_overrides=KeyOverrides.parse(config.message_key_columns),
            handling=ValueHandling.from_config(config),
            masker=ColumnMasker.from_source(config),
            tombstones_on_delete=bool(config.tombstones_on_delete),
            provide_transaction_metadata=bool(config.provide_transaction_metadata),
            skipped_operations=frozenset(str(op) for op in config.skipped_operations),
            heartbeat_interval_ms=int(config.heartbeat_interval_ms),
            heartbeat_action_query=config.heartbeat_action_query,
            toasted_value_placeholder=str(config.toasted_value_placeholder),
            slot_drop_on_stop=bool(config.slot_drop_on_stop),
        )


@dataclass(slots=True)
class _Tx(OpenTransaction):
    """The transaction being read, with the PostgreSQL facts its positions need."""

    xid: int = 0
    commit_lsn: int = 0
    last_lsn: int = -1
    seq: int = 0


@dataclass(slots=True)
class _Snapshot:
    """Progress of the initial snapshot (saved in the offset)."""

    point: int
    tables: list[tuple[str, str]]
    index: int = 0
    after: list[str | None] | None = None
    seq: int = 0
    ts_ms: int = 0


class PostgresSource(DatabaseSource):
    """Captures one PostgreSQL database through a pgoutput slot.

    Args:
        name: The configured source name.
        settings: Connection, slot, filters and value handling.
    """

    KIND: ClassVar[str] = "postgresql"
    ACKNOWLEDGES: ClassVar[bool] = True
    REPORTS_LOG: ClassVar[bool] = True
    REPLAYABLE: ClassVar[bool] = True
    OUTAGES: ClassVar[tuple[type[BaseException], ...]] = (
        psycopg.OperationalError,
        psycopg.InterfaceError,
    )
    ORIGIN: ClassVar[str] = "pg"

    def __init__(self, name: str, settings: PgSourceSettings) -> None:
        super().__init__(name)
        self.partition = settings.server_name
        if settings.snapshot_mode not in (*_SNAPSHOT_MODES, "never"):
            raise CaptureError(f"source {name}: unknown snapshot.mode {settings.snapshot_mode!r}")
        if "'" in settings.publication_name or "\\" in settings.publication_name:
            raise CaptureError(f"source {name}: publication.name must not contain quotes")
        self.settings = settings
        self._sql: psycopg.Connection[Any] | None = None
        self._repl: psycopg.Connection[Any] | None = None
        self._snap_conn: psycopg.Connection[Any] | None = None
        self._stream: ReplicationStream | None = None
        self._phase = "stream"
        self._snapshot: _Snapshot | None = None
        self._snap_rows: Iterator[tuple[int, TableSchema, list[str | None], bool]] | None = None
        self._resume_lsn = 0
        self._last_commit: int | None = None
        self._cut: tuple[int, int] | None = None
        self._tx: _Tx | None = None
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

    @classmethod
    def from_config(cls, config: Any) -> PostgresSource:
        """Build from a validated ``postgresql`` source config."""
        return cls(config.name, PgSourceSettings.from_config(config))

    def bind_lake(self, bronze_root: Path) -> None:
        """Learn each table's columns from the last envelope schema this source landed, so an
        ADD COLUMN made while the agent was stopped is still told apart (contract C4)."""
        self._known_columns.update(landed_columns(Path(bronze_root) / "schemas", self.name))

    # --- connections ---------------------------------------------------------------------------
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
            # libpq messages name host and port, never the password.
            raise SourceUnavailable(
                f"source {self.name}: cannot connect to PostgreSQL {s.host}:{s.port}/{s.dbname}: "
                f"{str(exc).strip()}"
            ) from None

    def _side(self) -> psycopg.Connection[Any]:
        if self._sql is None or self._sql.closed:
            self._sql = self._connect()
        return self._sql

    def _close_connections(self) -> None:
        stream_conn = None if self._stream is None else self._stream.conn
        for conn in (self._snap_conn, self._repl, stream_conn, self._sql):
            if conn is not None:
                try:
                    conn.close()
                except psycopg.Error:
                    pass  # the connection is already gone; nothing to release
        self._snap_conn = self._repl = self._sql = self._stream = None
        self._snap_rows = None

    # --- setup ---------------------------------------------------------------------------------
    def _check_server(self) -> None:
        self._server_version = pg_slot.check_server(self._side(), self.name)

    def _captured_tables(self, conn: psycopg.Connection[Any]) -> list[tuple[str, str]]:
        return pg_slot.captured_tables(conn, self.settings.table_filter)

    def _slot(self) -> pg_slot.SlotState | None:
        s = self.settings
        return pg_slot.slot_state(self._side(), self.name, s.slot_name, s.dbname)

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

    # --- open ----------------------------------------------------------------------------------
    def _open(self, offset: Mapping[str, Any] | None) -> None:
        s = self.settings
        self._close_connections()
        self._relations.clear()
        self._tx = None
        self._check_server()
        pg_slot.ensure_publication(
            self._side(),
            self.name,
            s.publication_name,
            s.publication_autocreate_mode,
            s.table_filter,
        )
        slot = self._slot()
        if offset is None:
            if s.snapshot_mode == "never":
                if slot is None:
                    point, _ = self._create_slot(export=False)
                    self._repl_close()
                else:
                    point = slot.confirmed_flush
                self._phase = "stream"
                self._resume_lsn = point
                self._acked = point
                return
            if slot is not None:
                # A slot without a bronze offset cannot provide the snapshot's consistent point.
                if slot.active or not pg_slot.slot_is_ours(
                    self._side(), self.name, s.slot_name, s.publication_name
                ):
                    raise CaptureError(
                        f"source {self.name}: replication slot {s.slot_name!r} already exists "
                        "but bronze holds no offset for this source, and the slot was not "
                        "created by this agent (or is in use). Choose another slot.name, stream "
                        "from the slot without a snapshot (snapshot.mode=never), or drop it if "
                        f"nothing else needs it: SELECT pg_drop_replication_slot('{s.slot_name}')"
                    )
                logger.warning(
                    "source %s: slot %s was created by an earlier run that stopped before its "
                    "first bronze commit; recreating it for a consistent snapshot",
                    self.name,
                    s.slot_name,
                )
                self._drop_slot()
            self._start_snapshot()
            return
        self._restore(offset)
        if self._phase == "done":
            if slot is not None:
                self._drop_slot_after_initial_only()
            return
        if s.snapshot_mode == "always":
            logger.warning(
                "source %s: snapshot.mode 'always' snapshots again only when the slot is lost; "
                "bronze's offset is intact, so streaming resumes from it",
                self.name,
            )
        lost = slot is None or slot.lost
        if lost:
            why = "does not exist" if slot is None else "was invalidated (wal_status lost)"
            if s.snapshot_mode in ("when_needed", "always"):
                logger.warning(
                    "source %s: slot %s %s; re-snapshotting (snapshot.mode=%s)",
                    self.name,
                    s.slot_name,
                    why,
                    s.snapshot_mode,
                )
                if slot is not None:
                    self._drop_slot()
                self._start_snapshot()
                return
            raise CaptureError(
                f"source {self.name}: replication slot {s.slot_name!r} {why}; changes after LSN "
                f"{format_pg_lsn(self._resume_lsn)} are gone from the server. Set snapshot.mode "
                "to 'when_needed' to take a new snapshot, or restore the slot"
            )
        assert slot is not None
        if slot.confirmed_flush > self._resume_lsn and self._phase == "stream":
            raise CaptureError(
                f"source {self.name}: slot {s.slot_name!r} confirmed "
                f"{format_pg_lsn(slot.confirmed_flush)}, "
                f"beyond bronze's offset {format_pg_lsn(self._resume_lsn)}: another consumer "
                "used the slot, and the changes between are lost"
            )
        self._acked = self._resume_lsn
        if self._phase == "snapshot":
            self._resume_snapshot()

    def _repl_close(self) -> None:
        for conn in (self._repl, None if self._stream is None else self._stream.conn):
            if conn is not None:
                conn.close()
        self._repl = self._stream = None

    def _restore(self, offset: Mapping[str, Any]) -> None:
        if offset.get("format") != OFFSET_FORMAT:
            raise CaptureError(
                f"source {self.name}: committed offset has format {offset.get('format')!r}, this "
                f"version reads format {OFFSET_FORMAT}"
            )
        if offset.get("slot") != self.settings.slot_name:
            raise CaptureError(
                f"source {self.name}: bronze's offset is for slot {offset.get('slot')!r}, the "
                f"config names {self.settings.slot_name!r}"
            )
        self._phase = str(offset["phase"])
        self._resume_lsn = parse_lsn(offset["lsn"])
        last = offset.get("last_commit")
        self._last_commit = None if last is None else parse_lsn(last)
        cut = offset.get("tx")
        self._cut = None if cut is None else (parse_lsn(cut["commit_lsn"]), int(cut["emitted"]))
        position = offset.get("position")
        self._last_position = None if position is None else PostgresPosition.from_json(position)
        snap = offset.get("snapshot")
        self._snapshot = (
            None
            if snap is None
            else _Snapshot(
                parse_lsn(snap["point"]),
                [(a, b) for a, b in snap["tables"]],
                int(snap["index"]),
                snap.get("after"),
                int(snap["seq"]),
                int(snap.get("ts_ms", 0)),
            )
        )

    def _offset_now(self) -> dict[str, Any]:
        snap = self._snapshot
        return {
            "format": OFFSET_FORMAT,
            "slot": self.settings.slot_name,
            "phase": self._phase,
            "lsn": format_pg_lsn(self._resume_lsn),
            "last_commit": None if self._last_commit is None else format_pg_lsn(self._last_commit),
            "tx": None
            if self._cut is None
            else {"commit_lsn": format_pg_lsn(self._cut[0]), "emitted": self._cut[1]},
            "position": None if self._last_position is None else self._last_position.to_json(),
            "snapshot": None
            if snap is None or self._phase != "snapshot"
            else {
                "point": format_pg_lsn(snap.point),
                "tables": [list(t) for t in snap.tables],
                "index": snap.index,
                "after": snap.after,
                "seq": snap.seq,
                "ts_ms": snap.ts_ms,
            },
        }

    # --- snapshot ------------------------------------------------------------------------------
    def _start_snapshot(self) -> None:
        point, name = self._create_slot(export=True)
        conn = self._connect()
        conn.autocommit = False
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(name)))
        self._snap_conn = conn
        self._snapshot = _Snapshot(
            point, self._captured_tables(conn), ts_ms=int(time.time() * 1000)
        )
        self._phase = "snapshot"
        self._resume_lsn = point
        self._acked = point
        self._last_commit = None
        self._cut = None
        logger.info(
            "source %s: snapshot of %d table(s) at %s",
            self.name,
            len(self._snapshot.tables),
            format_pg_lsn(point),
        )

    def _resume_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise CaptureError(f"source {self.name}: offset in phase snapshot has no progress")
        logger.warning(
            "source %s: resuming the snapshot at table %d of %d from a fresh transaction (the "
            "exported snapshot ended with the previous run); the stream from %s corrects rows "
            "changed since",
            self.name,
            snap.index + 1,
            len(snap.tables),
            format_pg_lsn(snap.point),
        )
        conn = self._connect()
        conn.autocommit = False
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        self._snap_conn = conn

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
        return TableSchema(
            s.server_name,
            schema,
            table,
            columns,
            identity,
            handling=s.handling,
            lookup=self._lookup_type,
            column_filter=s.table_filter,
            key_overrides=s.key_overrides,
            masker=s.masker,
            placeholder=s.toasted_value_placeholder,
            with_transaction=s.provide_transaction_metadata,
            added=added,
        )

    def _lookup_type(self, oid: int) -> PgType | None:
        if oid not in self._types:
            self._types[oid] = pg_catalog.lookup_type(self._side(), oid)
        return self._types[oid]

    def _snapshot_rows(self) -> Iterator[tuple[int, TableSchema, list[str | None]]]:
        """Rows of the remaining tables, in key order, as ``(table index, schema, texts)``."""
        snap, conn = self._snapshot, self._snap_conn
        assert snap is not None and conn is not None
        size = int(self.settings.snapshot_fetch_size)
        index, after = snap.index, snap.after
        while index < len(snap.tables):
            schema, table = snap.tables[index]
            ts = self._table_schema(conn, schema, table)
            if ts is None:
                index, after = index + 1, None
                continue
            for chunk in _keyed_chunks(conn, ts, SNAPSHOT_CURSOR, size, after=after):
                for values in chunk:
                    yield index, ts, list(values)
            index, after = index + 1, None

    def _read_snapshot(self, builder: BatchBuilder, max_events: int, now: dt.datetime) -> bool:
        """Add up to ``max_events`` snapshot rows; True when the snapshot is complete."""
        snap = self._snapshot
        assert snap is not None
        if self._snap_conn is None:
            self._resume_snapshot()
        if self._snap_rows is None:
            self._snap_rows = with_last(self._snapshot_rows())
        s = self.settings
        count = 0
        # Every row of a table shares one source block (records are never mutated), so it is
        # built once per table, plus once for the snapshot's last row.
        sources: dict[tuple[str, bool], dict[str, Any]] = {}
        for table_index, ts, values, last in self._snap_rows:
            ncols = len(ts.names)
            row_values = values[:ncols] if len(values) > ncols else values
            source = sources.get((ts.collection, last))
            if source is None:
                source = sources[(ts.collection, last)] = {
                    "version": VERSION,
                    "connector": CONNECTOR,
                    "name": s.server_name,
                    "ts_ms": snap.ts_ms,
                    "snapshot": "last" if last else "true",
                    "db": s.dbname,
                    "sequence": None,
                    "schema": ts.schema,
                    "table": ts.table,
                    "txId": None,
                    "lsn": snap.point,
                    "xmin": None,
                }
            position = _position(snap.point, Phase.SNAPSHOT, snap.point, snap.seq)
            snap.seq += 1
            self._snapshot_row(
                builder, ts, row_values, source, position, now, partial(orjson.dumps, values)
            )
            self._last_position = position
            snap.after = [row_values[i] for i in ts.key_idx] if ts.has_key else [values[ncols]]
            snap.index = table_index
            count += 1
            if last:
                break
            if count >= max_events:
                self._snapshot_progress(snap.seq, snap.index, len(snap.tables), ts.collection)
                return False
        self._finish_snapshot()
        return True

    def _end_marker(self, builder: BatchBuilder, now: dt.datetime) -> None:
        snap = self._snapshot
        assert snap is not None
        position = _position(snap.point, Phase.SNAPSHOT, snap.point, snap.seq)
        snap.seq += 1
        origin = f"pg:snapshot-end@{format_pg_lsn(snap.point)}"
        self._snapshot_marker(builder, position, origin, now)
        self._last_position = position

    def _finish_snapshot(self) -> None:
        snap = self._snapshot
        assert snap is not None
        if self._snap_conn is not None:
            self._snap_conn.commit()
            self._snap_conn.close()
            self._snap_conn = None
        self._snap_rows = None
        self._phase = "done" if self.settings.snapshot_mode == "initial_only" else "stream"
        self._resume_lsn = snap.point
        logger.info("source %s: snapshot complete (%d rows)", self.name, snap.seq)

    # --- streaming -----------------------------------------------------------------------------
    def _start_streaming(self) -> None:
        repl = self._repl if self._repl is not None and not self._repl.closed else None
        self._repl = None
        stream = ReplicationStream(repl or self._connect(replication=True), self.name)
        self._stream = stream
        stream.start(
            self.settings.slot_name,
            self._resume_lsn,
            self.settings.publication_name,
            messages=self._server_version >= 140000,
        )
        self._server_end = 0
        stream.send_status(self._acked)
        logger.info(
            "source %s: streaming slot %s from %s",
            self.name,
            self.settings.slot_name,
            format_pg_lsn(self._resume_lsn),
        )

    def _run_action_query(self, sql: str) -> None:
        self._side().execute(sql)

    def _send_status(self, *, reply: bool) -> None:
        if self._stream is not None:
            self._stream.send_status(self._acked, reply=reply)

    def _current_wal(self) -> int:
        row = self._side().execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        assert row is not None
        return parse_lsn(row[0])

    # --- the batch loop ------------------------------------------------------------------------
    def _read_batch(
        self, max_events: int, max_transaction_events: int, until: Mapping[str, Any] | None
    ) -> SourceBatch:
        builder = BatchBuilder(self.name)
        self._batch_schemas = set()
        now = dt.datetime.now(dt.UTC)
        if self._phase == "snapshot":
            done = self._read_snapshot(builder, max_events, now)
            if done and len(builder) == 0:
                self._end_marker(builder, now)
            exhausted = done and self.settings.snapshot_mode == "initial_only"
            return SourceBatch(builder, self._offset_now(), exhausted)
        if self._phase == "done":
            return SourceBatch(builder, self._offset_now(), True)
        if self._stream is None:
            self._start_streaming()
        stream = self._stream
        assert stream is not None
        target = self._current_wal()
        until_lsn = None if until is None else parse_lsn(until["lsn"])
        until_cut = None if until is None or until.get("tx") is None else until["tx"]
        exhausted = False
        idle_since: float | None = None
        last_reply = 0.0
        while True:
            tx = self._tx
            if until_lsn is not None and self._reached(until_lsn, until_cut):
                break
            if tx is None and until is None and len(builder) >= max_events:
                break
            if (
                tx is not None
                and until is None
                and len(builder) >= max_events
                and tx.in_batch >= max_transaction_events
            ):
                builder.mark_partial(str(tx.xid))
                self._cut = (tx.commit_lsn, tx.emitted)
                break
            if tx is None and self._server_end >= target:
                if until is not None:
                    # Re-reading a half-landed batch that ended on a heartbeat: everything the
                    # server had is read, so the batch ends where the heartbeat had put it.
                    if until_lsn is not None and until_cut is None:
                        if self._server_end >= until_lsn:
                            self._resume_lsn = max(self._resume_lsn, until_lsn)
                    break
                self._maybe_heartbeat(builder, now)
                exhausted = True
                break
            if time.monotonic() - stream.last_status > STATUS_INTERVAL_S:
                self._send_status(reply=False)
            data = stream.read(0.05 if tx is None else 1.0)
            if data is None:
                idle_since = idle_since or time.monotonic()
                if (
                    tx is None
                    and until is None
                    and time.monotonic() - idle_since > CATCH_UP_TIMEOUT_S
                ):
                    exhausted = True  # the server never confirmed the target; stop waiting
                    break
                if tx is None and time.monotonic() - last_reply > 0.1:
                    # Ask for a keepalive: its WAL end says how far the server has sent.
                    self._send_status(reply=True)
                    last_reply = time.monotonic()
                self._maybe_heartbeat(builder, now)
                continue
            idle_since = None
            kind = data[:1]
            if kind == b"w":
                start, _end, _ts, payload = decode_xlog_data(data)
                try:
                    message = decode_message(payload)
                except ProtocolError as exc:
                    raise CaptureError(
                        f"source {self.name}: at {format_pg_lsn(start)}: {exc}"
                    ) from None
                self._handle(builder, message, start, payload, now)
            elif kind == b"k":
                wal_end, _ts, reply = decode_keepalive(data)
                if wal_end > self._server_end:
                    self._server_end = wal_end
                if reply:
                    self._send_status(reply=False)
                if self._tx is None:
                    self._maybe_heartbeat(builder, now)
        return SourceBatch(builder, self._offset_now(), exhausted)

    def _reached(self, until_lsn: int, until_cut: Mapping[str, Any] | None) -> bool:
        if until_cut is None:
            return self._tx is None and self._resume_lsn >= until_lsn
        commit = parse_lsn(until_cut["commit_lsn"])
        tx = self._tx
        if tx is not None and tx.commit_lsn == commit:
            return tx.emitted >= int(until_cut["emitted"])
        return self._resume_lsn > commit

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        s = self.settings
        if self._tx is not None:
            return
        if not self._heartbeat_due(s.heartbeat_interval_ms, s.heartbeat_action_query):
            return
        point = max(self._server_end, self._resume_lsn)
        if point <= self._acked:
            return  # nothing new to confirm
        self._last_heartbeat = time.monotonic()
        # Every transaction committed before the keepalive's WAL end was sent before it, so
        # confirming that point after this batch commits loses nothing; it lets WAL be recycled.
        key = point - 1
        last = self._last_position
        if last is not None and (last.commit_lsn, last.lsn) >= (key, key):
            return
        position = _position(key, Phase.STREAM, key, 0)
        record = heartbeat(s.server_name, int(time.time() * 1000))
        self._add(
            builder, record, position, f"pg:heartbeat@{format_pg_lsn(point)}", now, None, None
        )
        self._last_position = position
        self._resume_lsn = point

    # --- message handling ------------------------------------------------------------------------
    def _handle(
        self,
        builder: BatchBuilder,
        message: PgOutputMessage,
        lsn: int,
        raw: bytes,
        now: dt.datetime,
    ) -> None:
        cls = message.__class__
        if cls is not Insert and cls is not Update and cls is not Delete:
            self._handle_other(builder, message, lsn, raw, now)
            return
        assert isinstance(message, (Insert, Update, Delete))
        tx = self._tx
        if tx is None:
            raise CaptureError(
                f"source {self.name}: {cls.__name__} at {format_pg_lsn(lsn)} outside a transaction"
            )
        table = self._relations.get(message.relation_id, _MISSING_TABLE)
        if table is _MISSING_TABLE:
            raise CaptureError(
                f"source {self.name}: change for relation {message.relation_id} before its "
                "Relation message"
            )
        if table is None:
            return  # not captured
        try:
            records = self._change_records(table, message, lsn, tx)
        except (ValueConversionError, PipelineError) as exc:
            position = self._position(tx, lsn)
            if tx.count():
                self._quarantine(builder, raw, f"pg:{format_pg_lsn(lsn)}", exc, now)
            self._last_position = position
            return
        for record in records:
            if record.value is not None:
                self._begin_if_needed(builder, tx, now)
            position = self._position(tx, lsn)
            if tx.count():
                self._add(builder, record, position, f"pg:{format_pg_lsn(lsn)}", now, tx, table)
            if record.value is not None:
                tx.note_data(table.collection)
            self._last_position = position

    def _handle_other(
        self,
        builder: BatchBuilder,
        message: PgOutputMessage,
        lsn: int,
        raw: bytes,
        now: dt.datetime,
    ) -> None:
        if isinstance(message, Begin):
            skip = 0
            if self._cut is not None and self._cut[0] == message.final_lsn:
                skip = self._cut[1]
            self._tx = _Tx(
                id=str(message.xid),
                ts_ms=pg_time_to_unix_ms(message.commit_time_us),
                skip=skip,
                xid=message.xid,
                commit_lsn=message.final_lsn,
            )
        elif isinstance(message, Commit):
            self._commit(builder, message, now)
        elif isinstance(message, Relation):
            self._relation(message)
        elif isinstance(message, LogicalMessage):
            self._logical_message(builder, message, raw, now)
        elif isinstance(message, Truncate):
            if self._tx is None:
                raise CaptureError(
                    f"source {self.name}: Truncate at {format_pg_lsn(lsn)} outside a transaction"
                )
            self._truncate(builder, message, lsn, raw, now)
        elif not isinstance(message, (TypeInfo, Origin)):
            # Stream Start/Stop/Commit/Abort need 'streaming on', which the agent never asks for.
            raise CaptureError(
                f"source {self.name}: unexpected {type(message).__name__} message at "
                f"{format_pg_lsn(lsn)}"
            )

    def _position(self, tx: _Tx, lsn: int) -> PostgresPosition:
        if lsn == tx.last_lsn:
            tx.seq += 1
        else:
            tx.last_lsn, tx.seq = lsn, 0
        return _position(tx.commit_lsn, Phase.STREAM, lsn, tx.seq)

    def _begin_if_needed(self, builder: BatchBuilder, tx: _Tx, now: dt.datetime) -> None:
        if tx.begun or not self.settings.provide_transaction_metadata:
            return
        # BEGIN sorts before every change of its transaction: LSN 0 at the commit key.
        self._emit_begin(builder, tx, _position(tx.commit_lsn, Phase.STREAM, 0, 0), now)

    def _commit(self, builder: BatchBuilder, message: Commit, now: dt.datetime) -> None:
        tx = self._tx
        if tx is None:
            raise CaptureError(f"source {self.name}: Commit without Begin")
        if tx.begun:
            # END sorts after every change: no change of the transaction is at its commit LSN.
            position = _position(tx.commit_lsn, Phase.STREAM, message.commit_lsn, 0)
            self._emit_end(builder, tx, position, now)
            self._last_position = position
        self._tx = None
        self._cut = None
        self._resume_lsn = message.end_lsn
        self._last_commit = message.commit_lsn

    def _relation(self, message: Relation) -> None:
        schema = message.namespace or "pg_catalog"
        if not self.settings.table_filter.table(schema, message.name):
            self._relations[message.relation_id] = None
            return
        self._relations[message.relation_id] = self._table_schema(
            self._side(), schema, message.name, message
        )

    def _source(self, tx: _Tx, table: TableSchema | None, lsn: int) -> dict[str, Any]:
        s = self.settings
        last = self._last_commit
        return {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": s.server_name,
            "ts_ms": tx.ts_ms,
            "snapshot": "false",
            "db": s.dbname,
            # Debezium 2.x's ["<last commit LSN>","<LSN>"], as JSON text (LSNs are digits).
            "sequence": f'["{last}","{lsn}"]' if last is not None else f'[null,"{lsn}"]',
            "schema": None if table is None else table.schema,
            "table": None if table is None else table.table,
            "txId": tx.xid,
            "lsn": lsn,
            "xmin": None,
            "commit_lsn": tx.commit_lsn,
        }

    def _change_records(
        self, table: TableSchema, message: Insert | Update | Delete, lsn: int, tx: _Tx
    ) -> list[ConnectRecord]:
        s = self.settings
        skipped = s.skipped_operations
        meta = s.provide_transaction_metadata
        source = self._source(tx, table, lsn)
        if isinstance(message, Insert):
            if "c" in skipped:
                return []
            after, key = table.row_and_key(message.new)
            return [
                _data_record(
                    _OP_CREATE,
                    source,
                    None,
                    after,
                    key,
                    tx.block(table.collection, meta),
                    table,
                )
            ]
        if isinstance(message, Delete):
            if "d" in skipped:
                return []
            old_row = (
                table.row(message.old)
                if message.old_kind == "O"
                else table.identity_row(message.old)
            )
            key = table.key(message.old)
            return delete_records(
                source,
                old_row,
                key,
                table,
                tx.block(table.collection, meta),
                tombstones=s.tombstones_on_delete,
            )
        new_values = message.new
        if message.old_kind == "O" and message.old is not None:
            # REPLICA IDENTITY FULL logs the whole old row, so an unchanged TOAST value the new
            # tuple leaves out ('u') is known: take it instead of the placeholder.
            old_values = message.old
            new_values = tuple(
                old_values[i] if v is UNCHANGED_TOAST else v for i, v in enumerate(new_values)
            )
        after, new_key = table.row_and_key(new_values)
        old_key = new_key
        before: dict[str, Any] | None
        if message.old is not None:
            old_key = table.key(message.old)
            before = (
                table.row(message.old)
                if message.old_kind == "O"
                else table.identity_row(message.old)
            )
        elif table.replica_identity in ("d", "i"):
            before = table.key_only_row(new_key)
        else:
            before = None
        return update_records(
            source,
            before,
            after,
            old_key,
            new_key,
            table,
            tx,
            metadata=meta,
            tombstones=s.tombstones_on_delete,
            skipped=skipped,
        )

    def _truncate(
        self, builder: BatchBuilder, message: Truncate, lsn: int, raw: bytes, now: dt.datetime
    ) -> None:
        tx = self._tx
        assert tx is not None
        s = self.settings
        for relid in message.relation_ids:
            table = self._relations.get(relid)
            if table is None or "t" in self.settings.skipped_operations:
                continue
            self._begin_if_needed(builder, tx, now)
            position = self._position(tx, lsn)
            record = truncate_record(
                self._source(tx, table, lsn),
                transaction=tx.block(table.collection, s.provide_transaction_metadata),
                value_schema=table.envelope_schema,
                topic=table.topic,
            )
            if tx.count():
                self._add(builder, record, position, f"pg:{format_pg_lsn(lsn)}", now, tx, table)
            tx.note_data(table.collection)
            self._last_position = position

    def _logical_message(
        self, builder: BatchBuilder, message: LogicalMessage, raw: bytes, now: dt.datetime
    ) -> None:
        tx = self._tx
        s = self.settings
        if pg_slot.is_marker(message):
            if tx is None:
                self._resume_lsn = max(self._resume_lsn, message.lsn)
            return  # the agent's own slot marker, not a change of the database
        if message.transactional and tx is not None:
            position = self._position(tx, message.lsn)
            source = self._source(tx, None, message.lsn)
            if tx.count():
                record = message_record(message.prefix, message.content, source=source)
                self._add(
                    builder, record, position, f"pg:{format_pg_lsn(message.lsn)}", now, tx, None
                )
            self._last_position = position
            return
        # A non-transactional message is decoded at its own LSN, between transactions.
        lsn = message.lsn
        position = _position(lsn, Phase.STREAM, lsn, 0)
        source = {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": s.server_name,
            "ts_ms": int(time.time() * 1000),
            "snapshot": "false",
            "db": s.dbname,
            "sequence": None,
            "schema": None,
            "table": None,
            "txId": None,
            "lsn": lsn,
            "xmin": None,
            "commit_lsn": lsn,
        }
        if lsn >= self._resume_lsn:
            record = message_record(message.prefix, message.content, source=source)
            self._add(builder, record, position, f"pg:{format_pg_lsn(lsn)}", now, None, None)
            self._last_position = position
            if tx is None:
                self._resume_lsn = lsn

    # --- acknowledgement and shutdown ----------------------------------------------------------
    def acknowledge(self, offset: Mapping[str, Any]) -> None:
        """Confirm the offset's LSN to the slot: everything before it is durable in bronze."""
        if offset.get("phase") == "snapshot":
            return  # the slot stays at the snapshot point until streaming starts
        if offset.get("phase") == "done":
            self._drop_slot_after_initial_only()
            return
        lsn = parse_lsn(offset["lsn"])
        if lsn <= self._acked and self._stream is not None:
            return
        self._acked = max(self._acked, lsn)
        try:
            self._send_status(reply=False)
        except SourceUnavailable as exc:
            # Sent again after the reconnect, and again at the next start.
            logger.warning("source %s: acknowledgement not sent: %s", self.name, exc)

    def _stop_streaming(self) -> None:
        if self._stream is not None:
            self._stream.stop(self._acked)

    def close(self) -> None:
        """Close the connections (and drop the slot with ``slot.drop.on.stop``)."""
        drop = self.settings.slot_drop_on_stop
        self._stop_streaming()
        self._close_connections()
        if drop:
            try:
                with self._connect() as conn:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (self.settings.slot_name,))
                logger.warning(
                    "source %s: dropped slot %s (slot.drop.on.stop)",
                    self.name,
                    self.settings.slot_name,
                )
            except (psycopg.Error, SourceUnavailable) as exc:
                logger.warning("source %s: could not drop slot: %s", self.name, exc)

    def read_current(
        self, *, fetch_size: int | None = None
    ) -> Iterator[tuple[int, TableSchema, list[dict[str, Any] | None]]]:
        """Every captured table's current rows, converted exactly as the snapshot converts them.

        For reconciliation (:mod:`gold.reconcile`): one ``REPEATABLE READ, READ ONLY``
        transaction on a connection of its own, so all tables are read at one instant; each
        table is read in key order (``ctid`` for keyless tables) through a server-side cursor,
        ``fetch_size`` rows at a time, and each row goes through the table's
        :class:`TableSchema` (type handling modes, column filters, masks and hashes) into the
        ``after`` payload the agent would land. No slot or publication is touched.

        Args:
            fetch_size: Rows per ``FETCH`` (default ``snapshot.fetch.size``).

        Yields:
            ``(wal_lsn, table, rows)``: ``wal_lsn`` is ``pg_current_wal_lsn()`` taken in the
            transaction's first statement (the same value in every item); each table is
            announced by an item with no rows, then its rows follow in chunks. A row whose
            value the agent could not convert (it would have been quarantined) is None.

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        size = int(fetch_size or self.settings.snapshot_fetch_size)
        conn = self._connect()
        try:
            conn.autocommit = False
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            # The snapshot is taken by this first statement, so the LSN is where it stands.
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            assert row is not None
            lsn = parse_lsn(row[0])
            for schema, table in self._captured_tables(conn):
                ts = self._table_schema(conn, schema, table, track=False)
                if ts is None:
                    continue
                yield lsn, ts, []
                width = len(ts.names)  # a keyless table's rows end with their ctid
                for chunk in _keyed_chunks(conn, ts, "medallion_reconcile", size):
                    out: list[dict[str, Any] | None] = []
                    for values in chunk:
                        try:
                            out.append(ts.row_and_key(list(values[:width]))[0])
                        except (ValueConversionError, PipelineError) as exc:
                            logger.warning(
                                "source %s: %s: a row the agent would quarantine: %s",
                                self.name,
                                ts.collection,
                                exc,
                            )
                            out.append(None)
                    if out:
                        yield lsn, ts, out
            conn.rollback()
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise SourceUnavailable(f"source {self.name}: {str(exc).strip()}") from None
        finally:
            conn.close()
            # Type lookups opened the side connection; _side() reopens it when needed again.
            # (Not close(): with slot.drop.on.stop that would drop the agent's slot.)
            if self._sql is not None:
                self._sql.close()
                self._sql = None

    @property
    def log_name(self) -> str:
        """The replication slot's name."""
        return self.settings.slot_name

    def log_status(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """The slot: whether a consumer is connected, the WAL written since its confirmed flush
        LSN (``slot_lag_bytes``: not yet acknowledged, i.e. not yet in bronze), since its restart
        LSN (``retained_wal_bytes``: what the server keeps on disk for it) and what may still be
        written before ``max_slot_wal_keep_size`` invalidates it (``retention_headroom_bytes``;
        None: unlimited). A missing or invalidated slot is reported in ``slot_error``."""
        row: dict[str, Any] = {"slot": self.settings.slot_name}
        lag = self.slot_lag()
        if lag is None:
            row["slot_error"] = f"replication slot {row['slot']} does not exist"
            return row
        row["slot_active"] = lag["active"]
        row["slot_lag_bytes"] = lag["lag_bytes"]
        row["retained_wal_bytes"] = lag["retained_wal_bytes"]
        row["retention_headroom_bytes"] = lag.get("safe_wal_bytes")
        if lag["wal_status"] == "lost":
            row["slot_error"] = f"replication slot {row['slot']} is invalidated (wal_status lost)"
        return row

    def slot_lag(self) -> dict[str, Any] | None:
        """The slot's state and retained WAL for ``medallion status`` (see
        :func:`capture.postgresql.slot.slot_lag`), on a short-lived connection of its own; None
        when the slot does not exist.

        Raises:
            SourceUnavailable: The server cannot be reached.
            CaptureError: The query failed (e.g. the user may not read ``pg_replication_slots``).
        """
        with self._connect() as conn:
            try:
                return pg_slot.slot_lag(conn, self.settings.slot_name)
            except psycopg.Error as exc:
                raise CaptureError(
                    f"source {self.name}: cannot read slot {self.settings.slot_name}: "
                    f"{str(exc).strip()}"
                ) from None


def landed_columns(schemas: Path, source: str) -> dict[str, frozenset[str]]:
    """``schema.table`` -> the ``after`` columns of the envelope schema ``source`` registered
    last for it in ``bronze/schemas`` (empty when there is none yet)."""
    try:
        table = DeltaTable(str(schemas)).to_pyarrow_table(
            columns=[S.SCHEMA_NAME, S.SCHEMA_JSON, S.SOURCE, S.FIRST_SEEN_TS]
        )
    except TableNotFoundError:
        return {}
    latest: dict[str, tuple[Any, str]] = {}
    for row in table.to_pylist():
        name = row[S.SCHEMA_NAME] or ""
        if row[S.SOURCE] != source or not name.endswith(".Envelope"):
            continue
        seen = latest.get(name)
        if seen is None or row[S.FIRST_SEEN_TS] >= seen[0]:
            latest[name] = (row[S.FIRST_SEEN_TS], row[S.SCHEMA_JSON])
    out: dict[str, frozenset[str]] = {}
    for name, (_, text) in latest.items():
        fields = orjson.loads(text).get("fields", [])
        after = next((f for f in fields if f.get("field") == "after"), None)
        # <topic prefix>.<schema>.<table>.Envelope; the prefix may hold dots, names rarely do
        parts = name[: -len(".Envelope")].split(".")
        if after is not None and len(parts) >= 3:
            out[f"{parts[-2]}.{parts[-1]}"] = frozenset(f["field"] for f in after["fields"])
    return out


def _keyed_chunks(
    conn: psycopg.Connection[Any],
    ts: TableSchema,
    cursor: str,
    size: int,
    *,
    after: Sequence[Any] | None = None,
) -> Iterator[list[tuple[Any, ...]]]:
    """A table's rows in key order (``ctid`` for a keyless table), ``size`` at a time, through
    a server-side cursor; rows after ``after`` (a key, or a ctid with the ctid column last)
    only. Each row is the text its output function writes (what pgoutput sends); a keyless
    table's rows carry their ctid last."""
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in ts.names)
    keyed = ts.has_key
    order = (
        sql.SQL(", ").join(sql.Identifier(ts.names[i]) for i in ts.key_idx)
        if keyed
        else sql.SQL("ctid")
    )
    select_cols = cols if keyed else sql.SQL("{}, ctid").format(cols)
    query = sql.SQL("DECLARE {} NO SCROLL CURSOR FOR SELECT {} FROM {}").format(
        sql.Identifier(cursor), select_cols, sql.Identifier(ts.schema, ts.table)
    )
    params: list[Any] = []
    if after is not None:
        if keyed:
            marks = sql.SQL(", ").join(sql.Placeholder() for _ in ts.key_idx)
            query = sql.SQL("{} WHERE ({}) > ({})").format(query, order, marks)
        else:
            query = sql.SQL("{} WHERE ctid > {}::tid").format(query, sql.Placeholder())
        params = list(after)
    conn.execute(sql.SQL("{} ORDER BY {}").format(query, order), params)
    # psycopg's text loader in C, for every column: unregistered OIDs (domains) load as text.
    cur = conn.cursor()
    for oid in {0, _TID_OID, *(c.type_oid for c in ts.columns)}:
        cur.adapters.register_loader(oid, TextLoader)
    fetch = sql.SQL("FETCH {} FROM {}").format(sql.Literal(size), sql.Identifier(cursor))
    while True:
        cur.execute(fetch)
        chunk = cur.fetchall()
        yield chunk
        if len(chunk) < size:
            break
    cur.close()
    conn.execute(sql.SQL("CLOSE {}").format(sql.Identifier(cursor)))


_MISSING_TABLE: Any = object()
# Op members' .value goes through the enum descriptor on every access; the hot path uses this.
_OP_CREATE = Op.CREATE.value

_data_record = data_record

# The frozen dataclass constructor validates every component; the agent builds them from LSNs
# it decoded itself, so it takes the unchecked constructor the landing path uses.
_position = PostgresPosition._new
