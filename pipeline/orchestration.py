"""Wiring between the configuration, the capture sources and bronze."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.registry import create_source
from pipeline.errors import PipelineError
from pipeline.landing import LandingAgent, LandingResult

__all__ = [
    "SLOT_COLUMNS",
    "land_sources",
    "bronze_status",
    "bronze_tables",
    "run_silver",
    "spark_for",
]

logger = logging.getLogger(__name__)


def bronze_tables(config: Any, lake_root: Path | None = None) -> BronzeTables:
    """The bronze table locations of a pipeline config (or of another lake root)."""
    return BronzeTables.under(Path(lake_root) if lake_root else Path(config.lake.root))


def _select(config: Any, names: Sequence[str]) -> list[Any]:
    # PipelineConfig.source raises ConfigError with the closest name for an unknown one.
    return [config.source(name) for name in names] if names else list(config.sources)


def land_sources(
    config: Any,
    names: Sequence[str] = (),
    *,
    follow: bool = False,
    max_batches: int | None = None,
    lake_root: Path | None = None,
) -> list[LandingResult]:
    """Run the landing agent of each selected source, one after the other.

    Args:
        config: The pipeline config.
        names: Source names; empty means all.
        follow: Keep polling (only sensible for one source per process).
        max_batches: Stop each agent after this many batches.
        lake_root: Override the config's lake root.

    Returns:
        One result per source.
    """
    writer = BronzeWriter(bronze_tables(config, lake_root))
    results = []
    for source_config in _select(config, names):
        agent = LandingAgent(
            create_source(source_config),
            writer,
            max_events=config.bronze.max_batch_size,
            max_transaction_events=config.bronze.max_transaction_size,
        )
        results.append(agent.run(follow=follow, max_batches=max_batches))
    return results


def _count_by_source(path: Path) -> dict[str, int]:
    try:
        dataset = DeltaTable(str(path)).to_pyarrow_dataset()
    except TableNotFoundError:
        return {}
    table = dataset.to_table(columns=[S.SOURCE])
    if table.num_rows == 0:
        return {}
    counts = pc.value_counts(table.column(S.SOURCE).combine_chunks())
    return {str(v["values"]): int(v["counts"]) for v in counts.to_pylist()}


SLOT_COLUMNS = ("slot", "slot_active", "slot_lag_bytes", "retained_wal_bytes", "slot_error")
"""Replication-slot columns of :func:`bronze_status` (None for sources without a slot)."""


def _slot_status(source_config: Any) -> dict[str, Any]:
    """The replication-slot columns of one source's status row.

    A ``postgresql`` source reports its slot: whether a consumer is connected, the WAL written
    since the slot's confirmed flush LSN (``slot_lag_bytes``: not yet acknowledged, i.e. not yet
    in bronze) and since its restart LSN (``retained_wal_bytes``: what the server keeps on disk for
    it). An unreachable server or a missing slot is reported in ``slot_error``, never raised:
    status must work when the source is down. Other sources get None in every column.
    """
    row: dict[str, Any] = dict.fromkeys(SLOT_COLUMNS)
    if str(source_config.connector) != "postgresql":
        return row
    from capture.postgresql import PostgresSource

    source = create_source(source_config)
    assert isinstance(source, PostgresSource)
    row["slot"] = source.settings.slot_name
    try:
        lag = source.slot_lag()
    except PipelineError as exc:
        row["slot_error"] = str(exc)
        return row
    if lag is None:
        row["slot_error"] = f"replication slot {row['slot']} does not exist"
        return row
    row["slot_active"] = lag["active"]
    row["slot_lag_bytes"] = lag["lag_bytes"]
    row["retained_wal_bytes"] = lag["retained_wal_bytes"]
    if lag["wal_status"] == "lost":
        row["slot_error"] = f"replication slot {row['slot']} is invalidated (wal_status lost)"
    return row


def bronze_status(config: Any, lake_root: Path | None = None) -> list[dict[str, Any]]:
    """Per configured source: last committed batch, landed and quarantined rows, its replication
    slot (:data:`SLOT_COLUMNS`, for ``postgresql`` sources) and the committed offset."""
    tables = bronze_tables(config, lake_root)
    writer = BronzeWriter(tables)
    landed = _count_by_source(tables.events)
    quarantined = _count_by_source(tables.quarantine)
    rows = []
    for source in config.sources:
        committed = writer.last_committed(agent_app_id(source.name))
        rows.append(
            {
                "source": source.name,
                "connector": str(source.connector),
                "last_batch": committed.batch_seq if committed else None,
                "landed": landed.get(source.name, 0),
                "quarantined": quarantined.get(source.name, 0),
                **_slot_status(source),
                "offset": committed.offset if committed else None,
            }
        )
    return rows


def spark_for(config: Any, lake_root: Path | None = None) -> Any:
    """The configured SparkSession, with medallion's SQL functions and the lake's tables."""
    from pipeline.spark import build_spark_session
    from pipeline.spark_functions import register_functions

    spark = build_spark_session(
        master=config.spark.master,
        app_name=config.spark.app_name,
        lake_root=Path(lake_root) if lake_root else Path(config.lake.root),
        conf=dict(config.spark.conf),
        jars_dir=config.spark.jars_dir,
    )
    register_functions(spark)
    return spark


def run_silver(
    config: Any, *, continuous: bool = False, interval: float = 10.0, lake_root: Path | None = None
) -> list[dict[str, Any]]:
    """Apply bronze to silver (once, or continuously); one summary row per silver table."""
    from silver.job import SilverJob

    root = Path(lake_root) if lake_root else Path(config.lake.root)
    job = SilverJob(
        spark_for(config, root),
        root,
        tombstone_retention_hours=config.silver.tombstone_retention_hours,
        transaction_timeout_seconds=config.silver.transaction_timeout_seconds,
        table_options=config.silver.table,
    )
    if continuous:
        job.run_continuous(interval)
        return []
    result = job.run_once()
    return [
        {
            "table": name,
            "merges": len(results),
            "events": sum(r.events for r in results),
            "inserted": sum(r.inserted for r in results),
            "updated": sum(r.updated for r in results),
            "quarantined": sum(r.rejected_count for r in results),
        }
        for name, results in result.merged.items()
    ]
