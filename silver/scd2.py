"""SCD type 2 history of a silver table: one row per version of each source row.

Enabled per table (``silver.tables.<table>.history: true``), next to the current-state table
``<table>`` as ``<table>__history``. Each change event becomes a version: its values (with
unavailable-value placeholders filled from the key's previous version), ``_cdc_valid_from`` (the
source commit time) and ``_cdc_position``; the next version of the same key closes it
(``_cdc_valid_to``, ``_cdc_valid_to_position``), and the last one is ``_cdc_is_current``.
Deletes and truncates are versions too (``_cdc_deleted``), so "as of" queries see the row gone::

    SELECT * FROM shop__public__customers__history
    WHERE _cdc_valid_from <= TIMESTAMP '2026-11-21 12:00' AND NOT _cdc_deleted
      AND (_cdc_valid_to IS NULL OR _cdc_valid_to > TIMESTAMP '2026-11-21 12:00')

**Primary-key moves** stay continuous: the move's delete closes the old key's history at the
move (its version carries ``_cdc_next_key``), and the new key's first version starts at the same
commit with ``_cdc_previous_key``; a TOASTed column the move did not carry is taken from the old
key's last version.

Versions are keyed by (key, position): a replayed or duplicated event finds its version and
changes nothing; a late older event is slotted in between and the neighbours' validity is
recomputed. A late event older than the latest truncate applied is history too, though the
current-state table drops it (:func:`silver.merge.erased_by_truncate`): the source had the row
from that change until the first truncate after it. When its key has no version at that
truncate, a ``t`` version there closes it (as :func:`truncate_history` closed the rows live when
it was applied), so the key's current version says the row is gone. Writes are Delta MERGEs with the
same app transaction as the current-state table.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from bronze.storage import open_delta
from pipeline.errors import InternalError, SchemaEvolutionError
from pipeline.sql import quote_identifier, quote_string_literal
from silver import bookkeeping as BK
from silver import evolution as E
from silver import merge as M

__all__ = [
    "apply_history",
    "truncate_history",
    "history_path",
    "VALID_FROM",
    "VALID_TO",
    "VALID_TO_POSITION",
    "IS_CURRENT",
    "PREVIOUS_KEY",
    "NEXT_KEY",
]

logger = logging.getLogger(__name__)

VALID_FROM = "_cdc_valid_from"
"""Source commit time of the version's change."""
VALID_TO = "_cdc_valid_to"
"""Source commit time of the key's next change; NULL while current."""
VALID_TO_POSITION = "_cdc_valid_to_position"
"""Position of the key's next change; NULL while current."""
IS_CURRENT = "_cdc_is_current"
"""True for the key's latest version."""
PREVIOUS_KEY = "_cdc_previous_key"
"""On the first version after a primary-key move: the key the row moved from."""
NEXT_KEY = M.NEXT_KEY
"""On the delete of a primary-key move: the key the row moved to."""

_META = (M.KEY, M.POSITION, M.OP, M.DELETED, M.SOURCE_TS, M.TX_ID, M.BRONZE_BATCH)


_HISTORY_SUFFIX = "__history"


def history_path(silver_path: str) -> str:
    """Where the history table of the silver table at ``silver_path`` lives."""
    return f"{silver_path}{_HISTORY_SUFFIX}"


def _ensure(spark: SparkSession, path: str, versions: DataFrame, data: Sequence[str]) -> None:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        versions.limit(0).write.format("delta").options(**M.TABLE_PROPERTIES).mode("ignore").save(
            path
        )
        return
    have = {f.name: f.dataType for f in spark.read.format("delta").load(path).schema.fields}
    wanted = {f.name: f.dataType for f in versions.schema.fields if f.name in set(data)}
    E.widen_and_add(spark, path, have, wanted)
    for name, type_ in wanted.items():
        if name in have and E.classify(have[name], type_) == E.INCOMPATIBLE:
            _rewrite(spark, path, name, have[name], type_)


def _rewrite(spark: SparkSession, path: str, name: str, old: object, new: object) -> None:
    from pyspark.sql.types import DataType

    if not isinstance(old, DataType):
        raise InternalError("silver.scd2: expected isinstance(old, DataType)")
    if not isinstance(new, DataType):
        raise InternalError("silver.scd2: expected isinstance(new, DataType)")
    frame = spark.read.format("delta").load(path)
    target = StructType([f if f.name != name else f.__class__(name, new) for f in frame.schema])
    checked = E.conform(frame, target, [name], reason_column="__reason")
    if checked.where(F.col("__reason").isNotNull()).limit(1).count():
        # The current-state table was rewritten because its values convert; older versions
        # here do not. History is never cast with loss: stop and say so.
        raise SchemaEvolutionError(
            path,
            None,
            (f"{name}: {old.simpleString()} -> {new.simpleString()} loses history values",),
        )
    (
        checked.drop("__reason")
        .localCheckpoint()
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(path)
    )


