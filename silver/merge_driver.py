"""The MERGE of a small batch on the driver, with deltalake (delta-rs) instead of Spark.

A continuous pipeline's micro-batch brings each table a few dozen to a few thousand changes. As
a Spark Delta MERGE that costs about a second per table even on a warm JVM (planning, the
snapshot, several jobs, the commit); delta-rs merges the same rows into the same files in tens
of milliseconds, in the driver process, with no Spark job. :func:`silver.merge.apply_changes`
brings the batch's last change per key to the driver as Arrow and calls :func:`merge_rows`
when :func:`spark_reason` finds nothing that needs Spark.

The MERGE is the Spark one, clause for clause (:func:`silver.merge._merge`): the condition is key
equality plus the batch's key ranges on ``_cdc_key_order`` (a target-only predicate: delta-rs,
like Spark, skips the files whose statistics lie outside them), a matched row is updated only
when the change's position is greater (both compare binary as unsigned bytes, a prefix first),
an unmatched key is inserted, and the same columns are set. The commit carries the Delta app
transaction, so a replay is skipped as on the Spark path. What delta-rs cannot do the way Spark
would is kept on Spark: see :func:`spark_reason`.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import (
    ArrayType,
    AtomicType,
    DataType,
    MapType,
    StructType,
)

from pipeline.sql import quote_datafusion_identifier as ident
from pipeline.sql import quote_datafusion_literal as literal
from silver.plans import COPY_ON_WRITE_BYTES

__all__ = [
    "DRIVER",
    "SPARK",
    "DRIVER_TARGET_BYTES",
    "WRITER_FEATURES",
    "READER_FEATURES",
    "last_changes",
    "merge_condition",
    "merge_rows",
    "protocol_reason",
    "schema_reason",
]

logger = logging.getLogger(__name__)

DRIVER: Final = "driver"
"""``MergeResult.merged_by`` of a batch merged by deltalake on the driver."""
SPARK: Final = "spark"
"""``MergeResult.merged_by`` of a batch merged by Spark."""

DRIVER_TARGET_BYTES = COPY_ON_WRITE_BYTES
"""Most bytes of candidate files (by their key-range statistics) a driver MERGE may touch.
delta-rs rewrites every file holding a changed row (no deletion vectors); Spark rewrites them
too up to this size (:func:`silver.plans.small_target_merge`) and marks rows above it, which
is cheaper for large files: so the two paths rewrite the same files."""

WRITER_FEATURES: Final = frozenset({"appendOnly", "invariants", "deletionVectors", "timestampNtz"})
"""Delta writer features of a table delta-rs 1.6 writes as Spark would: a silver table has
these (deletion vectors from Spark's MERGEs are honoured, and a rewritten file drops its
rows). ``typeWidening`` is the one a silver table gains later (:func:`silver.evolution.
widen_and_add`); delta-rs refuses it, so such a table is merged by Spark from then on."""
READER_FEATURES: Final = frozenset({"deletionVectors", "timestampNtz"})
"""Delta reader features of a table delta-rs reads for its MERGE."""
_LEGACY_WRITER = 2
"""Highest writer version without table features delta-rs writes alike (appendOnly,
invariants); 3-6 add check constraints, change data feed, column mapping, identity."""


def protocol_reason(protocol: Any) -> str | None:
    """Why delta-rs must not write a table with ``protocol``; None when it may.

    Args:
        protocol: ``deltalake.DeltaTable.protocol()``.

    Returns:
        A reason naming the features, or None.
    """
    writer = set(protocol.writer_features or ())
    reader = set(protocol.reader_features or ())
    if protocol.min_writer_version < 7 and protocol.min_writer_version > _LEGACY_WRITER:
        return f"writer version {protocol.min_writer_version}"
    unknown = sorted((writer - WRITER_FEATURES) | (reader - READER_FEATURES))
    if unknown:
        return "table features " + ", ".join(unknown)
    return None


def _plain(t: DataType) -> bool:
    """Whether ``t`` is built of types Spark's Arrow export and delta-rs agree on."""
    if isinstance(t, ArrayType):
        return _plain(t.elementType)
    if isinstance(t, MapType):
        return _plain(t.keyType) and _plain(t.valueType)
    if isinstance(t, StructType):
        return all(_plain(f.dataType) for f in t.fields)
    # Atomic: string, binary, boolean, numbers, decimal, date, timestamp(_ntz). Not variant,
    # intervals, or a char/varchar Spark keeps as metadata.
    return isinstance(t, AtomicType) and t.typeName() not in ("char", "varchar")


def schema_reason(source: StructType, table: StructType, columns: Sequence[str]) -> str | None:
    """Why the batch's rows cannot be written to the table as they are; None when they can.

    The Arrow rows must take the table's types exactly, by a cast that changes no value (a
    time zone label, a map's entry names, large or small offsets). That holds when Spark's
    types are the same (nullability aside); anything else is for Spark's own casts.

    Args:
        source: The schema of the batch's rows (Spark's).
        table: The table's schema.
        columns: The columns written.

    Returns:
        A reason naming the first column that differs, or None.
    """
    have = {f.name: f.dataType for f in source.fields}
    want = {f.name: f.dataType for f in table.fields}
    for name in columns:
        got, wanted = have.get(name), want.get(name)
        if got is None or wanted is None:
            return f"column {name} missing from the {'batch' if got is None else 'table'}"
        if got.simpleString() != wanted.simpleString():
            return f"column {name}: {got.simpleString()} into {wanted.simpleString()}"
        if not _plain(wanted):
            return f"column {name}: type {wanted.simpleString()}"
    return None


