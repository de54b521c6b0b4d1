"""``medallion reconcile --repair``: the lake repairs what reconciliation finds.

Reconciliation (:mod:`gold.reconcile`) names the keys where gold differs from the source. For
each table that differs, :func:`repair_source`:

1. builds an ``additional-conditions`` filter selecting exactly the keys missing in gold or
   holding other values (all of them when reconciliation listed them all; the whole table when
   there were more than it lists);
2. sends one ``execute-snapshot`` signal (incremental) for those tables through the source's
   signal channel (:meth:`capture.incremental_snapshot.IncrementalSnapshots.send_signal`);
3. runs the pipeline once (``run``): the source is landed until its snapshot is complete, then
   silver and gold, so the snapshot's rows reach gold;
4. reconciles again and reports, per table, what was sent and whether it is now clean.

The snapshot rows take the position of their high watermark in the log, so they overwrite
silver's damaged rows (older positions) and never a newer change. A key that gold holds and the
source does not (``extra``) cannot be repaired by a snapshot, which reads rows and deletes none:
it is reported as not repaired.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from gold.reconcile import ReconcileResult, TableReconciliation
from pipeline.errors import ReconcileError

__all__ = ["RepairResult", "TableRepair", "repair_now", "repair_plan", "repair_source"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TableRepair:
    """What was done for one table that differed.

    Attributes:
        collection: The source table.
        keys: Keys the snapshot was limited to (0: the whole table was snapshotted).
        condition: The ``additional-conditions`` filter sent (None: the whole table, or nothing
            sent).
        sent: A snapshot was requested.
        repaired: The table reconciles clean afterwards.
        note: Why something could not be repaired.
    """

    collection: str
    keys: int
    condition: str | None
    sent: bool
    repaired: bool = False
    note: str = ""

    def row(self) -> dict[str, Any]:
        """The CLI's row."""
        return {
            "table": self.collection,
            "snapshot": ("whole table" if self.keys == 0 else f"{self.keys} key(s)")
            if self.sent
            else "not sent",
            "repaired": self.repaired,
            "note": self.note,
        }


@dataclass(frozen=True, slots=True)
class RepairResult:
    """``reconcile --repair`` of one source.

    Attributes:
        before: The reconciliation that found the differences.
        after: The reconciliation after the repair (None when nothing needed repair).
        tables: One entry per table that differed.
    """

    before: ReconcileResult
    after: ReconcileResult | None
    tables: tuple[TableRepair, ...]

    @property
    def success(self) -> bool:
        """Clean after the repair (or clean already)."""
        return (self.after or self.before).success

    def rows(self) -> list[dict[str, Any]]:
        """The CLI's rows."""
        return [t.row() for t in self.tables]


def _keys(texts: tuple[str, ...]) -> list[dict[str, Any]]:
    return [orjson.loads(t) for t in texts]


def repair_plan(
    table: TableReconciliation, condition_for: Callable[[list[dict[str, Any]]], str]
) -> TableRepair:
    """What to snapshot for one differing table (see the module docstring)."""
    if not table.keyed:
        return TableRepair(
            table.collection, 0, None, False, note="no primary key: cannot snapshot by key"
        )
    note = ""
    if table.extra_count:
        note = (
            f"{table.extra_count} key(s) in gold that the source does not have: a snapshot "
            "deletes nothing"
        )
    wanted = table.missing_count + table.differing_count
    listed = _keys(table.missing_in_gold) + _keys(table.differing)
    if wanted == 0 and not table.differing_ranges and (table.values is None or table.values.clean):
        return TableRepair(table.collection, 0, None, False, note=note)
    if wanted and len(listed) == wanted:
        return TableRepair(table.collection, len(listed), condition_for(listed), True, note=note)
    return TableRepair(table.collection, 0, None, True, note=note)


def repair_source(
    config: Any,
    source_name: str,
    *,
    reconcile: Callable[[], ReconcileResult],
    run_once: Callable[[], None],
) -> RepairResult:
    """Reconcile, snapshot what differs, run the pipeline once, reconcile again.

    Args:
        config: The pipeline config.
        source_name: The source to repair.
        reconcile: Reconciles the source with the gold it shows.
        run_once: Lands the source until its snapshot is complete, then runs silver and gold.

    Returns:
        What was found, sent and repaired.

    Raises:
        ReconcileError: The source's agent takes no incremental snapshots.
    """
    from capture.incremental_snapshot import IncrementalSnapshots
    from capture.registry import create_source
    from capture.signals import EXECUTE_SNAPSHOT, Signal, new_signal_id

    before = reconcile()
    differing = [t for t in before.tables if not t.success]
    if not differing:
        return RepairResult(before, None, ())
    source_config = next(s for s in config.sources if s.name == source_name)
    agent = create_source(source_config)
    if not isinstance(agent, IncrementalSnapshots):
        raise ReconcileError(
            f"source {source_name}: its agent takes no incremental snapshots, so "
            "reconcile --repair cannot repair it"
        )
    try:
        plans = [repair_plan(t, agent.key_condition) for t in differing]
        sent = [p for p in plans if p.sent]
        if sent:
            data: dict[str, Any] = {
                "data-collections": [p.collection for p in sent],
                "type": "incremental",
                "additional-conditions": [
                    {"data-collection": p.collection, "filter": p.condition}
                    for p in sent
                    if p.condition is not None
                ],
            }
            where = agent.send_signal(Signal(new_signal_id(), EXECUTE_SNAPSHOT, data))
            logger.info(
                "reconcile --repair %s: snapshot of %s requested through the %s",
                source_name,
                ", ".join(p.collection for p in sent),
                where,
            )
    finally:
        # Not agent.close(): under slot.drop.on.stop it would drop the agent's slot.
        agent.release()
    if not sent:
        return RepairResult(before, None, tuple(plans))
    run_once()
    after = reconcile()
    clean = {t.collection for t in after.tables if t.success}
    tables = tuple(
        TableRepair(p.collection, p.keys, p.condition, p.sent, p.collection in clean, p.note)
        for p in plans
    )
    return RepairResult(before, after, tables)


def repair_now(
    config: Any, source_name: str, *, ranges: int = 16, lake_root: Path | None = None
) -> RepairResult:
    """``medallion reconcile <source> --repair``: :func:`repair_source` with the pipeline's own
    reconciliation, landing (until the snapshot is complete) and ``run --once``.

    The source's capture agent must not be running meanwhile: this lands the source itself.
    """
    from pipeline.orchestration import land_sources, reconcile_now, run_pipeline

    def run_once() -> None:
        land_sources(config, [source_name], lake_root=lake_root)
        run_pipeline(config, lake_root=lake_root, run_checks=False)

    return repair_source(
        config,
        source_name,
        reconcile=lambda: reconcile_now(config, source_name, ranges=ranges, lake_root=lake_root),
        run_once=run_once,
    )
