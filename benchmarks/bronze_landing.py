"""Benchmark: Debezium JSON landed into bronze, events per second and peak RSS, on one core.

Generates a deterministic PostgreSQL-connector stream (tests.pgmodel.streams), writes it as JSON
lines, then lands it with the real agent (DebeziumJsonSource -> BronzeWriter -> Delta commits)
in a child process pinned to one CPU with ``taskset``. Each configuration runs several times on a
fresh lake; the median is reported.

Usage::

    .venv/bin/python benchmarks/bronze_landing.py --events 500000 --runs 3
    .venv/bin/python benchmarks/bronze_landing.py --quick        # small smoke run

The figures go to stdout as a Markdown table and to ``benchmarks/results/bronze_landing.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.pgmodel.streams import postgres_stream, write_lines  # noqa: E402

DRIVER = r"""
import json, sys, time
from pathlib import Path
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
path, lake, max_events = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
agent = LandingAgent(DebeziumJsonSource("bench", path),
                     BronzeWriter(BronzeTables.under(lake)), max_events=max_events)
t0 = time.perf_counter()
result = agent.run()
elapsed = time.perf_counter() - t0
# VmHWM is this address space's peak RSS. Not ru_maxrss: Linux carries that across execve, so
# it would report the parent's peak (the parent generated the input).
hwm_kib = next(int(line.split()[1]) for line in open("/proc/self/status")
               if line.startswith("VmHWM:"))
print(json.dumps({"read": result.read, "landed": result.landed, "batches": result.batches,
                  "seconds": elapsed, "peak_rss_mib": hwm_kib / 1024}))
"""

CONFIGS = (
    ("kafka_json", False, "key + value, schemas.enable=false (kcat -J style)"),
    ("kafka_json", True, "key + value, schemas.enable=true (schema inline in every record)"),
    ("envelope", False, "value only (Debezium Server style)"),
)


def make_input(directory: Path, events: int, line_format: str, schemas: bool) -> tuple[Path, int]:
    """Write about ``events`` records; returns the file and its line count."""
    # About 2.6 records per transaction plus BEGIN/END: size the transaction count to match.
    stream = postgres_stream(snapshot_rows=1000, transactions=max(1, events // 4), seed=42)
    path = directory / f"input-{line_format}-{int(schemas)}.jsonl"
    lines = stream.lines(line_format, schemas=schemas)
    n = write_lines(path, (line for _, line in zip(range(events), lines, strict=False)))
    return path, n


def run_once(path: Path, max_events: int, cpus: str) -> dict[str, Any]:
    """Land ``path`` into a fresh lake in a child process pinned to ``cpus``."""
    lake = Path(tempfile.mkdtemp(prefix="bench-lake-"))
    try:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        cmd = [sys.executable, "-c", DRIVER, str(path), str(lake), str(max_events)]
        if shutil.which("taskset") and cpus:
            cmd = ["taskset", "-c", cpus, *cmd]
        out = subprocess.run(cmd, env=env, check=True, capture_output=True, text=True)
        result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
        return result
    finally:
        shutil.rmtree(lake, ignore_errors=True)


def main() -> None:
    """Run the benchmark and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--max-batch-size", type=int, default=20_000)
    parser.add_argument("--cpus", default="0", help="taskset CPU list for the landing process")
    parser.add_argument("--quick", action="store_true", help="20k events, 1 run")
    args = parser.parse_args()
    if args.quick:
        args.events, args.runs = 20_000, 1
    work = Path(tempfile.mkdtemp(prefix="bench-in-"))
    rows = []
    try:
        for line_format, schemas, label in CONFIGS:
            path, n = make_input(work, args.events, line_format, schemas)
            size_mb = path.stat().st_size / 1e6
            runs = [run_once(path, args.max_batch_size, args.cpus) for _ in range(args.runs)]
            for r in runs:
                assert r["read"] == n, (r, n)
            rates = [r["read"] / r["seconds"] for r in runs]
            rows.append(
                {
                    "input": label,
                    "events": n,
                    "input_mb": round(size_mb, 1),
                    "runs": len(runs),
                    "median_events_per_s": round(statistics.median(rates)),
                    "min_events_per_s": round(min(rates)),
                    "max_events_per_s": round(max(rates)),
                    "median_seconds": round(statistics.median(r["seconds"] for r in runs), 2),
                    "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs)),
                    "batches": runs[0]["batches"],
                }
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    machine = {
        "cpu": platform.processor() or platform.machine(),
        "python": platform.python_version(),
        "cores_used": args.cpus,
        "nproc": os.cpu_count(),
        "max_batch_size": args.max_batch_size,
    }
    out = ROOT / "benchmarks" / "results"
    out.mkdir(exist_ok=True)
    (out / "bronze_landing.json").write_text(
        json.dumps({"machine": machine, "rows": rows}, indent=2)
    )
    print(f"machine: {machine}")
    print("| input | events | MB | median events/s | min-max | median s | peak RSS MiB |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['input']} | {r['events']} | {r['input_mb']} | {r['median_events_per_s']} "
            f"| {r['min_events_per_s']}-{r['max_events_per_s']} | {r['median_seconds']} "
            f"| {r['peak_rss_mib']} |"
        )


if __name__ == "__main__":
    main()
