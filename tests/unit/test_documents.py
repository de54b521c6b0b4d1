"""silver.documents_ejson and silver.documents_apply: MongoDB documents without Spark.

1. Extended JSON in every dialect Debezium writes, read to canonical form (hand-written
   expectations);
2. document identity across key dialects;
3. MongoDB's update semantics, case by case;
4. the fold: order, replays, late events, delete + re-insert, refusals and stale documents;
5. the model (tests/mongomodel): random histories, written as each connector generation
   writes them, positioned as bronze positions them, applied in micro-batches with redelivery:
   silver's documents equal the model's, type for type and field order included.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze.positions import PositionResolver
from silver.documents_apply import (
    Event,
    Image,
    Refusal,
    Stored,
    UpdateError,
    apply_patch,
    apply_update_description,
    document_id,
    fold,
    set_path,
    unset_path,
)
from silver.documents_ejson import (
    EjsonError,
    dumps,
    id_text,
    java_double_text,
    parse,
    parse_document,
)
from tests.mongomodel.bson import Int32, Int64, from_canonical, same
from tests.mongomodel.collection import identity
from tests.mongomodel.debezium import Connector
from tests.mongomodel.history import History, random_history

pytestmark = pytest.mark.unit


# --- 1. dialects ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        # v1 strict, as Debezium 1.2 printed it (driver 3.x spacing)
        (
            '{"_id" : {"$numberLong" : "1004"},"first_name" : "Anne"}',
            '{"_id":{"$numberLong":"1004"},"first_name":"Anne"}',
        ),
        # strict: Int32 and Double plain, non-finite doubles bare
        (
            '{"a": 1,"b": 1.0,"c": NaN,"d": -Infinity,"e": 1.0E20}',
            '{"a":{"$numberInt":"1"},"b":{"$numberDouble":"1.0"},"c":{"$numberDouble":"NaN"},'
            '"d":{"$numberDouble":"-Infinity"},"e":{"$numberDouble":"1.0E20"}}',
        ),
        # a plain integer beyond Int32 is an Int64 (the Java reader's rule)
        ('{"a": 5000000000}', '{"a":{"$numberLong":"5000000000"}}'),
        # dates: strict millis, relaxed ISO-8601, canonical
        ('{"d": {"$date": -1}}', '{"d":{"$date":{"$numberLong":"-1"}}}'),
        (
            '{"d": {"$date": "2023-11-14T22:13:20.123Z"}}',
            '{"d":{"$date":{"$numberLong":"1700000000123"}}}',
        ),
        ('{"d": {"$date": {"$numberLong": "5"}}}', '{"d":{"$date":{"$numberLong":"5"}}}'),
        # binary: v1 ($type hex, legacy number), v2, $uuid
        (
            '{"b": {"$binary": "a2Fma2E=","$type": "80"}}',
            '{"b":{"$binary":{"base64":"a2Fma2E=","subType":"80"}}}',
        ),
        (
            '{"b": {"$binary" : "a2Fma2E=" , "$type" : 0}}',
            '{"b":{"$binary":{"base64":"a2Fma2E=","subType":"00"}}}',
        ),
        (
            '{"b": {"$binary": {"base64": "a2Fma2E=","subType": "0A"}}}',
            '{"b":{"$binary":{"base64":"a2Fma2E=","subType":"0a"}}}',
        ),
        (
            '{"u": {"$uuid": "00112233-4455-6677-8899-aabbccddeeff"}}',
            '{"u":{"$binary":{"base64":"ABEiM0RVZneImaq7zN3u/w==","subType":"04"}}}',
        ),
        # regex v1 and v2 (options sorted), ObjectId lower-cased, the rest as written
        (
            '{"r": {"$regex": "^a","$options": "xi"}}',
            '{"r":{"$regularExpression":{"pattern":"^a","options":"ix"}}}',
        ),
        (
            '{"o": {"$oid": "596E275826F08B2730779E1F"}}',
            '{"o":{"$oid":"596e275826f08b2730779e1f"}}',
        ),
        (
            '{"t": {"$timestamp": {"t": 1,"i": 2}},"m": {"$minKey": 1},'
            '"x": {"$numberDecimal": "1.50"}}',
            '{"t":{"$timestamp":{"t":1,"i":2}},"m":{"$minKey":1},"x":{"$numberDecimal":"1.50"}}',
        ),
        # a DBRef is a document; field order is kept; unicode as itself
        (
            '{"z": 1,"ref": {"$ref": "c","$id": 1},"é": "😀"}',
            '{"z":{"$numberInt":"1"},"ref":{"$ref":"c","$id":{"$numberInt":"1"}},"é":"😀"}',
        ),
    ],
)
def test_every_dialect_reads_to_canonical(text: str, canonical: str) -> None:
    assert dumps(parse(text)) == canonical


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"a": ', "not JSON"),
        ('{"o": {"$oid": "xyz"}}', "$oid must be 24 hex digits"),
        ('{"d": {"$date": "yesterday"}}', "is not an ISO-8601"),
        ('{"i": {"$numberInt": "3000000000"}}', "outside the Int32 range"),
        ('{"b": {"$binary": "***","$type": "00"}}', "is not base64"),
    ],
)
def test_malformed_extended_json_names_the_problem(text: str, message: str) -> None:
    with pytest.raises(EjsonError, match=message.replace("$", r"\$")):
        parse(text)


def test_a_document_is_required_where_one_is_expected() -> None:
    with pytest.raises(EjsonError, match="after must be a document, got numberInt"):
        parse_document("5", "after")
    with pytest.raises(EjsonError, match="after must be JSON text, got document"):
        parse_document({"a": 1}, "after")


@pytest.mark.parametrize(
    ("value", "java"),
    [
        # What Java's Double.toString prints (JDK 19+: the shortest digits that round-trip).
        (100.0, "100.0"),
        (12.34, "12.34"),
        (0.001, "0.001"),
        (1e-4, "1.0E-4"),
        (1234567.0, "1234567.0"),
        (1e7, "1.0E7"),
        (123456789.0, "1.23456789E8"),
        (1e20, "1.0E20"),
        (-2.5e-300, "-2.5E-300"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_doubles_are_written_as_java_writes_them(value: float, java: str) -> None:
    assert java_double_text(value) == java


# --- 2. identity ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("texts", "identity_text"),
    [
        # The 1.2 guide's key table and its create example: key "1004", after $numberLong 1004.
        (["1004", '{"$numberLong" : "1004"}', '{"$numberInt": "1004"}', "1004.0"], "1004"),
        (["12.34", '{"$numberDouble": "12.34"}'], "12.34"),
        (['"1234"', '{"$symbol": "1234"}'], '"1234"'),
        (
            [
                '{"hi" : "kafka", "nums" : [10.0, 100.0, 1000.0]}',
                '{"hi": "kafka","nums": [10,100,1000]}',
            ],
            '{"hi":"kafka","nums":[10,100,1000]}',
        ),
        (
            ['{"$oid" : "596e275826f08b2730779e1f"}', '{"$oid": "596E275826F08B2730779E1F"}'],
            '{"$oid":"596e275826f08b2730779e1f"}',
        ),
        (
            [
                '{"$binary" : "a2Fma2E=", "$type" : "00"}',
                '{"$binary": {"base64": "a2Fma2E=","subType": "00"}}',
            ],
            '{"$binary":{"base64":"a2Fma2E=","subType":"00"}}',
        ),
        # 0.5 is exactly a double: one _id across Decimal128 and Double
        (['{"$numberDecimal": "0.50"}', "0.5"], "0.5"),
    ],
)
def test_identity_is_the_same_across_dialects_and_numeric_types(
    texts: list[str], identity_text: str
) -> None:
    assert {id_text(parse(t)) for t in texts} == {identity_text}


def test_distinct_ids_stay_distinct() -> None:
    # Decimal128 0.1 is not the double 0.1; a string is not a number; field order matters.
    distinct = [
        '{"$numberDecimal": "0.1"}',
        "0.1",
        '"1"',
        "1",
        '{"a": 1,"b": 2}',
        '{"b": 2,"a": 1}',
    ]
    assert len({id_text(parse(t)) for t in distinct}) == len(distinct)


def test_document_id_reads_every_source_and_refuses_disagreement() -> None:
    after = '{"_id": {"$numberLong": "7"},"x": 1}'
    key, value = document_id('{"id":"7"}', {"after": after})
    assert key == '{"id":"7"}' and value == {"$numberLong": "7"}  # the exact type: after's
    key, value = document_id(None, {"filter": '{"_id" : {"$numberLong" : "1004"}}'})
    assert key == '{"id":"1004"}'
    assert document_id('{"schema": {}, "payload": {"id": "\\"a\\""}}', {})[0] == '{"id":"\\"a\\""}'
    with pytest.raises(EjsonError, match="names two documents: after._id 7, record key 8"):
        document_id('{"id":"8"}', {"after": after})
    with pytest.raises(EjsonError, match="names no document"):
        document_id(None, {"patch": '{"$set": {"a": 1}}'})


# --- 3. update semantics -------------------------------------------------------------------------


def _doc(text: str) -> dict[str, Any]:
    return parse_document(text, "test")


@pytest.mark.parametrize(
    ("before", "path", "value", "after"),
    [
        # an existing field keeps its place, a new one goes last
        ('{"a": 1,"b": 2}', "a", "9", '{"a":9,"b":2}'),
        ('{"a": 1}', "c.d.e", "9", '{"a":1,"c":{"d":{"e":9}}}'),
        # into an array element, past the end (null padding), a numeric part under a new field
        ('{"l": [{"x": 1},{"x": 2}]}', "l.1.x", "9", '{"l":[{"x":1},{"x":9}]}'),
        ('{"l": [1]}', "l.3", "9", '{"l":[1,null,null,9]}'),
        ('{"l": [1]}', "l.2.x", "9", '{"l":[1,null,{"x":9}]}'),
        ("{}", "m.0", "9", '{"m":{"0":9}}'),
    ],
)
def test_set_path_as_mongodb_does(before: str, path: str, value: str, after: str) -> None:
    document = _doc(before)
    set_path(document, path, parse(value))
    assert dumps(document) == dumps(_doc(after))


@pytest.mark.parametrize(
    ("before", "path", "message"),
    [
        ('{"a": 5}', "a.b", "cannot create a field under 'a' of 'a.b': it holds a numberInt"),
        ('{"l": [1]}', "l.x", "cannot use the part 'x' of 'l.x' to traverse an array"),
        ('{"l": [null]}', "l.0.x", "it holds a null"),
        ('{"a": 1}', "a..b", "has an empty field name"),
    ],
)
def test_set_path_refuses_what_mongodb_refuses(before: str, path: str, message: str) -> None:
    with pytest.raises(UpdateError, match=message):
        set_path(_doc(before), path, 1)


def test_unset_removes_fields_and_nulls_array_elements() -> None:
    document = _doc('{"a": {"b": 1,"c": 2},"l": [1,2,3]}')
    for path in ("a.b", "l.1", "missing.x", "l.7", "a.b.c"):
        unset_path(document, path)
    assert dumps(document) == dumps(_doc('{"a": {"c": 2},"l": [1,null,3]}'))


def test_patch_operators_replacement_and_refusals() -> None:
    base = _doc('{"_id": 1,"a": {"b": 1},"l": [1,2]}')
    patched = apply_patch(
        base, _doc('{"$v": 1,"$set": {"a.c": 2,"l.1": 5},"$unset": {"a.b": true}}')
    )
    assert dumps(patched) == dumps(_doc('{"_id": 1,"a": {"c": 2},"l": [1,5]}'))
    assert dumps(base) == dumps(_doc('{"_id": 1,"a": {"b": 1},"l": [1,2]}'))  # untouched
    with pytest.raises(UpdateError, match=r"\$v 2 .*MongoDB 5.0\+ delta"):
        apply_patch(base, _doc('{"$v": 2,"diff": {"u": {"a": 1}}}'))
    with pytest.raises(UpdateError, match=r"patch operator \$inc is not one MongoDB's oplog"):
        apply_patch(base, _doc('{"$inc": {"a.b": 1}}'))


def test_update_description_truncates_then_sets_then_removes() -> None:
    base = _doc('{"_id": 1,"l": [1,2,3,4],"m": {"x": 1,"y": 2},"n": {"$numberLong": "5"}}')
    description = {
        "updatedFields": '{"l.1": 20, "m.z": {"$date": "1970-01-01T00:00:00.001Z"}, "n": 6}',
        "removedFields": ["m.x"],
        "truncatedArrays": [{"field": "l", "size": 2}],
    }
    updated = apply_update_description(base, description)
    # n: a relaxed plain 6 replacing an Int64 stays Int64 (an $inc of a NumberLong counter)
    expected = (
        '{"_id":{"$numberInt":"1"},"l":[{"$numberInt":"1"},{"$numberInt":"20"}],'
        '"m":{"y":{"$numberInt":"2"},"z":{"$date":{"$numberLong":"1"}}},"n":{"$numberLong":"6"}}'
    )
    assert dumps(updated) == expected
    with pytest.raises(UpdateError, match="cuts 'l' to 9 elements, silver holds 4"):
        apply_update_description(base, {"truncatedArrays": [{"field": "l", "size": 9}]})


def test_relaxed_text_cannot_carry_a_new_int64() -> None:
    # The documented limit: json.serialization.mode=legacy writes updatedFields in relaxed JSON,
    # where NumberLong(5) is "5". With nothing of type Int64 to replace, silver reads an Int32.
    updated = apply_update_description(_doc('{"_id": 1}'), {"updatedFields": '{"a": 5}'})
    assert updated["a"] == {"$numberInt": "5"}


# --- 4. the fold ---------------------------------------------------------------------------------


def _pos(n: int) -> bytes:
    return n.to_bytes(4, "big")


def _event(n: int, op: str, **payload: Any) -> Event:
    return Event(_pos(n), op, payload, {"$numberInt": "1"}, n)


def _docs(images: Sequence[Image]) -> list[str]:
    return [i.document for i in images]


def test_fold_applies_in_position_order_and_skips_what_silver_holds() -> None:
    events = [
        _event(3, "u", patch='{"$set": {"b": 2}}'),
        _event(1, "c", after='{"_id": 1,"a": 1}'),
        _event(2, "u", updateDescription={"updatedFields": '{"a": 5}'}),
        _event(2, "u", updateDescription={"updatedFields": '{"a": 5}'}),  # redelivered twice
    ]
    images, refusals = fold(None, events)
    assert refusals == []
    assert _docs(images) == [
        '{"_id":{"$numberInt":"1"},"a":{"$numberInt":"1"}}',
        '{"_id":{"$numberInt":"1"},"a":{"$numberInt":"5"}}',
        '{"_id":{"$numberInt":"1"},"a":{"$numberInt":"5"},"b":{"$numberInt":"2"}}',
    ]
    stored = Stored(_pos(3), False, images[-1].document, None)
    again, refused = fold(stored, events)  # the whole batch again, or late: nothing changes
    assert again == [] and refused == []


def test_delete_then_reinsert_and_tombstone_images() -> None:
    events = [
        _event(1, "c", after='{"_id": 1,"a": 1}'),
        _event(2, "d", filter='{"_id": 1}'),
        _event(3, "u", updateDescription={"updatedFields": '{"a": 2}'}),
        _event(4, "c", after='{"_id": 1,"b": 1}'),
        _event(5, "d", before='{"_id": 1,"b": 1}'),
    ]
    images, refusals = fold(None, events)
    assert [(i.event.op, i.deleted, i.document) for i in images] == [
        ("c", False, '{"_id":{"$numberInt":"1"},"a":{"$numberInt":"1"}}'),
        ("d", True, '{"_id":{"$numberInt":"1"}}'),  # key-only, like a relational delete
        ("c", False, '{"_id":{"$numberInt":"1"},"b":{"$numberInt":"1"}}'),
        ("d", True, '{"_id":{"$numberInt":"1"},"b":{"$numberInt":"1"}}'),  # the pre-image
    ]
    assert [(r.event.position, r.reason) for r in refusals] == [
        (_pos(3), "MongoDB update for a document that was deleted before it")
    ]


def test_an_update_for_a_document_silver_does_not_hold_is_refused_whole() -> None:
    images, refusals = fold(None, [_event(1, "u", patch='{"$set": {"a": 1}}')])
    assert images == []
    assert refusals[0].reason.startswith("MongoDB update for a document silver does not hold")
    # A replacement patch or a full document needs nothing held.
    images, refusals = fold(None, [_event(1, "u", patch='{"a": 1}')])
    assert _docs(images) == ['{"_id":{"$numberInt":"1"},"a":{"$numberInt":"1"}}'] and not refusals


STALE = "MongoDB update of a document silver could not keep complete (since position 00000002"


def test_a_poison_update_marks_the_document_stale_until_a_full_image() -> None:
    held = Stored(_pos(1), False, '{"_id":{"$numberInt":"1"},"a":{"$numberInt":"1"}}', None)
    events = [
        _event(2, "u", patch='{"$set": {"a.b": 1}}'),  # a is a number: cannot apply
        _event(3, "u", updateDescription={"updatedFields": '{"c": 1}'}),
        _event(4, "u", updateDescription={"updatedFields": "{not json"}),  # stale first
        _event(5, "u", after='{"_id": 1,"z": 1}'),
        _event(6, "u", updateDescription={"updatedFields": '{"y": 2}'}),
    ]
    images, refusals = fold(held, events)
    assert [(r.event.position, r.reason.split(":")[0]) for r in refusals] == [
        (_pos(2), "MongoDB u event cannot be applied"),
        (_pos(3), STALE),
        (_pos(4), STALE),
    ]
    assert [(i.event.position, i.stale is not None) for i in images] == [
        (_pos(2), True),  # kept as it was, marked; the position moves so a replay is a no-op
        (_pos(5), False),
        (_pos(6), False),
    ]
    assert images[0].document == held.document
    assert (
        images[-1].document
        == '{"_id":{"$numberInt":"1"},"z":{"$numberInt":"1"},"y":{"$numberInt":"2"}}'
    )


def test_unknown_ops_and_malformed_creates_are_refused() -> None:
    images, refusals = fold(None, [_event(1, "c", after="[1]"), _event(2, "t")])
    assert images == []
    assert [r.reason for r in refusals] == [
        "MongoDB c event cannot be applied: after must be a document, got array",
        "op 't' is not a MongoDB document change",
    ]


FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"


def test_the_guides_patch_applies_to_its_create_in_source_order() -> None:
    # As printed, the update and delete sort before the create (ord 6 snapshot vs ord 31; the
    # Spark test applies them so). Moved after it (ord 32, 33, streamed), the patch
    # {"$set": {"first_name": "Anne Marie"}} changes the create's document and the delete
    # leaves the filter's _id.
    resolver = PositionResolver("mongodb")
    events = []
    for name, source in (("create", {}), ("update", {"ord": 32}), ("delete", {"ord": 33})):
        doc = orjson.loads((FIXTURES / f"mongodb_{name}.json").read_bytes())
        payload = doc["value"].get("payload", doc["value"])
        payload["source"] = {**payload["source"], **source, "snapshot": False}
        key = None if doc["key"] is None else orjson.dumps(doc["key"]["payload"]).decode()
        _, id_value = document_id(key, payload)
        position = resolver.for_data(payload["source"]).encode()
        events.append(Event(position, payload["op"], payload, id_value))
    images, refusals = fold(None, events)
    assert not refusals
    assert [(i.event.op, i.deleted, i.document) for i in images] == [
        ("c", False, ANNE),
        ("u", False, ANNE.replace('"Anne"', '"Anne Marie"')),
        ("d", True, '{"_id":{"$numberLong":"1004"}}'),
    ]


ANNE = (
    '{"_id":{"$numberLong":"1004"},"first_name":"Anne","last_name":"Kretchmar",'
    '"email":"annek@noanswer.org"}'
)


# --- 5. the model --------------------------------------------------------------------------------


class _SilverSim:
    """Silver's per-document state, moved by :func:`fold` batch by batch like the job does."""

    def __init__(self) -> None:
        self.rows: dict[str, Stored] = {}
        self.refusals: list[Refusal] = []
        self.resolvers: dict[str, PositionResolver] = {}
        self.last_partition = ""

    def _position(self, line: Mapping[str, Any]) -> bytes | None:
        # The position bronze gives each record, in arrival order (tombstones and transaction
        # markers take one too, which moves the sequence numbers as in bronze).
        value = line["value"]
        payload = value.get("payload") if isinstance(value, dict) else None
        source = payload.get("source") if isinstance(payload, dict) else None
        if source is None:
            self.resolvers[self.last_partition].for_control()
            return None
        self.last_partition = f"{source['name']}/{source.get('rs')}"
        resolver = self.resolvers.setdefault(self.last_partition, PositionResolver("mongodb"))
        return resolver.for_data(source).encode()

    def apply(self, lines: Iterable[Mapping[str, Any]]) -> None:
        events: dict[str, list[Event]] = {}
        for line in lines:
            position = self._position(line)
            if position is None:
                continue
            payload = line["value"]["payload"]
            key, id_value = document_id(orjson.dumps(line["key"]["payload"]).decode(), payload)
            events.setdefault(key, []).append(Event(position, payload["op"], payload, id_value))
        for key, batch in events.items():
            images, refusals = fold(self.rows.get(key), batch)
            self.refusals += refusals
            if images:
                last = images[-1]
                self.rows[key] = Stored(
                    last.event.position, last.deleted, last.document, last.stale
                )

    def documents(self) -> dict[Any, dict[str, Any]]:
        live = [from_canonical(str(r.document)) for r in self.rows.values() if not r.deleted]
        assert all(r.stale is None for r in self.rows.values())
        return {identity(d["_id"]): d for d in live}


