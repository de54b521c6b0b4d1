"""The quality report (``gold/report.py``) renders in Debian's headless Chromium.

A run with passing, warning and blocking results (and values that would break an unescaped
page) is written with :func:`gold.report.write_report`, opened from disk in Chromium through
Debian's chromedriver, checked for console errors and for what a person must see, and
photographed to ``test-artifacts/quality-report.png``. No Spark: the report is a pure function
of a :class:`~gold.quality.QualityRun`, and the end-to-end test in ``test_gold_quality.py``
checks that ``run_quality`` writes it.
"""

from __future__ import annotations

import datetime as dt
import shutil
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from gold.cuts import Cut, TableAtCut
from gold.quality import CheckResult, QualityRun
from gold.report import run_file_name, write_report
from pipeline.config import PipelineConfig, Severity
from pipeline.landing import LandingAgent
from tests.pgmodel.streams import postgres_stream, write_lines

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
SVG_NS = "http://www.w3.org/2000/svg"
HOSTILE = "<script>document.title='pwned'</script>&\"'"


def result(
    check: str, table: str | None, severity: Severity, success: bool, **kw: Any
) -> CheckResult:
    values: dict[str, Any] = {
        "run_id": "20261121T120000Z-abc123",
        "checked_at": dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC),
        "source": "shop",
        "table": table,
        "check": check,
        "engine": "medallion",
        "severity": severity,
        "success": success,
        "observed": "ok" if success else "failed",
        "unexpected_count": None,
        "sample": (),
        "details": "",
        "silver_batch": 7,
        "position_hex": "0102",
    }
    values.update(kw)
    return CheckResult(**values)


