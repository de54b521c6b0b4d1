"""The binlog stream's columnar road: a read's plain inserts and updates held, landed per table.

Most of a binlog is row events of captured tables that :class:`capture.mysql.binlog.BinlogReader`
decoded into value lists (``event.images``): inserts and updates. The stream reader
(:mod:`capture.mysql.stream`) does per such event only what the order and the offsets need (the
transaction's counts, its schemas) and holds the event here; the held events are landed per
table and per column: each column's values become one Arrow array (ints, text and
microsecond DATETIMEs vectorized; every other type, and a masked column, through its per-value
converter and the column masks, as the snapshot's columnar loop does:
:func:`capture.columnar_snapshot.encode_chunk`), and the envelopes, keys and bronze columns are
assembled with Arrow's string kernels, byte for byte what
:class:`capture.change_records.RowAppender` writes for each row
(``tests/integration/test_mysql_stream_columns.py`` lands one binlog through both roads and
compares the rows).

Order: the held rows are landed in arrival order, and before anything else reaches the batch
(the reader lands them before any other event's records, before the batch's size is checked
and when the read ends), so positions, transaction boundaries and offsets are the per-event
road's. The rows of a table whose held values need care (a value that does not convert or has
no representation, contract C1; an update that moved the key; an image the binlog reader's
corrections apply to and reject) take the per-event road, in their place: the reader's
``replay`` lands each such event as before (quarantine, C1 header, key-move records exactly as
they were).

The ``source`` block's JSON is a template cut from what ``StreamReader._source`` writes, with
marker values in its varying fields (``ts_ms``, ``server_id``, ``gtid``, ``file``, ``pos``,
``row``, ``thread``, ``query``).
"""

from __future__ import annotations

import datetime as dt
import importlib
import itertools
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from bronze import schema as S
from bronze.batch import BatchBuilder
from bronze.columnar import JSON_NULL, fill_template, json_strings, json_texts
from bronze.envelope import ChangeEvent, built_data_event
from bronze.position_base import Phase
from capture.change_records import data_record
from capture.columnar_snapshot import Encoder, _NeedsRows, data_rows, encode_chunk, row_json
from capture.mysql.agent import MySqlTable, MySqlTx
from capture.mysql.position import MySqlPosition
from capture.mysql.snapshot import unguarded_converter
from capture.mysql.types import _epoch_micros, stream_fixes, stream_row
from pipeline.errors import InternalError, PipelineError

__all__ = [
    "HeldEvent",
    "HeldRows",
    "HeldTable",
    "SourceTemplate",
    "stream_encoder",
    "warm_pandas_import",
]

logger = logging.getLogger(__name__)


class HeldEvent(NamedTuple):
    """One held row event and what its rows' records need, as the reader saw it.

    Attributes:
        event: The row event (an insert or update :class:`BinlogReader` decoded).
        images: Its row images (``event.images``).
        table: The captured table.
        tx: Its transaction.
        where: ``(event start, origin, ts_ms, file number)`` (``StreamReader._rows``'s).
        file: The binlog file.
        update: An update (before and after images alternate).
        rows: Its rows.
    """

    event: Any
    images: list[tuple[list[Any], dict[int, str] | None]]
    table: MySqlTable
    tx: MySqlTx
    where: tuple[int, str, int, int]
    file: str
    update: bool
    rows: int


Replay = Callable[[BatchBuilder, HeldEvent], None]
"""Lands one held event through the per-event road (a value of its table needs it)."""

SourceOf = Callable[..., dict[str, Any]]
"""``StreamReader._source(table, pos, row, gtid, ts_ms, thread, query, server_id)``."""


# --- pyarrow's pandas import -------------------------------------------------------------------

_WARMED: list[threading.Thread] = []


def warm_pandas_import() -> None:
    """Start, once per process, the import of pandas that pyarrow makes on its first conversion
    of Python objects (0.27 CPU-s), on a thread of its own: the first landing of held rows
    would pay it on the agent's thread, the one that bounds the stream's rate (the commit
    thread's first write paid it before this road). A landing that comes first waits for it
    (Python's import lock)."""
    if _WARMED or "pandas" in sys.modules:
        return
    thread = threading.Thread(
        target=_import_pandas, name="medallion-warm-pandas-import", daemon=True
    )
    _WARMED.append(thread)
    thread.start()


def _import_pandas() -> None:
    try:
        importlib.import_module("pandas")
    except ImportError:  # pyarrow then runs without it, as everywhere else
        logger.debug("capture.mysql.stream_columns: pandas is not installed")


