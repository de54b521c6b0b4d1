"""The MySQL/MariaDB capture agent against the real MariaDB 10.11 (``mariadb_conn``).

Each test captures its own database (``database.include.list``) of the shared server into its
own temp lake with :class:`LandingAgent` + :class:`BronzeWriter`, and reads bronze back with
deltalake. Tests that purge binlogs use a private server (``own_mariadb``). What every connector
guarantees (commit order, exactly once under kill -9, snapshot handover, resume, reconnect after a
server restart, quarantine, status, silver equals the source) is checked for MariaDB by the
contract suite, ``tests/contract/``.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pymysql
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from capture.mysql.config import MySqlSourceConfig
from capture.mysql.source import MySqlSource, default_server_id
from capture.registry import create_source
from pipeline.errors import CaptureError, StageFailed
from tests.fix_servers import OwnMariaDb
from tests.integration.test_pg_capture import (  # the bronze readers are not PG-specific
    UNREPRODUCIBLE,
    assert_positions_unique_and_ordered,
    data,
    land,
    row_fields,
    rows,
)

pytestmark = [pytest.mark.mysql, pytest.mark.delta]

# re-exported: other MySQL tests import the bronze readers and ``land`` from here
__all__ = ["assert_positions_unique_and_ordered", "data", "land", "rows"]

_SERVER_IDS = itertools.cycle(
    range(5500 + int(os.environ.get("PYTEST_XDIST_WORKER", "gw0")[2:]) % 2, 6000, 2)
)
"""Explicit binlog server ids: even ones on pytest worker gw0, odd ones on gw1, so agents of
concurrent tests never present one id (the agent refuses an explicit id another client streams
with: capture/mysql/client_id.py)."""
SNAPSHOT_MARKERS = ("true", "first", "last")


@dataclass
class My:
    """One test's database on a MariaDB server."""

    conn: dict[str, Any]
    database: str

    def sql(self, *statements: str, params: tuple[Any, ...] = ()) -> None:
        with pymysql.connect(**self.conn, autocommit=True) as db, db.cursor() as cur:
            for statement in statements:
                cur.execute(statement, params or None)

    def query(self, statement: str) -> list[tuple[Any, ...]]:
        with pymysql.connect(**self.conn, autocommit=True) as db, db.cursor() as cur:
            cur.execute(statement)
            return list(cur.fetchall())

    def raw(self, **extra: Any) -> dict[str, Any]:
        raw: dict[str, Any] = {
            "name": "my",
            "connector": "mysql",
            "database.hostname": self.conn["host"],
            "database.port": self.conn["port"],
            "database.user": self.conn["user"],
            "database.include.list": self.database,
            "topic.prefix": "srv",
            "skipped.operations": "none",
            "database.server.id": next(_SERVER_IDS),
        }
        if self.conn.get("password"):
            os.environ["MEDALLION_TEST_MYSQL_PASSWORD"] = str(self.conn["password"])
            raw["database.password"] = "${MEDALLION_TEST_MYSQL_PASSWORD}"
        raw.update(extra)
        return raw

    def config(self, **extra: Any) -> MySqlSourceConfig:
        return MySqlSourceConfig.model_validate(self.raw(**extra))


def corner(conn: dict[str, Any]) -> Iterator[My]:
    my = My(dict(conn), f"t_{uuid.uuid4().hex[:8]}")
    my.sql(f"CREATE DATABASE {my.database}")
    yield my
    my.sql(f"DROP DATABASE IF EXISTS {my.database}")


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    yield from corner(mariadb_conn)


@pytest.fixture
def own(own_mariadb: OwnMariaDb) -> Iterator[My]:
    yield from corner(own_mariadb.settings)


def quarantined(lake: Path) -> list[dict[str, Any]]:
    path = lake / "bronze" / "quarantine"
    if not path.exists():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


# --- snapshot, then the stream ----------------------------------------------------------------


