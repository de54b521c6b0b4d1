"""The Arrow road (a collected table's changes from their decoded Arrow rows to the driver
MERGE, no Spark job) against the Spark road (statistics and collapse by Spark jobs): the same
histories give the same silver rows, quarantine rows and counts.

Each MERGE-level history is applied twice, to two tables: by :func:`silver.merge.apply_changes`
on a DataFrame, and by :func:`silver.merge.apply_arrow_changes` on the same rows as Arrow; each
apply says which road took it, so a batch that silently left the Arrow road fails here. The
job-level tests run one lake through both roads of :class:`silver.job.SilverJob` (the Spark one
forced), poisoned events, a truncate and a crash between the quarantine and the MERGE included.
"""

from __future__ import annotations

import itertools
import json
import random
import shutil
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from bronze import schema as B
from silver import job as J
from silver import merge as M
from silver import merge_driver as D
from silver.timings import spark_jobs_started
from tests.integration.test_silver_merge_driver import (
    PAIRS,
    SCHEMA,
    TEXT_SCHEMA,
    TYPES_DATA,
    TYPES_SCHEMA,
    ev,
    pos,
    stored,
    typed,
)
from tests.integration.test_silver_poison_pill import _poison, inject, land
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.delta]

DATA = ["id", "name"]
_versions = itertools.count(1)


def both(
    spark: Any,
    tmp_path: Path,
    history: list[list[Any]],
    *,
    schema: str = SCHEMA,
    data: list[str] = DATA,
) -> list[M.MergeResult]:
    """Apply ``history`` by both roads (same versions); the tables and counts must agree.

    Returns:
        The Arrow road's results.
    """
    out = []
    for batch in history:
        version = next(_versions)
        frame = spark.createDataFrame(batch, schema)
        common: dict[str, Any] = {"txn_app_id": "app", "txn_version": version}
        by_spark = M.apply_changes(
            spark, str(tmp_path / "spark"), frame, data, events_hint=len(batch), **common
        )
        by_arrow = M.apply_arrow_changes(
            spark,
            str(tmp_path / "arrow"),
            frame.toArrow(),
            frame.schema,
            data,
            frame=lambda: frame,  # noqa: B023 - called within this iteration
            **common,
        )
        counts = ("events", "applied_keys", "inserted", "updated", "rejected_count", "skipped")
        assert [getattr(by_arrow, c) for c in counts] == [getattr(by_spark, c) for c in counts]
        assert not by_spark.from_arrow and by_spark.arrow_reason is None
        out.append(by_arrow)
    assert stored(spark, tmp_path / "arrow") == stored(spark, tmp_path / "spark")
    return out


def on_the_arrow_road(result: M.MergeResult) -> bool:
    return (
        result.from_arrow
        and result.arrow_reason is None
        and result.merged_by == D.DRIVER
        and result.spark_reason is None
    )


def test_every_change_kind_on_the_arrow_road(spark: Any, tmp_path: Path) -> None:
    history = [
        [ev(1, "c", 1, "a"), ev(2, "c", 2, "b"), ev(3, "r", 3, "c")],
        # updates, tombstones, a key move 3 -> 4 (delete + create) delivered twice
        [ev(4, "u", 1, "a2"), ev(6, "u", 2, "b2"), ev(7, "d", 1, "a2"), ev(8, "d", 3, "c")]
        + [ev(9, "c", 4, "c moved", old=3), ev(9, "c", 4, "c moved", old=3)]
        + [ev(10, "c", 5, "new"), ev(5, "c", 6, "f"), ev(11, "d", 6, "f")],
        # late older events (no overwrite of a newer row, no resurrection of a tombstone),
        # positions delivered again, a deleted key inserted again, a move back
        [ev(3, "u", 2, "stale"), ev(5, "u", 6, "stale"), ev(10, "c", 5, "new")]
        + [ev(9, "c", 4, "c moved"), ev(12, "c", 1, "a again")]
        + [ev(13, "d", 4, "c moved"), ev(14, "c", 3, "back", old=4)],
    ]
    first, *rest = both(spark, tmp_path, history)
    # No table yet: the Spark road creates it (in the job, the conform step does).
    assert first.from_arrow is False and first.arrow_reason == "no table"
    assert all(on_the_arrow_road(r) for r in rest), rest
    live = {r["id"]: r["name"] for r in stored(spark, tmp_path / "arrow") if not r[M.DELETED]}
    assert live == {1: "a again", 2: "b2", 3: "back", 5: "new"}
    assert [(r.inserted, r.updated) for r in rest] == [(3, 3), (0, 3)]


