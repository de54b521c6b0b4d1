"""The one JSON document a command prints with ``--output json`` (docs/operations.md).

A scheduler (Airflow, cron with ``jq``) reads one document per command from stdout::

    {"command": "run", "exit_code": 0, "outcome": "ok", "exit_meaning": "...",
     "seconds": 41.2, "results": [{"title": "silver", "rows": [...]}, ...],
     "messages": [...], "timings": {"silver": {...}, "gold": {...}}, "silver_batches": 1,
     "error": null}

``timings`` holds seconds per stage, summed over the run: ``silver`` (a micro-batch's stages,
:class:`silver.timings.BatchTimings`), ``silver_tables`` (the per-table stages, summed over the
tables: they overlap in time when tables are applied concurrently), ``gold`` (the refresh's
stages), and the command's own (``capture``, ``quality``, ``reconcile``, ``status``...). The
silver and gold stages arrive through the hooks of :mod:`pipeline.metrics`.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "EXIT_MEANINGS",
    "RunReport",
    "add_silver_batch",
    "add_stages",
    "begin",
    "current",
    "stage",
]

EXIT_MEANINGS: Mapping[int, tuple[str, str]] = {
    0: ("ok", "the command did its work"),
    1: (
        "terminal",
        "a terminal error, a blocking quality check, a reconcile difference, or a bug: running "
        "again gives the same result until a person acts",
    ),
    2: ("config", "a configuration or command-line error: fix the config or the call"),
    3: ("not_built", "the configured connector or option is not built yet"),
    75: ("retryable", "a transient error outlived the retries: run again later, nothing was lost"),
}
"""Exit code -> (``outcome``, ``exit_meaning``); 128 + N is ``signal`` (stopped by signal N)."""


def exit_meaning(code: int) -> tuple[str, str]:
    """``(outcome, exit_meaning)`` of an exit code."""
    if code in EXIT_MEANINGS:
        return EXIT_MEANINGS[code]
    if code > 128:
        signal = code - 128
        return "signal", f"stopped by signal {signal}; the next run goes on from the last commit"
    return "terminal", "an unexpected exit code"


@dataclass
class RunReport:
    """What one command did, for ``--output json``.

    Attributes:
        command: The command's name.
        results: ``(title, rows)`` in the order they were printed.
        messages: Lines of text the command printed.
        timings: Group -> stage -> seconds.
        silver_batches: Silver micro-batches run.
    """

    command: str
    results: list[tuple[str, list[dict[str, Any]]]] = field(default_factory=list)
    messages: list[str] = field(default_factory=list)
    timings: dict[str, dict[str, float]] = field(default_factory=dict)
    silver_batches: int = 0
    _started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, group: str, name: str, seconds: float) -> None:
        """Add ``seconds`` to stage ``name`` of ``group``."""
        with self._lock:
            stages = self.timings.setdefault(group, {})
            stages[name] = stages.get(name, 0.0) + seconds

    def document(self, code: int, error: str | None = None) -> dict[str, Any]:
        """The JSON document for exit ``code``."""
        outcome, meaning = exit_meaning(code)
        with self._lock:
            timings = {
                g: {k: round(v, 3) for k, v in stages.items()} for g, stages in self.timings.items()
            }
        return {
            "command": self.command,
            "exit_code": code,
            "outcome": outcome,
            "exit_meaning": meaning,
            "seconds": round(time.monotonic() - self._started, 3),
            "results": [{"title": t, "rows": rows} for t, rows in self.results],
            "messages": list(self.messages),
            "timings": timings,
            "silver_batches": self.silver_batches,
            "error": error,
        }

    def render(self, code: int, error: str | None = None) -> str:
        """:meth:`document` as one line of JSON."""
        return json.dumps(self.document(code, error), default=str)


_current: RunReport | None = None


def begin(command: str) -> RunReport:
    """Start the report of ``command`` (the process's current one)."""
    global _current
    _current = RunReport(command)
    return _current


def current() -> RunReport | None:
    """The report being collected, if a command started one."""
    return _current


def add_result(title: str, rows: Sequence[Mapping[str, Any]]) -> None:
    """Record a result table."""
    if _current is not None:
        _current.results.append((title, [dict(r) for r in rows]))


def add_message(text: str) -> None:
    """Record a line of text."""
    if _current is not None:
        _current.messages.append(text)


def add_stages(group: str, seconds: Mapping[str, float]) -> None:
    """Add seconds per stage to ``group``."""
    if _current is not None:
        for name, value in seconds.items():
            _current.add(group, name, value)


def add_silver_batch(timings: Any) -> None:
    """Add one silver micro-batch's :class:`silver.timings.BatchTimings`."""
    if _current is None:
        return
    add_stages("silver", dict(timings.stages))
    for stages in dict(timings.tables).values():
        add_stages("silver_tables", stages)
    _current.silver_batches += 1


@contextlib.contextmanager
def stage(group: str, name: str) -> Iterator[None]:
    """Time the block as stage ``name`` of ``group`` (counted when it fails too)."""
    started = time.monotonic()
    try:
        yield
    finally:
        if _current is not None:
            _current.add(group, name, time.monotonic() - started)
