"""Spark reads bronze in the writer's Parquet layout (LZ4_RAW, no dictionary and no statistics on
the JSON columns) beside files written before it (Parquet's defaults), and filters by position
and by the batch offset as delta-rs does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter
from tests.pgmodel.streams import postgres_stream
from tests.unit.test_bronze_writer_format import chunk_metadata, land

pytestmark = [pytest.mark.spark, pytest.mark.delta]


def test_spark_reads_lz4_raw_files_beside_older_ones(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    lake = tmp_path / "lake"
    lines = list(postgres_stream(snapshot_rows=5, transactions=20, seed=5).lines("kafka_json"))
    old = BronzeWriter(BronzeTables.under(lake))
    old._events_properties = None  # type: ignore[assignment]  # what main wrote
    land(lake, lines[: len(lines) // 2], old, "in")
    land(lake, lines, BronzeWriter(BronzeTables.under(lake)), "in")

    events = lake / "bronze" / "events"
    assert {c.compression for c in chunk_metadata(events)[S.VALUE_JSON]} == {"SNAPPY", "LZ4"}
    expected = DeltaTable(str(events)).to_pyarrow_table()
    columns = [S.POSITION, S.KEY_JSON, S.VALUE_JSON, S.BATCH_SEQ, S.BATCH_OFFSET]
    want = sorted(
        zip(*(expected.column(c).to_pylist() for c in columns), strict=True),
        key=lambda r: r[0],
    )
    df = spark.read.format("delta").load(str(events))
    got = [(bytes(r[0]), *r[1:]) for r in df.select(*columns).orderBy(S.POSITION).collect()]
    assert got == want
    middle = want[len(want) // 2][0]
    later = df.where(F.col(S.POSITION) > F.lit(middle)).count()
    assert later == sum(1 for r in want if r[0] > middle)
    offsets = df.where(F.col(S.BATCH_OFFSET).isNotNull()).select(S.BATCH_SEQ).collect()
    assert sorted(r[0] for r in offsets) == sorted(set(expected.column(S.BATCH_SEQ).to_pylist()))
