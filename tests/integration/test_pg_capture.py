"""The PostgreSQL capture agent against a real PostgreSQL 15 (``pg_dsn``): snapshot, stream,
record shapes, types, filters, cut transactions, slots. What every connector guarantees (commit
order, exactly once under kill -9, acknowledgement after the commit, snapshot handover, resume,
reconnect after a server restart, quarantine, status, silver equals the source) is checked for
PostgreSQL by the contract suite, ``tests/contract/``.

Every test uses its own schema, slot and publication, so tests do not see each other's changes;
slots are dropped afterwards so they retain no WAL.
"""

from __future__ import annotations

import base64
import datetime as dt
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import psycopg
import pytest
from deltalake import DeltaTable
from psycopg import sql

from bronze import schema as S
from bronze.envelope import HEADER_NEW_KEY, HEADER_OLD_KEY, UNAVAILABLE_VALUE
from bronze.positions import decode_position
from bronze.writer import BronzeTables, BronzeWriter
from capture.postgresql.config import PostgresSourceConfig
from capture.postgresql.source import parse_lsn
from capture.registry import create_source
from pipeline.config import SourceConfig
from pipeline.errors import CaptureError, StageFailed
from pipeline.landing import LandingAgent, LandingResult

pytestmark = [pytest.mark.postgres, pytest.mark.delta]


@dataclass
class Pg:
    """One test's private corner of the server."""

    dsn: str
    schema: str
    slot: str
    publication: str

    def sql(self, *statements: str | sql.Composable) -> None:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            return conn.execute(statement, params).fetchall()

    def config(self, **extra: Any) -> PostgresSourceConfig:
        info = psycopg.conninfo.conninfo_to_dict(self.dsn)
        raw: dict[str, Any] = {
            "name": "pg",
            "connector": "postgresql",
            "database.hostname": info.get("host", "127.0.0.1"),
            "database.port": int(info.get("port", 5432)),  # type: ignore[arg-type]
            "database.user": info.get("user", "postgres"),
            "database.dbname": info.get("dbname", "postgres"),
            "topic.prefix": "srv",
            "slot.name": self.slot,
            "publication.name": self.publication,
            "schema.include.list": self.schema,
            "skipped.operations": "none",
        }
        raw.update(extra)
        return PostgresSourceConfig.model_validate(raw)


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


def pg_corner(pg_dsn: str) -> Iterator[Pg]:
    """A schema, slot and publication of one's own; dropped (slot first) afterwards."""
    tag = uuid.uuid4().hex[:8]
    corner = Pg(pg_dsn, f"t_{tag}", f"medallion_{tag}", f"pub_{tag}")
    corner.sql(f"CREATE SCHEMA {corner.schema}")
    yield corner
    corner.sql(
        sql.SQL(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
            "WHERE slot_name = {} AND active_pid IS NOT NULL"
        ).format(sql.Literal(corner.slot))
    )
    for _ in range(50):
        try:
            corner.sql(
                sql.SQL(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = {}"
                ).format(sql.Literal(corner.slot))
            )
            break
        except psycopg.errors.ObjectInUse:
            time.sleep(0.1)
    corner.sql(
        f"DROP PUBLICATION IF EXISTS {corner.publication}",
        f"DROP SCHEMA {corner.schema} CASCADE",
    )


def land(
    config: SourceConfig,
    lake: Path,
    *,
    max_events: int = 1000,
    max_tx: int = 100_000,
    max_batches: int | None = None,
) -> LandingResult:
    """Land a database source (PostgreSQL here, MySQL in ``test_mysql_capture``) once."""
    agent = LandingAgent(
        create_source(config),
        BronzeWriter(BronzeTables.under(lake)),
        max_events=max_events,
        max_transaction_events=max_tx,
    )
    return agent.run(max_batches=max_batches)


def rows(lake: Path) -> list[dict[str, Any]]:
    """Bronze events in position order, value and key parsed."""
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    out = []
    for r in sorted(table.to_pylist(), key=lambda r: r[S.POSITION]):
        r["value"] = None if r[S.VALUE_JSON] is None else orjson.loads(r[S.VALUE_JSON])
        r["key"] = None if r[S.KEY_JSON] is None else orjson.loads(r[S.KEY_JSON])
        out.append(r)
    return out