def test_positions_and_keys_of_any_character_on_the_arrow_road(spark: Any, tmp_path: Path) -> None:
    names = ["a\\b", "nul\x00in", "q'uote", 'dq"', "e\U0001f600", "007", "7", "-3", "x" * 90]

    def text(n: bytes, i: int, op: str, name: str) -> Any:
        key = orjson.dumps({"k": names[i], "n": str(i % 3 - 1)}).decode()
        return (key, n, op, 0, "tx", "a#0", [], None, names[i], name)

    first = [text(PAIRS[i][0] if i < 6 else pos(i), i, "c", "stored") for i in range(9)]
    second = [text(PAIRS[i][1] if i < 6 else pos(100), i, "u", "incoming") for i in range(9)]
    third = [text(b"\xff\xff", i, "u", "third") for i in range(0, 9, 2)]
    results = both(spark, tmp_path, [first, second, third], schema=TEXT_SCHEMA)
    assert all(on_the_arrow_road(r) for r in results[1:])
    got = {r["id"]: r["name"] for r in stored(spark, tmp_path / "arrow")}
    want = ["third", "incoming", "third", "incoming", "third", "stored", "third"]
    assert [got[n] for n in names[:7]] == want


def test_every_type_on_the_arrow_road(spark: Any, tmp_path: Path) -> None:
    history = [
        [typed(i, "c", i, i % 3) for i in range(3)],
        [typed(10 + i, "u", i, (i + 1) % 3) for i in range(3)] + [typed(20, "d", 9, 1)],
    ]
    results = both(spark, tmp_path, history, schema=TYPES_SCHEMA, data=TYPES_DATA)
    assert on_the_arrow_road(results[1])


def test_what_the_arrow_road_leaves_to_spark_ends_the_same(spark: Any, tmp_path: Path) -> None:
    """Placeholders, events older than a truncate, a replayed version: each says why."""
    start = [ev(1, "c", 1, "a"), ev(2, "c", 2, "b")]
    placeholder = ('{"id":1}', pos(3), "u", 0, "tx", "a#0", ["name"], None, 1, None)
    results = both(spark, tmp_path, [start, [placeholder, ev(4, "u", 2, "b2")]])
    assert results[1].arrow_reason == "1 events with unavailable-value placeholders"
    assert results[1].spark_reason == "1 keys with unavailable-value placeholders"
    for table in ("spark", "arrow"):
        M.apply_truncate(spark, str(tmp_path / table), pos(10), txn_app_id="t", txn_version=1)
    late = both(spark, tmp_path, [[ev(5, "c", 7, "late"), ev(11, "c", 8, "after")]])
    assert late[0].arrow_reason == "1 events older than a purge or truncate horizon"
    # A version the table holds already: skipped before any work, on either road.
    again = M.apply_arrow_changes(
        spark,
        str(tmp_path / "arrow"),
        spark.createDataFrame([ev(13, "u", 8, "no")], SCHEMA).toArrow(),
        spark.createDataFrame([], SCHEMA).schema,
        DATA,
        frame=lambda: pytest.fail("a replay needs no DataFrame"),
        txn_app_id="app",
        txn_version=1,
    )
    assert again.skipped and again.from_arrow


