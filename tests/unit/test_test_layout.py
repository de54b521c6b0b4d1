"""The test tree's own rules, checked so that a new test module cannot silently drop out."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

pytestmark = pytest.mark.unit

TESTS = Path(__file__).resolve().parents[1]


def test_every_test_module_has_a_unique_basename() -> None:
    # The test folders are not packages (pytest's default rootdir import mode), so two modules
    # with one basename collide: pytest then fails to collect the second with "import file
    # mismatch", and its tests never run.
    names = Counter(p.name for p in TESTS.rglob("test_*.py"))
    assert [n for n, count in names.items() if count > 1] == []
