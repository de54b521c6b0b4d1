"""Benchmark: change events applied per second to a silver Delta table, against the table's size.

What it measures
    The time to apply one batch of B decoded change events to a silver table of N rows, for
    every N in ``--sizes`` and B in ``--batches``, by three methods on the same input:

    ``apply_changes``
        :func:`silver.merge.apply_changes`, called through its public signature, as the silver
        job calls it from its ``foreachBatch``.
    ``merge_foreach_batch``
        The documented Delta "upsert from streaming queries using foreachBatch" pattern for a
        change feed: keep each key's latest change (``max(struct(position, ...))`` per key), then
        one MERGE with ``whenMatchedDelete`` for deletes, ``whenMatchedUpdateAll`` and
        ``whenNotMatchedInsertAll`` for the rest. It is what a team would write by hand; it has
        none of silver's guarantees (no position check, deletes are physical, no placeholders).
    ``append``
        A plain Delta append of the same B rows: the floor, what writing the batch costs at all.
    ``apply_small_driver`` / ``apply_small_spark``
        ``apply_changes`` as the silver job calls it on a micro-batch (``events_hint``: a batch
        of at most ``silver.plans.SMALL_INPUT_ROWS`` events is planned as small), with the
        MERGE on the driver allowed (deltalake, ``silver.merge.driver: auto``) or forced to
        Spark (``off``). The row records which path merged each run and why Spark did
        (``merged_by``/``spark_reason``: a batch over the bound, or candidate files over
        ``silver.merge_driver.DRIVER_TARGET_BYTES``, stays on Spark whatever is asked).

    Per timed run, the row also keeps the Spark jobs the apply started and the CPU seconds of
    the benchmark's processes (Python driver and JVM) it took: on a shared machine these mean
    more than wall seconds.

    Every method gets the batch as a DataFrame read from a Delta table (as a ``foreachBatch``
    function gets its micro-batch), and is timed from the call until its Delta commit is done.
    The figures are events/s (B / seconds) and, per batch size and method, the ratio of the time
    on the largest table to the time on the smallest (the goal for ``apply_changes`` is <= 1.5
    between 1M and 10M rows: the cost of a batch should follow the batch, not the table).

Why not ``pyspark.pipelines.create_auto_cdc_flow``
    Spark 4.2's declarative pipelines ship Auto CDC (SCD type 1) and ``spark-pipelines`` runs
    locally (it needs the ``pipelines`` extra: pandas, grpcio, grpcio-status,
    googleapis-common-protos, zstandard, none of which medallion installs). Tried here with a
    pipeline whose target is ``create_streaming_table(..., format="delta")``, Delta 4.4.0's jars
    and extension on the ``spark-pipelines`` command line, the flow fails at start, three times,
    then the run aborts::

        [AUTOCDC_TARGET_DOES_NOT_SUPPORT_MERGE] Cannot start AutoCDC flow: the target table
        `spark_catalog`.`default`.`silver_t` (format: delta) does not support row-level
        operations. AutoCDC requires a target backed by a connector that supports MERGE.

    Spark's ``AutoCdcMergeWriteBase.requireDestinationSupportsRowLevelOps`` requires the target's
    DSv2 table to implement ``SupportsRowLevelOperations``; Delta implements MERGE through its
    own analyzer rules instead, and no class of ``delta-spark_4.2_2.13-4.4.0.jar`` implements
    that interface. apache/spark PR #56683 (SPARK-57623, open) drops the check for exactly this
    reason. Until a Spark release carries it, Auto CDC cannot write a Delta table, so this
    benchmark uses the documented foreachBatch MERGE pattern in its place.

Workload
    The silver table is built directly (not through bronze): ids 0..N-1 written in id order, in
    files of ``--rows-per-file`` rows, with silver's metadata columns (PostgreSQL-layout
    positions, source time, tx id, bronze batch, update time) and six data columns: int id,
    string name, decimal(12,2) amount, timestamp, boolean, ~100-character text. One row in a
    hundred is a retained tombstone. A batch of B events is 30 % inserts of new keys, 60 %
    updates (a fifth of them on 1,000 hot keys, a tenth on keys inserted earlier in the batch,
    the rest uniform over the table's live keys), 10 % deletes of distinct live keys (at the end
    of the batch), all at positions above the table's. Everything is deterministic.
    ``--workload key-local`` (the usual OLTP shape) keeps the inserts of new keys at the end
    but draws the updated, hot and deleted keys from the newest ``RECENT_BATCHES * B`` live keys
    instead of the whole table.

How
    A setup child process builds each base table and its batches once. Then, for each
    (size, batch, method), a child process with its own Spark session (``local[--cores]``) does
    one untimed run that checks the result (row counts, tombstones, the last value of the most
    changed key, ``apply_changes``'s counts), then ``--runs`` timed runs, each on a fresh copy of
    the base table (the copy is not timed; cached data is dropped between runs). The median is
    reported; the peak RSS is the Spark JVM's (VmHWM) over the whole child. For the MERGE
    methods the Delta commit's operation metrics (files and rows rewritten, scan and rewrite
    time) are kept in the JSON, so the time outside Delta's MERGE shows too.

    The base table has the Delta properties silver creates its tables with
    (``silver.merge.TABLE_PROPERTIES``: deletion vectors on, so a MERGE marks the changed rows of
    a file instead of copying the file's other rows). ``--copy-on-write`` builds it without
    deletion vectors instead, as the foreachBatch pattern's tables usually are, and as silver's
    were before.

    ``--event-log DIR`` keeps each measuring session's Spark event log (history-server format,
    zstd), which shows the time, input and shuffle of every job of the apply.
    ``--runs-large`` sets the timed runs for the largest table alone (one 10M-row child takes
    minutes). Each row of the JSON carries the hash of the ``silver/merge.py`` it measured. On a
    shared, busy machine the runs of one configuration vary by tens of percent.

Usage::

    .venv/bin/python benchmarks/silver_apply.py                 # 1M and 10M rows, 10k and 100k
    .venv/bin/python benchmarks/silver_apply.py --quick         # 100k and 1M rows, 10k, 1 run
    .venv/bin/python benchmarks/silver_apply.py --sizes 1000000 --batches 10000 --runs 5
    .venv/bin/python benchmarks/silver_apply.py --runs-large 1   # one timed run at 10M rows

The figures go to stdout as Markdown tables and to
``benchmarks/results/silver_apply-<UTC timestamp>.json``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from pyspark.sql import Column, DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pipeline.spark import build_spark_session  # noqa: E402
from silver.merge import apply_changes  # noqa: E402

_merge_py_sha256 = hashlib.sha256((ROOT / "silver" / "merge.py").read_bytes()).hexdigest()
"""Hash of silver/merge.py as this process imported it."""

METHODS = (
    "apply_changes",
    "merge_foreach_batch",
    "append",
    "apply_small_driver",
    "apply_small_spark",
)
DATA_COLUMNS = ["id", "name", "amount", "changed_at", "active", "notes"]
SILVER_METADATA = [
    "_cdc_key",
    "_cdc_position",
    "_cdc_op",
    "_cdc_deleted",
    "_cdc_source_ts",
    "_cdc_tx_id",
    "_cdc_bronze_batch",
    "_cdc_updated_at",
]
INPUT_METADATA = [
    "_cdc_key",
    "_cdc_position",
    "_cdc_op",
    "_cdc_source_ts",
    "_cdc_tx_id",
    "_cdc_bronze_batch",
    "_cdc_unavailable",
]
TOMBSTONE_EVERY = 100
"""Ids with ``id % 100 == 99`` are retained tombstones in the base table."""
HOT_KEYS = 1000
"""Updates that do not go uniformly over the table go to this many hot keys."""
DELETE_STRIDE = 1_000_003
"""Prime multiplier that spreads the deleted keys over the live keys, each once."""
BASE_LSN = 1_000_000_000_000
"""Commit LSNs of the batch start here, above every position of the base table."""
WORKLOADS = ("uniform", "key-local")
RECENT_BATCHES = 10
"""``key-local``: updates and deletes go to the newest ``RECENT_BATCHES * B`` live keys."""


@dataclass(frozen=True, slots=True)
class BatchPlan:
    """A change batch and the counts its correct application implies."""

    size: int
    batch: int
    path: str
    inserts: int
    updates: int
    deletes: int
    existing_keys_touched: int
    hot_key: str
    hot_key_events: int
    hot_key_last_name: str | None
    workload: str = "uniform"


# --------------------------------------------------------------------------------------------
# Data generation (Spark expressions, deterministic)


def _unit(col: Column, salt: str) -> Column:
    """A deterministic pseudo-random double in [0, 1) from ``col`` and ``salt``."""
    return F.pmod(F.xxhash64(col, F.lit(salt)), F.lit(1_000_000)) / F.lit(1_000_000.0)


def _below(col: Column, salt: str, n: int) -> Column:
    """A deterministic pseudo-random long in [0, n)."""
    return F.pmod(F.xxhash64(col, F.lit(salt)), F.lit(n))


def _u64(col: Column) -> Column:
    return F.unhex(F.lpad(F.hex(col.cast("long")), 16, "0"))


def _position(commit_lsn: Column, seq: Column) -> Column:
    """PostgreSQL layout of bronze.positions: v | commit_lsn u64 | phase | lsn u64 | seq u32."""
    return F.concat(
        F.unhex(F.lit("01")),
        _u64(commit_lsn),
        F.unhex(F.lit("01")),
        _u64(commit_lsn),
        F.unhex(F.lpad(F.hex(seq.cast("long")), 8, "0")),
    )


def _live_id(live_index: Column) -> Column:
    """Map an index over the live keys to its id (skipping the ids that are tombstones)."""
    per = TOMBSTONE_EVERY - 1
    return (F.floor(live_index / per) * TOMBSTONE_EVERY + F.pmod(live_index, F.lit(per))).cast(
        "long"
    )


def _data(id_col: Column, version: Column) -> dict[str, Column]:
    """The six data columns of a row with this id at this version, by name."""
    notes = F.substring(
        F.concat(
            F.md5(F.concat_ws(":", id_col, version)),
            F.md5(version.cast("string")),
            F.lit(" lorem ipsum dolor sit amet"),
        ),
        1,
        100,
    )
    return {
        "id": id_col.cast("int"),
        "name": F.concat(F.lit("customer-"), id_col, F.lit("-v"), version),
        "amount": (F.pmod(F.xxhash64(id_col, version), F.lit(10_000_000)) / 100).cast(
            "decimal(12,2)"
        ),
        "changed_at": F.timestamp_seconds(
            F.lit(1_700_000_000) + F.pmod(id_col + version, F.lit(31_536_000))
        ),
        "active": F.pmod(id_col + version, F.lit(3)) != 0,
        "notes": notes,
    }


def table_properties(copy_on_write: bool) -> dict[str, str]:
    """The Delta properties of the base table: silver's, without deletion vectors if asked."""
    from silver import merge

    properties = dict(getattr(merge, "TABLE_PROPERTIES", {"delta.enableDeletionVectors": "true"}))
    if copy_on_write:
        properties["delta.enableDeletionVectors"] = "false"
    return properties


