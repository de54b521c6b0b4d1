"""Test-suite wiring: fixture plugins and isolation from a developer's own configuration."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

pytest_plugins = ("tests.fix_spark", "tests.fix_servers", "tests.fix_debezium")


@pytest.fixture(autouse=True, scope="session")
def _isolate_medallion_env() -> Iterator[None]:
    """Keep a developer's MEDALLION_* settings (config path, faults, env layering) out of tests."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("MEDALLION")}
    for key in saved:
        if key != "MEDALLION_JARS_DIR":
            del os.environ[key]
    yield
    os.environ.update(saved)
