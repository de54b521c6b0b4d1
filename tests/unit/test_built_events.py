"""``built_data_event`` (the agents' unchecked path) gives exactly what ``classify`` gives."""

from __future__ import annotations

from typing import Any

import pytest

from bronze.envelope import BUILT_DATA_OPS, ConnectRecord, built_data_event, classify
from capture.captured_table import AgentRules
from capture.change_records import data_record, delete_records, key_move_records
from capture.database_source import OpenTransaction
from capture.postgresql.schema import CatalogColumn, KeyOverrides, TableFilter, TableSchema
from capture.postgresql.types import ValueHandling
from pipeline.errors import InternalError

pytestmark = pytest.mark.unit


def table(*, with_transaction: bool = True, keyed: bool = True) -> TableSchema:
    """The three-column PostgreSQL table these tests build events of (``id`` the key if keyed)."""
    columns = (
        CatalogColumn("id", 23, -1, not_null=True, in_primary_key=keyed, in_identity=keyed),
        CatalogColumn("price", 1700, -1),
        CatalogColumn("note", 25, -1),
    )
    return TableSchema(
        "srv",
        "public",
        "t",
        columns,
        "f",
        handling=ValueHandling(),
        lookup=None,
        column_filter=TableFilter(),
        key_overrides=KeyOverrides(),
        masker=None,
        placeholder="__debezium_unavailable_value",
        with_transaction=with_transaction,
    )


TABLE = table()

SOURCES: dict[str, dict[str, Any]] = {
    "postgresql": {
        "version": "3.0.0.Final",
        "connector": "postgresql",
        "name": "srv",
        "ts_ms": 1_700_000_000_123,
        "snapshot": "false",
        "db": "shop",
        "sequence": '["1","2"]',
        "schema": "public",
        "table": "t",
        "txId": 7,
        "lsn": 2,
        "xmin": None,
    },
    "mysql": {
        "version": "3.0.0.Final",
        "connector": "mysql",
        "name": "srv",
        "ts_ms": 1_700_000_000_000,
        "snapshot": "last",
        "db": "shop",
        "table": "t",
        "server_id": 1,
        "gtid": "0-1-5",
        "file": "mysql-bin.000001",
        "pos": 400,
        "row": 0,
        "thread": None,
        "query": None,
    },
    "sqlserver": {
        "version": "3.0.0.Final",
        "connector": "sqlserver",
        "name": "srv",
        "ts_ms": 0,
        "snapshot": "true",
        "db": "shop",
        "schema": "dbo",
        "table": "t",
        "change_lsn": "00000027:00000758:0003",
        "commit_lsn": "00000027:00000758:0005",
        "event_serial_no": 1,
    },
}


def records(connector: str) -> list[ConnectRecord]:
    source = SOURCES[connector]
    row = TABLE.row(("1", "2.50", "x"))
    other = TABLE.row(("2", "1e400", None))  # an unrepresentable price: an Image
    key, other_key = TABLE.key(("1", "2.50", "x")), TABLE.key(("2", "1", None))
    tx = OpenTransaction(id="tx-9", ts_ms=1)
    with_metadata = AgentRules(
        tombstones_on_delete=True, provide_transaction_metadata=True, skipped_operations=frozenset()
    )
    block = tx.block(TABLE.collection, True)
    out = [
        data_record("c", source, None, row, key, None, TABLE),
        data_record("r", source, None, other, other_key, block, TABLE),
        data_record("u", source, row, other, key, block, TABLE),
        data_record("u", source, None, row, key, None, TABLE),
        data_record("d", source, row, None, key, block, TABLE),
        data_record("d", source, None, None, key, None, TABLE),
    ]
    out += delete_records(source, row, key, TABLE, tx, with_metadata)
    out += key_move_records(source, (row, other), (key, other_key), TABLE, tx, with_metadata)
    return out


@pytest.mark.parametrize("connector", sorted(SOURCES))
def test_the_unchecked_event_equals_the_classified_one(connector: str) -> None:
    built = [r for r in records(connector) if r.value is not None]
    assert {r.value["op"] for r in built if r.value is not None} == BUILT_DATA_OPS
    assert any(r.value and r.value.get("transaction") for r in built)
    assert any(r.headers for r in built), "an unrepresentable value or a key move adds headers"
    for record in built:
        assert built_data_event(record) == classify(record)


def test_a_tombstone_is_not_taken() -> None:
    (_, tombstone) = delete_records(
        SOURCES["mysql"],
        TABLE.row(("1", "2", "x")),
        TABLE.key(("1", "2", "x")),
        TABLE,
        OpenTransaction(id="t", ts_ms=1),
        AgentRules(tombstones_on_delete=True),
    )
    with pytest.raises(InternalError, match="tombstone"):
        built_data_event(tombstone)
