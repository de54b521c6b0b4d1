"""Compacting a silver table (silver.merge.compact) changes no row, leaves older versions
readable, and the next MERGE applies on the compacted files (shared Spark, real Delta)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from silver import merge as M
from tests.integration.test_silver_merge import apply, ev, rows

pytestmark = [pytest.mark.spark, pytest.mark.delta]


def test_compaction_keeps_every_row_and_the_next_merge_applies(spark: Any, tmp_path: Path) -> None:
    table = tmp_path / "t"
    # Micro-batches' MERGEs as run --continuous leaves them: a small file the MERGE may touch is
    # rewritten, but new keys beyond every file's key range land in a file of their own.
    apply(spark, table, ev(1, "c", 1, "a", "x"), ev(2, "c", 2, "b", "y"), ev(3, "c", 9, "z", "z"))
    apply(spark, table, ev(4, "c", 20, "t", None))
    apply(spark, table, ev(5, "u", 1, "a2", "x"), ev(6, "c", 3, "c", None), ev(7, "d", 2))
    files = M.small_files(str(table), below=M.COMPACT_FILE_BYTES // 2)
    assert files >= 2
    assert M.compact(spark, str(table), min_files=files + 1) is None  # too few: untouched
    before = DeltaTable(str(table)).version()
    kept = rows(spark, table, live=False)
    metrics = M.compact(spark, str(table), min_files=2)
    assert metrics is not None and metrics.get("numRemovedFiles", 0) >= 2
    assert M.small_files(str(table), below=M.COMPACT_FILE_BYTES // 2) < files
    assert rows(spark, table, live=False) == kept  # the same rows (tombstone included)
    older = spark.read.format("delta").option("versionAsOf", before).load(str(table))
    assert {r["id"] for r in older.collect()} == set(kept)  # gold's older version still reads
    # The next MERGE applies on the compacted files: update, delete, insert.
    r = apply(spark, table, ev(8, "u", 3, "c2", "v"), ev(9, "d", 9), ev(10, "c", 5, "e", None))
    assert (r.inserted, r.updated) == (1, 2)
    live = {i: (v["name"], v["notes"]) for i, v in rows(spark, table).items()}
    assert live == {1: ("a2", "x"), 3: ("c2", "v"), 5: ("e", None), 20: ("t", None)}


def files_of(table: Path) -> pa.Table:
    return pa.table(DeltaTable(str(table)).get_add_actions(flatten=True))


def test_compaction_writes_files_of_the_set_size_each_a_narrow_key_range(
    spark: Any, tmp_path: Path
) -> None:
    table = tmp_path / "t"
    # MERGEs of new keys, newest keys last, as a key-local workload leaves a table.
    for first in range(1, 401, 80):
        apply(spark, table, *[ev(n, "c", n, "x" * 200, None) for n in range(first, first + 80)])
    size = sum(
        DeltaTable(str(table)).get_add_actions(flatten=True).column("size_bytes").to_pylist()
    )
    # Files of half the table, so each MERGE's is small (Delta's default, 1 GiB, makes one file).
    metrics = M.compact(spark, str(table), min_files=5, file_bytes=size // 2)
    assert metrics is not None
    files = files_of(table).to_pylist()
    assert len(files) >= 2
    ranges = sorted((f["min.id"], f["max.id"]) for f in files)
    # Z-ordered by key: the files' key ranges do not overlap, so a batch of recent keys meets
    # the last file only.
    assert all(a[1] < b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert set(rows(spark, table)) == set(range(1, 401))
