"""The Oracle agent against the Oracle LogMiner model (``tests/oraclemodel``), and the real
python-oracledb driver up to the network.

The contract suite (``tests/contract``) runs the standard history for Oracle; these are the
Oracle-specific cases: the seed document's examples, the flashback snapshot's handover of open
transactions, rollbacks, a transaction larger than memory, log switches and reused online logs
(``ORA-00310``), logs gone (``ORA-01291``), undo gone (``ORA-01555``), a PDB that does not
exist, column masks, and a live server when ``MEDALLION_TEST_ORACLE_DSN`` names one.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from deltalake import DeltaTable
from pydantic import TypeAdapter

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.oracle.agent import DBAPI_ENV
from capture.oracle.source import OracleSource
from capture.registry import create_source
from pipeline.config import SourceConfig
from pipeline.errors import SourceUnavailable, StageFailed
from pipeline.landing import LandingAgent, LandingResult
from tests.integration.test_sqlserver_capture import row_fields
from tests.oraclemodel.database import Column, OracleModel

pytestmark = pytest.mark.delta

CUSTOMERS = [
    Column("ID", "NUMBER", 9, 0, nullable=False),
    Column("FIRST_NAME", "VARCHAR2", nullable=False),
    Column("LAST_NAME", "VARCHAR2", nullable=False),
    Column("EMAIL", "VARCHAR2", nullable=False),
]
ANNE = {"ID": 1004, "FIRST_NAME": "Anne", "LAST_NAME": "Kretchmar", "EMAIL": "annek@noanswer.org"}


@dataclasses.dataclass
class Corner:
    """A model database and a lake."""

    path: Path
    lake: Path

    def raw(self, **extra: Any) -> dict[str, Any]:
        return {
            "name": "ora",
            "connector": "oracle",
            "topic.prefix": "server1",
            "database.url": str(self.path),
            "database.user": "c##dbzuser",
            "database.password": "dbz",
            "database.dbname": "ORCLCDB",
            "database.pdb.name": "ORCLPDB1",
            "schema.include.list": "DEBEZIUM",
            "log.mining.batch.size.min": 5,
            "log.mining.batch.size.default": 20,
            "log.mining.batch.size.max": 100,
            # no pause between mining rounds: the tests drive the model as fast as it goes
            "log.mining.sleep.time.default.ms": 0,
            "log.mining.sleep.time.max.ms": 0,
            **extra,
        }

    def source(self, **extra: Any) -> OracleSource:
        source = create_source(TypeAdapter(SourceConfig).validate_python(self.raw(**extra)))
        assert isinstance(source, OracleSource)
        return source

    def land(self, source: OracleSource | None = None, **extra: Any) -> LandingResult:
        agent = LandingAgent(
            source or self.source(**extra),
            BronzeWriter(BronzeTables.under(self.lake)),
            max_events=50,
            max_transaction_events=20,
        )
        return agent.run()

    def edit(self) -> Any:
        return OracleModel.edit(self.path)

    def records(self) -> list[dict[str, Any]]:
        """Bronze's data rows in position order: op, key, before/after, source."""
        rows = DeltaTable(str(self.lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
        out = []
        for row in sorted(rows, key=lambda r: r[S.POSITION]):
            if row[S.KIND] != "data":
                continue
            value = orjson.loads(row[S.VALUE_JSON])
            out.append({"op": row[S.OP], "key": orjson.loads(row[S.KEY_JSON]), **value})
        return out


@pytest.fixture
def corner(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Corner]:
    monkeypatch.setenv(DBAPI_ENV, "tests.oraclemodel.dbapi")
    model = OracleModel(threads=2, redo_chunk=64, log_rows=12)
    model.create_table("DEBEZIUM", "CUSTOMERS", CUSTOMERS, ["ID"])
    model.save(tmp_path / "db.model")
    yield Corner(tmp_path / "db.model", tmp_path / "lake")


def _insert(corner: Corner, *rows: dict[str, Any], thread: int = 1) -> None:
    with corner.edit() as model:
        xid = model.begin(thread)
        for row in rows:
            model.insert(xid, "DEBEZIUM", "CUSTOMERS", row)
        model.commit(xid)


def _person(n: int) -> dict[str, Any]:
    return {"ID": n, "FIRST_NAME": f"F{n}", "LAST_NAME": f"L{n}", "EMAIL": f"p{n}@example.com"}


def test_the_seed_documents_create_update_and_delete_events(corner: Corner) -> None:
    corner.land()  # an empty snapshot
    _insert(corner, ANNE)
    with corner.edit() as model:
        xid = model.begin()
        model.update(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 1004}, {"EMAIL": "anne@example.com"})
        model.commit(xid)
        xid = model.begin(thread=2)
        model.delete(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 1004})
        model.commit(xid)
    corner.land()
    create, update, delete = corner.records()
    # seed Oracle document, "Create events", "Update events", "Delete events"
    assert (create["op"], create["before"], create["after"]) == ("c", None, ANNE)
    assert update["op"] == "u" and update["before"] == ANNE
    assert update["after"] == {**ANNE, "EMAIL": "anne@example.com"}
    assert (delete["op"], delete["before"], delete["after"]) == ("d", update["after"], None)
    assert create["key"] == {"ID": 1004}
    source = create["source"]
    assert {k: source[k] for k in ("connector", "name", "db", "schema", "table", "snapshot")} == {
        "connector": "oracle",
        "name": "server1",
        "db": "ORCLPDB1",
        "schema": "DEBEZIUM",
        "table": "CUSTOMERS",
        "snapshot": "false",
    }
    assert int(source["commit_scn"]) >= int(source["scn"])
    assert len(source["txId"]) == 16 and int(source["txId"], 16) >= 0  # RAW(8) XID as hex
    assert source["rs_id"].startswith("0x") and source["redo_thread"] == 1
    assert delete["source"]["redo_thread"] == 2
    commits = [int(r["source"]["commit_scn"]) for r in (create, update, delete)]
    assert commits == sorted(commits)


