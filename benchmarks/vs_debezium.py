"""Benchmark: medallion's capture agents against Debezium Embedded, same servers, same workloads.

One run does, for PostgreSQL and then for MariaDB, each on a private server this script starts:

1. **medallion**: the agent's snapshot and stream phases exactly as ``benchmarks/pg_capture.py``
   and ``benchmarks/mysql_capture.py`` run them (the agent in a child process: snapshot of the
   loaded tables, then a TPC-B-like workload while it is stopped, then its catch-up);
2. **Debezium Embedded**, the runner the test suite uses (``tests/fix_debezium.py``: the
   connector jars from Maven Central in ``.cache/debezium``, ``make bootstrap``), on the same
   tables after the same reset: a snapshot with fresh offsets, then the same workload while it
   is stopped, then its catch-up from its committed offsets. It writes every record as JSON
   (with schemas) to a file; a phase ends when the file holds the expected number of records.

3. **the server's limit** (issue 26), in the same run on the same data after the same reset: how
   fast the server hands the rows and the changes to a client that does nothing with them.
   PostgreSQL: ``COPY <table> TO STDOUT (FORMAT binary)`` of every snapshotted table through
   ``psql`` (the snapshot), and a ``test_decoding`` slot created before the workload, decoded up
   to the workload's end by ``pg_recvlogical`` (the stream). MariaDB: ``mariadb --quick`` reading
   ``SELECT *`` of every table (the snapshot), and ``mariadb-binlog --read-from-remote-server
   -v`` decoding the workload's binlog events (the stream). Each figure of the two capture sides
   is then also given as a fraction of the limit (1.0 would be wire speed). The limits' CPU is the
   client tool's only (the server's work is on the server), so they have no per-CPU figure.

Both sides land every change with its schema; transaction metadata and schema-change records
are off on both, so each phase produces the same number of records (checked). Debezium's time
runs from its ``task started`` log line (after JVM start and engine set-up, which the agent's
figures leave out too: they start after the interpreter's imports) to the last expected
record; its CPU is the JVM's over the same span, its peak RSS the JVM's ``VmHWM``. The JVM runs
with ``-Xmx1g`` and its default compilers and GC (``--test-jvm``: the test suite's small C1-only
JVM instead).

Usage::

    .venv/bin/python benchmarks/vs_debezium.py --quick        # ~2 minutes: small tables
    .venv/bin/python benchmarks/vs_debezium.py --runs 3       # pgbench scale 10, 1M MariaDB rows

Results go to stdout as a Markdown table and to ``benchmarks/results/vs_debezium.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import mysql_capture
import pg_capture
import psycopg
import pymysql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import tests.fix_debezium as fix_debezium  # noqa: E402  (the repository root is on the path now)
from tests.fix_debezium import (  # noqa: E402
    ENGINE_PROPERTIES,
    MARIADB_PROPERTIES,
    PG_PROPERTIES,
    DebeziumRunner,
    require_runtime,
)

RESULTS = ROOT / "benchmarks" / "results" / "vs_debezium.json"
BENCH_JVM_OPTIONS = ("-Xmx1g", *(o for o in fix_debezium.JVM_OPTIONS if o.startswith("-D")))
"""A JVM sized for throughput: the test suite's options minus its C1-only, serial-GC, 384 MB
limits (kept: the logger settings)."""
SAME_OUTPUT = {
    # What the agents land by default, so both sides write the same records.
    "provide.transaction.metadata": "false",
    "include.schema.changes": "false",
    "tombstones.on.delete": "true",
}
PHASE_TIMEOUT = 900.0
CLK_TCK = os.sysconf("SC_CLK_TCK")


# --- measuring a Debezium runner -----------------------------------------------------------


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK_TCK  # utime + stime


def _peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _task_started(log: Path, start: int) -> float | None:
    """Epoch seconds of the runner's ``task started`` line after byte ``start`` of its log."""
    text = log.read_text(errors="replace")[start:]
    for line in text.splitlines():
        if line.endswith("[medallion-runner] task started"):
            return datetime.fromisoformat(line.split(" ", 1)[0].replace("Z", "+00:00")).timestamp()
    return None


