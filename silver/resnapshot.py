"""``silver/_resnapshot``: tables silver cannot make equal to the source without a new snapshot.

When a column is added whose value in the rows that already existed cannot be known (contract
C4: parameter ``medallion.default.unreproducible`` on its field, e.g. PostgreSQL ``ADD COLUMN
... DEFAULT random()``, which rewrites every row without a change event), silver does not guess:
those rows keep NULL and the table gets one row here. ``medallion status`` lists these tables and
the ``resnapshot`` quality check fails for them; an (incremental) snapshot of the table brings
the real values.

Columns: ``source``, ``collection``, ``column``, ``reason``, ``detected_at``, ``silver_batch``,
plus ``silver_table`` and ``position`` (the first event written with the column). A row is
written once per (table, column, position): a replayed micro-batch finds it and writes nothing.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import SparkSession

from bronze.storage import LakePath, lake_path, open_delta
from silver.defaults import AddedColumn

__all__ = ["RESNAPSHOT_TABLE", "Resnapshot", "record_unreproducible", "needing_resnapshot"]

logger = logging.getLogger(__name__)

RESNAPSHOT_TABLE: Final = "_resnapshot"
"""Directory of the table under ``silver/``."""
_SCHEMA: Final = (
    "source string, collection string, column string, reason string, detected_at timestamp, "
    "silver_batch long, silver_table string, position binary"
)


@dataclass(frozen=True, slots=True)
class Resnapshot:
    """One column that makes a table need a new snapshot.

    Attributes:
        source: The source name.
        collection: The source table.
        column: The added column.
        reason: Why its value in older rows is unknown (the agent's words).
        detected_at: When silver recorded it.
        silver_batch: The silver batch that added the column.
    """

    source: str
    collection: str
    column: str
    reason: str
    detected_at: dt.datetime | None
    silver_batch: int


def _recorded(path: LakePath) -> set[tuple[str, str, bytes]]:
    from deltalake.exceptions import TableNotFoundError

    try:
        rows = open_delta(path).to_pyarrow_table(columns=["silver_table", "column", "position"])
    except TableNotFoundError:
        return set()
    return {(r["silver_table"], r["column"], bytes(r["position"])) for r in rows.to_pylist()}


def record_unreproducible(
    spark: SparkSession,
    silver_root: LakePath,
    columns: Sequence[AddedColumn],
    *,
    source: str,
    collection: str,
    silver_table: str,
    silver_batch: int,
) -> int:
    """Append the columns not yet recorded to ``silver/_resnapshot``.

    Returns:
        Rows appended.
    """
    path = lake_path(silver_root) / RESNAPSHOT_TABLE
    done = _recorded(path)
    now = dt.datetime.now(dt.UTC)
    rows: list[tuple[Any, ...]] = [
        (
            source,
            collection,
            c.column,
            c.unreproducible,
            now,
            silver_batch,
            silver_table,
            c.position,
        )
        for c in columns
        if (silver_table, c.column, c.position) not in done
    ]
    if not rows:
        return 0
    spark.createDataFrame(rows, _SCHEMA).write.format("delta").mode("append").save(str(path))
    for row in rows:
        logger.warning(
            "silver %s: column %s was added with a default silver cannot reproduce (%s); "
            "the table needs a new snapshot",
            silver_table,
            row[2],
            row[3],
        )
    return len(rows)


def needing_resnapshot(lake_root: LakePath) -> list[Resnapshot]:
    """Every recorded column, oldest first (read with deltalake, no Spark job)."""
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_delta(lake_path(lake_root) / "silver" / RESNAPSHOT_TABLE).to_pyarrow_table()
    except TableNotFoundError:
        return []
    return sorted(
        (
            Resnapshot(
                r["source"],
                r["collection"],
                r["column"],
                r["reason"],
                r["detected_at"],
                int(r["silver_batch"]),
            )
            for r in table.to_pylist()
        ),
        key=lambda r: (r.silver_batch, r.source, r.collection, r.column),
    )
