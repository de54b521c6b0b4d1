"""Apply only complete source transactions; release the rest on time.

A data event that carries a ``transaction`` block (Debezium's ``provide.transaction.metadata``,
which also emits BEGIN/END records) waits in ``silver/_pending`` until its transaction is
complete: the END record is in bronze, the number of distinct events seen for the transaction
reaches END's ``event_count``, and, for every table END names in ``data_collections`` that
silver has seen, that table's distinct events reach its own ``event_count`` (distinct by
position, because a redelivery lands the same events twice). Every event that carries a
``total_order`` was counted by Debezium's transaction monitor, so transactional logical
messages (op ``m``) with one are counted and held too. Transaction identity is bronze's
``tx_id``, which already reads ``transaction.id`` of every Debezium version and keeps only the
``txId`` of PostgreSQL's ``txId:LSN`` (contract C3).

Debezium emits a transaction's END only when the next transaction starts, so a transaction is
also released by a timeout: once its first row has waited ``timeout_seconds`` in bronze, it is
applied as far as it arrived and counted as released by timeout. The timeout is checked against
the clock on every run and every ``--continuous`` tick, not only when new bronze rows arrive
(:func:`release_due`): on a quiet source nothing else would ever release the last transaction.

Each silver micro-batch, a Spark micro-batch or such a release, gets an id and a clock from
:class:`BatchLedger` (``silver/_batches``): the id orders the batch among the others (the Delta
app transaction versions, ``silver/_cuts`` and ``silver/_progress`` use it), and the clock makes
a replayed batch decide exactly as it did the first time: a crash after some of its tables
committed must not release more rows on replay than the tables it skips already hold.

A transaction released as superseded (see :func:`_newest_transaction`) before its END count
was reached leaves a marker in ``silver/_pending`` (``tx_status`` ``RELEASED``) for
``timeout_seconds`` after its release: its rows that arrive later are applied as they come, not
held for an END count they can no longer reach (the rows applied before are not in ``_pending``
to count). In order, only a transaction without END (MariaDB's ``TRUNCATE``) gets one, and has
no later rows; bronze rows that reach silver out of order (several Kafka partitions, a shuffled
replay) may arrive after a later transaction began, and then need it.

Events without a transaction block (snapshot rows, connectors without transaction metadata,
tombstones) are never held. An END that arrives before any of its data events waits as well (up
to the same timeout, after which an END without data is dropped: its events were applied
earlier, or never come).
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from bronze import schema as B
from bronze.storage import LakePath, open_delta, storage_options

__all__ = [
    "BatchLedger",
    "SilverBatch",
    "TransactionSplit",
    "Waiting",
    "PENDING_APP_ID",
    "RELEASED",
    "release_due",
    "split_complete",
    "unfinished_release",
    "waiting_by_source",
]

logger = logging.getLogger(__name__)

PENDING_APP_ID: Final = "medallion-silver:_pending"
"""Delta app id of the ``silver/_pending`` rewrite that ends every silver batch; its version is
the batch id, so it says which batch completed last."""
_DATA_COLLECTIONS: Final = "array<struct<data_collection:string,event_count:bigint>>"
RELEASED: Final = "RELEASED"
"""``tx_status`` of the marker row ``silver/_pending`` keeps for a transaction applied in part
(``kind`` ``transaction``, ``ingest_ts`` the release's clock, the other columns null)."""


@dataclass(frozen=True, slots=True)
class TransactionSplit:
    """Bronze rows split by transaction completeness.

    Attributes:
        ready: Rows to apply now (ungated rows, complete and timed-out transactions).
        waiting: Rows of transactions still incomplete (data rows and their END records).
        timed_out: Transactions released by the timeout in this split.
        held: Transactions held (0: ``waiting`` holds markers of released transactions at
            most).
        held_rows: About how many rows ``waiting`` holds (their distinct data positions plus
            one END each, plus the markers): how large a rewrite of ``silver/_pending`` is,
            without a job.
    """

    ready: DataFrame
    waiting: DataFrame
    timed_out: int
    held: int = 0
    held_rows: int = 0


def _counted() -> Column:
    """Rows Debezium's transaction monitor counted: they carry ``total_order``."""
    return (
        F.col(B.KIND).isin("data", "message")
        & F.col(B.TX_ORDER).isNotNull()
        & F.col(B.TX_ID).isNotNull()
    )


def _is_marker() -> Column:
    """The marker row of a transaction applied in part (never null: a filter keeps it)."""
    return F.coalesce(
        (F.col(B.KIND) == "transaction") & (F.col(B.TX_STATUS) == RELEASED), F.lit(False)
    )


def _marker_rows(marked: DataFrame, schema: StructType) -> DataFrame:
    """Marker rows (``schema``'s columns) for the transactions of ``marked`` (its ``__marked``
    column is their ``ingest_ts``)."""
    values = {
        B.SOURCE: F.col(B.SOURCE),
        B.TX_ID: F.col(B.TX_ID),
        B.KIND: F.lit("transaction"),
        B.TX_STATUS: F.lit(RELEASED),
        B.INGEST_TS: F.col("__marked"),
    }
    return marked.select(
        *[values.get(f.name, F.lit(None)).cast(f.dataType).alias(f.name) for f in schema.fields]
    )


def _collections_short(rows: DataFrame, txn: list[str]) -> DataFrame:
    """Transactions where a table END names has fewer distinct events than END counts for it.

    END names a table as the connector does (``schema.table``, ``db.schema.table`` for SQL
    Server, ``PDB.SCHEMA.TABLE`` for Oracle) and bronze as ``collection``; a name matches a
    collection that it equals or ends with after a dot. A name that matches no table seen is
    short (its events have not landed) unless a table seen matches no name either: then the
    spellings differ, and the total count decides, since waiting for a name silver cannot match
    would hold every transaction until the timeout.
    """
    per_table = (
        rows.where(_counted())
        .groupBy(*txn, B.COLLECTION)
        .agg(F.count_distinct(B.POSITION).alias("__table_seen"))
    )
    wanted = (
        rows.where((F.col(B.KIND) == "transaction") & (F.col(B.TX_STATUS) == "END"))
        .select(
            *txn,
            F.explode(
                F.from_json(
                    F.get_json_object(B.VALUE_JSON, "$.data_collections"), _DATA_COLLECTIONS
                )
            ).alias("__dc"),
        )
        .select(
            *txn,
            F.col("__dc.data_collection").alias("__name"),
            F.col("__dc.event_count").alias("__count"),
        )
        .dropDuplicates([*txn, "__name"])
    )
    matches = (F.col("__name") == F.col(B.COLLECTION)) | F.col("__name").endswith(
        F.concat(F.lit("."), F.col(B.COLLECTION))
    )
    on = [F.col(f"w.{c}") == F.col(f"p.{c}") for c in txn] + [matches]
    names = (
        wanted.alias("w")
        .join(per_table.alias("p"), on, "left")
        .groupBy(*[F.col(f"w.{c}").alias(c) for c in txn])
        .agg(
            F.max(F.col("__table_seen") < F.col("__count")).alias("__fewer"),
            F.max(F.col("__table_seen").isNull()).alias("__unseen"),
        )
    )
    tables = (
        per_table.alias("p")
        .join(wanted.alias("w"), on, "left_anti")
        .select(*txn)
        .distinct()
        .withColumn("__unnamed", F.lit(True))
    )
    return (
        names.join(tables, txn, "left")
        .where(
            F.coalesce(F.col("__fewer"), F.lit(False))
            | (F.col("__unseen") & F.col("__unnamed").isNull())
        )
        .select(*txn)
        .withColumn("__short", F.lit(True))
    )


def _partition() -> Column:
    return F.coalesce(F.col(B.SOURCE_PARTITION), F.lit(""))


def _newest_transaction(rows: DataFrame) -> DataFrame:
    """Per source partition, the transaction of the newest BEGIN or counted event.

    A source partition is one serial stream (a WAL, a binlog, one SQL Server database): the
    connector writes a transaction's events after those of every transaction committed before
    it. So once a BEGIN or an event of another transaction lands at a later position, an open
    transaction has all its events in bronze even if its END never comes: Debezium 3.4 MariaDB
    writes no END for a transaction holding only a ``TRUNCATE``.
    """
    starts = (F.col(B.KIND) == "transaction") & (F.col(B.TX_STATUS) == "BEGIN")
    return (
        rows.where((_counted() | starts) & F.col(B.TX_ID).isNotNull())
        .groupBy(B.SOURCE, _partition().alias("__partition"))
        .agg(F.max_by(B.TX_ID, B.POSITION).alias("__newest"))
    )


def split_complete(
    rows: DataFrame, *, now: dt.datetime, timeout_seconds: float
) -> TransactionSplit:
    """Split bronze rows into what can be applied and what waits for its transaction's END.

    A small micro-batch is split on the driver instead, by :mod:`silver.collected_split` with
    the same rules (``tests/integration/test_silver_split_paths.py`` holds the two to the same
    results): a change to the rules here is a change there.

    Args:
        rows: Bronze ``events`` rows (this micro-batch plus the rows still waiting).
        now: The clock of the silver batch (UTC), for the timeout.
        timeout_seconds: How long a transaction waits for its END.

    Returns:
        The split.
    """
    gated = _counted()
    marker = _is_marker()
    txn = [B.SOURCE, B.TX_ID]
    cutoff = F.lit(now - dt.timedelta(seconds=timeout_seconds))
    # The markers are counted in the same pass over the rows as the events.
    seen = (
        rows.where(gated | marker)
        .groupBy(*txn)
        .agg(
            F.count_distinct(F.when(gated, F.col(B.POSITION))).alias("__seen"),
            F.min(F.when(gated, F.col(B.INGEST_TS))).alias("__first"),
            F.max(F.when(gated, _partition())).alias("__partition"),
            F.max(F.when(marker & (F.col(B.INGEST_TS) >= cutoff), F.col(B.INGEST_TS))).alias(
                "__released"
            ),
        )
        .join(_newest_transaction(rows), [B.SOURCE, "__partition"], "left")
        # Superseded: a later transaction started on the same serial stream.
        .withColumn("__superseded", F.coalesce(F.col("__newest") != F.col(B.TX_ID), F.lit(False)))
        .drop("__partition", "__newest")
    )
    ends = (
        rows.where((F.col(B.KIND) == "transaction") & (F.col(B.TX_STATUS) == "END"))
        .groupBy(*txn)
        .agg(
            F.max(B.TX_EVENT_COUNT).alias("__expected"),
            F.min(B.INGEST_TS).alias("__end_first"),
        )
    )
    # Outer join: an END that arrives before its data events (bronze rows reordered, or
    # delivered in another micro-batch) waits too, else the data would wait for the timeout.
    counted_in_full = (F.col("__seen") >= F.col("__expected")) & ~F.coalesce(
        F.col("__short"), F.lit(False)
    )
    released = F.col("__released").isNotNull()
    status = (
        seen.join(ends, txn, "full")
        .join(_collections_short(rows, txn), txn, "left")
        .select(
            *txn,
            F.coalesce(F.col("__seen") > 0, F.lit(False)).alias("__has_data"),
            F.coalesce(F.col("__seen"), F.lit(0)).alias("__seen"),
            F.coalesce(counted_in_full, F.lit(False)).alias("__in_full"),
            (counted_in_full | F.coalesce(F.col("__superseded"), F.lit(False)) | released).alias(
                "__complete"
            ),
            (F.coalesce(F.col("__first"), F.col("__end_first")) < cutoff).alias("__expired"),
            F.col("__released"),
        )
        .withColumn("__complete", F.coalesce("__complete", F.lit(False)))
        .withColumn("__expired", F.coalesce("__expired", F.lit(False)))
        # Applied in part now, as superseded or marked before (its later rows would wait for
        # an END count they cannot reach): marked from this batch's clock on. A transaction
        # the timeout released in part is not: its later rows wait for the timeout again.
        .withColumn(
            "__marked",
            F.when(
                F.col("__has_data") & ~F.col("__in_full") & F.col("__complete"), F.lit(now)
            ).otherwise(F.col("__released")),
        )
        # Computed once, here: its joins over every row are the costliest part of a silver
        # batch, and the tally and both sides of the split (each evaluated by the caller)
        # read it. A cache unpersisted before the caller evaluates the split would not do.
        .localCheckpoint()
    )
    is_waiting = ~F.col("__complete") & ~F.col("__expired")
    tally = status.agg(
        F.count_if(F.col("__has_data") & ~F.col("__complete") & F.col("__expired")).alias(
            "timed_out"
        ),
        F.count_if(is_waiting).alias("held"),
        F.sum(F.when(is_waiting, F.col("__seen") + 1)).alias("held_rows"),
        F.count_if(F.col("__marked").isNotNull()).alias("markers"),
    ).collect()[0]
    timed_out = int(tally["timed_out"])
    markers = int(tally["markers"])
    # A marker read from ``_pending`` is never applied; the running ones are written again.
    rows_in = rows.where(~marker)
    kept = _marker_rows(status.where(F.col("__marked").isNotNull()), rows.schema)
    if not tally["held"]:
        # Nothing waits (the usual case): every row is ready, no join over them is needed.
        waiting_none = kept if markers else rows.where(F.lit(False))
        return TransactionSplit(rows_in, waiting_none, timed_out, 0, markers)
    held = status.where(is_waiting).select(*txn, F.lit(True).alias("__held"))
    joined = rows_in.join(held, txn, "left")
    is_held = F.coalesce(F.col("__held"), F.lit(False))
    # Never null: a row of a held transaction without a kind is ready, not dropped from both.
    holds_row = F.coalesce(is_held & (gated | (F.col(B.KIND) == "transaction")), F.lit(False))
    ready = joined.where(~holds_row).drop("__held")
    waiting = joined.where(holds_row).drop("__held").select(*rows.columns)
    if markers:
        waiting = waiting.unionByName(kept)
    return TransactionSplit(
        ready,
        waiting,
        timed_out,
        int(tally["held"]),
        int(tally["held_rows"] or 0) + markers,
    )


# --- what waits, read without Spark ------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class Waiting:
    """What of one source waits in ``silver/_pending`` for the rest of its transaction.

    Attributes:
        events: Held change events (data and counted messages).
        transactions: Distinct transactions they belong to (END records waiting for data
            included).
        oldest: When the oldest held row was committed to bronze (the timeout counts from it).
    """

    events: int
    transactions: int
    oldest: dt.datetime | None

    def age_seconds(self, now: dt.datetime) -> float | None:
        """How long the oldest row has waited at ``now``."""
        if self.oldest is None:
            return None
        return round(max(0.0, (now - self.oldest).total_seconds()), 3)


def _pending_rows(pending: LakePath) -> pa.Table | None:
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_delta(pending)
    except TableNotFoundError:
        return None
    rows = table.to_pyarrow_table(columns=[B.SOURCE, B.KIND, B.TX_ID, B.TX_STATUS, B.INGEST_TS])
    # Markers of transactions applied in part wait for nothing.
    marker = pc.and_(
        pc.equal(rows.column(B.KIND), "transaction"), pc.equal(rows.column(B.TX_STATUS), RELEASED)
    )
    return rows.filter(pc.invert(pc.fill_null(marker, False)))


def waiting_by_source(pending: LakePath) -> dict[str, Waiting]:
    """Per source, what waits in ``silver/_pending`` (read with deltalake, no Spark job).

    Args:
        pending: The ``silver/_pending`` table.

    Returns:
        Source name -> what waits; sources with nothing waiting are absent.
    """
    rows = _pending_rows(pending)
    if rows is None or rows.num_rows == 0:
        return {}
    out: dict[str, Waiting] = {}
    for source in pc.unique(rows.column(B.SOURCE)).to_pylist():
        mine = rows.filter(pc.equal(rows.column(B.SOURCE), source))
        events = mine.filter(pc.is_in(mine.column(B.KIND), pa.array(["data", "message"])))
        out[source] = Waiting(
            events=events.num_rows,
            transactions=len(pc.unique(mine.column(B.TX_ID))),
            oldest=pc.min(mine.column(B.INGEST_TS)).as_py(),
        )
    return out


def release_due(pending: LakePath, *, now: dt.datetime, timeout_seconds: float) -> bool:
    """Whether some row of ``silver/_pending`` has waited past the timeout at ``now``.

    A cheap look (deltalake, no Spark job) that decides whether a run with no new bronze rows
    should run a release batch; :func:`split_complete` then decides what it releases.
    """
    cutoff = now - dt.timedelta(seconds=timeout_seconds)
    return any(
        w.oldest is not None and w.oldest < cutoff for w in waiting_by_source(pending).values()
    )


# --- silver batch ids and clocks ---------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class SilverBatch:
    """One silver micro-batch.

    Attributes:
        id: The silver batch id: Delta app transaction versions, ``silver_batch`` in the side
            tables. Equal to Spark's micro-batch id until the first release batch, larger after.
        clock: The time its transaction timeout is measured at (UTC), fixed at its first run.
        spark_batch: Spark's micro-batch id; None for a release batch (no new bronze rows).
    """

    id: int
    clock: dt.datetime
    spark_batch: int | None

    @property
    def is_release(self) -> bool:
        """Whether the batch releases timed-out transactions without new bronze rows."""
        return self.spark_batch is None


_LEDGER_SCHEMA: Final = pa.schema(
    [
        ("silver_batch", pa.int64()),
        ("spark_batch", pa.int64()),
        ("clock", pa.timestamp("us", tz="UTC")),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
    ]
)
_LEDGER_KEEP: Final = 16
"""Rows ``silver/_batches`` keeps: only the newest batch can be replayed."""


class BatchLedger:
    """``silver/_batches``: the id and clock of the newest silver batches.

    Spark numbers its micro-batches itself and replays the last one after a crash; a release
    batch runs between two of them. The ledger gives each silver batch an id above every
    earlier one and, for a replayed Spark micro-batch, the id and clock of its first run.
    Written before the batch writes anything (deltalake, one small overwrite).

    Args:
        path: The ``silver/_batches`` table.
    """

    def __init__(self, path: LakePath) -> None:
        self.path = path
        self._rows: list[SilverBatch] | None = None

    def _load(self) -> list[SilverBatch]:
        if self._rows is None:
            from deltalake.exceptions import TableNotFoundError

            try:
                table = open_delta(self.path).to_pyarrow_table()
            except TableNotFoundError:
                table = _LEDGER_SCHEMA.empty_table()
            self._rows = sorted(
                (
                    SilverBatch(r["silver_batch"], r["clock"], r["spark_batch"])
                    for r in table.to_pylist()
                ),
                key=lambda b: b.id,
            )
        return self._rows

    def last(self) -> SilverBatch | None:
        """The newest silver batch, None before the first."""
        rows = self._load()
        return rows[-1] if rows else None

    def for_spark_batch(self, spark_batch: int, now: dt.datetime) -> SilverBatch:
        """The silver batch of Spark micro-batch ``spark_batch`` (the first run's on a replay).

        Args:
            spark_batch: Spark's micro-batch id.
            now: The clock for a new batch.
        """
        streamed = [b for b in self._load() if b.spark_batch is not None]
        if streamed and streamed[-1].spark_batch == spark_batch:
            return streamed[-1]
        last = self.last()
        # A lake from before the ledger used Spark's ids: keep them until a release needs one.
        ident = spark_batch if last is None else max(spark_batch, last.id + 1)
        return self._record(SilverBatch(ident, now, spark_batch))

    def new_release(self, now: dt.datetime) -> SilverBatch:
        """A new release batch at clock ``now``."""
        last = self.last()
        return self._record(SilverBatch(0 if last is None else last.id + 1, now, None))

    def _record(self, batch: SilverBatch) -> SilverBatch:
        from deltalake import write_deltalake

        rows = [*self._load(), batch][-_LEDGER_KEEP:]
        recorded = dt.datetime.now(dt.UTC)
        table = pa.Table.from_pylist(
            [
                {
                    "silver_batch": b.id,
                    "spark_batch": b.spark_batch,
                    "clock": b.clock,
                    "recorded_at": recorded,
                }
                for b in rows
            ],
            schema=_LEDGER_SCHEMA,
        )
        write_deltalake(
            str(self.path), table, mode="overwrite", storage_options=storage_options(self.path)
        )
        self._rows = rows
        return batch


def unfinished_release(ledger: BatchLedger, pending: LakePath) -> SilverBatch | None:
    """The newest silver batch when it is a release batch that did not complete (a crash).

    A silver batch completes with its ``silver/_pending`` rewrite, app transaction version = its
    id; a release batch recorded in the ledger without it is run again, with its clock.
    """
    last = ledger.last()
    if last is None or not last.is_release:
        return None
    from deltalake.exceptions import TableNotFoundError

    try:
        done = open_delta(pending).transaction_version(PENDING_APP_ID)
    except TableNotFoundError:
        return last
    return last if done is None or done < last.id else None
