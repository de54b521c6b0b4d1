"""Bronze -> silver end to end: silver's live rows equal the source's final state."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.pgmodel.streams import postgres_stream, write_lines

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


def _cut_inside_a_transaction(lines: list[bytes]) -> tuple[int, str]:
    """Index just after the first data event of a multi-event streamed transaction, and its id."""
    import orjson

    for i, line in enumerate(lines):
        value = orjson.loads(line)["value"]
        if isinstance(value, dict) and value.get("status") == "BEGIN":
            end = next(j for j in range(i, len(lines)) if b'"END"' in lines[j])
            if end - i > 3:
                return i + 2, str(value["id"])
    raise AssertionError("no multi-event transaction")


@pytest.mark.parametrize("timeout", [3600.0, 0.0])
def test_incomplete_transactions_wait_for_their_end(
    spark: Any, tmp_path: Path, timeout: float
) -> None:
    stream = postgres_stream(snapshot_rows=3, transactions=20, seed=29)
    lines = list(stream.lines("kafka_json", schemas=False))
    cut, tx_id = _cut_inside_a_transaction(lines)
    path = tmp_path / "in.jsonl"
    write_lines(path, iter(lines[:cut]))
    lake = tmp_path / "lake"
    land(path, lake)
    first = SilverJob(spark, lake, transaction_timeout_seconds=timeout).run_once()
    applied = set()
    for table in COLUMNS:
        path_t = lake / "silver" / silver_table_name("shop", f"public.{table}")
        applied |= {
            r[0]
            for r in spark.read.format("delta").load(str(path_t)).select("_cdc_tx_id").collect()
        }
    pending = spark.read.format("delta").load(str(lake / "silver" / "_pending"))
    if timeout:
        assert tx_id not in applied and first.tx_timed_out == 0
        assert {r["tx_id"] for r in pending.collect()} == {tx_id}
    else:
        assert tx_id in applied and first.tx_timed_out == 1
        assert pending.count() == 0
    with path.open("ab") as f:
        for line in lines[cut:]:
            f.write(line + b"\n")
    land(path, lake)
    SilverJob(spark, lake, transaction_timeout_seconds=timeout).run_once()
    # No data waits any more (END records of transactions without gated data may wait for
    # data that never comes, up to the timeout).
    pending = spark.read.format("delta").load(str(lake / "silver" / "_pending"))
    assert pending.where("kind = 'data'").count() == 0
    for table, columns in COLUMNS.items():
        expected = {i: {c: row[c] for c in columns} for i, row in stream.final_state[table].items()}
        assert live(spark, lake, f"public.{table}", columns) == expected, table


def test_demo_fixtures_with_and_without_schemas_equal_the_source(
    spark: Any, tmp_path: Path
) -> None:
    """The demo's input: file 1 with inline schemas, file 2 without, plus 3 malformed lines."""
    fixtures = Path(__file__).resolve().parent.parent / "fixtures" / "debezium_jsonl"
    lake = tmp_path / "lake"
    LandingAgent(DebeziumJsonSource("shop", fixtures), BronzeWriter(BronzeTables.under(lake))).run()
    SilverJob(spark, lake).run_once()
    stream = postgres_stream(snapshot_rows=5, transactions=30, seed=7)  # as make_demo_fixtures
    for table, columns in COLUMNS.items():
        expected = {i: {c: row[c] for c in columns} for i, row in stream.final_state[table].items()}
        assert live(spark, lake, f"public.{table}", columns) == expected, table