def build_base(
    spark: SparkSession, size: int, path: str, rows_per_file: int, properties: dict[str, str]
) -> None:
    """Write the silver table of ``size`` rows at ``path`` with these Delta properties."""
    from silver import merge

    files = max(1, math.ceil(size / rows_per_file))
    ids = spark.range(0, size, 1, files).select(F.col("id"))
    tomb = F.pmod(F.col("id"), F.lit(TOMBSTONE_EVERY)) == TOMBSTONE_EVERY - 1
    commit_lsn = F.lit(1_000_000) + F.col("id") * 10
    base = ids.select(
        F.concat(F.lit('{"id":'), F.col("id"), F.lit("}")).alias("_cdc_key"),
        # Silver's file-skipping column, where the silver/merge.py under test has one.
        *(
            [
                merge.key_order(F.concat(F.lit('{"id":'), F.col("id"), F.lit("}"))).alias(
                    "_cdc_key_order"
                )
            ]
            if hasattr(merge, "key_order")
            else []
        ),
        _position(commit_lsn, F.lit(0)).alias("_cdc_position"),
        F.when(tomb, F.lit("d")).otherwise(F.lit("r")).alias("_cdc_op"),
        tomb.alias("_cdc_deleted"),
        (F.lit(1_600_000_000_000) + F.col("id")).alias("_cdc_source_ts"),
        F.concat(F.lit("tx-"), F.floor(F.col("id") / 3)).alias("_cdc_tx_id"),
        F.lit("bench#0").alias("_cdc_bronze_batch"),
        F.timestamp_seconds(F.lit(1_690_000_000)).alias("_cdc_updated_at"),
        *[c.alias(n) for n, c in _data(F.col("id"), F.lit(0)).items()],
    )
    base.write.format("delta").options(**properties).mode("overwrite").save(path)


