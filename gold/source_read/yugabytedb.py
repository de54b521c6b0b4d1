"""YugabyteDB (YSQL): PostgreSQL's reader, with the conversions PostgreSQL 11 keeps exact.

YSQL is PostgreSQL's query layer (PostgreSQL 11.2 in YugabyteDB 2024.1 and 2024.2, the releases
whose logical replication the agent uses), so the catalog query, the canonical form per type, the
one ``REPEATABLE READ, READ ONLY`` transaction and the server-side cursors are
:mod:`gold.source_read.pg`'s. What differs is PostgreSQL 11's arithmetic:

* ``extract`` returns ``double precision`` before PostgreSQL 14, so ``extract(epoch ...) *
  1000000`` can be a microsecond off. Instants, times of day and intervals are built here from
  fields that are whole numbers (whole seconds since the epoch, the seconds field in
  microseconds, hours, minutes, days, months), each exact as a double and cast to ``bigint``.
* ``float4``/``float8`` print the shortest exact text only since PostgreSQL 12; the session's
  ``extra_float_digits=3`` makes PostgreSQL 11 print 9 and 17 significant digits, which parse
  back to the same float.

The connection is its own (the source config's TServers, port, user, database and password),
never the agent's, and no agent decoder is involved. ``database.hostname`` may list several
TServers as the agent's config does (``IP1:PORT1,IP2:PORT2``); libpq tries them in turn.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from gold.source_read import Canon, Family, SourceColumn, SourceTable, read_each
from gold.source_read.pg import _begin, _read_one, column_for, connect_as

__all__ = ["column_for_yb", "read_tables"]

SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=3"
"""PostgreSQL's reader's session, with float texts PostgreSQL 11 prints exactly."""
_HMS_MICROS = (
    "(extract(hour FROM {c})::bigint * 3600000000 + extract(minute FROM {c})::bigint * 60000000"
    " + extract(microseconds FROM {c})::bigint)"
)
"""Hours, minutes and the seconds field (in microseconds) of a time or an interval."""
_MICROS = (
    "CASE WHEN isfinite({c}) THEN (extract(epoch FROM date_trunc('second', {c}))::bigint"
    " * 1000000 + extract(microseconds FROM {c})::bigint % 1000000)::text ELSE {c}::text END"
)
_TIME_OF_DAY = _HMS_MICROS + "::text"
_INTERVAL = (
    "(extract(year FROM {c})::bigint * 12 + extract(month FROM {c})::bigint)::text || ' ' || "
    "extract(day FROM {c})::bigint::text || ' ' || " + _HMS_MICROS + "::text"
)


def column_for_yb(
    name: str, type_text: str, typname: str, typtype: str, element: str | None, typmod: int
) -> tuple[SourceColumn, str]:
    """PostgreSQL's canonical form of the column, with a PostgreSQL 11-exact SQL template.

    Args: as :func:`gold.source_read.pg.column_for`.
    """
    column, template = column_for(name, type_text, typname, typtype, element, typmod)
    if column.family is Family.TIME:
        return column, _TIME_OF_DAY
    if column.canon is Canon.MICROS:
        return column, _MICROS
    if column.canon is Canon.INTERVAL:
        return column, _INTERVAL
    return column, template


def _connect(config: Any) -> Any:
    from capture.yugabytedb.settings import tservers

    host, port = tservers(str(config.database_hostname), int(config.database_port))
    return connect_as(config, host, port, SESSION_OPTIONS, "YugabyteDB")


def read_tables(
    config: Any, collections: Sequence[str], work: Any, *, fetch: int = 10_000
) -> dict[str, SourceTable]:
    """Read ``collections`` in one ``REPEATABLE READ, READ ONLY`` transaction.

    See :class:`gold.source_read.SourceReader`.
    """
    read_one = functools.partial(_read_one, column=column_for_yb)
    return read_each(_connect(config), collections, work, fetch, read_one, _begin)
