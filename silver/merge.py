"""Apply decoded change events to one silver Delta table, idempotently and in source order.

Input is a DataFrame of decoded changes for one source table (one row per c/u/d/r event) with
the metadata columns below plus the table's data columns. :func:`apply_changes`:

1. folds each key's events in position order, so an update whose columns carry the
   unavailable-value placeholder takes them from the key's previous event in the same batch;
2. keeps each key's last change (primary-key moves are a delete on the old key and a create on
   the new one, so A->B and B->A in one batch stay two keys with their own last change);
3. refuses what it must not apply: a placeholder for a row silver does not have, an event older
   than the purge horizon for a key silver no longer holds ("would have resurrected");
4. MERGEs on ``_cdc_key`` and applies a change only when its position is newer than the stored
   row's: replays and late older events change nothing. Deletes stay as tombstone rows
   (``_cdc_deleted``) until :func:`purge_tombstones` removes them after the retention.

Every MERGE carries a Delta app transaction (``txnAppId``/``txnVersion``), so re-running the same
micro-batch after a crash is skipped by Delta itself.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from pipeline.sql import quote_identifier, quote_string_literal

__all__ = [
    "MergeResult",
    "apply_changes",
    "apply_truncate",
    "purge_tombstones",
    "METADATA_COLUMNS",
    "KEY",
    "POSITION",
    "OP",
    "DELETED",
    "UNAVAILABLE",
]

logger = logging.getLogger(__name__)

KEY = "_cdc_key"
"""Canonical JSON of the record key; the MERGE key."""
POSITION = "_cdc_position"
"""Bronze position of the change that produced the row (source commit order)."""
OP = "_cdc_op"
"""Op code of that change: c, u, d, r, or t for rows a truncate removed."""
DELETED = "_cdc_deleted"
"""True for a retained tombstone row (deleted in the source)."""
SOURCE_TS = "_cdc_source_ts"
"""Source commit time of the change (``source.ts_ms``)."""
TX_ID = "_cdc_tx_id"
"""Source transaction of the change."""
BRONZE_BATCH = "_cdc_bronze_batch"
"""``agent_id#batch_seq`` of the bronze batch the change came from."""
UPDATED_AT = "_cdc_updated_at"
"""When silver last wrote the row."""
UNAVAILABLE = "_cdc_unavailable"
"""Input only: names of columns whose value was the unavailable-value placeholder."""
ORIGIN = "__origin"
"""Input only, optional: where the event came from; carried to rejected events."""

METADATA_COLUMNS: tuple[str, ...] = (
    KEY,
    POSITION,
    OP,
    DELETED,
    SOURCE_TS,
    TX_ID,
    BRONZE_BATCH,
    UPDATED_AT,
)
_INPUT_METADATA = (KEY, POSITION, OP, SOURCE_TS, TX_ID, BRONZE_BATCH, UNAVAILABLE)

PURGE_HORIZON_PROPERTY = "medallion.purgeHorizon"
"""Table property: hex of the highest position of a purged tombstone."""
TRUNCATE_HORIZON_PROPERTY = "medallion.truncateHorizon"
"""Table property: hex of the position of the latest truncate applied."""

_SEGMENT = "__segment"
_RANK = "__rank"


@dataclass(frozen=True, slots=True)
class MergeResult:
    """What one :func:`apply_changes` did to one silver table.

    Attributes:
        table: The silver table path.
        events: Change events in the input.
        applied_keys: Keys whose last change was offered to the MERGE.
        inserted: Rows inserted (including tombstone rows for unseen deleted keys).
        updated: Rows updated (including rows turned into tombstones).
        rejected: Events refused (placeholder without a row, older than the purge horizon),
            returned so the caller can quarantine them with the reason.
        skipped: True when Delta had already committed this app transaction version.
        rejected_count: Number of rows in ``rejected``.
    """

    table: str
    events: int
    applied_keys: int
    inserted: int
    updated: int
    rejected: DataFrame | None
    skipped: bool
    rejected_count: int = 0


def _q(*parts: str) -> str:
    return ".".join(quote_identifier(p) for p in parts)


