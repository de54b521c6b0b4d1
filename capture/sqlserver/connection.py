"""Sessions on SQL Server through pyodbc (or the module :data:`~.settings.DBAPI_ENV` names).

Every statement the agent sends is a constant or a builder here, so that the CDC model of the
tests (``tests/mssqlmodel``) checks exactly what a server would receive. A driver error is
classified once, by its native error number and SQLSTATE
(:data:`capture.errors_sqlserver.SQLSERVER`): a refusal retrying cannot fix (a failed login, a
missing database or permission) is terminal (:class:`~capture.server_errors.SourceRefused`, with
the fix); a lost or refused link (SQLSTATE class ``08``, a failover) is
:class:`~pipeline.errors.SourceUnavailable` (retried with backoff by
:class:`capture.database_source.DatabaseSource`), as is any other pyodbc
``OperationalError``/``InterfaceError``; anything else is a :class:`CaptureError` naming the
statement.
"""

from __future__ import annotations

import glob
import importlib
import logging
import struct
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from capture.errors_sqlserver import SQLSERVER
from capture.sqlserver.settings import ODBC_DRIVER, SqlServerSettings
from pipeline.errors import CaptureError, NotInstalledError

__all__ = [
    "AGENT_RUNNING",
    "CDC_ENABLED",
    "CAPTURED_COLUMNS",
    "COLUMNS",
    "HELP_CHANGE_DATA_CAPTURE",
    "INCREMENT_LSN",
    "MAX_LSN",
    "MIN_LSN",
    "SQL_SS_TIMESTAMPOFFSET",
    "SQL_SS_UDT",
    "SQL_SS_VARIANT",
    "Session",
    "TRANSACTIONS",
    "all_changes",
    "connection_string",
    "datetimeoffset_text",
    "quote",
    "udt_bytes",
]

logger = logging.getLogger(__name__)

AGENT_RUNNING = (
    "SELECT CASE WHEN dss.[status]=4 THEN 1 ELSE 0 END AS isRunning FROM sys.dm_server_services "
    "dss WHERE dss.[servicename] LIKE N'SQL Server Agent (%'"
)
"""Debezium's check (needs ``VIEW SERVER STATE``), run when there is no max LSN."""
CDC_ENABLED = "SELECT is_cdc_enabled FROM sys.databases WHERE name = ?"
MAX_LSN = "SELECT sys.fn_cdc_get_max_lsn()"
MIN_LSN = "SELECT sys.fn_cdc_get_min_lsn(?)"
INCREMENT_LSN = "SELECT sys.fn_cdc_increment_lsn(?)"
HELP_CHANGE_DATA_CAPTURE = "EXEC sys.sp_cdc_help_change_data_capture"
"""One row per capture instance the login may read (``sp_cdc_help_change_data_capture``)."""
COLUMNS = (
    "SELECT COLUMN_NAME, DATA_TYPE, CHARACTER_MAXIMUM_LENGTH, NUMERIC_PRECISION, NUMERIC_SCALE, "
    "DATETIME_PRECISION, IS_NULLABLE, COLUMN_DEFAULT FROM INFORMATION_SCHEMA.COLUMNS "
    "WHERE TABLE_SCHEMA = ? AND "
    "TABLE_NAME = ? ORDER BY ORDINAL_POSITION"
)
CAPTURED_COLUMNS = (
    "SELECT cc.column_name, cc.column_type FROM cdc.captured_columns cc JOIN cdc.change_tables "
    "ct ON cc.object_id = ct.object_id WHERE ct.capture_instance = ? ORDER BY cc.column_ordinal"
)
TRANSACTIONS = (
    "SELECT TOP (?) start_lsn, tran_end_time FROM cdc.lsn_time_mapping WHERE start_lsn > ? "
    "AND start_lsn <= ? ORDER BY start_lsn"
)
"""The next commit LSNs (a window of ``max.iteration.transactions``) and their commit times."""
ISOLATION = {
    "read_uncommitted": "READ UNCOMMITTED",
    "read_committed": "READ COMMITTED",
    "repeatable_read": "REPEATABLE READ",
    "snapshot": "SNAPSHOT",
    "exclusive": "REPEATABLE READ",
}
"""``snapshot.isolation.mode`` -> the session's level (``exclusive`` adds ``TABLOCKX``)."""