def test_snapshot_then_stream_every_operation(my: My, tmp_path: Path) -> None:
    d = my.database
    my.sql(
        f"CREATE TABLE {d}.items (id INT PRIMARY KEY, name VARCHAR(20) NOT NULL, qty INT)",
        f"INSERT INTO {d}.items VALUES (1, 'apple', 10), (2, 'pear', 5)",
    )
    lake = tmp_path / "lake"
    config = my.config(**{"provide.transaction.metadata": True})
    first = land(config, lake)
    assert first.landed == 2 and first.quarantined == 0
    snap = data(lake)
    assert [r["value"]["op"] for r in snap] == ["r", "r"]
    assert [r["value"]["source"]["snapshot"] for r in snap] == ["true", "last"]
    assert snap[0]["value"]["after"] == {"id": 1, "name": "apple", "qty": 10}
    assert snap[0]["value"]["source"]["server_id"] == 0
    offset = first.offset
    assert offset is not None and offset["phase"] == "stream" and offset["gtids"]

    my.sql(
        "START TRANSACTION",
        f"INSERT INTO {d}.items VALUES (3, 'fig', 1), (4, 'kiwi', 2)",  # one event, two rows
        f"UPDATE {d}.items SET qty = qty + 1 WHERE id = 1",
        "COMMIT",
    )
    my.sql(f"UPDATE {d}.items SET id = 20 WHERE id = 2")  # a key move
    my.sql(f"DELETE FROM {d}.items WHERE id = 3")
    second = land(config, lake)
    streamed = [r for r in rows(lake) if r[S.SNAPSHOT] not in SNAPSHOT_MARKERS]
    ops = [
        (r[S.KIND], (r["value"] or {}).get("op") or (r["value"] or {}).get("status"))
        for r in streamed
    ]
    assert ops == [
        ("transaction", "BEGIN"),
        ("data", "c"),
        ("data", "c"),
        ("data", "u"),
        ("transaction", "END"),
        ("transaction", "BEGIN"),
        ("data", "d"),
        ("tombstone", None),
        ("data", "c"),
        ("transaction", "END"),
        ("transaction", "BEGIN"),
        ("data", "d"),
        ("tombstone", None),
        ("transaction", "END"),
    ], ops
    assert second.landed == len(streamed)
    inserts = [r["value"] for r in streamed if r[S.KIND] == "data"][:2]
    a, b = inserts[0]["source"], inserts[1]["source"]
    assert (a["file"], a["pos"]) == (b["file"], b["pos"]) and (a["row"], b["row"]) == (0, 1)
    assert a["gtid"] and a["server_id"] == 1 and a["db"] == d and a["table"] == "items"
    assert a["connector"] == "mysql" and a["snapshot"] == "false" and a["name"] == "srv"
    assert inserts[0]["transaction"] == {
        "id": a["gtid"],
        "total_order": 1,
        "data_collection_order": 1,
    }
    move = [r for r in streamed if r[S.KIND] == "data"][3:5]
    assert move[0]["key"] == {"id": 2} and move[1]["key"] == {"id": 20}
    assert move[0]["value"]["before"]["name"] == "pear" and move[1]["value"]["after"]["id"] == 20
    headers = {h["key"]: h["value"] for h in move[1][S.HEADERS]}
    assert orjson.loads(headers["__debezium.oldkey"]) == {"id": 2}
    end = [r for r in streamed if r[S.KIND] == "transaction"][1]["value"]
    assert end["event_count"] == 3 and end["data_collections"] == [
        {"data_collection": f"{d}.items", "event_count": 3}
    ]
    assert_positions_unique_and_ordered(lake)
    # nothing new: a third run lands nothing and keeps the offset
    third = land(config, lake)
    assert third.landed == 0 and third.batches == 0


