"""The MySQL / MariaDB agent's snapshot: :class:`SnapshotReader`.

Locks per ``snapshot.locking.mode``, takes the binlog point of a consistent-snapshot
transaction and reads each captured table in key order (see :mod:`capture.mysql.source`,
step 3).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal
from functools import partial
from typing import Any, Final

import pyarrow as pa
import pymysql

from bronze.columnar import json_strings
from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.columnar_snapshot import ColumnarSnapshot, Encoder, SnapshotChunk
from capture.database_source import SnapshotRow
from capture.mysql.agent import CONNECTION_LOST, MySqlTable, SnapshotProgress, raw_row
from capture.mysql.position import MySqlPosition
from capture.mysql.result_set import TextResult, read_text_result
from capture.mysql.server import (
    snapshot_point,
)
from capture.mysql.tables import TableTracker
from capture.mysql.types import (
    SNAPSHOT_SESSION_SQL,
    snapshot_column,
    snapshot_connect_kwargs,
    snapshot_values,
)
from pipeline.errors import CaptureError, InternalError
from pipeline.sql import qualified, quote_identifier

__all__ = ["SnapshotReader", "keyed_chunks", "unguarded_converter"]

logger = logging.getLogger(__name__)


def _encode_key(values: Sequence[Any]) -> list[Any]:
    """Key values -> JSON (tagged where JSON has no type), so a resume can bind them again."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, Decimal):
            out.append({"decimal": str(v)})
        elif isinstance(v, dt.datetime | dt.date | dt.time):
            out.append({"temporal": v.isoformat()})
        elif isinstance(v, dt.timedelta):
            out.append({"seconds": v.total_seconds()})
        elif isinstance(v, bytes | bytearray):
            out.append({"hex": bytes(v).hex()})
        else:
            out.append(v)
    return out


def _decode_key(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, dict):
            if "decimal" in v:
                out.append(Decimal(v["decimal"]))
            elif "hex" in v:
                out.append(bytes.fromhex(v["hex"]))
            elif "seconds" in v:
                out.append(dt.timedelta(seconds=v["seconds"]))
            else:
                out.append(v["temporal"])  # MySQL compares ISO text with temporal columns
        else:
            out.append(v)
    return out


