"""Connections to Db2 through pyodbc (or the module :data:`~.settings.DBAPI_ENV` names).

Every statement the agent sends is a constant or a builder here, so that the ASN model of the
tests (``tests/db2model``) checks exactly what a server would receive; identifiers enter SQL
only through :func:`quote` (Db2 names are case-sensitive, so every one is quoted as stored).
A driver error is classified once (:data:`capture.errors_db2.DB2`): terminal
(:class:`~capture.server_errors.SourceRefused`, with the fix), retryable
(:class:`~pipeline.errors.SourceUnavailable`, retried with backoff by
:class:`capture.database_source.DatabaseSource`), or a :class:`CaptureError` naming the
statement.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from capture.db2.settings import ASN_SCHEMA, Db2Settings
from capture.errors_db2 import DB2
from capture.keyset import after_key
from pipeline.errors import CaptureError, NotInstalledError

__all__ = [
    "ASN_STATUS",
    "COLUMNS",
    "CURRENT_SERVER",
    "ISOLATION",
    "MAX_LSN",
    "REGISTRATIONS",
    "UNITS_OF_WORK",
    "Db2Session",
    "changes_query",
    "connection_string",
    "lock_table",
    "quote",
    "select_table",
]

logger = logging.getLogger(__name__)

CURRENT_SERVER = "SELECT CURRENT SERVER FROM SYSIBM.SYSDUMMY1"
MAX_LSN = (
    f"SELECT max(t.SYNCHPOINT) FROM ( SELECT CD_NEW_SYNCHPOINT AS SYNCHPOINT FROM "
    f"{ASN_SCHEMA}.IBMSNAP_REGISTER UNION ALL SELECT SYNCHPOINT AS SYNCHPOINT FROM "
    f"{ASN_SCHEMA}.IBMSNAP_REGISTER) t"
)
"""Debezium's maximum LSN: everything at or below it is in the CD tables (NULL: capture has
never run)."""
REGISTRATIONS = (
    "SELECT r.SOURCE_OWNER, r.SOURCE_TABLE, r.CD_OWNER, r.CD_TABLE, r.CD_OLD_SYNCHPOINT, "
    f"r.STATE FROM {ASN_SCHEMA}.IBMSNAP_REGISTER r WHERE r.SOURCE_OWNER <> ''"
)
"""One row per registered source table (the global row has an empty owner)."""
COLUMNS = (
    'SELECT COLNAME, TYPENAME, LENGTH, SCALE, NULLS, KEYSEQ, CODEPAGE, "DEFAULT" FROM '
    "SYSCAT.COLUMNS WHERE TABSCHEMA = ? AND TABNAME = ? ORDER BY COLNO"
)
UNITS_OF_WORK = (
    f"SELECT IBMSNAP_COMMITSEQ, IBMSNAP_LOGMARKER FROM {ASN_SCHEMA}.IBMSNAP_UOW WHERE "
    "IBMSNAP_COMMITSEQ > ? AND IBMSNAP_COMMITSEQ <= ? ORDER BY IBMSNAP_COMMITSEQ "
    "FETCH FIRST {limit} ROWS ONLY"
)
"""The next units of work captured (their commit sequence and commit time), a window at a time."""
ASN_STATUS = "VALUES ASNCDC.ASNCDCSERVICES('status','asncdc')"
"""The Debezium management UDF's status text of the ASN capture program."""
ISOLATION = {
    "read_uncommitted": "UR",
    "read_committed": "CS",
    "repeatable_read": "RR",
    "exclusive": "RR",
}
"""``snapshot.isolation.mode`` -> ``CURRENT ISOLATION`` (``exclusive`` also locks each table)."""


def quote(name: str) -> str:
    """A Db2 identifier in double quotes (``"`` doubled), exactly as cased."""
    return '"' + name.replace('"', '""') + '"'


def changes_query(cd_owner: str, cd_table: str) -> str:
    """Debezium's read of one CD table between two commit sequences (inclusive), in commit then
    intent order. A ``D`` followed by an ``I`` of one unit of work is an update's before image
    (3) and after image (4): registrations are made with ``CHG_UPD_TO_DEL_INS = 'Y'``."""
    return (
        "SELECT CASE WHEN IBMSNAP_OPERATION = 'D' AND (LEAD(cdc.IBMSNAP_OPERATION,1,'X') OVER "
        "(PARTITION BY cdc.IBMSNAP_COMMITSEQ ORDER BY cdc.IBMSNAP_INTENTSEQ)) ='I' THEN 3 "
        "WHEN IBMSNAP_OPERATION = 'I' AND (LAG(cdc.IBMSNAP_OPERATION,1,'X') OVER (PARTITION BY "
        "cdc.IBMSNAP_COMMITSEQ ORDER BY cdc.IBMSNAP_INTENTSEQ)) ='D' THEN 4 WHEN "
        "IBMSNAP_OPERATION = 'D' THEN 1 WHEN IBMSNAP_OPERATION = 'I' THEN 2 END OPCODE, cdc.* "
        f"FROM {quote(cd_owner)}.{quote(cd_table)} cdc WHERE IBMSNAP_COMMITSEQ >= ? AND "
        "IBMSNAP_COMMITSEQ <= ? order by IBMSNAP_COMMITSEQ, IBMSNAP_INTENTSEQ"
    )


