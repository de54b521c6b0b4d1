"""SCD type 2 history tables: versions, validity intervals, key moves, truncates, replays."""

from __future__ import annotations

import datetime as dt
import itertools
from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.config import TableOptions
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED, KEY, OP, POSITION, apply_truncate
from silver.scd2 import (
    IS_CURRENT,
    NEXT_KEY,
    PREVIOUS_KEY,
    VALID_FROM,
    VALID_TO,
    VALID_TO_POSITION,
    apply_history,
    history_path,
    truncate_history,
)
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.delta]

SCHEMA = (
    "_cdc_key string, _cdc_position binary, _cdc_op string, _cdc_source_ts long, "
    "_cdc_tx_id string, _cdc_bronze_batch string, _cdc_unavailable array<string>, "
    "_cdc_old_key string, _cdc_next_key string, id int, name string, notes string"
)
DATA = ["id", "name", "notes"]
P = "__debezium_unavailable_value"
_versions = itertools.count(1)


def pos(n: int) -> bytes:
    return n.to_bytes(8, "big")


def ts(n: int) -> dt.datetime:
    """Source commit time of event ``n``: second ``n`` of 2023-11-14 22:13:20 UTC."""
    return dt.datetime(2023, 11, 14, 22, 13, 20) + dt.timedelta(seconds=n)


def ev(
    n: int,
    op: str,
    ident: int,
    name: str | None = None,
    notes: str | None = None,
    *,
    unavailable: tuple[str, ...] = (),
    old: int | None = None,
    new: int | None = None,
) -> tuple[Any, ...]:
    key = f'{{"id":{ident}}}'
    return (
        key,
        pos(n),
        op,
        1_700_000_000_000 + n * 1000,
        f"tx{n}",
        "a#0",
        list(unavailable),
        f'{{"id":{old}}}' if old is not None else None,
        f'{{"id":{new}}}' if new is not None else None,
        ident,
        name,
        notes,
    )


def record(spark: Any, path: Path, *events: tuple[Any, ...]) -> int:
    return apply_history(
        spark,
        str(path),
        spark.createDataFrame(list(events), SCHEMA),
        DATA,
        txn_app_id="test",
        txn_version=next(_versions),
    )


def versions(spark: Any, path: Path) -> list[tuple[Any, ...]]:
    df = spark.read.format("delta").load(str(path)).orderBy(KEY, POSITION)
    return [
        (
            r["id"],
            r[OP],
            r["name"],
            r["notes"],
            r[VALID_FROM],
            r[VALID_TO],
            r[IS_CURRENT],
            r[DELETED],
        )
        for r in df.collect()
    ]


def test_versions_close_each_other_and_fill_placeholders(spark: Any, tmp_path: Path) -> None:
    h = tmp_path / "h"
    record(spark, h, ev(1, "c", 1, "a", "long"), ev(2, "u", 1, "b", P, unavailable=("notes",)))
    record(spark, h, ev(4, "u", 1, "c", P, unavailable=("notes",)), ev(5, "d", 1, "c", "long"))
    assert versions(spark, h) == [
        (1, "c", "a", "long", ts(1), ts(2), False, False),
        (1, "u", "b", "long", ts(2), ts(4), False, False),
        (1, "u", "c", "long", ts(4), ts(5), False, False),
        (1, "d", "c", "long", ts(5), None, True, True),
    ]
    # A late event older than stored versions slots in; replays add nothing.
    assert (
        record(spark, h, ev(3, "u", 1, "late", "x"), ev(2, "u", 1, "b", P, unavailable=("notes",)))
        == 1
    )
    rows = versions(spark, h)
    assert [(r[1], r[2], r[4], r[5]) for r in rows] == [
        ("c", "a", ts(1), ts(2)),
        ("u", "b", ts(2), ts(3)),
        ("u", "late", ts(3), ts(4)),
        ("u", "c", ts(4), ts(5)),
        ("d", "c", ts(5), None),
    ]


