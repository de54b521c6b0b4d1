"""silver/bookkeeping: the side tables written by deltalake, exactly once per silver batch."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from silver.bookkeeping import already_written, write_once

_SCHEMA = pa.schema([("silver_batch", pa.int64()), ("recorded_at", pa.timestamp("us", tz="UTC"))])


def _rows(*batches: int) -> pa.Table:
    now = dt.datetime.now(dt.UTC)
    return pa.Table.from_pylist(
        [{"silver_batch": b, "recorded_at": now} for b in batches], schema=_SCHEMA
    )


def test_a_replayed_batch_appends_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "_progress"
    assert not already_written(path, "app", 0)  # no table yet
    assert write_once(path, _rows(0), mode="append", app_id="app", version=0)
    assert write_once(path, _rows(1), mode="append", app_id="app", version=1)
    # The replay of batch 1 (a crash after its commit) and a stale batch 0 write nothing.
    assert not write_once(path, _rows(1), mode="append", app_id="app", version=1)
    assert not write_once(path, _rows(0), mode="append", app_id="app", version=0)
    table = DeltaTable(str(path))
    assert sorted(table.to_pyarrow_table().column("silver_batch").to_pylist()) == [0, 1]
    assert table.transaction_version("app") == 1
    # Another writer of the same table keeps its own versions.
    assert write_once(path, _rows(7), mode="append", app_id="other", version=0)
    assert already_written(path, "app", 1) and not already_written(path, "app", 2)


def test_an_overwrite_replaces_the_rows_and_records_the_batch(tmp_path: Path) -> None:
    path = tmp_path / "_pending"
    write_once(path, _rows(3, 3), mode="overwrite", app_id="pending", version=3)
    assert write_once(path, _SCHEMA.empty_table(), mode="overwrite", app_id="pending", version=4)
    table = DeltaTable(str(path))
    assert table.to_pyarrow_table().num_rows == 0
    assert table.transaction_version("pending") == 4
