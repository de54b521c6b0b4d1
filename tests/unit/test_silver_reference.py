"""Tests for tests.pgmodel.reference (the silver oracle) and tests.pgmodel (its history generator).

The central property: for every generated source history, replaying the Debezium records it
produced gives the source's final state, however the records were delivered (batched, re-sent
after crashes) and in whatever order the positioned events reach the model.
"""

from __future__ import annotations

import datetime as dt
import itertools
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bronze.envelope import (
    HEADER_NEW_KEY,
    HEADER_OLD_KEY,
    UNAVAILABLE_VALUE,
    ConnectRecord,
    Op,
    RecordKind,
    classify,
    message_record,
)
from capture.debezium_json.source import DebeziumJsonSource
from tests.pgmodel.history import (
    AddColumn,
    Delete,
    Insert,
    MoveKey,
    SourceHistory,
    Transaction,
    Truncate,
    Update,
    to_jsonl,
)
from tests.pgmodel.reference import (
    LiveRows,
    Problem,
    ProblemKind,
    SilverEvent,
    SilverState,
    apply_in_order,
    event_from_bronze_row,
    events_from_records,
    ordered,
    replay,
)
from tests.pgmodel.strategies import Delivery, deliveries, histories
from tests.property_profiles import examples

pytestmark = pytest.mark.unit

PROPERTY = settings(max_examples=examples(100, 1000))
FEWER = settings(max_examples=examples(40, 400))

T = "public.customers"


def key(ident: int) -> str:
    return f'{{"id":{ident}}}'


def history(*transactions: Sequence[Any], snapshot: Sequence[Insert] = ()) -> SourceHistory:
    """A one-table (customers) history from lists of operations, one list per transaction."""
    return SourceHistory(
        ("customers",), tuple(Transaction(tuple(ops)) for ops in transactions), tuple(snapshot)
    )


def replayed(records: Sequence[ConnectRecord]) -> tuple[LiveRows, list[Problem]]:
    problems: list[Problem] = []
    return replay(events_from_records(records), problems=problems), problems


def labels(state: LiveRows, collection: str = T) -> dict[str, Any]:
    return {k: row["label"] for k, row in state.get(collection, {}).items()}


# --- properties --------------------------------------------------------------------------------


@PROPERTY
@given(histories())
def test_replay_equals_the_ground_truth(h: SourceHistory) -> None:
    state, problems = replayed(h.records())
    assert problems == []
    assert state == h.final_state()


@PROPERTY
@given(histories().flatmap(lambda h: st.tuples(st.just(h), deliveries(h.records()))))
def test_replay_is_invariant_under_redelivery(
    case: tuple[SourceHistory, Delivery],
) -> None:
    h, batches = case
    state, problems = replayed(batches.records())
    assert problems == []
    assert state == h.final_state()


@PROPERTY
@given(histories(), st.randoms(use_true_random=False))
def test_replay_ignores_event_order_and_duplicates(h: SourceHistory, rnd: Any) -> None:
    events = events_from_records(h.records())
    expected = replay(events)
    assert replay(events + events) == expected
    shuffled = events * 2
    rnd.shuffle(shuffled)
    assert replay(shuffled) == expected
    # The whole stream re-sent from the start: bronze gives every record its first position.
    assert replay(events_from_records(h.records() * 2)) == expected


@PROPERTY
@given(histories().flatmap(lambda h: st.tuples(st.just(h), deliveries(h.records()))))
def test_batch_by_batch_application_equals_the_ground_truth(
    case: tuple[SourceHistory, Delivery],
) -> None:
    """Silver applies bronze micro-batches one after the other: each sorted, state kept."""
    h, batches = case
    events = iter(events_from_records(batches.records()))
    state = SilverState()
    problems: list[Problem] = []
    for batch in batches:
        problems += apply_in_order(state, ordered(itertools.islice(events, len(batch))))
    assert problems == []
    assert state.live() == h.final_state()


@PROPERTY
@given(histories())
def test_positions_follow_emission_order(h: SourceHistory) -> None:
    """Debezium emits in commit order, so bronze positions must sort the stream as emitted,
    even when per-row LSNs of interleaved transactions do not."""
    positions = [e.position for e in events_from_records(h.records())]
    assert positions == sorted(positions)
    assert len(set(positions)) == len(positions)


