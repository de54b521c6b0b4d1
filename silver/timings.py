"""Where a silver micro-batch's time went: one log line per micro-batch, per stage and table.

``run --continuous`` users ask "why is gold minutes behind?"; the answer is in which stage of
which micro-batch took the time. :class:`BatchTimings` collects wall-clock seconds per stage
(read and split, summary, per-table screen/decode/MERGE, cuts, progress, pending, purge and
compaction, gold) and the number of Spark jobs the application started meanwhile, and renders
them as one INFO line (:meth:`BatchTimings.describe`). Tables applied concurrently each keep
their own stages; the line shows the slowest tables.

The Spark jobs are counted per stage too, since on a small micro-batch a job's fixed cost (driver,
JVM, py4j) is what the time is made of: each stage runs its jobs under a job group of its own
(``spark.jobGroup.id``, a thread-local property of the JVM thread the Python thread is pinned
to), and the status tracker says how many jobs that group ran when the stage ends. Jobs no stage
claims (the background quality run, say) show as ``other``. At DEBUG, each block's jobs are
logged with their stages' names (the call sites that ran them): what a stage's jobs are.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchTimings", "job_stage", "spark_jobs_started"]

logger = logging.getLogger(__name__)

_SHOWN_TABLES = 3
"""Slowest tables named in the line (the rest are summed)."""
_GROUP = "spark.jobGroup.id"
_ACTIVE: BatchTimings | None = None
"""The micro-batch being timed (one at a time: the silver job runs them under a lock)."""


def spark_jobs_started(spark: Any) -> int | None:
    """How many Spark jobs the application has started so far; None when it cannot tell.

    Read from the DAG scheduler's job counter (one py4j call, no job): the difference across a
    micro-batch is the jobs it ran, plus any a concurrent thread (the background quality run)
    started meanwhile.
    """
    try:
        counter = spark.sparkContext._jsc.sc().dagScheduler().nextJobId()
        # Spark 4 keeps an int there (py4j returns it as one); earlier, an AtomicInteger.
        return int(counter if isinstance(counter, int) else counter.get())
    except Exception:  # noqa: BLE001 - a diagnostic only; never fails a micro-batch
        return None


@dataclass
class BatchTimings:
    """Seconds per stage of one micro-batch (thread-safe: tables run in worker threads).

    Attributes:
        batch_id: The silver batch.
        stages: Stage -> seconds, for the micro-batch as a whole.
        tables: Silver table -> stage -> seconds.
        jobs: Spark jobs started during the micro-batch (None: unknown).
        stage_jobs: Stage -> Spark jobs its blocks ran (all tables together; a nested stage's
            jobs count for it, not for the stage around it).
        spark: The session whose jobs are counted per stage (None: stages are only timed).
    """

    batch_id: int
    stages: dict[str, float] = field(default_factory=dict)
    tables: dict[str, dict[str, float]] = field(default_factory=dict)
    jobs: int | None = None
    stage_jobs: dict[str, int] = field(default_factory=dict)
    spark: Any = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _started: float = field(default_factory=time.monotonic, repr=False)
    _groups: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def activate(self) -> None:
        """Make this the micro-batch :func:`job_stage` counts for (gold's stages, say)."""
        global _ACTIVE  # noqa: PLW0603 - one micro-batch at a time, by the job's lock
        _ACTIVE = self

    def deactivate(self) -> None:
        """The micro-batch is over: :func:`job_stage` counts for none."""
        global _ACTIVE  # noqa: PLW0603 - as above
        if _ACTIVE is self:
            _ACTIVE = None

    @contextlib.contextmanager
    def stage(self, name: str, table: str | None = None, *, timed: bool = True) -> Iterator[None]:
        """Time the block as ``name`` (of ``table`` when given) and count its Spark jobs;
        repeated stages add up. ``timed=False`` counts the jobs only (a block inside a timed
        stage, whose seconds are that stage's)."""
        started = time.monotonic()
        try:
            with self.jobs_of(name, table):
                yield
        finally:
            if timed:
                self.add(name, time.monotonic() - started, table)

    @contextlib.contextmanager
    def jobs_of(self, name: str, table: str | None = None) -> Iterator[None]:
        """Count the Spark jobs the calling thread runs in the block as ``name``'s."""
        context = _context(self.spark)
        if context is None:
            yield
            return
        with self._lock:
            group = f"medallion-{self.batch_id}-{name}-{table or ''}-{next(self._groups)}"
        previous = context.getLocalProperty(_GROUP)
        context.setLocalProperty(_GROUP, group)
        try:
            yield
        finally:
            context.setLocalProperty(_GROUP, previous)
            try:
                tracker = context.statusTracker()
                ids = tracker.getJobIdsForGroup(group)
                ran = len(ids)
                if ran and logger.isEnabledFor(logging.DEBUG):
                    logger.debug("%s: %s", group, _job_names(tracker, ids, _status_store(context)))
            except Exception:  # noqa: BLE001 - a diagnostic only; never fails a micro-batch
                ran = 0
            if ran:
                with self._lock:
                    self.stage_jobs[name] = self.stage_jobs.get(name, 0) + ran

    def add(self, name: str, seconds: float, table: str | None = None) -> None:
        """Add ``seconds`` to a stage."""
        with self._lock:
            target = self.stages if table is None else self.tables.setdefault(table, {})
            target[name] = target.get(name, 0.0) + seconds

    @property
    def total(self) -> float:
        """Seconds since the micro-batch started."""
        return time.monotonic() - self._started

    def describe(self, events: int) -> str:
        """The micro-batch in one line: total, stages, the slowest tables, Spark jobs."""
        with self._lock:
            stages = ", ".join(f"{k} {v:.2f}" for k, v in self.stages.items())
            ranked = sorted(self.tables.items(), key=lambda kv: -sum(kv[1].values()))
        shown = [
            f"{name} {sum(parts.values()):.2f} ("
            + ", ".join(f"{k} {v:.2f}" for k, v in parts.items())
            + ")"
            for name, parts in ranked[:_SHOWN_TABLES]
        ]
        if len(ranked) > _SHOWN_TABLES:
            rest = sum(sum(p.values()) for _, p in ranked[_SHOWN_TABLES:])
            shown.append(f"{len(ranked) - _SHOWN_TABLES} more {rest:.2f}")
        jobs = "?" if self.jobs is None else str(self.jobs)
        return (
            f"silver batch {self.batch_id}: {events} rows, {len(ranked)} tables, {jobs} Spark "
            f"jobs, {self.total:.2f} s [{stages}]"
            + (f"; slowest tables (table-seconds, concurrent): {'; '.join(shown)}" if shown else "")
            + (f"; Spark jobs per stage: {self.describe_jobs()}" if self.stage_jobs else "")
        )

    def describe_jobs(self) -> str:
        """Jobs per stage, most first; ``other``: jobs no stage ran (another thread's)."""
        with self._lock:
            counted = dict(self.stage_jobs)
        if self.jobs is not None and self.jobs > sum(counted.values()):
            counted["other"] = self.jobs - sum(counted.values())
        return ", ".join(f"{k} {v}" for k, v in sorted(counted.items(), key=lambda kv: -kv[1]))


def _job_names(tracker: Any, ids: list[int], store: Any = None) -> str:
    """Each job with its description (Delta names its jobs: "MERGE operation - materialize
    source", "Compute snapshot for version: 7") or else its stages' names (Spark's call sites),
    for DEBUG."""
    named = []
    for job in sorted(ids):
        described = _description(store, job)
        if described:
            named.append(f"job {job}: {described}")
            continue
        info = tracker.getJobInfo(job)
        stages = [tracker.getStageInfo(s) for s in (info.stageIds if info else [])]
        named.append(f"job {job}: " + " | ".join(s.name for s in stages if s is not None))
        # Stage info of a finished job may already be gone: the job id is still shown.
    return "; ".join(named)


def _description(store: Any, job: int) -> str | None:
    """The job's description from the application's status store (None: unset or gone)."""
    if store is None:
        return None
    try:
        described = store.job(job).description()
        return str(described.get()) if described.isDefined() else None
    except Exception:  # noqa: BLE001 - a diagnostic only: the job may have left the store
        return None


def _status_store(context: Any) -> Any:
    try:
        return context._jsc.sc().statusStore()
    except Exception:  # noqa: BLE001 - a diagnostic only
        return None


def _context(spark: Any) -> Any:
    if spark is None:
        return None
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - a diagnostic only (a Connect session has none)
        return None


@contextlib.contextmanager
def job_stage(name: str) -> Iterator[None]:
    """Count the Spark jobs of the block as stage ``name`` of the micro-batch being timed (a
    no-op outside one: gold refreshed by ``run --once``, say)."""
    active = _ACTIVE
    if active is None:
        yield
        return
    with active.jobs_of(name):
        yield
