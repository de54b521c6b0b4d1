"""Exactly once under ``kill -9`` at every fault point of :mod:`pipeline.faults`.

The agent runs as a child process armed with ``MEDALLION_FAULTS=<point>@*``: it SIGKILLs itself
the first time a batch reaches that point. It is killed at each point while the initial rows are
landed (a snapshot, for a database) and again at each point in the stream, whose history holds
one record the connector must quarantine so that ``after_quarantine`` is reached too. After a
last, undisturbed run every change is in bronze once, in commit order, and the poison record is
in the quarantine once.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pipeline.faults import FAULT_POINTS
from tests.contract.conftest import INITIAL_ROWS, SEED
from tests.contract.drivers import ContractDriver
from tests.contract.harness import (
    assert_batches_without_gap,
    landed_events,
    quarantined,
    run_child,
)
from tests.contract.history import History, expected_events

pytestmark = pytest.mark.slow

KILLED = -signal.SIGKILL


def test_kill_9_at_every_fault_point(driver: ContractDriver, tmp_path: Path) -> None:
    history = History(SEED)
    driver.load(history.initial_rows(INITIAL_ROWS))
    initial = history.snapshot()
    raw, lake = driver.raw_config(), tmp_path / "lake"
    for point in FAULT_POINTS:
        if point != "after_quarantine":  # the initial rows quarantine nothing
            assert run_child(raw, lake, f"{point}@*") == KILLED, point
    assert run_child(raw, lake) == 0  # the initial rows are in before the source changes
    transactions = history.transactions(6)
    driver.apply(transactions)
    reason = driver.poison()
    later = history.transactions(6)
    driver.apply(later)
    for point in FAULT_POINTS:
        assert run_child(raw, lake, f"{point}@*") == KILLED, point
    assert run_child(raw, lake) == 0

    landed = landed_events(driver, lake)
    snapshot, stream = landed.data[: landed.snapshot], landed.data[landed.snapshot :]
    assert sorted(snapshot) == sorted((t, "r", key) for t, rows in initial.items() for key in rows)
    assert stream == expected_events(transactions + later)
    assert_batches_without_gap(landed)
    (poisoned,) = quarantined(lake)
    assert reason in poisoned["reason"]
