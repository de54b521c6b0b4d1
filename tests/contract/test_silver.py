"""After the history, silver's live rows equal the source's tables, row by row."""

from __future__ import annotations

from typing import Any

import pytest

from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.contract.conftest import SharedHistory
from tests.contract.history import TABLES, State

pytestmark = pytest.mark.spark


def silver_state(spark: Any, shared: SharedHistory) -> State:
    """Silver's live rows of the history's tables, as the driver's ``truth()`` gives a source."""
    state: State = {}
    for spec in TABLES:
        name = silver_table_name(shared.driver.SOURCE_NAME, shared.driver.collection(spec.name))
        frame = spark.read.format("delta").load(str(shared.lake / "silver" / name))
        columns = ["id", *(column for column, _ in spec.columns)]
        rows = frame.where(f"NOT {DELETED}").select(*columns).collect()
        state[spec.name] = {row["id"]: row.asDict() for row in rows}
        assert len(state[spec.name]) == len(rows), f"{spec.name}: a key is live twice"
    return state


def test_silver_equals_the_source(spark: Any, shared: SharedHistory) -> None:
    truth = shared.driver.truth()
    assert truth == shared.history.state  # the driver ran the history it was given
    result = SilverJob(spark, shared.lake).run_once()
    assert result.quarantined == 0
    assert silver_state(spark, shared) == truth
