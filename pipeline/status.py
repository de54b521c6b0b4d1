"""``medallion status``: where each source and table stands, layer by layer.

Everything here is read from Delta logs and small side tables with deltalake (no Spark job), and
from the source's replication slot, so status is quick and works while the pipeline runs. Lags
are in seconds of *source* time: source -> bronze is how old the newest landed change is (it
grows while a source is idle unless heartbeats are on), bronze -> silver and silver -> gold are
how far each layer's newest source commit time trails the layer before it.

Silver being caught up does not mean everything is applied: change events of a source transaction
wait in ``silver/_pending`` for its END record, or for ``silver.transaction.timeout.seconds``.
Per source, ``waiting_events``/``waiting_transactions`` count them and ``waiting_oldest_s`` says how
long the oldest has waited; gold cannot show them yet whatever its consistent cuts say.

A table whose column was added with a default silver cannot reproduce (``silver/_resnapshot``,
contract C4) has ``needs_resnapshot`` (``column: reason``) in its row, and its source counts it in
``tables_needing_resnapshot``: its older rows hold NULL there until the table is snapshotted again.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake.exceptions import TableNotFoundError

from bronze import schema as B
from bronze.storage import LakePath, lake_path, open_delta
from pipeline.orchestration import bronze_status
from pipeline.spark_functions import position_json

__all__ = ["pipeline_status", "THROUGHPUT_BATCHES"]

logger = logging.getLogger(__name__)

THROUGHPUT_BATCHES = 20
"""events/s is measured over a source's most recent bronze batches: their rows over the time
from each batch's first record read to its commit."""


def _dataset(path: LakePath) -> ds.Dataset | None:
    try:
        return open_delta(path).to_pyarrow_dataset()
    except TableNotFoundError:
        return None


def _table(path: LakePath, columns: list[str]) -> pa.Table | None:
    dataset = _dataset(path)
    if dataset is None:
        return None
    present = [c for c in columns if c in dataset.schema.names]
    return dataset.to_table(columns=present)


def _bronze_source(dataset: ds.Dataset | None, source: str) -> dict[str, Any]:
    empty = {
        "bronze_position": None,
        "bronze_ts_ms": None,
        "events_per_s": None,
        "position_connector": None,
    }
    if dataset is None:
        return empty
    rows = dataset.to_table(
        columns=[B.POSITION, B.SOURCE_TS_MS, B.BATCH_SEQ, B.CAPTURE_TS, B.INGEST_TS, B.CONNECTOR],
        filter=ds.field(B.SOURCE) == source,
    )
    if rows.num_rows == 0:
        return empty
    newest_at = pc.index(rows.column(B.POSITION), pc.max(rows.column(B.POSITION))).as_py()
    out: dict[str, Any] = {
        "bronze_position": rows.column(B.POSITION)[newest_at].as_py(),
        "bronze_ts_ms": pc.max(rows.column(B.SOURCE_TS_MS)).as_py(),
        # Positions are encoded per *database* connector: a debezium_json source lands
        # PostgreSQL or MySQL positions, so the config's connector cannot decode them.
        "position_connector": rows.column(B.CONNECTOR)[newest_at].as_py(),
    }
    newest = pc.max(rows.column(B.BATCH_SEQ)).as_py()
    recent = rows.filter(pc.greater(rows.column(B.BATCH_SEQ), newest - THROUGHPUT_BATCHES))
    # Per batch, from its first record read to its commit: the time between batches (the agent
    # idle, or not running at all) is not capture time.
    per_batch = recent.group_by(B.BATCH_SEQ).aggregate(
        [(B.CAPTURE_TS, "min"), (B.INGEST_TS, "max"), ([], "count_all")]
    )
    seconds = sum(
        (r[f"{B.INGEST_TS}_max"] - r[f"{B.CAPTURE_TS}_min"]).total_seconds()
        for r in per_batch.to_pylist()
        if r[f"{B.INGEST_TS}_max"] and r[f"{B.CAPTURE_TS}_min"]
    )
    out["events_per_s"] = round(recent.num_rows / seconds, 1) if seconds > 0 else None
    return out


def _counts(table: pa.Table | None, keys: list[str]) -> dict[tuple[Any, ...], int]:
    if table is None or table.num_rows == 0:
        return {}
    grouped = table.group_by(keys).aggregate([([], "count_all")])
    return {tuple(r[k] for k in keys): int(r["count_all"]) for r in grouped.to_pylist()}


def _seconds(newer_ms: int | None, older_ms: int | None) -> float | None:
    if newer_ms is None or older_ms is None:
        return None
    return round(max(0, newer_ms - older_ms) / 1000, 3)


def _iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).isoformat(timespec="milliseconds")


def _readable(connector: str | None, position: bytes | None) -> str | None:
    try:
        return position_json(connector, position)
    except Exception:  # an undecodable position is shown raw, status must not fail on it
        return None if position is None else position.hex()


