"""A source is acknowledged only after bronze committed what it acknowledges.

Killed between the commit and the acknowledgement, an agent leaves the source's own record (a
slot's ``confirmed_flush_lsn``) behind bronze; the next agent re-sends that acknowledgement
first, and every acknowledgement it sends names exactly the offset bronze holds at that moment.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from tests.contract.drivers import Capability, ContractDriver
from tests.contract.harness import agent, begin, land, run_child


@pytest.mark.needs(Capability.ACKNOWLEDGES)
def test_acknowledged_only_after_the_bronze_commit(
    driver: ContractDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = begin(driver)
    raw, lake = driver.raw_config(), tmp_path / "lake"
    land(raw, lake)  # the snapshot
    driver.apply(history.transactions(6))
    assert run_child(raw, lake, "after_commit@*") == -signal.SIGKILL
    writer = BronzeWriter(BronzeTables.under(lake))
    committed = writer.last_committed(agent_app_id(driver.SOURCE_NAME))
    assert committed is not None
    assert driver.acknowledged() < driver.offset_position(committed.offset)  # never told

    resumed = agent(raw, lake)
    acknowledge = resumed.source.acknowledge
    sent: list[dict[str, Any]] = []

    def only_what_bronze_holds(offset: dict[str, Any]) -> None:
        last = writer.last_committed(resumed.agent_id)
        assert last is not None and last.offset == offset
        sent.append(offset)
        acknowledge(offset)

    monkeypatch.setattr(resumed.source, "acknowledge", only_what_bronze_holds)
    resumed.run()
    assert sent[0] == committed.offset  # the acknowledgement the kill lost, sent first
    assert len(sent) > 1  # and one per batch after it
    assert driver.acknowledged() >= driver.offset_position(sent[-1])