# --- the source block ---------------------------------------------------------------------------

_INT_MARKS: Final = {
    "ts_ms": 9_000_000_000_000_000_011,
    "server_id": 9_000_000_000_000_000_012,
    "pos": 9_000_000_000_000_000_013,
    "row": 9_000_000_000_000_000_014,
    "thread": 9_000_000_000_000_000_015,
}
"""Marker values no real field holds (19 digits), to cut the ``source`` template at."""
_TEXT_MARKS: Final = {
    "gtid": "@medallion-slot-gtid@",
    "file": "@medallion-slot-file@",
    "query": "@medallion-slot-query@",
}
_SLOT_OF: Final = {
    **{str(v): k for k, v in _INT_MARKS.items()},
    **{f'"{v}"': k for k, v in _TEXT_MARKS.items()},
}
_SLOT_RE: Final = re.compile("|".join(re.escape(text) for text in _SLOT_OF))
_REQUIRED: Final = frozenset({"ts_ms", "server_id", "gtid", "file", "pos", "row", "thread"})


@dataclass(frozen=True, slots=True)
class SourceTemplate:
    """A table's ``source`` block as JSON text with slots for its varying fields.

    Attributes:
        parts: The constant text around the slots (one more than ``slots``).
        slots: Each slot's field (``ts_ms``, ``server_id``, ``gtid``, ``file``, ``pos``,
            ``row``, ``thread``, ``query``).
    """

    parts: tuple[str, ...]
    slots: tuple[str, ...]

    @classmethod
    def cut(cls, source: SourceOf, table: MySqlTable) -> SourceTemplate:
        """The template of what ``source`` writes for ``table``, cut at the markers.

        Raises:
            ValueError: The block has no slot for every varying field, or one twice (a name
                that holds a marker's text).
        """
        m = _INT_MARKS
        block = source(
            table,
            m["pos"],
            m["row"],
            _TEXT_MARKS["gtid"],
            m["ts_ms"],
            m["thread"],
            _TEXT_MARKS["query"],
            m["server_id"],
        )
        block["file"] = _TEXT_MARKS["file"]  # the reader writes its current file there
        text = orjson.dumps(block).decode()
        pieces = _SLOT_RE.split(text)
        found = _SLOT_RE.findall(text)
        slots = tuple(_SLOT_OF[f] for f in found)
        if len(set(slots)) != len(slots) or not _REQUIRED <= set(slots):
            raise ValueError(f"the source block has no single slot for every field: {text}")
        return cls(tuple(pieces), slots)

    def fill(self, values: dict[str, pa.Array]) -> pa.Array:
        """The ``source`` JSON of each row from each slot's JSON text column."""
        return fill_template(self.parts, self.slots, values)


# --- positions ----------------------------------------------------------------------------------

_PROBE: Final = MySqlPosition._new(
    0x01020304, 0x1112131415161718, Phase.STREAM, 0x21222324, 7, None, None
)
"""A position encoded by its own class: the layout below is checked against it at import."""
_LAYOUT: Final = np.dtype(
    [
        ("version", "u1"),
        ("file_number", ">u4"),
        ("pos", ">u8"),
        ("phase", "u1"),
        ("row", ">u4"),
        ("seq", ">u4"),
    ]
)
_PROBE_BYTES: Final = _PROBE.encode()
if (
    _LAYOUT.itemsize != len(_PROBE_BYTES)
    or _PROBE_BYTES[1:5] != (0x01020304).to_bytes(4, "big")
    or _PROBE_BYTES[5:13] != (0x1112131415161718).to_bytes(8, "big")
    or _PROBE_BYTES[14:18] != (0x21222324).to_bytes(4, "big")
    or _PROBE_BYTES[18:] != (7).to_bytes(4, "big")
):  # pragma: no cover - a change of MySqlPosition's layout
    raise InternalError("capture.mysql.stream_columns: MySqlPosition's layout changed")


def encoded_positions(
    file_numbers: np.ndarray[Any, Any], starts: np.ndarray[Any, Any], rows: np.ndarray[Any, Any]
) -> pa.Array:
    """``MySqlPosition(file number, start, STREAM, row, 0).encode()`` of each row, at once."""
    n = len(rows)
    packed = np.zeros(n, _LAYOUT)
    packed["version"] = _PROBE_BYTES[0]
    packed["file_number"] = file_numbers
    packed["pos"] = starts
    packed["phase"] = _PROBE_BYTES[13]
    packed["row"] = rows
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(_LAYOUT.itemsize), n, [None, pa.py_buffer(packed.tobytes())]
    )
    return fixed.cast(pa.binary())


