"""Reading the quality history (``gold/report_history.py``) from real Delta tables written with
deltalake: the index of full runs, the bound to the last N, the gate's runs left out, the
silver-to-gold lag from ``gold/_published``, and the report written with it."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from gold.cuts import Cut
from gold.publish import publish
from gold.quality_results import (
    CheckResult,
    Measure,
    QualityRun,
    append_results,
    results_path,
    runs_path,
)
from gold.report import write_report
from gold.report_history import read_history, report_history
from gold.report_measures import ROWS, SILVER_TO_GOLD
from pipeline.config import Severity

pytestmark = pytest.mark.delta

T0 = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)


def cut(batch: int, recorded_at: dt.datetime | None) -> Cut:
    return Cut("shop", batch, bytes([batch]), None, {}, recorded_at)


def quality_run(
    i: int, *, full: bool, ok: bool = True, recorded: dt.datetime | None = None
) -> QualityRun:
    run_id = f"{i:03d}-{'full' if full else 'gate'}"
    started = T0 + dt.timedelta(minutes=i)
    result = CheckResult(
        run_id,
        started,
        "shop",
        "public.t",
        "primary_key",
        "medallion",
        Severity.BLOCK,
        ok,
        "ok" if ok else "2 duplicate keys",
        None if ok else 2,
        (),
        "",
        i,
        "01",
    )
    return QualityRun(
        run_id,
        started,
        started + dt.timedelta(seconds=5),
        {"shop": cut(i, recorded)},
        (result,),
        measures=(Measure("shop", "public.t", ROWS, float(10 * i)),) if full else (),
        full=full,
    )


def test_history_keeps_the_last_full_runs(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    assert read_history(lake, 5).runs == ()
    for i in range(6):
        append_results(lake, quality_run(i, full=True, ok=i < 4))
        append_results(lake, quality_run(100 + i, full=False))  # the gate, between full runs
    # A retried write of a run adds nothing to either table.
    append_results(lake, quality_run(5, full=True, ok=False))

    history = read_history(lake, 4)
    assert [r.run_id for r in history.runs] == ["002-full", "003-full", "004-full", "005-full"]
    assert {r.run_id for r in history.results} == {r.run_id for r in history.runs}
    assert len(history.results) == 4
    assert [m.value for r in history.runs for m in r.measures if m.name == ROWS] == [20, 30, 40, 50]
    statuses = [
        history.result(r.run_id, ("shop", "public.t", "primary_key")).status  # type: ignore[union-attr]
        for r in history.runs
    ]
    assert statuses == ["pass", "pass", "fail", "fail"]
    assert len(read_history(lake, 100).runs) == 6

    # Bounded: the results of older runs and of the gate are never read. Their files gone,
    # the last four runs still read whole.
    quality = results_path(lake)
    actions = pa.table(DeltaTable(str(quality)).get_add_actions(flatten=True)).to_pylist()
    kept = {r.run_id for r in history.runs}
    gone = [a["path"] for a in actions if a["min.run_id"] not in kept]
    assert len(gone) == 2 + 6
    for name in gone:
        (quality / name).unlink()
    assert read_history(lake, 4) == history


def test_gold_lag_is_from_silver_recording_the_cut_to_gold_showing_it(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    recorded = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=100)
    append_results(lake, quality_run(1, full=True, recorded=recorded))
    append_results(lake, quality_run(2, full=True, recorded=recorded))
    assert not [
        m for r in read_history(lake, 5).runs for m in r.measures if m.name == SILVER_TO_GOLD
    ]
    publish(lake, [cut(1, recorded)], quality_run="001-full")  # gold shows run 1's cut, not 2's
    runs = read_history(lake, 5).runs
    lags = [[m.value for m in r.measures if m.name == SILVER_TO_GOLD] for r in runs]
    assert len(lags[0]) == 1 and 100 <= lags[0][0] < 100 + 600
    assert lags[1] == []  # a gap until gold moves to batch 2 or later


def test_the_report_draws_the_history(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    runs = [quality_run(i, full=True, ok=i < 2) for i in range(3)]
    for run in runs:
        append_results(lake, run)
    page = write_report(runs[-1], tmp_path / "report", history=read_history(lake, 30)).read_text()
    assert page.index("id='newly-failing'") < page.index("id='summary'")
    assert "primary_key</code> on shop.public.t FAILS (blocks gold)" in page
    assert page.count("<rect class='cell") == 3
    assert page.count("data-series='rows'") == 3


def test_an_unreadable_history_is_said_not_fatal(tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    run = quality_run(1, full=True)
    append_results(lake, run)
    runs = runs_path(lake)
    assert isinstance(runs, Path)  # a local lake's location is a Path
    log = runs / "_delta_log"
    for entry in log.glob("*.json"):
        entry.write_text("{not json")
    history = report_history(lake, 30)
    assert history.runs == () and history.error
    page = write_report(run, tmp_path / "report", history=history).read_text()
    assert "history unreadable" in page and "primary_key" in page  # the run itself is reported