class SnapshotReader(ColumnarSnapshot, TableTracker):
    """The snapshot side of the agent: start, resume, read and finish a snapshot.

    The rows are read as before (PyMySQL, a keyed query per chunk) and then landed a chunk at a
    time (:mod:`capture.columnar_snapshot`): integer and text columns are encoded column by
    column, other columns through their per-value converters.
    """

    def _start_snapshot(self, *, with_data: bool) -> None:
        s = self.settings
        conn = self._connect(**snapshot_connect_kwargs())
        lock = s.snapshot_locking_mode
        dialect = self._dialect
        if dialect is None:
            raise InternalError("capture.mysql.snapshot: expected dialect is not None")
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            if lock != "none":
                try:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
                except pymysql.err.MySQLError as exc:
                    conn.close()
                    if exc.args and exc.args[0] in CONNECTION_LOST:
                        raise
                    raise CaptureError(
                        f"source {self.name}: FLUSH TABLES WITH READ LOCK failed "
                        f"({exc.args[-1]}): grant RELOAD to {s.user}, or set "
                        "snapshot.locking.mode=none if no DDL runs during the snapshot"
                    ) from exc
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            point = snapshot_point(conn, dialect)
            ddls = self._read_schemas(conn)
            if lock == "minimal":
                cur.execute("UNLOCK TABLES")
        ts_ms = int(time.time() * 1000)
        self._server_id = dialect.server_id
        marker = _position(point.file_number, point.pos, Phase.SNAPSHOT, 0, 0, point.file, None)
        self._record_history(self._snapshot_entries(marker, ddls, ts_ms))
        self._resume = point
        self._gtids = point.gtids
        self._cut = None
        self._replay_history()
        tables = [(db, t) for db, t, _ in ddls] if with_data else []
        self._snapshot = SnapshotProgress(point, tables, ts_ms=ts_ms)
        self._phase = "snapshot"
        self._snap_conn = conn
        logger.info(
            "source %s: snapshot of %d table(s) at %s:%d (locking %s)",
            self.name,
            len(tables),
            point.file,
            point.pos,
            lock,
        )

    def _resume_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise CaptureError(f"source {self.name}: offset in phase snapshot has no progress")
        logger.warning(
            "source %s: resuming the snapshot at table %d of %d in a fresh transaction; the "
            "binlog from %s:%d corrects rows changed since",
            self.name,
            snap.index + 1,
            len(snap.tables),
            snap.point.file,
            snap.point.pos,
        )
        conn = self._connect(**snapshot_connect_kwargs())
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        self._snap_conn = conn

    def _remaining_tables(self) -> Iterator[tuple[int, MySqlTable, list[Any] | None, int]]:
        """``(table index, table, key to resume after, fetch size)`` of each table left."""
        snap, conn = self._snapshot, self._snap_conn
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        if conn is None:
            raise InternalError("capture.mysql.snapshot: expected conn is not None")
        size = int(self.settings.snapshot_fetch_size)
        index, after = snap.index, snap.after
        while index < len(snap.tables):
            table = self._captured(*snap.tables[index])
            if isinstance(table, MySqlTable):
                yield index, table, None if after is None else _decode_key(after), size
            index, after = index + 1, None

    def _snapshot_rows(self) -> Iterator[tuple[int, MySqlTable, tuple[list[Any], list[Any]]]]:
        """``(table index, table, (values, key))`` of the remaining rows, in key order."""
        for index, table, bound, size in self._remaining_tables():
            for chunk in keyed_chunks(self._snap_conn, table, size, after=bound):
                for row_and_key in chunk:
                    yield index, table, row_and_key

    def _snapshot_chunks(self) -> Iterator[SnapshotChunk]:
        for index, table, bound, size in self._remaining_tables():
            for chunk in text_chunks(self._snap_conn, table, size, after=bound):
                yield SnapshotChunk(index, table, chunk)

    def _column_encoder(self, table: CapturedTable, i: int) -> Encoder | None:
        return _encoder(table, i)[0]

    def _chunk_after(self, chunk: SnapshotChunk) -> list[Any]:
        return _encode_key(_text_chunk(chunk).last_key())

    def _chunk_rows(self, chunk: SnapshotChunk) -> list[Any]:
        return _text_chunk(chunk).pairs()

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        return {
            **self._snapshot_source_head(last),
            "db": table.schema,
            "table": table.table,
            "server_id": 0,
            "gtid": None,
            "file": snap.point.file,
            "pos": snap.point.pos,
            "row": 0,
            "thread": None,
            "query": None,
        }

    def _snapshot_position(self) -> MySqlPosition:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        point = snap.point
        position = _position(
            point.file_number, point.pos, Phase.SNAPSHOT, 0, snap.seq, point.file, None
        )
        snap.seq += 1
        return position

    def _snapshot_decode(self, table: CapturedTable, row: Any) -> SnapshotRow:
        if not isinstance(table, MySqlTable):
            raise InternalError("capture.mysql.snapshot: expected isinstance(table, MySqlTable)")
        values, key = row
        return SnapshotRow(
            _encode_key(key),
            partial(snapshot_values, table.definition, values),
            partial(raw_row, values),
        )

    def _snapshot_end_origin(self) -> str:
        if self._snapshot is None:
            raise InternalError("capture.mysql.snapshot: expected self._snapshot is not None")
        point = self._snapshot.point
        return f"mysql:snapshot-end@{point.file}:{point.pos}"

    def _finish_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        if self._snap_conn is not None:
            try:
                with self._snap_conn.cursor() as cur:
                    cur.execute("COMMIT")
                    if self.settings.snapshot_locking_mode == "extended":
                        cur.execute("UNLOCK TABLES")
            finally:
                self._snap_conn.close()
                self._snap_conn = None
        self._phase = "stream"
        self._resume = snap.point
        logger.info("source %s: snapshot complete (%d rows)", self.name, snap.seq)


def keyed_chunks(
    conn: Any, table: MySqlTable, size: int, *, after: Sequence[Any] | None = None
) -> Iterator[list[tuple[list[Any], list[Any]]]]:
    """A table's rows in key order, ``size`` per query, as ``(row, key)`` pairs.

    ``row`` is the driver's tuple in the definition's column order (:func:`snapshot_values`
    makes it ready for :meth:`CapturedTable.row`, row by row, so that one value that does not
    convert costs only its row); ``key`` is what resumes after the row (``after``): its key
    values, or for a keyless table
    its ordinal (such a table has nothing to seek on, so the rows before are skipped by count,
    which is exact inside one consistent snapshot).
    """
    key_idx = list(table.key_idx)
    bound = None if after is None else list(after)
    while True:
        query, args, skipped = _chunk_query(table, size, bound)
        with conn.cursor() as cur:
            cur.execute(query, args)
            rows = cur.fetchall()
        yield [
            (row, [row[i] for i in key_idx] if key_idx else [skipped + n + 1])
            for n, row in enumerate(rows)
        ]
        if len(rows) < size:
            return
        bound = [rows[-1][i] for i in key_idx] if key_idx else [skipped + len(rows)]


