"""The columnar snapshot: whole chunks of rows converted column by column into bronze.

The per-row snapshot (:meth:`capture.database_source.DatabaseSource._read_snapshot`) builds one
dict, one record, one classified event and one JSON document per row; that is most of its cost.
An agent that can read a chunk of a table in its database's bulk form (PostgreSQL ``COPY``, a
MySQL result set transposed) mixes in :class:`ColumnarSnapshot` and implements its hooks. Each
chunk is an Arrow table of the table's columns (in table order, then any resume column the
agent needs); per value column the agent names a vectorized JSON encoder
(:mod:`bronze.columnar`) or none, and the column then goes through its per-value converter, the
column masks and ``orjson`` (the fallback, per column, never per table). The envelope text is
assembled with Arrow's string kernels, byte for byte what the per-row path writes (a test
compares the two paths on the type-fidelity tables).

What stays per row: a chunk holding a value the converters reject, or one with no Connect
representation (contract C1), goes through the per-row path whole, which quarantines the bad
row or writes its ``__medallion.unrepresentable`` header exactly as before.

Offsets and positions are the per-row path's: the snapshot's ``seq`` counts every row, ``after``
is the last landed row's key, and a batch may end inside a chunk (the rest waits for the next
batch, in memory; a restart re-reads it from the offset).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

import numpy as np
import orjson
import pyarrow as pa

from bronze import schema as S
from bronze.batch import ROW_SCHEMA, BatchBuilder
from bronze.columnar import json_object, json_texts, positions
from bronze.envelope import ChangeEvent, Op, built_data_event
from bronze.position_base import SEQ_WIDTH
from bronze.positions import Position
from capture.captured_table import CapturedTable
from capture.change_records import data_record
from capture.database_source import DatabaseSource, with_last
from pipeline.errors import InternalError, PipelineError

__all__ = [
    "ChunkCursor",
    "ChunkRows",
    "ColumnarSnapshot",
    "Encoder",
    "SnapshotChunk",
    "data_rows",
    "encode_chunk",
]

logger = logging.getLogger(__name__)

Encoder = Callable[[Any], pa.Array]
"""A column's vectorized JSON encoder: the column as read (an Arrow array, or a driver's values
with ``to_pylist``) -> the JSON text of each converted value (null where the value is
NULL)."""

_TS_TYPE = S.EVENTS_SCHEMA.field(S.CAPTURE_TS).type
_OP_READ = Op.READ.value


class _NeedsRows(Exception):  # noqa: N818 - control flow, never leaves this module
    """A value of the chunk needs the per-row path (it does not convert, or has no
    representation)."""


class ChunkRows(Protocol):
    """Rows of a chunk in an agent's own form (MySQL's text result set): read column by column
    (an Arrow array for a column an encoder takes, else anything with ``to_pylist``), sliced
    like an Arrow table."""

    @property
    def num_rows(self) -> int:
        """Rows in the chunk."""

    def column(self, i: int) -> Any:
        """Column ``i``."""

    def slice(self, offset: int, length: int | None = None) -> ChunkRows:
        """Rows ``offset`` to ``offset + length``."""


@dataclass(frozen=True, slots=True)
class SnapshotChunk:
    """Rows of one table read in one piece.

    Attributes:
        index: The table's index in the snapshot's table list.
        table: The captured table.
        rows: Its columns in table order, then whatever the agent needs to resume after a row.
    """

    index: int
    table: CapturedTable
    rows: pa.Table | ChunkRows


class ChunkCursor(Iterator[tuple[SnapshotChunk, bool]]):
    """The chunks of a snapshot, cut to the rows a batch still takes (``limit``); a chunk a batch
    ended inside is continued by the next one. Items are ``(chunk, final)``, ``final`` True on the
    snapshot's very last row's piece."""

    def __init__(self, chunks: Iterator[SnapshotChunk]) -> None:
        self._chunks = with_last(iter((c,) for c in chunks))
        self._pending: tuple[SnapshotChunk, bool] | None = None
        self.limit = 0

    def __next__(self) -> tuple[SnapshotChunk, bool]:
        if self.limit <= 0:
            raise StopIteration
        if self._pending is None:
            chunk, last = next(self._chunks)
            self._pending = (chunk, last)
        chunk, last = self._pending
        n = chunk.rows.num_rows
        if n <= self.limit:
            self._pending = None
            self.limit -= n
            return chunk, last
        head = SnapshotChunk(chunk.index, chunk.table, chunk.rows.slice(0, self.limit))
        self._pending = (
            SnapshotChunk(chunk.index, chunk.table, chunk.rows.slice(self.limit)),
            last,
        )
        self.limit = 0
        return head, False


def encode_chunk(
    table: CapturedTable, encoders: Sequence[Encoder | None], rows: pa.Table | ChunkRows
) -> dict[int, pa.Array]:
    """The JSON text of every value of the row image's columns (and so the key's).

    Args:
        table: The captured table.
        encoders: One per column of ``table`` (None: the per-value fallback).
        rows: The chunk, its columns in table order.

    Returns:
        The column index -> its values' JSON (null for NULL).

    Raises:
        _NeedsRows: A value does not convert or has no representation.
    """
    fragments: dict[int, pa.Array] = {}
    for i in table.value_idx:
        encoder = encoders[i]
        column = rows.column(i)
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if encoder is None:
            fragments[i] = _fallback(table, i, column)
            continue
        try:
            fragments[i] = encoder(column)
        except (pa.ArrowException, ValueError, TypeError, OverflowError) as exc:
            raise _NeedsRows(f"{table.collection}.{table.names[i]}") from exc
    return fragments


def row_json(
    table: CapturedTable, fragments: Mapping[int, pa.Array], n: int, **wrap: str
) -> tuple[pa.Array, pa.Array | None]:
    """The JSON objects of ``n`` row images and of their keys (None: a keyless table) from
    :func:`encode_chunk`'s fragments; ``wrap``: :func:`bronze.columnar.json_object`'s ``head``
    and ``tail`` around each image (a whole envelope)."""
    names = table.names
    image = json_object(
        [names[i] for i in table.value_idx], [fragments[i] for i in table.value_idx], n, **wrap
    )
    key = (
        json_object([names[i] for i in table.key_idx], [fragments[i] for i in table.key_idx], n)
        if table.key_idx
        else None
    )
    return image, key


def _fallback(table: CapturedTable, i: int, column: pa.Array | list[Any]) -> pa.Array:
    """A column through its per-value converter and the column masks (what
    :meth:`CapturedTable.row` does to it), as JSON."""
    convert = table.converters[i]
    name, collection = table.names[i], table.collection
    masker = (
        table.masker if table.masker is not None and table.masker.covers(collection, name) else None
    )
    out: list[Any] = []
    append = out.append
    try:
        for value in column if isinstance(column, list) else column.to_pylist():
            if value is None:
                append(None)
                continue
            converted = convert(value)
            if masker is not None:
                masked = masker.apply(collection, {name: converted})
                if masked is not None:
                    converted = masked[name]
            append(converted)
        return json_texts(out)
    except (ValueError, ArithmeticError, IndexError, TypeError, PipelineError) as exc:
        raise _NeedsRows(f"{collection}.{name}") from exc


class ColumnarSnapshot(DatabaseSource):
    """The columnar snapshot loop (see the module docstring); agents implement the hooks."""

    COLUMNAR_SNAPSHOT: ClassVar[bool] = True
    """Read the snapshot in chunks, column by column; False: the per-row loop (an engine whose
    server or wire peer lacks the bulk read)."""

    _encoders: dict[str, tuple[Encoder | None, ...]] | None = None
    """Each table's encoders, by topic (set on first use: the agents' constructors differ)."""
    _chunk_events: dict[tuple[str, bool], ChangeEvent] | None = None
    """The event fields of each table's rows, by topic and ``last``."""

    # --- hooks ---------------------------------------------------------------------------------
    def _columnar_ready(self) -> bool:
        """Whether this run can take the columnar path (a hook: PostgreSQL checks the client
        encoding)."""
        return self.COLUMNAR_SNAPSHOT

    def _snapshot_chunks(self) -> Iterator[SnapshotChunk]:
        """The chunks of the remaining tables, in key order, from ``snapshot.index`` /
        ``snapshot.after``; no empty chunk."""
        raise NotImplementedError(f"{type(self).__name__} reads no columnar snapshot")

    def _column_encoder(self, table: CapturedTable, i: int) -> Encoder | None:
        """The vectorized JSON encoder of column ``i``, or None for the per-value fallback."""
        return None

    def _chunk_after(self, chunk: SnapshotChunk) -> list[Any]:
        """``snapshot.after`` once the chunk's last row is landed (its key, JSON form)."""
        raise NotImplementedError(f"{type(self).__name__} reads no columnar snapshot")

    def _chunk_rows(self, chunk: SnapshotChunk) -> list[Any]:
        """The chunk's rows as :meth:`_snapshot_decode` takes them (the per-row path)."""
        raise NotImplementedError(f"{type(self).__name__} reads no columnar snapshot")

    # --- the loop ------------------------------------------------------------------------------
    def _read_snapshot(self, builder: BatchBuilder, max_events: int, now: dt.datetime) -> bool:
        """:meth:`DatabaseSource._read_snapshot`, a chunk at a time."""
        if not self._columnar_ready():
            return super()._read_snapshot(builder, max_events, now)
        snap = self._snapshot
        if snap is None:
            raise PipelineError(f"source {self.name}: snapshot phase without snapshot progress")
        if self._snap_conn is None:
            self._resume_snapshot()
        cursor = self._snap_rows
        if not isinstance(cursor, ChunkCursor):
            cursor = ChunkCursor(self._snapshot_chunks())
            self._snap_rows = cursor
        cursor.limit = max_events
        collection = None
        for chunk, final in cursor:
            self._land_chunk(builder, chunk, final, now)
            snap.index = chunk.index
            collection = chunk.table.collection
            if final:
                self._snap_rows = None
                self._finish_snapshot()
                return True
        if cursor.limit > 0:  # the chunks ran out: the snapshot had no rows left
            self._snap_rows = None
            self._finish_snapshot()
            return True
        self._snapshot_progress(snap.seq, snap.index, len(snap.tables), str(collection))
        return False

    def _land_chunk(
        self, builder: BatchBuilder, chunk: SnapshotChunk, final: bool, now: dt.datetime
    ) -> None:
        """Land ``chunk`` (its last row the snapshot's last when ``final``)."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.columnar_snapshot: expected snap is not None")
        table, rows = chunk.table, chunk.rows
        if not _plain_images(table):
            self._land_rows(builder, chunk, final, now)
            return
        if self._encoders is None:
            self._encoders = {}
        encoders = self._encoders.get(table.topic)
        if encoders is None or len(encoders) != len(table.names):
            encoders = tuple(self._column_encoder(table, i) for i in range(len(table.names)))
            self._encoders[table.topic] = encoders
            slow = [table.names[i] for i in table.value_idx if encoders[i] is None]
            if slow:
                logger.info(
                    "source %s: %s: columns converted value by value (no vectorized form): %s",
                    self.name,
                    table.collection,
                    ", ".join(slow),
                )
        try:
            fragments = encode_chunk(table, encoders, rows)
        except _NeedsRows as exc:
            logger.debug(
                "source %s: chunk of %s goes row by row (%s)", self.name, table.collection, exc
            )
            self._land_rows(builder, chunk, final, now)
            return
        n = rows.num_rows
        if final and n > 1:
            self._add_chunk(builder, table, _sliced(fragments, 0, n - 1), n - 1, False, now)
            self._add_chunk(builder, table, _sliced(fragments, n - 1, 1), 1, True, now)
        else:
            self._add_chunk(builder, table, fragments, n, final, now)
        snap.after = self._chunk_after(chunk)

    def _land_rows(
        self, builder: BatchBuilder, chunk: SnapshotChunk, final: bool, now: dt.datetime
    ) -> None:
        """The per-row path for one chunk (a value in it needs care)."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.columnar_snapshot: expected snap is not None")
        table = chunk.table
        rows = self._chunk_rows(chunk)
        sources = {last: self._snapshot_source(table, last) for last in (False, True)}
        for n, row in enumerate(rows, start=1):
            last = final and n == len(rows)
            position = self._snapshot_position()
            snap.after, values, raw = self._snapshot_decode(table, row)
            self._snapshot_row(builder, table, values, sources[last], position, now, raw)
            self._last_position = position

    def _chunk_event(self, table: CapturedTable, source: dict[str, Any], last: bool) -> ChangeEvent:
        """A classified event of the table's rows: the fields every row of the chunk shares
        (derived by the same code as the per-row path's)."""
        if self._chunk_events is None:
            self._chunk_events = {}
        event = self._chunk_events.get((table.topic, last))
        if event is None:
            record = data_record(_OP_READ, source, None, {}, None, None, table)
            event = self._chunk_events[(table.topic, last)] = built_data_event(record)
        return event

    def _add_chunk(
        self,
        builder: BatchBuilder,
        table: CapturedTable,
        fragments: dict[int, pa.Array],
        n: int,
        last: bool,
        now: dt.datetime,
    ) -> None:
        """Add ``n`` rows whose values' JSON is ``fragments`` (one source block for them all)."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.columnar_snapshot: expected snap is not None")
        source = self._snapshot_source(table, last)
        first = self._snapshot_position()
        start = first.seq
        if start + n > 2 ** (8 * SEQ_WIDTH):
            raise PipelineError(
                f"source {self.name}: snapshot sequence {start + n} beyond the position's range"
            )
        snap.seq = start + n - 1
        self._last_position = self._snapshot_position()
        self._add_image_rows(
            builder,
            table,
            fragments,
            n,
            event=self._chunk_event(table, source, last),
            source=source,
            first=first,
            origin=table.snapshot_origin,
            now=now,
        )

    def _add_image_rows(
        self,
        builder: BatchBuilder,
        table: CapturedTable,
        fragments: Mapping[int, pa.Array],
        n: int,
        *,
        event: ChangeEvent,
        source: dict[str, Any],
        first: Position,
        origin: str,
        now: dt.datetime,
    ) -> None:
        """Add ``n`` ``op r`` rows of ``table`` whose values' JSON is ``fragments``, sharing the
        ``source`` block and ``event``'s fields, at ``first`` and the ``n - 1`` sequences after
        it: byte for byte what :meth:`DatabaseSource._add` writes for each row's record."""
        ts_ms = time.time_ns() // 1_000_000
        value, key = row_json(
            table,
            fragments,
            n,
            head='{"before":null,"after":',
            tail=f',"source":{orjson.dumps(source).decode()},"op":"{_OP_READ}","ts_ms":{ts_ms}}}',
        )
        start = first.seq
        key_sid = None if table.key_schema is None else table.key_schema_id
        self._register(builder, key_sid, table.key_schema)
        self._register(builder, table.envelope_schema_id, table.envelope_schema)
        per_row = {
            S.OP: pa.repeat(pa.scalar(_OP_READ, pa.string()), n),
            S.POSITION: positions(first.base(), start, n),
            S.SEQ: pa.array(np.arange(start, start + n, dtype=np.int64)),
            S.TX_ID: pa.nulls(n, pa.string()),
            S.SOURCE_TS_MS: pa.repeat(pa.scalar(event.source_ts_ms, pa.int64()), n),
            S.ORIGIN: pa.repeat(pa.scalar(origin, pa.string()), n),
        }
        builder.add_columns(
            data_rows(table, event, self.partition, (key, value), (ts_ms, now), per_row)
        )


