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
  table's Delta version, so gold can read every table at one consistent cut;
* last, one row per source goes to ``silver/_progress``: the highest position and source time
  of every row of the source the micro-batch consumed (heartbeats and END records too), the
  first data position still waiting, and whether the newest data row applied belongs to a
  transaction bronze had to cut (``open_tx``). :mod:`gold.cuts` reads the two tables.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.errors import (
    AnalysisException,
    ArithmeticException,
    DateTimeException,
    IllegalArgumentException,
    NumberFormatException,
    SparkRuntimeException,
)
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import DataType, MapType, StringType, StructField, StructType

from bronze import exact_json
from bronze import schema as B
from bronze.delta_checksum import version_checksum
from bronze.envelope import HEADER_NEW_KEY as NEW_KEY_HEADER
from bronze.envelope import HEADER_OLD_KEY as OLD_KEY_HEADER
from bronze.storage import LakePath, lake_path, open_delta
from capture.captured_table import HEADER_UNREPRESENTABLE
from pipeline import metrics
from pipeline.config import SchemaEvolutionPolicy, TableOptions
from pipeline.errors import PipelineError, SchemaEvolutionError
from pipeline.sql import quote_identifier
from silver import bookkeeping as BK
from silver import defaults as DF
from silver import documents as D
from silver import evolution as E
from silver import merge as M
from silver import quarantine as Q
from silver import scd2 as S
from silver import transactions as TX
from silver.collected_screen import Screen, screen_collected
from silver.collected_split import CollectedSplit, split_collected
from silver.driver_decode import DriverDecoders
from silver.plans import estimated_bytes, small_input_plans
from silver.timings import BatchTimings, spark_jobs_started

__all__ = ["SilverJob", "SilverRunResult", "silver_table_name"]

logger = logging.getLogger(__name__)

_UNSAFE = re.compile(r"[^A-Za-z0-9_]")
_STEPS_PER_BATCH = 1024
"""MERGE/truncate steps per micro-batch and table; bounds the app transaction version space."""
_REASON = "__reason"
_KEYLESS = (
    "null record key (a table without a primary key): silver cannot tell which row it changes; "
    "give the table a primary key or name key columns with message.key.columns"
)
_DECODED_METADATA = frozenset(
    (
        M.KEY,
        M.POSITION,
        M.OP,
        M.SOURCE_TS,
        M.TX_ID,
        M.BRONZE_BATCH,
        M.UNAVAILABLE,
        M.OLD_KEY,
        M.NEXT_KEY,
        M.ORIGIN,
    )
)
_QUARANTINE_COLUMNS = (M.KEY, M.POSITION, M.BRONZE_BATCH, M.ORIGIN, _REASON)
_KNOWN_OPS = ("c", "u", "d", "r", "t")
"""Ops of data events: create, update, delete, read (snapshot), truncate."""


def _kept(frame: DataFrame) -> Callable[[], DataFrame]:
    """A builder of a DataFrame built already."""
    return lambda: frame


def _once(build: Callable[[], DataFrame]) -> Callable[[], DataFrame]:
    """``build``, called at most once (its DataFrame kept)."""
    return functools.cache(build)


@dataclass(frozen=True, slots=True)
class _Part:
    """The events of one table written with one schema, decoded (the accepted ones)."""

    schema_id: str | None
    first: bytes
    """Position of the part's first event (parts are compared with the table in this order)."""
    build: Callable[[], DataFrame]
    """The decoded rows as a DataFrame (built when first asked for: :attr:`frame`)."""
    row: StructType
    """The data columns the schema decodes to."""
    schema: StructType
    """Spark's schema of the decoded rows (metadata and data columns)."""
    rows: pa.Table | None = None
    """The decoded rows on the driver, when a collected micro-batch's part was decoded there
    (their columns as Spark's ``toArrow`` gives them); None: only the DataFrame."""

    @property
    def frame(self) -> DataFrame:
        """The decoded rows as a DataFrame."""
        return self.build()


@dataclass(frozen=True, slots=True)
class _Changes:
    """A table's changes to apply: on the driver as Arrow rows (the Arrow road, no Spark job
    before the driver MERGE) when every part's rows are there and need no cast, and always
    as a DataFrame, built only when a Spark path asks for it (:attr:`frame`)."""

    build: Callable[[], DataFrame]
    rows: pa.Table | None = None
    """The changes on the driver; None: the Spark road (:attr:`why_spark` says why)."""
    schema: StructType | None = None
    """Spark's schema of :attr:`rows`."""
    why_spark: str | None = None
    """Why a collected micro-batch's changes are not on the Arrow road."""

    @property
    def frame(self) -> DataFrame:
        """The changes as a DataFrame."""
        return self.build()

    def where(self, condition: Column, mask: Callable[[pa.Table], Any]) -> _Changes:
        """The changes that meet ``condition`` (Spark) / ``mask`` (the same test on Arrow)."""
        parent = self.build
        rows = None if self.rows is None else self.rows.filter(mask(self.rows))
        return _Changes(_once(lambda: parent().where(condition)), rows, self.schema, self.why_spark)


@dataclass(frozen=True, slots=True)
class _SourceProgress:
    """What a micro-batch consumed of one source (its ``silver/_progress`` row)."""

    position: bytes | None
    source_ts_ms: int | None
    events: int
    open_tx: bool


@dataclass(frozen=True, slots=True)
class _BatchSummary:
    """What a micro-batch's ready rows hold, from one aggregate over them.

    Attributes:
        counts: Rows per ``kind``.
        tables: ``(source, collection)`` of its data rows, in Spark's ascending order (nulls
            first).
        per_source: Per source, what its ``silver/_progress`` row says.
        table_rows: Data rows per ``(source, collection)``.
    """

    counts: dict[str | None, int]
    tables: list[tuple[str, str | None]]
    per_source: dict[str, _SourceProgress]
    table_rows: dict[tuple[str, str | None], int] = field(default_factory=dict)

    @classmethod
    def of(cls, batch: DataFrame) -> _BatchSummary:
        """Summarize ``batch`` (one Spark job: it used to take one per question)."""
        data_position = F.when(F.col(B.KIND) == "data", F.col(B.POSITION))
        groups = (
            batch.groupBy(B.KIND, B.SOURCE, B.COLLECTION)
            .agg(
                F.count("*").alias("n"),
                F.max(B.POSITION).alias("position"),
                F.max(B.SOURCE_TS_MS).alias("source_ts_ms"),
                F.max(data_position).alias("data_top"),
                # A transaction without BEGIN/END is not held back (silver cannot know its
                # size), but bronze flags the rows of one it had to cut: when the newest data
                # row applied is such a row, the rest of its transaction is still to come.
                F.max_by(B.TX_PARTIAL, data_position).alias("open_tx"),
            )
            .collect()
        )
        return cls._of_groups(groups)

    @classmethod
    def of_rows(cls, batch: pa.Table) -> _BatchSummary:
        """Summarize collected rows: the aggregate of :meth:`of`, on the driver (no job)."""
        groups: dict[tuple[Any, Any, Any], dict[str, Any]] = {}
        columns = [B.KIND, B.SOURCE, B.COLLECTION, B.POSITION, B.SOURCE_TS_MS, B.TX_PARTIAL]
        for r in batch.select(columns).to_pylist():
            kind, position = r[B.KIND], r[B.POSITION]
            g = groups.setdefault(
                (kind, r[B.SOURCE], r[B.COLLECTION]),
                {
                    B.KIND: kind,
                    B.SOURCE: r[B.SOURCE],
                    B.COLLECTION: r[B.COLLECTION],
                    "n": 0,
                    "position": None,
                    "source_ts_ms": None,
                    "data_top": None,
                    "open_tx": None,
                },
            )
            g["n"] += 1
            if position is not None:
                g["position"] = position if g["position"] is None else max(g["position"], position)
            stamp = r[B.SOURCE_TS_MS]
            if stamp is not None and (g["source_ts_ms"] is None or stamp > g["source_ts_ms"]):
                g["source_ts_ms"] = stamp
            if kind == "data" and position is not None:
                if g["data_top"] is None or position > g["data_top"]:
                    g["data_top"], g["open_tx"] = position, r[B.TX_PARTIAL]
        return cls._of_groups(list(groups.values()))

    @classmethod
    def _of_groups(cls, groups: list[Any]) -> _BatchSummary:
        counts: dict[str | None, int] = {}
        tables: dict[tuple[str, str | None], int] = {}
        sources: dict[str, list[Any]] = {}
        for g in groups:
            kind, source, collection = g[B.KIND], g[B.SOURCE], g[B.COLLECTION]
            counts[kind] = counts.get(kind, 0) + g["n"]
            if kind == "data":
                tables[(source, collection)] = tables.get((source, collection), 0) + g["n"]
            sources.setdefault(source, []).append(g)

        def nulls_first(value: str | None) -> tuple[bool, str]:
            return (value is not None, value or "")

        def newest(values: list[Any]) -> Any:
            present = [bytes(v) for v in values if v is not None]
            return max(present) if present else None

        per_source = {}
        for source, mine in sources.items():
            with_data = [g for g in mine if g["data_top"] is not None]
            last = max(with_data, key=lambda g: bytes(g["data_top"])) if with_data else None
            stamps = [g["source_ts_ms"] for g in mine if g["source_ts_ms"] is not None]
            per_source[source] = _SourceProgress(
                position=newest([g["position"] for g in mine]),
                source_ts_ms=max(stamps) if stamps else None,
                events=sum(g["n"] for g in mine),
                open_tx=bool(last is not None and last["open_tx"]),
            )
        return cls(
            counts,
            sorted(tables, key=lambda t: (nulls_first(t[0]), nulls_first(t[1]))),
            per_source,
            tables,
        )


def _log_triggers(query: Any, logged: int) -> int:
    """At DEBUG, where Spark's triggers since micro-batch ``logged`` spent their time (its
    ``durationMs``: the Delta source's offsets, the offset and commit logs, ``addBatch`` the
    micro-batch itself); returns the newest micro-batch logged."""
    if not logger.isEnabledFor(logging.DEBUG):
        return logged
    try:
        progress = query.recentProgress
    except Exception:  # noqa: BLE001 - a diagnostic only; never stops the stream
        return logged
    for p in progress:
        batch = int(p.batchId)
        if batch > logged and p.numInputRows:
            spent = ", ".join(f"{k} {v}" for k, v in sorted(p.durationMs.items()))
            logger.debug("silver trigger %s (%s rows): ms %s", batch, p.numInputRows, spent)
        logged = max(logged, batch)
    return logged