def text_chunks(
    conn: Any, table: MySqlTable, size: int, *, after: Sequence[Any] | None = None
) -> Iterator[TextChunk]:
    """:func:`keyed_chunks` read below the driver (:mod:`capture.mysql.result_set`): the same
    queries, each chunk a :class:`TextChunk`; no empty chunk."""
    key_idx = list(table.key_idx)
    bound = None if after is None else list(after)
    while True:
        query, args, skipped = _chunk_query(table, size, bound)
        with conn.cursor() as cur:
            text = cur.mogrify(query, args)
        result = read_text_result(conn, text)
        n = result.num_rows
        if n:
            yield TextChunk(table, result, 0, n, skipped, _raw_columns(table, result))
        if n < size:
            return
        bound = [result.values(i, n - 1)[0] for i in key_idx] if key_idx else [skipped + n]


def _chunk_query(
    table: MySqlTable, size: int, bound: Sequence[Any] | None
) -> tuple[str, tuple[Any, ...], int]:
    """The SELECT of the ``size`` rows after ``bound`` (its parameters; the rows a keyless
    table's query skips)."""
    definition = table.definition
    cols = ", ".join(quote_identifier(c.name) for c in definition.columns)
    source = qualified(definition.database, definition.name)
    key_idx = table.key_idx
    order = ", ".join(quote_identifier(table.names[i]) for i in key_idx)
    if not key_idx:
        skipped = 0 if bound is None else int(bound[0])
        return f"SELECT {cols} FROM {source} LIMIT %s OFFSET %s", (size, skipped), skipped
    if bound is None:
        return f"SELECT {cols} FROM {source} ORDER BY {order} LIMIT %s", (size,), 0
    marks = ", ".join(["%s"] * len(key_idx))
    return (
        f"SELECT {cols} FROM {source} WHERE ({order}) > ({marks}) ORDER BY {order} LIMIT %s",
        (*bound, size),
        0,
    )


@dataclass(frozen=True, slots=True)
class TextChunk:
    """Rows ``offset`` to ``offset + length`` of one snapshot query's result, as the server sent
    them (:class:`capture.mysql.result_set.TextResult`). Sliced like an Arrow table.

    :meth:`column` gives the raw text of a column whose vectorized encoder takes it
    (``raw``: integers and text, where PyMySQL's own decoding would be exactly that), else a
    :class:`_Prepared` column: the values :func:`snapshot_values` would give, made when read.

    Attributes:
        table: The captured table.
        result: The query's rows.
        offset: The first row of the chunk in ``result``.
        length: Rows in the chunk.
        skipped: Rows before ``result``'s first (a keyless table's resume ordinal).
        raw: Columns given as raw text.
    """

    table: MySqlTable
    result: TextResult
    offset: int
    length: int
    skipped: int
    raw: frozenset[int]

    @property
    def num_rows(self) -> int:
        """Rows in the chunk."""
        return self.length

    def column(self, i: int) -> pa.Array | _Prepared:
        """Column ``i``: its raw text if it is in ``raw``, else its prepared values."""
        if i in self.raw:
            return self.result.columns[i].slice(self.offset, self.length)
        return _Prepared(self, i)

    def slice(self, offset: int, length: int | None = None) -> TextChunk:
        """Rows ``offset`` to ``offset + length`` of the chunk."""
        rest = self.length - offset
        size = rest if length is None else min(length, rest)
        return TextChunk(
            self.table, self.result, self.offset + offset, size, self.skipped, self.raw
        )

    def driver_values(self, i: int) -> list[Any]:
        """Column ``i`` as PyMySQL returns it (before :func:`snapshot_values`)."""
        return self.result.values(i, self.offset, self.offset + self.length)

    def pairs(self) -> list[tuple[list[Any], list[Any]]]:
        """The rows as :func:`keyed_chunks` gives them: ``(row, key)``."""
        width = len(self.table.definition.columns)
        columns = [self.driver_values(i) for i in range(width)]
        key_idx = self.table.key_idx
        first = self.skipped + self.offset + 1
        return [
            (list(row), [row[i] for i in key_idx] if key_idx else [first + n])
            for n, row in enumerate(zip(*columns, strict=True))
        ]

    def last_key(self) -> list[Any]:
        """What resumes after the chunk's last row (its key, or its ordinal)."""
        last = self.offset + self.length - 1
        if not self.table.key_idx:
            return [self.skipped + last + 1]
        return [self.result.values(i, last, last + 1)[0] for i in self.table.key_idx]


