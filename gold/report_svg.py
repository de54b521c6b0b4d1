"""Inline SVG for the quality report: a run-by-run strip of cells, and line plots over runs.

Pure functions of their inputs (no I/O), so the report stays one self-contained file: nothing is
fetched, no script library is needed. Hover text is SVG's own ``<title>`` child, which every
browser shows as a tooltip. Every text is escaped.

The x axis is the run's place in the history (runs are not evenly spaced in time; equal steps
keep every run visible); the y axis starts at zero (or below, for a negative value) and ends at
a round number at or above the largest value.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "Cell",
    "Series",
    "format_value",
    "line_plot_svg",
    "nice_ceiling",
    "scale",
    "strip_svg",
    "y_range",
]

CELL_WIDTH = 12
CELL_HEIGHT = 16
CELL_GAP = 2

PLOT_WIDTH = 300
PLOT_HEIGHT = 150
_LEFT, _RIGHT, _TOP, _BOTTOM = 52, 10, 22, 24

STATUSES = ("pass", "warn", "fail", "none")
"""Cell classes: passed, failed with severity warn, failed blocking, not checked in that run."""


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


@dataclass(frozen=True, slots=True)
class Cell:
    """One run of one check in a strip.

    Attributes:
        status: One of :data:`STATUSES`.
        title: The hover text (run time, observed value).
    """

    status: str
    title: str


@dataclass(frozen=True, slots=True)
class Series:
    """One line of a plot: a value per run (None: not measured in that run).

    Attributes:
        name: Legend text; also the points' ``data-series``.
        values: One value per run, oldest first.
        color: The line's CSS color.
    """

    name: str
    values: tuple[float | None, ...]
    color: str


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 2, 2.5, 5 times a power of ten at or above ``value`` (1 for 0)."""
    if value <= 0 or not math.isfinite(value):
        return 1.0
    power = 10.0 ** math.floor(math.log10(value))
    for step in (1.0, 2.0, 2.5, 5.0, 10.0):
        if value <= step * power * (1 + 1e-12):
            return step * power
    return 10.0 * power


def y_range(values: Sequence[float | None]) -> tuple[float, float]:
    """The y axis for ``values``: from 0 (or a round number below the least negative value)
    to a round number at or above the largest."""
    known = [v for v in values if v is not None and math.isfinite(v)]
    top = nice_ceiling(max(known)) if known and max(known) > 0 else 1.0
    low = min(known) if known else 0.0
    bottom = -nice_ceiling(-low) if low < 0 else 0.0
    return bottom, top


def scale(value: float, lo: float, hi: float, start: float, end: float) -> float:
    """Map ``value`` from ``[lo, hi]`` to ``[start, end]`` (the middle when ``lo == hi``)."""
    if hi == lo:
        return (start + end) / 2
    return start + (value - lo) * (end - start) / (hi - lo)


def format_value(value: float, unit: str) -> str:
    """A value for people: seconds as s/min/h, counts as integers with separators."""
    if unit == "s":
        if abs(value) < 120:
            return f"{value:.1f} s"
        if abs(value) < 7200:
            return f"{value / 60:.1f} min"
        return f"{value / 3600:.1f} h"
    if value == int(value):
        return f"{int(value):,}"
    return f"{value:,.2f}"


