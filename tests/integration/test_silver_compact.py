"""Compacting a silver table (silver.merge.compact) changes no row, leaves older versions
readable, and the next MERGE applies on the compacted files (shared Spark, real Delta)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver import merge as M
from silver.job import SilverJob, silver_table_name
from tests.pgmodel.streams import postgres_stream

pytestmark = [pytest.mark.spark, pytest.mark.delta]


def _rows(spark: Any, path: Path, version: int | None = None) -> list[tuple[Any, ...]]:
    reader = spark.read.format("delta")
    if version is not None:
        reader = reader.option("versionAsOf", version)
    return sorted(tuple(r) for r in reader.load(str(path)).drop(M.UPDATED_AT).collect())


def test_compaction_keeps_every_row_and_the_next_merge_applies(spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    stream = postgres_stream(snapshot_rows=4, transactions=24, seed=41)
    lines = list(stream.lines("kafka_json", schemas=True))
    lake, source = tmp_path / "lake", tmp_path / "in.jsonl"
    job = SilverJob(spark, lake, parallelism=1)
    thirds = [lines[: len(lines) // 3], lines[len(lines) // 3 : -4], lines[-4:]]
    table = lake / "silver" / silver_table_name("shop", "public.orders")
    for i, part in enumerate(thirds):
        with source.open("ab") as f:
            f.writelines(line + b"\n" for line in part)
        LandingAgent(
            DebeziumJsonSource("shop", source),
            BronzeWriter(BronzeTables.under(lake)),
            max_events=8,  # several bronze batches, so several MERGEs and files per run
        ).run()
        job.run_once()
        if i != 1:
            continue
        # Between two runs, as run --continuous does between micro-batches.
        files = M.small_files(spark, str(table))
        assert files >= 2
        assert M.compact(spark, str(table), min_files=files + 1) is None  # too few: untouched
        before = DeltaTable(str(table)).version()
        rows = _rows(spark, table)
        metrics = M.compact(spark, str(table), min_files=2)
        assert metrics is not None and metrics.get("numRemovedFiles", 0) >= 2
        assert M.small_files(spark, str(table)) < files
        assert _rows(spark, table) == rows  # the same rows, in fewer files
        assert _rows(spark, table, before) == rows  # gold's older version reads as it did
    # The last part merged into the compacted table: silver equals the source.
    live = {
        r["id"]: (r["customer_id"], r["amount_cents"], r["status"])
        for r in spark.read.format("delta").load(str(table)).where(f"NOT {M.DELETED}").collect()
    }
    expected = {
        i: (r["customer_id"], r["amount_cents"], r["status"])
        for i, r in stream.final_state["orders"].items()
    }
    assert live == expected
