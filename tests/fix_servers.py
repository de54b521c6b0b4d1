"""Real CDC source servers for the tests (pytest plugin, listed in ``tests/conftest.py``).

Fixtures, all session-scoped:

* ``pg_dsn``: libpq DSN of a PostgreSQL 15 with ``wal_level=logical``. Unless ``--pg-dsn`` or
  ``CDC_TEST_PG_DSN`` names a server, a private cluster is started with
  ``scripts/pg_test_cluster.sh`` (initdb + pg_ctl, temp dir, free port) and stopped at the end.
* ``mariadb_conn``: PyMySQL / mysql-replication connection settings (``host``, ``port``,
  ``user``, ``password``) of a MariaDB with a ROW binlog and ``binlog_row_metadata=FULL``. Unless
  ``--mysql-dsn`` or ``CDC_TEST_MYSQL_DSN`` (``mysql://user:password@host:port/db``) names a
  server, a private one is started with ``scripts/mariadb_test_server.sh``. It is one dict for
  the whole run: pass ``dict(mariadb_conn)`` to anything that changes it (``BinLogStreamReader``
  adds a ``charset`` key).
* ``mariadb_dsn``: the same server as a ``mysql://`` URL.
* ``pg_password_user`` / ``mariadb_password_user`` (per test): a capture user that must give a
  random password (the private PostgreSQL asks members of ``medallion_password`` for one, see
  ``scripts/pg_test_cluster.sh``), for wrong-password tests and for hunting the password in
  messages. Dropped afterwards.
* ``own_mariadb``: a private MariaDB for one test (always private: the test may restart it,
  which a shared or given server must not suffer), with ``settings`` and ``restart()``.

:func:`restart_postgres` restarts the PostgreSQL a DSN names (fast shutdown, same data): the
tests that prove an agent reconnects use it on the session's private cluster.

A missing server binary or driver fails the test with a message naming ``make bootstrap``; an
unreachable ``--pg-dsn``/``--mysql-dsn`` fails it too. Nothing here ever skips. Messages name a
server through :func:`redact_dsn`: a DSN's password never reaches the test output.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote, urlparse

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
SCRIPTS_DIR = REPO_ROOT / "scripts"
PG_BIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
PG_ENV = "CDC_TEST_PG_DSN"
MYSQL_ENV = "CDC_TEST_MYSQL_DSN"
_SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin"])
_START_ATTEMPTS = 3  # a free port can be taken between choosing it and the server binding it
_TIMINGS = pytest.StashKey[dict[str, float]]()


def pytest_addoption(parser: pytest.Parser) -> None:
    """Add ``--pg-dsn`` and ``--mysql-dsn`` (defaults from the environment)."""
    group = parser.getgroup("medallion servers")
    group.addoption(
        "--pg-dsn",
        metavar="DSN",
        default=os.environ.get(PG_ENV),
        help=f"use this PostgreSQL instead of a private one (env {PG_ENV})",
    )
    group.addoption(
        "--mysql-dsn",
        metavar="URL",
        default=os.environ.get(MYSQL_ENV),
        help=f"use this MySQL/MariaDB (mysql://user:pw@host:port/db) instead of a private one "
        f"(env {MYSQL_ENV})",
    )


def pytest_configure(config: pytest.Config) -> None:
    """Make room for the server start-up timings shown in the summary."""
    config.stash[_TIMINGS] = {}


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Report how long the private servers took to start."""
    for name, seconds in config.stash.get(_TIMINGS, {}).items():
        terminalreporter.write_line(f"medallion: private {name} started in {seconds:.1f} s")


@pytest.fixture(scope="session")
def pg_dsn(request: pytest.FixtureRequest) -> Iterator[str]:
    """DSN of a PostgreSQL 15 with logical decoding; a private cluster unless one is given."""
    given: str | None = request.config.getoption("--pg-dsn")
    if given:
        _check_pg(given, origin=f"--pg-dsn / {PG_ENV}")
        yield given
        return
    binaries = [str(p) for p in (PG_BIN / "initdb", PG_BIN / "pg_ctl", PG_BIN / "postgres")]
    _require_binaries("PostgreSQL 15 server (Debian package postgresql-15)", binaries)
    if os.geteuid() == 0:
        _require_binaries("runuser (util-linux)", ["runuser"])
    server = _private_server(request.config, "PostgreSQL", "pg_test_cluster.sh", "medallion-pg-")
    with server as (port, _dir):
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        _check_pg(dsn, origin="the private cluster")
        yield dsn


