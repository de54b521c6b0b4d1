"""The current rows of a MySQL / MariaDB source, converted as the agent's snapshot converts them.

For reconciliation (:mod:`gold.reconcile`), through
:meth:`capture.mysql.source.MySqlSource.read_current`. The contract is
:meth:`capture.postgresql.source.PostgresSource.read_current`'s: one consistent read of every
captured table on a connection of its own, the log position that belongs to it, and each row turned
into the ``after`` payload the agent would land. No binlog is read and no schema history is written.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pymysql

from capture.column_types import ValueConversionError
from capture.mysql.ddl import DdlParseError, SchemaState
from capture.mysql.types import SNAPSHOT_SESSION_SQL, snapshot_connect_kwargs, snapshot_values
from pipeline.errors import CaptureError, PipelineError, SourceUnavailable

if TYPE_CHECKING:
    from capture.mysql.server import BinlogPoint
    from capture.mysql.source import MySqlSource, MySqlTable

__all__ = ["read_current"]

logger = logging.getLogger(__name__)


def _table(source: MySqlSource, db: str, name: str, ddl: str) -> MySqlTable | None:
    """The captured table built from its ``SHOW CREATE TABLE`` now (None: the agent cannot build
    it and would quarantine its rows)."""
    state = SchemaState()
    try:
        state.apply(ddl, db)
    except DdlParseError as exc:
        raise CaptureError(
            f"source {source.name}: cannot parse SHOW CREATE TABLE of {db}.{name}: {exc}"
        ) from None
    definition = state.table(db, name)
    if definition is None:
        raise CaptureError(
            f"source {source.name}: SHOW CREATE TABLE of {db}.{name} defines no such table"
        )
    try:
        return source._build_table(definition)
    except PipelineError as exc:
        logger.warning(
            "source %s: %s.%s: the agent would quarantine every row (%s); not read",
            source.name,
            db,
            name,
            exc,
        )
        return None


def read_current(
    source: MySqlSource, *, fetch_size: int | None = None
) -> Iterator[tuple[BinlogPoint, MySqlTable, list[dict[str, Any] | None]]]:
    """Every captured table's current rows, converted exactly as the snapshot converts them.

    One ``REPEATABLE READ`` transaction ``WITH CONSISTENT SNAPSHOT`` on a connection of its own
    (the snapshot connection's session settings and value converters), so all tables are read at
    one instant; the table definitions are the ones in force now (``SHOW CREATE TABLE``, parsed
    as the agent parses a snapshot's); each table is read in key order, ``fetch_size`` rows per
    query (:func:`capture.mysql.source.keyed_chunks`), and each row goes through the table's
    :class:`capture.mysql.source.MySqlTable` (type handling modes, column filters, masks and hashes)
    into the ``after`` payload the agent would land.

    Args:
        source: The agent (its settings, connection and table building are used; nothing of its
            state changes).
        fetch_size: Rows per query (default ``snapshot.fetch.size``).

    Yields:
        ``(point, table, rows)``: ``point`` is the binlog point of the snapshot (the same value
        in every item); each table is announced by an item with no rows, then its rows follow
        in chunks. A row whose value the agent could not convert (it would have been
        quarantined) is None.

    Raises:
        SourceUnavailable: The server cannot be reached.
        CaptureError: A table definition the DDL parser cannot read.
    """
    from capture.mysql.server import ServerDialect, snapshot_point
    from capture.mysql.source import keyed_chunks

    size = int(fetch_size or source.settings.snapshot_fetch_size)
    conn = source._connect(**snapshot_connect_kwargs())
    try:
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            point = snapshot_point(conn, ServerDialect.read(conn))
        for db, name, ddl in source._read_schemas(conn):
            table = _table(source, db, name, ddl)
            if table is None:
                continue
            yield point, table, []
            for chunk in keyed_chunks(conn, table, size):
                out: list[dict[str, Any] | None] = []
                for row, _key in chunk:
                    try:
                        out.append(table.row_and_key(snapshot_values(table.definition, row))[0])
                    except (ValueConversionError, PipelineError) as exc:
                        logger.warning(
                            "source %s: %s: a row the agent would quarantine: %s",
                            source.name,
                            table.collection,
                            exc,
                        )
                        out.append(None)
                if out:
                    yield point, table, out
        conn.rollback()
    except (pymysql.err.OperationalError, pymysql.err.InterfaceError) as exc:
        raise SourceUnavailable(f"source {source.name}: {exc.args[-1]}") from None
    finally:
        conn.close()
