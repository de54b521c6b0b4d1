"""Prometheus metrics of ``capture --follow`` and ``run --continuous`` (docs/operations.md).

Three groups, all in :data:`REGISTRY`:

* Debezium's connector metrics per source, under the names its JMX exporter gives them
  (:mod:`pipeline.metrics_debezium`), counted from every batch the landing agent committed;
* the agent's and the silver/gold job's own (``medallion_capture_*``, ``medallion_silver_*``,
  ``medallion_gold_*``): batches, events, MERGE and micro-batch durations (histograms, from
  :class:`silver.timings.BatchTimings`), gold refresh stages, and the source's log (a PostgreSQL
  slot's retained WAL, a MySQL binlog's distance from bronze);
* the lake's (:mod:`pipeline.metrics_lake`): lags source -> bronze -> silver -> gold, gold's cut
  age, quarantined rows per reason, read from the lake at scrape time.

The capture, silver and gold code calls the ``on_*`` hooks here, one line each. They cost
nothing until :func:`start` has run (``metrics.address`` or ``--metrics-address``); the silver
and gold hooks also feed :mod:`pipeline.run_report` (``--output json``), which needs no server.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from pipeline import run_report
from pipeline.metrics_debezium import COLUMNS, DEBEZIUM_METRICS, DebeziumCollector
from pipeline.metrics_lake import LAKE_METRICS, LakeCollector
from pipeline.metrics_server import MetricsServer, serve

__all__ = [
    "REGISTRY",
    "metric_names",
    "on_batch_committed",
    "on_batch_queued",
    "on_capture_closed",
    "on_capture_opened",
    "on_gold_refreshed",
    "on_silver_batch",
    "start",
    "stop",
]

logger = logging.getLogger(__name__)

REGISTRY = CollectorRegistry(auto_describe=True)
"""Everything medallion serves (its own registry: the library's default one stays empty)."""

_DURATION_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)
"""Seconds; a MERGE of a small micro-batch takes a fraction of a second, a large one minutes."""

DEBEZIUM = DebeziumCollector()
REGISTRY.register(DEBEZIUM)

CAPTURE_BATCHES = Counter(
    "medallion_capture_batches", "Batches committed to bronze.", ["source"], registry=REGISTRY
)
CAPTURE_LANDED = Counter(
    "medallion_capture_landed_events",
    "Records appended to bronze/events.",
    ["source"],
    registry=REGISTRY,
)
CAPTURE_QUARANTINED = Counter(
    "medallion_capture_quarantined_records",
    "Records appended to bronze/quarantine.",
    ["source"],
    registry=REGISTRY,
)
SILVER_BATCH_SECONDS = Histogram(
    "medallion_silver_batch_duration_seconds",
    "Seconds per silver micro-batch (gold refresh included in run --continuous).",
    buckets=_DURATION_BUCKETS,
    registry=REGISTRY,
)
SILVER_MERGE_SECONDS = Histogram(
    "medallion_silver_merge_duration_seconds",
    "Seconds of the MERGE into one silver table, per micro-batch.",
    ["table"],
    buckets=_DURATION_BUCKETS,
    registry=REGISTRY,
)
SILVER_STAGE_SECONDS = Counter(
    "medallion_silver_stage_seconds",
    "Seconds spent per stage of the silver micro-batches (silver/timings.py).",
    ["stage"],
    registry=REGISTRY,
)
GOLD_REFRESH_SECONDS = Histogram(
    "medallion_gold_refresh_duration_seconds",
    "Seconds per gold refresh.",
    buckets=_DURATION_BUCKETS,
    registry=REGISTRY,
)
GOLD_STAGE_SECONDS = Counter(
    "medallion_gold_refresh_stage_seconds",
    "Seconds spent per stage of the gold refreshes (cuts, checks, publish, views, derived).",
    ["stage"],
    registry=REGISTRY,
)
GOLD_HELD = Gauge(
    "medallion_gold_held",
    "1 when the last refresh held the source at its last good cut (a blocking check failed).",
    ["source"],
    registry=REGISTRY,
)

SILVER_TOTALS: Mapping[str, tuple[str, str]] = {
    "medallion_silver_batches": ("batches", "Silver micro-batches processed."),
    "medallion_silver_events_read": ("read", "Data events released to silver."),
    "medallion_silver_events_applied": ("applied", "Data events applied to silver tables."),
    "medallion_silver_events_quarantined": ("quarantined", "Events refused into _quarantine."),
    "medallion_silver_values_quarantined": ("quarantined_values", "Values applied as NULL."),
    "medallion_silver_transactions_timed_out": (
        "tx_timed_out",
        "Transactions applied without their END after silver.transaction.timeout.seconds.",
    ),
}
"""Counter family (``_total`` served) -> (:class:`silver.job.SilverRunResult` field, help)."""