def _as_events(existing: DataFrame, data: Sequence[str]) -> DataFrame:
    """Stored versions in the shape of change events (fully resolved: no placeholders)."""
    return existing.select(
        *[F.col(c) for c in _META if c != M.DELETED],
        F.array().cast("array<string>").alias(M.UNAVAILABLE),
        F.col(PREVIOUS_KEY).alias(M.OLD_KEY),
        F.col(NEXT_KEY),
        *[F.col(quote_identifier(c)) for c in data],
    )


TRUNCATE_PROPERTY = "medallion.history.truncate"
"""Table property of a history table: ``<position hex>:<source ts ms>`` of every truncate
recorded, comma-separated in position order, so a late change a truncate erased can be closed at
the first truncate after it, at that truncate's time."""


def _recorded_truncates(path: str) -> dict[bytes, int | None]:
    """The truncates :func:`truncate_history` recorded on the history table at ``path``: their
    positions and source times (None: unknown)."""
    from deltalake.exceptions import TableNotFoundError

    try:
        value = open_delta(path).metadata().configuration.get(TRUNCATE_PROPERTY)
    except TableNotFoundError:
        return {}
    recorded: dict[bytes, int | None] = {}
    for entry in (value or "").split(","):
        position, _, ts = entry.partition(":")
        if position:
            recorded[bytes.fromhex(position)] = int(ts) if ts else None
    return recorded


def _erased_late(events: DataFrame, truncates: Sequence[tuple[bytes, int | None]]) -> DataFrame:
    """A ``t`` version at a truncate for each key whose last change before it is live, newer than
    the truncate before it, and which has no version at it: a late change the truncate erased.

    The row existed from that change to the first truncate after it (the source had it), so the
    change is history: a version closed by that truncate, as if it had arrived before it. A
    change older than the truncate before was closed by that one (its stored or added ``t``
    version), so each late change is closed once. Keys a truncate found live were closed by
    :func:`truncate_history` (their ``t`` version is at its position).

    Args:
        events: The keys' stored versions and new changes.
        truncates: Every truncate applied, ``(position, source ts)``, in position order.
    """
    newest = Window.partitionBy(M.KEY).orderBy(F.col(M.POSITION).desc())
    closing: list[DataFrame] = []
    previous: bytes | None = None
    for horizon, source_ts in truncates:
        before = F.col(M.POSITION) < F.lit(horizon)
        last = (
            events.where(before)
            .withColumn("__n", F.row_number().over(newest))
            .where((F.col("__n") == 1) & ~F.col(M.OP).isin("d", "t"))
            .drop("__n")
        )
        if previous is not None:
            last = last.where(F.col(M.POSITION) > F.lit(previous))
        closed = events.where(F.col(M.POSITION) == F.lit(horizon)).select(M.KEY)
        closing.append(
            last.join(closed, M.KEY, "left_anti")
            .withColumn(M.POSITION, F.lit(horizon))
            .withColumn(M.OP, F.lit("t"))
            .withColumn(M.SOURCE_TS, F.lit(source_ts).cast("long"))
            .withColumn(M.UNAVAILABLE, F.array().cast("array<string>"))
            .withColumn(M.OLD_KEY, F.lit(None).cast("string"))
            .withColumn(NEXT_KEY, F.lit(None).cast("string"))
        )
        previous = horizon
    return functools.reduce(DataFrame.unionByName, closing)