def _screen_in_spark(events: DataFrame) -> list[Any]:
    """The screen of a table's events, per value schema (one Spark job; the fields of
    :data:`silver.collected_screen.Screen`)."""
    known = F.coalesce(F.col(B.OP).isin(*_KNOWN_OPS), F.lit(False))
    row_ops = F.col(B.OP).isin("c", "u", "d", "r")
    return (
        events.groupBy(B.VALUE_SCHEMA_ID)
        .agg(
            F.count_if(~known).alias("unknown"),
            F.count_if(known).alias("known"),
            F.count_if(row_ops & Q.has_unrepresentable()).alias("unrepresentable"),
            F.collect_list(F.when(F.col(B.OP) == "t", F.struct(B.POSITION, B.SOURCE_TS_MS))).alias(
                "truncates"
            ),
            F.count_if(row_ops & F.col(B.KEY_JSON).isNull()).alias("keyless"),
            F.count_if(known & F.col(B.CONNECTOR).isin(*D.DOCUMENT_CONNECTORS)).alias("documents"),
            F.min(F.when(row_ops, F.col(B.POSITION))).alias("first"),
            F.min(F.when(known, F.col(B.POSITION))).alias("oldest"),
            F.max(F.when(known, F.col(B.POSITION))).alias("top"),
        )
        .collect()
    )


def _first_waiting(waiting: DataFrame) -> dict[str, bytes]:
    """Per source, the first position of its data rows still waiting for their transaction.

    Only data rows hold a cut back: an END waiting for data (reordered delivery) holds nothing
    that is missing from silver.
    """
    return {
        r[0]: bytes(r[1])
        for r in waiting.where(F.col(B.KIND) == "data")
        .groupBy(B.SOURCE)
        .agg(F.min(B.POSITION))
        .collect()
    }


def _first_waiting_rows(waiting: pa.Table) -> dict[str, bytes]:
    """:func:`_first_waiting` of collected rows (no job)."""
    first: dict[str, bytes] = {}
    for r in waiting.select([B.SOURCE, B.KIND, B.POSITION]).to_pylist():
        position = r[B.POSITION]
        if r[B.KIND] == "data" and position is not None:
            source = r[B.SOURCE]
            if source not in first or position < first[source]:
                first[source] = position
    return first


def _table_rows(data: pa.Table, source: str, collection: str | None) -> pa.Table:
    """The collected data rows of one table (``collection`` compared null-safe)."""
    names = data.column(B.COLLECTION)
    same = (
        pc.is_null(names)
        if collection is None
        else pc.fill_null(pc.equal(names, collection), False)
    )
    return data.filter(pc.and_(pc.fill_null(pc.equal(data.column(B.SOURCE), source), False), same))


def _registered_json(registry: LakePath, schema_id: str) -> list[Any] | None:
    """The JSON registered in bronze ``schemas`` under ``schema_id``; None without the table.

    Read with deltalake: bronze's registry is a small table written by deltalake, and a Spark
    read of it cost a job per schema in every micro-batch.
    """
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_delta(registry)
    except TableNotFoundError:
        return None
    found = table.to_pyarrow_table(columns=[B.SCHEMA_JSON], filters=[(B.SCHEMA_ID, "=", schema_id)])
    return list(found.column(0).to_pylist())


def _canonical_key(text: Column) -> Column:
    """One spelling per key: the JSON of its fields as strings (a ``{schema, payload}`` wrapper,
    as a header converter may write, is unwrapped first). A key that is not a JSON object (a
    plain string or number, as an outbox table or a custom key converter writes) is its JSON
    text, trimmed: it still names the row."""
    parsed = F.from_json(text, "map<string,string>")
    wrapped = parsed["payload"].isNotNull() & parsed["schema"].isNotNull()
    fields = F.to_json(
        F.when(wrapped, F.from_json(parsed["payload"], "map<string,string>")).otherwise(parsed)
    )
    scalar = F.trim(Q.record_key(text))
    return F.when(text.isNull(), F.lit(None).cast("string")).otherwise(
        F.coalesce(fields, F.when((scalar != F.lit("")) & (scalar != F.lit("null")), scalar))
    )


class _Decoder:
    """The Spark expressions that decode the events of one envelope schema (reusable: they
    name columns, not a DataFrame's, so they apply to any micro-batch's events)."""

    def __init__(self, envelope: Mapping[str, Any]) -> None:
        from silver import types as T

        row = _row_schema(envelope)
        text_image = StructType(
            [StructField(side, MapType(StringType(), StringType())) for side in ("before", "after")]
        )
        self._parse = [
            F.from_json(B.VALUE_JSON, T.envelope_json_schema(envelope)).alias("__v"),
            F.from_json(B.VALUE_JSON, text_image).alias("__t"),
        ]
        deleted = F.col(B.OP) == "d"
        self._pick = [
            F.when(deleted, F.col("__v.before")).otherwise(F.col("__v.after")).alias("__image"),
            F.when(deleted, F.col("__t.before")).otherwise(F.col("__t.after")).alias("__text"),
        ]
        old_key = F.filter(B.HEADERS, lambda h: h["key"] == OLD_KEY_HEADER)
        new_key = F.filter(B.HEADERS, lambda h: h["key"] == NEW_KEY_HEADER)
        fields = T.row_fields(row)
        self._project = [
            _canonical_key(F.col(B.KEY_JSON)).alias(M.KEY),
            F.col(B.POSITION).alias(M.POSITION),
            F.col(B.OP).alias(M.OP),
            F.col(B.SOURCE_TS_MS).alias(M.SOURCE_TS),
            F.col(B.TX_ID).alias(M.TX_ID),
            F.concat_ws("#", B.AGENT_ID, F.col(B.BATCH_SEQ).cast("string")).alias(M.BRONZE_BATCH),
            T.unavailable_flags(F.col("__image"), row).alias(M.UNAVAILABLE),
            F.when(F.size(old_key) > 0, _canonical_key(old_key[0]["value"])).alias(M.OLD_KEY),
            F.when(F.size(new_key) > 0, _canonical_key(new_key[0]["value"])).alias(M.NEXT_KEY),
            F.col(B.ORIGIN).alias(M.ORIGIN),
            *T.decode_row(F.col("__image"), row),
            F.col("__image").isNull().alias("__no_image"),
            *[T.field_text(F.col("__text"), f).alias(f"__text_{i}") for i, f in enumerate(fields)],
        ]
        self._reason = _refusal_reason(T.row_schema(row).fields).alias(_REASON)
        self._finish: list[Column] | None = None

    def decode(self, events: DataFrame) -> DataFrame:
        """``events`` (bronze rows of this schema) decoded, with ``__reason``."""
        frame = events.select("*", *self._parse).select("*", *self._pick).select(*self._project)
        if self._finish is None:  # the projection's names, known once it is analyzed
            self._finish = [
                *[
                    F.col(quote_identifier(c))
                    for c in frame.columns
                    if c != "__no_image" and not c.startswith("__text_")
                ],
                self._reason,
            ]
        return frame.select(*self._finish)


def _report_row(part: _Part, change: E.ColumnChange, action: str) -> tuple[Any, ...]:
    return (
        part.schema_id,
        part.first,
        change.column,
        change.old,
        change.new,
        change.kind,
        action,
    )


def _union(frames: list[DataFrame]) -> DataFrame | None:
    if not frames:
        return None
    out = frames[0]
    for frame in frames[1:]:
        out = out.unionByName(frame, allowMissingColumns=True)
    return out


_TXN_CONF_PREFIX = "spark.databricks.delta.write.txn"


def _worker_session(spark: SparkSession) -> SparkSession:
    """A session of the same Spark application for a table worker thread: its own SQL
    configuration (the Delta app transaction of its MERGEs), the parent's runtime settings."""
    worker = spark.newSession()
    for key, value in spark.conf.getAll.items():
        if not key.startswith(_TXN_CONF_PREFIX) and spark.conf.isModifiable(key):
            worker.conf.set(key, value)
    return worker


def silver_table_name(source: str, collection: str) -> str:
    """``<source>__<schema>__<table>``, restricted to the characters Spark table names allow.

    A plain part (letters, digits, single underscores, at most :data:`_PLAIN_PART_MAX`
    characters) is kept as it is; any other part is replaced, shortened, and followed by a hash
    of its original text, so two tables never share a silver table (``a b`` and ``a_b``,
    ``a\nb`` and ``a\x00b``) and a name of any length fits a directory name.
    """
    parts = [source, *collection.split(".")]
    return "__".join(_name_part(p) for p in parts)


_PLAIN_PART_MAX = 64


