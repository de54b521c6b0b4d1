"""Tables of a micro-batch applied concurrently give the silver that one after the other gives."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver.job import SilverJob, SilverRunResult, silver_table_name
from silver.merge import UPDATED_AT
from tests.pgmodel.streams import postgres_stream

pytestmark = [pytest.mark.spark, pytest.mark.delta]

TABLES = ("public.customers", "public.orders")


def _rows(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(str(path))
    # When a row was written differs between runs; everything the source decides must not.
    return sorted(tuple(r) for r in frame.drop(UPDATED_AT).collect())


def _cuts(spark: Any, lake: Path) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(str(lake / "silver" / "_cuts"))
    return sorted(
        tuple(r)
        for r in frame.select(
            "silver_batch", "source", "collection", "silver_table", "position", "waiting_from"
        ).collect()
    )


def test_concurrent_apply_equals_sequential_apply(spark: Any, tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=3, transactions=12, seed=29)
    lines = list(stream.lines("kafka_json", schemas=True))
    half = len(lines) // 2
    lakes: dict[int, Path] = {}
    results: dict[int, SilverRunResult] = {}
    for parallelism in (1, 4):
        lake = tmp_path / f"lake-{parallelism}"
        path = tmp_path / f"in-{parallelism}.jsonl"
        job = SilverJob(spark, lake, parallelism=parallelism)
        for part in (lines[:half], lines[half:]):  # two runs: the second merges into tables
            with path.open("ab") as f:
                f.writelines(line + b"\n" for line in part)
            LandingAgent(
                DebeziumJsonSource("shop", path), BronzeWriter(BronzeTables.under(lake))
            ).run()
            job.run_once()
        results[parallelism] = job.result
        lakes[parallelism] = lake
    sequential, concurrent = results[1], results[4]
    assert sequential.batches >= 2  # several micro-batches, each with both tables
    for counter in ("batches", "events", "read", "applied", "quarantined", "ignored"):
        assert getattr(concurrent, counter) == getattr(sequential, counter), counter
    assert {n: [(r.inserted, r.updated) for r in rs] for n, rs in concurrent.merged.items()} == {
        n: [(r.inserted, r.updated) for r in rs] for n, rs in sequential.merged.items()
    }
    for table in TABLES:
        name = silver_table_name("shop", table)
        silver = {p: _rows(spark, lakes[p] / "silver" / name) for p in (1, 4)}
        assert silver[1], table
        assert silver[4] == silver[1], table
    # One _cuts row per table and micro-batch, naming the same positions in both runs.
    assert _cuts(spark, lakes[4]) == _cuts(spark, lakes[1])
