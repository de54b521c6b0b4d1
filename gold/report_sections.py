"""The report's history sections: newly failing checks, run-by-run strips, plots over runs.

:func:`render_history` turns a :class:`gold.report_history.History` into three HTML sections
placed at the top of the report:

* ``#newly-failing``: the checks failing in the newest run that passed in the run before (or
  only warned and now block gold), or were not checked then; each says whether it is its first
  failure in the history shown;
* ``#history``: per source and table, one row per check with a strip of cells, one per run
  (pass, warn, fail, or not checked), whose hover text is the run time and the observed value;
  checks failing now come first;
* ``#trends``: per source and table, plots over runs of live rows, quarantined events, the lag
  of the table's last change per stage (source to bronze, bronze to silver, silver to gold) and
  its freshness (the age of its newest change when the run checked it).
"""

from __future__ import annotations

import datetime as dt
import html
from dataclasses import dataclass

from gold import report_measures as M
from gold.report_history import CheckRecord, History
from gold.report_svg import Cell, Series, line_plot_svg, strip_svg

__all__ = ["HISTORY_CSS", "NewlyFailing", "newly_failing", "render_history", "run_label"]

QUARANTINE_CHECK = "quarantine"
"""The check whose unexpected count is the table's quarantined events (:mod:`gold.checks`)."""

_RANK = {"pass": 0, "warn": 1, "fail": 2}

HISTORY_CSS = """
.strip rect.pass { fill: #2e7d32; } .strip rect.warn { fill: #e0a100; }
.strip rect.fail { fill: #c62828; } .strip rect.none { fill: #e3e3ea; }
table.strips { width: auto; } table.strips td { padding: .1rem .5rem; border-bottom: none; }
table.strips td:first-child { min-width: 24rem; }  /* strips of every table line up */
.plots { display: flex; flex-wrap: wrap; gap: .75rem; }
svg.plot { border: 1px solid #e3e3ea; border-radius: 4px; background: #fcfcfe; }
svg.plot text { font-size: 10px; fill: #555; } svg.plot text.title { font-size: 12px;
  fill: #1d2127; font-weight: 600; }
svg.plot .grid { stroke: #e3e3ea; } svg.plot .line { stroke-width: 1.5; }
ul#newly-failing-list li { margin: .2rem 0; }
.first { color: #8e0000; font-weight: 600; font-size: .8rem; }
"""

_LAG_SERIES = (
    (M.SOURCE_TO_BRONZE, "→bronze", "#6a1b9a"),
    (M.BRONZE_TO_SILVER, "→silver", "#1565c0"),
    (M.SILVER_TO_GOLD, "→gold", "#b8860b"),
)