def fold_and_collapse(changes: DataFrame, data_columns: Sequence[str]) -> DataFrame:
    """Resolve in-batch placeholders, then keep each key's last change.

    Args:
        changes: Decoded changes with the input metadata columns and ``data_columns``.
        data_columns: The table's data column names.

    Returns:
        One row per key: its last change, with placeholders taken from the key's earlier
        events of the batch where there are any (the rest stay listed in ``_cdc_unavailable``).
    """
    by_key = Window.partitionBy(KEY).orderBy(POSITION)
    # A full image (c, r) or a delete starts a new segment: placeholders never reach past it.
    starts = F.when(F.col(OP).isin("c", "r", "d"), 1).otherwise(0)
    segmented = changes.withColumn(
        _SEGMENT, F.sum(starts).over(by_key.rowsBetween(Window.unboundedPreceding, 0))
    )
    upto = (
        Window.partitionBy(KEY, _SEGMENT)
        .orderBy(POSITION)
        .rowsBetween(Window.unboundedPreceding, 0)
    )
    resolved: list[Column] = []
    still_unavailable: list[Column] = []
    for name in data_columns:
        col = F.col(quote_identifier(name))
        missing = F.coalesce(F.array_contains(F.col(UNAVAILABLE), F.lit(name)), F.lit(False))
        # Wrapping the value in a struct keeps a real NULL distinct from "no value here".
        carried = F.last(F.when(~missing, F.struct(col.alias("v"))), ignorenulls=True).over(upto)
        resolved.append(F.when(missing, carried["v"]).otherwise(col).alias(name))
        still_unavailable.append(F.when(missing & carried.isNull(), F.lit(name)))
    passthrough = [c for c in changes.columns if c == ORIGIN]
    folded = segmented.select(
        *[F.col(c) for c in _INPUT_METADATA if c != UNAVAILABLE],
        *passthrough,
        F.filter(F.array(*still_unavailable), lambda x: x.isNotNull()).alias(UNAVAILABLE)
        if still_unavailable
        else F.array().cast("array<string>").alias(UNAVAILABLE),
        *resolved,
    )
    last = Window.partitionBy(KEY).orderBy(F.col(POSITION).desc())
    return folded.withColumn(_RANK, F.row_number().over(last)).where(F.col(_RANK) == 1).drop(_RANK)


def ensure_table(
    spark: SparkSession, path: str, sample: DataFrame, data_columns: Sequence[str]
) -> None:
    """Create the silver table if missing, or add data columns it lacks (additive evolution)."""
    from delta.tables import DeltaTable

    wanted = [f for f in sample.schema.fields if f.name in set(data_columns)]
    if not DeltaTable.isDeltaTable(spark, path):
        empty = sample.select(
            F.col(KEY),
            F.col(POSITION),
            F.col(OP),
            F.lit(False).alias(DELETED),
            F.col(SOURCE_TS),
            F.col(TX_ID),
            F.col(BRONZE_BATCH),
            F.current_timestamp().alias(UPDATED_AT),
            *[F.col(quote_identifier(f.name)) for f in wanted],
        ).limit(0)
        empty.write.format("delta").mode("ignore").save(path)
        logger.info("created silver table %s", path)
        return
    existing = {f.name for f in spark.read.format("delta").load(path).schema.fields}
    new = [f for f in wanted if f.name not in existing]
    if new:
        columns = ", ".join(f"{quote_identifier(f.name)} {f.dataType.simpleString()}" for f in new)
        spark.sql(f"ALTER TABLE delta.{quote_identifier(path)} ADD COLUMNS ({columns})")
        logger.info("added columns %s to %s", [f.name for f in new], path)


def _horizon(spark: SparkSession, path: str, prop: str) -> bytes | None:
    from delta.tables import DeltaTable

    detail = DeltaTable.forPath(spark, path).detail().collect()[0]
    value = (detail["properties"] or {}).get(prop)
    return bytes.fromhex(value) if value else None


def _set_horizon(spark: SparkSession, path: str, prop: str, position: bytes) -> None:
    current = _horizon(spark, path, prop)
    if current is not None and current >= position:
        return
    spark.sql(
        f"ALTER TABLE delta.{quote_identifier(path)} SET TBLPROPERTIES "
        f"({quote_string_literal(prop)} = {quote_string_literal(position.hex())})"
    )


def _with_txn(spark: SparkSession, app_id: str, version: int) -> None:
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))


