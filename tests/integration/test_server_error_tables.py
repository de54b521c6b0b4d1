"""SQL Server, Oracle and MongoDB errors are classified by the servers' own codes.

Each driver's real exception classes carry the codes the way the driver sets them: pyodbc's
``(sqlstate, message)`` with the native number in the message, python-oracledb's ``_Error``
(built by the driver's own ``errors`` module, so ``full_code`` and the DPY- translation of a
lost connection are the driver's), pymongo's ``OperationFailure``/``NotPrimaryError`` raised by
pymongo itself from the replies of the MongoDB wire peer. Through the agents: the SQL Server
model refusing a database (4060) and going down (08S01), the Oracle agent's connect, and the
MongoDB agent against a peer answering ``Unauthorized``, ``ShutdownInProgress`` and labelled
errors. Terminal errors name the code and a fix and are never retried; retryable ones are
:class:`SourceUnavailable`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import oracledb
import pyodbc
import pytest
from oracledb import errors as oracle_errors
from pydantic import TypeAdapter

from capture.database_source import DatabaseSource
from capture.errors_mongodb import MONGODB
from capture.errors_oracle import ORACLE
from capture.errors_sqlserver import SQLSERVER
from capture.registry import create_source
from capture.server_errors import RetryPolicy, SourceRefused
from pipeline.cli import is_retryable
from pipeline.config import SourceConfig
from pipeline.errors import CaptureError, SourceUnavailable, Terminal
from tests.integration.test_sqlserver_capture import model, raw
from tests.mongomodel.replset import ReplicaSet
from tests.mongomodel.wire import CommandError, MongoPeer
from tests.mssqlmodel.server import SqlServerModel

__all__ = ["model"]  # test_sqlserver_capture's SQL Server model fixture, used here too


def _terminal(err: CaptureError, code: str, fix: str) -> None:
    assert isinstance(err, SourceRefused), err
    assert err.code == code and code in str(err) and fix in err.fix, (err, err.fix)
    assert "Fix:" in str(err) and not is_retryable(err)


def _retryable(err: CaptureError, code: str) -> None:
    assert isinstance(err, SourceUnavailable), err
    assert err.code == code and code in str(err), err
    assert is_retryable(err)


def _plain(err: CaptureError) -> None:
    assert type(err) is CaptureError, err
    assert not isinstance(err, Terminal) and not is_retryable(err)


def _source(raw: dict[str, Any]) -> DatabaseSource:
    """The agent of ``raw`` with ``errors.max.retries: 0``: the first retryable error is raised,
    not waited on (and the agent must have read the key)."""
    config = TypeAdapter(SourceConfig).validate_python({**raw, "errors.max.retries": 0})
    source = create_source(config)
    assert isinstance(source, DatabaseSource)
    assert source.retry_policy == RetryPolicy(0, 0.3, 10.0), source.retry_policy
    return source


# --- SQL Server --------------------------------------------------------------------------------
def _odbc(cls: type[pyodbc.Error], state: str, text: str, native: int, call: str) -> pyodbc.Error:
    """A pyodbc error as the driver raises it: ``(sqlstate, "[state] [driver][SQL Server]text
    (native) (call)")``."""
    return cls(state, f"[{state}] [FreeTDS][SQL Server]{text} ({native}) ({call})")


@pytest.mark.parametrize(
    ("cls", "state", "text", "native", "fix"),
    [
        (
            pyodbc.InterfaceError,
            "28000",
            "Login failed for user 'cdc'.",
            18456,
            "database.password",
        ),
        (
            pyodbc.ProgrammingError,
            "42000",
            'Cannot open database "nosuch" requested by the login. The login failed.',
            4060,
            "database.names",
        ),
        (
            pyodbc.ProgrammingError,
            "42000",
            "The SELECT permission was denied on the object 'lsn_time_mapping'.",
            229,
            "gating role",
        ),
        (
            pyodbc.ProgrammingError,
            "42000",
            "The database 'plainDB' is not enabled for Change Data Capture.",
            22901,
            "sys.sp_cdc_enable_db",
        ),
    ],
)
def test_sqlserver_refusals_are_terminal(
    cls: type[pyodbc.Error], state: str, text: str, native: int, fix: str
) -> None:
    exc = _odbc(cls, state, text, native, "SQLExecDirectW")
    err = SQLSERVER.classify("mssql", exc, "connect", unknown_retryable=False)
    _terminal(err, str(native), fix)
    assert "read from the message" in str(err)


@pytest.mark.parametrize("native", [40613, 10054, 10060, 233, 1205])
def test_sqlserver_transient_errors_are_retryable(native: int) -> None:
    exc = _odbc(pyodbc.OperationalError, "08S01", "transient", native, "SQLExecDirectW")
    _retryable(SQLSERVER.classify("mssql", exc, "run", unknown_retryable=False), str(native))


def test_sqlserver_sqlstate_decides_when_the_native_number_is_unknown() -> None:
    # FreeTDS's own number 20009 (server unreachable) is in no server table: SQLSTATE 08001 is
    down = _odbc(pyodbc.OperationalError, "08001", "Unable to connect", 20009, "SQLDriverConnect")
    _retryable(SQLSERVER.classify("mssql", down, "connect"), "08001")
    login = pyodbc.Error("28000", "[28000] [unixODBC]Login refused (SQLDriverConnect)")
    _terminal(SQLSERVER.classify("mssql", login, "connect"), "28000", "database.password")
    # a statement SQL Server rejects for an unknown reason: neither terminal nor retried
    odd = _odbc(pyodbc.ProgrammingError, "42000", "Invalid column name 'x'.", 207, "SQLExecDirectW")
    _plain(SQLSERVER.classify("mssql", odd, "run", unknown_retryable=False))


def test_the_sqlserver_agent_stops_on_a_missing_database_and_retries_a_down_server(
    model: SqlServerModel,
) -> None:
    with pytest.raises(SourceRefused) as refused:
        _source(raw(model, **{"database.names": "nosuch"})).open(None)
    _terminal(refused.value, "4060", "database.names")
    model.set_down(True)
    with pytest.raises(SourceUnavailable) as down:
        _source(raw(model)).open(None)
    _retryable(down.value, "08S01")


# --- Oracle ------------------------------------------------------------------------------------
def _oracle(message: str, code: int = 0) -> oracledb.Error:
    """The exception python-oracledb raises for a server error ``code`` (its own ``_Error``
    decides ``full_code``, the DPY- translation and the exception class)."""
    error = oracle_errors._Error(message, code=code)
    exc: oracledb.Error = error.exc_type(error)
    return exc


@pytest.mark.parametrize(
    ("message", "code", "fix"),
    [
        ("ORA-01017: invalid credential or not authorized; logon denied", 1017, "password"),
        ("ORA-28000: The account is locked.", 28000, "ACCOUNT UNLOCK"),
        ("ORA-01031: insufficient privileges", 1031, "LOGMINING"),
        ("ORA-00942: table or view does not exist", 942, "database.pdb.name"),
        ("ORA-01555: snapshot too old: rollback segment number 12", 1555, "UNDO_RETENTION"),
    ],
)
def test_oracle_refusals_are_terminal(message: str, code: int, fix: str) -> None:
    err = ORACLE.classify("ora", _oracle(message, code), "connect")
    _terminal(err, f"ORA-{code:05d}", fix)


@pytest.mark.parametrize("code", [3113, 3114, 3135, 12537, 12514, 12541, 12170, 1291, 310, 1033])
def test_oracle_lost_links_and_log_switch_races_are_retryable(code: int) -> None:
    exc = _oracle(f"ORA-{code:05d}: some text", code)
    _retryable(ORACLE.classify("ora", exc, "read the log"), f"ORA-{code:05d}")


def test_oracle_driver_codes_and_unknown_errors() -> None:
    lost = _oracle("ORA-03113: end-of-file on communication channel", 3113)
    assert lost.args[0].full_code == "DPY-4011"  # the driver translated it; the ORA- code wins
    refused = oracle_errors._create_err(oracle_errors.ERR_CONNECTION_FAILED, "[Errno 111]")
    _retryable(ORACLE.classify("ora", refused.exc_type(refused), "connect"), "DPY-6005")
    # an ORA- error no rule knows: raised as it is, unless the driver calls it recoverable
    _plain(ORACLE.classify("ora", _oracle("ORA-00904: invalid identifier", 904), "run"))
    # the Oracle model's DB-API carries only text: the code is read from it
    from tests.oraclemodel import dbapi

    text_only = dbapi.DatabaseError("ORA-01291: missing logfile")
    err = ORACLE.classify("ora", text_only, "read the log")
    _retryable(err, "ORA-01291")
    assert "read from the message" in str(err)


def test_the_oracle_agent_retries_a_database_it_cannot_reach(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEDALLION_ORACLE_DBAPI", "tests.oraclemodel.dbapi")
    raw = {
        "name": "ora",
        "connector": "oracle",
        "topic.prefix": "server1",
        "database.url": str(tmp_path / "no-model"),
        "database.user": "c##dbzuser",
        "database.password": "dbz",
        "database.dbname": "ORCLCDB",
    }
    with pytest.raises(SourceUnavailable) as down:
        _source(raw).open(None)
    _retryable(down.value, "DPY-6005")
    assert "dbz" not in str(down.value).replace("c##dbzuser", "")


# --- MongoDB -----------------------------------------------------------------------------------
@pytest.fixture
def peer() -> Iterator[MongoPeer]:
    server = MongoPeer(ReplicaSet(seed=3)).start()
    yield server
    server.stop()


def _refuse(peer: MongoPeer, monkeypatch: pytest.MonkeyPatch, error: CommandError) -> None:
    """The peer answers every ``listDatabases`` and ``aggregate`` with ``error``'s document."""

    def fail(command: dict[str, Any]) -> dict[str, Any]:
        raise error

    monkeypatch.setattr(peer, "_cmd_listdatabases", fail)
    monkeypatch.setattr(peer, "_cmd_aggregate", fail)


def _open_and_read(peer: MongoPeer) -> None:
    source = _source(
        {
            "name": "mongo",
            "connector": "mongodb",
            "mongodb.connection.string": peer.uri,
            "topic.prefix": "shop1",
        }
    )
    try:
        source.open(None)
        for _ in range(3):
            source.read_batch(max_events=10, max_transaction_events=10, until=None)
    finally:
        source.close()


@pytest.mark.parametrize(
    ("code", "name", "fix"),
    [
        (13, "Unauthorized", "read role"),
        (18, "AuthenticationFailed", "mongodb.password"),
        (8000, "AtlasError", "Atlas"),
    ],
)
def test_mongodb_refusals_are_terminal(
    peer: MongoPeer, monkeypatch: pytest.MonkeyPatch, code: int, name: str, fix: str
) -> None:
    _refuse(peer, monkeypatch, CommandError(code, name, f"{name}: refused"))
    with pytest.raises(SourceRefused) as refused:
        _open_and_read(peer)
    _terminal(refused.value, str(code), fix)


def test_mongodb_shutdown_and_labelled_errors_are_retryable(
    peer: MongoPeer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 91: pymongo raises NotPrimaryError (an AutoReconnect) with the server's reply
    _refuse(peer, monkeypatch, CommandError(91, "ShutdownInProgress", "shutting down"))
    with pytest.raises(SourceUnavailable) as shutdown:
        _open_and_read(peer)
    _retryable(shutdown.value, "91")
    # an unknown code, labelled resumable by the server: the label decides
    resumable = CommandError(9999, "Made", "try again", ("ResumableChangeStreamError",))
    _refuse(peer, monkeypatch, resumable)
    with pytest.raises(SourceUnavailable) as labelled:
        _open_and_read(peer)
    _retryable(labelled.value, "ResumableChangeStreamError")
    fatal = CommandError(280, "ChangeStreamFatalError", "fatal", ("NonResumableChangeStreamError",))
    _refuse(peer, monkeypatch, fatal)
    with pytest.raises(SourceRefused) as non_resumable:
        _open_and_read(peer)
    _terminal(non_resumable.value, "NonResumableChangeStreamError", "snapshot")
    # no rule, no label: the server answered, the same command would get the same answer
    _refuse(peer, monkeypatch, CommandError(2, "BadValue", "bad value"))
    with pytest.raises(CaptureError) as plain:
        _open_and_read(peer)
    _plain(plain.value)


def test_mongodb_server_selection_timeout_is_retryable() -> None:
    import pymongo
    from pymongo.errors import ServerSelectionTimeoutError

    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        "mongodb://127.0.0.1:1/?directConnection=true", serverSelectionTimeoutMS=50
    )
    with pytest.raises(ServerSelectionTimeoutError) as caught:
        client.admin.command("ping")
    client.close()
    _retryable(MONGODB.classify("mongo", caught.value, "connect"), "ServerSelectionTimeoutError")
