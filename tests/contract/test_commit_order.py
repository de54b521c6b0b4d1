"""Bronze positions sort in the source's commit order, for every connector.

The shared history (``conftest.shared``) commits its transactions one after another, so its
commit order is known exactly: after the snapshot's reads, ``ORDER BY position`` must give every
change of every transaction in the order the source committed it, each once.
"""

from __future__ import annotations

from tests.contract.conftest import SharedHistory
from tests.contract.harness import assert_batches_without_gap, landed_events
from tests.contract.history import expected_events


def test_positions_sort_in_commit_order(shared: SharedHistory) -> None:
    landed = landed_events(shared.driver, shared.lake)
    snapshot, stream = landed.data[: landed.snapshot], landed.data[landed.snapshot :]
    assert sorted(snapshot) == sorted(
        (table, "r", key) for table, rows in shared.initial.items() for key in rows
    )
    assert stream == expected_events(shared.transactions)
    assert_batches_without_gap(landed)
