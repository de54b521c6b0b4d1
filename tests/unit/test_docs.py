"""Every docstring example in the packages runs, so the guides cannot drift from the code."""

from __future__ import annotations

import doctest
import importlib
import pkgutil
from types import ModuleType

import pytest

pytestmark = pytest.mark.unit

PACKAGES = ("pipeline", "capture", "bronze", "silver", "gold", "tests.pgmodel")
SKIP: set[str] = set()  # every module's examples must run


def _modules() -> list[ModuleType]:
    found = []
    for name in PACKAGES:
        package = importlib.import_module(name)
        found.append(package)
        for info in pkgutil.walk_packages(package.__path__, prefix=f"{name}."):
            if info.name not in SKIP:
                found.append(importlib.import_module(info.name))
    return found


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
def test_doctests(module: ModuleType) -> None:
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {module.__name__}"


def test_the_extension_guide_has_examples() -> None:
    import capture

    assert doctest.DocTestFinder().find(capture)[0].examples