def test_key_order_of_is_sparks_key_order(spark: Any) -> None:
    """Every key the driver computes a key-order text for gets Spark's text (a different one
    would let the MERGE's range bound skip the row the key changes)."""
    from pyspark.sql import functions as F

    rng = random.Random(5)
    alphabet = ["0", "1", "9", "-", "a", "Z", " ", '"', "\\", "\x00", "\x01", "é", "\U0001f600"]
    raw: list[str] = [
        "1",
        "-1",
        "0",
        "-0",
        "9223372036854775807",
        "-9223372036854775808",
        "12345678901234567890",
        '"406c07f3"',
        '"7"',
        "{}",
        '{"id":null}',
        '{"id":"abc\\u00e9"}',
    ]
    for _ in range(300):
        fields = {
            f"f{j}": rng.choice(
                [
                    None,
                    str(rng.randint(-(10**20), 10**20)),
                    str(rng.randint(-999, 999)),
                    "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 6))),
                ]
            )
            for j in range(rng.randint(1, 3))
        }
        raw.append(orjson.dumps(fields).decode())
    # Keys as the decoder writes them (canonical), and as written (integers as numbers),
    # then Spark's key order of each.
    for _ in range(100):
        big = rng.randint(-(2**70), 2**70)  # beyond int64: orjson refuses it
        raw.append(json.dumps({"id": big, "s": "x"}, separators=(",", ":")))
    frame = spark.createDataFrame([(r,) for r in raw], "raw string")
    keys = frame.select(J._canonical_key(F.col("raw")).alias("key")).union(
        frame.select(F.col("raw").alias("key"))
    )
    rows = keys.select("key", M.key_order(F.col("key")).alias("order")).collect()
    mirrored = [(r["key"], M.key_order_of(r["key"]), r["order"]) for r in rows]
    assert [m for m in mirrored if m[1] is not None and m[1] != m[2]] == []
    # Left to Spark: only keys that hold a line terminator.
    assert all(any(c in k for c in "\r\n") for k, o, _ in mirrored if o is None)
    assert sum(o is not None for _, o, _ in mirrored) > 800


# --- through the job -----------------------------------------------------------------------------


