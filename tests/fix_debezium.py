"""Real Debezium in the tests (pytest plugin, listed in ``tests/conftest.py``).

Debezium Embedded runs in its own JVM (``tests/debezium``: a small ``DebeziumEngine`` main,
compiled by ``make bootstrap`` into ``.cache/debezium/<postgres|mariadb>``; see
docs/debezium-embedded.md). It appends every record to a JSON-lines file in medallion's
``kafka_json`` line format, which the ``debezium_json`` source reads.

Fixtures, function-scoped:

* ``dbz_pg``: a :class:`PgDebezium`, the test's corner of the ``pg_dsn`` server (its own schema,
  replication slot and publication, a marker table) with ``runner()`` to create runners for it.
* ``dbz_mariadb``: a :class:`MariaDbDebezium` on ``mariadb_conn`` (its own database, a
  least-privilege user with a random password, a unique server id, a marker table).

A runner is started, a workload runs, then :meth:`DebeziumCorner.sync` writes a row to the
marker table and waits until Debezium has written its event: everything committed before it is
then in the output. ``runner.stop()`` sends SIGTERM (the engine commits its offsets); a second
``start()`` resumes from them. On a timeout or an exited runner the test fails with the runner's
log tail (credentials redacted). A missing JVM or runner fails the test naming
``make bootstrap``; nothing here skips.

The classes do not need pytest: ``tests/fixtures/debezium_real/record.py`` uses them to record
the committed fixtures.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import secrets
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import orjson
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
DEBEZIUM_DIR = Path(os.environ.get("MEDALLION_DEBEZIUM_DIR") or REPO_ROOT / ".cache" / "debezium")
FETCH_SCRIPT = REPO_ROOT / "scripts" / "fetch_debezium.sh"
RUNNER_CLASS = "medallion.debezium.Runner"
TOPIC_PREFIX = "dbz"
MARKER_TABLE = "medallion_marker"
SYNC_DIRECTIVE = "-- medallion: sync"
"""A line of a workload script (see :func:`split_script`) where Debezium is waited for."""

JVM_OPTIONS = (
    # A short-lived, small JVM on a shared 2-core machine: C1 only, one GC thread, small heap.
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xmx384m",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
    "-Dorg.slf4j.simpleLogger.log.org.apache.kafka=warn",
)

ENGINE_PROPERTIES: dict[str, str] = {
    "offset.storage": "org.apache.kafka.connect.storage.FileOffsetBackingStore",
    "offset.flush.interval.ms": "0",
    "topic.prefix": TOPIC_PREFIX,
    "converter.schemas.enable": "true",
    # Kafka's JsonConverter writes a column's default instead of an explicit NULL unless told
    # not to (replace.null.with.default, default true): the output would differ from the source.
    "converter.replace.null.with.default": "false",
    "skipped.operations": "none",
    "provide.transaction.metadata": "true",
    "tombstones.on.delete": "true",
    "decimal.handling.mode": "precise",
    "include.schema.changes": "true",
    "snapshot.mode": "initial",
}
"""Engine and connector properties of every test runner (docs/debezium-embedded.md says why)."""

PG_PROPERTIES: dict[str, str] = {
    "connector.class": "io.debezium.connector.postgresql.PostgresConnector",
    "plugin.name": "pgoutput",
    "publication.autocreate.mode": "filtered",
    "interval.handling.mode": "string",
    "time.precision.mode": "adaptive",
}
MARIADB_PROPERTIES: dict[str, str] = {
    "connector.class": "io.debezium.connector.mariadb.MariaDbConnector",
    "schema.history.internal": "io.debezium.storage.file.history.FileSchemaHistory",
    "time.precision.mode": "adaptive_time_microseconds",
    "bigint.unsigned.handling.mode": "precise",
}

STOP_TIMEOUT = 60.0
"""Seconds SIGTERM may take (the runner waits up to 60 s for the engine itself)."""

_runtime_checked: set[str] = set()
TIMINGS: dict[str, list[float]] = {}
"""Seconds from a runner's start to its first completed sync, per runner kind."""


