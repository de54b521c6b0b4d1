"""Apply only complete source transactions.

A data event that carries a ``transaction`` block (Debezium's ``provide.transaction.metadata``,
which also emits BEGIN/END records) waits until its transaction is complete: the END record is in
bronze and the number of distinct data events seen for the transaction equals END's
``event_count`` (distinct by position, because a redelivery lands the same events twice).
Debezium emits a transaction's END only when the next transaction starts, so a transaction can
also be released by a timeout: once its first row has waited ``timeout_seconds`` in bronze, it is
applied as far as it arrived and counted as released by timeout.

Events without a transaction block (snapshot rows, connectors without transaction metadata,
tombstones) are never held. An END that arrives before any of its data events waits as well (up
to the same timeout, after which an END without data is dropped: its events were applied
earlier, or never come).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from bronze import schema as B

__all__ = ["TransactionSplit", "split_complete"]


@dataclass(frozen=True, slots=True)
class TransactionSplit:
    """Bronze rows split by transaction completeness.

    Attributes:
        ready: Rows to apply now (ungated rows, complete and timed-out transactions).
        waiting: Rows of transactions still incomplete (data rows and their END records).
        timed_out: Transactions released by the timeout in this split.
    """

    ready: DataFrame
    waiting: DataFrame
    timed_out: int


def split_complete(
    rows: DataFrame, *, now: dt.datetime, timeout_seconds: float
) -> TransactionSplit:
    """Split bronze rows into what can be applied and what waits for its transaction's END.

    Args:
        rows: Bronze ``events`` rows (this micro-batch plus the rows still waiting).
        now: The current time (UTC), for the timeout.
        timeout_seconds: How long a transaction waits for its END.

    Returns:
        The split.
    """
    gated = (F.col(B.KIND) == "data") & F.col(B.TX_ORDER).isNotNull() & F.col(B.TX_ID).isNotNull()
    txn = [B.SOURCE, B.TX_ID]
    seen = (
        rows.where(gated)
        .groupBy(*txn)
        .agg(
            F.count_distinct(B.POSITION).alias("__seen"),
            F.min(B.INGEST_TS).alias("__first"),
        )
    )
    ends = (
        rows.where((F.col(B.KIND) == "transaction") & (F.col(B.TX_STATUS) == "END"))
        .groupBy(*txn)
        .agg(
            F.max(B.TX_EVENT_COUNT).alias("__expected"),
            F.min(B.INGEST_TS).alias("__end_first"),
        )
    )
    cutoff = F.lit(now - dt.timedelta(seconds=timeout_seconds))
    # Outer join: an END that arrives before its data events (bronze rows reordered, or
    # delivered in another micro-batch) waits too, else the data would wait for the timeout.
    status = (
        seen.join(ends, txn, "full")
        .select(
            *txn,
            F.col("__seen").isNotNull().alias("__has_data"),
            (F.col("__seen") >= F.col("__expected")).alias("__complete"),
            (F.coalesce(F.col("__first"), F.col("__end_first")) < cutoff).alias("__expired"),
        )
        .withColumn("__complete", F.coalesce("__complete", F.lit(False)))
        .cache()
    )
    held = status.where(~F.col("__complete") & ~F.col("__expired")).select(
        *txn, F.lit(True).alias("__held")
    )
    timed_out = status.where(
        F.col("__has_data") & ~F.col("__complete") & F.col("__expired")
    ).count()
    marked = rows.join(held, txn, "left")
    is_held = F.coalesce(F.col("__held"), F.lit(False))
    holds_row = is_held & (gated | (F.col(B.KIND) == "transaction"))
    ready = marked.where(~holds_row).drop("__held")
    waiting = marked.where(holds_row).drop("__held")
    status.unpersist()
    return TransactionSplit(ready, waiting, timed_out)
