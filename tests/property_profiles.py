"""Hypothesis profiles: a fast one for ``make test``, a deep one for ``make test-properties-deep``.

``make test`` loads ``fast`` (the examples each test asks for, no deadline: a loaded machine
must not fail a property on time). ``HYPOTHESIS_PROFILE=deep`` (``make test-properties-deep``)
runs every property test with many more examples: tests that pin a small count because each
example is expensive (a Spark MERGE per example) ask for it through :func:`examples`, which
returns the deep count under the deep profile.
"""

from __future__ import annotations

import os

from hypothesis import settings

__all__ = ["DEEP", "PROFILE", "examples", "register"]

PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "fast")
"""The profile this run loads (``fast`` unless ``HYPOTHESIS_PROFILE`` names another)."""

DEEP = PROFILE == "deep"


def examples(fast: int, deep: int) -> int:
    """``max_examples`` for a test: ``fast`` in ``make test``, ``deep`` in the deep run."""
    return deep if DEEP else fast


def register() -> None:
    """Register both profiles and load the selected one (called from ``tests/conftest.py``)."""
    settings.register_profile("fast", deadline=None, print_blob=True)
    settings.register_profile("deep", deadline=None, print_blob=True, max_examples=1000)
    settings.load_profile(PROFILE)