def test_the_seed_documents_field_types(corner: Corner) -> None:
    source = corner.source()
    source.open(None)
    table = source._table("DEBEZIUM", "CUSTOMERS")
    assert table is not None
    fields = {f["field"]: f for f in table.captured.row_schema["fields"]}
    # "ID" NUMBER(9,0) NOT NULL -> int32; VARCHAR2 NOT NULL -> string, required
    assert (fields["ID"]["type"], fields["ID"]["optional"]) == ("int32", False)
    assert (fields["EMAIL"]["type"], fields["EMAIL"]["optional"]) == ("string", False)
    assert table.captured.key_schema is not None
    assert table.captured.key_schema["name"] == "server1.DEBEZIUM.CUSTOMERS.Key"
    source.close()


def test_a_transaction_open_at_the_snapshot_is_streamed_whole_after_it(corner: Corner) -> None:
    _insert(corner, _person(1), _person(2))
    with corner.edit() as model:
        open_xid = model.begin(thread=2)
        model.insert(open_xid, "DEBEZIUM", "CUSTOMERS", _person(3))
    corner.land()  # the snapshot: rows 1 and 2; row 3 is not committed
    with corner.edit() as model:
        model.insert(open_xid, "DEBEZIUM", "CUSTOMERS", _person(4))
        model.commit(open_xid)
    _insert(corner, _person(5))
    corner.land()
    records = corner.records()
    assert [(r["op"], r["key"]["ID"]) for r in records] == [
        ("r", 1),
        ("r", 2),
        ("c", 3),
        ("c", 4),
        ("c", 5),
    ]
    assert [r["source"]["snapshot"] for r in records] == ["true", "last", "false", "false", "false"]
    assert records[0]["source"]["txId"] is None


def test_rollbacks_whole_and_by_statement(corner: Corner) -> None:
    corner.land()
    with corner.edit() as model:
        kept = model.begin()
        model.insert(kept, "DEBEZIUM", "CUSTOMERS", _person(1))
        model.insert(kept, "DEBEZIUM", "CUSTOMERS", _person(2))
        model.rollback_statement(kept)  # ROLLBACK = 1 undo of row 2
        dropped = model.begin(thread=2)
        model.insert(dropped, "DEBEZIUM", "CUSTOMERS", _person(3))
        model.update(kept, "DEBEZIUM", "CUSTOMERS", {"ID": 1}, {"EMAIL": "x@example.com"})
        model.rollback(dropped)  # ROLLBACK row (code 36)
        model.commit(kept)
    corner.land()
    assert [(r["op"], r["key"]["ID"]) for r in corner.records()] == [("c", 1), ("u", 1)]