def apply_history(
    spark: SparkSession,
    path: str,
    changes: DataFrame,
    data_columns: Sequence[str],
    *,
    txn_app_id: str,
    txn_version: int,
) -> int:
    """Record every change of ``changes`` as a version in the history table at ``path``.

    Args:
        spark: The session.
        path: The history table (created on first use).
        changes: Decoded changes as given to :func:`silver.merge.apply_changes` (optionally
            with ``_cdc_old_key`` and ``_cdc_next_key``).
        data_columns: The data columns.
        txn_app_id: Delta app id of the history writer.
        txn_version: Version of this write.

    Returns:
        Versions inserted.
    """
    from delta.tables import DeltaTable

    if BK.already_written(path, txn_app_id, txn_version):
        return 0
    truncated = M.truncate_horizon(path.removesuffix(_HISTORY_SUFFIX))
    for optional in (M.OLD_KEY, NEXT_KEY):
        if optional not in changes.columns:
            changes = changes.withColumn(optional, F.lit(None).cast("string"))
    changes = changes.select(
        *[c for c in changes.columns if c != M.ORIGIN and c not in data_columns],
        *[F.col(quote_identifier(c)) for c in data_columns],
    )
    if DeltaTable.isDeltaTable(spark, path):
        stored = spark.read.format("delta").load(path)
        missing = [c for c in data_columns if c not in stored.columns]
        existing = stored.join(changes.select(M.KEY).distinct(), M.KEY, "left_semi")
        for c in missing:
            existing = existing.withColumn(c, F.lit(None).cast(changes.schema[c].dataType))
        moved_from = stored.join(
            changes.where(F.col(M.OLD_KEY).isNotNull()).select(F.col(M.OLD_KEY).alias(M.KEY)),
            M.KEY,
            "left_semi",
        )
        for c in missing:
            moved_from = moved_from.withColumn(c, F.lit(None).cast(changes.schema[c].dataType))
        fresh = changes.join(existing.select(M.KEY, M.POSITION), [M.KEY, M.POSITION], "left_anti")
        events = _as_events(existing, data_columns).unionByName(fresh, allowMissingColumns=True)
        newest = Window.partitionBy(M.KEY).orderBy(F.col(M.POSITION).desc())
        latest = (
            moved_from.where(~F.col(M.DELETED))
            .withColumn("__n", F.row_number().over(newest))
            .where(F.col("__n") == 1)
            .drop("__n")
        )
    else:
        events, latest = changes, None
    if truncated is not None:
        # The silver table's horizon is its latest truncate; one applied there whose history
        # write did not happen yet (a crash between the two) is closed at an unknown time.
        truncates = {truncated: None, **_recorded_truncates(path)}
        ordered = sorted((p, ts) for p, ts in truncates.items() if p <= truncated)
        events = events.unionByName(_erased_late(events, ordered))
    # NEXT_KEY rides through the fold as the origin column does.
    folded = M.fold(events.withColumnRenamed(NEXT_KEY, M.ORIGIN), data_columns)
    if latest is not None:
        folded = M.resolve_moves(folded, latest, data_columns)
    else:
        folded = M.resolve_moves(
            folded, folded.where(F.lit(False)).select(M.KEY, *data_columns), data_columns
        )
    by_key = Window.partitionBy(M.KEY).orderBy(M.POSITION)
    versions = folded.select(
        F.col(M.KEY),
        F.col(M.POSITION),
        F.col(M.OP),
        F.col(M.OP).isin("d", "t").alias(M.DELETED),
        F.col(M.SOURCE_TS),
        F.col(M.TX_ID),
        F.col(M.BRONZE_BATCH),
        F.timestamp_millis(F.col(M.SOURCE_TS)).alias(VALID_FROM),
        F.timestamp_millis(F.lead(M.SOURCE_TS).over(by_key)).alias(VALID_TO),
        F.lead(M.POSITION).over(by_key).alias(VALID_TO_POSITION),
        F.lead(M.POSITION).over(by_key).isNull().alias(IS_CURRENT),
        F.col(M.OLD_KEY).alias(PREVIOUS_KEY),
        F.col(M.ORIGIN).alias(NEXT_KEY),
        F.col(M.UNAVAILABLE),
        *[F.col(quote_identifier(c)) for c in data_columns],
    ).localCheckpoint()
    _ensure(spark, path, versions, data_columns)
    t, s = "t", "s"
    close: dict[str, Column | str] = {
        VALID_TO: F.col(f"{s}.{VALID_TO}"),
        VALID_TO_POSITION: F.col(f"{s}.{VALID_TO_POSITION}"),
        IS_CURRENT: F.col(f"{s}.{IS_CURRENT}"),
    }
    M.set_delta_txn(spark, txn_app_id, txn_version)
    try:
        (
            DeltaTable.forPath(spark, path)
            .alias(t)
            .merge(
                versions.alias(s),
                f"{t}.{M.KEY} = {s}.{M.KEY} AND {t}.{M.POSITION} = {s}.{M.POSITION}",
            )
            .whenMatchedUpdate(
                condition=f"NOT ({t}.{VALID_TO_POSITION} <=> {s}.{VALID_TO_POSITION})", set=close
            )
            .whenNotMatchedInsertAll()
            .execute()
        )
    finally:
        M.clear_delta_txn(spark)
    return M.last_commit_metrics(path).get("numTargetRowsInserted", 0)


def truncate_history(
    spark: SparkSession,
    path: str,
    position: bytes,
    source_ts: int | None,
    *,
    txn_app_id: str,
    txn_version: int,
) -> int:
    """Close every current, live version older than a truncate with a ``t`` version.

    Returns:
        Versions inserted.
    """
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return 0
    stored = spark.read.format("delta").load(path)
    data = [c for c in stored.columns if not c.startswith("_cdc_")]
    current = stored.where(
        F.col(IS_CURRENT) & ~F.col(M.DELETED) & (F.col(M.POSITION) < F.lit(position))
    )
    events = current.select(
        F.col(M.KEY),
        F.lit(position).alias(M.POSITION),
        F.lit("t").alias(M.OP),
        F.lit(source_ts).cast("long").alias(M.SOURCE_TS),
        F.col(M.TX_ID),
        F.col(M.BRONZE_BATCH),
        F.array().cast("array<string>").alias(M.UNAVAILABLE),
        *[F.col(quote_identifier(c)) for c in data],
    )
    inserted = apply_history(
        spark, path, events, data, txn_app_id=txn_app_id, txn_version=txn_version
    )
    # Its time, for the late changes it erased (closed at it by apply_history).
    truncates = {**_recorded_truncates(path), position: source_ts}
    recorded = ",".join(
        f"{p.hex()}:{'' if ts is None else ts}" for p, ts in sorted(truncates.items())
    )
    spark.sql(
        f"ALTER TABLE delta.{quote_identifier(path)} SET TBLPROPERTIES "
        f"({quote_string_literal(TRUNCATE_PROPERTY)} = {quote_string_literal(recorded)})"
    )
    return inserted
