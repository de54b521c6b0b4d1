"""Which cut gold shows: ``gold/_published``, one row each time a source's gold moves.

Gold moves to a newer consistent cut only when that cut's blocking quality checks pass
(:mod:`gold.refresh`); otherwise it stays at the last published cut. The newest row per
source is what ``gold.*`` shows; older rows are the cuts gold showed before (time travel by
published cut). Written with deltalake, one commit per publication.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
from collections.abc import Iterable

import orjson
import pyarrow as pa
from deltalake import write_deltalake

from bronze.storage import LakePath, lake_path, storage_options
from gold.appended_rows import appended_rows
from gold.cuts import Cut

__all__ = ["PUBLISHED", "published_cuts", "publish", "publication_history"]

logger = logging.getLogger(__name__)

PUBLISHED = "_published"
_SCHEMA = pa.schema(
    [
        ("source", pa.string()),
        ("silver_batch", pa.int64()),
        ("position", pa.binary()),
        ("source_ts_ms", pa.int64()),
        ("cut_json", pa.string()),
        ("quality_run", pa.string()),
        ("published_at", pa.timestamp("us", tz="UTC")),
    ]
)


def _path(lake_root: LakePath) -> LakePath:
    return lake_path(lake_root) / "gold" / PUBLISHED


def publication_history(lake_root: LakePath) -> list[tuple[Cut, str | None, dt.datetime]]:
    """Every publication, oldest first: (cut, quality run id, published at)."""
    rows = appended_rows(_path(lake_root), ("cut_json", "quality_run", "published_at"))
    return [
        (_cut_of(r["cut_json"]), r["quality_run"], r["published_at"])
        for r in sorted(rows, key=lambda r: r["published_at"])
    ]


@functools.lru_cache(maxsize=65_536)
def _cut_of(cut_json: str) -> Cut:
    """A published cut, parsed once per process (every refresh reads every publication)."""
    return Cut.from_json(orjson.loads(cut_json))


def published_cuts(lake_root: LakePath) -> dict[str, Cut]:
    """The cut gold shows now, per source (sources never published are absent)."""
    latest: dict[str, Cut] = {}
    for cut, _run, _at in publication_history(lake_root):
        latest[cut.source] = cut
    return latest


def publish(lake_root: LakePath, cuts: Iterable[Cut], *, quality_run: str | None = None) -> None:
    """Record that gold now shows ``cuts`` (one per source), in one Delta commit."""
    cuts = list(cuts)
    now = dt.datetime.now(dt.UTC)
    rows = [
        {
            "source": c.source,
            "silver_batch": c.silver_batch,
            "position": c.position,
            "source_ts_ms": c.source_ts_ms,
            "cut_json": orjson.dumps(c.to_json()).decode(),
            "quality_run": quality_run,
            "published_at": now,
        }
        for c in cuts
    ]
    if not rows:
        return
    write_deltalake(
        str(_path(lake_root)),
        pa.Table.from_pylist(rows, schema=_SCHEMA),
        mode="append",
        storage_options=storage_options(_path(lake_root)),
    )
    for c in cuts:
        logger.info("gold: %s now at silver batch %s", c.source, c.silver_batch)
