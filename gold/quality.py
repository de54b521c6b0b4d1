"""Data-quality checks on gold at a set of consistent cuts (``medallion quality``).

:func:`run_quality` runs, for every table of every cut:

* with Great Expectations (:mod:`gold.expectations`), one suite and one validation per table on
  the gold DataFrame at the cut: ``primary_key`` (unique and not null, from the key schema),
  ``not_null`` (the columns the source declares NOT NULL) and the user's expectations from
  ``quality.expectations``, each a check named ``expectation:<type>`` with its own severity;
* ``types``: gold column types equal the declared Connect types mapped by :mod:`silver.types`;
* the CDC checks of :mod:`gold.checks` with Spark: ``quarantine``, ``positions_monotonic``,
  ``update_before_insert``, ``freshness``, ``late_events``;
* and records the ``extra`` outcomes the caller brings (``reconcile``).

Each outcome is stamped with its severity (:data:`CHECKS`, overridden by ``quality.severity``;
a user expectation's own ``severity``), the run and the cut. A failed ``block`` check puts the
source in :attr:`QualityRun.blocked_sources`: gold stays at that source's last good cut. Results
are appended to ``<lake>/gold/_quality`` (one commit per run) and the HTML report is written to
``quality.report.dir`` (default ``<lake>/reports/quality``) as ``index.html`` and
``run-<id>.html``.

A check that cannot run (a missing table, a Spark error in one check) is recorded as a failure
of that check with the error as the observed value, never skipped silently.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import time
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bronze.storage import LakePath, lake_path
from gold import checks as C
from gold import expectations as X
from gold.cuts import Cut
from gold.gate_log import TableFiles, gold_schema, verdicts_from_log
from gold.key_checks import key_outcomes
from gold.latest_schemas import LatestSchemas
from gold.outcome import CheckOutcome
from gold.quality_results import (
    CheckResult,
    QualityRun,
    append_results,
    quality_history,
    results_path,
)
from gold.report import write_report
from gold.report_history import report_history
from gold.report_measures import TableFacts, run_measures, table_facts
from pipeline.config import PipelineConfig, Severity

__all__ = [
    "CHECKS",
    "RECONCILE",
    "CheckResult",
    "Gate",
    "QualityRun",
    "quality_history",
    "report_dir",
    "results_path",
    "run_quality",
    "severity_of",
]

logger = logging.getLogger(__name__)

RECONCILE = "reconcile"

CHECKS: Mapping[str, Severity] = {
    X.PRIMARY_KEY: Severity.BLOCK,
    X.NOT_NULL: Severity.BLOCK,
    X.TYPES: Severity.BLOCK,
    C.QUARANTINE: Severity.WARN,
    C.POSITIONS_MONOTONIC: Severity.WARN,
    C.UPDATE_BEFORE_INSERT: Severity.WARN,
    C.FRESHNESS: Severity.WARN,
    C.LATE_EVENTS: Severity.WARN,
    C.RESNAPSHOT: Severity.WARN,
    RECONCILE: Severity.WARN,
}
"""Built-in checks and their default severity; ``quality.severity`` overrides them by name.
User expectations (``expectation:<type>``) carry their own severity."""


_NEEDS_EVENTS = frozenset((C.POSITIONS_MONOTONIC, C.UPDATE_BEFORE_INSERT))
"""The CDC checks that read the source's bronze events (:attr:`gold.checks.CheckContext.events`)."""


@dataclass
class Gate:
    """The blocking checks of ``run --continuous``, between full quality runs.

    Gold may move to a cut only when every blocking check passes on it; the other checks
    (severity ``warn``: the CDC checks, reconciliation) cannot hold it back, so they run on
    their own schedule (``quality.interval.seconds``) instead of after every micro-batch. A
    table version that passed its blocking table checks (``primary_key``, ``not_null``,
    ``types``, blocking expectations) is not checked again: its data and schema are the same.

    Attributes:
        passed: ``(silver table, version)`` pairs whose blocking table checks passed in this
            process (under this config).
    """

    passed: set[tuple[str, int]] = field(default_factory=set)
    latest: LatestSchemas = field(default_factory=LatestSchemas)
    """The table metadata's source, read incrementally across refreshes."""
    files: dict[str, TableFiles] = field(default_factory=dict)
    """Per silver table, the files of its newest version that passed (:mod:`gold.gate_log`
    checks the next version from the files added since)."""
    checked: dict[tuple[str, int], TableFiles] = field(default_factory=dict)
    """The files of the versions checked by the run in progress, until :meth:`record`."""

    def record(self, run: QualityRun) -> None:
        """Remember the table versions of ``run``'s cuts whose blocking checks all passed."""
        failed = {(r.source, r.table) for r in run.results if not r.success and r.blocking}
        for source, cut in run.cuts.items():
            for name, table in cut.tables.items():
                files = self.checked.pop((name, table.version), None)
                if (source, None) in failed or (source, table.collection) in failed:
                    continue
                self.passed.add((name, table.version))
                newest = self.files.get(name)
                if files is not None and (newest is None or newest.version < files.version):
                    self.files[name] = files


