"""The MySQL / MariaDB capture agent: a consistent snapshot, then the ROW binlog.

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

import datetime as dt
import logging
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import partial
from pathlib import Path
from typing import Any, ClassVar

import orjson

from bronze.batch import BatchBuilder
from bronze.envelope import (
    ConnectRecord,
    Op,
    heartbeat,
    schema_change,
    truncate_record,
)
from bronze.positions import MySqlPosition, Phase
from capture.base import SourceBatch
from capture.captured_table import CapturedTable, CatalogColumn, KeyOverrides, TableFilter
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
from capture.mysql.ddl import DdlParseError, SchemaChange, SchemaState, statement_kind
from capture.mysql.history import HistoryEntry, SchemaHistory
from capture.mysql.schema import TableDef
from capture.mysql.server import (
    BinlogPoint,
    ServerDialect,
    binlog_files,
    check_server,
    current_point,
    merge_gtid,
    snapshot_point,
)
from capture.mysql.types import (
    SNAPSHOT_SESSION_SQL,
    MySqlHandling,
    column_default,
    column_type,
    snapshot_connect_kwargs,
    snapshot_values,
    stream_values,
)
from capture.postgresql.types import ColumnType, ValueConversionError
from pipeline.errors import CaptureError, NotInstalledError, PipelineError, SourceUnavailable
from pipeline.sql import qualified, quote_identifier

try:
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.event import (
        GtidEvent,
        MariadbAnnotateRowsEvent,
        MariadbGtidEvent,
        QueryEvent,
        RotateEvent,
        RowsQueryLogEvent,
        XidEvent,
    )
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
except ImportError as exc:  # pragma: no cover - the registry reports it
    raise NotInstalledError(
        "the mysql capture agent needs PyMySQL and mysql-replication: pip install '.[mysql]'"
    ) from exc

__all__ = ["MySqlSource", "MySqlSettings", "MySqlTable", "OFFSET_FORMAT", "keyed_chunks"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""
CONNECTOR = "mysql"
SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
"""Never captured, whatever the include lists say."""
SNAPSHOT_FETCH_SIZE = 10_240
"""Rows per snapshot query (Debezium's ``snapshot.fetch.size``)."""
_SNAPSHOT_MODES = ("initial", "when_needed", "never", "schema_only", "schema_only_recovery")
_LOCKING_MODES = ("minimal", "extended", "none")
_EVENTS = [
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
    RotateEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
    MariadbAnnotateRowsEvent,
    RowsQueryLogEvent,
]
_OP_CREATE = Op.CREATE.value
_CONNECTION_LOST = (2003, 2006, 2013)
"""Client errors: cannot connect, server gone away, lost connection (retried, not refused)."""
_position = MySqlPosition._new


def default_server_id(name: str) -> int:
    """A replica server id in Debezium's 5400-6400 range, stable for a source name.

    Debezium picks a random one when ``database.server.id`` is unset; a stable one means two
    runs of the same source never hold two ids, and two sources rarely collide (set it
    explicitly in production: a collision disconnects the other replica).
    """
    return 5400 + zlib.crc32(name.encode("utf-8")) % 1001


# --- settings ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MySqlSettings:
    """Everything the agent needs from a ``mysql`` source config (tests may build it directly).

    ``password`` is the config's ``SecretStr`` and is revealed only when connecting.
    """

    host: str
    port: int
    user: str
    password: Any = None
    server_name: str = "mysql"
    server_id: int = 5400
    snapshot_mode: str = "initial"
    snapshot_locking_mode: str = "minimal"
    table_filter: TableFilter = field(default_factory=lambda: TableFilter(system=SYSTEM_DATABASES))
    key_overrides: KeyOverrides = field(default_factory=KeyOverrides)
    handling: MySqlHandling = field(default_factory=MySqlHandling)
    masker: ColumnMasker | None = None
    tombstones_on_delete: bool = True
    provide_transaction_metadata: bool = False
    skipped_operations: frozenset[str] = frozenset({"t"})
    heartbeat_interval_ms: int = 0
    heartbeat_action_query: str | None = None
    include_schema_changes: bool = True
    include_query: bool = False
    connect_timeout_s: float = 30.0
    snapshot_fetch_size: int = SNAPSHOT_FETCH_SIZE

    @classmethod
    def from_config(cls, config: Any) -> MySqlSettings:
        """Read a validated :class:`pipeline.config.MySqlSourceConfig`."""
        server_id = config.database_server_id
        return cls(
            host=str(config.database_hostname),
            port=int(config.database_port),
            user=str(config.database_user),
            password=config.database_password,
            server_name=str(config.logical_name),
            server_id=int(server_id) if server_id else default_server_id(config.name),
            snapshot_mode=str(config.snapshot_mode),
            snapshot_locking_mode=str(config.snapshot_locking_mode),
            table_filter=TableFilter.from_config(config, SYSTEM_DATABASES),
            key_overrides=KeyOverrides.parse(config.message_key_columns),
            handling=MySqlHandling.from_config(config),
            masker=ColumnMasker.from_source(config),
            tombstones_on_delete=bool(config.tombstones_on_delete),
            provide_transaction_metadata=bool(config.provide_transaction_metadata),
            skipped_operations=frozenset(str(op) for op in config.skipped_operations),
            heartbeat_interval_ms=int(config.heartbeat_interval_ms),
            heartbeat_action_query=config.heartbeat_action_query,
            include_schema_changes=bool(config.include_schema_changes),
            include_query=bool(config.include_query),
            connect_timeout_s=int(config.connect_timeout_ms) / 1000,
        )

    def connection(self) -> dict[str, Any]:
        """PyMySQL connection arguments (the password revealed here only)."""
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": "" if self.password is None else self.password.get_secret_value(),
            "connect_timeout": max(1, int(self.connect_timeout_s)),
            "charset": "utf8mb4",
        }
        return kwargs

    def __repr__(self) -> str:
        return (
            f"MySqlSettings(host={self.host!r}, port={self.port}, user={self.user!r}, "
            f"password={'***' if self.password else None}, server_id={self.server_id})"
        )