def data(lake: Path, table: str | None = None) -> list[dict[str, Any]]:
    return [
        r
        for r in rows(lake)
        if r[S.KIND] == "data" and (table is None or r[S.COLLECTION].endswith("." + table))
    ]


def assert_positions_unique_and_ordered(lake: Path) -> None:
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table(
        columns=[S.POSITION, S.BATCH_SEQ]
    )
    positions = table.column(S.POSITION).to_pylist()
    assert len(set(positions)) == len(positions), "duplicate positions"
    batches = sorted(set(table.column(S.BATCH_SEQ).to_pylist()))
    assert batches == list(range(len(batches)))


def test_snapshot_then_stream_every_operation(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.items (id int PRIMARY KEY, name text NOT NULL, qty int)",
        f"INSERT INTO {s}.items SELECT g, 'n' || g, g FROM generate_series(1, 25) g",
        f"CREATE TABLE {s}.full_rows (id int PRIMARY KEY, name text)",
        f"ALTER TABLE {s}.full_rows REPLICA IDENTITY FULL",
    )
    lake = tmp_path / "lake"
    config = pg.config(**{"provide.transaction.metadata": True})
    first = land(config, lake, max_events=10)
    assert first.landed == 25 and first.batches == 3
    snap = data(lake)
    assert [r["value"]["op"] for r in snap] == ["r"] * 25
    assert [r[S.SNAPSHOT] for r in snap] == ["true"] * 24 + ["last"]
    assert [r["key"]["id"] for r in snap] == list(range(1, 26))
    assert snap[0]["value"]["after"] == {"id": 1, "name": "n1", "qty": 1}
    assert snap[0][S.TOPIC] == "srv." + s + ".items"

    pg.sql(
        f"INSERT INTO {s}.items VALUES (100, 'new', 1)",
        f"UPDATE {s}.items SET qty = 2 WHERE id = 100",
        f"UPDATE {s}.items SET id = 101 WHERE id = 100",
        f"DELETE FROM {s}.items WHERE id = 1",
        f"INSERT INTO {s}.full_rows VALUES (1, 'a')",
        f"UPDATE {s}.full_rows SET name = 'b' WHERE id = 1",
        f"DELETE FROM {s}.full_rows WHERE id = 1",
        f"TRUNCATE {s}.items",
        "SELECT pg_logical_emit_message(true, 'audit', 'hello')",
    )
    second = land(config, lake, max_events=4)
    assert second.batches >= 3
    stream = [r for r in data(lake) if r[S.SNAPSHOT] == "false"]
    shape = [(r[S.COLLECTION].split(".")[1], r["value"]["op"]) for r in stream]
    assert shape == [
        ("items", "c"),
        ("items", "u"),
        ("items", "d"),  # primary-key change: delete old key ...
        ("items", "c"),  # ... create new key
        ("items", "d"),
        ("full_rows", "c"),
        ("full_rows", "u"),
        ("full_rows", "d"),
        ("items", "t"),
    ]
    update, move_delete, move_create = stream[1], stream[2], stream[3]
    assert update["value"]["before"] == {"id": 100}  # DEFAULT identity: key only
    assert update["value"]["after"] == {"id": 100, "name": "new", "qty": 2}
    assert move_delete["key"] == {"id": 100} and move_create["key"] == {"id": 101}
    assert {h["key"]: h["value"] for h in move_delete[S.HEADERS]} == {HEADER_NEW_KEY: '{"id":101}'}
    assert {h["key"]: h["value"] for h in move_create[S.HEADERS]} == {HEADER_OLD_KEY: '{"id":100}'}
    assert stream[4]["value"]["before"] == {"id": 1}
    assert stream[6]["value"]["before"] == {"id": 1, "name": "a"}  # FULL: whole row
    assert stream[7]["value"]["before"] == {"id": 1, "name": "b"}
    source = stream[0]["value"]["source"]
    assert source["connector"] == "postgresql" and source["name"] == "srv"
    assert source["schema"] == s and source["table"] == "items" and source["snapshot"] == "false"
    assert isinstance(source["txId"], int) and source["lsn"] < source["commit_lsn"]
    # tombstones follow deletes of keyed tables; BEGIN/END frame every transaction
    everything = rows(lake)
    kinds = Counter(r[S.KIND] for r in everything if r[S.SNAPSHOT] != "true")
    assert kinds["tombstone"] == 3  # key-move delete, plain delete, full_rows delete
    assert kinds["message"] == 1
    ends = [r for r in everything if r[S.TX_STATUS] == "END"]
    begins = [r for r in everything if r[S.TX_STATUS] == "BEGIN"]
    assert len(ends) == len(begins) == 8
    assert sum(r[S.TX_EVENT_COUNT] for r in ends) == 9
    # every data event carries its transaction block, numbered 1..n within its transaction
    orders: dict[str, list[int]] = {}
    for r in stream:
        block = r["value"]["transaction"]
        assert block["id"] == r[S.TX_ID]
        orders.setdefault(block["id"], []).append(block["total_order"])
    assert all(o == list(range(1, len(o) + 1)) for o in orders.values())
    assert move_create["value"]["transaction"]["total_order"] == 2
    # positions: snapshot before stream; commit order; each END after its events
    positions = [decode_position("postgresql", r[S.POSITION]) for r in everything]
    assert all(p.phase == 0 for p in positions[:25]) and all(p.phase == 1 for p in positions[25:])
    assert_positions_unique_and_ordered(lake)
    assert [r[S.TX_STATUS] for r in everything if r[S.TX_ID] == everything[-1][S.TX_ID]][-1] in (
        "END",
        None,
    )
    # nothing left: a third run lands nothing
    assert land(config, lake).landed == 0