def lock_table(schema: str, table: str) -> str:
    """``LOCK TABLE`` in exclusive mode (``snapshot.isolation.mode=exclusive``)."""
    return f"LOCK TABLE {quote(schema)}.{quote(table)} IN EXCLUSIVE MODE"


def select_table(
    schema: str,
    table: str,
    columns: Sequence[str],
    keys: Sequence[str],
    after: Sequence[Any] | None,
) -> tuple[str, list[Any]]:
    """The rows of a table in key order, after the key ``after`` if given (Db2 compares no
    row values with ``>``: ``(a > ?) OR (a = ? AND b > ?)``...)."""
    sql = f"SELECT {', '.join(quote(c) for c in columns)} FROM {quote(schema)}.{quote(table)}"
    params: list[Any] = []
    if after is not None and keys:
        condition, params = after_key(keys, after, quote)
        sql += " WHERE " + condition
    if keys:
        sql += " ORDER BY " + ", ".join(quote(k) for k in keys)
    return sql, params


def _odbc_value(value: str) -> str:
    # ODBC connection-string values with separators go in braces, '}' doubled.
    return "{" + value.replace("}", "}}") + "}" if any(ch in value for ch in ";{}= ") else value


def connection_string(settings: Db2Settings) -> str:
    """The ODBC connection string (the password revealed only here)."""
    parts = {
        "DRIVER": "{" + settings.odbc_driver + "}",
        "DATABASE": _odbc_value(settings.database),
        "HOSTNAME": _odbc_value(settings.host),
        "PORT": str(settings.port),
        "PROTOCOL": "TCPIP",
        "UID": _odbc_value(settings.user),
    }
    if settings.password is not None:
        parts["PWD"] = _odbc_value(settings.password.get_secret_value())
    return ";".join(f"{k}={v}" for k, v in parts.items())


def _driver(name: str) -> ModuleType:
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise NotInstalledError(
            f"the db2 capture agent needs {name} and IBM's Data Server Driver for ODBC: "
            f"pip install '.[db2]' ({exc})"
        ) from None


class Db2Session:
    """One connection with the driver's errors classified.

    Args:
        settings: Connection settings.
        source: The source name, for messages.
    """

    def __init__(self, settings: Db2Settings, source: str) -> None:
        self.source = source
        self._dbapi = _driver(settings.dbapi_module)
        self._outages = (self._dbapi.OperationalError, self._dbapi.InterfaceError)
        registered = getattr(self._dbapi, "drivers", None)  # pyodbc.drivers(): unixODBC's list
        if registered is not None and settings.odbc_driver not in registered():
            raise NotInstalledError(
                f"the db2 capture agent needs IBM's Data Server Driver for ODBC and CLI, "
                f"registered with unixODBC as '{settings.odbc_driver}' (odbcinst.ini); unixODBC "
                f"knows {registered()}"
            )
        where = f"Db2 {settings.host}:{settings.port}/{settings.database}"
        try:
            self.conn: Any = self._dbapi.connect(
                connection_string(settings), autocommit=False, timeout=10
            )
        except self._dbapi.Error as exc:
            # The CLI driver's message names host and port, never the password.
            raise self._error(exc, f"connect to {where}") from None

    def _error(self, exc: BaseException, doing: str) -> CaptureError:
        return DB2.classify(
            self.source, exc, doing, unknown_retryable=isinstance(exc, self._outages)
        )

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run ``sql``; the cursor, its rows not fetched yet."""
        try:
            return self.conn.cursor().execute(sql, *params)
        except self._dbapi.Error as exc:
            raise self._error(exc, f"run {sql[:120]}") from None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Run ``sql`` and fetch every row."""
        cursor = self.execute(sql, params)
        return self.more(cursor, 0)

    def one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row (None without rows)."""
        rows = self.all(sql, params)
        return rows[0][0] if rows else None

    def more(self, cursor: Any, size: int) -> list[tuple[Any, ...]]:
        """Up to ``size`` more rows of ``cursor`` (0: all of them)."""
        try:
            rows = cursor.fetchmany(size) if size else cursor.fetchall()
        except self._dbapi.Error as exc:
            raise self._error(exc, "fetch rows") from None
        return [tuple(r) for r in rows]

    def end(self) -> None:
        """End the unit of work (read only: its locks go)."""
        try:
            self.conn.rollback()
        except self._dbapi.Error as exc:
            raise self._error(exc, "ROLLBACK") from None

    def close(self) -> None:
        """Close; a link already gone is not an error."""
        try:
            self.conn.close()
        except self._dbapi.Error:
            pass  # the instance already dropped the connection; nothing left to release
