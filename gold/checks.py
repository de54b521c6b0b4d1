"""The CDC checks: what a change stream can get wrong that a table snapshot does not show.

Each check is a small function of a :class:`CheckContext` (one source at one cut) returning
:class:`~gold.outcome.CheckOutcome` values, one per table (or one for the source); they are
listed in :data:`CDC_CHECKS`. Each runs one or two Spark aggregations over data the context
prepared once per source:

* ``quarantine``: events refused into ``silver/_quarantine`` per table (late events excluded,
  they have their own check), and records refused by bronze (``bronze/quarantine``) for the
  source, against ``quality.quarantine.max``. Counts are cumulative up to the cut.
* ``positions_monotonic``: per key, bronze events in arrival order (the agent's ``batch_seq``)
  carry increasing positions: no event arrives in a later batch with a position below one
  already landed for its key. Redeliveries (the same position again) are not violations;
  within one batch the arrival order is not recorded, so it is not compared.
* ``update_before_insert``: per key, the first event by position is a ``u`` or ``d`` with no
  ``c``/``r`` before it (the row was never created in what bronze holds).
* ``freshness``: ``now - cut.source_ts_ms`` against ``quality.freshness.slo.seconds``.
* ``late_events``: events silver refused because they arrived after the tombstone retention
  purged their key's delete ("would have resurrected").
* ``resnapshot``: tables with a column added with a default silver cannot reproduce
  (``silver/_resnapshot``, contract C4): rows older than the column hold NULL there where the
  source shows something else, until the table is snapshotted again.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from bronze.storage import LakePath, lake_path
from gold.cuts import Cut
from gold.outcome import CheckOutcome
from pipeline.config import PipelineConfig

__all__ = [
    "CDC_CHECKS",
    "CheckContext",
    "QUARANTINE",
    "POSITIONS_MONOTONIC",
    "UPDATE_BEFORE_INSERT",
    "FRESHNESS",
    "LATE_EVENTS",
    "LATE_REASON",
    "source_events",
    "quarantine_counts",
    "check_quarantine",
    "check_positions_monotonic",
    "check_update_before_insert",
    "check_freshness",
    "check_late_events",
    "RESNAPSHOT",
    "check_resnapshot",
]

logger = logging.getLogger(__name__)

QUARANTINE = "quarantine"
POSITIONS_MONOTONIC = "positions_monotonic"
UPDATE_BEFORE_INSERT = "update_before_insert"
FRESHNESS = "freshness"
LATE_EVENTS = "late_events"
RESNAPSHOT = "resnapshot"
LATE_REASON = "would have resurrected"
"""Prefix of the reason silver gives a late event beyond the tombstone retention
(:func:`silver.merge.apply_changes`)."""
ENGINE = "medallion"
SAMPLE_SIZE = 5


@dataclass(frozen=True, slots=True)
class QuarantineCount:
    """Quarantined events of one table (``collection`` None: bronze's, for the source)."""

    count: int
    sample: tuple[str, ...] = ()


@dataclass(slots=True)
class CheckContext:
    """One source at one cut, with what the checks share.

    Attributes:
        spark: The session.
        config: The pipeline config (``quality``, ``silver`` sections).
        lake_root: The lake root.
        cut: The cut checked.
        now: The run's clock.
        events: The source's bronze data events at or before the cut (persisted), with
            ``collection``, ``op``, ``position``, ``batch_seq``, ``key`` (canonical JSON); None
            when bronze has none.
        quarantined: ``(collection, late)`` -> count, from :func:`quarantine_counts`.
        newest_change: Collection -> newest source commit time (ms) of the table at the cut.
    """

    spark: Any
    config: PipelineConfig
    lake_root: LakePath
    cut: Cut
    now: dt.datetime
    events: Any = None
    quarantined: Mapping[tuple[str | None, bool], QuarantineCount] = field(default_factory=dict)
    newest_change: Mapping[str, int | None] = field(default_factory=dict)

    @property
    def collections(self) -> list[str]:
        """The source tables of the cut, sorted."""
        return sorted({t.collection for t in self.cut.tables.values()})


def _exists(path: LakePath) -> bool:
    return (path / "_delta_log").is_dir()


def source_events(spark: Any, lake_root: LakePath, cut: Cut) -> Any:
    """The source's bronze data events at or before the cut, keys canonical, persisted.

    Returns:
        A persisted DataFrame (call ``unpersist()``), or None when bronze has no events table.
    """
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    path = lake_path(lake_root) / "bronze" / "events"
    if not _exists(path):
        return None
    # One spelling per key, as silver's MERGE key: {schema, payload} wrappers unwrapped and every
    # field as a string, so {"id": 3} and {"id": "3"} are one key.
    parsed = F.from_json("key_json", "map<string,string>")
    wrapped = parsed["payload"].isNotNull() & parsed["schema"].isNotNull()
    key = F.to_json(
        F.when(wrapped, F.from_json(parsed["payload"], "map<string,string>")).otherwise(parsed)
    )
    frame = (
        spark.read.format("delta")
        .load(str(path))
        .where(
            (F.col("source") == cut.source)
            & (F.col("kind") == "data")
            & (F.col("position") <= F.lit(cut.position))
        )
        .select(
            "collection",
            "op",
            "position",
            "batch_seq",
            "key_json",
            "key_schema_id",
            "value_schema_id",
            F.when(F.col("key_json").isNotNull(), key).alias("key"),
        )
    )
    return frame.persist(StorageLevel.MEMORY_AND_DISK)


def latest_schemas(events: Any) -> list[dict[str, Any]]:
    """Per collection, the schema ids and a key of its newest event (for the table metadata)."""
    from pyspark.sql import functions as F

    if events is None:
        return []
    position = F.col("position")
    rows = (
        events.groupBy("collection")
        .agg(
            F.max_by("key_schema_id", F.when(F.col("key_schema_id").isNotNull(), position)).alias(
                "key_schema_id"
            ),
            F.max_by(
                "value_schema_id", F.when(F.col("value_schema_id").isNotNull(), position)
            ).alias("value_schema_id"),
            F.max_by("key_json", F.when(F.col("key_json").isNotNull(), position)).alias("key_json"),
        )
        .collect()
    )
    return [r.asDict() for r in rows]


def quarantine_counts(
    spark: Any, lake_root: LakePath, cuts: Mapping[str, Cut]
) -> dict[str, dict[tuple[str | None, bool], QuarantineCount]]:
    """Quarantined events per source, ``(collection, late)`` -> count, up to each cut.

    ``silver/_quarantine`` rows count when their silver batch is at or before the cut's;
    ``bronze/quarantine`` rows (not landed, so no table) count under collection None. One Spark
    job per table, for every source at once.
    """
    from pyspark.sql import functions as F

    out: dict[str, dict[tuple[str | None, bool], QuarantineCount]] = {s: {} for s in cuts}
    if not cuts:
        return out
    silver = lake_path(lake_root) / "silver" / "_quarantine"
    if _exists(silver):
        within = None
        for source, cut in cuts.items():
            term = (F.col("source") == source) & (F.col("silver_batch") <= cut.silver_batch)
            within = term if within is None else within | term
        rows = (
            spark.read.format("delta")
            .load(str(silver))
            .where(within)
            .withColumn("late", F.col("reason").startswith(LATE_REASON))
            .groupBy("source", "collection", "late")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.slice(
                    F.collect_list(F.concat_ws(": ", F.col("key"), F.col("reason"))), 1, SAMPLE_SIZE
                ).alias("sample"),
            )
            .collect()
        )
        for r in rows:
            out[r["source"]][(r["collection"], bool(r["late"]))] = QuarantineCount(
                int(r["n"]), tuple(r["sample"])
            )
    bronze = lake_path(lake_root) / "bronze" / "quarantine"
    if _exists(bronze):
        rows = (
            spark.read.format("delta")
            .load(str(bronze))
            .where(F.col("source").isin(list(cuts)))
            .groupBy("source")
            .agg(
                F.count(F.lit(1)).alias("n"),
                F.slice(
                    F.collect_list(F.concat_ws(": ", F.col("origin"), F.col("reason"))),
                    1,
                    SAMPLE_SIZE,
                ).alias("sample"),
            )
            .collect()
        )
        for r in rows:
            out[r["source"]][(None, False)] = QuarantineCount(int(r["n"]), tuple(r["sample"]))
    return out


