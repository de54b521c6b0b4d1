"""``silver/_quarantine``: what silver refused, one row per event or per value, with the reason.

Two kinds of rows (contracts C1 and C5 in docs/silver.md):

* ``kind = 'event'``: an event silver did not apply (it cannot be decoded, conformed to the
  table or applied); ``column`` and ``value_text`` are NULL. The rest of its micro-batch, and
  every other table, go on.
* ``kind = 'value'``: one column of an event silver *did* apply, with NULL in that column,
  because the source value has no representation (the record header
  ``__medallion.unrepresentable``); ``column`` names it and ``value_text`` is the database's
  text of the value (NULL when a mask rule hid it).

Tables written before these columns existed are extended on the next append (``mergeSchema``);
their old rows read ``kind`` NULL, which means ``'event'``.
"""

from __future__ import annotations

import threading
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze import schema as B
from bronze.storage import LakePath
from capture.captured_table import HEADER_UNREPRESENTABLE
from pipeline.sql import quote_identifier
from silver import merge as M

__all__ = [
    "COLUMN",
    "EVENT",
    "KIND",
    "REASON",
    "VALUE",
    "VALUE_TEXT",
    "has_unrepresentable",
    "record_key",
    "unrepresentable_values",
    "write",
]

REASON: Final = "__reason"
"""Column of a refused frame holding why (the frames handed to :func:`write`)."""
KIND: Final = "kind"
COLUMN: Final = "column"
VALUE_TEXT: Final = "value_text"
EVENT: Final = "event"
VALUE: Final = "value"

_ISSUES_TYPE: Final = "map<string, map<string, struct<reason: string, text: string>>>"


def record_key(key_json: Column) -> Column:
    """The record key as its producer wrote it (a ``{schema, payload}`` wrapper unwrapped).

    Value rows carry it rather than the canonical ``_cdc_key`` (whose field values are all
    strings), so that the key reads with its own types.
    """
    payload = F.get_json_object(key_json, "$.payload")
    wrapped = payload.isNotNull() & F.get_json_object(key_json, "$.schema").isNotNull()
    return F.when(wrapped, payload).otherwise(key_json)


def _header() -> Column:
    return F.filter(B.HEADERS, lambda h: h["key"] == F.lit(HEADER_UNREPRESENTABLE))


def has_unrepresentable() -> Column:
    """Whether a bronze row carries the C1 header (some value of it has no representation)."""
    return F.coalesce(F.size(_header()) > 0, F.lit(False))


def unrepresentable_values(events: DataFrame) -> DataFrame:
    """One ``kind = 'value'`` row per column named in each event's C1 header.

    The image silver applies is named: ``before`` for a delete, ``after`` otherwise.

    Args:
        events: Bronze rows (``op``, ``headers``, ``key_json``, ...).

    Returns:
        Rows with the columns :func:`write` expects, ``column`` and ``value_text`` set.
    """
    header = _header()
    issues = F.from_json(header[0]["value"], _ISSUES_TYPE)
    side = F.when(F.col(B.OP) == "d", issues["before"]).otherwise(issues["after"])
    named = events.where(F.size(header) > 0).select(
        record_key(F.col(B.KEY_JSON)).alias(M.KEY),
        F.col(B.POSITION).alias(M.POSITION),
        F.concat_ws("#", B.AGENT_ID, F.col(B.BATCH_SEQ).cast("string")).alias(M.BRONZE_BATCH),
        F.col(B.ORIGIN).alias(M.ORIGIN),
        F.explode(side).alias("__column", "__issue"),
    )
    return named.select(
        M.KEY,
        M.POSITION,
        M.BRONZE_BATCH,
        M.ORIGIN,
        F.concat(
            F.lit("value without a representation, applied as NULL: "),
            F.coalesce(F.col("__issue.reason"), F.lit("no reason given")),
        ).alias(REASON),
        F.lit(VALUE).alias(KIND),
        F.col("__column").alias(COLUMN),
        F.col("__issue.text").alias(VALUE_TEXT),
    )


def write(
    spark: SparkSession,
    silver_root: LakePath,
    refused: DataFrame,
    *,
    source: str,
    collection: str,
    app_id: str,
    version: int,
    batch_id: int,
) -> int:
    """Append refused events or values to ``silver/_quarantine``, exactly once.

    Args:
        spark: The session.
        silver_root: The lake's ``silver`` directory.
        refused: Rows with the ``_cdc_`` coordinates (key, position, bronze batch, origin) and
            :data:`REASON`; :data:`KIND`, :data:`COLUMN`, :data:`VALUE_TEXT` when they are
            value rows (absent: ``kind = 'event'``).
        source: The source name.
        collection: The source table.
        app_id: Delta app id of this writer (per silver table and kind of append).
        version: Delta app transaction version: a replayed micro-batch appends nothing twice.
        batch_id: The silver micro-batch.

    Returns:
        The rows appended (0 when there were none, or the version was already committed).
    """
    present = set(refused.columns)

    def optional(name: str, default: Column) -> Column:
        return (F.col(name) if name in present else default).alias(name)

    out = refused.select(
        F.lit(source).alias("source"),
        F.lit(collection).alias("collection"),
        F.col(M.ORIGIN).alias("origin"),
        F.col(M.KEY).alias("key"),
        F.col(M.POSITION).alias("position"),
        F.col(M.BRONZE_BATCH).alias("bronze_batch"),
        F.col(REASON).alias("reason"),
        F.lit(batch_id).cast("bigint").alias("silver_batch"),
        F.current_timestamp().alias("quarantined_at"),
        optional(KIND, F.lit(EVENT)),
        optional(COLUMN, F.lit(None).cast("string")),
        optional(VALUE_TEXT, F.lit(None).cast("string")),
    ).cache()
    try:
        # One job: the count fills the cache the append reads (most calls find nothing, and
        # a checkpoint then a count was two jobs for that).
        n = out.count()
        if not n:
            return 0
        path = str(silver_root / "_quarantine")
        with _APPEND_LOCK:
            _append(spark, out, path, app_id, version)
        return n
    finally:
        out.unpersist()


_APPEND_LOCK = threading.Lock()
"""Tables applied concurrently (:mod:`silver.job`) append here one at a time: the first two
appends would both try to create the table, and Delta lets only one create it."""


def _append(spark: SparkSession, out: DataFrame, path: str, app_id: str, version: int) -> None:
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, path):
        # The table's own column order first (older layouts lack kind/column/value_text;
        # mergeSchema adds them at the end).
        table = spark.read.format("delta").load(path).schema
        have = set(table.fieldNames())
        out = out.select(
            *[
                F.col(quote_identifier(f.name))
                if f.name in out.columns
                else F.lit(None).cast(f.dataType).alias(f.name)
                for f in table.fields
            ],
            *[F.col(quote_identifier(c)) for c in out.columns if c not in have],
        )
    (
        out.write.format("delta")
        .mode("append")
        .option("mergeSchema", "true")
        .option("txnAppId", app_id)
        .option("txnVersion", version)
        .save(path)
    )
