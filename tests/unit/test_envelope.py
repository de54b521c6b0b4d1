"""Tests for bronze.envelope and bronze.connect_schema, checked against the Debezium docs."""

from __future__ import annotations

import base64
import dataclasses
import decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bronze import connect_schema as cs
from bronze.envelope import (
    HEADER_NEW_KEY,
    HEADER_OLD_KEY,
    ChangeEvent,
    ConnectRecord,
    Op,
    RecordKind,
    TransactionInfo,
    classify,
    data_record,
    heartbeat,
    message_record,
    parse_json_converter,
    primary_key_change,
    schema_change,
    to_json_converter,
    tombstone_for,
    transaction_begin,
    transaction_end,
    truncate_record,
)
from pipeline.errors import EnvelopeError
from tests.property_profiles import examples

pytestmark = pytest.mark.unit

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"
FIXTURES = sorted(FIXTURE_DIR.glob("*.json"))
CLASSIFIED = [p for p in FIXTURES if "expect" in orjson.loads(p.read_bytes())]
"""The examples that are Debezium records ``classify`` reads as printed (with an ``expect``)."""
NOT_JSON = [p for p in FIXTURES if "value_text" in orjson.loads(p.read_bytes())]
"""Printed text that is not JSON (skeletons, fragments), kept as text."""
SEED_FILES = (
    "000_6671c55e05303887.txt",
    "001_10bd6c0571536288.txt",
    "002_19d1f0cfe5696c7f.txt",
    "003_f967c621c7984b38.txt",
    "004_dd9096a65b4a819f.txt",
)
RESULTS = ("applied", "control", "bronze_quarantine", "silver_quarantine")


def _load(path: Path) -> dict[str, Any]:
    doc: dict[str, Any] = orjson.loads(path.read_bytes())
    return doc


def _text(part: Any) -> bytes | None:
    return None if part is None else orjson.dumps(part)


def _parse_fixture(doc: dict[str, Any]) -> ConnectRecord:
    return parse_json_converter(_text(doc["key"]), _text(doc["value"]), origin=doc["origin"])


def _is_wrapped(part: Any) -> bool:
    return isinstance(part, dict) and part.keys() == {"schema", "payload"}


PG_SOURCE = {
    "version": "2.5.0.Final",
    "connector": "postgresql",
    "name": "server1",
    "ts_ms": 1700000000000,
    "snapshot": "false",
    "db": "shop",
    "schema": "public",
    "table": "orders",
    "txId": 771,
    "lsn": 24023128,
    "xmin": None,
}


# --- fixtures from the Debezium documents --------------------------------------------------------


def test_fixture_set_covers_every_connector() -> None:
    connectors = {p.name.split("_", 1)[0] for p in CLASSIFIED}
    assert len(CLASSIFIED) >= 20
    assert connectors == set(cs.CONNECTORS)


@pytest.mark.parametrize("path", FIXTURES, ids=lambda p: p.stem)
def test_fixture_states_where_it_comes_from_and_what_it_must_become(path: Path) -> None:
    # The corpus contract of tests/fixtures/debezium/README.md; the integration test
    # tests/integration/test_seed_corpus.py lands and applies every example against it.
    doc = _load(path)
    seed, _, line = doc["origin"].rpartition(":")
    assert seed in SEED_FILES and int(line) > 0
    assert ("value" in doc) != ("value_text" in doc)
    assert isinstance(doc["group"], str) and isinstance(doc["topic"], str)
    assert isinstance(doc["order"], int) and isinstance(doc["repairs"], list)
    outcome = doc["outcome"]
    assert outcome["result"] in RESULTS and outcome["why"]
    if outcome["result"].endswith("quarantine"):
        assert outcome["reason"] and all(w == w.lower() for w in outcome["reason"])
    if outcome["result"] == "control":
        assert outcome["kind"] in ("transaction", "schema_change", "tombstone")
    if outcome["result"] != "applied":
        return
    assert "after" in outcome and ("cdc_key_contains" in outcome or "cdc_key" in outcome)
    later = outcome.get("superseded_by")
    if later is not None:
        # A later example (by source position) of the same key in the same source.
        other = _load(FIXTURE_DIR / f"{later}.json")
        assert other["group"] == doc["group"]
        assert (other["outcome"]["table"], other["outcome"]["cdc_key"]) == (
            outcome["table"],
            outcome["cdc_key"],
        )