def _assert_same(silver: Mapping[Any, Any], truth: Mapping[Any, Any]) -> None:
    assert set(silver) == set(truth)
    for key, document in truth.items():
        assert same(silver[key], document), (key, silver[key], document)


def _replay(sim: _SilverSim, history: History, rng: random.Random) -> None:
    """Land in micro-batches cut at checkpoints; after each, an earlier suffix is redelivered."""
    inner = history.checkpoints[1:-1]
    cuts = sorted(rng.sample(inner, min(3, len(inner))), key=lambda c: c.lines)
    start = 0
    for checkpoint in [*cuts, history.checkpoints[-1]]:
        sim.apply(history.lines[start : checkpoint.lines])
        _assert_same(sim.documents(), checkpoint.documents)
        again = rng.randrange(checkpoint.lines + 1)  # at-least-once: from an earlier offset
        sim.apply(history.lines[again : checkpoint.lines])
        _assert_same(sim.documents(), checkpoint.documents)
        start = checkpoint.lines


SEEDS = range(10)
CONNECTORS = {
    "1.x oplog": Connector("oplog"),
    "3.x change streams": Connector("change_streams", transaction_metadata=True),
    "3.x update_full": Connector("change_streams", capture_mode="change_streams_update_full"),
    "3.x with_pre_image": Connector("change_streams", capture_mode="change_streams_with_pre_image"),
    "3.x full+pre_image, extended JSON": Connector(
        "change_streams",
        capture_mode="change_streams_update_full_with_pre_image",
        json_mode="extended",
    ),
    "3.x extended JSON": Connector("change_streams", json_mode="extended"),
}


