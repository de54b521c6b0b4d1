"""Where a silver micro-batch's time went: one log line per micro-batch, per stage and table.

``run --continuous`` users ask "why is gold minutes behind?"; the answer is in which stage of
which micro-batch took the time. :class:`BatchTimings` collects wall-clock seconds per stage
(read and split, summary, per-table screen/decode/MERGE, cuts, progress, pending, purge and
compaction, gold) and the number of Spark jobs the application started meanwhile, and renders
them as one INFO line (:meth:`BatchTimings.describe`). Tables applied concurrently each keep
their own stages; the line shows the slowest tables.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchTimings", "spark_jobs_started"]

_SHOWN_TABLES = 3
"""Slowest tables named in the line (the rest are summed)."""


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
    """

    batch_id: int
    stages: dict[str, float] = field(default_factory=dict)
    tables: dict[str, dict[str, float]] = field(default_factory=dict)
    jobs: int | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _started: float = field(default_factory=time.monotonic, repr=False)

    @contextlib.contextmanager
    def stage(self, name: str, table: str | None = None) -> Iterator[None]:
        """Time the block as ``name`` (of ``table`` when given); repeated stages add up."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.add(name, time.monotonic() - started, table)

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
        )
