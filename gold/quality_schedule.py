"""The full quality run of ``run --continuous``, off the path to gold.

Every micro-batch, gold moves on the blocking checks alone (:class:`gold.quality.Gate`). The
full run (every check, Great Expectations, the CDC checks over the source's bronze history, the
HTML report, the scheduled reconciliation) costs far more and decides nothing about what gold
may show, so :class:`BackgroundQuality` runs it on its own thread every
``quality.interval.seconds``, on the cuts gold shows at that moment; the micro-batches go on
meanwhile. Its results are recorded as a foreground run's are (``gold/_quality``, the report),
and the table versions whose blocking checks passed join the gate's, so the gate does not
check them again.

At most one full run is in flight: when the interval passes while one still runs, the next
starts after it, on the then newest cuts. A failing full run is logged and counted, never
raised into the micro-batch loop (the gate keeps gold correct without it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from bronze.storage import LakePath, lake_path
from gold.cuts import Cut
from gold.outcome import CheckOutcome

__all__ = ["BackgroundQuality"]

logger = logging.getLogger(__name__)

_JOIN_SECONDS = 120.0
"""How long :meth:`BackgroundQuality.close` waits for a run in flight before leaving it."""


class BackgroundQuality:
    """Runs :func:`gold.quality.run_quality` on a thread of its own, on a schedule.

    Args:
        spark: The session (Spark runs the thread's jobs beside the micro-batch's).
        config: The pipeline config.
        lake_root: The lake root.
        gate: The gate of the continuous run; learns the versions each full run passed.
        interval_seconds: Seconds between the starts of two full runs.
        extra_checks: Called with the cuts of each full run; its outcomes join it (the
            scheduled reconciliation when it cannot block gold).
    """

    def __init__(
        self,
        spark: Any,
        config: Any,
        lake_root: LakePath,
        gate: Any,
        *,
        interval_seconds: float,
        extra_checks: Callable[[Mapping[str, Cut]], Iterable[CheckOutcome]] | None = None,
    ) -> None:
        self._spark = spark
        self._config = config
        self._root = lake_path(lake_root)
        self._gate = gate
        self.interval = interval_seconds
        self._extra = extra_checks
        self._thread: threading.Thread | None = None
        self._started_at: float | None = None
        self._lock = threading.Lock()
        self.runs = 0
        """Full runs finished."""
        self.failures = 0
        """Full runs that failed (logged)."""
        self.last: Any = None
        """The last :class:`gold.quality.QualityRun` finished."""

    @property
    def running(self) -> bool:
        """Whether a full run is in flight."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def due(self, now: float | None = None) -> bool:
        """Whether a full run should start now (none in flight, the interval has passed)."""
        moment = time.monotonic() if now is None else now
        return not self.running and (
            self._started_at is None or moment - self._started_at >= self.interval
        )

    def poke(self, cuts: Mapping[str, Cut]) -> bool:
        """Start a full run on ``cuts`` (the cuts gold shows) when one is due.

        Returns:
            Whether a run started.
        """
        with self._lock:
            if not cuts or not self.due():
                return False
            self._started_at = time.monotonic()
            self._thread = threading.Thread(
                target=self._run, args=(dict(cuts),), name="gold-quality", daemon=True
            )
            self._thread.start()
            return True

    def _run(self, cuts: Mapping[str, Cut]) -> None:
        from gold.quality import run_quality

        started = time.monotonic()
        try:
            extra = list(self._extra(cuts)) if self._extra is not None else []
            run = run_quality(self._spark, self._config, self._root, cuts, extra=extra)
            self._gate.record(run)
            if run.blocking_failures:
                # The gate checked these cuts already; a full run that disagrees is a bug in
                # one of the two, and gold shows the cut: say so loudly.
                logger.error(
                    "quality: the full run %s fails blocking checks on cuts gold shows: %s",
                    run.run_id,
                    ", ".join(f"{r.source} {r.table} {r.check}" for r in run.blocking_failures),
                )
            self.last = run
            self.runs += 1
            logger.info(
                "quality: full run %s in %.1f s, off the micro-batch path",
                run.run_id,
                time.monotonic() - started,
            )
        except Exception:  # noqa: BLE001 - the loop goes on; the gate keeps gold correct
            self.failures += 1
            logger.exception("quality: the scheduled full run failed")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the run in flight.

        Returns:
            Whether none is in flight any more.
        """
        thread = self._thread
        if thread is not None:
            thread.join(timeout)
        return not self.running

    def close(self) -> None:
        """Wait (a while) for the run in flight; a run still going is left to the process."""
        if not self.wait(_JOIN_SECONDS):
            logger.warning("quality: a full run was still going when the pipeline stopped")