def test_every_group_is_numbered_in_landing_order() -> None:
    orders: dict[str, list[int]] = {}
    for path in FIXTURES:
        doc = _load(path)
        orders.setdefault(doc["group"], []).append(doc["order"])
    for group, numbers in orders.items():
        assert sorted(numbers) == list(range(1, len(numbers) + 1)), group


@pytest.mark.parametrize("path", NOT_JSON, ids=lambda p: p.stem)
def test_printed_text_that_is_not_json_is_refused_by_the_parser(path: Path) -> None:
    doc = _load(path)
    with pytest.raises(EnvelopeError, match="value is not valid JSON"):
        parse_json_converter(None, doc["value_text"], origin=doc["origin"])


@pytest.mark.parametrize("path", CLASSIFIED, ids=lambda p: p.stem)
def test_fixture_classifies_to_its_expectation(path: Path) -> None:
    doc = _load(path)
    record = _parse_fixture(doc)
    event = classify(record, origin=doc["origin"], connector_hint=doc.get("connector_hint"))
    got = {
        "kind": event.kind.value,
        "op": None if event.op is None else event.op.value,
        "connector": event.connector,
        "collection": event.collection,
    }
    assert got == doc["expect"]


@pytest.mark.parametrize("path", CLASSIFIED, ids=lambda p: p.stem)
def test_fixture_round_trips_through_the_json_converter(path: Path) -> None:
    doc = _load(path)
    record = _parse_fixture(doc)
    for schemas_enable in (True, False):
        key_text, value_text = to_json_converter(record, schemas_enable=schemas_enable)
        again = parse_json_converter(key_text, value_text)
        expected = (
            record
            if schemas_enable
            else dataclasses.replace(record, key_schema=None, value_schema=None)
        )
        assert again == expected
        # What we write must read back as the documented JSON, in the form it was printed.
        for printed, text in ((doc["key"], key_text), (doc["value"], value_text)):
            if printed is None:
                assert text is None
            elif printed == {"schema": None, "payload": None}:
                # KAFKA-3832 (seed 001:652): JsonConverters of the time wrote a null value as
                # this envelope; ours writes a real null, the tombstone Kafka compacts on.
                assert text is None
            elif _is_wrapped(printed) == schemas_enable:
                assert text is not None and orjson.loads(text) == printed


def test_compact_doc_example_is_reproduced_byte_for_byte() -> None:
    # Oracle guide, Example 7.5: verbatim console-consumer output of JsonConverter.
    key = (
        '{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,'
        '"field":"product_id"}],"optional":false,'
        '"name":"inventory-connector-oracle.inventory.products_on_hand.Key"},'
        '"payload":{"product_id":101}}'
    )
    doc = _load(FIXTURE_DIR / "oracle_read_example_7_5.json")
    value = orjson.dumps(doc["value"]).decode()
    record = parse_json_converter(key, value)
    assert to_json_converter(record, schemas_enable=True) == (key, value)
    built = cs.struct(
        [cs.field("product_id", "int32")],
        name="inventory-connector-oracle.inventory.products_on_hand.Key",
    )
    assert record.key_schema == built
    assert orjson.dumps(built).decode() in key


