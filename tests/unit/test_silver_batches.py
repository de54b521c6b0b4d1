"""Silver batch ids and clocks (``silver/_batches``, :class:`silver.transactions.BatchLedger`)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from silver.transactions import BatchLedger

pytestmark = pytest.mark.delta

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def test_ids_follow_spark_until_a_release_then_stay_above_every_earlier_one(
    tmp_path: Path,
) -> None:
    path = tmp_path / "_batches"
    ledger = BatchLedger(path)
    assert ledger.last() is None
    assert ledger.for_spark_batch(0, T0).id == 0
    assert ledger.for_spark_batch(1, T0).id == 1
    release = ledger.new_release(T0 + dt.timedelta(seconds=5))
    assert (release.id, release.is_release) == (2, True)
    assert ledger.for_spark_batch(2, T0).id == 3  # Spark's 2 comes after the release
    # a new job (after a crash) reads the ledger: a replayed micro-batch gets its first run's
    # id and clock, the next one a new id
    again = BatchLedger(path)
    replay = again.for_spark_batch(2, T0 + dt.timedelta(hours=1))
    assert (replay.id, replay.clock) == (3, T0)
    assert again.for_spark_batch(3, T0).id == 4


def test_a_lake_from_before_the_ledger_keeps_sparks_ids_and_a_reset_checkpoint_moves_on(
    tmp_path: Path,
) -> None:
    ledger = BatchLedger(tmp_path / "_batches")
    assert ledger.for_spark_batch(41, T0).id == 41
    # a new checkpoint numbers from 0 again: its writes must not be skipped as old ones
    assert ledger.for_spark_batch(0, T0).id == 42
