"""Apply decoded change events to one silver Delta table, idempotently and in source order.

Input is a DataFrame of decoded changes for one source table (one row per c/u/d/r event) with
the metadata columns below plus the table's data columns. :func:`apply_changes`:

1. folds each key's events in position order, so an update whose columns carry the
   unavailable-value placeholder takes them from the key's previous event in the same batch;
2. keeps each key's last change (primary-key moves are a delete on the old key and a create on
   the new one, so A->B and B->A in one batch stay two keys with their own last change);
3. refuses what it must not apply: a placeholder for a row silver does not have, an event older
   than the purge horizon for a key silver no longer holds ("would have resurrected"), and
   drops (a no-op) an event older than the latest truncate applied, which erased it;
4. MERGEs on ``_cdc_key`` and applies a change only when its position is newer than the stored
   row's: replays and late older events change nothing. Deletes stay as tombstone rows
   (``_cdc_deleted``) until :func:`purge_tombstones` removes them after the retention.

The MERGE condition also bounds ``_cdc_key_order`` (an order-preserving text of the key) to the
ranges the batch's keys fall in. That is a target-only predicate, so Delta skips every file whose
statistics lie outside those ranges: a batch of recent keys (the usual OLTP shape) reads the
files holding recent keys, not the whole table.

Every MERGE carries a Delta app transaction (``txnAppId``/``txnVersion``), so re-running the same
micro-batch after a crash is skipped by Delta itself.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import orjson
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StringType, StructType

from bronze.storage import open_delta
from pipeline.sql import quote_identifier, quote_string_literal
from silver import merge_driver as D
from silver.plans import SMALL_INPUT_ROWS, session_settings, small_target_merge

__all__ = [
    "MergeResult",
    "apply_changes",
    "apply_truncate",
    "truncate_horizon",
    "erased_by_truncate",
    "purge_tombstones",
    "compact",
    "small_files",
    "METADATA_COLUMNS",
    "TABLE_PROPERTIES",
    "set_delta_txn",
    "clear_delta_txn",
    "last_commit_metrics",
    "position_property",
    "stored_schema",
    "raise_position_property",
    "KEY",
    "KEY_ORDER",
    "key_bound",
    "key_order",
    "key_ranges",
    "POSITION",
    "OP",
    "DELETED",
    "UNAVAILABLE",
    "OLD_KEY",
    "NEXT_KEY",
]

logger = logging.getLogger(__name__)

KEY = "_cdc_key"
"""Canonical JSON of the record key; the MERGE key."""
KEY_ORDER = "_cdc_key_order"
"""The key as text that sorts as the key does (integers as numbers, not as digits); what the
MERGE bounds so Delta can skip files by their min/max statistics. Never compared for equality:
two keys may share it (``"7"`` and ``"007"``), it only has to follow from the key."""
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
OLD_KEY = "_cdc_old_key"
"""Input only, optional: for the create of a primary-key move, the key the row moved from
(Debezium's ``__debezium.oldkey`` header), so its unchanged columns can be found."""
NEXT_KEY = "_cdc_next_key"
"""Input only, optional: for the delete of a primary-key move, the key the row moved to
(``__debezium.newkey``); kept by the history table."""

METADATA_COLUMNS: tuple[str, ...] = (
    KEY,
    KEY_ORDER,
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
SCHEMA_POSITION_PROPERTY = "medallion.schemaPosition"
"""Table property: hex of the first position of the newest schema that changed the table;
events of schemas seen before it are older events, cast to the table, never changing it."""

TABLE_PROPERTIES: dict[str, str] = {
    # A MERGE that touches a few rows of a file marks them deleted instead of rewriting it.
    "delta.enableDeletionVectors": "true",
}
"""Delta properties every silver table is created with. Not type widening: delta-rs refuses to
write a table with that feature (:mod:`silver.merge_driver`), so it is enabled when a widening
first needs it (:func:`silver.evolution.widen_and_add`)."""

_METADATA_SCHEMA = (
    f"{KEY} string, {KEY_ORDER} string, {POSITION} binary, {OP} string, {DELETED} boolean, "
    f"{SOURCE_TS} bigint, {TX_ID} string, {BRONZE_BATCH} string, {UPDATED_AT} timestamp"
)

_SEGMENT = "__segment"
_REASON = "__reason"
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
        merged_by: ``driver`` when deltalake merged the batch on the driver, ``spark`` when
            a Spark MERGE did (or nothing was merged).
        spark_reason: Why a batch was not merged on the driver (None when it was, or when
            nothing was merged).
    """

    table: str
    events: int
    applied_keys: int
    inserted: int
    updated: int
    rejected: DataFrame | None
    skipped: bool
    rejected_count: int = 0
    merged_by: str = "spark"
    spark_reason: str | None = None


def _q(*parts: str) -> str:
    return ".".join(quote_identifier(p) for p in parts)


_INTEGER = r"^-?[0-9]{1,19}$"
_DIGITS = 19  # every int64, and so every integer key a source declares
_RANGES = 32
"""Most ranges a MERGE condition names: enough to isolate hot keys and stragglers from the
batch's dense runs, few enough that the condition stays cheap per file and per row."""
_RANGE_KEYS = 200_000
"""Batches of more keys are bounded by their lowest and highest key only: collecting every
key's order text to the driver would cost more than the files it could skip."""


def key_order(key: Column) -> Column:
    """The order-preserving text of a canonical key (see :data:`KEY_ORDER`).

    Each field of the key (a scalar key is one field) becomes a tagged text: ``n`` + the
    nines' complement of a negative integer's 19 digits, ``p`` + a non-negative integer's 19
    digits, ``s`` + any other text, ``z`` for null, so integers sort numerically and before
    text. Fields are joined by U+0001, below every character of a field, so the first field
    decides first.

    Args:
        key: The ``_cdc_key`` column (canonical JSON of the key's fields as strings).

    Returns:
        A string column; null only for a null key.
    """

    def field(value: Column) -> Column:
        digits = F.lpad(F.regexp_replace(value, "^-", ""), _DIGITS, "0")
        integer = value.rlike(_INTEGER)
        return (
            F.when(value.isNull(), F.lit("z"))
            .when(
                integer & value.startswith("-"),
                F.concat(F.lit("n"), F.translate(digits, "0123456789", "9876543210")),
            )
            .when(integer, F.concat(F.lit("p"), digits))
            .otherwise(F.concat(F.lit("s"), value))
        )

    fields = F.coalesce(F.map_values(F.from_json(key, "map<string,string>")), F.array(key))
    return F.when(key.isNotNull(), F.array_join(F.transform(fields, field), "\u0001"))


def key_ranges(orders: Sequence[str], limit: int = _RANGES) -> list[tuple[str, str]]:
    """Cover sorted key-order texts with at most ``limit`` closed ranges, cut at the widest gaps.

    A gap is wider the earlier its two neighbours differ (a shorter common prefix), then the
    further apart their first differing characters are: for the fixed-width integer encoding
    that is the numeric distance's order of magnitude, for text a fair stand-in.

    Args:
        orders: The batch's key-order texts, sorted ascending, no duplicates.
        limit: Most ranges to return.

    Returns:
        ``(low, high)`` pairs, ascending; together they contain every text of ``orders``.
    """
    if not orders:
        return []

    def width(low: str, high: str) -> tuple[int, int]:
        common = 0
        for a, b in zip(low, high, strict=False):
            if a != b:
                break
            common += 1
        nxt = ord(high[common]) if common < len(high) else 0
        cur = ord(low[common]) if common < len(low) else -1
        return (-common, nxt - cur)

    gaps = sorted(
        range(1, len(orders)),
        key=lambda i: width(orders[i - 1], orders[i]),
        reverse=True,
    )
    cuts = sorted(gaps[: limit - 1])
    ranges: list[tuple[str, str]] = []
    start = 0
    for cut in [*cuts, len(orders)]:
        ranges.append((orders[start], orders[cut - 1]))
        start = cut
    return ranges


def key_bound(ranges: Sequence[tuple[str, str]], *, alias: str | None = None) -> Column:
    """The target-only part of the MERGE condition: rows in the batch's key ranges, or rows
    written before the table had the key-order column. Delta skips the files whose statistics
    rule it out, for the MERGE as for a read.

    Literals are columns, not SQL text: a key may hold any character, NUL included.

    Args:
        ranges: From :func:`key_ranges`.
        alias: The target table's alias in the MERGE.

    Returns:
        A boolean column.
    """
    column = F.col(f"{alias}.{KEY_ORDER}" if alias else KEY_ORDER)
    bound = column.isNull()
    for low, high in ranges:
        bound = bound | column.between(F.lit(low), F.lit(high))
    return bound


def fold(changes: DataFrame, data_columns: Sequence[str]) -> DataFrame:
    """Resolve placeholders from each key's earlier events of the batch.

    Args:
        changes: Decoded changes with the input metadata columns and ``data_columns``.
        data_columns: The table's data column names.

    Returns:
        Every change, with placeholders taken from the key's earlier events of the batch where
        there are any (the rest stay listed in ``_cdc_unavailable``).
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
    passthrough = [c for c in changes.columns if c in (ORIGIN, OLD_KEY)]
    return segmented.select(
        *[F.col(c) for c in _INPUT_METADATA if c != UNAVAILABLE],
        *passthrough,
        F.filter(F.array(*still_unavailable), lambda x: x.isNotNull()).alias(UNAVAILABLE)
        if still_unavailable
        else F.array().cast("array<string>").alias(UNAVAILABLE),
        *resolved,
    )


def collapse(folded: DataFrame) -> DataFrame:
    """Keep each key's last change (by position)."""
    last = Window.partitionBy(KEY).orderBy(F.col(POSITION).desc())
    return folded.withColumn(_RANK, F.row_number().over(last)).where(F.col(_RANK) == 1).drop(_RANK)


def collapse_by_aggregate(changes: DataFrame) -> DataFrame:
    """:func:`collapse` for batches without placeholders: one hash aggregate, no sort.

    ``max_by`` keeps the row of the highest position per key; a window (sort per key) costs
    several times more on large batches.
    """
    others = [c for c in changes.columns if c != KEY]
    picked = changes.groupBy(KEY).agg(
        F.max_by(F.struct(*[F.col(quote_identifier(c)) for c in others]), F.col(POSITION)).alias(
            "__last"
        )
    )
    return picked.select(KEY, *[F.col("__last")[c].alias(c) for c in others])


def fold_and_collapse(changes: DataFrame, data_columns: Sequence[str]) -> DataFrame:
    """:func:`fold`, then :func:`collapse`: one row per key, its last change."""
    return collapse(fold(changes, data_columns))


def _moved_with_placeholders() -> Column:
    return (F.col(OP) == "c") & F.col(OLD_KEY).isNotNull() & (F.size(UNAVAILABLE) > 0)


def resolve_moves(folded: DataFrame, stored: DataFrame, data_columns: Sequence[str]) -> DataFrame:
    """Fill placeholders in the create of a primary-key move from the row it moved from.

    PostgreSQL sends an update that changes the key with its unchanged TOAST columns as
    placeholders; Debezium turns it into a delete of the old key and a create of the new one
    carrying them. Their values are the old key's: its latest c/u/r before the move in this
    batch, else its stored silver row (as it is before this batch's MERGE). Moves chained in one
    batch (A -> B -> C ...) resolve one link per round, for as long as a round resolves one.
    When the old key is known nowhere (a snapshot resumed after a crash read the row already
    under its new key), the new key's own earlier row, in the batch or stored, is the last resort.

    Args:
        folded: The batch after :func:`fold` (with ``_cdc_old_key``).
        stored: The silver table's rows (``_cdc_key`` and the data columns).
        data_columns: The data columns.

    Returns:
        ``folded`` with those creates (and the later events of their keys) resolved as far as
        the rows allow; the rest keep their placeholders (and are refused later).
    """
    pending = folded.where(_moved_with_placeholders()).count()
    via = OLD_KEY
    while pending:
        folded = _resolve_round(folded, stored, data_columns, via)
        still = folded.where(_moved_with_placeholders()).count()
        if still < pending:
            pending, via = still, OLD_KEY
        elif via == OLD_KEY:
            via = KEY
        else:
            break
    return folded


def _resolve_round(
    folded: DataFrame, stored: DataFrame, data_columns: Sequence[str], via: str
) -> DataFrame:
    """One round of :func:`resolve_moves`: look the values up on the key in column ``via``."""
    moved = folded.where(_moved_with_placeholders()).withColumn("__via", F.col(via))
    # On the old key, its latest c/u/r (the move's own delete comes after it). On the key
    # itself, only a row that is live just before the create counts: a key deleted and then
    # moved onto must not lend the deleted row's values.
    live_ops = ("c", "u", "r") if via == OLD_KEY else ("c", "u", "r", "d")
    state = folded.where(F.col(OP).isin(*live_ops)).select(
        F.col(KEY).alias("__k"),
        F.col(POSITION).alias("__p"),
        F.when(F.col(OP) != "d", F.col(UNAVAILABLE)).alias("__u"),
        (F.col(OP) == "d").alias("__gone"),
        *[F.col(quote_identifier(c)).alias(f"__b_{i}") for i, c in enumerate(data_columns)],
    )
    if via == KEY and DELETED in stored.columns:
        stored = stored.where(~F.col(DELETED))
    before = (
        moved.select(KEY, POSITION, "__via")
        .join(state, (F.col("__k") == F.col("__via")) & (F.col("__p") < F.col(POSITION)))
        .withColumn(
            _RANK,
            F.row_number().over(Window.partitionBy(KEY, POSITION).orderBy(F.col("__p").desc())),
        )
        .where(F.col(_RANK) == 1)
        .drop(_RANK, "__k", "__p", "__via")
    )
    old_rows = stored.select(
        F.col(KEY).alias("__sk"),
        *[F.col(quote_identifier(c)).alias(f"__s_{i}") for i, c in enumerate(data_columns)],
    )
    found = (
        moved.select(KEY, POSITION, "__via", UNAVAILABLE)
        .join(before, [KEY, POSITION], "left")
        .join(old_rows, F.col("__sk") == F.col("__via"), "left")
    )
    values: list[Column] = []
    left: list[Column] = []
    for i, c in enumerate(data_columns):
        wanted = F.array_contains(F.col(UNAVAILABLE), F.lit(c))
        in_batch = F.col("__u").isNotNull() & ~F.array_contains(F.col("__u"), F.lit(c))
        value = F.when(in_batch, F.struct(F.col(f"__b_{i}").alias("v"))).when(
            F.col("__sk").isNotNull() & ~F.coalesce(F.col("__gone"), F.lit(False)),
            F.struct(F.col(f"__s_{i}").alias("v")),
        )
        values.append(F.when(wanted, value).alias(f"__r_{i}"))
        left.append(F.when(wanted & value.isNull(), F.lit(c)))
    resolved = found.select(
        KEY,
        POSITION,
        F.filter(F.array(*left), lambda x: x.isNotNull()).alias("__left"),
        *values,
    )
    joined = folded.join(resolved, [KEY, POSITION], "left")
    return fold(
        joined.select(
            *[c for c in folded.columns if c != UNAVAILABLE and c not in data_columns],
            F.coalesce(F.col("__left"), F.col(UNAVAILABLE)).alias(UNAVAILABLE),
            *[
                F.when(F.col(f"__r_{i}").isNotNull(), F.col(f"__r_{i}.v"))
                .otherwise(F.col(quote_identifier(c)))
                .alias(c)
                for i, c in enumerate(data_columns)
            ],
        ),
        data_columns,
    ).localCheckpoint()


def ensure_table(
    spark: SparkSession, path: str, sample: DataFrame, data_columns: Sequence[str]
) -> None:
    """Create the silver table if missing, or add data columns it lacks (additive evolution)."""
    _ensure_table(spark, path, sample, data_columns, stored_schema(path))


def _ensure_table(
    spark: SparkSession,
    path: str,
    sample: DataFrame,
    data_columns: Sequence[str],
    stored: StructType | None,
) -> bool:
    """:func:`ensure_table` with the table's schema read already (None: no table).

    Returns:
        Whether the table was created or changed (a log read before is stale).
    """
    wanted = [f for f in sample.schema.fields if f.name in set(data_columns)]
    if stored is None:
        empty = sample.select(
            F.col(KEY),
            key_order(F.col(KEY)).alias(KEY_ORDER),
            F.col(POSITION),
            F.col(OP),
            F.lit(False).alias(DELETED),
            F.col(SOURCE_TS),
            F.col(TX_ID),
            F.col(BRONZE_BATCH),
            F.current_timestamp().alias(UPDATED_AT),
            *[F.col(quote_identifier(f.name)) for f in wanted],
        ).limit(0)
        empty.write.format("delta").options(**TABLE_PROPERTIES).mode("ignore").save(path)
        logger.info("created silver table %s", path)
        return True
    from silver.evolution import widen_and_add

    existing = {f.name: f.dataType for f in stored.fields}
    # Tables created before the key-order column get it empty; the MERGE condition keeps
    # their null rows in play, and each row gets its value the next time it changes.
    missing: dict[str, DataType] = {} if KEY_ORDER in existing else {KEY_ORDER: StringType()}
    missing.update({f.name: f.dataType for f in wanted if f.name not in existing})
    if not missing:
        return False
    widen_and_add(spark, path, existing, missing)
    return True


def _hex_position(value: str | None) -> bytes | None:
    return bytes.fromhex(value) if value else None


def _log_schema(log: Any) -> StructType | None:
    """The schema of an open deltalake table (None for no table)."""
    if log is None:
        return None
    parsed = StructType.fromJson(orjson.loads(log.schema().to_json()))
    return parsed


def stored_schema(path: str) -> StructType | None:
    """The schema of the Delta table at ``path``, from its log; None when there is no table.

    deltalake reads the log without a Spark job: Spark's ``isDeltaTable`` and
    ``read.load(path).schema`` each load a snapshot, a fixed cost of every table in every
    micro-batch.
    """
    from deltalake.exceptions import TableNotFoundError

    try:
        log = open_delta(path)
    except TableNotFoundError:
        return None
    return _log_schema(log)


def _may_hold_expired_tombstones(path: str, cutoff: dt.datetime) -> bool:
    """Whether a file of the table may hold a tombstone row written before ``cutoff``, from the
    files' statistics in the Delta log (no Spark job).

    Delta keeps no min/max of boolean columns, so a tombstone shows as its op (``d``, or ``t``
    for a row a truncate removed) between the file's lowest and highest ``_cdc_op``: a file of
    snapshot reads only, or of updates only, has none. A file without statistics may hold one.
    """
    import pyarrow as pa

    actions = pa.table(open_delta(path).get_add_actions(flatten=True))
    names = (f"min.{OP}", f"max.{OP}", f"min.{UPDATED_AT}")
    if actions.num_rows == 0:
        return False
    if any(n not in actions.column_names for n in names):
        return True
    for low, high, oldest in zip(*(actions.column(n).to_pylist() for n in names), strict=True):
        if low is None or high is None or oldest is None:
            return True
        if (
            any(low <= op <= high for op in ("d", "t"))
            and (oldest if oldest.tzinfo else oldest.replace(tzinfo=dt.UTC)) < cutoff
        ):
            return True
    return False


def position_property(spark: SparkSession, path: str, prop: str) -> bytes | None:
    """A position kept in a table property (hex), or None."""
    # Table properties and commit metrics are in the Delta log: deltalake reads them without a
    # Spark job (it cannot read silver's data, which has deletion vectors, but needs not).

    value = open_delta(path).metadata().configuration.get(prop)
    return bytes.fromhex(value) if value else None


def last_commit_metrics(path: str) -> dict[str, int]:
    """``operationMetrics`` of the table's latest commit, as integers."""

    metrics = open_delta(path).history(1)[0].get("operationMetrics") or {}
    return {k: int(v) for k, v in metrics.items() if str(v).lstrip("-").isdigit()}


def raise_position_property(spark: SparkSession, path: str, prop: str, position: bytes) -> None:
    """Set a position table property to ``position`` unless it already holds a later one."""
    current = position_property(spark, path, prop)
    if current is not None and current >= position:
        return
    spark.sql(
        f"ALTER TABLE delta.{quote_identifier(path)} SET TBLPROPERTIES "
        f"({quote_string_literal(prop)} = {quote_string_literal(position.hex())})"
    )


def set_delta_txn(spark: SparkSession, app_id: str, version: int) -> None:
    """Make the session's next Delta writes an app transaction (``txnAppId``/``txnVersion``)."""
    spark.conf.set("spark.databricks.delta.write.txnAppId", app_id)
    spark.conf.set("spark.databricks.delta.write.txnVersion", str(version))


def clear_delta_txn(spark: SparkSession) -> None:
    """Undo :func:`set_delta_txn`."""
    spark.conf.unset("spark.databricks.delta.write.txnAppId")
    spark.conf.unset("spark.databricks.delta.write.txnVersion")


def apply_changes(
    spark: SparkSession,
    path: str,
    changes: DataFrame,
    data_columns: Sequence[str],
    *,
    txn_app_id: str,
    txn_version: int,
    on_rejected: Callable[[DataFrame], None] | None = None,
    events_hint: int | None = None,
    driver: bool = True,
) -> MergeResult:
    """Apply one batch of decoded changes to the silver table at ``path``.

    Args:
        spark: The session.
        path: Silver table location (created on first use).
        changes: Decoded c/u/d/r changes with the input metadata columns and data columns.
        data_columns: The data column names, in table order.
        txn_app_id: Delta app id of this silver table's writer.
        txn_version: Monotonic version of this MERGE (from the bronze micro-batch).
        on_rejected: Called with the refused events (``__reason`` says why) before the MERGE
            commits, so that a crash after the commit cannot lose them.
        events_hint: At least as many events as ``changes`` holds, when the caller knows it:
            at most ``_RANGE_KEYS``, the keys are listed by the first Spark job instead of one
            of their own (without it, listing them up front could bring a huge batch's every
            key to the driver).
        driver: Whether a small batch may be merged on the driver by deltalake
            (:mod:`silver.merge_driver`; ``silver.merge.driver``); False: always by Spark.

    Returns:
        Counts, and the rejected events for quarantine.
    """
    from deltalake import DeltaTable as LogTable
    from deltalake.exceptions import TableNotFoundError

    # One read of the Delta log serves the replay check, the schema and the horizons (each
    # used to open the log again, a fixed cost of every table in every micro-batch).
    try:
        log: LogTable | None = open_delta(path)
    except TableNotFoundError:
        log = None
    properties = log.metadata().configuration if log is not None else {}
    purge_horizon = _hex_position(properties.get(PURGE_HORIZON_PROPERTY))
    truncated = _hex_position(properties.get(TRUNCATE_HORIZON_PROPERTY))
    lowest = max((h for h in (purge_horizon, truncated) if h is not None), default=None)
    # A small batch is checkpointed locally (lazily: the statistics job below computes it), so
    # the MERGE can read it twice without Delta materializing it again (see below).
    small = events_hint is not None and events_hint <= SMALL_INPUT_ROWS
    changes = changes.localCheckpoint(eager=False) if small else changes.cache()
    cached: list[DataFrame] = [changes]
    try:
        has_moves = OLD_KEY in changes.columns
        # One job answers what the batch holds and, when it has no placeholders (the usual
        # case: the last change of each key is its row), what the MERGE needs: its keys and
        # their ranges (a batch too large to list its keys is bounded by its extremes).
        order = key_order(F.col(KEY))
        list_keys = events_hint is not None and events_hint <= _RANGE_KEYS
        listed = [F.sort_array(F.collect_set(order)).alias("orders")] if list_keys else []
        stats = changes.agg(
            F.count("*").alias("events"),
            F.count_if(F.size(UNAVAILABLE) > 0).alias("placeholders"),
            F.count_if(_moved_with_placeholders() if has_moves else F.lit(False)).alias("moves"),
            (F.count_distinct(KEY) + F.max(F.when(F.col(KEY).isNull(), 1).otherwise(0))).alias(
                "keys"
            ),
            # Any event older than the horizons, not only a key's last: the refusal check
            # below then looks at the keys' last changes themselves.
            F.count_if(F.col(POSITION) < F.lit(lowest) if lowest else F.lit(False)).alias("old"),
            *listed,
            F.array(F.min(order), F.max(order)).alias("extremes"),
        ).collect()[0]
        events = int(stats["events"])
        if events == 0:
            return MergeResult(path, 0, 0, 0, 0, None, skipped=False)
        if log is not None and (log.transaction_version(txn_app_id) or -1) >= txn_version:
            logger.info("silver %s: %s v%s already applied", path, txn_app_id, txn_version)
            return MergeResult(path, events, 0, 0, 0, None, skipped=True)
        if _ensure_table(spark, path, changes, data_columns, _log_schema(log)):
            log = open_delta(path)  # created or given columns: the MERGE needs the new version
        if stats["placeholders"]:
            folded = fold(changes, data_columns)
            if stats["moves"]:
                stored = spark.read.format("delta").load(path)
                folded = resolve_moves(folded, stored, data_columns)
            last = collapse(folded)
        else:
            last = collapse_by_aggregate(changes.drop(OLD_KEY, NEXT_KEY))
        last = last.withColumn(KEY_ORDER, key_order(F.col(KEY)))
        # The usual batch reads ``last`` once, in the MERGE: no cache (Delta refuses a cached
        # source it does not materialize itself). The others query it first.
        own_source = small and not stats["placeholders"] and list_keys
        if not own_source:
            last = last.cache()
            cached.append(last)
        probe: Any = stats
        if stats["placeholders"]:
            # The fold resolves some placeholders: what is left is known after it.
            probe = last.agg(
                F.count("*").alias("keys"),
                F.count_if(F.size(UNAVAILABLE) > 0).alias("placeholders"),
                F.count_if(F.col(POSITION) < F.lit(lowest) if lowest else F.lit(False)).alias(
                    "old"
                ),
            ).collect()[0]
        if list_keys:
            orders = stats["orders"]
        elif events <= _RANGE_KEYS:
            orders = last.agg(F.sort_array(F.collect_set(KEY_ORDER))).collect()[0][0]
        else:
            orders = stats["extremes"]
        ranges = key_ranges([o for o in orders if o is not None])
        # Most batches need nothing from the stored rows but what the MERGE itself reads; the
        # lookup join below (a second pass over the table) is made only when a row needs it.
        if probe["placeholders"] or probe["old"]:
            flagged, offered, rejected_count = _refuse(spark, path, last, purge_horizon, truncated)
            cached.append(flagged)
            accepted = flagged.where(F.col(_REASON).isNull()).drop(_REASON)
            rejected: DataFrame | None = flagged.where(F.col(_REASON).isNotNull())
        else:
            accepted, rejected, offered, rejected_count = last, None, int(probe["keys"]), 0

        candidate = _candidate_bytes(log, ranges)
        why = _spark_reason(
            log,
            last,
            data_columns,
            driver=driver,
            own_source=own_source,
            placeholders=int(probe["placeholders"]),
            old=int(probe["old"]),
            candidate=candidate,
        )
        if why is None:
            merged = _merge_on_driver(
                path, log, last, data_columns, ranges, txn_app_id, txn_version
            )
            if merged is not None:
                return MergeResult(
                    path,
                    events,
                    offered,
                    merged[0],
                    merged[1],
                    None,
                    skipped=False,
                    merged_by=D.DRIVER,
                )
            why = "deltalake failed (logged above)"
        logger.debug("silver %s: merged by Spark: %s", path, why)

        t, s = "t", "s"
        sets: dict[str, Column | str] = {}
        for name in data_columns:
            src, tgt = f"{s}.{quote_identifier(name)}", f"{t}.{quote_identifier(name)}"
            # Only a placeholder needs the stored value. Referencing target columns makes Delta
            # read and shuffle every column of every file the MERGE touches (the whole table
            # when keys are random), so batches without placeholders set source values only.
            sets[quote_identifier(name)] = (
                F.expr(
                    f"CASE WHEN array_contains({s}.{UNAVAILABLE}, "
                    f"{quote_string_literal(name)}) THEN {tgt} ELSE {src} END"
                )
                if probe["placeholders"]
                else F.col(src)
            )
        meta = {
            KEY_ORDER: F.col(f"{s}.{KEY_ORDER}"),
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
        if on_rejected is not None and rejected is not None and rejected_count:
            on_rejected(rejected)
        # Delta reads a MERGE's source twice (the files it touches, then the rows it writes)
        # and, unless told otherwise, copies it first (a Spark job) in case two reads differ.
        # Ours cannot: it is the checkpointed batch (lineage cut, every read the same rows),
        # grouped by key (the same keys, one row each, every time; only between events
        # redelivered at the same position, identical in data, may the pick differ).
        materialize = {_MATERIALIZE_SOURCE: "none"} if own_source and rejected is None else {}
        set_delta_txn(spark, txn_app_id, txn_version)
        try:
            with (
                session_settings(spark, materialize),
                small_target_merge(spark, candidate),
            ):
                _merge(spark, path, accepted, ranges, sets, meta, inserts)
        finally:
            clear_delta_txn(spark)
        metrics = last_commit_metrics(path)
        inserted = metrics.get("numTargetRowsInserted", 0)
        updated = metrics.get("numTargetRowsUpdated", 0)
        return MergeResult(
            path,
            events,
            offered,
            inserted,
            updated,
            rejected.localCheckpoint() if rejected is not None and rejected_count else None,
            skipped=False,
            rejected_count=rejected_count,
            merged_by=D.SPARK,
            spark_reason=why,
        )
    finally:
        for frame in cached:
            _release(frame)


_MATERIALIZE_SOURCE = "spark.databricks.delta.merge.materializeSource"


def _spark_reason(
    log: Any,
    last: DataFrame,
    data_columns: Sequence[str],
    *,
    driver: bool,
    own_source: bool,
    placeholders: int,
    old: int,
    candidate: int,
) -> str | None:
    """Why the batch's last changes must be merged by Spark; None when the driver may.

    Each reason is one thing the driver MERGE does not do as Spark would: placeholders need
    the stored row (a target value in the update), refusals a lookup join, a large batch or
    large candidate files are cheaper in Spark (collecting, rewriting whole files), and
    delta-rs must write the table's protocol and types exactly.
    """
    if not driver:
        return "silver.merge.driver is off"
    if placeholders:
        return f"{placeholders} keys with unavailable-value placeholders"
    if old:
        return f"{old} events older than a purge or truncate horizon"
    if not own_source:
        return f"batch over {SMALL_INPUT_ROWS} events"
    if log is None:
        return "no table"
    protocol = D.protocol_reason(log.protocol())
    if protocol is not None:
        return protocol
    if candidate > D.DRIVER_TARGET_BYTES:
        return f"candidate files {candidate} bytes, over {D.DRIVER_TARGET_BYTES}"
    table = _log_schema(log)
    if table is None:
        return "no table"
    return D.schema_reason(last.schema, table, [*_DRIVER_SOURCE, *data_columns])


_DRIVER_SOURCE = (KEY, KEY_ORDER, POSITION, OP, SOURCE_TS, TX_ID, BRONZE_BATCH)
"""Columns of the batch a driver MERGE writes; ``_cdc_deleted`` and ``_cdc_updated_at`` are
computed on the driver."""


def _merge_on_driver(
    path: str,
    log: Any,
    last: DataFrame,
    data_columns: Sequence[str],
    ranges: Sequence[tuple[str, str]],
    txn_app_id: str,
    txn_version: int,
) -> tuple[int, int] | None:
    """Collect the batch's last changes as Arrow (one Spark job) and MERGE them with deltalake.

    Returns:
        Rows inserted and updated; None when deltalake failed without committing (logged: the
        caller merges with Spark instead). A failure after the commit is raised: the batch is
        applied, and the job's retry finds the app transaction and skips it.
    """
    rows = last.select(*[F.col(quote_identifier(c)) for c in (*_DRIVER_SOURCE, *data_columns)])
    arrow = rows.toArrow()
    try:
        return D.merge_rows(
            log,
            arrow,
            key=KEY,
            key_order=KEY_ORDER,
            position=POSITION,
            computed={DELETED: D.deleted(arrow.column(OP)), UPDATED_AT: D.now_utc()},
            ranges=ranges,
            txn_app_id=txn_app_id,
            txn_version=txn_version,
        )
    except Exception:
        if (open_delta(path).transaction_version(txn_app_id) or -1) >= txn_version:
            raise
        logger.warning(
            "silver %s: the driver MERGE failed; merging with Spark instead", path, exc_info=True
        )
        return None


def _merge(
    spark: SparkSession,
    path: str,
    accepted: DataFrame,
    ranges: Sequence[tuple[str, str]],
    sets: dict[str, Column | str],
    meta: dict[str, Column],
    inserts: dict[str, Column | str],
) -> None:
    """The MERGE itself: a key's change applies only when newer than the stored row."""
    from delta.tables import DeltaTable

    t, s = "t", "s"
    (
        DeltaTable.forPath(spark, path)
        .alias(t)
        .merge(
            accepted.alias(s),
            (F.col(f"{t}.{KEY}") == F.col(f"{s}.{KEY}")) & key_bound(ranges, alias=t)
            if ranges
            else F.col(f"{t}.{KEY}") == F.col(f"{s}.{KEY}"),
        )
        .whenMatchedUpdate(condition=f"{s}.{POSITION} > {t}.{POSITION}", set={**sets, **meta})
        .whenNotMatchedInsert(values=inserts)
        .execute()
    )


def _candidate_bytes(log: Any, ranges: Sequence[tuple[str, str]]) -> int:
    """Bytes of the table's files a MERGE bounded by ``ranges`` may touch, from the files'
    statistics in the Delta log (no Spark job): a file whose ``_cdc_key_order`` range meets
    no range is skipped by the MERGE; one without statistics, or with rows that have no key
    order (:func:`key_bound` keeps those), may be touched. No table (None): nothing to touch.
    Delta's min/max of a long text are a prefix and a prefix raised, so the test stays
    conservative.
    """
    import pyarrow as pa

    if log is None:
        return 0
    actions = pa.table(log.get_add_actions(flatten=True))
    if actions.num_rows == 0:
        return 0
    sizes = actions.column("size_bytes").to_pylist()
    names = (f"min.{KEY_ORDER}", f"max.{KEY_ORDER}", f"null_count.{KEY_ORDER}")
    if not ranges or any(n not in actions.column_names for n in names):
        return int(sum(sizes))
    lows, highs, nulls = (actions.column(n).to_pylist() for n in names)
    total = 0
    for size, low, high, null in zip(sizes, lows, highs, nulls, strict=True):
        if (
            low is None
            or high is None
            or null is None
            or null > 0
            or any(low <= r_high and high >= r_low for r_low, r_high in ranges)
        ):
            total += size
    return total


def _release(frame: DataFrame) -> None:
    """Free what ``frame`` holds: its cache, or the blocks of its local checkpoint (left to
    the garbage collector otherwise, possibly for many micro-batches)."""
    frame.unpersist()
    try:
        plan = frame._jdf.queryExecution().analyzed()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)
    except Exception:  # noqa: BLE001 - freeing early is an optimization; the cleaner frees later
        logger.debug("could not free the checkpoint of a MERGE source", exc_info=True)


def _refuse(
    spark: SparkSession,
    path: str,
    last: DataFrame,
    purge_horizon: bytes | None,
    truncated: bytes | None,
) -> tuple[DataFrame, int, int]:
    """Flag the batch's last changes silver must refuse, with the reason in ``__reason``.

    Returns:
        The flagged changes (cached: the caller unpersists them), how many are accepted and
        how many refused.
    """
    target = (
        spark.read.format("delta")
        .load(path)
        .select(F.col(KEY).alias("__t_key"), F.col(DELETED).alias("__t_deleted"))
    )
    joined = last.join(target, last[KEY] == target["__t_key"], "left")
    live = joined["__t_key"].isNotNull() & ~joined["__t_deleted"]
    # Placeholders left after the in-batch fold and the move resolution need the stored row.
    placeholder_orphan = (F.size(UNAVAILABLE) > 0) & F.col(OP).isin("c", "u", "r") & ~live
    too_old = (
        joined["__t_key"].isNull() & (F.col(POSITION) < F.lit(purge_horizon))
        if purge_horizon is not None
        else F.lit(False)
    )
    # Whatever silver holds for the key does not matter: a row deleted before the truncate keeps
    # its older tombstone (only live rows take the truncate's position), which would let a late
    # insert between the two through the position guard.
    joined = joined.where(~erased_by_truncate(truncated))
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
    flagged = joined.withColumn(_REASON, reason).drop("__t_key", "__t_deleted").cache()
    tally = flagged.agg(
        F.count_if(F.col(_REASON).isNull()).alias("offered"),
        F.count_if(F.col(_REASON).isNotNull()).alias("rejected"),
    ).collect()[0]
    return flagged, int(tally["offered"]), int(tally["rejected"])


def truncate_horizon(path: str) -> bytes | None:
    """The position of the latest truncate applied to the silver table at ``path`` (None: none,
    or no table yet)."""
    from deltalake.exceptions import TableNotFoundError

    try:
        value = open_delta(path).metadata().configuration.get(TRUNCATE_HORIZON_PROPERTY)
    except TableNotFoundError:
        return None
    return _hex_position(value)


def erased_by_truncate(horizon: bytes | None) -> Column:
    """True for a change older than the latest truncate applied (``horizon``): it erased the
    change, so applying it (a late event) would bring back a row the source no longer has.

    Args:
        horizon: :func:`truncate_horizon` of the table.

    Returns:
        A condition on ``_cdc_position``; constant false without a horizon.
    """
    return F.col(POSITION) < F.lit(horizon) if horizon is not None else F.lit(False)


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
        # Nothing to mark, but the horizon must hold: events older than the truncate that
        # arrive later (reordered) must not insert rows the truncate erased. The table starts
        # with the metadata columns; data columns are added by the first changes.
        empty = spark.createDataFrame([], _METADATA_SCHEMA)
        empty.write.format("delta").options(**TABLE_PROPERTIES).mode("ignore").save(path)
        raise_position_property(spark, path, TRUNCATE_HORIZON_PROPERTY, position)
        return 0
    set_delta_txn(spark, txn_app_id, txn_version)
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
        clear_delta_txn(spark)
    metrics = last_commit_metrics(path)
    raise_position_property(spark, path, TRUNCATE_HORIZON_PROPERTY, position)
    return metrics.get("numUpdatedRows", 0)


def purge_tombstones(spark: SparkSession, path: str, *, older_than_hours: float) -> int:
    """Delete tombstone rows older than the retention and raise the purge horizon.

    The horizon is the highest position among purged rows; :func:`apply_changes` refuses a later
    event older than it for a key silver no longer holds, instead of resurrecting the row.

    Returns:
        Rows purged.
    """
    from delta.tables import DeltaTable

    now = dt.datetime.now(dt.UTC)
    if stored_schema(path) is None or not _may_hold_expired_tombstones(
        path, now - dt.timedelta(hours=older_than_hours)
    ):
        return 0  # nothing to purge: no scan of the table
    cutoff = F.lit(now - dt.timedelta(hours=older_than_hours))
    table = spark.read.format("delta").load(path)
    doomed = table.where(F.col(DELETED) & (F.col(UPDATED_AT) < cutoff))
    top: Any = doomed.agg(F.max(POSITION)).collect()[0][0]
    if top is None:
        return 0
    horizon = bytes(top)
    # The horizon first: a crash between the two leaves rows that are still guarded by their
    # tombstones, never purged rows without a horizon.
    raise_position_property(spark, path, PURGE_HORIZON_PROPERTY, horizon)
    DeltaTable.forPath(spark, path).delete(F.col(DELETED) & (F.col(UPDATED_AT) < cutoff))
    removed = last_commit_metrics(path).get("numDeletedRows", 0)
    logger.info("purged %s tombstone rows from %s; horizon %s", removed, path, horizon.hex())
    return removed


OPTIMIZE_MIN_FILE_SIZE = "spark.databricks.delta.optimize.minFileSize"
OPTIMIZE_MAX_FILE_SIZE = "spark.databricks.delta.optimize.maxFileSize"
COMPACT_FILE_BYTES = 16 * 1024**2
"""Size of the files a compaction writes (``silver.compact.file.bytes``): the driver MERGE's
bound on the files a batch touches (:mod:`silver.merge_driver`), so that a batch of recent keys
still merges on the driver after a compaction."""
_COMPACT_ATTEMPTS = 3


def small_files(path: str, *, below: int) -> int:
    """Files of the table's current version below ``below`` bytes, read from the Delta log with
    deltalake: no Spark job."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from deltalake.exceptions import TableNotFoundError

    try:
        actions = pa.table(open_delta(path).get_add_actions(flatten=True))
    except TableNotFoundError:
        return 0
    if actions.num_rows == 0:
        return 0
    return int(pc.sum(pc.less(actions.column("size_bytes"), below)).as_py() or 0)


def compact(
    spark: SparkSession,
    path: str,
    *,
    min_files: int,
    zorder: bool = True,
    file_bytes: int = COMPACT_FILE_BYTES,
) -> dict[str, int] | None:
    """Compact a silver table's small files, when it has at least ``min_files`` of them.

    ``OPTIMIZE ... ZORDER BY (_cdc_key_order)`` (``zorder``) writes files that each hold a
    narrow range of keys, which the MERGE's key-range condition skips (:func:`key_bound`); it
    rewrites the whole table. Without ``zorder``, Delta bin-packs the small files only. Either
    writes files of about ``file_bytes`` (Delta's default, 1 GiB, would make a table under a
    gibibyte one file, which every MERGE reads whole), and a file counts as small below half
    of it. The rewrite changes no data (``dataChange=false``): readers at older versions, gold's
    views included, are unaffected. Call it between MERGEs of the table: a MERGE that started
    before it committed would fail on the files it removed. A conflict with another writer is
    retried, then left to the next schedule, never raised.

    Returns:
        Delta's OPTIMIZE metrics (``numFilesAdded``, ``numFilesRemoved`` ...), or None when
        there was nothing to compact or every attempt conflicted.
    """
    from delta.exceptions import DeltaConcurrentModificationException

    found = small_files(path, below=file_bytes // 2)
    if found < min_files:
        return None
    # Delta's OPTIMIZE takes its file sizes from the session only.
    sizes = {OPTIMIZE_MAX_FILE_SIZE: str(file_bytes), OPTIMIZE_MIN_FILE_SIZE: str(file_bytes // 2)}
    statement = f"OPTIMIZE delta.{quote_identifier(path)}" + (
        f" ZORDER BY ({quote_identifier(KEY_ORDER)})" if zorder else ""
    )
    for attempt in range(1, _COMPACT_ATTEMPTS + 1):
        try:
            with session_settings(spark, sizes):
                spark.sql(statement).collect()
        except DeltaConcurrentModificationException as exc:
            logger.warning(
                "silver %s: compaction conflicted with another writer (attempt %s of %s): %s",
                path,
                attempt,
                _COMPACT_ATTEMPTS,
                str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )
            continue
        metrics = last_commit_metrics(path)
        logger.info(
            "silver %s: compacted %s small files into %s%s",
            path,
            metrics.get("numRemovedFiles", found),
            metrics.get("numAddedFiles", "?"),
            " (z-ordered by key)" if zorder else "",
        )
        return metrics
    return None
