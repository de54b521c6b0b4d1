"""Moving gold forward: newest consistent cut -> quality checks -> publish -> views -> derived.

For every source whose silver has a consistent cut newer than the one gold shows, the quality
checks run on the gold view *at the new cut* first. A source with a failed ``block`` check is
held: gold keeps showing its last published cut (and the report says why); the other sources
move. Then the ``gold.*`` views are defined at the published cuts and the derived tables of
``gold.tables`` are rebuilt. Each step can be rerun after a crash: publishing is one Delta
commit, views are catalog entries, derived tables skip a publication they already hold.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from bronze.storage import LakePath, lake_path, open_delta
from gold.cuts import Cut, consistent_cuts
from gold.derived import DerivedResult, build_derived_tables
from gold.materialize import materialize_gold
from gold.outcome import CheckOutcome
from gold.publish import PUBLISHED, publish, published_cuts
from pipeline import metrics

if TYPE_CHECKING:
    from gold.quality import Gate
from gold.views import register_views
from silver.timings import job_stage

__all__ = ["GoldRefresh", "refresh_gold", "register_published_views"]

logger = logging.getLogger(__name__)

ExtraChecks = Callable[[Mapping[str, Cut]], Iterable[CheckOutcome]]
"""Outcomes of checks the caller runs itself for the candidate cuts (reconciliation)."""


@dataclass(frozen=True, slots=True)
class GoldRefresh:
    """What one refresh did.

    Attributes:
        published: Sources whose gold moved, with the cut it moved to.
        held: Sources kept at their last cut by a blocking check, with the refused cut.
        current: The cut gold shows now, per source.
        quality: The quality run over the candidate cuts (None when none ran).
        derived: Derived tables rebuilt.
        views: The gold views defined.
    """

    published: Mapping[str, Cut] = field(default_factory=dict)
    held: Mapping[str, Cut] = field(default_factory=dict)
    current: Mapping[str, Cut] = field(default_factory=dict)
    quality: Any = None
    derived: tuple[DerivedResult, ...] = ()
    views: tuple[str, ...] = ()


def _publication_number(lake_root: LakePath) -> int:

    return int(open_delta(lake_path(lake_root) / "gold" / PUBLISHED).version())


def register_published_views(spark: Any, lake_root: LakePath) -> list[str]:
    """Define the ``gold.*`` views at the cuts gold shows now (for notebooks and ad-hoc SQL)."""
    return register_views(spark, lake_root, published_cuts(lake_root))


def refresh_gold(
    spark: Any,
    config: Any,
    lake_root: LakePath,
    *,
    run_checks: bool | None = None,
    extra_checks: ExtraChecks | None = None,
    gate: Gate | None = None,
) -> GoldRefresh:
    """Move gold to the newest consistent cut of each source that passes its blocking checks.

    Args:
        spark: The session.
        config: The pipeline config (``gold`` and ``quality`` sections).
        lake_root: The lake root.
        run_checks: Run the quality checks before publishing; None follows
            ``quality.enabled``.
        extra_checks: Called with the candidate cuts; its outcomes join the quality run (the
            scheduled reconciliation).
        gate: Run only the blocking checks (:class:`gold.quality.Gate`): enough to decide
            what moves; the others run on their own schedule.

    Returns:
        What moved, what was held, and the quality run.
    """
    root = lake_path(lake_root)
    clock = time.monotonic()
    spent: dict[str, float] = {}

    def lap(stage: str) -> None:
        nonlocal clock
        now = time.monotonic()
        spent[stage] = spent.get(stage, 0.0) + now - clock
        clock = now

    with job_stage("gold cuts"):
        shown = published_cuts(root)
        found = consistent_cuts(root)
    candidates: dict[str, Cut] = {}
    for source, cuts in found.items():
        newest = cuts[-1]
        if source not in shown or newest.silver_batch > shown[source].silver_batch:
            candidates[source] = newest
    lap("cuts")
    checks = config.quality.enabled if run_checks is None else run_checks
    quality_run = None
    held: dict[str, Cut] = {}
    if candidates and checks:
        from gold.quality import run_quality

        with job_stage("gold extra checks"):
            extra = list(extra_checks(candidates)) if extra_checks is not None else []
        lap("extra checks")
        with job_stage("gold checks"):
            quality_run = run_quality(spark, config, root, candidates, extra=extra, gate=gate)
        lap("blocking checks" if gate is not None else "quality run")
        held = {s: c for s, c in candidates.items() if s in quality_run.blocked_sources}
        for source, cut in held.items():
            logger.warning(
                "gold: %s held at its last good cut; silver batch %s failed blocking checks",
                source,
                cut.silver_batch,
            )
    moving = {s: c for s, c in candidates.items() if s not in held}
    with job_stage("gold publish"):
        publish(root, moving.values(), quality_run=quality_run.run_id if quality_run else None)
    lap("publish")
    current = {**shown, **moving}
    with job_stage("gold views"):
        views = register_views(spark, root, current)
    with job_stage("gold materialize"):
        materialize_gold(spark, config, root, current)  # gold.materialize: plain Delta copies
    lap("views")
    derived: list[DerivedResult] = []
    if current and config.gold.tables:
        with job_stage("gold derived"):
            derived = build_derived_tables(
                spark, root, config.gold.tables, current, _publication_number(root)
            )
        lap("derived")
    logger.info(
        "gold refresh: %s moved, %s held [%s]",
        ", ".join(sorted(moving)) or "none",
        ", ".join(sorted(held)) or "none",
        ", ".join(f"{k} {v:.2f}" for k, v in spent.items()),
    )
    metrics.on_gold_refreshed(spent, held, current)
    return GoldRefresh(moving, held, current, quality_run, tuple(derived), tuple(views))
