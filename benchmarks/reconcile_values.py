"""Benchmark: value-by-value reconciliation of a PostgreSQL table with silver (rows/s).

Starts a private PostgreSQL 15 (``scripts/pg_test_cluster.sh``; or ``--dsn-host/--dsn-port``),
creates one table of ``--rows`` rows (default 100k) with eleven columns of the kinds the
reconciler normalises (integers, numeric, double with NaN, date, timestamp, timestamptz,
interval, json, bytea, boolean, text), lands it with the real agent and ``SilverJob``, then
times ``reconcile_source`` in two modes on the same cut (``--runs`` each, median):

1. **hash only** (``values=False``): the agent-view read, range hashes, drill-down;
2. **with values** (the default): plus the independent read (``gold/source_read``) and the
   value-by-value comparison with silver (``gold/reconcile_compare``).

"values rows/s" is rows over the extra time the value comparison takes (2 minus 1); "total
rows/s" is rows over the whole reconcile. Both are wall clock on a machine other jobs may
share: run it on a quiet machine for figures to quote.

Usage::

    .venv/bin/python benchmarks/reconcile_values.py              # 100k rows
    .venv/bin/python benchmarks/reconcile_values.py --rows 20000

Results go to stdout as a Markdown table and to ``benchmarks/results/reconcile_values.json``.
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
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "reconcile_values.json"

TABLE = """
CREATE TABLE bench.items (
    id bigint PRIMARY KEY, qty int, amount numeric(12,2), ratio double precision, day date,
    at timestamp, seen timestamptz, span interval, doc json, raw bytea, ok boolean, name text)
"""
FILL = """
INSERT INTO bench.items
SELECT g, g % 1000, g * 0.01, CASE WHEN g % 97 = 0 THEN 'NaN' ELSE g / 7.0 END,
       date '2000-01-01' + (g % 9000), timestamp '2020-01-01' + g * interval '1.000001 second',
       timestamptz '2020-01-01 00:00:00+00' + g * interval '1 minute',
       make_interval(months => g % 13, days => g % 31, secs => g / 1000.0),
       json_build_object('g', g, 'tag', 'x' || g)::json, decode(md5(g::text), 'hex'),
       g % 2 = 0, 'item ' || g
FROM generate_series(1, %s) g
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per mode (median)")
    parser.add_argument("--dsn-host", default=None, help="use a running server (host)")
    parser.add_argument("--dsn-port", type=int, default=None, help="use a running server (port)")
    args = parser.parse_args()

    import psycopg

    from bronze.writer import BronzeTables, BronzeWriter
    from capture.registry import create_source
    from gold.cuts import latest_cut
    from gold.reconcile import reconcile_source
    from pipeline.config import PipelineConfig
    from pipeline.landing import LandingAgent
    from pipeline.orchestration import spark_for
    from silver.job import SilverJob

    workdir = Path(tempfile.mkdtemp(prefix="medallion-reconcile-bench-"))
    cluster_dir = Path(tempfile.mkdtemp(prefix="medallion-pg-reconcile-"))
    host, port = args.dsn_host or "127.0.0.1", args.dsn_port or _free_port()
    started = args.dsn_port is None
    script = str(ROOT / "scripts" / "pg_test_cluster.sh")
    if started:
        subprocess.run(
            ["bash", script, "start", str(cluster_dir), str(port)], check=True, capture_output=True
        )
    figures: dict[str, Any] = {"rows": args.rows, "machine": platform.machine(),
                               "cpus": os.cpu_count()}  # fmt: skip
    try:
        dsn = f"host={host} port={port} user=postgres dbname=postgres"
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute("DROP SCHEMA IF EXISTS bench CASCADE")
            conn.execute("CREATE SCHEMA bench")
            conn.execute(TABLE)
            conn.execute(FILL.replace("%s", str(int(args.rows))))
        lake = workdir / "lake"
        raw = {
            "name": "bench",
            "connector": "postgresql",
            "database.hostname": host,
            "database.port": port,
            "database.user": "postgres",
            "database.dbname": "postgres",
            "topic.prefix": "bench",
            "slot.name": "bench_reconcile",
            "publication.name": "bench_reconcile",
            "schema.include.list": "bench",
        }
        config = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
        t0 = time.perf_counter()
        LandingAgent(
            create_source(config.source("bench")),
            BronzeWriter(BronzeTables.under(lake)),
            max_events=50_000,
            max_transaction_events=1_000_000,
        ).run()
        spark = spark_for(config, lake)
        SilverJob(spark, lake).run_once()
        figures["land_and_apply_seconds"] = time.perf_counter() - t0
        cut = latest_cut(lake, "bench")
        assert cut is not None
        # Warm the session (JIT, Delta log) so the first timing does not carry it.
        reconcile_source(spark, config, lake, "bench", cut=cut, record=False, values=False)
        for name, values in (("hash_only", False), ("with_values", True)):
            runs = []
            for _ in range(max(1, args.runs)):
                t1 = time.perf_counter()
                result = reconcile_source(
                    spark, config, lake, "bench", cut=cut, record=False, values=values
                )
                runs.append(time.perf_counter() - t1)
                assert result.success, result.to_json()
            figures[f"{name}_runs_seconds"] = runs
            figures[f"{name}_seconds"] = statistics.median(runs)
        (table,) = result.tables
        assert table.values is not None and table.values.source_rows == args.rows
        extra = figures["with_values_seconds"] - figures["hash_only_seconds"]
        figures["values_seconds"] = extra
        figures["values_rows_per_second"] = args.rows / extra if extra > 0 else None
        figures["total_rows_per_second"] = args.rows / figures["with_values_seconds"]
    finally:
        if started:
            subprocess.run(["bash", script, "stop", str(cluster_dir)], check=False,
                           capture_output=True)  # fmt: skip
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(cluster_dir, ignore_errors=True)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(figures, indent=2) + "\n")
    print("| rows | hash only s | with values s | values s | values rows/s | total rows/s |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.rows} | {figures['hash_only_seconds']:.1f} | "
        f"{figures['with_values_seconds']:.1f} | {figures['values_seconds']:.1f} | "
        f"{figures['values_rows_per_second'] or 0:,.0f} | {figures['total_rows_per_second']:,.0f} |"
    )


if __name__ == "__main__":
    main()