class DebeziumError(AssertionError):
    """The runner is missing, failed, or did not write an expected event in time.

    An ``AssertionError`` so that pytest reports it as a test failure with its message.
    """


def require_runtime(kind: str) -> Path:
    """The compiled runner of ``kind`` (``postgres``/``mariadb``), checked once per process.

    Raises:
        DebeziumError: No ``java``, or the runner is missing or older than its sources; the
            message names ``make bootstrap``.
    """
    home = DEBEZIUM_DIR / kind
    if kind in _runtime_checked:
        return home
    if shutil.which("java") is None:
        raise DebeziumError(
            "java is not installed: the Debezium runner needs a JDK 17 (Debian package "
            "openjdk-17-jdk-headless). Run `make bootstrap`; these tests never skip."
        )
    env = {**os.environ, "MEDALLION_DEBEZIUM_DIR": str(DEBEZIUM_DIR)}
    check = subprocess.run(
        ["bash", str(FETCH_SCRIPT), "--check"],
        capture_output=True,
        text=True,
        env=env,
        stdin=subprocess.DEVNULL,
        timeout=120,
        check=False,
    )
    if check.returncode != 0 or not (home / "classes").is_dir():
        raise DebeziumError(
            f"the Debezium runner in {DEBEZIUM_DIR} is missing or stale: "
            f"{check.stderr.strip() or 'no ' + str(home)}. Run `make bootstrap`; "
            "these tests never skip."
        )
    _runtime_checked.update(("postgres", "mariadb"))
    return home


def payload(obj: Any) -> Any:
    """The payload of a JsonConverter ``{"schema", "payload"}`` pair; anything else as is."""
    if isinstance(obj, dict) and obj.keys() == {"schema", "payload"}:
        return obj["payload"]
    return obj