def test_key_move_is_continuous_and_carries_toasted_values(spark: Any, tmp_path: Path) -> None:
    h = tmp_path / "h"
    record(spark, h, ev(1, "c", 1, "a", "toasted"))
    # UPDATE t SET id = 2: delete(1) with newkey, create(2) with oldkey and the placeholder.
    record(
        spark,
        h,
        ev(5, "d", 1, None, None, new=2),
        ev(5, "c", 2, "a", P, unavailable=("notes",), old=1)[:1]
        + (pos(5) + b"\x01",)
        + ev(5, "c", 2, "a", P, unavailable=("notes",), old=1)[2:],
    )
    df = spark.read.format("delta").load(str(h))
    old = df.where("id = 1 OR (_cdc_op = 'd')").orderBy(POSITION).collect()
    new = df.where(f"{KEY} = '{{\"id\":2}}'").collect()
    assert [(r[OP], r[VALID_TO]) for r in old] == [("c", ts(5)), ("d", None)]
    assert old[-1][NEXT_KEY] == '{"id":2}'
    [moved] = new
    assert moved[PREVIOUS_KEY] == '{"id":1}' and moved["notes"] == "toasted"
    assert moved[VALID_FROM] == old[0][VALID_TO]  # no gap, no overlap across the move
    assert moved[IS_CURRENT] and not moved[DELETED]


def test_truncate_closes_every_live_version_and_late_older_changes(
    spark: Any, tmp_path: Path
) -> None:
    silver = tmp_path / "t"
    h = Path(history_path(str(silver)))
    record(spark, h, ev(1, "c", 1, "a"), ev(2, "c", 2, "b"), ev(3, "d", 2, "b"))
    # The job applies a truncate to the current-state table (its horizon), then to history.
    apply_truncate(spark, str(silver), pos(9), txn_app_id="t", txn_version=next(_versions))
    truncate_history(
        spark, str(h), pos(9), 1_700_000_009_000, txn_app_id="test", txn_version=next(_versions)
    )
    expected = {1: ("t", True, ts(9)), 2: ("d", True, ts(3))}

    def current() -> dict[int, tuple[Any, ...]]:
        return {
            r["id"]: (r[OP], r[DELETED], r[VALID_FROM])
            for r in spark.read.format("delta").load(str(h)).where(IS_CURRENT).collect()
        }

    assert current() == expected
    # Late changes older than the truncate (reordered arrival): the current-state table drops
    # them (the truncate erased the rows), but the source had each row from its change to the
    # truncate, so history keeps them as versions the truncate closes. The update of 1 is
    # closed by the truncate's stored version; the inserts of 2 (deleted before the truncate:
    # no version after it) and of 3 get theirs, at the truncate's position and time.
    record(spark, h, ev(4, "c", 2, "again"), ev(5, "c", 3, "new"), ev(6, "u", 1, "late"))
    assert current() == {1: ("t", True, ts(9)), 2: ("t", True, ts(9)), 3: ("t", True, ts(9))}
    got = [(r[0], r[1], r[2], r[4], r[5]) for r in versions(spark, h)]
    assert got == [
        (1, "c", "a", ts(1), ts(6)),
        (1, "u", "late", ts(6), ts(9)),
        (1, "t", "a", ts(9), None),
        (2, "c", "b", ts(2), ts(3)),
        (2, "d", "b", ts(3), ts(4)),
        (2, "c", "again", ts(4), ts(9)),
        (2, "t", "again", ts(9), None),
        (3, "c", "new", ts(5), ts(9)),
        (3, "t", "new", ts(9), None),
    ]
    # Delivered again: nothing changes.
    record(spark, h, ev(4, "c", 2, "again"), ev(5, "c", 3, "new"))
    assert [(r[0], r[1], r[2], r[4], r[5]) for r in versions(spark, h)] == got


