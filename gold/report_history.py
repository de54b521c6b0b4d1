"""The quality history the report draws: the last N full runs, read cheaply with deltalake.

:func:`read_history` reads the index ``gold/_quality_runs`` (one small row per full run), keeps
the newest ``limit`` runs, then reads from ``gold/_quality`` only the files whose statistics may
hold those runs (``checked_at`` at or after the oldest one, ``run_id`` among them: the gate's
runs between full runs are skipped), and from ``gold/_published`` the publications since the
oldest cut, which give each run's silver-to-gold lag: the first time gold showed that cut or a
later one, minus the time silver recorded the cut. A run whose cut gold has not shown yet has
no gold lag (a gap in its plot, filled once gold moves).

No Spark; the cost grows with ``limit`` and the runs in that window, not with the table's age.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow.compute as pc
from deltalake import DeltaTable
from deltalake.exceptions import TableNotFoundError

from bronze.storage import LakePath, lake_path, open_delta
from gold.quality_results import Measure, results_path, runs_path
from gold.report_measures import SILVER_TO_GOLD
from pipeline.config import Severity

__all__ = ["CheckRecord", "History", "RunRecord", "read_history", "report_history"]

logger = logging.getLogger(__name__)

_RESULT_COLUMNS = [
    "run_id",
    "source",
    "table",
    "check",
    "severity",
    "success",
    "observed",
    "unexpected_count",
]


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One full run of the history.

    Attributes:
        run_id: The run.
        started_at: When it started (UTC).
        measures: Its measures, the silver-to-gold lag included when known.
    """

    run_id: str
    started_at: dt.datetime
    measures: tuple[Measure, ...] = ()


@dataclass(frozen=True, slots=True)
class CheckRecord:
    """One check's result in one run of the history (the columns the report shows).

    Attributes:
        run_id: The run.
        source: The source.
        table: The source table; None for a source-wide check.
        check: The check's name.
        severity: Its severity in that run.
        success: Whether it passed.
        observed: What was measured, for people.
        unexpected_count: Offending rows or keys, when countable.
    """

    run_id: str
    source: str
    table: str | None
    check: str
    severity: Severity
    success: bool
    observed: str
    unexpected_count: int | None = None

    @property
    def status(self) -> str:
        """``pass``, ``warn`` (failed, severity warn) or ``fail`` (failed, blocks gold)."""
        if self.success:
            return "pass"
        return "fail" if self.severity is Severity.BLOCK else "warn"


@dataclass(frozen=True, slots=True)
class History:
    """The last full runs, oldest first, and their check results.

    Attributes:
        runs: The runs, oldest first.
        results: Every result of those runs.
        error: Why the history could not be read (then it is empty), for the report to say.
    """

    runs: tuple[RunRecord, ...] = ()
    results: tuple[CheckRecord, ...] = ()
    error: str | None = None
    _by_run: Mapping[str, Mapping[tuple[str, str | None, str], CheckRecord]] = field(
        default_factory=dict, repr=False, compare=False
    )
    _measures: Mapping[tuple[str, str, str | None, str], float] = field(
        default_factory=dict, repr=False, compare=False
    )

    def __post_init__(self) -> None:
        index: dict[str, dict[tuple[str, str | None, str], CheckRecord]] = {}
        for r in self.results:
            index.setdefault(r.run_id, {})[(r.source, r.table, r.check)] = r
        object.__setattr__(self, "_by_run", index)
        values = {
            (run.run_id, m.source, m.table, m.name): m.value
            for run in self.runs
            for m in run.measures
        }
        object.__setattr__(self, "_measures", values)

    def measure(self, run_id: str, source: str, table: str | None, name: str) -> float | None:
        """A run's measure of a table (``table`` None: of the source); None: not measured."""
        return self._measures.get((run_id, source, table, name))

    def result(self, run_id: str, key: tuple[str, str | None, str]) -> CheckRecord | None:
        """The result of check ``key`` (source, table, check) in a run; None: not checked."""
        return self._by_run.get(run_id, {}).get(key)

    def keys(self) -> list[tuple[str, str | None, str]]:
        """Every (source, table, check) of the history, sorted."""
        return sorted(
            {(r.source, r.table, r.check) for r in self.results},
            key=lambda k: (k[0], k[1] or "", k[2]),
        )