def check_quarantine(ctx: CheckContext) -> list[CheckOutcome]:
    """Quarantined events per table (and bronze's per source) against ``quarantine.max``."""
    limit = ctx.config.quality.quarantine_max
    tables = sorted(
        set(ctx.collections) | {c for (c, late) in ctx.quarantined if c is not None and not late}
    )
    out = []
    for collection in [*tables, None]:
        found = ctx.quarantined.get((collection, False), QuarantineCount(0))
        if collection is None and (None, False) not in ctx.quarantined:
            # The source-wide bronze row is only worth a line when bronze refused something.
            continue
        where = "silver/_quarantine" if collection is not None else "bronze/quarantine"
        out.append(
            CheckOutcome(
                QUARANTINE,
                ctx.cut.source,
                collection,
                found.count <= limit,
                f"{found.count} quarantined (max {limit})",
                unexpected_count=found.count,
                sample=found.sample,
                details=f"refused events are in {where} with the reason; fix and re-land them",
                engine=ENGINE,
            )
        )
    return out


def _per_collection(
    ctx: CheckContext,
    check: str,
    rows: Sequence[Any],
    ok: str,
    bad: Callable[[int], str],
    details: str,
) -> list[CheckOutcome]:
    found = {r["collection"]: r for r in rows}
    out = []
    for collection in sorted(set(ctx.collections) | set(found)):
        r = found.get(collection)
        n = int(r["n"]) if r is not None else 0
        out.append(
            CheckOutcome(
                check,
                ctx.cut.source,
                collection,
                n == 0,
                bad(n) if n else ok,
                unexpected_count=n,
                sample=tuple(r["sample"]) if r is not None else (),
                details=details,
                engine=ENGINE,
            )
        )
    return out


