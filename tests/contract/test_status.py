"""``medallion status`` reports a source's bronze state, and its database log where it has one."""

from __future__ import annotations

from typing import Any

import orjson

from bronze import schema as S
from bronze.positions import decode_position
from pipeline.config import PipelineConfig
from pipeline.orchestration import SLOT_COLUMNS
from pipeline.status import pipeline_status
from tests.contract.conftest import SharedHistory
from tests.contract.drivers import Capability
from tests.contract.harness import landed_events


def source_status(shared: SharedHistory) -> dict[str, Any]:
    """The ``medallion status`` row of the shared history's source."""
    config = PipelineConfig.model_validate(
        {"lake": {"root": str(shared.lake)}, "sources": [shared.driver.raw_config()]}
    )
    (row,), _tables = pipeline_status(config, shared.lake)
    return row


def test_status_fields_after_the_history(shared: SharedHistory) -> None:
    driver, lake = shared.driver, shared.lake
    row = source_status(shared)
    landed = landed_events(driver, lake)
    assert (row["source"], row["connector"]) == (driver.SOURCE_NAME, driver.CONNECTOR)
    assert row["landed"] == len(landed.rows) and row["bronze_quarantined"] == 0
    assert row["last_batch"] == max(r[S.BATCH_SEQ] for r in landed.rows)
    assert row["offset"] == shared.runs[-1][1]
    assert row["bronze_position"] is not None and row["bronze_time"] is not None
    assert row["lag_source_bronze_s"] >= 0 and row["events_per_s"] > 0
    slot = {column: row[column] for column in SLOT_COLUMNS}
    if Capability.REPORTS_LOG in driver.CAPABILITIES:
        assert slot["slot"] and slot["slot_error"] is None, slot
        if driver.LOG_IN_BYTES:
            assert slot["slot_lag_bytes"] >= 0 and slot["retained_wal_bytes"] >= 0, slot
        else:
            assert slot["slot_active"] is not None, slot
            assert slot["slot_lag_bytes"] is None and slot["retained_wal_bytes"] is None, slot
    else:
        assert slot == dict.fromkeys(SLOT_COLUMNS), slot


def test_status_shows_the_bronze_position_readably(shared: SharedHistory) -> None:
    # decoded with the connector bronze recorded for the rows: a debezium_json source lands
    # another connector's positions
    row = source_status(shared)
    newest = landed_events(shared.driver, shared.lake).rows[-1]
    position = decode_position(newest[S.CONNECTOR], newest[S.POSITION])
    assert orjson.loads(row["bronze_position"]) == position.to_json()
