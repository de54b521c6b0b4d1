"""Exactly-once landing under ``kill -9`` of the agent process.

The agent runs in a child process. It is killed (SIGKILL, no cleanup) at every named point
between reading a batch and acknowledging it, and at random moments; after each death a new
process resumes from what bronze says. At the end every input record is in bronze exactly once
(events or quarantine), and batch numbers have no gap and no repeat.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from deltalake import DeltaTable

from bronze import schema as S
from pipeline.faults import FAULT_POINTS
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = [pytest.mark.delta, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
DRIVER = """
import sys
from pathlib import Path
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
source = DebeziumJsonSource("shop", Path(sys.argv[1]))
agent = LandingAgent(source, BronzeWriter(BronzeTables.under(Path(sys.argv[2]))),
                     max_events=int(sys.argv[3]))
result = agent.run()
print(result.read, result.landed, result.quarantined)
"""
BAD_LINES = (b'{"key": {"id": 1}, "value": {"op": "c"', b'{"key": {"id": 2}, "value": [1]}')


def make_input(tmp_path: Path, transactions: int) -> tuple[Path, set[int], set[int]]:
    """Write a stream with a malformed line every 150 lines; return (path, good, bad) lines."""
    stream = postgres_stream(snapshot_rows=20, transactions=transactions, seed=99)
    lines = []
    for i, line in enumerate(stream.lines("kafka_json", schemas=True)):
        if i % 150 == 75:
            lines.append(BAD_LINES[i % 2])
        lines.append(line)
    path = tmp_path / "in.jsonl"
    write_lines(path, iter(lines))
    bad = {i for i, line in enumerate(lines, start=1) if line in BAD_LINES}
    good = set(range(1, len(lines) + 1)) - bad
    return path, good, bad


def start(
    path: Path, lake: Path, faults: str | None = None, max_events: int = 40
) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "MEDALLION_FAULTS"}
    env["PYTHONPATH"] = str(ROOT)
    if faults:
        env["MEDALLION_FAULTS"] = faults
    return subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(path), str(lake), str(max_events)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def assert_exactly_once(path: Path, lake: Path, good: set[int], bad: set[int]) -> None:
    events = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    landed = Counter(int(o.rsplit(":", 1)[1]) for o in events.column(S.ORIGIN).to_pylist())
    assert set(landed) == good, f"lost: {sorted(good - set(landed))[:5]}"
    assert max(landed.values()) == 1, f"duplicated: {[k for k, v in landed.items() if v > 1][:5]}"
    q = DeltaTable(str(lake / "bronze" / "quarantine")).to_pyarrow_table()
    quarantined = Counter(int(o.rsplit(":", 1)[1]) for o in q.column(S.ORIGIN).to_pylist())
    assert set(quarantined) == bad and max(quarantined.values()) == 1
    positions = events.column(S.POSITION).to_pylist()
    assert len(set(positions)) == len(positions)
    batches = sorted(set(events.column(S.BATCH_SEQ).to_pylist()))
    assert batches == list(range(len(batches)))


def test_kill_at_every_point_between_write_and_ack(tmp_path: Path) -> None:
    path, good, bad = make_input(tmp_path, transactions=150)
    lake = tmp_path / "lake"
    # Each run dies at the next batch that reaches the point: after_quarantine@* dies at the
    # first batch that quarantines something, leaving it half landed, so the next run must
    # re-read exactly the same range.
    for _round in range(2):
        for point in FAULT_POINTS:
            proc = start(path, lake, f"{point}@*")
            _, err = proc.communicate(timeout=120)
            assert proc.returncode == -signal.SIGKILL, (point, err.decode()[-2000:])
    proc = start(path, lake)
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert_exactly_once(path, lake, good, bad)


def test_kill_at_random_moments(tmp_path: Path) -> None:
    path, good, bad = make_input(tmp_path, transactions=600)
    lake = tmp_path / "lake"
    rng = random.Random(2026)
    kills = 0
    for _ in range(40):
        proc = start(path, lake, max_events=25)
        try:
            proc.wait(timeout=rng.uniform(0.6, 2.0))
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGKILL)
            proc.wait()
            kills += 1
            continue
        finally:
            assert proc.stderr is not None and proc.stdout is not None
            err = proc.stderr.read()
            proc.stdout.close()
            proc.stderr.close()
        assert proc.returncode == 0, err.decode()[-2000:]
        break  # it finished on its own: the kills so far are what the assertion below counts
    assert kills >= 5, "the agent finished too fast to be killed; raise the input size"
    proc = start(path, lake)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()[-2000:]
    assert_exactly_once(path, lake, good, bad)
