"""Debian's headless Chromium for the tests that open a rendered page (pytest plugin, in
``tests/conftest.py``).

:func:`browser` drives it through Debian's chromedriver with selenium and keeps the page's
console (``goog:loggingPrefs``), so a test can assert the page loaded without errors
(``browser.get_log("browser")``). A missing chromium or chromedriver fails the test.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

__all__ = ["ARTIFACTS", "CHROMEDRIVER", "CHROMIUM", "browser"]

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
ARTIFACTS = Path(__file__).resolve().parents[1] / "test-artifacts"
"""Where tests leave screenshots for people to look at."""


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