@pytest.fixture(scope="session")
def mariadb_conn(request: pytest.FixtureRequest) -> Iterator[dict[str, Any]]:
    """Connection settings of a MariaDB with a ROW binlog; a private server unless one is given."""
    given: str | None = request.config.getoption("--mysql-dsn")
    if given:
        settings = parse_mysql_dsn(given)
        _check_mysql(settings, origin=f"--mysql-dsn / {MYSQL_ENV}")
        yield settings
        return
    _require_binaries(
        "MariaDB server (Debian package mariadb-server)",
        ["mariadbd", "mariadb-install-db", "mariadb-admin"],
    )
    with _private_server(
        request.config, "MariaDB", "mariadb_test_server.sh", "medallion-mariadb-"
    ) as (port, _dir):
        settings = {"host": "127.0.0.1", "port": port, "user": "root", "password": ""}
        _check_mysql(settings, origin="the private server")
        yield settings


@dataclass
class OwnMariaDb:
    """A private MariaDB of one test: connection settings, and a restart under clients."""

    settings: dict[str, Any]
    directory: Path
    port: int

    def restart(self) -> None:
        """SIGTERM the server, wait for it to exit, start it again on the same data."""
        result = _run_script("mariadb_test_server.sh", "restart", self.directory, self.port)
        assert result.returncode == 0, result.stderr


@pytest.fixture
def own_mariadb(request: pytest.FixtureRequest) -> Iterator[OwnMariaDb]:
    """A private MariaDB for one test (see the module docstring)."""
    _require_binaries(
        "MariaDB server (Debian package mariadb-server)",
        ["mariadbd", "mariadb-install-db", "mariadb-admin"],
    )
    with _private_server(
        request.config, "MariaDB (own)", "mariadb_test_server.sh", "medallion-mariadb-own-"
    ) as (port, directory):
        settings = {"host": "127.0.0.1", "port": port, "user": "root", "password": ""}
        _check_mysql(settings, origin="the test's own server")
        yield OwnMariaDb(settings, directory, port)


@pytest.fixture(scope="session")
def mariadb_dsn(mariadb_conn: dict[str, Any]) -> str:
    """The ``mariadb_conn`` server as ``mysql://user:password@host:port/[database]``."""
    user = quote(str(mariadb_conn["user"]), safe="")
    password = quote(str(mariadb_conn.get("password", "")), safe="")
    database = quote(str(mariadb_conn.get("database", "")), safe="")
    return f"mysql://{user}:{password}@{mariadb_conn['host']}:{mariadb_conn['port']}/{database}"


def restart_postgres(dsn: str) -> None:
    """Restart the PostgreSQL at ``dsn`` with ``pg_ctl restart -m fast`` on its data directory.

    Args:
        dsn: A DSN of a server on this machine (the private cluster).
    """
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
    assert row is not None
    data_dir = str(row[0])
    log = str(Path(data_dir).parent / "server.log")
    command = [str(PG_BIN / "pg_ctl"), "-D", data_dir, "-l", log, "-m", "fast", "-w", "-t", "60"]
    command.append("restart")
    if os.geteuid() == 0:  # the cluster belongs to 'postgres' when the tests run as root
        command = ["runuser", "-u", "postgres", "--", *command]
    subprocess.run(command, check=True, capture_output=True, timeout=120)


_URL_PASSWORD = re.compile(r"(?P<head>^[a-z][a-z0-9+.-]*://[^:/@]*:)[^@]*(?=@)", re.IGNORECASE)
_KEYWORD_PASSWORD = re.compile(r"(?P<head>\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def redact_dsn(dsn: str) -> str:
    """``dsn`` with its password replaced by ``***`` (URL or ``key=value`` form).

    >>> redact_dsn("mysql://root:s3cret@127.0.0.1:3306/db")
    'mysql://root:***@127.0.0.1:3306/db'
    >>> redact_dsn("host=h user=u password='a b' dbname=d")
    'host=h user=u password=*** dbname=d'
    """
    return _KEYWORD_PASSWORD.sub(r"\g<head>***", _URL_PASSWORD.sub(r"\g<head>***", dsn))


@dataclass(frozen=True)
class PasswordUser:
    """A server user that must give its password; ``password`` stays out of the repr."""

    user: str
    password: str = field(repr=False)


@pytest.fixture
def pg_password_user(pg_dsn: str) -> Iterator[PasswordUser]:
    """A PostgreSQL login role with REPLICATION that must give a random password."""
    import psycopg
    from psycopg import sql

    user = PasswordUser(f"medallion_pw_{secrets.token_hex(4)}", secrets.token_urlsafe(18))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "DO $$ BEGIN CREATE ROLE medallion_password NOLOGIN; EXCEPTION "
            "WHEN duplicate_object OR unique_violation THEN NULL; END $$"
        )
        conn.execute(
            sql.SQL("CREATE ROLE {} LOGIN REPLICATION SUPERUSER PASSWORD {} IN ROLE {}").format(
                sql.Identifier(user.user),
                sql.Literal(user.password),
                sql.Identifier("medallion_password"),
            )
        )
    try:
        yield user
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            # What the role created (a publication, a slot's tables) goes with it.
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(user.user)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(user.user)))


