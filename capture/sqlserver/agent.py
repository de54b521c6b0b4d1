"""State, sessions and capture instances of the SQL Server agent: :class:`SqlServerAgent`.

The agent is one :class:`~capture.sqlserver.source.SqlServerSource`, composed of
:class:`~capture.sqlserver.snapshot.SnapshotReader`, :class:`~capture.sqlserver.stream.StreamReader`
and :class:`~capture.sqlserver.current.CurrentReader`, all on this base.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from capture.captured_table import CapturedTable, CatalogColumn
from capture.database_source import DatabaseSource, OpenTransaction, SnapshotProgress
from capture.errors_sqlserver import SQLSERVER
from capture.server_errors import ServerErrors
from capture.sql_defaults import SQLSERVER_DEFAULTS, column_default
from capture.sqlserver import connection as q
from capture.sqlserver.connection import Session
from capture.sqlserver.settings import SqlServerSettings
from capture.sqlserver.types import ColumnFacts, column_type
from pipeline.errors import CaptureError

__all__ = ["CONNECTOR", "ZERO_LSN", "Instance", "SqlServerAgent", "format_lsn", "parse_lsn"]

logger = logging.getLogger(__name__)

CONNECTOR = "sqlserver"
ZERO_LSN = bytes(10)
NO_MAX_LSN = (
    "No maximum LSN recorded in the database; SQL Server Agent is not running (the capture job "
    "fills the change tables): start SQL Server Agent"
)


def format_lsn(lsn: bytes) -> str:
    """``00000027:00000758:0003``."""
    digits = bytes(lsn).hex()
    return f"{digits[:8]}:{digits[8:16]}:{digits[16:]}"


def parse_lsn(text: str) -> bytes:
    """The inverse of :func:`format_lsn`."""
    return bytes.fromhex(text.replace(":", ""))


@dataclass(slots=True)
class Instance:
    """One capture instance of a captured table.

    Attributes:
        database: Its database.
        name: The capture instance (``dbo_customers``).
        start_lsn: Changes committed after it are in its change table.
        table: Schemas and payload builders for its captured columns.
    """

    database: str
    name: str
    start_lsn: bytes
    table: CapturedTable


@dataclass(slots=True)
class MssqlTx(OpenTransaction):
    """The transaction being read, with its commit LSN."""

    commit_lsn: bytes = ZERO_LSN


@dataclass(slots=True)
class DbState:
    """Where the stream of one database is.

    Attributes:
        lsn: Commit LSN of the last transaction read whole (zeros: none yet).
        cut: ``(commit LSN, records emitted)`` of a transaction cut across batches.
    """

    lsn: bytes = ZERO_LSN
    cut: tuple[bytes, int] | None = None
    instances: list[Instance] = field(default_factory=list)
    known: frozenset[str] = frozenset()
    """Capture instances read up to ``lsn``: the cleanup job must not have passed it in them."""


class SqlServerAgent(DatabaseSource):
    """Sessions, CDC checks and capture instances of one SQL Server agent.

    Args:
        name: The configured source name.
        settings: Connection, databases, filters and value handling.
    """

    ORIGIN = "mssql"
    SERVER_ERRORS: ClassVar[ServerErrors | None] = SQLSERVER
    """Applied where pyodbc raises: each :class:`Session` classifies its own errors."""

    def __init__(self, name: str, settings: SqlServerSettings) -> None:
        super().__init__(name)
        self.partition = settings.server_name
        self.settings = settings
        self.retry_policy = settings.rules.retry
        self._sessions: dict[str, Session] = {}
        self._db: dict[str, DbState] = {db: DbState() for db in settings.databases}
        self._snapshot: SnapshotProgress[dict[str, str]] | None = None
        self._table_db: dict[int, str] = {}
        """Database of each snapshot table (by identity: two databases may have one name)."""

    # --- sessions ----------------------------------------------------------------------------
    def _session(self, db: str) -> Session:
        if db not in self._sessions:
            self._sessions[db] = Session(self.settings, db, self.name)
        return self._sessions[db]

    def _close_sessions(self) -> None:
        for session in self._sessions.values():
            session.close()
        self._sessions.clear()

    def _check_database(self, db: str) -> None:
        """CDC must be enabled on ``db`` (``sys.sp_cdc_enable_db``)."""
        enabled = self._session(db).scalar(q.CDC_ENABLED, (db,))
        if not enabled:
            raise CaptureError(
                f"source {self.name}: change data capture is not enabled on database {db!r}: "
                f"run USE [{db}]; EXEC sys.sp_cdc_enable_db, then sys.sp_cdc_enable_table for "
                "each table to capture"
            )

    def _max_lsn(self, db: str) -> bytes | None:
        """``sys.fn_cdc_get_max_lsn()``; None when nothing was captured yet. Without a max LSN,
        SQL Server Agent must be running (Debezium's check, which needs ``VIEW SERVER STATE``),
        else nothing will ever be captured: an error."""
        session = self._session(db)
        value = session.scalar(q.MAX_LSN)
        if value is None and not session.scalar(q.AGENT_RUNNING):
            raise CaptureError(f"source {self.name}: database {db!r}: {NO_MAX_LSN}")
        session.commit()
        return None if value is None else bytes(value)

    # --- capture instances -------------------------------------------------------------------
    def _instances(self, db: str) -> list[Instance]:
        """Every capture instance of a captured table of ``db``, oldest first per table."""
        session = self._session(db)
        rows = session.run(q.HELP_CHANGE_DATA_CAPTURE)
        names = [d[0] for d in rows.description]
        found = [dict(zip(names, r, strict=True)) for r in rows.fetchall()]
        out = []
        for row in sorted(found, key=lambda r: (bytes(r["start_lsn"]), r["capture_instance"])):
            schema, table = str(row["source_schema"]), str(row["source_table"])
            if not self.settings.table_filter.table(schema, table):
                continue
            keys = _names(row["index_column_list"])
            captured = _names(row["captured_column_list"])
            out.append(
                Instance(
                    db,
                    str(row["capture_instance"]),
                    bytes(row["start_lsn"]),
                    self._captured_table(
                        db, schema, table, str(row["capture_instance"]), captured, keys
                    ),
                )
            )
        session.commit()
        return out

    def _captured_table(
        self, db: str, schema: str, table: str, ci: str, captured: list[str], keys: list[str]
    ) -> CapturedTable:
        session = self._session(db)
        facts = {
            str(r[0]): ColumnFacts(
                str(r[0]),
                str(r[1]),
                r[2],
                r[3],
                r[4],
                r[5],
                str(r[6]).upper() == "YES",
                None if r[7] is None else str(r[7]),
            )
            for r in session.rows(q.COLUMNS, (schema, table))
        }
        kinds = dict(session.rows(q.CAPTURED_COLUMNS, (ci,)))
        s = self.settings
        columns, types, defaults = [], [], []
        for name in captured:
            # A column dropped since the instance was created keeps its captured type.
            fact = facts.get(name) or ColumnFacts(name, str(kinds.get(name, "sql_variant")))
            converted = column_type(fact, s.handling)
            if converted is None:
                if name in keys:
                    raise CaptureError(
                        f"source {self.name}: {db}.{schema}.{table}: key column {name} is of "
                        f"type {fact.data_type}, which neither Debezium nor pyodbc maps; "
                        "give the capture instance another unique index (@index_name)"
                    )
                logger.warning(
                    "source %s: %s.%s.%s.%s: type %s is not captured (as in Debezium)",
                    self.name,
                    db,
                    schema,
                    table,
                    name,
                    fact.data_type,
                )
                continue
            columns.append(CatalogColumn(name, 0, 0, not fact.nullable, name in keys))
            types.append(converted)
            defaults.append(
                column_default(
                    fact.default, converted, nullable=fact.nullable, rules=SQLSERVER_DEFAULTS
                )
            )
        return CapturedTable(
            f"{s.server_name}.{db}",  # topic <prefix>.<db>.<schema>.<table>, as Debezium's
            schema,
            table,
            columns,
            types,
            defaults=defaults,
            **s.rules.table_options(CONNECTOR, s.table_filter, self.ORIGIN),
        )

    def _source(self, db: str, inst: Instance, ts_ms: int, **fields: Any) -> dict[str, Any]:
        """The ``source`` block of a record of ``inst``."""
        return {
            **self._source_head(ts_ms, "false"),
            "db": db,
            "sequence": None,
            "schema": inst.table.schema,
            "table": inst.table.table,
            "change_lsn": None,
            "commit_lsn": None,
            "event_serial_no": None,
            **fields,
        }

    def _restore_db(self, offset: Mapping[str, Any]) -> None:
        for db, state in (offset.get("databases") or {}).items():
            if db not in self._db:
                raise CaptureError(
                    f"source {self.name}: bronze's offset names database {db!r}, which "
                    "database.names no longer lists"
                )
            cut = state.get("cut")
            self._db[db].lsn = parse_lsn(state["lsn"])
            self._db[db].cut = None if cut is None else (parse_lsn(cut[0]), int(cut[1]))
            self._db[db].known = frozenset(state.get("instances") or ())

    def _db_offsets(self) -> dict[str, Any]:
        return {
            db: {
                "lsn": format_lsn(state.lsn),
                "cut": None if state.cut is None else [format_lsn(state.cut[0]), state.cut[1]],
                "instances": sorted(state.known),
            }
            for db, state in self._db.items()
        }


def _names(listed: Any) -> list[str]:
    """``[a], [b]`` (``sp_cdc_help_change_data_capture``'s column lists) -> names."""
    if not listed:
        return []
    return [part.strip().strip("[]").replace("]]", "]") for part in str(listed).split(",")]