def check_positions_monotonic(ctx: CheckContext) -> list[CheckOutcome]:
    """Per key, no event lands in a later bronze batch with a position below one already
    landed (redeliveries of the same position excepted)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if ctx.events is None:
        return []
    # A redelivered event counts once, at its first arrival.
    arrivals = (
        ctx.events.where(F.col("key").isNotNull())
        .groupBy("collection", "key", "position")
        .agg(F.min("batch_seq").alias("batch_seq"))
    )
    earlier = (
        Window.partitionBy("collection", "key")
        .orderBy("batch_seq")
        .rangeBetween(Window.unboundedPreceding, -1)
    )
    rows = (
        arrivals.withColumn("seen", F.max("position").over(earlier))
        .where(F.col("position") < F.col("seen"))
        .groupBy("collection")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.slice(
                F.collect_list(
                    F.concat(F.col("key"), F.lit(" batch "), F.col("batch_seq").cast("string"))
                ),
                1,
                SAMPLE_SIZE,
            ).alias("sample"),
        )
        .collect()
    )
    return _per_collection(
        ctx,
        POSITIONS_MONOTONIC,
        rows,
        "positions increase per key in arrival order",
        lambda n: f"{n} event(s) arrived after a newer position of their key",
        "silver applies by position, so these were no-ops or reordered; check the connector's "
        "offsets (a rewind with new positions, or a position encoding bug)",
    )


def check_update_before_insert(ctx: CheckContext) -> list[CheckOutcome]:
    """Per key, the first event by position is a create or snapshot read, not u/d."""
    from pyspark.sql import functions as F

    if ctx.events is None:
        return []
    rows = (
        ctx.events.where(F.col("key").isNotNull() & F.col("op").isin("c", "r", "u", "d"))
        .groupBy("collection", "key")
        .agg(F.min_by("op", F.col("position")).alias("first_op"))
        .where(F.col("first_op").isin("u", "d"))
        .groupBy("collection")
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.slice(
                F.collect_list(F.concat(F.col("key"), F.lit(" first op "), F.col("first_op"))),
                1,
                SAMPLE_SIZE,
            ).alias("sample"),
        )
        .collect()
    )
    return _per_collection(
        ctx,
        UPDATE_BEFORE_INSERT,
        rows,
        "every key starts with c or r",
        lambda n: f"{n} key(s) changed before any insert or snapshot row",
        "the row existed before capture began (snapshot.mode never / no_data) or events were "
        "lost before bronze; an update of a row silver does not hold upserts a partial row",
    )


def check_freshness(ctx: CheckContext) -> list[CheckOutcome]:
    """Lag of the cut behind the source (``now - cut.source_ts_ms``) against the SLO."""
    slo = ctx.config.quality.freshness_slo_seconds
    source_time = ctx.cut.source_time
    lag = (ctx.now - source_time).total_seconds() if source_time is not None else None
    out = []
    # A source without tables at the cut still has a lag: one source-wide outcome.
    tables: list[str | None] = [*ctx.collections] or [None]
    for collection in tables:
        newest = ctx.newest_change.get(collection) if collection is not None else None
        last = (
            dt.datetime.fromtimestamp(newest / 1000, dt.UTC).isoformat()
            if newest is not None
            else "unknown"
        )
        out.append(
            CheckOutcome(
                FRESHNESS,
                ctx.cut.source,
                collection,
                lag is not None and lag <= slo,
                f"lag {lag:.1f} s (SLO {slo:g} s)" if lag is not None else "no source time at cut",
                details=(
                    f"cut source time {source_time.isoformat() if source_time else 'unknown'}; "
                    + (f"newest change of this table {last}; " if collection is not None else "")
                    + f"checked at {ctx.now.isoformat()}"
                ),
                engine=ENGINE,
            )
        )
    return out


def check_late_events(ctx: CheckContext) -> list[CheckOutcome]:
    """Events refused because they arrived after their key's tombstone was purged."""
    hours = ctx.config.silver.tombstone_retention_hours
    tables = sorted(set(ctx.collections) | {c for (c, late) in ctx.quarantined if late and c})
    out = []
    for collection in tables:
        found = ctx.quarantined.get((collection, True), QuarantineCount(0))
        out.append(
            CheckOutcome(
                LATE_EVENTS,
                ctx.cut.source,
                collection,
                found.count == 0,
                f"{found.count} late event(s) beyond the tombstone retention ({hours:g} h)",
                unexpected_count=found.count,
                sample=found.sample,
                details=(
                    "silver refused them (silver/_quarantine, reason 'would have resurrected'); "
                    "raise silver.tombstone.retention.hours above the longest redelivery delay"
                ),
                engine=ENGINE,
            )
        )
    return out


