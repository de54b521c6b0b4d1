"""Column defaults (contract C4) through silver for SQL Server, Oracle and Db2, on the models
that follow the vendors' documents: rows that existed before ``ALTER TABLE ... ADD ... NOT NULL
DEFAULT`` show the default in silver as in the source (``capture/sql_defaults.py`` gives the
field schemas their ``default``; silver fills the older rows with it)."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.contract.harness import land
from tests.integration import test_sqlserver_capture as mssql
from tests.mssqlmodel.server import Column, SqlServerModel

pytestmark = [pytest.mark.spark, pytest.mark.delta]

__all__ = ["model"]
model = mssql.model  # the fixture, re-used


def _silver(spark: Any, lake: Path, source: str, collection: str) -> dict[Any, dict[str, Any]]:
    path = lake / "silver" / silver_table_name(source, collection)
    frame = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
    return {
        r["id"] if "id" in r else r["ID"]: {k: v for k, v in r.asDict().items() if k[0] != "_"}
        for r in frame.collect()
    }


def test_sqlserver_added_column_default_fills_older_rows(
    spark: Any, model: SqlServerModel, tmp_path: Path
) -> None:
    db = mssql.DB
    model.create_table(
        db, "dbo", "orders", [Column("id", "int", False, True), Column("qty", "int")]
    )
    model.enable_table(db, "dbo", "orders")
    with model.transaction(db) as tx:
        for i in (1, 2, 3):
            tx.insert("dbo", "orders", {"id": i, "qty": i})
    lake = tmp_path / "lake"
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
    SilverJob(spark, lake).run_once()

    truth = model.truth(db, "dbo", "orders")
    assert truth[1] == {"id": 1, "qty": 1, "channel": "web", "price": Decimal("9.50"), "note": None}
    assert _silver(spark, lake, "mssql", "dbo.orders") == truth
