"""Snapshot, then stream: no gap and no overlap at the handover.

Changes are committed while the snapshot is half read (after its first batch). The snapshot must
hold exactly the rows of its point, and the stream exactly the changes after that point, each
once and in commit order: a change in both would be an overlap, a change in neither a gap.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bronze import schema as S
from capture.base import SourceBatch
from tests.contract.drivers import Capability, ContractDriver
from tests.contract.harness import agent, assert_batches_without_gap, begin, landed_events
from tests.contract.history import expected_events


@pytest.mark.needs(Capability.SNAPSHOT)
def test_snapshot_then_stream_without_gap_or_overlap(
    driver: ContractDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = begin(driver)
    initial = history.snapshot()
    during = history.transactions(8)
    landing = agent(driver.raw_config(), tmp_path / "lake")
    read_batch = landing.source.read_batch
    batches = 0

    def change_after_the_first_batch(**limits: Any) -> SourceBatch:
        nonlocal batches
        batch = read_batch(**limits)
        batches += 1
        if batches == 1:
            driver.apply(during)
        return batch

    monkeypatch.setattr(landing.source, "read_batch", change_after_the_first_batch)
    landing.run()

    landed = landed_events(driver, tmp_path / "lake")
    snapshot, stream = landed.data[: landed.snapshot], landed.data[landed.snapshot :]
    assert sorted(snapshot) == sorted((t, "r", key) for t, rows in initial.items() for key in rows)
    assert stream == expected_events(during)
    snapshot_batches = {r[S.BATCH_SEQ] for r in landed.rows[: landed.snapshot]}
    assert len(snapshot_batches) > 1  # the changes really came while the snapshot was read
    assert_batches_without_gap(landed)