def test_snapshot_is_normalised_from_booleans_strings_and_null() -> None:
    def snapshot(name: str) -> str | None:
        doc = _load(FIXTURE_DIR / f"{name}.json")
        return classify(_parse_fixture(doc), connector_hint=doc.get("connector_hint")).snapshot

    assert snapshot("postgresql_create") == "true"  # boolean true
    assert snapshot("postgresql_update") == "false"  # null
    assert snapshot("oracle_truncate") == "false"  # string "false"
    assert snapshot("sqlserver_v3_schema_change") == "true"  # string "true"
    assert snapshot("mysql_v0_5_create") == "true"
    assert snapshot("postgresql_tombstone") is None  # no source at all


def test_times_positions_and_transaction_metadata_are_extracted() -> None:
    v05 = _load(FIXTURE_DIR / "mysql_v0_5_update.json")
    event = classify(_parse_fixture(v05), connector_hint="mysql")
    assert event.source_ts_ms == 1465581 * 1000  # 0.x "ts_sec"
    assert event.ts_ms == 1465581029523

    end = classify(_parse_fixture(_load(FIXTURE_DIR / "postgresql_transaction_end.json")))
    assert end.tx_status == "END"
    assert end.transaction == TransactionInfo("571", None, None)
    assert end.tx_event_count == 2
    assert end.tx_data_collections == (("s1.a", 1), ("s2.a", 1))

    begin = classify(
        _parse_fixture(_load(FIXTURE_DIR / "yugabytedb_transaction_begin.json")),
        connector_hint="YugabyteDB",
    )
    assert (begin.tx_status, begin.tx_event_count, begin.tx_data_collections) == (
        "BEGIN",
        None,
        None,
    )
    assert begin.connector == "yugabytedb"
    assert begin.ts_ms == 1486500577125


def test_transaction_block_accepts_the_documented_numeric_strings() -> None:
    # Debezium 1.2 guide §"Change data event enrichment" prints the orders as strings; its source
    # is elided there, so a real one is supplied.
    value = {
        "before": None,
        "after": {"pk": "2", "aa": "1"},
        "source": PG_SOURCE,
        "op": "c",
        "ts_ms": "1580390884335",
        "transaction": {"id": "571", "total_order": "1", "data_collection_order": "1"},
    }
    event = classify(ConnectRecord({"pk": "2"}, value))
    assert event.transaction == TransactionInfo("571", 1, 1)
    assert event.ts_ms == 1580390884335


def test_delete_without_before_is_legal_when_the_key_names_the_row() -> None:
    value = {"before": None, "after": None, "source": PG_SOURCE, "op": "d", "ts_ms": 1}
    event = classify(ConnectRecord({"id": 7}, value))
    assert (event.kind, event.op, event.collection) == (RecordKind.DATA, Op.DELETE, "public.orders")


def test_kafka_3832_null_envelope_and_json_null_are_tombstones() -> None:
    for value in ('{"schema":null,"payload":null}', "null", None):
        record = parse_json_converter('{"id":1}', value)
        assert record.value is None
        assert classify(record, connector_hint="mysql").kind is RecordKind.TOMBSTONE


def test_key_and_value_may_differ_in_schemas_enable() -> None:
    value = orjson.dumps(
        {"schema": None, "payload": {"op": "r", "after": {"id": 1}, "source": PG_SOURCE}}
    )
    record = parse_json_converter(b'{"id":1}', value, headers=[("h", b'"x"')], topic="t")
    assert record.key == {"id": 1} and record.key_schema is None
    assert record.value is not None and record.value["op"] == "r"
    assert record.headers == (("h", '"x"'),) and record.topic == "t"
    assert classify(record).op is Op.READ


def test_fast_constructor_builds_what_the_dataclass_builds() -> None:
    event = classify(_parse_fixture(_load(FIXTURE_DIR / "mysql_create.json")))
    assert dataclasses.replace(event) == event
    assert isinstance(event, ChangeEvent)
    with pytest.raises(dataclasses.FrozenInstanceError):
        event.op = Op.DELETE  # type: ignore[misc]


# --- builders -------------------------------------------------------------------------------------