class DebeziumRunner:
    """One Debezium Embedded process and its files (properties, offsets, output, log).

    Args:
        kind: ``postgres`` or ``mariadb``: which compiled runner (Debezium version) to use.
        workdir: Directory of this runner's files; created.
        properties: Every engine property; written to ``engine.properties`` (mode 0600).
        secrets: Texts (passwords) never shown: redacted from log tails.
    """

    def __init__(
        self,
        kind: str,
        workdir: Path,
        properties: Mapping[str, str],
        secrets: tuple[str, ...] = (),
    ) -> None:
        self.kind = kind
        self.workdir = workdir
        self.properties = dict(properties)
        self.secrets = tuple(s for s in secrets if s)
        self.output = workdir / "output.jsonl"
        self.log = workdir / "runner.log"
        self.properties_file = workdir / "engine.properties"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.starts = 0
        self._read_bytes = 0
        self._records: list[dict[str, Any]] = []
        self._first_sync: float | None = None
        self._exit_reported = False

    # --- process ---------------------------------------------------------------------------
    def start(self) -> None:
        """Start the JVM; returns at once (use :meth:`DebeziumCorner.sync` to wait)."""
        if self.proc is not None and self.proc.poll() is None:
            raise DebeziumError(f"the {self.kind} runner in {self.workdir} is already running")
        home = require_runtime(self.kind)
        self.workdir.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.properties_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            for key, value in sorted(self.properties.items()):
                handle.write(f"{_escape_property(key)}={_escape_property(value)}\n")
        classpath = f"{home / 'classes'}{os.pathsep}{home / 'lib' / '*'}"
        command = [
            "java",
            *JVM_OPTIONS,
            "-cp",
            classpath,
            RUNNER_CLASS,
            str(self.properties_file),
            str(self.output),
        ]
        with self.log.open("ab") as log:
            log.write(f"--- medallion: start #{self.starts + 1}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                command, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        self.started_at = time.monotonic()
        self.starts += 1
        self._first_sync = None

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM: the engine stops and commits its offsets; fail if it does not exit cleanly."""
        proc = self.proc
        if proc is None or proc.poll() is not None:
            self._check_exit()
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            raise DebeziumError(
                f"the {self.kind} runner did not stop within {timeout:.0f} s of SIGTERM; "
                f"killed.\n{self.log_tail()}"
            ) from None
        self._check_exit()

    def kill(self) -> None:
        """SIGKILL, as a crash would (offsets committed so far survive; nothing else)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def _check_exit(self) -> None:
        code = None if self.proc is None else self.proc.returncode
        # 143 = 128 + SIGTERM: the JVM exits with it after its shutdown hook ran.
        if code not in (None, 0, 143, -signal.SIGTERM) and not self._exit_reported:
            raise DebeziumError(f"the {self.kind} runner exited with {code}\n{self.log_tail()}")

    # --- output ----------------------------------------------------------------------------
    def records(self) -> list[dict[str, Any]]:
        """Every record written so far (complete lines only), parsed, in file order."""
        if not self.output.exists():
            return self._records
        with self.output.open("rb") as handle:
            handle.seek(self._read_bytes)
            chunk = handle.read()
        end = chunk.rfind(b"\n") + 1  # a batch may be flushed in pieces: whole lines only
        for line in chunk[:end].splitlines():
            if line.strip():
                self._records.append(orjson.loads(line))
        self._read_bytes += end
        return self._records

    def wait_for(
        self, predicate: Callable[[dict[str, Any]], bool], what: str, timeout: float = 90.0
    ) -> dict[str, Any]:
        """Wait until a record matching ``predicate`` is in the output; return it.

        Raises:
            DebeziumError: The runner exited, or ``timeout`` passed; with the log tail.
        """
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            records = self.records()
            for record in records[seen:]:
                if predicate(record):
                    return record
            seen = len(records)
            if self.proc is None or self.proc.poll() is not None:
                code = None if self.proc is None else self.proc.returncode
                self._exit_reported = True  # not again when the fixture stops the runner
                raise DebeziumError(
                    f"the {self.kind} runner is not running (exit code {code}) while waiting "
                    f"for {what}; {len(records)} record(s) in {self.output}\n{self.log_tail()}"
                )
            if time.monotonic() > deadline:
                raise DebeziumError(
                    f"Debezium ({self.kind}) did not write {what} within {timeout:.0f} s; "
                    f"{len(records)} record(s) in {self.output}\n{self.log_tail()}"
                )
            time.sleep(0.1)

    def note_synced(self) -> None:
        """Record the start-to-first-sync time of this start (for the session summary)."""
        if self._first_sync is None:
            self._first_sync = time.monotonic() - self.started_at
            TIMINGS.setdefault(self.kind, []).append(self._first_sync)

    def log_tail(self, lines: int = 40) -> str:
        """The log's ERROR and ``Caused by`` lines, then its last ``lines`` lines; secrets
        redacted."""
        try:
            text = self.log.read_text(errors="replace")
        except FileNotFoundError:
            return f"(no log at {self.log})"
        all_lines = text.splitlines()
        causes = [line for line in all_lines if " ERROR " in line or line.startswith("Caused by:")][
            -10:
        ]
        tail = "\n".join(all_lines[-lines:])
        out = f"--- last {lines} lines of {self.log}:\n{tail}"
        if causes:
            out = "--- errors in the runner's log:\n" + "\n".join(causes) + "\n" + out
        for secret in self.secrets:
            out = out.replace(secret, "********")
        return out


def _escape_property(text: str) -> str:
    # java.util.Properties: backslash escapes; '=' ':' '#' '!' and leading blanks are special.
    out = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
    out = re.sub(r"([=:#!])", r"\\\1", out)
    return "\\ " + out[1:] if out.startswith(" ") else out


def split_script(text: str) -> list[str]:
    """Statements of a workload script, and :data:`SYNC_DIRECTIVE` where one stands alone.

    A statement ends with ``;`` at the end of a line; lines starting with ``--`` are comments.
    Transactions are written out (``BEGIN;`` ... ``COMMIT;``): each statement is sent on its
    own in autocommit mode.
    """
    statements: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        stripped = line.strip()
        if stripped == SYNC_DIRECTIVE:
            if current:
                raise ValueError(f"{SYNC_DIRECTIVE} inside a statement: {' '.join(current)}")
            statements.append(SYNC_DIRECTIVE)
            continue
        if not stripped or stripped.startswith("--"):
            continue
        current.append(line)
        if stripped.endswith(";"):
            statements.append("\n".join(current).strip().removesuffix(";"))
            current = []
    if current:
        raise ValueError(f"unterminated statement at the end of the script: {' '.join(current)}")
    return statements


class DebeziumCorner:
    """A test's private part of a database server, with Debezium runners for it.

    Subclasses say how to run SQL there and which connector properties to use.
    """

    KIND: ClassVar[str]
    """The runner kind (``postgres``/``mariadb``)."""
    PROPERTIES: ClassVar[dict[str, str]]
    """The connector's own properties, on top of :data:`ENGINE_PROPERTIES`."""

    def __init__(self, workdir: Path, tag: str) -> None:
        self.workdir = workdir
        self.tag = tag
        self.runners: list[DebeziumRunner] = []
        self._marker_ids = itertools.count(1)

    # --- subclass hooks -------------------------------------------------------------------
    def execute(self, *statements: str) -> None:
        """Run statements one by one in autocommit mode."""
        raise NotImplementedError

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Rows of one query."""
        raise NotImplementedError

    def session(self) -> contextlib.AbstractContextManager[Callable[[str], None]]:
        """One autocommit connection whose unqualified names resolve in :attr:`namespace`;
        yields a function that runs one statement."""
        raise NotImplementedError

    def connector_properties(self, workdir: Path) -> dict[str, str]:
        """Connection and capture properties of this corner (``workdir``: the runner's)."""
        raise NotImplementedError

    @property
    def namespace(self) -> str:
        """Schema (PostgreSQL) or database (MariaDB) holding the test's tables."""
        raise NotImplementedError

    @property
    def secrets(self) -> tuple[str, ...]:
        return ()

    def setup(self) -> None:
        """Create the corner (schema or database, user, marker table)."""
        raise NotImplementedError

    def teardown(self) -> None:
        """Stop the runners and remove everything :meth:`setup` and the runners created."""
        raise NotImplementedError

    # --- shared ---------------------------------------------------------------------------
    def topic(self, table: str) -> str:
        """Debezium's topic of a table of this corner."""
        return f"{TOPIC_PREFIX}.{self.namespace}.{table}"

    def runner(self, **overrides: str) -> DebeziumRunner:
        """A new (not started) runner of this corner; ``overrides`` replace properties
        (use ``converter_schemas_enable="false"`` style: ``_`` stands for ``.``)."""
        number = len(self.runners) + 1
        workdir = self.workdir / f"debezium-{self.KIND}-{number}"
        properties = {
            **ENGINE_PROPERTIES,
            **self.PROPERTIES,
            "name": f"medallion-{self.tag}-{number}",
            "offset.storage.file.filename": str(workdir / "offsets.dat"),
            **self.connector_properties(workdir),
        }
        properties.update({k.replace("_", "."): v for k, v in overrides.items()})
        runner = DebeziumRunner(self.KIND, workdir, properties, self.secrets)
        self.runners.append(runner)
        return runner

    def sync(self, runner: DebeziumRunner, timeout: float = 90.0) -> int:
        """Write a marker row and wait for its event: all earlier commits are then written.

        Returns:
            The marker row's id.
        """
        marker = next(self._marker_ids)
        self.execute(
            f"INSERT INTO {self.namespace}.{MARKER_TABLE} (id, note) VALUES ({marker}, 'sync')"
        )
        topic = self.topic(MARKER_TABLE)

        def is_marker(record: dict[str, Any]) -> bool:
            if record.get("topic") != topic:
                return False
            value = payload(record.get("value"))
            after = value.get("after") if isinstance(value, dict) else None
            return isinstance(after, dict) and after.get("id") == marker

        runner.wait_for(is_marker, f"the marker event {topic} id={marker}", timeout)
        runner.note_synced()
        return marker

    def run_script(self, runner: DebeziumRunner | None, text: str) -> int:
        """Run a workload script (:func:`split_script`); sync where it says so.

        Returns:
            The number of statements run.
        """
        count = 0
        with self.session() as run:  # one session: BEGIN ... COMMIT spans statements
            for statement in split_script(text):
                if statement == SYNC_DIRECTIVE:
                    if runner is not None:
                        self.sync(runner)
                    continue
                run(statement)
                count += 1
        return count

    def stop_runners(self) -> None:
        """Stop every runner still running (SIGTERM); the first failure is raised."""
        errors = []
        for runner in self.runners:
            try:
                runner.stop()
            except DebeziumError as exc:
                errors.append(exc)
        if errors:
            raise errors[0]

    def create_marker_table(self) -> None:
        self.execute(
            f"CREATE TABLE {self.namespace}.{MARKER_TABLE} "
            "(id integer PRIMARY KEY, note varchar(40))"
        )


class PgDebezium(DebeziumCorner):
    """A schema, replication slot and publication of their own on a PostgreSQL server."""

    KIND = "postgres"
    PROPERTIES = PG_PROPERTIES

    def __init__(
        self, dsn: str, workdir: Path, tag: str | None = None, schema: str | None = None
    ) -> None:
        import psycopg

        super().__init__(workdir, tag or uuid.uuid4().hex[:8])
        self.dsn = dsn
        self.schema = schema or f"dbz_{self.tag}"
        self.slot = f"dbz_{self.tag}"
        self.publication = f"dbzpub_{self.tag}"
        self._info = dict(psycopg.conninfo.conninfo_to_dict(dsn))
        # With trust authentication (the private cluster) any password is accepted: a random
        # one is given anyway, so that the tests see it never reaches a log.
        self.password = str(self._info.get("password") or secrets.token_hex(12))

    @property
    def namespace(self) -> str:
        return self.schema

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.password,)

    def execute(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement.encode())  # bytes: no placeholders, '%' is literal

    @contextlib.contextmanager
    def session(self) -> Iterator[Callable[[str], None]]:
        import psycopg

        options = f"-c search_path={self.schema}"
        with psycopg.connect(self.dsn, autocommit=True, options=options) as conn:

            def run(statement: str) -> None:
                conn.execute(statement.encode())

            yield run

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(statement.encode() if not params else statement, params).fetchall()

    def setup(self) -> None:
        self.execute(f"CREATE SCHEMA {self.schema}")
        self.create_marker_table()

    def connector_properties(self, workdir: Path) -> dict[str, str]:
        info = self._info
        return {
            "database.hostname": str(info.get("host") or "127.0.0.1"),
            "database.port": str(info.get("port") or 5432),
            "database.user": str(info.get("user") or "postgres"),
            "database.password": self.password,
            "database.dbname": str(info.get("dbname") or "postgres"),
            "slot.name": self.slot,
            "publication.name": self.publication,
            "schema.include.list": self.schema,
        }

    def teardown(self) -> None:
        """Stop the runners, drop the slot (after ending its session), publication, schema."""
        try:
            self.stop_runners()
        finally:
            self.execute(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                f"WHERE slot_name = '{self.slot}' AND active_pid IS NOT NULL"
            )
            for _ in range(100):
                try:
                    self.execute(
                        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                        f"WHERE slot_name = '{self.slot}'"
                    )
                    break
                except Exception:  # the walsender may take a moment to go away
                    time.sleep(0.1)
            self.execute(
                f"DROP PUBLICATION IF EXISTS {self.publication}",
                f"DROP SCHEMA IF EXISTS {self.schema} CASCADE",
            )


class MariaDbDebezium(DebeziumCorner):
    """A database and a least-privilege replication user of their own on a MariaDB server."""

    KIND = "mariadb"
    PROPERTIES = MARIADB_PROPERTIES
    GRANTS = "SELECT, RELOAD, SHOW DATABASES, REPLICATION SLAVE, BINLOG MONITOR, LOCK TABLES"
    """What Debezium's MariaDB connector needs (snapshot with a global read lock, binlog)."""

    def __init__(
        self,
        conn: Mapping[str, Any],
        workdir: Path,
        tag: str | None = None,
        database: str | None = None,
    ) -> None:
        super().__init__(workdir, tag or uuid.uuid4().hex[:8])
        self.conn = dict(conn)
        self.database = database or f"dbz_{self.tag}"
        self.user = f"dbz_{self.tag}"
        self.password = secrets.token_urlsafe(18)
        self.server_id = 6000 + int(uuid.uuid4().int % 3000)

    @property
    def namespace(self) -> str:
        return self.database

    @property
    def secrets(self) -> tuple[str, ...]:
        return (self.password, str(self.conn.get("password") or ""))

    def execute(self, *statements: str) -> None:
        import pymysql

        with pymysql.connect(**self.conn, autocommit=True) as db, db.cursor() as cur:
            for statement in statements:
                cur.execute(statement)

    @contextlib.contextmanager
    def session(self) -> Iterator[Callable[[str], None]]:
        import pymysql

        settings = {**self.conn, "database": self.database, "autocommit": True}
        with pymysql.connect(**settings) as db, db.cursor() as cur:

            def run(statement: str) -> None:
                cur.execute(statement)

            yield run

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        import pymysql

        with pymysql.connect(**self.conn, autocommit=True) as db, db.cursor() as cur:
            cur.execute(statement, params or None)
            return list(cur.fetchall())

    def setup(self) -> None:
        import pymysql

        with pymysql.connect(**self.conn, autocommit=True) as db, db.cursor() as cur:
            cur.execute(f"CREATE DATABASE {self.database}")
            cur.execute(f"CREATE USER '{self.user}'@'%%' IDENTIFIED BY %s", (self.password,))
            cur.execute(f"GRANT {self.GRANTS} ON *.* TO '{self.user}'@'%'")
        self.create_marker_table()

    def connector_properties(self, workdir: Path) -> dict[str, str]:
        return {
            "schema.history.internal.file.filename": str(workdir / "schema-history.dat"),
            "database.hostname": str(self.conn["host"]),
            "database.port": str(self.conn["port"]),
            "database.user": self.user,
            "database.password": self.password,
            "database.server.id": str(self.server_id),
            "database.include.list": self.database,
        }

    def teardown(self) -> None:
        """Stop the runners, drop the database and the user."""
        try:
            self.stop_runners()
        finally:
            self.execute(
                f"DROP DATABASE IF EXISTS {self.database}", f"DROP USER IF EXISTS '{self.user}'@'%'"
            )


# --- fixtures --------------------------------------------------------------------------------


_Corner = TypeVar("_Corner", bound=DebeziumCorner)


def _in_use(corner: _Corner) -> Iterator[_Corner]:
    try:
        require_runtime(corner.KIND)
    except DebeziumError as exc:
        pytest.fail(str(exc), pytrace=False)
    corner.setup()
    yield corner
    corner.teardown()


@pytest.fixture
def dbz_pg(pg_dsn: str, tmp_path: Path) -> Iterator[PgDebezium]:
    """The test's corner of the PostgreSQL server, with Debezium runners (module docstring)."""
    yield from _in_use(PgDebezium(pg_dsn, tmp_path))


@pytest.fixture
def dbz_mariadb(mariadb_conn: dict[str, Any], tmp_path: Path) -> Iterator[MariaDbDebezium]:
    """The test's corner of the MariaDB server, with Debezium runners (module docstring)."""
    yield from _in_use(MariaDbDebezium(mariadb_conn, tmp_path))


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Report how long Debezium runners took from start to their first completed sync."""
    for kind, seconds in sorted(TIMINGS.items()):
        terminalreporter.write_line(
            f"medallion: Debezium runner ({kind}) start to first sync: "
            f"{min(seconds):.1f}-{max(seconds):.1f} s over {len(seconds)} start(s)"
        )
