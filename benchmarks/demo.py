"""Benchmark: ``medallion demo`` end to end, wall clock (target: under 3 minutes after set-up).

What it measures
    The wall-clock time of ``medallion demo --lake <tmp>`` as a user runs it (a fresh process:
    interpreter and JVM start included), after ``make bootstrap``: private PostgreSQL start,
    shop schema, snapshot, pipeline (silver, quality, reconciliation, gold), workload, capture,
    pipeline again, summary, server stop. Each run gets a fresh lake. The figure is the median
    of ``--runs`` runs, with min and max; each step's time is read from the demo's output
    timestamps (the lines are printed as the steps finish).

Usage
    .venv/bin/python benchmarks/demo.py --runs 3 [--out benchmarks/results/demo.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TARGET_SECONDS = 180.0


def one_run() -> tuple[float, list[tuple[float, str]]]:
    """Run the demo once; return its wall time and (seconds since start, line) per output line."""
    with tempfile.TemporaryDirectory(prefix="medallion-demo-bench-") as tmp:
        lake = Path(tmp) / "lake"
        started = time.monotonic()
        proc = subprocess.Popen(
            [str(REPO / ".venv" / "bin" / "medallion"), "demo", "--lake", str(lake)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert proc.stdout is not None
        lines = [(time.monotonic() - started, line.rstrip()) for line in proc.stdout]
        if proc.wait() != 0:
            raise SystemExit("demo failed:\n" + "\n".join(line for _, line in lines))
        return time.monotonic() - started, lines


def main() -> None:
    """Run the benchmark and print (and optionally save) the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    times = []
    steps: dict[str, list[float]] = {}
    for i in range(args.runs):
        seconds, lines = one_run()
        times.append(seconds)
        for at, line in lines:
            head = line.split(":", 1)[0]
            if head[:2].rstrip(".").isdigit():
                steps.setdefault(head, []).append(at)
        print(f"run {i + 1}: {seconds:.1f} s", file=sys.stderr)
    result = {
        "benchmark": "demo",
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "load_average_at_end": os.getloadavg(),
        "runs": args.runs,
        "seconds": times,
        "median_seconds": statistics.median(times),
        "min_seconds": min(times),
        "max_seconds": max(times),
        "target_seconds": TARGET_SECONDS,
        "meets_target": statistics.median(times) < TARGET_SECONDS,
        "step_done_at_median_seconds": {k: statistics.median(v) for k, v in steps.items()},
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