LOG_METRICS: Mapping[str, tuple[str, str]] = {
    "medallion_source_log_retained_bytes": (
        "retained_wal_bytes",
        "Log the server keeps for the source (a PostgreSQL slot's WAL, the MySQL binlog).",
    ),
    "medallion_source_log_pending_bytes": (
        "slot_lag_bytes",
        "Log written after what bronze holds (slot lag; the binlog distance for MySQL).",
    ),
    "medallion_source_log_headroom_bytes": (
        "retention_headroom_bytes",
        "WAL that can still be written before max_slot_wal_keep_size invalidates the slot.",
    ),
    "medallion_source_log_up": ("", "1 when the last log query succeeded."),
}
"""Family -> (key of :meth:`capture.base.CaptureSource.log_status`, help)."""

_enabled = False
_server: MetricsServer | None = None
_started: list[Collector] = []
"""Collectors :func:`start` registered (:func:`stop` removes them)."""


class _SilverCollector(Collector):
    """The silver job's running totals, read from its cumulative result at scrape time."""

    def __init__(self) -> None:
        self.result: Any = None

    def collect(self) -> Iterator[CounterMetricFamily]:
        result = self.result
        for name, (attribute, help_text) in SILVER_TOTALS.items():
            family = CounterMetricFamily(name, help_text)
            family.add_metric([], getattr(result, attribute, 0) if result is not None else 0)
            yield family
        per_table = CounterMetricFamily(
            "medallion_silver_table_events", "Events merged per silver table.", labels=["table"]
        )
        for table, merges in sorted((result.merged if result is not None else {}).items()):
            per_table.add_metric([table], sum(m.events for m in merges))
        yield per_table


SILVER = _SilverCollector()
REGISTRY.register(SILVER)


class _LogCollector(Collector):
    """The database log behind each source that reports one, asked at most every
    ``interval_s`` (one short query; the agent's own connection is never used)."""

    def __init__(self, config: Any, names: tuple[str, ...], interval_s: float = 2.0) -> None:
        self.config = config
        self.names = names
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._cached: tuple[float, list[tuple[str, str | None, dict[str, Any]]]] | None = None

    def _read(self) -> list[tuple[str, str | None, dict[str, Any]]]:
        from bronze.writer import BronzeWriter, agent_app_id
        from capture.registry import create_source
        from pipeline.errors import PipelineError
        from pipeline.orchestration import bronze_tables

        writer = BronzeWriter(bronze_tables(self.config))
        out: list[tuple[str, str | None, dict[str, Any]]] = []
        for name in self.names:
            try:
                source = create_source(self.config.source(name))
            except PipelineError:
                continue
            if not source.REPORTS_LOG:
                continue
            committed = writer.last_committed(agent_app_id(name))
            try:
                row = source.log_status(committed.offset if committed else None)
            except PipelineError as exc:
                row = {"slot_error": str(exc)}
            if row.get("slot_error"):
                logger.debug("metrics: the log of %s: %s", name, row["slot_error"])
            out.append((name, source.log_name, row))
        return out

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] >= self.interval_s:
                try:
                    self._cached = (now, self._read())
                except Exception as exc:  # noqa: BLE001 - a scrape answers while bronze is down
                    logger.warning("metrics: reading the source logs failed: %s", exc)
                    self._cached = (now, [])
            rows = self._cached[1]
        for name, (key, help_text) in LOG_METRICS.items():
            family = GaugeMetricFamily(name, help_text, labels=["source", "log"])
            for source, log, row in rows:
                value = (0 if row.get("slot_error") else 1) if not key else row.get(key)
                if value is not None:
                    family.add_metric([source, log or ""], float(value))
            yield family


def start(config: Any, address: str, sources: tuple[str, ...] = ()) -> MetricsServer:
    """Serve :data:`REGISTRY` at ``address`` and turn the hooks on.

    Args:
        config: The pipeline config (the lake root, the sources).
        address: ``host:port``.
        sources: The sources this process captures (their logs are reported); empty: none.

    Raises:
        ConfigError: The address cannot be served.
    """
    global _enabled, _server
    if _server is not None:
        return _server
    _started.append(LakeCollector(Path(config.lake.root), tuple(config.source_names)))
    if sources:
        _started.append(_LogCollector(config, sources))
    for collector in _started:
        REGISTRY.register(collector)
    try:
        _server = serve(address, REGISTRY)
    except Exception:
        stop()
        raise
    _enabled = True
    return _server


