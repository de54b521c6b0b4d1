"""MongoDB through bronze and silver: the model's histories, the guide's examples, poison pills.

Records are written as ``kafka_json`` lines, landed with the real :class:`LandingAgent` and
:class:`BronzeWriter` through ``capture/debezium_json/source.py``, and applied with the real
:class:`SilverJob`. No MongoDB server can run here: the documents silver must hold come from the
model in ``tests/mongomodel`` (ground truth under MongoDB's documented semantics) or, for the
guide's examples and the poison pills, are stated by hand. Silver's ``document`` column is read
back with the model's own canonical Extended JSON reader and compared type for type, field
order included.

Every silver table costs seconds of Spark per run, so one lake holds every source and two
silver runs apply them (the module fixture); the tests read what each run left.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from gold.cuts import latest_cut
from gold.views import gold_frames
from pipeline.config import TableOptions
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED, KEY, OP
from tests.integration.test_silver_fixtures import _land
from tests.integration.test_silver_fixtures import _write as _append
from tests.mongomodel.bson import Int32, Int64, from_canonical, same
from tests.mongomodel.collection import identity
from tests.mongomodel.debezium import Connector
from tests.mongomodel.history import History, random_history

pytestmark = [pytest.mark.spark, pytest.mark.delta]

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"


def _rows(spark: Any, lake: Path, source: str, collection: str) -> dict[str, dict[str, Any]]:
    path = lake / "silver" / silver_table_name(source, collection)
    return {r[KEY]: r.asDict() for r in spark.read.format("delta").load(str(path)).collect()}


def _live_documents(rows: Iterable[Mapping[str, Any]]) -> dict[Any, dict[str, Any]]:
    live = [r for r in rows if not r[DELETED]]
    for row in live:  # the promoted _id is the document's, and every document is complete
        assert same(from_canonical(row["_id"]), from_canonical(row["document"])["_id"])
        assert row["document_stale"] is None
    documents = [from_canonical(r["document"]) for r in live]
    return {identity(d["_id"]): d for d in documents}


def _assert_documents(actual: Mapping[Any, Any], expected: Mapping[Any, Any], what: str) -> None:
    assert set(actual) == set(expected), what
    for key, document in expected.items():
        assert same(actual[key], document), (what, key, actual[key], document)


# --- what the lake gets --------------------------------------------------------------------------

MODEL = {
    # 1.x oplog capture: after / patch ($set, $unset, replacement) / filter, strict JSON.
    "mongo_oplog": Connector("oplog", server="legacy", collection="orders"),
    # 3.x defaults: updateDescription with relaxed updatedFields, transaction metadata. (Full
    # document and pre-image modes, canonical JSON: the unit tests apply them through the model.)
    "mongo_streams": Connector("change_streams", collection="carts", transaction_metadata=True),
}
PILLS = Connector("change_streams", collection="pills")
GUIDE = ("create", "update", "delete", "tombstone", "transaction_begin", "transaction_end")
"""The 1.2 guide's MongoDB examples (tests/fixtures/debezium/mongodb_*.json), landed as printed."""


def _cuts(history: History, connector: Connector, rng: random.Random) -> list[int]:
    """Where the two landings end. With transaction metadata the first falls inside a
    transaction (its events must wait for END); without, between changes."""
    ends = [c.lines for c in history.checkpoints]
    first = rng.choice(ends[1:-1])
    if connector.transaction_metadata:
        inside = [
            n + 1
            for n, line in enumerate(history.lines)
            if (line["value"] or {}).get("payload", {}).get("transaction") and n + 1 not in ends
        ]
        assert inside, "the history has no transaction to cut"
        first = rng.choice(inside)
    return [first, ends[-1]]


def _expected(history: History, cut: int) -> dict[Any, dict[str, Any]]:
    """The truth after the last whole change before ``cut`` (an open transaction waits)."""
    return [c for c in history.checkpoints if c.lines <= cut][-1].documents