def _debezium_phase(runner: DebeziumRunner, expected: int) -> dict[str, Any]:
    """Start ``runner``, wait until its output holds ``expected`` records in all, stop it."""
    log_start = runner.log.stat().st_size if runner.log.exists() else 0
    runner.start()
    assert runner.proc is not None
    pid = runner.proc.pid
    deadline = time.monotonic() + PHASE_TIMEOUT
    started_at = cpu_at_start = None
    lines, offset = 0, 0
    while True:
        if runner.output.exists():
            with runner.output.open("rb") as handle:
                handle.seek(offset)
                chunk = handle.read()
            offset += len(chunk)
            lines += chunk.count(b"\n")
        if started_at is None:
            started_at = _task_started(runner.log, log_start)
            if started_at is not None:
                cpu_at_start = _cpu_seconds(pid)
        if lines >= expected and started_at is not None:
            done, cpu, rss = time.time(), _cpu_seconds(pid), _peak_rss_mib(pid)
            break
        if runner.proc.poll() is not None or time.monotonic() > deadline:
            runner.stop()
            raise SystemExit(
                f"Debezium ({runner.kind}) wrote {lines} of {expected} records\n{runner.log_tail()}"
            )
        time.sleep(0.02)
    runner.stop()
    assert cpu_at_start is not None
    return {
        "landed": lines,
        "seconds": done - started_at,
        "cpu_seconds": cpu - cpu_at_start,
        "peak_rss_mib": rss,
    }


# --- the two connectors ----------------------------------------------------------------------


def _phase_figures(result: dict[str, Any], records: int) -> dict[str, Any]:
    cpu = result["cpu_seconds"]
    return {
        "records": records,
        "landed": result["landed"],
        "seconds": result["seconds"],
        "per_s": records / result["seconds"],
        "per_cpu_s": records / cpu if cpu else 0.0,
        "peak_rss_mib": result["peak_rss_mib"],
    }


# --- the servers' limits (issue 26) ---------------------------------------------------------


