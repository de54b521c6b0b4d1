"""The SQL Server agent against the CDC model (:mod:`tests.mssqlmodel`): the seed document's
examples, capture-instance switching, several databases, Agent/CDC states, types, isolation.

The contract suite (``tests/contract``) covers exactly-once, resume, reconnect, quarantine and
silver for this connector; here are the cases only SQL Server has.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from capture.sqlserver.settings import DBAPI_ENV
from pipeline.errors import CaptureError, StageFailed
from tests.contract.harness import land
from tests.mssqlmodel.server import Column, LockTimeout, SqlServerModel

DB = "testDB"
CUSTOMERS = [
    Column("id", "int", False, True),
    Column("first_name", "varchar(255)", False),
    Column("last_name", "varchar(255)", False),
    Column("email", "varchar(255)", False),
]


def lsn(text: str) -> bytes:
    """``00000027:00000758:0003`` -> 10 bytes."""
    return bytes.fromhex(text.replace(":", ""))


@pytest.fixture
def model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqlServerModel:
    """A modelled server with ``testDB`` (CDC on) and ``dbo.customers`` captured."""
    monkeypatch.setenv(DBAPI_ENV, "tests.mssqlmodel.dbapi")
    made = SqlServerModel(tmp_path / "server")
    made.create_database(DB)
    made.create_table(DB, "dbo", "customers", CUSTOMERS)
    made.enable_table(DB, "dbo", "customers")
    return made


def raw(model: SqlServerModel, **extra: Any) -> dict[str, Any]:
    """A ``sqlserver`` source on the model."""
    return {
        "name": "mssql",
        "connector": "sqlserver",
        "topic.prefix": "server1",
        "database.hostname": str(model.root),
        "database.user": "sa",
        "database.names": DB,
        "snapshot.isolation.mode": "snapshot",
        **extra,
    }


def events(lake: Path) -> list[dict[str, Any]]:
    """Bronze rows in position order, values parsed."""
    rows = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    out = sorted(rows, key=lambda r: r[S.POSITION])
    for row in out:
        row["value"] = None if row[S.VALUE_JSON] is None else orjson.loads(row[S.VALUE_JSON])
    return out


def data(lake: Path) -> list[dict[str, Any]]:
    """The data events' values."""
    return [r["value"] for r in events(lake) if r[S.KIND] == "data" and r["value"]]


def john(email: str = "john.doe@example.org") -> dict[str, Any]:
    return {"id": 1005, "first_name": "john", "last_name": "doe", "email": email}


