"""Crash points for exactly-once tests.

Tests prove that landing survives ``kill -9`` between any two steps of a batch. Setting
``MEDALLION_FAULTS=after_commit@3,before_ack@5`` makes the process SIGKILL itself when it
reaches that point in that batch (``*`` matches every batch). Unset, this module does nothing
but one dict lookup per step.
"""

from __future__ import annotations

import os
import signal

__all__ = ["FAULT_POINTS", "FaultInjector"]

ENV_VAR = "MEDALLION_FAULTS"

FAULT_POINTS = (
    "after_read",
    "after_schemas",
    "after_quarantine",
    "after_commit",
    "after_ack",
)
"""Named steps of one batch, in the order the agent passes them."""


class FaultInjector:
    """Kills the process at configured points.

    Args:
        spec: ``point@batch`` items separated by commas; batch may be ``*``.
    """

    def __init__(self, spec: str | None = None) -> None:
        self._points: dict[str, set[str]] = {}
        for item in (spec or "").split(","):
            item = item.strip()
            if not item:
                continue
            point, _, batch = item.partition("@")
            if point not in FAULT_POINTS:
                raise ValueError(f"unknown fault point {point!r}; known: {', '.join(FAULT_POINTS)}")
            self._points.setdefault(point, set()).add(batch or "*")

    @classmethod
    def from_env(cls) -> FaultInjector:
        """The injector configured by ``$MEDALLION_FAULTS``."""
        return cls(os.environ.get(ENV_VAR))

    def hit(self, point: str, batch_seq: int) -> None:
        """Die here if ``point`` is armed for ``batch_seq``."""
        batches = self._points.get(point)
        if batches and ("*" in batches or str(batch_seq) in batches):
            os.kill(os.getpid(), signal.SIGKILL)
