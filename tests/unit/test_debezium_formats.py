"""What Debezium and the usual topic dumps really write, read by the debezium_json source.

Table-driven: every line format and field variant, with the seed documents' example text where
one exists (``shared/seeds/000_*.txt`` is the Debezium 1.2 guide). The source is driven through
``read_batch`` on real files; bronze's Delta tables are covered by the integration tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze import schema as S
from bronze.batch import BatchBuilder
from bronze.envelope import classify, normalize_tx_id
from bronze.positions import ArrivalPosition, decode_position
from capture.debezium_json.config import DebeziumJsonSourceConfig
from capture.debezium_json.formats import dumps, from_cloudevent, parse_line
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.config import load_config
from pipeline.errors import EnvelopeError

pytestmark = pytest.mark.unit

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"


def fixture_value(name: str) -> dict[str, Any]:
    value: dict[str, Any] = json.loads((FIXTURES / f"{name}.json").read_text())["value"]
    return value


def pg_source(lsn: int | str, tx: int | str = 565, **extra: Any) -> dict[str, Any]:
    return {
        "version": "3.4.0.Final",
        "connector": "postgresql",
        "name": "pg",
        "ts_ms": 1700000000000,
        "snapshot": "false",
        "db": "shop",
        "schema": "public",
        "table": "orders",
        "txId": tx,
        "lsn": lsn,
        **extra,
    }


def data(source: dict[str, Any], tx: dict[str, Any] | None = None, op: str = "c") -> bytes:
    value: dict[str, Any] = {"before": None, "after": {"id": 1}, "source": source, "op": op}
    value["ts_ms"] = 1700000000001
    if tx is not None:
        value["transaction"] = tx
    return orjson.dumps({"key": {"id": 1}, "value": value})


def control(status: str, tx_id: str, count: int | None = None) -> bytes:
    value: dict[str, Any] = {
        "status": status,
        "id": tx_id,
        "event_count": count,
        "data_collections": None
        if count is None
        else [{"data_collection": "public.orders", "event_count": count}],
        "ts_ms": 1,
    }
    return orjson.dumps({"key": {"id": tx_id}, "value": value})


def read_all(
    tmp_path: Path, lines: list[bytes], max_events: int = 10_000, **kw: Any
) -> list[BatchBuilder]:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    source = DebeziumJsonSource("t", path, **kw)
    source.open(None)
    batches: list[BatchBuilder] = []
    while True:
        batch = source.read_batch(max_events=max_events, max_transaction_events=100_000)
        if batch.builder.counts.read == 0:
            return batches
        batches.append(batch.builder)


def rows(batches: list[BatchBuilder]) -> list[dict[str, Any]]:
    out = []
    for seq, b in enumerate(batches):
        table = b.events_table(agent_id="a", batch_seq=seq, ingest_ts=_NOW, offset={})
        out.extend(table.to_pylist())
    return out


def quarantined(batches: list[BatchBuilder]) -> list[str]:
    return [q.reason for b in batches for q in b._quarantine]


import datetime as _dt  # noqa: E402

_NOW = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)

# --- line formats ------------------------------------------------------------------------------

ROW = '{"before":null,"after":{"id":1},"source":{"connector":"mysql","name":"m","db":"inventory",'
ROW += '"table":"customers","file":"mysql-bin.000003","pos":154,"row":0,"ts_ms":1},"op":"c"}'
SCHEMA = '{"type":"struct","fields":[],"optional":false,"name":"m.inventory.customers.Envelope"}'
KEY = '{"id":1}'

# (id, line, format, expected key payload, value has schema, headers, topic)
LINES: list[tuple[str, str, str, Any, bool, tuple[tuple[str, str | None], ...], str | None]] = [
    ("bare-payload", ROW, "envelope", None, False, (), None),
    (
        "schema-and-payload",
        f'{{"schema":{SCHEMA},"payload":{ROW}}}',
        "envelope",
        None,
        True,
        (),
        None,
    ),
    ("schema-null", f'{{"schema":null,"payload":{ROW}}}', "envelope", None, False, (), None),
    ("payload-only", f'{{"payload":{ROW}}}', "envelope", None, False, (), None),
    (
        "kcat-J",  # kcat -J: key and payload as text, headers as a flat list, broker metadata
        json.dumps(
            {
                "topic": "m.inventory.customers",
                "partition": 0,
                "offset": 42,
                "tstype": "create",
                "ts": 1700000000000,
                "broker": 1,
                "headers": ["__debezium.oldkey", '{"id":0}'],
                "key": KEY,
                "payload": ROW,
            }
        ),
        "kafka_json",
        {"id": 1},
        False,
        (("__debezium.oldkey", '{"id":0}'),),
        "m.inventory.customers",
    ),
    (
        "kafka-json-unknown-members",
        json.dumps({"key": {"id": 1}, "value": json.loads(ROW), "leaderEpoch": 3}),
        "kafka_json",
        {"id": 1},
        False,
        (),
        None,
    ),
    ("console-key", f"{KEY}\t{ROW}", "key_tab_value", {"id": 1}, False, (), None),
    ("console-null-key", f"null\t{ROW}", "key_tab_value", None, False, (), None),
    (
        "console-timestamp-partition-offset-key",
        f"CreateTime:1700000000000\tPartition:0\tOffset:42\t{KEY}\t{ROW}",
        "console",
        {"id": 1},
        False,
        (),
        None,
    ),
    (
        "console-headers-key",  # header values are raw text; JSON values keep their commas
        f'__debezium.oldkey:{{"id":0,"k":"a"}},trace:abc\t{KEY}\t{ROW}',
        "console",
        {"id": 1},
        False,
        (("__debezium.oldkey", '{"id":0,"k":"a"}'), ("trace", "abc")),
        None,
    ),
    (
        "console-no-headers",
        f"LogAppendTime:5\tNO_HEADERS\t{KEY}\t{ROW}",
        "console",
        {"id": 1},
        False,
        (),
        None,
    ),
    ("console-headers-no-key", f"h:v\t{ROW}", "console", None, False, (("h", "v"),), None),
]


@pytest.mark.parametrize("line_format", ["given", "auto"])
@pytest.mark.parametrize(
    ("line", "fmt", "key", "has_schema", "headers", "topic"),
    [case[1:] for case in LINES],
    ids=[case[0] for case in LINES],
)
def test_line_formats(
    line: str,
    fmt: str,
    key: Any,
    has_schema: bool,
    headers: tuple[tuple[str, str | None], ...],
    topic: str | None,
    line_format: str,
) -> None:
    record, _, value_text = parse_line(
        line.encode(), fmt if line_format == "given" else "auto", "f:1"
    )
    assert record.key == key
    assert record.value == json.loads(ROW)
    assert (record.value_schema is not None) == has_schema
    assert record.headers == headers and record.topic == topic
    event = classify(record)
    assert (event.collection, event.op) == ("inventory.customers", "c")
    if value_text is not None:  # stored verbatim only when the text is exactly the payload
        assert json.loads(value_text) == json.loads(ROW)


def test_console_tombstone_and_a_json_line_with_tab_whitespace() -> None:
    tomb, _, _ = parse_line(f"{KEY}\tnull".encode(), "auto", "f:1")
    assert (tomb.key, tomb.value) == ({"id": 1}, None)
    spaced, _, _ = parse_line(ROW.replace('"op":', '"op":\t').encode(), "auto", "f:2")
    assert spaced.value == json.loads(ROW)


# Seed 000 line 5006, as printed (callout numbers removed): CloudEvents, JSON envelope, JSON data.
CLOUDEVENT = """{ "id" : "name:test_server;lsn:29274832;txId:565",
"source" : "/debezium/postgresql/test_server",
"specversion" : "1.0", "type" : "io.debezium.postgresql.datachangeevent",
"time" : "2020-01-13T13:55:39.738Z", "datacontenttype" : "application/json",
"iodebeziumop" : "r", "iodebeziumversion" : "1.2.4.Final", "iodebeziumconnector" : "postgresql",
"iodebeziumname" : "test_server", "iodebeziumtsms" : "1578923739738", "iodebeziumsnapshot" : "true",
"iodebeziumdb" : "postgres", "iodebeziumschema" : "s1", "iodebeziumtable" : "a",
"iodebeziumtxId" : "565", "iodebeziumlsn" : "29274832", "iodebeziumxmin" : null,
"iodebeziumtxid": "565", "iodebeziumtxtotalorder": "1", "iodebeziumtxdatacollectionorder": "1",
"data" : { "before" : null, "after" : { "pk" : 1, "name" : "Bob" } } }"""


def test_cloudevent_of_the_guide_maps_back_to_the_envelope() -> None:
    line = CLOUDEVENT.replace("\n", " ").encode()
    record, _, _ = parse_line(line, "auto", "f:1")
    value = record.value
    assert value is not None
    assert value["op"] == "r" and value["after"] == {"pk": 1, "name": "Bob"}
    assert value["source"] == {
        "version": "1.2.4.Final",
        "connector": "postgresql",
        "name": "test_server",
        "ts_ms": 1578923739738,
        "snapshot": "true",
        "db": "postgres",
        "schema": "s1",
        "table": "a",
        "txId": 565,
        "lsn": 29274832,
        "xmin": None,
    }
    assert value["transaction"] == {"id": "565", "total_order": 1, "data_collection_order": 1}
    assert ("ce_id", '"name:test_server;lsn:29274832;txId:565"') in record.headers
    event = classify(record)
    assert (event.collection, event.snapshot, event.source_ts_ms) == ("s1.a", "true", 1578923739738)
    plain = classify(parse_line(orjson.dumps({**value}), "envelope", "f:2")[0])
    assert (plain.collection, plain.op, plain.transaction) == (
        event.collection,
        event.op,
        event.transaction,
    )


def test_cloudevent_as_the_value_of_a_topic_dump_keeps_key_and_headers() -> None:
    """A topic written by CloudEventsConverter dumped with kcat -J: the value is the event."""
    event = orjson.loads(CLOUDEVENT.replace("\n", " "))
    line = orjson.dumps(
        {
            "topic": "test_server.s1.a",
            "key": '{"pk": 1}',
            "value": orjson.dumps(event).decode(),
            "headers": ["trace", "abc"],
        }
    )
    record, key_text, _ = parse_line(line, "auto", "f:1")
    assert record.key == {"pk": 1} and key_text == b'{"pk": 1}'
    assert record.topic == "test_server.s1.a"
    value = record.value
    assert value is not None and value["op"] == "r" and value["after"] == {"pk": 1, "name": "Bob"}
    assert ("trace", "abc") in record.headers
    assert ("ce_id", '"name:test_server;lsn:29274832;txId:565"') in record.headers
    assert classify(record).collection == "s1.a"


def test_a_tombstone_with_no_landed_record_before_it_is_quarantined(tmp_path: Path) -> None:
    """Its delete was quarantined (here: no table named), so nothing can order the tombstone;
    it must land in quarantine, not wait unconsumed in neither bronze table."""
    lines = [
        orjson.dumps({"key": {"id": 1}, "value": fixture_value("mysql_v0_5_create")}),
        orjson.dumps({"key": {"id": 1}, "value": None}),
    ]
    batches = read_all(tmp_path, lines, connector_hint="mysql")
    assert rows(batches) == []
    reasons = quarantined(batches)
    assert len(reasons) == 2 and "no position to order it" in reasons[1]


def test_cloudevent_with_schema_in_data_and_a_mongodb_one() -> None:
    data_schema = {
        "type": "struct",
        "fields": [{"type": "struct", "fields": [], "optional": True, "field": "after"}],
        "optional": False,
        "name": "x.Value",
    }
    event = {
        "id": "x",
        "source": "/debezium/mongodb/rs0",
        "specversion": "1.0",
        "iodebeziumop": "c",
        "iodebeziumconnector": "mongodb",
        "iodebeziumname": "fulfillment",
        "iodebeziumrs": "rs0",
        "iodebeziumcollection": "customers",
        "iodebeziumdb": "inventory",
        "iodebeziumord": 1,
        "iodebeziumtsms": "1558965508000",
        "iodebeziumfuture": "kept",
        "data": {"schema": data_schema, "payload": {"after": '{"_id": 1}'}},
    }
    value, schema, _ = from_cloudevent(event, "f:1")
    assert value["after"] == '{"_id": 1}' and value["source"]["ord"] == 1
    assert value["source"]["future"] == "kept" and "transaction" not in value
    assert schema is not None and [f["field"] for f in schema["fields"]] == ["after", "op"]


BAD_FORMATS = [
    (
        CLOUDEVENT.replace("\n", " ").replace(
            '"data" : { "before" : null, "after" : { "pk" : 1, "name" : "Bob" } }',
            '"data" : "AAAAAAEAAgICAg=="',
        ),
        "data.serializer.type=json",
    ),
    (
        CLOUDEVENT.replace("\n", " ").replace('"iodebeziumop" : "r",', ""),
        "extension.attributes.enable",
    ),
    ("Struct{after=Struct{id=1},op=c,ts_ms=1}", "StringConverter"),
    ("{before=null, after={id=1}, op=c}", "StringConverter"),
    ('{"schema": 5, "payload": {"op": "c"}}', "'schema' must be a JSON object or null"),
    ('{"key": "{\\"id\\"", "payload": null}', "key is not valid JSON"),
    ('{"key": null, "payload": null, "payload_error": "Broker: not available"}', "payload_error"),
    ("a\tb\tc\td\te\tf", "not valid JSON"),
]


@pytest.mark.parametrize(("line", "fragment"), BAD_FORMATS)
def test_unreadable_layouts_name_the_fix(line: str, fragment: str) -> None:
    with pytest.raises(EnvelopeError) as info:
        parse_line(line.encode(), "auto", "f:7")
    assert fragment in info.value.reason and info.value.origin == "f:7"


# --- field variants of Debezium 1.x to 3.x -----------------------------------------------------

SOURCES: list[tuple[str, dict[str, Any]]] = [
    (
        "pg-1.2-lsn-txid-only",
        {k: v for k, v in pg_source(100).items() if k != "ts_ms"} | {"ts_usec": 5},
    ),
    ("pg-1.x-sequence-text", pg_source(100, sequence='["90","100"]')),
    (
        "pg-string-numbers",
        pg_source("100", tx="565", ts_ms="1700000000000", sequence='["90","100"]'),
    ),
    (
        "pg-3.x-commit-lsn-ts-us-ns",
        pg_source(100, commit_lsn="120", ts_us=1, ts_ns=1000, xmin=None),
    ),
    ("pg-lsn-text", pg_source("0/64", sequence='["0/5A","0/64"]')),
    (
        "mysql-string-pos",
        {
            "connector": "mysql",
            "name": "m",
            "db": "i",
            "table": "c",
            "file": "mysql-bin.000003",
            "pos": "154",
            "row": "0",
            "ts_ms": "1",
            "snapshot": "false",
            "server_id": "223344",
        },
    ),
    (
        "sqlserver-string-serial",
        {
            "connector": "sqlserver",
            "name": "s",
            "db": "testDB",
            "schema": "dbo",
            "table": "c",
            "change_lsn": "00000025:00000d98:0002",
            "commit_lsn": "00000025:00000d98:0003",
            "event_serial_no": "2",
            "ts_ms": 1,
            "snapshot": "false",
        },
    ),
    (
        "mongodb-2.x",
        {
            "connector": "mongodb",
            "name": "f",
            "rs": "rs0",
            "db": "inventory",
            "collection": "customers",
            "ord": "31",
            "ts_ms": "1558965508000",
            "txnNumber": "7",
            "lsid": "abc",
            "snapshot": "false",
        },
    ),
]


@pytest.mark.parametrize(("source",), [(s,) for _, s in SOURCES], ids=[n for n, _ in SOURCES])
def test_source_field_sets_land(tmp_path: Path, source: dict[str, Any]) -> None:
    value: dict[str, Any] = {"before": None, "after": {"id": 1}, "source": source, "op": "c"}
    if source["connector"] == "mongodb":
        value["after"] = '{"_id": 1}'
    line = orjson.dumps({"key": {"id": 1}, "value": value})
    batches = read_all(tmp_path, [line])
    assert quarantined(batches) == []
    (row,) = rows(batches)
    assert row[S.COLLECTION] is not None and row[S.POSITION]
    decode_position(row[S.CONNECTOR], row[S.POSITION])


def test_source_ts_from_ts_us_or_ts_ns_when_ts_ms_is_absent(tmp_path: Path) -> None:
    base = {k: v for k, v in pg_source(100, sequence='["90","100"]').items() if k != "ts_ms"}
    lines = [data(base | {"ts_us": 1_700_000_000_123_456}), data(base | {"ts_ns": 2_000_000_000})]
    assert [r[S.SOURCE_TS_MS] for r in rows(read_all(tmp_path, lines))] == [1_700_000_000_123, 2000]


# --- transaction identity (contract C3) --------------------------------------------------------


def pg_tx(tx_id: str, order: int | str) -> dict[str, Any]:
    return {"id": tx_id, "total_order": order, "data_collection_order": order}


TX_CASES: list[tuple[str, list[bytes], str]] = [
    (
        "postgresql-3.x-txid-lsn",  # every record of the transaction carries another LSN
        [
            control("BEGIN", "565:24023100"),
            data(pg_source(24023110, sequence='["24023000","24023110"]'), pg_tx("565:24023110", 1)),
            data(
                pg_source(24023120, sequence='["24023000","24023120"]'), pg_tx("565:24023120", "2")
            ),
            control("END", "565:24023130", 2),
        ],
        "565",
    ),
    (
        "postgresql-1.x-plain-id",
        [
            control("BEGIN", "571"),
            data(pg_source(200, tx=571, sequence='["150","200"]'), pg_tx("571", "1")),
            control("END", "571", 1),
        ],
        "571",
    ),
    (
        "yugabytedb-guide-ids",  # seed 004 lines 128/136: BEGIN 571:53195829, END 571:53195832
        [
            orjson.dumps({"key": None, "value": fixture_value("yugabytedb_transaction_begin")}),
            data(
                pg_source(53195830, tx=571, sequence='["53195800","53195830"]')
                | {"connector": "YugabyteDB"},
                pg_tx("571:53195830", 1),
            ),
            orjson.dumps({"key": None, "value": fixture_value("yugabytedb_transaction_end")}),
        ],
        "571",
    ),
    (
        "mysql-gtid-used-as-written",
        [
            control("BEGIN", "3e11fa47-71ca-11e1-9e33-c80aa9429562:23"),
            data(
                {
                    "connector": "mysql",
                    "name": "m",
                    "db": "i",
                    "table": "c",
                    "ts_ms": 1,
                    "file": "mysql-bin.000003",
                    "pos": 154,
                    "row": 0,
                    "gtid": "3e11fa47-71ca-11e1-9e33-c80aa9429562:23",
                },
                {
                    "id": "3e11fa47-71ca-11e1-9e33-c80aa9429562:23",
                    "total_order": "1",
                    "data_collection_order": "1",
                },
            ),
            control("END", "3e11fa47-71ca-11e1-9e33-c80aa9429562:23", 1),
        ],
        "3e11fa47-71ca-11e1-9e33-c80aa9429562:23",
    ),
    (
        "sqlserver-commit-lsn",
        [
            control("BEGIN", "00000025:00000d08:0025"),
            data(
                {
                    "connector": "sqlserver",
                    "name": "s",
                    "db": "testDB",
                    "schema": "dbo",
                    "table": "c",
                    "ts_ms": 1,
                    "change_lsn": "00000025:00000d08:0002",
                    "commit_lsn": "00000025:00000d08:0025",
                    "event_serial_no": "1",
                },
                pg_tx("00000025:00000d08:0025", 1),
            ),
            control("END", "00000025:00000d08:0025", 1),
        ],
        "00000025:00000d08:0025",
    ),
]


@pytest.mark.parametrize(
    ("lines", "expected"), [c[1:] for c in TX_CASES], ids=[c[0] for c in TX_CASES]
)
def test_begin_end_and_data_share_one_tx_id(
    tmp_path: Path, lines: list[bytes], expected: str
) -> None:
    batches = read_all(tmp_path, lines)
    assert quarantined(batches) == []
    landed = rows(batches)
    assert len(landed) == len(lines)
    assert {r[S.TX_ID] for r in landed} == {expected}
    assert [r[S.TX_ORDER] for r in landed if r[S.KIND] == "data"] == list(range(1, len(lines) - 1))
    # The raw id stays in the envelope as written.
    written = [orjson.loads(line)["value"] for line in lines]
    assert [orjson.loads(r[S.VALUE_JSON]) for r in landed] == written


def test_batches_close_only_on_normalised_transaction_boundaries(tmp_path: Path) -> None:
    lines, lsn = [], 1000
    for tx in range(700, 720):
        lines.append(control("BEGIN", f"{tx}:{lsn}"))
        for order in range(1, 4):
            lsn += 10
            src = pg_source(lsn, tx=tx, sequence=f'["{tx * 10}","{lsn}"]')
            lines.append(data(src, pg_tx(f"{tx}:{lsn}", order)))
        lines.append(control("END", f"{tx}:{lsn + 5}", 3))
    batches = read_all(tmp_path, lines, max_events=4)
    assert len(batches) > 10
    seen: dict[str, set[int]] = {}
    for seq, b in enumerate(batches):
        for r in rows([b]):
            seen.setdefault(r[S.TX_ID], set()).add(seq)
    assert len(seen) == 20 and all(len(s) == 1 for s in seen.values())


def test_normalize_tx_id_only_touches_txid_lsn_of_pg_family() -> None:
    assert normalize_tx_id("postgresql", "565:24023128") == "565"
    assert normalize_tx_id("yugabytedb", "571:53195829") == "571"
    assert normalize_tx_id("postgresql", "565") == "565"
    assert normalize_tx_id("mysql", "565:1") == "565:1"
    assert normalize_tx_id("postgresql", "abc:1") == "abc:1"


# --- what is quarantined, and why --------------------------------------------------------------


def test_unnamed_tables_are_quarantined_never_landed(tmp_path: Path) -> None:
    """Oracle 2.3 (seed 002:774) and Debezium 0.5 MySQL (seed 001:403) name no table."""
    lines = [
        orjson.dumps({"key": None, "value": fixture_value("oracle_create")}),
        orjson.dumps({"key": None, "value": fixture_value("mysql_v0_5_create")}),
    ]
    batches = read_all(tmp_path, lines, connector_hint="oracle")
    assert rows(batches) == []
    first, second = quarantined(batches)
    assert "'source.table' is missing or null" in first and "capture with a Debezium" in first
    assert "'source.table'" in second


def test_sourceless_records_need_order_by_arrival(tmp_path: Path) -> None:
    value = {"before": None, "after": {"id": 1}, "op": "c", "ts_ms": 1}
    line = orjson.dumps({"topic": "pg.public.orders", "key": {"id": 1}, "value": value})
    (reason,) = quarantined(read_all(tmp_path, [line], connector_hint="postgresql"))
    assert "order.by: arrival" in reason
    (reason,) = quarantined(read_all(tmp_path, [line], order_by="arrival"))
    assert "connector.hint" in reason
    no_topic = orjson.dumps({"key": {"id": 1}, "value": value})
    batches = read_all(
        tmp_path, [line, line, no_topic], order_by="arrival", connector_hint="postgresql"
    )
    (reason,) = quarantined(batches)
    assert "no usable topic" in reason
    landed = rows(batches)
    assert [r[S.COLLECTION] for r in landed] == ["public.orders"] * 2
    assert [decode_position("postgresql", r[S.POSITION]) for r in landed] == [
        ArrivalPosition(0),
        ArrivalPosition(1),
    ]
    assert landed[0][S.SOURCE_PARTITION] == "pg"


def test_arrival_order_keeps_source_records_in_reading_order(tmp_path: Path) -> None:
    # Positions that go backwards in the source (a replay) still land in reading order.
    lines = [
        data(pg_source(300, sequence='["250","300"]')),
        data(pg_source(200, sequence='["150","200"]')),
    ]
    landed = rows(read_all(tmp_path, lines, order_by="arrival"))
    assert [r[S.ORIGIN].rsplit(":", 1)[1] for r in sorted(landed, key=lambda r: r[S.POSITION])] == [
        "1",
        "2",
    ]


def test_schema_change_without_connector_takes_its_streams(tmp_path: Path) -> None:
    ddl = fixture_value("mysql_schema_change")  # 1.2 guide: source without "connector"
    mysql = {
        "connector": "mysql",
        "name": "mysql-server-1",
        "db": "inventory",
        "table": "c",
        "ts_ms": 1,
        "file": "mysql-bin.000003",
        "pos": 100,
        "row": 0,
    }
    lines = [orjson.dumps({"key": None, "value": ddl})]
    (reason,) = quarantined(read_all(tmp_path, lines))
    assert "connector.hint" in reason
    batches = read_all(tmp_path, [data(mysql), *lines])
    assert quarantined(batches) == [] and [r[S.CONNECTOR] for r in rows(batches)] == ["mysql"] * 2


def test_numbers_beyond_double_precision_land_exactly_when_the_line_holds_the_payload(
    tmp_path: Path,
) -> None:
    """Key and value text of a console line is stored as produced: no digit is lost."""
    big = 123456789012345678901234567890
    source = pg_source(100, sequence='["90","100"]')
    value: dict[str, Any] = {"before": None, "source": source}
    value["after"] = {"id": big, "d": "0.1234567890123456789"}
    value["op"] = "c"
    text = (
        json.dumps({"id": big})
        + "\t"
        + json.dumps(value).replace('"0.1234567890123456789"', "0.1234567890123456789")
    )
    (row,) = rows(read_all(tmp_path, [text.encode()]))
    assert str(big) in row[S.VALUE_JSON] and "0.1234567890123456789" in row[S.VALUE_JSON]
    assert row[S.KEY_JSON] == json.dumps({"id": big})


@pytest.mark.parametrize("big", [10**40, 2**64, -(2**63) - 1, 2**64 - 1])
@pytest.mark.parametrize("layout", ["kafka_json", "schema_payload"])
def test_integers_beyond_int64_land_exactly_when_bronze_writes_the_payload_again(
    tmp_path: Path, big: int, layout: str
) -> None:
    """orjson reads ``10^40`` as ``1e+40``: a payload taken out of the line and written again
    (key and value held as JSON, a ``{"schema", "payload"}`` wrapper) keeps the literal."""
    source = pg_source(100, sequence='["90","100"]', ts_ns=1700000000000000000)
    value: dict[str, Any] = {"before": None, "after": {"id": big}, "source": source, "op": "c"}
    if layout == "kafka_json":  # the chaos run's hostile huge-int line
        line = json.dumps({"key": {"id": big}, "value": value})
    else:
        line = json.dumps({"schema": None, "payload": value})
    (row,) = rows(read_all(tmp_path, [line.encode()]))
    assert json.loads(row[S.VALUE_JSON])["after"] == {"id": big}
    assert f'"id":{big}' in row[S.VALUE_JSON]
    if layout == "kafka_json":
        assert row[S.KEY_JSON] == f'{{"id":{big}}}'


def test_order_by_is_a_config_key_with_a_suggestion(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    config = tmp_path / "c.yaml"
    source = "{name: f, connector: debezium_json, path: data, %s: arrival}"
    config.write_text(f"lake: {{root: lake}}\nsources:\n  - {source % 'order.by'}\n")
    loaded = load_config(config).sources[0]
    assert isinstance(loaded, DebeziumJsonSourceConfig) and loaded.order_by == "arrival"
    config.write_text(f"lake: {{root: lake}}\nsources:\n  - {source % 'order.bye'}\n")
    with pytest.raises(Exception, match="did you mean 'order.by'"):
        load_config(config)


def test_a_decimal_no_double_holds_is_written_again_as_its_literal() -> None:
    literal = "12345678901234567890.123456789"
    line = f'{{"key": {{"id": 1}}, "value": {{"op": "c", "after": {{"n": {literal}}}}}}}'
    record, _key_text, value_text = parse_line(line.encode(), "kafka_json", "f:1")
    assert value_text is None  # the value was JSON in the line: bronze writes it again
    assert dumps(record.value) == f'{{"op":"c","after":{{"n":{literal}}}}}'
