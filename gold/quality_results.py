"""What a quality run found, and the Delta table that keeps it: ``<lake>/gold/_quality``.

:class:`CheckResult` is one check's outcome on one table (or one source) stamped with the run,
the severity and the cut it was measured at; :class:`QualityRun` is a whole run. Results are
appended to ``gold/_quality`` with deltalake, one commit per run, so a notebook can follow a
table's quality over time (:func:`quality_history`) without Spark.
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
    "CheckResult",
    "QualityRun",
    "append_results",
    "quality_history",
    "results_path",
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
    """

    run_id: str
    started_at: dt.datetime
    finished_at: dt.datetime
    cuts: Mapping[str, Cut]
    results: tuple[CheckResult, ...]
    report_path: Path | None = None

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


def append_results(lake_root: LakePath, run: QualityRun) -> int:
    """Append a run's results to ``gold/_quality`` in one commit.

    A run already in the table (a retried write) is not appended again.

    Returns:
        Rows written (0 when the run was already there or had no results).
    """
    if not run.results:
        return 0
    with _APPENDS:
        return _append(lake_root, run)


_APPENDS = threading.Lock()
"""The gate (micro-batch thread) and the scheduled full run (its own thread) both append; one at
a time, so the check for a retried run and the append cannot interleave."""


def _append(lake_root: LakePath, run: QualityRun) -> int:
    path = results_path(lake_root)
    try:
        existing = open_delta(path)
    except TableNotFoundError:
        existing = None
    if existing is not None:
        # Only the files whose statistics may hold this run are read: the gate appends a run
        # per micro-batch, so reading every run id would grow with the table's age.
        found = existing.to_pyarrow_table(columns=["run_id"], filters=[("run_id", "=", run.run_id)])
        if found.num_rows:
            logger.info("quality: run %s already in %s", run.run_id, path)
            return 0
    table = pa.Table.from_pylist([r.to_row() for r in run.results], schema=RESULTS_SCHEMA)
    write_deltalake(str(path), table, mode="append", storage_options=storage_options(path))
    return table.num_rows


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
