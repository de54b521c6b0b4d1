"""The DataFusion SQL of the driver MERGE, run through delta-rs itself (no Spark)."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa
import pytest
from pyspark.sql.types import (
    ArrayType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VarcharType,
)

from pipeline.sql import quote_datafusion_identifier, quote_datafusion_literal
from silver import merge_driver as D

AWKWARD = ["a\\b", "nul\x00in", "sep\x01ar", "q'uote", 'dq"', "e\U0001f600", "", "x" * 200]


def test_quoting() -> None:
    assert quote_datafusion_identifier('We"ird') == '"We""ird"'
    assert quote_datafusion_literal("it's") == "'it''s'"
    with pytest.raises(ValueError):
        quote_datafusion_identifier("")


def test_literals_and_names_reach_delta_rs_as_they_are(tmp_path: Path) -> None:
    from deltalake import DeltaTable, write_deltalake

    path = str(tmp_path / "t")
    name = 'Up "Col"'
    write_deltalake(path, pa.table({"k": AWKWARD, name: [0] * len(AWKWARD)}))
    for i, key in enumerate(AWKWARD):
        condition = D.merge_condition("k", "k", [(key, key)])
        metrics = (
            DeltaTable(path)
            .merge(pa.table({"k": [key]}), condition, source_alias="s", target_alias="t")
            .when_matched_update(updates={quote_datafusion_identifier(name): str(i + 1)})
            .execute()
        )
        assert metrics["num_target_rows_updated"] == 1, repr(key)
    stored = DeltaTable(path).to_pyarrow_table().to_pylist()
    assert {r["k"]: r[name] for r in stored} == {k: i + 1 for i, k in enumerate(AWKWARD)}


def test_the_condition_bounds_the_key_order_or_nothing() -> None:
    assert D.merge_condition("k", "o", []) == 't."k" = s."k"'
    assert D.merge_condition("k", "o", [("a", "b"), ("c'", "d")]) == (
        't."k" = s."k" AND (t."o" IS NULL OR t."o" BETWEEN \'a\' AND \'b\' '
        "OR t.\"o\" BETWEEN 'c''' AND 'd')"
    )


def _protocol(writer: int, writer_features: list[str] | None, reader: list[str] | None) -> object:
    return SimpleNamespace(
        min_writer_version=writer, writer_features=writer_features, reader_features=reader
    )


def test_protocols_delta_rs_writes_as_spark_would() -> None:
    silver = ["deletionVectors", "timestampNtz", "invariants", "appendOnly"]
    assert D.protocol_reason(_protocol(7, silver, ["deletionVectors", "timestampNtz"])) is None
    assert D.protocol_reason(_protocol(2, None, None)) is None
    widened = _protocol(7, [*silver, "typeWidening"], ["deletionVectors", "typeWidening"])
    assert D.protocol_reason(widened) == "table features typeWidening"
    assert D.protocol_reason(_protocol(4, None, None)) == "writer version 4"
    mapped = _protocol(7, ["columnMapping"], ["columnMapping"])
    assert D.protocol_reason(mapped) == "table features columnMapping"


def test_types_must_be_the_tables_exactly() -> None:
    nested = StructType([StructField("a", ArrayType(MapType(StringType(), TimestampType())))])
    table = StructType(
        [
            StructField("i", IntegerType()),
            StructField("ts", TimestampType()),
            StructField("n", nested),
        ]
    )
    same = StructType(
        [
            StructField("i", IntegerType(), nullable=False),  # nullability does not matter
            StructField("ts", TimestampType()),
            StructField("n", nested),
        ]
    )
    assert D.schema_reason(same, table, ["i", "ts", "n"]) is None
    wider = StructType([StructField("i", LongType()), *same.fields[1:]])
    assert D.schema_reason(wider, table, ["i"]) == "column i: bigint into int"
    ntz = StructType([same.fields[0], StructField("ts", TimestampNTZType()), same.fields[2]])
    assert D.schema_reason(ntz, table, ["ts"]) == "column ts: timestamp_ntz into timestamp"
    assert D.schema_reason(same, table, ["gone"]) == "column gone missing from the batch"
    varchar = StructType([StructField("v", VarcharType(3))])
    assert D.schema_reason(varchar, varchar, ["v"]) == "column v: type varchar(3)"
