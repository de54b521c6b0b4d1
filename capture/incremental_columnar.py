"""Incremental-snapshot chunks read and emitted column by column: :class:`ColumnarIncremental`.

The DBLog window (:mod:`capture.incremental_snapshot`) is unchanged: a chunk is read between its
low and high watermarks, every change the stream reads for one of its keys inside the window
removes that key, and at the high watermark the rows left are emitted as ``op r`` at the
watermark's place in the log. What changes is how the chunk is held: instead of one converted
image per row, the chunk's columns are encoded to JSON at once (the initial snapshot's encoders,
:mod:`capture.columnar_snapshot`), each row's record key (:func:`record_key`'s exact bytes,
built from the key columns' JSON in sorted name order) maps to its row index, and the rows left
at the high watermark are taken from the columns and assembled with the snapshot's string
kernels. The bronze rows are byte for byte the per-row path's
(``tests/integration/test_incremental_columnar.py``).

The engine's chunk read (:meth:`IncrementalSnapshots._incremental_read`, the one hook) returns
:class:`ColumnRows` when it read the chunk in bulk. A chunk with a value that does not convert or
has no representation (C1) is held row by row whole (its bad rows are quarantined, its C1 values
flagged, as before), and so is every chunk of a table class with images of its own, or one the
engine read row by row.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Iterator, Sequence
from typing import Any, ClassVar, overload

import pyarrow as pa

from bronze.batch import BatchBuilder
from bronze.columnar import json_object
from bronze.envelope import Op, built_data_event
from bronze.positions import Position
from capture.captured_table import CapturedTable
from capture.change_records import data_record
from capture.columnar_snapshot import (
    ColumnarSnapshot,
    SnapshotChunk,
    _NeedsRows,
    _plain_images,
    encode_chunk,
)
from capture.incremental_snapshot import ChunkWindow, IncrementalSnapshots
from pipeline.errors import InternalError

__all__ = ["ColumnRows", "ColumnarIncremental"]

logger = logging.getLogger(__name__)

_OP_READ = Op.READ.value


class ColumnRows(Sequence[list[Any]]):
    """An incremental chunk an engine read in bulk (:meth:`_incremental_read`'s result): its
    columns in table order as the initial snapshot's chunks hold them, and, as a sequence, the
    same rows one list each (what the per-row path takes)."""

    def __init__(self, columns: pa.Table) -> None:
        self.columns = columns
        self._as_rows: list[list[Any]] | None = None

    def __len__(self) -> int:
        return int(self.columns.num_rows)

    @overload
    def __getitem__(self, index: int) -> list[Any]: ...

    @overload
    def __getitem__(self, index: slice) -> list[list[Any]]: ...

    def __getitem__(self, index: int | slice) -> list[Any] | list[list[Any]]:
        return self._rows()[index]

    def __iter__(self) -> Iterator[list[Any]]:
        return iter(self._rows())

    def _rows(self) -> list[list[Any]]:
        if self._as_rows is None:
            values = self.columns.to_pydict().values()
            self._as_rows = [list(row) for row in zip(*values, strict=True)]
        return self._as_rows


class ColumnarIncremental(ColumnarSnapshot, IncrementalSnapshots):
    """Incremental-snapshot chunks through the columnar path (see the module docstring): the
    engine's :meth:`_incremental_read` returns :class:`ColumnRows` when it read the chunk in
    bulk (it decides, e.g. by :attr:`COLUMNAR_INCREMENTAL` and the connection's encoding)."""

    COLUMNAR_INCREMENTAL: ClassVar[bool] = True
    """Read incremental-snapshot chunks column by column; False: row by row. Only when
    :attr:`COLUMNAR_SNAPSHOT` holds too: an engine whose bulk read is not verified (YugabyteDB)
    reads both snapshots row by row."""

    # --- the window ----------------------------------------------------------------------------
    def _read_window(
        self,
        chunk_id: str,
        table: CapturedTable,
        after: list[Any] | None,
        until: list[Any],
        condition: str | None,
    ) -> ChunkWindow | None:
        rows = self._incremental_read(table, after, until, condition, self.signals.chunk_size)
        if not rows:
            return None
        if not (
            isinstance(rows, ColumnRows)
            and _plain_images(table)
            and table.key_idx
            and set(table.key_idx) <= set(table.value_idx)
        ):
            return self._buffer(chunk_id, table, rows)
        n = len(rows)
        chunk = SnapshotChunk(-1, table, rows.columns)
        encoders = tuple(self._column_encoder(table, i) for i in range(len(table.names)))
        try:
            fragments = encode_chunk(table, encoders, rows.columns)
        except _NeedsRows as exc:
            logger.debug(
                "source %s: incremental chunk of %s goes row by row (%s)",
                self.name,
                table.collection,
                exc,
            )
            return self._buffer(chunk_id, table, rows)
        names = table.names
        ordered = sorted(table.key_idx, key=lambda i: names[i])  # record_key sorts its keys
        keys = json_object([names[i] for i in ordered], [fragments[i] for i in ordered], n)
        index: dict[bytes, int] = {}
        for i, key in enumerate(keys.to_pylist()):
            index[key.encode()] = i  # a repeated key keeps its first place, its last row
        return ChunkWindow(
            chunk_id,
            table,
            index,
            [],
            self._chunk_after(chunk),
            n,
            fragments=fragments,
        )

    def _emit_columns(
        self,
        builder: BatchBuilder,
        window: ChunkWindow,
        source: dict[str, Any],
        positions: Sequence[Position],
        origin: str,
        now: dt.datetime,
    ) -> None:
        if window.fragments is None:
            raise InternalError("capture.incremental_columnar: expected a columnar window")
        n = len(window.rows)
        if n == 0:
            return
        first, last = positions[0], positions[-1]
        if last.seq != first.seq + n - 1 or last.base() != first.base():
            raise InternalError("capture.incremental_columnar: positions are not one run")
        table = window.table
        take = pa.array(list(window.rows.values()), pa.int64())
        fragments = {i: column.take(take) for i, column in window.fragments.items()}
        record = data_record(_OP_READ, source, None, {}, None, None, table)
        self._add_image_rows(
            builder,
            table,
            fragments,
            n,
            event=built_data_event(record),
            source=source,
            first=first,
            origin=origin,
            now=now,
        )
