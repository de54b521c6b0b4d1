"""The SQL Server agent on the types pyodbc has no mapping for, as pyodbc really behaves.

pyodbc fails the fetch of a row with ``ODBC SQL type -155 is not yet supported`` for a
``datetimeoffset`` column (``sql_variant``: type 0 from FreeTDS, -150 from Microsoft's driver)
unless the connection registered an output converter, which then gets the driver's bytes
(mkleehammer/pyodbc#134, #404; the model's DB-API stand-in does the same). The agent registers
one for ``datetimeoffset``, to a ``ZonedTimestamp`` exact to its 100 ns; the CLR types
(``hierarchyid``...) land as their bytes; ``sql_variant``, which Debezium does not map either,
is left out of the records with a warning.
"""

from __future__ import annotations

import base64
import datetime as dt
import logging
import struct
from pathlib import Path
from typing import Any

import orjson
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from capture.sqlserver.connection import datetimeoffset_text
from capture.sqlserver.settings import DBAPI_ENV
from capture.sqlserver.types import ColumnFacts, SqlServerHandling, column_type
from tests.contract.harness import land
from tests.integration.test_sqlserver_capture import DB, raw
from tests.mssqlmodel import dbapi
from tests.mssqlmodel.server import Column, SqlServerModel

pytestmark = pytest.mark.delta

COLUMNS = [
    Column("id", "int", False, True),
    Column("at", "datetimeoffset(7)"),
    Column("node", "hierarchyid"),
    Column("variant", "sql_variant"),
]
NODE = bytes.fromhex("5ac0")  # /1/ as SQL Server serializes a hierarchyid
ROW = {"at": "2018-06-20 15:13:16.9451041 +02:00", "node": NODE, "variant": "x"}


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqlServerModel:
    monkeypatch.setenv(DBAPI_ENV, "tests.mssqlmodel.dbapi")
    made = SqlServerModel(tmp_path / "server")
    made.create_database(DB)
    made.create_table(DB, "dbo", "odd", COLUMNS)
    made.enable_table(DB, "dbo", "odd")
    with made.transaction(DB) as tx:
        tx.insert("dbo", "odd", {"id": 1, **ROW})
    return made


def _after_images(lake: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    values = [
        orjson.loads(r[S.VALUE_JSON])
        for r in sorted(rows, key=lambda r: r[S.POSITION])
        if r[S.KIND] == "data" and r[S.VALUE_JSON]
    ]
    return [(v["op"], v["after"]) for v in values]


def test_the_model_fails_unmapped_types_as_pyodbc_does(model: SqlServerModel) -> None:
    conn = dbapi.connect(f"DRIVER={{FreeTDS}};SERVER={model.root};DATABASE={DB};UID=sa")
    select = "SELECT [id], [at] FROM [dbo].[odd]"
    cursor = conn.cursor().execute(select)
    with pytest.raises(dbapi.ProgrammingError, match=r"ODBC SQL type -155 is not yet supported"):
        cursor.fetchall()
    conn.add_output_converter(-155, lambda raw: raw)
    ((_, raw),) = conn.cursor().execute(select).fetchall()
    assert struct.unpack("<6hI2h", raw) == (2018, 6, 20, 15, 13, 16, 945104100, 2, 0)
    assert datetimeoffset_text(raw) == "2018-06-20 15:13:16.945104100 +02:00"
    west = struct.pack("<6hI2h", 2018, 6, 20, 15, 13, 16, 0, -3, -30)
    assert datetimeoffset_text(west) == "2018-06-20 15:13:16.000000000 -03:30"
    zoned = column_type(ColumnFacts("at", "datetimeoffset"), SqlServerHandling())
    assert zoned is not None
    with pytest.raises(ValueError):  # that change is quarantined; the fetch goes on
        zoned.convert(datetimeoffset_text(b"\x01\x02"))
    with pytest.raises(dbapi.ProgrammingError, match=r"ODBC SQL type 0 is not yet supported"):
        conn.cursor().execute("SELECT [variant] FROM [dbo].[odd]").fetchone()


def test_snapshot_and_stream_map_what_debezium_maps(
    model: SqlServerModel, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lake = tmp_path / "lake"
    with caplog.at_level(logging.WARNING):
        land(raw(model), lake)
    assert any(
        "variant" in r.getMessage() and "sql_variant" in r.getMessage() for r in caplog.records
    )
    with model.transaction(DB) as tx:
        tx.insert(
            "dbo",
            "odd",
            {
                "id": 2,
                **ROW,
                "at": dt.datetime(
                    2018, 6, 20, 8, 13, 16, 945104, tzinfo=dt.timezone(dt.timedelta(hours=-5))
                ),
            },
        )
    land(raw(model), lake)
    (read_op, read), (created_op, created) = _after_images(lake)
    assert (read_op, created_op) == ("r", "c")
    # the UTC instant to the 100 ns; an aware value of µs as java.time prints it
    assert read == {
        "id": 1,
        "at": "2018-06-20T13:13:16.945104100Z",
        "node": base64.b64encode(NODE).decode(),
    }
    assert created == {**read, "id": 2, "at": "2018-06-20T13:13:16.945104Z"}