def pipeline_status(
    config: Any, lake_root: LakePath | None = None, *, now: dt.datetime | None = None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Per source and per table: positions, lags, throughput, quarantine, slot headroom.

    Args:
        config: The pipeline config.
        lake_root: Another lake root than the config's.
        now: The time lags are measured against (default: now).

    Returns:
        ``(sources, tables)``: one row per configured source (bronze columns of
        :func:`pipeline.orchestration.bronze_status`, then positions and lags per layer) and one
        row per silver table.
    """
    from gold.cuts import consistent_cuts
    from gold.publish import published_cuts
    from silver.resnapshot import needing_resnapshot
    from silver.transactions import waiting_by_source

    root = lake_path(lake_root) if lake_root else lake_path(config.lake.root)
    now_at = now or dt.datetime.now(dt.UTC)
    now_ms = int(now_at.timestamp() * 1000)
    progress = _table(root / "silver" / "_progress", ["source", "position", "source_ts_ms"])
    quarantine = _table(root / "silver" / "_quarantine", ["source", "collection"])
    silver_q = _counts(quarantine, ["source", "collection"])
    cut_rows = _table(
        root / "silver" / "_cuts",
        [
            "silver_batch",
            "source",
            "collection",
            "silver_table",
            "position",
            "table_version",
            "recorded_at",
        ],
    )
    shown = published_cuts(root)
    consistent = consistent_cuts(root)
    waiting = waiting_by_source(root / "silver" / "_pending")
    resnapshot: dict[tuple[str, str], list[str]] = {}
    for entry in needing_resnapshot(root):
        resnapshot.setdefault((entry.source, entry.collection), []).append(
            f"{entry.column}: {entry.reason}"
        )
    sources = []
    position_connectors: dict[str, str] = {}
    bronze_rows = bronze_status(config, root)
    # Read after bronze_status's counts, so a batch counted there has its positions here too
    # (a commit between two reads of one version showed new counts beside old positions).
    events = _dataset(root / "bronze" / "events")
    for row in bronze_rows:
        name, connector = row["source"], row["connector"]
        bronze = _bronze_source(events, name)
        codec = bronze["position_connector"] or connector
        position_connectors[name] = codec
        silver_ts = silver_pos = None
        if progress is not None and progress.num_rows:
            mine = progress.filter(pc.equal(progress.column("source"), name))
            if mine.num_rows:
                silver_ts = pc.max(mine.column("source_ts_ms")).as_py()
                silver_pos = pc.max(mine.column("position")).as_py()
        gold = shown.get(name)
        latest = consistent.get(name, [])
        held = waiting.get(name)
        sources.append(
            {
                "source": name,
                "connector": connector,
                "last_batch": row["last_batch"],
                "landed": row["landed"],
                "events_per_s": bronze["events_per_s"],
                "bronze_quarantined": row["quarantined"],
                "silver_quarantined": sum(n for (s, _c), n in silver_q.items() if s == name),
                "bronze_position": _readable(codec, bronze["bronze_position"]),
                "silver_position": _readable(codec, silver_pos),
                "gold_position": _readable(codec, gold.position if gold else None),
                "bronze_time": _iso(bronze["bronze_ts_ms"]),
                "gold_time": _iso(gold.source_ts_ms if gold else None),
                "lag_source_bronze_s": _seconds(now_ms, bronze["bronze_ts_ms"]),
                "lag_bronze_silver_s": _seconds(bronze["bronze_ts_ms"], silver_ts),
                "lag_silver_gold_s": _seconds(silver_ts, gold.source_ts_ms if gold else None),
                "gold_behind_consistent_cuts": (
                    sum(1 for c in latest if gold is None or c.silver_batch > gold.silver_batch)
                ),
                "waiting_events": held.events if held else 0,
                "waiting_transactions": held.transactions if held else 0,
                "waiting_oldest_s": held.age_seconds(now_at) if held else None,
                "tables_needing_resnapshot": sum(1 for s, _c in resnapshot if s == name),
                **{k: row[k] for k in row if k.startswith(("slot", "retain", "retention"))},
                "offset": row["offset"],
            }
        )
    tables = []
    if cut_rows is not None and cut_rows.num_rows:
        latest_rows: dict[str, dict[str, Any]] = {}
        for r in sorted(cut_rows.to_pylist(), key=lambda r: r["silver_batch"]):
            latest_rows[r["silver_table"]] = r
        connectors = {s.name: str(s.connector) for s in config.sources} | position_connectors
        for name, r in sorted(latest_rows.items()):
            gold = shown.get(r["source"])
            key = (r["source"], r["collection"])
            at_gold = gold.tables.get(name) if gold else None
            tables.append(
                {
                    "source": r["source"],
                    "table": r["collection"],
                    "silver_table": name,
                    "silver_version": r["table_version"],
                    "gold_version": at_gold.version if at_gold else None,
                    "last_position": _readable(connectors.get(r["source"]), r["position"]),
                    "last_applied_at": r["recorded_at"],
                    "quarantined": silver_q.get((r["source"], r["collection"]), 0),
                    "needs_resnapshot": "; ".join(resnapshot.get(key, [])) or None,
                }
            )
    return sources, tables