@PROPERTY
@given(histories(), st.data())
def test_deliveries_resend_consecutive_stretches(h: SourceHistory, data: st.DataObject) -> None:
    records = h.records()
    batches = data.draw(deliveries(records))
    index = {id(r): i for i, r in enumerate(records)}
    frontier = restart = previous_end = 0
    for batch in batches:
        spans = [index[id(r)] for r in batch]
        start, end = spans[0], spans[-1] + 1
        assert spans == list(range(start, end))  # a consecutive slice of the emitted records
        if start == frontier:
            frontier = end  # new records
        else:
            assert end <= frontier  # a re-send of records already sent ...
            if start != previous_end:  # ... from a restart point that never moves back
                assert restart <= start
                restart = start
        previous_end = end
    assert frontier == len(records)


@FEWER
@given(histories().flatmap(lambda h: st.tuples(st.just(h), deliveries(h.records()))))
def test_landed_through_bronze_the_jsonl_replays_to_the_ground_truth(
    case: tuple[SourceHistory, Delivery],
) -> None:
    """to_jsonl files, read by the debezium_json source into bronze rows, then the oracle."""
    h, batches = case
    rows: list[dict[str, Any]] = []
    schemas: dict[str, str] = {}
    now = dt.datetime.now(dt.UTC)
    with tempfile.TemporaryDirectory() as tmp:
        for n, batch in enumerate(batches):
            Path(tmp, f"{n:04d}.jsonl").write_bytes(b"\n".join(to_jsonl(batch)) + b"\n")
        source = DebeziumJsonSource("hist", Path(tmp))
        source.open(None)
        for seq in itertools.count(1):
            read = source.read_batch(max_events=50, max_transaction_events=1000)
            builder = read.builder
            assert builder.quarantined == 0
            rows += builder.events_table(
                agent_id="a", batch_seq=seq, ingest_ts=now, offset=read.offset
            ).to_pylist()
            for schema in builder.schemas_table(known=set(), first_seen=now).to_pylist():
                schemas[schema["schema_id"]] = schema["schema_json"]
            if read.exhausted:
                break
    # Every record lands once. Transaction markers are left out of the count: a stream's leading
    # BEGIN that ends a file lands twice (capture/debezium_json/source.py consumes pending control
    # lines against the file being read, not their own); silver ignores BEGIN/END anyway.
    landed = [r for r in rows if r["kind"] != "transaction"]
    sent = [r for r in batches.records() if classify(r).kind is not RecordKind.TRANSACTION]
    assert len(landed) == len(sent)
    problems: list[Problem] = []
    assert replay([event_from_bronze_row(r, schemas) for r in rows], problems=problems) == (
        h.final_state()
    )
    assert problems == []


# --- what the generator emits ------------------------------------------------------------------


def test_records_have_the_debezium_shapes() -> None:
    h = history(
        [Insert("customers", 1, {"label": "a", "notes": "big"}), Insert("customers", 2, {})],
        [Update("customers", 1, {"label": "b"}, toast=True), AddColumn("customers", "extra1")],
        [MoveKey("customers", 1, 3, {}, toast=True), Delete("customers", 2)],
        [Truncate(("customers",))],
        snapshot=[Insert("customers", 0, {"qty": 5})],
    )
    records = h.records()
    events = [classify(r) for r in records]
    shape = [(e.kind.value, e.op.value if e.op else e.tx_status) for e in events]
    assert shape == [
        ("data", "r"),
        ("transaction", "BEGIN"),
        ("data", "c"),
        ("data", "c"),
        ("transaction", "END"),
        ("transaction", "BEGIN"),
        ("data", "u"),
        ("transaction", "END"),
        ("transaction", "BEGIN"),
        ("data", "d"),
        ("tombstone", None),
        ("data", "c"),
        ("data", "d"),
        ("tombstone", None),
        ("transaction", "END"),
        ("transaction", "BEGIN"),
        ("data", "t"),
        ("transaction", "END"),
    ]
    assert events[0].snapshot == "last" and records[0].value is not None
    update = records[6].value
    assert update is not None and update["after"]["notes"] == UNAVAILABLE_VALUE
    move_d, move_t, move_c = records[9], records[10], records[11]
    assert move_d.header(HEADER_NEW_KEY) == key(3) and move_c.header(HEADER_OLD_KEY) == key(1)
    assert move_t.key == {"id": 1} and move_t.value is None
    assert move_c.value is not None and move_c.value["after"]["notes"] == UNAVAILABLE_VALUE
    assert move_d.value is not None and move_d.value["source"] == move_c.value["source"]
    end = events[14]
    assert end.tx_event_count == 3 and end.tx_data_collections == ((T, 3),)
    assert [e.transaction.total_order for e in events[9:14] if e.transaction] == [1, 2, 3]
    truncate = records[16]
    assert truncate.key is None and events[16].collection == T
    # The value schema grows with ADD COLUMN: events after it carry the new after-struct.
    before_add, after_add = events_from_records(records)[6], events_from_records(records)[9]
    assert before_add.columns == ("id", "qty", "label", "notes")
    assert after_add.columns == ("id", "qty", "label", "notes", "extra1")
    # The key-move triple shares one source position; bronze numbers it with seq 0, 1, 2.
    triple = events_from_records(records)[9:12]
    assert len({e.position[:-4] for e in triple}) == 1
    assert [int.from_bytes(e.position[-4:], "big") for e in triple] == [0, 1, 2]


