"""SQL Server's error numbers and ODBC SQLSTATEs, mapped to what a runner may do about them.

pyodbc raises ``Error(sqlstate, message)``: ``args[0]`` is the ODBC SQLSTATE and the message
ends with the server's native error number in parentheses, then the ODBC call, e.g.
``[28000] [FreeTDS][SQL Server]Login failed for user 'cdc'. (18456) (SQLDriverConnect)``.
The native number (the Database Engine's ``sys.messages`` id) is the precise one and is read
first (:data:`SQLSERVER_ERRORS`); when the message has none, or no rule knows it (FreeTDS's own
numbers, such as 20009 for an unreachable server), the SQLSTATE decides
(:data:`SQLSERVER_STATES`: ``08`` connection exceptions and timeouts are retried, ``28000``
invalid authorization is terminal). An error neither knows is retryable only when pyodbc
raised it as an ``OperationalError``/``InterfaceError`` (the caller says so).

Sources: "Database engine events and errors" (the native numbers), the ODBC "Appendix A: ODBC
Error Codes" (SQLSTATEs) and Microsoft.Data.SqlClient's baseline transient error list
(``SqlConfigurableRetryFactory.BaselineTransientErrors``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from capture.server_errors import RECONNECT, CodeRule, ServerErrors, code_rules

__all__ = ["SQLSERVER", "SQLSERVER_ERRORS", "SQLSERVER_STATES", "sqlserver_code"]

_CREDENTIALS = (
    "check the source's user and password (database.user, database.password or its secret "
    "file / env var) and that SQL Server authentication is enabled for the login"
)
_CDC_READ = (
    "grant the capture login access to the database and the capture instances' gating role "
    "(or db_owner), and SELECT on the cdc schema"
)


SQLSERVER_ERRORS: Mapping[str, CodeRule] = code_rules(
    CodeRule("18456", True, "login failed", _CREDENTIALS),
    CodeRule("18452", True, "login failed: the login is from an untrusted domain", _CREDENTIALS),
    CodeRule(
        "18470",
        True,
        "login failed: the login is disabled",
        "enable the login (ALTER LOGIN ... ENABLE)",
    ),
    CodeRule(
        "18486",
        True,
        "login failed: the account is locked out",
        "unlock the login (ALTER LOGIN ... WITH PASSWORD = ... UNLOCK) and check the password",
    ),
    CodeRule(
        "18487", True, "login failed: the password has expired", "set a new password for the login"
    ),
    CodeRule(
        "18488",
        True,
        "login failed: the password must be changed",
        "set a new password for the login",
    ),
    CodeRule(
        "4060",
        True,
        "cannot open the database requested by the login",
        "check database.names, and that the login is a user of each database",
    ),
    CodeRule(
        "916", True, "the login cannot access the database in its security context", _CDC_READ
    ),
    CodeRule("229", True, "permission denied on an object", _CDC_READ),
    CodeRule("230", True, "permission denied on a column", _CDC_READ),
    CodeRule(
        "300",
        True,
        "VIEW SERVER STATE permission denied (the SQL Server Agent check)",
        "GRANT VIEW SERVER STATE TO the capture login",
    ),
    CodeRule(
        "22901",
        True,
        "the database is not enabled for change data capture",
        "run USE [db]; EXEC sys.sp_cdc_enable_db, then sys.sp_cdc_enable_table for each table",
    ),
    CodeRule(
        "313",
        True,
        "the change-table function refused its LSN range (the capture instance is gone, or "
        "the cleanup job removed changes after bronze's offset)",
        "take a new snapshot (clear the source's offset) if the instance was cleaned up past it",
    ),
    CodeRule("233", False, "the connection broke during the login", RECONNECT),
    CodeRule("10053", False, "the connection was aborted by the host", RECONNECT),
    CodeRule("10054", False, "the connection was reset by the peer", RECONNECT),
    CodeRule("10060", False, "the connection attempt timed out", RECONNECT),
    CodeRule("10061", False, "the server refused the connection", RECONNECT),
    CodeRule("40613", False, "the database is not currently available (failover)", RECONNECT),
    CodeRule("40197", False, "the service failed processing the request (failover)", RECONNECT),
    CodeRule("40501", False, "the service is busy", RECONNECT),
    CodeRule("49918", False, "not enough resources to process the request", RECONNECT),
    CodeRule("1205", False, "the session was chosen as a deadlock victim", RECONNECT),
    CodeRule("1222", False, "a lock request timed out", RECONNECT),
    CodeRule("6005", False, "the server is shutting down", RECONNECT),
    CodeRule("6006", False, "the server is shutting down (SHUTDOWN)", RECONNECT),
)
"""Database Engine error numbers (``sys.messages``)."""

SQLSERVER_STATES: Mapping[str, CodeRule] = code_rules(
    CodeRule("28000", True, "invalid authorization specification", _CREDENTIALS),
    CodeRule("08", False, "connection exception", RECONNECT),
    CodeRule("HYT00", False, "the query timed out", RECONNECT),
    CodeRule("HYT01", False, "the connection timed out", RECONNECT),
    CodeRule("40001", False, "serialization failure (deadlock)", RECONNECT),
)
"""ODBC SQLSTATEs; two-character keys are classes."""

_NATIVE = re.compile(r"\((\d+)\)\s*\(SQL[A-Za-z]+\)")
"""The native error number before the ODBC call: ``... (18456) (SQLDriverConnect)``."""


def _sqlstate(exc: BaseException) -> str | None:
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], str) and re.fullmatch(r"[0-9A-Z]{5}", args[0]):
        return args[0]
    return None


def sqlserver_code(exc: BaseException) -> tuple[str | None, bool]:
    """The native error number of a pyodbc error (read from its message), or None."""
    for match in _NATIVE.finditer(_message(exc)):
        if match.group(1) != "0":
            return match.group(1), True
    return None, False


def _by_sqlstate(exc: BaseException) -> tuple[str, str, CodeRule] | None:
    state = _sqlstate(exc)
    if state is None:
        return None
    rule = SQLSERVER_STATES.get(state) or SQLSERVER_STATES.get(state[:2])
    return None if rule is None else ("SQLSTATE", state, rule)


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    return str(args[-1]) if args else str(exc)


SQLSERVER = ServerErrors(
    "SQL Server",
    "error",
    SQLSERVER_ERRORS,
    sqlserver_code,
    second_reading=_by_sqlstate,
    describe=_message,
)
"""SQL Server's table (pyodbc errors)."""