def _clear_txn(spark: SparkSession) -> None:
    spark.conf.unset("spark.databricks.delta.write.txnAppId")
    spark.conf.unset("spark.databricks.delta.write.txnVersion")


def _already_committed(spark: SparkSession, path: str, app_id: str, version: int) -> bool:
    # Delta skips such a write itself; knowing it up front keeps the metrics honest. The
    # transaction versions are in the Delta log; deltalake reads them without a Spark job.
    from deltalake import DeltaTable as LogTable
    from deltalake.exceptions import TableNotFoundError

    try:
        latest = LogTable(path).transaction_version(app_id)
    except TableNotFoundError:
        return False
    return latest is not None and latest >= version


def apply_changes(
    spark: SparkSession,
    path: str,
    changes: DataFrame,
    data_columns: Sequence[str],
    *,
    txn_app_id: str,
    txn_version: int,
) -> MergeResult:
    """Apply one batch of decoded changes to the silver table at ``path``.

    Args:
        spark: The session.
        path: Silver table location (created on first use).
        changes: Decoded c/u/d/r changes with the input metadata columns and data columns.
        data_columns: The data column names, in table order.
        txn_app_id: Delta app id of this silver table's writer.
        txn_version: Monotonic version of this MERGE (from the bronze micro-batch).

    Returns:
        Counts, and the rejected events for quarantine.
    """
    from delta.tables import DeltaTable

    changes = changes.cache()
    try:
        events = changes.count()
        if events == 0:
            return MergeResult(path, 0, 0, 0, 0, None, skipped=False)
        if _already_committed(spark, path, txn_app_id, txn_version):
            logger.info("silver %s: %s v%s already applied", path, txn_app_id, txn_version)
            return MergeResult(path, events, 0, 0, 0, None, skipped=True)
        ensure_table(spark, path, changes, data_columns)
        last = fold_and_collapse(changes, data_columns).cache()
        target = (
            spark.read.format("delta")
            .load(path)
            .select(F.col(KEY).alias("__t_key"), F.col(DELETED).alias("__t_deleted"))
        )
        joined = last.join(target, last[KEY] == target["__t_key"], "left")
        live = joined["__t_key"].isNotNull() & ~joined["__t_deleted"]
        # Placeholders left after the in-batch fold need the stored row. A create can carry them
        # too (PostgreSQL's primary-key move with unchanged TOAST columns): its values are on the
        # old key's row, which this MERGE does not look up, so such a create is refused rather
        # than inserted with NULLs.
        placeholder_orphan = (F.size(UNAVAILABLE) > 0) & F.col(OP).isin("c", "u", "r") & ~live
        horizon = _horizon(spark, path, PURGE_HORIZON_PROPERTY)
        too_old = (
            joined["__t_key"].isNull() & (F.col(POSITION) < F.lit(horizon))
            if horizon is not None
            else F.lit(False)
        )
        # A key silver never held, changed before the latest truncate: the truncate erased it.
        truncated = _horizon(spark, path, TRUNCATE_HORIZON_PROPERTY)
        before_truncate = (
            joined["__t_key"].isNull() & (F.col(POSITION) < F.lit(truncated))
            if truncated is not None
            else F.lit(False)
        )
        joined = joined.where(~before_truncate)
        reason = F.when(
            placeholder_orphan,
            F.concat(
                F.lit("unavailable-value placeholder for a row silver does not have: "),
                F.array_join(F.col(UNAVAILABLE), ", "),
            ),
        ).when(
            too_old,
            F.lit("would have resurrected: older than the purge horizon of deleted rows"),
        )
        flagged = joined.withColumn("__reason", reason).drop("__t_key", "__t_deleted").cache()
        rejected = flagged.where(F.col("__reason").isNotNull())
        accepted = flagged.where(F.col("__reason").isNull()).drop("__reason")
        tally = flagged.agg(
            F.count_if(F.col("__reason").isNull()).alias("offered"),
            F.count_if(F.col("__reason").isNotNull()).alias("rejected"),
        ).collect()[0]
        offered, rejected_count = int(tally["offered"]), int(tally["rejected"])

        t, s = "t", "s"
        sets: dict[str, Column | str] = {}
        for name in data_columns:
            src, tgt = f"{s}.{quote_identifier(name)}", f"{t}.{quote_identifier(name)}"
            sets[quote_identifier(name)] = F.expr(
                f"CASE WHEN {s}.{OP} = 'd' OR array_contains({s}.{UNAVAILABLE}, "
                f"{quote_string_literal(name)}) THEN {tgt} ELSE {src} END"
            )
        meta = {
            POSITION: F.col(f"{s}.{POSITION}"),
            OP: F.col(f"{s}.{OP}"),
            DELETED: F.col(f"{s}.{OP}") == "d",
            SOURCE_TS: F.col(f"{s}.{SOURCE_TS}"),
            TX_ID: F.col(f"{s}.{TX_ID}"),
            BRONZE_BATCH: F.col(f"{s}.{BRONZE_BATCH}"),
            UPDATED_AT: F.current_timestamp(),
        }
        inserts: dict[str, Column | str] = {KEY: F.col(f"{s}.{KEY}"), **meta}
        for name in data_columns:
            inserts[quote_identifier(name)] = F.col(f"{s}.{quote_identifier(name)}")
        _with_txn(spark, txn_app_id, txn_version)
        try:
            (
                DeltaTable.forPath(spark, path)
                .alias(t)
                .merge(accepted.alias(s), f"{t}.{KEY} = {s}.{KEY}")
                .whenMatchedUpdate(
                    condition=f"{s}.{POSITION} > {t}.{POSITION}", set={**sets, **meta}
                )
                .whenNotMatchedInsert(values=inserts)
                .execute()
            )
        finally:
            _clear_txn(spark)
        metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
        inserted = int(metrics.get("numTargetRowsInserted", 0))
        updated = int(metrics.get("numTargetRowsUpdated", 0))
        return MergeResult(
            path,
            events,
            offered,
            inserted,
            updated,
            rejected.localCheckpoint() if rejected_count else None,
            skipped=False,
            rejected_count=rejected_count,
        )
    finally:
        changes.unpersist()