@dataclass(frozen=True, slots=True)
class _Prepared:
    """A column of a :class:`TextChunk` through PyMySQL's decoding and :func:`snapshot_column`
    (the columnar loop's per-value fallback reads it with ``to_pylist``)."""

    chunk: TextChunk
    index: int

    def to_pylist(self) -> list[Any]:
        chunk = self.chunk
        return snapshot_column(chunk.table.definition, self.index, chunk.driver_values(self.index))


def _text_chunk(chunk: SnapshotChunk) -> TextChunk:
    rows = chunk.rows
    if not isinstance(rows, TextChunk):
        raise InternalError("capture.mysql.snapshot: expected a TextChunk")
    return rows


def unguarded_converter(convert: Any) -> Any:
    """The converter :func:`capture.mysql.types._guarded` wraps (it only names the column in
    the errors, which the columnar paths leave to the per-row one); ``convert`` itself when it
    is not wrapped."""
    code = getattr(convert, "__code__", None)
    if getattr(convert, "__qualname__", "") != _GUARD or code is None:
        return convert
    return convert.__closure__[code.co_freevars.index("convert")].cell_contents


_GUARD: Final = "_guarded.<locals>.run"
_TEXT_CONVERTER: Final = "_text.<locals>.convert"
"""The per-value converter of MySQL text columns (:func:`capture.mysql.types._text`): the value
itself when the driver returns text."""
_RAW_INTS: Final = frozenset({"int", "_integer.<locals>.unsigned"})
"""Converters of integer columns whose JSON is the decimal text (signed; UNSIGNED up to INT,
whose snapshot values are never negative)."""
_RAW_TEXTS: Final = frozenset(
    {
        _TEXT_CONVERTER,
        "_enum.<locals>.convert",
        "_set.<locals>.convert",
        "_json_type.<locals>.convert",
    }
)
"""Converters that return a text value as it is (text, ENUM, SET and JSON columns)."""
_AS_INT: Final = ("ascii", int)
"""PyMySQL's decoding of an integer column: ``int`` of the ASCII text."""
_AS_TEXT: Final = ("utf8", None)
"""PyMySQL's decoding of a text column on the snapshot connection (utf8mb4): UTF-8, no
converter."""


def _encoder(table: CapturedTable, i: int) -> tuple[Encoder | None, tuple[str, Any] | None]:
    """Column ``i``'s vectorized encoder (None: its values go through the converter, as a
    masked column's do), and the PyMySQL decoding its raw text must have for it."""
    if table.masker is not None and table.masker.covers(table.collection, table.names[i]):
        return None, None
    convert = unguarded_converter(table.types[i].convert)
    name = "int" if convert is int else str(getattr(convert, "__qualname__", ""))
    if name in _RAW_INTS:
        return _ints, _AS_INT
    if name in _RAW_TEXTS:
        return _texts, _AS_TEXT
    return None, None


def _raw_columns(table: MySqlTable, result: TextResult) -> frozenset[int]:
    """The columns a :class:`TextChunk` gives as raw text: those with a vectorized encoder,
    when PyMySQL would have decoded them exactly as that encoder reads the bytes (integers:
    ``int`` of the ASCII text; text: UTF-8, no converter); none when the result is not as wide
    as the table (the per-row path reports it)."""
    if len(result.converters) != len(table.types):
        return frozenset()
    return frozenset(
        i
        for i, decoding in enumerate(result.converters)
        if (wanted := _encoder(table, i)[1]) is not None and decoding == wanted
    )


def _raw(column: Any) -> pa.Array:
    if not isinstance(column, pa.Array):
        # PyMySQL would have decoded this column otherwise: the chunk goes row by row.
        raise TypeError("the column is not given as its raw text")
    return column.cast(pa.string())


def _ints(column: Any) -> pa.Array:
    return _raw(column).cast(pa.int64()).cast(pa.string())


def _texts(column: Any) -> pa.Array:
    return json_strings(_raw(column))


_position = MySqlPosition._new
