"""Benchmark: seconds from a source commit to gold, under a steady OLTP load.

What it measures
    A private PostgreSQL 15 (``scripts/pg_test_cluster.sh``) holds ``--tables`` tables of
    ``--rows`` rows each. ``medallion capture --follow`` and ``medallion run --continuous`` run
    as two processes on one pipeline config, as a user runs them. Once gold shows the snapshot,
    one client commits ``--rate`` transactions/s for ``--seconds``: transaction ``s`` updates one
    random row of table ``s mod tables``, setting its ``seq`` column to ``s``. The client keeps
    each transaction's commit time (after ``COMMIT`` returned).

    A sampler polls gold every ``--poll`` seconds: the cut gold shows per table
    (``gold/_published``) and, at that silver version, the table's highest ``seq`` (read with
    deltalake, only when the version moved). Per table the ``seq`` values only grow, so when
    gold's highest ``seq`` of a table reaches ``s``, every transaction of that table up to ``s``
    is visible: its latency is the poll time minus its commit time. The figures are p50/p95/p99
    latency over every transaction of the load, the rate the client sustained, and the rate
    gold kept up with (transactions made visible per second while the load ran). A transaction
    still invisible ``--drain`` seconds after the load ends counts as not visible (reported).
    The same percentiles are also reported over the transactions committed after ``--warmup``
    seconds of load only (``steady_state``): a young JVM runs its first MERGEs several times
    slower than warm ones, so a short run measures mostly the warm-up.

    Where the seconds go (``latency_split``): per visible transaction, commit -> the capture
    agent's read (bronze's ``capture_ts``) -> bronze's write (``ingest_ts``) -> the first
    silver commit holding it (the running maximum of ``seq`` in the silver commits' file
    statistics) -> gold (the sampler), read from the lake after the run.

    The quality checks run as configured (``--no-quality`` passes ``run --no-quality``);
    reconciliation is scheduled every ``--reconcile-interval`` seconds (0: off, as it needs the
    database and is not part of the path to gold).

Usage::

    .venv/bin/python benchmarks/freshness.py                      # 500 tx/s, 10 tables, 60 s
    .venv/bin/python benchmarks/freshness.py --rate 2000 --seconds 120
    .venv/bin/python benchmarks/freshness.py --interval 0 --keep  # keep the lake and logs
    .venv/bin/python benchmarks/freshness.py --seconds 300 --warmup 60  # steady state too

Figures go to stdout as a Markdown table and to ``benchmarks/results/freshness-<UTC>.json``.
On a shared machine the latency follows the load of the other jobs: report the load average
(printed) beside the figures.
"""

from __future__ import annotations

import argparse
import bisect
import datetime as dt
import json
import os
import platform
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402
from deltalake import DeltaTable  # noqa: E402

from gold.publish import published_cuts  # noqa: E402

SOURCE = "fresh"
RESULTS = ROOT / "benchmarks" / "results"
MEDALLION = ROOT / ".venv" / "bin" / "medallion"

