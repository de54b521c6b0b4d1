"""The silver half of the chaos run (``benchmarks/chaos.py``): kill -9 the real ``medallion run``
at random moments, then the final undisturbed run and the checks that need Spark.

* :class:`SilverKiller` runs ``medallion run --continuous`` (a child process with its own JVM)
  against the chaos lake and ``kill -9``s it, again and again: some incarnations while they
  start (JVM, table registration, the stream's first read), the others after a random number of
  their own silver commits, so the kill lands between or inside the MERGEs, side-table appends
  and checkpoint writes of a micro-batch. Each kill is counted by the phase it hit; a job that
  exits on its own is a crash (a bug), counted and logged.
* :func:`final_run` is the undisturbed ``medallion run --once`` after the agents caught up.
* :func:`verify_lake` (in a child: ``chaos_silver.py verify``; in a test: the shared session)
  reconciles gold with the source database through the project's own reconciliation (what
  ``medallion reconcile`` runs: an independent read of the source), checks that every silver
  table holds each key once, and lists what silver did with each hostile bronze row (applied,
  quarantined with a reason).

``--continuous`` rather than ``--once`` in a loop: both pay a JVM start per kill, but a
continuous job is still applying when the kill comes, where a ``--once`` job may already have
finished.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EXIT_RETRYABLE = 75
"""``medallion``'s exit status for "transient, run again" (pipeline/cli.py)."""

PHASE_STARTING = "starting (JVM, tables, stream: no step of its own yet)"
PHASE_APPLYING = "applying (1-3 steps in: its first micro-batch planned, MERGEs running)"
PHASE_LATE = "later (4+ steps: micro-batches committed, others in flight)"


def medallion(config: Path, *args: str, log_name: str) -> subprocess.Popen[bytes]:
    """The real CLI as a child in its own process group (a kill takes its JVM along)."""
    command = [sys.executable, "-m", "pipeline.cli", "--config", str(config), *args]
    log = open(config.parent / log_name, "ab")  # noqa: SIM115 - the child owns it
    return subprocess.Popen(
        command,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=log,
        stderr=log,
        start_new_session=True,
    )


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass  # the child and its group are gone already
    process.wait()


def silver_commits(lake: Path) -> int:
    """Commits in every Delta table under ``silver/`` (tables, side tables), and the stream's
    checkpoint offsets and commits: a number that grows with each step silver takes."""
    silver = lake / "silver"
    total = 0
    if not silver.exists():
        return 0
    for entry in os.scandir(silver):
        logs = [Path(entry.path) / "_delta_log"]
        if entry.name == "_checkpoints":
            logs = [Path(p.path) / "commits" for p in os.scandir(entry.path) if p.is_dir()]
        if entry.name == "_checkpoints":
            # The stream's offsets: a micro-batch was planned (its MERGEs are about to run).
            logs += [Path(p.path) / "offsets" for p in os.scandir(entry.path) if p.is_dir()]
        for log in logs:
            try:
                # Delta commits end in .json; the stream's commit files are bare numbers.
                total += sum(
                    1
                    for f in os.scandir(log)
                    if f.name[0].isdigit() and "." not in f.name or f.name.endswith(".json")
                )
            except FileNotFoundError:
                continue
    return total