def test_toast_columns_unchanged_carry_the_placeholder(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    big = "".join(uuid.uuid4().hex for _ in range(4000))  # ~128 kB, incompressible
    pg.sql(
        f"CREATE TABLE {s}.docs (id int PRIMARY KEY, body text, tag text, blob bytea)",
        f"CREATE TABLE {s}.docs_full (id int PRIMARY KEY, body text, tag text)",
        f"ALTER TABLE {s}.docs_full REPLICA IDENTITY FULL",
    )
    config = pg.config()
    lake = tmp_path / "lake"
    land(config, lake)
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        conn.execute(f"INSERT INTO {s}.docs VALUES (1, %s, 'a', %s)", (big, big.encode()))
        conn.execute(f"INSERT INTO {s}.docs_full VALUES (1, %s, 'a')", (big,))
        conn.execute(f"UPDATE {s}.docs SET tag = 'b' WHERE id = 1")
        conn.execute(f"UPDATE {s}.docs_full SET tag = 'b' WHERE id = 1")
    land(config, lake)
    docs = data(lake, "docs")
    assert docs[0]["value"]["after"]["body"] == big
    after = docs[1]["value"]["after"]
    assert after["tag"] == "b" and after["body"] == UNAVAILABLE_VALUE
    assert base64.b64decode(after["blob"]) == UNAVAILABLE_VALUE.encode()
    full = data(lake, "docs_full")
    assert full[1]["value"]["after"]["body"] == big
    assert full[1]["value"]["before"]["body"] == big


def test_large_transaction_is_cut_and_lands_once(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(f"CREATE TABLE {s}.big (id int PRIMARY KEY, v text)")
    config = pg.config(**{"provide.transaction.metadata": True})
    lake = tmp_path / "lake"
    land(config, lake)
    pg.sql(
        f"INSERT INTO {s}.big SELECT g, md5(g::text) FROM generate_series(1, 5000) g",
        f"INSERT INTO {s}.big VALUES (0, 'after')",
    )
    result = land(config, lake, max_events=1000, max_tx=1500)
    events = rows(lake)
    inserts = [r for r in events if r[S.KIND] == "data"]
    assert Counter(r["key"]["id"] for r in inserts) == Counter(range(5001))
    big_tx = inserts[0][S.TX_ID]
    partial = {r[S.BATCH_SEQ] for r in events if r[S.TX_ID] == big_tx and r[S.TX_PARTIAL]}
    assert len(partial) >= 3  # the 5000-row transaction spans several batches
    end = [r for r in events if r[S.TX_STATUS] == "END" and r[S.TX_ID] == big_tx]
    assert len(end) == 1 and end[0][S.TX_EVENT_COUNT] == 5000 and not end[0][S.TX_PARTIAL]
    assert result.batches >= 4
    assert_positions_unique_and_ordered(lake)


def test_snapshot_resumes_by_chunk_for_keyed_and_keyless_tables(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.composite (a int, b text, v int, PRIMARY KEY (a, b))",
        f"INSERT INTO {s}.composite SELECT g % 7, 'k' || g, g FROM generate_series(1, 45) g",
        f"CREATE TABLE {s}.keyless (v int)",
        f"INSERT INTO {s}.keyless SELECT generate_series(1, 33)",
    )
    config = pg.config()
    lake = tmp_path / "lake"
    runs = 0
    while True:  # one batch per run: every run resumes the snapshot from bronze's offset
        agent = LandingAgent(
            create_source(config), BronzeWriter(BronzeTables.under(lake)), max_events=10
        )
        result = agent.run(max_batches=1)
        runs += 1
        assert result.offset is not None
        if result.offset["phase"] != "snapshot":
            break
        assert result.offset["snapshot"]["after"] is not None
    assert runs >= 8
    got = data(lake)
    composite = [
        (r["key"]["a"], r["key"]["b"]) for r in got if r[S.COLLECTION].endswith("composite")
    ]
    assert sorted(composite) == sorted((g % 7, f"k{g}") for g in range(1, 46))
    assert composite == sorted(composite)  # key order
    keyless = [r["value"]["after"]["v"] for r in got if r[S.COLLECTION].endswith("keyless")]
    assert sorted(keyless) == list(range(1, 34)) and len(keyless) == 33
    assert all(r["key"] is None for r in got if r[S.COLLECTION].endswith("keyless"))
    assert [r[S.SNAPSHOT] for r in got].count("last") == 1 and got[-1][S.SNAPSHOT] == "last"
    assert_positions_unique_and_ordered(lake)


def test_initial_only_snapshots_then_releases_the_slot(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(f"CREATE TABLE {s}.t (id int PRIMARY KEY)", f"INSERT INTO {s}.t VALUES (1), (2)")
    config = pg.config(**{"snapshot.mode": "initial_only"})
    lake = tmp_path / "lake"
    assert land(config, lake).landed == 2
    slots = pg.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (pg.slot,))
    assert slots == []  # nothing will read it again, so it must not retain WAL
    pg.sql(f"INSERT INTO {s}.t VALUES (3)")
    assert land(config, lake).landed == 0


TYPES_DDL = """
CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN {s}.price AS numeric(8, 2);
CREATE TABLE {s}.all_types (
  id int PRIMARY KEY, c_bool boolean, c_bit1 bit(1), c_bits bit(10), c_varbit varbit(8),
  c_int2 smallint, c_int4 integer, c_int8 bigint, c_float4 real, c_float8 double precision,
  c_numeric numeric(10, 3), c_numeric_free numeric, c_money money,
  c_char char(3), c_varchar varchar(20), c_text text, c_inet inet, c_cidr cidr,
  c_macaddr macaddr, c_macaddr8 macaddr8, c_int4range int4range, c_daterange daterange,
  c_date date, c_time time, c_time3 time(3), c_timetz timetz, c_ts timestamp,
  c_ts3 timestamp(3), c_tstz timestamptz, c_interval interval, c_bytea bytea,
  c_json json, c_jsonb jsonb, c_xml xml, c_uuid uuid, c_mood {s}.mood, c_price {s}.price,
  c_point point, c_box box, c_polygon polygon, c_int_array int[], c_text_array text[],
  c_oid oid, c_tsvector tsvector
);
"""
TYPES_ROW = """
INSERT INTO {s}.all_types VALUES (
  1, true, B'1', B'0000000011', B'101', -2, 40000, 9000000000, 1.5, 2.25,
  1234.567, 3.14159, 12.34, 'ab', 'varchar', 'text', '192.168.1.1', '10.0.0.0/8',
  '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05', '[1,5)', '[2020-01-01,2020-02-01)',
  '2020-03-04', '10:11:12.123456', '10:11:12.123', '10:11:12+02', '2018-06-20 15:13:16.945104',
  '2018-06-20 15:13:16.945', '2018-06-20 15:13:16.5+02', '1 year 2 months 3 days 04:05:06.78',
  '\\x0102ff', '{{"a": 1}}', '{{"b": [1, 2]}}', '<x>1</x>', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11',
  'happy', 9.99, '(1.5,-2)', '((0,0),(1,1))', '((0,0),(1,0),(1,1))', '{{1,NULL,3}}',
  '{{"a,b",c}}', 4242, 'a fat cat'
);
"""


def test_every_type_of_the_guide(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(TYPES_DDL.format(s=s), TYPES_ROW.format(s=s))
    config = pg.config()
    lake = tmp_path / "lake"
    land(config, lake)
    # the same row streamed must look exactly like the snapshot row
    pg.sql(
        f"INSERT INTO {s}.all_types SELECT 2, c_bool, c_bit1, c_bits, c_varbit, c_int2, c_int4,"
        " c_int8, c_float4, c_float8, c_numeric, c_numeric_free, c_money, c_char, c_varchar,"
        " c_text, c_inet, c_cidr, c_macaddr, c_macaddr8, c_int4range, c_daterange, c_date,"
        " c_time, c_time3, c_timetz, c_ts, c_ts3, c_tstz, c_interval, c_bytea, c_json, c_jsonb,"
        " c_xml, c_uuid, c_mood, c_price, c_point, c_box, c_polygon, c_int_array, c_text_array,"
        f" c_oid, c_tsvector FROM {s}.all_types WHERE id = 1"
    )
    land(config, lake)
    snapshot_row, streamed_row = (r["value"]["after"] for r in data(lake))
    streamed_row["id"] = 1
    assert streamed_row == snapshot_row
    row = snapshot_row
    b64 = base64.b64decode
    assert row["c_bool"] is True and row["c_bit1"] is True
    assert b64(row["c_bits"]) == b"\x03\x00" and row["c_varbit"] == "101"
    assert (row["c_int2"], row["c_int4"], row["c_int8"]) == (-2, 40000, 9000000000)
    assert (row["c_float4"], row["c_float8"]) == (1.5, 2.25)
    assert int.from_bytes(b64(row["c_numeric"]), "big", signed=True) == 1234567
    assert row["c_numeric_free"]["scale"] == 5
    assert int.from_bytes(b64(row["c_money"]), "big", signed=True) == 1234
    assert (row["c_char"], row["c_varchar"], row["c_text"]) == ("ab ", "varchar", "text")
    assert (row["c_inet"], row["c_cidr"]) == ("192.168.1.1", "10.0.0.0/8")
    assert row["c_macaddr"] == "08:00:2b:01:02:03" and row["c_int4range"] == "[1,5)"
    assert row["c_date"] == 18325
    assert row["c_time"] == 36672123456 and row["c_time3"] == 36672123
    assert row["c_timetz"] == "08:11:12Z"
    assert row["c_ts"] == 1529507596945104 and row["c_ts3"] == 1529507596945
    assert row["c_tstz"] == "2018-06-20T13:13:16.500Z"
    assert row["c_interval"] == "P1Y2M3DT4H5M6.78S"  # interval.handling.mode=string: exact
    assert b64(row["c_bytea"]) == b"\x01\x02\xff"
    assert orjson.loads(row["c_json"]) == {"a": 1} and orjson.loads(row["c_jsonb"]) == {"b": [1, 2]}
    assert row["c_xml"] == "<x>1</x>" and row["c_uuid"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert row["c_mood"] == "happy"
    assert int.from_bytes(b64(row["c_price"]), "big", signed=True) == 999
    assert (row["c_point"]["x"], row["c_point"]["y"]) == (1.5, -2.0)
    assert row["c_box"] == "(1,1),(0,0)" and row["c_polygon"] == "((0,0),(1,0),(1,1))"
    assert row["c_int_array"] == [1, None, 3] and row["c_text_array"] == ["a,b", "c"]
    assert row["c_oid"] == 4242 and row["c_tsvector"] == "'a' 'cat' 'fat'"
    # the Connect schema registered for the table names the semantic types
    schemas = DeltaTable(str(lake / "bronze" / "schemas")).to_pyarrow_table().to_pylist()
    envelope = next(
        orjson.loads(x[S.SCHEMA_JSON])
        for x in schemas
        if (x[S.SCHEMA_NAME] or "").endswith("all_types.Envelope")
    )
    after = next(f for f in envelope["fields"] if f["field"] == "after")
    names = {f["field"]: f.get("name") for f in after["fields"]}
    assert names["c_tstz"] == "io.debezium.time.ZonedTimestamp"
    assert names["c_mood"] == "io.debezium.data.Enum"
    assert names["c_interval"] == "io.debezium.time.Interval"
    assert names["c_point"] == "io.debezium.data.geometry.Point"


def test_value_handling_modes(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.m (id int PRIMARY KEY, n numeric(6,2), b bytea, i interval)",
        f"INSERT INTO {s}.m VALUES (1, 12.5, '\\x0aff', '1 day 1 second')",
    )
    config = pg.config(
        **{
            "decimal.handling.mode": "string",
            "binary.handling.mode": "hex",
            "interval.handling.mode": "string",
        }
    )
    lake = tmp_path / "lake"
    land(config, lake)
    assert data(lake)[0]["value"]["after"] == {
        "id": 1,
        "n": "12.50",
        "b": "0aff",
        "i": "P0Y0M1DT0H0M1S",
    }


def row_fields(lake: Path, record: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The ``after`` field schemas, by column, of the envelope schema ``record`` was landed with."""
    schemas = DeltaTable(str(lake / "bronze" / "schemas")).to_pyarrow_table().to_pylist()
    envelope = next(
        orjson.loads(x[S.SCHEMA_JSON])
        for x in schemas
        if x[S.SCHEMA_ID] == record[S.VALUE_SCHEMA_ID]
    )
    after = next(f for f in envelope["fields"] if f["field"] == "after")
    return {f["field"]: f for f in after["fields"]}


UNREPRODUCIBLE = "medallion.default.unreproducible"


def test_added_columns_carry_the_value_existing_rows_show(pg: Pg, tmp_path: Path) -> None:
    """Contract C4: a column added to a table with rows gets, as its schema's ``default``, the
    value those rows show (``attmissingval``); a volatile default is flagged instead."""
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.orders (id int PRIMARY KEY, qty int DEFAULT 1, at0 timestamptz"
        " DEFAULT now())",
        f"CREATE TABLE {s}.draws (id int PRIMARY KEY)",
        f"INSERT INTO {s}.orders (id) VALUES (1)",
        f"INSERT INTO {s}.draws VALUES (1)",
    )
    config = pg.config()
    lake = tmp_path / "lake"
    land(config, lake)
    pg.sql(
        f"ALTER TABLE {s}.orders ADD COLUMN channel text DEFAULT 'web'",
        f"ALTER TABLE {s}.orders ADD COLUMN placed timestamptz DEFAULT now()",
        f"ALTER TABLE {s}.orders ADD COLUMN price numeric(6,2) NOT NULL DEFAULT 9.5",
        f"ALTER TABLE {s}.orders ADD COLUMN note text",
        f"ALTER TABLE {s}.draws ADD COLUMN r float8 DEFAULT random()",
        f"ALTER TABLE {s}.draws ADD COLUMN c text DEFAULT 'x'",
        f"INSERT INTO {s}.orders (id) VALUES (2)",
        f"INSERT INTO {s}.draws (id) VALUES (2)",
    )
    land(config, lake)
    # what the rows that existed before the ALTER show, read from the source itself
    old = pg.query(f"SELECT channel, placed, price FROM {s}.orders WHERE id = 1")[0]
    assert old[0] == "web" and old[2] == Decimal("9.50")
    snapshot, streamed = data(lake, "orders")
    fields = row_fields(lake, streamed)
    assert fields["channel"]["default"] == "web"
    placed = fields["placed"]["default"]  # now() was evaluated once, at the ALTER
    assert dt.datetime.fromisoformat(placed) == old[1]
    assert fields["price"]["default"] == base64.b64encode(b"\x03\xb6").decode()  # 950
    assert "default" not in fields["note"] and "parameters" not in fields["note"]
    assert fields["qty"]["default"] == 1  # a constant default, as Debezium 3.x writes it
    assert "default" not in fields["at0"]  # now() of a column the table was created with
    assert all(UNREPRODUCIBLE not in f.get("parameters", {}) for f in fields.values())
    # draws: random() rewrote the table; 'x' of the next ADD has attmissingval again
    draws = row_fields(lake, data(lake, "draws")[-1])
    assert "default" not in draws["r"]
    assert "random()" in draws["r"]["parameters"][UNREPRODUCIBLE]
    assert draws["c"]["default"] == "x" and "parameters" not in draws["c"]
    assert "default" not in row_fields(lake, snapshot).get("channel", {})


def test_filters_masks_and_key_columns(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.customers (id int PRIMARY KEY, email text, secret text, note text)",
        f"CREATE TABLE {s}.ignored (id int PRIMARY KEY)",
        f"CREATE TABLE {s}.events (ref text, payload text)",
        f"ALTER TABLE {s}.events REPLICA IDENTITY FULL",  # keyless: updates need FULL
        f"INSERT INTO {s}.customers VALUES (1, 'a@x.org', 'pw', 'long note text')",
        f"INSERT INTO {s}.ignored VALUES (1)",
        f"INSERT INTO {s}.events VALUES ('e1', 'p')",
    )
    config = pg.config(
        **{
            "table.include.list": f"{s}\\.customers,{s}\\.events",
            "column.exclude.list": f"{s}\\.customers\\.secret",
            "column.mask.with.3.chars": f"{s}\\.customers\\.email",
            "column.truncate.to.4.chars": f"{s}\\.customers\\.note",
            "message.key.columns": f"{s}\\.events:ref",
            "publication.autocreate.mode": "filtered",
        }
    )
    lake = tmp_path / "lake"
    land(config, lake)
    pg.sql(
        f"INSERT INTO {s}.customers VALUES (2, 'b@x.org', 'pw2', 'another')",
        f"INSERT INTO {s}.ignored VALUES (2)",
        f"UPDATE {s}.events SET payload = 'q'",
    )
    land(config, lake)
    got = [(r[S.COLLECTION], r["key"], r["value"]["after"]) for r in data(lake)]
    assert got == [
        (f"{s}.customers", {"id": 1}, {"id": 1, "email": "***", "note": "long"}),
        (f"{s}.events", {"ref": "e1"}, {"ref": "e1", "payload": "p"}),
        (f"{s}.customers", {"id": 2}, {"id": 2, "email": "***", "note": "anot"}),
        (f"{s}.events", {"ref": "e1"}, {"ref": "e1", "payload": "q"}),
    ]
    published = pg.query(
        "SELECT tablename FROM pg_publication_tables WHERE pubname = %s ORDER BY 1",
        (pg.publication,),
    )
    assert published == [("customers",), ("events",)]


def test_heartbeats_advance_the_slot_while_captured_tables_are_idle(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(f"CREATE TABLE {s}.quiet (id int PRIMARY KEY)", f"CREATE TABLE {s}.busy (id int)")
    config = pg.config(**{"table.include.list": f"{s}\\.quiet", "heartbeat.interval.ms": 100})
    lake = tmp_path / "lake"
    land(config, lake)
    before = pg.query(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
        (pg.slot,),
    )[0][0]
    pg.sql(f"INSERT INTO {s}.busy SELECT generate_series(1, 1000)")
    land(config, lake)
    after = pg.query(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
        (pg.slot,),
    )[0][0]
    assert parse_lsn(after) > parse_lsn(before)
    assert any(r[S.KIND] == "heartbeat" for r in rows(lake))
    assert not data(lake)


def test_dropped_slot_is_reported_or_resnapshotted(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(f"CREATE TABLE {s}.t (id int PRIMARY KEY)", f"INSERT INTO {s}.t VALUES (1)")
    config = pg.config()
    lake = tmp_path / "lake"
    land(config, lake)
    pg.sql(sql.SQL("SELECT pg_drop_replication_slot({})").format(sql.Literal(pg.slot)))
    with pytest.raises(StageFailed) as info:
        land(config, lake)
    assert isinstance(info.value.__cause__, CaptureError)
    assert "does not exist" in str(info.value) and "when_needed" in str(info.value)
    pg.sql(f"INSERT INTO {s}.t VALUES (2)")
    land(pg.config(**{"snapshot.mode": "when_needed"}), lake)
    snapshots = [r for r in data(lake) if r["value"]["op"] == "r"]
    assert [r["key"]["id"] for r in snapshots] == [1, 1, 2]
    assert_positions_unique_and_ordered(lake)


def test_extension_and_unknown_types(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    # Extensions live in public, shared by every test of the server: an extension exists once
    # per database, and the type-fidelity tests need hstore's functions on the search path.
    pg.sql(
        "CREATE EXTENSION IF NOT EXISTS hstore SCHEMA public",
        "CREATE EXTENSION IF NOT EXISTS ltree SCHEMA public",
        "CREATE EXTENSION IF NOT EXISTS citext SCHEMA public",
        f"CREATE TYPE {s}.pair AS (n int, t text)",  # no Debezium mapping: captured as text
        f"CREATE TABLE {s}.ext (id int PRIMARY KEY, h public.hstore, l public.ltree,"
        f" c public.citext, hs public.hstore[], p {s}.pair)",
        f"INSERT INTO {s}.ext VALUES (1, 'a=>1, b=>NULL', 'top.science', 'MiXeD',"
        " ARRAY['x=>y']::public.hstore[], ROW(1, 'x'))",
    )
    lake = tmp_path / "lake"
    land(pg.config(), lake)
    pg.sql(f"INSERT INTO {s}.ext SELECT 2, h, l, c, hs, p FROM {s}.ext")
    land(pg.config(), lake)
    snapshot_row, streamed_row = (r["value"]["after"] for r in data(lake))
    assert orjson.loads(snapshot_row["h"]) == {"a": "1", "b": None}
    assert snapshot_row["l"] == "top.science" and snapshot_row["c"] == "MiXeD"
    assert [orjson.loads(x) for x in snapshot_row["hs"]] == [{"x": "y"}]
    assert snapshot_row["p"] == "(1,x)"
    streamed_row["id"] = 1
    assert streamed_row == snapshot_row
    as_map = tmp_path / "map"
    pg.sql(f"DELETE FROM {s}.ext WHERE id = 2")
    land(pg.config(**{"hstore.handling.mode": "map", "slot.name": pg.slot + "_m"}), as_map)
    try:
        assert data(as_map)[0]["value"]["after"]["h"] == {"a": "1", "b": None}
    finally:
        pg.sql(sql.SQL("SELECT pg_drop_replication_slot({})").format(sql.Literal(pg.slot + "_m")))


def test_a_foreign_slot_is_never_dropped(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.t (id int PRIMARY KEY)",
        sql.SQL("SELECT pg_create_logical_replication_slot({}, 'pgoutput')").format(
            sql.Literal(pg.slot)
        ),
    )
    with pytest.raises(StageFailed) as info:
        land(pg.config(), tmp_path / "lake")
    assert "not created by this agent" in str(info.value)
    assert pg.query("SELECT 1 FROM pg_replication_slots WHERE slot_name = %s", (pg.slot,))


def test_partitioned_tables_are_captured_per_partition(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.m (id int, k int, PRIMARY KEY (id, k)) PARTITION BY LIST (k)",
        f"CREATE TABLE {s}.m_1 PARTITION OF {s}.m FOR VALUES IN (1)",
        f"CREATE TABLE {s}.m_2 PARTITION OF {s}.m FOR VALUES IN (2)",
        f"INSERT INTO {s}.m VALUES (1, 1), (2, 2)",
    )
    lake = tmp_path / "lake"
    land(pg.config(), lake)
    pg.sql(f"INSERT INTO {s}.m VALUES (3, 1), (4, 2)")
    land(pg.config(), lake)
    got = [(r[S.COLLECTION], r["value"]["op"], r["key"]["id"]) for r in data(lake)]
    assert got == [
        (f"{s}.m_1", "r", 1),
        (f"{s}.m_2", "r", 2),
        (f"{s}.m_1", "c", 3),
        (f"{s}.m_2", "c", 4),
    ]


def raw_config(pg: Pg, **extra: Any) -> dict[str, Any]:
    """The corner's source config as YAML would give it (for child processes and drivers)."""
    config = pg.config(**extra)
    return {
        "name": config.name,
        "connector": "postgresql",
        "database.hostname": config.database_hostname,
        "database.port": config.database_port,
        "database.user": config.database_user,
        "database.dbname": config.database_dbname,
        "topic.prefix": "srv",
        "slot.name": pg.slot,
        "publication.name": pg.publication,
        "schema.include.list": pg.schema,
        "skipped.operations": "none",
        **extra,
    }