def build_batch(
    spark: SparkSession, size: int, batch: int, path: str, workload: str = "uniform"
) -> BatchPlan:
    """Write a batch of ``batch`` change events for the table of ``size`` rows at ``path``.

    ``uniform`` draws the updated and deleted keys from the whole table; ``key-local`` (the usual
    OLTP shape) from its newest ``RECENT_BATCHES * batch`` live keys, the hot keys being the
    newest ``HOT_KEYS``.
    """
    inserts, updates = int(batch * 0.3), int(batch * 0.6)
    deletes = batch - inserts - updates
    total_live = size - size // TOMBSTONE_EVERY
    # Live indexes [first, first + live) are the ones drawn from (the newest for key-local).
    live = total_live if workload == "uniform" else min(total_live, RECENT_BATCHES * batch)
    first = total_live - live
    if deletes > live or math.gcd(DELETE_STRIDE, live) != 1:
        raise SystemExit(f"cannot draw {deletes} distinct deletes from {live} live keys")
    hot = min(HOT_KEYS, live)
    idx = F.col("id")
    kind = (
        F.when(idx < inserts, F.lit("c"))
        .when(idx < inserts + updates, F.lit("u"))
        .otherwise(F.lit("d"))
    )
    # Time of the event in the batch, in [0, 1): inserts in the first half, updates before 0.9,
    # updates of a key inserted in this batch after its insert, deletes last.
    insert_t = _unit(idx, "t") * 0.5
    upd = idx - inserts
    choice = _below(upd, "which", 100)
    new_key_ins = _below(upd, "newkey", max(1, inserts))
    # uniform: hot keys spread over the table; key-local: the newest HOT_KEYS live keys.
    hot_first = first if workload == "uniform" else first + live - hot
    hot_step = live // hot if workload == "uniform" else 1
    hot_live = F.lit(hot_first) + _below(upd, "hot", hot) * hot_step
    uniform_live = F.lit(first) + _below(upd, "uniform", live)
    update_id = (
        F.when(choice < 10, F.lit(size) + new_key_ins)
        .when(choice < 30, _live_id(hot_live))
        .otherwise(_live_id(uniform_live))
    )
    update_t = F.when(
        choice < 10,
        _unit(new_key_ins, "t") * 0.5 + _unit(upd, "after") * 0.4,
    ).otherwise(_unit(upd, "t") * 0.9)
    delete_id = _live_id(
        F.lit(first) + F.pmod((idx - inserts - updates) * F.lit(DELETE_STRIDE), F.lit(live))
    )
    delete_t = F.lit(0.9) + _unit(idx, "t") * 0.1
    events = (
        spark.range(0, batch, 1, 2)
        .select(
            idx.alias("idx"),
            kind.alias("op"),
            F.when(kind == "c", F.lit(size) + idx)
            .when(kind == "u", update_id)
            .otherwise(delete_id)
            .alias("key_id"),
            F.when(kind == "c", insert_t)
            .when(kind == "u", update_t)
            .otherwise(delete_t)
            .alias("t"),
        )
        .withColumn("commit_lsn", F.lit(BASE_LSN) + F.floor(F.col("t") * 1e12).cast("long"))
    )
    key_id, version = F.col("key_id"), F.col("idx") + 1
    changes = events.select(
        F.concat(F.lit('{"id":'), key_id, F.lit("}")).alias("_cdc_key"),
        _position(F.col("commit_lsn"), F.col("idx")).alias("_cdc_position"),
        F.col("op").alias("_cdc_op"),
        (F.lit(1_700_000_000_000) + F.floor(F.col("t") * 3_600_000))
        .cast("long")
        .alias("_cdc_source_ts"),
        F.concat(F.lit("tx-"), F.floor(F.col("t") * batch / 3)).alias("_cdc_tx_id"),
        F.lit("bench#1").alias("_cdc_bronze_batch"),
        F.array().cast("array<string>").alias("_cdc_unavailable"),
        *[
            # A delete carries the key only (PostgreSQL's default replica identity).
            (c if n == "id" else F.when(F.col("op") != "d", c)).alias(n)
            for n, c in _data(key_id, version).items()
        ],
    )
    changes.write.format("delta").mode("overwrite").save(path)
    written = spark.read.format("delta").load(path)
    ids = F.get_json_object(F.col("_cdc_key"), "$.id").cast("long")
    touched = written.where(ids < size).select("_cdc_key").distinct().count()
    top = written.groupBy("_cdc_key").count().orderBy(F.desc("count"), "_cdc_key").first()
    assert top is not None
    last = (
        written.where(F.col("_cdc_key") == top["_cdc_key"])
        .orderBy(F.desc("_cdc_position"))
        .select("name")
        .first()
    )
    assert last is not None
    return BatchPlan(
        size=size,
        batch=batch,
        path=path,
        inserts=inserts,
        updates=updates,
        deletes=deletes,
        existing_keys_touched=touched,
        hot_key=str(top["_cdc_key"]),
        hot_key_events=int(top["count"]),
        hot_key_last_name=last["name"],
        workload=workload,
    )


