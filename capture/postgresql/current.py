"""What reconciliation reads of a PostgreSQL source (its ``CurrentStateReader`` side).

:class:`CurrentReader` reads every captured table's current rows at one consistent point;
:func:`slot_changes_after` answers "changes after the cut" from a peeked copy of the agent's
replication slot.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import psycopg

from bronze.positions import decode_position
from capture.column_types import ValueConversionError
from capture.current_state import LogCheck
from capture.postgresql.agent import PostgresAgent
from capture.postgresql.pgoutput import (
    Begin,
    Delete,
    Insert,
    Relation,
    Truncate,
    Update,
    decode_message,
)
from capture.postgresql.position import format_pg_lsn
from capture.postgresql.schema import TableSchema
from capture.postgresql.settings import PgSourceSettings
from capture.postgresql.slot import parse_lsn
from capture.postgresql.snapshot import keyed_chunks
from capture.server_errors import POSTGRES
from pipeline.errors import InternalError, PipelineError

__all__ = ["CurrentReader", "slot_changes_after"]

logger = logging.getLogger(__name__)


def slot_changes_after(
    name: str,
    settings: PgSourceSettings,
    connect: Callable[[], psycopg.Connection[Any]],
    position: bytes,
    lsn: int,
) -> LogCheck:
    """Decode a temporary copy of the agent's slot up to ``lsn``: a captured change after the cut?

    The copy starts where the agent's slot is confirmed, so it sees exactly what the agent has
    not acknowledged yet; peeking it consumes nothing, and the copy dies with the session.

    Args:
        name: The source's name (for messages).
        settings: The agent's settings (slot, publication, table filter).
        connect: Opens a connection with the agent's own settings (host, credentials, session).
        position: The cut's encoded bronze position.
        lsn: The WAL LSN of the current-state read.

    Returns:
        Whether a captured change committed after the cut, and why; None when it cannot be told.
    """
    try:
        at_cut: Any = decode_position("postgresql", position)
        cut_commit = int(at_cut.commit_lsn)
    except (PipelineError, AttributeError) as exc:
        return LogCheck(None, f"the cut's position is not a PostgreSQL position ({exc})")
    copy = f"medallion_reconcile_{uuid.uuid4().hex[:16]}"
    conn = connect()
    try:
        found = conn.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND slot_type = 'logical'",
            (settings.slot_name,),
        ).fetchone()
        if found is None:
            return LogCheck(None, f"slot {settings.slot_name} does not exist")
        conn.execute(
            "SELECT pg_copy_logical_replication_slot(%s, %s, true)", (settings.slot_name, copy)
        )
        # Only Begin (commit LSN), Relation (names) and the change messages are needed.
        messages = conn.execute(
            "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL,"
            " 'proto_version', '1', 'publication_names', %s)"
            " WHERE get_byte(data, 0) IN (66, 82, 73, 85, 68, 84)",
            (copy, format_pg_lsn(lsn), settings.publication_name),
        )
        captured: dict[int, bool] = {}
        commit = 0
        for (data,) in messages:
            message = decode_message(bytes(data))
            if isinstance(message, Begin):
                commit = message.final_lsn
            elif isinstance(message, Relation):
                where = (message.namespace or "pg_catalog", message.name)
                # The signaling table's rows (watermarks) are never data.
                captured[message.relation_id] = (
                    settings.table_filter.table(*where) and where != settings.signals.table
                )
            elif isinstance(message, (Insert, Update, Delete)):
                if commit > cut_commit and captured.get(message.relation_id, True):
                    return LogCheck(True, f"a captured change committed at {format_pg_lsn(commit)}")
            elif isinstance(message, Truncate):
                if commit > cut_commit and any(captured.get(r, True) for r in message.relation_ids):
                    return LogCheck(
                        True, f"a captured truncate committed at {format_pg_lsn(commit)}"
                    )
        return LogCheck(False, "no captured change after the cut in the slot")
    except psycopg.Error as exc:
        logger.warning("reconcile %s: cannot peek the slot: %s", name, exc)
        return LogCheck(None, f"cannot peek slot {settings.slot_name}: {str(exc).strip()}")
    finally:
        conn.close()


class CurrentReader(PostgresAgent):
    """The agent's :class:`~capture.current_state.CurrentStateReader` side."""

    def read_current(
        self, *, fetch_size: int | None = None
    ) -> Iterator[tuple[int, TableSchema, list[dict[str, Any] | None]]]:
        """Every captured table's current rows, converted exactly as the snapshot converts them.

        For reconciliation (:mod:`gold.reconcile`): one ``REPEATABLE READ, READ ONLY``
        transaction on a connection of its own, so all tables are read at one instant; each
        table is read in key order (``ctid`` for keyless tables) through a server-side cursor,
        ``fetch_size`` rows at a time, and each row goes through the table's
        :class:`TableSchema` (type handling modes, column filters, masks and hashes) into the
        ``after`` payload the agent would land. No slot or publication is touched.

        Args:
            fetch_size: Rows per ``FETCH`` (default ``snapshot.fetch.size``).

        Yields:
            ``(wal_lsn, table, rows)``: ``wal_lsn`` is ``pg_current_wal_lsn()`` taken in the
            transaction's first statement (the same value in every item); each table is
            announced by an item with no rows, then its rows follow in chunks. A row whose
            value the agent could not convert (it would have been quarantined) is None.

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        size = int(fetch_size or self.settings.snapshot_fetch_size)
        conn = self._connect()
        try:
            conn.autocommit = False
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            lsn = self._read_point(conn)
            for schema, table in self._captured_tables(conn):
                if (schema, table) == self.signals.table:
                    continue  # its rows are signals, never data
                ts = self._table_schema(conn, schema, table, track=False)
                if ts is None:
                    continue
                yield lsn, ts, []
                width = len(ts.names)  # a keyless table's rows end with their ctid
                for chunk in keyed_chunks(conn, ts, "medallion_reconcile", size):
                    out: list[dict[str, Any] | None] = []
                    for values in chunk:
                        try:
                            out.append(ts.row_and_key(list(values[:width]))[0])
                        except (ValueConversionError, PipelineError) as exc:
                            logger.warning(
                                "source %s: %s: a row the agent would quarantine: %s",
                                self.name,
                                ts.collection,
                                exc,
                            )
                            out.append(None)
                    if out:
                        yield lsn, ts, out
            conn.rollback()
        except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
            raise POSTGRES.classify(self.name, exc, "read the current rows") from exc
        finally:
            conn.close()
            # Type lookups opened the side connection; _side() reopens it when needed again.
            # (Not close(): with slot.drop.on.stop that would drop the agent's slot.)
            if self._sql is not None:
                self._sql.close()
                self._sql = None

    def _read_point(self, conn: psycopg.Connection[Any]) -> Any:
        """The log point of the read, taken by the transaction's first statement (a hook:
        YugabyteDB has no WAL position and returns None)."""
        # The snapshot is taken by this first statement, so the LSN is where it stands.
        row = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        if row is None:
            raise InternalError("capture.postgresql.current: expected row is not None")
        return parse_lsn(row[0])

    def point_text(self, point: int) -> str:
        """A WAL LSN :meth:`read_current` yielded, as PostgreSQL prints it (``0/16B3748``)."""
        return format_pg_lsn(point)

    def changes_after(self, position: bytes, point: int) -> LogCheck:
        """Whether the slot holds a captured change after ``position`` and up to ``point``
        (see :func:`capture.postgresql.current.slot_changes_after`)."""
        return slot_changes_after(self.name, self.settings, self._connect, position, point)
