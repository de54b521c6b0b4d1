"""Wiring between the configuration, the capture sources and bronze."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow.compute as pc
from deltalake.exceptions import TableNotFoundError

from bronze import schema as S
from bronze.storage import LakePath, lake_path, open_delta
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.registry import create_source
from pipeline.errors import GoldError, PipelineError
from pipeline.landing import LandingAgent, LandingResult

__all__ = [
    "SLOT_COLUMNS",
    "land_sources",
    "landing_agent",
    "bronze_status",
    "bronze_tables",
    "run_silver",
    "run_pipeline",
    "reconcile_due",
    "spark_for",
]

logger = logging.getLogger(__name__)


def bronze_tables(config: Any, lake_root: LakePath | None = None) -> BronzeTables:
    """The bronze table locations of a pipeline config (or of another lake root)."""
    return BronzeTables.under(lake_path(lake_root) if lake_root else lake_path(config.lake.root))


def _select(config: Any, names: Sequence[str]) -> list[Any]:
    # PipelineConfig.source raises ConfigError with the closest name for an unknown one.
    return [config.source(name) for name in names] if names else list(config.sources)


def land_sources(
    config: Any,
    names: Sequence[str] = (),
    *,
    follow: bool = False,
    max_batches: int | None = None,
    lake_root: LakePath | None = None,
    stop: threading.Event | None = None,
) -> list[LandingResult]:
    """Run the landing agent of each selected source, one after the other.

    Args:
        config: The pipeline config.
        names: Source names; empty means all.
        follow: Keep polling (only sensible for one source per process).
        max_batches: Stop each agent after this many batches.
        lake_root: Override the config's lake root.
        stop: Set it to stop after the batch in flight (a SIGTERM); sources not started yet
            are skipped.

    Returns:
        One result per source.
    """
    writer = BronzeWriter(bronze_tables(config, lake_root), config.bronze.parquet_compression)
    stop = stop or threading.Event()
    return [
        landing_agent(config, source_config, writer).run(
            follow=follow, max_batches=max_batches, stop=stop
        )
        for source_config in _select(config, names)
        if not stop.is_set()
    ]


def landing_agent(config: Any, source_config: Any, writer: BronzeWriter) -> LandingAgent:
    """The landing agent of one source, with the source's own batch and poll settings.

    Args:
        config: The pipeline config (``bronze`` section).
        source_config: One of its sources.
        writer: The bronze writer.

    Returns:
        The agent, not yet run: ``max.batch.size`` of the source when set, else
        ``bronze.max.batch.size``; ``poll.interval.ms`` of the source when it has one.
    """
    # Sources without these Debezium engine keys (debezium_json) use the pipeline-wide values.
    max_events = getattr(source_config, "max_batch_size", None) or config.bronze.max_batch_size
    poll_ms = getattr(source_config, "poll_interval_ms", None)
    return LandingAgent(
        create_source(source_config),
        writer,
        max_events=max_events,
        max_transaction_events=config.bronze.max_transaction_size,
        poll_interval_s=1.0 if poll_ms is None else poll_ms / 1000,
    )


def _count_by_source(path: LakePath) -> dict[str, int]:
    try:
        dataset = open_delta(path).to_pyarrow_dataset()
    except TableNotFoundError:
        return {}
    table = dataset.to_table(columns=[S.SOURCE])
    if table.num_rows == 0:
        return {}
    counts = pc.value_counts(table.column(S.SOURCE).combine_chunks())
    return {str(v["values"]): int(v["counts"]) for v in counts.to_pylist()}


SLOT_COLUMNS = (
    "slot",
    "slot_active",
    "slot_lag_bytes",
    "retained_wal_bytes",
    "retention_headroom_bytes",
    "slot_error",
)
"""Replication-slot columns of :func:`bronze_status` (None for sources without a slot)."""


def _slot_status(source_config: Any, offset: Any) -> dict[str, Any]:
    """The log columns of one source's status row (:data:`SLOT_COLUMNS`).

    Sources whose class sets ``REPORTS_LOG`` report how far their database's log is ahead of
    bronze and how much of it the server keeps (a PostgreSQL slot; a MySQL binlog, see
    :meth:`capture.base.CaptureSource.log_status`); other sources get None in every column.
    An unreachable server is reported in ``slot_error``, never raised: status must work when
    the source is down.
    """
    row: dict[str, Any] = dict.fromkeys(SLOT_COLUMNS)
    try:
        source = create_source(source_config)
    except PipelineError:
        return row  # a kind not built or not installed here has no log to report
    if not source.REPORTS_LOG:
        return row
    row["slot"] = source.log_name
    try:
        row.update(source.log_status(offset))
    except PipelineError as exc:
        row["slot_error"] = str(exc)
    return row


def bronze_status(config: Any, lake_root: LakePath | None = None) -> list[dict[str, Any]]:
    """Per configured source: last committed batch, landed and quarantined rows, its replication
    log (:data:`SLOT_COLUMNS`: a PostgreSQL slot, a MySQL binlog) and the committed offset."""
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
                **_slot_status(source, committed.offset if committed else None),
                "offset": committed.offset if committed else None,
            }
        )
    return rows


def spark_for(config: Any, lake_root: LakePath | None = None) -> Any:
    """The configured SparkSession, with medallion's SQL functions, the lake's tables and the
    ``gold.*`` views at the cuts gold shows."""
    from pipeline.spark import build_spark_session
    from pipeline.spark_functions import register_functions

    spark = build_spark_session(
        master=config.spark.master,
        app_name=config.spark.app_name,
        lake_root=lake_path(lake_root) if lake_root else lake_path(config.lake.root),
        conf=dict(config.spark.conf),
        jars_dir=config.spark.jars_dir,
        catalog=config.spark.metastore(),
    )
    register_functions(spark)
    from gold.refresh import register_published_views

    try:
        register_published_views(
            spark, lake_path(lake_root) if lake_root else lake_path(config.lake.root)
        )
    except Exception as exc:  # a session must still open when gold cannot be shown
        logger.warning("gold views not defined: %s", exc)
    return spark


def _silver_job(config: Any, spark: Any, root: LakePath, **kwargs: Any) -> Any:
    from silver.job import SilverJob

    return SilverJob(
        spark,
        root,
        tombstone_retention_hours=config.silver.tombstone_retention_hours,
        transaction_timeout_seconds=config.silver.transaction_timeout_seconds,
        table_options=config.silver.table,
        parallelism=config.silver.apply_parallelism,
        compact_interval_seconds=config.silver.compact_interval_seconds,
        compact_min_files=config.silver.compact_min_files,
        compact_zorder=config.silver.compact_zorder,
        compact_file_bytes=config.silver.compact_file_bytes,
        **kwargs,
    )


def _silver_rows(result: Any) -> list[dict[str, Any]]:
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


def run_silver(
    config: Any,
    *,
    continuous: bool = False,
    interval: float = 1.0,
    lake_root: LakePath | None = None,
) -> list[dict[str, Any]]:
    """Apply bronze to silver (once, or continuously); one summary row per silver table."""
    root = lake_path(lake_root) if lake_root else lake_path(config.lake.root)
    job = _silver_job(config, spark_for(config, root), root)
    if continuous:
        job.run_continuous(interval)
        return []
    return _silver_rows(job.run_once())


def reconcile_due(
    config: Any, spark: Any, lake_root: LakePath, *, force: bool = False
) -> Callable[[Mapping[str, Any]], list[Any]]:
    """The scheduled reconciliation as a gold-refresh hook: for each candidate cut of a source
    that has a database to compare with and was not reconciled within
    ``quality.reconcile.interval.seconds`` (any time with ``force``), reconcile it and return
    the outcomes."""
    interval = config.quality.reconcile_interval_seconds

    def hook(candidates: Mapping[str, Any]) -> list[Any]:
        if interval is None and not force:
            return []
        from gold.outcome import CheckOutcome
        from gold.reconcile import can_reconcile, last_reconciled, reconcile_source

        outcomes: list[Any] = []
        moment = time.time()
        done = last_reconciled(lake_root)
        for source, cut in sorted(candidates.items()):
            if source not in config.source_names or not can_reconcile(config.source(source)):
                continue  # a source no longer configured has no database to ask
            last = done.get(source)
            if not force and last is not None and interval and moment - last < interval:
                continue
            try:
                result = reconcile_source(spark, config, lake_root, source, cut=cut)
            except PipelineError as exc:
                # The database being down must not stop gold: the check fails, visibly.
                logger.warning("reconciliation of %s failed: %s", source, exc)
                outcomes.append(
                    CheckOutcome(
                        check="reconcile",
                        source=source,
                        table=None,
                        success=False,
                        observed=f"not reconciled: {exc}",
                        details="the comparison with the source database could not run",
                    )
                )
                continue
            found = result.outcomes()
            if config.quality.reconcile_repair and not result.success:
                from gold.reconcile_repair import scheduled_repair

                found = scheduled_repair(config, source, result, found, lake_root)
            outcomes.extend(found)
        return outcomes

    return hook


def _register_new_tables(config: Any, spark: Any, root: LakePath) -> None:
    """With a persistent catalog, name the silver tables this run created (``silver.<table>``),
    so other applications see them now, not after the next session start."""
    if config.spark.metastore() is not None:
        from pipeline.spark import register_lake_tables

        register_lake_tables(spark, root)


def run_pipeline(
    config: Any,
    *,
    continuous: bool = False,
    interval: float = 1.0,
    lake_root: LakePath | None = None,
    run_checks: bool | None = None,
) -> tuple[list[dict[str, Any]], Any]:
    """``medallion run``: bronze -> silver, then gold moves to the newest consistent cut that
    passes its blocking quality checks (after every micro-batch with ``continuous``).

    With ``continuous``, gold moves on the blocking checks alone (:class:`gold.quality.Gate`);
    the full quality run and the scheduled reconciliation run on their own thread every
    ``quality.interval.seconds`` (:class:`gold.quality_schedule.BackgroundQuality`), so they
    never hold a micro-batch up. A reconciliation configured to block gold stays on the path.

    Returns:
        The silver summary rows and the last :class:`gold.refresh.GoldRefresh`.
    """
    from gold.quality import RECONCILE, Gate, severity_of
    from gold.quality_schedule import BackgroundQuality
    from gold.refresh import refresh_gold
    from pipeline.config import Severity

    root = lake_path(lake_root) if lake_root else lake_path(config.lake.root)
    spark = spark_for(config, root)
    hook = reconcile_due(config, spark, root)
    last: list[Any] = [None]
    if not continuous:
        rows = _silver_rows(_silver_job(config, spark, root).run_once())
        _register_new_tables(config, spark, root)
        last[0] = refresh_gold(spark, config, root, run_checks=run_checks, extra_checks=hook)
        return rows, last[0]

    gate = Gate()
    checks = config.quality.enabled if run_checks is None else run_checks
    blocking_reconcile = severity_of(RECONCILE, config) is Severity.BLOCK
    background = BackgroundQuality(
        spark,
        config,
        root,
        gate,
        interval_seconds=config.quality.interval_seconds,
        extra_checks=None if blocking_reconcile else hook,
    )

    def gold(_batch_id: int | None = None) -> None:
        _register_new_tables(config, spark, root)
        last[0] = refresh_gold(
            spark,
            config,
            root,
            run_checks=run_checks,
            extra_checks=hook if blocking_reconcile else None,
            gate=gate,
        )
        if checks:
            background.poke(last[0].current)

    try:
        _silver_job(config, spark, root, after_batch=gold).run_continuous(interval)
    finally:
        background.close()
    return [], last[0]


def run_quality_now(
    config: Any,
    names: Sequence[str] = (),
    *,
    reconcile: bool = False,
    lake_root: LakePath | None = None,
) -> Any:
    """``medallion quality``: check the cut gold shows per source (its newest consistent cut
    before the first publication); publishes nothing.

    Returns:
        The :class:`gold.quality.QualityRun`.
    """
    from gold.cuts import latest_cut
    from gold.publish import published_cuts
    from gold.quality import run_quality

    root = lake_path(lake_root) if lake_root else lake_path(config.lake.root)
    shown = published_cuts(root)
    cuts = {}
    for source in _select(config, names):
        cut = shown.get(source.name) or latest_cut(root, source.name)
        if cut is not None:
            cuts[source.name] = cut
    if not cuts:
        raise GoldError(
            "nothing to check: no source has a consistent cut in silver yet "
            "(run 'medallion capture' and 'medallion run' first)"
        )
    spark = spark_for(config, root)
    extra = reconcile_due(config, spark, root, force=True)(cuts) if reconcile else []
    return run_quality(spark, config, root, cuts, extra=extra)


def reconcile_now(
    config: Any, name: str, *, ranges: int = 16, lake_root: LakePath | None = None
) -> Any:
    """``medallion reconcile <source>``: compare the source database with the gold it shows.

    Returns:
        The :class:`gold.reconcile.ReconcileResult`.
    """
    from gold.reconcile import reconcilable, reconcile_source

    root = lake_path(lake_root) if lake_root else lake_path(config.lake.root)
    reconcilable(config, name)  # fails before Spark starts: unknown name, no database
    return reconcile_source(spark_for(config, root), config, root, name, ranges=ranges)
