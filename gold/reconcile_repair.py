"""``medallion reconcile --repair``: the lake repairs what reconciliation finds.

Reconciliation (:mod:`gold.reconcile`) names the keys where gold differs from the source. For
each table that differs, :func:`repair_source`:

1. builds an ``additional-conditions`` filter selecting exactly the keys missing in gold or
   holding other values (all of them when reconciliation listed them all; the whole table when
   there were more than it lists);
2. sends one ``execute-snapshot`` signal (incremental) for those tables through the source's
   signal channel (:meth:`capture.incremental_snapshot.IncrementalSnapshots.send_signal`);
3. waits for the snapshot to be landed (:func:`wait_landed`): by the source's running capture
   agent when there is one, else by landing the source here until the snapshot is complete;
4. runs silver and gold once, so the snapshot's rows reach gold;
5. reconciles again and reports, per table, what was sent and whether it is now clean.

**Is an agent running?** The evidence is bronze's committed offset, which the agent moves with
every batch and in which it records each signal it carried out (``signals.ended``). After the
signal is sent, the running agent reads it from its log and lands the snapshot's rows, so its
committed offset moves within a poll interval and a commit; if the offset does not move within
``agent_wait_s``, no agent is running and the repair lands the source itself. This works alike
for every connector (no engine-specific liveness query, no lock file an agent killed with
``kill -9`` would leave behind), and what it waits for is exactly what the repair needs: the
snapshot's rows committed to bronze. Scheduled repair (``quality.reconcile.repair``,
:func:`request_repair`) only sends the signal: the running agent lands it, and a later scheduled
reconciliation shows the result.

The snapshot rows take the position of their high watermark in the log, so they overwrite
silver's damaged rows (older positions) and never a newer change. A key that gold holds and the
source does not (``extra``) cannot be repaired by a snapshot, which reads rows and deletes none:
it is reported as not repaired.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson

from bronze.storage import LakePath
from gold.reconcile import ReconcileResult, TableReconciliation
from pipeline.errors import PipelineError, ReconcileError

if TYPE_CHECKING:
    from gold.outcome import CheckOutcome

__all__ = [
    "AGENT_WAIT_S",
    "RepairRequest",
    "RepairResult",
    "TableRepair",
    "repair_now",
    "repair_plan",
    "repair_source",
    "request_repair",
    "scheduled_repair",
    "snapshot_outcome",
    "wait_landed",
]

logger = logging.getLogger(__name__)

AGENT_WAIT_S = 15.0
"""How long ``reconcile --repair`` watches bronze for a running agent to pick its signal up
before it lands the source itself (a poll interval and a batch commit, with room for a loaded
machine)."""
LANDED_TIMEOUT_S = 3600.0
"""How long it waits for a running agent to finish the repair's snapshot."""


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
        landed_by: ``running agent`` or ``this command`` (empty when nothing was sent).
    """

    before: ReconcileResult
    after: ReconcileResult | None
    tables: tuple[TableRepair, ...]
    landed_by: str = ""

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


@dataclass(frozen=True, slots=True)
class RepairRequest:
    """The ``execute-snapshot`` a repair sent (or would have).

    Attributes:
        plans: One entry per table that differed.
        signal_id: The signal's id (None: nothing could be snapshotted).
        channel: Where it went (signaling table or file).
    """

    plans: tuple[TableRepair, ...]
    signal_id: str | None
    channel: str = ""


def request_repair(config: Any, source_name: str, found: ReconcileResult) -> RepairRequest:
    """Send one ``execute-snapshot`` for what ``found`` names as differing; lands nothing.

    Raises:
        ReconcileError: The source's agent takes no incremental snapshots.
    """
    from capture.incremental_snapshot import IncrementalSnapshots
    from capture.registry import create_source
    from capture.signals import EXECUTE_SNAPSHOT, Signal, new_signal_id

    differing = [t for t in found.tables if not t.success]
    source_config = next(s for s in config.sources if s.name == source_name)
    agent = create_source(source_config)
    if not isinstance(agent, IncrementalSnapshots):
        raise ReconcileError(
            f"source {source_name}: its agent takes no incremental snapshots, so "
            "reconcile --repair cannot repair it"
        )
    try:
        plans = tuple(repair_plan(t, agent.key_condition) for t in differing)
        sent = [p for p in plans if p.sent]
        if not sent:
            return RepairRequest(plans, None)
        data: dict[str, Any] = {
            "data-collections": [p.collection for p in sent],
            "type": "incremental",
            "additional-conditions": [
                {"data-collection": p.collection, "filter": p.condition}
                for p in sent
                if p.condition is not None
            ],
        }
        signal_id = new_signal_id()
        where = agent.send_signal(Signal(signal_id, EXECUTE_SNAPSHOT, data))
    finally:
        # Not agent.close(): under slot.drop.on.stop it would drop the agent's slot.
        agent.release()
    logger.info(
        "reconcile --repair %s: snapshot %s of %s requested through the %s",
        source_name,
        signal_id,
        ", ".join(p.collection for p in sent),
        where,
    )
    return RepairRequest(plans, signal_id, where)


def snapshot_outcome(offset: dict[str, Any] | None, signal_id: str) -> str | None:
    """How the snapshot of ``signal_id`` ended according to a committed ``offset``
    (``complete``, ``stopped``, ``refused: ...``), None while it has not."""
    if offset is None:
        return None
    ended = (offset.get("signals") or {}).get("ended") or {}
    outcome = ended.get(signal_id)
    return None if outcome is None else str(outcome)


Committed = Callable[[], tuple[int, dict[str, Any]] | None]
"""The source's last committed ``(batch_seq, offset)`` in bronze, None before any."""