# --------------------------------------------------------------------------------------------
# The three methods under test


def run_apply_changes(spark: SparkSession, path: str, changes: DataFrame, version: int) -> Any:
    """silver.merge.apply_changes, as the silver job calls it."""
    return apply_changes(
        spark, path, changes, DATA_COLUMNS, txn_app_id="bench-silver", txn_version=version
    )


def run_apply_small(driver: bool) -> Callable[[SparkSession, str, DataFrame, int], Any]:
    """apply_changes on a micro-batch as the silver job applies it, the driver MERGE allowed
    or not."""

    def run(spark: SparkSession, path: str, changes: DataFrame, version: int) -> Any:
        # The job knows its table's event count from its own statistics; here the batch's
        # Delta log says it without a Spark job.
        events = _delta_rows(changes)
        return apply_changes(
            spark,
            path,
            changes,
            DATA_COLUMNS,
            txn_app_id="bench-silver",
            txn_version=version,
            events_hint=events,
            driver=driver,
        )

    return run


def _delta_rows(frame: DataFrame) -> int:
    """Rows of the Delta table ``frame`` reads, from its log (numRecords of its files)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    path = frame.inputFiles()[0].rsplit("/", 1)[0].removeprefix("file:")
    actions = pa.table(DeltaTable(path).get_add_actions(flatten=True))
    return int(sum(actions.column("num_records").to_pylist()))


def run_merge_foreach_batch(
    spark: SparkSession, path: str, changes: DataFrame, version: int
) -> Any:
    """The documented foreachBatch upsert of a change feed (Delta docs), as its function body."""
    from delta.tables import DeltaTable

    others = [c for c in changes.columns if c not in ("_cdc_key", "_cdc_unavailable")]
    ordered = ["_cdc_position", *[c for c in others if c != "_cdc_position"]]
    latest = (
        changes.select("_cdc_key", F.struct(*ordered).alias("c"))
        .groupBy("_cdc_key")
        .agg(F.max("c").alias("latest"))
        .select("_cdc_key", "latest.*")
    )
    source = latest.select(
        *[
            (F.lit(False) if c == "_cdc_deleted" else F.current_timestamp()).alias(c)
            if c in ("_cdc_deleted", "_cdc_updated_at")
            else F.col(c)
            for c in [*SILVER_METADATA, *DATA_COLUMNS]
        ],
        *_extra_columns(spark, path),
    )
    (
        DeltaTable.forPath(spark, path)
        .alias("t")
        .merge(source.alias("s"), "t._cdc_key = s._cdc_key")
        .whenMatchedDelete(condition="s._cdc_op = 'd'")
        .whenMatchedUpdateAll()
        .whenNotMatchedInsertAll(condition="s._cdc_op <> 'd'")
        .execute()
    )
    return None


def _extra_columns(spark: SparkSession, path: str) -> list[Any]:
    """Nulls for the base table's columns a hand-written pipeline does not know (silver's
    ``_cdc_key_order``), so ``UPDATE SET *``/``INSERT *`` and the append resolve."""
    known = {*SILVER_METADATA, *DATA_COLUMNS}
    stored = spark.read.format("delta").load(path).schema
    return [F.lit(None).cast(f.dataType).alias(f.name) for f in stored if f.name not in known]


def run_append(spark: SparkSession, path: str, changes: DataFrame, version: int) -> Any:
    """A plain append of the same rows in silver's shape: the floor."""
    rows = changes.select(
        *[
            (F.col("_cdc_op") == "d").alias(c)
            if c == "_cdc_deleted"
            else F.current_timestamp().alias(c)
            if c == "_cdc_updated_at"
            else F.col(c)
            for c in [*SILVER_METADATA, *DATA_COLUMNS]
        ]
    )
    rows.write.format("delta").mode("append").save(path)
    return None


