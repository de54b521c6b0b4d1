"""Oracle's ORA- errors and python-oracledb's DPY- errors, mapped to what a runner may do.

python-oracledb raises its exceptions with one argument, an ``_Error`` whose ``code`` is the
ORA- number (0 for the driver's own errors) and whose ``full_code`` is ``ORA-01017`` or, for
the driver's own errors and the ORA- errors it translates (a lost connection, ORA-03113,
becomes ``DPY-4011``), ``DPY-nnnn``. The ORA- number is read first, so a translated error keeps
the server's code; then ``full_code``; a DB-API module that carries only text (the test suite's
Oracle model) is read by its ``ORA-nnnnn``/``DPY-nnnn`` prefix. An error no rule knows is
retryable when the driver calls it recoverable (``isrecoverable``) or raised it as an
``OperationalError``/``InterfaceError``; otherwise it is a plain error (not retried).

Sources: the Oracle Database Error Messages reference, python-oracledb's error list
(``src/oracledb/errors.py``: its recoverable codes and the ORA- codes it maps to
``DPY-4011``), Debezium's ``OracleErrorHandler`` (the LogMiner errors it retries) and the seed
Oracle document (ORA-01555 during the snapshot: raise ``UNDO_RETENTION`` or skip the snapshot).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from capture.server_errors import RECONNECT, CodeRule, ServerErrors, code_rules

__all__ = ["ORACLE", "ORACLE_ERRORS", "oracle_code"]

_CREDENTIALS = (
    "check the source's user and password (database.user, database.password or its secret "
    "file / env var)"
)
_GRANTS = (
    "grant the capture user the privileges the seed Oracle document lists, among them CREATE "
    "SESSION, SET "
    "CONTAINER, SELECT ON V_$DATABASE, FLASHBACK ANY TABLE, SELECT ANY TABLE, "
    "SELECT_CATALOG_ROLE, EXECUTE_CATALOG_ROLE, SELECT ANY TRANSACTION, LOGMINING, SELECT ON "
    "V_$LOG, V_$LOGFILE, V_$ARCHIVED_LOG, V_$LOGMNR_CONTENTS and EXECUTE ON DBMS_LOGMNR"
)


ORACLE_ERRORS: Mapping[str, CodeRule] = code_rules(
    CodeRule("ORA-01017", True, "invalid username/password; logon denied", _CREDENTIALS),
    CodeRule("ORA-01005", True, "null password given; logon denied", _CREDENTIALS),
    CodeRule("DPY-4001", True, "no credentials were given", _CREDENTIALS),
    CodeRule(
        "ORA-28000",
        True,
        "the account is locked",
        "unlock the user (ALTER USER ... ACCOUNT UNLOCK) and check the password",
    ),
    CodeRule("ORA-28001", True, "the password has expired", "set a new password for the user"),
    CodeRule("ORA-01045", True, "the user lacks CREATE SESSION", _GRANTS),
    CodeRule("ORA-01031", True, "insufficient privileges", _GRANTS),
    CodeRule(
        "ORA-00942",
        True,
        "table or view does not exist (or the user may not see it)",
        _GRANTS + "; check the table lists and database.pdb.name",
    ),
    CodeRule(
        "ORA-65011",
        True,
        "the pluggable database does not exist",
        "check database.pdb.name (SELECT NAME FROM V$PDBS)",
    ),
    CodeRule(
        "ORA-01325",
        True,
        "archive log mode is off (LogMiner needs it)",
        "enable ARCHIVELOG mode (SHUTDOWN IMMEDIATE; STARTUP MOUNT; ALTER DATABASE ARCHIVELOG; "
        "ALTER DATABASE OPEN) and supplemental logging",
    ),
    CodeRule(
        "ORA-01555",
        True,
        "snapshot too old: the undo the snapshot's flashback query needs is gone",
        "raise UNDO_RETENTION (online, no restart) for the time the snapshot takes, or set "
        "snapshot.mode=schema_only and take an incremental snapshot",
    ),
    CodeRule(
        "DPY-4000",
        True,
        "the connect alias is not in tnsnames.ora",
        "check database.url / database.dbname and the tnsnames.ora the driver reads",
    ),
    CodeRule(
        "DPY-3010",
        True,
        "the thin driver does not support this database version",
        "use Oracle Database 12.1 or later",
    ),
    CodeRule(
        "DPY-3015",
        True,
        "the thin driver does not support the user's password verifier",
        "give the user a 12c password verifier (reset the password with "
        "SQLNET.ALLOWED_LOGON_VERSION_SERVER >= 12)",
    ),
    CodeRule(
        "ORA-12514",
        False,
        "the listener does not know the service (yet: a database starting registers late)",
        RECONNECT + "; if it persists, check the service name (database.dbname / database.url)",
    ),
    CodeRule("ORA-12541", False, "no listener at the address", RECONNECT),
    CodeRule("ORA-12543", False, "the destination host is unreachable", RECONNECT),
    CodeRule("ORA-12170", False, "the connect timed out", RECONNECT),
    CodeRule("ORA-12537", False, "the connection was closed", RECONNECT),
    CodeRule("ORA-12547", False, "lost contact", RECONNECT),
    CodeRule("ORA-03113", False, "end-of-file on the communication channel", RECONNECT),
    CodeRule("ORA-03114", False, "not connected to Oracle", RECONNECT),
    CodeRule("ORA-03135", False, "the connection lost contact", RECONNECT),
    CodeRule("ORA-01033", False, "Oracle initialization or shutdown in progress", RECONNECT),
    CodeRule("ORA-01034", False, "Oracle is not available", RECONNECT),
    CodeRule("ORA-01089", False, "immediate shutdown in progress", RECONNECT),
    CodeRule("ORA-01090", False, "shutdown in progress", RECONNECT),
    CodeRule("ORA-00028", False, "the session was killed", RECONNECT),
    CodeRule(
        "ORA-01291",
        False,
        "missing logfile: a log LogMiner was given is gone (switched or archived meanwhile)",
        "the agent registers the logs again and retries; the offset's SCN being gone from "
        "every log is reported as such",
    ),
    CodeRule(
        "ORA-00310",
        False,
        "an archived log holds another sequence than the one required (a log switch raced)",
        "the agent registers the logs again and retries",
    ),
    CodeRule("ORA-01284", False, "a redo or archive log cannot be opened now", RECONNECT),
    CodeRule("ORA-01333", False, "LogMiner could not establish its dictionary", RECONNECT),
    CodeRule("ORA-04030", False, "out of process memory", RECONNECT),
    CodeRule("DPY-4011", False, "the database or network closed the connection", RECONNECT),
    CodeRule("DPY-6005", False, "cannot connect to the database", RECONNECT),
    CodeRule("DPY-6000", False, "the listener refused the connection", RECONNECT),
    CodeRule(
        "DPY-6001",
        False,
        "the listener does not know the service (yet)",
        RECONNECT + "; if it persists, check the service name (database.dbname / database.url)",
    ),
    CodeRule("DPY-4024", False, "the call timed out", RECONNECT),
    CodeRule("DPY-1001", False, "not connected (the connection was closed)", RECONNECT),
)
"""``ORA-nnnnn`` and ``DPY-nnnn`` codes."""

_CODE_IN_TEXT = re.compile(r"\b(ORA-\d{5}|DPY-\d{4})\b")


def oracle_code(exc: BaseException) -> tuple[str | None, bool]:
    """``ORA-nnnnn`` (the server's number, even when the driver translated it) or
    ``DPY-nnnn`` of a python-oracledb error; read from the text for a text-only DB-API error.
    """
    args = getattr(exc, "args", ())
    error = args[0] if args else None
    number = getattr(error, "code", 0)
    if isinstance(number, int) and not isinstance(number, bool) and number > 0:
        return f"ORA-{number:05d}", False
    full = getattr(error, "full_code", "")
    if isinstance(full, str) and full:
        return full, False
    match = _CODE_IN_TEXT.search(str(exc))
    return (match.group(1), True) if match else (None, False)


_RECOVERABLE = CodeRule("recoverable", False, "the driver calls the error recoverable", RECONNECT)
_CONNECTION_LEVEL = CodeRule(
    "connection-level", False, "a connection-level driver error", RECONNECT
)


def _recoverable(exc: BaseException) -> tuple[str, str, CodeRule] | None:
    args = getattr(exc, "args", ())
    if args and getattr(args[0], "isrecoverable", False) is True:
        return "error", oracle_code(exc)[0] or type(exc).__name__, _RECOVERABLE
    names = {cls.__name__ for cls in type(exc).__mro__}
    if names & {"OperationalError", "InterfaceError"}:
        return "error", oracle_code(exc)[0] or type(exc).__name__, _CONNECTION_LEVEL
    return None


ORACLE = ServerErrors(
    "Oracle", "error", ORACLE_ERRORS, oracle_code, _recoverable, unknown_retryable=False
)
"""Oracle's table (python-oracledb errors)."""