def test_the_seed_examples_create_update_delete(model: SqlServerModel, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    land(raw(model), lake)  # an empty snapshot: streaming starts
    at = ([lsn("00000027:00000758:0003")], lsn("00000027:00000758:0005"))
    with model.transaction(DB, at) as tx:
        tx.insert("dbo", "customers", john())
    at = ([lsn("00000027:00000ac0:0002")], lsn("00000027:00000ac0:0007"))
    with model.transaction(DB, at) as tx:
        tx.update("dbo", "customers", 1005, {"email": "noreply@example.org"})
    at = ([lsn("00000027:00000db0:0005")], lsn("00000027:00000db0:0007"))
    with model.transaction(DB, at) as tx:
        tx.delete("dbo", "customers", 1005)
    land(raw(model), lake)
    created, updated, deleted = data(lake)
    fields = ("connector", "name", "db", "schema", "table", "change_lsn", "commit_lsn")
    assert created["op"] == "c" and created["before"] is None and created["after"] == john()
    assert {k: created["source"][k] for k in fields} == {
        "connector": "sqlserver",
        "name": "server1",
        "db": "testDB",
        "schema": "dbo",
        "table": "customers",
        "change_lsn": "00000027:00000758:0003",
        "commit_lsn": "00000027:00000758:0005",
    }
    assert created["source"]["event_serial_no"] == 1
    assert updated["op"] == "u"
    assert (updated["before"], updated["after"]) == (john(), john("noreply@example.org"))
    assert updated["source"]["change_lsn"] == "00000027:00000ac0:0002"
    assert updated["source"]["commit_lsn"] == "00000027:00000ac0:0007"
    assert updated["source"]["event_serial_no"] == 2  # the 3/4 pair, the first one dropped
    assert deleted["op"] == "d" and deleted["after"] is None
    assert deleted["before"] == john("noreply@example.org")
    assert deleted["source"]["change_lsn"] == "00000027:00000db0:0005"
    assert deleted["source"]["commit_lsn"] == "00000027:00000db0:0007"
    assert deleted["source"]["event_serial_no"] == 1
    tombstone = events(lake)[-1]
    assert tombstone["value"] is None and orjson.loads(tombstone[S.KEY_JSON]) == {"id": 1005}


def test_the_seed_snapshot_event(model: SqlServerModel, tmp_path: Path) -> None:
    model.create_database("seedDB", log_start=lsn("00000025:00000d98:0000"))
    model.create_table("seedDB", "dbo", "customers", CUSTOMERS)
    model.enable_table("seedDB", "dbo", "customers")
    at = ([lsn("00000025:00000d98:00a0")], lsn("00000025:00000d98:00a2"))
    with model.transaction("seedDB", at) as tx:
        tx.insert("dbo", "customers", john())
    land(raw(model, **{"database.names": "seedDB"}), tmp_path / "lake")
    (read,) = data(tmp_path / "lake")
    assert read["op"] == "r" and read["after"] == john()
    # snapshot rows carry the max LSN read in the snapshot transaction, no change LSN/serial
    assert read["source"]["commit_lsn"] == "00000025:00000d98:00a2"
    assert read["source"]["change_lsn"] is None and read["source"]["event_serial_no"] is None
    assert read["source"]["snapshot"] == "last"


def test_a_primary_key_update_is_delete_tombstone_create(
    model: SqlServerModel, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    land(raw(model), lake)
    with model.transaction(DB) as tx:
        tx.update("dbo", "customers", 1005, {"id": 1006})
    land(raw(model), lake)
    rows = [r for r in events(lake) if r[S.SNAPSHOT] is not True and r[S.KIND] != "heartbeat"]
    stream = rows[-3:]
    assert [r["value"] and r["value"]["op"] for r in stream] == ["d", None, "c"]
    delete, _, create = (r["value"] for r in stream)
    # SQL Server logs the key update as delete + insert with one __$seqval: serials 1 and 2
    assert delete["source"]["change_lsn"] == create["source"]["change_lsn"]
    assert (delete["source"]["event_serial_no"], create["source"]["event_serial_no"]) == (1, 2)
    assert create["after"]["id"] == 1006


def test_change_rows_follow_the_documented_layout(model: SqlServerModel) -> None:
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
        tx.update("dbo", "customers", 1005, {"email": "noreply@example.org"})
    conn = model.open(DB)
    rows = conn.execute(
        "SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], [__$command_id] "
        "FROM [cdc.dbo_customers_CT] ORDER BY [__$seqval], [__$operation]"
    ).fetchall()
    (end,) = conn.execute("SELECT start_lsn FROM [cdc.lsn_time_mapping]").fetchone()
    conn.close()
    assert [r[2] for r in rows] == [2, 3, 4]
    assert {r[0] for r in rows} == {end}  # __$start_lsn is the commit LSN of the transaction
    assert rows[1][1] == rows[2][1] > rows[0][1]  # before/after share one __$seqval
    assert rows[0][3] == bytes([0b1111]) and rows[2][3] == bytes([0b1000])  # email = ordinal 4
    assert [r[4] for r in rows] == [1, 2, 2]


def test_all_changes_refuses_a_range_outside_the_instance(model: SqlServerModel) -> None:
    from tests.mssqlmodel import dbapi

    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    conn = dbapi.connect(f"SERVER={model.root};DATABASE={DB}")
    cur = conn.cursor()
    (high,) = cur.execute("SELECT sys.fn_cdc_get_max_lsn()").fetchall()[0]
    (low,) = cur.execute("SELECT sys.fn_cdc_get_min_lsn(?)", "dbo_customers").fetchall()[0]
    sql = "SELECT * FROM cdc.fn_cdc_get_all_changes_dbo_customers(?, ?, N'all update old')"
    assert len(cur.execute(sql, low, high).fetchall()) == 1
    with pytest.raises(dbapi.ProgrammingError, match="313"):
        cur.execute(sql, bytes(10), high)
    with pytest.raises(dbapi.ProgrammingError, match="model does not know"):
        cur.execute("SELECT * FROM cdc.fn_cdc_get_net_changes_dbo_customers(?, ?, N'all')")


def test_agent_not_running_is_a_clear_error(model: SqlServerModel, tmp_path: Path) -> None:
    model.set_agent(False)
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    with pytest.raises(StageFailed) as failed:
        land(raw(model), tmp_path / "lake")
    assert "SQL Server Agent is not running" in str(failed.value.__cause__)


def test_a_stopped_agent_delays_changes_and_loses_none(
    model: SqlServerModel, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    land(raw(model), lake)
    model.set_agent(False)
    with model.transaction(DB) as tx:
        tx.update("dbo", "customers", 1005, {"email": "late@example.org"})
    land(raw(model), lake)
    assert [v["op"] for v in data(lake)] == ["r"]  # still in the log, not in a change table
    model.set_agent(True)
    land(raw(model), lake)
    assert [v["op"] for v in data(lake)] == ["r", "u"]


def test_cdc_not_enabled_is_a_clear_error(model: SqlServerModel, tmp_path: Path) -> None:
    model.create_database("plainDB", cdc=False)
    with pytest.raises(StageFailed) as failed:
        land(raw(model, **{"database.names": "plainDB"}), tmp_path / "lake")
    assert isinstance(failed.value.__cause__, CaptureError)
    assert "change data capture is not enabled on database 'plainDB'" in str(failed.value)


def test_capture_instance_switch_on_schema_change(model: SqlServerModel, tmp_path: Path) -> None:
    # seed 003, "Database schema evolution": add a column, a second capture instance, then
    # drop the first one once the connector streams from the second.
    lake = tmp_path / "lake"
    land(raw(model), lake)
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    model.add_column(DB, "dbo", "customers", Column("phone_number", "varchar(32)"))
    with model.transaction(DB) as tx:  # still captured by dbo_customers, without the column
        tx.insert("dbo", "customers", {**john(), "id": 1006, "phone_number": "+1-555-000000"})
    model.enable_table(DB, "dbo", "customers", "dbo_customers_v2")
    row = {**john("john.doe@example.com"), "id": 1007, "phone_number": "+1-555-123456"}
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", row)
    land(raw(model), lake)
    model.disable_table(DB, "dbo_customers")
    with model.transaction(DB) as tx:
        tx.update("dbo", "customers", 1007, {"phone_number": "+1-555-999999"})
    land(raw(model), lake)
    values = data(lake)
    assert [(v["op"], (v["after"] or {}).get("id")) for v in values] == [
        ("c", 1005),
        ("c", 1006),
        ("c", 1007),
        ("u", 1007),
    ]
    assert "phone_number" not in values[1]["after"]  # the old instance has no such column
    assert values[2]["after"] == row
    assert values[3]["after"]["phone_number"] == "+1-555-999999"
    kinds = [(r[S.KIND], (r["value"] or {}).get("op")) for r in events(lake)]
    # the switch is announced between the last change of the old instance and the new one's
    at = kinds.index(("schema_change", None))
    assert kinds[at - 1 : at + 2] == [("data", "c"), ("schema_change", None), ("data", "c")]
    (change,) = events(lake)[at]["value"]["tableChanges"]
    assert (change["type"], change["id"]) == ("ALTER", '"testDB"."dbo"."customers"')
    assert [c["name"] for c in change["table"]["columns"]][-1] == "phone_number"
    quiet = tmp_path / "quiet"
    land(raw(model, **{"include.schema.changes": False, "snapshot.mode": "schema_only"}), quiet)
    model.enable_table(DB, "dbo", "customers", "dbo_customers_v3")
    with model.transaction(DB) as tx:
        tx.update("dbo", "customers", 1007, {"email": "v3@example.org"})
    land(raw(model, **{"include.schema.changes": False}), quiet)
    landed = [(r[S.KIND], r["value"].get("op")) for r in events(quiet) if r[S.KIND] != "heartbeat"]
    assert landed == [("data", "u")]  # schema_only: no rows read, and no schema change


def test_several_databases(model: SqlServerModel, tmp_path: Path) -> None:
    model.create_database("otherDB")
    model.create_table("otherDB", "dbo", "customers", CUSTOMERS)
    model.enable_table("otherDB", "dbo", "customers")
    with model.transaction("otherDB") as tx:
        tx.insert("dbo", "customers", john())
        tx.insert("dbo", "customers", {**john(), "id": 8})
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", {**john(), "id": 7})
    lake = tmp_path / "lake"
    land(raw(model, **{"database.names": f"{DB},otherDB"}), lake)
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", {**john(), "id": 1})
    with model.transaction("otherDB") as tx:
        tx.delete("dbo", "customers", 1005)
    land(raw(model, **{"database.names": f"{DB},otherDB"}), lake)
    seen = [(v["source"]["db"], v["op"]) for v in data(lake)]
    assert sorted(seen) == [
        ("otherDB", "d"),
        ("otherDB", "r"),
        ("otherDB", "r"),
        ("testDB", "c"),
        ("testDB", "r"),
    ]
    for row in events(lake):  # one snapshot batch holds both databases' rows: each its own db
        if row[S.KIND] == "data" and row["value"]:
            assert row[S.TOPIC] == f"server1.{row['value']['source']['db']}.dbo.customers"


def test_transaction_metadata(model: SqlServerModel, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    config = raw(model, **{"provide.transaction.metadata": True})
    land(config, lake)
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
        tx.insert("dbo", "customers", {**john(), "id": 1006})
    commit = model.open(DB).execute("SELECT MAX(start_lsn) FROM [cdc.lsn_time_mapping]")
    commit_text = bytes(commit.fetchone()[0]).hex()
    land(config, lake)
    rows = [r for r in events(lake) if r[S.KIND] in ("transaction", "data")]
    assert [r[S.KIND] for r in rows] == ["transaction", "data", "data", "transaction"]
    begin, end = rows[0]["value"], rows[-1]["value"]
    tx_id = f"{commit_text[:8]}:{commit_text[8:16]}:{commit_text[16:]}"
    assert (begin["status"], begin["id"]) == ("BEGIN", tx_id)
    assert (end["status"], end["id"], end["event_count"]) == ("END", tx_id, 2)
    assert rows[2]["value"]["transaction"]["total_order"] == 2


def test_types_per_the_mapping_tables(model: SqlServerModel, tmp_path: Path) -> None:
    columns = [
        Column("id", "bigint", False, True),
        Column("flag", "bit"),
        Column("tiny", "tinyint"),
        Column("price", "decimal(10,2)"),
        Column("cash", "money"),
        Column("ratio", "real"),
        Column("day", "date"),
        Column("at_ms", "datetime"),
        Column("at_us", "datetime2(6)"),
        Column("at_ns", "datetime2(7)"),
        Column("clock", "time(3)"),
        Column("blob", "varbinary(16)"),
        Column("name", "nvarchar(20)"),
    ]
    model.create_table(DB, "dbo", "typed", columns)
    model.enable_table(DB, "dbo", "typed")
    stamp = dt.datetime(2018, 6, 20, 15, 13, 16, 945104)
    row = {
        "id": 1,
        "flag": True,
        "tiny": 255,
        "price": Decimal("12.34"),
        "cash": Decimal("1.5000"),
        "ratio": 0.5,
        "day": dt.date(2018, 6, 20),
        "at_ms": stamp.replace(microsecond=945000),
        "at_us": stamp,
        "at_ns": stamp,
        "clock": dt.time(15, 13, 16, 945000),
        "blob": b"\x01\x02",
        "name": "žluťoučký",
    }
    land(raw(model), tmp_path / "lake")
    with model.transaction(DB) as tx:
        tx.insert("dbo", "typed", row)
    land(raw(model), tmp_path / "lake")
    (created,) = data(tmp_path / "lake")
    assert created["after"] == {
        "id": 1,
        "flag": True,
        "tiny": 255,
        "price": "BNI=",  # 1234 at scale 2
        "cash": "Opg=",  # 15000 at scale 4
        "ratio": 0.5,
        "day": 17702,
        "at_ms": 1529507596945,
        "at_us": 1529507596945104,  # the seed's DATETIME2 example
        "at_ns": 1529507596945104000,
        "clock": 54796945,
        "blob": "AQI=",
        "name": "žluťoučký",
    }


def row_fields(lake: Path, collection: str, event: int = -1) -> dict[str, dict[str, Any]]:
    """The ``after`` field schemas of the value schema data event ``event`` of ``collection``
    (in position order; the last by default) was landed with."""
    landed = [r for r in events(lake) if r[S.KIND] == "data" and r[S.COLLECTION] == collection]
    registry = DeltaTable(str(lake / "bronze" / "schemas")).to_pyarrow_table().to_pylist()
    schemas = {r[S.SCHEMA_ID]: orjson.loads(r[S.SCHEMA_JSON]) for r in registry}
    envelope = schemas[landed[event][S.VALUE_SCHEMA_ID]]
    (after,) = [f for f in envelope["fields"] if f["field"] == "after"]
    return {f["field"]: f for f in after["fields"]}


def test_column_defaults_reach_the_field_schemas(model: SqlServerModel, tmp_path: Path) -> None:
    """C4: the constant defaults of INFORMATION_SCHEMA.COLUMNS, converted as values are."""
    columns = [
        Column("id", "int", False, True),
        Column("qty", "int", False, default="0"),
        Column("price", "decimal(10,2)", False, default="9.5"),
        Column("born", "date", False, default="'2021-01-02'"),
        Column("flag", "bit", False, default="1"),
        Column("label", "nvarchar(20)", default="N'it''s'"),
        Column("stamp", "datetime2(6)", False, default="getdate()"),
        Column("plain", "int"),
    ]
    model.create_table(DB, "dbo", "defaults", columns)
    model.enable_table(DB, "dbo", "defaults")
    lake = tmp_path / "lake"
    land(raw(model), lake)
    row = {"id": 1, "qty": 2, "price": Decimal("1.00"), "born": dt.date(2020, 1, 1)}
    row |= {"flag": False, "label": None, "stamp": dt.datetime(2020, 1, 1), "plain": None}
    with model.transaction(DB) as tx:
        tx.insert("dbo", "defaults", row)
    land(raw(model), lake)
    fields = row_fields(lake, "dbo.defaults")
    unreproducible = "medallion.default.unreproducible"
    found = {
        name: (f.get("default"), unreproducible in (f.get("parameters") or {}))
        for name, f in fields.items()
    }
    assert found == {
        "id": (None, False),
        "qty": (0, False),
        "price": ("A7Y=", False),  # 950 at scale 2
        "born": (18629, False),  # the seed's TO_DATE('2021-01-02') example: epoch days
        "flag": (True, False),
        # nullable: older rows of an added column hold it only WITH VALUES (unknown)
        "label": ("it's", True),
        "stamp": (None, True),  # getdate(): the time of the ALTER
        "plain": (None, False),
    }
    # ADD ... NOT NULL DEFAULT fills the rows that exist; a new capture instance carries it.
    model.add_column(DB, "dbo", "defaults", Column("added", "smallint", False, default="7"))
    assert model.truth(DB, "dbo", "defaults")[1]["added"] == 7
    model.enable_table(DB, "dbo", "defaults", "dbo_defaults_v2")
    with model.transaction(DB) as tx:
        tx.update("dbo", "defaults", 1, {"qty": 3})
    land(raw(model), lake)
    assert row_fields(lake, "dbo.defaults")["added"]["default"] == 7


def test_masks_and_column_filters(model: SqlServerModel, tmp_path: Path) -> None:
    config = raw(
        model,
        **{
            "column.mask.with.5.chars": "dbo.customers.email",
            "column.exclude.list": "dbo.customers.last_name",
        },
    )
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    land(config, tmp_path / "lake")
    (read,) = data(tmp_path / "lake")
    assert read["after"] == {"id": 1005, "first_name": "john", "email": "*****"}


@pytest.mark.parametrize("mode", ["exclusive", "repeatable_read"])
def test_locking_isolation_blocks_writers_until_the_snapshot_ends(
    model: SqlServerModel, tmp_path: Path, mode: str
) -> None:
    from pydantic import TypeAdapter

    from capture.registry import create_source
    from pipeline.config import SourceConfig

    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
        tx.insert("dbo", "customers", {**john(), "id": 1006})
    config = TypeAdapter(SourceConfig).validate_python(
        raw(model, **{"snapshot.isolation.mode": mode})
    )
    source = create_source(config)
    source.open(None)
    first = source.read_batch(max_events=1, max_transaction_events=10)
    assert len(first.builder) == 1
    with pytest.raises(LockTimeout, match="1222"), model.transaction(DB) as tx:
        tx.delete("dbo", "customers", 1006)
    while not source.read_batch(max_events=1, max_transaction_events=10).exhausted:
        pass
    with model.transaction(DB) as tx:  # the snapshot committed: its locks are gone
        tx.delete("dbo", "customers", 1006)
    source.close()


def test_the_cleanup_job_removing_unread_changes_is_an_error(
    model: SqlServerModel, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    land(raw(model), lake)
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    (high,) = model.open(DB).execute("SELECT MAX(start_lsn) FROM [cdc.lsn_time_mapping]").fetchone()
    model.cleanup(DB, (int.from_bytes(high, "big") + 1).to_bytes(10, "big"))
    with pytest.raises(StageFailed, match="cleanup job removed changes"):
        land(raw(model), lake)


def test_reconciliation_reads_and_the_log_after_a_cut(
    model: SqlServerModel, tmp_path: Path
) -> None:
    from pydantic import TypeAdapter

    from capture.current_state import CurrentStateReader
    from capture.registry import create_source
    from pipeline.config import SourceConfig

    lake = tmp_path / "lake"
    config = raw(model, **{"column.mask.with.3.chars": "dbo.customers.email"})
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    land(config, lake)
    cut = max(r[S.POSITION] for r in events(lake))
    source = create_source(TypeAdapter(SourceConfig).validate_python(config))
    assert isinstance(source, CurrentStateReader)
    items = list(source.read_current())
    point = items[0][0]
    assert [(t.collection, rows) for _, t, rows in items] == [
        ("dbo.customers", []),
        ("dbo.customers", [{**john(), "email": "***"}]),  # converted and masked as landed
    ]
    assert source.changes_after(cut, point).ahead is False
    with model.transaction(DB) as tx:
        tx.delete("dbo", "customers", 1005)
    later = list(source.read_current())[0][0]
    check = source.changes_after(cut, later)
    assert check.ahead is True and "committed after the cut" in check.reason
    assert source.point_text(later).startswith("testDB@00000027:")


def test_heartbeats_follow_the_last_transaction_read(model: SqlServerModel, tmp_path: Path) -> None:
    lake, config = tmp_path / "lake", raw(model, **{"heartbeat.interval.ms": 1})
    with model.transaction(DB) as tx:
        tx.insert("dbo", "customers", john())
    land(config, lake)
    land(config, lake)  # nothing new: no second heartbeat at the same point
    with model.transaction(DB) as tx:
        tx.delete("dbo", "customers", 1005)
    land(config, lake)
    kinds = [r[S.KIND] for r in events(lake)]
    assert kinds == ["data", "heartbeat", "data", "tombstone", "heartbeat"], kinds
