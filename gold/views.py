"""Gold views: the current state of every silver table as of one consistent cut.

A gold view is ``gold.<source>__<schema>__<table>``: the silver table read at the Delta version
of a :class:`~gold.cuts.Cut`, live rows only, the ``_cdc_*`` bookkeeping columns hidden (unless
asked for). All views of a source are defined at the same cut, so a join across them never sees
one table of a source transaction without the other. Views are plain Spark views over Delta time
travel: no data is copied, and moving gold to a newer cut is a catalog change.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from bronze.delta_checksum import version_checksum
from bronze.storage import LakePath, lake_path
from gold.cuts import Cut, TableAtCut
from pipeline.sql import qualified, quote_identifier, quote_string_literal

__all__ = [
    "CDC_PREFIX",
    "GOLD_SCHEMA",
    "current_state",
    "gold_frames",
    "register_views",
    "view_columns",
]

logger = logging.getLogger(__name__)

GOLD_SCHEMA = "gold"
CDC_PREFIX = "_cdc_"
"""Silver's bookkeeping columns start with this; gold hides them unless asked."""


def _silver_path(lake_root: LakePath, silver_table: str) -> LakePath:
    return lake_path(lake_root).absolute() / "silver" / silver_table


def view_columns(columns: Iterable[str], *, include_cdc: bool = False) -> list[str]:
    """The columns a gold view shows of a silver table's columns (source columns first)."""
    names = list(columns)
    if include_cdc:
        return names
    return [c for c in names if not c.startswith(CDC_PREFIX) and not c.startswith("__")]


def current_state(
    spark: Any, lake_root: LakePath, table: TableAtCut, *, include_cdc: bool = False
) -> Any:
    """The live rows of one silver table at a cut, as a DataFrame.

    Args:
        spark: The session.
        lake_root: The lake root.
        table: The table and its Delta version at the cut.
        include_cdc: Keep the ``_cdc_*`` columns (position, op, transaction, source time).

    Returns:
        A DataFrame of the rows that exist in the source at the cut.
    """
    from pyspark.sql import functions as F

    frame = (
        spark.read.format("delta")
        .option("versionAsOf", table.version)
        .load(str(_silver_path(lake_root, table.silver_table)))
    )
    live = frame.where(~F.col(f"{CDC_PREFIX}deleted"))
    return live.select(*view_columns(frame.columns, include_cdc=include_cdc))


def gold_frames(
    spark: Any, lake_root: LakePath, cuts: Iterable[Cut], *, include_cdc: bool = False
) -> dict[str, Any]:
    """Gold DataFrames of every table of the given cuts.

    Returns:
        ``<source>.<collection>`` (e.g. ``shop.public.orders``) -> DataFrame at the cut.
    """
    return {
        f"{cut.source}.{t.collection}": current_state(spark, lake_root, t, include_cdc=include_cdc)
        for cut in cuts
        for t in cut.tables.values()
    }


def _view_sql(lake_root: LakePath, table: TableAtCut, columns: list[str], cut: Cut) -> str:
    path = str(_silver_path(lake_root, table.silver_table))
    props = {
        "medallion.source": cut.source,
        # A collection name may hold a NUL (a legal JSON string), which no SQL literal can.
        "medallion.collection": table.collection.replace("\0", "\\u0000"),
        "medallion.silverBatch": str(cut.silver_batch),
        "medallion.position": cut.position.hex(),
        "medallion.sourceTsMs": "" if cut.source_ts_ms is None else str(cut.source_ts_ms),
        "medallion.silverVersion": str(table.version),
    }
    rendered = ", ".join(
        f"{quote_string_literal(k)} = {quote_string_literal(v)}" for k, v in props.items()
    )
    cols = ", ".join(quote_identifier(c) for c in columns)
    return (
        f"CREATE OR REPLACE VIEW {qualified(GOLD_SCHEMA, table.silver_table)} "
        f"TBLPROPERTIES ({rendered}) AS SELECT {cols} "
        f"FROM delta.{quote_identifier(path)} VERSION AS OF {int(table.version)} "
        f"WHERE NOT {quote_identifier(CDC_PREFIX + 'deleted')}"
    )


def register_views(
    spark: Any, lake_root: LakePath, cuts: Mapping[str, Cut] | Iterable[Cut]
) -> list[str]:
    """Define ``gold.<silver table>`` for every table of every cut (one cut per source).

    Each view carries the cut in its table properties (``medallion.position``,
    ``medallion.silverBatch`` ...), so ``SHOW TBLPROPERTIES`` tells which source commit it shows.

    Returns:
        The views defined, as ``gold.<name>``, sorted.
    """
    items = cuts.values() if isinstance(cuts, Mapping) else cuts
    if not spark.catalog.databaseExists(GOLD_SCHEMA):
        spark.sql(f"CREATE SCHEMA IF NOT EXISTS {quote_identifier(GOLD_SCHEMA)}")
    names = []
    defined = _defined
    for cut in items:
        for table in cut.tables.values():
            name = f"{GOLD_SCHEMA}.{table.silver_table}"
            # A view already at this cut needs no new definition (each analyses a Delta
            # snapshot of the table and writes the catalog, in every refresh of run --continuous).
            defines = (str(_silver_path(lake_root, table.silver_table)), table.version, cut)
            if defined.get(name) == defines and spark.catalog.tableExists(name):
                names.append(name)
                continue
            path = _silver_path(lake_root, table.silver_table)
            # With the version's checksum file in the log, Delta reads the protocol and
            # metadata from it: the definition runs no Spark job (a job per view without).
            checksum = version_checksum(path, table.version)
            schema = checksum.columns if checksum else _columns_at(spark, path, table.version)
            spark.sql(_view_sql(lake_root, table, view_columns(schema), cut))
            defined[name] = defines
            names.append(name)
    return sorted(names)


def _columns_at(spark: Any, path: LakePath, version: int) -> list[str]:
    """The silver table's columns at ``version``, from its Delta log (deltalake: a Spark read
    loads a snapshot of the version for it, and the view's definition loads another)."""
    from bronze.storage import open_delta

    try:
        return [f.name for f in open_delta(path, version=version).schema().fields]
    except Exception:  # noqa: BLE001 - what deltalake cannot read, Spark reads (and explains)
        logger.debug("gold views: %s v%s: columns read by Spark", path, version, exc_info=True)
    return list(spark.read.format("delta").option("versionAsOf", version).load(str(path)).columns)


_defined: dict[str, tuple[str, int, Cut]] = {}
"""The view definitions :func:`register_views` made in this process: view -> (silver path,
version, cut). The sessions of a process share one catalog, and only this function defines
``gold.*`` views; a view dropped meanwhile is missing from the catalog and defined again."""
