"""The quality report (``gold/report.py``) renders in Debian's headless Chromium.

A run with passing, warning and blocking results (and values that would break an unescaped
page) is written with :func:`gold.report.write_report`, opened from disk in Chromium through
Debian's chromedriver (``tests/fix_browser.py``), checked for console errors and for what a
person must see, and photographed to ``test-artifacts/quality-report.png``. No Spark: the
report is a pure function of a :class:`~gold.quality.QualityRun`. The end-to-end tests in
``test_gold_quality.py`` check that ``run_quality`` writes it, and draw the history of real
runs in Chromium (on that module's lake, built once).
"""

from __future__ import annotations

import datetime as dt
import struct
from pathlib import Path
from typing import Any

from gold.cuts import Cut, TableAtCut
from gold.quality import CheckResult, QualityRun
from gold.report import run_file_name, write_report
from pipeline.config import Severity
from tests.fix_browser import ARTIFACTS

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
