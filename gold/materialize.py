"""Gold as plain Delta tables, for readers outside Spark (``gold.materialize: true``).

The ``gold.*`` views exist only in a Spark catalog, and the silver tables under them use Delta
features that delta-rs, polars and pandas cannot all read (deletion vectors, type widening). With
``gold.materialize`` on, every gold refresh also writes each gold view, at the cut gold
publishes, as a Delta table that only needs the oldest protocol (reader version 1, writer 2):

    <lake>/gold/_materialized/<source>__<schema>__<table>

The layout mirrors the view names (``gold.<name>`` -> ``_materialized/<name>``), and the leading
``_`` keeps the directory out of the catalog registration of ``gold/`` (it is not a table).

Exactly the view's rows: each table is overwritten with the view's rows at the published cut in
ONE Delta commit, so a reader sees the old state or the new one, never a mix. Each commit
carries the app transaction ``(medallion-gold-materialize:<name>, <silver version at the cut>)``
and the cut as ``userMetadata``. A refresh skips a table whose app transaction already holds that
silver version; so a crash between publishing the cut and materializing it is repaired by the next
refresh (it materializes the published cuts, new or not), and a replay never writes twice.

Tables of one source move one commit each, not together: a reader joining two of them reads
each table's ``userMetadata`` (``DeltaTable.history(1)``) to check that both show the same
``silver_batch``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from bronze.storage import LakePath, lake_path
from gold.cuts import Cut, TableAtCut
from gold.views import current_state

__all__ = [
    "MATERIALIZED_DIR",
    "PLAIN_TABLE_PROPERTIES",
    "MaterializedTable",
    "materialize_gold",
    "materialized_path",
]

logger = logging.getLogger(__name__)

MATERIALIZED_DIR = "_materialized"
"""Directory under ``<lake>/gold`` holding the materialized tables."""

APP_PREFIX = "medallion-gold-materialize:"
"""App id of a materialized table's commits, followed by the view name."""

PLAIN_TABLE_PROPERTIES: dict[str, str] = {
    # Each of these, when on, adds a reader feature some readers lack; sessions or defaults may
    # switch them on for new tables, so they are written off explicitly.
    "delta.enableDeletionVectors": "false",
    "delta.enableTypeWidening": "false",
    "delta.enableRowTracking": "false",
    "delta.enableChangeDataFeed": "false",
    "delta.columnMapping.mode": "none",
    "delta.checkpointPolicy": "classic",
}
"""Table properties of a materialized table: no feature beyond the base protocol."""


@dataclass(frozen=True, slots=True)
class MaterializedTable:
    """One gold view's materialization in one refresh.

    Attributes:
        name: The view name (``<source>__<schema>__<table>``).
        silver_version: The silver version at the cut the table now holds.
        written: True when this refresh wrote it; False when it already held that version.
        error: Why it could not be written (it is retried at the next refresh), else None.
    """

    name: str
    silver_version: int
    written: bool
    error: str | None = None


def materialized_path(lake_root: LakePath, name: str) -> LakePath:
    """Where the materialized table of the gold view ``gold.<name>`` lives."""
    return lake_path(lake_root).absolute() / "gold" / MATERIALIZED_DIR / name


def materialize_gold(
    spark: Any, config: Any, lake_root: LakePath, cuts: Mapping[str, Cut]
) -> list[MaterializedTable]:
    """Write every gold view at ``cuts`` as a plain Delta table, when ``gold.materialize`` is on.

    A table that fails (a column name Delta refuses without column mapping, a store error) is
    logged at ERROR with its name and skipped; the others are written, and the next refresh
    tries it again. Gold's publication is never undone by a failed materialization.

    Args:
        spark: The session.
        config: The pipeline config (``gold.materialize``).
        lake_root: The lake root.
        cuts: The cut gold shows now, per source (published, new or not).

    Returns:
        One entry per table of the cuts (nothing when the option is off).
    """
    if not config.gold.materialize:
        return []
    results = []
    for source, cut in sorted(cuts.items()):
        for table in sorted(cut.tables.values(), key=lambda t: t.silver_table):
            try:
                written = _materialize(spark, lake_root, cut, table)
            except Exception as exc:  # one table must not stop the others; retried next time
                logger.error(
                    "gold: could not materialize %s of %s at silver batch %s: %s",
                    table.silver_table,
                    source,
                    cut.silver_batch,
                    exc,
                )
                failed = MaterializedTable(table.silver_table, table.version, False, str(exc))
                results.append(failed)
                continue
            results.append(MaterializedTable(table.silver_table, table.version, written))
    written_names = [r.name for r in results if r.written]
    if written_names:
        logger.info("gold: materialized %s", ", ".join(written_names))
    return results


def _materialize(spark: Any, lake_root: LakePath, cut: Cut, table: TableAtCut) -> bool:
    from silver.bookkeeping import already_written

    path = str(materialized_path(lake_root, table.silver_table))
    app_id = APP_PREFIX + table.silver_table
    if already_written(path, app_id, table.version):
        return False
    metadata = {
        "source": cut.source,
        "collection": table.collection,
        "silver_batch": cut.silver_batch,
        "silver_version": table.version,
        "position": cut.position.hex(),
        "source_ts_ms": cut.source_ts_ms,
    }
    writer = (
        current_state(spark, lake_root, table)
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .option("txnAppId", app_id)
        .option("txnVersion", table.version)
        .option("userMetadata", orjson.dumps(metadata).decode())
    )
    for key, value in PLAIN_TABLE_PROPERTIES.items():
        writer = writer.option(key, value)
    writer.save(path)
    return True
