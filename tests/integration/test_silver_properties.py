"""Property: whatever the batching and redelivery, silver equals the source replayed in order.

Random source histories (inserts, updates, deletes, primary-key moves, truncates, TOAST
placeholders, added columns, interleaved transactions) are emitted as Debezium records, delivered
in random batches with at-least-once redelivery, landed in bronze and applied to silver batch by
batch. Silver's live rows must equal the history's ground truth (computed by applying the
operations directly, not by any replay), and delivering everything once more must change nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver.history import deliveries, histories, to_jsonl
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED

pytestmark = [pytest.mark.spark, pytest.mark.delta, pytest.mark.slow]


def land_and_apply(spark: Any, path: Path, lake: Path, lines: list[bytes]) -> None:
    with path.open("ab") as f:
        for line in lines:
            f.write(line + b"\n")
    agent = LandingAgent(
        DebeziumJsonSource("h", path), BronzeWriter(BronzeTables.under(lake)), max_events=7
    )
    result = agent.run()
    assert result.quarantined == 0
    SilverJob(spark, lake).run_once()


def silver_live(
    spark: Any, lake: Path, expected: dict[str, dict[str, dict[str, Any]]], tables: list[str]
) -> Any:
    from delta.tables import DeltaTable

    found: dict[str, list[dict[str, Any]]] = {}
    for collection in tables:
        if collection in expected:
            continue
        # A table the history emptied must have no live rows in silver either.
        path = str(lake / "silver" / silver_table_name("h", collection))
        if DeltaTable.isDeltaTable(spark, path):
            live = spark.read.format("delta").load(path).where(f"NOT {DELETED}").count()
            assert live == 0, f"{collection} should be empty, has {live} live rows"
    for collection, rows in expected.items():
        path = str(lake / "silver" / silver_table_name("h", collection))
        assert DeltaTable.isDeltaTable(spark, path), collection
        columns = sorted({c for row in rows.values() for c in row})
        live = spark.read.format("delta").load(path).where(f"NOT {DELETED}").collect()
        found[collection] = sorted(
            ({c: r[c] if c in r.asDict() else None for c in columns} for r in live),
            key=lambda r: r["id"],
        )
    return found


def as_expected(expected: dict[str, dict[str, dict[str, Any]]]) -> Any:
    return {
        collection: sorted(rows.values(), key=lambda r: r["id"])
        for collection, rows in expected.items()
    }


@settings(
    max_examples=5,
    deadline=None,
    suppress_health_check=[
        HealthCheck.function_scoped_fixture,
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
    ],
)
@given(data=st.data())
def test_silver_equals_the_source_under_any_batching(
    spark: Any, tmp_path_factory: pytest.TempPathFactory, data: st.DataObject
) -> None:
    history = data.draw(
        histories(max_tables=2, max_transactions=5, max_ops=4, toast_on_key_move=False)
    )
    records = history.records()
    delivery = data.draw(deliveries(records, max_batches=3, max_crashes=1))
    lake = tmp_path_factory.mktemp("lake")
    path = lake / "in.jsonl"
    for batch in delivery:
        land_and_apply(spark, path, lake, to_jsonl(batch))
    expected = history.final_state()
    tables = [history.collection(t) for t in history.tables]
    assert silver_live(spark, lake, expected, tables) == as_expected(expected)
    # Debezium redelivers everything once more (a restart from an old offset): no change.
    land_and_apply(spark, path, lake, to_jsonl(records))
    assert silver_live(spark, lake, expected, tables) == as_expected(expected)