def strip_svg(cells: Sequence[Cell], label: str) -> str:
    """A row of cells, one per run, oldest left.

    Args:
        cells: The runs' cells.
        label: The accessible name of the strip (the check).

    Returns:
        An ``<svg class='strip'>`` element.
    """
    width = max(1, len(cells)) * (CELL_WIDTH + CELL_GAP)
    parts = [
        f"<svg class='strip' role='img' aria-label='{_e(label)}' width='{width}' "
        f"height='{CELL_HEIGHT}' viewBox='0 0 {width} {CELL_HEIGHT}' "
        "xmlns='http://www.w3.org/2000/svg'>"
    ]
    for i, cell in enumerate(cells):
        status = cell.status if cell.status in STATUSES else "none"
        parts.append(
            f"<rect class='cell {status}' x='{i * (CELL_WIDTH + CELL_GAP)}' y='0' "
            f"width='{CELL_WIDTH}' height='{CELL_HEIGHT}' rx='2'>"
            f"<title>{_e(cell.title)}</title></rect>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _fmt_axis(value: float, unit: str) -> str:
    return format_value(value, unit) if value else "0"


def line_plot_svg(
    title: str, x_labels: Sequence[str], series: Sequence[Series], unit: str = ""
) -> str:
    """A line plot over runs: one polyline per series and a point per measured run.

    Args:
        title: The plot's title.
        x_labels: One label per run (the run time), oldest first; hover text of the points.
        series: The lines; each has one value per label.
        unit: ``s`` for seconds (formatted s/min/h), else counts.

    Returns:
        An ``<svg class='plot'>`` element; its points are ``circle.pt`` with ``data-series``.
    """
    n = len(x_labels)
    lo, hi = y_range([v for s in series for v in s.values])
    left, right = _LEFT, PLOT_WIDTH - _RIGHT
    top, bottom = _TOP, PLOT_HEIGHT - _BOTTOM

    def x(i: int) -> float:
        return scale(i, 0, max(n - 1, 0), left, right) if n > 1 else (left + right) / 2

    def y(v: float) -> float:
        return scale(v, lo, hi, bottom, top)

    parts = [
        f"<svg class='plot' role='img' aria-label='{_e(title)}' width='{PLOT_WIDTH}' "
        f"height='{PLOT_HEIGHT}' viewBox='0 0 {PLOT_WIDTH} {PLOT_HEIGHT}' "
        "xmlns='http://www.w3.org/2000/svg'>",
        f"<text class='title' x='{left}' y='14'>{_e(title)}</text>",
    ]
    for tick in (lo, (lo + hi) / 2, hi) if lo < 0 else (0.0, hi / 2, hi):
        ty = y(tick)
        parts.append(
            f"<line class='grid' x1='{left}' x2='{right}' y1='{ty:.1f}' y2='{ty:.1f}'/>"
            f"<text class='axis' x='{left - 4}' y='{ty + 3:.1f}' text-anchor='end'>"
            f"{_e(_fmt_axis(tick, unit))}</text>"
        )
    if n:
        parts.append(
            f"<text class='axis' x='{left}' y='{PLOT_HEIGHT - 6}'>{_e(x_labels[0])}</text>"
        )
        if n > 1:
            parts.append(
                f"<text class='axis' x='{right}' y='{PLOT_HEIGHT - 6}' text-anchor='end'>"
                f"{_e(x_labels[-1])}</text>"
            )
    for s in series:
        # A run without a value breaks the line: the points either side are not joined.
        segment: list[str] = []
        segments: list[list[str]] = []
        for i, v in enumerate(s.values[:n]):
            if v is None or not math.isfinite(v):
                if segment:
                    segments.append(segment)
                segment = []
                continue
            segment.append(f"{x(i):.1f},{y(v):.1f}")
        if segment:
            segments.append(segment)
        for seg in segments:
            if len(seg) > 1:
                parts.append(
                    f"<polyline class='line' fill='none' stroke='{_e(s.color)}' "
                    f"points='{' '.join(seg)}'/>"
                )
        for i, v in enumerate(s.values[:n]):
            if v is None or not math.isfinite(v):
                continue
            parts.append(
                f"<circle class='pt' data-series='{_e(s.name)}' cx='{x(i):.1f}' "
                f"cy='{y(v):.1f}' r='3' fill='{_e(s.color)}'>"
                f"<title>{_e(s.name)} at {_e(x_labels[i])}: {_e(format_value(v, unit))}</title>"
                "</circle>"
            )
    if len(series) > 1:
        # The legend follows the title on its line, each name in its line's color.
        lx = left + 7 * len(title) + 8
        for s in series:
            parts.append(
                # A style, not a fill attribute: the page's CSS for plot text would win over it.
                f"<text class='legend' x='{lx}' y='14' style='fill: {_e(s.color)}'>"
                f"{_e(s.name)}</text>"
            )
            lx += 8 + 6 * len(s.name)
    parts.append("</svg>")
    return "".join(parts)