# --- values -------------------------------------------------------------------------------------


def _decimal(values: Sequence[int | None]) -> pa.Array:
    """Decimal text of each int (null stays null)."""
    return pc.cast(pa.array(values, pa.int64()), pa.string())


def _json_text_of(values: Sequence[str | None]) -> pa.Array:
    """JSON string literal of each text, ``null`` for None."""
    return pc.fill_null(json_strings(pa.array(values, pa.string())), JSON_NULL)


def _per_value(convert: Callable[[Any], Any], values: Sequence[Any], where: str) -> pa.Array:
    """The converter's JSON of each value (the road of a column whose values are not all of
    the vectorized kind)."""
    try:
        return json_texts([None if v is None else convert(v) for v in values])
    except PipelineError as exc:  # the converter's ValueConversionError: the table replays
        raise ValueError(f"{where}: {exc}") from exc


def _vectorized(kind: str, values: Sequence[Any]) -> pa.Array | None:
    """The JSON text of ``values`` when every one is of the vectorized kind (or None), else
    None."""
    try:
        column = pa.array(values)
    except (pa.ArrowException, ValueError, TypeError, OverflowError):
        return None
    kind_of = column.type
    if pa.types.is_null(kind_of):
        return pa.nulls(len(column), pa.string())
    if kind == "int":
        if kind_of == pa.int64() or kind_of == pa.uint64():
            return column.cast(pa.string())
        return None
    if kind == "unsigned":
        if kind_of != pa.int64():
            return None
        low = pc.min(column).as_py()
        return column.cast(pa.string()) if low is None or low >= 0 else None
    if kind == "text":
        return json_strings(column) if kind_of == pa.string() else None
    if kind == "micros":
        if kind_of == pa.timestamp("us"):
            return column.cast(pa.int64()).cast(pa.string())
        return None
    raise InternalError(f"capture.mysql.stream_columns: unknown column kind {kind!r}")


_KINDS: Final = {
    "int": "int",
    "_integer.<locals>.unsigned": "unsigned",
    "_text.<locals>.convert": "text",
    "_enum.<locals>.convert": "text",
    "_set.<locals>.convert": "text",
    "_json_type.<locals>.convert": "text",
}
"""Converters whose JSON is vectorized when the values are of their plain kind: signed
integers (the value), UNSIGNED integers up to INT (the value, never negative when read with
the binlog's signedness), and text, ENUM, SET and JSON columns (a text value as it is)."""


def stream_encoder(table: MySqlTable, i: int) -> Encoder | None:
    """Column ``i``'s encoder of held values (a list of the binlog reader's values, corrected),
    or None for :func:`encode_chunk`'s per-value fallback (converter and masks)."""
    if table.masker is not None and table.masker.covers(table.collection, table.names[i]):
        return None
    convert = unguarded_converter(table.types[i].convert)
    if convert is _epoch_micros:
        kind: str | None = "micros"
    else:
        kind = _KINDS.get("int" if convert is int else str(getattr(convert, "__qualname__", "")))
    if kind is None:
        return None
    guarded = table.converters[i]
    where = f"{table.collection}.{table.names[i]}"

    def encode(values: Sequence[Any]) -> pa.Array:
        out = _vectorized(kind, values)
        return _per_value(guarded, values, where) if out is None else out

    return encode


class _Columns:
    """Held values, column by column (what :func:`encode_chunk` reads)."""

    __slots__ = ("_columns",)

    def __init__(self, columns: Sequence[Sequence[Any]]) -> None:
        self._columns = columns

    @property
    def num_rows(self) -> int:
        return len(self._columns[0]) if self._columns else 0

    def column(self, i: int) -> list[Any]:
        return list(self._columns[i])

    def slice(self, offset: int, length: int | None = None) -> _Columns:  # pragma: no cover
        raise InternalError("capture.mysql.stream_columns: held columns are never sliced")


def _values(table: MySqlTable, images: list[tuple[list[Any], dict[int, str] | None]]) -> _Columns:
    """The images' values (after the binlog reader's corrections), column by column.

    Raises:
        _NeedsRows: An image the corrections reject, or not as wide as the table.
    """
    definition = table.definition
    width = len(definition.columns)
    rows, reasons = zip(*images, strict=True)
    if stream_fixes(definition) or reasons.count(None) != len(reasons):
        try:
            rows = tuple(stream_row(definition, v, r) for v, r in images)
        except PipelineError as exc:
            raise _NeedsRows(str(exc)) from exc
    try:
        columns = list(zip(*rows, strict=True))
    except ValueError as exc:
        raise _NeedsRows("row images of different widths") from exc
    if len(columns) != width:
        raise _NeedsRows(f"row images of {len(columns)} columns, the table has {width}")
    return _Columns(columns)