def test_primary_key_change_emits_delete_tombstone_create_with_key_headers() -> None:
    before = {"id": 1, "sku": "A"}
    after = {"id": 2, "sku": "A"}
    delete, tomb, create = primary_key_change(
        {"id": 1}, {"id": 2}, before, after, PG_SOURCE, ts_ms=5
    )
    kinds = [classify(r) for r in (delete, tomb, create)]
    assert [(e.kind, e.op) for e in kinds] == [
        (RecordKind.DATA, Op.DELETE),
        (RecordKind.TOMBSTONE, None),
        (RecordKind.DATA, Op.CREATE),
    ]
    assert delete.key == tomb.key == {"id": 1} and create.key == {"id": 2}
    assert delete.header(HEADER_NEW_KEY) == '{"id":2}' and delete.header(HEADER_OLD_KEY) is None
    assert create.header(HEADER_OLD_KEY) == '{"id":1}' and create.header(HEADER_NEW_KEY) is None
    assert tomb.headers == ()
    assert delete.value is not None and create.value is not None
    assert delete.value["source"] == create.value["source"]  # one source position for all three
    for record in (delete, tomb, create):
        key_text, value_text = to_json_converter(record, schemas_enable=False)
        again = parse_json_converter(key_text, value_text, headers=record.headers)
        assert again == record
    with pytest.raises(ValueError, match="plain 'u'"):
        primary_key_change({"id": 1}, {"id": 1}, before, after, PG_SOURCE)


def test_transaction_begin_and_end_records() -> None:
    begin = classify(transaction_begin("571", ts_ms=10), connector_hint="postgresql")
    assert (begin.kind, begin.tx_status, begin.tx_event_count) == (
        RecordKind.TRANSACTION,
        "BEGIN",
        None,
    )
    assert begin.connector == "postgresql" and begin.ts_ms == 10
    end_record = transaction_end("571", 3, {"public.a": 2, "public.b": 1}, ts_ms=11)
    end = classify(end_record)
    assert end.tx_event_count == 3
    assert end.tx_data_collections == (("public.a", 2), ("public.b", 1))
    key_text, value_text = to_json_converter(end_record, schemas_enable=True)
    assert key_text == (
        '{"schema":{"type":"struct","fields":[{"type":"string","optional":false,"field":"id"}],'
        '"optional":false,"name":"io.debezium.connector.common.TransactionMetadataKey",'
        '"version":1},"payload":{"id":"571"}}'
    )
    assert value_text is not None
    assert orjson.loads(value_text)["payload"]["data_collections"] == [
        {"data_collection": "public.a", "event_count": 2},
        {"data_collection": "public.b", "event_count": 1},
    ]
    with pytest.raises(ValueError, match="add up to 2, not event_count 3"):
        transaction_end("571", 3, [("public.a", 2)])


def test_heartbeat_record() -> None:
    record = heartbeat("server1", 1700000000000)
    event = classify(record, connector_hint="mysql")
    assert (event.kind, event.ts_ms, event.connector) == (
        RecordKind.HEARTBEAT,
        1700000000000,
        "mysql",
    )
    assert record.topic == "__debezium-heartbeat.server1"
    assert to_json_converter(record, schemas_enable=False) == (
        '{"serverName":"server1"}',
        '{"ts_ms":1700000000000}',
    )


def test_truncate_message_and_schema_change_builders() -> None:
    truncate = classify(truncate_record(PG_SOURCE, ts_ms=1))
    assert (truncate.kind, truncate.op, truncate.collection) == (
        RecordKind.DATA,
        Op.TRUNCATE,
        "public.orders",
    )
    assert truncate.record.key is None

    message = message_record("audit", b"\x00hello", source=PG_SOURCE, ts_ms=2)
    event = classify(message)
    assert (event.kind, event.op) == (RecordKind.MESSAGE, Op.MESSAGE)
    assert message.value is not None
    assert base64.b64decode(message.value["message"]["content"]) == b"\x00hello"

    sqls = {**PG_SOURCE, "connector": "sqlserver", "db": "testDB", "schema": "dbo"}
    ddl = schema_change("testDB", sqls, schema_name="dbo", table_changes=[{"type": "CREATE"}])
    event = classify(ddl)
    assert (event.kind, event.connector, event.collection) == (
        RecordKind.SCHEMA_CHANGE,
        "sqlserver",
        "testDB.dbo",
    )
    with pytest.raises(ValueError, match="needs ddl text"):
        schema_change("testDB", sqls)


