"""The seeded shop streams (tests.pgmodel.streams): deterministic, consistent, and as varied as
the tests that land them need (every change kind, concurrent transactions both ways round)."""

from __future__ import annotations

import orjson
import pytest

from bronze.envelope import HEADER_NEW_KEY, HEADER_OLD_KEY, UNAVAILABLE_VALUE
from tests.pgmodel.history import STYLES
from tests.pgmodel.reference import Problem, canonical_json, events_from_records, replay
from tests.pgmodel.streams import postgres_stream

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("seed", [3, 7, 41])
def test_replaying_the_records_gives_the_final_state(style: str, seed: int) -> None:
    stream = postgres_stream(snapshot_rows=4, transactions=40, seed=seed, source_style=style)
    problems: list[Problem] = []
    state = replay(events_from_records(stream.records), problems=problems)
    assert problems == []
    expected = {
        f"public.{table}": {canonical_json({"id": i}): row for i, row in rows.items()}
        for table, rows in stream.final_state.items()
        if rows
    }
    assert state == expected


def test_the_same_seed_gives_the_same_bytes() -> None:
    def lines(seed: int) -> list[bytes]:
        return list(postgres_stream(transactions=15, seed=seed).lines("kafka_json"))

    assert lines(5) == lines(5)
    assert lines(5) != lines(6)


def test_a_long_stream_has_every_kind_of_change() -> None:
    stream = postgres_stream(snapshot_rows=5, transactions=80, seed=7)
    values = [r.value for r in stream.records if r.topic != "shop.transaction"]
    ops = {v["op"] for v in values if v is not None}
    assert ops == {"r", "c", "u", "d"}
    assert None in values  # tombstones
    headers = {name for r in stream.records for name, _ in r.headers}
    assert headers == {HEADER_NEW_KEY, HEADER_OLD_KEY}  # primary-key moves
    assert any(v and (v["after"] or {}).get("notes") == UNAVAILABLE_VALUE for v in values)
    assert stream.data_events == sum(1 for v in values if v is not None)


def test_concurrent_transactions_interleave_both_ways_round() -> None:
    """Per transaction (commit order): txId and first row LSN. Concurrent pairs alternate their
    row LSNs; in some the later-committing one started first (lower txId and first LSN), in
    others the earlier-committing one did."""
    stream = postgres_stream(snapshot_rows=0, transactions=40, seed=11)
    firsts: dict[int, int] = {}
    for record in stream.records:
        if record.value and record.value.get("op") in ("c", "u", "d"):
            src = record.value["source"]
            firsts.setdefault(src["txId"], src["lsn"])
    txids = list(firsts)  # commit order
    later_started_first = sum(a > b for a, b in zip(txids, txids[1:], strict=False))
    lsn_out_of_commit_order = sum(
        firsts[a] > firsts[b] for a, b in zip(txids, txids[1:], strict=False)
    )
    assert later_started_first > 0 and lsn_out_of_commit_order > 0
    assert later_started_first < len(txids) // 2  # and pairs where the first one started first


def test_line_formats() -> None:
    stream = postgres_stream(snapshot_rows=1, transactions=6, seed=2)
    n = len(stream.records)
    kafka = [orjson.loads(line) for line in stream.lines("kafka_json", schemas=True)]
    assert len(kafka) == n and all({"topic", "key", "value"} <= set(obj) for obj in kafka)
    assert all("schema" in obj["value"] for obj in kafka if obj["value"] is not None)
    bare = [orjson.loads(line) for line in stream.lines("kafka_json", schemas=False)]
    assert all("payload" not in obj["value"] for obj in bare if obj["value"] is not None)
    tabbed = list(stream.lines("key_tab_value", schemas=False))
    assert len(tabbed) == n and all(line.count(b"\t") >= 1 for line in tabbed)
    envelopes = list(stream.lines("envelope", schemas=False))
    assert len(envelopes) == sum(1 for r in stream.records if r.value is not None)
    with pytest.raises(ValueError, match="line format"):
        list(stream.lines("avro"))