# --- one table's held rows ----------------------------------------------------------------------


def _fragments(
    table: MySqlTable, encoders: Sequence[Encoder | None], columns: _Columns
) -> tuple[pa.Array, pa.Array | None]:
    """The row images' JSON and their keys' JSON (None: a keyless table)."""
    return row_json(table, encode_chunk(table, encoders, columns), columns.num_rows)


_Meta = tuple[Any, ...]
"""What :class:`HeldTable` keeps of one held event: :data:`_FIELDS`, in order."""
_FIELDS: Final = (
    "update", "rows", "start", "file_number", "ts_ms", "gtid", "thread", "query", "tx_id",
    "file", "event", "images", "tx",
)  # fmt: skip


class HeldTable:
    """The held events of one table, in arrival order: what their rows need, kept as they are
    held (one tuple an event, the images appended to two lists) so that landing them reads
    columns.

    Args:
        table: The table.
    """

    __slots__ = ("afters", "befores", "meta", "table")

    def __init__(self, table: MySqlTable) -> None:
        self.table = table
        self.meta: list[_Meta] = []
        self.afters: list[tuple[list[Any], dict[int, str] | None]] = []
        """The after image of every row (an insert's image)."""
        self.befores: list[tuple[list[Any], dict[int, str] | None]] = []
        """The before image of every updated row."""

    def add(self, meta: _Meta) -> None:
        """Hold one event of the table (its :data:`_FIELDS`)."""
        self.meta.append(meta)
        images = meta[11]
        if meta[0]:
            self.befores += images[0::2]
            self.afters += images[1::2]
        else:
            self.afters += images

    def event_at(self, index: int) -> HeldEvent:
        """The held event ``index`` (for the per-event road and the last position)."""
        update, rows, start, file_number, ts_ms, *_, file, event, images, tx = self.meta[index]
        where = (start, f"mysql:{file}:{start}", ts_ms, file_number)
        return HeldEvent(event, images, self.table, tx, where, file, update, rows)

    def rows(
        self,
        encoders: Sequence[Encoder | None],
        template: SourceTemplate,
        fixed: tuple[ChangeEvent, str | None, dt.datetime],
    ) -> pa.Table:
        """The bronze rows (:data:`bronze.batch.ROW_SCHEMA`) of the held events.

        Args:
            encoders: One per column (:func:`stream_encoder`).
            template: The table's ``source`` template.
            fixed: ``(event, partition, capture time)``: a classified event of the table (the
                fields its rows share), the agent's source partition, the batch's capture time.

        Raises:
            _NeedsRows: A value needs the per-event road (see the module docstring).
        """
        table = self.table
        event, partition, now = fixed
        field = dict(zip(_FIELDS, zip(*self.meta, strict=True), strict=True))
        counts = np.array(field["rows"], np.int64)
        updated = np.array(field["update"], bool)
        n = len(self.afters)
        after, key = _fragments(table, encoders, _values(table, self.afters))
        single = bool((counts == 1).all())
        row_event = np.arange(n) if single else np.repeat(np.arange(len(counts)), counts)
        take = None if single else _int64s(row_event)

        def per_row(array: pa.Array) -> pa.Array:
            return array if take is None else array.take(take)

        if self.befores:
            before_image, old_key = _fragments(table, encoders, _values(table, self.befores))
            where = np.flatnonzero(updated[row_event])
            if key is not None and old_key is not None:
                moved = pc.not_equal(old_key, key.take(_int64s(where)))
                if pc.any(moved).as_py():
                    raise _NeedsRows("an update moved the key")
            if len(where) == n:
                before: pa.Array | str = before_image
            else:
                slots = np.full(n, -1, np.int64)
                slots[where] = np.arange(len(where))
                picks = pa.array(slots, mask=slots < 0)
                before = pc.fill_null(before_image.take(picks), JSON_NULL)
        else:
            before = JSON_NULL
        if single:
            row_index = np.zeros(n, np.int64)
        else:
            firsts = np.cumsum(counts) - counts
            row_index = np.arange(n) - np.repeat(firsts, counts)
        starts = np.array(field["start"], np.int64)
        ops = per_row(pc.if_else(_bools(updated), "u", "c"))
        event_starts = _decimal_of(starts)
        rows_text = pc.cast(_int64s(row_index), pa.string())
        files = pa.array(field["file"], pa.string())
        server_ids = np.array([int(e.packet.server_id) for e in field["event"]], np.int64)
        ts_ms = np.array(field["ts_ms"], np.int64)
        slots_text = {
            "ts_ms": per_row(_decimal_of(ts_ms)),
            "server_id": per_row(_decimal_of(server_ids)),
            "gtid": per_row(_json_text_of(field["gtid"])),
            "file": per_row(pc.fill_null(json_strings(files), JSON_NULL)),
            "pos": per_row(event_starts),
            "row": rows_text,
            "thread": per_row(pc.fill_null(_decimal(field["thread"]), JSON_NULL)),
        }
        if "query" in template.slots:
            slots_text["query"] = per_row(_json_text_of(field["query"]))
        now_ms = time.time_ns() // 1_000_000
        value = pc.binary_join_element_wise(
            '{"before":',
            before,
            ',"after":',
            after,
            ',"source":',
            template.fill(slots_text),
            ',"op":"',
            ops,
            f'","ts_ms":{now_ms}}}',
            "",
        )
        file_numbers = np.array(field["file_number"], np.int64)
        per_row_columns = {
            S.OP: ops,
            S.POSITION: encoded_positions(file_numbers[row_event], starts[row_event], row_index),
            S.SEQ: _int64s(np.zeros(n, np.int64)),
            S.TX_ID: per_row(pa.array(field["tx_id"], pa.string())),
            S.SOURCE_TS_MS: per_row(_int64s(ts_ms)),
            S.ORIGIN: pc.binary_join_element_wise(
                "mysql:", per_row(files), ":", per_row(event_starts), "#", rows_text, ""
            ),
        }
        return data_rows(table, event, partition, (key, value), (now_ms, now), per_row_columns)


