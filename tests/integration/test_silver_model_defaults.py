"""Column defaults (contract C4) through silver for SQL Server, Oracle and Db2, on the models
that follow the vendors' documents: rows that existed before ``ALTER TABLE ... ADD ... NOT NULL
DEFAULT`` show the default in silver as in the source (``capture/sql_defaults.py`` gives the
field schemas their ``default``; silver fills the older rows with it)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from capture.db2.settings import DBAPI_ENV as DB2_DBAPI_ENV
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.contract.harness import land
from tests.db2model.server import Column as Db2Column
from tests.db2model.server import Db2Model
from tests.integration import test_db2_capture as db2_capture
from tests.integration import test_oracle_capture as oracle_capture
from tests.integration import test_sqlserver_capture as mssql
from tests.integration.test_oracle_capture import Corner
from tests.mssqlmodel.server import Column, SqlServerModel
from tests.oraclemodel.database import Column as OraColumn

pytestmark = [pytest.mark.spark, pytest.mark.delta]

__all__ = ["corner", "db2", "model"]
model = mssql.model  # the fixtures, re-used
corner = oracle_capture.corner


@pytest.fixture
def db2(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Db2Model:
    """A modelled Db2 instance with ``TESTDB`` (ASN control tables), nothing in capture."""
    monkeypatch.setenv(DB2_DBAPI_ENV, "tests.db2model.dbapi")
    made = Db2Model(tmp_path / "db2")
    made.create_database(db2_capture.DB)
    return made


def _silver(spark: Any, lake: Path, source: str, collection: str) -> dict[Any, dict[str, Any]]:
    path = lake / "silver" / silver_table_name(source, collection)
    frame = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
    return {
        r["id"] if "id" in r else r["ID"]: {k: v for k, v in r.asDict().items() if k[0] != "_"}
        for r in frame.collect()
    }


def _sqlserver(model: SqlServerModel, lake: Path) -> dict[Any, dict[str, Any]]:
    db = mssql.DB
    model.create_table(
        db, "dbo", "orders", [Column("id", "int", False, True), Column("qty", "int")]
    )
    model.enable_table(db, "dbo", "orders")
    with model.transaction(db) as tx:
        for i in (1, 2, 3):
            tx.insert("dbo", "orders", {"id": i, "qty": i})
    land(mssql.raw(model), lake)
    # ADD ... NOT NULL DEFAULT fills the rows that exist (the change tables record nothing); a
    # nullable one without WITH VALUES leaves them NULL; a new capture instance carries both.
    model.add_column(db, "dbo", "orders", Column("channel", "nvarchar(10)", False, default="'web'"))
    model.add_column(db, "dbo", "orders", Column("price", "decimal(6,2)", False, default="9.5"))
    model.add_column(db, "dbo", "orders", Column("note", "nvarchar(10)", default="'x'"))
    model.enable_table(db, "dbo", "orders", "dbo_orders_v2")
    with model.transaction(db) as tx:
        tx.update("dbo", "orders", 2, {"qty": 20, "channel": "shop"})
        tx.insert("dbo", "orders", {"id": 4, "qty": 4, "channel": "app", "price": Decimal("1")})
    land(mssql.raw(model), lake)
    truth = model.truth(db, "dbo", "orders")
    assert truth[1] == {"id": 1, "qty": 1, "channel": "web", "price": Decimal("9.50"), "note": None}
    return truth


def _oracle(corner: Corner) -> dict[Any, dict[str, Any]]:
    with corner.edit() as model:
        model.create_table(
            "DEBEZIUM",
            "ORDERS",
            [OraColumn("ID", "NUMBER", 9, 0, nullable=False), OraColumn("QTY", "NUMBER", 9, 0)],
            ["ID"],
        )
        xid = model.begin(1)
        for i in (1, 2):
            model.insert(xid, "DEBEZIUM", "ORDERS", {"ID": i, "QTY": i})
        model.commit(xid)
    corner.land()
    # Oracle puts the default into every existing row (nullable too), with no redo for them.
    with corner.edit() as model:
        model.add_column("DEBEZIUM", "ORDERS", OraColumn("CHANNEL", "VARCHAR2", default="'web'"))
        model.add_column("DEBEZIUM", "ORDERS", OraColumn("PRICE", "NUMBER", 6, 2, False, "9.5"))
        xid = model.begin(1)
        model.update(xid, "DEBEZIUM", "ORDERS", {"ID": 2}, {"QTY": 20})
        model.insert(xid, "DEBEZIUM", "ORDERS", {"ID": 3, "QTY": 3, "CHANNEL": "app", "PRICE": 1})
        model.commit(xid)
        truth = {r["ID"]: r for r in model.committed_rows("DEBEZIUM", "ORDERS")}
    corner.land()
    return truth


def _db2(db2: Db2Model, lake: Path) -> dict[Any, dict[str, Any]]:
    d = db2_capture.DB
    db2_capture.in_capture(
        db2,
        d,
        {"ORDERS": [Db2Column("ID", "INTEGER", False, True), Db2Column("QTY", "INTEGER")]},
        "DB2INST1",
    )
    with db2.transaction(d) as tx:
        for i in (1, 2):
            tx.insert("DB2INST1", "ORDERS", {"ID": i, "QTY": i})
    land(db2_capture.raw(db2), lake)
    # Db2 gives every existing row the default (nullable too); capture follows once the table
    # is removed and added again (the guide's online schema update).
    db2.add_column(d, "DB2INST1", "ORDERS", Db2Column("CHANNEL", "VARCHAR(10)", default="'web'"))
    db2.add_column(
        d, "DB2INST1", "ORDERS", Db2Column("PRICE", "DECIMAL(6,2)", False, default="9.5")
    )
    db2.remove_table(d, "DB2INST1", "ORDERS")
    db2.add_table(d, "DB2INST1", "ORDERS")
    db2.asncdc_services(d, "reinit")
    with db2.transaction(d) as tx:
        tx.update("DB2INST1", "ORDERS", 2, {"QTY": 20})
        tx.insert("DB2INST1", "ORDERS", {"ID": 3, "QTY": 3, "CHANNEL": "app", "PRICE": Decimal(1)})
    land(db2_capture.raw(db2), lake)
    truth = db2.truth(d, "DB2INST1", "ORDERS")
    assert truth[1] == {"ID": 1, "QTY": 1, "CHANNEL": "web", "PRICE": Decimal("9.50")}
    return truth


def test_added_column_defaults_fill_older_rows_on_every_model(
    spark: Any, model: SqlServerModel, corner: Corner, db2: Db2Model
) -> None:
    # Three sources in one lake, one silver run (the costly part): each table meets its
    # schema without the column and the one with it in the same batch.
    lake = corner.lake
    expected = {
        ("mssql", "dbo.orders"): _sqlserver(model, lake),
        ("ora", "DEBEZIUM.ORDERS"): _oracle(corner),
        ("db2", "DB2INST1.ORDERS"): _db2(db2, lake),
    }
    SilverJob(spark, lake).run_once()
    for (source, collection), truth in expected.items():
        got = _silver(spark, lake, source, collection)
        assert set(got) == set(truth), collection
        for key, row in got.items():  # == on values: the models' ints are the source's NUMBERs
            assert row == truth[key] and row.keys() == truth[key].keys(), (collection, key)
