"""What one data-quality check found (:class:`CheckOutcome`), before the run stamps it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CheckOutcome"]


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """The outcome of one check on one table (or one source).

    The quality run adds the run id, time, cut and severity (``quality.severity`` by ``check``)
    when it records the outcome.

    Attributes:
        check: The check's name (``primary_key``, ``freshness``, ``reconcile`` ...).
        source: The source name.
        table: The source table (``<schema>.<table>``); None for a source-wide check.
        success: Whether the check passed.
        observed: What was measured, for people (``"3 duplicate keys"``, ``"lag 12 s"``).
        unexpected_count: Offending rows/keys, when countable.
        sample: Some offending keys or values, rendered as text.
        details: Longer explanation: where to look, what to do.
        engine: ``great_expectations`` or ``medallion``.
    """

    check: str
    source: str
    table: str | None
    success: bool
    observed: str
    unexpected_count: int | None = None
    sample: tuple[str, ...] = ()
    details: str = ""
    engine: str = "medallion"