def _name_part(part: str) -> str:
    if part and len(part) <= _PLAIN_PART_MAX and not _UNSAFE.search(part) and "__" not in part:
        return part
    digest = hashlib.sha256(part.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{_UNSAFE.sub('_', part)[:40].strip('_')}_{digest}"


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
        read: Data events read (released by their transaction); each is either applied or
            quarantined: ``read == applied + quarantined``.
        applied: Data events applied (merged, truncates included; a no-op replay counts).
        quarantined_values: ``kind = 'value'`` quarantine rows: values applied as NULL.
    """

    batches: int = 0
    events: int = 0
    merged: dict[str, list[M.MergeResult]] = field(default_factory=dict)
    quarantined: int = 0
    messages: int = 0
    ignored: int = 0
    purged: int = 0
    tx_timed_out: int = 0
    read: int = 0
    applied: int = 0
    quarantined_values: int = 0

    def add(self, other: SilverRunResult) -> None:
        """Add what ``other`` counted (one table's share of a micro-batch) to this result."""
        for name, results in other.merged.items():
            self.merged.setdefault(name, []).extend(results)
        for f in fields(self):
            if f.name != "merged":
                setattr(self, f.name, getattr(self, f.name) + getattr(other, f.name))


class SilverJob:
    """Applies bronze to silver for every source in a lake.

    Args:
        spark: The session (with Delta).
        lake_root: The lake root (``bronze/`` and ``silver/`` under it).
        tombstone_retention_hours: Purge tombstone rows older than this after each run; None
            keeps them.
        transaction_timeout_seconds: How long a transaction waits in ``silver/_pending`` for
            its END record before it is applied as far as it arrived.
        table_options: Options of a silver table by source and collection (schema-evolution
            policy, history); :meth:`pipeline.config.SilverConfig.table` in the pipeline.
        after_batch: Called with the micro-batch id after each micro-batch has committed
            (gold refresh in ``run --continuous``).
        parallelism: Tables of one micro-batch applied at the same time (each in its own
            thread and Spark session; Spark runs their jobs concurrently). 1 applies them one
            after the other.
        compact_interval_seconds: ``run_continuous`` compacts each table it changed at most
            this often (:func:`silver.merge.compact`, between micro-batches); None never.
        compact_min_files: Small files a table needs before it is compacted.
        compact_zorder: Compact with ``ZORDER BY (_cdc_key_order)`` rather than bin-packing.
        compact_file_bytes: Size of the files a compaction writes.
    """

    def __init__(
        self,
        spark: SparkSession,
        lake_root: LakePath,
        *,
        tombstone_retention_hours: float | None = None,
        transaction_timeout_seconds: float = 300.0,
        table_options: Callable[[str, str], TableOptions] | None = None,
        after_batch: Callable[[int], None] | None = None,
        parallelism: int = 4,
        compact_interval_seconds: float | None = None,
        compact_min_files: int = 64,
        compact_zorder: bool = True,
        compact_file_bytes: int = M.COMPACT_FILE_BYTES,
    ) -> None:
        self._spark = spark
        self._local = threading.local()
        self.parallelism = max(1, parallelism)
        self._pool: ThreadPoolExecutor | None = None
        self.root = lake_path(lake_root)
        self.bronze = self.root / "bronze" / "events"
        self.silver = self.root / "silver"
        self.checkpoint = self.silver / "_checkpoints" / "bronze_events"
        self._result = SilverRunResult()
        self._cut_rows: list[tuple[Any, ...]] = []
        self._lock_cuts = threading.Lock()
        self._shared_writes = threading.Lock()
        """Held around appends to side tables every table may write (the first append of
        concurrent ones would race to create the table)."""
        self.retention = tombstone_retention_hours
        self.transaction_timeout = transaction_timeout_seconds
        self.pending = self.silver / "_pending"
        self._schemas: dict[str, dict[str, Any]] = {}
        self._decoders: dict[str, _Decoder] = {}
        self._driver = DriverDecoders()
        """A collected micro-batch's data rows, while its tables apply (decoded on the driver)."""
        self.table_options = table_options or (lambda _source, _collection: TableOptions())
        self._failure: BaseException | None = None
        """What failed a micro-batch: re-raised by the run instead of Spark's wrapper."""
        self._tick_seconds = 10.0
        self._batch_id = 0
        self._purge_every: float | None = None
        self._purged_at: dict[str, float] = {}
        self.compact_interval = compact_interval_seconds
        self.compact_min_files = compact_min_files
        self.compact_zorder = compact_zorder
        self.compact_file_bytes = compact_file_bytes
        self._compacted_at: dict[str, float] = {}
        self.after_batch = after_batch
        self._ledger = TX.BatchLedger(self.silver / "_batches")
        self._clock = dt.datetime.now(dt.UTC)
        self._lock = threading.Lock()  # a release tick and a Spark micro-batch never overlap
        self._timings = BatchTimings(0)
        self._ended: float | None = None
        """When the last micro-batch ended (monotonic): the next one's line says how long
        Spark took to start it (``between``: its trigger, the offsets, the batch ledger)."""

    @property
    def spark(self) -> SparkSession:
        """The session of the calling thread: the job's own, or a table worker's (see
        :meth:`_apply_tables`)."""
        return getattr(self._local, "spark", None) or self._spark

    @property
    def result(self) -> SilverRunResult:
        """What the run applied; in a table worker, that table's share, added to the run's
        when the micro-batch's tables are done."""
        return getattr(self._local, "result", None) or self._result

    # --- driving ----------------------------------------------------------------------------
    def run_once(self) -> SilverRunResult:
        """Process everything in bronze not yet applied, then stop."""
        self._run({"availableNow": True})
        try:
            self.release_expired()
        finally:
            self.close()
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

    def run_continuous(self, interval_seconds: float = 1.0) -> None:
        """Keep applying new bronze rows every ``interval_seconds`` until stopped.

        A micro-batch longer than the interval starts the next one at once; a shorter one
        waits for the interval's next boundary, which every row it did not see waits too: the
        default of 1 s keeps that wait under the micro-batch's own seconds.

        Tombstone rows past the retention are purged after each micro-batch that touched their
        table, at most once an hour per table.
        """
        self._purge_every = 3600.0
        self._tick_seconds = interval_seconds
        self._run({"processingTime": f"{interval_seconds} seconds"})

    def _run(self, trigger: dict[str, Any]) -> None:
        from pyspark.errors import StreamingQueryException

        self._finish_interrupted_release()  # before new rows could release more than it did
        query = (
            self.spark.readStream.format("delta")
            .load(str(self.bronze))
            .writeStream.foreachBatch(self._process)
            .option("checkpointLocation", str(self.checkpoint))
            .trigger(**trigger)
            .start()
        )
        try:
            # Between micro-batches (none come while bronze is quiet) the clock still
            # releases transactions past their timeout.
            tick = max(1, math.ceil(self._tick_seconds))  # whole seconds, as Spark types it
            logged = -1
            try:
                while "processingTime" in trigger and not query.awaitTermination(tick):
                    logged = _log_triggers(query, logged)
                    self.release_expired()
            except Exception:
                query.stop()  # a failed release must not leave the stream running alone
                raise
            query.awaitTermination()
            if self._failure is not None:
                raise self._failure
        except StreamingQueryException:
            # Spark reports a foreachBatch failure as its own exception with our message in
            # text; the medallion error (with its terminal/retryable marker) is re-raised.
            if self._failure is not None:
                raise self._failure from None
            raise
        finally:
            self.close()

    # --- one micro-batch --------------------------------------------------------------------
    def _process(self, micro_batch: DataFrame, spark_batch: int) -> None:
        try:
            with self._lock:
                batch = self._ledger.for_spark_batch(spark_batch, dt.datetime.now(dt.UTC))
                self._process_silver_batch(micro_batch, batch, streamed=True)
        except Exception as exc:
            interruption = _interruption(exc)
            if interruption is None and self._failure is None:
                self._failure = exc
            raise _for_spark(exc, interruption) from None

    def release_expired(self) -> bool:
        """Apply the transactions in ``silver/_pending`` whose timeout has passed, now.

        Spark runs no micro-batch while bronze is quiet, so ``run --once`` and every
        ``--continuous`` tick call this: a silver batch without new bronze rows
        (:mod:`silver.transactions`).

        Returns:
            Whether a release batch ran.
        """
        with self._lock:
            now = dt.datetime.now(dt.UTC)
            if not TX.release_due(self.pending, now=now, timeout_seconds=self.transaction_timeout):
                return False
            self._release(self._ledger.new_release(now))
            return True

    def _finish_interrupted_release(self) -> None:
        """Run again, with its own clock, a release batch a crash interrupted: it releases
        exactly what it released the first time, and its committed writes are skipped."""
        with self._lock:
            unfinished = TX.unfinished_release(self._ledger, self.pending)
            if unfinished is not None:
                self._release(unfinished)

    def _release(self, batch: TX.SilverBatch) -> None:
        logger.info("silver: release batch %s at %s", batch.id, batch.clock.isoformat())
        nothing = self.spark.read.format("delta").load(str(self.pending)).limit(0)
        self._process_silver_batch(nothing, batch)

    def _process_silver_batch(
        self, micro_batch: DataFrame, batch: TX.SilverBatch, *, streamed: bool = False
    ) -> None:
        batch_id = batch.id
        self._clock = batch.clock
        timings = self._timings = BatchTimings(batch_id, spark=self._spark)
        if streamed and self._ended is not None:
            # Bronze rows that arrived meanwhile wait this long, plus the interval when idle.
            timings.add("between", time.monotonic() - self._ended)
        timings.activate()
        try:
            self._process_timed_batch(micro_batch, batch_id, timings)
        finally:
            timings.deactivate()
            self._ended = time.monotonic()

    def _process_timed_batch(
        self, micro_batch: DataFrame, batch_id: int, timings: BatchTimings
    ) -> None:
        jobs_before = spark_jobs_started(self._spark)
        read_before = self._result.read
        try:
            self._process_batch(micro_batch, batch_id)
        except PipelineError as exc:
            self._failure = exc
            raise
        if self._purge_every is not None:
            with timings.stage("purge"):
                self._purge_due()
            with timings.stage("compact"):
                self._compact_due()
        if self.after_batch is not None:
            try:
                with timings.stage("gold"):
                    self.after_batch(batch_id)
            except PipelineError as exc:
                self._failure = exc
                raise
        jobs_after = spark_jobs_started(self._spark)
        if jobs_before is not None and jobs_after is not None:
            timings.jobs = jobs_after - jobs_before
        logger.info("%s", timings.describe(self._result.read - read_before))
        metrics.on_silver_batch(timings, self._result)

    def _purge_due(self) -> None:
        now = dt.datetime.now(dt.UTC).timestamp()
        for name in list(self.result.merged):
            if now - self._purged_at.get(name, 0.0) >= (self._purge_every or 0.0):
                self._purged_at[name] = now
                if self.retention is not None:
                    self.result.purged += M.purge_tombstones(
                        self.spark, str(self.silver / name), older_than_hours=self.retention
                    )

    def _compact_due(self) -> None:
        """Compact the small files of the tables this run changed, each at most once per
        ``compact_interval`` (continuous mode; the first time one interval after the start).

        It runs here, on the micro-batch thread after the micro-batch committed, so it never
        overlaps a MERGE of the same table (which would fail on the files it removes).
        """
        if self.compact_interval is None:
            return
        now = dt.datetime.now(dt.UTC).timestamp()
        for name in list(self.result.merged):
            since = self._compacted_at.setdefault(name, now)
            if now - since >= self.compact_interval:
                self._compacted_at[name] = now
                M.compact(
                    self.spark,
                    str(self.silver / name),
                    min_files=self.compact_min_files,
                    zorder=self.compact_zorder,
                    file_bytes=self.compact_file_bytes,
                )

    # --- one micro-batch --------------------------------------------------------------------
    def _process_batch(self, micro_batch: DataFrame, batch_id: int) -> None:
        """Split the micro-batch by transaction and apply what is ready.

        A small micro-batch (the continuous pipeline's usual one) is collected to the driver
        with one Spark job and split there (:mod:`silver.collected_split`): the Spark plan of
        the split is about twenty jobs whatever the micro-batch holds. A larger one (a
        snapshot) is split by Spark (:func:`silver.transactions.split_complete`).
        """
        self._batch_id = batch_id
        with self._timings.stage("split"):
            rows = self._collect_small(micro_batch)
            if rows is not None:
                split = split_collected(
                    rows, now=self._clock, timeout_seconds=self.transaction_timeout
                )
        if rows is None:
            self._process_in_spark(micro_batch, batch_id)
            return
        self._apply_collected(split, micro_batch.schema, batch_id)

    def _collect_small(self, micro_batch: DataFrame) -> pa.Table | None:
        """The micro-batch's rows and those of ``silver/_pending``, on the driver, when their
        files hold at most :data:`_COLLECT_BYTES` (by the plan's statistics and the log: no
        job to decide); None otherwise."""
        from deltalake.exceptions import TableNotFoundError

        size = estimated_bytes(micro_batch)
        if size is None or size > _COLLECT_BYTES:
            return None
        try:
            pending = open_delta(self.pending)
        except TableNotFoundError:
            pending = None
        if pending is not None:
            files = pending.get_add_actions(flatten=True)
            size += sum(pa.table(files).column("size_bytes").to_pylist())
            if size > _COLLECT_BYTES:
                return None
        rows = micro_batch.toArrow()
        if pending is None:
            return rows
        waiting = pending.to_pyarrow_table()
        return pa.concat_tables([rows, waiting.select(rows.schema.names).cast(rows.schema)])

    def _apply_collected(self, split: CollectedSplit, schema: StructType, batch_id: int) -> None:
        """The rest of a collected micro-batch: what :meth:`_process_in_spark` does after its
        split, with the summary and the waiting rows' positions read on the driver."""
        timed = self._timings.stage
        self.result.tx_timed_out += split.timed_out
        self.result.batches += 1
        ready = split.ready
        with timed("summary"):
            summary = _BatchSummary.of_rows(ready)
        self.result.ignored += sum(
            n for kind, n in summary.counts.items() if kind not in ("data", "message")
        )
        kinds = ready.column(B.KIND)
        if summary.counts.get("message"):
            with timed("messages"):
                messages = ready.filter(pc.fill_null(pc.equal(kinds, "message"), False))
                self._append_messages(self.spark.createDataFrame(messages, schema))
        with timed("waiting"):
            first_waiting = _first_waiting_rows(split.waiting) if split.held else {}
        self.result.read += summary.counts.get("data", 0)
        data = ready.filter(pc.fill_null(pc.equal(kinds, "data"), False))

        # One DataFrame of the data rows, cached, as the Spark path's batch: a DataFrame made
        # per table from its rows doubled the tables' time (test_silver_concurrent).
        # Arrow cannot hand Spark a table without rows (then no table is applied anyway).
        rows_or_none: Any = data if data.num_rows else []
        frame = self.spark.createDataFrame(rows_or_none, schema).cache()
        # Every table's screen from the rows held here: a Spark job per table saved.
        with timed("screen"):
            screens = screen_collected(
                data,
                known_ops=_KNOWN_OPS,
                document_connectors=D.DOCUMENT_CONNECTORS,
                unrepresentable_header=HEADER_UNREPRESENTABLE,
            )

        def events_of(source: str, collection: str | None) -> Callable[[], DataFrame]:
            mine = frame.where(
                (F.col(B.SOURCE) == source) & F.col(B.COLLECTION).eqNullSafe(F.lit(collection))
            )
            return lambda: mine

        def bronze_of(source: str, collection: str | None) -> pa.Table:
            return _table_rows(data, source, collection)

        try:
            with (
                timed("tables"),
                small_input_plans(frame.sparkSession, summary.counts.get("data", 0)),
            ):
                self._apply_tables(events_of, summary, batch_id, first_waiting, screens, bronze_of)
        finally:
            frame.unpersist()
        with timed("cuts"):
            self._write_cuts()
        with timed("progress"):
            self._record_progress(summary, first_waiting, batch_id)
        # Last, so that a replay of this micro-batch still sees the rows it applies.
        with timed("pending"):
            self._write_pending_rows(split.waiting, schema, batch_id)

    def _process_in_spark(self, micro_batch: DataFrame, batch_id: int) -> None:
        """:meth:`_process_batch` of a micro-batch too large to collect: split by Spark."""
        from silver.transactions import split_complete

        timed = self._timings.stage
        columns = micro_batch.columns
        rows = micro_batch
        with timed("split"):
            if M.stored_schema(str(self.pending)) is not None:  # the log, not a Spark snapshot
                rows = rows.unionByName(self.spark.read.format("delta").load(str(self.pending)))
            split = split_complete(rows, now=self._clock, timeout_seconds=self.transaction_timeout)
            self.result.tx_timed_out += split.timed_out
            # Nothing held (the usual case): no job to checkpoint an empty frame.
            waiting = split.waiting.select(*columns)
            if split.held:
                waiting = waiting.localCheckpoint()
            batch = split.ready.select(*columns).cache()
        try:
            self.result.batches += 1
            with timed("summary"):
                summary = _BatchSummary.of(batch)
            self.result.ignored += sum(
                n for kind, n in summary.counts.items() if kind not in ("data", "message")
            )
            if summary.counts.get("message"):
                with timed("messages"):
                    self._append_messages(batch.where(F.col(B.KIND) == "message"))
            data = batch.where(F.col(B.KIND) == "data")
            # Where each source's waiting data starts, for its cuts and its progress row; an
            # empty split (nothing held) needs no job to say so.
            with timed("waiting"):
                first_waiting = _first_waiting(waiting) if split.held else {}
            self.result.read += summary.counts.get("data", 0)

            def events_of(source: str, collection: str | None) -> Callable[[], DataFrame]:
                mine = data.where(
                    (F.col(B.SOURCE) == source) & F.col(B.COLLECTION).eqNullSafe(F.lit(collection))
                )
                return lambda: mine

            # The tables' queries over the micro-batch's rows are planned in its session (a
            # table worker's own session plans the MERGE): both without AQE when small.
            with (
                timed("tables"),
                small_input_plans(batch.sparkSession, summary.counts.get("data", 0)),
            ):
                self._apply_tables(events_of, summary, batch_id, first_waiting)
            with timed("cuts"):
                self._write_cuts()
            with timed("progress"):
                self._record_progress(summary, first_waiting, batch_id)
            # Last, so that a replay of this micro-batch still sees the rows it applies.
            with timed("pending"):
                self._write_pending(waiting, split.held_rows, batch_id)
        finally:
            batch.unpersist()

    def _apply_tables(
        self,
        events_of: Callable[[str, str | None], Callable[[], DataFrame]],
        summary: _BatchSummary,
        batch_id: int,
        first_waiting: Mapping[str, bytes],
        screens: Mapping[tuple[str, str | None], Screen] | None = None,
        bronze_of: Callable[[str, str | None], pa.Table] | None = None,
    ) -> None:
        """Apply every table of the micro-batch, up to :attr:`parallelism` at a time.

        Each table is applied by one worker thread with its own Spark session: a session's
        Delta app transaction (``txnAppId``/``txnVersion``) is session state, so two tables'
        MERGEs must not share one. Tables are independent (their own Delta table, app id and
        ``_cuts`` row); the side tables they append to take concurrent blind appends. The
        micro-batch fails, after every table has finished, when one table failed.

        ``screens``: each table's screen, when the micro-batch is collected on the driver
        (:mod:`silver.collected_screen`); the tables then decode on the driver too, and
        ``bronze_of`` gives a table's bronze rows held there (what its parts are decoded from).
        """
        work = [
            (
                events_of(source, collection),
                source,
                collection,
                batch_id,
                first_waiting.get(source),
                summary.table_rows.get((source, collection), 0),
                None if screens is None else screens.get((source, collection), []),
                None if bronze_of is None else bronze_of(source, collection),
            )
            for source, collection in summary.tables
        ]
        if self.parallelism == 1 or len(work) < 2:
            for args in work:
                self._apply_planned(*args)
            return
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self.parallelism, thread_name_prefix="silver-apply")
        futures = [self._pool.submit(self._apply_in_worker, *args) for args in work]
        failure: BaseException | None = None
        for future in futures:  # table order: the run's counters read as a sequential run's
            try:
                self._result.add(future.result())
            except BaseException as exc:  # noqa: BLE001 - re-raised once all tables are done
                failure = failure or exc
        if failure is not None:
            raise failure

    def _apply_in_worker(
        self,
        events: Callable[[], DataFrame],
        source: str,
        collection: str | None,
        batch_id: int,
        waiting_from: bytes | None,
        rows: int,
        screen: Screen | None = None,
        bronze: pa.Table | None = None,
    ) -> SilverRunResult:
        """:meth:`_apply_planned` in a pool thread; returns the table's counts."""
        local = self._local
        if getattr(local, "spark", None) is None:
            local.spark = _worker_session(self._spark)
        local.result = SilverRunResult()
        try:
            self._apply_planned(
                events, source, collection, batch_id, waiting_from, rows, screen, bronze
            )
            share: SilverRunResult = local.result
            return share
        finally:
            local.result = None

    def _apply_planned(
        self,
        events: Callable[[], DataFrame],
        source: str,
        collection: str | None,
        batch_id: int,
        waiting_from: bytes | None,
        rows: int,
        screen: Screen | None = None,
        bronze: pa.Table | None = None,
    ) -> None:
        """:meth:`_apply_table_or_quarantine` with the plans its size calls for.

        A table's share of a small micro-batch (the continuous pipeline's usual case) is
        planned without adaptive execution (:mod:`silver.plans`): on a few hundred rows AQE's
        job per shuffle stage is most of a MERGE's cost. A snapshot share keeps the session's
        settings.
        """
        with small_input_plans(self.spark, rows):
            self._apply_table_or_quarantine(
                events(), source, collection, batch_id, waiting_from, screen, bronze
            )

    def close(self) -> None:
        """Stop the table workers (a later micro-batch starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def _apply_table_or_quarantine(
        self,
        events: DataFrame,
        source: str,
        collection: str | None,
        batch_id: int,
        waiting_from: bytes | None,
        screen: Screen | None = None,
        bronze: pa.Table | None = None,
    ) -> None:
        """Apply one table's events; when that fails on what the events hold, quarantine them.

        C5: an event silver cannot decode, conform or apply never stops the micro-batch. The
        per-event checks (:meth:`_decode`, :meth:`_conform`, the MERGE's refusals) catch the
        known cases; this is the net for the rest (a decoder failing at run time for one
        table): the table's events of this micro-batch are quarantined one by one with the
        error, and the other tables go on. Infrastructure failures (storage, the Spark
        driver) and the ``fail`` schema policy still fail the micro-batch, which is retried.
        """
        if collection is None:
            unnamed = F.lit("data event without a table name (bronze named no collection)")
            self._quarantine(_refusals(events, unnamed), source, "", "_unnamed", version=batch_id)
            return
        try:
            with self._timings.jobs_of("table other", collection):
                self._apply_table(
                    events, source, collection, batch_id, waiting_from, screen, bronze
                )
        except PipelineError:
            raise
        except _DATA_ERRORS as exc:
            name = silver_table_name(source, collection)
            logger.exception("silver %s: the micro-batch's events are quarantined", name)
            reason = f"silver could not apply the events of {source} {collection}: {_describe(exc)}"
            self._quarantine(
                _refusals(events, F.lit(reason)),
                source,
                collection,
                name,
                version=batch_id,
                kind="failed",
            )

    def _apply_table(
        self,
        events: DataFrame,
        source: str,
        collection: str,
        batch_id: int,
        waiting_from: bytes | None,
        screen: Screen | None = None,
        bronze: pa.Table | None = None,
    ) -> None:
        """Apply one table's events of the micro-batch (``waiting_from``: where its source's
        data still waiting for a transaction starts, for the cut; ``screen``: the events'
        screen when the micro-batch was collected, which also makes each schema's events
        decode on the driver, see :meth:`_decode`, from ``bronze``, the table's rows held
        there; then the changes take the Arrow road to the MERGE when they can,
        :func:`silver.merge.apply_arrow_changes`)."""
        name = silver_table_name(source, collection)
        path = str(self.silver / name)
        app_id = f"medallion-silver:{name}"
        options = self.table_options(source, collection)
        known = F.coalesce(F.col(B.OP).isin(*_KNOWN_OPS), F.lit(False))
        row_ops = F.col(B.OP).isin("c", "u", "d", "r")
        # One screen of the table's events answers everything below (per schema: the parts to
        # decode); each check used to be a job of its own, in every micro-batch. A collected
        # micro-batch was screened on the driver, with no job.
        per_schema: list[Any]
        if screen is not None:
            per_schema = screen
        else:
            with self._timings.stage("screen", name):
                per_schema = _screen_in_spark(events)
        stats = {
            k: sum(r[k] for r in per_schema)
            for k in ("unknown", "known", "unrepresentable", "keyless", "documents")
        }
        known_positions = [
            (bytes(r["oldest"]), bytes(r["top"])) for r in per_schema if r["top"] is not None
        ]
        # Of the events applied (known ops): the oldest (defaults) and the newest (the cut).
        oldest = min((p[0] for p in known_positions), default=None)
        top = max((p[1] for p in known_positions), default=None)
        # The schemas of the row events, in the order of their first event.
        schema_ids = sorted(
            (
                (r[B.VALUE_SCHEMA_ID], bytes(r["first"]))
                for r in per_schema
                if r["first"] is not None
            ),
            key=lambda p: p[1],
        )
        if stats["unknown"]:
            op = F.coalesce(F.col(B.OP), F.lit("null"))
            unknown = _refusals(
                events.where(~known), F.concat(F.lit("unknown op '"), op, F.lit("'"))
            )
            self._quarantine(unknown, source, collection, name, version=batch_id, kind="ops")
            events = events.where(known)
        if stats["documents"]:  # MongoDB: documents, not rows (silver/documents.py)
            quarantined = self.result.quarantined
            D.apply_documents(self, events, source, collection, batch_id, _STEPS_PER_BATCH)
            self.result.applied += stats["known"] - (self.result.quarantined - quarantined)
            self._record_cut(name, source, collection, batch_id, top, waiting_from)
            return
        if stats["unrepresentable"]:  # C1: the row applies with NULL, each value is reported
            self.result.quarantined_values += Q.write(
                self.spark,
                self.silver,
                Q.unrepresentable_values(events.where(row_ops)),
                source=source,
                collection=collection,
                app_id=f"medallion-silver:_quarantine_values:{name}",
                version=batch_id,
                batch_id=batch_id,
            )
        truncated_at = {bytes(t[0]): t[1] for r in per_schema for t in r["truncates"]}
        truncates = sorted(truncated_at)
        on_driver = screen is not None
        with self._timings.stage("decode", name):
            parts, undecoded = self._decode(
                events.where(row_ops),
                schema_ids,
                table=path,
                on_driver=on_driver,
                bronze=None if bronze is None else _row_events(bronze),
            )
            found, data_columns, refused = self._conform(
                path, parts, options.schema_evolution, name=name, batch_id=batch_id
            )
        refused = _union([r for r in (undecoded, refused) if r is not None])
        spark = self.spark
        changes = found or _Changes(
            _once(lambda: spark.createDataFrame([], _EMPTY_CHANGES)),
            _NO_CHANGES if on_driver else None,
            None,
        )
        if options.history and changes.rows is not None:
            changes = _Changes(changes.build, why_spark="a history table (SCD2)")
        if stats["keyless"] and found is not None:
            # A row without a key cannot be matched to the row it changes (R10 of
            # tests/pgmodel/reference.py): quarantined with the reason, never merged under a
            # null key.
            keyless = changes.where(F.col(M.KEY).isNull(), lambda t: pc.is_null(t[M.KEY]))
            changes = changes.where(F.col(M.KEY).isNotNull(), lambda t: pc.is_valid(t[M.KEY]))
            refused = _union(
                [
                    *([refused] if refused is not None else []),
                    keyless.frame.withColumn(_REASON, F.lit(_KEYLESS)).select(*_QUARANTINE_COLUMNS),
                ]
            )
        step = 0
        if refused is not None:
            self._quarantine(
                refused, source, collection, name, version=2 * batch_id * _STEPS_PER_BATCH
            )
        bounds: list[bytes | None] = [*truncates, None]
        lower: bytes | None = None
        for upper in bounds:
            segment = _segment(changes, lower, upper)
            # Refused events reach the quarantine before the MERGE commits: a crash between
            # the two cannot lose them (the replayed MERGE is skipped, its refusals too).
            version = batch_id * _STEPS_PER_BATCH + step
            on_rejected = functools.partial(
                self._quarantine,
                source=source,
                collection=collection,
                name=name,
                version=2 * version + 1,
            )
            with self._timings.stage("merge", name):
                if segment.rows is not None:
                    result = M.apply_arrow_changes(
                        self.spark,
                        path,
                        segment.rows,
                        segment.schema or StructType([]),
                        data_columns,
                        frame=segment.build,
                        txn_app_id=app_id,
                        txn_version=version,
                        on_rejected=on_rejected,
                        driver=options.merge_driver,
                    )
                else:
                    result = M.apply_changes(
                        self.spark,
                        path,
                        segment.frame,
                        data_columns,
                        txn_app_id=app_id,
                        txn_version=version,
                        on_rejected=on_rejected,
                        events_hint=stats["known"],  # the table's events: no segment holds more
                        driver=options.merge_driver,
                    )
                    if segment.why_spark is not None:
                        result = dataclasses.replace(result, arrow_reason=segment.why_spark)
            if result.arrow_reason is not None:
                logger.debug("silver %s: the Spark road: %s", name, result.arrow_reason)
            if options.history:
                S.apply_history(
                    self.spark,
                    S.history_path(path),
                    segment.frame,
                    data_columns,
                    txn_app_id=f"{app_id}__history",
                    txn_version=batch_id * _STEPS_PER_BATCH + step,
                )
            step += 1
            self.result.events += result.events
            self.result.applied += result.events - result.rejected_count
            self.result.merged.setdefault(name, []).append(result)
            if upper is not None:
                M.apply_truncate(
                    self.spark,
                    path,
                    upper,
                    txn_app_id=app_id,
                    txn_version=batch_id * _STEPS_PER_BATCH + step,
                )
                self.result.applied += 1
                if options.history:
                    S.truncate_history(
                        self.spark,
                        S.history_path(path),
                        upper,
                        truncated_at[upper],
                        txn_app_id=f"{app_id}__history",
                        txn_version=batch_id * _STEPS_PER_BATCH + step,
                    )
                step += 1
            lower = upper
        with self._timings.stage("defaults", name):
            self._fill_defaults(path, source, collection, name, options.history, oldest)
        with self._timings.stage("cut", name):
            self._record_cut(name, source, collection, batch_id, top, waiting_from)

    def _fill_defaults(
        self,
        path: str,
        source: str,
        collection: str,
        name: str,
        history: bool,
        oldest: bytes | None,
    ) -> None:
        """Rows older than an added column get its default, or the table is recorded as
        needing a re-snapshot (:mod:`silver.defaults`, :mod:`silver.resnapshot`).

        ``oldest`` is the oldest position among the table's events of the micro-batch.
        """
        from silver.resnapshot import record_unreproducible

        if M.stored_schema(path) is None or not DF.pending_defaults(path):
            return
        DF.fill_defaults(
            self.spark,
            path,
            history=S.history_path(path) if history else None,
            oldest=oldest,
            on_unreproducible=functools.partial(
                self._locked,
                record_unreproducible,
                self.spark,
                self.silver,
                source=source,
                collection=collection,
                silver_table=name,
                silver_batch=self._batch_id,
            ),
        )

    def _locked(self, write: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """``write(*args, **kwargs)`` under the side-table lock."""
        with self._shared_writes:
            return write(*args, **kwargs)

    # --- decoding ---------------------------------------------------------------------------
    def _decode(
        self,
        events: DataFrame,
        schema_ids: list[tuple[str | None, bytes]] | None = None,
        *,
        table: str | None = None,
        on_driver: bool = False,
        bronze: pa.Table | None = None,
    ) -> tuple[list[_Part], DataFrame | None]:
        """Decode every event with its own schema: one part per schema, in source order.

        Args:
            events: The row events of one table.
            schema_ids: Their value schema ids with the position of each one's first event,
                in that order, when the caller knows them already (else a job finds them).
            table: The silver table's path: schema-less events are inferred against its types.
            on_driver: The events are a collected micro-batch's: each part is decoded to
                the driver (:meth:`_decoded_rows`), so what it refuses is known without a job
                of its own, and its accepted rows stay there (:attr:`_Part.rows`).
            bronze: The same events as bronze rows held on the driver (with ``on_driver``),
                what :meth:`_decoded_rows` gets each part's from: a part whose schema and
                values :mod:`silver.driver_decode` decodes exactly needs no Spark job.

        Returns:
            The parts, and the events refused (with ``__reason``): those whose schema cannot be
            read or decoded, whose image is missing or malformed, or with a value that does not
            decode (a non-null JSON value that would become NULL).
        """
        ids = (
            schema_ids
            if schema_ids is not None
            else [
                (r[0], bytes(r[1]))
                for r in events.groupBy(B.VALUE_SCHEMA_ID)
                .agg(F.min(B.POSITION).alias("first"))
                .orderBy("first")
                .collect()
            ]
        )
        parts: list[_Part] = []
        refused: list[DataFrame] = []
        for schema_id, first in ids:
            subset = events.where(
                F.col(B.VALUE_SCHEMA_ID).isNull()
                if schema_id is None
                else F.col(B.VALUE_SCHEMA_ID) == schema_id
            )
            mine = _schema_rows(bronze, schema_id)
            known = self._driver.verified(schema_id) if on_driver else None
            # A schema decoded on the driver before: no Spark plan to build.
            arrow = None if known is None else self._driver_rows(schema_id, known, mine, table)
            if known is not None and arrow is not None:
                rows, build, refusals = _decoded_on_driver(self.spark, known, arrow)
                refused += [refusals] if refusals is not None else []
                schema = StructType([f for f in known.fields if f.name != _REASON])
                data = StructType([f for f in schema.fields if f.name not in _DECODED_METADATA])
                parts.append(_Part(schema_id, bytes(first), build, data, schema, rows))
                continue
            try:
                frame = self._decode_part(schema_id, subset, table)
            except _DATA_ERRORS as exc:
                # The schema itself cannot be read or decoded: every event written with it.
                reason = f"cannot decode with value schema {schema_id}: {_describe(exc)}"
                refused.append(_refusals(subset, F.lit(reason)))
                continue
            schema = StructType([f for f in frame.schema.fields if f.name != _REASON])
            data = StructType([f for f in schema.fields if f.name not in _DECODED_METADATA])
            if on_driver and _arrow_convertible(frame.schema):
                untried = mine if known is None else None  # else declined above: Spark's rows
                decoded = self._decoded_rows(schema_id, frame, untried, table)
                rows, build, refusals = _decoded_on_driver(self.spark, frame.schema, decoded)
                refused += [refusals] if refusals is not None else []
                parts.append(_Part(schema_id, bytes(first), build, data, schema, rows))
                continue
            refused.append(frame.where(F.col(_REASON).isNotNull()).select(*_QUARANTINE_COLUMNS))
            accepted = frame.where(F.col(_REASON).isNull()).drop(_REASON)
            parts.append(_Part(schema_id, bytes(first), _kept(accepted), data, schema))
        return parts, _union(refused)

    def _decoded_rows(
        self,
        schema_id: str | None,
        decoded: DataFrame,
        events: pa.Table | None,
        table: str | None = None,
    ) -> pa.Table:
        """The one place a part's decoded rows (with ``__reason``) come to the driver: decoded
        there from its bronze rows (:mod:`silver.driver_decode`), else by Spark's one job.

        Args:
            schema_id: The part's value schema id (its envelope: ``self._schemas``).
            decoded: The part decoded by Spark (:meth:`_decode_part`): one job, its rows.
            events: The part's bronze rows on the driver (None: not held there, or declined).
            table: The silver table's path, for the stage's time.

        Returns:
            Exactly ``decoded.toArrow()``.
        """
        arrow = self._driver_rows(schema_id, decoded.schema, events, table)
        return arrow if arrow is not None else decoded.toArrow()

    def _driver_rows(
        self,
        schema_id: str | None,
        spark_schema: StructType,
        events: pa.Table | None,
        table: str | None,
    ) -> pa.Table | None:
        """A part decoded on the driver as Spark decodes it to ``spark_schema``; None when the
        driver decoder declines its schema or values (then Spark decodes it)."""
        if events is None:
            return None
        started = time.monotonic()
        arrow = self._driver.decode_part(
            self.spark, schema_id, self._schemas.get(schema_id or ""), spark_schema, events
        )
        if arrow is not None and table is not None:
            self._timings.add("driver decode", time.monotonic() - started, _leaf(table))
        return arrow

    def _decode_part(
        self, schema_id: str | None, subset: DataFrame, table: str | None = None
    ) -> DataFrame:
        """The events of one schema decoded, with ``__reason`` set on those refused.

        A schema's decoder (its Spark expressions) is built once per run: building it costs
        hundreds of py4j calls, which were most of a small table's decode in every
        micro-batch. Events without a schema id are decoded with a schema found for them each
        time (registered, or inferred against the table's types: ``table``).
        """
        decoder = self._decoders.get(schema_id) if schema_id is not None else None
        if decoder is None:
            decoder = _Decoder(self._envelope_schema(schema_id, subset, table))
            if schema_id is not None:
                self._decoders[schema_id] = decoder
        return decoder.decode(subset)

    def _conform(
        self,
        path: str,
        parts: list[_Part],
        policy: SchemaEvolutionPolicy,
        *,
        name: str,
        batch_id: int,
    ) -> tuple[_Changes | None, list[str], DataFrame | None]:
        """Evolve the table for the batch's schemas, then cast every part to the table's types.

        When the table exists, nothing of it changes, and every accepted part's rows are on
        the driver with exactly the table's types (a collected micro-batch's steady state),
        the changes are their union on the driver (:func:`_arrow_union`): the Arrow road.
        Otherwise, and always for the DataFrame, the union is Spark's.

        Returns:
            The changes to apply (None when there are none), the data columns in table order,
            and the events refused (schema policy, or a value a cast would damage) with
            ``__reason``.
        """
        table_schema = M.stored_schema(path)
        exists = table_schema is not None
        stored = (
            StructType([f for f in table_schema.fields if f.name not in M.METADATA_COLUMNS])
            if table_schema is not None
            else None
        )
        current: dict[str, DataType] = (
            {f.name: f.dataType for f in stored.fields} if stored is not None else {}
        )
        report: list[tuple[Any, ...]] = []
        refused: dict[int, str] = {}
        rewrite: dict[str, tuple[DataType, list[int]]] = {}
        since = (
            M.position_property(self.spark, path, M.SCHEMA_POSITION_PROPERTY) if exists else None
        )
        newest: bytes | None = None
        for i, part in enumerate(parts):
            if not current and not exists:
                current = {f.name: f.dataType for f in part.row.fields}
                continue
            changes = E.compare(
                StructType([StructField(n, t) for n, t in current.items()]), part.row
            )
            if since is not None and part.first < since:
                # Events written before the table's newest schema change (late, or replayed):
                # their schema is history, not a change. They are cast to the table, value by
                # value; one that does not fit is quarantined by ``conform`` below.
                changes = tuple(c for c in changes if c.kind == E.ADDED)
            elif any(c.kind != E.NARROWER for c in changes):
                newest = part.first
            bad = [c for c in changes if c.kind == E.INCOMPATIBLE]
            if bad and policy is SchemaEvolutionPolicy.FAIL:
                raise SchemaEvolutionError(name, part.schema_id, tuple(c.describe() for c in bad))
            if bad and policy is SchemaEvolutionPolicy.QUARANTINE:
                refused[i] = "schema change refused (schema.evolution: quarantine): " + "; ".join(
                    c.describe() for c in bad
                )
                report += [_report_row(part, c, "quarantined") for c in bad]
                continue
            for c in changes:
                if c.kind == E.NARROWER:
                    continue
                new_type = next(f.dataType for f in part.row.fields if f.name == c.column)
                if c.kind == E.INCOMPATIBLE:
                    rewrite.setdefault(c.column, (new_type, []))[1].append(i)
                current[c.column] = new_type
                if c.kind != E.INCOMPATIBLE:
                    report.append(_report_row(part, c, c.kind))
        rows = [(p.first, _row_schema(self._schemas.get(p.schema_id or "", {}))) for p in parts]
        if exists and stored is not None:
            refused_columns = self._rewrite_columns(path, stored, rewrite, parts, refused, report)
            for column in refused_columns:
                current[column] = stored[column].dataType
            DF.record_added(self.spark, path, DF.added_columns(stored, current, rows))  # C4
            E.widen_and_add(self.spark, path, {f.name: f.dataType for f in stored.fields}, current)
        if report:
            self._record_schema_changes(name, report, batch_id)
        if not exists and parts:
            newest = parts[0].first
        table = StructType([StructField(n, t) for n, t in current.items()])
        columns = list(current)
        kept = [p for i, p in enumerate(parts) if i not in refused]
        changed = (
            bool(rewrite)
            or stored is None
            or current != {f.name: f.dataType for f in stored.fields}
        )
        why_spark = _why_not_arrow(kept, current, exists=exists, changed=changed)
        rejected: list[DataFrame] = []
        for i, part in enumerate(parts):
            if i in refused:
                rejected.append(
                    part.frame.withColumn(_REASON, F.lit(refused[i])).select(*_QUARANTINE_COLUMNS)
                )
        spark = self.spark

        def union() -> DataFrame | None:
            """The accepted parts cast to the table and united, as Spark frames."""
            accepted: list[DataFrame] = []
            for part in kept:
                if all(current.get(f.name) == f.dataType for f in part.row.fields):
                    accepted.append(part.frame)  # nothing to cast: no value can be damaged
                    continue
                frame = E.conform(
                    part.frame, table, [f.name for f in part.row.fields], reason_column=_REASON
                )
                accepted.append(frame.where(F.col(_REASON).isNull()).drop(_REASON))
                rejected.append(
                    frame.where(F.col(_REASON).isNotNull()).select(*_QUARANTINE_COLUMNS)
                )
            applied = _union(accepted)
            if applied is None:
                return None
            # Columns none of these events carry (dropped in the source, or added after them)
            # are NULL in the rows they write.
            missing = [c for c in columns if c not in applied.columns]
            return applied.select(
                *[F.col(quote_identifier(c)) for c in applied.columns],
                *[F.lit(None).cast(current[c]).alias(c) for c in missing],
            )

        accepted: _Changes | None = None
        if why_spark is None and kept:
            arrow, schema = _arrow_union(kept, current)
            accepted = _Changes(_once(lambda: _united(union())), arrow, schema)
        else:
            applied = union()
            if applied is not None:
                if not exists:
                    M.ensure_table(spark, path, applied, columns)
                    # C4: columns later parts of this micro-batch add to the first part's
                    DF.record_added(spark, path, DF.added_columns(parts[0].row, current, rows))
                accepted = _Changes(_kept(applied), why_spark=why_spark)
        if newest is not None and M.stored_schema(path) is not None:
            M.raise_position_property(spark, path, M.SCHEMA_POSITION_PROPERTY, newest)
        return accepted, columns, _union(rejected)

    def _rewrite_columns(
        self,
        path: str,
        stored: StructType,
        rewrite: Mapping[str, tuple[DataType, list[int]]],
        parts: list[_Part],
        refused: dict[int, str],
        report: list[tuple[Any, ...]],
    ) -> list[str]:
        """Rewrite columns to an incompatible new type where every stored value converts.

        Returns:
            The columns left as they were (some stored value would not convert); the parts
            that asked for them are refused.
        """
        kept: list[str] = []
        if not rewrite:
            return kept
        table = self.spark.read.format("delta").load(path)
        target = StructType(
            [
                StructField(f.name, rewrite[f.name][0]) if f.name in rewrite else f
                for f in table.schema.fields
            ]
        )
        checked = E.conform(table, target, list(rewrite), reason_column=_REASON)
        failing = {
            r[0]: r[1]
            for r in checked.where(F.col(_REASON).isNotNull())
            .groupBy(_REASON)
            .agg(F.count("*"))
            .collect()
        }
        doable = [c for c in rewrite if not any(f"column {c} " in reason for reason in failing)]
        for column, (new_type, asked) in rewrite.items():
            old = stored[column].dataType.simpleString()
            change = E.ColumnChange(column, old, new_type.simpleString(), E.INCOMPATIBLE)
            if column in doable:
                report += [_report_row(parts[i], change, "rewritten") for i in asked[:1]]
                continue
            kept.append(column)
            count = sum(n for reason, n in failing.items() if f"column {column} " in reason)
            for i in asked:
                refused[i] = (
                    f"schema change not applied (schema.evolution: evolve): {change.describe()}:"
                    f" {count} stored values do not convert without loss"
                )
                report.append(_report_row(parts[i], change, "quarantined"))
        if doable:
            cast_to = StructType(
                [
                    StructField(f.name, rewrite[f.name][0]) if f.name in doable else f
                    for f in table.schema.fields
                ]
            )
            rewritten = E.conform(table, cast_to, doable, reason_column=_REASON).drop(_REASON)
            (
                rewritten.localCheckpoint()
                .write.format("delta")
                .mode("overwrite")
                .option("overwriteSchema", "true")
                .save(path)
            )
            logger.warning("silver %s: rewrote columns %s to their new types", path, doable)
        return kept

    def _record_schema_changes(
        self, name: str, report: list[tuple[Any, ...]], batch_id: int
    ) -> None:
        frame = self.spark.createDataFrame(
            [(name, *row, batch_id) for row in report],
            "silver_table string, schema_id string, first_position binary, column string, "
            "old_type string, new_type string, kind string, action string, silver_batch long",
        ).withColumn("recorded_at", F.current_timestamp())
        with self._shared_writes:  # tables applied concurrently: one creates the table
            (
                frame.write.format("delta")
                .mode("append")
                .option("txnAppId", f"medallion-silver:_schema_changes:{name}")
                .option("txnVersion", batch_id)
                .save(str(self.silver / "_schema_changes"))
            )
        logger.warning(
            "silver %s: schema changes %s",
            name,
            ", ".join(f"{r[2]} {r[3]} -> {r[4]} ({r[6]})" for r in report),
        )

    def _envelope_schema(
        self, schema_id: str | None, subset: DataFrame, table: str | None = None
    ) -> dict[str, Any]:
        if schema_id is not None:
            if schema_id not in self._schemas:
                registry = self.root / "bronze" / "schemas"
                found = _registered_json(registry, schema_id)
                if found is None:  # no registry table: Spark says why, as it always did
                    found = [
                        r[0]
                        for r in self.spark.read.format("delta")
                        .load(str(registry))
                        .where(F.col(B.SCHEMA_ID) == schema_id)
                        .select(B.SCHEMA_JSON)
                        .collect()
                    ]
                if not found:
                    raise LookupError(f"schema {schema_id} is not in {registry}")
                self._schemas[schema_id] = orjson.loads(found[0])
            return self._schemas[schema_id]
        registered = self._registered_schema(subset)
        if registered is not None:
            return registered
        from silver import types as T

        samples = [
            exact_json.loads(r[0])  # integers beyond 64 bits as ints, not orjson's floats
            for r in subset.select(B.VALUE_JSON).limit(1000).collect()
            if r[0] is not None
        ]
        images = [s.get("after") or s.get("before") or {} for s in samples]
        # The table's types guide the guess: a decimal column stays one (types.infer_row_schema).
        stored = M.stored_schema(table) if table is not None else None
        row = T.infer_row_schema(
            [i for i in images if isinstance(i, dict)],
            {f.name: f.dataType for f in stored.fields} if stored is not None else None,
        )
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
        self,
        rejected: DataFrame,
        source: str,
        collection: str,
        name: str,
        *,
        version: int,
        kind: str = "",
    ) -> None:
        """Append refused events (with ``__reason``) to ``silver/_quarantine``, exactly once.

        ``version`` is the Delta app transaction version of this append for the table (schema
        and decoding refusals ``2 * batch_id * steps``, MERGE refusals ``2 * merge version +
        1``; ``kind`` names a separate writer, e.g. ``ops`` per batch), so a replayed
        micro-batch does not append them twice.
        """
        with self._timings.jobs_of("quarantine", name):
            n = Q.write(
                self.spark,
                self.silver,
                rejected,
                source=source,
                collection=collection,
                app_id=f"medallion-silver:_quarantine{'_' + kind if kind else ''}:{name}",
                version=version,
                batch_id=self._batch_id,
            )
        if n:
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
        top: bytes | None,
        waiting_from: bytes | None,
    ) -> None:
        """One ``silver/_cuts`` row: the table's newest position applied (``top``) and where its
        source's data still waiting for a transaction starts (``waiting_from``).

        The row is kept until :meth:`_write_cuts` appends the micro-batch's rows in one commit
        (after its tables, before its progress row): a commit per table cost a Delta write each.
        """
        from deltalake.exceptions import TableNotFoundError

        try:
            version = open_delta(self.silver / name).version()
        except TableNotFoundError:
            return  # nothing applied yet (every event refused): no cut to record
        with self._lock_cuts:
            self._cut_rows.append((batch_id, source, collection, name, top, waiting_from, version))

    def _write_cuts(self) -> None:
        """Append the ``silver/_cuts`` rows of the micro-batch's tables, in one commit."""
        with self._lock_cuts:
            rows, self._cut_rows = sorted(self._cut_rows, key=lambda r: r[3]), []
        if not rows:
            return
        BK.append_rows(
            self.silver / "_cuts", _CUTS_SCHEMA, rows, app_id=_CUTS_APP_ID, version=self._batch_id
        )
        # A driver MERGE (delta-rs) writes no checksum file: with one, Spark reads the new
        # version's protocol and metadata without a job (the gold view over it, the next
        # micro-batch's reads of the table). About a millisecond per table.
        for row in rows:
            version_checksum(self.silver / row[3], row[6])

    def _write_pending(self, waiting: DataFrame, held_rows: int, batch_id: int) -> None:
        """Rewrite ``silver/_pending`` with the rows still waiting, as the batch's last write.

        Its app transaction version (the batch id) says the batch completed
        (:func:`silver.transactions.unfinished_release`). A few rows go through the driver and
        deltalake (no Spark job); a large held transaction is written by Spark, as before.
        """
        if held_rows > _PENDING_BY_DRIVER:
            (
                waiting.write.format("delta")
                .mode("overwrite")
                .option("txnAppId", TX.PENDING_APP_ID)
                .option("txnVersion", batch_id)
                .save(str(self.pending))
            )
            return
        # The session's time zone is UTC (pipeline.spark); every column nullable, as Spark
        # writes them, so either writer's table takes the other's rows.
        schema = to_arrow_schema(waiting.schema, timezone="UTC")
        schema = pa.schema([f.with_nullable(True) for f in schema])
        rows = waiting.toArrow() if held_rows else schema.empty_table()
        BK.write_once(
            self.pending,
            rows.cast(schema),
            mode="overwrite",
            app_id=TX.PENDING_APP_ID,
            version=batch_id,
        )

    def _write_pending_rows(self, waiting: pa.Table, schema: StructType, batch_id: int) -> None:
        """:meth:`_write_pending` of collected rows (the driver holds them already)."""
        columns = to_arrow_schema(schema, timezone="UTC")
        columns = pa.schema([f.with_nullable(True) for f in columns])
        BK.write_once(
            self.pending,
            waiting.select(columns.names).cast(columns),
            mode="overwrite",
            app_id=TX.PENDING_APP_ID,
            version=batch_id,
        )

    def _record_progress(
        self, summary: _BatchSummary, first_waiting: Mapping[str, bytes], batch_id: int
    ) -> None:
        """One ``silver/_progress`` row per source with rows in this micro-batch (after every
        MERGE of it committed, so a row never names data that is not in silver)."""
        consumed = summary.per_source
        if not consumed:
            return
        rows = [
            (
                batch_id,
                source,
                r.position,
                r.source_ts_ms,
                first_waiting.get(source),
                r.open_tx,
                r.events,
            )
            for source, r in sorted(consumed.items())
        ]
        BK.append_rows(
            self.silver / "_progress",
            _PROGRESS_SCHEMA,
            rows,
            app_id=_PROGRESS_APP_ID,
            version=batch_id,
        )


def _bookkeeping_schema(*columns: tuple[str, pa.DataType]) -> pa.Schema:
    """A bookkeeping table's columns: the silver batch, ``columns``, when it was recorded."""
    return pa.schema(
        [("silver_batch", pa.int64()), *columns, ("recorded_at", pa.timestamp("us", tz="UTC"))]
    )


_CUTS_SCHEMA = _bookkeeping_schema(
    ("source", pa.string()),
    ("collection", pa.string()),
    ("silver_table", pa.string()),
    ("position", pa.binary()),
    ("waiting_from", pa.binary()),
    ("table_version", pa.int64()),
)
_CUTS_APP_ID = "medallion-silver:_cuts"
_PROGRESS_SCHEMA = _bookkeeping_schema(
    ("source", pa.string()),
    ("position", pa.binary()),
    ("source_ts_ms", pa.int64()),
    ("waiting_from", pa.binary()),
    ("open_tx", pa.bool_()),
    ("events", pa.int64()),
)
_PROGRESS_APP_ID = "medallion-silver:_progress"
_PENDING_BY_DRIVER = 50_000
_COLLECT_BYTES = 8 * 1024**2
"""Bronze file bytes (the micro-batch's and ``silver/_pending``'s) up to which a micro-batch is
collected to the driver and split there: about 60,000 rows of a typical OLTP source, some 50 MB
in Arrow (:meth:`SilverJob._collect_small`)."""
"""Rows of ``silver/_pending`` at most rewritten through the driver (deltalake, no Spark job)."""


_EMPTY_CHANGES = (
    "_cdc_key string, _cdc_position binary, _cdc_op string, _cdc_source_ts long, "
    "_cdc_tx_id string, _cdc_bronze_batch string, _cdc_unavailable array<string>, "
    "_cdc_old_key string, _cdc_next_key string, __origin string"
)


_DATA_ERRORS: tuple[type[Exception], ...] = (
    ValueError,
    LookupError,
    TypeError,
    ArithmeticError,
    AnalysisException,
    ArithmeticException,
    DateTimeException,
    NumberFormatException,
    SparkRuntimeException,
    IllegalArgumentException,
)
"""Failures caused by what an event holds (its schema, a value), as opposed to infrastructure
(storage, the Spark driver): silver quarantines the events concerned and goes on (C5)."""

_INTERRUPTIONS = (
    "java.lang.InterruptedException",
    "java.io.InterruptedIOException",
    "java.nio.channels.ClosedByInterruptException",
)
"""The JVM exceptions by which ``query.stop()`` interrupts a micro-batch (Spark's
``StreamExecution.IO_EXCEPTION_NAMES``): a stop, not a failure."""
_SPARK_PROXY_ERROR = "py4j.protocol.Py4JJavaError: An error occurred while calling"
_FOR_SPARK_CHARS = 400


def _text_of(exc: BaseException) -> str:
    """``str(exc)``, or a stand-in saying why it has none.

    A Py4JJavaError asks the JVM for its text (the Java exception's stack trace): when the
    gateway is gone that call raises too, and it would do so inside the handler that reports
    the micro-batch's failure, replacing the failure by a Py4J connection error.
    """
    try:
        return str(exc)
    except Exception as failure:  # noqa: BLE001 - any reason: the failure must still be reported
        # Py4J keeps the first line it got with the error ("An error occurred while calling
        # o42.save") in ``errmsg``; nothing else is known without the JVM.
        head = getattr(exc, "errmsg", None)
        missing = f"(its text is unavailable: {type(failure).__name__})"
        return f"{head.strip()} {missing}" if isinstance(head, str) else missing


def _interruption(exc: BaseException) -> str | None:
    """The interruption exception that ended the micro-batch, when ``query.stop()`` did."""
    # A Py4JJavaError: the JVM exception, before its stack.
    head = _text_of(exc).split("\n\tat ", 1)[0]
    return next((name for name in _INTERRUPTIONS if name in head), None)


def _for_spark(exc: BaseException, interruption: str | None) -> RuntimeError:
    """What ``foreachBatch`` raises to Spark in place of ``exc``: a short message.

    Spark tests the text of a Python ``foreachBatch`` failure with a regular expression that
    recurses once per character (``StreamExecution.PROXY_ERROR``, ``(.|\\r\\n|\\r|\\n)*``), on
    the stream's thread: a Py4JJavaError's full text (a JVM stack trace, a few thousand
    characters) overflows that thread's stack, and the stream then dies of a
    ``StackOverflowError`` without a failure to report. The run re-raises ``exc`` itself
    (:attr:`SilverJob._failure`); Spark gets one line, and for a stop the text by which it
    recognizes one.
    """
    if interruption is not None:
        return RuntimeError(f"{_SPARK_PROXY_ERROR} the silver micro-batch: {interruption}")
    first = (_text_of(exc).splitlines() or [""])[0]
    return RuntimeError(
        f"silver micro-batch failed: {type(exc).__name__}: {first[:_FOR_SPARK_CHARS]}"
    )


_SHOWN_VALUE_CHARS = 120
"""Characters of an undecodable value quoted in its quarantine reason."""


def _describe(exc: BaseException) -> str:
    """An exception in one line, for a quarantine reason."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text[:400]}"


def _arrow_convertible(schema: StructType) -> bool:
    """Whether Spark converts every column of ``schema`` to Arrow and back."""
    from pyspark.errors import PySparkTypeError

    try:
        to_arrow_schema(schema, timezone="UTC")
    except (PySparkTypeError, NotImplementedError):
        return False
    return True


def _decoded_on_driver(
    spark: SparkSession, decoded: StructType, rows: pa.Table
) -> tuple[pa.Table, Callable[[], DataFrame], DataFrame | None]:
    """A decoded part's rows on the driver (with ``__reason``) split into the accepted rows,
    kept as Arrow, a DataFrame of them built only when asked for, and the refused events
    (None: none, and no job to find out).

    Lazily, the refusals were a job of their own (a count, before the quarantine append) and
    the MERGE's first job decoded the events again; a collected micro-batch's part is a few
    thousand rows, which are decoded once, to the driver.

    Args:
        spark: The session the DataFrames belong to.
        decoded: Spark's schema of the decoded part (with ``__reason``).
        rows: Its rows (:meth:`SilverJob._decoded_rows`).
    """
    bad = pc.is_valid(rows.column(_REASON))
    columns = StructType([f for f in decoded.fields if f.name != _REASON])
    good = rows.filter(pc.invert(bad)).drop_columns([_REASON])
    # Arrow cannot hand Spark a table without rows.
    build = _once(lambda: spark.createDataFrame(good if good.num_rows else [], columns))
    if good.num_rows == rows.num_rows:
        return good, build, None
    quarantined = StructType([decoded[c] for c in _QUARANTINE_COLUMNS])
    refused = rows.filter(bad).select(list(_QUARANTINE_COLUMNS))
    return good, build, spark.createDataFrame(refused, quarantined)


def _why_not_arrow(
    parts: list[_Part], current: Mapping[str, DataType], *, exists: bool, changed: bool
) -> str | None:
    """Why a table's accepted parts cannot be united on the driver as they are (the Arrow
    road); None when they can: the table exists and this micro-batch changes nothing of it,
    and every part's rows are on the driver with exactly the table's types (no cast)."""
    if not exists:
        return "a new table"
    if changed:
        return "a schema change (a column added, widened or rewritten)"
    if any(p.rows is None for p in parts):
        return "a part decoded by Spark only (a type Arrow does not carry)"
    if any(current.get(f.name) != f.dataType for p in parts for f in p.row.fields):
        return "a cast to the table's types"
    if not _arrow_convertible(StructType([StructField(n, t) for n, t in current.items()])):
        return "a table column Arrow does not carry"
    return None


def _arrow_union(
    parts: list[_Part], current: Mapping[str, DataType]
) -> tuple[pa.Table, StructType]:
    """The parts' rows on the driver, united by name, with the table's columns no part
    carries as typed nulls: Arrow's :meth:`SilverJob._conform` union (each part with the
    table's types already).

    Returns:
        The rows and Spark's schema of them.
    """
    fields: dict[str, StructField] = {}
    types: dict[str, pa.DataType] = {}
    for part in parts:
        rows = part.rows
        if rows is None:  # never: _why_not_arrow
            raise LookupError("a part without rows on the driver")
        for f in part.schema.fields:
            fields.setdefault(f.name, StructField(f.name, f.dataType))
            types.setdefault(f.name, rows.schema.field(f.name).type)
    missing = StructType([StructField(c, t) for c, t in current.items() if c not in fields])
    for f, arrow in zip(missing.fields, to_arrow_schema(missing, timezone="UTC"), strict=True):
        fields[f.name] = f
        types[f.name] = arrow.type
    target = pa.schema([pa.field(n, t) for n, t in types.items()])
    tables = []
    for part in parts:
        rows = part.rows
        assert rows is not None
        tables.append(
            pa.table(
                [
                    rows.column(n) if n in rows.column_names else pa.nulls(rows.num_rows, t)
                    for n, t in types.items()
                ],
                schema=target,
            )
        )
    return pa.concat_tables(tables), StructType(list(fields.values()))


def _united(frame: DataFrame | None) -> DataFrame:
    if frame is None:  # never: the Arrow road has parts
        raise LookupError("no parts to unite")
    return frame


def _schema_rows(events: pa.Table | None, schema_id: str | None) -> pa.Table | None:
    """The bronze rows of one value schema id (null-safe), None without rows."""
    if events is None:
        return None
    ids = events.column(B.VALUE_SCHEMA_ID)
    same = pc.is_null(ids) if schema_id is None else pc.fill_null(pc.equal(ids, schema_id), False)
    return events.filter(same)


def _row_events(events: pa.Table) -> pa.Table:
    """The bronze rows of row events (c, u, d, r), as ``op IN (...)`` keeps them."""
    ops = events.column(B.OP)
    row = pc.is_in(ops, value_set=pa.array(["c", "u", "d", "r"], type=ops.type))
    return events.filter(pc.fill_null(row, False))


def _segment(changes: _Changes, lower: bytes | None, upper: bytes | None) -> _Changes:
    """The changes between two truncates: positions above ``lower``, below ``upper``."""
    if lower is not None:
        low = lower
        changes = changes.where(
            F.col(M.POSITION) > F.lit(low),
            lambda t: pc.greater(t[M.POSITION], pa.scalar(low, t[M.POSITION].type)),
        )
    if upper is not None:
        high = upper
        changes = changes.where(
            F.col(M.POSITION) < F.lit(high),
            lambda t: pc.less(t[M.POSITION], pa.scalar(high, t[M.POSITION].type)),
        )
    return changes


_NO_CHANGES = pa.table({M.KEY: pa.array([], pa.string()), M.POSITION: pa.array([], pa.binary())})
"""A collected table's changes when none are left to apply (no Spark job to say so)."""


