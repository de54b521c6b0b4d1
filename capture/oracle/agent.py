"""The state and connections every part of the Oracle agent shares: :class:`OracleAgent`.

The agent is one :class:`~capture.oracle.source.OracleSource`, composed of
:class:`~capture.oracle.snapshot.SnapshotReader` (flashback snapshot) and
:class:`~capture.oracle.stream.StreamReader` (LogMiner), both on this base.

Two sessions: the **mining** session in ``CDB$ROOT`` (LogMiner sessions are private to their
connection: ``ADD_LOGFILE``, ``START_LOGMNR`` and the ``V$LOGMNR_CONTENTS`` query must share
it), and a **side** session switched into the PDB (``ALTER SESSION SET CONTAINER``) for the
catalog and the snapshot.
"""

from __future__ import annotations

import dataclasses
import decimal
import importlib
import logging
import os
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from types import ModuleType
from typing import Any, ClassVar

from capture.captured_table import CapturedTable, CatalogColumn
from capture.column_types import ValueConversionError
from capture.database_source import DatabaseSource, OpenTransaction
from capture.errors_oracle import ORACLE
from capture.oracle.lob import LOB_TYPES
from capture.oracle.settings import OracleSettings
from capture.oracle.types import OracleColumn, column_type
from capture.server_errors import ServerErrors
from capture.sql_defaults import ORACLE_DEFAULTS, column_default
from pipeline.errors import CaptureError, NotInstalledError

__all__ = [
    "CONNECTOR",
    "DBAPI_ENV",
    "OracleAgent",
    "OracleTx",
    "dbapi",
    "exact_numbers",
    "ora_code",
    "quote",
]

logger = logging.getLogger(__name__)

CONNECTOR = "oracle"
DBAPI_ENV = "MEDALLION_ORACLE_DBAPI"
"""Names a DB-API 2.0 module to use instead of ``oracledb`` (same ``connect`` keywords and
exception classes); the test suite points it at its Oracle model (``tests.oraclemodel.dbapi``)."""

SESSION_NLS = (
    "ALTER SESSION SET NLS_DATE_FORMAT = 'YYYY-MM-DD HH24:MI:SS' "
    "NLS_TIMESTAMP_FORMAT = 'YYYY-MM-DD HH24:MI:SS.FF' "
    "NLS_TIMESTAMP_TZ_FORMAT = 'YYYY-MM-DD HH24:MI:SS.FF TZH:TZM' "
    "NLS_NUMERIC_CHARACTERS = '.,'"
)
"""The formats LogMiner then prints ``TO_DATE``/``TO_TIMESTAMP`` literals in (what the redo
parser reads)."""

SESSION_UTC = "ALTER SESSION SET TIME_ZONE = '+00:00'"
"""The side session's zone (the snapshot's ``TIMESTAMP WITH LOCAL TIME ZONE`` values)."""

COLUMNS_SQL = (
    "SELECT COLUMN_NAME, DATA_TYPE, DATA_PRECISION, DATA_SCALE, NULLABLE, DATA_DEFAULT "
    "FROM ALL_TAB_COLUMNS WHERE OWNER = :1 AND TABLE_NAME = :2 ORDER BY COLUMN_ID"
)
KEY_SQL = (
    "SELECT cc.COLUMN_NAME FROM ALL_CONSTRAINTS c JOIN ALL_CONS_COLUMNS cc "
    "ON cc.OWNER = c.OWNER AND cc.CONSTRAINT_NAME = c.CONSTRAINT_NAME "
    "WHERE c.CONSTRAINT_TYPE = 'P' AND c.OWNER = :1 AND c.TABLE_NAME = :2 ORDER BY cc.POSITION"
)
TABLES_SQL = (
    "SELECT OWNER, TABLE_NAME FROM ALL_TABLES WHERE NESTED = 'NO' AND TEMPORARY = 'N' "
    "ORDER BY OWNER, TABLE_NAME"
)


def exact_numbers(driver: ModuleType) -> Callable[[Any, Any], Any]:
    """The output type handler that fetches ``NUMBER`` as ``decimal.Decimal``.

    python-oracledb fetches a ``NUMBER`` whose scale is not 0 (and an unconstrained one with a
    fraction) as a binary ``float``, which keeps about 15 significant digits; its documented
    remedy is this handler. ``NUMBER(P,0)`` stays an ``int`` (exact, and the snapshot's saved
    key stays the number it always was). Set on the snapshot's cursor only: the ``V$`` views'
    unconstrained ``NUMBER`` columns (SCNs, thread numbers) stay the ints the agent expects.

    Args:
        driver: The DB-API module (its ``DB_TYPE_NUMBER``).
    """
    number = getattr(driver, "DB_TYPE_NUMBER", None)

    def handler(cursor: Any, metadata: Any) -> Any:
        if number is not None and metadata.type_code is number and metadata.scale != 0:
            return cursor.var(decimal.Decimal, arraysize=cursor.arraysize)
        return None

    return handler