def _fixture_line(name: str) -> dict[str, Any]:
    doc = orjson.loads((FIXTURES / f"mongodb_{name}.json").read_bytes())
    return {"topic": "fulfillment.inventory.customers", "key": doc["key"], "value": doc["value"]}


def _pill(ord_: int, op: str, key: str, **images: Any) -> dict[str, Any]:
    """A Debezium 3.x change-stream record of ``inventory.pills`` (no schema)."""
    payload = {
        "before": None,
        "after": None,
        "updateDescription": None,
        "source": {"version": "3.3.2.Final", "connector": "mongodb", "name": PILLS.server,
                   "ts_ms": 1_700_000_000_000, "snapshot": "false", "db": PILLS.db,
                   "collection": PILLS.collection, "ord": ord_},
        "op": op,
        "ts_ms": 1_700_000_000_500,
        **images,
    }  # fmt: skip
    return {"topic": PILLS.topic, "key": {"id": key}, "value": payload}


PILLS_RUN_1 = [
    _pill(1, "c", "1", after='{"_id": 1,"n": 1,"tags": ["a"]}'),
    _pill(2, "c", "2", after='{"_id": 2,"n": {"$numberLong": "1"}}'),
    # not JSON: document 1 is kept as it was, marked stale
    _pill(3, "u", "1", updateDescription={"updatedFields": "{oops"}),
    # document 1 is stale: refused, never applied to a document that is not whole
    _pill(4, "u", "1", updateDescription={"updatedFields": '{"n": 5}'}),
    # a relaxed plain 2 replacing an Int64 (an $inc of a NumberLong): stays an Int64
    _pill(5, "u", "2", updateDescription={"updatedFields": '{"n": 2}'}),
    # a document silver does not hold
    _pill(6, "u", "3", updateDescription={"removedFields": ["n"]}),
    # a truncation of what is not an array: document 2 is kept, marked stale
    _pill(7, "u", "2", updateDescription={"truncatedArrays": [{"field": "n", "size": 0}]}),
    # the key names document 4, after names document 5
    _pill(8, "c", "4", after='{"_id": 5}'),
    _pill(9, "c", "6", after='{"_id": 6,"ok": true}'),
]
PILLS_RUN_2 = [
    # document 2 is still stale in the next micro-batch: refused again
    _pill(10, "u", "2", updateDescription={"updatedFields": '{"m": 1}'}),
    # a full document (replace) clears document 1's mark
    _pill(11, "u", "1", after='{"_id": 1,"n": 9}'),
]


def _state(spark: Any, lake: Path, result: Any) -> dict[str, Any]:
    quarantine = spark.read.format("delta").load(str(lake / "silver" / "_quarantine"))
    tables = {s: f"{c.db}.{c.collection}" for s, c in MODEL.items()}
    tables |= {"guide": "inventory.customers", "pills": "inventory.pills"}
    return {
        "result": result,
        "quarantine": [r.asDict() for r in quarantine.collect()],
        **{source: _rows(spark, lake, source, collection) for source, collection in tables.items()},
    }


