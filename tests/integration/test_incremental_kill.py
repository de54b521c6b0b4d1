"""An incremental snapshot survives ``kill -9`` of the agent process (issue 16's done-when).

On the real PostgreSQL and MariaDB servers: ``medallion capture <source> --follow`` runs as a
child process while a writer thread commits random inserts, updates, deletes and key changes the
whole time; an incremental snapshot of a 300-row table is requested; the child is SIGKILLed once
bronze's committed offset shows a chunk committed and the snapshot not finished; a new child
resumes it. Then silver (the project's job) equals the source row for row, and bronze shows the
snapshot resumed after its last committed key rather than starting over.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze.writer import BronzeTables, BronzeWriter, CommittedBatch, agent_app_id
from pipeline.config import PipelineConfig
from pipeline.orchestration import land_sources
from silver.job import SilverJob
from tests.integration.test_incremental_snapshot import (
    Corner,
    corner,
    execute_snapshot,
    fill,
    my,
    pg,
    silver_rows,
    source_rows,
)
from tests.integration.test_pg_capture import rows

pytestmark = [pytest.mark.spark, pytest.mark.delta]

__all__ = ["corner", "my", "pg"]  # the fixtures, re-used from the other tests

ROOT = Path(__file__).resolve().parents[2]
ROWS = 300
CHUNK = 50
DEADLINE_S = 240.0
"""How long any one wait may take on a loaded machine before the test fails."""


class Writer(threading.Thread):
    """Random single-statement transactions on ``items`` until stopped: updates, deletes,
    inserts of new keys and key changes (``UPDATE ... SET id = <new key>``)."""

    def __init__(self, c: Corner, seed: int) -> None:
        super().__init__(daemon=True)
        self.c, self.rnd, self.stop = c, random.Random(seed), threading.Event()
        self.next_key = 10_000
        self.done = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        t = self.c.collection("items")
        try:
            while not self.stop.is_set():
                key, kind = self.rnd.randint(1, ROWS), self.rnd.random()
                if kind < 0.45:
                    statement = f"UPDATE {t} SET v = v + 1, note = 'upd' WHERE id = {key}"
                elif kind < 0.6:
                    statement = f"DELETE FROM {t} WHERE id = {key}"
                elif kind < 0.8:
                    self.next_key += 1
                    statement = f"INSERT INTO {t} VALUES ({self.next_key}, 1, 'new')"
                else:
                    self.next_key += 1
                    statement = f"UPDATE {t} SET id = {self.next_key} WHERE id = {key}"
                self.c.sql(statement)
                self.done += 1
                time.sleep(0.005)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            self.error = exc


_LOGS: dict[int, Path] = {}
"""The log file of each agent child, by pid."""


def committed(lake: Path, name: str) -> CommittedBatch | None:
    return BronzeWriter(BronzeTables.under(lake)).last_committed(agent_app_id(name))


def wait_for(what: str, check: Callable[[], Any], proc: subprocess.Popen[bytes] | None) -> Any:
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            pytest.fail(f"the agent exited ({proc.returncode}) waiting for {what}: {_err(proc)}")
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def _err(proc: subprocess.Popen[bytes]) -> str:
    """The end of the child's log (a file: a pipe nobody reads would block a chatty child)."""
    log = _LOGS.get(proc.pid)
    return log.read_text(errors="replace")[-3000:] if log is not None and log.exists() else ""


def stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM: the agent stops after the batch in flight (killed if it does not)."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, _err(proc)


def follow(config: Path, name: str) -> subprocess.Popen[bytes]:
    """``medallion capture <name> --follow`` as a child process, its log in a file next to
    ``config`` (read by :func:`_err`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = config.with_name(f"agent-{time.monotonic_ns()}.log")
    args = [sys.executable, "-m", "pipeline.cli", "--config", str(config), "--log-level"]
    args += ["INFO", "capture", "-s", name, "--follow"]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=out)
    _LOGS[proc.pid] = log
    return proc


def snapshot_of(batch: CommittedBatch | None) -> dict[str, Any] | None:
    if batch is None:
        return None
    snap: dict[str, Any] | None = (batch.offset.get("signals") or {}).get("snapshot")
    return snap


def key_id(key: Any) -> int:
    """The ``id`` in an offset's key (JSON form; nested or text depending on the engine)."""
    while isinstance(key, list):
        key = key[0]
    return int(key)


