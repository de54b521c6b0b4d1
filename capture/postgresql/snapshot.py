"""The PostgreSQL agent's initial snapshot: :class:`SnapshotReader`.

Reads each captured table in key order in the exported snapshot of the slot's consistent point
(see :mod:`capture.postgresql.source`, step 2): by default a chunk at a time with
``COPY (SELECT ... ORDER BY key LIMIT n) TO STDOUT`` in text format, received and split in C
into Arrow string columns of the text each type's output function writes (what pgoutput sends,
and what the per-row path reads through a server-side cursor; :mod:`capture.postgresql.copy_text`),
then converted column by column (:mod:`capture.columnar_snapshot`).

Why text and not binary COPY: every converter of :mod:`capture.postgresql.types` takes the output
function's text, so the text form keeps one conversion for the snapshot and the stream; text
``COPY`` writes NULL as ``\\N`` and escapes every backslash, so NULL and the empty string stay
apart exactly. Why a query per chunk and not one ``COPY`` per table: a chunk is complete when its
query ends, so the memory bound is one chunk, and a restart resumes after the last landed key as
before.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any, Final

import orjson
import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql
from psycopg.types.string import TextLoader

from bronze import connect_schema as cs
from bronze.columnar import json_strings
from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.columnar_snapshot import ColumnarSnapshot, Encoder, SnapshotChunk
from capture.database_source import SnapshotRow
from capture.postgresql.agent import PostgresAgent, SnapshotProgress
from capture.postgresql.copy_text import receive_text_copy
from capture.postgresql.position import PostgresPosition, format_pg_lsn
from capture.postgresql.schema import TableSchema
from pipeline.errors import CaptureError, InternalError

__all__ = [
    "SNAPSHOT_CURSOR",
    "SnapshotReader",
    "column_encoder",
    "copy_chunks",
    "copy_rows",
    "keyed_chunks",
    "text_cursor",
    "utf8",
]

logger = logging.getLogger(__name__)

SNAPSHOT_CURSOR = "medallion_snapshot"

_TID_OID = 27


class SnapshotReader(ColumnarSnapshot, PostgresAgent):
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

    def _remaining_tables(
        self,
    ) -> Iterator[tuple[psycopg.Connection[Any], int, int, TableSchema, list[Any] | None]]:
        """``(connection, fetch size, table index, schema, after)`` of each table left to read
        (``after``: the key to resume after in the first one), read from the catalog when its
        turn comes; a table dropped since is skipped."""
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
            if ts is not None:
                yield conn, size, index, ts, after
            index, after = index + 1, None

    def _snapshot_rows(self) -> Iterator[tuple[int, TableSchema, list[str | None]]]:
        """Rows of the remaining tables, in key order, as ``(table index, schema, texts)``."""
        for conn, size, index, ts, after in self._remaining_tables():
            for chunk in keyed_chunks(conn, ts, SNAPSHOT_CURSOR, size, after=after):
                for values in chunk:
                    yield index, ts, list(values)

    def _columnar_ready(self) -> bool:
        return self.COLUMNAR_SNAPSHOT and utf8(self._snap_conn)

    def _snapshot_chunks(self) -> Iterator[SnapshotChunk]:
        for conn, size, index, ts, after in self._remaining_tables():
            for rows in prefetched(copy_chunks(conn, ts, size, after=after)):
                yield SnapshotChunk(index, ts, rows)

    def _column_encoder(self, table: CapturedTable, i: int) -> Encoder | None:
        return column_encoder(table, i)

    def _chunk_after(self, chunk: SnapshotChunk) -> list[Any]:
        table, rows = chunk.table, _arrow(chunk)
        last = rows.num_rows - 1
        if table.has_key:
            return [rows.column(i)[last].as_py() for i in table.key_idx]
        return [rows.column(len(table.names))[last].as_py()]

    def _chunk_rows(self, chunk: SnapshotChunk) -> list[Any]:
        return [list(row) for row in zip(*_arrow(chunk).to_pydict().values(), strict=True)]

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


def utf8(conn: psycopg.Connection[Any] | None) -> bool:
    """Whether ``conn`` is open with the UTF-8 client encoding (Arrow reads UTF-8 only; another
    encoding keeps the per-row path)."""
    return conn is not None and conn.info.encoding.replace("-", "").lower() == "utf8"


def _arrow(chunk: SnapshotChunk) -> pa.Table:
    if not isinstance(chunk.rows, pa.Table):
        raise InternalError("capture.postgresql.snapshot: expected an Arrow chunk")
    return chunk.rows


def copy_chunks(
    conn: psycopg.Connection[Any],
    ts: TableSchema,
    size: int,
    *,
    after: Sequence[Any] | None = None,
) -> Iterator[pa.Table]:
    """:func:`keyed_chunks` through ``COPY``: each chunk an Arrow table of string columns (the
    table's columns, then ``ctid`` for a keyless table), holding the text each type's output
    function writes, NULL as null; no empty chunk.

    ``COPY`` takes no parameters, so the resume key is a literal (quoted by psycopg, untyped:
    the server reads it as the key column's type, as it does a bound parameter).
    """
    keyed = ts.has_key
    names = [sql.Identifier(n) for n in ts.names]
    order = sql.SQL(", ").join(names[i] for i in ts.key_idx) if keyed else sql.SQL("ctid")
    columns = sql.SQL(", ").join(names if keyed else [*names, sql.SQL("ctid")])
    width = len(ts.names) + (0 if keyed else 1)
    bound = None if after is None else list(after)
    cur = conn.cursor()
    try:
        while True:
            query = sql.SQL("SELECT {} FROM {}").format(
                columns, sql.Identifier(ts.schema, ts.table)
            )
            if bound is not None:
                literals = sql.SQL(", ").join(sql.Literal(v) for v in bound)
                if keyed:
                    query = sql.SQL("{} WHERE ({}) > ({})").format(query, order, literals)
                else:
                    query = sql.SQL("{} WHERE ctid > {}::tid").format(query, literals)
            query = sql.SQL("{} ORDER BY {} LIMIT {}").format(query, order, sql.Literal(size))
            rows = copy_rows(cur, query, width, table=f"{ts.schema}.{ts.table}")
            if rows.num_rows:
                yield rows
            if rows.num_rows < size:
                return
            last = rows.num_rows - 1
            key_columns = ts.key_idx if keyed else (len(ts.names),)
            bound = [rows.column(i)[last].as_py() for i in key_columns]
    finally:
        cur.close()


def copy_rows(
    cur: psycopg.Cursor[Any], query: sql.Composable, width: int, *, table: str = "a query"
) -> pa.Table:
    """The rows of ``query`` (``width`` columns) through ``COPY ... TO STDOUT``: string columns
    ``c0``... of the text each type's output function writes, NULL as null (``table`` names
    what is read in errors; see :func:`capture.postgresql.copy_text.receive_text_copy`)."""
    return receive_text_copy(cur, query, width, table=table)


_PREFETCH_CHUNKS: Final = 1
"""Chunks read ahead while the previous one is converted: the memory bound of the snapshot is
this many chunks, plus the one converted and the one :func:`with_last` holds back."""

_DONE: Final = object()


def prefetched(chunks: Iterator[pa.Table]) -> Iterator[pa.Table]:
    """``chunks``, read by a thread of its own up to :data:`_PREFETCH_CHUNKS` ahead: the next
    ``COPY`` (received and split in C without the GIL) overlaps the conversion of the previous
    chunk. The thread stops when the consumer does (the generator is closed)."""
    handoff: queue.Queue[Any] = queue.Queue(maxsize=_PREFETCH_CHUNKS)
    stop = threading.Event()

    def put(item: Any) -> bool:
        while not stop.is_set():
            try:
                handoff.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def read() -> None:
        try:
            for chunk in chunks:
                if not put(chunk):
                    return
            put(_DONE)
        except BaseException as exc:  # noqa: BLE001 - handed to the consumer, raised there
            put(exc)

    thread = threading.Thread(target=read, name="medallion-snapshot-copy", daemon=True)
    thread.start()
    try:
        while True:
            item = handoff.get()
            if item is _DONE:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()


def column_encoder(table: CapturedTable, i: int) -> Encoder | None:
    """The vectorized JSON encoder of column ``i`` of ``table`` over its output-function text
    (the snapshot's ``COPY`` and pgoutput's text values alike), or None for the per-value
    fallback (a masked column, a type whose conversion has no vectorized form)."""
    if table.masker is not None and table.masker.covers(table.collection, table.names[i]):
        return None
    column_type = table.types[i]
    convert = column_type.convert
    if convert is int:
        return _pg_int  # the output function writes the canonical decimal JSON has
    if convert is str:
        return json_strings
    if column_type.type_name == "bool" and column_type.schema == _BOOLEAN:
        return _pg_bool
    return None


def _pg_int(values: pa.Array) -> pa.Array:
    return values


def _pg_bool(values: pa.Array) -> pa.Array:
    return pc.if_else(pc.equal(values, "t"), "true", "false")


_BOOLEAN: Final = cs.primitive("boolean")


def text_cursor(conn: psycopg.Connection[Any], ts: TableSchema) -> psycopg.Cursor[Any]:
    """A cursor that reads every column of ``ts`` as the text its output function writes (what
    pgoutput sends): psycopg's text loader in C; unregistered OIDs (domains) load as text."""
    cur = conn.cursor()
    for oid in {0, _TID_OID, *(c.type_oid for c in ts.columns)}:
        cur.adapters.register_loader(oid, TextLoader)
    return cur


_position = PostgresPosition._new