def wait_landed(
    committed: Committed,
    signal_id: str,
    land: Callable[[], None],
    *,
    baseline: tuple[int, dict[str, Any]] | None,
    agent_wait_s: float = AGENT_WAIT_S,
    timeout_s: float = LANDED_TIMEOUT_S,
    poll_s: float = 0.2,
) -> tuple[str, str]:
    """Wait until the snapshot of ``signal_id`` is committed to bronze (see the module
    docstring): by the running agent, or by ``land`` when no agent moved the offset within
    ``agent_wait_s``.

    Args:
        committed: The source's last committed ``(batch_seq, offset)``, None before any.
        signal_id: The repair's ``execute-snapshot``.
        land: Lands the source until it is exhausted (its snapshot complete).
        baseline: ``committed()`` from before the signal was sent.
        agent_wait_s: How long an idle offset means no agent runs.
        timeout_s: How long a running agent may take.
        poll_s: How often bronze is read.

    Returns:
        ``(who landed it, how it ended)``.

    Raises:
        ReconcileError: A running agent did not finish in ``timeout_s``, or the snapshot did
            not end after landing here.
    """
    start = time.monotonic()
    while True:
        now = committed()
        outcome = None if now is None else snapshot_outcome(now[1], signal_id)
        moved = now is not None and (baseline is None or now[0] != baseline[0])
        if outcome is not None:
            return ("running agent" if moved else "this command"), outcome
        elapsed = time.monotonic() - start
        if not moved and elapsed >= agent_wait_s:
            break
        if moved and elapsed >= timeout_s:
            raise ReconcileError(
                f"the running capture agent did not finish the repair's snapshot {signal_id} "
                f"in {timeout_s:.0f} s (see its log; the signal stays in the signaling table)"
            )
        time.sleep(poll_s)
    logger.info("no capture agent moved bronze in %.1f s: landing the source here", agent_wait_s)
    land()
    now = committed()
    outcome = None if now is None else snapshot_outcome(now[1], signal_id)
    if outcome is None:
        raise ReconcileError(
            f"the repair's snapshot {signal_id} did not end after landing the source "
            "(is another capture agent of this source running?)"
        )
    return "this command", outcome


