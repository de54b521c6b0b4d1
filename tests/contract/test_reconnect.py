"""A following agent survives a restart of its server: it reconnects and misses nothing."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from tests.contract.drivers import Capability, ContractDriver
from tests.contract.harness import agent, assert_batches_without_gap, begin, land, landed_events
from tests.contract.history import expected_events

pytestmark = pytest.mark.slow


@pytest.mark.needs(Capability.RESTART)
def test_reconnects_after_a_server_restart(
    driver: ContractDriver, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    history = begin(driver)
    raw, lake = driver.raw_config(), tmp_path / "lake"
    land(raw, lake)  # the snapshot
    follower = agent(raw, lake)
    stop = threading.Event()
    failure: list[BaseException] = []

    def follow() -> None:
        try:
            follower.run(follow=True, poll_interval_s=0.05, stop=stop)
        except BaseException as exc:  # reported by the assertion below
            failure.append(exc)

    runner = threading.Thread(target=follow)
    runner.start()

    def wait_for(count: int, deadline: float) -> None:
        while time.monotonic() < deadline and not failure:
            landed = landed_events(driver, lake)
            if len(landed.data) - landed.snapshot >= count:
                return
            time.sleep(0.3)

    try:
        transactions = history.transactions(10)
        driver.apply(transactions)
        # Restart only once the follower streams: a restart before its first connection would
        # leave it nothing to reconnect from.
        wait_for(len(expected_events(transactions)), time.monotonic() + 90)
        driver.restart()
        transactions += history.transactions(10)
        driver.apply(transactions[10:])
        expected = expected_events(transactions)
        wait_for(len(expected), time.monotonic() + 90)
    finally:
        stop.set()
        runner.join(timeout=60)
    assert not failure, repr(failure)
    assert "reconnecting" in caplog.text  # the follower saw the restart and came back
    landed = landed_events(driver, lake)
    assert landed.data[landed.snapshot :] == expected
    assert_batches_without_gap(landed)
