"""Benchmark: the MySQL/MariaDB capture agent into bronze: snapshot rows/s, stream events/s, RSS.

Starts a private MariaDB (``scripts/mariadb_test_server.sh``; or ``--dsn``), loads a
pgbench-like database ``bench`` (``accounts``: 1M rows from the sequence engine; ``history``:
empty), then times the real agent (MySqlSource -> LandingAgent -> BronzeWriter -> Delta commits)
in a child process:

1. **snapshot**: a fresh lake, ``snapshot.mode=initial``, the consistent-snapshot read of both
   tables; the agent stops once it has caught up with the binlog;
2. **stream**: a TPC-B-like workload (``UPDATE accounts`` + ``INSERT INTO history`` per
   transaction, so 2 data events each) runs while the agent is stopped, then the agent catches
   up from its bronze offset; events/s is data events landed over the catch-up time, so it is
   the rate the agent can sustain.

Peak RSS is the child's ``VmHWM``; "per agent CPU-s" divides by the agent's own CPU time, which
stays meaningful when other jobs share the machine (wall-clock rates do not). Each of the
``--runs`` (default 3) starts on a fresh lake (``history`` emptied first); the medians are
reported.
``--profile`` runs the last stream phase under cProfile and prints its top entries (the figures
are then not written; ``MEDALLION_PROFILE_SORT=tottime`` and ``MEDALLION_PROFILE_TOP=30`` change
the order and the count).

Usage::

    .venv/bin/python benchmarks/mysql_capture.py              # 1M rows, 50k transactions, 3 runs
    .venv/bin/python benchmarks/mysql_capture.py --quick      # 100k rows, 5k transactions
    .venv/bin/python benchmarks/mysql_capture.py --dsn mysql://root:pw@127.0.0.1:3306/

With ``--dsn`` the database ``bench`` on that server is dropped and recreated, and the server
needs the same binlog settings as the script's. A password in ``--dsn`` reaches the agent as
``database.password: ${MEDALLION_BENCH_MYSQL_PW}``.
The agent reads the next batch while the previous one commits (``LandingAgent`` read-ahead);
``MEDALLION_BENCH_READ_AHEAD=0`` reads and commits in turn, for comparison. The JSON gives each
phase's CPU on the agent's own thread (the reads) and in the commits (their thread): the CPU
off the agent's thread (commits, Delta's Rust writer threads) is what the read-ahead overlaps.
Results go to stdout as a Markdown table and to ``benchmarks/results/mysql_capture.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pymysql
from pymysql.constants import CLIENT

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "mysql_capture.json"
SERVER_SCRIPT = ROOT / "scripts" / "mariadb_test_server.sh"
PASSWORD_ENV = "MEDALLION_BENCH_MYSQL_PW"
LOAD_CHUNK = 250_000
"""Rows per ``INSERT ... SELECT`` from the sequence engine."""
TX_PER_ROUND_TRIP = 250
"""Workload transactions sent in one multi-statement query."""
CLIENTS = 2

CHILD = ROOT / "benchmarks" / "capture_child.py"
"""The agent run in a child process (its figures as one JSON line)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _parse_dsn(dsn: str) -> dict[str, Any]:
    """``mysql://user:password@host:port/`` -> PyMySQL host, port, user, password."""
    url = urlparse(dsn)
    if url.scheme not in ("mysql", "mariadb") or not url.hostname:
        raise SystemExit(f"not a mysql://user:password@host:port/ URL: {dsn!r}")
    return {
        "host": url.hostname,
        "port": url.port or 3306,
        "user": unquote(url.username or "root"),
        "password": unquote(url.password or ""),
    }


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _run_agent(
    raw: dict[str, Any], lake: Path, max_events: int, password: str, *, profile: bool = False
) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), PASSWORD_ENV: password}
    env.pop("MEDALLION_FAULTS", None)
    argv = [json.dumps(raw), str(lake), str(max_events), str(int(profile))]
    out = subprocess.run(
        [sys.executable, str(CHILD), *argv],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"agent failed:\n{out.stderr[-3000:]}")
    if profile:
        print(out.stderr, file=sys.stderr)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def agent_config(server: dict[str, Any]) -> dict[str, Any]:
    """The agent's source config for database ``bench`` on ``server`` (password by reference)."""
    raw: dict[str, Any] = {
        "name": "bench",
        "connector": "mysql",
        "database.hostname": server["host"],
        "database.port": server["port"],
        "database.user": server["user"],
        "database.include.list": "bench",
        "topic.prefix": "bench",
        "database.server.id": 6001,
        "snapshot.mode": "initial",
    }
    if server["password"]:
        raw["database.password"] = "${" + PASSWORD_ENV + "}"
    return raw


def _connect(server: dict[str, Any], **extra: Any) -> Any:
    return pymysql.connect(**server, autocommit=True, **extra)


