"""After the history, silver's live rows equal the source's tables, row by row."""

from __future__ import annotations

from typing import Any

import pytest

from silver.documents import DOCUMENT
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.contract.conftest import SharedHistory
from tests.contract.history import TABLES, State
from tests.mongomodel.bson import Int32, Int64, from_canonical

pytestmark = pytest.mark.spark


def silver_state(spark: Any, shared: SharedHistory) -> State:
    """Silver's live rows of the history's tables, as the driver's ``truth()`` gives a source."""
    state: State = {}
    for spec in TABLES:
        name = silver_table_name(shared.driver.SOURCE_NAME, shared.driver.collection(spec.name))
        frame = spark.read.format("delta").load(str(shared.lake / "silver" / name))
        columns = ["id", *(column for column, _ in spec.columns)]
        live = frame.where(f"NOT {DELETED}")
        if DOCUMENT in frame.columns:  # MongoDB: one document per row (docs/silver-mongodb.md)
            rows = [document_row(r[DOCUMENT]) for r in live.select(DOCUMENT).collect()]
        else:
            rows = [row.asDict() for row in live.select(*columns).collect()]
        state[spec.name] = {row["id"]: row for row in rows}
        assert len(state[spec.name]) == len(rows), f"{spec.name}: a key is live twice"
    return state


def document_row(text: str) -> dict[str, Any]:
    """A silver document (canonical Extended JSON) as the history's row: ``_id`` is ``id``."""
    document = from_canonical(text)
    plain = {k: v.value if isinstance(v, Int32 | Int64) else v for k, v in document.items()}
    return {"id": plain.pop("_id"), **plain}


def test_silver_equals_the_source(spark: Any, shared: SharedHistory) -> None:
    truth = shared.driver.truth()
    assert truth == shared.history.state  # the driver ran the history it was given
    result = SilverJob(spark, shared.lake).run_once()
    assert result.quarantined == 0
    assert silver_state(spark, shared) == truth
