"""Consistent cuts: the points at which every silver table of a source shows the source at one
commit.

The silver job records, per micro-batch, one ``silver/_cuts`` row for every table it changed
(with the table's Delta version afterwards) and one ``silver/_progress`` row per source (the
highest position it consumed and the first data position still waiting for the rest of its
transaction). A micro-batch ``k`` is a *consistent cut* of source ``s`` when nothing of ``s``
waits below the highest position applied so far: then every table of ``s``, read at its version
after ``k``, holds exactly the source transactions up to that position, because bronze holds a
source's transactions in commit order and silver applies a transaction only once it is complete
(:mod:`silver.transactions`). A transaction waiting *above* everything applied does not break
the cut: the cut simply ends before it. A transaction without BEGIN/END records cannot be held
back by silver; when bronze had to cut one into parts (``bronze.max.transaction.size``) and the
micro-batch ends inside it (``open_tx``), that micro-batch is not a consistent cut either.

Both tables are read from the Delta log and data files with deltalake (no Spark job): they are
small, append-only and written without reader features; each data file is read once per
process (:mod:`gold.appended_rows`), so a refresh reads what the micro-batches since added.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from bronze.storage import LakePath, lake_path
from gold.appended_rows import appended_rows as _rows
from pipeline.errors import InternalError

__all__ = ["Cut", "TableAtCut", "consistent_cuts", "latest_cut", "cut_at"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TableAtCut:
    """One silver table as of a cut.

    Attributes:
        silver_table: The table's directory name under ``silver/``.
        collection: The source table (``<schema>.<table>``).
        version: The Delta version that holds the cut.
    """

    silver_table: str
    collection: str
    version: int


@dataclass(frozen=True, slots=True)
class Cut:
    """A consistent cut of one source.

    Attributes:
        source: The source name.
        silver_batch: The silver micro-batch after which the cut holds.
        position: The highest bronze position applied (encoded; compare as bytes).
        source_ts_ms: The newest source commit time consumed (heartbeats included), in ms.
        tables: The source's silver tables at the cut, by silver table name.
        recorded_at: When the silver job recorded it.
    """

    source: str
    silver_batch: int
    position: bytes
    source_ts_ms: int | None
    tables: Mapping[str, TableAtCut] = field(default_factory=dict)
    recorded_at: dt.datetime | None = field(default=None, compare=False)

    @property
    def source_time(self) -> dt.datetime | None:
        """``source_ts_ms`` as an aware UTC datetime."""
        if self.source_ts_ms is None:
            return None
        return dt.datetime.fromtimestamp(self.source_ts_ms / 1000, dt.UTC)

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable form (position as hex)."""
        return {
            "source": self.source,
            "silver_batch": self.silver_batch,
            "position": self.position.hex(),
            "source_ts_ms": self.source_ts_ms,
            "tables": {
                name: {"collection": t.collection, "version": t.version}
                for name, t in sorted(self.tables.items())
            },
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Cut:
        """Rebuild a cut from :meth:`to_json` output."""
        return cls(
            source=str(data["source"]),
            silver_batch=int(data["silver_batch"]),
            position=bytes.fromhex(str(data["position"])),
            source_ts_ms=None if data.get("source_ts_ms") is None else int(data["source_ts_ms"]),
            tables={
                name: TableAtCut(name, str(t["collection"]), int(t["version"]))
                for name, t in dict(data.get("tables") or {}).items()
            },
        )


def consistent_cuts(lake_root: LakePath, source: str | None = None) -> dict[str, list[Cut]]:
    """Every consistent cut recorded in a lake, oldest first, per source.

    Args:
        lake_root: The lake root.
        source: Only this source; None for all.

    Returns:
        Source name -> its consistent cuts in silver micro-batch order.
    """
    silver = lake_path(lake_root) / "silver"
    progress = _rows(
        silver / "_progress",
        [
            "silver_batch",
            "source",
            "position",
            "source_ts_ms",
            "waiting_from",
            "open_tx",
            "recorded_at",
        ],
    )
    table_rows = _rows(
        silver / "_cuts", ["silver_batch", "source", "collection", "silver_table", "table_version"]
    )
    by_batch: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for r in table_rows:
        if source is None or r["source"] == source:
            by_batch.setdefault((r["source"], int(r["silver_batch"])), []).append(r)
    # A replayed micro-batch may record its progress once more; the first row counts.
    steps: dict[tuple[str, int], dict[str, Any]] = {}
    for r in progress:
        if source is None or r["source"] == source:
            steps.setdefault((r["source"], int(r["silver_batch"])), r)
    cuts: dict[str, list[Cut]] = {}
    state: dict[str, tuple[bytes | None, int | None, dict[str, TableAtCut]]] = {}
    for key in sorted(set(steps) | set(by_batch), key=lambda k: (k[0], k[1])):
        name, batch = key
        top, ts, tables = state.get(name, (None, None, {}))
        tables = dict(tables)
        for r in by_batch.get(key, ()):
            tables[r["silver_table"]] = TableAtCut(
                r["silver_table"], r["collection"], int(r["table_version"])
            )
        step = steps.get(key)
        if step is not None:
            position = bytes(step["position"]) if step["position"] is not None else None
            if position is not None and (top is None or position > top):
                top = position
            if step["source_ts_ms"] is not None:
                ts = max(ts or 0, int(step["source_ts_ms"]))
        state[name] = (top, ts, tables)
        if step is None or top is None:
            # Tables changed without a progress row (a lake from before _progress, or a crash
            # between the two writes): consistency cannot be shown for this batch.
            continue
        waiting = step["waiting_from"]
        if waiting is not None and bytes(waiting) <= top:
            continue
        if step.get("open_tx"):
            continue
        cuts.setdefault(name, []).append(Cut(name, batch, top, ts, tables, step.get("recorded_at")))
    return cuts


def latest_cut(lake_root: LakePath, source: str) -> Cut | None:
    """The newest consistent cut of ``source``, or None when it has none yet."""
    found = consistent_cuts(lake_root, source).get(source, [])
    return found[-1] if found else None


def cut_at(
    lake_root: LakePath,
    source: str,
    *,
    position: bytes | None = None,
    time: dt.datetime | None = None,
) -> Cut | None:
    """The newest consistent cut at or before a source position or a source commit time.

    Args:
        lake_root: The lake root.
        source: The source name.
        position: An encoded bronze position (``bronze.positions.Position.encode()``); the cut
            holds every transaction at or before it.
        time: A source commit time (aware); the cut holds every transaction committed by then.

    Returns:
        The cut, or None when no consistent cut is that old.
    """
    if (position is None) == (time is None):
        raise ValueError("give exactly one of position and time")
    found = consistent_cuts(lake_root, source).get(source, [])
    if position is not None:
        found = [c for c in found if c.position <= position]
    else:
        if time is None:
            raise InternalError("gold.cuts: expected time is not None")
        limit = int(time.timestamp() * 1000)
        found = [c for c in found if c.source_ts_ms is not None and c.source_ts_ms <= limit]
    return found[-1] if found else None
