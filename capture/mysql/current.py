"""What reconciliation reads of a MySQL / MariaDB source (its ``CurrentStateReader`` side).

:func:`read_current`: one consistent read of every captured table on a connection of its own, the
binlog point that belongs to it, and each row turned into the ``after`` payload the agent would
land, converted as the agent's snapshot converts them. No binlog is read and no schema history is
written. :func:`binlog_changes_after`: whether the binlog holds a captured row change after a cut.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import RotateEvent
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from bronze.position_base import Phase
from bronze.positions import decode_position
from capture.column_types import ValueConversionError
from capture.current_state import LogCheck
from capture.mysql.agent import MySqlTable
from capture.mysql.ddl import DdlParseError, SchemaState
from capture.mysql.server import BinlogPoint, ServerDialect, binlog_files, snapshot_point
from capture.mysql.snapshot import keyed_chunks
from capture.mysql.tables import TableTracker
from capture.mysql.types import SNAPSHOT_SESSION_SQL, snapshot_connect_kwargs, snapshot_values
from capture.server_errors import MYSQL
from pipeline.errors import CaptureError, CaptureStopped, PipelineError

__all__ = ["CurrentReader", "binlog_changes_after", "read_current"]

logger = logging.getLogger(__name__)


def _table(source: TableTracker, db: str, name: str, ddl: str) -> MySqlTable | None:
    """The captured table built from its ``SHOW CREATE TABLE`` now (None: the agent cannot build
    it and would quarantine its rows)."""
    state = SchemaState()
    try:
        state.apply(ddl, db)
    except DdlParseError as exc:
        raise CaptureStopped(
            f"source {source.name}: cannot parse SHOW CREATE TABLE of {db}.{name}: {exc}"
        ) from exc
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
    source: TableTracker, *, fetch_size: int | None = None
) -> Iterator[tuple[BinlogPoint, MySqlTable, list[dict[str, Any] | None]]]:
    """Every captured table's current rows, converted exactly as the snapshot converts them.

    One ``REPEATABLE READ`` transaction ``WITH CONSISTENT SNAPSHOT`` on a connection of its own
    (the snapshot connection's session settings and value converters), so all tables are read at
    one instant; the table definitions are the ones in force now (``SHOW CREATE TABLE``, parsed
    as the agent parses a snapshot's); each table is read in key order, ``fetch_size`` rows per
    query (:func:`capture.mysql.snapshot.keyed_chunks`), and each row goes through the table's
    :class:`capture.mysql.agent.MySqlTable` (type handling modes, column filters, masks and hashes)
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
            if (db, name) == source.signals.table:
                continue  # its rows are signals, never data
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
        raise MYSQL.classify(source.name, exc, "read the current rows") from exc
    finally:
        conn.close()


def binlog_changes_after(source: TableTracker, position: bytes, point: BinlogPoint) -> LogCheck:
    """Read the binlog from the cut to ``point`` (the snapshot's): a captured row change after
    the cut?

    Bronze positions keep the binlog file's number, not its name: the name is the snapshot
    point's base name with that number. A cut taken in a snapshot sits at the snapshot's binlog
    point, an event boundary, and the read starts there; any other cut position may be inside an
    event group (a heartbeat sits one byte before the next event, and row events need the table
    map before them), so the read starts at the beginning of the cut's file and skips the events
    up to the cut. The reader is non-blocking, uses server id 0 (which disconnects no replica:
    the server kills an older dump thread only for a non-zero id it already serves) and stops at
    ``point``.

    Args:
        source: The agent (its settings and connection).
        position: The cut's encoded bronze position.
        point: The binlog point of the current-state read.

    Returns:
        Whether a captured row change came after the cut, and why; None when it cannot be told.
    """
    settings = source.settings
    try:
        at_cut: Any = decode_position("mysql", position)
        cut_key = (int(at_cut.file_number), int(at_cut.pos), int(at_cut.phase))
        cut_row = int(at_cut.row)
    except (PipelineError, AttributeError) as exc:
        return LogCheck(None, f"the cut's position is not a MySQL position ({exc})")
    end = point.key()
    if cut_key[:2] >= end:
        return LogCheck(
            False, "the cut is at or after the snapshot's binlog point: nothing between"
        )
    start_file = f"{point.file.rsplit('.', 1)[0]}.{cut_key[0]:06d}"
    start_pos = cut_key[1] if cut_key[2] == Phase.SNAPSHOT else 4
    stream: Any = None
    try:
        conn = source._connect()
        try:
            files = [f for f, _size in binlog_files(conn)]
        finally:
            conn.close()
        if start_file not in files:
            return LogCheck(
                None,
                f"binlog file {start_file} of the cut is no longer on the server (purged; the "
                f"oldest is {files[0] if files else 'none'})",
            )
        stream = BinLogStreamReader(
            connection_settings=settings.connection(),
            # 0: a non-blocking reader that no replica can collide with; the server never
            # kills another dump thread for it (a fixed offset from the agent's id could
            # equal a real replica's and disconnect it).
            server_id=0,
            blocking=False,
            resume_stream=True,
            log_file=start_file,
            log_pos=start_pos,
            only_events=[RotateEvent, WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent],
            enable_logging=False,
        )
        for event in iter(stream.fetchone, None):
            if isinstance(event, RotateEvent):
                continue
            file = str(stream.log_file)
            start = int(event.packet.log_pos) - int(event.packet.event_size)
            at = (int(file.rsplit(".", 1)[-1]), start)
            if at >= end:
                break
            where = (str(event.schema), str(event.table))
            if not settings.table_filter.table(*where) or where == settings.signals.table:
                continue  # not captured, or the signaling table (its rows are never data)
            # Rows of the event at the cut itself are after it from the cut's row on.
            key = (*at, int(Phase.STREAM))
            if key > cut_key or (key == cut_key and len(event.rows) > cut_row + 1):
                return LogCheck(True, f"a captured row change at binlog {file}:{start}")
        return LogCheck(False, "no captured row change after the cut in the binlog")
    except pymysql.err.MySQLError as exc:
        logger.warning("reconcile %s: cannot read the binlog: %s", source.name, exc)
        why = exc.args[-1] if exc.args else exc
        return LogCheck(None, f"cannot read the binlog from {start_file}: {why}")
    finally:
        if stream is not None:
            stream.close()


class CurrentReader(TableTracker):
    """The agent's :class:`~capture.current_state.CurrentStateReader` side."""

    def read_current(
        self, *, fetch_size: int | None = None
    ) -> Iterator[tuple[BinlogPoint, MySqlTable, list[dict[str, Any] | None]]]:
        """Every captured table's current rows, converted exactly as the snapshot converts them
        (for :mod:`gold.reconcile`; see :func:`capture.mysql.current.read_current`)."""
        return read_current(self, fetch_size=fetch_size)

    def point_text(self, point: BinlogPoint) -> str:
        """A binlog point :meth:`read_current` yielded, as ``<file>:<pos>``."""
        return f"{point.file}:{point.pos}"

    def changes_after(self, position: bytes, point: BinlogPoint) -> LogCheck:
        """Whether the binlog holds a captured row change after ``position`` and up to ``point``
        (see :func:`capture.mysql.current.binlog_changes_after`)."""
        return binlog_changes_after(self, position, point)