def test_builders_refuse_invalid_records() -> None:
    with pytest.raises(EnvelopeError, match="has no 'after'"):
        data_record("c", source=PG_SOURCE, key={"id": 1})
    with pytest.raises(ValueError, match="truncate_record"):
        data_record("t", source=PG_SOURCE)
    with pytest.raises(EnvelopeError, match="null key"):
        tombstone_for(ConnectRecord(None, {"op": "c"}))
    with pytest.raises(ValueError, match="total_order and data_collection_order"):
        data_record(
            "c", source=PG_SOURCE, after={"id": 1}, transaction=TransactionInfo("1", None, 1)
        )


def test_bytes_are_written_as_base64_like_connect_bytes() -> None:
    record = data_record("c", source=PG_SOURCE, after={"price": b"\x01\x02"}, ts_ms=1)
    _, value_text = to_json_converter(record, schemas_enable=False)
    assert value_text is not None and '"price":"AQI="' in value_text
    with pytest.raises(EnvelopeError, match="value cannot be written as JSON .*: object"):
        to_json_converter(
            data_record("c", source=PG_SOURCE, after={"x": object()}, ts_ms=1),
            schemas_enable=False,
        )


_JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)
_ROWS = st.dictionaries(st.text(min_size=1, max_size=10), _JSON_SCALARS, min_size=1, max_size=6)


@settings(max_examples=examples(60, 600))
@given(before=_ROWS, after=_ROWS, schemas=st.booleans())
def test_any_row_survives_the_json_converter(
    before: dict[str, Any], after: dict[str, Any], schemas: bool
) -> None:
    record = data_record("u", source=PG_SOURCE, before=before, after=after, key={"k": 1}, ts_ms=3)
    key_text, value_text = to_json_converter(record, schemas_enable=schemas)
    assert parse_json_converter(key_text, value_text) == record
    assert classify(record).op is Op.UPDATE


# --- malformed input -----------------------------------------------------------------------------

KEY = '{"id":1}'
ROW = {"id": 1}
MONGO = {"connector": "mongodb", "db": "inventory", "collection": "customers"}


def _v(**fields: Any) -> str:
    """Value text with the given top-level fields."""
    return orjson.dumps(fields).decode()


def _case(
    id_: str, key: str | None, value: str | None, reason: str, hint: str | None = None
) -> Any:
    return pytest.param(key, value, hint, reason, id=id_)


