"""Which source columns the configuration makes lossy on purpose (not comparable with silver).

A column whose configured handling loses information by design (a mask, a hash or a
truncation rule; ``interval.handling.mode=numeric``; ``bigint.unsigned.handling.mode=long``;
``decimal.handling.mode=double``; ``time.precision.mode=connect``) cannot be compared with the
source value by value, and must not be counted as equal either: reconciliation reports it as
``not comparable: lossy by config <key>=<value>``. Each rule is one small function of
:data:`LOSSY_RULES`; a new lossy mode is one function and one tuple entry.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from gold.source_read import Family, SourceColumn

__all__ = ["LOSSY_RULES", "LossyRule", "lossy_by_config"]

LossyRule = Callable[[Any, str, SourceColumn], str | None]
"""``(source config, collection, column)`` -> ``<key>=<value>`` when the rule applies."""


def _mode(config: Any, attribute: str) -> str | None:
    value = getattr(config, attribute, None)
    return None if value is None else str(getattr(value, "value", value))


def _column_rule(config: Any, collection: str, column: SourceColumn) -> str | None:
    """A mask, hash or truncation rule (``column.mask.*``, ``column.truncate.*``) covers it."""
    name = f"{collection}.{column.name}"
    for rule in getattr(config, "column_rules", ()):
        if any(re.fullmatch(regex, name, re.IGNORECASE) for regex in rule.columns):
            return f"{rule.key}={','.join(rule.columns)}"
    return None


def _mode_rule(attribute: str, key: str, lossy: str, *families: Family) -> LossyRule:
    """A handling mode that loses information for the columns of ``families`` when set to
    ``lossy``."""

    def rule(config: Any, collection: str, column: SourceColumn) -> str | None:
        mode = _mode(config, attribute)
        return f"{key}={mode}" if column.family in families and mode == lossy else None

    rule.__name__ = f"_{attribute}_{lossy}"
    return rule


_interval_numeric = _mode_rule(
    "interval_handling_mode", "interval.handling.mode", "numeric", Family.INTERVAL
)


def _interval_rule(config: Any, collection: str, column: SourceColumn) -> str | None:
    """``interval.handling.mode=numeric`` counts a month as 30.4375 days: lossy where one
    interval mixes months with days and time (PostgreSQL), not for a source whose interval
    types each hold one unit family (``INTERVAL_UNITS_SEPARATE``: Oracle)."""
    if getattr(type(config), "INTERVAL_UNITS_SEPARATE", False):
        return None
    return _interval_numeric(config, collection, column)


LOSSY_RULES: tuple[LossyRule, ...] = (
    _column_rule,
    _interval_rule,
    # Values >= 2^63 wrap to negative.
    _mode_rule(
        "bigint_unsigned_handling_mode",
        "bigint.unsigned.handling.mode",
        "long",
        Family.UNSIGNED_BIGINT,
    ),
    # Digits past 15-17 are lost.
    _mode_rule("decimal_handling_mode", "decimal.handling.mode", "double", Family.DECIMAL),
    # Times and timestamps truncated to milliseconds.
    _mode_rule(
        "time_precision_mode", "time.precision.mode", "connect", Family.TIME, Family.TIMESTAMP
    ),
)
"""The lossy-by-config rules, first match wins."""


def lossy_by_config(config: Any, collection: str, column: SourceColumn) -> str | None:
    """``lossy by config <key>=<value>`` when a rule of :data:`LOSSY_RULES` applies, else None.

    Args:
        config: The source's config.
        collection: ``<schema>.<table>``.
        column: The source column.
    """
    for rule in LOSSY_RULES:
        found = rule(config, collection, column)
        if found is not None:
            return f"lossy by config {found}"
    return None
