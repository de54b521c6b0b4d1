"""Chaos run: kill -9 the capture agent and the silver job at random moments, drop and stall
connections, restart the server, feed hostile input, and prove nothing is lost or landed twice.

Against a private PostgreSQL 15 or MariaDB 10.11 (``--engine``; ``scripts/pg_test_cluster.sh``,
``scripts/mariadb_test_server.sh``), a randomized workload
(multi-row inserts, updates, key-changing updates, deletes, on three tables, one of them with a
hostile quoted name and column) runs while a driver, at random moments:

* ``kill -9``s the real ``medallion capture --follow`` process (a child) and starts it again;
* drops every connection through a TCP proxy the agent connects through, or stalls it (bytes
  held back for a while);
* restarts the server (``pg_ctl restart -m fast``; MariaDB: SIGTERM and start);
* appends hostile lines to a Debezium-JSON source (every kind of
  ``tests/integration/test_quarantine.MALFORMED`` plus generated ones: wrong types in each
  envelope field, unknown ops, huge values, hostile identifiers, duplicated and reordered
  records), landed by a second agent that is killed too;
* ``kill -9``s the real ``medallion run --continuous`` (the silver job, a child with its own
  JVM) while it starts or inside its micro-batches, and starts it again
  (``benchmarks/chaos_silver.py``; ``--silver-kills 0`` leaves silver out).

At the end the workload stops, both agents catch up undisturbed, and the run checks:

* **bronze equals the source**: replaying each table's events in position order gives exactly
  the rows the server holds (``rows lost`` = rows missing or different, ``rows extra``);
* **no position twice** in bronze, and no insert of a key bronze already holds
  (``duplicated``);
* **gold equals the source**: after one undisturbed ``medallion run --once``, the project's
  reconciliation (what ``medallion reconcile`` runs, with its independent read of the server)
  is clean for every table, and every silver table holds each key once;
* **every hostile line is accounted for**: quarantined by bronze with a non-empty reason, or
  landed and then applied or quarantined (with a reason) by silver, or a legal record that
  changes no table; ``silent`` counts those found nowhere.

The report prints kills survived by kind (the silver job's by the phase they hit), proxy drops,
stalls, server restarts, hostile inputs tried and where they went, rows lost and duplicated,
the final run and the reconciliation; the run exits 1 unless lost, duplicated, extra, silent,
silver crashes and keys held twice are all 0 and the final run and the reconciliation succeed.
Results also go to ``benchmarks/results/chaos.json`` (one entry per engine).

Usage::

    .venv/bin/python benchmarks/chaos.py                  # long form: >= 200 kills
    .venv/bin/python benchmarks/chaos.py --kills 10 --silver-kills 2 --restarts 1  # short
"""

from __future__ import annotations

import argparse
import json
import os
import random
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import psycopg  # noqa: E402
from deltalake import DeltaTable  # noqa: E402

from benchmarks.chaos_silver import (  # noqa: E402
    SilverKiller,
    final_run,
    medallion,
    verify_in_child,
    verify_lake,
)
from bronze import schema as S  # noqa: E402

PG_BIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
SCHEMA = "chaos"
TABLES = ("accounts", "orders", 'we"ird ü')
"""The captured tables; the last has a hostile name (a quote, a space, non-ASCII)."""
HOSTILE_COLUMN = "select"


