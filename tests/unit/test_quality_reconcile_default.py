"""``medallion quality`` reconciles when the config schedules reconciliation (pipeline/cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.cli import reconcile_wanted
from pipeline.config import load_config

pytestmark = pytest.mark.unit


def _config(tmp_path: Path, quality: str) -> object:
    path = tmp_path / "pipeline.yaml"
    path.write_text(quality + "sources: []\n", encoding="utf-8")
    return load_config(path, env={})


def test_the_default_follows_the_configured_schedule(tmp_path: Path) -> None:
    scheduled = _config(tmp_path, "")  # the default interval: 3600 s
    assert reconcile_wanted(None, scheduled)
    never = _config(tmp_path, "quality: {reconcile.interval.seconds: null}\n")
    assert not reconcile_wanted(None, never)
    assert reconcile_wanted(True, never) and not reconcile_wanted(False, scheduled)
