"""Exactly once under ``kill -9`` at every fault point of :mod:`pipeline.faults`.

The agent runs as a child process armed with ``MEDALLION_FAULTS=<point>@*``: it SIGKILLs itself
the first time a batch reaches that point. It is killed at each point while the initial rows are
landed (a snapshot, for a database) and again at each point in the stream, whose history holds
one record the connector must quarantine so that ``after_quarantine`` is reached too. After a
last, undisturbed run every change is in bronze once, in commit order, and the poison record is
in the quarantine once.

Transactions cut across batches are resumed after a clean stop in ``test_resume``; here, a
batch left half landed by a kill (its quarantine committed, its events not) that ends inside a
cut transaction is :func:`test_a_half_landed_batch_ending_inside_a_cut_transaction`.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from pipeline.faults import FAULT_POINTS
from tests.contract.drivers import ContractDriver
from tests.contract.harness import (
    assert_batches_without_gap,
    begin,
    landed_events,
    quarantined,
    run_child,
)
from tests.contract.history import State, Transaction, expected_events

pytestmark = pytest.mark.slow

KILLED = -signal.SIGKILL
WHOLE = 1000
"""A ``max.transaction.size`` no streamed transaction reaches: none is cut. (The initial rows are
landed with the small default: Debezium JSON files carry a snapshot as one transaction, which
would otherwise fill a single batch.)"""


def assert_exactly_once(
    driver: ContractDriver,
    lake: Path,
    initial: State,
    transactions: list[Transaction],
    reason: str,
) -> None:
    """Bronze holds the initial rows and every change once, in order; the poison quarantined."""
    landed = landed_events(driver, lake)
    snapshot, stream = landed.data[: landed.snapshot], landed.data[landed.snapshot :]
    assert sorted(snapshot) == sorted((t, "r", key) for t, rows in initial.items() for key in rows)
    assert stream == expected_events(transactions)
    assert_batches_without_gap(landed)
    (poisoned,) = quarantined(lake)
    assert reason in poisoned["reason"]


def test_kill_9_at_every_fault_point(driver: ContractDriver, tmp_path: Path) -> None:
    history = begin(driver)
    initial = history.snapshot()
    raw, lake = driver.raw_config(), tmp_path / "lake"
    for point in FAULT_POINTS:
        if point != "after_quarantine":  # the initial rows quarantine nothing
            assert run_child(raw, lake, f"{point}@*") == KILLED, point
    assert run_child(raw, lake) == 0  # the initial rows are in before the source changes
    transactions = history.transactions(6)
    driver.apply(transactions)
    reason = driver.poison()
    transactions += history.transactions(6)
    driver.apply(transactions[6:])
    for point in FAULT_POINTS:
        killed = run_child(raw, lake, f"{point}@*", max_transaction_events=WHOLE)
        assert killed == KILLED, point
    assert run_child(raw, lake, max_transaction_events=WHOLE) == 0
    assert_exactly_once(driver, lake, initial, transactions, reason)


def test_a_half_landed_batch_ending_inside_a_cut_transaction(
    driver: ContractDriver, tmp_path: Path
) -> None:
    history = begin(driver)
    initial = history.snapshot()
    raw, lake = driver.raw_config(), tmp_path / "lake"
    assert run_child(raw, lake) == 0
    # The next batch starts with the poison and ends inside the large transaction after it.
    reason = driver.poison()
    transactions = history.transactions(1, size=20)
    driver.apply(transactions)
    assert run_child(raw, lake, "after_quarantine@*") == KILLED  # its events never committed
    assert run_child(raw, lake, "after_commit@*") == KILLED  # re-read up to its end, committed
    assert run_child(raw, lake) == 0  # a new agent resumes from that commit's offset
    assert_exactly_once(driver, lake, initial, transactions, reason)