def _sources(tmp_path: Path, lake: Path, part: str) -> None:
    """Sources ``a`` and ``b``: the synthetic PostgreSQL shop, its ``first`` or ``second`` half,
    or ``all`` of it, landed."""
    for name, seed in (("a", 3), ("b", 4)):
        stream = postgres_stream(snapshot_rows=3, transactions=10, seed=seed)
        lines = [
            line.replace(b'"shop', f'"{name}'.encode())
            for line in stream.lines("kafka_json", schemas=True)
        ]
        cut = {"first": (0, len(lines) // 2), "second": (len(lines) // 2, None)}
        low, high = cut.get(part, (0, None))
        path = tmp_path / f"{name}-{part}.jsonl"
        write_lines(path, iter(lines[low:high]))
        land(path, lake, name)


def _truncate_and_keyless(lake: Path) -> None:
    """A truncate of ``a``'s orders inside the next micro-batch, and an event without a key."""
    rows = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    orders = sorted(
        (r for r in rows if r[B.SOURCE] == "a" and r[B.COLLECTION] == "public.orders"),
        key=lambda r: r[B.POSITION],
    )
    template = next(r for r in reversed(orders) if r[B.OP] == "c")
    value = orjson.loads(template[B.VALUE_JSON])
    truncate = {
        **_poison(template, 0),
        B.POSITION: template[B.POSITION] + b"\x00",
        B.OP: "t",
        B.KEY_JSON: None,
        B.VALUE_JSON: orjson.dumps({**value, "op": "t", "before": None, "after": None}).decode(),
        B.ORIGIN: "truncate",
    }
    keyless = {**_poison(template, 9100), B.KEY_JSON: None}
    keyless[B.POSITION] = template[B.POSITION] + b"\x02"
    schema = DeltaTable(str(lake / "bronze" / "events")).schema().to_arrow()
    write_deltalake(
        str(lake / "bronze" / "events"),
        pa.Table.from_pylist([truncate, keyless], schema=pa.schema(schema)),
        mode="append",
    )


def _contents(spark: Any, lake: Path, name: str) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(str(lake / "silver" / name))
    drop = [c for c in frame.columns if c in ("quarantined_at", M.UPDATED_AT, "recorded_at")]

    def here(v: Any) -> Any:  # a reason may name the lake's directory
        return v.replace(str(lake), "<lake>") if isinstance(v, str) else v

    return sorted((tuple(here(v) for v in r) for r in frame.drop(*drop).collect()), key=repr)


def _force_spark_road(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(J, "_why_not_arrow", lambda *a, **k: "forced by the test")


def test_one_lake_through_both_roads_of_the_job(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = tmp_path / "base"
    _sources(tmp_path, base, "first")
    J.SilverJob(spark, base).run_once()  # the tables exist: the next micro-batch is steady
    _sources(tmp_path, base, "second")
    bad = inject(base)
    _truncate_and_keyless(base)
    lakes = {road: tmp_path / road for road in ("arrow", "spark")}
    for lake in lakes.values():
        shutil.copytree(base, lake)

    # The Arrow road's lake crashes between a table's quarantine append and its MERGE
    # (source b's orders: a value that does not decode is refused first); the replay appends
    # nothing twice and counts what a run without the crash counts.
    real = M.apply_arrow_changes
    crashed: list[str] = []

    def crash_once(spark_: Any, path: str, *args: Any, **kwargs: Any) -> Any:
        if "b__public__orders" in path and not crashed:
            crashed.append(path)
            raise RuntimeError("killed between the quarantine and the MERGE")
        return real(spark_, path, *args, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(M, "apply_arrow_changes", crash_once)
        with pytest.raises(Exception, match="killed between"):
            J.SilverJob(spark, lakes["arrow"]).run_once()
    assert crashed
    results = {"arrow": J.SilverJob(spark, lakes["arrow"]).run_once()}
    with monkeypatch.context() as m:
        _force_spark_road(m)
        results["spark"] = J.SilverJob(spark, lakes["spark"]).run_once()
    merged = {road: [r for rs in results[road].merged.values() for r in rs] for road in results}
    assert merged["spark"] and all(r.arrow_reason == "forced by the test" for r in merged["spark"])
    roads = {(r.from_arrow, r.arrow_reason) for r in merged["arrow"]}
    assert (True, None) in roads  # plain tables took the Arrow road
    counters = ("events", "read", "applied", "quarantined", "quarantined_values", "ignored")
    for counter in counters:
        assert getattr(results["arrow"], counter) == getattr(results["spark"], counter), counter
    assert results["arrow"].read == results["arrow"].applied + results["arrow"].quarantined

    names = sorted(p.name for p in (lakes["spark"] / "silver").iterdir() if "__public__" in p.name)
    assert len(names) == 4
    for name in [*names, "_quarantine", "_cuts", "_pending"]:
        if not (lakes["spark"] / "silver" / name).exists():
            continue
        assert _contents(spark, lakes["arrow"], name) == _contents(spark, lakes["spark"], name), (
            name
        )
    reasons = [r[6] for r in _contents(spark, lakes["arrow"], "_quarantine")]
    assert any("null record key" in r for r in reasons)
    assert all(any(fragment in r for r in reasons) for _s, _t, fragment in bad.values())


def test_a_plain_collected_table_runs_no_spark_job_but_its_decode(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A steady micro-batch's table (existing table, no placeholder, no refusal) costs the
    Spark jobs of its decode and none else: a fall back to the Spark road (statistics and
    collapse jobs) fails here."""
    lake = tmp_path / "lake"
    _sources(tmp_path, lake, "all")
    J.SilverJob(spark, lake, parallelism=1).run_once()
    rows = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    orders = [r for r in rows if r[B.SOURCE] == "a" and r[B.COLLECTION] == "public.orders"]
    top = max(orders, key=lambda r: r[B.POSITION])
    template = next(r for r in orders if r[B.OP] == "c")
    fresh = [
        {**_poison(template, 8000 + i), B.POSITION: top[B.POSITION] + bytes([1, i])}
        for i in range(20)
    ]
    schema = pa.schema(DeltaTable(str(lake / "bronze" / "events")).schema().to_arrow())
    write_deltalake(
        str(lake / "bronze" / "events"), pa.Table.from_pylist(fresh, schema=schema), mode="append"
    )

    jobs = {"table": 0, "decode": 0}
    apply_table, decoded_rows = J.SilverJob._apply_table, J.SilverJob._decoded_rows

    def counted(key: str, real: Any) -> Any:
        def run(self: J.SilverJob, *args: Any, **kwargs: Any) -> Any:
            before = spark_jobs_started(spark)
            try:
                return real(self, *args, **kwargs)
            finally:
                after = spark_jobs_started(spark)
                assert before is not None and after is not None
                jobs[key] += after - before

        return run

    monkeypatch.setattr(J.SilverJob, "_apply_table", counted("table", apply_table))
    monkeypatch.setattr(J.SilverJob, "_decoded_rows", counted("decode", decoded_rows))
    result = J.SilverJob(spark, lake, parallelism=1).run_once()
    (merge,) = result.merged[J.silver_table_name("a", "public.orders")]
    assert on_the_arrow_road(merge) and (merge.events, merge.inserted) == (20, 20)
    assert jobs["table"] == jobs["decode"]
    assert jobs["decode"] <= 1
