"""``RowAppender`` (the agents' row changes straight into the batch) lands exactly the bronze rows
that ``DatabaseSource._add`` lands for the same records."""

from __future__ import annotations

import datetime as dt
import time
from types import SimpleNamespace

import pytest

from bronze.batch import ROW_COLUMNS, BatchBuilder
from bronze.position_base import Phase
from capture.change_records import RowAppender, data_record
from capture.database_source import DatabaseSource, OpenTransaction
from capture.mysql.position import MySqlPosition
from tests.unit.test_built_events import SOURCES
from tests.unit.test_built_events import table as table_of

pytestmark = pytest.mark.unit

NOW = dt.datetime(2026, 11, 29, 5, 0, tzinfo=dt.UTC)


@pytest.mark.parametrize("with_transaction", [False, True])
@pytest.mark.parametrize("keyed", [True, False])
def test_the_appended_rows_equal_the_added_ones(
    with_transaction: bool, keyed: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(time, "time_ns", lambda: 1_764_392_400_123_456_789)
    table = table_of(with_transaction=with_transaction, keyed=keyed)
    values, other = ("1", "2.50", "x"), ("1", "3", None)
    row, key = table.row_and_key(values)
    changed = table.row(other)
    tx = OpenTransaction(id="0-1-5", ts_ms=1)
    # The agent's own ``_add``, on a stand-in for the agent (its schema registry and partition).
    agent = SimpleNamespace(_register=lambda *args: None, partition="srv-partition")
    added, appended = BatchBuilder("src"), BatchBuilder("src")
    appender = RowAppender("srv-partition")
    seq = 0
    for source in SOURCES.values():
        for op, before, after in (("c", None, row), ("u", row, changed)):
            block = tx.block(table.collection, with_transaction)
            position = MySqlPosition._new(1, 400, Phase.STREAM, seq, 0, "mysql-bin.000001", None)
            origin = f"mysql:mysql-bin.000001:400#{seq}"
            record = data_record(op, source, before, after, key, block, table)
            DatabaseSource._add(agent, added, record, position, origin, NOW, tx, table)  # type: ignore[arg-type]
            appender.add(
                appended,
                op,
                source,
                (before, after),
                key,
                block,
                table,
                (position, origin, NOW, tx.id),
            )
            tx.note_data(table.collection)
            seq += 1
    assert len(appended) == len(added) == 2 * len(SOURCES)
    for got, want in zip(appended._rows, added._rows, strict=True):
        assert dict(zip(ROW_COLUMNS, got, strict=True)) == dict(zip(ROW_COLUMNS, want, strict=True))
    assert any(r[ROW_COLUMNS.index("tx_order")] for r in added._rows) is with_transaction