def severity_of(check: str, config: PipelineConfig, explicit: Severity | None = None) -> Severity:
    """The severity of a check.

    Args:
        check: The check's name.
        config: The pipeline config (``quality.severity``).
        explicit: A severity the check carries itself (a user expectation's).

    Returns:
        ``explicit``, else ``quality.severity[check]``, else the default of :data:`CHECKS`, else
        ``warn`` (a check medallion does not know cannot block gold).
    """
    if explicit is not None:
        return explicit
    configured = config.quality.severity.get(check)
    if configured is not None:
        return Severity(configured)
    return CHECKS.get(check, Severity.WARN)


def report_dir(config: PipelineConfig, lake_root: LakePath) -> Path:
    """``quality.report.dir``, or ``<lake>/reports/quality`` (for a lake on object storage,
    ``reports/quality`` beside the config file: the HTML report is a local file)."""
    configured = config.quality.report_dir
    if configured is not None:
        return Path(configured)
    root = lake_path(lake_root)
    if isinstance(root, Path):
        return root / "reports" / "quality"
    base = config.config_path.parent if config.config_path is not None else Path.cwd()
    return base / "reports" / "quality"


def _failure(check: str, source: str, table: str | None, exc: BaseException) -> CheckOutcome:
    first_line = str(exc).splitlines()[0] if str(exc) else ""
    return CheckOutcome(
        check,
        source,
        table,
        False,
        f"check could not run: {type(exc).__name__}: {first_line}",
        details="an error is a failure, so a broken check cannot let bad data through",
    )


def _blocking(check: str, config: PipelineConfig) -> bool:
    return severity_of(check, config) is Severity.BLOCK


