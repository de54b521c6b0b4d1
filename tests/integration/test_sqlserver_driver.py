"""The real driver path of the SQL Server agent: pyodbc with FreeTDS's ODBC driver (Debian
``unixodbc`` + ``tdsodbc``, installed by the bootstrap), up to the network.

No SQL Server runs here, so the path ends at the socket: a refused connection and one the peer
closes at once must both be the agent's retryable outage (:class:`SourceUnavailable`, which
:class:`capture.database_source.DatabaseSource` retries with backoff) with a message naming the
server and never the password. A missing pyodbc, unixODBC or FreeTDS fails here, never skips.

With ``MEDALLION_TEST_SQLSERVER_DSN`` set (``host,port,user,password,database``, a database
with CDC enabled and SQL Server Agent running), the agent lands that server's changes; set and
unreachable, the test fails.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from pydantic import SecretStr

from capture.sqlserver.connection import Session
from capture.sqlserver.settings import DBAPI_ENV, SqlServerSettings
from pipeline.errors import Retryable, SourceUnavailable

LIVE_DSN = "MEDALLION_TEST_SQLSERVER_DSN"
PASSWORD = "s3cret-Pa55"


def settings(port: int) -> SqlServerSettings:
    """pyodbc (whatever the environment says) towards 127.0.0.1:``port``."""
    return SqlServerSettings(
        host="127.0.0.1",
        port=port,
        user="sa",
        databases=("testDB",),
        password=SecretStr(PASSWORD),
        dbapi_module="pyodbc",
    )


@pytest.fixture
def closed_port() -> int:
    """A port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def hanging_up() -> Iterator[int]:
    """A peer that accepts each connection and closes it at once."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_pyodbc_and_freetds_are_installed() -> None:
    import pyodbc

    drivers = pyodbc.drivers()
    assert "FreeTDS" in drivers or any(Path("/usr/lib").glob("*/odbc/libtdsodbc.so")), drivers


def test_a_refused_connection_is_a_retryable_outage(closed_port: int) -> None:
    with pytest.raises(SourceUnavailable) as caught:
        Session(settings(closed_port), "testDB", "mssql")
    message = str(caught.value)
    assert isinstance(caught.value, Retryable)
    assert f"cannot connect to SQL Server 127.0.0.1:{closed_port}/testDB" in message
    assert "Unable to connect" in message and PASSWORD not in message


def test_a_connection_the_server_closes_is_a_retryable_outage(hanging_up: int) -> None:
    with pytest.raises(SourceUnavailable) as caught:
        Session(settings(hanging_up), "testDB", "mssql")
    assert f"127.0.0.1:{hanging_up}" in str(caught.value)
    assert PASSWORD not in str(caught.value)


if os.environ.get(LIVE_DSN):  # defined only when a server is named: it fails, never skips

    def test_a_live_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        dsn = os.environ[LIVE_DSN]
        monkeypatch.delenv(DBAPI_ENV, raising=False)
        from tests.contract.harness import land

        host, port, user, password, database = dsn.split(",")
        raw = {
            "name": "live",
            "connector": "sqlserver",
            "topic.prefix": "live",
            "database.hostname": host,
            "database.port": int(port),
            "database.user": user,
            "database.password": password,
            "database.names": database,
            "snapshot.mode": "schema_only",
            "heartbeat.interval.ms": 1,
        }
        # Set and unreachable: the agent's retries end in SourceUnavailable, and the test fails.
        # Reachable: CDC checks, max LSN, capture instances and a window read, then a heartbeat.
        result = land(raw, tmp_path / "lake")
        assert result.landed >= 1


def test_a_missing_driver_says_what_to_install(closed_port: int) -> None:
    from dataclasses import replace

    from pipeline.errors import NotInstalledError, Terminal

    missing = replace(settings(closed_port), dbapi_module="medallion_no_such_odbc_module")
    with pytest.raises(NotInstalledError, match=r"pip install '\.\[sqlserver\]'") as caught:
        Session(missing, "testDB", "mssql")
    assert isinstance(caught.value, Terminal) and "tdsodbc" in str(caught.value)