def data_rows(
    table: CapturedTable,
    event: ChangeEvent,
    partition: str | None,
    json: tuple[pa.Array | None, pa.Array],
    times: tuple[int, dt.datetime],
    per_row: Mapping[str, pa.Array],
) -> pa.Table:
    """Bronze rows (:data:`bronze.batch.ROW_SCHEMA`) of data events of ``table``.

    Args:
        table: Their table.
        event: A classified event of the table: the fields the rows share.
        partition: The agent's source partition.
        json: ``(key, value)``: each row's key JSON (None: a keyless table) and envelope JSON.
        times: ``(ts_ms, capture time)`` of the rows.
        per_row: The columns that vary by row: ``op``, ``position``, ``seq``, ``tx_id``,
            ``source_ts_ms``, ``origin``.
    """
    key, value = json
    ts_ms, now = times
    n = len(value)
    key_sid = None if table.key_schema is None else table.key_schema_id

    def same(value: Any, type_: pa.DataType) -> pa.Array:
        return pa.repeat(pa.scalar(value, type_), n)

    columns = {
        S.CONNECTOR: same(event.connector, pa.string()),
        S.SOURCE_PARTITION: same(partition, pa.string()),
        S.COLLECTION: same(event.collection, pa.string()),
        S.TOPIC: same(table.topic, pa.string()),
        S.KIND: same(event.kind.value, pa.string()),
        S.TX_ORDER: pa.nulls(n, pa.int64()),
        S.TX_COLLECTION_ORDER: pa.nulls(n, pa.int64()),
        S.TX_STATUS: same(event.tx_status, pa.string()),
        S.TX_EVENT_COUNT: same(event.tx_event_count, pa.int64()),
        S.SNAPSHOT: same(event.snapshot, pa.string()),
        S.KEY_JSON: pa.nulls(n, pa.string()) if key is None else key,
        S.VALUE_JSON: value,
        S.KEY_SCHEMA_ID: same(key_sid, pa.string()),
        S.VALUE_SCHEMA_ID: same(table.envelope_schema_id, pa.string()),
        S.HEADERS: pa.nulls(n, S.HEADER_TYPE),
        S.EVENT_TS_MS: same(ts_ms, pa.int64()),
        S.CAPTURE_TS: same(now, _TS_TYPE),
        **per_row,
    }
    return pa.Table.from_pydict(
        {name: columns[name] for name in ROW_SCHEMA.names}, schema=ROW_SCHEMA
    )


_IMAGE_BUILDERS = ("row", "row_and_key", "key", "_fast", "_careful", "_masked_row")


def _plain_images(table: CapturedTable) -> bool:
    """Whether ``table`` builds its images as :class:`CapturedTable` does (the columnar path
    writes those); a table class with images of its own (YugabyteDB's wrapped columns) does not."""
    cls = type(table)
    return all(getattr(cls, m) is getattr(CapturedTable, m) for m in _IMAGE_BUILDERS)


def _sliced(fragments: dict[int, pa.Array], offset: int, length: int) -> dict[int, pa.Array]:
    return {i: f.slice(offset, length) for i, f in fragments.items()}