MALFORMED = [
    _case("value-not-json", KEY, '{"op": "c",', "value is not valid JSON: Expecting"),
    _case("key-not-json", "{id: 1}", "null", "key is not valid JSON"),
    _case("value-empty", KEY, "", "value is empty (zero bytes)"),
    _case(
        "value-array", KEY, "[1, 2]", "value must be a JSON object (a Debezium envelope), got array"
    ),
    _case("value-string", KEY, '"c"', 'a Debezium envelope), got string "c"'),
    _case(
        "schema-not-object", KEY, _v(schema=5, payload={}), "value 'schema' must be a JSON object"
    ),
    _case(
        "missing-op",
        KEY,
        _v(before=None, after=ROW, source=PG_SOURCE),
        "data record has no 'op' field (fields: after, before, source)",
    ),
    _case("unrecognised", KEY, _v(foo=1, bar=2), "value is not a Debezium record"),
    _case(
        "unknown-op",
        KEY,
        _v(op="x", after=ROW, source=PG_SOURCE),
        "unknown op 'x' (allowed: c, u, d, r, t, m)",
    ),
    _case(
        "op-not-string",
        KEY,
        _v(op=1, source=PG_SOURCE),
        "'op' must be a string such as \"c\", got number 1",
    ),
    _case(
        "op-null",
        KEY,
        _v(op=None, source=PG_SOURCE),
        "'op' must be a string such as \"c\", got null",
    ),
    _case(
        "create-without-after",
        KEY,
        _v(op="c", before=None, source=PG_SOURCE),
        "op 'c' (create) record has no 'after'",
    ),
    _case(
        "read-null-after",
        KEY,
        _v(op="r", after=None, source=PG_SOURCE),
        "op 'r' (read) record has no 'after'",
    ),
    _case(
        "update-without-after",
        KEY,
        _v(op="u", before=ROW, source=PG_SOURCE),
        "op 'u' (update) record has no 'after'",
    ),
    _case(
        "after-not-object",
        KEY,
        _v(op="c", after=[1], source=PG_SOURCE),
        "'after' must be a JSON object (the row), got array",
    ),
    _case(
        "delete-unaddressed",
        None,
        _v(op="d", before=None, source=PG_SOURCE),
        "op 'd' (delete) record has neither 'before' nor a record key",
    ),
    _case(
        "data-without-source",
        KEY,
        _v(op="c", after=ROW),
        "op 'c' (create) record has no 'source' object",
    ),
    _case(
        "source-not-object",
        KEY,
        _v(op="c", after=ROW, source="pg"),
        "'source' must be a JSON object, got string \"pg\"",
    ),
    _case(
        "source-without-connector",
        KEY,
        _v(op="c", after=ROW, source={"db": "x"}),
        "'source' has no 'connector' field",
    ),
    _case(
        "connector-not-string",
        KEY,
        _v(op="c", after=ROW, source={"connector": 5}),
        "'source.connector' must be a non-empty string",
    ),
    _case(
        "bad-snapshot",
        KEY,
        _v(op="c", after=ROW, source={**PG_SOURCE, "snapshot": "maybe"}),
        "'source.snapshot' must be a boolean, null or one of true, first,",
    ),
    _case(
        "ts-ms-not-int",
        KEY,
        _v(op="c", after=ROW, source=PG_SOURCE, ts_ms="soon"),
        "'ts_ms' must be an integer, got string \"soon\"",
    ),
    _case(
        "tx-block-order",
        KEY,
        _v(op="c", after=ROW, source=PG_SOURCE, transaction={"id": "1", "total_order": "first"}),
        "'transaction.total_order' must be an integer, got string \"first\"",
    ),
    _case(
        "truncate-with-key",
        KEY,
        _v(op="t", source=PG_SOURCE),
        "op 't' (truncate) record must have a null key, got object {id}",
    ),
    _case(
        "message-without-message",
        None,
        _v(op="m", source=PG_SOURCE),
        "op 'm' (message) record needs a 'message' object",
    ),
    _case(
        "mongo-update-empty",
        KEY,
        _v(op="u", source=MONGO),
        "MongoDB op 'u' (update) record has none of 'patch', 'after' or 'updateDescription'",
    ),
    _case(
        "mongo-delete-unaddressed",
        None,
        _v(op="d", source=MONGO),
        "MongoDB op 'd' (delete) record has neither 'filter' nor a record key",
    ),
    _case(
        "mongo-after-object",
        KEY,
        _v(op="c", after={"_id": 1}, source=MONGO),
        "MongoDB 'after' must be a JSON string",
    ),
    _case(
        "tx-bad-status",
        None,
        _v(status="COMMIT", id="1"),
        '\'status\' must be "BEGIN" or "END", got string "COMMIT"',
    ),
    _case(
        "tx-without-id",
        None,
        _v(status="BEGIN"),
        "transaction BEGIN record 'id' must be a string, got null",
    ),
    _case(
        "begin-with-count",
        None,
        _v(status="BEGIN", id="1", event_count=3, data_collections=None),
        "transaction BEGIN record must have null 'event_count' and 'data_collections'",
    ),
    _case(
        "end-without-event-count",
        None,
        _v(status="END", id="1", data_collections=[]),
        "transaction END record has no 'event_count'",
    ),
    _case(
        "end-without-collections",
        None,
        _v(status="END", id="1", event_count=2),
        "transaction END record has no 'data_collections'",
    ),
    _case(
        "end-collection-without-count",
        None,
        _v(status="END", id="1", event_count=2, data_collections=[{"data_collection": "s.a"}]),
        "transaction END 'data_collections[0]' has no 'event_count'",
    ),
    _case(
        "tombstone-without-key", None, None, "tombstone (null value) has a null key", hint="mysql"
    ),
    _case(
        "schema-change-bad-db",
        None,
        _v(databaseName=5, ddl="DROP TABLE t"),
        "'databaseName' must be a string, got number 5",
    ),
    _case(
        "heartbeat-bad-ts",
        '{"serverName":"s"}',
        _v(ts_ms="later"),
        "heartbeat 'ts_ms' must be an integer",
    ),
    _case("hint-empty", KEY, None, "connector_hint must be a non-empty string", hint=""),
]