_CONFIG = """\
lake:
  root: {lake}
spark:
  master: "local[{cores}]"
  conf:
    spark.sql.shuffle.partitions: "{partitions}"
    spark.ui.enabled: "false"
bronze:
  max.batch.size: {batch}
quality:
  reconcile.interval.seconds: {reconcile}
sources:
  - name: {source}
    connector: postgresql
    database.hostname: 127.0.0.1
    database.port: {port}
    database.user: postgres
    database.dbname: postgres
    topic.prefix: {source}
    slot.name: medallion_fresh
    publication.name: medallion_fresh
    publication.autocreate.mode: filtered
    table.include.list: public\\.fresh_.*
    snapshot.mode: initial
    poll.interval.ms: {poll_ms}
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _table(i: int) -> str:
    return f"fresh_t{i:02d}"


def _create_tables(dsn: str, tables: int, rows: int) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        for i in range(tables):
            conn.execute(
                f"CREATE TABLE {_table(i)} (id int PRIMARY KEY, seq bigint NOT NULL,"
                " v int NOT NULL, note text NOT NULL)"
            )
            conn.execute(
                f"INSERT INTO {_table(i)} SELECT g, 0, 0, repeat('x', 40)"
                f" FROM generate_series(1, {rows}) g"
            )


@dataclass
class _Load:
    """What the client committed: per table, the seq values and their commit times, in order."""

    seqs: dict[int, list[int]] = field(default_factory=dict)
    committed: dict[int, float] = field(default_factory=dict)
    started: float = 0.0
    ended: float = 0.0


def _run_load(dsn: str, args: argparse.Namespace, load: _Load) -> None:
    rng = random.Random(42)
    with psycopg.connect(dsn, autocommit=False) as conn:
        cur = conn.cursor()
        total = int(args.rate * args.seconds)
        load.started = time.time()
        for s in range(1, total + 1):
            due = load.started + s / args.rate
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            t = s % args.tables
            cur.execute(
                f"UPDATE {_table(t)} SET seq = %s, v = v + 1 WHERE id = %s",
                (s, rng.randint(1, args.rows)),
            )
            conn.commit()
            load.committed[s] = time.time()
            load.seqs.setdefault(t, []).append(s)
        load.ended = time.time()


def _max_seq(path: Path, version: int) -> int:
    """The highest ``seq`` of a silver table at ``version``, from the files' statistics.

    Deletion vectors are not applied (deltalake's pyarrow reader refuses tables that have
    them): a row they delete was replaced by a row with a higher ``seq`` (the load only
    updates), so the maximum is the same.
    """
    actions = pa.table(DeltaTable(str(path), version=version).get_add_actions(flatten=True))
    top = pc.max(actions.column("max.seq")).as_py()
    return int(top) if top is not None else 0


class _Sampler:
    """Polls gold: per table, the highest ``seq`` it shows, and when each value first showed."""

    def __init__(self, lake: Path, tables: int, poll: float) -> None:
        self.lake = lake
        self.tables = tables
        self.poll = poll
        self.versions: dict[str, int] = {}
        self.visible: dict[int, list[tuple[float, int]]] = {t: [] for t in range(tables)}
        self.stop = threading.Event()
        self.errors = 0

    def gold_max(self) -> dict[int, int]:
        """The highest ``seq`` gold shows per table (tables gold does not show are absent)."""
        cut = published_cuts(self.lake).get(SOURCE)
        out: dict[int, int] = {}
        if cut is None:
            return out
        for table in cut.tables.values():
            name = table.collection.rsplit(".", 1)[-1]
            if not name.startswith("fresh_t"):
                continue
            t = int(name.removeprefix("fresh_t"))
            if self.versions.get(name) != table.version or not self.visible[t]:
                out[t] = _max_seq(self.lake / "silver" / table.silver_table, table.version)
                self.versions[name] = table.version
            else:
                out[t] = self.visible[t][-1][1]
        return out

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                seen = self.gold_max()
            except Exception:  # a commit being written; the next poll reads it
                self.errors += 1
                seen = {}
            now = time.time()
            for t, top in seen.items():
                marks = self.visible[t]
                if not marks or top > marks[-1][1]:
                    marks.append((now, top))
            self.stop.wait(self.poll)

    def seen_at(self, t: int, s: int) -> float | None:
        """When gold first showed transaction ``s`` of table ``t``; None if it never did."""
        marks = self.visible[t]
        i = bisect.bisect_left([m[1] for m in marks], s)
        return marks[i][0] if i < len(marks) else None


def _bronze_times(lake: Path) -> dict[int, tuple[float, float]]:
    """Per ``seq`` of the load: when the capture agent read its change (``capture_ts``) and
    when bronze wrote it (``ingest_ts``), from the kept bronze rows (the first of each)."""
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table(
        columns=["kind", "value_json", "capture_ts", "ingest_ts"]
    )
    table = table.filter(pc.equal(table.column("kind"), "data"))
    # The update's before-image holds the key only, so the first "seq" is the after-image's.
    found = pc.extract_regex(table.column("value_json"), r'"seq":(?P<seq>\d+)')
    seqs = pc.struct_field(found, "seq")
    out: dict[int, tuple[float, float]] = {}
    for seq, captured, ingested in zip(
        seqs.to_pylist(),
        table.column("capture_ts").to_pylist(),
        table.column("ingest_ts").to_pylist(),
        strict=True,
    ):
        if seq is not None and int(seq) not in out:
            out[int(seq)] = (captured.timestamp(), ingested.timestamp())
    return out


def _silver_times(lake: Path, tables: int) -> dict[int, list[tuple[float, int]]]:
    """Per table: (commit time, highest ``seq`` written so far) of each silver commit, from the
    commits' ``add`` statistics (``seq`` only grows per row, so the running maximum is the
    table's at that version)."""
    out: dict[int, list[tuple[float, int]]] = {}
    for t in range(tables):
        log = lake / "silver" / f"{SOURCE}__public__{_table(t)}" / "_delta_log"
        marks: list[tuple[float, int]] = []
        top = 0
        for commit in sorted(log.glob("*.json")):
            when = None
            for line in commit.read_text().splitlines():
                action = json.loads(line)
                if "commitInfo" in action:
                    when = action["commitInfo"].get("timestamp")
                elif "add" in action and action["add"].get("stats"):
                    seen = json.loads(action["add"]["stats"]).get("maxValues", {}).get("seq")
                    top = max(top, int(seen or 0))
            if when is not None and (not marks or top > marks[-1][1]):
                marks.append((when / 1000, top))
        out[t] = marks
    return out