def test_a_transaction_larger_than_memory_spills_and_spans_mining_windows(corner: Corner) -> None:
    corner.land()
    _insert(corner, *(_person(n) for n in range(1, 301)))
    source = corner.source()
    source.settings = dataclasses.replace(source.settings, spill_events=16)
    spilled: list[bool] = []
    commit = source._commit

    def watch(xid: str, scn: int, rs_id: str | None, ts_ms: int, thread: int) -> None:
        buffered = source._buffer.get(xid)
        spilled.append(buffered is not None and buffered.spilled)
        commit(xid, scn, rs_id, ts_ms, thread)

    source._commit = watch  # type: ignore[method-assign]
    result = corner.land(source)
    assert spilled == [True]
    assert result.landed == 300
    assert [r["key"]["ID"] for r in corner.records()] == list(range(1, 301))


def _random_step(model: OracleModel, rng: random.Random, state: dict[str, Any]) -> None:
    """One step of a random workload: begin, write (rows locked per transaction, as Oracle's
    row locks do), roll a statement back, commit or roll back."""
    open_txs: dict[str, set[int]] = state["open"]
    locked = set().union(*open_txs.values()) if open_txs else set()
    roll = rng.random()
    if not open_txs or (roll < 0.15 and len(open_txs) < 4):
        open_txs[model.begin(thread=rng.randint(1, 2))] = set()
        return
    xid = rng.choice(sorted(open_txs))
    mine = open_txs[xid]
    live = {row["ID"] for row in model.tables[("DEBEZIUM", "CUSTOMERS")].live.values()}
    if roll < 0.55:
        state["next"] += 1
        n = state["next"]
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", _person(n))
        mine.add(n)
    elif roll < 0.7 and (free := sorted((live - locked) | (live & mine))):
        n = rng.choice(free)
        model.update(xid, "DEBEZIUM", "CUSTOMERS", {"ID": n}, {"EMAIL": f"e{rng.random()}"})
        mine.add(n)
    elif roll < 0.78 and (free := sorted((live - locked) | (live & mine))):
        n = rng.choice(free)
        model.delete(xid, "DEBEZIUM", "CUSTOMERS", {"ID": n})
        mine.add(n)
    elif roll < 0.83 and model.open[xid].statements:
        model.rollback_statement(xid)
    elif roll < 0.95:
        model.commit(xid)
        del open_txs[xid]
    else:
        model.rollback(xid)
        del open_txs[xid]


def test_a_random_interleaved_history_lands_exactly_the_committed_rows(corner: Corner) -> None:
    rng = random.Random(2026)
    state: dict[str, Any] = {"open": {}, "next": 0}
    for part in range(6):
        with corner.edit() as model:
            for _ in range(120):
                _random_step(model, rng, state)
            if part == 5:  # finish what is open
                for xid in sorted(state["open"]):
                    model.commit(xid)
        source = corner.source()
        source.settings = dataclasses.replace(source.settings, spill_events=8)
        corner.land(source)
    rows: dict[int, dict[str, Any]] = {}
    for record in corner.records():
        if record["op"] == "d":
            rows.pop(record["key"]["ID"])
        else:
            rows[record["key"]["ID"]] = record["after"]
    truth = OracleModel.load(corner.path).committed_rows("DEBEZIUM", "CUSTOMERS")
    assert rows == {row["ID"]: row for row in truth}
    assert len(truth) > 50