@pytest.mark.parametrize(("key", "value", "hint", "reason"), MALFORMED)
def test_malformed_records_are_rejected_with_a_precise_reason(
    key: str | None, value: str | None, hint: str | None, reason: str
) -> None:
    with pytest.raises(EnvelopeError) as info:
        record = parse_json_converter(key, value, origin="topic-1:42")
        classify(record, origin="topic-1:42", connector_hint=hint)
    assert reason in info.value.reason
    assert info.value.origin == "topic-1:42"
    assert str(info.value).startswith("topic-1:42: ")


def test_malformed_table_is_large_enough() -> None:
    assert len(MALFORMED) >= 20


def test_non_utf8_header_is_rejected() -> None:
    with pytest.raises(EnvelopeError, match="header 'h' is not UTF-8 text"):
        parse_json_converter(None, None, headers=[("h", b"\xff")])


# --- connect_schema ------------------------------------------------------------------------------


def test_field_order_matches_json_converter() -> None:
    schema = cs.field("price", cs.decimal(2, precision=10, optional=True))
    assert list(schema) == ["type", "optional", "name", "version", "parameters", "field"]
    assert schema["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert cs.field("snapshot", cs.snapshot_schema()) == {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {
            "allowed": "true,first,first_in_data_collection,last_in_data_collection,last,false,"
            "incremental"
        },
        "default": "false",
        "field": "snapshot",
    }


@pytest.mark.parametrize("connector", cs.CONNECTORS)
def test_source_schema_per_connector(connector: str) -> None:
    schema = cs.source_schema(connector)
    names = [f["field"] for f in schema["fields"]]
    assert names[:6] == ["version", "connector", "name", "ts_ms", "snapshot", "db"]
    assert schema["name"].startswith("io.debezium.connector.") and schema["name"].endswith(
        ".Source"
    )
    position = {
        "postgresql": "lsn",
        "yugabytedb": "lsn",
        "mysql": "pos",
        "sqlserver": "event_serial_no",
        "db2": "commit_lsn",
        "oracle": "commit_scn",
        "mongodb": "ord",
    }[connector]
    assert position in names


