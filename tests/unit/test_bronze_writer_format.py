"""The bronze writer's Parquet layout (bronze/writer_format.py): codec, no dictionary and no
statistics on the JSON columns, statistics kept where readers filter; older files beside newer
ones; ``bronze.parquet.compression`` validated once."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.config import load_config
from pipeline.errors import ConfigError
from pipeline.landing import LandingAgent
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = pytest.mark.delta

_DICTIONARY = {"PLAIN_DICTIONARY", "RLE_DICTIONARY"}


def land(lake: Path, lines: list[bytes], writer: BronzeWriter, name: str) -> None:
    path = lake.parent / f"{name}.jsonl"
    write_lines(path, iter(lines))
    LandingAgent(DebeziumJsonSource("shop", path), writer, max_events=40).run()


def chunk_metadata(table: Path) -> dict[str, list[Any]]:
    """Column name -> its column chunk metadata in every data file of ``table``."""
    out: dict[str, list[Any]] = {}
    for file in table.rglob("*.parquet"):
        meta = pq.ParquetFile(file).metadata
        for g in range(meta.num_row_groups):
            group = meta.row_group(g)
            for c in range(group.num_columns):
                chunk = group.column(c)
                out.setdefault(chunk.path_in_schema, []).append(chunk)
    return out


def test_events_files_skip_dictionary_and_statistics_of_the_json(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    stream = postgres_stream(snapshot_rows=5, transactions=15, seed=3)
    land(
        lake,
        list(stream.lines("kafka_json", schemas=True)),
        BronzeWriter(BronzeTables.under(lake)),
        "a",
    )
    events = lake / "bronze" / "events"
    chunks = chunk_metadata(events)
    assert chunks[S.VALUE_JSON]
    for name, column in chunks.items():
        # Arrow names Parquet's LZ4_RAW codec "LZ4" (and the Hadoop-framed one "LZ4_HADOOP").
        assert {c.compression for c in column} == {"LZ4"}, name
    for name in (S.KEY_JSON, S.VALUE_JSON):
        for chunk in chunks[name]:
            assert not chunk.is_stats_set, name
            assert not _DICTIONARY & set(chunk.encodings), name
    for chunk in chunks[S.POSITION]:  # filtered on by gold: statistics kept, no dictionary
        assert chunk.is_stats_set and chunk.statistics.has_min_max
        assert not _DICTIONARY & set(chunk.encodings)
    for name in (S.BATCH_SEQ, S.AGENT_ID, S.KIND, S.BATCH_OFFSET):  # filtered on: kept
        assert all(c.is_stats_set for c in chunks[name]), name
    assert any(_DICTIONARY & set(c.encodings) for c in chunks[S.COLLECTION])
    # The Delta log's file statistics follow: none for the JSON, min/max for the rest.
    adds = pa.table(DeltaTable(str(events)).get_add_actions(flatten=True))
    assert adds.num_rows >= 2
    for name in (S.KEY_JSON, S.VALUE_JSON):
        assert adds.column(f"min.{name}").null_count == adds.num_rows, name
    assert adds.column(f"min.{S.BATCH_SEQ}").null_count == 0


def test_older_files_and_newer_files_read_together(tmp_path: Path) -> None:
    """A table written before this layout (Parquet's defaults, snappy) keeps working: new
    batches append files of the new codec and layout, and every reader path takes both."""
    lake = tmp_path / "lake"
    stream = postgres_stream(snapshot_rows=5, transactions=20, seed=4)
    lines = list(stream.lines("kafka_json", schemas=True))
    old = BronzeWriter(BronzeTables.under(lake))
    old._events_properties = None  # type: ignore[assignment]  # what main wrote
    land(lake, lines[: len(lines) // 2], old, "in")
    land(lake, lines, BronzeWriter(BronzeTables.under(lake), "zstd"), "in")  # resumes

    events = lake / "bronze" / "events"
    codecs = {c.compression for c in chunk_metadata(events)[S.VALUE_JSON]}
    assert codecs == {"SNAPPY", "ZSTD"}
    table = DeltaTable(str(events)).to_pyarrow_table()
    assert table.num_rows == len(lines)
    assert len(set(table.column(S.ORIGIN).to_pylist())) == len(lines)
    values = [orjson.loads(v) for v in table.column(S.VALUE_JSON).to_pylist() if v is not None]
    assert len(values) == table.num_rows - table.column(S.VALUE_JSON).null_count
    # Pruning readers: position ranges (gold) and the offset on a batch's last row.
    middle = sorted(table.column(S.POSITION).to_pylist())[len(lines) // 2]
    dataset = DeltaTable(str(events)).to_pyarrow_dataset()
    later = dataset.to_table(columns=[S.POSITION], filter=pc.field(S.POSITION) > middle)
    assert later.num_rows == sum(1 for p in table.column(S.POSITION).to_pylist() if p > middle)
    committed = BronzeWriter(BronzeTables.under(lake)).last_committed(agent_app_id("shop"))
    assert committed is not None
    writer = BronzeWriter(BronzeTables.under(lake))
    from_rows = writer._offset_from_rows(
        DeltaTable(str(events)), agent_app_id("shop"), committed.batch_seq
    )
    assert from_rows == committed.offset


def test_compression_is_configured_and_validated(tmp_path: Path) -> None:
    conf = tmp_path / "pipeline.yaml"
    conf.write_text("bronze: {max.batch.size: 10}\n")
    assert load_config(conf, env={}).bronze.parquet_compression == "lz4_raw"
    conf.write_text("bronze: {parquet.compression: ZSTD}\n")
    assert load_config(conf, env={}).bronze.parquet_compression == "zstd"
    conf.write_text("bronze: {parquet.compression: lz4}\n")
    with pytest.raises(ConfigError) as info:
        load_config(conf, env={})
    assert info.value.key_path == "bronze.parquet.compression"
    assert "did you mean 'lz4_raw'?" in info.value.reason