SQL_SS_VARIANT = -150
"""``sql_variant``'s ODBC type from Microsoft's driver (FreeTDS: 0, ``SQL_UNKNOWN_TYPE``): not
mapped, and not selected (Debezium has no mapping for it either)."""
SQL_SS_UDT = -151
"""The CLR types' ODBC type from Microsoft's driver (``hierarchyid``, ``geometry``,
``geography``); FreeTDS reports them as ``SQL_LONGVARBINARY``, which pyodbc maps to bytes."""
SQL_SS_TIMESTAMPOFFSET = -155
"""``datetimeoffset``'s ODBC type."""
_OFFSET_STRUCT = struct.Struct("<6hI2h")
"""``SQL_SS_TIMESTAMPOFFSET_STRUCT``: year, month, day, hour, minute, second (int16), fraction
in nanoseconds (uint32), offset hours and minutes (int16, both negative west of UTC)."""


def datetimeoffset_text(raw: bytes | str | None) -> str | None:
    """pyodbc's output converter for ``datetimeoffset``: the driver's
    ``SQL_SS_TIMESTAMPOFFSET_STRUCT`` as the server's text with nine fraction digits
    (``2018-06-20 15:13:16.945104100 +02:00``), which keeps the 100 ns a ``datetime`` cannot.

    pyodbc has no mapping for ODBC type -155: without a converter, fetching such a column
    fails ("ODBC SQL type -155 is not yet supported", mkleehammer/pyodbc#134). FreeTDS writes
    the struct as Microsoft's driver does (``odbc_convert_datetime_to_binary``: local time,
    nanoseconds, the offset's hours and minutes).
    """
    if raw is None or isinstance(raw, str):
        return raw
    if len(raw) != _OFFSET_STRUCT.size:
        # Not raised here, inside pyodbc's fetch (which would fail every row with it): the
        # column's converter refuses this text, so the one change is quarantined, named.
        return f"datetimeoffset of {len(raw)} bytes, not the 20-byte struct: {bytes(raw).hex()}"
    year, month, day, hour, minute, second, nanos, off_h, off_m = _OFFSET_STRUCT.unpack(raw)
    sign = "-" if off_h < 0 or off_m < 0 else "+"
    return (
        f"{year:04d}-{month:02d}-{day:02d} {hour:02d}:{minute:02d}:{second:02d}.{nanos:09d} "
        f"{sign}{abs(off_h):02d}:{abs(off_m):02d}"
    )


def udt_bytes(raw: bytes | None) -> bytes | None:
    """pyodbc's output converter for the CLR types under Microsoft's driver (ODBC type -151,
    which pyodbc does not map, mkleehammer/pyodbc#404): their serialized bytes, as FreeTDS's
    ``SQL_LONGVARBINARY`` gives them."""
    return None if raw is None else bytes(raw)


def quote(name: str) -> str:
    """A T-SQL identifier in brackets (``]`` doubled): the one way names enter SQL."""
    return "[" + name.replace("]", "]]") + "]"


def all_changes(capture_instance: str, columns: Sequence[str]) -> str:
    """Every change row of an instance between two commit LSNs, update before-images included
    (``cdc.fn_cdc_get_all_changes_<ci>(@from_lsn, @to_lsn, N'all update old')``), in the order
    Debezium reads them: commit LSN, change LSN, operation. The columns are named: the
    function's result is the four ``__$`` columns, then the captured ones."""
    if not capture_instance.replace("_", "").isalnum():
        raise CaptureError(f"capture instance name {capture_instance!r} is not an identifier")
    names = ", ".join(quote(c) for c in columns)
    return (
        f"SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], {names} "
        f"FROM cdc.fn_cdc_get_all_changes_{capture_instance}(?, ?, N'all update old') "
        "ORDER BY [__$start_lsn], [__$seqval], [__$operation]"
    )


def _odbc_value(value: str) -> str:
    # ODBC connection-string values with separators go in braces, '}' doubled.
    if any(ch in value for ch in ";{}= "):
        return "{" + value.replace("}", "}}") + "}"
    return value