def test_a_late_change_is_closed_by_the_first_truncate_after_it(spark: Any, tmp_path: Path) -> None:
    silver = tmp_path / "t"
    h = Path(history_path(str(silver)))
    record(spark, h, ev(1, "c", 1, "a"))

    def truncate(n: int) -> None:
        apply_truncate(spark, str(silver), pos(n), txn_app_id="t", txn_version=next(_versions))
        truncate_history(
            spark, str(h), pos(n), 1_700_000_000_000 + 1000 * n,
            txn_app_id="test", txn_version=next(_versions),
        )  # fmt: skip

    truncate(9)
    record(spark, h, ev(10, "c", 4, "between"))
    truncate(20)
    # Late, in reverse: 2 and 3 were erased by the truncate at 9 (not the one at 20: validity
    # would end 11 s late), 5 by the one at 20; 4's stored truncate version closes nothing new.
    record(spark, h, ev(15, "c", 5, "mid"), ev(6, "c", 2, "early"), ev(7, "u", 3, "x"))
    got = [(r[0], r[1], r[2], r[4], r[5]) for r in versions(spark, h)]
    assert got == [
        (1, "c", "a", ts(1), ts(9)),
        (1, "t", "a", ts(9), None),
        (2, "c", "early", ts(6), ts(9)),
        (2, "t", "early", ts(9), None),
        (3, "u", "x", ts(7), ts(9)),
        (3, "t", "x", ts(9), None),
        (4, "c", "between", ts(10), ts(20)),
        (4, "t", "between", ts(20), None),
        (5, "c", "mid", ts(15), ts(20)),
        (5, "t", "mid", ts(20), None),
    ]
    # Delivered again: nothing changes.
    record(spark, h, ev(6, "c", 2, "early"), ev(15, "c", 5, "mid"))
    assert [(r[0], r[1], r[2], r[4], r[5]) for r in versions(spark, h)] == got


COLUMNS = {
    "customers": ["id", "name", "email", "notes"],
    "orders": ["id", "customer_id", "amount_cents", "status"],
}


def test_history_through_the_job_matches_silver_and_replays_add_nothing(
    spark: Any, tmp_path: Path
) -> None:
    stream = postgres_stream(snapshot_rows=4, transactions=30, seed=41)
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    lines = list(stream.lines("kafka_json", schemas=True))
    write_lines(path, iter(lines))

    def run() -> None:
        LandingAgent(
            DebeziumJsonSource("shop", path), BronzeWriter(BronzeTables.under(lake)), max_events=50
        ).run()
        SilverJob(spark, lake, table_options=lambda _s, _c: TableOptions(history=True)).run_once()

    run()
    counts = {}
    for table, columns in COLUMNS.items():
        silver = str(lake / "silver" / silver_table_name("shop", f"public.{table}"))
        hist = spark.read.format("delta").load(history_path(silver))
        counts[table] = hist.count()
        current = {
            r["id"]: {c: r[c] for c in columns}
            for r in hist.where(f"{IS_CURRENT} AND NOT {DELETED}").collect()
        }
        expected = {i: {c: row[c] for c in columns} for i, row in stream.final_state[table].items()}
        assert current == expected, table
        # Each key's versions tile time: every version ends where the next one starts.
        rows = hist.orderBy(KEY, POSITION).collect()
        for a, b in itertools.pairwise(rows):
            if a[KEY] == b[KEY]:
                assert (a[VALID_TO_POSITION], a[VALID_TO]) == (b[POSITION], b[VALID_FROM])
                assert not a[IS_CURRENT]
            else:
                assert a[IS_CURRENT] and a[VALID_TO] is None
    with path.open("ab") as f:  # Debezium redelivers everything from an old offset
        for line in lines:
            f.write(line + b"\n")
    run()
    for table in COLUMNS:
        silver = str(lake / "silver" / silver_table_name("shop", f"public.{table}"))
        assert spark.read.format("delta").load(history_path(silver)).count() == counts[table]
