"""Oracle changes through silver: LOB placeholders keep the stored value, and a column added
by DDL in the middle of the stream evolves the silver table with the right values on both
sides of the DDL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.integration.test_oracle_capture import Corner, _person, corner
from tests.oraclemodel.database import Column

pytestmark = [pytest.mark.spark, pytest.mark.delta]

__all__ = ["corner"]  # the fixture, shared with the capture tests

LOBS = {"lob.enabled": True}


def _silver(spark: Any, lake: Path, collection: str) -> dict[int, dict[str, Any]]:
    frame = spark.read.format("delta").load(
        str(lake / "silver" / silver_table_name("ora", collection))
    )
    live = frame.where(f"NOT {DELETED}").collect()
    return {row["ID"]: {k: row[k] for k in row.asDict() if not k.startswith("_")} for row in live}


def test_lob_placeholders_and_an_added_column_through_silver(spark: Any, corner: Corner) -> None:
    with corner.edit() as model:
        model.create_table(
            "DEBEZIUM",
            "DOCS",
            [
                Column("ID", "NUMBER", 9, 0, nullable=False),
                Column("TITLE", "VARCHAR2"),
                Column("BODY", "CLOB"),
                Column("DATA", "BLOB"),
            ],
            ["ID"],
        )
        xid = model.begin()
        model.insert(
            xid, "DEBEZIUM", "DOCS", {"ID": 1, "TITLE": "a", "BODY": "x" * 50, "DATA": b"\1\2"}
        )
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", _person(1))
        model.commit(xid)
    corner.land(corner.source(**LOBS))  # the snapshot
    with corner.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "DOCS", {"ID": 2, "TITLE": "b", "BODY": "long " * 30})
        model.commit(xid)
    corner.land(corner.source(**LOBS))
    job = SilverJob(spark, corner.lake)
    assert job.run_once().quarantined == 0  # silver now holds the LOB values
    with corner.edit() as model:
        xid = model.begin()
        # the LOBs are not in the redo of these updates: placeholders, silver keeps its values
        model.update(xid, "DEBEZIUM", "DOCS", {"ID": 1}, {"TITLE": "a2"})
        model.update(xid, "DEBEZIUM", "DOCS", {"ID": 2}, {"TITLE": "b2", "DATA": b"\3"})
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", _person(2))
        model.commit(xid)
        model.add_column("DEBEZIUM", "CUSTOMERS", Column("PHONE", "VARCHAR2"))
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", {**_person(3), "PHONE": "555-0103"})
        model.update(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 1}, {"PHONE": "555-0101"})
        model.commit(xid)
        docs = {r["ID"]: r for r in model.committed_rows("DEBEZIUM", "DOCS")}
        customers = {r["ID"]: r for r in model.committed_rows("DEBEZIUM", "CUSTOMERS")}
    corner.land(corner.source(**LOBS))
    assert job.run_once().quarantined == 0
    silver_docs = _silver(spark, corner.lake, "DEBEZIUM.DOCS")
    assert silver_docs == {
        n: {**row, "DATA": None if row["DATA"] is None else bytearray(row["DATA"])}
        for n, row in docs.items()
    }
    assert silver_docs[1]["BODY"] == "x" * 50 and silver_docs[2]["DATA"] == b"\3"
    silver_customers = _silver(spark, corner.lake, "DEBEZIUM.CUSTOMERS")
    assert silver_customers == customers
    assert silver_customers[2]["PHONE"] is None  # written before the column existed
    assert silver_customers[1]["PHONE"] == "555-0101"
