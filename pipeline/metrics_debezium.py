"""Debezium's connector metrics, per source, as its Prometheus JMX exporter names them.

Debezium publishes snapshot and streaming metrics as JMX MBeans
(``debezium.<plugin>:type=connector-metrics,context=<snapshot|streaming>,server=<name>``); the
exporter configuration Debezium ships (debezium-examples, ``monitoring``) turns each attribute
into ``debezium_metrics_<Attribute>{plugin, name, context}``, and ``RowsScanned`` into
``debezium_metrics_RowsScanned{plugin, name, context, table}``. medallion serves the same names
and labels, so Debezium's dashboards and alert rules work on a medallion agent unchanged. Like
the exporter, every value is a gauge (no ``_total`` suffix): counters restart at 0 with the
process, as Debezium's do with the connector.

The values come from each batch the landing agent committed (:meth:`SourceStats.committed`):
the batch's events (op, snapshot flag, table, transaction, source time) and the committed
offset (a database agent's snapshot progress: its tables and the one being read). Nothing is
counted before bronze has committed it, so "events seen" equals what bronze holds.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bronze import schema as S

__all__ = ["DEBEZIUM_METRICS", "PLUGINS", "DebeziumCollector", "SourceStats"]

PLUGINS: Mapping[str, str] = {
    "postgresql": "postgres",
    "mysql": "mysql",
    "mongodb": "mongodb",
    "sqlserver": "sql_server",
    "oracle": "oracle",
    "db2": "db2",
    "yugabytedb": "postgres",
}
"""Connector kind -> the ``plugin`` label (Debezium's JMX domain ``debezium.<plugin>``); a kind
not listed (``debezium_json``) uses its own name."""

_SNAPSHOT_FLAGS = frozenset(
    {"true", "first", "first_in_data_collection", "last_in_data_collection"}
)
"""``source.snapshot`` values of an initial or blocking snapshot's rows before its last one."""

DEBEZIUM_METRICS: Mapping[str, tuple[str, str]] = {
    # snapshot context
    "TotalTableCount": ("snapshot", "Tables the snapshot reads."),
    "RemainingTableCount": ("snapshot", "Tables the snapshot has not finished yet."),
    "SnapshotRunning": ("snapshot", "1 while a snapshot runs."),
    "SnapshotCompleted": ("snapshot", "1 once a snapshot completed in this run."),
    "SnapshotDurationInSeconds": ("snapshot", "Seconds the snapshot has taken so far."),
    "RowsScanned": ("snapshot", "Snapshot rows landed, per table."),
    # both contexts
    "TotalNumberOfEventsSeen": ("both", "Data change events landed in bronze."),
    "NumberOfErroneousEvents": ("both", "Records quarantined in bronze."),
    "MilliSecondsSinceLastEvent": ("both", "Milliseconds since the last event was landed."),
    "QueueTotalCapacity": ("both", "Events one batch may hold (max.batch.size)."),
    "QueueRemainingCapacity": ("both", "Capacity not used by a batch waiting for its commit."),
    # streaming context
    "Connected": ("streaming", "1 while the agent is connected to its source."),
    "MilliSecondsBehindSource": (
        "streaming",
        "Milliseconds between the last streamed event's source time and its bronze commit.",
    ),
    "TotalNumberOfCreateEventsSeen": ("streaming", "Create (op c) events landed."),
    "TotalNumberOfUpdateEventsSeen": ("streaming", "Update (op u) events landed."),
    "TotalNumberOfDeleteEventsSeen": ("streaming", "Delete (op d) events landed."),
    "NumberOfCommittedTransactions": ("streaming", "Source transactions landed in full."),
}
"""Attribute -> (context, help): every ``debezium_metrics_<Attribute>`` served."""

_COLUMNS = (S.KIND, S.OP, S.COLLECTION, S.TX_ID, S.SNAPSHOT, S.SOURCE_TS_MS)


@dataclass
class _Context:
    events: int = 0
    erroneous: int = 0
    last_event_at: float | None = None


@dataclass
class SourceStats:
    """What one source's agent landed since the process started (thread-safe).

    Args:
        name: The source name (the ``name`` label, Debezium's logical server name).
        plugin: The ``plugin`` label.
        queue_capacity: ``max.batch.size``.
    """

    name: str
    plugin: str
    queue_capacity: int = 0
    connected: bool = False
    queued: int = 0
    snapshot: _Context = field(default_factory=_Context)
    streaming: _Context = field(default_factory=_Context)
    ops: Counter[str] = field(default_factory=Counter)
    transactions: int = 0
    behind_ms: int = -1
    rows_scanned: Counter[str] = field(default_factory=Counter)
    snapshot_tables: set[str] = field(default_factory=set)
    total_tables: int = 0
    remaining_tables: int = 0
    snapshot_running: bool = False
    snapshot_completed: bool = False
    snapshot_started_ms: int | None = None
    snapshot_ended_ms: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def queue(self, events: int) -> None:
        """A batch of ``events`` was handed to the commit thread."""
        with self._lock:
            self.queued = events

    def committed(
        self,
        rows: Iterable[tuple[Any, ...]],
        quarantined: int,
        offset: Mapping[str, Any] | None,
        partial: frozenset[str] = frozenset(),
    ) -> None:
        """Count one committed batch.

        Args:
            rows: The batch's events as ``(kind, op, collection, tx_id, snapshot,
                source_ts_ms)`` tuples (:data:`COLUMNS`).
            quarantined: Records of the batch quarantined in bronze.
            offset: The offset the batch committed (a database agent's ``snapshot`` progress
                while its snapshot runs).
            partial: Transactions the batch cut (``max.transaction.size``): they are counted
                in the batch that holds their end.
        """
        now = time.time()
        now_ms = int(now * 1000)
        snap_events = stream_events = 0
        ops: Counter[str] = Counter()
        scanned: Counter[str] = Counter()
        transactions: set[str] = set()
        snap_start: int | None = None
        last_stream_ts: int | None = None
        saw_last = False
        for kind, op, collection, tx_id, snapshot, source_ts_ms in rows:
            if kind != "data":
                continue
            if snapshot in _SNAPSHOT_FLAGS or snapshot == "last":
                snap_events += 1
                scanned[collection or ""] += 1
                saw_last = saw_last or snapshot == "last"
                if source_ts_ms is not None and (snap_start is None or source_ts_ms < snap_start):
                    snap_start = source_ts_ms  # a snapshot row's ts_ms is the snapshot's start
                continue
            stream_events += 1
            ops[op] += 1
            if tx_id is not None and tx_id not in partial:
                transactions.add(tx_id)
            if source_ts_ms is not None:
                last_stream_ts = source_ts_ms
        progress = (offset or {}).get("snapshot")
        with self._lock:
            self.queued = 0
            if snap_events:
                self.snapshot.events += snap_events
                self.snapshot.last_event_at = now
                self.rows_scanned.update(scanned)
                self.snapshot_tables.update(scanned)
                if self.snapshot_started_ms is None:
                    self.snapshot_started_ms = snap_start
            if stream_events:
                self.streaming.events += stream_events
                self.streaming.last_event_at = now
                self.ops.update(ops)
                self.transactions += len(transactions)
                if last_stream_ts is not None:
                    self.behind_ms = max(0, now_ms - last_stream_ts)
            (self.snapshot if progress or snap_events else self.streaming).erroneous += quarantined
            if isinstance(progress, Mapping) and progress.get("tables") is not None:
                tables = len(progress["tables"])
                self.total_tables = max(self.total_tables, tables)
                self.remaining_tables = tables - int(progress.get("index", 0))
                self.snapshot_running = True
                if progress.get("ts_ms"):
                    self.snapshot_started_ms = int(progress["ts_ms"])
            if saw_last:
                self.snapshot_running = False
                self.snapshot_completed = True
                self.remaining_tables = 0
                self.total_tables = max(self.total_tables, len(self.snapshot_tables))
                self.snapshot_ended_ms = now_ms
            elif snap_events and not self.snapshot_completed:
                self.snapshot_running = True
                self.total_tables = max(self.total_tables, len(self.snapshot_tables))

    def samples(self) -> Iterator[tuple[str, str, dict[str, str], float]]:
        """``(attribute, context, extra labels, value)`` of every metric of this source."""
        now = time.time()
        with self._lock:
            for context, ctx in (("snapshot", self.snapshot), ("streaming", self.streaming)):
                yield "TotalNumberOfEventsSeen", context, {}, ctx.events
                yield "NumberOfErroneousEvents", context, {}, ctx.erroneous
                since = -1.0 if ctx.last_event_at is None else (now - ctx.last_event_at) * 1000
                yield "MilliSecondsSinceLastEvent", context, {}, since
                yield "QueueTotalCapacity", context, {}, self.queue_capacity
                yield "QueueRemainingCapacity", context, {}, self.queue_capacity - self.queued
            yield "TotalTableCount", "snapshot", {}, self.total_tables
            yield "RemainingTableCount", "snapshot", {}, self.remaining_tables
            yield "SnapshotRunning", "snapshot", {}, float(self.snapshot_running)
            yield "SnapshotCompleted", "snapshot", {}, float(self.snapshot_completed)
            duration = 0.0
            if self.snapshot_started_ms is not None:
                end = self.snapshot_ended_ms if self.snapshot_ended_ms else now * 1000
                duration = max(0.0, (end - self.snapshot_started_ms) / 1000)
            yield "SnapshotDurationInSeconds", "snapshot", {}, duration
            for table, rows in sorted(self.rows_scanned.items()):
                yield "RowsScanned", "snapshot", {"table": table}, rows
            yield "Connected", "streaming", {}, float(self.connected)
            yield "MilliSecondsBehindSource", "streaming", {}, self.behind_ms
            yield "TotalNumberOfCreateEventsSeen", "streaming", {}, self.ops["c"]
            yield "TotalNumberOfUpdateEventsSeen", "streaming", {}, self.ops["u"]
            yield "TotalNumberOfDeleteEventsSeen", "streaming", {}, self.ops["d"]
            yield "NumberOfCommittedTransactions", "streaming", {}, self.transactions


COLUMNS = _COLUMNS
"""The bronze columns :meth:`SourceStats.committed` reads, in its tuple order."""


class DebeziumCollector(Collector):
    """Renders every source's :class:`SourceStats` at scrape time."""

    def __init__(self) -> None:
        self._sources: dict[str, SourceStats] = {}
        self._lock = threading.Lock()

    def source(self, name: str, kind: str) -> SourceStats:
        """The stats of source ``name`` (created on first use)."""
        with self._lock:
            stats = self._sources.get(name)
            if stats is None:
                stats = self._sources[name] = SourceStats(name, PLUGINS.get(kind, kind))
            return stats

    def clear(self) -> None:
        """Forget every source."""
        with self._lock:
            self._sources.clear()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """One family per attribute, a sample per source and context."""
        with self._lock:
            sources = list(self._sources.values())
        families: dict[str, GaugeMetricFamily] = {}
        for stats in sources:
            for attribute, context, extra, value in stats.samples():
                family = families.get(attribute)
                if family is None:
                    labels = ["plugin", "name", "context", *extra]
                    help_text = DEBEZIUM_METRICS[attribute][1]
                    family = families[attribute] = GaugeMetricFamily(
                        f"debezium_metrics_{attribute}", help_text, labels=labels
                    )
                family.add_metric([stats.plugin, stats.name, context, *extra.values()], value)
        yield from families.values()
