"""Incremental-snapshot chunks read column by column write what the per-row chunks write, byte
for byte, and the DBLog window drops the same keys (issue 26).

The type-fidelity table (every type and edge value, the all-NULL row, C1 values) and a table of
strings to escape under a mask, a hash, a truncation and a column filter are read in chunks of
3 rows twice, row by row and column by column (``COPY``), between the same bounds. Each pair of
windows then sees the same stream changes (every other key of the chunk, as the stream passes
its records' keys) and is closed at the same high watermark; the bronze rows, quarantine and
schemas must be equal, except the times each run took itself. Chunks holding a C1 value go row
by row in both; the others go column by column (counted, so the comparison cannot pass with the
columnar path unused).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import Any

import pytest

from bronze import schema as S
from bronze.batch import BatchBuilder
from capture.incremental_columnar import ColumnarIncremental
from capture.incremental_snapshot import ChunkWindow, IncrementalProgress, record_key
from capture.postgresql.agent import PgTx
from capture.postgresql.source import PostgresSource
from capture.registry import create_source
from tests.fidelity import postgresql
from tests.integration.test_columnar_snapshot import _STRINGS, _setup
from tests.integration.test_pg_capture import Pg, pg_corner

pytestmark = pytest.mark.postgres

_INGEST = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
_NOW = dt.datetime(2026, 1, 1, 12, tzinfo=dt.UTC)
_OWN_TIMES = (S.CAPTURE_TS, S.EVENT_TS_MS, S.INGEST_TS, S.INGEST_DATE)
_ENVELOPE_TS = re.compile(r',"ts_ms":\d+}$')
_CHUNK = 3


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


def _windows(
    source: PostgresSource, collection: str, columnar: bool, monkeypatch: pytest.MonkeyPatch
) -> list[ChunkWindow]:
    """Every chunk of ``collection``, read one way, each window opened."""
    monkeypatch.setattr(source, "COLUMNAR_INCREMENTAL", columnar)
    table = source._incremental_table(collection)
    assert table is not None
    until = source._incremental_bound(table, None)
    assert until is not None
    windows, after = [], None
    while (window := source._read_window("c", table, after, until, None)) is not None:
        window.opened = True
        windows.append(window)
        after = window.last
    return windows


def _close(source: PostgresSource, window: ChunkWindow, keys: list[Any], at: Any) -> Any:
    """The stream changes ``keys`` inside the window, then the high watermark at ``at``: the
    bronze rows, quarantine and schemas the window lands (own times dropped)."""
    source._window = window
    source._incremental_saw(window.table, keys)
    source._incremental = IncrementalProgress("s", [window.table.collection])
    source._batch_schemas = set()  # a new batch registers its schemas again
    builder = BatchBuilder("pg")
    source._close_window(builder, window, at, _NOW)
    events = builder.events_table(agent_id="a", batch_seq=0, ingest_ts=_INGEST, offset={})
    rows = events.drop_columns(list(_OWN_TIMES)).to_pylist()
    for row in rows:
        row[S.VALUE_JSON] = _ENVELOPE_TS.sub(",ts_ms}", row[S.VALUE_JSON])
    quarantine = builder.quarantine_table(agent_id="a", batch_seq=0, ingest_ts=_INGEST)
    schemas = builder.schemas_table(known=set(), first_seen=_INGEST).to_pylist()
    return rows, quarantine.drop_columns([S.CAPTURE_TS]).to_pylist(), schemas


def test_columnar_incremental_chunks_write_the_per_row_bytes(
    pg: Pg, monkeypatch: pytest.MonkeyPatch
) -> None:
    _setup(pg)
    s = pg.schema
    config = pg.config(
        **{
            "snapshot.mode": "never",
            "signal.data.collection": f"{s}.sig",
            "incremental.snapshot.chunk.size": _CHUNK,
            "column.mask.with.5.chars": f"{s}\\.strings\\.masked",
            "column.mask.hash.SHA-256.with.salt.pepper": f"{s}\\.strings\\.hashed",
            "column.truncate.to.3.chars": f"{s}\\.strings\\.cut",
            "column.exclude.list": f"{s}\\.strings\\.dropped",
        }
    )
    source = create_source(config)
    assert isinstance(source, PostgresSource)
    assert isinstance(source, ColumnarIncremental)
    tx = PgTx("771", 1_700_000_000_000, xid=771, commit_lsn=0x3000)
    columnar_rows = landed = 0
    try:
        for name, count in (
            ("fidelity", postgresql.TYPE_TABLE.depth + 1),
            ("strings", len(_STRINGS) + 1),
        ):
            per_row = _windows(source, f"{s}.{name}", False, monkeypatch)
            columnar = _windows(source, f"{s}.{name}", True, monkeypatch)
            assert [w.read for w in columnar] == [w.read for w in per_row]
            assert sum(w.read for w in per_row) == count
            for n, (want, got) in enumerate(zip(per_row, columnar, strict=True)):
                assert got.last == want.last
                # The stream's records carry the converted key dicts of the per-row images.
                seen = [key for _, key in list(want.rows.values())[::2]]
                assert [record_key(k) for k in seen] == list(want.rows)[::2]
                if got.fragments is not None:
                    columnar_rows += got.read
                lsn = 0x2000 + n
                expected = _close(source, want, seen, (tx, lsn))
                assert _close(source, got, seen, (tx, lsn)) == expected
                landed += len(expected[0])
    finally:
        source.release()
    assert columnar_rows >= len(_STRINGS) + 1  # the strings table at least went column-wise
    assert landed > 0
