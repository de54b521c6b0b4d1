"""MERGE semantics of silver on hand-built decoded changes (real Spark, real Delta)."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import functions as F

from silver.merge import (
    DELETED,
    KEY,
    KEY_ORDER,
    OP,
    POSITION,
    apply_changes,
    apply_truncate,
    key_bound,
    key_order,
    key_ranges,
    purge_tombstones,
)

pytestmark = pytest.mark.spark

SCHEMA = (
    "_cdc_key string, _cdc_position binary, _cdc_op string, _cdc_source_ts long, "
    "_cdc_tx_id string, _cdc_bronze_batch string, _cdc_unavailable array<string>, "
    "id int, name string, notes string"
)
DATA = ["id", "name", "notes"]
P = "__debezium_unavailable_value"
_versions = itertools.count(1)


def pos(n: int) -> bytes:
    return n.to_bytes(8, "big")


def ev(
    n: int,
    op: str,
    ident: int,
    name: str | None = None,
    notes: str | None = None,
    unavailable: tuple[str, ...] = (),
) -> tuple[Any, ...]:
    return (f'{{"id":{ident}}}', pos(n), op, 0, "tx", "a#0", list(unavailable), ident, name, notes)


def apply(spark: Any, path: Path, *events: tuple[Any, ...], version: int | None = None) -> Any:
    df = spark.createDataFrame(list(events), SCHEMA)
    return apply_changes(
        spark,
        str(path),
        df,
        DATA,
        txn_app_id="test",
        txn_version=version if version is not None else next(_versions),
    )


def rows(spark: Any, path: Path, *, live: bool = True) -> dict[int, dict[str, Any]]:
    df = spark.read.format("delta").load(str(path))
    if live:
        df = df.where(f"NOT {DELETED}")
    return {r["id"]: r.asDict() for r in df.collect()}


def test_insert_update_delete_keeps_a_tombstone(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    r = apply(spark, t, ev(1, "c", 1, "a", "x"), ev(2, "c", 2, "b", "y"))
    assert (r.inserted, r.updated) == (2, 0)
    apply(spark, t, ev(3, "u", 1, "a2", "x"), ev(4, "d", 2, "b as deleted"))
    assert {k: v["name"] for k, v in rows(spark, t).items()} == {1: "a2"}
    tomb = rows(spark, t, live=False)[2]
    assert tomb[DELETED] and tomb[OP] == "d" and tomb[POSITION] == pos(4)
    assert tomb["name"] == "b as deleted"  # a tombstone holds the delete's before image


def test_replays_change_nothing(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    batch = (ev(1, "c", 1, "a"), ev(2, "u", 1, "b"), ev(3, "c", 2, "z"))
    apply(spark, t, *batch, version=100)
    again = apply(spark, t, *batch, version=100)  # the same micro-batch after a crash
    assert again.skipped
    replay = apply(spark, t, *batch)  # the same events in a later batch (at-least-once)
    assert (replay.inserted, replay.updated) == (0, 0)
    assert {k: v["name"] for k, v in rows(spark, t).items()} == {1: "b", 2: "z"}


def test_late_older_event_does_not_resurrect(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "a"), ev(5, "d", 1))
    apply(spark, t, ev(3, "u", 1, "late"))
    assert rows(spark, t) == {}
    apply(spark, t, ev(7, "c", 1, "reborn"))
    assert rows(spark, t)[1]["name"] == "reborn"


def test_key_moves_both_ways_in_one_batch(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "one"), ev(2, "c", 2, "two"))
    # 1 -> 3 then 2 -> 1 then 3 -> 2: delete + create pairs at shared positions.
    apply(
        spark,
        t,
        ev(10, "d", 1),
        ev(11, "c", 3, "one"),
        ev(20, "d", 2),
        ev(21, "c", 1, "two"),
        ev(30, "d", 3),
        ev(31, "c", 2, "one"),
    )
    assert {k: v["name"] for k, v in rows(spark, t).items()} == {1: "two", 2: "one"}


def test_delete_then_reinsert_in_one_batch(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "a"))
    apply(spark, t, ev(2, "d", 1), ev(3, "c", 1, "again"), ev(4, "d", 1), ev(5, "c", 1, "last"))
    assert rows(spark, t)[1]["name"] == "last"


def test_placeholder_keeps_values_within_and_across_batches(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "a", "big text"), ev(2, "u", 1, "b", P, ("notes",)))
    assert rows(spark, t)[1]["notes"] == "big text"
    apply(spark, t, ev(3, "u", 1, "c", P, ("notes",)))
    row = rows(spark, t)[1]
    assert (row["name"], row["notes"]) == ("c", "big text")
    apply(spark, t, ev(4, "u", 1, "d", None))  # a real NULL is applied
    assert rows(spark, t)[1]["notes"] is None


def test_placeholder_without_a_row_is_rejected(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "a", "x"))
    result = apply(spark, t, ev(2, "u", 9, "ghost", P, ("notes",)), ev(3, "u", 1, "b", "y"))
    assert result.rejected is not None
    rejected = result.rejected.collect()
    assert [r[KEY] for r in rejected] == ['{"id":9}']
    assert "placeholder" in rejected[0]["__reason"] and "notes" in rejected[0]["__reason"]
    assert set(rows(spark, t)) == {1}


def test_truncate_removes_older_rows_only(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "a"), ev(2, "c", 2, "b"))
    assert (
        apply_truncate(spark, str(t), pos(5), txn_app_id="test", txn_version=next(_versions)) == 2
    )
    apply(spark, t, ev(3, "u", 1, "late, before the truncate"), ev(6, "c", 3, "after"))
    assert {k: v["name"] for k, v in rows(spark, t).items()} == {3: "after"}


def test_purged_tombstones_report_would_have_resurrected(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "a"), ev(4, "d", 1), ev(2, "c", 2, "b"))
    assert purge_tombstones(spark, str(t), older_than_hours=0) == 1
    result = apply(spark, t, ev(3, "u", 1, "late"), ev(9, "c", 5, "new"))
    assert result.rejected is not None
    [rejected] = result.rejected.collect()
    assert rejected[KEY] == '{"id":1}' and "would have resurrected" in rejected["__reason"]
    assert set(rows(spark, t)) == {2, 5}


def test_late_event_before_a_truncate_does_not_insert_a_new_key(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    # Key 2 is deleted before the truncate: its tombstone keeps the delete's older position.
    apply(spark, t, ev(1, "c", 1, "a"), ev(2, "d", 2))
    apply_truncate(spark, str(t), pos(5), txn_app_id="test", txn_version=next(_versions))
    result = apply(
        spark,
        t,
        ev(3, "c", 7, "erased by the truncate"),
        ev(4, "c", 2, "erased too, though newer than the tombstone"),
        ev(6, "c", 8, "kept"),
    )
    assert result.rejected is None
    assert set(rows(spark, t)) == {8}


def test_create_with_an_unresolvable_placeholder_is_refused(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    # A primary-key move with an unchanged TOAST column: the create carries the placeholder.
    result = apply(spark, t, ev(1, "c", 4, "moved", P, ("notes",)))
    assert result.rejected is not None
    [rejected] = result.rejected.collect()
    assert "placeholder" in rejected["__reason"]
    assert rows(spark, t) == {}


MOVE_SCHEMA = SCHEMA.replace("id int,", "_cdc_old_key string, id int,")


def move_ev(n: int, op: str, ident: int, old: int | None, *rest: Any, **kw: Any) -> tuple[Any, ...]:
    base = ev(n, op, ident, *rest, **kw)
    return (*base[:7], f'{{"id":{old}}}' if old is not None else None, *base[7:])


def apply_moves(spark: Any, path: Path, *events: tuple[Any, ...]) -> Any:
    df = spark.createDataFrame(list(events), MOVE_SCHEMA)
    return apply_changes(spark, str(path), df, DATA, txn_app_id="test", txn_version=next(_versions))


def test_key_move_placeholder_takes_the_old_rows_stored_value(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    apply_moves(spark, t, move_ev(1, "c", 1, None, "a", "long toasted text"))
    # PostgreSQL: UPDATE ... SET id = 2 leaves the TOAST column out of the WAL; Debezium sends
    # delete(1) + create(2) whose notes is the placeholder.
    result = apply_moves(
        spark,
        t,
        move_ev(5, "d", 1, None),
        move_ev(6, "c", 2, 1, "a", P, unavailable=("notes",)),
        move_ev(7, "u", 2, None, "a2", P, unavailable=("notes",)),
    )
    assert result.rejected is None
    assert rows(spark, t) == {2: {**rows(spark, t)[2], "name": "a2", "notes": "long toasted text"}}


def test_key_move_placeholder_from_the_same_batch_and_a_chain(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    result = apply_moves(
        spark,
        t,
        move_ev(1, "c", 1, None, "a", "first"),
        move_ev(2, "u", 1, None, "b", "second"),
        move_ev(3, "d", 1, None),
        move_ev(4, "c", 2, 1, "c", P, unavailable=("notes",)),
        move_ev(5, "d", 2, None),
        move_ev(6, "c", 3, 2, "d", P, unavailable=("notes",)),
    )
    assert result.rejected is None
    live = rows(spark, t)
    assert set(live) == {3}
    assert (live[3]["name"], live[3]["notes"]) == ("d", "second")


def test_key_move_from_an_unknown_row_is_still_refused(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    result = apply_moves(spark, t, move_ev(6, "c", 2, 1, "a", P, unavailable=("notes",)))
    assert result.rejected is not None and result.rejected_count == 1
    assert rows(spark, t) == {}


def test_key_order_sorts_integers_as_numbers_then_text(spark: Any) -> None:
    keys = [
        '{"id":"-9223372036854775808"}',
        '{"id":"-10"}',
        '{"id":"-9"}',
        '{"id":"0"}',
        '{"id":"9"}',
        '{"id":"10"}',
        '{"id":"9223372036854775807"}',
        '{"id":"99999999999999999999"}',  # beyond int64: text, after every integer
        '{"id":"a\\u0000b"}',
        '{"id":"b"}',
    ]
    shuffled = keys[::3] + keys[1::3] + keys[2::3]
    df = spark.createDataFrame([(k,) for k in shuffled], "k string")
    got = [r["k"] for r in df.orderBy(key_order(F.col("k"))).collect()]
    assert got == keys
    composite = spark.createDataFrame(
        [('{"a":"2","b":"1"}',), ('{"a":"10","b":"0"}',), ('{"a":"2","b":"-1"}',)], "k string"
    )
    got = [r["k"] for r in composite.orderBy(key_order(F.col("k"))).collect()]
    assert got == ['{"a":"2","b":"-1"}', '{"a":"2","b":"1"}', '{"a":"10","b":"0"}']


def test_merge_skips_files_outside_the_batch_key_ranges(spark: Any, tmp_path: Path) -> None:
    t = tmp_path / "t"
    # Three commits, three files of far-apart key runs.
    apply(spark, t, *[ev(i, "c", i, "low") for i in range(1, 40)])
    apply(spark, t, *[ev(1000 + i, "c", 10_000 + i, "mid") for i in range(40)])
    apply(spark, t, *[ev(2000 + i, "c", 1_000_000 + i, "high") for i in range(40)])
    batch = [ev(3000, "u", 1_000_005, "high2"), ev(3001, "c", 1_000_100, "new")]
    # The MERGE's target-only predicate is the batch's key bound; Delta prunes a read by the
    # same file statistics it prunes the MERGE by.
    ranges = key_ranges(
        sorted(
            r[0]
            for r in spark.createDataFrame(batch, SCHEMA).select(key_order(F.col(KEY))).collect()
        )
    )
    table = spark.read.format("delta").load(str(t))
    assert len(table.where(key_bound(ranges)).inputFiles()) < len(table.inputFiles())
    apply(spark, t, *batch)
    got = rows(spark, t)
    assert (got[1_000_005]["name"], got[1_000_100]["name"], got[5]["name"]) == (
        "high2",
        "new",
        "low",
    )
    assert len(got) == 39 + 40 + 40 + 1
    # A key outside every range but present (an outlier of the batch) is still matched.
    apply(spark, t, ev(4000, "u", 3, "low2"), ev(4001, "u", 1_000_006, "high3"))
    got = rows(spark, t)
    assert (got[3]["name"], got[1_000_006]["name"], len(got)) == ("low2", "high3", 120)


def test_table_without_the_key_order_column_still_matches_its_rows(
    spark: Any, tmp_path: Path
) -> None:
    t = tmp_path / "t"
    apply(spark, t, ev(1, "c", 1, "a"), ev(2, "c", 2, "b"))
    legacy = spark.read.format("delta").load(str(t)).drop(KEY_ORDER)
    old = tmp_path / "old"
    legacy.write.format("delta").save(str(old))
    apply(spark, old, ev(3, "u", 1, "a2"), ev(4, "c", 3, "c"))
    stored = spark.read.format("delta").load(str(old))
    assert stored.count() == 3  # key 1 updated in place, not inserted twice
    by_id = {r["id"]: r for r in stored.collect()}
    assert by_id[1]["name"] == "a2" and by_id[1][KEY_ORDER] is not None
    assert by_id[2][KEY_ORDER] is None  # untouched rows keep the empty value until they change


def test_key_ranges_cover_every_key_and_cut_at_the_widest_gaps() -> None:
    orders = sorted(
        ["p" + str(n).zfill(19) for n in [*range(100, 120), *range(5000, 5010), 7_000_000]]
    )
    ranges = key_ranges(orders, limit=3)
    assert ranges == [(orders[0], orders[19]), (orders[20], orders[29]), (orders[30], orders[30])]
    for limit in (1, 2, 5, 100):
        got = key_ranges(orders, limit=limit)
        assert len(got) <= limit
        assert all(any(lo <= o <= hi for lo, hi in got) for o in orders)
    assert key_ranges([]) == []


def test_small_targets_are_rewritten_large_ones_get_deletion_vectors_same_rows(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pyarrow as pa
    from deltalake import DeltaTable as LogTable

    from silver import merge as M
    from silver import plans

    def hinted(path: Path, *events: tuple[Any, ...]) -> None:
        # As the silver job calls it: a small batch, its own checkpoint as the MERGE's source;
        # the Spark MERGE's plans are under test here (the driver's: test_silver_merge_driver.py).
        df = spark.createDataFrame(list(events), SCHEMA)
        version = next(_versions)
        apply_changes(
            spark,
            str(path),
            df,
            DATA,
            txn_app_id="t",
            txn_version=version,
            events_hint=9,
            driver=False,
        )

    small, large = tmp_path / "small", tmp_path / "large"
    for t in (small, large):
        hinted(t, *[ev(i, "c", i, f"n{i}", "x") for i in range(1, 5)])
    log = LogTable(str(small))
    total = sum(pa.table(log.get_add_actions(flatten=True)).column("size_bytes").to_pylist())
    assert total > 0 and M._candidate_bytes(log, [("p", "q")]) == total
    assert M._candidate_bytes(log, [("s", "t")]) == 0  # text keys only: no integer key's file
    assert M._candidate_bytes(None, [("p", "q")]) == 0

    hinted(small, ev(10, "u", 2, "changed", "x"))
    monkeypatch.setattr(plans, "COPY_ON_WRITE_BYTES", -1)  # every target counts as large
    hinted(large, ev(10, "u", 2, "changed", "x"))

    rewritten, marked = M.last_commit_metrics(str(small)), M.last_commit_metrics(str(large))
    assert rewritten["numTargetDeletionVectorsAdded"] == 0 and rewritten["numTargetFilesRemoved"]
    assert marked["numTargetDeletionVectorsAdded"] >= 1 and not marked["numTargetFilesRemoved"]

    def stored(path: Path) -> dict[int, dict[str, Any]]:
        return {
            k: {c: v for c, v in r.items() if c != "_cdc_updated_at"}
            for k, r in rows(spark, path).items()
        }

    assert stored(small) == stored(large) and stored(small)[2]["name"] == "changed"
    # The settings were the MERGE's only: the session is as it was.
    for setting in (
        "spark.databricks.delta.merge.deletionVectors.persistent",
        "spark.databricks.delta.merge.materializeSource",
    ):
        assert spark.conf.get(setting, None) is None
