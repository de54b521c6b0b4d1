"""A batch of row events and columnar chunks keeps them in arrival order (bronze.batch).

Events read by the debezium_json source are landed twice: once row by row, once with the middle
ones handed over as a columnar chunk (:meth:`BatchBuilder.add_columns`). Both batches must build
the same bronze table, count the same events, give the metrics the same values and mark the
same cut transactions.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest

from bronze import schema as S
from bronze.batch import ROW_SCHEMA, BatchBuilder
from pipeline.errors import InternalError
from tests.unit.test_debezium_formats import data, pg_source, read_all

pytestmark = pytest.mark.unit

_NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _table(builder: BatchBuilder) -> pa.Table:
    return builder.events_table(agent_id="a", batch_seq=1, ingest_ts=_NOW, offset={"at": 1})


def test_rows_and_chunks_build_the_row_batch_table(tmp_path: Path) -> None:
    lines = [data(pg_source(100 + i, tx=500 + i // 2)) for i in range(6)]
    (rows,) = read_all(tmp_path, lines)
    rows.mark_partial("500")
    expected = _table(rows)
    assert expected.num_rows == 6

    mixed = BatchBuilder(rows.source)
    mixed._rows = rows._rows[:2]
    chunk = expected.select(ROW_SCHEMA.names).slice(2, 3).cast(ROW_SCHEMA)
    mixed.add_columns(chunk)
    mixed._rows.extend(rows._rows[5:])
    mixed.mark_partial("500")

    assert len(mixed) == 6
    assert _table(mixed).equals(expected)
    names = (S.COLLECTION, S.TX_ID, S.POSITION)
    assert list(mixed.column_values(*names)) == list(rows.column_values(*names))
    assert list(mixed.column_values(S.SEQ)) == list(rows.column_values(S.SEQ))
    assert _table(mixed).column(S.TX_PARTIAL).to_pylist() == [True] * 2 + [False] * 4


def test_a_chunk_of_another_schema_is_refused() -> None:
    builder = BatchBuilder("s")
    with pytest.raises(InternalError, match="row schema"):
        builder.add_columns(pa.table({"x": [1]}))