def dbapi() -> ModuleType:
    """python-oracledb (thin mode: no Oracle client libraries), or the module
    :data:`DBAPI_ENV` names."""
    name = os.environ.get(DBAPI_ENV, "oracledb")
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise NotInstalledError(
            "the oracle capture agent needs python-oracledb: pip install '.[oracle]'"
        ) from exc


_ORA = re.compile(r"\bORA-(\d{5})\b")


def ora_code(exc: BaseException) -> int | None:
    """The ``ORA-nnnnn`` number of a driver error, or None."""
    match = _ORA.search(str(exc))
    return None if match is None else int(match.group(1))


def quote(identifier: str) -> str:
    """An Oracle identifier, double-quoted (case kept, ``"`` doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


@dataclass(slots=True)
class OracleTx(OpenTransaction):
    """The transaction being emitted, with the Oracle facts its positions need."""

    commit_scn: int = 0
    start_scn: int = 0
    commit_rs_id: str | None = None
    seq: int = 0


@dataclass(frozen=True, slots=True)
class OracleTable:
    """A captured table: its Debezium schemas and its Oracle columns."""

    captured: CapturedTable
    columns: tuple[OracleColumn, ...]
    index: dict[str, int]
    left_out: frozenset[str] = frozenset()
    """Columns of a type the agent does not capture (their values in ``SQL_REDO`` are
    dropped on purpose)."""
    lobs: frozenset[str] = frozenset()
    """Captured CLOB/NCLOB/BLOB columns (``lob.enabled``)."""
    every: tuple[OracleColumn, ...] = ()
    """Every column of the table, captured or not (what DDL changes apply to)."""
    key: tuple[str, ...] = ()
    """The primary key's columns."""