def apply_truncate(
    spark: SparkSession, path: str, position: bytes, *, txn_app_id: str, txn_version: int
) -> int:
    """Turn every live row older than a truncate into a tombstone row (op ``t``).

    Rows keep the truncate's position, so a late event older than the truncate cannot bring
    them back.

    Returns:
        Rows marked.
    """
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return 0
    _with_txn(spark, txn_app_id, txn_version)
    try:
        DeltaTable.forPath(spark, path).update(
            condition=(F.col(POSITION) < F.lit(position)) & ~F.col(DELETED),
            set={
                DELETED: F.lit(True),
                OP: F.lit("t"),
                POSITION: F.lit(position),
                UPDATED_AT: F.current_timestamp(),
            },
        )
    finally:
        _clear_txn(spark)
    metrics = DeltaTable.forPath(spark, path).history(1).collect()[0]["operationMetrics"]
    _set_horizon(spark, path, TRUNCATE_HORIZON_PROPERTY, position)
    return int(metrics.get("numUpdatedRows", 0))


def purge_tombstones(spark: SparkSession, path: str, *, older_than_hours: float) -> int:
    """Delete tombstone rows older than the retention and raise the purge horizon.

    The horizon is the highest position among purged rows; :func:`apply_changes` refuses a later
    event older than it for a key silver no longer holds, instead of resurrecting the row.

    Returns:
        Rows purged.
    """
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return 0
    now = dt.datetime.now(dt.UTC)
    cutoff = F.lit(now - dt.timedelta(hours=older_than_hours))
    table = spark.read.format("delta").load(path)
    doomed = table.where(F.col(DELETED) & (F.col(UPDATED_AT) < cutoff))
    top: Any = doomed.agg(F.max(POSITION)).collect()[0][0]
    if top is None:
        return 0
    horizon = bytes(top)
    DeltaTable.forPath(spark, path).delete(F.col(DELETED) & (F.col(UPDATED_AT) < cutoff))
    removed = int(
        DeltaTable.forPath(spark, path)
        .history(1)
        .collect()[0]["operationMetrics"]
        .get("numDeletedRows", 0)
    )
    _set_horizon(spark, path, PURGE_HORIZON_PROPERTY, horizon)
    logger.info("purged %s tombstone rows from %s; horizon %s", removed, path, horizon.hex())
    return removed