@pytest.fixture(scope="module")
def runs(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> tuple[dict[str, History], dict[str, list[int]], list[dict[str, Any]], Path]:
    """Land everything in two steps, applying silver after each: (histories, their landing
    cuts, what silver held after each run, the lake)."""
    tmp = tmp_path_factory.mktemp("mongo")
    lake = tmp / "lake"
    # A quarantine table in the layout before kind/column/value_text: still appended to.
    spark.createDataFrame(
        [("old", "x.y", "f:1", None, None, None, "an older refusal", 0, None)],
        "source string, collection string, origin string, key string, position binary, "
        "bronze_batch string, reason string, silver_batch long, quarantined_at timestamp",
    ).write.format("delta").save(str(lake / "silver" / "_quarantine"))
    rng = random.Random(7)
    histories = {s: random_history(c, seed=11, snapshot=4, changes=30) for s, c in MODEL.items()}
    cuts = {s: _cuts(h, MODEL[s], rng) for s, h in histories.items()}
    extra = {
        "guide": ([_fixture_line(n) for n in GUIDE], []),
        "pills": (PILLS_RUN_1, PILLS_RUN_2),
    }
    states = []
    for step in range(2):
        for source, history in histories.items():
            path = tmp / f"{source}.jsonl"
            start = cuts[source][step - 1] if step else 0
            _append(path, history.lines[start : cuts[source][step]])
            if step == 1:
                # At-least-once: Debezium resends from an earlier committed offset (the start
                # of a change, or of the snapshot).
                offsets = [0] + [c.lines for c in history.checkpoints if c.lines <= start]
                _append(path, history.lines[rng.choice(offsets) : cuts[source][step]])
            _land(source, path, lake)
        for source, lines in extra.items():
            if lines[step]:
                _append(tmp / f"{source}.jsonl", lines[step])
                _land(source, tmp / f"{source}.jsonl", lake)
        # The pills collection also keeps an SCD type 2 history table.
        job = SilverJob(spark, lake, table_options=lambda s, _c: TableOptions(history=s == "pills"))
        states.append(_state(spark, lake, job.run_once()))
    return histories, cuts, states, lake


# --- the model ------------------------------------------------------------------------------------


def _shape(history: History) -> tuple[set[str | None], int]:
    """The ops a history's records carry, and how many creates re-insert a deleted _id."""
    ops: set[str | None] = set()
    deleted: set[str] = set()
    reinserts = 0
    for line in history.lines:
        op = ((line["value"] or {}).get("payload") or {}).get("op")
        key = orjson.dumps(line["key"]).decode()
        reinserts += op == "c" and key in deleted
        if op == "d":
            deleted.add(key)
        ops.add(op)
    return ops, reinserts


def test_model_histories_reach_silver_and_gold(spark: Any, runs: Any) -> None:
    histories, cuts, states, lake = runs
    for history in histories.values():  # not vacuous: every kind of write is in there
        ops, reinserts = _shape(history)
        assert {"r", "c", "u", "d"} <= ops and reinserts
    for step, state in enumerate(states):
        for source, history in histories.items():
            rows = state[source]
            expected = _expected(history, cuts[source][step])
            _assert_documents(_live_documents(rows.values()), expected, f"{source} run {step}")
            assert not [q for q in state["quarantine"] if q["source"] == source]
    # The first cut left a transaction open: its events waited in silver/_pending, and the
    # second run applied them whole.
    opened, streams = cuts["mongo_streams"][0], histories["mongo_streams"]
    assert not any(c.lines == opened for c in streams.checkpoints)
    closed = next(c for c in streams.checkpoints if c.lines > opened)
    assert not all(  # the transaction changes documents, so applying part of it would show
        same(closed.documents.get(k), d) for k, d in _expected(streams, opened).items()
    ) or set(closed.documents) != set(_expected(streams, opened))
    pending = spark.read.format("delta").load(str(lake / "silver" / "_pending"))
    assert pending.where("source = 'mongo_streams'").count() == 0
    # Gold: the views at the latest consistent cut show the same documents.
    for source, history in histories.items():
        cut = latest_cut(lake, source)
        assert cut is not None
        (frame,) = gold_frames(spark, lake, [cut]).values()
        assert frame.columns == ["_id", "document", "document_stale"]
        documents = _live_documents({**r.asDict(), DELETED: False} for r in frame.collect())
        _assert_documents(documents, history.final, f"gold {source}")


# --- the guide's examples -------------------------------------------------------------------------

ANNE = (
    '{"_id":{"$numberLong":"1004"},"first_name":"Anne","last_name":"Kretchmar",'
    '"email":"annek@noanswer.org"}'
)
"""The create example's ``after`` in canonical form: ``_id`` is a NumberLong, the rest strings."""


def test_the_guides_examples_as_printed(runs: Any) -> None:
    # The create is at oplog ord 31 (streamed); the update and the delete are at ord 6 of the
    # same second with snapshot=true, so they sort *before* the create. In source order silver
    # sees an update of a document it does not hold (quarantined), a delete (a tombstone), then
    # the create: the create's document is live. The record key "1004" and the filter's and
    # after's NumberLong 1004 name one document. Tombstone and BEGIN/END change nothing.
    state = runs[2][0]
    assert list(state["guide"]) == ['{"id":"1004"}']
    row = state["guide"]['{"id":"1004"}']
    assert (row[OP], row[DELETED], row["_id"], row["document"]) == (
        "c",
        False,
        '{"$numberLong":"1004"}',
        ANNE,
    )
    refused = [(q["key"], q["kind"], q["reason"]) for q in state["quarantine"]]
    assert [r for r in refused if r[0] == '{"id":"1004"}'] == [
        (
            '{"id":"1004"}',
            "event",
            "MongoDB update for a document silver does not hold (no create, snapshot read or "
            "full document before it)",
        )
    ]


# --- poison pills ---------------------------------------------------------------------------------


def _reasons(state: Mapping[str, Any], silver_batch: int) -> set[tuple[str | None, str]]:
    return {
        (q["key"], q["reason"].split(":")[0].split(" (")[0])
        for q in state["quarantine"]
        if q["source"] == "pills" and q["silver_batch"] == silver_batch
    }


def test_poison_pills_are_quarantined_per_event(runs: Any) -> None:
    first, second = runs[2]
    assert first["result"].quarantined == 1 + 5  # the guide's early update, and these
    assert _reasons(first, 0) == {
        ('{"id":"1"}', "MongoDB u event cannot be applied"),
        ('{"id":"1"}', "MongoDB update of a document silver could not keep complete"),
        ('{"id":"3"}', "MongoDB update for a document silver does not hold"),
        ('{"id":"2"}', "MongoDB u event cannot be applied"),
        (None, "MongoDB event names two documents"),
    }
    # Rows of the older layout read kind null ('event' by the contract); new ones say it.
    assert {(q["source"], q["kind"]) for q in first["quarantine"]} == {
        ("old", None),
        ("guide", "event"),
        ("pills", "event"),
    }
    rows = first["pills"]
    assert set(rows) == {'{"id":"1"}', '{"id":"2"}', '{"id":"6"}'}
    one = rows['{"id":"1"}']
    assert one["document"] == '{"_id":{"$numberInt":"1"},"n":{"$numberInt":"1"},"tags":["a"]}'
    assert one["document_stale"].startswith("since position ")
    assert "updatedFields is not Extended JSON" in one["document_stale"]
    two = rows['{"id":"2"}']
    assert from_canonical(two["document"]) == {"_id": Int32(2), "n": Int64(2)}
    assert "truncatedArrays names 'n', where silver holds a numberLong" in two["document_stale"]
    # Run 2: the stale mark was read back from the table; a full document clears it.
    assert second["result"].quarantined == 1
    assert _reasons(second, 1) == {
        ('{"id":"2"}', "MongoDB update of a document silver could not keep complete")
    }
    assert second["pills"]['{"id":"2"}']["document"] == two["document"]
    one = second["pills"]['{"id":"1"}']
    assert one["document_stale"] is None
    assert one["document"] == '{"_id":{"$numberInt":"1"},"n":{"$numberInt":"9"}}'


def test_history_keeps_every_version_of_a_document(spark: Any, runs: Any) -> None:
    lake = runs[3]
    path = lake / "silver" / (silver_table_name("pills", "inventory.pills") + "__history")
    history = spark.read.format("delta").load(str(path)).orderBy(KEY, "_cdc_position").collect()
    one = [(v[OP], v["document"], v["_cdc_is_current"]) for v in history if v[KEY] == '{"id":"1"}']
    created = '{"_id":{"$numberInt":"1"},"n":{"$numberInt":"1"},"tags":["a"]}'
    assert one == [
        ("c", created, False),
        ("u", created, False),  # marked stale (ord 3): same document, document_stale set
        ("u", '{"_id":{"$numberInt":"1"},"n":{"$numberInt":"9"}}', True),
    ]
    current = {v[KEY]: v["document"] for v in history if v["_cdc_is_current"]}
    silver = runs[2][1]["pills"]
    assert current == {k: r["document"] for k, r in silver.items()}