def merge_condition(key: str, key_order: str, ranges: Sequence[tuple[str, str]]) -> str:
    """The MERGE condition of :func:`silver.merge._merge` as DataFusion SQL.

    Args:
        key: The key column.
        key_order: The key-order column.
        ranges: The batch's key ranges (:func:`silver.merge.key_ranges`); none: no bound.

    Returns:
        ``t.key = s.key AND (t.key_order IS NULL OR t.key_order BETWEEN .. OR ..)``.
    """
    on = f"t.{ident(key)} = s.{ident(key)}"
    if not ranges:
        return on
    order = f"t.{ident(key_order)}"
    bounds = [f"{order} IS NULL"] + [
        f"{order} BETWEEN {literal(low)} AND {literal(high)}" for low, high in ranges
    ]
    return f"{on} AND ({' OR '.join(bounds)})"


def merge_rows(
    log: Any,
    rows: pa.Table,
    *,
    key: str,
    key_order: str,
    position: str,
    computed: Mapping[str, Any],
    ranges: Sequence[tuple[str, str]],
    txn_app_id: str,
    txn_version: int,
) -> tuple[int, int]:
    """MERGE the batch's last changes into the table, as one commit with the app transaction.

    Args:
        log: The table, opened by deltalake at its current version.
        rows: One row per key (its last change): the key, the other columns written; the
            columns ``computed`` names are added.
        key: The key column (inserted, never updated).
        key_order: The key-order column the ranges bound.
        position: The position column: a stored row changes only for a greater one.
        computed: Columns computed here, by name: a pyarrow array or scalar per row.
        ranges: The batch's key ranges.
        txn_app_id: Delta app id of the table's writer.
        txn_version: The version of this MERGE.

    Returns:
        Rows inserted, rows updated (delta-rs's metrics).
    """
    from deltalake import CommitProperties, Transaction

    target = pa.schema(log.schema().to_arrow())
    columns = [*rows.column_names, *computed]
    fields = [target.field(name) for name in target.names if name in set(columns)]
    arrays = []
    for f in fields:
        if f.name in computed:
            value = computed[f.name]
            arrays.append(
                value.cast(f.type)
                if isinstance(value, pa.Array | pa.ChunkedArray)
                else pa.array([value] * rows.num_rows, type=f.type)
            )
        else:
            # Only representation changes here (schema_reason checked the types): the
            # cast is safe, so a value it would change raises rather than passes.
            arrays.append(rows.column(f.name).cast(f.type, safe=True))
    source = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    values = {ident(f.name): f"s.{ident(f.name)}" for f in fields}
    updates = {k: v for k, v in values.items() if k != ident(key)}
    metrics = (
        log.merge(
            source,
            merge_condition(key, key_order, ranges),
            source_alias="s",
            target_alias="t",
            commit_properties=CommitProperties(
                app_transactions=[Transaction(app_id=txn_app_id, version=txn_version)]
            ),
        )
        .when_matched_update(
            updates=updates, predicate=f"s.{ident(position)} > t.{ident(position)}"
        )
        .when_not_matched_insert(updates=values)
        .execute()
    )
    logger.debug("driver MERGE of %s rows: %s", rows.num_rows, metrics)
    return int(metrics["num_target_rows_inserted"]), int(metrics["num_target_rows_updated"])


def now_utc() -> dt.datetime:
    """The write time of a driver MERGE's rows (``_cdc_updated_at``), microseconds."""
    return dt.datetime.now(dt.UTC)


def deleted(op: pa.ChunkedArray | pa.Array) -> Any:
    """``_cdc_deleted`` of the rows: their op is ``d`` (as the Spark path's ``op == 'd'``)."""
    return pc.equal(op, "d")


def last_changes(rows: pa.Table, *, key: str, position: str) -> pa.Table:
    """Each key's change of the highest position: :func:`silver.merge.collapse_by_aggregate`
    (``max_by`` per key) on Arrow rows, for a batch without placeholders.

    Positions compare as unsigned bytes, a prefix first (pyarrow's binary order, Spark's too).
    Rows of one key at one position are the same event delivered twice (identical but for
    where bronze landed it): either may be kept, as ``max_by`` keeps either.

    Args:
        rows: Changes with no null key or position.
        key: The key column.
        position: The position column.

    Returns:
        One row per key, in key order.
    """
    if rows.num_rows == 0:
        return rows
    ordered = rows.take(
        pc.sort_indices(rows, sort_keys=[(key, "ascending"), (position, "descending")])
    )
    keys = ordered.column(key).combine_chunks()
    starts = pc.not_equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    first = pa.concat_arrays([pa.array([True]), starts])
    return ordered.filter(first)