@pytest.fixture
def mariadb_password_user(mariadb_conn: dict[str, Any]) -> Iterator[PasswordUser]:
    """A MariaDB user with every privilege that must give a random password."""
    import pymysql

    user = PasswordUser(f"medallion_pw_{secrets.token_hex(4)}", secrets.token_urlsafe(18))
    conn = pymysql.connect(**mariadb_conn, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE USER %s@'%%' IDENTIFIED BY %s", (user.user, user.password))
            cur.execute("GRANT ALL PRIVILEGES ON *.* TO %s@'%%'", (user.user,))
        yield user
    finally:
        with conn.cursor() as cur:
            cur.execute("DROP USER IF EXISTS %s@'%%'", (user.user,))
        conn.close()


def parse_mysql_dsn(dsn: str) -> dict[str, Any]:
    """Turn ``mysql://user:password@host:port/database`` into PyMySQL keyword arguments.

    Args:
        dsn: The URL; scheme ``mysql`` or ``mariadb``; port defaults to 3306.

    Returns:
        ``host``, ``port``, ``user``, ``password`` and, if the path names one, ``database``.

    Raises:
        ValueError: The scheme or host is missing or wrong.
    """
    url = urlparse(dsn)
    if url.scheme not in ("mysql", "mariadb") or not url.hostname:
        raise ValueError(f"not a mysql://user:password@host:port/db URL: {redact_dsn(dsn)!r}")
    settings: dict[str, Any] = {
        "host": url.hostname,
        "port": url.port or 3306,
        "user": unquote(url.username or "root"),
        "password": unquote(url.password or ""),
    }
    database = unquote(url.path.lstrip("/"))
    if database:
        settings["database"] = database
    return settings


@contextlib.contextmanager
def _private_server(
    config: pytest.Config, name: str, script: str, prefix: str
) -> Iterator[tuple[int, Path]]:
    """Start a private server with one of the scripts; stop it and remove its dir on exit."""
    errors: list[str] = []
    started = time.monotonic()
    for _ in range(_START_ATTEMPTS):
        # Directly under the system temp dir: pytest's tmp dirs are mode 0700, and the server runs
        # as the 'postgres'/'mysql' user when the tests run as root.
        directory = Path(tempfile.mkdtemp(prefix=prefix))
        port = _free_port()
        result = _run_script(script, "start", directory, port)
        if result.returncode == 0:
            break
        errors.append(f"port {port}: exit {result.returncode}\n{result.stderr.strip()}")
        _run_script(script, "stop", directory)
        shutil.rmtree(directory, ignore_errors=True)
    else:
        pytest.fail(
            f"could not start the private {name} with scripts/{script}:\n" + "\n".join(errors),
            pytrace=False,
        )
    config.stash[_TIMINGS][name] = time.monotonic() - started
    try:
        yield port, directory
    finally:
        result = _run_script(script, "stop", directory)
        if result.returncode != 0:
            print(f"stopping the private {name} failed: {result.stderr.strip()}")


def _run_script(
    script: str, command: str, directory: Path, port: int | None = None
) -> subprocess.CompletedProcess[str]:
    args = ["bash", str(SCRIPTS_DIR / script), command, str(directory)]
    if port is not None:
        args.append(str(port))
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PATH": _SBIN_PATH},
        stdin=subprocess.DEVNULL,
        check=False,
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _require_binaries(what: str, binaries: list[str]) -> None:
    missing = [b for b in binaries if shutil.which(b, path=_SBIN_PATH) is None]
    if missing:
        pytest.fail(
            f"{what} is not installed (missing: {', '.join(missing)}). Run `make bootstrap`, "
            "which installs it; these tests never skip.",
            pytrace=False,
        )


def _check_pg(dsn: str, *, origin: str) -> None:
    try:
        import psycopg
    except ImportError:
        pytest.fail("psycopg is not installed: run `make bootstrap`", pytrace=False)
    try:
        with psycopg.connect(dsn, connect_timeout=10, autocommit=True) as conn:
            conn.execute("SELECT 1")
    except psycopg.Error as exc:
        pytest.fail(
            f"cannot connect to PostgreSQL from {origin} ({redact_dsn(dsn)}): {exc}", pytrace=False
        )


def _check_mysql(settings: dict[str, Any], *, origin: str) -> None:
    try:
        import pymysql
    except ImportError:
        pytest.fail("PyMySQL is not installed: run `make bootstrap`", pytrace=False)
    try:
        conn = pymysql.connect(**settings, connect_timeout=10)
    except pymysql.MySQLError as exc:
        where = f"{settings['host']}:{settings['port']}"
        pytest.fail(
            f"cannot connect to MariaDB/MySQL from {origin} ({where}): {exc}", pytrace=False
        )
    conn.close()
