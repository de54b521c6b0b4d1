"""The HTML report of a quality run: one self-contained page a person can open.

:func:`render_report` returns the page: a summary (passed, warned, blocking failures, and per
source the cut checked: silver batch, position, source time), then one section per source and
table with every check's severity, observed value and sample, failures first. Given the history
(:func:`gold.report_history.read_history`), the page opens with what changed: the checks newly
failing since the last run, a run-by-run strip per check and plots over runs per table
(:mod:`gold.report_sections`, inline SVG). CSS is inline and nothing is fetched (no scripts,
fonts or images), so the file opens from disk, from a CI artifact or an e-mail. Every value is
escaped with :func:`html.escape`.

:func:`write_report` writes it as ``run-<run id>.html`` and copies it to ``index.html``, so the
newest run is always at the same address.
"""

from __future__ import annotations

import html
import logging
import re
from collections.abc import Iterable
from pathlib import Path

from gold.quality_results import CheckResult, QualityRun
from gold.report_history import History
from gold.report_sections import HISTORY_CSS, render_history
from pipeline.config import Severity

__all__ = ["render_report", "write_report", "INDEX", "run_file_name"]

logger = logging.getLogger(__name__)

INDEX = "index.html"

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem; color: #1d2127; background: #fff; }
h1 { font-size: 1.5rem; margin-bottom: .25rem; }
h2 { font-size: 1.2rem; margin-top: 2rem; border-bottom: 1px solid #ccd; }
h3 { font-size: 1rem; margin-top: 1.25rem; }
.meta { color: #555; font-size: .9rem; }
.summary { display: flex; gap: 1rem; margin: 1rem 0; }
.tile { border-radius: 6px; padding: .75rem 1rem; min-width: 9rem; border: 1px solid #ccd; }
.tile b { display: block; font-size: 1.6rem; }
.ok { background: #e7f6ea; } .warn { background: #fff4d6; } .block { background: #fde2e1; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; vertical-align: top; padding: .35rem .5rem;
         border-bottom: 1px solid #e3e3ea; }
th { background: #f3f4f8; }
tr.fail-block td:first-child { border-left: 4px solid #c62828; }
tr.fail-warn td:first-child { border-left: 4px solid #e0a100; }
tr.pass td:first-child { border-left: 4px solid #2e7d32; }
.badge { border-radius: 3px; padding: 0 .4rem; font-size: .8rem; font-weight: 600; }
.badge.block { color: #8e0000; } .badge.warn { color: #6d4c00; }
code, .sample { font-family: ui-monospace, monospace; font-size: .8rem; }
td code, td .sample { overflow-wrap: anywhere; }  /* long check names must not widen the page */
ul.sample { margin: 0; padding-left: 1rem; }
"""


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def run_file_name(run_id: str) -> str:
    """The per-run file name (characters outside ``[A-Za-z0-9_.-]`` become ``_``)."""
    return f"run-{re.sub(r'[^A-Za-z0-9_.-]', '_', run_id)}.html"


def _status(r: CheckResult) -> tuple[str, str]:
    """Row class and status text of one result."""
    if r.success:
        return "pass", "passed"
    if r.severity is Severity.BLOCK:
        return "fail-block", "FAILED (blocks gold)"
    return "fail-warn", "failed (warning)"


def _order(r: CheckResult) -> tuple[int, str]:
    # Failures first, blocking ones before warnings; then by check name.
    rank = 2 if r.success else (0 if r.severity is Severity.BLOCK else 1)
    return rank, r.check


def _rows(results: Iterable[CheckResult]) -> str:
    out = []
    for r in sorted(results, key=_order):
        css, status = _status(r)
        sample = (
            "<ul class='sample'>" + "".join(f"<li>{_e(s)}</li>" for s in r.sample) + "</ul>"
            if r.sample
            else ""
        )
        count = "" if r.unexpected_count is None else _e(r.unexpected_count)
        out.append(
            f"<tr class='{css}'><td><code>{_e(r.check)}</code></td>"
            f"<td><span class='badge {_e(r.severity.value)}'>{_e(r.severity.value)}</span></td>"
            f"<td>{_e(status)}</td><td>{_e(r.observed)}</td><td>{count}</td>"
            f"<td>{sample}</td><td>{_e(r.details)}</td><td>{_e(r.engine)}</td></tr>"
        )
    return "".join(out)


_HEADER = (
    "<tr><th>check</th><th>severity</th><th>status</th><th>observed</th><th>unexpected</th>"
    "<th>sample</th><th>details</th><th>engine</th></tr>"
)


def render_report(run: QualityRun, history: History | None = None) -> str:
    """The report of one run as a self-contained HTML page.

    Args:
        run: The run.
        history: The last full runs, this one last; None: the run alone.

    Returns:
        The page (UTF-8 text).
    """
    blocking = len(run.blocking_failures)
    verdict = (
        "gold may move to the cuts checked"
        if run.success
        else "gold stays at the last good cut of: " + ", ".join(sorted(run.blocked_sources))
    )
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        "<meta name='viewport' content='width=device-width, initial-scale=1'>",
        f"<title>medallion quality {_e(run.run_id)}</title>"
        f"<style>{_CSS}{HISTORY_CSS if history is not None else ''}</style></head><body>",
        "<h1>medallion data quality</h1>",
        f"<p class='meta'>run <code>{_e(run.run_id)}</code>, started "
        f"{_e(run.started_at.isoformat())}, finished {_e(run.finished_at.isoformat())}</p>",
        render_history(history) if history is not None else "",
        "<div class='summary' id='summary'>",
        f"<div class='tile ok'><b id='passed'>{run.passed}</b>passed</div>",
        f"<div class='tile warn'><b id='warned'>{run.warned}</b>warned</div>",
        f"<div class='tile block'><b id='blocking'>{blocking}</b>blocking failures</div>",
        "</div>",
        f"<p id='verdict'><strong>{_e(verdict)}</strong></p>",
        "<table id='cuts'><tr><th>source</th><th>silver batch</th><th>position</th>"
        "<th>source time</th><th>tables</th><th>result</th></tr>",
    ]
    sources = sorted(set(run.cuts) | {r.source for r in run.results})
    for source in sources:
        cut = run.cuts.get(source)
        state = "blocked" if source in run.blocked_sources else "ok"
        if cut is None:
            parts.append(
                f"<tr><td>{_e(source)}</td><td colspan='4'>no cut</td><td>{state}</td></tr>"
            )
            continue
        time = cut.source_time.isoformat() if cut.source_time is not None else "unknown"
        parts.append(
            f"<tr><td>{_e(source)}</td><td>{_e(cut.silver_batch)}</td>"
            f"<td><code>{_e(cut.position.hex())}</code></td><td>{_e(time)}</td>"
            f"<td>{len(cut.tables)}</td><td>{state}</td></tr>"
        )
    parts.append("</table>")
    for source in sources:
        mine = [r for r in run.results if r.source == source]
        parts.append(f"<h2 id='source-{_e(source)}'>source {_e(source)}</h2>")
        tables = sorted({r.table for r in mine if r.table is not None})
        groups: list[tuple[str, list[CheckResult]]] = []
        wide = [r for r in mine if r.table is None]
        if wide:
            groups.append(("source-wide checks", wide))
        groups.extend((t, [r for r in mine if r.table == t]) for t in tables)
        # Tables with a failure first, so the page opens on what needs attention.
        groups.sort(key=lambda g: min(_order(r) for r in g[1])[0])
        for title, results in groups:
            failed = sum(1 for r in results if not r.success)
            parts.append(
                f"<section><h3>{_e(title)} <span class='meta'>({len(results)} checks, "
                f"{failed} failed)</span></h3><table class='checks'>{_HEADER}"
                f"{_rows(results)}</table></section>"
            )
    parts.append("</body></html>")
    return "".join(parts)


def write_report(run: QualityRun, directory: Path, history: History | None = None) -> Path:
    """Write the run's report as ``run-<id>.html`` and ``index.html`` in ``directory``.

    Args:
        run: The run.
        directory: The report directory.
        history: The history to draw above the run (see :func:`render_report`).

    Returns:
        The path of ``index.html``.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    page = render_report(run, history)
    (directory / run_file_name(run.run_id)).write_text(page, encoding="utf-8")
    index = directory / INDEX
    # Written beside and renamed, so a reader never sees half a page.
    partial = directory / (INDEX + ".tmp")
    partial.write_text(page, encoding="utf-8")
    partial.replace(index)
    logger.info("quality report: %s", index)
    return index
