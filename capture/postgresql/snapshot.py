"""The PostgreSQL agent's initial snapshot: :class:`SnapshotReader`.

Reads each captured table in key order through a server-side cursor in the exported snapshot
of the slot's consistent point (see :mod:`capture.postgresql.source`, step 2).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import orjson
import psycopg
from psycopg import sql
from psycopg.types.string import TextLoader

from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.database_source import SnapshotRow
from capture.postgresql.agent import PostgresAgent, SnapshotProgress
from capture.postgresql.position import PostgresPosition, format_pg_lsn
from capture.postgresql.schema import TableSchema
from pipeline.errors import CaptureError, InternalError

__all__ = ["SNAPSHOT_CURSOR", "SnapshotReader", "keyed_chunks", "text_cursor"]

logger = logging.getLogger(__name__)

SNAPSHOT_CURSOR = "medallion_snapshot"

_TID_OID = 27


class SnapshotReader(PostgresAgent):
    """The snapshot side of the agent: start, resume, read and finish the initial snapshot."""

    def _start_snapshot(self) -> None:
        point, name = self._create_slot(export=True)
        conn = self._connect()
        conn.autocommit = False
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        self._read_at_point(conn, name)
        self._snap_conn = conn
        self._snapshot = SnapshotProgress(
            point, self._captured_tables(conn), ts_ms=int(time.time() * 1000)
        )
        self._phase = "snapshot"
        self._resume_lsn = point
        self._acked = point
        self._last_commit = None
        self._cut = None
        logger.info(
            "source %s: snapshot of %d table(s) at %s",
            self.name,
            len(self._snapshot.tables),
            format_pg_lsn(point),
        )

    def _resume_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise CaptureError(f"source {self.name}: offset in phase snapshot has no progress")
        logger.warning(
            "source %s: resuming the snapshot at table %d of %d from a fresh transaction (the "
            "exported snapshot ended with the previous run); the stream from %s corrects rows "
            "changed since",
            self.name,
            snap.index + 1,
            len(snap.tables),
            format_pg_lsn(snap.point),
        )
        conn = self._connect()
        conn.autocommit = False
        conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        self._reread_at_point(conn)
        self._snap_conn = conn

    def _read_at_point(self, conn: psycopg.Connection[Any], name: str | None) -> None:
        """Make the snapshot transaction read the database at the slot's consistent point:
        import the exported snapshot (a hook: YugabyteDB sets ``yb_read_time``)."""
        conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(name)))

    def _reread_at_point(self, conn: psycopg.Connection[Any]) -> None:
        """After a restart: the exported snapshot is gone, so PostgreSQL reads the present (a
        hook: YugabyteDB reads at the slot's restart hybrid time again)."""

    def _snapshot_rows(self) -> Iterator[tuple[int, TableSchema, list[str | None]]]:
        """Rows of the remaining tables, in key order, as ``(table index, schema, texts)``."""
        snap, conn = self._snapshot, self._snap_conn
        if snap is None:
            raise InternalError("capture.postgresql.snapshot: expected snap is not None")
        if conn is None:
            raise InternalError("capture.postgresql.snapshot: expected conn is not None")
        size = int(self.settings.snapshot_fetch_size)
        index, after = snap.index, snap.after
        while index < len(snap.tables):
            schema, table = snap.tables[index]
            ts = self._table_schema(conn, schema, table)
            if ts is None:
                index, after = index + 1, None
                continue
            for chunk in keyed_chunks(conn, ts, SNAPSHOT_CURSOR, size, after=after):
                for values in chunk:
                    yield index, ts, list(values)
            index, after = index + 1, None

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.postgresql.snapshot: expected snap is not None")
        return {
            **self._snapshot_source_head(last),
            "db": self.settings.dbname,
            "sequence": None,
            "schema": table.schema,
            "table": table.table,
            "txId": None,
            "lsn": snap.point,
            "xmin": None,
        }

    def _snapshot_position(self) -> PostgresPosition:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.postgresql.snapshot: expected snap is not None")
        position = _position(snap.point, Phase.SNAPSHOT, snap.point, snap.seq)
        snap.seq += 1
        return position

    def _snapshot_decode(self, table: CapturedTable, row: Any) -> SnapshotRow:
        # A keyless table's rows carry their ctid last: the key to resume after.
        ncols = len(table.names)
        values = row[:ncols] if len(row) > ncols else row
        key = [values[i] for i in table.key_idx] if table.has_key else [row[ncols]]
        return SnapshotRow(key, lambda: values, partial(orjson.dumps, row))

    def _snapshot_end_origin(self) -> str:
        if self._snapshot is None:
            raise InternalError("capture.postgresql.snapshot: expected self._snapshot is not None")
        return f"pg:snapshot-end@{format_pg_lsn(self._snapshot.point)}"

    def _finish_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.postgresql.snapshot: expected snap is not None")
        if self._snap_conn is not None:
            self._snap_conn.commit()
            self._snap_conn.close()
            self._snap_conn = None
        self._phase = "done" if self.settings.snapshot_mode == "initial_only" else "stream"
        self._resume_lsn = snap.point
        logger.info("source %s: snapshot complete (%d rows)", self.name, snap.seq)


def keyed_chunks(
    conn: psycopg.Connection[Any],
    ts: TableSchema,
    cursor: str,
    size: int,
    *,
    after: Sequence[Any] | None = None,
) -> Iterator[list[tuple[Any, ...]]]:
    """A table's rows in key order (``ctid`` for a keyless table), ``size`` at a time, through
    a server-side cursor; rows after ``after`` (a key, or a ctid with the ctid column last)
    only. Each row is the text its output function writes (what pgoutput sends); a keyless
    table's rows carry their ctid last."""
    cols = sql.SQL(", ").join(sql.Identifier(n) for n in ts.names)
    keyed = ts.has_key
    order = (
        sql.SQL(", ").join(sql.Identifier(ts.names[i]) for i in ts.key_idx)
        if keyed
        else sql.SQL("ctid")
    )
    select_cols = cols if keyed else sql.SQL("{}, ctid").format(cols)
    query = sql.SQL("DECLARE {} NO SCROLL CURSOR FOR SELECT {} FROM {}").format(
        sql.Identifier(cursor), select_cols, sql.Identifier(ts.schema, ts.table)
    )
    params: list[Any] = []
    if after is not None:
        if keyed:
            marks = sql.SQL(", ").join(sql.Placeholder() for _ in ts.key_idx)
            query = sql.SQL("{} WHERE ({}) > ({})").format(query, order, marks)
        else:
            query = sql.SQL("{} WHERE ctid > {}::tid").format(query, sql.Placeholder())
        params = list(after)
    conn.execute(sql.SQL("{} ORDER BY {}").format(query, order), params)
    cur = text_cursor(conn, ts)
    fetch = sql.SQL("FETCH {} FROM {}").format(sql.Literal(size), sql.Identifier(cursor))
    while True:
        cur.execute(fetch)
        chunk = cur.fetchall()
        yield chunk
        if len(chunk) < size:
            break
    cur.close()
    conn.execute(sql.SQL("CLOSE {}").format(sql.Identifier(cursor)))


def text_cursor(conn: psycopg.Connection[Any], ts: TableSchema) -> psycopg.Cursor[Any]:
    """A cursor that reads every column of ``ts`` as the text its output function writes (what
    pgoutput sends): psycopg's text loader in C; unregistered OIDs (domains) load as text."""
    cur = conn.cursor()
    for oid in {0, _TID_OID, *(c.type_oid for c in ts.columns)}:
        cur.adapters.register_loader(oid, TextLoader)
    return cur


_position = PostgresPosition._new