def _leaf(path: str) -> str:
    """The silver table name of its path."""
    return path.rstrip("/").rsplit("/", 1)[-1]


def _refusals(events: DataFrame, reason: Column) -> DataFrame:
    """Bronze rows as refused events (the quarantine's columns) with ``reason``."""
    return events.select(
        _canonical_key(F.col(B.KEY_JSON)).alias(M.KEY),
        F.col(B.POSITION).alias(M.POSITION),
        F.concat_ws("#", B.AGENT_ID, F.col(B.BATCH_SEQ).cast("string")).alias(M.BRONZE_BATCH),
        F.col(B.ORIGIN).alias(M.ORIGIN),
        reason.alias(_REASON),
    )


def _refusal_reason(fields: list[StructField]) -> Column:
    """Why a decoded event cannot be applied (NULL: it can).

    A create, read or update needs its ``after`` image (NULL when missing, or not a JSON
    object); a field that holds a JSON value but decodes to NULL (a string in a number field,
    a decimal wider than its type, a timestamp text that does not parse) is refused rather
    than applied as NULL. Placeholders and ``yboutput``'s unset columns are not values.
    """
    no_image = F.when(
        F.col("__no_image") & F.col(M.OP).isin("c", "u", "r"),
        F.lit("no 'after' image: missing, or not a JSON object of the table's columns"),
    )
    undecodable = [
        F.when(
            F.col(f"__text_{i}").isNotNull()
            & F.col(quote_identifier(f.name)).isNull()
            & ~F.array_contains(F.col(M.UNAVAILABLE), f.name),
            F.concat(
                F.lit(f"column {f.name}: "),
                F.substring(F.col(f"__text_{i}"), 1, _SHOWN_VALUE_CHARS),
                F.lit(f" does not decode as {f.dataType.simpleString()}"),
            ),
        )
        for i, f in enumerate(fields)
    ]
    values = F.concat_ws("; ", *undecodable) if undecodable else F.lit("")
    return F.coalesce(
        no_image, F.when(values != F.lit(""), F.concat(F.lit("value does not decode: "), values))
    )


def _row_schema(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The before/after row struct of an envelope schema."""
    for f in envelope.get("fields", []):
        if f.get("field") in ("after", "before") and f.get("type") == "struct":
            return dict(f)
    return {"type": "struct", "fields": []}