def test_to_jsonl_lines_have_the_kafka_json_shape() -> None:
    h = history([Insert("customers", 1, {}), MoveKey("customers", 1, 2, {})])
    lines = to_jsonl(h.records())
    docs = [orjson.loads(line) for line in lines]
    assert all(set(d) <= {"topic", "key", "value", "headers"} for d in docs)
    assert docs[0]["topic"] == "hist.transaction" and docs[1]["topic"] == "hist.public.customers"
    assert set(docs[1]["value"]) == {"schema", "payload"}
    assert docs[2]["headers"] == [{"key": HEADER_NEW_KEY, "value": key(2)}]
    assert docs[3]["value"] is None and docs[3]["key"]["payload"] == {"id": 1}


def test_a_column_added_after_the_last_change_is_invisible() -> None:
    h = history([Insert("customers", 1, {"label": "a"})], [AddColumn("customers", "extra1")])
    assert h.source_state()["customers"][1]["extra1"] is None
    assert h.final_state() == {T: {key(1): {"id": 1, "qty": None, "label": "a", "notes": None}}}
    assert replayed(h.records())[0] == h.final_state()


def test_inconsistent_hand_written_history_is_refused() -> None:
    with pytest.raises(ValueError, match="update of missing key"):
        history([Update("customers", 1, {"label": "x"})]).records()
    with pytest.raises(ValueError, match="placeholder needs"):
        history([Insert("customers", 1, {}), Update("customers", 1, {}, toast=True)]).records()


# --- the rules, on examples --------------------------------------------------------------------


def test_key_moves_a_to_b_and_back_in_one_transaction() -> None:
    h = history(
        [Insert("customers", 1, {"label": "one", "notes": "big"})],
        [
            MoveKey("customers", 1, 2, {"label": "two"}),
            MoveKey("customers", 2, 1, {}, toast=True),
        ],
    )
    state, problems = replayed(h.records())
    assert problems == []
    assert state == h.final_state()
    assert state[T] == {key(1): {"id": 1, "qty": None, "label": "two", "notes": "big"}}


def test_keys_swapped_through_a_temporary_key_in_one_transaction() -> None:
    h = history(
        [Insert("customers", 1, {"label": "one"}), Insert("customers", 2, {"label": "two"})],
        [
            MoveKey("customers", 1, 3, {}),
            MoveKey("customers", 2, 1, {}),
            MoveKey("customers", 3, 2, {}),
        ],
    )
    state, _ = replayed(h.records())
    assert state == h.final_state()
    assert labels(state) == {key(1): "two", key(2): "one"}


def test_delete_then_reinsert_of_the_same_key() -> None:
    h = history(
        [Insert("customers", 1, {"label": "a"})],
        [Delete("customers", 1), Insert("customers", 1, {"label": "b"})],
        [Delete("customers", 1)],
        [Insert("customers", 1, {"label": "c"})],
    )
    state, _ = replayed(h.records())
    assert state == h.final_state()
    assert labels(state) == {key(1): "c"}


def test_a_late_older_update_after_a_delete_does_not_resurrect() -> None:
    h = history(
        [Insert("customers", 1, {"label": "a"})],
        [Update("customers", 1, {"label": "late"})],
        [Delete("customers", 1)],
    )
    events = [e for e in events_from_records(h.records()) if e.kind is RecordKind.DATA]
    insert, update, delete = events
    state = SilverState()
    apply_in_order(state, [insert, delete])
    apply_in_order(state, [update])  # arrives after the delete, but is older
    assert state.live() == {}
    assert state.tables[T].keys[key(1)].position == delete.position  # the tombstone stays
    newer = SilverEvent(
        delete.position + b"\xff", RecordKind.DATA, Op.CREATE, T, key(1), {"id": 1, "label": "b"}
    )
    apply_in_order(state, [newer])
    assert labels(state.live()) == {key(1): "b"}