def _load(server: dict[str, Any], rows: int) -> str:
    """(Re)create ``bench`` with ``rows`` accounts; return the server version."""
    with _connect(server) as conn, conn.cursor() as cur:
        cur.execute("SELECT VERSION()")
        version = str(cur.fetchone()[0])
        cur.execute("DROP DATABASE IF EXISTS bench")
        cur.execute("CREATE DATABASE bench")
        cur.execute(
            "CREATE TABLE bench.accounts (aid INT PRIMARY KEY, bid INT, abalance INT, "
            "filler CHAR(84)) ENGINE=InnoDB"
        )
        cur.execute(
            "CREATE TABLE bench.history (id BIGINT AUTO_INCREMENT PRIMARY KEY, aid INT, "
            "delta INT, mtime DATETIME(6)) ENGINE=InnoDB"
        )
        for start in range(1, rows + 1, LOAD_CHUNK):
            end = min(start + LOAD_CHUNK - 1, rows)
            cur.execute(
                "INSERT INTO bench.accounts SELECT seq, seq % 10, 0, '' "
                f"FROM bench.seq_{start}_to_{end}"
            )
    return version


def _workload(server: dict[str, Any], rows: int, transactions: int, seed: int) -> float:
    """Run ``transactions`` TPC-B-like transactions from ``CLIENTS`` threads; return seconds."""
    errors: list[BaseException] = []

    def client(index: int, count: int) -> None:
        rng = random.Random(seed * 1000 + index)
        try:
            with _connect(server, client_flag=CLIENT.MULTI_STATEMENTS) as conn:
                cur = conn.cursor()
                for start in range(0, count, TX_PER_ROUND_TRIP):
                    parts = []
                    for _ in range(min(TX_PER_ROUND_TRIP, count - start)):
                        # delta != 0: an UPDATE that changes nothing writes no row event
                        aid = rng.randint(1, rows)
                        delta = rng.choice((-1, 1)) * rng.randint(1, 5000)
                        parts.append(
                            "START TRANSACTION;"
                            f"UPDATE bench.accounts SET abalance = abalance + {delta} "
                            f"WHERE aid = {aid};"
                            "INSERT INTO bench.history (aid, delta, mtime) "
                            f"VALUES ({aid}, {delta}, NOW(6));COMMIT;"
                        )
                    cur.execute("".join(parts))
                    while cur.nextset():
                        pass
        except BaseException as exc:  # reported by the caller
            errors.append(exc)

    share = [transactions // CLIENTS + (i < transactions % CLIENTS) for i in range(CLIENTS)]
    threads = [threading.Thread(target=client, args=(i, n)) for i, n in enumerate(share)]
    t0 = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if errors:
        raise SystemExit(f"workload failed: {errors[0]!r}")
    return time.perf_counter() - t0


def _one_run(
    server: dict[str, Any],
    raw: dict[str, Any],
    workdir: Path,
    args: argparse.Namespace,
    run: int,
    *,
    profile: bool,
) -> dict[str, Any]:
    with _connect(server) as conn, conn.cursor() as cur:
        cur.execute("TRUNCATE TABLE bench.history")
    lake = workdir / f"lake-{run}"
    password = server["password"]
    snapshot = _run_agent(raw, lake, args.batch, password)
    workload_s = _workload(server, args.rows, args.transactions, seed=run)
    stream = _run_agent(raw, lake, args.batch, password, profile=profile)
    shutil.rmtree(lake, ignore_errors=True)
    return {
        "snapshot_rows": snapshot["landed"],
        "snapshot_quarantined": snapshot["quarantined"],
        "snapshot_batches": snapshot["batches"],
        "snapshot_seconds": snapshot["seconds"],
        "snapshot_cpu_seconds": snapshot["cpu_seconds"],
        "snapshot_commit_cpu_seconds": snapshot["commit_cpu_seconds"],
        "snapshot_agent_thread_cpu_seconds": snapshot["agent_thread_cpu_seconds"],
        "snapshot_rows_per_s": snapshot["landed"] / snapshot["seconds"],
        "snapshot_rows_per_cpu_s": snapshot["landed"] / snapshot["cpu_seconds"],
        "snapshot_peak_rss_mib": snapshot["peak_rss_mib"],
        "workload_seconds": workload_s,
        "stream_events": stream["landed"],
        "stream_quarantined": stream["quarantined"],
        "stream_batches": stream["batches"],
        "stream_seconds": stream["seconds"],
        "stream_cpu_seconds": stream["cpu_seconds"],
        "stream_commit_cpu_seconds": stream["commit_cpu_seconds"],
        "stream_agent_thread_cpu_seconds": stream["agent_thread_cpu_seconds"],
        "stream_events_per_s": stream["landed"] / stream["seconds"],
        "stream_events_per_cpu_s": stream["landed"] / stream["cpu_seconds"],
        "stream_peak_rss_mib": stream["peak_rss_mib"],
    }


def _median(runs: list[dict[str, Any]], key: str, digits: int) -> float:
    value = statistics.median(r[key] for r in runs)
    return round(value) if digits == 0 else round(value, digits)


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000, help="rows in bench.accounts")
    parser.add_argument("--transactions", type=int, default=50_000, help="workload transactions")
    parser.add_argument("--batch", type=int, default=20_000, help="bronze max.batch.size")
    parser.add_argument("--runs", type=int, default=3, help="runs (fresh lake each); medians")
    parser.add_argument("--quick", action="store_true", help="100k rows, 5k transactions")
    parser.add_argument("--dsn", default=None, help="use a running server: mysql://u:pw@h:port/")
    parser.add_argument("--profile", action="store_true", help="cProfile the last stream phase")
    args = parser.parse_args()
    if args.quick:
        args.rows, args.transactions = 100_000, 5_000
    load_at_start = os.getloadavg()
    workdir = Path(tempfile.mkdtemp(prefix="medallion-mysqlbench-", dir=tempfile.gettempdir()))
    server_dir = workdir / "server"  # the script chowns it to mysql when run as root
    if args.dsn:
        server = _parse_dsn(args.dsn)
    else:
        os.chmod(workdir, 0o755)  # mariadbd (user mysql) must reach server_dir
        server = {"host": "127.0.0.1", "port": _free_port(), "user": "root", "password": ""}
        subprocess.run(
            ["bash", str(SERVER_SCRIPT), "start", str(server_dir), str(server["port"])],
            check=True,
            capture_output=True,
        )
    try:
        t0 = time.perf_counter()
        version = _load(server, args.rows)
        load_s = time.perf_counter() - t0
        raw = agent_config(server)
        runs = [
            _one_run(server, raw, workdir, args, run, profile=args.profile and run == args.runs - 1)
            for run in range(args.runs)
        ]
    finally:
        if not args.dsn:
            subprocess.run(
                ["bash", str(SERVER_SCRIPT), "stop", str(server_dir)],
                check=False,
                capture_output=True,
            )
        shutil.rmtree(workdir, ignore_errors=True)
    figures: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpu ({_cpu_model()}), "
        f"Python {platform.python_version()}",
        "nproc": os.cpu_count(),
        "server": f"MariaDB {version}" if "mariadb" in version.lower() else f"MySQL {version}",
        "load_average_at_start": [round(x, 2) for x in load_at_start],
        "rows": args.rows,
        "load_seconds": round(load_s, 2),
        "transactions": args.transactions,
        "max_batch_size": args.batch,
        "runs": args.runs,
        "snapshot_rows": runs[-1]["snapshot_rows"],
        "snapshot_rows_expected": args.rows,
        "snapshot_quarantined": runs[-1]["snapshot_quarantined"],
        "snapshot_batches": runs[-1]["snapshot_batches"],
        "snapshot_seconds": _median(runs, "snapshot_seconds", 2),
        "snapshot_rows_per_s": _median(runs, "snapshot_rows_per_s", 0),
        "snapshot_rows_per_cpu_s": _median(runs, "snapshot_rows_per_cpu_s", 0),
        "snapshot_peak_rss_mib": _median(runs, "snapshot_peak_rss_mib", 1),
        "workload_seconds": _median(runs, "workload_seconds", 2),
        "stream_events": runs[-1]["stream_events"],
        "stream_events_expected": 2 * args.transactions,
        "stream_quarantined": runs[-1]["stream_quarantined"],
        "stream_batches": runs[-1]["stream_batches"],
        "stream_seconds": _median(runs, "stream_seconds", 2),
        "stream_events_per_s": _median(runs, "stream_events_per_s", 0),
        "stream_events_per_cpu_s": _median(runs, "stream_events_per_cpu_s", 0),
        "stream_peak_rss_mib": _median(runs, "stream_peak_rss_mib", 1),
        "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        "per_run": [{k: round(v, 2) for k, v in r.items()} for r in runs],
    }
    if not args.profile:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    median = "median " if args.runs > 1 else ""
    print(
        f"| phase | records | batches | {median}seconds | {median}records/s | "
        f"{median}per agent CPU-s | peak RSS MiB |"
    )
    print("|---|---|---|---|---|---|---|")
    print(
        f"| snapshot ({args.rows} accounts) | {figures['snapshot_rows']} | "
        f"{figures['snapshot_batches']} | {figures['snapshot_seconds']} | "
        f"{figures['snapshot_rows_per_s']} | {figures['snapshot_rows_per_cpu_s']} | "
        f"{figures['snapshot_peak_rss_mib']} |"
    )
    print(
        f"| stream ({args.transactions} transactions) | {figures['stream_events']} | "
        f"{figures['stream_batches']} | {figures['stream_seconds']} | "
        f"{figures['stream_events_per_s']} | {figures['stream_events_per_cpu_s']} | "
        f"{figures['stream_peak_rss_mib']} |"
    )
    for phase, got, want in (
        ("snapshot", "snapshot_rows", "snapshot_rows_expected"),
        ("stream", "stream_events", "stream_events_expected"),
    ):
        if figures[got] != figures[want]:
            print(f"WARNING: {phase} landed {figures[got]} records, expected {figures[want]}")
    print(f"{figures['machine']}; {figures['server']}; runs: {args.runs}")
    print(
        f"load average at start {figures['load_average_at_start']}, "
        f"at end {figures['load_average_at_end']}"
    )


if __name__ == "__main__":
    main()