def test_server_settings_are_checked_with_the_fix(my: My, tmp_path: Path) -> None:
    my.sql("SET GLOBAL binlog_row_image = 'MINIMAL'")
    try:
        with pytest.raises(StageFailed) as failure:
            land(my.config(), tmp_path / "lake")
    finally:
        my.sql("SET GLOBAL binlog_row_image = 'FULL'")
    message = str(failure.value.__cause__)
    assert isinstance(failure.value.__cause__, CaptureError)
    assert "binlog_row_image is MINIMAL, needs FULL" in message
    assert "SET GLOBAL binlog_row_image='FULL'" in message and "--binlog-row-image=FULL" in message


# --- schema history: DDL mid-stream -------------------------------------------------------------


def test_ddl_mid_stream_decodes_each_row_under_its_definition(my: My, tmp_path: Path) -> None:
    d = my.database
    my.sql(f"CREATE TABLE {d}.t (id INT PRIMARY KEY, a VARCHAR(10), n SMALLINT)")
    lake = tmp_path / "lake"
    config = my.config(**{"bigint.unsigned.handling.mode": "long"})  # Debezium's lossy default
    land(config, lake)  # empty snapshot: the stream starts here
    my.sql(
        f"INSERT INTO {d}.t VALUES (1, 'one', 1)",
        f"ALTER TABLE {d}.t ADD COLUMN b DATE AFTER a",
        f"INSERT INTO {d}.t VALUES (2, 'two', '2024-01-02', 2)",
        f"ALTER TABLE {d}.t DROP COLUMN a",
        f"INSERT INTO {d}.t VALUES (3, '2024-01-03', 3)",
        f"ALTER TABLE {d}.t RENAME COLUMN b TO born",
        f"INSERT INTO {d}.t VALUES (4, '2024-01-04', 4)",
        f"ALTER TABLE {d}.t MODIFY n BIGINT UNSIGNED",
        f"INSERT INTO {d}.t VALUES (5, '2024-01-05', 18446744073709551615)",
        f"UPDATE {d}.t SET n = 7 WHERE id = 1",
    )
    # Land in small batches across agent restarts: each restart replays the schema history
    # up to its offset, never the catalog (which by now has none of the old shapes).
    for _ in range(12):
        if land(config, lake, max_events=2, max_batches=1).batches == 0:
            break
    after = [r["value"]["after"] for r in data(lake, "t")]
    assert after == [
        {"id": 1, "a": "one", "n": 1},
        {"id": 2, "a": "two", "b": 19724, "n": 2},
        {"id": 3, "b": 19725, "n": 3},
        {"id": 4, "born": 19726, "n": 4},
        {"id": 5, "born": 19727, "n": -1},  # bigint.unsigned.handling.mode=long wraps (Debezium)
        {"id": 1, "born": None, "n": 7},
    ]
    schemas = [r["value"] for r in rows(lake) if r[S.KIND] == "schema_change"]
    assert [s["ddl"].split()[3:5] for s in schemas] == [
        ["ADD", "COLUMN"],
        ["DROP", "COLUMN"],
        ["RENAME", "COLUMN"],
        ["MODIFY", "n"],
    ]
    last = schemas[-1]["tableChanges"][0]
    assert last["type"] == "ALTER" and last["id"] == f'"{d}"."t"'
    assert [c["name"] for c in last["table"]["columns"]] == ["id", "born", "n"]
    history = sorted(
        DeltaTable(str(lake / "bronze" / "schema_history")).to_pyarrow_table().to_pylist(),
        key=lambda h: h["seq"],
    )
    kinds = [(h["kind"], (h["ddl"] or "").split(" ")[0]) for h in history if h["source"] == "my"]
    assert kinds[:2] == [("reset", ""), ("snapshot", "CREATE")]
    assert [k for k in kinds[2:] if k[0] == "ddl"] == [("ddl", "ALTER")] * 4
    assert_positions_unique_and_ordered(lake)
    # the precise mode (our default) keeps the unsigned value
    lake2 = tmp_path / "precise"
    land(my.config(), lake2)
    precise = {r["value"]["after"]["id"]: r["value"]["after"]["n"] for r in data(lake2, "t")}
    assert precise[5] == "AP//////////"  # Connect Decimal bytes of 18446744073709551615


