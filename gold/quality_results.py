"""What a quality run found, and the Delta table that keeps it: ``<lake>/gold/_quality``.

:class:`CheckResult` is one check's outcome on one table (or one source) stamped with the run,
the severity and the cut it was measured at; :class:`QualityRun` is a whole run. Results are
appended to ``gold/_quality`` with deltalake, one commit per run, so a notebook can follow a
table's quality over time (:func:`quality_history`) without Spark.

A full run (every check, not the blocking gate of ``run --continuous``) also appends one row to
``<lake>/gold/_quality_runs``: its time, the cut of each source (silver batch and when silver
recorded it) and the :class:`Measure` values the report plots over runs (row counts, lag per
stage, freshness). That small table is the index of the history: the report reads the last N
rows of it, then only the ``gold/_quality`` files of those runs (:mod:`gold.report_history`).
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
from deltalake import write_deltalake
from deltalake.exceptions import TableNotFoundError

from bronze.storage import LakePath, lake_path, open_delta, storage_options
from gold.cuts import Cut
from pipeline.config import Severity

__all__ = [
    "QUALITY_TABLE",
    "RESULTS_SCHEMA",
    "RUNS_SCHEMA",
    "RUNS_TABLE",
    "CheckResult",
    "Measure",
    "QualityRun",
    "append_results",
    "quality_history",
    "results_path",
    "runs_path",
]

logger = logging.getLogger(__name__)

QUALITY_TABLE = "_quality"
"""Directory of the results table under ``<lake>/gold``."""

RESULTS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("checked_at", pa.timestamp("us", tz="UTC")),
        ("source", pa.string()),
        ("table", pa.string()),
        ("check", pa.string()),
        ("engine", pa.string()),
        ("severity", pa.string()),
        ("success", pa.bool_()),
        ("observed", pa.string()),
        ("unexpected_count", pa.int64()),
        ("sample", pa.list_(pa.string())),
        ("details", pa.string()),
        ("silver_batch", pa.int64()),
        ("position_hex", pa.string()),
    ]
)
"""Columns of ``gold/_quality``: one row per :class:`CheckResult`."""

RUNS_TABLE = "_quality_runs"
"""Directory of the full runs' index under ``<lake>/gold``."""

_TS = pa.timestamp("us", tz="UTC")
RUNS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("started_at", _TS),
        ("finished_at", _TS),
        (
            "cuts",
            pa.list_(
                pa.struct(
                    [("source", pa.string()), ("silver_batch", pa.int64()), ("recorded_at", _TS)]
                )
            ),
        ),
        (
            "measures",
            pa.list_(
                pa.struct(
                    [
                        ("source", pa.string()),
                        ("table", pa.string()),
                        ("name", pa.string()),
                        ("value", pa.float64()),
                    ]
                )
            ),
        ),
    ]
)
"""Columns of ``gold/_quality_runs``: one row per full run."""


@dataclass(frozen=True, slots=True)
class Measure:
    """A number a full run measured, plotted over runs by the report.

    Attributes:
        source: The source name.
        table: The source table; None for a source-wide value.
        name: What was measured (:mod:`gold.report_measures` names them).
        value: The value (seconds for lags and ages, a count for rows).
    """

    source: str
    table: str | None
    name: str
    value: float


@dataclass(frozen=True, slots=True)
class CheckResult:
    """One check's outcome, as recorded.

    Attributes:
        run_id: The quality run.
        checked_at: When the run started (UTC); every result of a run has the same time.
        source: The source name.
        table: The source table (``<schema>.<table>``); None for a source-wide check.
        check: The check's name (``primary_key``, ``expectation:<type>`` ...).
        engine: ``great_expectations`` or ``medallion``.
        severity: What a failure does (``warn`` reports, ``block`` keeps gold at its cut).
        success: Whether the check passed.
        observed: What was measured, for people.
        unexpected_count: Offending rows or keys, when countable.
        sample: Some offending keys or values.
        details: Where to look, what to do.
        silver_batch: The silver micro-batch of the cut checked (None: no cut of the source).
        position_hex: The cut's bronze position, hex.
    """

    run_id: str
    checked_at: dt.datetime
    source: str
    table: str | None
    check: str
    engine: str
    severity: Severity
    success: bool
    observed: str
    unexpected_count: int | None
    sample: tuple[str, ...]
    details: str
    silver_batch: int | None
    position_hex: str | None

    @property
    def blocking(self) -> bool:
        """A failure that keeps gold at its last good cut."""
        return not self.success and self.severity is Severity.BLOCK

    def to_row(self) -> dict[str, Any]:
        """The row written to ``gold/_quality``."""
        return {
            "run_id": self.run_id,
            "checked_at": self.checked_at,
            "source": self.source,
            "table": self.table,
            "check": self.check,
            "engine": self.engine,
            "severity": self.severity.value,
            "success": self.success,
            "observed": self.observed,
            "unexpected_count": self.unexpected_count,
            "sample": list(self.sample),
            "details": self.details,
            "silver_batch": self.silver_batch,
            "position_hex": self.position_hex,
        }