def _split(
    load: _Load, sampler: _Sampler, lake: Path, tables: int
) -> dict[str, dict[str, float | None]]:
    """Where each visible transaction's seconds went: commit -> capture read -> bronze
    commit -> silver commit -> gold, as percentiles of each step (and of the cumulative)."""
    bronze = _bronze_times(lake)
    silver = _silver_times(lake, tables)
    steps: dict[str, list[float]] = {
        k: []
        for k in (
            "commit_to_capture",
            "capture_to_bronze",
            "bronze_to_silver",
            "silver_to_gold",
            "commit_to_bronze",
            "commit_to_silver",
            "commit_to_gold",
        )
    }
    for t, seqs in load.seqs.items():
        marks = silver.get(t, [])
        tops = [m[1] for m in marks]
        for s in seqs:
            gold = sampler.seen_at(t, s)
            i = bisect.bisect_left(tops, s)
            if gold is None or s not in bronze or i == len(marks):
                continue
            committed = load.committed[s]
            captured, landed = bronze[s]
            merged = marks[i][0]
            steps["commit_to_capture"].append(captured - committed)
            steps["capture_to_bronze"].append(landed - captured)
            steps["bronze_to_silver"].append(merged - landed)
            steps["silver_to_gold"].append(gold - merged)
            steps["commit_to_bronze"].append(landed - committed)
            steps["commit_to_silver"].append(merged - committed)
            steps["commit_to_gold"].append(gold - committed)
    return {
        step: {
            "p50_s": round(_percentile(values, 0.50), 2) if values else None,
            "p99_s": round(_percentile(values, 0.99), 2) if values else None,
        }
        for step, values in steps.items()
    }


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def _start(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(cmd, stdout=log.open("wb"), stderr=subprocess.STDOUT, env=env, cwd=ROOT)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _micro_batch_lines(log: Path) -> list[str]:
    """The run's micro-batch lines (``silver.job``): stages, seconds and Spark jobs of each."""
    if not log.exists():
        return []
    marker = "INFO    silver.job: silver batch "
    return [
        line.split("silver.job: ", 1)[1] for line in log.read_text().splitlines() if marker in line
    ]


def _wait_for_snapshot(sampler: _Sampler, tables: int, timeout: float, procs: list[Any]) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        for proc, log in procs:
            if proc.poll() is not None:
                raise SystemExit(f"{log.name} exited {proc.returncode}:\n{log.read_text()[-4000:]}")
        if all(sampler.visible[t] for t in range(tables)):
            return
        time.sleep(0.5)
    raise SystemExit(f"gold did not show the snapshot of {tables} tables in {timeout} s")


def main() -> None:
    """Run the benchmark and print the figures."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rate", type=float, default=500.0, help="transactions/s")
    parser.add_argument("--tables", type=int, default=10)
    parser.add_argument("--rows", type=int, default=1000, help="rows per table")
    parser.add_argument("--seconds", type=float, default=60.0, help="load duration")
    parser.add_argument("--interval", type=float, default=1.0, help="run --continuous --interval")
    parser.add_argument("--poll", type=float, default=0.2, help="sampler poll, seconds")
    parser.add_argument("--poll-ms", type=int, default=200, help="capture poll.interval.ms")
    parser.add_argument("--batch", type=int, default=20_000, help="bronze max.batch.size")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--partitions", type=int, default=2, help="spark.sql.shuffle.partitions")
    parser.add_argument("--no-quality", action="store_true", help="run --no-quality")
    parser.add_argument("--reconcile-interval", type=int, default=0)
    parser.add_argument("--drain", type=float, default=60.0, help="seconds to wait after load")
    parser.add_argument(
        "--warmup",
        type=float,
        default=60.0,
        help="steady-state figures leave out transactions committed in the load's first "
        "WARMUP seconds (the JVM's warm-up: its first MERGEs cost 2-7x a warm one)",
    )
    parser.add_argument("--startup-timeout", type=float, default=300.0)
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--medallion",
        default=str(MEDALLION),
        help="command that runs the medallion CLI (e.g. 'python wrapper.py' to profile it)",
    )
    args = parser.parse_args()
    # A SIGTERM unwinds like Ctrl-C, so the pipeline processes and the server are stopped.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))

    work = Path(tempfile.mkdtemp(prefix="medallion-fresh-"))
    cluster = Path(tempfile.mkdtemp(prefix="medallion-fresh-pg-"))
    port = _free_port()
    pg = ["bash", str(ROOT / "scripts" / "pg_test_cluster.sh")]
    subprocess.run([*pg, "start", str(cluster), str(port)], check=True, capture_output=True)
    dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
    procs: list[tuple[subprocess.Popen[bytes], Path]] = []
    sampler = _Sampler(work / "lake", args.tables, args.poll)
    sampling = threading.Thread(target=sampler.run, daemon=True)
    try:
        _create_tables(dsn, args.tables, args.rows)
        config = work / "pipeline.yaml"
        config.write_text(
            _CONFIG.format(
                lake=work / "lake",
                cores=args.cores,
                partitions=args.partitions,
                batch=args.batch,
                reconcile=args.reconcile_interval or "null",
                source=SOURCE,
                port=port,
                poll_ms=args.poll_ms,
            )
        )
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        env.pop("MEDALLION_FAULTS", None)
        base = [*args.medallion.split(), "--config", str(config)]
        run = [*base, "run", "--continuous", "--interval", str(args.interval)]
        if args.no_quality:
            run.append("--no-quality")
        procs.append(
            (
                _start([*base, "capture", "--follow"], work / "capture.log", env),
                work / "capture.log",
            )
        )
        procs.append((_start(run, work / "run.log", env), work / "run.log"))
        sampling.start()
        t0 = time.time()
        _wait_for_snapshot(sampler, args.tables, args.startup_timeout, procs)
        startup = time.time() - t0
        load = _Load()
        _run_load(dsn, args, load)
        drain_until = time.time() + args.drain
        last = max(load.committed)
        while time.time() < drain_until:
            if sampler.seen_at(last % args.tables, last) is not None:
                break
            time.sleep(0.5)
        sampler.stop.set()
        sampling.join()
    finally:
        sampler.stop.set()
        for proc, _log in procs:
            _stop(proc)
        subprocess.run([*pg, "stop", str(cluster)], check=False, capture_output=True)
    latencies: list[float] = []
    steady: list[float] = []
    steady_from = load.started + args.warmup
    invisible = 0
    visible_in_load = 0
    for t, seqs in load.seqs.items():
        for s in seqs:
            at = sampler.seen_at(t, s)
            if at is None:
                invisible += 1
                continue
            latencies.append(max(0.0, at - load.committed[s]))
            if load.committed[s] >= steady_from:
                steady.append(latencies[-1])
            if at <= load.ended:
                visible_in_load += 1
    duration = load.ended - load.started
    try:
        split = _split(load, sampler, work / "lake", args.tables)
    except Exception as exc:  # noqa: BLE001 - the latency figures stand without the split
        split = {"error": {"reason": str(exc)}}  # type: ignore[dict-item]
    steady_figures: dict[str, Any] = {
        "after_seconds_of_load": args.warmup,
        "transactions": len(steady),
        "p50_s": round(_percentile(steady, 0.50), 2) if steady else None,
        "p95_s": round(_percentile(steady, 0.95), 2) if steady else None,
        "p99_s": round(_percentile(steady, 0.99), 2) if steady else None,
        "max_s": round(max(steady), 2) if steady else None,
    }
    figures = {
        "benchmark": "freshness",
        "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()}, {os.cpu_count()} cpu, "
        f"Python {platform.python_version()}",
        "args": vars(args),
        "startup_seconds": round(startup, 1),
        "transactions": len(load.committed),
        "load_seconds": round(duration, 1),
        "offered_tx_per_s": round(len(load.committed) / duration, 1),
        "gold_tx_per_s_during_load": round(visible_in_load / duration, 1),
        "not_visible": invisible,
        "p50_s": round(_percentile(latencies, 0.50), 2) if latencies else None,
        "p95_s": round(_percentile(latencies, 0.95), 2) if latencies else None,
        "p99_s": round(_percentile(latencies, 0.99), 2) if latencies else None,
        "max_s": round(max(latencies), 2) if latencies else None,
        # The same over the transactions committed after --warmup seconds of load (visible
        # ones; the invisible are counted above): the steady state, labelled as such.
        "steady_state": steady_figures,
        # Where the seconds went, per visible transaction: the source commit (the client's
        # clock after COMMIT), the agent's read (capture_ts), bronze's write (ingest_ts), the
        # silver commit that first held it, gold (the sampler). One clock: one machine.
        "latency_split": split,
        "mean_s": round(statistics.fmean(latencies), 2) if latencies else None,
        "gold_moves": sum(len(m) for m in sampler.visible.values()),
        "sampler_errors": sampler.errors,
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "work": str(work) if args.keep else None,
        # Seconds per stage follow the machine's load; the Spark jobs per stage do not.
        "micro_batches": _micro_batch_lines(work / "run.log"),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    (RESULTS / f"freshness-{stamp}.json").write_text(json.dumps(figures, indent=2) + "\n")
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(figures, indent=2))
    print()
    print(
        "| tx/s offered | tables | seconds | gold tx/s | p50 s | p95 s | p99 s | max s "
        "| not visible | load avg |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    print(
        f"| {figures['offered_tx_per_s']} | {args.tables} | {figures['load_seconds']} | "
        f"{figures['gold_tx_per_s_during_load']} | {figures['p50_s']} | {figures['p95_s']} | "
        f"{figures['p99_s']} | {figures['max_s']} | {invisible} | "
        f"{figures['load_average_1m_at_end']} |"
    )
    warm = steady_figures
    print(
        "latency split (p50 / p99 s): "
        + ", ".join(f"{k} {v.get('p50_s')} / {v.get('p99_s')}" for k, v in split.items())
    )
    print(
        f"steady state (transactions committed after {args.warmup:g} s of load: "
        f"{warm['transactions']}): p50 {warm['p50_s']} s, p95 {warm['p95_s']} s, "
        f"p99 {warm['p99_s']} s, max {warm['max_s']} s"
    )


if __name__ == "__main__":
    main()
