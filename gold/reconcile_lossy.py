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


def _interval_numeric(config: Any, collection: str, column: SourceColumn) -> str | None:
    """``interval.handling.mode=numeric``: months counted as 30.4375 days."""
    mode = _mode(config, "interval_handling_mode")
    if column.family is Family.INTERVAL and mode == "numeric":
        return f"interval.handling.mode={mode}"
    return None


def _unsigned_long(config: Any, collection: str, column: SourceColumn) -> str | None:
    """``bigint.unsigned.handling.mode=long``: values >= 2^63 wrap to negative."""
    mode = _mode(config, "bigint_unsigned_handling_mode")
    if column.family is Family.UNSIGNED_BIGINT and mode == "long":
        return f"bigint.unsigned.handling.mode={mode}"
    return None


def _decimal_double(config: Any, collection: str, column: SourceColumn) -> str | None:
    """``decimal.handling.mode=double``: digits past 15-17 are lost."""
    mode = _mode(config, "decimal_handling_mode")
    if column.family is Family.DECIMAL and mode == "double":
        return f"decimal.handling.mode={mode}"
    return None


def _time_connect(config: Any, collection: str, column: SourceColumn) -> str | None:
    """``time.precision.mode=connect``: times and timestamps truncated to milliseconds."""
    mode = _mode(config, "time_precision_mode")
    if column.family in (Family.TIME, Family.TIMESTAMP) and mode == "connect":
        return f"time.precision.mode={mode}"
    return None


LOSSY_RULES: tuple[LossyRule, ...] = (
    _column_rule,
    _interval_numeric,
    _unsigned_long,
    _decimal_double,
    _time_connect,
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
