"""Db2's SQL messages and SQLSTATEs, mapped to what a runner may do about them.

pyodbc raises ``Error(odbc_sqlstate, message)``; the Db2 CLI driver's message names the Db2
message id and ends with Db2's own SQLSTATE, e.g. ``[08001] [IBM][CLI Driver] SQL30082N
Security processing failed with reason "24" ("USERNAME AND/OR PASSWORD INVALID").
SQLSTATE=08001``. The message id (``SQL30082N``, the SQLCODE -30082) is the precise one and is
read first (:data:`DB2_MESSAGES`); when no rule knows it, Db2's SQLSTATE from the message, else
the ODBC one in ``args[0]``, decides (:data:`DB2_STATES`: class ``08`` connection exceptions,
``40001`` deadlock or lock timeout and class ``57`` resource unavailable are retried, ``28000``
is terminal). An error neither knows is retryable only when pyodbc raised it as an
``OperationalError``/``InterfaceError`` (the caller says so).

Sources: IBM Db2 11.5 "SQL messages" (SQL0204N, SQL0551N, SQL0911N, SQL0913N, SQL1013N,
SQL1032N, SQL1035N, SQL1060N, SQL1224N, SQL30081N, SQL30082N, SQL30108N) and "SQLSTATE
messages"; the ASN fixes follow the seed guide's setup chapter (section 6.5).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from capture.server_errors import RECONNECT, CodeRule, ServerErrors, code_rules

__all__ = ["DB2", "DB2_MESSAGES", "DB2_STATES", "db2_code"]

_CREDENTIALS = (
    "check the source's user and password (database.user, database.password or its secret "
    "file / env var)"
)
_ASN_SETUP = (
    "set up ASN capture as the guide's section 6.5 says: run asncdctables.sql (the ASNCDC "
    "control tables), then CALL ASNCDC.ADDTABLE('<schema>', '<table>') for each table and "
    "VALUES ASNCDC.ASNCDCSERVICES('reinit','asncdc')"
)

DB2_MESSAGES: Mapping[str, CodeRule] = code_rules(
    CodeRule("SQL30082N", True, "security processing failed (user or password)", _CREDENTIALS),
    CodeRule(
        "SQL1060N",
        True,
        "the user lacks the CONNECT privilege",
        "GRANT CONNECT ON DATABASE TO USER <capture user>",
    ),
    CodeRule(
        "SQL1013N",
        True,
        "the database alias or name was not found",
        "check database.dbname (the database name, or its catalogued alias)",
    ),
    CodeRule(
        "SQL0204N",
        True,
        "an undefined name (the ASN control tables or a CD table do not exist)",
        _ASN_SETUP,
    ),
    CodeRule(
        "SQL0551N",
        True,
        "the user lacks a privilege on an object",
        "GRANT SELECT on the ASNCDC control and CD tables and on the captured tables to the "
        "capture user",
    ),
    CodeRule("SQL30081N", False, "a communication error (connection lost or refused)", RECONNECT),
    CodeRule("SQL30108N", False, "the connection failed and was rerouted", RECONNECT),
    CodeRule("SQL1224N", False, "the database agent was ended (instance stopping)", RECONNECT),
    CodeRule("SQL1032N", False, "the database manager is not started", RECONNECT),
    CodeRule("SQL1035N", False, "the database is in use (quiesced or exclusive)", RECONNECT),
    CodeRule("SQL0911N", False, "rolled back: deadlock or lock timeout", RECONNECT),
    CodeRule("SQL0913N", False, "the statement failed: deadlock or lock timeout", RECONNECT),
    CodeRule("SQL0952N", False, "the statement was interrupted", RECONNECT),
)
"""Db2 message ids (``SQLnnnnN``)."""

DB2_STATES: Mapping[str, CodeRule] = code_rules(
    CodeRule("28000", True, "invalid authorization specification", _CREDENTIALS),
    CodeRule("08", False, "connection exception", RECONNECT),
    CodeRule("40001", False, "deadlock or lock timeout", RECONNECT),
    CodeRule("40003", False, "the statement's completion is unknown (link lost)", RECONNECT),
    CodeRule("57", False, "a resource is not available or an operator intervened", RECONNECT),
)
"""SQLSTATEs; two-character keys are classes."""

_MESSAGE_ID = re.compile(r"\b(SQL\d{4,5}N)\b")
_DB2_STATE = re.compile(r"SQLSTATE=([0-9A-Z]{5})")


def _message(exc: BaseException) -> str:
    args = getattr(exc, "args", ())
    return str(args[-1]) if args else str(exc)


def db2_code(exc: BaseException) -> tuple[str | None, bool]:
    """The Db2 message id of a pyodbc error (read from its message), or None."""
    match = _MESSAGE_ID.search(_message(exc))
    return (match.group(1), True) if match else (None, False)


def _by_sqlstate(exc: BaseException) -> tuple[str, str, CodeRule] | None:
    found = _DB2_STATE.search(_message(exc))
    args = getattr(exc, "args", ())
    state = found.group(1) if found else None
    if (
        state is None
        and args
        and isinstance(args[0], str)
        and re.fullmatch(r"[0-9A-Z]{5}", args[0])
    ):
        state = args[0]
    if state is None:
        return None
    rule = DB2_STATES.get(state) or DB2_STATES.get(state[:2])
    return None if rule is None else ("SQLSTATE", state, rule)


DB2 = ServerErrors(
    "Db2",
    "message",
    DB2_MESSAGES,
    db2_code,
    second_reading=_by_sqlstate,
    describe=_message,
)
"""Db2's table (pyodbc errors through the Db2 CLI driver)."""