def test_added_columns_carry_the_value_existing_rows_got(my: My, tmp_path: Path) -> None:
    """Contract C4: a column ALTER TABLE ... ADD adds gets, as its schema's ``default``, the
    value the server gave the rows that existed (which the binlog does not carry)."""
    d = my.database
    my.sql(
        f"CREATE TABLE {d}.t (id INT PRIMARY KEY, qty INT DEFAULT 1, at0 TIMESTAMP NULL"
        " DEFAULT CURRENT_TIMESTAMP)",
        f"INSERT INTO {d}.t (id) VALUES (1)",
    )
    lake = tmp_path / "lake"
    config = my.config()
    land(config, lake)
    my.sql(
        f"ALTER TABLE {d}.t ADD COLUMN channel VARCHAR(10) DEFAULT 'web'",
        f"ALTER TABLE {d}.t ADD COLUMN n INT NOT NULL",
        f"ALTER TABLE {d}.t ADD COLUMN kind ENUM('x','y') NOT NULL",
        f"ALTER TABLE {d}.t ADD COLUMN stamp TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP",
        f"ALTER TABLE {d}.t ADD COLUMN u VARCHAR(36) DEFAULT (uuid())",
        f"ALTER TABLE {d}.t ADD COLUMN born DATE NOT NULL",
        f"ALTER TABLE {d}.t ADD COLUMN old_name INT DEFAULT 4",
        f"ALTER TABLE {d}.t CHANGE COLUMN old_name new_name INT DEFAULT 4",
        f"INSERT INTO {d}.t (id, n, kind, born) VALUES (2, 5, 'y', '2020-01-01')",
    )
    land(config, lake)
    with pymysql.connect(**my.conn, autocommit=True) as db, db.cursor() as cur:
        cur.execute("SET time_zone = '+00:00'")
        cur.execute(f"SELECT channel, n, kind, UNIX_TIMESTAMP(stamp), u FROM {d}.t WHERE id = 1")
        existing = cur.fetchone()
    assert existing[:3] == ("web", 0, "x") and existing[4] is not None
    fields = row_fields(lake, data(lake, "t")[-1])
    assert fields["channel"]["default"] == "web"
    assert fields["n"]["default"] == 0 and fields["kind"]["default"] == "x"
    stamp = dt.datetime.fromtimestamp(int(existing[3]), dt.UTC)
    assert fields["stamp"]["default"] == stamp.strftime("%Y-%m-%dT%H:%M:%SZ")
    assert fields["qty"]["default"] == 1 and "default" not in fields["at0"]

    def unreproducible(name: str) -> str:
        assert "default" not in fields[name]
        return str(fields[name]["parameters"][UNREPRODUCIBLE])

    assert "uuid()" in unreproducible("u")
    assert "0000-00-00" in unreproducible("born")
    assert "renamed from old_name" in unreproducible("new_name")
    assert all(UNREPRODUCIBLE not in fields[c].get("parameters", {}) for c in ("id", "qty"))


def test_rows_of_a_table_unknown_to_the_history_are_quarantined(my: My, tmp_path: Path) -> None:
    d = my.database
    my.sql(f"CREATE TABLE {d}.t (id INT PRIMARY KEY, v INT)")
    lake = tmp_path / "lake"
    # schema_only_recovery without history would not know t; 'never' from a purged-free binlog
    # reads the CREATE; here the history is made to miss it by capturing with a filter that
    # excluded t at snapshot time and then widening the filter.
    land(my.config(**{"table.include.list": f"{d}\\.other"}), lake)
    my.sql(f"INSERT INTO {d}.t VALUES (1, 1)")
    result = land(my.config(), lake)
    assert result.landed == 0 and result.quarantined == 1
    reason = quarantined(lake)[0]["reason"]
    assert f"table {d}.t is not in the schema history" in reason


