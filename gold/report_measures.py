"""What a full quality run measures besides its checks, for the report's plots over runs.

Per table, from the one aggregate the run already makes over the table at its cut
(:func:`table_facts`, which used to compute only the newest change time for ``freshness``):

* ``rows``: live rows at the cut;
* ``freshness_s``: the run's clock minus the source commit time of the table's newest change;
* ``lag_source_bronze_s``: for the table's last applied change still visible (the highest
  ``_cdc_position`` among live rows), its bronze batch's commit time (``ingest_ts``) minus its
  source commit time;
* ``lag_bronze_silver_s``: when silver wrote that row (``_cdc_updated_at``) minus that
  ``ingest_ts``.

The bronze commit time is read with deltalake, per source one read pruned by the statistics of
``agent_id``/``batch_seq`` to the files of the batches named. The gold stage (silver to gold) is
not known yet when the run records: gold moves after it. :mod:`gold.report_history` derives it
from ``gold/_published`` when it reads the history.

Nothing here may fail a quality run: a value that cannot be measured is left out (a gap in its
plot) and logged.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow.compute as pc
from deltalake.exceptions import TableNotFoundError

from bronze.storage import LakePath, lake_path, open_delta
from gold.quality_results import Measure

__all__ = [
    "BRONZE_TO_SILVER",
    "FRESHNESS",
    "ROWS",
    "SILVER_TO_GOLD",
    "SOURCE_TO_BRONZE",
    "TableFacts",
    "run_measures",
    "table_facts",
]

logger = logging.getLogger(__name__)

ROWS = "rows"
FRESHNESS = "freshness_s"
SOURCE_TO_BRONZE = "lag_source_bronze_s"
BRONZE_TO_SILVER = "lag_bronze_silver_s"
SILVER_TO_GOLD = "lag_silver_gold_s"
"""Per source, derived when the history is read (gold moves after the run)."""


@dataclass(frozen=True, slots=True)
class TableFacts:
    """One silver table at a cut, from one aggregate over its live rows.

    Attributes:
        rows: Live rows.
        newest_source_ts_ms: The newest source commit time of any live row (``freshness``).
        last_source_ts_ms: The source commit time of the last applied change still visible.
        last_bronze_batch: That change's bronze batch, ``<agent id>#<batch seq>``.
        last_silver_write: When silver wrote that row.
    """

    rows: int
    newest_source_ts_ms: int | None
    last_source_ts_ms: int | None = None
    last_bronze_batch: str | None = None
    last_silver_write: dt.datetime | None = None


def table_facts(frame: Any) -> TableFacts:
    """Aggregate a table's live rows at a cut (with its ``_cdc_*`` columns) in one Spark job.

    Args:
        frame: :func:`gold.views.current_state` with ``include_cdc=True``.

    Returns:
        The facts; the last change's columns are None on a table written before silver kept them.
    """
    from pyspark.sql import functions as F

    from silver.merge import BRONZE_BATCH, POSITION, SOURCE_TS, UPDATED_AT

    present = set(frame.columns)
    aggs = [F.count(F.lit(1)).alias("rows"), F.max(SOURCE_TS).alias("newest")]
    tracked = {POSITION, BRONZE_BATCH, UPDATED_AT} <= present
    if tracked:
        aggs += [
            F.max_by(SOURCE_TS, POSITION).alias("ts"),
            F.max_by(BRONZE_BATCH, POSITION).alias("batch"),
            F.max_by(UPDATED_AT, POSITION).alias("written"),
        ]
    row = frame.agg(*aggs).collect()[0]
    if not tracked:
        return TableFacts(int(row["rows"]), row["newest"])
    written = row["written"]
    if written is not None and written.tzinfo is None:
        # Spark hands a naive datetime in the session time zone, which the suite and the
        # pipeline keep at UTC (pipeline.spark).
        written = written.replace(tzinfo=dt.UTC)
    return TableFacts(int(row["rows"]), row["newest"], row["ts"], row["batch"], written)


def _seconds(later: dt.datetime | None, earlier: dt.datetime | None) -> float | None:
    if later is None or earlier is None:
        return None
    return (later - earlier).total_seconds()


def _from_ms(ms: int | None) -> dt.datetime | None:
    # Some snapshot rows carry source.ts_ms 0: no commit time, not 1970.
    if ms is None or ms <= 0:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _batch(name: str | None) -> tuple[str, int] | None:
    if not name or "#" not in name:
        return None
    agent, _, seq = name.rpartition("#")
    return (agent, int(seq)) if seq.isdigit() else None


def bronze_commit_times(
    lake_root: LakePath, source: str, batches: set[tuple[str, int]]
) -> dict[tuple[str, int], dt.datetime]:
    """``ingest_ts`` of the named bronze batches of a source (one pruned deltalake read).

    Args:
        lake_root: The lake root.
        source: The source (bronze's partition).
        batches: ``(agent id, batch seq)`` pairs.

    Returns:
        The commit time per batch found.
    """
    if not batches:
        return {}
    try:
        table = open_delta(lake_path(lake_root) / "bronze" / "events")
    except TableNotFoundError:
        return {}
    wanted = None
    for agent, seq in sorted(batches):
        term = (pc.field("agent_id") == agent) & (pc.field("batch_seq") == seq)
        wanted = term if wanted is None else wanted | term
    found = table.to_pyarrow_table(
        columns=["agent_id", "batch_seq", "ingest_ts"],
        filters=(pc.field("source") == source) & wanted,
    )
    out: dict[tuple[str, int], dt.datetime] = {}
    for r in found.to_pylist():
        out.setdefault((r["agent_id"], int(r["batch_seq"])), r["ingest_ts"])
    return out


def run_measures(
    lake_root: LakePath, facts: Mapping[str, Mapping[str, TableFacts]], now: dt.datetime
) -> tuple[Measure, ...]:
    """The measures of a full run from its tables' facts.

    Args:
        lake_root: The lake root.
        facts: Per source, per source table (``<schema>.<table>``), its facts.
        now: The run's clock (the one ``freshness`` used).

    Returns:
        The measures, per source and table in name order; a value that cannot be known is
        absent.
    """
    out: list[Measure] = []
    for source in sorted(facts):
        tables = facts[source]
        batches = {b for f in tables.values() if (b := _batch(f.last_bronze_batch)) is not None}
        try:
            landed = bronze_commit_times(lake_root, source, batches)
        except Exception:  # noqa: BLE001 - a plot gap, never a failed quality run
            logger.warning("quality: bronze commit times of %s unreadable", source, exc_info=True)
            landed = {}
        for table in sorted(tables):
            f = tables[table]
            batch = _batch(f.last_bronze_batch)
            ingest = landed.get(batch) if batch is not None else None
            values = {
                ROWS: float(f.rows),
                FRESHNESS: _seconds(now, _from_ms(f.newest_source_ts_ms)),
                SOURCE_TO_BRONZE: _seconds(ingest, _from_ms(f.last_source_ts_ms)),
                BRONZE_TO_SILVER: _seconds(f.last_silver_write, ingest),
            }
            out.extend(
                Measure(source, table, name, value)
                for name, value in values.items()
                if value is not None
            )
    return tuple(out)
