"""The lake's own metrics, read from the lake at scrape time (what ``medallion status`` reads).

Per source: rows and newest source commit time in bronze (from the Delta log's per-file
statistics: no data file is read while every file holds one source), the newest source time
silver applied (``silver/_progress``) and the cut gold shows (``gold/_published``), the lags
between them in seconds of source time, the age of gold's cut, and the rows quarantined in bronze
(per ``error_class``) and silver (per kind and reason). Lags are per source because the layers
move per source: a micro-batch applies every table of a source up to one position, and gold
publishes one consistent cut per source, so a quiet table is exactly as current as its source.

Reading is cached for :data:`MIN_INTERVAL_S`, so several Prometheus servers scraping one process
read the lake once.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from bronze import schema as S

__all__ = ["LAKE_METRICS", "MIN_INTERVAL_S", "LakeCollector", "LakeSnapshot", "reason_class"]

logger = logging.getLogger(__name__)

MIN_INTERVAL_S = 2.0
"""Scrapes within this many seconds of a lake read reuse it."""

LAKE_METRICS: dict[str, str] = {
    "medallion_bronze_rows": "Rows of the source in bronze/events (every kind).",
    "medallion_layer_source_timestamp_seconds": (
        "Newest source commit time each layer holds (epoch seconds)."
    ),
    "medallion_lag_seconds": (
        "Lag between layers in seconds of source time: source_bronze (now - bronze), "
        "bronze_silver, silver_gold."
    ),
    "medallion_gold_cut_age_seconds": "Now minus the source time of the cut gold shows.",
    "medallion_gold_cut_silver_batch": "The silver batch of the cut gold shows.",
    "medallion_quarantined_rows": "Rows in bronze/quarantine and silver/_quarantine, per reason.",
    "medallion_lake_scrape_errors": "Lake reads that failed at the last scrape (see the log).",
}
"""Every family :class:`LakeCollector` serves, with its help text."""

_REASON_END = re.compile(r"[:'\"(\[{0-9]")


def reason_class(reason: str | None) -> str:
    """A quarantine reason's leading phrase: the text before its first ``:``, quote, bracket or
    digit, at most 48 characters, so that a reason naming a value or a key stays one series."""
    if not reason:
        return "unknown"
    head = _REASON_END.split(reason, maxsplit=1)[0].strip().rstrip(",;.").strip()
    return (head[:48] or reason[:48]).strip() or "unknown"


@dataclass
class LakeSnapshot:
    """What one read of the lake found."""

    bronze_rows: dict[str, int] = field(default_factory=dict)
    bronze_ts_ms: dict[str, int] = field(default_factory=dict)
    silver_ts_ms: dict[str, int] = field(default_factory=dict)
    gold_ts_ms: dict[str, int | None] = field(default_factory=dict)
    gold_batch: dict[str, int] = field(default_factory=dict)
    quarantined: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """``(layer, source, reason)`` -> rows."""
    errors: int = 0


def _delta(path: Path) -> DeltaTable | None:
    try:
        return DeltaTable(str(path))
    except TableNotFoundError:
        return None


def _bronze(root: Path, snap: LakeSnapshot) -> None:
    """Rows and newest source time per source, from the files' statistics (bronze is
    partitioned by source; an unpartitioned table's files name theirs in min/max statistics);
    a file whose statistics span several sources is read."""
    table = _delta(root / "bronze" / "events")
    if table is None:
        return
    actions = pa.table(table.get_add_actions(flatten=True))
    names = set(actions.column_names)
    part, lo, hi = f"partition.{S.SOURCE}", f"min.{S.SOURCE}", f"max.{S.SOURCE}"
    ts = f"max.{S.SOURCE_TS_MS}"
    mixed: list[str] = []
    rows = actions.select([c for c in ("path", "num_records", part, lo, hi, ts) if c in names])
    for r in rows.to_pylist():
        source = r.get(part)
        if source is None and r.get(lo) == r.get(hi):
            source = r.get(lo)
        if source is None:
            if r["num_records"]:
                mixed.append(r["path"])
            continue
        snap.bronze_rows[source] = snap.bronze_rows.get(source, 0) + int(r["num_records"])
        stamp = r.get(ts)
        if stamp is not None and stamp > snap.bronze_ts_ms.get(source, -1):
            snap.bronze_ts_ms[source] = int(stamp)
    if not mixed:
        return
    # The dataset names its fragments as the log names the files (relative to the table).
    wanted = set(mixed)
    dataset = table.to_pyarrow_dataset()
    parts = [f for f in dataset.get_fragments() if f.path in wanted]
    if len(parts) != len(wanted):
        raise ValueError(f"{len(wanted) - len(parts)} bronze files not found in the dataset")
    for fragment in parts:
        read = fragment.to_table(columns=[S.SOURCE, S.SOURCE_TS_MS])
        grouped = read.group_by(S.SOURCE).aggregate([([], "count_all"), (S.SOURCE_TS_MS, "max")])
        for g in grouped.to_pylist():
            source = g[S.SOURCE]
            snap.bronze_rows[source] = snap.bronze_rows.get(source, 0) + int(g["count_all"])
            stamp = g[f"{S.SOURCE_TS_MS}_max"]
            if stamp is not None and stamp > snap.bronze_ts_ms.get(source, -1):
                snap.bronze_ts_ms[source] = int(stamp)


def _silver(root: Path, snap: LakeSnapshot) -> None:
    table = _delta(root / "silver" / "_progress")
    if table is None:
        return
    rows = table.to_pyarrow_dataset().to_table(columns=["source", "source_ts_ms"])
    if rows.num_rows == 0:
        return
    for g in rows.group_by("source").aggregate([("source_ts_ms", "max")]).to_pylist():
        if g["source_ts_ms_max"] is not None:
            snap.silver_ts_ms[g["source"]] = int(g["source_ts_ms_max"])


def _gold(root: Path, snap: LakeSnapshot) -> None:
    from gold.publish import published_cuts

    for source, cut in published_cuts(root).items():
        snap.gold_ts_ms[source] = cut.source_ts_ms
        snap.gold_batch[source] = cut.silver_batch


def _quarantine(root: Path, snap: LakeSnapshot) -> None:
    bronze = _delta(root / "bronze" / "quarantine")
    if bronze is not None:
        rows = bronze.to_pyarrow_dataset().to_table(columns=[S.SOURCE, S.ERROR_CLASS])
        grouped = rows.group_by([S.SOURCE, S.ERROR_CLASS]).aggregate([([], "count_all")])
        for r in grouped.to_pylist():
            key = ("bronze", r[S.SOURCE], r[S.ERROR_CLASS] or "unknown")
            snap.quarantined[key] += int(r["count_all"])
    silver = _delta(root / "silver" / "_quarantine")
    if silver is not None:
        dataset = silver.to_pyarrow_dataset()
        columns = [c for c in ("source", "kind", "reason") if c in dataset.schema.names]
        rows = dataset.to_table(columns=columns)
        kinds = rows.column("kind") if "kind" in columns else pa.nulls(rows.num_rows, pa.string())
        by_reason = (
            pa.table(
                {
                    "source": rows.column("source"),
                    "kind": pc.fill_null(kinds, "event"),
                    "reason": rows.column("reason"),
                }
            )
            .group_by(["source", "kind", "reason"])
            .aggregate([([], "count_all")])
        )
        for r in by_reason.to_pylist():
            key = ("silver", r["source"], f"{r['kind']}: {reason_class(r['reason'])}")
            snap.quarantined[key] += int(r["count_all"])


def read_lake(root: Path) -> LakeSnapshot:
    """Read every part; a part that fails is logged and counted, the others still report."""
    snap = LakeSnapshot()
    for part in (_bronze, _silver, _gold, _quarantine):
        try:
            part(root, snap)
        except Exception as exc:  # noqa: BLE001 - a scrape must answer while a table is rewritten
            snap.errors += 1
            logger.warning("metrics: reading %s failed: %s", part.__name__.strip("_"), exc)
    return snap


class LakeCollector(Collector):
    """Serves :data:`LAKE_METRICS` for the lake at ``root``.

    Args:
        root: The lake root.
        sources: The configured source names (each gets its rows even before it has data).
    """

    def __init__(self, root: Path, sources: tuple[str, ...] = ()) -> None:
        self.root = Path(root)
        self.sources = sources
        self._lock = threading.Lock()
        self._cached: tuple[float, LakeSnapshot] | None = None

    def snapshot(self) -> LakeSnapshot:
        """The lake as read at most :data:`MIN_INTERVAL_S` ago."""
        with self._lock:
            now = time.monotonic()
            if self._cached is None or now - self._cached[0] >= MIN_INTERVAL_S:
                self._cached = (now, read_lake(self.root))
            return self._cached[1]

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The families of :data:`LAKE_METRICS`."""
        snap = self.snapshot()
        now_ms = time.time() * 1000

        def family(name: str, labels: list[str]) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, LAKE_METRICS[name], labels=labels)

        rows = family("medallion_bronze_rows", ["source"])
        stamps = family("medallion_layer_source_timestamp_seconds", ["source", "layer"])
        lags = family("medallion_lag_seconds", ["source", "stage"])
        age = family("medallion_gold_cut_age_seconds", ["source"])
        batch = family("medallion_gold_cut_silver_batch", ["source"])
        names = sorted(set(self.sources) | set(snap.bronze_rows) | set(snap.gold_batch))
        for source in names:
            rows.add_metric([source], snap.bronze_rows.get(source, 0))
            layers = {
                "bronze": snap.bronze_ts_ms.get(source),
                "silver": snap.silver_ts_ms.get(source),
                "gold": snap.gold_ts_ms.get(source),
            }
            for layer, ms in layers.items():
                if ms is not None:
                    stamps.add_metric([source, layer], ms / 1000)
            pairs: list[tuple[str, Any, Any]] = [
                ("source_bronze", now_ms, layers["bronze"]),
                ("bronze_silver", layers["bronze"], layers["silver"]),
                ("silver_gold", layers["silver"], layers["gold"]),
            ]
            for stage, newer, older in pairs:
                if newer is not None and older is not None:
                    lags.add_metric([source, stage], max(0.0, (newer - older) / 1000))
            if layers["gold"] is not None:
                age.add_metric([source], max(0.0, (now_ms - layers["gold"]) / 1000))
            if source in snap.gold_batch:
                batch.add_metric([source], snap.gold_batch[source])
        quarantined = family("medallion_quarantined_rows", ["layer", "source", "reason"])
        for (layer, source, reason), n in sorted(snap.quarantined.items()):
            quarantined.add_metric([layer, source, reason], n)
        errors = family("medallion_lake_scrape_errors", [])
        errors.add_metric([], snap.errors)
        yield from (rows, stamps, lags, age, batch, quarantined, errors)