@pytest.mark.parametrize("name", CONNECTORS)
@pytest.mark.parametrize("seed", SEEDS)
def test_model_histories_apply_exactly(name: str, seed: int) -> None:
    history = random_history(CONNECTORS[name], seed, snapshot=6, changes=60)
    sim = _SilverSim()
    _replay(sim, history, random.Random(seed))
    assert sim.refusals == []


def test_the_model_covers_what_it_claims() -> None:
    # Guard against a model that silently stopped producing the hard cases.
    seen: dict[str, int] = dict.fromkeys(
        ("truncatedArrays", "removedFields", "array path", "$unset", "replacement patch",
         "re-insert", "transaction", "Int64", "pre-image"), 0
    )  # fmt: skip
    for seed in SEEDS:
        for name in ("1.x oplog", "3.x change streams", "3.x with_pre_image"):
            deleted: set[str] = set()
            for line in random_history(CONNECTORS[name], seed, snapshot=6, changes=60).lines:
                payload = (line["value"] or {}).get("payload") or {}
                text = orjson.dumps(payload).decode()
                description = payload.get("updateDescription") or {}
                key = orjson.dumps(line["key"]).decode()
                hits = {
                    "truncatedArrays": bool(description.get("truncatedArrays")),
                    "removedFields": bool(description.get("removedFields")),
                    "array path": '.1\\"' in text or '.2\\"' in text,
                    "$unset": "$unset" in text,
                    "replacement patch": (payload.get("patch") or "").startswith('{"_id"'),
                    "re-insert": payload.get("op") == "c" and key in deleted,
                    "transaction": bool(payload.get("transaction")),
                    "Int64": "$numberLong" in text,
                    "pre-image": payload.get("op") == "u" and bool(payload.get("before")),
                }
                if payload.get("op") == "d":
                    deleted.add(key)
                for tag, hit in hits.items():
                    seen[tag] += int(hit)
    assert all(seen.values()), seen


def test_model_int64_counters_survive_relaxed_update_descriptions() -> None:
    # 3.x defaults (legacy JSON, no full document): $inc of an Int64 counter arrives as a plain
    # number; silver keeps it an Int64 because the value it replaces is one.
    history = random_history(CONNECTORS["3.x change streams"], 5, snapshot=4, changes=40)
    sim = _SilverSim()
    sim.apply(history.lines)
    counters = [d["count"] for d in sim.documents().values() if "count" in d]
    assert counters and all(isinstance(c, Int64) for c in counters)
    assert not any(isinstance(c, Int32) for c in counters)