def _table_checks(
    spark: Any,
    config: PipelineConfig,
    lake_root: LakePath,
    cut: Cut,
    metadata: Mapping[str, X.TableMetadata],
    context: Any,
    gate: Gate | None = None,
    measured: dict[str, TableFacts] | None = None,
) -> tuple[list[tuple[CheckOutcome, Severity | None]], dict[str, int | None]]:
    """GX suite and ``types`` per table of the cut, and each table's newest change time.

    With a ``gate``, only the blocking checks run, and not at all for a table whose version
    already passed them (the same data, the same checks)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from gold.views import current_state, view_columns

    outcomes: list[tuple[CheckOutcome, Severity | None]] = []
    newest: dict[str, int | None] = {}
    # The gate decides primary_key/not_null with one aggregate per table (gold.key_checks);
    # GX only runs for what it alone can check (the user's expectations).
    fast = [c for c in (X.PRIMARY_KEY, X.NOT_NULL) if _blocking(c, config)] if gate else []
    for name, table in sorted(cut.tables.items()):
        if gate is not None and (name, table.version) in gate.passed:
            continue
        meta = metadata.get(table.collection, X.TableMetadata(table.collection))
        user = config.quality.expectations_for(cut.source, table.collection)
        if gate is not None:
            user = tuple(e for e in user if e.severity is Severity.BLOCK)
        builtin = gate is None
        gx_checks = [X.PRIMARY_KEY, X.NOT_NULL] if builtin else []
        if gate is not None and not user and not _blocking(C.FRESHNESS, config):
            decided = _from_log(config, lake_root, cut.source, name, table, meta, fast, gate)
            if decided is not None:
                outcomes.extend((o, None) for o in decided)
                continue
        try:
            full = current_state(spark, lake_root, table, include_cdc=True)
        except Exception as exc:  # noqa: BLE001 - recorded as failures below
            for check in (*gx_checks, *fast, X.TYPES):
                outcomes.append((_failure(check, cut.source, table.collection, exc), None))
            continue
        # GX runs a Spark job per metric; reading the Delta version once saves most of them.
        cached = builtin or bool(user)
        if cached:
            full = full.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            if gate is None:
                # The same one aggregate, which also counts rows and finds the last change.
                facts = table_facts(full)
                newest[table.collection] = facts.newest_source_ts_ms
                if measured is not None:
                    measured[table.collection] = facts
            elif _blocking(C.FRESHNESS, config):
                newest[table.collection] = full.agg(F.max("_cdc_source_ts")).collect()[0][0]
            gold = full.select(*view_columns(full.columns))
            if gate is None or _blocking(X.TYPES, config):
                outcomes.append((X.types_outcome(gold.schema, cut.source, meta), None))
            started = time.monotonic()
            if fast:
                try:
                    outcomes.extend((o, None) for o in key_outcomes(gold, cut.source, meta, fast))
                except Exception as exc:  # noqa: BLE001 - recorded as failures
                    logger.exception("quality: key checks of %s failed", name)
                    outcomes.extend(
                        (_failure(c, cut.source, table.collection, exc), None) for c in fast
                    )
            if builtin or user:
                try:
                    outcomes.extend(
                        X.validate_table(
                            context, name, gold, cut.source, meta, user, builtin=builtin
                        )
                    )
                except Exception as exc:  # noqa: BLE001 - recorded as failures
                    logger.exception("quality: GX validation of %s failed", name)
                    for check in gx_checks:
                        outcomes.append((_failure(check, cut.source, table.collection, exc), None))
                    for e in user:
                        failure = _failure(
                            f"{X.EXPECTATION_PREFIX}{e.type}", cut.source, table.collection, exc
                        )
                        outcomes.append((failure, e.severity))
            logger.debug("quality: %s checked in %.1f s", name, time.monotonic() - started)
        finally:
            if cached:
                full.unpersist()
    return outcomes, newest


def _from_log(
    config: PipelineConfig,
    lake_root: LakePath,
    source: str,
    name: str,
    table: Any,
    meta: X.TableMetadata,
    fast: list[str],
    gate: Gate,
) -> list[CheckOutcome] | None:
    """The gate's outcomes of one table decided from the Delta log (:mod:`gold.gate_log`, no
    Spark job), or None: the Spark checks decide (something may be wrong, or the log cannot
    tell)."""
    try:
        found = verdicts_from_log(lake_root, source, table, meta, fast, gate.files.get(name))
        if found.files is not None:
            gate.checked[(name, table.version)] = found.files
        if found.outcomes is None:
            logger.debug("quality: %s v%s checked by Spark: %s", name, table.version, found.why)
            return None
        out = []
        if _blocking(X.TYPES, config):
            out.append(X.types_outcome(gold_schema(lake_root, table), source, meta))
        return out + found.outcomes
    except Exception:  # noqa: BLE001 - the Spark checks decide, and report what is wrong
        logger.debug(
            "quality: %s v%s: the log could not decide", name, table.version, exc_info=True
        )
        return None


def _source_checks(
    spark: Any,
    config: PipelineConfig,
    lake_root: LakePath,
    cut: Cut,
    now: dt.datetime,
    quarantined: Mapping[tuple[str | None, bool], Any],
    context: Any,
    gate: Gate | None = None,
    measured: dict[str, TableFacts] | None = None,
) -> list[tuple[CheckOutcome, Severity | None]]:
    """Every check of one source at its cut (with a ``gate``: the blocking ones).

    The gate reads the table metadata from its :class:`gold.latest_schemas.LatestSchemas`
    (the bronze files added since its last refresh), and the source's whole bronze history
    only when a blocking CDC check needs it."""
    cdc = [(n, c) for n, c in C.CDC_CHECKS if gate is None or _blocking(n, config)]
    needs_events = gate is None or any(n in _NEEDS_EVENTS for n, _ in cdc)
    events = C.source_events(spark, lake_root, cut) if needs_events else None
    try:
        latest = C.latest_schemas(events) if gate is None else gate.latest.latest(lake_root, cut)
        metadata = X.table_metadata(lake_root, cut, latest)
        outcomes, newest = _table_checks(
            spark, config, lake_root, cut, metadata, context, gate, measured
        )
        ctx = C.CheckContext(spark, config, lake_root, cut, now, events, quarantined, newest)
        for name, check in cdc:
            started = time.monotonic()
            try:
                outcomes.extend((o, None) for o in check(ctx))
                logger.debug(
                    "quality: %s of %s took %.1f s", name, cut.source, time.monotonic() - started
                )
            except Exception as exc:  # noqa: BLE001 - recorded as a failure
                logger.exception("quality: check %s of %s failed", name, cut.source)
                outcomes.append((_failure(name, cut.source, None, exc), None))
    finally:
        if events is not None:
            events.unpersist()
    return outcomes


def run_quality(
    spark: Any,
    config: PipelineConfig,
    lake_root: LakePath,
    cuts: Mapping[str, Cut],
    *,
    extra: Iterable[CheckOutcome] = (),
    now: dt.datetime | None = None,
    write: bool = True,
    gate: Gate | None = None,
) -> QualityRun:
    """Run every check on every table of every cut and record the results.

    Args:
        spark: The session.
        config: The pipeline config (``quality`` and ``silver`` sections).
        lake_root: The lake root.
        cuts: The cut to check, per source (usually the newest consistent cut).
        extra: Outcomes the caller measured (``reconcile``), recorded like the others.
        now: The clock for ``freshness`` (default: now, UTC).
        write: Append the results to ``gold/_quality`` and write the HTML report; False for a
            dry run that only returns them.
        gate: Run only the checks that can hold gold back (severity ``block``), skipping
            tables whose version passed them before (``run --continuous`` between full
            runs, see :class:`Gate`). Its results are appended; the HTML report is left to the
            full runs.

    Returns:
        The run; :attr:`QualityRun.blocked_sources` are the sources whose gold must not move.
    """
    started = dt.datetime.now(dt.UTC)
    clock = now if now is not None else started
    run_id = f"{started:%Y%m%dT%H%M%S}Z-{uuid.uuid4().hex[:8]}"
    logger.info("quality run %s: %s", run_id, ", ".join(sorted(cuts)) or "no cuts")
    stamped: list[tuple[CheckOutcome, Severity | None]] = []
    quarantined = (
        C.quarantine_counts(spark, lake_root, cuts)
        if gate is None or _blocking(C.QUARANTINE, config)
        else {}
    )
    # The gate needs GX only for blocking user expectations (gold.key_checks does the rest).
    rules = [e for listed in config.quality.expectations.values() for e in listed]
    gx_needed = gate is None or any(e.severity is Severity.BLOCK for e in rules)
    context = X.gx_context() if gx_needed and any(c.tables for c in cuts.values()) else None
    facts: dict[str, dict[str, TableFacts]] = {}
    for source, cut in sorted(cuts.items()):
        stamped.extend(
            _source_checks(
                spark,
                config,
                lake_root,
                cut,
                clock,
                quarantined.get(source, {}),
                context,
                gate,
                facts.setdefault(source, {}),
            )
        )
    stamped.extend((o, None) for o in extra)
    results = tuple(
        CheckResult(
            run_id=run_id,
            checked_at=started,
            source=o.source,
            table=o.table,
            check=o.check,
            engine=o.engine,
            severity=severity_of(o.check, config, explicit),
            success=o.success,
            observed=o.observed,
            unexpected_count=o.unexpected_count,
            sample=tuple(o.sample),
            details=o.details,
            silver_batch=cuts[o.source].silver_batch if o.source in cuts else None,
            position_hex=cuts[o.source].position.hex() if o.source in cuts else None,
        )
        for o, explicit in stamped
    )
    full = gate is None
    measures = run_measures(lake_root, facts, clock) if full else ()
    run = QualityRun(
        run_id,
        started,
        dt.datetime.now(dt.UTC),
        dict(cuts),
        results,
        measures=measures,
        full=full,
    )
    if write:
        append_results(lake_root, run)
        if full:
            history = report_history(lake_root, config.quality.report_history_runs)
            path = write_report(run, report_dir(config, lake_root), history=history)
            run = dataclasses.replace(run, report_path=path)
    if gate is not None:
        gate.record(run)
    for r in run.results:
        if not r.success:
            log = logger.error if r.blocking else logger.warning
            log(
                "quality %s: %s %s %s: %s", r.severity.value, r.source, r.table, r.check, r.observed
            )
    logger.info(
        "quality run %s: %s passed, %s warned, %s blocking",
        run_id,
        run.passed,
        run.warned,
        len(run.blocking_failures),
    )
    return run
