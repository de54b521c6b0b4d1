"""The MERGE on the driver (deltalake) against the Spark MERGE: same histories, same silver rows.

Every history is applied twice, to two tables: once by Spark (``driver=False``), once with the
driver path allowed, and each apply asserts which path took it, so a driver batch that silently
went to Spark fails here.
"""

from __future__ import annotations

import datetime as dt
import decimal
import itertools
import math
from pathlib import Path
from typing import Any

import pytest

from pipeline.sql import quote_identifier
from silver import merge as M
from silver import merge_driver as D

pytestmark = pytest.mark.spark

SCHEMA = (
    "_cdc_key string, _cdc_position binary, _cdc_op string, _cdc_source_ts long, "
    "_cdc_tx_id string, _cdc_bronze_batch string, _cdc_unavailable array<string>, "
    "_cdc_old_key string, id int, name string"
)
DATA = ["id", "name"]
_versions = itertools.count(1)


def pos(n: int) -> bytes:
    return n.to_bytes(8, "big")


def ev(n: int | bytes, op: str, ident: int, name: str | None = None, old: int | None = None) -> Any:
    key = f'{{"id":{ident}}}'
    old_key = f'{{"id":{old}}}' if old is not None else None
    position = n if isinstance(n, bytes) else pos(n)
    return (key, position, op, 0, "tx", "a#0", [], old_key, ident, name)


def apply(
    spark: Any,
    path: Path,
    events: list[Any],
    *,
    driver: bool,
    schema: str = SCHEMA,
    data: list[str] = DATA,
    version: int | None = None,
) -> M.MergeResult:
    """As the silver job calls it: a small batch (``events_hint``)."""
    return M.apply_changes(
        spark,
        str(path),
        spark.createDataFrame(events, schema),
        data,
        txn_app_id="app",
        txn_version=version if version is not None else next(_versions),
        events_hint=len(events),
        driver=driver,
    )


def stored(spark: Any, path: Path) -> list[dict[str, Any]]:
    """Every row (tombstones too) but its write time, NaN made comparable."""
    rows = spark.read.format("delta").load(str(path)).drop(M.UPDATED_AT).collect()

    def plain(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, list):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        if hasattr(v, "asDict"):
            return plain(v.asDict())
        return v

    return sorted((plain(r.asDict()) for r in rows), key=lambda r: r[M.KEY])


def both(
    spark: Any, tmp_path: Path, history: list[list[Any]], **kw: Any
) -> tuple[list[M.MergeResult], list[M.MergeResult]]:
    """Apply ``history`` by Spark and by the driver; the tables must end equal."""
    by_spark = [apply(spark, tmp_path / "spark", b, driver=False, **kw) for b in history]
    by_driver = [apply(spark, tmp_path / "driver", b, driver=True, **kw) for b in history]
    assert all(r.spark_reason == "silver.merge.driver is off" for r in by_spark)
    assert stored(spark, tmp_path / "driver") == stored(spark, tmp_path / "spark")
    for s, d in zip(by_spark, by_driver, strict=True):
        assert (d.inserted, d.updated, d.applied_keys) == (s.inserted, s.updated, s.applied_keys)
    return by_spark, by_driver


def test_a_history_of_every_change_kind_ends_the_same(spark: Any, tmp_path: Path) -> None:
    history = [
        [ev(1, "c", 1, "a"), ev(2, "c", 2, "b"), ev(3, "r", 3, "c"), ev(4, "u", 1, "a2")]
        + [ev(5, "c", 6, "f")],
        # update, deletes (tombstones), a key move 3 -> 4 (delete + create) delivered twice
        [ev(6, "u", 2, "b2"), ev(7, "d", 1, "a2"), ev(8, "d", 3, "c")]
        + [ev(9, "c", 4, "c moved", old=3), ev(9, "c", 4, "c moved", old=3)]
        + [ev(10, "c", 5, "new"), ev(11, "d", 6, "f")],
        # late older events (no overwrite of a newer row, no resurrection of a tombstone),
        # positions delivered again, a deleted key inserted again, a move back
        [ev(3, "u", 2, "stale"), ev(5, "u", 6, "stale"), ev(10, "c", 5, "new")]
        + [ev(9, "c", 4, "c moved"), ev(12, "c", 1, "a again")]
        + [ev(13, "d", 4, "c moved"), ev(14, "c", 3, "back", old=4)],
    ]
    _, by_driver = both(spark, tmp_path, history)
    assert all(r.merged_by == D.DRIVER and r.spark_reason is None for r in by_driver)
    live = {r["id"]: r["name"] for r in stored(spark, tmp_path / "driver") if not r[M.DELETED]}
    assert live == {1: "a again", 2: "b2", 3: "back", 5: "new"}
    assert [(r.inserted, r.updated) for r in by_driver] == [(4, 0), (2, 4), (0, 3)]