def test_truncate_then_insert() -> None:
    h = history(
        [Insert("customers", 1, {"label": "a"}), Insert("customers", 2, {"label": "b"})],
        [Truncate(("customers",)), Insert("customers", 3, {"label": "c"})],
        [Insert("customers", 1, {"label": "again"})],
    )
    state, _ = replayed(h.records())
    assert state == h.final_state()
    assert labels(state) == {key(3): "c", key(1): "again"}


def test_truncate_keeps_newer_rows_and_refuses_older_late_events() -> None:
    def data(n: int, op: Op, ident: int | None = None) -> SilverEvent:
        if ident is None:
            return SilverEvent(bytes([1, n]), RecordKind.DATA, op, T)
        return SilverEvent(
            bytes([1, n]), RecordKind.DATA, op, T, key(ident), {"id": ident, "label": str(n)}
        )

    state = SilverState()
    apply_in_order(state, [data(1, Op.CREATE, 1), data(9, Op.CREATE, 2)])  # 2 arrived early
    apply_in_order(state, [data(5, Op.TRUNCATE)])
    assert labels(state.live()) == {key(2): "9"}  # only rows older than the truncate go
    apply_in_order(state, [data(3, Op.CREATE, 7), data(4, Op.UPDATE, 1)])  # late, older
    assert labels(state.live()) == {key(2): "9"}
    apply_in_order(state, [data(6, Op.CREATE, 7)])
    assert labels(state.live()) == {key(2): "9", key(7): "6"}


def test_placeholder_keeps_the_previous_value() -> None:
    h = history(
        [Insert("customers", 1, {"label": "a", "notes": "big text"})],
        [Update("customers", 1, {"label": "b"}, toast=True)],
        [Update("customers", 1, {"label": "c"}, toast=True)],
    )
    state, problems = replayed(h.records())
    assert problems == []
    assert state[T][key(1)] == {"id": 1, "qty": None, "label": "c", "notes": "big text"}
    assert UNAVAILABLE_VALUE not in repr(state)


def test_placeholder_without_a_previous_value_is_reported_not_applied() -> None:
    ghost = SilverEvent(
        b"\x01\x02",
        RecordKind.DATA,
        Op.UPDATE,
        T,
        key(9),
        {"id": 9, "label": "ghost", "notes": UNAVAILABLE_VALUE},
    )
    real = SilverEvent(b"\x01\x01", RecordKind.DATA, Op.CREATE, T, key(1), {"id": 1, "notes": "n"})
    problems: list[Problem] = []
    state = replay([ghost, real], problems=problems)
    assert state == {T: {key(1): {"id": 1, "notes": "n", "label": None}}}
    [problem] = problems
    assert problem.kind is ProblemKind.UNAVAILABLE_WITHOUT_PREVIOUS
    assert (problem.collection, problem.key, problem.position) == (T, key(9), b"\x01\x02")
    assert "notes" in problem.detail
    again: list[Problem] = []
    assert replay([ghost, ghost], problems=again) == {} and len(again) == 1  # reported once


def test_a_row_event_without_a_key_is_reported() -> None:
    keyless = SilverEvent(b"\x01\x01", RecordKind.DATA, Op.CREATE, T, None, {"label": "x"})
    problems: list[Problem] = []
    assert replay([keyless], problems=problems) == {}
    assert [p.kind for p in problems] == [ProblemKind.NULL_KEY]


def test_tombstones_and_messages_change_nothing() -> None:
    h = history([Insert("customers", 1, {"label": "a"})], [Delete("customers", 1)])
    records = h.records()
    insert = records[1].value
    assert insert is not None
    message = message_record("audit", "hello", source=insert["source"], ts_ms=1)
    base = events_from_records(records)
    assert replay(events_from_records([*records, message])) == replay(base) == {}
    assert [e.op for e in events_from_records([message])] == [Op.MESSAGE]
    tombstone = next(e for e in base if e.kind is RecordKind.TOMBSTONE)
    assert replay(base[:2]) == replay([*base[:2], tombstone])  # c, then a tombstone for it
    assert labels(replay([*base[:2], tombstone])) == {key(1): "a"}


def test_columns_come_from_the_value_schema_too() -> None:
    """A column added before a change without an after image (a delete) is still known."""
    h = history(
        [Insert("customers", 1, {"label": "a"}), Insert("customers", 2, {})],
        [AddColumn("customers", "extra1"), Delete("customers", 2)],
    )
    state, _ = replayed(h.records())
    assert state == h.final_state()
    assert state[T][key(1)]["extra1"] is None