def _e(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def run_label(at: dt.datetime) -> str:
    """A run's time, short: ``11-21 12:00:05`` (UTC)."""
    return at.astimezone(dt.UTC).strftime("%m-%d %H:%M:%S")


@dataclass(frozen=True, slots=True)
class NewlyFailing:
    """A check failing in the newest run that did not fail as badly in the run before.

    Attributes:
        now: Its result in the newest run.
        before: Its status in the run before (``pass``, ``warn``; None: not checked).
        first: No earlier run of the history shows it failing.
    """

    now: CheckRecord
    before: str | None
    first: bool


def newly_failing(history: History) -> list[NewlyFailing]:
    """The checks of the newest run that fail now and passed, only warned (and block now), or
    were not checked in the run before; blocking ones first."""
    if not history.runs:
        return []
    newest = history.runs[-1]
    previous = history.runs[-2] if len(history.runs) > 1 else None
    failed_before = {
        (r.source, r.table, r.check)
        for r in history.results
        if not r.success and r.run_id != newest.run_id
    }
    out = []
    for key in history.keys():
        now = history.result(newest.run_id, key)
        if now is None or now.success:
            continue
        was = history.result(previous.run_id, key) if previous is not None else None
        before = was.status if was is not None else None
        if before is not None and _RANK[before] >= _RANK[now.status]:
            continue
        out.append(NewlyFailing(now, before, key not in failed_before))
    out.sort(key=lambda f: (-_RANK[f.now.status], f.now.source, f.now.table or "", f.now.check))
    return out


def _newly_section(history: History) -> str:
    found = newly_failing(history)
    parts = ["<section id='newly-failing'><h2>Newly failing since the last run</h2>"]
    if len(history.runs) < 2:
        parts.append("<p class='meta'>no earlier full run to compare with</p>")
    if not found:
        parts.append("<p id='newly-failing-none'>nothing newly failing</p></section>")
        return "".join(parts)
    parts.append("<ul id='newly-failing-list'>")
    labels = {None: "not checked in the last run", "pass": "passed", "warn": "warned"}
    for f in found:
        r = f.now
        where = f"{r.source}.{r.table}" if r.table else f"{r.source} (source-wide)"
        verb = "FAILS (blocks gold)" if r.status == "fail" else "fails (warning)"
        first = " <span class='first'>first failure</span>" if f.first else ""
        parts.append(
            f"<li class='newly {r.status}'><code>{_e(r.check)}</code> on {_e(where)} "
            f"{_e(verb)}: {_e(r.observed)} <span class='meta'>(was: "
            f"{_e(labels[f.before])})</span>{first}</li>"
        )
    parts.append("</ul></section>")
    return "".join(parts)


def _groups(history: History) -> list[tuple[str, str | None]]:
    return sorted(
        {(k[0], k[1]) for k in history.keys()}
        | {(m.source, m.table) for run in history.runs for m in run.measures if m.table},
        key=lambda g: (g[0], g[1] or ""),
    )


def _title(source: str, table: str | None) -> str:
    return f"{source}.{table}" if table else f"{source}: source-wide checks"


def _cells(history: History, key: tuple[str, str | None, str]) -> list[Cell]:
    cells = []
    for run in history.runs:
        r = history.result(run.run_id, key)
        when = f"{run_label(run.started_at)} UTC, run {run.run_id}"
        if r is None:
            cells.append(Cell("none", f"{when}: not checked"))
        else:
            cells.append(Cell(r.status, f"{when}: {r.status}, {r.observed}"))
    return cells


def _strips_section(history: History) -> str:
    parts = [
        f"<section id='history'><h2>Checks over the last {len(history.runs)} runs</h2>",
        "<p class='meta'>one cell per full run, oldest left: green passed, amber failed "
        "(warning), red failed (blocks gold), grey not checked; hover for the time and the "
        "observed value</p>",
    ]
    newest = history.runs[-1].run_id
    for source, table in _groups(history):
        keys = [k for k in history.keys() if k[0] == source and k[1] == table]
        if not keys:
            continue

        def order(k: tuple[str, str | None, str]) -> tuple[int, str]:
            r = history.result(newest, k)
            return (-_RANK[r.status] if r is not None else 0), k[2]

        parts.append(
            f"<h3>{_e(_title(source, table))}</h3><table class='strips' "
            f"data-source='{_e(source)}' data-table='{_e(table or '')}'>"
        )
        for key in sorted(keys, key=order):
            parts.append(
                f"<tr><td><code>{_e(key[2])}</code></td>"
                f"<td>{strip_svg(_cells(history, key), key[2])}</td></tr>"
            )
        parts.append("</table>")
    parts.append("</section>")
    return "".join(parts)


def _values(
    history: History, source: str, table: str | None, name: str
) -> tuple[float | None, ...]:
    return tuple(history.measure(run.run_id, source, table, name) for run in history.runs)


def _quarantined(history: History, source: str, table: str) -> tuple[float | None, ...]:
    out: list[float | None] = []
    for run in history.runs:
        r = history.result(run.run_id, (source, table, QUARANTINE_CHECK))
        count = r.unexpected_count if r is not None else None
        out.append(float(count) if count is not None else None)
    return tuple(out)


def _trends_section(history: History) -> str:
    labels = [run_label(run.started_at) for run in history.runs]
    parts = [
        "<section id='trends'><h2>Over runs</h2>",
        "<p class='meta'>per table: live rows and quarantined events at each run's cut; the lag "
        "of the table's last change from the source commit to bronze, to silver, and from "
        "silver recording the cut to gold showing it (known once gold has moved); freshness, "
        "the age of the table's newest change when the run checked it</p>",
    ]
    for source, table in _groups(history):
        if table is None:
            continue
        lag = [
            Series(
                label,
                _values(history, source, None if name == M.SILVER_TO_GOLD else table, name),
                color,
            )
            for name, label, color in _LAG_SERIES
        ]
        plots = [
            line_plot_svg(
                "rows",
                labels,
                [Series("rows", _values(history, source, table, M.ROWS), "#2e7d32")],
            ),
            line_plot_svg(
                "quarantined",
                labels,
                [Series("quarantined", _quarantined(history, source, table), "#c62828")],
            ),
            line_plot_svg("lag", labels, lag, unit="s"),
            line_plot_svg(
                "freshness",
                labels,
                [Series("freshness", _values(history, source, table, M.FRESHNESS), "#00838f")],
                unit="s",
            ),
        ]
        parts.append(
            f"<h3>{_e(_title(source, table))}</h3><div class='plots' data-source='{_e(source)}' "
            f"data-table='{_e(table)}'>{''.join(plots)}</div>"
        )
    parts.append("</section>")
    return "".join(parts)


def render_history(history: History) -> str:
    """The history sections as HTML (empty before the first full run).

    Args:
        history: The last full runs, the one being reported last.

    Returns:
        The ``#newly-failing``, ``#history`` and ``#trends`` sections.
    """
    if not history.runs:
        why = (
            f"history unreadable ({history.error}); see the log"
            if history.error
            else "no full run recorded yet"
        )
        return (
            "<section id='newly-failing'><h2>Newly failing since the last run</h2>"
            f"<p class='meta' id='history-note'>{_e(why)}</p></section>"
        )
    return _newly_section(history) + _strips_section(history) + _trends_section(history)
