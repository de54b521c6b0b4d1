"""DDL mined from the redo (``OPERATION_CODE`` 5) against the Oracle LogMiner model: the column
list changes at the DDL's place in commit order, schema-change records land in bronze, and a
restart parses old changes with the columns they were written with (the schema history), not
the catalog's now."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from tests.contract.harness import quarantined
from tests.integration.test_oracle_capture import Corner, _person, corner
from tests.oraclemodel.database import Column

pytestmark = pytest.mark.delta

__all__ = ["corner"]  # the fixture, shared with the capture tests


def _schema_changes(corner: Corner) -> list[dict[str, Any]]:
    rows = DeltaTable(str(corner.lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    ordered = sorted(rows, key=lambda r: r[S.POSITION])
    return [orjson.loads(r[S.VALUE_JSON]) for r in ordered if r[S.KIND] == "schema_change"]


def test_ddl_changes_the_columns_in_commit_order_and_lands_schema_changes(
    corner: Corner,
) -> None:
    corner.land()  # the snapshot: the history holds CUSTOMERS as it is now
    with corner.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", _person(1))
        model.commit(xid)
        model.add_column("DEBEZIUM", "CUSTOMERS", Column("PHONE", "VARCHAR2"))
        xid = model.begin(thread=2)
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", {**_person(2), "PHONE": "555"})
        model.update(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 1}, {"PHONE": "556"})
        model.commit(xid)
        model.drop_column("DEBEZIUM", "CUSTOMERS", "EMAIL")
        model.create_table(
            "DEBEZIUM",
            "ORDERS",
            [Column("ID", "NUMBER", 9, 0, nullable=False), Column("AMOUNT", "NUMBER", 10, 2)],
            ["ID"],
        )
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 3, "FIRST_NAME": "F3", "PHONE": None})
        model.insert(xid, "DEBEZIUM", "ORDERS", {"ID": 1, "AMOUNT": None})
        model.commit(xid)
    # a new agent, after every DDL: the catalog has PHONE and no EMAIL, yet the first insert
    # was written with EMAIL and without PHONE
    corner.land()
    person = _person(1)
    assert [(r["op"], r["source"]["table"], r["after"]) for r in corner.records()] == [
        ("c", "CUSTOMERS", person),
        ("c", "CUSTOMERS", {**_person(2), "PHONE": "555"}),
        ("u", "CUSTOMERS", {**person, "PHONE": "556"}),
        ("c", "CUSTOMERS", {"ID": 3, "FIRST_NAME": "F3", "LAST_NAME": None, "PHONE": None}),
        ("c", "ORDERS", {"ID": 1, "AMOUNT": None}),
    ]
    assert quarantined(corner.lake) == []
    added, dropped, created = _schema_changes(corner)
    assert added["ddl"].startswith('ALTER TABLE "DEBEZIUM"."CUSTOMERS" ADD ("PHONE"')
    assert (added["databaseName"], added["schemaName"]) == ("ORCLPDB1", "DEBEZIUM")
    (change,) = added["tableChanges"]
    assert (change["type"], change["id"]) == ("ALTER", '"ORCLPDB1"."DEBEZIUM"."CUSTOMERS"')
    assert change["table"]["primaryKeyColumnNames"] == ["ID"]
    assert [c["name"] for c in change["table"]["columns"]] == [
        "ID",
        "FIRST_NAME",
        "LAST_NAME",
        "EMAIL",
        "PHONE",
    ]
    assert change["table"]["columns"][0] | {"position": 1} == {
        "name": "ID",
        "jdbcType": 2,
        "nativeType": None,
        "typeName": "NUMBER",
        "typeExpression": "NUMBER",
        "charsetName": None,
        "length": 9,
        "scale": 0,
        "position": 1,
        "optional": False,
        "autoIncremented": False,
        "generated": False,
    }
    assert dropped["ddl"] == 'alter table "DEBEZIUM"."CUSTOMERS" drop column "EMAIL"'
    assert "EMAIL" not in [c["name"] for c in dropped["tableChanges"][0]["table"]["columns"]]
    assert created["tableChanges"][0]["type"] == "CREATE"
    assert int(added["source"]["scn"]) < int(dropped["source"]["scn"])
    # a restart after the DDLs: the history's definitions at bronze's commit SCN
    with corner.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 4, "FIRST_NAME": "F4", "PHONE": "5"})
        model.commit(xid)
    corner.land(corner.source(**{"include.schema.changes": False}))
    assert corner.records()[-1]["after"] == {
        "ID": 4,
        "FIRST_NAME": "F4",
        "LAST_NAME": None,
        "PHONE": "5",
    }
    assert len(_schema_changes(corner)) == 3