def repair_source(
    config: Any,
    source_name: str,
    *,
    reconcile: Callable[[], ReconcileResult],
    committed: Committed,
    land: Callable[[], None],
    run_once: Callable[[], None],
    agent_wait_s: float = AGENT_WAIT_S,
) -> RepairResult:
    """Reconcile, snapshot what differs, wait for it to be landed, run silver and gold once,
    reconcile again.

    Args:
        config: The pipeline config.
        source_name: The source to repair.
        reconcile: Reconciles the source with the gold it shows.
        committed: The source's last committed batch in bronze (:func:`wait_landed`).
        land: Lands the source until it is exhausted, when no agent runs.
        run_once: Runs silver and gold once.
        agent_wait_s: How long an idle bronze offset means no agent runs.

    Returns:
        What was found, sent and repaired.

    Raises:
        ReconcileError: The source's agent takes no incremental snapshots, or the snapshot
            was refused.
    """
    before = reconcile()
    if before.success:
        return RepairResult(before, None, ())
    baseline = committed()
    request = request_repair(config, source_name, before)
    if request.signal_id is None:
        return RepairResult(before, None, request.plans)
    landed_by, outcome = wait_landed(
        committed, request.signal_id, land, baseline=baseline, agent_wait_s=agent_wait_s
    )
    if outcome != "complete":
        raise ReconcileError(
            f"source {source_name}: the repair's snapshot {request.signal_id} ended {outcome}"
        )
    run_once()
    after = reconcile()
    clean = {t.collection for t in after.tables if t.success}
    tables = tuple(
        TableRepair(p.collection, p.keys, p.condition, p.sent, p.collection in clean, p.note)
        for p in request.plans
    )
    return RepairResult(before, after, tables, landed_by)


def repair_now(
    config: Any,
    source_name: str,
    *,
    ranges: int = 16,
    lake_root: LakePath | None = None,
    agent_wait_s: float = AGENT_WAIT_S,
) -> RepairResult:
    """``medallion reconcile <source> --repair``: :func:`repair_source` with the pipeline's own
    reconciliation, bronze's committed offset, landing and ``run --once``.

    The source's capture agent may be running (it lands the snapshot) or stopped (this lands
    the source until the snapshot is complete).
    """
    from bronze.writer import BronzeWriter, agent_app_id
    from pipeline.orchestration import bronze_tables, land_sources, reconcile_now, run_pipeline

    writer = BronzeWriter(bronze_tables(config, lake_root))
    app_id = agent_app_id(source_name)

    def committed() -> tuple[int, dict[str, Any]] | None:
        batch = writer.last_committed(app_id)
        return None if batch is None else (batch.batch_seq, batch.offset)

    def land() -> None:
        land_sources(config, [source_name], lake_root=lake_root)

    def run_once() -> None:
        run_pipeline(config, lake_root=lake_root, run_checks=False)

    return repair_source(
        config,
        source_name,
        reconcile=lambda: reconcile_now(config, source_name, ranges=ranges, lake_root=lake_root),
        committed=committed,
        land=land,
        run_once=run_once,
        agent_wait_s=agent_wait_s,
    )


def scheduled_repair(
    config: Any,
    source_name: str,
    found: ReconcileResult,
    outcomes: Sequence[CheckOutcome],
    lake_root: LakePath | None = None,
) -> list[CheckOutcome]:
    """``quality.reconcile.repair``: after a scheduled reconciliation that found differences,
    request their repair from the running capture agent (:func:`request_repair`), and say so in
    the failing outcomes' details (the check still fails: the repair shows in a later one).

    Nothing is requested while the source's committed offset shows an incremental snapshot
    still running (an earlier repair, most likely): the next scheduled check looks again. An
    error sending the signal is told the same way and does not stop the run.
    """
    from bronze.writer import BronzeWriter, agent_app_id
    from pipeline.orchestration import bronze_tables

    batch = BronzeWriter(bronze_tables(config, lake_root)).last_committed(agent_app_id(source_name))
    running = None if batch is None else (batch.offset.get("signals") or {}).get("snapshot")
    if running is not None:
        note = (
            f"repair not requested: incremental snapshot {running.get('id')} is still running "
            "(the next scheduled check looks again)"
        )
    else:
        try:
            request = request_repair(config, source_name, found)
        except PipelineError as exc:
            note = f"repair not requested: {exc}"
            logger.warning("scheduled repair of %s: %s", source_name, note)
        else:
            if request.signal_id is None:
                note = "nothing to repair by a snapshot: " + "; ".join(
                    f"{p.collection}: {p.note}" for p in request.plans if p.note
                )
            else:
                note = (
                    f"repair requested: incremental snapshot {request.signal_id} of "
                    + ", ".join(
                        f"{p.collection} ({p.keys or 'all'} key(s))"
                        for p in request.plans
                        if p.sent
                    )
                    + f" through the {request.channel}; the capture agent lands it"
                )
                logger.warning("scheduled reconciliation of %s: %s", source_name, note)
    return [
        o
        if o.success
        else dataclasses.replace(o, details="; ".join(filter(None, [o.details, note])))
        for o in outcomes
    ]
