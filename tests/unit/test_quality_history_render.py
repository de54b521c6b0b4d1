"""The report's history, pure parts: SVG strips and plots, scaling, newly failing, empty and
one-run histories (``gold/report_svg.py``, ``gold/report_sections.py``)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from xml.etree import ElementTree

import pytest

from gold import report_measures as M
from gold.quality_results import Measure
from gold.report_history import CheckRecord, History, RunRecord
from gold.report_sections import newly_failing, render_history
from gold.report_svg import (
    Cell,
    Series,
    format_value,
    line_plot_svg,
    nice_ceiling,
    scale,
    strip_svg,
    y_range,
)
from pipeline.config import Severity

pytestmark = pytest.mark.unit

T0 = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
HOSTILE = "<script>alert(1)</script>&'\""
SVG = "{http://www.w3.org/2000/svg}"


def svg(text: str) -> ElementTree.Element:
    """Parse one SVG element (it must be well-formed XML, as browsers require inline)."""
    return ElementTree.fromstring(text)


@pytest.mark.parametrize(
    ("value", "expected"),
    [(0, 1), (-3, 1), (7, 10), (3, 5), (2.1, 2.5), (2, 2), (0.03, 0.05), (100, 100), (101, 200)],
)
def test_nice_ceiling(value: float, expected: float) -> None:
    assert nice_ceiling(value) == pytest.approx(expected)


def test_scale_and_y_range() -> None:
    assert scale(5, 0, 10, 100, 0) == 50
    assert scale(0, 0, 10, 124, 22) == 124 and scale(10, 0, 10, 124, 22) == 22
    assert scale(3, 3, 3, 0, 10) == 5  # one value: the middle
    assert y_range([1, None, 7]) == (0, 10)
    assert y_range([None]) == (0, 1)
    assert y_range([-3, 40]) == (-5, 50)


def test_format_value() -> None:
    assert format_value(4.04, "s") == "4.0 s"
    assert format_value(600, "s") == "10.0 min"
    assert format_value(7200, "s") == "2.0 h"
    assert format_value(12345, "") == "12,345"


def test_strip_has_one_cell_per_run_with_hover_text() -> None:
    cells = [Cell("pass", "t1: ok"), Cell("warn", "t2"), Cell("fail", HOSTILE), Cell("none", "")]
    root = svg(strip_svg(cells, "primary_key"))
    rects = root.findall(f"{SVG}rect")
    assert [r.get("class") for r in rects] == ["cell pass", "cell warn", "cell fail", "cell none"]
    assert [r.find(f"{SVG}title").text for r in rects][:3] == ["t1: ok", "t2", HOSTILE]  # type: ignore[union-attr]
    xs = [float(r.get("x") or 0) for r in rects]
    assert xs == sorted(xs) and len(set(xs)) == 4
    assert svg(strip_svg([Cell("bogus", "x")], "c")).find(f"{SVG}rect").get("class") == "cell none"  # type: ignore[union-attr]


def test_plot_points_scale_and_gaps() -> None:
    labels = ["r1", "r2", "r3", "r4"]
    root = svg(line_plot_svg("rows", labels, [Series("rows", (0.0, 5.0, None, 10.0), "#000")]))
    points = root.findall(f"{SVG}circle")
    assert len(points) == 3  # the run without a value has no point
    cx = [float(p.get("cx") or 0) for p in points]
    cy = [float(p.get("cy") or 0) for p in points]
    assert cx[0] < cx[1] < cx[2]
    # 0 at the bottom, 10 at the top (the axis ends at 10), 5 halfway.
    assert cy[0] > cy[1] > cy[2] and cy[1] == pytest.approx((cy[0] + cy[2]) / 2)
    # The gap breaks the line: r1-r2 joined, r4 alone.
    assert len(root.findall(f"{SVG}polyline")) == 1
    assert "rows at r2: 5" in [p.find(f"{SVG}title").text for p in points]  # type: ignore[union-attr]


def test_plot_with_one_run_and_with_none() -> None:
    one = svg(line_plot_svg("lag", ["r1"], [Series("x", (3.0,), "#000")], unit="s"))
    (point,) = one.findall(f"{SVG}circle")
    assert not one.findall(f"{SVG}polyline")
    assert point.find(f"{SVG}title").text == "x at r1: 3.0 s"  # type: ignore[union-attr]
    empty = svg(line_plot_svg("lag", [], [Series("x", (), "#000")], unit="s"))
    assert not empty.findall(f"{SVG}circle")
    unmeasured = svg(line_plot_svg("lag", ["a", "b"], [Series("x", (None, None), "#000")]))
    assert not unmeasured.findall(f"{SVG}circle")


def record(run: str, check: str, status: str, table: str | None = "public.t") -> CheckRecord:
    severity = Severity.BLOCK if status == "fail" else Severity.WARN
    return CheckRecord(run, "shop", table, check, severity, status == "pass", f"{check} {status}")


def history(statuses: dict[str, list[str | None]]) -> History:
    """Runs r0..rN; per check its status per run (None: not checked)."""
    n = max(len(v) for v in statuses.values())
    runs = tuple(RunRecord(f"r{i}", T0 + dt.timedelta(minutes=i)) for i in range(n))
    results = tuple(
        record(f"r{i}", check, status)
        for check, seq in statuses.items()
        for i, status in enumerate(seq)
        if status is not None
    )
    return History(runs, results)


def test_newly_failing_compares_with_the_run_before() -> None:
    h = history(
        {
            "a_pass_to_warn": ["pass", "pass", "warn"],
            "b_warn_to_fail": ["pass", "warn", "fail"],
            "c_still_warn": ["pass", "warn", "warn"],
            "d_still_fail": ["fail", "fail", "fail"],
            "e_new_check": [None, None, "warn"],
            "f_back_again": ["fail", "pass", "fail"],
            "g_recovered": ["fail", "fail", "pass"],
        }
    )
    found = {f.now.check: (f.before, f.first) for f in newly_failing(h)}
    assert found == {
        "a_pass_to_warn": ("pass", True),
        "b_warn_to_fail": ("warn", False),
        "e_new_check": (None, True),
        "f_back_again": ("pass", False),
    }
    # Blocking ones first.
    assert [f.now.status for f in newly_failing(h)][:2] == ["fail", "fail"]


def test_empty_history() -> None:
    assert newly_failing(History()) == []
    page = render_history(History())
    assert "no full run recorded yet" in page and "<svg" not in page


def test_one_run_history() -> None:
    runs = (
        RunRecord(
            "r0",
            T0,
            (Measure("shop", "public.t", M.ROWS, 9.0), Measure("shop", None, M.SILVER_TO_GOLD, 2)),
        ),
    )
    quarantine = dataclasses.replace(record("r0", "quarantine", "pass"), unexpected_count=0)
    h = History(runs, (record("r0", "primary_key", "fail"), quarantine))
    page = render_history(h)
    assert "no earlier full run to compare with" in page
    # Failing in the only run: newly failing, and its first failure.
    assert [(f.now.check, f.before, f.first) for f in newly_failing(h)] == [
        ("primary_key", None, True)
    ]
    assert page.count("<rect class='cell") == 2  # two checks, one run
    assert len(re.findall(r"<svg class='plot'", page)) == 4  # rows, quarantined, lag, freshness
    assert page.count("<circle class='pt'") == 3  # rows 9, quarantined 0 (from the check), gold 2 s


def test_hostile_values_are_escaped() -> None:
    h = History(
        (RunRecord(HOSTILE, T0),),
        (CheckRecord(HOSTILE, HOSTILE, HOSTILE, HOSTILE, Severity.BLOCK, False, HOSTILE),),
    )
    page = render_history(h)
    assert "<script>" not in page and "&lt;script&gt;" in page