def stop() -> None:
    """Stop serving, turn the hooks off and forget the per-source and per-table values (a test
    that served metrics in-process leaves the next one without its sources; the two unlabelled
    histograms keep counting, as prometheus-client cannot reset them)."""
    global _enabled, _server
    _enabled = False
    if _server is not None:
        _server.close()
        _server = None
    while _started:
        REGISTRY.unregister(_started.pop())
    DEBEZIUM.clear()
    SILVER.result = None
    for metric in (
        CAPTURE_BATCHES,
        CAPTURE_LANDED,
        CAPTURE_QUARANTINED,
        SILVER_MERGE_SECONDS,
        SILVER_STAGE_SECONDS,
        GOLD_STAGE_SECONDS,
        GOLD_HELD,
    ):
        metric.clear()


def metric_names() -> set[str]:
    """Every sample name served (``_total``, ``_bucket``, ``_sum`` and ``_count`` included):
    the Grafana dashboard's expressions may name only these."""
    names = {f"debezium_metrics_{a}" for a in DEBEZIUM_METRICS}
    names |= set(LAKE_METRICS) | set(LOG_METRICS)
    names |= {f"{n}_total" for n in SILVER_TOTALS} | {"medallion_silver_table_events_total"}
    for metric in (
        CAPTURE_BATCHES,
        CAPTURE_LANDED,
        CAPTURE_QUARANTINED,
        SILVER_BATCH_SECONDS,
        SILVER_MERGE_SECONDS,
        SILVER_STAGE_SECONDS,
        GOLD_REFRESH_SECONDS,
        GOLD_STAGE_SECONDS,
        GOLD_HELD,
    ):
        for family in metric.describe():
            if family.type == "histogram":
                names |= {f"{family.name}_{s}" for s in ("bucket", "sum", "count")}
            elif family.type == "counter":
                names.add(f"{family.name}_total")
            else:
                names.add(family.name)
    return names


# --- hooks (one call each in capture, landing, silver and gold) --------------------------------
def on_capture_opened(source: Any, queue_capacity: int) -> None:
    """The agent opened ``source`` (Debezium's ``Connected``)."""
    if _enabled:
        stats = DEBEZIUM.source(source.name, str(source.KIND))
        stats.connected, stats.queue_capacity = True, queue_capacity


def on_capture_closed(source: Any) -> None:
    """The agent closed ``source``."""
    if _enabled:
        DEBEZIUM.source(source.name, str(source.KIND)).connected = False


def on_batch_queued(source: Any, batch: Any) -> None:
    """A batch of ``source`` waits for its bronze commit (Debezium's queue)."""
    if _enabled:
        DEBEZIUM.source(source.name, str(source.KIND)).queue(len(batch.builder))


def on_batch_committed(source: Any, batch: Any, offset: Mapping[str, Any], result: Any) -> None:
    """A batch of ``source`` is committed in bronze (``result``: its
    :class:`bronze.writer.CommitResult`) and acknowledged."""
    if not _enabled:
        return
    builder = batch.builder
    stats = DEBEZIUM.source(source.name, str(source.KIND))
    rows = builder.column_values(*COLUMNS)
    stats.committed(rows, result.quarantined, offset, builder.partial_transactions)
    CAPTURE_BATCHES.labels(source.name).inc()
    CAPTURE_LANDED.labels(source.name).inc(result.events)
    CAPTURE_QUARANTINED.labels(source.name).inc(result.quarantined)


def on_silver_batch(timings: Any, result: Any) -> None:
    """A silver micro-batch committed: its :class:`silver.timings.BatchTimings` and the job's
    cumulative :class:`silver.job.SilverRunResult`."""
    run_report.add_silver_batch(timings)
    if not _enabled:
        return
    SILVER.result = result
    SILVER_BATCH_SECONDS.observe(timings.total)
    for stage, seconds in dict(timings.stages).items():
        SILVER_STAGE_SECONDS.labels(stage).inc(seconds)
    for table, stages in dict(timings.tables).items():
        if "merge" in stages:
            SILVER_MERGE_SECONDS.labels(table).observe(stages["merge"])


def on_gold_refreshed(
    spent: Mapping[str, float], held: Mapping[str, Any], current: Mapping[str, Any]
) -> None:
    """A gold refresh finished: seconds per stage, the sources held at their last good cut
    and the cut each source shows now."""
    run_report.add_stages("gold", spent)
    if not _enabled:
        return
    GOLD_REFRESH_SECONDS.observe(sum(spent.values()))
    for stage, seconds in spent.items():
        GOLD_STAGE_SECONDS.labels(stage).inc(seconds)
    for source in {*current, *held}:
        GOLD_HELD.labels(source).set(1 if source in held else 0)
