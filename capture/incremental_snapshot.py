"""Incremental snapshots with watermarks (DBLog), and the signals that drive them.

:class:`IncrementalSnapshots` is the engine-neutral part of an agent that reads signals
(:mod:`capture.signals`) and takes incremental snapshots while it streams; the engine gives it
the hooks of :class:`~capture.database_source.DatabaseSource` marked *incremental* (read a
chunk, write a signal row, the position and ``source`` block of a chunk's rows).

How a table is read (the DBLog design the seed documents cite, as Debezium implements it):

1. At the table's start its largest key under the ``additional-conditions`` filter is read: the
   snapshot ends there (rows inserted later arrive through the stream anyway).
2. Per chunk: a **low watermark** row is inserted into the signaling table, the next
   ``incremental.snapshot.chunk.size`` rows after the last key are read in key order, and a
   **high watermark** row is inserted. The chunk waits in memory.
3. The stream goes on. Between the low and the high watermark (the *window*), every change of
   the table's keys removes that key from the chunk: the stream carries a state at least as new
   as what the chunk read.
4. At the high watermark the chunk's remaining rows are emitted as ``op r`` with
   ``source.snapshot = incremental``, at positions of the high watermark's place in the log
   (:meth:`_incremental_positions`): after every change the chunk's read saw, before every change
   it did not. Silver applies a change only when its position is newer, so a chunk row never
   overwrites a newer change, and a later change always overwrites it.
5. The progress (tables left, last key emitted, end key, conditions) is saved in the offset with
   the batch that holds the chunk's rows, so it moves only once bronze committed them. After a
   crash (kill -9 anywhere), the stream is read again from the committed offset; a chunk whose
   rows were not committed is read again under a new chunk id (its old watermarks, read again,
   are ignored).

Signals read from the stream are acted upon in log order, exactly once: the offset that covers a
signal also holds what it changed. The ``signal.file`` channel's progress is the number of lines
read, kept in the offset too.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import orjson

from bronze.batch import BatchBuilder
from bronze.envelope import Op
from bronze.positions import Position
from capture.captured_table import CapturedTable
from capture.change_records import data_record
from capture.column_types import ValueConversionError
from capture.database_source import DatabaseSource
from capture.signals import (
    BLOCKING,
    EXECUTE_SNAPSHOT,
    LOG,
    PAUSE_SNAPSHOT,
    RESUME_SNAPSHOT,
    STOP_SNAPSHOT,
    WINDOW_CLOSE,
    WINDOW_OPEN,
    FileSignals,
    Signal,
    SignalError,
    SignalSettings,
    SnapshotRequest,
    new_signal_id,
    parse_signal,
)
from capture.signals_blocking import read_blocking
from pipeline.errors import CaptureError, InternalError, PipelineError

__all__ = ["ENDED_KEPT", "ChunkWindow", "IncrementalProgress", "IncrementalSnapshots"]

logger = logging.getLogger(__name__)

_OP_READ = Op.READ.value

ENDED_KEPT = 16
"""How many ended signals the offset remembers (:attr:`IncrementalSnapshots._ended`)."""


@dataclass(slots=True)
class IncrementalProgress:
    """An incremental snapshot under way (saved in the offset).

    Attributes:
        id: The ``execute-snapshot`` signal that started it.
        tables: The tables still to read, the one being read first.
        conditions: Table -> its ``additional-conditions`` filter.
        after: The last key emitted of the first table (JSON form); None: from its start.
        until: The first table's largest key when its reading started; None: not started.
        chunks: Chunks emitted so far.
        rows: Rows emitted so far.
        paused: ``pause-snapshot`` was received.
        queued: Ids of the ``execute-snapshot`` signals queued into this one while it ran
            (they end with it).
    """

    id: str
    tables: list[str]
    conditions: dict[str, str] = field(default_factory=dict)
    after: list[Any] | None = None
    until: list[Any] | None = None
    chunks: int = 0
    rows: int = 0
    paused: bool = False
    queued: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The offset's form."""
        return {
            "id": self.id,
            "tables": list(self.tables),
            "conditions": dict(self.conditions),
            "after": self.after,
            "until": self.until,
            "chunks": self.chunks,
            "rows": self.rows,
            "paused": self.paused,
            "queued": list(self.queued),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> IncrementalProgress:
        """Read :meth:`to_json`'s output back."""
        return cls(
            str(data["id"]),
            [str(t) for t in data["tables"]],
            {str(k): str(v) for k, v in dict(data.get("conditions") or {}).items()},
            data.get("after"),
            data.get("until"),
            int(data.get("chunks", 0)),
            int(data.get("rows", 0)),
            bool(data.get("paused", False)),
            [str(i) for i in data.get("queued") or []],
        )

    @property
    def ids(self) -> list[str]:
        """Every ``execute-snapshot`` signal this snapshot carries out."""
        return [self.id, *self.queued]

    def queue(self, collection: str, condition: str | None) -> None:
        """Add ``collection`` under ``condition`` (None: every row) to the tables to read.

        A table already there reads the rows of either condition from then on; the table being
        read is also queued once more, for the new condition's rows before the current key.
        """
        if collection not in self.tables:
            self.tables.append(collection)
            if condition is not None:
                self.conditions[collection] = condition
            return
        old = self.conditions.get(collection)
        if old is None or condition is None:
            self.conditions.pop(collection, None)
        elif old != condition:
            self.conditions[collection] = f"({old}) OR ({condition})"
        else:
            return  # the same rows are on their way
        if self.tables[0] == collection and self.tables.count(collection) == 1:
            self.tables.append(collection)

    def next_table(self) -> None:
        """The first table is done: the next one starts from its beginning."""
        self.tables.pop(0)
        self.after = self.until = None


@dataclass(slots=True)
class ChunkWindow:
    """A chunk read between its watermarks, waiting for the high one (memory only).

    A chunk read column by column (:mod:`capture.incremental_columnar`) keeps its values as
    JSON fragments and, per record key, the row's index in them; one read row by row keeps each
    row's images. Either way :attr:`rows` is keyed by :func:`record_key`, in the chunk's key
    order, and the stream's changes remove keys from it alike.

    Attributes:
        id: The chunk id (the watermark rows' ``id`` is ``<id>-open`` / ``<id>-close``).
        table: The table read.
        rows: The record key (JSON) -> ``(after image, key)`` of each row still to emit, or the
            row's index in :attr:`fragments`.
        bad: Rows that did not convert: ``(raw, error)``, quarantined at the high watermark.
        last: The chunk's last key (JSON form): where the next chunk starts.
        read: Rows the chunk's query returned.
        opened: The low watermark was read from the stream.
        fragments: Column index -> the JSON text of the column's values, one per row read
            (None: the chunk was read row by row).
    """

    id: str
    table: CapturedTable
    rows: dict[bytes, Any]
    bad: list[tuple[bytes, Exception]]
    last: list[Any]
    read: int = 0
    opened: bool = False
    fragments: Mapping[int, Any] | None = None


def record_key(key: Any) -> bytes:
    """The dictionary key a chunk row and a stream change of one table key share."""
    return orjson.dumps(key, option=orjson.OPT_SORT_KEYS)


class IncrementalSnapshots(DatabaseSource):
    """The signal handling and incremental snapshots of an agent (see the module docstring).

    The engine's agent sets :attr:`signals` from its settings, calls :meth:`_signal_row` for each
    insert into the signaling table it reads from its log and :meth:`_incremental_saw` for each
    data change of a captured table, puts :meth:`_signals_json` in its offset and gives
    :meth:`_signals_restore` the offset back; and implements the *incremental* hooks.
    """

    INCREMENTAL_SNAPSHOTS: ClassVar[bool] = True
    IDENTIFIER_QUOTE: ClassVar[str] = '"'
    """How the engine quotes a column name in an ``additional-conditions`` filter."""
    BACKSLASH_ESCAPES: ClassVar[bool] = False
    """The engine's string literals treat a backslash as an escape (MySQL's default)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.signals = SignalSettings()
        """The source's signaling table, signal file and chunk size (the engine sets it)."""
        self._incremental: IncrementalProgress | None = None
        self._window: ChunkWindow | None = None
        self._signal_lines = 0
        """Lines of ``signal.file`` read."""
        self._ended: dict[str, str] = {}
        """Signal id -> how it ended (``complete``, ``stopped``, ``refused: <reason>``), the
        latest :data:`ENDED_KEPT` of them: kept in the offset, so whoever sent a signal can see
        in bronze's committed offset that the agent carried it out (``reconcile --repair``)."""

    # --- the offset ----------------------------------------------------------------------------
    def _signals_json(self) -> dict[str, Any] | None:
        """The offset's ``signals`` entry (None when there is nothing to keep)."""
        snap = self._incremental
        if snap is None and self._signal_lines == 0 and not self._ended:
            return None
        return {
            "snapshot": None if snap is None else snap.to_json(),
            "file_lines": self._signal_lines,
            "ended": dict(self._ended),
        }

    def _signals_restore(self, data: Mapping[str, Any] | None) -> None:
        """Take the offset's ``signals`` entry back; a chunk in flight is read again."""
        self._window = None
        if data is None:
            self._incremental, self._signal_lines, self._ended = None, 0, {}
            return
        snap = data.get("snapshot")
        self._incremental = None if snap is None else IncrementalProgress.from_json(snap)
        self._signal_lines = int(data.get("file_lines", 0))
        self._ended = {str(k): str(v) for k, v in dict(data.get("ended") or {}).items()}

    def _end(self, ids: Sequence[str], how: str) -> None:
        """Note that the signals ``ids`` ended ``how`` (the oldest notes make room)."""
        for signal_id in ids:
            self._ended.pop(signal_id, None)
            self._ended[signal_id] = how
        while len(self._ended) > ENDED_KEPT:
            del self._ended[next(iter(self._ended))]

    # --- sending -------------------------------------------------------------------------------
    def send_signal(self, signal: Signal) -> str:
        """Send ``signal`` to this source: a row of its signaling table, else a line of its
        signal file. Returns where it went.

        Raises:
            CaptureError: The source has neither.
        """
        if self.signals.collection is not None:
            try:
                self._write_signal(signal)
            finally:
                self.release()
            return f"signaling table {self.signals.collection}"
        if self.signals.file is not None:
            FileSignals(self.signals.file).append(signal)
            return f"signal file {self.signals.file}"
        raise CaptureError(
            f"source {self.name}: no signal channel: set signal.data.collection (a table read "
            "from the stream) or signal.file"
        )

    def _work_pending(self) -> bool:
        snap = self._incremental
        return snap is not None and not snap.paused

    def key_condition(self, keys: Sequence[Mapping[str, Any]]) -> str:
        """An ``additional-conditions`` filter that selects exactly the rows of ``keys`` (each
        a key as reconciliation reports it: column -> value)."""
        if not keys:
            raise ValueError("key_condition needs at least one key")
        return " OR ".join(
            "(" + " AND ".join(self._equals(column, v) for column, v in k.items()) + ")"
            for k in keys
        )

    def _equals(self, column: str, value: Any) -> str:
        if value is None:
            return f"{self._quote(column)} IS NULL"
        return f"{self._quote(column)} = {self._literal(value)}"

    def _quote(self, name: str) -> str:
        q = self.IDENTIFIER_QUOTE
        return q + name.replace(q, q + q) + q

    def _literal(self, value: Any) -> str:
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, int | float):
            return repr(value)
        text = value if isinstance(value, str) else orjson.dumps(value).decode()
        if self.BACKSLASH_ESCAPES:
            text = text.replace("\\", "\\\\")
        return "'" + text.replace("'", "''") + "'"

    # --- reading signals -----------------------------------------------------------------------
    def _stream_starting(self, builder: BatchBuilder, now: dt.datetime) -> None:
        """Before a stream batch: read new lines of the signal file, start a chunk if due."""
        if self.signals.file is not None:
            for number, raw, parsed in FileSignals(self.signals.file).read_after(
                self._signal_lines
            ):
                self._signal_lines = number
                origin = f"{self.ORIGIN}:signal-file:{number}"
                if isinstance(parsed, SignalError):
                    self._refuse(builder, raw, origin, parsed, now)
                else:
                    self._act(builder, parsed, raw, origin, now, None)
        self._next_chunk()

    def _signal_row(
        self,
        builder: BatchBuilder,
        row: Mapping[str, Any],
        origin: str,
        at: Any,
        now: dt.datetime,
    ) -> None:
        """An insert into the signaling table, read from the log at ``at`` (the engine's
        context for :meth:`_incremental_positions`)."""
        raw = orjson.dumps(dict(row), default=str)
        try:
            signal = parse_signal(row.get("id"), row.get("type"), row.get("data"))
        except SignalError as exc:
            self._refuse(builder, raw, origin, exc, now, row.get("id"))
            return
        window = self._window
        if signal.type == WINDOW_OPEN:
            if window is not None and signal.id == f"{window.id}-open":
                window.opened = True
            return
        if signal.type == WINDOW_CLOSE:
            if window is not None and signal.id == f"{window.id}-close":
                self._close_window(builder, window, at, now)
                self._next_chunk()
            return  # a chunk read before a restart: read again under a new id
        self._act(builder, signal, raw, origin, now, at)

    def _refuse(
        self,
        builder: BatchBuilder,
        raw: bytes,
        origin: str,
        exc: SignalError,
        now: dt.datetime,
        signal_id: Any = None,
    ) -> None:
        logger.error("source %s: signal refused at %s: %s", self.name, origin, exc)
        if isinstance(signal_id, str) and signal_id:
            self._end([signal_id], f"refused: {exc.reason}")
        self._quarantine(builder, raw, origin, exc, now)

    def _act(
        self,
        builder: BatchBuilder,
        signal: Signal,
        raw: bytes,
        origin: str,
        now: dt.datetime,
        at: Any,
    ) -> None:
        """Act on ``signal``; ``at`` is its place in the log (None: from the signal file)."""
        try:
            blocking = self._apply_signal(signal, at)
        except SignalError as exc:
            self._refuse(builder, raw, origin, exc, now, signal.id)
            return
        logger.info("source %s: signal %s (%s) at %s", self.name, signal.id, signal.type, origin)
        if blocking is not None:
            # The stream pauses here: the tables are read whole, their rows take the signal's
            # place in the log, and the stream resumes right after it.
            read_blocking(self, builder, blocking, at, now)
            self._end([signal.id], "complete")
        self._next_chunk()

    def _apply_signal(self, signal: Signal, at: Any) -> SnapshotRequest | None:
        """Act on ``signal``; returns a blocking snapshot's request, to be read at once."""
        snap = self._incremental
        if signal.type == LOG:
            logger.info("source %s: signal log: %s", self.name, signal.data["message"])
        elif signal.type == EXECUTE_SNAPSHOT:
            return self._execute_snapshot(signal, at)
        elif signal.type == STOP_SNAPSHOT:
            self._stop_snapshot(signal)
        elif signal.type in (PAUSE_SNAPSHOT, RESUME_SNAPSHOT):
            if snap is None:
                raise SignalError(f"signal {signal.id} ({signal.type}): no snapshot is running")
            snap.paused = signal.type == PAUSE_SNAPSHOT
        return None

    def _execute_snapshot(self, signal: Signal, at: Any) -> SnapshotRequest | None:
        request = signal.snapshot_request()
        where = f"signal {signal.id} (execute-snapshot)"
        if request.kind == BLOCKING:
            if at is None:
                raise SignalError(
                    f"{where}: a blocking snapshot's rows take the signal's place in the log: "
                    "send it through the signaling table (signal.data.collection), not the file"
                )
        elif self.signals.collection is None:
            raise SignalError(
                f"{where}: an incremental snapshot writes its watermarks into the signaling "
                "table: set signal.data.collection"
            )
        for collection in request.collections:
            table = self._incremental_table(collection)
            if table is None:
                raise SignalError(
                    f"{where}: table {collection} is not captured (not found, or outside the "
                    "include/exclude lists)"
                )
            if not table.has_key:
                raise SignalError(
                    f"{where}: table {collection} has no primary key; give it one with "
                    "message.key.columns"
                )
            condition = request.conditions.get(collection, "")
            if condition.lstrip()[:7].upper() == "SELECT ":
                raise SignalError(
                    f"{where}: the filter for {collection} is a SELECT statement; give only its "
                    "condition (what follows WHERE): rows are read in key order"
                )
        if request.kind == BLOCKING:
            return request
        snap = self._incremental
        if snap is None:
            self._incremental = IncrementalProgress(
                signal.id, list(request.collections), dict(request.conditions)
            )
        else:  # queued behind the running one, as Debezium does
            snap.queued.append(signal.id)
            for collection in request.collections:
                snap.queue(collection, request.conditions.get(collection))
        logger.info(
            "source %s: incremental snapshot of %s%s",
            self.name,
            ", ".join(request.collections),
            "".join(f" ({t} WHERE {c})" for t, c in request.conditions.items()),
        )
        return None

    def _stop_snapshot(self, signal: Signal) -> None:
        snap = self._incremental
        if snap is None:
            raise SignalError(f"signal {signal.id} (stop-snapshot): no snapshot is running")
        stopped = set(signal.snapshot_request().collections) or set(snap.tables)
        if snap.tables and snap.tables[0] in stopped:
            snap.after = snap.until = None
            self._window = None
        snap.tables = [t for t in snap.tables if t not in stopped]
        logger.info("source %s: snapshot stopped for %s", self.name, ", ".join(sorted(stopped)))
        if not snap.tables:
            self._end(snap.ids, "stopped")
            self._incremental = None

    # --- chunks --------------------------------------------------------------------------------
    def _next_chunk(self) -> None:
        """Read the next chunk between two watermarks, unless one is in flight or paused."""
        snap = self._incremental
        while snap is not None and not snap.paused and self._window is None:
            if not snap.tables:
                logger.info(
                    "source %s: incremental snapshot %s complete (%d rows in %d chunks)",
                    self.name,
                    snap.id,
                    snap.rows,
                    snap.chunks,
                )
                self._end(snap.ids, "complete")
                self._incremental = None
                return
            collection = snap.tables[0]
            table = self._incremental_table(collection)
            condition = snap.conditions.get(collection)
            if table is None:
                logger.warning(
                    "source %s: incremental snapshot: table %s is gone; skipped",
                    self.name,
                    collection,
                )
                snap.next_table()
                continue
            if snap.until is None:
                snap.until = self._incremental_bound(table, condition)
                if snap.until is None:  # nothing to read
                    snap.next_table()
                    continue
            chunk_id = new_signal_id()
            self._write_signal(Signal(f"{chunk_id}-open", WINDOW_OPEN, {}))
            window = self._read_window(chunk_id, table, snap.after, snap.until, condition)
            if window is None:
                snap.next_table()
                continue
            self._window = window
            self._write_signal(Signal(f"{chunk_id}-close", WINDOW_CLOSE, {}))

    def _read_window(
        self,
        chunk_id: str,
        table: CapturedTable,
        after: list[Any] | None,
        until: list[Any],
        condition: str | None,
    ) -> ChunkWindow | None:
        """Read the next chunk (between the watermarks) into its window; None when no row is
        left. Row by row here; :mod:`capture.incremental_columnar` holds whole columns."""
        rows = self._incremental_read(table, after, until, condition, self.signals.chunk_size)
        return self._buffer(chunk_id, table, rows) if rows else None

    def _buffer(self, chunk_id: str, table: CapturedTable, rows: Sequence[Any]) -> ChunkWindow:
        window = ChunkWindow(chunk_id, table, {}, [], [], len(rows))
        for row in rows:
            decoded = self._snapshot_decode(table, row)
            window.last = decoded.key
            try:
                after, key = table.row_and_key(decoded.values())
            except (ValueConversionError, PipelineError) as exc:
                window.bad.append((decoded.raw(), exc))
                continue
            window.rows[record_key(key)] = (after, key)
        return window

    def _incremental_saw(self, table: CapturedTable, keys: Sequence[Any]) -> None:
        """The stream changed ``keys`` of ``table``: inside the window, the chunk drops them."""
        window = self._window
        if window is None or not window.opened or window.table.collection != table.collection:
            return
        for key in keys:
            window.rows.pop(record_key(key), None)

    def _incremental_truncated(self, table: CapturedTable) -> None:
        """The stream truncated ``table``: inside the window, the chunk drops every row."""
        window = self._window
        if window is not None and window.opened and window.table.collection == table.collection:
            window.rows.clear()
            window.bad.clear()

    def _close_window(
        self, builder: BatchBuilder, window: ChunkWindow, at: Any, now: dt.datetime
    ) -> None:
        """The high watermark: emit the chunk's remaining rows at its position."""
        snap = self._incremental
        self._window = None
        if snap is None:
            return
        table = window.table
        source = self._incremental_source(table, at)
        positions = self._incremental_positions(at, len(window.rows))
        origin = f"{self.ORIGIN}:incremental:{table.collection}"
        if window.fragments is not None:
            self._emit_columns(builder, window, source, positions, origin, now)
        else:
            for (after, key), position in zip(window.rows.values(), positions, strict=True):
                record = data_record(_OP_READ, source, None, after, key, None, table)
                self._add(builder, record, position, origin, now, None, table)
        for raw, exc in window.bad:
            self._quarantine(builder, raw, origin, exc, now, table)
        snap.after = window.last
        snap.chunks += 1
        snap.rows += len(window.rows)
        logger.info(
            "source %s: incremental snapshot chunk %d of %s: %d rows (%d superseded by the stream)",
            self.name,
            snap.chunks,
            table.collection,
            len(window.rows),
            window.read - len(window.rows) - len(window.bad),
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
        """Emit the remaining rows of a window read column by column (at ``positions``)."""
        raise InternalError(f"{type(self).__name__} reads no incremental chunk column by column")

    # --- hooks the engine implements -----------------------------------------------------------
    def _incremental_table(self, collection: str) -> CapturedTable | None:
        """The captured table named ``collection`` as it is now (None: not captured)."""
        raise NotImplementedError(f"{type(self).__name__} takes no incremental snapshot")

    def _incremental_bound(self, table: CapturedTable, condition: str | None) -> list[Any] | None:
        """The largest key of ``table`` under ``condition`` (JSON form), None when empty."""
        raise NotImplementedError(f"{type(self).__name__} takes no incremental snapshot")

    def _incremental_read(
        self,
        table: CapturedTable,
        after: list[Any] | None,
        until: list[Any],
        condition: str | None,
        limit: int,
    ) -> Sequence[Any]:
        """Up to ``limit`` rows with ``after < key <= until`` under ``condition``, in key order,
        each as :meth:`_snapshot_decode` takes it (a chunk read in bulk may come as
        :class:`capture.incremental_columnar.ColumnRows`, which is such a sequence too)."""
        raise NotImplementedError(f"{type(self).__name__} takes no incremental snapshot")

    def _write_signal(self, signal: Signal) -> None:
        """Insert ``signal`` into the signaling table (committed at once)."""
        raise NotImplementedError(f"{type(self).__name__} has no signaling table")

    def _incremental_source(self, table: CapturedTable, at: Any) -> dict[str, Any]:
        """The ``source`` block of a chunk's rows emitted at the high watermark ``at``."""
        raise NotImplementedError(f"{type(self).__name__} takes no incremental snapshot")

    def _incremental_positions(self, at: Any, count: int) -> Sequence[Position]:
        """``count`` positions at the high watermark ``at``, after it and before whatever
        follows it in the log."""
        raise NotImplementedError(f"{type(self).__name__} takes no incremental snapshot")
