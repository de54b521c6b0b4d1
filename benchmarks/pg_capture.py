"""Benchmark: the PostgreSQL capture agent into bronze: snapshot rows/s, stream events/s, RSS.

Starts a private PostgreSQL 15 (``scripts/pg_test_cluster.sh``; or ``--dsn``), loads pgbench's
tables (``pgbench -i -s 10``: 1M rows in ``pgbench_accounts``), then times the real agent
(PostgresSource -> LandingAgent -> BronzeWriter -> Delta commits) in a child process:

1. **snapshot**: a fresh slot and lake, the exported-snapshot read of every pgbench table;
2. **stream**: ``pgbench -n`` runs its TPC-B-like transactions (3 updates + 1 insert each)
   while the agent is stopped, then the agent catches up from its bronze offset; events/s is
   data events landed over the catch-up time, so it is the rate the agent can sustain.

Peak RSS is the child's ``VmHWM``; "per agent CPU-s" divides by the agent's own CPU time, which
stays meaningful when other jobs share the machine (wall-clock rates do not). Targets (issue 26,
2-core machine): >= 500k snapshot rows/s, >= 100k streamed events/s, <= 500 MiB RSS.

Usage::

    .venv/bin/python benchmarks/pg_capture.py                 # scale 10, 50k transactions
    .venv/bin/python benchmarks/pg_capture.py --quick         # scale 1, 5k transactions
    .venv/bin/python benchmarks/pg_capture.py --runs 3        # medians of three runs

The agent reads the next batch while the previous one commits (``LandingAgent`` read-ahead);
``MEDALLION_BENCH_READ_AHEAD=0`` reads and commits in turn, for comparison. The JSON gives each
phase's CPU on the agent's own thread (the reads) and in the commits (their thread): the CPU
off the agent's thread (commits, Delta's Rust writer threads) is what the read-ahead overlaps.
Results go to stdout as a Markdown table and to ``benchmarks/results/pg_capture.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PG_BIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
RESULTS = ROOT / "benchmarks" / "results" / "pg_capture.json"

CHILD = ROOT / "benchmarks" / "capture_child.py"
"""The agent run in a child process (its figures as one JSON line)."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run_agent(raw: dict[str, Any], lake: Path, max_events: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MEDALLION_FAULTS", None)
    out = subprocess.run(
        [sys.executable, str(CHILD), json.dumps(raw), str(lake), str(max_events)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"agent failed:\n{out.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def agent_config(host: str, port: int, slot: str) -> dict[str, Any]:
    """The agent's source config for pgbench's tables (slot and publication named ``slot``)."""
    return {
        "name": "bench",
        "connector": "postgresql",
        "database.hostname": host,
        "database.port": port,
        "database.user": "postgres",
        "database.dbname": "postgres",
        "slot.name": slot,
        "publication.name": slot,
        "table.include.list": r"public\.pgbench_.*",
    }


def _pgbench(args: list[str], host: str, port: int) -> None:
    subprocess.run(
        [str(PG_BIN / "pgbench"), "-h", host, "-p", str(port), "-U", "postgres", *args, "postgres"],
        check=True,
        capture_output=True,
    )


def _one_run(args: argparse.Namespace) -> dict[str, Any]:
    """One run on a fresh server and lake: the snapshot, then the stream's catch-up."""
    workdir = Path(tempfile.mkdtemp(prefix="medallion-pgbench-"))
    cluster_dir = Path(tempfile.mkdtemp(prefix="medallion-pg-bench-"))
    host, port = args.dsn_host or "127.0.0.1", args.dsn_port or _free_port()
    started = args.dsn_port is None
    if started:
        subprocess.run(
            [
                "bash",
                str(ROOT / "scripts" / "pg_test_cluster.sh"),
                "start",
                str(cluster_dir),
                str(port),
            ],  # fmt: skip
            check=True,
            capture_output=True,
        )
    try:
        _pgbench(["-i", "-q", "-s", str(args.scale)], host, port)
        raw = agent_config(host, port, "medallion_bench")
        lake = workdir / "lake"
        snapshot = _run_agent(raw, lake, args.batch)
        rows = args.scale * 100_000 + args.scale * 10 + args.scale
        t0 = time.perf_counter()
        _pgbench(["-n", "-c", "2", "-j", "2", "-t", str(args.transactions // 2)], host, port)
        workload_s = time.perf_counter() - t0
        stream = _run_agent(raw, lake, args.batch)
        if args.keep_lake is not None:
            shutil.copytree(lake, args.keep_lake, dirs_exist_ok=True)
        events = stream["landed"]
        return {
            "scale": args.scale,
            "snapshot_rows": snapshot["landed"],
            "snapshot_rows_expected": rows,
            "snapshot_seconds": round(snapshot["seconds"], 2),
            "snapshot_rows_per_s": round(snapshot["landed"] / snapshot["seconds"]),
            "snapshot_rows_per_cpu_s": round(snapshot["landed"] / snapshot["cpu_seconds"]),
            "snapshot_peak_rss_mib": round(snapshot["peak_rss_mib"], 1),
            "snapshot_cpu_seconds": round(snapshot["cpu_seconds"], 2),
            "snapshot_commit_cpu_seconds": round(snapshot["commit_cpu_seconds"], 2),
            "snapshot_agent_thread_cpu_seconds": round(snapshot["agent_thread_cpu_seconds"], 2),
            "transactions": args.transactions,
            "workload_seconds": round(workload_s, 2),
            "stream_events": events,
            "stream_seconds": round(stream["seconds"], 2),
            "stream_events_per_s": round(events / stream["seconds"]),
            "stream_events_per_cpu_s": round(events / stream["cpu_seconds"]),
            "stream_peak_rss_mib": round(stream["peak_rss_mib"], 1),
            "stream_cpu_seconds": round(stream["cpu_seconds"], 2),
            "stream_commit_cpu_seconds": round(stream["commit_cpu_seconds"], 2),
            "stream_agent_thread_cpu_seconds": round(stream["agent_thread_cpu_seconds"], 2),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
    finally:
        if started:
            subprocess.run(
                ["bash", str(ROOT / "scripts" / "pg_test_cluster.sh"), "stop", str(cluster_dir)],
                check=False,
                capture_output=True,
            )
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(cluster_dir, ignore_errors=True)


def main() -> None:
    """Run the benchmark ``--runs`` times and print the figures (medians, and each run's)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=10, help="pgbench scale (100k rows each)")
    parser.add_argument("--transactions", type=int, default=50_000, help="pgbench transactions")
    parser.add_argument("--batch", type=int, default=20_000, help="bronze max.batch.size")
    parser.add_argument("--runs", type=int, default=1, help="runs (the figures are medians)")
    parser.add_argument("--quick", action="store_true", help="scale 1, 5k transactions")
    parser.add_argument(
        "--keep-lake", type=Path, default=None, help="copy the lake there at the end (to study it)"
    )
    parser.add_argument("--dsn-host", default=None, help="use a running server (host)")
    parser.add_argument("--dsn-port", type=int, default=None, help="use a running server (port)")
    args = parser.parse_args()
    if args.quick:
        args.scale, args.transactions = 1, 5_000
    runs = [_one_run(args) for _ in range(args.runs)]
    figures: dict[str, Any] = {
        "machine": f"{platform.machine()}, {os.cpu_count()} cpu, "
        f"Python {platform.python_version()}",
        **{k: statistics.median(r[k] for r in runs) for k in runs[0]},
        "runs": runs,
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")

    def each(key: str) -> str:
        return " / ".join(str(r[key]) for r in runs)

    print(f"medians of {len(runs)} run(s); each run after the slash-separated lists")
    print("| phase | records | seconds | records/s | per agent CPU-s | peak RSS MiB | target |")
    print("|---|---|---|---|---|---|---|")
    print(
        f"| snapshot (pgbench scale {args.scale}) | {figures['snapshot_rows']} | "
        f"{figures['snapshot_seconds']} | {figures['snapshot_rows_per_s']} "
        f"({each('snapshot_rows_per_s')}) | {figures['snapshot_rows_per_cpu_s']} "
        f"({each('snapshot_rows_per_cpu_s')}) | {figures['snapshot_peak_rss_mib']} | "
        ">= 500k rows/s, <= 500 MiB |"
    )
    print(
        f"| stream ({args.transactions} pgbench transactions) | {figures['stream_events']} | "
        f"{figures['stream_seconds']} | {figures['stream_events_per_s']} "
        f"({each('stream_events_per_s')}) | {figures['stream_events_per_cpu_s']} "
        f"({each('stream_events_per_cpu_s')}) | {figures['stream_peak_rss_mib']} | "
        ">= 100k events/s, <= 500 MiB |"
    )
    print(f"load average (1 min) at the end of each run: {each('load_average_1m')}")


if __name__ == "__main__":
    main()