def test_envelope_schema_and_built_record_agree() -> None:
    name = "server1.public.orders"
    row = cs.struct(
        [
            cs.field("id", "int32"),
            cs.field("placed", cs.micro_timestamp(optional=True)),
            cs.field("total", cs.decimal(2, precision=12)),
            cs.field("doc", cs.json(optional=True)),
            cs.field("ref", cs.uuid(optional=True)),
            cs.field("state", cs.enum(["new", "paid"])),
            cs.field("flags", cs.bits(8, optional=True)),
            cs.field("loc", cs.geometry(optional=True)),
            cs.field("amount", cs.variable_scale_decimal(optional=True)),
            cs.field("day", cs.date(optional=True)),
        ],
        name=f"{name}.Value",
    )
    envelope = cs.envelope_schema(name, row, cs.source_schema("postgresql"), with_transaction=True)
    assert [f["field"] for f in envelope["fields"]] == [
        "before",
        "after",
        "source",
        "op",
        "ts_ms",
        "transaction",
    ]
    assert envelope["fields"][0]["optional"] is True and row["optional"] is False
    assert envelope["fields"][5]["name"] == "event.block"
    record = data_record(
        "c",
        source=PG_SOURCE,
        after={"id": 1},
        key={"id": 1},
        key_schema=cs.struct([cs.field("id", "int32")], name=f"{name}.Key"),
        value_schema=envelope,
        ts_ms=1,
    )
    key_text, value_text = to_json_converter(record, schemas_enable=True)
    assert parse_json_converter(key_text, value_text) == record


def test_fixed_record_schemas() -> None:
    assert cs.HEARTBEAT_KEY_SCHEMA["name"] == "io.debezium.connector.common.ServerNameKey"
    assert [f["field"] for f in cs.TRANSACTION_VALUE_SCHEMA["fields"]] == [
        "status",
        "id",
        "event_count",
        "data_collections",
        "ts_ms",
    ]
    change = cs.schema_change_value_schema("MySQL")
    assert change["name"] == "io.debezium.connector.mysql.SchemaChangeValue"
    assert cs.schema_change_key_schema("db2")["fields"][0]["field"] == "databaseName"
    mongo = cs.mongodb_envelope_schema("m.inventory.customers", with_transaction=False)
    assert [f["field"] for f in mongo["fields"]][:3] == ["after", "patch", "filter"]


def test_schema_builders_reject_mistakes() -> None:
    with pytest.raises(ValueError, match="unknown connector 'sybase'"):
        cs.source_schema("sybase")
    with pytest.raises(ValueError, match="emits no schema-change records"):
        cs.schema_change_key_schema("postgresql")
    with pytest.raises(ValueError, match="duplicate field names: \\['id'\\]"):
        cs.struct([cs.field("id", "int32"), cs.field("id", "int64")])
    with pytest.raises(ValueError, match="not a primitive"):
        cs.primitive("struct")


def test_schema_id_is_a_stable_content_fingerprint() -> None:
    a = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "id"}]}
    b = {"fields": [{"field": "id", "optional": False, "type": "int32"}], "type": "struct"}
    assert cs.schema_id(a) == cs.schema_id(b)
    assert len(cs.schema_id(a)) == 32 and int(cs.schema_id(a), 16) >= 0
    # Pinned: a change here means every stored schema id in bronze changes.
    assert cs.schema_id(a) == "f269b7e90d34da3946c34dd1736c210d"
    c = {"type": "struct", "fields": [{"type": "int64", "optional": False, "field": "id"}]}
    assert cs.schema_id(c) != cs.schema_id(a)


def test_json_converter_numbers_are_exact_both_ways() -> None:
    # JsonConverter with decimal.format=NUMERIC writes every digit; orjson alone would read
    # both literals as rounded doubles.
    key = '{"id":100000000000000000000000}'
    value = (
        '{"schema":null,"payload":{"op":"c","after":'
        '{"n":12345678901234567890.123456789,"t":1.2345678901234567890123456789E-30,"x":1.5}}}'
    )
    record = parse_json_converter(key, value)
    assert record.value is not None
    after = record.value["after"]
    assert record.key == {"id": 10**23}
    assert after["n"] == decimal.Decimal("12345678901234567890.123456789")
    assert after["t"] == decimal.Decimal("1.2345678901234567890123456789E-30")
    assert after["x"] == 1.5
    key_text, value_text = to_json_converter(record, schemas_enable=True)
    assert key_text == '{"schema":null,"payload":{"id":100000000000000000000000}}'
    assert value_text == value