class OracleAgent(DatabaseSource):
    """State, connections and table schemas of one Oracle agent.

    Args:
        name: The configured source name.
        settings: Connection, filters, windows and value handling.
    """

    ORIGIN = "oracle"
    SERVER_ERRORS: ClassVar[ServerErrors | None] = ORACLE

    def __init__(self, name: str, settings: OracleSettings) -> None:
        super().__init__(name)
        self.settings = settings
        self.retry_policy = settings.rules.retry
        self.partition = settings.server_name
        self.driver = dbapi()
        # The driver module is chosen per agent (DBAPI_ENV), so its error classes are too: an
        # instance attribute shadows the class flag DatabaseSource catches. Every database
        # error is caught; ORACLE's codes decide (a lost link retried, ORA-01017 terminal, an
        # unknown ORA- error neither recoverable nor connection-level raised as it is).
        object.__setattr__(self, "OUTAGES", (self.driver.DatabaseError, self.driver.InterfaceError))
        self._mining: Any = None
        self._side_conn: Any = None
        self._tables: dict[tuple[str, str], OracleTable | None] = {}

    # --- connections -------------------------------------------------------------------------
    def _connect(self) -> Any:
        s = self.settings
        password = None if s.password is None else s.password.get_secret_value()
        try:
            conn = self.driver.connect(user=s.user, password=password, dsn=s.dsn)
        except self.driver.Error as exc:
            # The driver's message names the address, never the password.
            raise self._outage(exc, f"connect to Oracle {s.dsn}") from None
        cursor = conn.cursor()
        cursor.execute(SESSION_NLS)
        return conn

    def _miner(self) -> Any:
        if self._mining is None:
            self._mining = self._connect()
        return self._mining

    def _side(self) -> Any:
        if self._side_conn is None:
            conn = self._connect()
            if self.settings.pdb:
                conn.cursor().execute(f"ALTER SESSION SET CONTAINER = {quote(self.settings.pdb)}")
            # python-oracledb hands TIMESTAMP WITH LOCAL TIME ZONE over in the session's zone,
            # as a naive datetime: in UTC, it is the instant the converters take it for. Set
            # in the container the snapshot reads from.
            conn.cursor().execute(SESSION_UTC)
            self._side_conn = conn
        return self._side_conn

    def _close_connections(self) -> None:
        for conn in (self._mining, self._side_conn):
            if conn is not None:
                try:
                    conn.close()
                except self.driver.Error:
                    pass  # already gone; nothing to release
        self._mining = self._side_conn = None

    def _query(self, conn: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        cursor = conn.cursor()
        cursor.execute(sql, list(params))
        rows: list[tuple[Any, ...]] = cursor.fetchall()
        return rows

    def _current_scn(self) -> int:
        return int(self._query(self._miner(), "SELECT CURRENT_SCN FROM V$DATABASE")[0][0])

    # --- tables ------------------------------------------------------------------------------
    def _captured(self, owner: str, table: str) -> bool:
        """Schema lists match the owner; in a CDB, table lists match ``pdb.schema.table`` (seed
        Oracle document: "table.include.list ... in the form <pdbName>.<schemaName>.<tableName>"),
        else ``schema.table``."""
        lists, pdb = self.settings.table_filter, self.settings.pdb
        if pdb is None:
            return lists.table(owner, table)
        schema_only = dataclasses.replace(lists, table_include=(), table_exclude=())
        tables_only = dataclasses.replace(lists, schema_include=(), schema_exclude=())
        return schema_only.table(owner, table) and tables_only.table(f"{pdb}.{owner}", table)

    def _table(self, owner: str, table: str) -> OracleTable | None:
        """The captured table ``owner.table`` (None when the filters leave it out)."""
        key = (owner, table)
        if key not in self._tables:
            self._tables[key] = (
                self._describe(owner, table) if self._captured(owner, table) else None
            )
        return self._tables[key]

    def _describe(self, owner: str, table: str) -> OracleTable:
        rows = self._query(self._side(), COLUMNS_SQL, owner, table)
        if not rows:
            raise CaptureError(f"source {self.name}: table {owner}.{table} has no columns")
        key = [str(r[0]) for r in self._query(self._side(), KEY_SQL, owner, table)]
        columns = [
            OracleColumn(
                str(name),
                str(data_type),
                None if precision is None else int(precision),
                None if scale is None else int(scale),
                nullable == "Y",
                # DATA_DEFAULT is a LONG: the text as written, trailing blanks included.
                default=None if default is None or not str(default).strip() else str(default),
            )
            for name, data_type, precision, scale, nullable, default in rows
        ]
        return self._build(owner, table, columns, key)

    def _build(
        self, owner: str, table: str, every: list[OracleColumn], key: list[str]
    ) -> OracleTable:
        """The captured table of ``owner.table`` with the columns ``every`` (from the catalog,
        or as a DDL statement left them)."""
        s = self.settings
        columns, types, kept, left_out, defaults = [], [], [], set(), []
        for column in every:
            converted = column_type(
                column, s.handling, lobs=s.lob_enabled, placeholder=s.placeholder
            )
            if converted is None:
                logger.warning(
                    "source %s: %s.%s.%s: type %s is not captured (as in Debezium)",
                    self.name,
                    owner,
                    table,
                    column.name,
                    column.data_type,
                )
                left_out.add(column.name)
                continue
            kept.append(column)
            types.append(converted)
            columns.append(
                CatalogColumn(column.name, 0, -1, not column.nullable, column.name in key)
            )
            defaults.append(
                column_default(
                    column.default, converted, nullable=column.nullable, rules=ORACLE_DEFAULTS
                )
            )
        captured = CapturedTable(
            s.server_name,
            owner,
            table,
            columns,
            types,
            defaults=defaults,
            **s.rules.table_options(CONNECTOR, s.table_filter, self.ORIGIN),
        )
        index = {c.name: i for i, c in enumerate(kept)}
        lobs = frozenset(c.name for c in kept if c.data_type in LOB_TYPES)
        return OracleTable(
            captured, tuple(kept), index, frozenset(left_out), lobs, tuple(every), tuple(key)
        )

    def _refresh(self, table: OracleTable, names: Iterable[str]) -> OracleTable:
        """``table`` described again when ``SQL_REDO`` names a column it does not know (an ADD
        COLUMN since it was described: the online catalog has it now).

        Raises:
            ValueConversionError: The catalog does not know the column either: the change is
                quarantined rather than landed without it.
        """
        unknown = [n for n in names if n not in table.index and n not in table.left_out]
        if not unknown:
            return table
        captured = table.captured
        fresh = self._describe(captured.schema, captured.table)
        self._tables[(captured.schema, captured.table)] = fresh
        missing = [n for n in unknown if n not in fresh.index and n not in fresh.left_out]
        if missing:
            raise ValueConversionError(
                f"{captured.collection}: SQL_REDO names column(s) {', '.join(missing)} that the "
                "catalog does not have (dropped or renamed since the change was written)"
            )
        return fresh

    def _source_fields(
        self,
        table: CapturedTable,
        *,
        scn: int,
        commit_scn: int | None = None,
        xid: str | None = None,
        rs_id: str | None = None,
        ssn: int | None = None,
        thread: int | None = None,
        user: str | None = None,
    ) -> dict[str, Any]:
        """The ``source`` fields after the common head (``version`` ... ``snapshot``)."""
        return {
            "db": self.settings.pdb or self.settings.dbname,
            "sequence": None,
            "ts_us": None,
            "ts_ns": None,
            "schema": table.schema,
            "table": table.table,
            "txId": xid,
            "scn": str(scn),
            "commit_scn": None if commit_scn is None else str(commit_scn),
            "lcr_position": None,
            "rs_id": rs_id,
            "ssn": ssn,
            "redo_thread": thread,
            "user_name": user,
        }
