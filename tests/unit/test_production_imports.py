"""Every production module imports without the test-only dependencies.

A production install has neither ``hypothesis`` nor ``pytest`` (the ``dev`` extra) nor the
``tests`` package, so a module importing any of them breaks there while every test passes here.
A child interpreter refuses those imports and imports every module of every production package.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("pipeline", "capture", "bronze", "silver", "gold")
"""The packages a production install ships (``[tool.setuptools.packages.find]``)."""
TEST_ONLY = ("hypothesis", "pytest", "_pytest", "tests")
"""Top-level names only the ``dev`` extra or the checkout provides."""

_CHILD = textwrap.dedent(
    """
    import importlib, importlib.abc, pkgutil, sys

    TEST_ONLY, PACKAGES = set(sys.argv[1].split(",")), sys.argv[2].split(",")

    class Refuse(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in TEST_ONLY:
                raise ModuleNotFoundError(f"test-only module {name!r} imported", name=name)
            return None

    sys.meta_path.insert(0, Refuse())
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            importlib.import_module(info.name)
    leaked = sorted(n for n in sys.modules if n.partition(".")[0] in TEST_ONLY)
    assert not leaked, leaked
    """
)


def test_production_modules_import_without_test_dependencies() -> None:
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, ",".join(TEST_ONLY), ",".join(PACKAGES)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-3000:]


def test_the_guard_refuses_a_test_only_import(tmp_path: Path) -> None:
    """The guard itself works: a module importing hypothesis fails the child."""
    package = tmp_path / "leaky"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "mod.py").write_text("from hypothesis import strategies\n")
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, ",".join(TEST_ONLY), "leaky"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "test-only module 'hypothesis'" in result.stderr
