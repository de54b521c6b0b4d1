"""An agent resumes from the offset bronze committed, never from anything else.

The shared history was landed by a new agent per batch (``max_batches=1``), through the snapshot,
cut transactions and the stream: each run must stop at the offset bronze then holds and the next
one go on from there, landing nothing twice and losing nothing.
"""

from __future__ import annotations

from bronze import schema as S
from tests.contract.conftest import SharedHistory
from tests.contract.harness import landed_events


def test_every_run_resumes_where_bronze_says(shared: SharedHistory) -> None:
    landed = landed_events(shared.driver, shared.lake)
    runs = [result for result, _ in shared.runs]
    assert all(r.batches <= 1 for r in runs) and sum(r.batches for r in runs) > 10
    for result, committed in shared.runs:
        if result.batches:
            assert result.offset == committed  # the run's offset is bronze's
    assert sum(r.landed for r in runs) == len(landed.rows)
    assert sum(r.read for r in runs) == len(landed.rows)  # the history quarantines nothing
    # a transaction larger than max.transaction.size was cut across batches and still resumed
    assert any(r[S.TX_PARTIAL] for r in landed.rows)