def test_the_mining_window_grows_while_behind_and_shrinks_when_caught_up(corner: Corner) -> None:
    corner.land()
    for n in range(1, 101):
        _insert(corner, _person(n), thread=1 + n % 2)  # about 400 SCNs of redo
    committed = BronzeWriter(BronzeTables.under(corner.lake)).last_committed(agent_app_id("ora"))
    assert committed is not None
    source = corner.source()  # windows: min 5, default 20, max 100
    mine, windows = source._mine, []

    def measured(start: int, end: int) -> list[tuple[Any, ...]]:
        windows.append(source._window)  # the window this mining call was sized with
        return mine(start, end)

    source._mine = measured  # type: ignore[method-assign]
    source.open(committed.offset)
    while not source.read_batch(max_events=1000, max_transaction_events=1000).exhausted:
        pass
    assert windows[0] == 20 and max(windows) > 20  # behind by more than the default: it grew
    assert max(windows) <= 100
    grown = source._window
    for n in range(101, 104):  # caught up: a little redo at a time
        _insert(corner, _person(n))
        source.read_batch(max_events=1000, max_transaction_events=1000)
    source.close()
    assert source._window == max(5, grown - 3 * 5)  # it shrank by the minimum each time


def test_a_column_added_while_streaming_is_described_again(corner: Corner) -> None:
    corner.land()
    _insert(corner, _person(1))
    source = corner.source()
    mine_window = source._mine_window
    calls: list[int] = []

    def alter_after_the_first_row() -> bool:
        described = source._tables.get(("DEBEZIUM", "CUSTOMERS")) is not None
        if described and not calls:  # row 1 is emitted, its table described without PHONE
            calls.append(1)
            with corner.edit() as model:
                model.add_column("DEBEZIUM", "CUSTOMERS", Column("PHONE", "VARCHAR2"))
            _insert(corner, {**_person(2), "PHONE": "555-0100"})
        return mine_window()

    source._mine_window = alter_after_the_first_row  # type: ignore[method-assign]
    corner.land(source)
    first, second = corner.records()
    assert "PHONE" not in first["after"]
    assert second["after"] == {**_person(2), "PHONE": "555-0100"}


def test_column_defaults_reach_the_field_schemas(corner: Corner) -> None:
    """C4: constants of ``ALL_TAB_COLUMNS.DATA_DEFAULT`` (and of the DDL a column is added
    with while streaming), converted as values are; ``SYSDATE`` is the time of the ALTER."""
    with corner.edit() as model:
        columns = [
            Column("ID", "NUMBER", 9, 0, nullable=False),
            Column("QTY", "NUMBER", 9, 0, nullable=False, default="0"),
            Column("PRICE", "NUMBER", 10, 2, default="9.5"),
            Column("LABEL", "VARCHAR2", default="'it''s' "),  # a LONG: the text as written
            Column("BORN", "DATE", default="SYSDATE"),
        ]
        model.create_table("DEBEZIUM", "DEFAULTS", columns, ["ID"])
        xid = model.begin(1)
        model.insert(xid, "DEBEZIUM", "DEFAULTS", {"ID": 1, "QTY": 1})
        model.commit(xid)
    corner.land()
    with corner.edit() as model:
        model.add_column("DEBEZIUM", "DEFAULTS", Column("ADDED", "NUMBER", 4, 0, False, "-7"))
        assert model.committed_rows("DEBEZIUM", "DEFAULTS")[0]["ADDED"] == -7
        xid = model.begin(1)
        model.insert(xid, "DEBEZIUM", "DEFAULTS", {"ID": 2, "QTY": 2, "ADDED": 3})
        model.commit(xid)
    corner.land()
    unreproducible = "medallion.default.unreproducible"
    found = [
        {
            name: (f.get("default"), unreproducible in (f.get("parameters") or {}))
            for name, f in fields.items()
        }
        for fields in (row_fields(corner.lake, "DEBEZIUM.DEFAULTS", n) for n in (0, -1))
    ]
    expected = {
        "ID": (None, False),
        "QTY": (0, False),
        "PRICE": ("A7Y=", False),  # 950 at scale 2
        "LABEL": ("it's", False),
        "BORN": (None, True),
    }
    assert found == [expected, {**expected, "ADDED": (-7, False)}]


