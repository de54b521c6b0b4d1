"""The suite's own clock (tests/fix_timing.py): seconds per worker and per module."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests.fix_timing import SuiteClock


def report(nodeid: str, duration: float, worker: str | None) -> pytest.TestReport:
    made = pytest.TestReport(
        nodeid, ("x.py", 0, "t"), {}, "passed", None, "call", duration=duration
    )
    if worker is not None:  # what pytest-xdist's controller sets on a worker's report
        made.node = SimpleNamespace(gateway=SimpleNamespace(id=worker))  # type: ignore[attr-defined]
    return made


def test_seconds_add_up_per_worker_and_per_module() -> None:
    clock = SuiteClock()
    clock.record(report("tests/a.py::t1", 3.0, "gw0"))
    clock.record(report("tests/a.py::t2", 4.0, "gw1"))
    clock.record(report("tests/b.py::t", 10.0, "gw1"))
    clock.record(report("tests/c.py::t", 0.5, "gw0"))
    assert clock.busy == {"gw0": 3.5, "gw1": 14.0}
    assert clock.modules == {"tests/a.py": 7.0, "tests/b.py": 10.0, "tests/c.py": 0.5}
    lines = clock.lines()
    assert lines[0].startswith("gw0: 4 s in tests") and lines[1].startswith("gw1: 14 s in tests")
    # The costliest module first, with the workers that ran it.
    assert lines[2].split() == ["10.0", "s", "tests/b.py", "(gw1)"]
    assert lines[3].split() == ["7.0", "s", "tests/a.py", "(gw0,", "gw1)"]


def test_without_xdist_the_one_process_is_the_worker() -> None:
    clock = SuiteClock()
    clock.record(report("tests/a.py::t", 2.0, None))
    assert clock.busy == {"main": 2.0}
    assert clock.workers_of == {"tests/a.py": {"main"}}
