"""Bronze -> silver end to end: silver's live rows equal the source's final state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json import DebeziumJsonSource
from capture.synthetic import postgres_stream, write_lines
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED

pytestmark = [pytest.mark.spark, pytest.mark.delta]


def land(path: Path, lake: Path, max_events: int = 40) -> None:
    LandingAgent(
        DebeziumJsonSource("shop", path),
        BronzeWriter(BronzeTables.under(lake)),
        max_events=max_events,
    ).run()


def live(spark: Any, lake: Path, table: str, columns: list[str]) -> dict[int, dict[str, Any]]:
    df = spark.read.format("delta").load(str(lake / "silver" / silver_table_name("shop", table)))
    return {r["id"]: {c: r[c] for c in columns} for r in df.where(f"NOT {DELETED}").collect()}


COLUMNS = {
    "customers": ["id", "name", "email", "notes"],
    "orders": ["id", "customer_id", "amount_cents", "status"],
}


@pytest.mark.parametrize("schemas", [True, False])
def test_silver_equals_source_and_reruns_change_nothing(
    spark: Any, tmp_path: Path, schemas: bool
) -> None:
    stream = postgres_stream(snapshot_rows=6, transactions=40, seed=17)
    path = tmp_path / "in.jsonl"
    lines = list(stream.lines("kafka_json", schemas=schemas))
    half = len(lines) // 2
    write_lines(path, iter(lines[:half]))
    lake = tmp_path / "lake"
    land(path, lake)
    SilverJob(spark, lake).run_once()
    with path.open("ab") as f:  # more changes arrive: silver continues incrementally
        for line in lines[half:]:
            f.write(line + b"\n")
    land(path, lake)
    result = SilverJob(spark, lake).run_once()
    assert result.batches >= 1
    for table, columns in COLUMNS.items():
        expected = {
            ident: {c: row[c] for c in columns} for ident, row in stream.final_state[table].items()
        }
        assert live(spark, lake, f"public.{table}", columns) == expected, table
    again = SilverJob(spark, lake).run_once()
    assert again.batches == 0 and again.events == 0


def test_purged_tombstones_turn_late_events_into_reports(spark: Any, tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=4, transactions=30, seed=23)
    path = tmp_path / "in.jsonl"
    lines = list(stream.lines("kafka_json", schemas=True))
    write_lines(path, iter(lines))
    lake = tmp_path / "lake"
    land(path, lake)
    first = SilverJob(spark, lake, tombstone_retention_hours=0).run_once()
    assert first.purged > 0
    # Debezium redelivers everything (an old offset): events of purged keys must not come back.
    with path.open("ab") as f:
        for line in lines:
            f.write(line + b"\n")
    land(path, lake)
    again = SilverJob(spark, lake).run_once()
    assert again.quarantined > 0
    reasons = {
        r["reason"]
        for r in spark.read.format("delta").load(str(lake / "silver" / "_quarantine")).collect()
    }
    assert any("would have resurrected" in reason for reason in reasons)
    expected = {
        i: {c: row[c] for c in COLUMNS["orders"]} for i, row in stream.final_state["orders"].items()
    }
    assert live(spark, lake, "public.orders", COLUMNS["orders"]) == expected