# --- snapshot modes, locking, resume ----------------------------------------------------------


@pytest.mark.parametrize("locking", ["minimal", "extended", "none"])
def test_snapshot_is_chunked_and_resumes_after_a_stop(my: My, tmp_path: Path, locking: str) -> None:
    d = my.database
    my.sql(
        f"CREATE TABLE {d}.k (id INT PRIMARY KEY, v VARCHAR(10))",
        f"CREATE TABLE {d}.nokey (v INT)",
    )
    my.sql(
        f"INSERT INTO {d}.k SELECT seq, CONCAT('v', seq) FROM {d}.seq_1_to_95",
        f"INSERT INTO {d}.nokey SELECT seq FROM {d}.seq_1_to_30",
    )
    lake = tmp_path / "lake"
    config = my.config(**{"snapshot.locking.mode": locking})
    source = create_source(config)
    assert isinstance(source, MySqlSource)
    # stop after every 2 batches of 20: each run resumes from the committed key
    for _ in range(10):
        result = land(config, lake, max_events=20, max_batches=2)
        if result.offset and result.offset["phase"] == "stream":
            break
    keyed = [r["key"]["id"] for r in data(lake, "k")]
    assert keyed == list(range(1, 96))
    assert len(data(lake, "nokey")) == 30
    assert_positions_unique_and_ordered(lake)


def test_schema_only_and_never_modes(my: My, tmp_path: Path) -> None:
    d = my.database
    my.sql(f"CREATE TABLE {d}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {d}.t VALUES (1, 1)")
    lake = tmp_path / "schema_only"
    land(my.config(**{"snapshot.mode": "schema_only"}), lake)
    my.sql(f"INSERT INTO {d}.t VALUES (2, 2)")
    land(my.config(**{"snapshot.mode": "schema_only"}), lake)
    assert [r["value"]["op"] for r in data(lake, "t")] == ["c"]
    # never: no snapshot, the binlog from its first file (it holds this test's CREATE TABLE)
    never = tmp_path / "never"
    land(my.config(**{"snapshot.mode": "never"}), never)
    assert [(r["value"]["op"], r["key"]["id"]) for r in data(never, "t")] == [("c", 1), ("c", 2)]


def purge_binlogs(my: My) -> str:
    """Purge every binlog file but the newest; return its name. MariaDB skips (silently) files
    InnoDB still needs until its next checkpoint, so this repeats until they are gone."""
    newest = str(my.query("SHOW BINARY LOGS")[-1][0])
    deadline = time.monotonic() + 30
    while len(my.query("SHOW BINARY LOGS")) > 1:
        assert time.monotonic() < deadline, "the binlog files were never purged"
        my.sql(f"PURGE BINARY LOGS TO '{newest}'")
        time.sleep(0.1)
    return newest


def test_purged_binlog_fails_or_resnapshots(own: My, tmp_path: Path) -> None:
    d = own.database
    own.sql(f"CREATE TABLE {d}.t (id INT PRIMARY KEY, v INT)", f"INSERT INTO {d}.t VALUES (1, 1)")
    lake = tmp_path / "lake"
    land(own.config(), lake)
    own.sql("FLUSH BINARY LOGS", f"INSERT INTO {d}.t VALUES (2, 2)", "FLUSH BINARY LOGS")
    newest = purge_binlogs(own)
    with pytest.raises(StageFailed) as failure:
        land(own.config(), lake)
    message = str(failure.value.__cause__)
    assert "is no longer on the server (purged" in message and "when_needed" in message
    result = land(own.config(**{"snapshot.mode": "when_needed"}), lake)
    assert result.offset is not None and result.offset["file"] == newest
    resnapshot = [r for r in data(lake, "t") if r["value"]["source"]["snapshot"] != "false"]
    assert sorted(r["key"]["id"] for r in resnapshot) == [1, 1, 2]  # old snapshot + new one


# --- transactions, filters, masks -----------------------------------------------------------------


