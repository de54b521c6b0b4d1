"""The gate's table metadata source (gold/latest_schemas.py) on a real bronze Delta table written
with deltalake: per source, newest non-null value per column, only up to the cut, new files
only, and a file beyond the cut read again."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from bronze import schema as B
from gold.cuts import Cut
from gold.latest_schemas import LatestSchemas

pytestmark = pytest.mark.unit


def _append(lake: Path, rows: list[dict[str, Any]]) -> None:
    full = [
        {
            B.INGEST_DATE: dt.date(2026, 11, 28),
            B.KIND: "data",
            B.OP: "u",
            **row,
        }
        for row in rows
    ]
    write_deltalake(
        str(lake / "bronze" / "events"),
        pa.Table.from_pylist(full, schema=B.EVENTS_SCHEMA),
        mode="append",
        partition_by=list(B.PARTITION_COLUMNS),
    )


def _row(source: str, position: int, collection: str, **values: Any) -> dict[str, Any]:
    return {B.SOURCE: source, B.POSITION: bytes([position]), B.COLLECTION: collection, **values}


def _latest(cache: LatestSchemas, lake: Path, source: str, position: int) -> dict[str, Any]:
    cut = Cut(source, 1, bytes([position]), None, {})
    return {
        r["collection"]: tuple(r[c] for c in ("key_schema_id", "value_schema_id", "key_json"))
        for r in cache.latest(lake, cut)
    }


def test_newest_values_per_source_up_to_the_cut_from_new_files(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _append(
        lake,
        [
            _row("a", 1, "s.t", key_schema_id="k1", value_schema_id="v1", key_json='{"id":1}'),
            _row("a", 2, "s.t", value_schema_id="v2"),  # newer value schema, no key schema
            _row("b", 9, "s.t", key_schema_id="kb", value_schema_id="vb"),  # another source
            _row("a", 3, "s.u", kind="heartbeat", value_schema_id="ignored"),
        ],
    )
    cache = LatestSchemas()
    assert _latest(cache, lake, "a", 5) == {"s.t": ("k1", "v2", '{"id":1}')}
    read = cache.files_read
    # Rows beyond the cut wait; the file holding them is read again once the cut passes them.
    _append(lake, [_row("a", 6, "s.t", value_schema_id="v3"), _row("a", 7, "s.u")])
    assert _latest(cache, lake, "a", 6) == {"s.t": ("k1", "v3", '{"id":1}')}
    assert cache.files_read == read + 1
    assert _latest(cache, lake, "a", 7) == {"s.t": ("k1", "v3", '{"id":1}'), "s.u": (None,) * 3}
    assert cache.files_read == read + 2  # the new file, again: it held a row beyond cut 6
    assert _latest(cache, lake, "a", 7) and cache.files_read == read + 2  # nothing new
    # An older cut than one served is answered from scratch, not from the newer state.
    assert _latest(cache, lake, "a", 1) == {"s.t": ("k1", "v1", '{"id":1}')}
    assert _latest(LatestSchemas(), lake, "b", 200) == {"s.t": ("kb", "vb", None)}
