"""The MySQL stream's columnar road (``capture/mysql/stream_columns.py``) in pieces: each
column's held values give the JSON the per-value converter gives (vectorized where the values
are of the plain kind, per value otherwise), a value the converter rejects makes the table
replay, and the positions and ``source`` template are what the per-event road writes.

The whole road against the per-event road, on a real binlog: tests/integration/
test_mysql_stream_columns.py."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import orjson
import pytest

from bronze.position_base import Phase
from capture.captured_table import AgentRules, CatalogColumn, TableFilter
from capture.column_types import Unrepresentable
from capture.mysql.agent import MySqlTable
from capture.mysql.ddl import SchemaState
from capture.mysql.position import MySqlPosition
from capture.mysql.stream import StreamReader
from capture.mysql.stream_columns import SourceTemplate, encoded_positions, stream_encoder
from capture.mysql.types import MySqlHandling, column_type

pytestmark = pytest.mark.unit

_DDL = (
    "CREATE TABLE d.t (id INT PRIMARY KEY, small TINYINT UNSIGNED, u INT UNSIGNED, "
    "big BIGINT, name VARCHAR(20), e ENUM('a','b'), at DATETIME(6), ms DATETIME(3), "
    "price DECIMAL(6,2), f DOUBLE) DEFAULT CHARSET=utf8mb4"
)


def _table() -> MySqlTable:
    state = SchemaState()
    state.apply(_DDL, "d", 0)
    definition = state.table("d", "t")
    assert definition is not None
    types = [column_type(c, definition.charset, MySqlHandling()) for c in definition.columns]
    columns = [
        CatalogColumn(c.name, 0, -1, not_null=not c.nullable, in_primary_key=c.name == "id")
        for c in definition.columns
    ]
    return MySqlTable(
        definition,
        "srv",
        "d",
        "t",
        columns,
        types,
        **AgentRules().table_options("mysql", TableFilter(), "mysql"),
    )


_AT = dt.datetime(2026, 11, 29, 13, 5, 7, 123456)
_VALUES: dict[str, list[Any]] = {
    "id": [1, None, -(2**31), 2**31 - 1],
    "small": [0, 255, None, 7],
    "u": [0, 2**32 - 1, None, 5],
    "big": [-(2**63), 2**63 - 1, 0, None],
    "name": ["plain", 'quote " \\ back', "tab\tnl\n\x01\x1f\x7f é 中 😀", None],
    "e": ["a", "b", "", None],
    "at": [_AT, dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31, 23, 59, 59, 999999), None],
    "ms": [_AT, dt.datetime(1960, 1, 1, 0, 0, 0, 500000), None, dt.datetime(1970, 1, 1)],
    "price": [None, None, None, None],
    "f": [1.5, None, -0.0, 1e300],
}
"""Per column, held values of the plain kind (and NULLs)."""
_MIXED: dict[str, list[Any]] = {
    "u": [-1, 5, None],  # a signed reading of an UNSIGNED column: the converter fixes it
    "name": [b"bytes", "text", None],  # bytes where the reader had no codec
    "at": ["2020-02-03 04:05:06.000007", _AT, None],  # text where the reader left a date
    "e": [2, "a", None],  # an ENUM index
}
"""Held values a vectorized form does not take: the column goes value by value."""


def _expected(table: MySqlTable, i: int, values: list[Any]) -> list[str]:
    convert = table.converters[i]
    return [orjson.dumps(None if v is None else convert(v)).decode() for v in values]


@pytest.mark.parametrize("values", [_VALUES, _MIXED], ids=["plain", "mixed"])
def test_each_column_writes_the_converters_json(values: dict[str, list[Any]]) -> None:
    table = _table()
    vectorized = {table.names[i] for i in range(len(table.names)) if stream_encoder(table, i)}
    assert vectorized == {"id", "small", "u", "big", "name", "e", "at"}
    for name, column in values.items():
        i = table.names.index(name)
        encoder = stream_encoder(table, i)
        if encoder is None:
            continue
        got = encoder(column).fill_null("null").to_pylist()
        assert got == _expected(table, i, column), name


def test_a_value_the_converter_rejects_raises_for_the_table_to_replay() -> None:
    table = _table()
    at = stream_encoder(table, table.names.index("at"))
    name = stream_encoder(table, table.names.index("name"))
    assert at is not None and name is not None
    with pytest.raises(Unrepresentable):  # a zero date: the C1 header is the per-event road's
        at([_AT, "0000-00-00 00:00:00.000000"])
    with pytest.raises(ValueError, match=r"d\.t\.name"):
        name([b"\xff\xfe not utf-8", "ok"])


def test_positions_are_the_position_class_encoding() -> None:
    import numpy as np

    files, starts, rows = [3, 3, 70000], [4, 2**40 + 5, 900], [0, 7, 2**32 - 1]
    got = encoded_positions(np.array(files), np.array(starts), np.array(rows)).to_pylist()
    assert got == [
        MySqlPosition._new(f, s, Phase.STREAM, r, 0, None, None).encode()
        for f, s, r in zip(files, starts, rows, strict=True)
    ]


@pytest.mark.parametrize("include_query", [False, True])
def test_the_source_template_fills_to_the_source_block(include_query: bool) -> None:
    import pyarrow as pa

    table = _table()
    # The agent's own source block, on a stand-in for the agent (its settings and state).
    reader = SimpleNamespace(
        settings=SimpleNamespace(server_name="srv", include_query=include_query),
        _server_id=1,
        _file="mysql-bin.000001",
    )

    def source(*args: Any) -> dict[str, Any]:
        return StreamReader._source(reader, *args)  # type: ignore[arg-type]

    template = SourceTemplate.cut(source, table)
    assert ("query" in template.slots) == include_query
    cases = [
        ("mysql-bin.000001", 4, 0, "0-1-5", 1_764_392_400_000, None, 1, 'UPDATE "t"'),
        ("mysql-bin.000002", 2**40, 3, None, 0, 17, 2**32 - 1, None),
    ]
    columns = zip(*cases, strict=True)
    slots = ("file", "pos", "row", "gtid", "ts_ms", "thread", "server_id", "query")
    filled = template.fill(
        {
            slot: pa.array([orjson.dumps(v).decode() for v in column])
            for slot, column in zip(slots, columns, strict=True)
        }
    ).to_pylist()
    for text, case in zip(filled, cases, strict=True):
        file, pos, row, gtid, ts_ms, thread, server_id, query = case
        block = source(table, pos, row, gtid, ts_ms, thread, query, server_id)
        block["file"] = file
        assert text == orjson.dumps(block).decode()