def test_incremental_snapshot_survives_kill_9_under_a_concurrent_writer(
    spark: Any, corner: Corner, tmp_path: Path
) -> None:
    c, lake = corner, tmp_path / "lake"
    fill(c, "items", ROWS)
    raw = c.raw_dict(
        **{
            "snapshot.mode": c.no_data_snapshot,
            "signal.data.collection": c.collection("sig"),
            "incremental.snapshot.chunk.size": CHUNK,
            "table.include.list": rf"{c.schema}\.(items|sig)",
            "max.batch.size": 40,
            "poll.interval.ms": 50,
        }
    )
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(orjson.dumps({"lake": {"root": str(lake)}, "sources": [raw]}).decode())
    config = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
    source_config = config.source(c.name)

    writer = Writer(c, seed=16)
    writer.start()
    first = follow(config_path, c.name)
    try:
        # Streaming has begun (a batch of the writer's changes is committed): a signal sent
        # now is after the agent's starting point in the log.
        wait_for("the first batch", lambda: committed(lake, c.name), first)
        execute_snapshot(source_config, c.collection("items"))
        progress = wait_for(
            "a committed chunk",
            lambda: (s := snapshot_of(committed(lake, c.name))) and s["chunks"] >= 1 and s,
            first,
        )
        os.kill(first.pid, signal.SIGKILL)
        first.wait(timeout=60)
    finally:
        if first.poll() is None:
            first.kill()
            first.wait()
    assert first.returncode == -signal.SIGKILL
    at_kill = committed(lake, c.name)
    assert at_kill is not None
    resumed_from = snapshot_of(at_kill)
    assert resumed_from is not None, "the snapshot ended before the kill: nothing was tested"
    assert resumed_from["chunks"] >= progress["chunks"] >= 1
    snapshot_id = resumed_from["id"]

    second = follow(config_path, c.name)
    try:
        wait_for(
            "the snapshot to complete after the restart",
            lambda: (
                (b := committed(lake, c.name))
                and (b.offset.get("signals") or {}).get("ended", {}).get(snapshot_id) == "complete"
            ),
            second,
        )
        time.sleep(0.5)  # the writer goes on a little past the snapshot's end
        writer.stop.set()
        writer.join(timeout=30)
    finally:
        writer.stop.set()
        stop(second)
    assert writer.error is None, writer.error
    assert writer.done >= 50, writer.done  # the writer ran the whole time
    land_sources(config, [c.name])  # the writer's last changes

    # Resumed, not restarted: rows read by the snapshot after the restart all come after the
    # last key committed before the kill, and no key was read by two chunks.
    reads = [
        r
        for r in rows(lake)
        if r["value"] is not None
        and r["value"].get("op") == "r"
        and str(r["collection"]).endswith(".items")
    ]
    assert all(r["value"]["source"]["snapshot"] == "incremental" for r in reads)
    ids = [int(r["value"]["after"]["id"]) for r in reads]
    assert len(ids) == len(set(ids)), "a key was read by two chunks"
    before = [i for r, i in zip(reads, ids, strict=True) if r["batch_seq"] <= at_kill.batch_seq]
    after = [i for r, i in zip(reads, ids, strict=True) if r["batch_seq"] > at_kill.batch_seq]
    last_key = key_id(resumed_from["after"])
    assert before and max(before) <= last_key
    assert after and min(after) > last_key, (last_key, sorted(after)[:5])

    SilverJob(spark, lake).run_once()
    assert silver_rows(spark, lake, c, "items") == source_rows(c, "items")
