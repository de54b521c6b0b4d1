"""The silver job: read bronze incrementally, decode, MERGE into one Delta table per source table.

Bronze ``events`` is read with Structured Streaming (``availableNow`` for ``medallion run
--once``, a processing-time trigger for ``--continuous``) and a checkpoint, so each bronze row is
handed to exactly one micro-batch. Every MERGE of a micro-batch carries the Delta app
transaction ``(medallion-silver:<table>, batch_id * 1024 + step)``: when a crash makes Spark run a
micro-batch again, the tables it had already merged skip it.

Per micro-batch and source table:

* data events are decoded with the Connect schema each was written with (``value_schema_id``),
  never today's; events without a schema (``schemas.enable=false``) with the newest registered
  schema of their table, or, when there is none, a schema inferred from the batch;
* the changes are applied by :func:`silver.merge.apply_changes`, split at truncates so that
  changes before a truncate, the truncate, and changes after it apply in source order;
* refused events go to ``silver/_quarantine`` with the reason and their bronze coordinates;
* logical messages (op ``m``) are appended to ``silver/_messages``;
* data events of a source transaction wait in ``silver/_pending`` until the transaction is
  complete (:mod:`silver.transactions`);
* one row per table goes to ``silver/_cuts``: the bronze batch, the highest position applied,
  the first position still waiting for its transaction (the cut is consistent below it) and the
  table's Delta version, so gold can read every table at one consistent cut.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze import schema as B
from silver import merge as M

__all__ = ["SilverJob", "SilverRunResult", "silver_table_name"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_STEPS_PER_BATCH = 1024
"""MERGE/truncate steps per micro-batch and table; bounds the app transaction version space."""


def silver_table_name(source: str, collection: str) -> str:
    """``<source>__<schema>__<table>``, restricted to the characters Spark table names allow."""
    parts = [source, *collection.split(".")]
    return "__".join(_UNSAFE.sub("_", p) for p in parts)


@dataclass(slots=True)
class SilverRunResult:
    """What one run applied.

    Attributes:
        batches: Micro-batches processed.
        events: Change events read from bronze.
        merged: MERGE results per silver table name, in order.
        quarantined: Events refused into ``silver/_quarantine``.
        messages: Logical messages appended to ``silver/_messages``.
        ignored: Bronze rows that change no table (tombstones, BEGIN/END, heartbeats, DDL).
        purged: Tombstone rows purged after the retention.
        tx_timed_out: Transactions applied without their END after the timeout.
    """

    batches: int = 0
    events: int = 0
    merged: dict[str, list[M.MergeResult]] = field(default_factory=dict)
    quarantined: int = 0
    messages: int = 0
    ignored: int = 0
    purged: int = 0
    tx_timed_out: int = 0


class SilverJob:
    """Applies bronze to silver for every source in a lake.

    Args:
        spark: The session (with Delta).
        lake_root: The lake root (``bronze/`` and ``silver/`` under it).
        tombstone_retention_hours: Purge tombstone rows older than this after each run; None
            keeps them.
        transaction_timeout_seconds: How long a transaction waits in ``silver/_pending`` for
            its END record before it is applied as far as it arrived.
    """

    def __init__(
        self,
        spark: SparkSession,
        lake_root: Path,
        *,
        tombstone_retention_hours: float | None = None,
        transaction_timeout_seconds: float = 300.0,
    ) -> None:
        self.spark = spark
        self.root = Path(lake_root)
        self.bronze = self.root / "bronze" / "events"
        self.silver = self.root / "silver"
        self.checkpoint = self.silver / "_checkpoints" / "bronze_events"
        self.result = SilverRunResult()
        self.retention = tombstone_retention_hours
        self.transaction_timeout = transaction_timeout_seconds
        self.pending = self.silver / "_pending"
        self._schemas: dict[str, dict[str, Any]] = {}

    # --- driving ----------------------------------------------------------------------------
    def run_once(self) -> SilverRunResult:
        """Process everything in bronze not yet applied, then stop."""
        query = (
            self.spark.readStream.format("delta")
            .load(str(self.bronze))
            .writeStream.foreachBatch(self._process)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        self.purge()
        return self.result

    def purge(self) -> int:
        """Purge tombstone rows older than the retention from the tables this run touched."""
        if self.retention is None:
            return 0
        purged = 0
        for name in self.result.merged:
            purged += M.purge_tombstones(
                self.spark, str(self.silver / name), older_than_hours=self.retention
            )
        self.result.purged += purged
        return purged

    def run_continuous(self, interval_seconds: float = 10.0) -> None:
        """Keep applying new bronze rows every ``interval_seconds`` until stopped."""
        query = (
            self.spark.readStream.format("delta")
            .load(str(self.bronze))
            .writeStream.foreachBatch(self._process)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(processingTime=f"{interval_seconds} seconds")
            .start()
        )
        query.awaitTermination()

    # --- one micro-batch --------------------------------------------------------------------
    def _process(self, micro_batch: DataFrame, batch_id: int) -> None:
        from delta.tables import DeltaTable

        from silver.transactions import split_complete

        columns = micro_batch.columns
        rows = micro_batch
        if DeltaTable.isDeltaTable(self.spark, str(self.pending)):
            rows = rows.unionByName(self.spark.read.format("delta").load(str(self.pending)))
        split = split_complete(
            rows, now=dt.datetime.now(dt.UTC), timeout_seconds=self.transaction_timeout
        )
        self.result.tx_timed_out += split.timed_out
        waiting = split.waiting.select(*columns).localCheckpoint()
        batch = split.ready.select(*columns).cache()
        try:
            self.result.batches += 1
            counts = {
                r["kind"]: r["n"]
                for r in batch.groupBy(B.KIND).agg(F.count("*").alias("n")).collect()
            }
            self.result.ignored += sum(
                n for kind, n in counts.items() if kind not in ("data", "message")
            )
            if counts.get("message"):
                self._append_messages(batch.where(F.col(B.KIND) == "message"))
            data = batch.where(F.col(B.KIND) == "data")
            tables = (
                data.select(B.SOURCE, B.COLLECTION)
                .distinct()
                .orderBy(B.SOURCE, B.COLLECTION)
                .collect()
            )
            for row in tables:
                self._apply_table(
                    data.where(
                        (F.col(B.SOURCE) == row[B.SOURCE])
                        & (F.col(B.COLLECTION) == row[B.COLLECTION])
                    ),
                    row[B.SOURCE],
                    row[B.COLLECTION],
                    batch_id,
                    waiting,
                )
            # Last, so that a replay of this micro-batch still sees the rows it applies.
            (
                waiting.write.format("delta")
                .mode("overwrite")
                .option("txnAppId", "medallion-silver:_pending")
                .option("txnVersion", batch_id)
                .save(str(self.pending))
            )
        finally:
            batch.unpersist()

    def _apply_table(
        self,
        events: DataFrame,
        source: str,
        collection: str,
        batch_id: int,
        waiting: DataFrame,
    ) -> None:
        name = silver_table_name(source, collection)
        path = str(self.silver / name)
        app_id = f"medallion-silver:{name}"
        truncates = sorted(
            bytes(r[B.POSITION])
            for r in events.where(F.col(B.OP) == "t").select(B.POSITION).collect()
        )
        changes, data_columns = self._decode(events.where(F.col(B.OP).isin("c", "u", "d", "r")))
        step = 0
        bounds: list[bytes | None] = [*truncates, None]
        lower: bytes | None = None
        for upper in bounds:
            segment = changes
            if lower is not None:
                segment = segment.where(F.col(M.POSITION) > F.lit(lower))
            if upper is not None:
                segment = segment.where(F.col(M.POSITION) < F.lit(upper))
            result = M.apply_changes(
                self.spark,
                path,
                segment,
                data_columns,
                txn_app_id=app_id,
                txn_version=batch_id * _STEPS_PER_BATCH + step,
            )
            step += 1
            self.result.events += result.events
            self.result.merged.setdefault(name, []).append(result)
            if result.rejected is not None:
                self._quarantine(result, source, collection, batch_id)
            if upper is not None:
                M.apply_truncate(
                    self.spark,
                    path,
                    upper,
                    txn_app_id=app_id,
                    txn_version=batch_id * _STEPS_PER_BATCH + step,
                )
                step += 1
            lower = upper
        self._record_cut(name, source, collection, batch_id, events, waiting)

    # --- decoding ---------------------------------------------------------------------------
    def _decode(self, events: DataFrame) -> tuple[DataFrame, list[str]]:
        """Decode every event with its own schema; union the results by column name."""
        from silver import types as T

        ids = [r[0] for r in events.select(B.VALUE_SCHEMA_ID).distinct().collect()]
        parts: list[DataFrame] = []
        columns: list[str] = []
        for schema_id in ids:
            subset = events.where(
                F.col(B.VALUE_SCHEMA_ID).isNull()
                if schema_id is None
                else F.col(B.VALUE_SCHEMA_ID) == schema_id
            )
            envelope = self._envelope_schema(schema_id, subset)
            row = _row_schema(envelope)
            parsed = subset.withColumn(
                "__v", F.from_json(B.VALUE_JSON, T.envelope_json_schema(envelope))
            )
            image = F.when(F.col(B.OP) == "d", F.col("__v.before")).otherwise(F.col("__v.after"))
            parsed = parsed.withColumn("__image", image)
            decoded = T.decode_row(F.col("__image"), row)
            names = [f["field"] for f in row.get("fields", [])]
            for n in names:
                if n not in columns:
                    columns.append(n)
            parts.append(
                parsed.select(
                    F.to_json(F.from_json(B.KEY_JSON, "map<string,string>")).alias(M.KEY),
                    F.col(B.POSITION).alias(M.POSITION),
                    F.col(B.OP).alias(M.OP),
                    F.col(B.SOURCE_TS_MS).alias(M.SOURCE_TS),
                    F.col(B.TX_ID).alias(M.TX_ID),
                    F.concat_ws("#", B.AGENT_ID, F.col(B.BATCH_SEQ).cast("string")).alias(
                        M.BRONZE_BATCH
                    ),
                    T.unavailable_flags(F.col("__image"), row).alias(M.UNAVAILABLE),
                    F.col(B.ORIGIN).alias(M.ORIGIN),
                    *decoded,
                )
            )
        if not parts:
            empty = events.sparkSession.createDataFrame(
                [],
                "_cdc_key string, _cdc_position binary, _cdc_op string, _cdc_source_ts long, "
                "_cdc_tx_id string, _cdc_bronze_batch string, _cdc_unavailable array<string>, "
                "__origin string",
            )
            return empty, []
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part, allowMissingColumns=True)
        return union, columns

    def _envelope_schema(self, schema_id: str | None, subset: DataFrame) -> dict[str, Any]:
        if schema_id is not None:
            if schema_id not in self._schemas:
                registry = self.root / "bronze" / "schemas"
                found = (
                    self.spark.read.format("delta")
                    .load(str(registry))
                    .where(F.col(B.SCHEMA_ID) == schema_id)
                    .select(B.SCHEMA_JSON)
                    .collect()
                )
                if not found:
                    raise LookupError(f"schema {schema_id} is not in {registry}")
                self._schemas[schema_id] = orjson.loads(found[0][0])
            return self._schemas[schema_id]
        registered = self._registered_schema(subset)
        if registered is not None:
            return registered
        from silver import types as T

        samples = [
            orjson.loads(r[0])
            for r in subset.select(B.VALUE_JSON).limit(1000).collect()
            if r[0] is not None
        ]
        images = [s.get("after") or s.get("before") or {} for s in samples]
        row = T.infer_row_schema([i for i in images if isinstance(i, dict)])
        return {
            "type": "struct",
            "fields": [
                {**row, "field": "before", "optional": True},
                {**row, "field": "after", "optional": True},
                {"type": "string", "optional": False, "field": "op"},
            ],
        }

    def _registered_schema(self, subset: DataFrame) -> dict[str, Any] | None:
        """The newest registered envelope schema of the subset's table, for schema-less events.

        Debezium names a table's envelope schema ``<server>.<collection>.Envelope``; bronze keeps
        the server name in ``source_partition``. Decoding schema-less events with it keeps one
        type per column when a producer switches ``schemas.enable`` off.
        """
        names = [
            f"{r[0].split('/')[0]}.{r[1]}.Envelope"
            for r in subset.select(B.SOURCE_PARTITION, B.COLLECTION).distinct().collect()
            if r[0] and r[1]
        ]
        if not names:
            return None
        registry = self.root / "bronze" / "schemas"
        found = (
            self.spark.read.format("delta")
            .load(str(registry))
            .where(F.col(B.SCHEMA_NAME).isin(names))
            .orderBy(F.col(B.FIRST_SEEN_TS).desc())
            .select(B.SCHEMA_JSON)
            .limit(1)
            .collect()
        )
        return orjson.loads(found[0][0]) if found else None

    # --- side tables ------------------------------------------------------------------------
    def _quarantine(
        self, result: M.MergeResult, source: str, collection: str, batch_id: int
    ) -> None:
        assert result.rejected is not None
        out = result.rejected.select(
            F.lit(source).alias("source"),
            F.lit(collection).alias("collection"),
            F.col(M.ORIGIN).alias("origin"),
            F.col(M.KEY).alias("key"),
            F.col(M.POSITION).alias("position"),
            F.col(M.BRONZE_BATCH).alias("bronze_batch"),
            F.col("__reason").alias("reason"),
            F.lit(batch_id).alias("silver_batch"),
            F.current_timestamp().alias("quarantined_at"),
        )
        n = result.rejected_count
        out.write.format("delta").mode("append").save(str(self.silver / "_quarantine"))
        self.result.quarantined += n
        logger.warning("silver: %s events of %s.%s quarantined", n, source, collection)

    def _append_messages(self, messages: DataFrame) -> None:
        out = messages.select(
            B.SOURCE,
            B.CONNECTOR,
            B.POSITION,
            B.TX_ID,
            B.SOURCE_TS_MS,
            F.get_json_object(B.VALUE_JSON, "$.message.prefix").alias("prefix"),
            F.get_json_object(B.VALUE_JSON, "$.message.content").alias("content"),
            B.VALUE_JSON,
            B.ORIGIN,
        )
        n = out.count()
        out.write.format("delta").mode("append").save(str(self.silver / "_messages"))
        self.result.messages += n

    def _record_cut(
        self,
        name: str,
        source: str,
        collection: str,
        batch_id: int,
        events: DataFrame,
        waiting: DataFrame,
    ) -> None:
        from delta.tables import DeltaTable

        path = str(self.silver / name)
        if not DeltaTable.isDeltaTable(self.spark, path):
            return
        version = DeltaTable.forPath(self.spark, path).history(1).collect()[0]["version"]
        top = events.agg(F.max(B.POSITION)).collect()[0][0]
        first_waiting = (
            waiting.where(F.col(B.SOURCE) == source).agg(F.min(B.POSITION)).collect()[0][0]
        )
        cut = self.spark.createDataFrame(
            [(batch_id, source, collection, name, top, first_waiting, version)],
            "silver_batch long, source string, collection string, silver_table string, "
            "position binary, waiting_from binary, table_version long",
        ).withColumn("recorded_at", F.current_timestamp())
        cut.write.format("delta").mode("append").save(str(self.silver / "_cuts"))


def _row_schema(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The before/after row struct of an envelope schema."""
    for f in envelope.get("fields", []):
        if f.get("field") in ("after", "before") and f.get("type") == "struct":
            return dict(f)
    return {"type": "struct", "fields": []}
