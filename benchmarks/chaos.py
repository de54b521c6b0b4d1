"""Chaos run: kill -9 the capture agent at random moments, drop and stall its connections,
restart the server, feed hostile input, and prove nothing is lost or landed twice.

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
  records), landed by a second agent that is killed too.

At the end the workload stops, both agents catch up undisturbed, and the run checks:

* **bronze equals the source**: replaying each table's events in position order gives exactly
  the rows the server holds (``rows lost`` = rows missing or different, ``rows extra``);
* **no position twice** in bronze, and no insert of a key bronze already holds
  (``duplicated``);
* **every hostile line is accounted for**: quarantined with a non-empty reason, or landed (a
  legal record, however odd); ``silent`` counts those found in neither.

The report prints kills survived, proxy drops, stalls, server restarts, hostile inputs tried
and where they went, rows lost and duplicated; the run exits 1 unless lost, duplicated, extra
and silent are all 0. Results also go to ``benchmarks/results/chaos.json``.

Not covered here (see docs/benchmarks.md): killing the silver job (a Spark MERGE per kill makes
200 kills an hours-long run on this machine); gold is not reconciled, bronze is (silver's
exactly-once MERGE is covered by the contract suite's kill tests).

Usage::

    .venv/bin/python benchmarks/chaos.py                  # long form: >= 200 agent kills
    .venv/bin/python benchmarks/chaos.py --kills 10 --restarts 1 --seed 7   # short form
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
        "sources:\n" + engine.source_yaml(proxy_port) + "  - name: hostile\n"
        "    connector: debezium_json\n"
        "    path: inbox\n",
        encoding="utf-8",
    )
    (work / "inbox").mkdir()
    return config


def agent(config: Path, source: str, *, follow: bool) -> subprocess.Popen[bytes]:
    command = [sys.executable, "-m", "pipeline.cli", "--config", str(config)]
    command += ["--log-level", "WARNING", "capture", "-s", source]
    if follow:
        command.append("--follow")
    log = open(config.parent / f"{source}.log", "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        command,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=log,
        start_new_session=True,
    )


def kill9(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def finish(config: Path, source: str) -> None:
    """Land what is left without disturbance; a retryable exit is tried again."""
    for _ in range(10):
        process = agent(config, source, follow=False)
        if process.wait(timeout=600) == 0:
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
    rows_lost: int = 0
    rows_extra: int = 0
    duplicated: int = 0
    problems: list[str] = field(default_factory=list)

    @property
    def kills(self) -> int:
        return self.agent_kills + self.hostile_agent_kills

    @property
    def ok(self) -> bool:
        return not (self.rows_lost or self.rows_extra or self.duplicated or self.hostile_silent)


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


def _line_origin(origin: str) -> str:
    """``file:line`` of a record's origin (any directory or suffix after it dropped)."""
    name, _, rest = origin.rpartition("/")[2].partition(":")
    return f"{name}:{rest.split(':')[0].split('#')[0]}"


# --- the run -------------------------------------------------------------------------------------
def run(args: argparse.Namespace) -> Report:
    rng = random.Random(args.seed)
    server = ENGINES[args.engine]()
    report = Report(seed=args.seed, engine=server.NAME)
    work = Path(tempfile.mkdtemp(prefix="medallion-chaos-"))
    server.start()
    proxy = Proxy(server.port)
    started = time.monotonic()
    try:
        server.create_tables()
        config = write_config(work, server, proxy.port)
        source = server.SOURCE
        finish(config, source)  # the (empty) snapshot: what follows is streamed
        workload = Workload(server, args.seed, args.pace)
        workload.thread.start()
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
        while report.agent_kills < args.kills or hostile or forced:
            time.sleep(rng.uniform(args.min_wait, args.max_wait))
            action = rng.choice(actions)
            if restarts_left and rng.random() < args.restarts / max(args.kills, 1):
                action = "restart"
            if report.agent_kills >= args.kills:
                action = "hostile"
            if forced:
                action = forced.pop()
            if action == "restart" and not restarts_left:
                action = "kill"
            if action == "kill":
                kill9(capture)
                report.agent_kills += 1
                capture = agent(config, source, follow=True)
            elif action == "drop":
                report.connections_dropped += proxy.drop()
                report.proxy_drops += 1
            elif action == "stall":
                proxy.stall(rng.uniform(0.5, 3.0))
                report.proxy_stalls += 1
            elif action == "restart":
                server.restart()
                restarts_left -= 1
                report.server_restarts += 1
            elif action == "kill_files":
                kill9(files)
                report.hostile_agent_kills += 1
                files = agent(config, "hostile", follow=True)
            elif hostile:
                chunk, hostile = hostile[:8], hostile[8:]
                inbox_file += 1
                path = work / "inbox" / f"hostile-{inbox_file:05d}.jsonl"
                tmp = path.with_suffix(".tmp")
                tmp.write_bytes(b"".join(line + b"\n" for _, line in chunk))
                tmp.rename(path)
                sent += [(kind, f"{path.name}:{n}") for n, (kind, _) in enumerate(chunk, 1)]
        workload.stop.set()
        workload.thread.join()
        report.transactions = workload.transactions
        kill9(capture)
        kill9(files)
        report.agent_kills += 1
        report.hostile_agent_kills += 1
        finish(config, source)
        finish(config, "hostile")
        lake = work / "lake"
        check_bronze(server, lake, report)
        check_hostile(lake, sent, report)
    finally:
        report.seconds = round(time.monotonic() - started, 1)
        proxy.close()
        server.stop()
        if report.ok and not args.keep:
            shutil.rmtree(work, ignore_errors=True)
        else:
            report.problems.append(f"work directory kept: {work}")
    return report


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--engine", choices=sorted(ENGINES), default="postgresql")
    parser.add_argument("--kills", type=int, default=200, help="kill -9s of the capture agent")
    parser.add_argument("--restarts", type=int, default=5, help="server restarts")
    parser.add_argument("--seed", type=int, default=int(time.time()) % 100_000)
    parser.add_argument("--min-wait", type=float, default=0.3)
    parser.add_argument("--max-wait", type=float, default=2.5)
    parser.add_argument("--pace", type=float, default=0.03, help="max pause between txs (s)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--no-results", action="store_true", help="do not write results/")
    args = parser.parse_args(argv)
    report = run(args)
    print(format_report(report))
    if not args.no_results:
        out = ROOT / "benchmarks" / "results" / "chaos.json"
        out.parent.mkdir(exist_ok=True)
        out.write_text(json.dumps({**asdict(report), "kills": report.kills}, indent=2) + "\n")
    return 0 if report.ok else 1


def format_report(report: Report) -> str:
    lines = [
        f"chaos run on {report.engine} (seed {report.seed}, {report.seconds} s)",
        f"  kills survived: {report.kills} (capture agent {report.agent_kills}, "
        f"hostile-input agent {report.hostile_agent_kills})",
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
    lines += [f"  problem: {p}" for p in report.problems]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