def sample_run() -> QualityRun:
    cut = Cut(
        "shop",
        7,
        bytes.fromhex("01000000000a0b"),
        1_763_726_400_000,
        {"shop__public__orders": TableAtCut("shop__public__orders", "public.orders", 3)},
    )
    results = (
        result("freshness", "public.orders", Severity.WARN, True, observed="lag 4.0 s (SLO 60 s)"),
        result(
            "primary_key",
            "public.orders",
            Severity.BLOCK,
            False,
            engine="great_expectations",
            observed="id: 2 unexpected of 9",
            unexpected_count=2,
            sample=("id: id=4", "id: id=4"),
        ),
        result(
            "quarantine",
            "public.customers",
            Severity.WARN,
            False,
            observed="3 quarantined (max 0)",
            unexpected_count=3,
            sample=(HOSTILE,),
        ),
        result("late_events", None, Severity.WARN, True, observed=HOSTILE, details=HOSTILE),
        result(
            "expectation:expect_column_pair_values_a_to_be_greater_than_b",
            "public.orders",
            Severity.WARN,
            True,
            engine="great_expectations",
            sample=('{"order_line_identifier":"' + "0123456789" * 15 + '"}',),
        ),
    )
    started = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
    return QualityRun(
        "20261121T120000Z-abc123",
        started,
        started + dt.timedelta(seconds=9),
        {"shop": cut},
        results,
    )


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """Headless Chromium through Debian's chromedriver; missing either fails the test."""
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing or shutil.which(str(CHROMEDRIVER)) is None:
        pytest.fail(
            f"{', '.join(missing) or CHROMEDRIVER} not installed: run `make bootstrap` "
            "(installs Debian's chromium and chromium-driver)",
            pytrace=False,
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,1000"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    return width, height


def test_report_renders_in_headless_chromium(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    run = sample_run()
    index = write_report(run, tmp_path / "report")
    assert index.name == "index.html"
    assert (index.parent / run_file_name(run.run_id)).read_text() == index.read_text()
    page = index.read_text()
    assert "<script>" not in page and "&lt;script&gt;" in page  # escaped, never executed
    assert "http://" not in page and "https://" not in page  # nothing fetched

    browser.get(index.as_uri())
    assert browser.title == f"medallion quality {run.run_id}"
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    assert browser.find_element(By.ID, "passed").text == "3"
    assert browser.find_element(By.ID, "warned").text == "1"
    assert browser.find_element(By.ID, "blocking").text == "1"
    assert "gold stays at the last good cut of: shop" in browser.find_element(By.ID, "verdict").text
    cuts = browser.find_element(By.ID, "cuts").text
    assert "01000000000a0b" in cuts and "2025-11-21T12:00:00+00:00" in cuts
    body = browser.find_element(By.TAG_NAME, "body").text
    for text in ("primary_key", "FAILED (blocks gold)", "failed (warning)", "id: id=4", HOSTILE):
        assert text in body, text
    # Failures first: the blocking primary_key row precedes the passing freshness row.
    assert body.index("primary_key") < body.index("freshness")
    # Sections with a blocking failure first, then warnings, then the all-passing ones.
    sections = [s.text.split(" (")[0] for s in browser.find_elements(By.TAG_NAME, "h3")]
    assert sections == ["public.orders", "public.customers", "source-wide checks"]

    # Long check names wrap instead of widening the page past the window.
    width, inner = browser.execute_script(
        "return [document.documentElement.scrollWidth, window.innerWidth]"
    )
    assert width <= inner

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "quality-report.png"
    browser.set_window_size(1400, 1000)
    assert browser.save_screenshot(str(shot))
    data = shot.read_bytes()
    width, height = png_size(data)
    assert width >= 800 and height >= 600 and len(data) > 20_000


ORDERS = "public.orders"
SLO = 60.0


@pytest.mark.spark
@pytest.mark.delta
def test_history_of_real_runs_renders_in_headless_chromium(
    spark: Any, browser: Any, tmp_path: Path
) -> None:
    """Three real quality runs on a small lake; ``freshness`` starts failing in the third.

    A synthetic PostgreSQL stream is landed and applied once; the runs check its cut with the
    clock 10 s, 30 s and two hours after the cut's source time (SLO 60 s), and gold is
    published after the first. The report of the third run, opened in Chromium, must show
    ``freshness`` newly failing on both tables, a strip of three cells per check, and a point
    per run on every plot, at heights that follow the measured values.
    """
    from selenium.webdriver.common.by import By

    from gold.cuts import latest_cut
    from gold.publish import publish
    from gold.quality import run_quality
    from gold.report_history import read_history
    from gold.report_measures import BRONZE_TO_SILVER, FRESHNESS, SOURCE_TO_BRONZE
    from silver.job import SilverJob

    stream = postgres_stream(snapshot_rows=3, transactions=4, seed=5)
    source, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    write_lines(source, stream.lines("kafka_json", schemas=True))
    LandingAgent(DebeziumJsonSource("shop", source), BronzeWriter(BronzeTables.under(lake))).run()
    SilverJob(spark, lake).run_once()
    cut = latest_cut(lake, "shop")
    assert cut is not None and cut.source_time is not None
    cfg = PipelineConfig.model_validate(
        {
            "lake": {"root": str(lake)},
            "quality": {"freshness.slo.seconds": SLO, "report.dir": str(lake / "report")},
        }
    )
    runs = []
    for seconds in (10, 30, 7200):
        now = cut.source_time + dt.timedelta(seconds=seconds)
        runs.append(run_quality(spark, cfg, lake, {"shop": cut}, now=now))
        if len(runs) == 1:
            publish(lake, [cut], quality_run=runs[0].run_id)
    failures = [
        (i, r.table, r.check) for i, run in enumerate(runs) for r in run.results if not r.success
    ]
    tables = sorted({t.collection for t in cut.tables.values()})
    assert failures == [(2, t, "freshness") for t in tables]
    index = runs[2].report_path
    assert index is not None and index.name == "index.html"
    page = index.read_text()
    assert "https://" not in page and "http://" not in page.replace(SVG_NS, "")  # nothing fetched

    history = read_history(lake, 30)
    assert [r.run_id for r in history.runs] == [r.run_id for r in runs]
    checks = {t: {r.check for r in runs[2].results if r.table == t} for t in tables}

    browser.get(index.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    newly = browser.find_elements(By.CSS_SELECTOR, "#newly-failing-list li")
    assert sorted(li.text.split(" FAILS")[0].split(" fails")[0] for li in newly) == [
        f"freshness on shop.{t}" for t in tables
    ]
    assert all("first failure" in li.text and "(was: passed)" in li.text for li in newly)

    for table in tables:
        strips = browser.find_element(By.CSS_SELECTOR, f"table.strips[data-table='{table}']")
        rows = strips.find_elements(By.TAG_NAME, "tr")
        assert {row.find_element(By.TAG_NAME, "code").text for row in rows} == checks[table]
        for row in rows:
            assert len(row.find_elements(By.CSS_SELECTOR, "rect.cell")) == len(runs), row.text
        # Failing now, so first: passed, passed, warned; the hover names the run and the lag.
        assert rows[0].find_element(By.TAG_NAME, "code").text == "freshness"
        statuses = browser.execute_script(
            "return Array.from(arguments[0].querySelectorAll('rect.cell'))"
            ".map(c => c.getAttribute('class'))",
            rows[0],
        )
        assert statuses == ["cell pass", "cell pass", "cell warn"]
        hover = browser.execute_script(
            "return arguments[0].querySelector('rect.warn title').textContent", rows[0]
        )
        assert runs[2].run_id in hover and "lag 7200.0 s" in hover

        plots = browser.find_element(By.CSS_SELECTOR, f"div.plots[data-table='{table}']")

        def points(series: str, plots: Any = plots) -> list[float]:
            return [
                float(c.get_attribute("cy"))
                for c in plots.find_elements(By.CSS_SELECTOR, f"circle.pt[data-series='{series}']")
            ]

        measured = {
            name: [
                m.value
                for run in history.runs
                for m in run.measures
                if m.table == table and m.name == name
            ]
            for name in (SOURCE_TO_BRONZE, BRONZE_TO_SILVER, FRESHNESS)
        }
        rows_at = points("rows")
        assert len(rows_at) == len(runs) and len(set(rows_at)) == 1  # one cut, three runs
        assert len(points("quarantined")) == len(runs)
        assert len(points("→gold")) == len(runs)  # gold shows the cut since the first run
        assert len(points("→bronze")) == len(measured[SOURCE_TO_BRONZE]) == len(runs)
        assert len(points("→silver")) == len(measured[BRONZE_TO_SILVER]) == len(runs)
        # Freshness grows with the clock: each point higher (smaller y) than the one before.
        fresh = points("freshness")
        assert len(fresh) == len(runs) and fresh[0] > fresh[1] > fresh[2]
        assert measured[FRESHNESS][2] - measured[FRESHNESS][0] == pytest.approx(7190)

    browser.set_window_size(1400, 1000)
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "quality-report-history.png"))