def _timed_tools(commands: list[list[str]], records: int) -> dict[str, Any]:
    """Run ``commands`` one after the other, output to /dev/null; their wall and CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    for command in commands:
        with open(os.devnull, "wb") as sink:
            subprocess.run(command, check=True, stdout=sink, stderr=subprocess.PIPE)
    seconds = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"landed": records, "seconds": seconds, "cpu_seconds": cpu, "peak_rss_mib": 0.0}


def _pg_limits(
    port: int, dsn: str, workload: list[str], rows: int, events: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """PostgreSQL's limits: binary ``COPY`` of the pgbench tables; the workload's changes decoded
    through a ``test_decoding`` slot."""
    conn_args = ["-h", "127.0.0.1", "-p", str(port), "-U", "postgres"]
    psql = [str(pg_capture.PG_BIN / "psql"), *conn_args, "-d", "postgres", "-X", "-q", "-c"]
    tables = ("pgbench_accounts", "pgbench_branches", "pgbench_tellers", "pgbench_history")
    snapshot = _timed_tools(
        [[*psql, f"COPY public.{t} TO STDOUT (FORMAT binary)"] for t in tables], rows
    )
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot('limit_bench', 'test_decoding')")
    try:
        pg_capture._pgbench(workload, "127.0.0.1", port)
        with psycopg.connect(dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
            assert row is not None
            end = str(row[0])
        recvlogical = [
            str(pg_capture.PG_BIN / "pg_recvlogical"),
            *conn_args,
            "-d",
            "postgres",
            "--slot",
            "limit_bench",
            "--start",
            "--endpos",
            end,
            "--no-loop",
            "-f",
            "-",
        ]
        stream = _timed_tools([recvlogical], events)
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot('limit_bench')")
    return snapshot, stream


def _mariadb_limits(
    server: dict[str, Any], rows: int, transactions: int, events: int, seed: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """MariaDB's limits: ``SELECT *`` of the bench tables to ``mariadb --quick``; the workload's
    binlog decoded by ``mariadb-binlog -v`` from the server."""
    conn_args = ["-h", "127.0.0.1", "-P", str(server["port"]), "-u", str(server["user"])]
    client = ["mariadb", *conn_args, "--quick", "--batch", "-e"]
    snapshot = _timed_tools(
        [[*client, f"SELECT * FROM bench.{t}"] for t in ("accounts", "history")], rows
    )
    with pymysql.connect(**server, autocommit=True) as conn, conn.cursor() as cur:
        cur.execute("SHOW MASTER STATUS")
        status = cur.fetchone()
        assert status is not None
        first, position = str(status[0]), int(status[1])
    mysql_capture._workload(server, rows, transactions, seed=seed)
    decode = [
        "mariadb-binlog",
        *conn_args,
        "--read-from-remote-server",
        "--to-last-log",
        f"--start-position={position}",
        "-v",
        first,
    ]
    stream = _timed_tools([decode], events)
    return snapshot, stream


def _postgres(args: argparse.Namespace, workdir: Path, run: int) -> dict[str, dict[str, Any]]:
    cluster = workdir / f"pg-{run}"
    port = pg_capture._free_port()
    script = str(ROOT / "scripts" / "pg_test_cluster.sh")
    subprocess.run(
        ["bash", script, "start", str(cluster), str(port)], check=True, capture_output=True
    )
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    try:
        pg_capture._pgbench(["-i", "-q", "-s", str(args.pg_scale)], "127.0.0.1", port)
        rows = args.pg_scale * (100_000 + 10 + 1)
        events = 4 * args.pg_transactions  # pgbench TPC-B: 3 updates + 1 insert
        workload = ["-n", "-c", "2", "-j", "2", "-t", str(args.pg_transactions // 2)]

        def reset() -> None:
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("TRUNCATE pgbench_history")

        def medallion() -> tuple[dict[str, Any], dict[str, Any]]:
            raw = pg_capture.agent_config("127.0.0.1", port, "medallion_bench")
            lake = workdir / f"pg-lake-{run}"
            snapshot = pg_capture._run_agent(raw, lake, args.batch)
            pg_capture._pgbench(workload, "127.0.0.1", port)
            stream = pg_capture._run_agent(raw, lake, args.batch)
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("SELECT pg_drop_replication_slot('medallion_bench')")
            shutil.rmtree(lake, ignore_errors=True)
            return snapshot, stream

        def debezium() -> tuple[dict[str, Any], dict[str, Any]]:
            properties = {
                **ENGINE_PROPERTIES,
                **PG_PROPERTIES,
                **SAME_OUTPUT,
                "name": "medallion-bench-pg",
                "offset.storage.file.filename": str(workdir / f"dbz-pg-{run}" / "offsets.dat"),
                "database.hostname": "127.0.0.1",
                "database.port": str(port),
                "database.user": "postgres",
                "database.password": "unused",  # trust authentication
                "database.dbname": "postgres",
                "slot.name": "dbz_bench",
                "publication.name": "dbz_bench",
                "table.include.list": r"public\.pgbench_.*",
            }
            runner = DebeziumRunner("postgres", workdir / f"dbz-pg-{run}", properties)
            snapshot = _debezium_phase(runner, rows)
            pg_capture._pgbench(workload, "127.0.0.1", port)
            stream = _debezium_phase(runner, rows + events)
            stream["landed"] -= snapshot["landed"]
            return snapshot, stream

        def limits() -> tuple[dict[str, Any], dict[str, Any]]:
            return _pg_limits(port, dsn, workload, rows, events)

        return _compare(reset, medallion, debezium, rows, events, limits)
    finally:
        subprocess.run(["bash", script, "stop", str(cluster)], check=False, capture_output=True)


def _mariadb(args: argparse.Namespace, workdir: Path, run: int) -> dict[str, dict[str, Any]]:
    server_dir = workdir / f"mariadb-{run}"
    server = {"host": "127.0.0.1", "port": mysql_capture._free_port(), "user": "root"}
    server["password"] = ""
    script = str(mysql_capture.SERVER_SCRIPT)
    subprocess.run(
        ["bash", script, "start", str(server_dir), str(server["port"])],
        check=True,
        capture_output=True,
    )
    try:
        mysql_capture._load(server, args.mysql_rows)
        events = 2 * args.mysql_transactions  # one UPDATE + one INSERT each

        def reset() -> None:
            with pymysql.connect(**server, autocommit=True) as conn, conn.cursor() as cur:
                cur.execute("TRUNCATE TABLE bench.history")

        def medallion() -> tuple[dict[str, Any], dict[str, Any]]:
            raw = {**mysql_capture.agent_config(server), "include.schema.changes": False}
            lake = workdir / f"mysql-lake-{run}"
            snapshot = mysql_capture._run_agent(raw, lake, args.batch, "")
            mysql_capture._workload(server, args.mysql_rows, args.mysql_transactions, seed=run)
            stream = mysql_capture._run_agent(raw, lake, args.batch, "")
            shutil.rmtree(lake, ignore_errors=True)
            return snapshot, stream

        def debezium() -> tuple[dict[str, Any], dict[str, Any]]:
            home = workdir / f"dbz-mariadb-{run}"
            properties = {
                **ENGINE_PROPERTIES,
                **MARIADB_PROPERTIES,
                **SAME_OUTPUT,
                "name": "medallion-bench-mariadb",
                "offset.storage.file.filename": str(home / "offsets.dat"),
                "schema.history.internal.file.filename": str(home / "schema-history.dat"),
                "database.hostname": "127.0.0.1",
                "database.port": str(server["port"]),
                "database.user": "root",
                "database.password": "",
                "database.server.id": "6002",
                "database.include.list": "bench",
            }
            runner = DebeziumRunner("mariadb", home, properties)
            snapshot = _debezium_phase(runner, args.mysql_rows)
            mysql_capture._workload(server, args.mysql_rows, args.mysql_transactions, seed=run)
            stream = _debezium_phase(runner, args.mysql_rows + events)
            stream["landed"] -= snapshot["landed"]
            return snapshot, stream

        def limits() -> tuple[dict[str, Any], dict[str, Any]]:
            return _mariadb_limits(
                server, args.mysql_rows, args.mysql_transactions, events, seed=run
            )

        return _compare(reset, medallion, debezium, args.mysql_rows, events, limits)
    finally:
        subprocess.run(["bash", script, "stop", str(server_dir)], check=False, capture_output=True)


Side = Callable[[], tuple[dict[str, Any], dict[str, Any]]]


def _compare(
    reset: Callable[[], None],
    medallion: Side,
    debezium: Side,
    rows: int,
    events: int,
    limits: Side,
) -> dict[str, dict[str, Any]]:
    """Run both sides and the server's limits from the same state; figures per side and phase."""
    out: dict[str, dict[str, Any]] = {}
    for name, side in (("medallion", medallion), ("debezium", debezium), ("limit", limits)):
        reset()
        snapshot, stream = side()
        out[f"{name} snapshot"] = _phase_figures(snapshot, rows)
        out[f"{name} stream"] = _phase_figures(stream, events)
    return out


