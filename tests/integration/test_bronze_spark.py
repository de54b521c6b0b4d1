"""Bronze written by delta-rs (no JVM) and by Spark must be readable by the other, every version."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.delta]


def land(path: Path, lake: Path, max_events: int = 30) -> None:
    LandingAgent(
        DebeziumJsonSource("shop", path),
        BronzeWriter(BronzeTables.under(lake)),
        max_events=max_events,
    ).run()


def test_spark_reads_every_version_delta_rs_wrote(spark: Any, tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=5, transactions=30, seed=1)
    path = tmp_path / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=True))
    lake = tmp_path / "lake"
    land(path, lake)
    events = lake / "bronze" / "events"
    table = DeltaTable(str(events))
    assert table.version() >= 5
    for version in range(table.version() + 1):
        expected = DeltaTable(str(events), version=version).to_pyarrow_table()
        df = spark.read.format("delta").option("versionAsOf", version).load(str(events))
        assert df.count() == expected.num_rows, f"version {version}"
        if expected.num_rows:
            spark_positions = [bytes(r[0]) for r in df.select(S.POSITION).collect()]
            assert sorted(spark_positions) == sorted(expected.column(S.POSITION).to_pylist())
    df = spark.read.format("delta").load(str(events))
    assert [f.name for f in df.schema.fields] == S.EVENTS_SCHEMA.names
    # Spark's BINARY ordering is the bytes order: ORDER BY position = source commit order.
    spark_order = [r[S.ORIGIN] for r in df.orderBy(S.POSITION).select(S.ORIGIN).collect()]
    rows = table.to_pyarrow_table().to_pylist()
    assert spark_order == [r[S.ORIGIN] for r in sorted(rows, key=lambda r: r[S.POSITION])]
    # The app transaction and offset are visible to Spark readers too.
    history = spark.sql(f"DESCRIBE HISTORY delta.`{events}`").orderBy("version").collect()
    assert len(history) == table.version() + 1


def _spark_row(spark: Any, template: dict[str, Any], origin: str) -> Any:
    row = dict(template)
    row.update(
        {
            S.ORIGIN: origin,
            S.AGENT_ID: "spark-writer",
            S.BATCH_SEQ: 0,
            S.INGEST_TS: dt.datetime(2026, 11, 21, tzinfo=dt.UTC),
        }
    )
    from pyspark.sql.types import StructType

    schema = spark.read.format("delta").load(template["_path"]).schema
    assert isinstance(schema, StructType)
    row.pop("_path")
    return spark.createDataFrame([tuple(row[f.name] for f in schema.fields)], schema)


def test_delta_rs_reads_what_spark_writes_and_keeps_writing(spark: Any, tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=3, transactions=10, seed=2)
    lines = list(stream.lines("kafka_json", schemas=False))
    path = tmp_path / "in.jsonl"
    write_lines(path, iter(lines[:40]))
    lake = tmp_path / "lake"
    land(path, lake)
    events = lake / "bronze" / "events"
    template = DeltaTable(str(events)).to_pyarrow_table().slice(0, 1).to_pylist()[0]
    template["_path"] = str(events)
    # Spark appends (as a Spark-based producer or a backfill job would).
    _spark_row(spark, template, "spark:1").write.format("delta").mode("append").save(str(events))
    after_spark = DeltaTable(str(events))
    assert "spark:1" in after_spark.to_pyarrow_table().column(S.ORIGIN).to_pylist()
    # delta-rs keeps committing on top of Spark's commit, and Spark reads the result.
    with path.open("ab") as f:
        for line in lines[40:]:
            f.write(line + b"\n")
    land(path, lake)
    final = DeltaTable(str(events))
    assert final.version() > after_spark.version()
    assert spark.read.format("delta").load(str(events)).count() == final.to_pyarrow_table().num_rows
    assert final.to_pyarrow_table().num_rows == len(lines) + 1
    # Append-only: Spark refuses to delete from bronze.
    with pytest.raises(Exception, match="(?i)append"):
        spark.sql(f"DELETE FROM delta.`{events}` WHERE origin = 'spark:1'")


def test_bronze_tables_by_name(spark: Any, tmp_path: Path) -> None:
    from pipeline.spark import register_lake_tables

    stream = postgres_stream(snapshot_rows=3, transactions=5, seed=3)
    path = tmp_path / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=True))
    lake = tmp_path / "lake"
    land(path, lake)
    names = register_lake_tables(spark, lake)
    assert {"bronze.events", "bronze.quarantine", "bronze.schemas"} <= set(names)
    n = spark.sql("SELECT count(*) FROM bronze.events WHERE kind = 'data'").collect()[0][0]
    assert n == stream.data_events
    ids = spark.sql(
        "SELECT count(DISTINCT value_schema_id) FROM bronze.events e "
        "JOIN bronze.schemas s ON e.value_schema_id = s.schema_id"
    ).collect()[0][0]
    assert ids >= 2


def test_medallion_position_sql_function(spark: Any, tmp_path: Path) -> None:
    import orjson

    from bronze.positions import decode_position
    from pipeline.spark_functions import register_functions

    stream = postgres_stream(snapshot_rows=2, transactions=3, seed=4)
    path = tmp_path / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=False))
    lake = tmp_path / "lake"
    land(path, lake)
    register_functions(spark)
    events = lake / "bronze" / "events"
    rows = spark.sql(
        f"SELECT connector, position, medallion_position(connector, position) AS pos "
        f"FROM delta.`{events}` WHERE kind = 'data' ORDER BY position"
    ).collect()
    assert rows
    for row in rows:
        expected = decode_position(row["connector"], bytes(row["position"])).to_json()
        assert orjson.loads(row["pos"]) == expected
    assert orjson.loads(rows[0]["pos"])["phase"] == "snapshot"
    assert orjson.loads(rows[-1]["pos"])["phase"] == "stream"
