"""Where the suite's time went: per worker and per module (pytest plugin, in ``tests/conftest.py``).

``make test`` runs modules on two workers; the run ends when the later one does. The summary
says how busy each worker was, when it ran its last test, and which modules cost the most
(setup, call and teardown of their tests, module-scoped fixtures included), so the next change
to the order or to a slow module starts from a measurement rather than from ``--durations``
alone.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest

__all__ = ["SuiteClock"]

_SHOWN_MODULES = 25


@dataclass
class SuiteClock:
    """Test seconds per worker and per module, as the controller receives the reports.

    Attributes:
        started: ``time.monotonic()`` when the session started.
        busy: Seconds of test phases per worker (``gw0``...; ``main`` without xdist).
        last_report: Seconds after ``started`` of each worker's last report.
        modules: Seconds of test phases per module.
        workers_of: Workers that ran tests of each module.
    """

    started: float = field(default_factory=time.monotonic)
    busy: dict[str, float] = field(default_factory=dict)
    last_report: dict[str, float] = field(default_factory=dict)
    modules: dict[str, float] = field(default_factory=dict)
    workers_of: dict[str, set[str]] = field(default_factory=dict)

    def record(self, report: pytest.TestReport) -> None:
        """Add one phase report (setup, call or teardown) of one test."""
        node = getattr(report, "node", None)
        worker = node.gateway.id if node is not None else "main"
        module = report.nodeid.split("::", 1)[0]
        self.busy[worker] = self.busy.get(worker, 0.0) + report.duration
        self.last_report[worker] = time.monotonic() - self.started
        self.modules[module] = self.modules.get(module, 0.0) + report.duration
        self.workers_of.setdefault(module, set()).add(worker)

    def lines(self) -> list[str]:
        """The summary: one line per worker, then the costliest modules."""
        out = [
            f"{worker}: {self.busy[worker]:.0f} s in tests, last test done at "
            f"{self.last_report[worker]:.0f} s"
            for worker in sorted(self.busy)
        ]
        ranked = sorted(self.modules.items(), key=lambda item: -item[1])[:_SHOWN_MODULES]
        out += [
            f"{seconds:8.1f} s  {module} ({', '.join(sorted(self.workers_of[module]))})"
            for module, seconds in ranked
        ]
        return out


def pytest_configure(config: pytest.Config) -> None:
    # On the controller (or the one process without xdist): a worker's reports reach the
    # controller, which receives each once, with the worker named.
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(_ClockPlugin(), "medallion-suite-clock")


class _ClockPlugin:
    def __init__(self) -> None:
        self.clock = SuiteClock()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.clock.record(report)

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.clock.busy:
            terminalreporter.section("medallion: time per worker and costliest modules")
            for line in self.clock.lines():
                terminalreporter.write_line(line)