def check_resnapshot(ctx: CheckContext) -> list[CheckOutcome]:
    """Tables silver recorded as needing a new snapshot (an unreproducible added default)."""
    from silver.resnapshot import needing_resnapshot

    flagged: dict[str, list[str]] = {}
    for entry in needing_resnapshot(ctx.lake_root):
        if entry.source == ctx.cut.source:
            flagged.setdefault(entry.collection, []).append(f"{entry.column}: {entry.reason}")
    out = []
    for collection in sorted(set(ctx.collections) | set(flagged)):
        reasons = flagged.get(collection, [])
        out.append(
            CheckOutcome(
                RESNAPSHOT,
                ctx.cut.source,
                collection,
                not reasons,
                f"{len(reasons)} added column(s) whose older rows silver cannot fill",
                unexpected_count=len(reasons),
                sample=tuple(reasons[:SAMPLE_SIZE]),
                details=(
                    "silver/_resnapshot: rows written before the column was added hold NULL "
                    "where the source shows a value silver cannot know; snapshot the table "
                    "again (e.g. an incremental snapshot signal)"
                    if reasons
                    else ""
                ),
                engine=ENGINE,
            )
        )
    return out


CDC_CHECKS: tuple[tuple[str, Callable[[CheckContext], list[CheckOutcome]]], ...] = (
    (QUARANTINE, check_quarantine),
    (POSITIONS_MONOTONIC, check_positions_monotonic),
    (UPDATE_BEFORE_INSERT, check_update_before_insert),
    (FRESHNESS, check_freshness),
    (LATE_EVENTS, check_late_events),
    (RESNAPSHOT, check_resnapshot),
)
"""The CDC checks, by name, in report order."""