def test_filters_masks_key_columns_and_heartbeats(my: My, tmp_path: Path) -> None:
    d = my.database
    my.sql(
        f"CREATE TABLE {d}.people (id INT PRIMARY KEY, email VARCHAR(40), secret VARCHAR(20))",
        f"CREATE TABLE {d}.nokey (code VARCHAR(5) NOT NULL, v INT)",
        f"CREATE TABLE {d}.skipme (id INT PRIMARY KEY)",
        f"INSERT INTO {d}.people VALUES (1, 'a@x.io', 'pw')",
    )
    lake = tmp_path / "lake"
    config = my.config(
        **{
            "table.exclude.list": f"{d}\\.skipme",
            "column.exclude.list": f"{d}\\.people\\.secret",
            "column.mask.with.5.chars": f"{d}\\.people\\.email",
            "message.key.columns": f"{d}\\.nokey:code",
            "heartbeat.interval.ms": 1,
        }
    )
    land(config, lake)
    my.sql(
        f"INSERT INTO {d}.nokey VALUES ('k1', 1)",
        f"INSERT INTO {d}.skipme VALUES (1)",
    )
    land(config, lake)
    people = data(lake, "people")[0]["value"]["after"]
    assert people == {"id": 1, "email": "*****"}
    nokey = data(lake, "nokey")[0]
    assert nokey["key"] == {"code": "k1"}
    assert not data(lake, "skipme")
    # changes of tables that are not captured still move the committed offset (a heartbeat)
    before = land(config, lake).offset
    my.sql(f"INSERT INTO {d}.skipme VALUES (2)")
    after = land(config, lake).offset
    assert before is not None and after is not None
    assert (after["file"], after["pos"]) > (before["file"], before["pos"])
    assert rows(lake)[-1][S.KIND] == "heartbeat"


def test_default_server_id_is_stable_and_in_debeziums_range() -> None:
    assert default_server_id("orders") == default_server_id("orders")
    assert all(5400 <= default_server_id(f"s{i}") <= 6400 for i in range(200))


# --- status and statement-format changes --------------------------------------------------------


def test_status_reports_the_binlog_behind_bronze(my: My, tmp_path: Path) -> None:
    from pipeline.orchestration import _slot_status

    d = my.database
    my.sql(f"CREATE TABLE {d}.t (id INT PRIMARY KEY, v VARCHAR(100))")
    config = my.config()
    offset = land(config, tmp_path / "lake").offset
    caught_up = _slot_status(config, offset)
    assert caught_up["slot"].startswith("binlog ") and caught_up["slot_error"] is None
    my.sql(*(f"INSERT INTO {d}.t VALUES ({i}, REPEAT('x', 100))" for i in range(50)))
    behind = _slot_status(config, offset)
    assert behind["slot_lag_bytes"] > caught_up["slot_lag_bytes"] + 50 * 100
    assert behind["retained_wal_bytes"] >= behind["slot_lag_bytes"]
    gone = _slot_status(config, {**(offset or {}), "file": "binlog.000000"})
    assert "binlog.000000 of bronze's offset is no longer on the server" in gone["slot_error"]


def test_statement_format_changes_are_quarantined(my: My, tmp_path: Path) -> None:
    d = my.database
    my.sql(f"CREATE TABLE {d}.t (id INT PRIMARY KEY, v INT)")
    lake = tmp_path / "lake"
    config = my.config()
    land(config, lake)
    my.sql(f"INSERT INTO {d}.t VALUES (1, 1)")
    my.sql("SET SESSION binlog_format = 'STATEMENT'", f"INSERT INTO {d}.t VALUES (2, 2)")
    result = land(config, lake)
    assert result.landed == 1 and result.quarantined == 1
    row = data(lake, "t")[0]["value"]
    assert row["after"] == {"id": 1, "v": 1}
    reason = quarantined(lake)[0]["reason"]
    assert "statement-format change" in reason and f"INSERT INTO {d}.t VALUES (2, 2)" in reason