RUNNERS: dict[str, Callable[[SparkSession, str, DataFrame, int], Any]] = {
    "apply_changes": run_apply_changes,
    "merge_foreach_batch": run_merge_foreach_batch,
    "append": run_append,
    "apply_small_driver": run_apply_small(driver=True),
    "apply_small_spark": run_apply_small(driver=False),
}
APPLY_METHODS = ("apply_changes", "apply_small_driver", "apply_small_spark")


def check(spark: SparkSession, method: str, path: str, plan: BatchPlan, result: Any) -> None:
    """Fail unless the table after one application is what this method must produce."""
    table = spark.read.format("delta").load(path)
    size = plan.size
    tombstones = size // TOMBSTONE_EVERY
    counts = table.agg(
        F.count(F.lit(1)).alias("rows"), F.count_if(F.col("_cdc_deleted")).alias("deleted")
    ).collect()[0]
    rows, deleted = int(counts["rows"]), int(counts["deleted"])
    if method in APPLY_METHODS:
        expected = (size + plan.inserts, tombstones + plan.deletes)
        got_counts = (result.events, result.inserted, result.updated, result.rejected_count)
        want_counts = (plan.batch, plan.inserts, plan.existing_keys_touched, 0)
        if got_counts != want_counts:
            raise AssertionError(f"apply_changes counts {got_counts} != {want_counts}")
    elif method == "merge_foreach_batch":
        expected = (size + plan.inserts - plan.deletes, tombstones)
    else:
        expected = (size + plan.batch, tombstones + plan.deletes)
    if (rows, deleted) != expected:
        raise AssertionError(f"{method}: (rows, deleted) = {(rows, deleted)}, want {expected}")
    if method != "append":
        hot = table.where(F.col("_cdc_key") == plan.hot_key).select("name").collect()
        if [r["name"] for r in hot] != [plan.hot_key_last_name]:
            raise AssertionError(f"{method}: hot key {plan.hot_key} has {hot}")