def test_a_reused_online_log_is_read_again_from_its_archive(
    corner: Corner, caplog: pytest.LogCaptureFixture
) -> None:
    corner.land()
    _insert(corner, _person(1))
    _insert(corner, _person(2), thread=2)
    source = corner.source()
    mine = source._mine
    switched: list[int] = []

    def switch_then_mine(start: int, end: int) -> list[tuple[Any, ...]]:
        if not switched:
            # between ADD_LOGFILE and the query, thread 1 switches until its group is reused
            with corner.edit() as model:
                for _ in range(model.online_groups):
                    model.switch_log(1)
            switched.append(start)
        return mine(start, end)

    source._mine = switch_then_mine  # type: ignore[method-assign]
    caplog.set_level("INFO", "capture.oracle.stream")
    corner.land(source)
    assert "ORA-00310: archived log contains sequence" in caplog.text
    assert [r["key"]["ID"] for r in corner.records()] == [1, 2]


def test_a_log_missing_from_the_session_is_registered_again(
    corner: Corner, caplog: pytest.LogCaptureFixture
) -> None:
    corner.land()
    for n in range(1, 20):
        _insert(corner, _person(n), thread=1 + n % 2)
    source = corner.source()
    calls: list[str] = []
    query = source._query

    def logs_but_the_last(conn: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
        rows = query(conn, sql, *params)
        if "V$ARCHIVED_LOG A WHERE" in sql and not calls:
            calls.append(sql)
            return rows[:-1]  # as if the log list had been read before the last switch
        return rows

    source._query = logs_but_the_last  # type: ignore[method-assign]
    caplog.set_level("INFO", "capture.oracle.stream")
    corner.land(source)
    assert calls and "ORA-01291: missing logfile; registering the logs again" in caplog.text
    assert [r["key"]["ID"] for r in corner.records()] == list(range(1, 20))


def test_logs_gone_since_the_offset_ask_for_a_new_snapshot(corner: Corner) -> None:
    corner.land()
    for n in range(1, 60):
        _insert(corner, _person(n))
    with corner.edit() as model:
        for thread in (1, 2):
            for _ in range(model.online_groups + 1):
                model.switch_log(thread)
        model.purge_archives(model.scn)
    with pytest.raises(StageFailed) as failure:
        corner.land()
    assert "Please perform a new snapshot" in str(failure.value.__cause__)
    assert "do not contain the offset SCN" in str(failure.value.__cause__)


def test_undo_gone_during_the_snapshot_is_a_clear_error(corner: Corner) -> None:
    _insert(corner, _person(1))
    with corner.edit() as model:
        model.undo_low_scn = model.scn + 10**6
    with pytest.raises(StageFailed) as failure:
        corner.land()
    assert "UNDO_RETENTION" in str(failure.value.__cause__)
    assert "ORA-01555" in str(failure.value.__cause__)


def test_a_pdb_that_does_not_exist_is_named(corner: Corner) -> None:
    source = corner.source(**{"database.pdb.name": "NOPDB"})
    with pytest.raises(Exception, match="ORA-65011: Pluggable database NOPDB does not exist"):
        source.open(None)


def test_masks_filters_transaction_metadata_and_heartbeats(corner: Corner) -> None:
    with corner.edit() as model:
        model.create_table("DEBEZIUM", "SECRETS", [Column("ID", "NUMBER", 9, 0)], ["ID"])
    _insert(corner, _person(1))
    options: dict[str, Any] = {
        "column.mask.with.5.chars": "DEBEZIUM\\.CUSTOMERS\\.EMAIL",
        "column.exclude.list": "DEBEZIUM\\.CUSTOMERS\\.LAST_NAME",
        "table.exclude.list": "ORCLPDB1\\.DEBEZIUM\\.SECRETS",  # pdb.schema.table in a CDB
        "provide.transaction.metadata": True,
        "heartbeat.interval.ms": 1,
    }
    corner.land(corner.source(**options))
    with corner.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "SECRETS", {"ID": 7})
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", _person(2))
        model.commit(xid)
    corner.land(corner.source(**options))
    snapshot, create = corner.records()
    assert snapshot["after"] == {"ID": 1, "FIRST_NAME": "F1", "EMAIL": "*****"}
    assert create["after"] == {"ID": 2, "FIRST_NAME": "F2", "EMAIL": "*****"}
    assert create["transaction"]["total_order"] == 1
    rows = DeltaTable(str(corner.lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    kinds = [r[S.KIND] for r in sorted(rows, key=lambda r: r[S.POSITION])]
    assert kinds.count("transaction") == 2  # BEGIN and END around the one data event
    begin = kinds.index("transaction")
    assert kinds[begin : begin + 3] == ["transaction", "data", "transaction"]
    assert "heartbeat" in kinds


def test_reconciliation_reads_current_rows_and_the_log_after_the_cut(corner: Corner) -> None:
    _insert(corner, _person(1), _person(2))
    corner.land()
    with corner.edit() as model:
        xid = model.begin()
        model.update(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 2}, {"EMAIL": "two@example.com"})
        model.commit(xid)
    corner.land()
    rows = DeltaTable(str(corner.lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    cut = max(r[S.POSITION] for r in rows)
    reader = corner.source()
    items = list(reader.read_current())
    (point,) = {scn for scn, _, _ in items}
    current = [row for _, table, chunk in items for row in chunk]
    assert current == [
        {**_person(1)},
        {**_person(2), "EMAIL": "two@example.com"},
    ]
    check = reader.changes_after(cut, point)
    assert check.ahead is False, check.reason
    with corner.edit() as model:
        xid = model.begin(thread=2)
        model.delete(xid, "DEBEZIUM", "CUSTOMERS", {"ID": 1})
        model.commit(xid)
        later = model.scn
    assert reader.changes_after(cut, later).ahead is True
    assert reader.point_text(point) == str(point)


def test_the_real_driver_reports_a_refused_connection_as_retryable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # python-oracledb itself, thin mode: a TCP connection to a closed port
    monkeypatch.delenv(DBAPI_ENV, raising=False)  # the contract driver may have set it
    raw = Corner(tmp_path / "none", tmp_path / "lake").raw()
    del raw["database.url"]
    raw.update({"database.hostname": "127.0.0.1", "database.port": 1})
    source = create_source(TypeAdapter(SourceConfig).validate_python(raw))
    assert isinstance(source, OracleSource)
    assert source.driver.__name__ == "oracledb" and source.driver.is_thin_mode()
    refused = r"127\.0\.0\.1:1/ORCLCDB \(Oracle error DPY-6005"
    with pytest.raises(SourceUnavailable, match=refused) as failure:
        source._connect()
    assert "dbz" not in str(failure.value)  # the password never shows


LIVE_DSN = os.environ.get("MEDALLION_TEST_ORACLE_DSN")


def live_raw(**extra: Any) -> dict[str, Any]:
    """The config of the server ``MEDALLION_TEST_ORACLE_DSN`` names (``host:port/service``),
    with ``MEDALLION_TEST_ORACLE_USER``/``_PASSWORD`` (default ``c##dbzuser``/``dbz``) and
    ``MEDALLION_TEST_ORACLE_PDB``."""
    raw: dict[str, Any] = {
        "name": "live",
        "connector": "oracle",
        "topic.prefix": "live",
        "database.url": LIVE_DSN,
        "database.user": os.environ.get("MEDALLION_TEST_ORACLE_USER", "c##dbzuser"),
        "database.password": os.environ.get("MEDALLION_TEST_ORACLE_PASSWORD", "dbz"),
        "database.dbname": "ORCLCDB",
        **extra,
    }
    pdb = os.environ.get("MEDALLION_TEST_ORACLE_PDB")
    if pdb:
        raw["database.pdb.name"] = pdb
    return raw


if LIVE_DSN:  # defined only when a server is named: it fails, never skips, if unreachable

    def test_a_live_oracle_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        """The agent reads the SCN, the logs and a snapshot of the server :func:`live_raw`
        names."""
        monkeypatch.delenv(DBAPI_ENV, raising=False)
        raw = live_raw(**{"snapshot.mode": "schema_only"})
        source = create_source(TypeAdapter(SourceConfig).validate_python(raw))
        assert isinstance(source, OracleSource)
        source.open(None)
        assert source._current_scn() > 0
        batch = source.read_batch(max_events=100, max_transaction_events=100)
        assert batch.offset["phase"] == "stream"
        source.close()
