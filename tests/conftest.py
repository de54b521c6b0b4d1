"""Test-suite wiring: fixture plugins and isolation from a developer's own configuration."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tests.property_profiles import register as _register_property_profiles

pytest_plugins = (
    "tests.fix_spark",
    "tests.fix_servers",
    "tests.fix_debezium",
    "tests.fix_timing",
    "tests.fix_browser",
    "tests.fix_kafka",
    "tests.fix_cluster",
)

# A live-server module is collected only when its server is named; then it fails, never skips,
# when that server cannot be reached.
collect_ignore = (
    []
    if os.environ.get("MEDALLION_TEST_MONGODB_URI") or os.environ.get("MEDALLION_TEST_MONGO_URI")
    else ["integration/test_mongodb_live.py"]
) + (
    [] if os.environ.get("MEDALLION_TEST_YUGABYTE_DSN") else ["integration/test_yugabytedb_live.py"]
)

# A pytest-xdist worker runs under execnet, whose ``__main__`` has neither ``__spec__`` nor
# ``__file__``. pyspark.sql.connect (imported by great_expectations) reads that as "running
# doctests" and calls sys.exit(0), which would end a quality run, and the demo, silently.
_register_property_profiles()

_main = sys.modules["__main__"]
if getattr(_main, "__spec__", None) is None and not hasattr(_main, "__file__"):
    _main.__file__ = "<pytest-xdist worker>"


@pytest.fixture(autouse=True, scope="session")
def _isolate_medallion_env() -> Iterator[None]:
    """Keep a developer's MEDALLION_* settings (config path, faults, env layering) out of tests."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("MEDALLION")}
    for key in saved:
        # MEDALLION_TEST_*: the live servers a run is pointed at (read by the live tests).
        if key != "MEDALLION_JARS_DIR" and not key.startswith("MEDALLION_TEST_"):
            del os.environ[key]
    yield
    os.environ.update(saved)


_HEAVY = ("spark", "postgres", "mysql")
"""Markers of tests that start or drive a JVM or a database server."""

SCHEDULED_TOGETHER: dict[str, tuple[str, ...]] = {
    # The connector contract's shared history (tests/contract/conftest.py ``shared``) is built
    # once per connector and worker: on one worker, once per connector.
    "contract shared history": (
        "tests/contract/test_commit_order.py",
        "tests/contract/test_resume.py",
        "tests/contract/test_silver.py",
        "tests/contract/test_status.py",
    ),
}
"""Modules ``make test`` hands to the same worker, as one unit (they share an expensive fixture)."""

_TOGETHER = {module: unit for unit, modules in SCHEDULED_TOGETHER.items() for module in modules}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run modules with slow tests first, then those using Spark or a server, then the rest.

    ``make test`` hands whole modules to two workers in this order (``--dist loadfile``
    ``--no-loadscope-reorder``); the longest ones started last would leave one worker running
    them alone at the end, so they start first and the many short modules fill the gaps. Only
    the order changes; within a module it is the collection order.
    """

    def weight(item: pytest.Item) -> int:
        marks = {m.name for m in item.iter_markers()}
        return 2 if "slow" in marks else 1 if marks.intersection(_HEAVY) else 0

    modules: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        modules[module] = max(modules.get(module, 0), weight(item))
    first = {module: i for i, module in enumerate(modules)}
    items.sort(key=lambda item: (-modules[m := item.nodeid.split("::", 1)[0]], first[m]))
    shared = {
        module
        for item in items
        if (module := item.nodeid.split("::", 1)[0]).startswith("tests/contract/")
        and "shared" in getattr(item, "fixturenames", ())
    }
    if missing := sorted(shared - set(SCHEDULED_TOGETHER["contract shared history"])):
        raise pytest.UsageError(
            f"{', '.join(missing)} use the contract's shared history: add them to "
            "SCHEDULED_TOGETHER in tests/conftest.py (make test builds it once per connector)"
        )


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadfile`` (``make test``), with the modules of :data:`SCHEDULED_TOGETHER` as one
    unit each; any other ``--dist`` is left to pytest-xdist."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling  # type: ignore[import-untyped]

    class TogetherScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = super()._split_scope(nodeid)
            return _TOGETHER.get(module, module)

    return TogetherScheduling(config, log)