def odbc_driver(dbapi: ModuleType) -> str:
    """The ``DRIVER=`` value: FreeTDS by its registered name, else by the path Debian's
    ``tdsodbc`` installs it at (the package registers the name only when debconf says so)."""
    drivers = getattr(dbapi, "drivers", None)
    if drivers is None or ODBC_DRIVER in drivers():
        return "{" + ODBC_DRIVER + "}"
    for path in sorted(glob.glob("/usr/lib/*/odbc/libtdsodbc.so")):
        return path
    raise NotInstalledError(
        "the sqlserver capture agent needs FreeTDS's ODBC driver: apt-get install tdsodbc "
        f"(unixODBC knows the drivers {drivers()})"
    )


def connection_string(settings: SqlServerSettings, database: str, driver: str) -> str:
    """The ODBC connection string of one database (the password revealed only here)."""
    parts = {
        "DRIVER": driver,
        "SERVER": _odbc_value(settings.host),
        "PORT": str(settings.port),
        "DATABASE": _odbc_value(database),
        "UID": _odbc_value(settings.user),
        "TDS_Version": "7.4",
        "ClientCharset": "UTF-8",
    }
    if settings.password is not None:
        parts["PWD"] = _odbc_value(settings.password.get_secret_value())
    return ";".join(f"{k}={v}" for k, v in parts.items())


def driver_module(name: str) -> ModuleType:
    """Import the DB-API module (``pyodbc``), saying what to install when it is missing."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise NotInstalledError(
            f"the sqlserver capture agent needs {name} with unixODBC and FreeTDS: "
            f"pip install '.[sqlserver]' and apt-get install unixodbc tdsodbc ({exc})"
        ) from None


class Session:
    """One connection to one database, with the driver's errors classified.

    Args:
        settings: Connection settings.
        database: The database (``DATABASE=`` of the connection string).
        source: The source name, for messages.
    """

    def __init__(self, settings: SqlServerSettings, database: str, source: str) -> None:
        self.database = database
        self.source = source
        self._dbapi = driver_module(settings.dbapi_module)
        self._outages = (self._dbapi.OperationalError, self._dbapi.InterfaceError)
        where = f"SQL Server {settings.host}:{settings.port}/{database}"
        try:
            self.conn: Any = self._dbapi.connect(
                connection_string(settings, database, odbc_driver(self._dbapi)),
                autocommit=False,
                timeout=10,
            )
        except self._dbapi.Error as exc:
            # The driver's message names host and port, never the password.
            raise self._classify(exc, f"connect to {where}") from None
        self.conn.add_output_converter(SQL_SS_TIMESTAMPOFFSET, datetimeoffset_text)
        self.conn.add_output_converter(SQL_SS_UDT, udt_bytes)

    def _classify(self, exc: BaseException, doing: str) -> CaptureError:
        """Terminal, retryable or plain, by the server's codes (see the module docstring)."""
        return SQLSERVER.classify(
            self.source, exc, doing, unknown_retryable=isinstance(exc, self._outages)
        )

    def run(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Execute ``sql``; the cursor (its rows not yet fetched)."""
        try:
            return self.conn.cursor().execute(sql, *params)
        except self._dbapi.Error as exc:
            raise self._classify(exc, f"run {sql[:120]}") from None

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Execute ``sql`` and fetch every row."""
        cursor = self.run(sql, params)
        try:
            return [tuple(r) for r in cursor.fetchall()]
        except self._dbapi.Error as exc:
            raise self._classify(exc, f"run {sql[:120]}") from None

    def scalar(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """The first column of the first row (None without rows)."""
        rows = self.rows(sql, params)
        return rows[0][0] if rows else None

    def fetch(self, cursor: Any, size: int) -> list[tuple[Any, ...]]:
        """Up to ``size`` more rows of ``cursor``."""
        try:
            return [tuple(r) for r in cursor.fetchmany(size)]
        except self._dbapi.Error as exc:
            raise self._classify(exc, "fetch rows") from None

    def commit(self) -> None:
        """End the session's transaction."""
        try:
            self.conn.commit()
        except self._dbapi.Error as exc:
            raise self._classify(exc, "COMMIT") from None

    def close(self) -> None:
        """Close; a link already gone is not an error."""
        try:
            self.conn.close()
        except self._dbapi.Error:
            pass  # the server already dropped the session; nothing left to release