# --- the server and the proxy ------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Engine:
    """A private source server, and how the workload and the checks talk to it."""

    NAME = ""
    SOURCE = ""
    SCRIPT = ""
    ERRORS: tuple[type[BaseException], ...] = ()

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"medallion-chaos-{self.SOURCE}-"))
        self.port = _free_port()

    def _script(self, *args: str) -> None:
        script = ROOT / "scripts" / self.SCRIPT
        subprocess.run(["bash", str(script), *args], check=True, capture_output=True, timeout=180)

    def start(self) -> None:
        self._script("start", str(self.dir), str(self.port))

    def restart(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        try:
            self._script("stop", str(self.dir))
        except subprocess.CalledProcessError:
            pass  # already gone

    def connect(self, *, autocommit: bool) -> Any:
        raise NotImplementedError

    def quote(self, name: str) -> str:
        raise NotImplementedError

    def table(self, name: str) -> str:
        return f"{self.quote(SCHEMA)}.{self.quote(name)}"

    def create_tables(self) -> None:
        conn = self.connect(autocommit=True)
        with conn.cursor() as cur:
            cur.execute(self.CREATE_SCHEMA.format(schema=self.quote(SCHEMA)))
            for name in TABLES:
                cur.execute(
                    f"CREATE TABLE {self.table(name)} (id BIGINT PRIMARY KEY, n BIGINT, "
                    f"{self.quote(HOSTILE_COLUMN)} TEXT)"
                )
        conn.close()

    CREATE_SCHEMA = "CREATE SCHEMA {schema}"

    def insert(self, table: str, first: int, last: int) -> str:
        raise NotImplementedError

    def rows(self, name: str) -> list[tuple[Any, ...]]:
        conn = self.connect(autocommit=True)
        with conn.cursor() as cur:
            cur.execute(f"SELECT id, n, {self.quote(HOSTILE_COLUMN)} FROM {self.table(name)}")
            rows = list(cur.fetchall())
        conn.close()
        return rows

    def source_yaml(self, proxy_port: int) -> str:
        raise NotImplementedError


class Postgres(Engine):
    """PostgreSQL 15 (``scripts/pg_test_cluster.sh``)."""

    NAME = "PostgreSQL 15"
    SOURCE = "pg"
    SCRIPT = "pg_test_cluster.sh"
    ERRORS = (psycopg.Error,)

    def restart(self) -> None:
        data = str(self.dir / "data")
        command = [str(PG_BIN / "pg_ctl"), "-D", data, "-l", str(self.dir / "server.log")]
        command += ["-m", "fast", "-w", "-t", "60", "restart"]
        if os.geteuid() == 0:
            command = ["runuser", "-u", "postgres", "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120)

    def connect(self, *, autocommit: bool) -> Any:
        dsn = f"host=127.0.0.1 port={self.port} user=postgres dbname=postgres"
        return psycopg.connect(dsn, autocommit=autocommit, connect_timeout=5)

    def quote(self, name: str) -> str:
        return '"' + name.replace('"', '""') + '"'

    def insert(self, table: str, first: int, last: int) -> str:
        return (
            f"INSERT INTO {table} SELECT g, g * 7, repeat(md5(g::text), %s) "
            f"FROM generate_series({first}::bigint, {last}::bigint) g"
        )

    def source_yaml(self, proxy_port: int) -> str:
        return (
            "  - name: pg\n"
            "    connector: postgresql\n"
            "    database.hostname: 127.0.0.1\n"
            f"    database.port: {proxy_port}\n"
            "    database.user: postgres\n"
            "    database.dbname: postgres\n"
            "    topic.prefix: chaos\n"
            "    slot.name: medallion_chaos\n"
            "    publication.name: medallion_chaos\n"
            f"    schema.include.list: {SCHEMA}\n"
            "    poll.interval.ms: 50\n"
        )


class MariaDb(Engine):
    """MariaDB 10.11 with a ROW binlog (``scripts/mariadb_test_server.sh``)."""

    NAME = "MariaDB 10.11"
    SOURCE = "my"
    SCRIPT = "mariadb_test_server.sh"
    CREATE_SCHEMA = "CREATE DATABASE {schema} CHARACTER SET utf8mb4"

    def __init__(self) -> None:
        import pymysql

        super().__init__()
        self.ERRORS = (pymysql.MySQLError,)

    def restart(self) -> None:
        self._script("restart", str(self.dir), str(self.port))

    def connect(self, *, autocommit: bool) -> Any:
        import pymysql

        return pymysql.connect(
            host="127.0.0.1",
            port=self.port,
            user="root",
            password="",
            autocommit=autocommit,
            connect_timeout=5,
            charset="utf8mb4",
        )

    def quote(self, name: str) -> str:
        return "`" + name.replace("`", "``") + "`"

    def insert(self, table: str, first: int, last: int) -> str:
        return (
            f"INSERT INTO {table} SELECT seq, seq * 7, REPEAT(MD5(seq), %s) "
            f"FROM {self.quote(SCHEMA)}.seq_{first}_to_{last}"
        )

    def source_yaml(self, proxy_port: int) -> str:
        return (
            "  - name: my\n"
            "    connector: mysql\n"
            "    database.hostname: 127.0.0.1\n"
            f"    database.port: {proxy_port}\n"
            "    database.user: root\n"
            f"    database.include.list: {SCHEMA}\n"
            "    topic.prefix: chaos\n"
            "    database.server.id: 5999\n"
            "    poll.interval.ms: 50\n"
        )


ENGINES: dict[str, type[Engine]] = {"postgresql": Postgres, "mariadb": MariaDb}


class Proxy:
    """A TCP proxy between the agent and the server that can drop or stall connections."""

    def __init__(self, target_port: int) -> None:
        self.target = ("127.0.0.1", target_port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._pairs: list[tuple[socket.socket, socket.socket]] = []
        self._lock = threading.Lock()
        self._stalled_until = 0.0
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=10)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._pairs.append((client, upstream))
            threading.Thread(target=self._pump, args=(client, upstream), daemon=True).start()

    def _pump(self, a: socket.socket, b: socket.socket) -> None:
        peers = {a: b, b: a}
        try:
            while True:
                if time.monotonic() < self._stalled_until:
                    time.sleep(0.05)
                    continue
                ready, _, _ = select.select([a, b], [], [], 0.2)
                for sock in ready:
                    chunk = sock.recv(65536)
                    if not chunk:
                        return
                    peers[sock].sendall(chunk)
        except OSError:
            return
        finally:
            for sock in (a, b):
                try:
                    sock.close()
                except OSError:
                    pass

    def drop(self) -> int:
        """Close every open connection (both ends); returns how many."""
        with self._lock:
            pairs, self._pairs = self._pairs, []
        for a, b in pairs:
            for sock in (a, b):
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        return len(pairs)

    def stall(self, seconds: float) -> None:
        """Hold every byte back for ``seconds``."""
        self._stalled_until = time.monotonic() + seconds

    def close(self) -> None:
        self._closed = True
        self.listener.close()
        self.drop()


# --- the workload --------------------------------------------------------------------------------
class Workload:
    """Random transactions until stopped; reconnects through server restarts."""

    def __init__(self, engine: Engine, seed: int, pace: float) -> None:
        self.engine = engine
        self.pace = pace
        self.rng = random.Random(seed)
        self.next_id = 1
        self.transactions = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn = self.engine.connect(autocommit=False)
                try:
                    while not self.stop.is_set():
                        self._transaction(conn)
                        time.sleep(self.rng.uniform(0.0, self.pace))
                finally:
                    try:
                        conn.close()
                    except self.engine.ERRORS:
                        pass
            except self.engine.ERRORS:
                time.sleep(0.2)  # the server restarts; the uncommitted transaction is gone

    def _transaction(self, conn: Any) -> None:
        rng, engine = self.rng, self.engine
        with conn.cursor() as cur:
            for _ in range(rng.randint(1, 6)):
                table = engine.table(rng.choice(TABLES))
                kind = rng.random()
                if kind < 0.5:
                    first = self.next_id
                    self.next_id += rng.randint(1, 5)
                    cur.execute(engine.insert(table, first, self.next_id - 1), [rng.randint(0, 3)])
                elif kind < 0.75:
                    cur.execute(
                        f"UPDATE {table} SET n = n + 1 WHERE id %% 7 = %s", [rng.randint(0, 6)]
                    )
                elif kind < 0.85:
                    # A key change: Debezium's delete + create pair.
                    cur.execute(
                        f"UPDATE {table} SET id = id + 100000000 WHERE id = (SELECT id FROM "
                        f"(SELECT MAX(id) AS id FROM {table} WHERE id < 100000000) AS x)"
                    )
                else:
                    cur.execute(f"DELETE FROM {table} WHERE id %% 13 = %s", [rng.randint(0, 12)])
        conn.commit()
        self.transactions += 1


# --- hostile input -------------------------------------------------------------------------------
def _line(i: int, value: Any, key: Any = None, **extra: Any) -> bytes:
    return orjson.dumps({"key": {"id": i} if key is None else key, "value": value, **extra})


def _good(i: int, **source: Any) -> dict[str, Any]:
    from tests.integration.test_quarantine import SRC

    src = {**SRC, "name": "hostile", "lsn": 1000 + i, "sequence": f'["900","{1000 + i}"]', **source}
    return {"before": None, "after": {"id": i}, "op": "c", "ts_ms": 1, "source": src}


def hostile_lines(start: int) -> Iterator[tuple[str, bytes]]:
    """(kind, line) pairs: the quarantine suite's malformed lines and generated ones."""
    from tests.integration.test_quarantine import MALFORMED

    for n, (line, _fragment) in enumerate(MALFORMED):
        yield f"malformed-{n}", line
    i = start
    for fieldname in ("before", "after", "op", "source", "ts_ms"):
        wrong: tuple[Any, ...] = (7, "x", [1], True, {"nested": {"deep": []}})
        for bad in wrong:
            i += 1
            value = _good(i)
            value[fieldname] = bad
            yield f"wrong-type-{fieldname}-{type(bad).__name__}", _line(i, value)
    for op in ("z", "U", "", "cc", "\u0000"):
        i += 1
        yield f"unknown-op-{op!r}", _line(i, {**_good(i), "op": op})
    for name, table in (
        ("quote", "t'; DROP TABLE x; --"),
        ("dotdot", "../../etc/passwd"),
        ("nul", "a\u0000b"),
        ("long", "t" * 5000),
        ("emoji", "tab\U0001f600le"),
        ("newline", "a\nb"),
    ):
        i += 1
        yield f"identifier-{name}", _line(i, _good(i, table=table))
    i += 1
    yield "huge-value", _line(i, {**_good(i), "after": {"id": i, "blob": "x" * 2_000_000}})
    i += 1
    huge = {"key": {"id": 10**40}, "value": {**_good(i), "after": {"id": 10**40}}}
    yield "huge-int", json.dumps(huge).encode()
    i += 1
    yield "deep-nesting", b'{"key": {"id": 1}, "value": ' + b"[" * 5000 + b"]" * 5000 + b"}"
    i += 1
    yield "binary-garbage", bytes(range(256)).replace(b"\n", b"")
    i += 1
    yield "utf8-invalid", b'{"key": {"id": 1}, "value": "\xff\xfe"}'
    i += 1
    dup = _line(i, _good(i))
    yield "duplicated-1", dup
    yield "duplicated-2", dup
    a, b = _line(i + 1, _good(i + 1)), _line(i + 2, _good(i + 2))
    yield "reordered-later", b
    yield "reordered-earlier", a


# --- the agents ----------------------------------------------------------------------------------
def write_config(work: Path, engine: Engine, proxy_port: int) -> Path:
    config = work / "pipeline.yaml"
    config.write_text(
        "lake: {root: lake}\n"
        "bronze: {max.batch.size: 200, max.transaction.size: 50}\n"
        # The silver job's settings for a 2-core machine (the test suite's); reconciliation
        # runs once at the end, not inside the runs the driver kills.
        "spark: {master: 'local[2]', conf: {spark.sql.shuffle.partitions: '1', "
        "spark.default.parallelism: '1', spark.databricks.delta.snapshotPartitions: '1', "
        "spark.sql.codegen.wholeStage: 'false', spark.driver.memory: 1g}}\n"
        "silver: {apply.parallelism: 2}\n"
        "quality: {reconcile.interval.seconds: null}\n"
        "sources:\n" + engine.source_yaml(proxy_port) + "  - name: hostile\n"
        "    connector: debezium_json\n"
        "    path: inbox\n",
        encoding="utf-8",
    )
    (work / "inbox").mkdir()
    return config


def agent(config: Path, source: str, *, follow: bool) -> subprocess.Popen[bytes]:
    args = ["--log-level", "WARNING", "capture", "-s", source, *(["--follow"] if follow else [])]
    return medallion(config, *args, log_name=f"{source}.log")


def kill9(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def finish(config: Path, source: str) -> None:
    """Land what is left without disturbance; a retryable exit is tried again."""
    for _ in range(10):
        process = agent(config, source, follow=False)
        # A long run's backlog on the loaded machine can take many minutes to land.
        if process.wait(timeout=3600) == 0:
            return
        time.sleep(1)
    raise RuntimeError(f"the {source} agent never finished; see {config.parent / source}.log")


# --- the checks ----------------------------------------------------------------------------------
@dataclass
class Report:
    """What the run did and found."""

    seed: int
    engine: str = ""
    seconds: float = 0.0
    agent_kills: int = 0
    hostile_agent_kills: int = 0
    proxy_drops: int = 0
    connections_dropped: int = 0
    proxy_stalls: int = 0
    server_restarts: int = 0
    transactions: int = 0
    source_rows: int = 0
    bronze_events: int = 0
    hostile_kinds: int = 0
    hostile_lines: int = 0
    hostile_quarantined: int = 0
    hostile_landed: int = 0
    hostile_silent: int = 0
    hostile_silver_quarantined: int = 0
    hostile_applied: int = 0
    hostile_ignored: int = 0
    rows_lost: int = 0
    rows_extra: int = 0
    duplicated: int = 0
    silver: bool = False
    silver_kills: int = 0
    silver_kills_by_phase: dict[str, int] = field(default_factory=dict)
    silver_crashes: int = 0
    silver_startup_median_s: float | None = None
    final_run_ok: bool | None = None
    final_run_seconds: float = 0.0
    reconcile_clean: bool | None = None
    reconcile_tables: list[dict[str, Any]] = field(default_factory=list)
    silver_keys_twice: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def kills(self) -> int:
        return self.agent_kills + self.hostile_agent_kills + self.silver_kills

    @property
    def ok(self) -> bool:
        bronze_ok = not (
            self.rows_lost or self.rows_extra or self.duplicated or self.hostile_silent
        )
        if not self.silver:
            return bronze_ok
        return (
            bronze_ok
            and self.silver_crashes == 0
            and bool(self.final_run_ok)
            and bool(self.reconcile_clean)
            and self.silver_keys_twice == 0
        )


def _events(lake: Path) -> list[dict[str, Any]]:
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    return table.to_pylist()


def check_bronze(engine: Engine, lake: Path, report: Report) -> None:
    events = [e for e in _events(lake) if e[S.SOURCE] == engine.SOURCE]
    report.bronze_events = len(events)
    positions = Counter(e[S.POSITION] for e in events)
    twice = sum(n - 1 for n in positions.values() if n > 1)
    replay: dict[str, dict[Any, Any]] = {name: {} for name in TABLES}
    for e in sorted(events, key=lambda e: e[S.POSITION]):
        if e[S.KIND] != "data":
            continue
        table = e[S.COLLECTION].split(".", 1)[1]
        key = orjson.loads(e[S.KEY_JSON])["id"]
        value = orjson.loads(e[S.VALUE_JSON])
        rows = replay[table]
        if value["op"] == "d":
            rows.pop(key, None)
        else:
            if value["op"] == "c" and key in rows:
                twice += 1
                report.problems.append(f"{table}: insert of key {key} landed twice")
            rows[key] = value["after"]
    report.duplicated = twice
    for name in TABLES:
        source = {r[0]: {"id": r[0], "n": r[1], HOSTILE_COLUMN: r[2]} for r in engine.rows(name)}
        report.source_rows += len(source)
        landed = replay[name]
        lost = [k for k, row in source.items() if landed.get(k) != row]
        extra = [k for k in landed if k not in source]
        report.rows_lost += len(lost)
        report.rows_extra += len(extra)
        if lost or extra:
            report.problems.append(f"{name}: lost/different {lost[:5]}, extra {extra[:5]}")


def check_hostile(lake: Path, sent: list[tuple[str, str]], report: Report) -> None:
    """Each sent line (kind, ``file:line`` origin) is quarantined with a reason, or landed."""
    quarantined: set[str] = set()
    quarantine_path = lake / "bronze" / "quarantine"
    if (quarantine_path / "_delta_log").exists():
        for row in DeltaTable(str(quarantine_path)).to_pyarrow_table().to_pylist():
            if row[S.SOURCE] == "hostile" and row[S.REASON]:
                quarantined.add(_line_origin(row[S.ORIGIN]))
    landed = {_line_origin(e[S.ORIGIN]) for e in _events(lake) if e[S.SOURCE] == "hostile"}
    report.hostile_kinds = len({kind for kind, _ in sent})
    report.hostile_lines = len(sent)
    for kind, origin in sent:
        if origin in quarantined and origin in landed:
            report.duplicated += 1
            report.problems.append(f"hostile line {kind} ({origin}) landed and quarantined")
        elif origin in quarantined:
            report.hostile_quarantined += 1
        elif origin in landed:
            report.hostile_landed += 1
        else:
            report.hostile_silent += 1
            report.problems.append(f"hostile line {kind} ({origin}) neither quarantined nor landed")


def check_hostile_in_silver(
    lake: Path, sent: list[tuple[str, str]], verified: dict[str, Any], report: Report
) -> None:
    """Each hostile line bronze landed is applied by silver (its change is in a silver table,
    or a later change of the same key is), quarantined by silver with a reason, or a legal
    record that changes no table (a tombstone); else it is silent."""
    events = [e for e in _events(lake) if e[S.SOURCE] == "hostile"]
    by_origin = {_line_origin(e[S.ORIGIN]): e for e in events}
    quarantined = {
        _line_origin(q["origin"])
        for q in verified["quarantine"]
        if q["source"] == "hostile" and q["origin"] and q["reason"]
    }
    applied = {p for rows in verified["applied"].values() for p, _key in rows}
    # A change overwritten by a later one of the same key shows the later one's position.
    latest: dict[tuple[str, str], bytes] = {}
    for e in events:
        if e[S.KIND] == "data":
            slot = (e[S.COLLECTION], e[S.KEY_JSON])
            latest[slot] = max(latest.get(slot, e[S.POSITION]), e[S.POSITION])
    for kind, origin in sent:
        event = by_origin.get(origin)
        if event is None:
            continue  # quarantined by bronze (or silent there: counted already)
        if origin in quarantined:
            report.hostile_silver_quarantined += 1
        elif event[S.KIND] != "data":
            report.hostile_ignored += 1
        elif latest[(event[S.COLLECTION], event[S.KEY_JSON])].hex() in applied:
            report.hostile_applied += 1
        else:
            report.hostile_silent += 1
            report.problems.append(
                f"hostile line {kind} ({origin}) landed in bronze, neither applied nor "
                "quarantined by silver"
            )


def check_silver(verified: dict[str, Any], report: Report) -> None:
    """The gold reconcile and the one-row-per-key check of silver."""
    report.reconcile_clean = bool(verified["reconcile_clean"])
    report.reconcile_tables = verified["reconcile"]
    for row in verified["reconcile"]:
        if not row["ok"]:
            report.problems.append(
                f"reconcile {row['table']}: {row['observed']} {row['sample'][:5]}"
            )
    report.silver_keys_twice = sum(verified["keys_twice"].values())
    for table, n in verified["keys_twice"].items():
        report.problems.append(f"silver {table}: {n} key(s) held by more than one row")


def _line_origin(origin: str) -> str:
    """``file:line`` of a record's origin (any directory or suffix after it dropped)."""
    name, _, rest = origin.rpartition("/")[2].partition(":")
    return f"{name}:{rest.split(':')[0].split('#')[0]}"


# --- the run -------------------------------------------------------------------------------------
def run(args: argparse.Namespace, spark: Any = None) -> Report:
    """One chaos run.

    Args:
        args: The command line (see :func:`main`).
        spark: A running SparkSession (a test's shared one): the final run and the checks that
            need Spark use it in this process instead of starting ``medallion run --once`` and
            a verifying child, each with a JVM of its own.
    """
    rng = random.Random(args.seed)
    server = ENGINES[args.engine]()
    report = Report(
        seed=args.seed, engine=server.NAME, silver=args.silver_kills > 0 or args.final_gold
    )
    work = Path(tempfile.mkdtemp(prefix="medallion-chaos-"))
    server.start()
    proxy = Proxy(server.port)
    started = time.monotonic()
    killer: SilverKiller | None = None
    try:
        server.create_tables()
        config = write_config(work, server, proxy.port)
        lake = work / "lake"
        source = server.SOURCE
        finish(config, source)  # the (empty) snapshot: what follows is streamed
        workload = Workload(server, args.seed, args.pace)
        workload.thread.start()
        if args.silver_kills > 0:
            killer = SilverKiller(config, lake, args.seed, interval=args.silver_interval)
            killer.start()
        hostile = list(hostile_lines(10_000))
        sent: list[tuple[str, str]] = []
        capture = agent(config, source, follow=True)
        files = agent(config, "hostile", follow=True)
        inbox_file = 0
        actions = ["kill"] * 8 + ["drop", "stall", "hostile", "kill_files"]
        # Every kind of fault at least once, even in a short run, then at random.
        forced = ["drop", "kill", "stall", "kill_files", "hostile"]
        forced += ["restart"] if args.restarts else []
        rng.shuffle(forced)
        restarts_left = args.restarts

        def silver_pending() -> bool:
            return killer is not None and killer.kills < args.silver_kills and killer.crashes < 5

        while report.agent_kills < args.kills or hostile or forced or restarts_left:
            time.sleep(rng.uniform(args.min_wait, args.max_wait))
            action = rng.choice(actions)
            if restarts_left and rng.random() < args.restarts / max(args.kills, 1):
                action = "restart"
            if report.agent_kills >= args.kills:
                action = "restart" if restarts_left else "hostile"
            if forced:
                action = forced.pop()
            if action == "restart" and not restarts_left:
                action = "kill"
            capture, files, inbox_file, hostile = _act(
                action, args, rng, report, server, proxy, config, capture, files,
                inbox_file, hostile, sent,
            )  # fmt: skip
            restarts_left -= action == "restart"
            _progress(report, killer, started)
        # The agents have had their kills; the silver job may still need some of its own
        # (a JVM start each): the faults go on, slower, so the agents' restarts leave it CPU.
        while silver_pending():
            time.sleep(rng.uniform(args.max_wait, 4 * args.max_wait))
            action = rng.choice(["drop", "stall", "kill", "kill_files"])
            capture, files, inbox_file, hostile = _act(
                action, args, rng, report, server, proxy, config, capture, files,
                inbox_file, hostile, sent,
            )  # fmt: skip
            _progress(report, killer, started)
        workload.stop.set()
        workload.thread.join()
        report.transactions = workload.transactions
        kill9(capture)
        kill9(files)
        report.agent_kills += 1
        report.hostile_agent_kills += 1
        if killer is not None:
            killer.finish()  # the job running now is killed as well
        finish(config, source)
        finish(config, "hostile")
        check_bronze(server, lake, report)
        check_hostile(lake, sent, report)
        if report.silver:
            try:
                verified = _final_silver(config, source, spark, report)
            except Exception as exc:  # reported with the bronze figures, not lost in a trace
                report.final_run_ok = report.final_run_ok or False
                report.problems.append(f"final silver steps failed: {exc!r}")
                verified = None
            if verified is not None:
                check_silver(verified, report)
                check_hostile_in_silver(lake, sent, verified, report)
    finally:
        if killer is not None:
            killer.finish()
            report.silver_kills = killer.kills
            report.silver_kills_by_phase = dict(killer.by_phase)
            report.silver_crashes = killer.crashes
            report.problems += killer.problems
            if killer.startup_seconds:
                startup = sorted(killer.startup_seconds)
                report.silver_startup_median_s = round(startup[len(startup) // 2], 1)
        report.seconds = round(time.monotonic() - started, 1)
        proxy.close()
        server.stop()
        if report.ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            report.problems.append(f"work directory kept: {work}")
    return report


_last_progress = [0.0]


def _progress(report: Report, killer: SilverKiller | None, started: float) -> None:
    """A line on stderr at most once a minute: a long run shows where it is."""
    now = time.monotonic()
    if now - _last_progress[0] < 60:
        return
    _last_progress[0] = now
    silver = f", silver job {killer.kills}" if killer is not None else ""
    print(
        f"[{now - started:5.0f} s] kills: capture agent {report.agent_kills}, hostile-input "
        f"agent {report.hostile_agent_kills}{silver}; restarts {report.server_restarts}",
        file=sys.stderr,
        flush=True,
    )


def _act(
    action: str,
    args: argparse.Namespace,
    rng: random.Random,
    report: Report,
    server: Engine,
    proxy: Proxy,
    config: Path,
    capture: subprocess.Popen[bytes],
    files: subprocess.Popen[bytes],
    inbox_file: int,
    hostile: list[tuple[str, bytes]],
    sent: list[tuple[str, str]],
) -> tuple[subprocess.Popen[bytes], subprocess.Popen[bytes], int, list[tuple[str, bytes]]]:
    """One fault (or one file of hostile lines); returns the agents and what is left to send."""
    if action == "kill":
        kill9(capture)
        report.agent_kills += 1
        capture = agent(config, server.SOURCE, follow=True)
    elif action == "drop":
        report.connections_dropped += proxy.drop()
        report.proxy_drops += 1
    elif action == "stall":
        proxy.stall(rng.uniform(0.5, 3.0))
        report.proxy_stalls += 1
    elif action == "restart":
        server.restart()
        report.server_restarts += 1
    elif action == "kill_files":
        kill9(files)
        report.hostile_agent_kills += 1
        files = agent(config, "hostile", follow=True)
    elif hostile:
        chunk, hostile = hostile[:8], hostile[8:]
        inbox_file += 1
        path = config.parent / "inbox" / f"hostile-{inbox_file:05d}.jsonl"
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(b"".join(line + b"\n" for _, line in chunk))
        tmp.rename(path)
        sent += [(kind, f"{path.name}:{n}") for n, (kind, _) in enumerate(chunk, 1)]
    return capture, files, inbox_file, hostile


def _final_silver(config: Path, source: str, spark: Any, report: Report) -> dict[str, Any] | None:
    """The undisturbed final run, then the checks that need Spark (None when the run failed)."""
    if spark is None:
        report.final_run_ok, report.final_run_seconds, why = final_run(config)
        if not report.final_run_ok:
            report.problems.append(why)
            return None
        return verify_in_child(config, source)
    from pipeline.config import load_config
    from pipeline.orchestration import run_pipeline

    began = time.monotonic()
    # What `medallion run --once --no-quality` runs: the suite's short form spares the checks
    # (their cost is the quality tests'); gold still moves to the newest consistent cut.
    run_pipeline(load_config(config), run_checks=False)
    report.final_run_ok = True
    report.final_run_seconds = round(time.monotonic() - began, 1)
    return verify_lake(spark, config, source)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The command line of :func:`main` (a test builds its run from the same options)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=sorted(ENGINES), default="postgresql")
    parser.add_argument("--kills", type=int, default=170, help="kill -9s of the capture agent")
    parser.add_argument(
        "--silver-kills", type=int, default=30, help="kill -9s of `medallion run` (0: no silver)"
    )
    parser.add_argument(
        "--final-gold",
        action="store_true",
        help="with --silver-kills 0: still end with the silver run and the gold reconcile",
    )
    parser.add_argument(
        "--silver-interval", type=float, default=1.0, help="the silver job's --interval (s)"
    )
    parser.add_argument("--restarts", type=int, default=5, help="server restarts")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--min-wait", type=float, default=0.3)
    parser.add_argument("--max-wait", type=float, default=2.5)
    parser.add_argument("--pace", type=float, default=0.03, help="max pause between txs (s)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--no-results", action="store_true", help="do not write results/")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    print(format_report(report))
    if not args.no_results:
        # One entry per engine: the long form runs them one after the other.
        out = ROOT / "benchmarks" / "results" / "chaos.json"
        out.parent.mkdir(exist_ok=True)
        runs = json.loads(out.read_text()) if out.exists() else {}
        runs[args.engine] = {
            **asdict(report),
            "kills": report.kills,
            "ok": report.ok,
            "args": " ".join(sys.argv[1:] if argv is None else argv),
        }
        out.write_text(json.dumps(runs, indent=2, ensure_ascii=False) + "\n")
    return 0 if report.ok else 1


def format_report(report: Report) -> str:
    lines = [
        f"chaos run on {report.engine} (seed {report.seed}, {report.seconds} s)",
        f"  kills survived: {report.kills} (capture agent {report.agent_kills}, "
        f"hostile-input agent {report.hostile_agent_kills}, silver job {report.silver_kills})",
        f"  proxy drops: {report.proxy_drops} ({report.connections_dropped} connections), "
        f"stalls: {report.proxy_stalls}, server restarts: {report.server_restarts}",
        f"  workload: {report.transactions} transactions; source rows at the end "
        f"{report.source_rows}; bronze events {report.bronze_events}",
        f"  hostile inputs: {report.hostile_kinds} kinds, {report.hostile_lines} lines: "
        f"{report.hostile_quarantined} quarantined with a reason, {report.hostile_landed} "
        f"landed as legal records, {report.hostile_silent} silent",
        f"  rows lost: {report.rows_lost}, duplicated: {report.duplicated}, "
        f"extra: {report.rows_extra}",
    ]
    if report.silver:
        phases = ", ".join(
            f"{n} {phase}" for phase, n in sorted(report.silver_kills_by_phase.items())
        )
        tables = ", ".join(
            f"{t['table']} {'clean' if t['ok'] else 'DIFFERS'}" for t in report.reconcile_tables
        )
        lines += [
            f"  silver job (medallion run --continuous) kills survived: {report.silver_kills} "
            f"({phases or 'none'}); crashes: {report.silver_crashes}; median start to first "
            f"commit {report.silver_startup_median_s} s",
            f"  final medallion run --once: {'ok' if report.final_run_ok else 'FAILED'} "
            f"({report.final_run_seconds} s)",
            f"  gold reconcile: {'clean' if report.reconcile_clean else 'NOT clean'} ({tables}); "
            f"silver keys held twice: {report.silver_keys_twice}",
            f"  hostile lines landed in bronze, in silver: {report.hostile_applied} applied, "
            f"{report.hostile_silver_quarantined} quarantined with a reason, "
            f"{report.hostile_ignored} changing no table",
        ]
    lines += [f"  problem: {p}" for p in report.problems]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