class SilverKiller:
    """``medallion run --continuous`` killed -9 at random moments until stopped.

    Args:
        config: The chaos pipeline config.
        lake: Its lake root.
        seed: For the random kill moments.
        interval: ``--interval`` of the job (seconds between micro-batches).
        starting_share: Share of incarnations killed while starting.
    """

    def __init__(
        self,
        config: Path,
        lake: Path,
        seed: int,
        *,
        interval: float = 1.0,
        starting_share: float = 0.25,
    ) -> None:
        self.config = config
        self.lake = lake
        self.rng = random.Random(seed)
        self.interval = interval
        self.starting_share = starting_share
        self.kills = 0
        self.by_phase: Counter[str] = Counter()
        self.crashes = 0
        self.problems: list[str] = []
        self.startup_seconds: list[float] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self._forced = ["starting", "applying"]  # popped from the end: applying first

    def start(self) -> None:
        self.thread.start()

    def finish(self) -> None:
        """Stop the loop; the job running now is killed too (and counted)."""
        self.stop.set()
        self.thread.join()

    def _start_job(self) -> subprocess.Popen[bytes]:
        args = ["--log-level", "WARNING", "run", "--continuous", "--no-quality"]
        return medallion(
            self.config, *args, "--interval", str(self.interval), log_name="silver.log"
        )

    def _run(self) -> None:
        while not self.stop.is_set():
            process = self._start_job()
            started = time.monotonic()
            base = silver_commits(self.lake)
            # The first two kills hit each phase once (inside a micro-batch first: the kill that
            # matters most when a short run has only one), then at random.
            forced = self._forced.pop() if self._forced else None
            if forced == "starting" or (forced is None and self.rng.random() < self.starting_share):
                # While starting: a JVM start takes 10-60 s on the loaded machine.
                guess = sorted(self.startup_seconds)[len(self.startup_seconds) // 2 :] or [20.0]
                target_commits = None
                deadline = started + self.rng.uniform(0.5, guess[0])
            else:
                target_commits = self.rng.choice([1, 1, 2, 3, 4, 6, 10])
                deadline = started + 900.0  # a job that commits nothing for 15 min is stuck
            commits = 0
            while not self.stop.is_set() and process.poll() is None:
                seen = commits
                commits = silver_commits(self.lake) - base
                if commits and not seen:
                    self.startup_seconds.append(time.monotonic() - started)
                if target_commits is not None and commits >= target_commits:
                    # Inside the next step or between two: a short random wait.
                    time.sleep(self.rng.uniform(0.0, 1.5))
                    break
                if time.monotonic() >= deadline:
                    if target_commits is not None:
                        self.problems.append(
                            f"silver job made {commits} commit(s) in 900 s (stuck?); killed"
                        )
                    break
                time.sleep(0.1)
            if process.poll() is not None:
                self.crashes += 1
                self.problems.append(
                    f"silver job exited by itself with status {process.returncode} after "
                    f"{time.monotonic() - started:.0f} s; see {self.config.parent / 'silver.log'}"
                )
                if self.crashes >= 5:
                    return  # a job that keeps crashing is a finding; stop hammering
                continue
            commits = silver_commits(self.lake) - base
            _kill_group(process)
            self.kills += 1
            phase = PHASE_STARTING if not commits else PHASE_APPLYING
            self.by_phase[PHASE_LATE if commits >= 4 else phase] += 1


def final_run(config: Path, attempts: int = 3) -> tuple[bool, float, str]:
    """The undisturbed ``medallion run --once`` (checks included); a retryable exit is run
    again. Returns (succeeded, seconds, what went wrong)."""
    started = time.monotonic()
    status = None
    for _ in range(attempts):
        process = medallion(config, "--log-level", "WARNING", "run", "--once", log_name="run.log")
        status = process.wait(timeout=7200)
        if status == 0:
            return True, round(time.monotonic() - started, 1), ""
        if status != EXIT_RETRYABLE:
            break
    seconds = round(time.monotonic() - started, 1)
    return False, seconds, f"medallion run --once exited {status}; see {config.parent}/run.log"


def verify_lake(spark: Any, config_path: Path, source: str) -> dict[str, Any]:
    """The checks that need Spark, as JSON-able data.

    Returns:
        ``reconcile``: per table the outcome of :func:`gold.reconcile.reconcile_source` (what
        ``medallion reconcile`` runs), ``reconcile_clean``; ``keys_twice``: per silver table the
        keys held by more than one row; ``quarantine``: silver quarantine rows (source, origin,
        reason); ``applied``: per hostile silver table the positions (hex) and keys it holds.
    """
    from pyspark.sql import functions as F

    from gold.reconcile import reconcile_source
    from pipeline.config import load_config

    config = load_config(config_path)
    lake = Path(config.lake.root)
    result = reconcile_source(spark, config, lake, source)
    out: dict[str, Any] = {
        "reconcile_clean": result.success,
        "reconcile": [
            {"table": o.table, "ok": o.success, "observed": o.observed, "sample": list(o.sample)}
            for o in result.outcomes()
            if o.check == "reconcile"
        ],
        "source_ahead": result.source_ahead,
        "keys_twice": {},
        "quarantine": [],
        "applied": {},
    }
    silver = lake / "silver"
    for table in sorted(p for p in silver.iterdir() if (p / "_delta_log").is_dir()):
        if table.name.startswith("_"):
            continue
        frame = spark.read.format("delta").load(str(table))
        twice = frame.groupBy("_cdc_key").count().where(F.col("count") > 1).count()
        if twice:
            out["keys_twice"][table.name] = twice
        if table.name.startswith("hostile__"):
            rows = frame.select(F.hex("_cdc_position").alias("p"), "_cdc_key").collect()
            out["applied"][table.name] = [[r["p"].lower(), r["_cdc_key"]] for r in rows]
    quarantine = silver / "_quarantine"
    if (quarantine / "_delta_log").is_dir():
        rows = spark.read.format("delta").load(str(quarantine)).collect()
        out["quarantine"] = [
            {"source": r["source"], "origin": r["origin"], "reason": r["reason"]} for r in rows
        ]
    return out


def verify_in_child(config: Path, source: str) -> dict[str, Any]:
    """:func:`verify_lake` in a child process with its own Spark (JSON on its last line)."""
    command = [sys.executable, __file__, "verify", "--config", str(config), "--source", source]
    log = config.parent / "verify.log"
    with open(log, "ab") as err:
        done = subprocess.run(
            command,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=err,
            timeout=7200,
            check=False,
        )
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"the verification failed ({done.returncode}); see {log}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="chaos run: the checks that need Spark")
    parser.add_argument("command", choices=["verify"])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--source", required=True)
    args = parser.parse_args(argv)
    from pipeline.config import load_config
    from pipeline.orchestration import spark_for

    spark = spark_for(load_config(args.config))
    print(json.dumps(verify_lake(spark, args.config, args.source)))
    return 0


if __name__ == "__main__":
    sys.exit(_main())
