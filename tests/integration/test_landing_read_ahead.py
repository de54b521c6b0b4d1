"""The landing agent's read-ahead: batch N+1 is read while batch N commits, exactly once still.

Each crash here is placed *inside the overlap*: the commit thread stops at a step of batch N
(a :class:`pipeline.faults.FaultInjector` point) and dies only once the agent's thread has read
batch N+1 ahead. The next start must land every record once, in order, and every
acknowledgement must have followed the commit of the batch it acknowledges.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.base import SourceBatch
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.errors import StageFailed
from pipeline.faults import FaultInjector
from pipeline.landing import LandingAgent
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = pytest.mark.delta

ROOT = Path(__file__).resolve().parents[2]
CRASHED_BATCH = 1
MAX_EVENTS = 12
BROKEN = b"{broken"


class _Crash(Exception):
    pass


class _WatchedSource(DebeziumJsonSource):
    """A file source that records which thread calls it, and checks every acknowledgement
    against what bronze has committed at that moment."""

    def __init__(self, path: Path, writer: BronzeWriter, *, fail_read: int | None = None) -> None:
        super().__init__("shop", path)
        self.writer = writer
        self.fail_read = fail_read
        self.reads = 0
        self.read_ahead = threading.Event()
        self.threads: set[int] = set()
        self.acked: list[Mapping[str, Any]] = []

    def read_batch(
        self,
        *,
        max_events: int,
        max_transaction_events: int,
        until: Mapping[str, Any] | None = None,
    ) -> SourceBatch:
        self.threads.add(threading.get_ident())
        if self.reads == self.fail_read:
            raise _Crash("the read ahead failed")
        batch = super().read_batch(
            max_events=max_events, max_transaction_events=max_transaction_events, until=until
        )
        self.reads += 1
        if self.reads == CRASHED_BATCH + 2:
            self.read_ahead.set()  # batch CRASHED_BATCH + 1 is in memory
        return batch

    def acknowledge(self, offset: Mapping[str, Any]) -> None:
        self.threads.add(threading.get_ident())
        committed = self.writer.last_committed(agent_app_id(self.name))
        assert committed is not None and committed.offset == offset, "acknowledged uncommitted"
        self.acked.append(offset)


class _DieInTheOverlap(FaultInjector):
    """Stops the commit thread at ``point`` of batch :data:`CRASHED_BATCH` until the next batch
    was read ahead, then raises (or SIGKILLs the process)."""

    def __init__(self, point: str, source: _WatchedSource, *, kill: bool = False) -> None:
        super().__init__()
        self.point, self.source, self.kill = point, source, kill
        self.overlapped = False

    def hit(self, point: str, batch_seq: int) -> None:
        if point != self.point or batch_seq != CRASHED_BATCH:
            return
        self.overlapped = self.source.read_ahead.wait(20)
        if self.kill:
            os.kill(os.getpid(), signal.SIGKILL)
        raise _Crash(f"{point}@{batch_seq}")


def _input(tmp_path: Path) -> tuple[Path, int]:
    """Debezium JSON lines with a malformed one in batch :data:`CRASHED_BATCH` (so that its
    quarantine commit, and the ``after_quarantine`` point, happen)."""
    stream = postgres_stream(snapshot_rows=4, transactions=16, seed=41)
    lines = list(stream.lines("kafka_json", schemas=False))
    at = 20  # inside batch 1: lines 16-31 (batch 0 ends at the transaction boundary after 15)
    path = tmp_path / "in.jsonl"
    write_lines(path, iter([*lines[:at], BROKEN, *lines[at:]]))
    return path, len(lines)


def _run(path: Path, lake: Path) -> _WatchedSource:
    """An undisturbed run (the restart)."""
    writer = BronzeWriter(BronzeTables.under(lake))
    source = _WatchedSource(path, writer)
    LandingAgent(source, writer, max_events=MAX_EVENTS, faults=FaultInjector()).run()
    return source


def _assert_exactly_once(path: Path, lake: Path, lines: int) -> None:
    rows = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    origins = [r[S.ORIGIN] for r in sorted(rows, key=lambda r: r[S.POSITION])]
    line_numbers = [int(o.rsplit(":", 1)[1]) for o in origins]
    assert len(rows) == lines and Counter(origins).most_common(1)[0][1] == 1
    assert line_numbers == sorted(line_numbers), "bronze position order is the file's order"
    batches = sorted({r[S.BATCH_SEQ] for r in rows})
    assert batches == list(range(len(batches))) and len(batches) > CRASHED_BATCH + 2
    quarantine = DeltaTable(str(lake / "bronze" / "quarantine")).to_pyarrow_table().to_pylist()
    assert [r[S.RAW] for r in quarantine] == [BROKEN]


@pytest.mark.parametrize("point", ["after_schemas", "after_quarantine", "after_commit"])
def test_a_crash_of_the_commit_while_the_next_batch_is_read_loses_and_doubles_nothing(
    tmp_path: Path, point: str
) -> None:
    path, lines = _input(tmp_path)
    lake = tmp_path / "lake"
    writer = BronzeWriter(BronzeTables.under(lake))
    source = _WatchedSource(path, writer)
    faults = _DieInTheOverlap(point, source)
    agent = LandingAgent(source, writer, max_events=MAX_EVENTS, faults=faults)
    with pytest.raises(StageFailed, match=f"{point}@{CRASHED_BATCH}"):
        agent.run()
    assert faults.overlapped, "the crash must come while the next batch is read ahead"
    assert len(source.acked) == CRASHED_BATCH, "batch 1 is never acknowledged by this run"
    assert len(source.threads) == 1, "the source is called from the agent's thread only"
    again = _run(path, lake)
    assert len(again.threads) == 1
    _assert_exactly_once(path, lake, lines)


def test_a_failed_read_ahead_lets_the_commit_in_flight_finish(tmp_path: Path) -> None:
    path, lines = _input(tmp_path)
    lake = tmp_path / "lake"
    writer = BronzeWriter(BronzeTables.under(lake))
    source = _WatchedSource(path, writer, fail_read=CRASHED_BATCH + 1)
    with pytest.raises(StageFailed, match="the read ahead failed"):
        LandingAgent(source, writer, max_events=MAX_EVENTS).run()
    committed = writer.last_committed(agent_app_id("shop"))
    assert committed is not None and committed.batch_seq == CRASHED_BATCH
    _run(path, lake)
    _assert_exactly_once(path, lake, lines)


def test_kill_9_after_a_commit_with_the_next_batch_read_ahead(tmp_path: Path) -> None:
    """A real SIGKILL: batch 1 is committed, not acknowledged, and batch 2 is in memory."""
    path, lines = _input(tmp_path)
    lake = tmp_path / "lake"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MEDALLION_FAULTS", None)
    module = "tests.integration.test_landing_read_ahead"
    child = [sys.executable, "-m", module, str(path), str(lake)]
    proc = subprocess.run(child, env=env, capture_output=True, timeout=120, check=False)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.decode()[-3000:]
    committed = BronzeWriter(BronzeTables.under(lake)).last_committed(agent_app_id("shop"))
    assert committed is not None and committed.batch_seq == CRASHED_BATCH
    _run(path, lake)
    _assert_exactly_once(path, lake, lines)


if __name__ == "__main__":  # the child of the kill -9 test
    _lake = Path(sys.argv[2])
    _writer = BronzeWriter(BronzeTables.under(_lake))
    _source = _WatchedSource(Path(sys.argv[1]), _writer)
    _faults = _DieInTheOverlap("after_commit", _source, kill=True)
    LandingAgent(_source, _writer, max_events=MAX_EVENTS, faults=_faults).run()