def test_a_replayed_version_is_skipped_by_the_driver(spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    t = tmp_path / "t"
    first = apply(spark, t, [ev(1, "c", 1, "a")], driver=True, version=7)
    again = apply(spark, t, [ev(2, "u", 1, "not applied")], driver=True, version=7)
    assert first.merged_by == D.DRIVER and again.skipped
    assert DeltaTable(str(t)).transaction_version("app") == 7
    assert [r["name"] for r in stored(spark, t)] == ["a"]


TEXT_SCHEMA = SCHEMA.replace("id int", "id string")
PAIRS = [
    # stored position -> incoming position; Spark's order decides which apply
    (b"\x80\x00", b"\x80"),  # a prefix is older
    (b"\x7f", b"\x7f\x00"),  # a longer one with the prefix is newer
    (b"\x01", b"\x00\xff"),  # the first byte decides
    (b"\x00\x10", b"\xff"),  # high byte: unsigned, newer
    (b"\xff", b"\xfe\xff"),
    (b"\x80", b"\x80"),  # the same: not newer
]


def test_positions_as_unsigned_bytes_and_keys_with_any_character(
    spark: Any, tmp_path: Path
) -> None:
    import orjson

    names = ["a\\b", "nul\x00in", "q'uote", 'dq"', "e\U0001f600", "007", "7", "-3", "x" * 90]

    def text(n: bytes, i: int, op: str, name: str) -> Any:
        # Composite keys: the key order joins the fields with U+0001.
        key = orjson.dumps({"k": names[i], "n": str(i % 3)}).decode()
        return (key, n, op, 0, "tx", "a#0", [], None, names[i], name)

    first = [text(PAIRS[i][0] if i < 6 else pos(i), i, "c", "stored") for i in range(9)]
    second = [text(PAIRS[i][1] if i < 6 else pos(100), i, "u", "incoming") for i in range(9)]
    _, by_driver = both(spark, tmp_path, [first, second], schema=TEXT_SCHEMA)
    assert [r.merged_by for r in by_driver] == [D.DRIVER, D.DRIVER]
    got = {r["id"]: r["name"] for r in stored(spark, tmp_path / "driver")}
    want = ["stored", "incoming", "stored", "incoming", "stored", "stored"] + ["incoming"] * 3
    assert [got[n] for n in names] == want


def test_deletion_vectors_of_earlier_spark_merges_are_honoured(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from silver import plans

    base = tmp_path / "spark"
    # Spark marks rows with deletion vectors (not rewrites) when targets count as large.
    with monkeypatch.context() as m:
        m.setattr(plans, "COPY_ON_WRITE_BYTES", -1)
        apply(spark, base, [ev(i, "c", i, f"n{i}") for i in range(1, 61)], driver=False)
        apply(spark, base, [ev(100 + i, "u", i, f"dv{i}") for i in (2, 5, 40)], driver=False)
        assert M.last_commit_metrics(str(base))["numTargetDeletionVectorsAdded"] >= 1
    shutil.copytree(base, tmp_path / "driver")
    # Rows a vector hides come back updated once, not twice; a delete, new keys beside them.
    batch = [ev(200 + i, "u", i, f"after{i}") for i in (2, 3, 5, 40, 41, 70)]
    batch += [ev(300, "d", 6, "gone"), ev(301, "c", 71, "new")]
    s = apply(spark, base, batch, driver=False)
    d = apply(spark, tmp_path / "driver", batch, driver=True)
    assert d.merged_by == D.DRIVER and (d.inserted, d.updated) == (s.inserted, s.updated) == (2, 6)
    assert stored(spark, tmp_path / "driver") == stored(spark, base)
    assert spark.read.format("delta").load(str(tmp_path / "driver")).count() == 62


def test_a_widened_table_and_large_candidates_fall_back_to_spark(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyspark.sql.types import LongType

    from silver.evolution import widen_and_add

    t = tmp_path / "t"
    assert apply(spark, t, [ev(1, "c", 1, "a")], driver=True).merged_by == D.DRIVER
    monkeypatch.setattr(D, "DRIVER_TARGET_BYTES", 0)
    large = apply(spark, t, [ev(2, "u", 1, "b")], driver=True)
    assert large.merged_by == D.SPARK and "candidate files" in (large.spark_reason or "")
    monkeypatch.undo()
    table = M.stored_schema(str(t))
    assert table is not None
    widen_and_add(spark, str(t), {"id": table["id"].dataType}, {"id": LongType()})
    wide = SCHEMA.replace("id int", "id long")
    r = apply(spark, t, [ev(3, "u", 1, "c")], driver=True, schema=wide)
    assert r.merged_by == D.SPARK and r.spark_reason == "table features typeWidening"
    assert [r["name"] for r in stored(spark, t)] == ["c"]


TYPES_SCHEMA = (
    "_cdc_key string, _cdc_position binary, _cdc_op string, _cdc_source_ts long, "
    "_cdc_tx_id string, _cdc_bronze_batch string, _cdc_unavailable array<string>, "
    "id int, b boolean, i8 tinyint, i16 smallint, i64 bigint, f float, d double, "
    "dec decimal(38,10), dsmall decimal(5,2), dt date, ts timestamp, ntz timestamp_ntz, "
    "bin binary, s string, arr array<int>, m map<string,double>, "
    "st struct<x:int,y:array<string>,z:struct<w:decimal(20,4)>>"
)
TYPES_DATA = [f.split(" ")[0] for f in TYPES_SCHEMA.split(", ")[7:]]


def typed(n: int, op: str, ident: int, k: int) -> Any:
    utc = dt.UTC
    values: list[Any] = [
        ident,
        k % 2 == 0,
        -128 if k else 127,
        -32768 if k else 32767,
        -(2**63) if k else 2**63 - 1,
        float("nan") if k == 1 else (float("inf") if k == 2 else -0.0),
        float("nan") if k == 2 else (float("-inf") if k == 1 else 1e308),
        decimal.Decimal("-9999999999999999999999999999.9999999999")
        if k
        else decimal.Decimal("0.0000000001"),
        decimal.Decimal("-999.99") if k else None,
        dt.date(1, 1, 1) if k else dt.date(9999, 12, 31),
        dt.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=utc)
        if k
        else dt.datetime(2038, 1, 19, 3, 14, 8, 999999, tzinfo=utc),
        dt.datetime(1970, 1, 1) if k else dt.datetime(2262, 4, 12, 23, 47, 16, 854775),
        bytes([0, 255, 128]) if k else b"",
        "\x00\u00e9\U0001f600" if k else "",
        [1, None, -(2**31)] if k else [],
        {"a": float("nan"), "b": None} if k else {},
        {"x": None, "y": ["p", None], "z": {"w": decimal.Decimal("-1234567890123456.1234")}}
        if k
        else None,
    ]
    key = f'{{"id":{ident}}}'
    return (key, pos(n), op, 0, "tx", "a#0", [], *values)


def test_every_type_is_written_as_spark_writes_it(spark: Any, tmp_path: Path) -> None:
    # One batch: an update writes its columns from the same Arrow rows as an insert.
    history = [[typed(i, "c", i, i % 3) for i in range(6)] + [typed(20, "d", 9, 1)]]
    _, by_driver = both(spark, tmp_path, history, schema=TYPES_SCHEMA, data=TYPES_DATA)
    assert [r.merged_by for r in by_driver] == [D.DRIVER]


def test_spark_reads_the_driver_tables_checkpoints(spark: Any, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    t = tmp_path / "t"
    apply(spark, t, [ev(1, "c", 1, "a")], driver=True)
    spark.sql(
        f"ALTER TABLE delta.{quote_identifier(str(t))} "
        "SET TBLPROPERTIES ('delta.checkpointInterval' = '2')"
    )
    for n in range(2, 4):
        batch = [ev(n, "c", n, "x"), ev(n, "u", 1, f"a{n}")]
        assert apply(spark, t, batch, driver=True).merged_by == D.DRIVER
    names = [p.name.split(".") for p in (t / "_delta_log").glob("*.checkpoint.parquet")]
    checkpoints = {int(n[0]) for n in names if n[0].isdigit()}  # not Spark's .crc files
    by_delta_rs = {
        h["version"]
        for h in DeltaTable(str(t)).history()
        if str(h.get("engineInfo", "")).startswith("delta-rs")
    }
    assert checkpoints & by_delta_rs  # a checkpoint delta-rs wrote after its own commit
    # Spark reads the table from delta-rs's checkpoint (Spark writing after delta-rs: the
    # widened-table test above).
    spark.catalog.clearCache()
    assert sorted(r["name"] for r in stored(spark, t)) == ["a3", "x", "x"]