# --- the agent ---------------------------------------------------------------------------------


@dataclass(slots=True)
class _Tx(OpenTransaction):
    """A binlog transaction group being read."""

    start: tuple[str, int] = ("", 0)
    """File and position of its first event (GTID or BEGIN): where a restart re-reads it."""
    gtid: str | None = None
    thread: int | None = None
    query: str | None = None


@dataclass(slots=True)
class _Snapshot:
    """Progress of a snapshot (saved in the offset)."""

    point: BinlogPoint
    tables: list[tuple[str, str]]
    index: int = 0
    after: list[Any] | None = None
    seq: int = 0
    ts_ms: int = 0


def _encode_key(values: Sequence[Any]) -> list[Any]:
    """Key values -> JSON (tagged where JSON has no type), so a resume can bind them again."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, Decimal):
            out.append({"decimal": str(v)})
        elif isinstance(v, dt.datetime | dt.date | dt.time):
            out.append({"temporal": v.isoformat()})
        elif isinstance(v, dt.timedelta):
            out.append({"seconds": v.total_seconds()})
        elif isinstance(v, bytes | bytearray):
            out.append({"hex": bytes(v).hex()})
        else:
            out.append(v)
    return out


def _decode_key(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, dict):
            if "decimal" in v:
                out.append(Decimal(v["decimal"]))
            elif "hex" in v:
                out.append(bytes.fromhex(v["hex"]))
            elif "seconds" in v:
                out.append(dt.timedelta(seconds=v["seconds"]))
            else:
                out.append(v["temporal"])  # MySQL compares ISO text with temporal columns
        else:
            out.append(v)
    return out


class MySqlTable(CapturedTable):
    """A captured table with the definition (from the schema history) it was built from."""

    def __init__(self, definition: TableDef, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.definition = definition


class MySqlSource(DatabaseSource):
    """Captures a MySQL or MariaDB server through its ROW binlog.

    Args:
        name: The configured source name.
        settings: Connection, filters, snapshot and value handling.
    """

    KIND: ClassVar[str] = "mysql"
    ACKNOWLEDGES: ClassVar[bool] = False
    """The binlog keeps nothing per reader: bronze's committed offset is the only position."""
    REPLAYABLE: ClassVar[bool] = True
    REPORTS_LOG: ClassVar[bool] = True
    OUTAGES: ClassVar[tuple[type[BaseException], ...]] = (
        pymysql.err.OperationalError,
        pymysql.err.InterfaceError,
        ConnectionError,
    )
    ORIGIN: ClassVar[str] = "mysql"
    PAUSE_GC: ClassVar[bool] = False
    """mysql-replication's events hold reference cycles: with the collector paused for a batch,
    a 20,000-event batch held 540 MiB."""

    def __init__(self, name: str, settings: MySqlSettings) -> None:
        super().__init__(name)
        if settings.snapshot_mode not in _SNAPSHOT_MODES:
            raise CaptureError(f"source {name}: unknown snapshot.mode {settings.snapshot_mode!r}")
        if settings.snapshot_locking_mode not in _LOCKING_MODES:
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
        self._stream: Any = None
        self._dialect: ServerDialect | None = None
        self._phase = "stream"
        self._snapshot: _Snapshot | None = None
        self._resume: BinlogPoint | None = None
        self._gtids: str | None = None
        self._cut: tuple[str, int, int] | None = None
        self._tx: _Tx | None = None
        self._last_position: MySqlPosition | None = None
        self._server_id: int | None = None
        self._file = ""
        self._pending_history: list[HistoryEntry] = []
        self._snap_iter: Iterator[tuple[int, MySqlTable, list[Any], list[Any], bool]] | None = None
        self._stream_at = 0
        self._query_warned = False

    @classmethod
    def from_config(cls, config: Any) -> MySqlSource:
        """Build from a validated ``mysql`` source config."""
        return cls(config.name, MySqlSettings.from_config(config))

    def bind_lake(self, bronze_root: Path) -> None:
        """Keep the schema history in ``<bronze_root>/schema_history``."""
        self._history = SchemaHistory(Path(bronze_root) / "schema_history", self.name)

    # --- connections ---------------------------------------------------------------------------
    def _connect(self, **extra: Any) -> Any:
        s = self.settings
        try:
            return pymysql.connect(**{**s.connection(), "autocommit": True, **extra})
        except pymysql.err.OperationalError as exc:
            raise SourceUnavailable(
                f"source {self.name}: cannot connect to MySQL {s.host}:{s.port}: {exc.args[-1]}"
            ) from None

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
        for conn in (self._snap_conn, self._conn):
            if conn is not None:
                try:
                    conn.close()
                except Exception:  # noqa: BLE001 - already closed by the server
                    pass
        self._snap_conn = self._conn = None
        self._snap_iter = None  # it reads through the snapshot connection just closed

    # --- open ----------------------------------------------------------------------------------
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
            else _Snapshot(
                BinlogPoint(str(snap["file"]), int(snap["pos"]), snap.get("gtids")),
                [(a, b) for a, b in snap["tables"]],
                int(snap["index"]),
                snap.get("after"),
                int(snap["seq"]),
                int(snap.get("ts_ms", 0)),
            )
        )

    def _offset_now(self) -> dict[str, Any]:
        snap = self._snapshot
        resume = self._resume
        assert resume is not None
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
            "snapshot": None
            if snap is None or self._phase != "snapshot"
            else {
                "file": snap.point.file,
                "pos": snap.point.pos,
                "gtids": snap.point.gtids,
                "tables": [list(t) for t in snap.tables],
                "index": snap.index,
                "after": snap.after,
                "seq": snap.seq,
                "ts_ms": snap.ts_ms,
            },
        }

    # --- schema history ------------------------------------------------------------------------
    def _replay_history(self) -> None:
        """Rebuild the table definitions from the history entries below the resume point."""
        assert self._history is not None and self._resume is not None
        limit = _position(
            self._resume.file_number, self._resume.pos, Phase.STREAM, 0, 0, None, None
        )
        state = SchemaState()
        for entry in self._history.before(limit):
            if entry.kind == "reset":
                state = SchemaState()
            elif entry.ddl:
                try:
                    state.apply(entry.ddl, entry.database, entry.ts_ms)
                except DdlParseError as exc:
                    raise CaptureError(
                        f"source {self.name}: schema history entry at "
                        f"{entry.position.to_json()} no longer parses: {exc}"
                    ) from None
        self._schema = state
        self._tables.clear()

    def _record_history(self, entries: list[HistoryEntry]) -> None:
        # Written before the batch is committed: the replay ignores entries beyond bronze's
        # offset, and a re-read writes nothing twice (deduplicated by position).
        assert self._history is not None
        self._history.append(entries)

    def _recover_schema(self) -> None:
        """``schema_only_recovery``: rebuild the history from the tables as they are now, at the
        offset (unsafe if DDL ran since the offset, as Debezium warns)."""
        assert self._resume is not None
        logger.warning(
            "source %s: schema_only_recovery: recording the current table definitions at %s:%d",
            self.name,
            self._resume.file,
            self._resume.pos,
        )
        ddls = self._read_schemas(self._side())
        point = _position(
            self._resume.file_number,
            self._resume.pos,
            Phase.SNAPSHOT,
            0,
            0,
            self._resume.file,
            None,
        )
        self._record_history(self._snapshot_entries(point, ddls, int(time.time() * 1000)))

    def _read_schemas(self, conn: Any) -> list[tuple[str, str, str]]:
        """``(database, table, SHOW CREATE TABLE)`` of every captured base table."""
        out = []
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            databases = [str(r[0]) for r in cur.fetchall()]
            for db in databases:
                if db in SYSTEM_DATABASES:
                    continue
                cur.execute(
                    f"SHOW FULL TABLES FROM {quote_identifier(db)} WHERE Table_type = 'BASE TABLE'"
                )
                for table, _kind in cur.fetchall():
                    if not self.settings.table_filter.table(db, str(table)):
                        continue
                    cur.execute(f"SHOW CREATE TABLE {qualified(db, str(table))}")
                    out.append((db, str(table), str(cur.fetchone()[1])))
        return out

    def _snapshot_entries(
        self, point: MySqlPosition, ddls: list[tuple[str, str, str]], ts_ms: int
    ) -> list[HistoryEntry]:
        entries = [HistoryEntry(point, "reset", None, None, None, ts_ms)]
        entries += [HistoryEntry(point, "snapshot", db, ddl, None, ts_ms) for db, _t, ddl in ddls]
        return entries

    def _captured(self, db: str, table: str) -> MySqlTable | PipelineError | None:
        """The captured table (None: not captured; an error: its rows must be quarantined)."""
        key = (db, table)
        if key in self._tables:
            return self._tables[key]
        result: MySqlTable | PipelineError | None
        if not self.settings.table_filter.table(db, table):
            result = None
        else:
            definition = self._schema.table(db, table)
            if definition is None:
                result = CaptureError(
                    f"table {db}.{table} is not in the schema history (created before the "
                    "binlog the agent read, or by DDL it could not see)"
                )
            else:
                try:
                    result = self._build_table(definition)
                except PipelineError as exc:
                    result = exc
        self._tables[key] = result
        return result

    def _build_table(self, definition: TableDef) -> MySqlTable:
        s = self.settings
        keys = {k.lower() for k in definition.key_columns()}
        columns = [
            CatalogColumn(
                c.name, 0, -1, not_null=not c.nullable, in_primary_key=c.name.lower() in keys
            )
            for c in definition.columns
        ]
        types: list[ColumnType] = [
            column_type(c, definition.charset, s.handling) for c in definition.columns
        ]
        defaults = [
            column_default(c, t, definition.charset)
            for c, t in zip(definition.columns, types, strict=True)
        ]
        return MySqlTable(
            definition,
            s.server_name,
            definition.database,
            definition.name,
            columns,
            types,
            connector=CONNECTOR,
            column_filter=s.table_filter,
            key_overrides=s.key_overrides,
            masker=s.masker,
            with_transaction=s.provide_transaction_metadata,
            origin_prefix=self.ORIGIN,
            defaults=defaults,
        )

    # --- snapshot ------------------------------------------------------------------------------
    def _start_snapshot(self, *, with_data: bool) -> None:
        s = self.settings
        conn = self._connect(**snapshot_connect_kwargs())
        lock = s.snapshot_locking_mode
        dialect = self._dialect
        assert dialect is not None
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            if lock != "none":
                try:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
                except pymysql.err.MySQLError as exc:
                    conn.close()
                    if exc.args and exc.args[0] in _CONNECTION_LOST:
                        raise
                    raise CaptureError(
                        f"source {self.name}: FLUSH TABLES WITH READ LOCK failed "
                        f"({exc.args[-1]}): grant RELOAD to {s.user}, or set "
                        "snapshot.locking.mode=none if no DDL runs during the snapshot"
                    ) from None
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            point = snapshot_point(conn, dialect)
            ddls = self._read_schemas(conn)
            if lock == "minimal":
                cur.execute("UNLOCK TABLES")
        ts_ms = int(time.time() * 1000)
        self._server_id = dialect.server_id
        marker = _position(point.file_number, point.pos, Phase.SNAPSHOT, 0, 0, point.file, None)
        self._record_history(self._snapshot_entries(marker, ddls, ts_ms))
        self._resume = point
        self._gtids = point.gtids
        self._cut = None
        self._replay_history()
        tables = [(db, t) for db, t, _ in ddls] if with_data else []
        self._snapshot = _Snapshot(point, tables, ts_ms=ts_ms)
        self._phase = "snapshot"
        self._snap_conn = conn
        logger.info(
            "source %s: snapshot of %d table(s) at %s:%d (locking %s)",
            self.name,
            len(tables),
            point.file,
            point.pos,
            lock,
        )

    def _resume_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise CaptureError(f"source {self.name}: offset in phase snapshot has no progress")
        logger.warning(
            "source %s: resuming the snapshot at table %d of %d in a fresh transaction; the "
            "binlog from %s:%d corrects rows changed since",
            self.name,
            snap.index + 1,
            len(snap.tables),
            snap.point.file,
            snap.point.pos,
        )
        conn = self._connect(**snapshot_connect_kwargs())
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        self._snap_conn = conn

    def _snapshot_rows(self) -> Iterator[tuple[int, MySqlTable, list[Any], list[Any]]]:
        """``(table index, table, values, key)`` of the remaining rows, in key order."""
        snap, conn = self._snapshot, self._snap_conn
        assert snap is not None and conn is not None
        size = int(self.settings.snapshot_fetch_size)
        index, after = snap.index, snap.after
        while index < len(snap.tables):
            table = self._captured(*snap.tables[index])
            if isinstance(table, MySqlTable):
                bound = None if after is None else _decode_key(after)
                for chunk in keyed_chunks(conn, table, size, after=bound):
                    for row, key in chunk:
                        yield index, table, row, key
            index, after = index + 1, None

    def _read_snapshot(self, builder: BatchBuilder, max_events: int, now: dt.datetime) -> bool:
        """Add up to ``max_events`` snapshot rows; True when the snapshot is complete."""
        snap = self._snapshot
        assert snap is not None
        if self._snap_conn is None:
            self._resume_snapshot()
        s = self.settings
        count = 0
        sources: dict[tuple[str, bool], dict[str, Any]] = {}
        point = snap.point
        for table_index, table, row, key, last in self._snap_rows():
            source = sources.get((table.collection, last))
            if source is None:
                source = sources[(table.collection, last)] = {
                    "version": VERSION,
                    "connector": CONNECTOR,
                    "name": s.server_name,
                    "ts_ms": snap.ts_ms,
                    "snapshot": "last" if last else "true",
                    "db": table.schema,
                    "table": table.table,
                    "server_id": 0,
                    "gtid": None,
                    "file": point.file,
                    "pos": point.pos,
                    "row": 0,
                    "thread": None,
                    "query": None,
                }
            position = _position(
                point.file_number, point.pos, Phase.SNAPSHOT, 0, snap.seq, point.file, None
            )
            snap.seq += 1
            try:
                values = snapshot_values(table.definition, row)
            except ValueConversionError as exc:
                self._quarantine(builder, _raw(row), table.snapshot_origin, exc, now)
            else:
                self._snapshot_row(
                    builder, table, values, source, position, now, partial(_raw, row)
                )
            self._last_position = position
            snap.after = _encode_key(key)
            snap.index = table_index
            count += 1
            if last:
                break
            if count >= max_events:
                self._snapshot_progress(snap.seq, snap.index, len(snap.tables), table.collection)
                return False
        self._finish_snapshot()
        return True

    def _snap_rows(self) -> Iterator[tuple[int, MySqlTable, list[Any], list[Any], bool]]:
        if self._snap_iter is None:
            self._snap_iter = with_last(self._snapshot_rows())
        return self._snap_iter

    def _end_marker(self, builder: BatchBuilder, now: dt.datetime) -> None:
        snap = self._snapshot
        assert snap is not None
        point = snap.point
        position = _position(
            point.file_number, point.pos, Phase.SNAPSHOT, 0, snap.seq, point.file, None
        )
        snap.seq += 1
        origin = f"mysql:snapshot-end@{point.file}:{point.pos}"
        self._snapshot_marker(builder, position, origin, now)
        self._last_position = position

    def _finish_snapshot(self) -> None:
        snap = self._snapshot
        assert snap is not None
        if self._snap_conn is not None:
            try:
                with self._snap_conn.cursor() as cur:
                    cur.execute("COMMIT")
                    if self.settings.snapshot_locking_mode == "extended":
                        cur.execute("UNLOCK TABLES")
            finally:
                self._snap_conn.close()
                self._snap_conn = None
        self._snap_iter = None
        self._phase = "stream"
        self._resume = snap.point
        logger.info("source %s: snapshot complete (%d rows)", self.name, snap.seq)

    # --- streaming -----------------------------------------------------------------------------
    def _start_stream_at(self, point: BinlogPoint, *, reset_schema: bool) -> None:
        """``snapshot.mode=never``: stream from ``point`` with an empty schema history."""
        dialect = self._dialect
        assert dialect is not None
        self._server_id = dialect.server_id
        self._phase = "stream"
        self._resume = point
        self._cut = None
        if reset_schema:
            marker = _position(point.file_number, point.pos, Phase.SNAPSHOT, 0, 0, point.file, None)
            self._record_history([HistoryEntry(marker, "reset", None, None)])
        self._replay_history()

    def _open_stream(self) -> None:
        assert self._resume is not None
        s = self.settings
        start = self._resume
        if self._cut is not None:
            start = BinlogPoint(self._cut[0], self._cut[1], self._resume.gtids)
        self._stream = BinLogStreamReader(
            connection_settings=s.connection(),
            server_id=s.server_id,
            blocking=False,
            resume_stream=True,
            log_file=start.file,
            log_pos=start.pos,
            only_events=_EVENTS,
            annotate_rows_event=s.include_query,
            enable_logging=False,
        )
        self._file = start.file
        self._stream_at = start.pos
        if s.include_query and self._dialect is not None and self._dialect.mariadb:
            if not self._query_warned:
                self._query_warned = True
                logger.warning(
                    "source %s: include.query: MariaDB sends annotate-rows events only to "
                    "GTID-positioned readers and the agent reads by file and position, so "
                    "source.query stays null",
                    self.name,
                )

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
            return SourceBatch(builder, self._offset_now(), False)
        exhausted = False
        if self._stream is None:
            self._open_stream()
        stream = self._stream
        while True:
            tx = self._tx
            if until is not None and self._reached(until):
                break
            if tx is None and until is None and len(builder) >= max_events:
                break
            if (
                tx is not None
                and until is None
                and len(builder) >= max_events
                and tx.in_batch >= max_transaction_events
            ):
                builder.mark_partial(tx.id)
                self._cut = (tx.start[0], tx.start[1], tx.emitted)
                break
            event = stream.fetchone()
            if event is None:
                # Non-blocking dump: the server sent everything it had.
                self._close_stream()
                if self._tx is not None:
                    raise SourceUnavailable(
                        f"source {self.name}: the binlog ended inside a transaction at "
                        f"{self._file}:{self._stream_at}"
                    )
                if until is None:
                    self._maybe_heartbeat(builder, now)
                exhausted = True
                break
            self._handle(builder, event, now)
        if self._history is not None and self._pending_history:
            self._record_history(self._pending_history)
            self._pending_history = []
        return SourceBatch(builder, self._offset_now(), exhausted)

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _reached(self, until: Mapping[str, Any]) -> bool:
        cut = until.get("tx")
        tx = self._tx
        if cut is not None:
            if tx is not None and tx.start == (str(cut["file"]), int(cut["pos"])):
                return tx.emitted >= int(cut["emitted"])
            resume = self._resume
            assert resume is not None
            return resume.key() > BinlogPoint(str(cut["file"]), int(cut["pos"])).key()
        target = BinlogPoint(str(until["file"]), int(until["pos"]))
        resume = self._resume
        assert resume is not None
        return tx is None and resume.key() >= target.key()

    def _run_action_query(self, sql: str) -> None:
        with self._side().cursor() as cur:
            cur.execute(sql)

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        s = self.settings
        if self._tx is not None or self._resume is None:
            return
        if not self._heartbeat_due(s.heartbeat_interval_ms, s.heartbeat_action_query):
            return
        resume = self._resume
        # Every event before the resume point was read; a heartbeat just below it lets the
        # committed offset move past changes of tables that are not captured.
        position = _position(
            resume.file_number, resume.pos - 1, Phase.STREAM, 0, 0, resume.file, None
        )
        last = self._last_position
        if last is not None and last.encode() >= position.encode():
            return
        self._last_heartbeat = time.monotonic()
        record = heartbeat(s.server_name, int(time.time() * 1000))
        self._add(
            builder,
            record,
            position,
            f"mysql:heartbeat@{resume.file}:{resume.pos}",
            now,
            None,
            None,
        )
        self._last_position = position

    # --- events --------------------------------------------------------------------------------
    def _handle(self, builder: BatchBuilder, event: Any, now: dt.datetime) -> None:
        stream = self._stream
        end = int(event.packet.log_pos)
        start = end - int(event.packet.event_size)
        if isinstance(event, RotateEvent):
            self._file = str(event.next_binlog)
            if self._tx is None and self._resume is not None:
                self._resume = BinlogPoint(self._file, int(event.position), self._gtids)
            return
        if stream is not None and stream.log_file:
            self._file = str(stream.log_file)
        self._stream_at = end
        if isinstance(event, (MariadbGtidEvent, GtidEvent)):
            self._begin(event, start)
        elif isinstance(event, QueryEvent):
            self._query(builder, event, start, end, now)
        elif isinstance(event, XidEvent):
            self._commit(builder, start, end, now, event)
        elif isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
            self._rows(builder, event, start, now)
        elif isinstance(event, MariadbAnnotateRowsEvent | RowsQueryLogEvent):
            if self._tx is not None:
                raw = getattr(event, "sql_statement", None) or getattr(event, "query", None)
                self._tx.query = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw

    def _begin(self, event: Any, start: int) -> None:
        gtid = str(event.gtid)
        self._open_tx(start, gtid, int(event.timestamp) * 1000)

    def _open_tx(self, start: int, gtid: str | None, ts_ms: int) -> _Tx:
        skip = 0
        if self._cut is not None and (self._cut[0], self._cut[1]) == (self._file, start):
            skip = self._cut[2]
        tx = _Tx(
            id=gtid or f"{self._file}:{start}",
            ts_ms=ts_ms,
            skip=skip,
            start=(self._file, start),
            gtid=gtid,
        )
        self._tx = tx
        return tx

    def _query(
        self, builder: BatchBuilder, event: Any, start: int, end: int, now: dt.datetime
    ) -> None:
        sql = str(event.query)
        kind = statement_kind(sql)
        tx = self._tx
        if kind == "begin":
            if tx is None:  # MySQL without GTIDs: BEGIN opens the group
                tx = self._open_tx(start, None, int(event.timestamp) * 1000)
            tx.thread = int(event.slave_proxy_id)
            return
        if kind in ("commit", "rollback"):
            # A ROLLBACK in the binlog ends a group whose non-transactional changes happened.
            self._commit(builder, start, end, now, event)
            return
        if kind == "dml" and (tx is None or tx.count()):
            # A session with binlog_format=STATEMENT/MIXED wrote SQL instead of rows: the rows
            # it changed cannot be captured, which must not pass unnoticed.
            self._quarantine(
                builder,
                sql.encode("utf-8"),
                f"mysql:{self._file}:{start}",
                CaptureError(
                    "a statement-format change in the binlog (a session with binlog_format "
                    "STATEMENT or MIXED): its rows are not captured; set binlog_format=ROW "
                    f"for every session and re-snapshot the tables it changed: {sql[:200]}"
                ),
                now,
            )
        if kind in ("savepoint", "other", "dml"):
            if tx is None:
                self._advance(end)
            return
        self._ddl(builder, event, sql, start, end, now)

    def _ddl(
        self, builder: BatchBuilder, event: Any, sql: str, start: int, end: int, now: dt.datetime
    ) -> None:
        s = self.settings
        raw_db = event.schema
        database = (raw_db.decode("utf-8") if isinstance(raw_db, bytes) else str(raw_db)) or None
        tx = self._tx
        gtid = None if tx is None else tx.gtid
        ts_ms = int(event.timestamp) * 1000
        position = _position(self._file_number(), start, Phase.STREAM, 0, 0, self._file, gtid)
        try:
            changes = self._schema.apply(sql, database, ts_ms)
        except DdlParseError as exc:
            raise CaptureError(
                f"source {self.name}: cannot parse the DDL at {self._file}:{start}: {exc}"
            ) from None
        self._pending_history.append(HistoryEntry(position, "ddl", database, sql, gtid, ts_ms))
        for change in changes:
            self._tables.pop((change.database, change.table), None)
            if change.previous is not None:
                self._tables.pop(change.previous, None)
        seq = 0
        emit = self._tx_count_ddl()
        if s.include_schema_changes and emit:
            # DDL that changes no captured table (views, users, other databases) is kept in
            # the history only.
            captured = [c for c in changes if s.table_filter.table(c.database, c.table)]
            if captured:
                record = self._schema_change_record(
                    database or captured[0].database,
                    sql,
                    captured,
                    position,
                    gtid,
                    int(event.slave_proxy_id),
                    ts_ms,
                )
                self._add(
                    builder,
                    record,
                    position,
                    f"mysql:{self._file}:{start}",
                    now,
                    None,
                    None,
                )
                self._last_position = position
                seq = 1
        for change in changes:
            if change.kind == "TRUNCATE" and "t" not in s.skipped_operations:
                table = self._captured(change.database, change.table)
                if isinstance(table, MySqlTable):
                    pos = _position(
                        self._file_number(), start, Phase.STREAM, 0, seq, self._file, gtid
                    )
                    seq += 1
                    source = self._source(table, start, 0, gtid, ts_ms, int(event.slave_proxy_id))
                    record = truncate_record(
                        source, value_schema=table.envelope_schema, topic=table.topic
                    )
                    self._add(builder, record, pos, f"mysql:{self._file}:{start}", now, None, table)
                    self._last_position = pos
        # DDL commits implicitly: the group (GTID + statement) is complete.
        self._tx = None
        self._cut = None
        if gtid is not None:
            self._gtids = self._merge_gtid(gtid)
        self._advance(end)

    def _tx_count_ddl(self) -> bool:
        """Whether the DDL of the open group is new (not landed before a cut)."""
        tx = self._tx
        return True if tx is None else tx.count()

    def _schema_change_record(
        self,
        database: str,
        ddl: str,
        changes: list[SchemaChange],
        position: MySqlPosition,
        gtid: str | None,
        thread: int,
        ts_ms: int,
    ) -> ConnectRecord:
        s = self.settings
        source = {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": s.server_name,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": database,
            "table": changes[0].table if len(changes) == 1 else None,
            "server_id": self._server_id or 0,
            "gtid": gtid,
            "file": position.file,
            "pos": position.pos,
            "row": 0,
            "thread": thread,
            "query": None,
        }
        return schema_change(
            database,
            source,
            ddl=ddl,
            table_changes=[_table_change(c) for c in changes],
            ts_ms=int(time.time() * 1000),
            topic=s.server_name,
        )

    def _commit(
        self, builder: BatchBuilder, start: int, end: int, now: dt.datetime, event: Any
    ) -> None:
        tx = self._tx
        if tx is None:
            self._advance(end)
            return
        if tx.begun:
            position = _position(
                self._file_number(), start, Phase.STREAM, 0, 0, self._file, tx.gtid
            )
            self._emit_end(builder, tx, position, now)
            self._last_position = position
        self._tx = None
        self._cut = None
        if tx.gtid is not None:
            self._gtids = self._merge_gtid(tx.gtid)
        self._advance(end)

    def _advance(self, end: int) -> None:
        """Everything before ``end`` in the current file is read and complete."""
        self._resume = BinlogPoint(self._file, end, self._gtids)

    def _merge_gtid(self, gtid: str) -> str:
        mariadb = self._dialect is not None and self._dialect.mariadb
        return merge_gtid(self._gtids, gtid, mariadb=mariadb)

    def _file_number(self) -> int:
        return int(self._file.rsplit(".", 1)[-1])

    def _source(
        self,
        table: MySqlTable,
        pos: int,
        row: int,
        gtid: str | None,
        ts_ms: int,
        thread: int | None,
        query: str | None = None,
        server_id: int | None = None,
    ) -> dict[str, Any]:
        return {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": self.settings.server_name,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": table.schema,
            "table": table.table,
            "server_id": self._server_id if server_id is None else server_id,
            "gtid": gtid,
            "file": self._file,
            "pos": pos,
            "row": row,
            "thread": thread,
            "query": query if self.settings.include_query else None,
        }

    def _rows(self, builder: BatchBuilder, event: Any, start: int, now: dt.datetime) -> None:
        s = self.settings
        tx = self._tx
        if tx is None:  # a row event outside a group: only when the binlog starts mid-group
            tx = self._open_tx(start, None, int(event.timestamp) * 1000)
        db, name = str(event.schema), str(event.table)
        table = self._captured(db, name)
        if table is None:
            return
        origin = f"mysql:{self._file}:{start}"
        ts_ms = int(event.timestamp) * 1000
        file_number = self._file_number()
        if isinstance(table, PipelineError):
            for row_index, row in enumerate(event.rows):
                position = _position(
                    file_number, start, Phase.STREAM, row_index, 0, self._file, tx.gtid
                )
                if tx.count():
                    self._quarantine(builder, _raw(row), f"{origin}#{row_index}", table, now)
                self._last_position = position
            return
        definition = table.definition
        skipped = s.skipped_operations
        origin_server = int(event.packet.server_id)
        for row_index, row in enumerate(event.rows):
            source = self._source(
                table, start, row_index, tx.gtid, ts_ms, tx.thread, tx.query, origin_server
            )
            try:
                records = self._row_records(event, row, definition, table, source, tx, skipped)
            except (ValueConversionError, PipelineError) as exc:
                position = _position(
                    file_number, start, Phase.STREAM, row_index, 0, self._file, tx.gtid
                )
                if tx.count():
                    self._quarantine(builder, _raw(row), f"{origin}#{row_index}", exc, now)
                self._last_position = position
                continue
            for seq, record in enumerate(records):
                if record.value is not None and not tx.begun and s.provide_transaction_metadata:
                    self._begin_record(builder, tx, now)
                position = _position(
                    file_number, start, Phase.STREAM, row_index, seq, self._file, tx.gtid
                )
                if tx.count():
                    self._add(builder, record, position, f"{origin}#{row_index}", now, tx, table)
                if record.value is not None:
                    tx.note_data(table.collection)
                self._last_position = position

    def _begin_record(self, builder: BatchBuilder, tx: _Tx, now: dt.datetime) -> None:
        # BEGIN sorts before every change of its group: it takes the group's first position.
        file, start = tx.start
        position = _position(int(file.rsplit(".", 1)[-1]), start, Phase.STREAM, 0, 0, file, tx.gtid)
        self._emit_begin(builder, tx, position, now)

    def _row_records(
        self,
        event: Any,
        row: Mapping[str, Any],
        definition: TableDef,
        table: MySqlTable,
        source: dict[str, Any],
        tx: _Tx,
        skipped: frozenset[str],
    ) -> list[ConnectRecord]:
        s = self.settings
        meta = s.provide_transaction_metadata
        if isinstance(event, WriteRowsEvent):
            if "c" in skipped:
                return []
            values = stream_values(definition, row["values"], row.get("none_sources", {}))
            after, key = table.row_and_key(values)
            return [
                data_record(
                    _OP_CREATE, source, None, after, key, tx.block(table.collection, meta), table
                )
            ]
        if isinstance(event, DeleteRowsEvent):
            if "d" in skipped:
                return []
            values = stream_values(definition, row["values"], row.get("none_sources", {}))
            before, key = table.row_and_key(values)
            return delete_records(
                source,
                before,
                key,
                table,
                tx.block(table.collection, meta),
                tombstones=s.tombstones_on_delete,
            )
        old = stream_values(definition, row["before_values"], row.get("before_none_sources", {}))
        new = stream_values(definition, row["after_values"], row.get("after_none_sources", {}))
        before, old_key = table.row_and_key(old)
        after, new_key = table.row_and_key(new)
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

    # --- shutdown and status -------------------------------------------------------------------
    def read_current(
        self, *, fetch_size: int | None = None
    ) -> Iterator[tuple[BinlogPoint, MySqlTable, list[dict[str, Any] | None]]]:
        """Every captured table's current rows, converted exactly as the snapshot converts them
        (for :mod:`gold.reconcile`; see :func:`capture.mysql.current.read_current`)."""
        from capture.mysql.current import read_current

        return read_current(self, fetch_size=fetch_size)

    def close(self) -> None:
        """Close the connections."""
        self._close_connections()

    @property
    def log_name(self) -> str:
        """The binlog (its end is reported once connected)."""
        return "binlog"

    def log_status(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """The binlog behind this source: ``slot`` names the binlog end (``binlog <file>:<pos>``),
        ``slot_lag_bytes`` is the binlog written after bronze's offset, ``retained_wal_bytes``
        the binlog the server keeps; a purged offset is reported in ``slot_error``. Binlog
        expiry is by age (``binlog_expire_logs_seconds``), so there is no byte headroom."""
        lag = self.binlog_lag(offset)
        row: dict[str, Any] = {
            "slot": f"binlog {lag['file']}:{lag['pos']}",
            "slot_lag_bytes": lag["lag_bytes"],
            "retained_wal_bytes": lag["retained_bytes"],
        }
        if offset is not None and offset.get("file") and lag["lag_bytes"] is None:
            row["slot_error"] = (
                f"binlog file {offset['file']} of bronze's offset is no longer on the server "
                f"(oldest: {lag['oldest_file']})"
            )
        return row

    def binlog_lag(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """How far the server's binlog is ahead of ``offset`` (bronze's committed offset), for
        ``medallion status``: bytes of binlog after it, the binlog kept on the server, and the
        oldest file still there (what ``expire_logs`` will purge next).

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        conn = self._connect()
        try:
            dialect = ServerDialect.read(conn)
            files = binlog_files(conn)
            now = current_point(conn, dialect)
        finally:
            conn.close()
        total = sum(size for _f, size in files)
        behind = None
        if offset is not None and offset.get("file"):
            point = BinlogPoint(str(offset["file"]), int(offset["pos"]))
            if point.file in dict(files):
                behind = sum(
                    size for f, size in files if BinlogPoint(f, 0).file_number > point.file_number
                ) + (dict(files)[point.file] - point.pos)
        return {
            "file": now.file,
            "pos": now.pos,
            "gtids": now.gtids,
            "lag_bytes": behind,
            "retained_bytes": total,
            "oldest_file": files[0][0] if files else None,
        }


def keyed_chunks(
    conn: Any, table: MySqlTable, size: int, *, after: Sequence[Any] | None = None
) -> Iterator[list[tuple[list[Any], list[Any]]]]:
    """A table's rows in key order, ``size`` per query, as ``(row, key)`` pairs.

    ``row`` is the driver's tuple in the definition's column order (:func:`snapshot_values`
    makes it ready for :meth:`CapturedTable.row`, row by row, so that one value that does not
    convert costs only its row); ``key`` is what resumes after the row (``after``): its key
    values, or for a keyless table
    its ordinal (such a table has nothing to seek on, so the rows before are skipped by count,
    which is exact inside one consistent snapshot).
    """
    definition = table.definition
    cols = ", ".join(quote_identifier(c.name) for c in definition.columns)
    source = qualified(definition.database, definition.name)
    key_idx = list(table.key_idx)
    order = ", ".join(quote_identifier(table.names[i]) for i in key_idx)
    bound = None if after is None else list(after)
    while True:
        skipped = 0
        with conn.cursor() as cur:
            if not key_idx:
                skipped = 0 if bound is None else int(bound[0])
                cur.execute(f"SELECT {cols} FROM {source} LIMIT %s OFFSET %s", (size, skipped))
            elif bound is None:
                cur.execute(f"SELECT {cols} FROM {source} ORDER BY {order} LIMIT %s", (size,))
            else:
                marks = ", ".join(["%s"] * len(key_idx))
                cur.execute(
                    f"SELECT {cols} FROM {source} WHERE ({order}) > ({marks}) "
                    f"ORDER BY {order} LIMIT %s",
                    (*bound, size),
                )
            rows = cur.fetchall()
        yield [
            (row, [row[i] for i in key_idx] if key_idx else [skipped + n + 1])
            for n, row in enumerate(rows)
        ]
        if len(rows) < size:
            return
        bound = [rows[-1][i] for i in key_idx] if key_idx else [skipped + len(rows)]


def _table_change(change: SchemaChange) -> dict[str, Any]:
    """Debezium's ``tableChanges`` item (``id`` is ``"db"."table"``, ``old,new`` on a rename)."""
    table_id = f'"{change.database}"."{change.table}"'
    if change.previous is not None:
        table_id = f'"{change.previous[0]}"."{change.previous[1]}",{table_id}'
    definition = change.definition
    return {
        "type": change.kind,
        "id": table_id,
        "table": None
        if definition is None
        else {
            "defaultCharsetName": definition.charset,
            "primaryKeyColumnNames": list(definition.primary_key),
            "columns": [
                {
                    "name": c.name,
                    "typeName": c.type_name.upper(),
                    "length": c.length,
                    "scale": c.scale,
                    "position": i + 1,
                    "optional": c.nullable,
                    "autoIncremented": c.auto_increment,
                    "generated": c.generated,
                    "enumValues": list(c.values) if c.values else None,
                    "charsetName": c.charset,
                }
                for i, c in enumerate(definition.columns)
            ],
        },
    }


def _raw(values: Any) -> bytes:
    """What is kept of a row that could not be landed (for the quarantine)."""
    return orjson.dumps(values, default=str, option=orjson.OPT_NON_STR_KEYS)