def _int64s(values: np.ndarray[Any, Any]) -> pa.Array:
    """An int64 array of a numpy array (no copy of an int64 one)."""
    data = np.ascontiguousarray(values, np.int64)
    return pa.Array.from_buffers(pa.int64(), len(data), [None, pa.py_buffer(data)])


def _bools(values: np.ndarray[Any, Any]) -> pa.Array:
    bits = np.packbits(values.astype(bool), bitorder="little")
    return pa.Array.from_buffers(pa.bool_(), len(values), [None, pa.py_buffer(bits)])


def _decimal_of(values: np.ndarray[Any, Any]) -> pa.Array:
    """Decimal text of each int64."""
    return pc.cast(_int64s(values), pa.string())


# --- the held events of one read ----------------------------------------------------------------


class HeldRows:
    """The held events of one stream read (see the module docstring).

    Args:
        source: ``StreamReader._source``.
        partition: The agent's source partition.
        now: The batch's capture time.
    """

    def __init__(self, source: SourceOf, partition: str | None, now: dt.datetime) -> None:
        self._source = source
        self.partition = partition
        self.now = now
        self._groups: list[HeldTable] = []
        """The held events per table, in the order the tables were first held."""
        self._index: dict[int, int] = {}
        """``id`` of a held table -> its index in ``_groups``."""
        self._order: list[int] = []
        """The table index of each held event, in arrival order."""
        self._counts: list[int] = []
        """The rows of each held event, in arrival order."""
        self.rows = 0
        """Rows held."""
        self._known: dict[int, tuple[MySqlTable, tuple[Encoder | None, ...], SourceTemplate]] = {}
        self._classified: dict[int, tuple[MySqlTable, ChangeEvent]] = {}
        self.landed = 0
        """Events landed so far (either road)."""
        self.replayed = 0
        """Events of them that took the per-event road."""

    def add(self, table: MySqlTable, meta: _Meta) -> None:
        """Hold one event of ``table``: its :data:`_FIELDS` (``update``, ``rows``, its start,
        file number and ``ts_ms``, its transaction's GTID, thread, query and id, its binlog
        file, the event, its images, its transaction)."""
        index = self._index.get(id(table))
        if index is None:
            index = self._index[id(table)] = len(self._groups)
            self._groups.append(HeldTable(table))
        group = self._groups[index]
        if group.table is not table:  # pragma: no cover - DDL lands the held rows first
            raise InternalError("capture.mysql.stream_columns: a table changed while held")
        group.add(meta)
        rows = meta[1]
        self._order.append(index)
        self._counts.append(rows)
        self.rows += rows

    def land(self, builder: BatchBuilder, replay: Replay) -> tuple[list[str], HeldEvent | None]:
        """Add every held event's rows to ``builder`` in arrival order, then hold nothing.

        Args:
            builder: The batch.
            replay: Lands a held event through the per-event road (which sets the agent's last
                position itself).

        Returns:
            The tables whose events took the per-event road, and why (for the log); the last
            event when it took the columnar road (its last row is the agent's last position).
        """
        groups, order, counts = self._groups, self._order, self._counts
        if not order:
            return [], None
        self._groups, self._index, self._order, self._counts, self.rows = [], {}, [], [], 0
        tables: list[pa.Table | None] = []
        why: list[str] = []
        for group in groups:
            try:
                tables.append(self._rows_of(group))
            except _NeedsRows as exc:
                why.append(f"{group.table.collection} ({exc})")
                tables.append(None)
        self.landed += len(order)
        last_rows = tables[order[-1]]
        last = groups[order[-1]].event_at(-1) if last_rows is not None else None
        if len(groups) == 1 and last_rows is not None:
            builder.add_columns(last_rows)
            return why, last
        self._interleave(builder, (groups, tables), order, counts, replay)
        return why, last

    def _interleave(
        self,
        builder: BatchBuilder,
        landed: tuple[list[HeldTable], list[pa.Table | None]],
        order: list[int],
        counts: list[int],
        replay: Replay,
    ) -> None:
        """Add the rows of several tables (per table: its rows, or None to replay its events)
        back in arrival order: each run of events that took the columnar road as one ``take``
        of their rows, the others replayed one by one."""
        groups, tables = landed
        gids = np.array(order, np.int64)
        sizes = np.array(counts, np.int64)
        firsts = np.full(len(order), -1, np.int64)  # each event's first row in ``joined``
        offset = 0
        for g, rows in enumerate(tables):
            if rows is None:
                continue
            mine = gids == g
            own = sizes[mine]
            firsts[mine] = offset + np.cumsum(own) - own
            offset += rows.num_rows
        present = [rows for rows in tables if rows is not None]
        joined = pa.concat_tables(present) if present else None
        replayed = firsts < 0
        bounds = [0, *(np.flatnonzero(np.diff(replayed)) + 1).tolist(), len(order)]
        rank = np.zeros(len(order), np.int64)  # each event's index among its table's
        for g in range(len(groups)):
            mine = gids == g
            rank[mine] = np.arange(int(mine.sum()))
        for i, j in itertools.pairwise(bounds):
            if replayed[i]:
                for e in range(i, j):
                    replay(builder, groups[order[e]].event_at(int(rank[e])))
                    self.replayed += 1
                continue
            if joined is None:  # pragma: no cover - a run of landed rows has its table
                raise InternalError("capture.mysql.stream_columns: rows without a table")
            run = sizes[i:j]
            shift = firsts[i:j] - (np.cumsum(run) - run)
            rows_at = np.repeat(shift, run) + np.arange(int(run.sum()))
            builder.add_columns(joined.take(_int64s(rows_at)))

    def _rows_of(self, group: HeldTable) -> pa.Table:
        table = group.table
        known = self._known.get(id(table))
        if known is None or known[0] is not table:
            encoders = tuple(stream_encoder(table, i) for i in range(len(table.names)))
            try:
                template = SourceTemplate.cut(self._source, table)
            except ValueError as exc:  # a name that holds a marker's text
                raise _NeedsRows(str(exc)) from exc
            known = (table, encoders, template)
            self._known[id(table)] = known
        _table, encoders, template = known
        classified = self._classified.get(id(table))
        if classified is None or classified[0] is not table:
            h = group.event_at(0)
            record = data_record(
                "u" if h.update else "c",
                self._source(table, h.where[0], 0, h.tx.gtid, h.where[2], h.tx.thread),
                None,
                {},
                None,
                None,
                table,
            )
            classified = (table, built_data_event(record))
            self._classified[id(table)] = classified
        return group.rows(encoders, template, (classified[1], self.partition, self.now))


def position_of(held: HeldEvent) -> MySqlPosition:
    """The position of ``held``'s last row (the agent's last position once it is landed)."""
    start, _origin, _ts, file_number = held.where
    return MySqlPosition._new(
        file_number, start, Phase.STREAM, held.rows - 1, 0, held.file, held.tx.gtid
    )