def _open(path: LakePath) -> DeltaTable | None:
    try:
        return open_delta(path)
    except TableNotFoundError:
        return None


def _any_of(column: str, values: list[Any]) -> Any:
    # Equalities rather than isin: pyarrow prunes a file by its min/max statistics only when
    # the predicate compares the column with a literal.
    expression = None
    for v in values:
        term = pc.field(column) == v
        expression = term if expression is None else expression | term
    return expression


def _gold_lags(
    lake_root: LakePath, cuts: Mapping[str, list[tuple[str, int, dt.datetime]]]
) -> dict[tuple[str, str], float]:
    """Per (run, source), seconds from silver recording the cut to gold first showing it."""
    recorded = [at for listed in cuts.values() for _s, _b, at in listed]
    table = _open(lake_path(lake_root) / "gold" / "_published") if recorded else None
    if table is None:
        return {}
    rows = table.to_pyarrow_table(
        columns=["source", "silver_batch", "published_at"],
        filters=pc.field("published_at") >= min(recorded),
    ).to_pylist()
    rows.sort(key=lambda r: r["published_at"])
    out: dict[tuple[str, str], float] = {}
    for run_id, listed in cuts.items():
        for source, batch, at in listed:
            first = next(
                (
                    r["published_at"]
                    for r in rows
                    if r["source"] == source and r["silver_batch"] >= batch
                ),
                None,
            )
            if first is not None:
                out[(run_id, source)] = max(0.0, (first - at).total_seconds())
    return out


def read_history(lake_root: LakePath, limit: int) -> History:
    """The last ``limit`` full runs and their results.

    Args:
        lake_root: The lake root.
        limit: How many runs (the newest).

    Returns:
        The history; empty before the first full run.
    """
    index = _open(runs_path(lake_root))
    if index is None or limit <= 0:
        return History()
    ids = index.to_pyarrow_table(columns=["run_id", "started_at"]).to_pylist()
    ids.sort(key=lambda r: (r["started_at"], r["run_id"]))
    kept = ids[-limit:]
    if not kept:
        return History()
    since = kept[0]["started_at"]
    names = [r["run_id"] for r in kept]
    rows = index.to_pyarrow_table(
        filters=(pc.field("started_at") >= since) & _any_of("run_id", names)
    ).to_pylist()
    rows.sort(key=lambda r: (r["started_at"], r["run_id"]))
    cuts = {
        r["run_id"]: [
            (c["source"], int(c["silver_batch"]), c["recorded_at"])
            for c in r["cuts"] or ()
            if c["recorded_at"] is not None
        ]
        for r in rows
    }
    lags = _gold_lags(lake_root, cuts)
    runs = []
    for r in rows:
        measures = [
            Measure(m["source"], m["table"], m["name"], float(m["value"]))
            for m in r["measures"] or ()
            if m["value"] is not None
        ]
        measures.extend(
            Measure(source, None, SILVER_TO_GOLD, lags[(r["run_id"], source)])
            for source, _b, _at in cuts[r["run_id"]]
            if (r["run_id"], source) in lags
        )
        runs.append(RunRecord(r["run_id"], r["started_at"], tuple(measures)))
    results: list[CheckRecord] = []
    table = _open(results_path(lake_root))
    if table is not None:
        found = table.to_pyarrow_table(
            columns=_RESULT_COLUMNS,
            filters=(pc.field("checked_at") >= since) & _any_of("run_id", names),
        )
        for x in found.to_pylist():
            results.append(
                CheckRecord(
                    x["run_id"],
                    x["source"],
                    x["table"],
                    x["check"],
                    Severity(x["severity"]),
                    bool(x["success"]),
                    x["observed"] or "",
                    x["unexpected_count"],
                )
            )
    logger.debug("quality history: %d runs, %d results", len(runs), len(results))
    return History(tuple(runs), tuple(results))


def report_history(lake_root: LakePath, limit: int) -> History:
    """:func:`read_history` for the report: an unreadable history never fails a quality run.

    Returns:
        The history, or an empty one whose :attr:`History.error` says what failed (logged).
    """
    try:
        return read_history(lake_root, limit)
    except Exception as exc:  # noqa: BLE001 - the run's own results still get their report
        logger.warning("quality report: history of %s unreadable", lake_root, exc_info=True)
        return History(error=f"{type(exc).__name__}: {exc}")
