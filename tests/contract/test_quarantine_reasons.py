"""A record the connector cannot land is quarantined with its reason; the rest lands."""

from __future__ import annotations

from pathlib import Path

from bronze import schema as S
from tests.contract.drivers import ContractDriver
from tests.contract.harness import begin, land, landed_events, quarantined
from tests.contract.history import expected_events


def test_quarantine_with_reasons(driver: ContractDriver, tmp_path: Path) -> None:
    history = begin(driver)
    raw, lake = driver.raw_config(), tmp_path / "lake"
    land(raw, lake)
    transactions = history.transactions(3)
    driver.apply(transactions)
    reason = driver.poison()
    transactions += history.transactions(3)
    driver.apply(transactions[3:])
    result = land(raw, lake)
    assert result.quarantined == 1
    (row,) = quarantined(lake)
    assert reason in row[S.REASON], row[S.REASON]
    assert row[S.ORIGIN] and row[S.ERROR_CLASS] and row[S.RAW]
    assert row[S.SOURCE] == driver.SOURCE_NAME
    landed = landed_events(driver, lake)
    assert landed.data[landed.snapshot :] == expected_events(transactions)  # nothing held back
