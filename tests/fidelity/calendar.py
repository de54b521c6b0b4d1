"""Expected temporal values, computed with Python's own calendar (never the agent's code).

:mod:`datetime` is proleptic Gregorian for years 1-9999, as Java, Debezium and Spark are;
other years are moved into that range by whole 400-year cycles (146,097 days each), which
changes no month or weekday of the proleptic calendar. Years are astronomical: 1 BC is year 0.
"""

from __future__ import annotations

import datetime as dt

__all__ = ["days", "micros"]

_CYCLE_DAYS = 146_097
_EPOCH = dt.date(1970, 1, 1)


def days(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to the proleptic Gregorian date (astronomical year)."""
    cycles = 0 if 1 <= year <= 9999 else (year - 2000) // 400  # whole cycles away from 2000
    return (dt.date(year - 400 * cycles, month, day) - _EPOCH).days + cycles * _CYCLE_DAYS


def micros(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> int:
    """Microseconds from 1970-01-01T00:00 to the wall clock (UTC), proleptic Gregorian."""
    return (days(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second) * 10**6 + us
