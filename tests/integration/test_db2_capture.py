"""The Db2 agent on the ASN capture model (tests/db2model): the guide's Db2 examples, the type
mappings, case-sensitive names, adding a table, the snapshot's locks, errors, reconciliation.

The contract suite (tests/contract, driver tests/contract/drivers/db2.py) checks the common
guarantees, silver equal to the model's ground truth among them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from deltalake import DeltaTable
from pydantic import TypeAdapter

from bronze import schema as S
from capture.db2.settings import DBAPI_ENV
from capture.errors_db2 import DB2
from capture.registry import create_source
from capture.server_errors import SourceRefused
from pipeline.config import SourceConfig
from pipeline.errors import Retryable, SourceUnavailable, StageFailed, Terminal
from tests.contract.harness import land
from tests.db2model import dbapi
from tests.db2model.server import Column, Db2Model, LockTimeout, ModelTx
from tests.integration.test_sqlserver_capture import row_fields

DB = "TESTDB"
CUSTOMERS = [
    Column("ID", "INTEGER", False, True),
    Column("FIRST_NAME", "VARCHAR(255)", False),
    Column("LAST_NAME", "VARCHAR(255)", False),
    Column("EMAIL", "VARCHAR(255)", False),
]


CONFIG = {
    "name": "db2",
    "connector": "db2",
    "topic.prefix": "db2server",
    "database.user": "db2inst1",
    "database.dbname": DB,
}


def in_capture(model: Db2Model, db: str, tables: dict[str, list[Column]], schema: str) -> None:
    """Create ``tables``, put each in capture mode (``ADDTABLE``) and reinitialise capture."""
    for table, columns in tables.items():
        model.create_table(db, schema, table, columns)
        model.add_table(db, schema, table)
    model.asncdc_services(db, "reinit")


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Db2Model:
    """An instance with ``TESTDB`` (ASN control tables) and ``DB2INST1.CUSTOMERS`` in capture."""
    monkeypatch.setenv(DBAPI_ENV, "tests.db2model.dbapi")
    made = Db2Model(tmp_path / "db2")
    made.create_database(DB)
    in_capture(made, DB, {"CUSTOMERS": CUSTOMERS}, "DB2INST1")
    return made


def raw(model: Db2Model, **extra: Any) -> dict[str, Any]:
    """A ``db2`` source on the model."""
    return {**CONFIG, "database.hostname": str(model.root), **extra}


def _parsed(text: str | None) -> Any:
    return None if text is None else orjson.loads(text)


def events(lake: Path) -> list[dict[str, Any]]:
    """Bronze rows in position order, with ``key`` and ``value`` parsed."""
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    return [
        {**row, "key": _parsed(row[S.KEY_JSON]), "value": _parsed(row[S.VALUE_JSON])}
        for row in sorted(table.to_pylist(), key=lambda r: bytes(r[S.POSITION]))
    ]


def data(lake: Path) -> list[dict[str, Any]]:
    """The values of the data events."""
    return [row["value"] for row in events(lake) if row[S.KIND] == "data"]


def john(email: str = "john.doe@example.org") -> dict[str, Any]:
    return {"ID": 1005, "FIRST_NAME": "john", "LAST_NAME": "doe", "EMAIL": email}


def lsn(text: str) -> int:
    return int(text.replace(":", ""), 16)


def test_the_guide_examples_create_update_delete(model: Db2Model, tmp_path: Path) -> None:
    # The guide's examples print 10-byte LSNs: a database whose ASN tables hold that width.
    model.create_database("mydatabase", width=10, log_start=lsn("00000027:00000700:0000"))
    in_capture(model, "mydatabase", {"CUSTOMERS": CUSTOMERS}, "MYSCHEMA")
    config = raw(model, **{"topic.prefix": "mydatabase", "database.dbname": "mydatabase"})
    lake = tmp_path / "lake"
    land(config, lake)  # an empty snapshot: streaming starts
    steps = (
        ("00000027:00000758:0003", "00000027:00000758:0005"),
        ("00000027:00000ac0:0002", "00000027:00000ac0:0007"),
        ("00000027:00000db0:0005", "00000027:00000db0:0007"),
    )
    with model.transaction("mydatabase", ([lsn(steps[0][0])], lsn(steps[0][1]))) as tx:
        tx.insert("MYSCHEMA", "CUSTOMERS", john())
    with model.transaction("mydatabase", ([lsn(steps[1][0])], lsn(steps[1][1]))) as tx:
        tx.update("MYSCHEMA", "CUSTOMERS", 1005, {"EMAIL": "noreply@example.org"})
    with model.transaction("mydatabase", ([lsn(steps[2][0])], lsn(steps[2][1]))) as tx:
        tx.delete("MYSCHEMA", "CUSTOMERS", 1005)
    land(config, lake)
    rows = [r for r in events(lake) if r[S.KIND] in ("data", "tombstone")]
    assert {r[S.TOPIC] for r in rows} == {"mydatabase.MYSCHEMA.CUSTOMERS"}
    created, updated, deleted = (r["value"] for r in rows[:3])
    fields = ("connector", "db", "schema", "table", "change_lsn", "commit_lsn")
    for value, (change, commit) in zip((created, updated, deleted), steps, strict=True):
        assert {k: value["source"][k] for k in fields} == {
            "connector": "db2",
            "db": "mydatabase",
            "schema": "MYSCHEMA",
            "table": "CUSTOMERS",
            "change_lsn": change,
            "commit_lsn": commit,
        }
        assert "event_serial_no" not in value["source"]  # the Db2 source block has none
    assert (created["op"], created["before"], created["after"]) == ("c", None, john())
    assert (updated["op"], updated["before"]) == ("u", john())
    assert updated["after"] == john("noreply@example.org")
    assert (deleted["op"], deleted["before"]) == ("d", john("noreply@example.org"))
    assert deleted["after"] is None
    assert rows[3]["value"] is None and rows[3]["key"] == {"ID": 1005}  # the tombstone
    names = DeltaTable(str(lake / "bronze" / "schemas")).to_pyarrow_table().to_pylist()
    assert {"mydatabase.MYSCHEMA.CUSTOMERS.Envelope", "mydatabase.MYSCHEMA.CUSTOMERS.Key"} <= {
        r[S.SCHEMA_NAME] for r in names
    }


def test_the_guide_transaction_metadata_example(model: Db2Model, tmp_path: Path) -> None:
    model.create_database("testDB", width=10, log_start=lsn("00000025:00000d00:0000"))
    columns = [Column("pk", "VARCHAR(10)", False, True), Column("aa", "VARCHAR(10)")]
    in_capture(model, "testDB", {"tablea": columns, "tableb": columns}, "dbo")
    config = raw(model, **{"database.dbname": "testDB", "provide.transaction.metadata": True})
    lake = tmp_path / "lake"
    land(config, lake)
    at = (
        [lsn("00000025:00000d08:0010"), lsn("00000025:00000d08:0011")],
        lsn("00000025:00000d08:0025"),
    )
    with model.transaction("testDB", at) as tx:
        tx.insert("dbo", "tablea", {"pk": "2", "aa": "1"})
        tx.insert("dbo", "tableb", {"pk": "3", "aa": "1"})
    land(config, lake)
    rows = [r for r in events(lake) if r[S.KIND] in ("data", "transaction")]
    begin, first, second, end = (r["value"] for r in rows)
    assert begin["status"] == "BEGIN" and begin["id"] == "00000025:00000d08:0025"
    assert begin["event_count"] is None and begin["data_collections"] is None
    assert first["after"] == {"pk": "2", "aa": "1"}
    assert first["transaction"] == {
        "id": "00000025:00000d08:0025",
        "total_order": 1,
        "data_collection_order": 1,
    }
    assert second["transaction"]["total_order"] == 2
    assert end["status"] == "END" and end["event_count"] == 2
    assert end["data_collections"] == [
        {"data_collection": "dbo.tablea", "event_count": 1},
        {"data_collection": "dbo.tableb", "event_count": 1},
    ]


def test_a_table_added_by_the_documented_procedure(model: Db2Model, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    land(raw(model), lake)
    orders = [Column("ID", "INTEGER", False, True), Column("QTY", "INTEGER")]
    model.create_table(DB, "DB2INST1", "ORDERS", orders)
    with model.transaction(DB) as tx:  # before capture mode: not captured (no snapshot either)
        tx.insert("DB2INST1", "ORDERS", {"ID": 1, "QTY": 1})
    model.add_table(DB, "DB2INST1", "ORDERS")  # CALL ASNCDC.ADDTABLE('DB2INST1', 'ORDERS')
    with model.transaction(DB) as tx:  # registered, but capture not reinitialised yet
        tx.insert("DB2INST1", "ORDERS", {"ID": 2, "QTY": 2})
    model.asncdc_services(DB, "reinit")  # VALUES ASNCDC.ASNCDCSERVICES('reinit','asncdc')
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "ORDERS", {"ID": 3, "QTY": 3})
        tx.insert("DB2INST1", "CUSTOMERS", john())
    land(raw(model), lake)
    rows = events(lake)
    schema = next(
        r
        for r in rows
        if r[S.KIND] == "schema_change" and r["value"]["source"]["table"] == "ORDERS"
    )
    assert schema["key"] == {"databaseName": "TESTDB"}
    value = schema["value"]
    assert (value["databaseName"], value["schemaName"], value["ddl"]) == (
        "TESTDB",
        "DB2INST1",
        None,
    )
    (change,) = value["tableChanges"]
    assert change["type"] == "CREATE" and change["id"] == '"DB2INST1"."ORDERS"'
    assert change["table"]["primaryKeyColumnNames"] == ["ID"]
    assert [c["name"] for c in change["table"]["columns"]] == ["ID", "QTY"]
    assert value["source"]["commit_lsn"] is not None and value["source"]["change_lsn"] is None
    after = [(r[S.COLLECTION], r["value"]["after"]) for r in rows if r[S.KIND] == "data"]
    assert after == [("DB2INST1.ORDERS", {"ID": 3, "QTY": 3}), ("DB2INST1.CUSTOMERS", john())]
    assert rows.index(schema) < [r[S.KIND] for r in rows].index("data")


def test_the_guide_schema_change_example(model: Db2Model, tmp_path: Path) -> None:
    model.create_database("testdb", width=10, log_start=lsn("00000025:00000d00:0000"))
    in_capture(model, "testdb", {"CUSTOMERS": CUSTOMERS}, "DB2INST1")
    at = ([lsn("00000025:00000d98:00a0")], lsn("00000025:00000d98:00a2"))
    with model.transaction("testdb", at) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    land(raw(model, **{"database.dbname": "testdb", "topic.prefix": "db2"}), tmp_path / "lake")
    read, schema = (r for r in events(tmp_path / "lake") if r[S.KIND] != "heartbeat")
    assert read["value"]["op"] == "r"
    assert schema[S.KIND] == "schema_change" and schema["key"] == {"databaseName": "TESTDB"}
    value = schema["value"]
    fields = ("connector", "name", "snapshot", "db", "schema", "table", "change_lsn", "commit_lsn")
    assert {k: value["source"][k] for k in fields} == {
        "connector": "db2",
        "name": "db2",
        "snapshot": "true",
        "db": "testdb",
        "schema": "DB2INST1",
        "table": "CUSTOMERS",
        "change_lsn": None,
        "commit_lsn": "00000025:00000d98:00a2",
    }
    assert (value["databaseName"], value["schemaName"], value["ddl"]) == (
        "TESTDB",
        "DB2INST1",
        None,
    )
    (change,) = value["tableChanges"]
    assert (change["type"], change["id"]) == ("CREATE", '"DB2INST1"."CUSTOMERS"')
    table = change["table"]
    assert table["defaultCharsetName"] is None and table["primaryKeyColumnNames"] == ["ID"]
    assert [(c["name"], c["position"], c["optional"]) for c in table["columns"]] == [
        ("ID", 1, False),
        ("FIRST_NAME", 2, False),
        ("LAST_NAME", 3, False),
        ("EMAIL", 4, False),
    ]


def test_the_snapshot_rows_carry_the_snapshot_lsn(model: Db2Model, tmp_path: Path) -> None:
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    (point,) = (
        model.open(DB)
        .execute("SELECT SYNCHPOINT FROM [ASNCDC.IBMSNAP_REGISTER] WHERE GLOBAL_RECORD = 'Y'")
        .fetchone()
    )
    land(raw(model), tmp_path / "lake")
    (read,) = data(tmp_path / "lake")
    assert read["op"] == "r" and read["after"] == john() and read["source"]["snapshot"] == "last"
    hexed = bytes(point).hex()
    assert read["source"]["change_lsn"] == f"{hexed[:8]}:{hexed[8:16]}:{hexed[16:]}"
    assert read["source"]["commit_lsn"] is None  # omitted on snapshot rows (the guide)


def test_names_are_case_sensitive(model: Db2Model, tmp_path: Path) -> None:
    tables = {
        name: [Column(key, "INTEGER", False, True)]
        for name, key in (("Orders", "id"), ("ORDERS", "ID"))
    }
    in_capture(model, DB, tables, "DB2INST1")
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "Orders", {"id": 1})
        tx.insert("DB2INST1", "ORDERS", {"ID": 2})
    config = raw(model, **{"table.include.list": r"DB2INST1\.(Orders|ORDERS)"})
    land(config, tmp_path / "lake")
    rows = [r for r in events(tmp_path / "lake") if r[S.KIND] == "data"]
    assert sorted((r[S.COLLECTION], r["key"]) for r in rows) == [
        ("DB2INST1.ORDERS", {"ID": 2}),
        ("DB2INST1.Orders", {"id": 1}),
    ]


def test_types_per_the_guide(model: Db2Model, tmp_path: Path) -> None:
    columns = [
        Column("ID", "INTEGER", False, True),
        Column("B", "BOOLEAN"),
        Column("S", "SMALLINT"),
        Column("BI", "BIGINT"),
        Column("R", "REAL"),
        Column("D", "DOUBLE"),
        Column("DEC", "DECIMAL(10,2)"),
        Column("DF", "DECFLOAT(34)"),
        Column("C", "CHAR(5)"),
        Column("VC", "VARCHAR(20)"),
        Column("CL", "CLOB(1M)"),
        Column("X", "XML"),
        Column("VB", "VARCHAR(4) FOR BIT DATA"),
        Column("BL", "BLOB(1M)"),
        Column("DA", "DATE"),
        Column("T", "TIME"),
        Column("TS3", "TIMESTAMP(3)"),
        Column("TS6", "TIMESTAMP"),
        Column("TS9", "TIMESTAMP(9)"),
    ]
    in_capture(model, DB, {"TYPES": columns}, "DB2INST1")
    stamp = dt.datetime(2018, 6, 20, 15, 13, 16, 945104)
    row = {
        "ID": 1, "B": True, "S": -2, "BI": 2**40, "R": 1.5, "D": 0.1, "DEC": Decimal("12.30"),
        "DF": Decimal("1.250"), "C": "ab", "VC": "é", "CL": "long", "X": "<a/>",
        "VB": b"\x00\xff", "BL": b"blob", "DA": dt.date(2020, 1, 2),
        "T": dt.time(1, 2, 3), "TS3": stamp.replace(microsecond=945000), "TS6": stamp, "TS9": stamp,
    }  # fmt: skip
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "TYPES", row)
    land(raw(model), tmp_path / "lake")
    (value,) = [v for v in data(tmp_path / "lake") if v["source"]["table"] == "TYPES"]
    after = value["after"]
    assert after["B"] is True and after["S"] == -2 and after["BI"] == 2**40
    assert after["R"] == 1.5 and after["D"] == 0.1
    assert after["DEC"] == "BM4="  # 1230 unscaled, scale 2
    assert after["DF"] == {"scale": 3, "value": "BOI="}  # 1250, scale 3
    assert after["C"] == "ab   "  # CHAR(5) is blank-padded
    assert (after["VC"], after["CL"], after["X"]) == ("é", "long", "<a/>")
    assert (after["VB"], after["BL"]) == ("AP8=", "YmxvYg==")
    assert after["DA"] == 18263 and after["T"] == 3_723_000
    # the guide's example: 2018-06-20 15:13:16.945104 is MicroTimestamp 1529507596945104
    assert after["TS6"] == 1529507596945104
    assert after["TS3"] == 1529507596945 and after["TS9"] == 1529507596945104000
    schema = next(
        orjson.loads(r[S.SCHEMA_JSON])
        for r in DeltaTable(str(tmp_path / "lake" / "bronze" / "schemas"))
        .to_pyarrow_table()
        .to_pylist()
        if r[S.SCHEMA_NAME] == "db2server.DB2INST1.TYPES.Envelope"
    )
    after_fields = {f["field"]: f for f in schema["fields"][1]["fields"]}
    assert after_fields["TS6"]["name"] == "io.debezium.time.MicroTimestamp"
    assert after_fields["TS3"]["name"] == "io.debezium.time.Timestamp"
    assert after_fields["TS9"]["name"] == "io.debezium.time.NanoTimestamp"
    assert after_fields["DA"]["name"] == "io.debezium.time.Date"
    assert after_fields["T"]["name"] == "io.debezium.time.Time"
    assert after_fields["X"]["name"] == "io.debezium.data.Xml"
    assert after_fields["DEC"]["parameters"]["scale"] == "2"
    assert after_fields["S"]["type"] == "int16" and after_fields["R"]["type"] == "float32"


def test_column_defaults_reach_the_field_schemas(model: Db2Model, tmp_path: Path) -> None:
    """C4: constants of ``SYSCAT.COLUMNS.DEFAULT`` (of the source table: the CD table has
    none), converted as values are; a special register is the time of the ALTER."""
    columns = [
        Column("ID", "INTEGER", False, True),
        Column("QTY", "SMALLINT", False, default="0"),
        Column("PRICE", "DECIMAL(10,2)", default="9.50"),
        Column("LABEL", "VARCHAR(20)", default="'it''s'"),
        Column("BORN", "DATE", default="'2021-01-02'"),
        Column("AT", "TIMESTAMP", default="'2021-01-02-10.30.00.000000'"),
        Column("SEEN", "TIMESTAMP", False, default="CURRENT TIMESTAMP"),
        Column("PLAIN", "INTEGER"),
    ]
    in_capture(model, DB, {"DEFAULTS": columns}, "DB2INST1")
    row = {"ID": 1, "QTY": 1, "PRICE": None, "LABEL": None, "BORN": None, "AT": None}
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "DEFAULTS", {**row, "SEEN": dt.datetime(2020, 1, 1), "PLAIN": 1})
    land(raw(model), tmp_path / "lake")
    fields = row_fields(tmp_path / "lake", "DB2INST1.DEFAULTS")
    unreproducible = "medallion.default.unreproducible"
    assert {
        name: (f.get("default"), unreproducible in (f.get("parameters") or {}))
        for name, f in fields.items()
    } == {
        "ID": (None, False),
        "QTY": (0, False),
        "PRICE": ("A7Y=", False),  # 950 at scale 2
        "LABEL": ("it's", False),
        "BORN": (18629, False),  # epoch days, as the Oracle guide's TO_DATE example
        "AT": (1609583400000000, False),  # MicroTimestamp
        "SEEN": (None, True),
        "PLAIN": (None, False),
    }


def test_an_update_is_a_delete_and_an_insert_in_the_cd_table(model: Db2Model) -> None:
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    with model.transaction(DB) as tx:
        tx.update("DB2INST1", "CUSTOMERS", 1005, {"EMAIL": "x@example.org"})
    conn = dbapi.connect(f"DATABASE={DB};HOSTNAME={model.root};UID=u;PWD=p")
    from capture.db2.connection import changes_query

    rows = (
        conn.cursor()
        .execute(changes_query("ASNCDC", "CDC_DB2INST1_CUSTOMERS"), bytes(16), b"\xff" * 16)
        .fetchall()
    )
    assert [(r[0], r[3]) for r in rows] == [(2, "I"), (3, "D"), (4, "I")]
    assert rows[1][1] == rows[2][1] and rows[1][2] < rows[2][2]  # one unit of work, D first
    uow = (
        conn.cursor()
        .execute(
            "SELECT IBMSNAP_COMMITSEQ, IBMSNAP_LOGMARKER FROM ASNCDC.IBMSNAP_UOW WHERE "
            "IBMSNAP_COMMITSEQ > ? AND IBMSNAP_COMMITSEQ <= ? ORDER BY IBMSNAP_COMMITSEQ "
            "FETCH FIRST 500 ROWS ONLY",
            bytes(16),
            b"\xff" * 16,
        )
        .fetchall()
    )
    assert [u[0] for u in uow] == [rows[0][1], rows[1][1]]
    assert all(isinstance(u[1], dt.datetime) for u in uow)
    with pytest.raises(dbapi.ProgrammingError, match="SQL0104N"):
        conn.cursor().execute("SELECT * FROM ASNCDC.IBMSNAP_SIGNAL")
    conn.close()


def test_a_delete_and_an_insert_in_one_unit_of_work_land_as_both(
    model: Db2Model, tmp_path: Path
) -> None:
    # Debezium's query pairs a D with the next I of the unit of work as an update; with other
    # keys, that is the key-change form: the old key deleted (and tombstoned), the new created.
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    lake = tmp_path / "lake"
    land(raw(model), lake)
    with model.transaction(DB) as tx:
        tx.delete("DB2INST1", "CUSTOMERS", 1005)
        tx.insert("DB2INST1", "CUSTOMERS", {**john(), "ID": 7})
    land(raw(model), lake)
    stream = [r for r in events(lake) if r[S.SNAPSHOT] not in ("true", "last")]
    assert [(r[S.KIND], r["key"]) for r in stream] == [
        ("data", {"ID": 1005}),
        ("tombstone", {"ID": 1005}),
        ("data", {"ID": 7}),
    ]


@pytest.mark.parametrize("mode", ["exclusive", "repeatable_read"])
def test_a_locking_snapshot_blocks_writers_then_hands_over(
    model: Db2Model, tmp_path: Path, mode: str
) -> None:
    rows = [john(), {**john(), "ID": 1006}]
    with model.transaction(DB) as tx:
        for row in rows:
            tx.insert("DB2INST1", "CUSTOMERS", row)
    source = create_source(
        TypeAdapter(SourceConfig).validate_python(raw(model, **{"snapshot.isolation.mode": mode}))
    )
    source.open(None)
    sizes = []
    for limit in (1, 1, 10, 10):
        batch = source.read_batch(max_events=limit, max_transaction_events=10)
        sizes.append(len(batch.builder))
        if len(sizes) == 1:  # the snapshot's unit of work holds its locks
            with pytest.raises(LockTimeout, match="SQL0911N"), model.transaction(DB) as tx:
                tx.delete("DB2INST1", "CUSTOMERS", 1006)
        if len(sizes) == 2:  # its last row read: committed, the locks are gone
            with model.transaction(DB) as tx:
                tx.delete("DB2INST1", "CUSTOMERS", 1006)
    source.close()
    # two snapshot rows, then the table's schema change, the delete and its tombstone once
    assert sizes == [1, 1, 3, 0] and batch.exhausted


def test_stopped_capture_delays_changes_and_loses_none(model: Db2Model, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    land(raw(model), lake)
    model.asncdc_services(DB, "stop")
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    land(raw(model), lake)
    assert data(lake) == []
    model.asncdc_services(DB, "start")
    land(raw(model), lake)
    assert [v["after"] for v in data(lake)] == [john()]


def test_masks_column_filters_and_heartbeats(model: Db2Model, tmp_path: Path) -> None:
    config = raw(
        model,
        **{
            "column.mask.with.3.chars": r"DB2INST1\.CUSTOMERS\.EMAIL",
            "column.exclude.list": r"DB2INST1\.CUSTOMERS\.LAST_NAME",
            "heartbeat.interval.ms": 1,
        },
    )
    lake = tmp_path / "lake"
    changes: list[Callable[[ModelTx], None] | None] = [
        lambda tx: tx.insert("DB2INST1", "CUSTOMERS", john()),
        None,  # nothing new: no second heartbeat at the same point
        lambda tx: tx.delete("DB2INST1", "CUSTOMERS", 1005),
    ]
    seen: list[list[str]] = []
    for change in changes:
        if change is not None:
            with model.transaction(DB) as tx:
                change(tx)
        land(config, lake)
        seen.append([r[S.KIND] for r in events(lake)][sum(map(len, seen)) :])
    first = ["data", "schema_change", "heartbeat"]
    assert seen == [first, [], ["data", "tombstone", "heartbeat"]], seen
    masked = {"ID": 1005, "FIRST_NAME": "john", "EMAIL": "***"}
    assert [(v["op"], v["after"] or v["before"]) for v in data(lake)] == [
        ("r", masked),
        ("d", masked),
    ]


def test_errors_are_classified_with_the_fix(model: Db2Model, tmp_path: Path) -> None:
    with pytest.raises(StageFailed) as caught:
        land(raw(model, **{"database.password": "wrong"}), tmp_path / "a")
    refused = caught.value.__cause__
    assert isinstance(refused, SourceRefused) and isinstance(refused, Terminal)
    assert refused.code == "SQL30082N" and "wrong" not in str(refused)
    model.create_database("NOASN", asn=False)
    with pytest.raises(StageFailed) as caught:
        land(raw(model, **{"database.dbname": "NOASN"}), tmp_path / "b")
    refused = caught.value.__cause__
    assert isinstance(refused, SourceRefused) and refused.code == "SQL0204N"
    assert "asncdctables.sql" in str(refused) and "ADDTABLE" in str(refused)
    model.set_down(True)
    with pytest.raises(StageFailed) as caught:
        land(raw(model, **{"errors.max.retries": 0}), tmp_path / "c")
    down = caught.value.__cause__
    assert isinstance(down, SourceUnavailable) and isinstance(down, Retryable)
    assert "SQL30081N" in str(down)


@pytest.mark.parametrize(
    ("args", "code", "terminal"),
    [
        (("08001", "[IBM][CLI Driver] SQL1013N  The database alias name or database name "
          '"X" could not be found.  SQLSTATE=42705'), "SQL1013N", True),
        (("42501", "[IBM][CLI Driver][DB2/LINUXX8664] SQL0551N  The statement failed "
          "because the authorization ID does not have the required authorization or "
          "privilege.  SQLSTATE=42501"), "SQL0551N", True),
        (("40001", "[IBM][CLI Driver][DB2/LINUXX8664] SQL0911N  The current transaction "
          'has been rolled back because of a deadlock or timeout.  Reason code "2".  '
          "SQLSTATE=40001"), "SQL0911N", False),
        (("HY000", "[IBM][CLI Driver] SQL9999N  Something new.  SQLSTATE=57011"), "57011", False),
        (("28000", "no message id"), "28000", True),
    ],
)  # fmt: skip
def test_the_error_table(args: tuple[str, str], code: str, terminal: bool) -> None:
    err = DB2.classify(
        "db2", dbapi.DatabaseError(*args), "run a statement", unknown_retryable=False
    )
    assert err.code == code
    assert isinstance(err, Terminal) is terminal and isinstance(err, Retryable) is not terminal


def test_reconciliation_reads_and_the_log_after_a_cut(model: Db2Model, tmp_path: Path) -> None:
    from capture.current_state import CurrentStateReader
    from gold.source_read import Canon, reader_for

    lake = tmp_path / "lake"
    config = raw(model, **{"column.mask.with.3.chars": r"DB2INST1\.CUSTOMERS\.EMAIL"})
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    land(config, lake)
    cut = max(r[S.POSITION] for r in events(lake))
    source = create_source(TypeAdapter(SourceConfig).validate_python(config))
    assert isinstance(source, CurrentStateReader)
    items = list(source.read_current())
    assert [(t.collection, rows) for _, t, rows in items] == [
        ("DB2INST1.CUSTOMERS", []),
        ("DB2INST1.CUSTOMERS", [{**john(), "EMAIL": "***"}]),  # converted and masked as landed
    ]
    assert source.changes_after(cut, items[0][0]).ahead is False
    with model.transaction(DB) as tx:
        tx.delete("DB2INST1", "CUSTOMERS", 1005)
    later = list(source.read_current())[0][0]
    check = source.changes_after(cut, later)
    assert check.ahead is True and "committed after the cut" in check.reason
    # the independent read: its own connection and conversion, no agent decoder
    reader = reader_for("db2")
    assert reader is not None
    validated = TypeAdapter(SourceConfig).validate_python(config)
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    (table,) = reader(validated, ["DB2INST1.CUSTOMERS"], tmp_path, fetch=10).values()
    assert [c.canon for c in table.columns] == [Canon.INTEGER, Canon.TEXT, Canon.TEXT, Canon.TEXT]
    assert table.keys == ("ID",) and table.rows == 1
    assert orjson.loads(Path(table.path).read_bytes()) == {
        "c0": "1005", "c1": "john", "c2": "doe", "c3": "john.doe@example.org"
    }  # fmt: skip


if __import__("os").environ.get(
    "MEDALLION_TEST_DB2_DSN"
):  # defined only when named: fails, never skips

    def test_a_live_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        import os

        monkeypatch.delenv(DBAPI_ENV, raising=False)
        host, port, user, password, database = os.environ["MEDALLION_TEST_DB2_DSN"].split(",")
        live = {
            "name": "live",
            "connector": "db2",
            "topic.prefix": "live",
            "database.hostname": host,
            "database.port": int(port),
            "database.user": user,
            "database.password": password,
            "database.dbname": database,
            "snapshot.mode": "schema_only",
            "heartbeat.interval.ms": 1,
        }
        # Set and unreachable: the retries end in SourceUnavailable, and the test fails.
        # Reachable: CURRENT SERVER, the ASN maximum LSN, registrations, a window, a heartbeat.
        assert land(live, tmp_path / "lake").landed >= 1


def test_an_unregistered_odbc_driver_says_what_to_install() -> None:
    from pydantic import SecretStr

    from capture.db2.connection import Db2Session
    from capture.db2.settings import Db2Settings
    from pipeline.errors import NotInstalledError

    # the real pyodbc (installed with the sqlserver extra), a driver name unixODBC cannot know
    settings = Db2Settings(
        "127.0.0.1", 50000, "u", DB, SecretStr("pw"), odbc_driver="medallion no such driver"
    )
    with pytest.raises(NotInstalledError, match="Data Server Driver") as caught:
        Db2Session(settings, "db2")
    assert isinstance(caught.value, Terminal) and "pw" not in str(caught.value)


def test_a_change_without_its_uow_row_is_landed_not_dropped(
    model: Db2Model, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lake = tmp_path / "lake"
    land(raw(model), lake)
    with model.transaction(DB) as tx:
        tx.insert("DB2INST1", "CUSTOMERS", john())
    conn = model.open(DB)
    conn.execute("DELETE FROM [ASNCDC.IBMSNAP_UOW]")  # as if pruned, or never written
    conn.close()
    land(raw(model), lake)
    assert [(v["op"], v["after"]) for v in data(lake)] == [("c", john())]
    assert "IBMSNAP_UOW has no row" in caplog.text


def test_the_guide_configuration_example() -> None:
    from pydantic import ValidationError

    from capture.db2.settings import Db2Settings

    example = {
        "name": "inventory",  # medallion's source names are identifiers
        "connector": "db2",
        "database.hostname": "192.168.99.100",
        "database.port": 50000,
        "database.user": "db2inst1",
        "database.password": "Password!",
        "database.dbname": "mydatabase",
        "database.server.name": "fullfillment",
    }
    settings = Db2Settings.from_config(TypeAdapter(SourceConfig).validate_python(example))
    assert (settings.host, settings.port, settings.database) == (
        "192.168.99.100",
        50000,
        "mydatabase",
    )
    assert settings.server_name == "fullfillment" and "Password!" not in repr(settings)
    # the example's "database.whitelist: public.inventory" is a MySQL key (a copy in the guide):
    # a Db2 source selects schema.table names
    with pytest.raises(ValidationError, match="did you mean 'table.whitelist'"):
        TypeAdapter(SourceConfig).validate_python(
            {**example, "database.whitelist": "public.inventory"}
        )
