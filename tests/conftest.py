"""Test-suite wiring: fixture plugins and isolation from a developer's own configuration."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

pytest_plugins = ("tests.fix_spark", "tests.fix_servers", "tests.fix_debezium")

# A pytest-xdist worker runs under execnet, whose ``__main__`` has neither ``__spec__`` nor
# ``__file__``. pyspark.sql.connect (imported by great_expectations) reads that as "running
# doctests" and calls sys.exit(0), which would end a quality run, and the demo, silently.
_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"


@pytest.fixture(autouse=True, scope="session")
def _isolate_medallion_env() -> Iterator[None]:
    """Keep a developer's MEDALLION_* settings (config path, faults, env layering) out of tests."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("MEDALLION")}
    for key in saved:
        if key != "MEDALLION_JARS_DIR":
            del os.environ[key]
    yield
    os.environ.update(saved)