# --------------------------------------------------------------------------------------------
# Child processes


def _session(lake: Path, args: argparse.Namespace, *, event_log: bool = False) -> SparkSession:
    conf = {"spark.driver.memory": args.driver_memory}
    if event_log and args.event_log:
        Path(args.event_log).mkdir(parents=True, exist_ok=True)
        conf["spark.eventLog.enabled"] = "true"
        conf["spark.eventLog.dir"] = Path(args.event_log).absolute().as_uri()
    return build_spark_session(
        master=f"local[{args.cores}]",
        app_name=f"bench-silver-apply {args.method} {args.size} rows",
        lake_root=lake,
        conf=conf,
    )


def _jvm_hwm_mib(spark: SparkSession) -> float | None:
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def child_setup(args: argparse.Namespace) -> dict[str, Any]:
    """Build the base table of one size and its change batches; return the plans."""
    work, size = Path(args.work), args.size
    spark = _session(work / "setup-lake", args)
    base = work / f"base-{size}-{'cow' if args.copy_on_write else 'silver'}"
    t0 = time.perf_counter()
    if not (base / "_delta_log").is_dir():
        build_base(spark, size, str(base), args.rows_per_file, table_properties(args.copy_on_write))
    build_s = time.perf_counter() - t0
    plans = []
    for batch in args.batch_list:
        changes = work / f"changes-{size}-{batch}-{args.workload}"
        plans.append(asdict(build_batch(spark, size, batch, str(changes), args.workload)))
    files = [p for p in base.iterdir() if p.suffix == ".parquet"]
    return {
        "base": str(base),
        "base_build_seconds": round(build_s, 1),
        "base_files": len(files),
        "base_mib": round(sum(p.stat().st_size for p in files) / 2**20, 1),
        "plans": plans,
    }


def child_measure(args: argparse.Namespace) -> dict[str, Any]:
    """Check once, then time ``--runs`` applications of one batch by one method."""
    plan = BatchPlan(**json.loads(args.plan))
    work = Path(args.work)
    scratch = Path(tempfile.mkdtemp(prefix="bench-silver-", dir=work))
    spark = _session(scratch / "lake", args, event_log=True)
    runner = RUNNERS[args.method]
    seconds: list[float] = []
    copy_seconds: list[float] = []
    merge_metrics: list[dict[str, str]] = []
    jobs: list[int] = []
    cpu_seconds: list[float] = []
    paths: list[tuple[str, str | None]] = []
    check_seconds = 0.0
    tracker = spark.sparkContext.statusTracker()
    try:
        for run in range(args.runs + 1):
            target = scratch / f"table-{run}"
            t0 = time.perf_counter()
            shutil.copytree(args.base, target)
            copy_seconds.append(time.perf_counter() - t0)
            spark.catalog.clearCache()
            changes = spark.read.format("delta").load(plan.path)
            group = f"bench-run-{run}"
            spark.sparkContext.setJobGroup(group, group)
            cpu0 = _cpu_seconds(spark)
            t0 = time.perf_counter()
            result = runner(spark, str(target), changes, run + 1)
            elapsed = time.perf_counter() - t0
            cpu = _cpu_seconds(spark) - cpu0
            spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
            if run == 0:
                check(spark, args.method, str(target), plan, result)
                check_seconds = elapsed
            else:
                seconds.append(elapsed)
                jobs.append(len(tracker.getJobIdsForGroup(group)))
                cpu_seconds.append(round(cpu, 2))
                if hasattr(result, "merged_by"):
                    paths.append((result.merged_by, result.spark_reason))
                if args.method != "append":
                    from delta.tables import DeltaTable

                    history = DeltaTable.forPath(spark, str(target)).history(5)
                    merges = history.where(F.col("operation") == "MERGE").collect()
                    if merges:
                        merge_metrics.append(dict(merges[0]["operationMetrics"]))
            shutil.rmtree(target, ignore_errors=True)
        peak = _jvm_hwm_mib(spark)
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    return {
        # The code measured: silver/merge.py may change between two runs of the benchmark.
        "merge_py_sha256": _merge_py_sha256,
        "seconds": seconds,
        "check_seconds": check_seconds,
        "copy_seconds": copy_seconds,
        "jvm_peak_rss_mib": peak,
        "merge_metrics": merge_metrics,
        "spark_jobs": jobs,
        "cpu_seconds": cpu_seconds,
        "paths": paths,
    }


def _cpu_seconds(spark: SparkSession) -> float:
    """CPU seconds used so far by this process and its Spark JVM (user + system)."""
    times = os.times()
    own = times.user + times.system
    pid = spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[union-attr]
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        jvm = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        jvm = 0.0
    return own + jvm