# --- report ------------------------------------------------------------------------------------


def _median_table(runs: list[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    table: dict[str, dict[str, Any]] = {}
    for key in runs[0]:
        table[key] = {
            field: statistics.median(run[key][field] for run in runs) for field in runs[0][key]
        }
        table[key]["landed"] = [run[key]["landed"] for run in runs]
    return table


LIMIT_TOOLS = {
    ("PostgreSQL", "snapshot"): "binary COPY to psql",
    ("PostgreSQL", "stream"): "test_decoding slot to pg_recvlogical",
    ("MariaDB", "snapshot"): "SELECT * to mariadb --quick",
    ("MariaDB", "stream"): "mariadb-binlog -v from the server",
}


def _print(connector: str, table: dict[str, dict[str, Any]]) -> None:
    for phase, unit in (("snapshot", "rows"), ("stream", "events")):
        ours, theirs = table[f"medallion {phase}"], table[f"debezium {phase}"]
        limit = table[f"limit {phase}"]
        for side, f in (("medallion", ours), ("Debezium Embedded", theirs)):
            print(
                f"| {connector} {phase} | {side} | {f['records']:,} {unit} | {f['seconds']:.1f} | "
                f"{f['per_s']:,.0f} | {f['per_cpu_s']:,.0f} | {f['peak_rss_mib']:.0f} | "
                f"{f['per_s'] / limit['per_s']:.3f} |"
            )
        print(
            f"| {connector} {phase} | server limit ({LIMIT_TOOLS[(connector, phase)]}) | "
            f"{limit['records']:,} {unit} | {limit['seconds']:.2f} | {limit['per_s']:,.0f} | | | "
            "1 |"
        )
        print(
            f"| {connector} {phase} | **medallion / Debezium** | | | "
            f"**{ours['per_s'] / theirs['per_s']:.2f}x** | "
            f"{ours['per_cpu_s'] / theirs['per_cpu_s']:.2f}x | "
            f"{ours['peak_rss_mib'] / theirs['peak_rss_mib']:.2f}x | |"
        )
        for side, f in (("medallion", ours), ("Debezium", theirs)):
            if any(landed != f["records"] for landed in f["landed"]):
                print(f"WARNING: {connector} {phase}: {side} landed {f['landed']}, "
                      f"expected {f['records']}")  # fmt: skip


def main() -> None:
    """Run the comparison and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pg-scale", type=int, default=10, help="pgbench scale (100k rows each)")
    parser.add_argument("--pg-transactions", type=int, default=50_000)
    parser.add_argument("--mysql-rows", type=int, default=1_000_000)
    parser.add_argument("--mysql-transactions", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=20_000, help="the agents' max.batch.size")
    parser.add_argument("--runs", type=int, default=1, help="runs; medians reported")
    parser.add_argument("--quick", action="store_true", help="small tables and workloads")
    parser.add_argument("--only", choices=("postgres", "mariadb"), default=None)
    parser.add_argument("--test-jvm", action="store_true", help="the test suite's JVM options")
    args = parser.parse_args()
    if args.quick:
        args.pg_scale, args.pg_transactions = 1, 10_000
        args.mysql_rows, args.mysql_transactions = 100_000, 10_000
    if not args.test_jvm:
        # DebeziumRunner.start reads the module's options at start time.
        fix_debezium.JVM_OPTIONS = BENCH_JVM_OPTIONS
    for kind in ("postgres", "mariadb"):
        require_runtime(kind)
    workdir = Path(tempfile.mkdtemp(prefix="medallion-vsdbz-"))
    os.chmod(workdir, 0o755)  # the servers' system users must reach their directories
    connectors = {"PostgreSQL": _postgres, "MariaDB": _mariadb}
    if args.only:
        connectors = {k: v for k, v in connectors.items() if k.lower().startswith(args.only)}
    machine = (
        f"{platform.machine()}, {os.cpu_count()} cpu ({mysql_capture._cpu_model()}), "
        f"Python {platform.python_version()}"
    )
    tables: dict[str, dict[str, dict[str, Any]]] = {}
    figures: dict[str, Any] = {}
    if args.only and RESULTS.exists():  # keep the other connector's latest figures
        figures = json.loads(RESULTS.read_text())
    try:
        for connector, measure in connectors.items():
            load_at_start = os.getloadavg()
            runs = [measure(args, workdir, run) for run in range(args.runs)]
            tables[connector] = _median_table(runs)
            figures[connector] = {
                "machine": machine,
                "jvm_options": list(fix_debezium.JVM_OPTIONS),
                "load_average_at_start": [round(x, 2) for x in load_at_start],
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                "args": vars(args),
                "phases": tables[connector],
            }
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2, default=str) + "\n")
    median = "median " if args.runs > 1 else ""
    print(
        f"| phase | capture | records | {median}seconds | {median}records/s (wall) | "
        f"{median}per CPU-s | peak RSS MiB | fraction of the server's limit (wall) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for connector, table in tables.items():
        _print(connector, table)
    print(f"{machine}; runs: {args.runs}; JVM: {' '.join(fix_debezium.JVM_OPTIONS)}")
    for connector in tables:
        load = figures[connector]
        print(
            f"{connector}: load average at start {load['load_average_at_start']}, "
            f"at end {load['load_average_at_end']}"
        )


if __name__ == "__main__":
    main()