@dataclass(frozen=True, slots=True)
class QualityRun:
    """One run of every check over a set of cuts.

    Attributes:
        run_id: Unique id (``<UTC time>-<random>``); also in ``gold/_published.quality_run``.
        started_at: When the run started (UTC).
        finished_at: When it finished.
        cuts: The cut checked, per source.
        results: Every check's result.
        report_path: The HTML report written for this run (None when not written).
        measures: What the run measured besides its checks (full runs only).
        full: Every check ran (not only the blocking ones): the run joins the history index
            ``gold/_quality_runs``.
    """

    run_id: str
    started_at: dt.datetime
    finished_at: dt.datetime
    cuts: Mapping[str, Cut]
    results: tuple[CheckResult, ...]
    report_path: Path | None = None
    measures: tuple[Measure, ...] = ()
    full: bool = False

    @property
    def blocking_failures(self) -> tuple[CheckResult, ...]:
        """Failed checks of severity ``block``."""
        return tuple(r for r in self.results if r.blocking)

    @property
    def blocked_sources(self) -> frozenset[str]:
        """Sources whose gold must stay at the last good cut."""
        return frozenset(r.source for r in self.blocking_failures)

    @property
    def passed(self) -> int:
        """Checks that passed."""
        return sum(1 for r in self.results if r.success)

    @property
    def failed(self) -> int:
        """Checks that failed, whatever their severity."""
        return sum(1 for r in self.results if not r.success)

    @property
    def warned(self) -> int:
        """Checks that failed with severity ``warn``."""
        return sum(1 for r in self.results if not r.success and r.severity is Severity.WARN)

    @property
    def success(self) -> bool:
        """No blocking failure: gold may move to the cuts checked."""
        return not self.blocking_failures


def results_path(lake_root: LakePath) -> LakePath:
    """``<lake>/gold/_quality``."""
    return lake_path(lake_root) / "gold" / QUALITY_TABLE


def runs_path(lake_root: LakePath) -> LakePath:
    """``<lake>/gold/_quality_runs``."""
    return lake_path(lake_root) / "gold" / RUNS_TABLE


def append_results(lake_root: LakePath, run: QualityRun) -> int:
    """Append a run's results to ``gold/_quality`` in one commit.

    A full run (:attr:`QualityRun.full`) then adds its row to ``gold/_quality_runs``, after its
    results, so an indexed run always has them. A run already in a table (a retried write) is
    not appended to it again.

    Returns:
        Rows written (0 when the run was already there or had no results).
    """
    if not run.results:
        return 0
    with _APPENDS:
        written = _append(lake_root, run)
        if run.full:
            _append_run(lake_root, run)
        return written


_APPENDS = threading.Lock()
"""The gate (micro-batch thread) and the scheduled full run (its own thread) both append; one at
a time, so the check for a retried run and the append cannot interleave."""


def _holds(path: LakePath, run_id: str) -> bool:
    """Whether the Delta table at ``path`` has rows of ``run_id`` (False: no table yet)."""
    try:
        existing = open_delta(path)
    except TableNotFoundError:
        return False
    # Only the files whose statistics may hold this run are read: the gate appends a run per
    # micro-batch, so reading every run id would grow with the table's age.
    found = existing.to_pyarrow_table(columns=["run_id"], filters=[("run_id", "=", run_id)])
    return bool(found.num_rows)


_ATTEMPTED: set[tuple[str, str]] = set()
"""(table, run id) appends this process attempted. A run id is made in this process (a clock
and a random part), so its rows can be in a table only after an attempt here: the first
attempt needs no read of the table (a read per micro-batch, which the gate's appends made
slower as the table grew), a retried one reads it."""


def _retried(path: LakePath, run_id: str) -> bool:
    """Whether an earlier append of ``run_id`` to ``path`` was attempted (and so may be there)."""
    attempt = (str(path), run_id)
    if attempt in _ATTEMPTED:
        return True
    _ATTEMPTED.add(attempt)
    return False


def _append(lake_root: LakePath, run: QualityRun) -> int:
    path = results_path(lake_root)
    if _retried(path, run.run_id) and _holds(path, run.run_id):
        logger.info("quality: run %s already in %s", run.run_id, path)
        return 0
    table = pa.Table.from_pylist([r.to_row() for r in run.results], schema=RESULTS_SCHEMA)
    write_deltalake(str(path), table, mode="append", storage_options=storage_options(path))
    return table.num_rows


def _append_run(lake_root: LakePath, run: QualityRun) -> None:
    path = runs_path(lake_root)
    if _retried(path, run.run_id) and _holds(path, run.run_id):
        return
    row = {
        "run_id": run.run_id,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "cuts": [
            {"source": c.source, "silver_batch": c.silver_batch, "recorded_at": c.recorded_at}
            for c in sorted(run.cuts.values(), key=lambda c: c.source)
        ],
        "measures": [
            {"source": m.source, "table": m.table, "name": m.name, "value": m.value}
            for m in run.measures
        ],
    }
    write_deltalake(
        str(path),
        pa.Table.from_pylist([row], schema=RUNS_SCHEMA),
        mode="append",
        storage_options=storage_options(path),
    )


def quality_history(lake_root: LakePath) -> list[dict[str, Any]]:
    """Every recorded check result, oldest run first (rows of ``gold/_quality``).

    Args:
        lake_root: The lake root.

    Returns:
        One dict per result with the columns of :data:`RESULTS_SCHEMA`; empty before any run.
    """
    try:
        table = open_delta(results_path(lake_root))
    except TableNotFoundError:
        return []
    rows: list[dict[str, Any]] = table.to_pyarrow_table().to_pylist()
    rows.sort(key=lambda r: (r["checked_at"], r["run_id"], r["source"], r["table"] or ""))
    return rows