def _child(mode: str, args: argparse.Namespace, extra: list[str]) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        mode,
        "--work",
        str(args.work),
        "--cores",
        str(args.cores),
        "--driver-memory",
        args.driver_memory,
        "--rows-per-file",
        str(args.rows_per_file),
        "--batches",
        ",".join(map(str, args.batch_list)),
        "--workload",
        args.workload,
        *(["--copy-on-write"] if args.copy_on_write else []),
        *(["--event-log", str(Path(args.event_log).absolute())] if args.event_log else []),
        *extra,
    ]
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode != 0:
        sys.stderr.write(out.stderr[-6000:])
        raise SystemExit(f"child {mode} {extra} failed with exit code {out.returncode}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


# --------------------------------------------------------------------------------------------
# Driver


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _machine(args: argparse.Namespace) -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    mem_gib = None
    try:
        cpu = next(
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        )
        mem_kib = next(
            int(line.split()[1])
            for line in Path("/proc/meminfo").read_text().splitlines()
            if line.startswith("MemTotal:")
        )
        mem_gib = round(mem_kib / 2**20, 1)
    except (OSError, StopIteration):
        pass
    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr
    import pyspark

    head = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {
        "git_head": head or None,
        "cpu": cpu,
        "nproc": os.cpu_count(),
        "mem_gib": mem_gib,
        "python": platform.python_version(),
        "java": java.splitlines()[0] if java else None,
        "pyspark": pyspark.__version__,
        "delta_jar": next(
            (p.name for p in (ROOT / ".cache" / "jars").glob("delta-spark_*.jar")), None
        ),
        "master": f"local[{args.cores}]",
        "driver_memory": args.driver_memory,
        "rows_per_file": args.rows_per_file,
        "table_properties": table_properties(args.copy_on_write),
    }


def main() -> None:
    """Run the benchmark (or one child step of it) and print the tables."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--sizes", type=_ints, default=[1_000_000, 10_000_000])
    parser.add_argument("--batches", type=_ints, default=[10_000, 100_000], dest="batch_list")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per configuration")
    parser.add_argument(
        "--runs-large",
        type=int,
        default=None,
        help="timed runs for the largest size only (default: --runs)",
    )
    parser.add_argument("--methods", default=",".join(METHODS))
    parser.add_argument("--quick", action="store_true", help="sizes 100k,1M, batch 10k, 1 run")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--driver-memory", default="4g")
    parser.add_argument("--rows-per-file", type=int, default=500_000)
    parser.add_argument(
        "--copy-on-write",
        action="store_true",
        help="build the base tables without deletion vectors (silver's tables have them)",
    )
    parser.add_argument(
        "--event-log",
        help="write each measuring session's Spark event log here (Spark history server format)",
    )
    parser.add_argument(
        "--workload",
        choices=WORKLOADS,
        default="uniform",
        help="keys the updates and deletes go to: the whole table, or its newest keys",
    )
    parser.add_argument("--work", help="work directory (default: a temporary one, removed)")
    parser.add_argument("--child", choices=["setup", "measure"], help=argparse.SUPPRESS)
    parser.add_argument("--size", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--method", help=argparse.SUPPRESS)
    parser.add_argument("--base", help=argparse.SUPPRESS)
    parser.add_argument("--plan", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child == "setup":
        print(json.dumps(child_setup(args)))
        return
    if args.child == "measure":
        print(json.dumps(child_measure(args)))
        return

    if args.quick:
        args.sizes, args.batch_list, args.runs = [100_000, 1_000_000], [10_000], 1
    methods = [m for m in args.methods.split(",") if m]
    unknown = set(methods) - set(METHODS)
    if unknown:
        parser.error(f"unknown methods {sorted(unknown)}; choose from {METHODS}")
    for size in args.sizes:
        if size % TOMBSTONE_EVERY:
            parser.error(f"sizes must be multiples of {TOMBSTONE_EVERY}")
    own_work = args.work is None
    args.work = str(Path(args.work or tempfile.mkdtemp(prefix="bench-silver-apply-")).absolute())
    Path(args.work).mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    tables: list[dict[str, Any]] = []
    largest, small = max(args.sizes), min(args.sizes)
    machine = _machine(args)
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = ROOT / "benchmarks" / "results" / f"silver_apply-{stamp}.json"
    target.parent.mkdir(exist_ok=True)

    def save(complete: bool) -> list[dict[str, Any]]:
        """Write what is measured so far; an interrupted run keeps its finished rows."""
        ratios = _ratios(rows, small, largest, args.batch_list, methods)
        document = {
            "complete": complete,
            "machine": machine,
            "arguments": {
                "sizes": args.sizes,
                "batches": args.batch_list,
                "runs": args.runs,
                "runs_large": args.runs_large,
                "workload": args.workload,
                "methods": methods,
                "quick": args.quick,
                "copy_on_write": args.copy_on_write,
            },
            "tables": tables,
            "rows": rows,
            "ratios": ratios,
            "total_seconds": round(time.perf_counter() - started, 1),
        }
        target.write_text(json.dumps(document, indent=2))
        return ratios

    try:
        for size in args.sizes:
            setup = _child("setup", args, ["--size", str(size)])
            tables.append({"rows": size, **{k: v for k, v in setup.items() if k != "plans"}})
            print(
                f"table {size}: {setup['base_files']} files, {setup['base_mib']} MiB, "
                f"built in {setup['base_build_seconds']} s",
                file=sys.stderr,
            )
            runs = args.runs_large if size == largest and args.runs_large else args.runs
            for plan in setup["plans"]:
                for method in methods:
                    rows.append(_measure(args, size, setup["base"], plan, method, runs))
                    save(complete=False)
    finally:
        if own_work:
            shutil.rmtree(args.work, ignore_errors=True)
    ratios = save(complete=True)
    print(f"machine: {machine}")
    print(f"workload: {args.workload}")
    print(f"results: {target.relative_to(ROOT)}")
    print()
    print(
        "| table rows | batch | method | runs | median s | min-max s | events/s | CPU s "
        "| Spark jobs | merged by | JVM peak MiB |"
    )
    print("|---:|---:|---|---:|---:|---:|---:|---:|---:|---|---:|")
    for r in rows:
        merged_by = sorted({p[0] for p in r["paths"]}) or ["-"]
        print(
            f"| {r['table_rows']:,} | {r['batch']:,} | {r['method']} | {r['runs']} "
            f"| {r['median_seconds']} | {r['min_seconds']}-{r['max_seconds']} "
            f"| {r['events_per_s']:,} | {r['median_cpu_seconds']} "
            f"| {statistics.median(r['spark_jobs'])} | {'/'.join(merged_by)} "
            f"| {r['jvm_peak_rss_mib']} |"
        )
    if ratios:
        print()
        print(f"| batch | method | time {largest:,} rows / time {small:,} rows (target <= 1.5) |")
        print("|---:|---|---:|")
        for q in ratios:
            print(f"| {q['batch']:,} | {q['method']} | {q['time_ratio']} |")


def _measure(
    args: argparse.Namespace, size: int, base: str, plan: dict[str, Any], method: str, runs: int
) -> dict[str, Any]:
    """Run one measuring child and summarise it as a result row."""
    t0 = time.perf_counter()
    extra = ["--method", method, "--size", str(size), "--base", base, "--plan", json.dumps(plan)]
    m = _child("measure", args, [*extra, "--runs", str(runs)])
    secs = m["seconds"]
    median = statistics.median(secs)
    row = {
        "table_rows": size,
        "batch": plan["batch"],
        "method": method,
        "runs": len(secs),
        "median_seconds": round(median, 2),
        "min_seconds": round(min(secs), 2),
        "max_seconds": round(max(secs), 2),
        "seconds": [round(x, 2) for x in secs],
        "events_per_s": round(plan["batch"] / median),
        "check_seconds": round(m["check_seconds"], 2),
        "copy_seconds": round(statistics.median(m["copy_seconds"]), 2),
        "jvm_peak_rss_mib": round(m["jvm_peak_rss_mib"] or 0),
        "child_wall_seconds": round(time.perf_counter() - t0, 1),
        "merge_py_sha256": m.get("merge_py_sha256"),
        "merge_metrics": m["merge_metrics"],
        "spark_jobs": m["spark_jobs"],
        "cpu_seconds": m["cpu_seconds"],
        "median_cpu_seconds": round(statistics.median(m["cpu_seconds"]), 2),
        "paths": m["paths"],
        "plan": plan,
    }
    print(
        f"{size} rows, batch {plan['batch']}, {method}: median {median:.2f} s "
        f"({row['events_per_s']} events/s), {secs}, jobs {m['spark_jobs']}, "
        f"CPU s {m['cpu_seconds']}, paths {m['paths']}",
        file=sys.stderr,
    )
    return row


def _ratios(
    rows: list[dict[str, Any]], small: int, large: int, batches: list[int], methods: list[str]
) -> list[dict[str, Any]]:
    """Time on the largest table over time on the smallest, per batch size and method."""
    ratios: list[dict[str, Any]] = []
    if large == small:
        return ratios
    for batch in batches:
        for method in methods:
            by = {
                r["table_rows"]: r["median_seconds"]
                for r in rows
                if r["batch"] == batch and r["method"] == method
            }
            if small in by and large in by and by[small] > 0:
                ratios.append(
                    {
                        "batch": batch,
                        "method": method,
                        "small_rows": small,
                        "large_rows": large,
                        "time_ratio": round(by[large] / by[small], 2),
                    }
                )
    return ratios


if __name__ == "__main__":
    main()
