"""The stream's columnar road: a read's common row changes held as columns, landed per table.

Most of what pgoutput sends is an Insert, or an Update without an old tuple, of a captured
table, with text or NULL values (:func:`capture.postgresql.pgoutput.plain_change`). The stream
reader (:mod:`capture.postgresql.stream`) does per such change only what the order needs (its
position, the transaction's counts) and hands it here with the row's raw text values; the
changes are converted when they are landed, per table and per column, by the snapshot's
column encoders (:func:`capture.postgresql.snapshot.column_encoder`, then the per-value
converter and the column masks for the others: the same code and so the same values as the
snapshot), and their envelopes, keys and bronze columns are assembled with Arrow's string
kernels, byte for byte what :class:`capture.change_records.RowAppender` writes for each
(``tests/unit/test_pg_stream_columns.py`` compares the two roads).

The rows are landed in arrival order, and always before anything else reaches the batch: the
reader lands them before any other row (a delete, a truncate, a message, a heartbeat), before
the batch's size is checked, and when the read ends. Changes of a table whose chunk holds a
value that does not convert or has no representation (contract C1) take the per-event road,
in their place (:meth:`StreamReader._replay_change`), so quarantine and the
``__medallion.unrepresentable`` header are exactly as before.

The ``source`` block's JSON is a template cut from what ``StreamReader._source`` writes, with
marker values in its varying fields (``ts_ms``, ``sequence``'s last commit, ``txId``, ``lsn``,
``commit_lsn``): it follows that method, and each field's text is the decimal JSON has.
"""

from __future__ import annotations

import datetime as dt
import itertools
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from bronze import schema as S
from bronze.batch import BatchBuilder
from bronze.columnar import JSON_NULL, fill_template
from bronze.envelope import ChangeEvent, built_data_event
from bronze.position_base import Phase
from capture.change_records import data_record
from capture.columnar_snapshot import Encoder, _NeedsRows, data_rows, encode_chunk, row_json
from capture.postgresql.agent import PgTx
from capture.postgresql.position import PostgresPosition
from capture.postgresql.schema import TableSchema
from capture.postgresql.snapshot import column_encoder
from pipeline.errors import InternalError

__all__ = ["Change", "PendingChanges", "SourceTemplate", "TableChanges"]


Change = tuple[tuple[str | None, ...], str, int, int, PgTx, "int | None", bytes]
"""One held change: ``(values, op, lsn, seq, transaction, last commit LSN, XLogData)``; its
position is ``(transaction's commit LSN, stream, lsn, seq)``, and the pgoutput message starts
at byte 25 of the XLogData message."""

XLOG_HEADER: Final = 25
"""Bytes of the XLogData header before the pgoutput message (``w`` and three int64s)."""


class _Columns:
    """A held table's raw text values, column by column (what :func:`encode_chunk` reads)."""

    __slots__ = ("_columns",)

    def __init__(self, columns: Sequence[Sequence[str | None]]) -> None:
        self._columns = columns

    @property
    def num_rows(self) -> int:
        return len(self._columns[0]) if self._columns else 0

    def column(self, i: int) -> pa.Array:
        return pa.array(self._columns[i], pa.string())


_MARKS: Final = {
    "ts_ms": 9_000_000_000_000_000_001,
    "last": 9_000_000_000_000_000_002,
    "txId": 9_000_000_000_000_000_003,
    "lsn": 9_000_000_000_000_000_004,
    "commit_lsn": 9_000_000_000_000_000_005,
}
"""Marker values no real field holds (19 digits), to cut the ``source`` template at."""
_MARK_NAMES: Final = {str(v): k for k, v in _MARKS.items()}
_LAST_MARK: Final = f'\\"{_MARKS["last"]}\\"'
"""The last commit LSN as it sits in ``sequence`` (a JSON string inside the JSON text)."""


@dataclass(frozen=True, slots=True)
class SourceTemplate:
    """A table's ``source`` block as JSON text with slots for its varying fields.

    Attributes:
        parts: The constant text around the slots (one more than ``slots``).
        slots: Each slot's field: ``ts_ms``, ``last``, ``txId``, ``lsn`` or ``commit_lsn``.
    """

    parts: tuple[str, ...]
    slots: tuple[str, ...]

    @classmethod
    def cut(cls, source: Callable[[PgTx, int, int | None], dict[str, Any]]) -> SourceTemplate:
        """The template of what ``source(tx, lsn, last commit)`` writes, cut at the markers."""
        tx = PgTx(id="", ts_ms=_MARKS["ts_ms"], xid=_MARKS["txId"], commit_lsn=_MARKS["commit_lsn"])
        text = orjson.dumps(source(tx, _MARKS["lsn"], _MARKS["last"])).decode()
        pieces = re.split(f"({re.escape(_LAST_MARK)}|{'|'.join(_MARK_NAMES)})", text)
        parts = tuple(pieces[0::2])
        slots = tuple("last" if p == _LAST_MARK else _MARK_NAMES[p] for p in pieces[1::2])
        if set(slots) != set(_MARKS):
            raise ValueError(f"the source block has no slot for every varying field: {text}")
        return cls(parts, slots)

    def fill(self, values: dict[str, pa.Array]) -> pa.Array:
        """The ``source`` JSON of each row from each slot's text column."""
        return fill_template(self.parts, self.slots, values)


def _encoded_positions(
    commits: Sequence[int], lsns: Sequence[int], seqs: Sequence[int]
) -> pa.Array:
    """``PostgresPosition(commit, STREAM, lsn, seq).encode()`` of each change, at once."""
    n = len(lsns)
    packed = np.empty(n, _POSITION_LAYOUT)
    packed["version"] = _PROBE[0]
    packed["commit_lsn"] = commits
    packed["phase"] = _PROBE[9]
    packed["lsn"] = lsns
    packed["seq"] = seqs
    fixed = pa.FixedSizeBinaryArray.from_buffers(
        pa.binary(_POSITION_LAYOUT.itemsize), n, [None, pa.py_buffer(packed.tobytes())]
    )
    return fixed.cast(pa.binary())


def _hex(values: np.ndarray[Any, np.dtype[np.uint64]]) -> pa.Array:
    """Upper-case hex of each value below 2**32, without leading zeros (``%X``)."""
    nibbles = (values[:, None] >> _NIBBLE_SHIFTS[None, :]) & 0xF
    digits = _HEX_DIGITS[nibbles]
    nonzero = nibbles != 0
    first = np.where(nonzero.any(axis=1), nonzero.argmax(axis=1), 7)
    kept = np.arange(8)[None, :] >= first[:, None]
    offsets = np.zeros(len(values) + 1, np.int32)
    np.cumsum(8 - first, out=offsets[1:])
    return pa.StringArray.from_buffers(
        len(values), pa.py_buffer(offsets.tobytes()), pa.py_buffer(digits[kept].tobytes())
    )


def _origins(lsns: Sequence[int]) -> pa.Array:
    """``pg:<format_pg_lsn(lsn)>`` of each change, at once."""
    values = np.fromiter(lsns, np.uint64, len(lsns))
    high, low = _hex(values >> np.uint64(32)), _hex(values & np.uint64(0xFFFFFFFF))
    return pc.binary_join_element_wise("pg:", high, "/", low, "")


_PROBE: Final = PostgresPosition._new(
    0x0102030405060708, Phase.STREAM, 0x1112131415161718, 7
).encode()
"""A position encoded by its own class: the layout below is checked against it at import."""
_POSITION_LAYOUT: Final = np.dtype(
    [("version", "u1"), ("commit_lsn", ">u8"), ("phase", "u1"), ("lsn", ">u8"), ("seq", ">u4")]
)
if (
    _POSITION_LAYOUT.itemsize != len(_PROBE)
    or _PROBE[1:9] != (0x0102030405060708).to_bytes(8, "big")
    or _PROBE[10:18] != (0x1112131415161718).to_bytes(8, "big")
    or _PROBE[18:] != (7).to_bytes(4, "big")
):  # pragma: no cover - a change of PostgresPosition's layout
    raise InternalError("capture.postgresql.stream_columns: PostgresPosition's layout changed")
_NIBBLE_SHIFTS: Final = np.arange(28, -1, -4, dtype=np.uint64)
_HEX_DIGITS: Final = np.frombuffer(b"0123456789ABCDEF", np.uint8)


def _decimal(values: Sequence[int]) -> pa.Array:
    return pc.cast(pa.array(values, pa.uint64()), pa.string())


@dataclass(slots=True)
class TableChanges:
    """The held changes of one table, in arrival order.

    Attributes:
        table: The table (the schema they were read under).
        source: Its ``source`` template.
        changes: The changes (:data:`Change`).
    """

    table: TableSchema
    source: SourceTemplate
    changes: list[Change] = field(default_factory=list)

    def rows(
        self,
        encoders: Sequence[Encoder | None],
        event: ChangeEvent,
        partition: str | None,
        now: dt.datetime,
    ) -> pa.Table:
        """The bronze rows of the held changes (:data:`bronze.batch.ROW_SCHEMA`).

        Raises:
            _NeedsRows: A value does not convert or has no representation.
        """
        table = self.table
        values, ops, lsns, seqs, txs, lasts, _raw = zip(*self.changes, strict=True)
        n = len(ops)
        fragments = encode_chunk(table, encoders, _Columns(list(zip(*values, strict=True))))
        after, key = row_json(table, fragments, n)
        op_array = pa.array(ops, pa.string())
        before: pa.Array | str = JSON_NULL
        if key is not None and table.replica_identity in ("d", "i"):
            # REPLICA IDENTITY DEFAULT or INDEX and an unchanged key: ``before`` is the key.
            before = pc.if_else(pc.equal(op_array, "u"), key, JSON_NULL)
        ts_ms = time.time_ns() // 1_000_000
        tx_ts = [tx.ts_ms for tx in txs]
        commits = [tx.commit_lsn for tx in txs]
        slots = {
            "ts_ms": _decimal(tx_ts),
            "last": pc.binary_join_element_wise(
                '\\"', _decimal([0 if last is None else last for last in lasts]), '\\"', ""
            ),
            "txId": _decimal([tx.xid for tx in txs]),
            "lsn": _decimal(lsns),
            "commit_lsn": _decimal(commits),
        }
        if None in lasts:
            nulls = pa.array([last is None for last in lasts], pa.bool_())
            slots["last"] = pc.if_else(nulls, "null", slots["last"])
        value = pc.binary_join_element_wise(
            '{"before":',
            before,
            ',"after":',
            after,
            ',"source":',
            self.source.fill(slots),
            ',"op":"',
            op_array,
            f'","ts_ms":{ts_ms}}}',
            "",
        )
        per_row = {
            S.OP: op_array,
            S.POSITION: _encoded_positions(commits, lsns, seqs),
            S.SEQ: pa.array(seqs, pa.int64()),
            S.TX_ID: pa.array([tx.id for tx in txs], pa.string()),
            S.SOURCE_TS_MS: pa.array(tx_ts, pa.int64()),
            S.ORIGIN: _origins(lsns),
        }
        return data_rows(table, event, partition, (key, value), (ts_ms, now), per_row)


Replay = Callable[[BatchBuilder, TableSchema, Change, dt.datetime], None]
"""Lands one held change through the per-event road (its value needs it)."""


Register = Callable[[BatchBuilder, "str | None", "dict[str, Any] | None"], None]
"""``DatabaseSource._register``: adds a schema to the batch once."""


def _register(builder: BatchBuilder, register: Register, table: TableSchema) -> None:
    """The schemas of ``table``'s rows, in the per-event road's order (key, envelope)."""
    register(builder, None if table.key_schema is None else table.key_schema_id, table.key_schema)
    register(builder, table.envelope_schema_id, table.envelope_schema)


class PendingChanges:
    """The held changes of one stream read (see the module docstring).

    Args:
        source: ``StreamReader``'s source block of ``(transaction, table, LSN, last commit)``.
        partition: The agent's source partition.
        now: The batch's capture time.
    """

    def __init__(
        self,
        source: Callable[[PgTx, TableSchema, int, int | None], dict[str, Any]],
        partition: str | None,
        now: dt.datetime,
    ) -> None:
        self._source = source
        self.partition = partition
        self.now = now
        self._tables: dict[int, TableChanges] = {}
        """Held changes by ``id`` of their table."""
        self.order: list[TableChanges] = []
        """The table of each held change, in arrival order (read it, never change it)."""
        self._encoders: dict[int, tuple[TableSchema, tuple[Encoder | None, ...]]] = {}
        self._events: dict[int, tuple[TableSchema, ChangeEvent]] = {}
        self.landed = 0
        """Changes landed so far."""
        self.last: tuple[int, int, int] | None = None
        """``(commit LSN, LSN, seq)`` of the last change the road took (held or skipped after
        a cut): the agent's last position once the held changes are landed."""
        self.replayed = 0
        """Changes of them that took the per-event road."""

    def __len__(self) -> int:
        return len(self.order)

    def add(self, table: TableSchema, change: Change) -> None:
        """Hold one change of ``table``."""
        held = self._tables.get(id(table))
        if held is None or held.table is not table:
            source = self._source
            held = TableChanges(
                table, SourceTemplate.cut(lambda tx, lsn, last: source(tx, table, lsn, last))
            )
            self._tables[id(table)] = held
        held.changes.append(change)
        self.order.append(held)

    def land(self, builder: BatchBuilder, replay: Replay, register: Register) -> list[str]:
        """Add every held change to ``builder`` in arrival order, then hold nothing.

        Args:
            builder: The batch.
            replay: Lands a change of a table whose chunk needs the per-event road.
            register: ``DatabaseSource._register`` (the schemas of the rows).

        Returns:
            The tables whose changes took the per-event road, and why (for the log).
        """
        if not self.order:
            return []
        now = self.now
        groups = list(self._tables.values())
        tables: list[pa.Table | None] = []
        why: list[str] = []
        for held in groups:
            table = held.table
            try:
                rows = held.rows(
                    self._encoders_of(table), self._event_of(held), self.partition, now
                )
            except _NeedsRows as exc:
                why.append(f"{table.collection} ({exc})")
                rows = None
            tables.append(rows)
        if len(groups) == 1 and tables[0] is not None:
            _register(builder, register, groups[0].table)
            builder.add_columns(tables[0])
        else:
            self._interleave(builder, (groups, tables), replay, register)
        self.landed += len(self.order)
        self._tables.clear()
        self.order.clear()
        return why

    def _interleave(
        self,
        builder: BatchBuilder,
        landed: tuple[list[TableChanges], list[pa.Table | None]],
        replay: Replay,
        register: Register,
    ) -> None:
        """Add the rows of several tables (``(held, rows or None to replay)``) back in arrival
        order, their schemas registered in that order (as the per-event road does)."""
        groups, tables = landed
        index = {id(held): g for g, held in enumerate(groups)}
        order = np.fromiter((index[id(held)] for held in self.order), np.int64, len(self.order))
        starts = np.zeros(len(groups), np.int64)
        offset = 0
        for g, rows in enumerate(tables):
            starts[g] = offset
            offset += 0 if rows is None else rows.num_rows
        rank = np.empty(len(order), np.int64)
        for g in range(len(groups)):
            mine = order == g
            rank[mine] = np.arange(int(mine.sum()))
        at = starts[order] + rank
        present = [rows for rows in tables if rows is not None]
        joined = pa.concat_tables(present) if present else None
        replayed = np.array([rows is None for rows in tables], bool)[order]
        # Runs of changes that take the same road, in arrival order.
        bounds = [0, *(np.flatnonzero(np.diff(replayed)) + 1).tolist(), len(order)]
        for i, j in itertools.pairwise(bounds):
            if not replayed[i]:
                if joined is None:
                    raise InternalError("capture.postgresql.stream_columns: rows without a table")
                for g in dict.fromkeys(order[i:j].tolist()):
                    _register(builder, register, groups[g].table)
                builder.add_columns(joined.take(pa.array(at[i:j])))
                continue
            for k in range(i, j):
                held = groups[order[k]]
                replay(builder, held.table, held.changes[rank[k]], self.now)
                self.replayed += 1

    def _encoders_of(self, table: TableSchema) -> tuple[Encoder | None, ...]:
        known = self._encoders.get(id(table))
        if known is None or known[0] is not table:
            known = (table, tuple(column_encoder(table, i) for i in range(len(table.names))))
            self._encoders[id(table)] = known
        return known[1]

    def _event_of(self, held: TableChanges) -> ChangeEvent:
        """The fields every data event of the table shares, derived by the per-event road's
        own code (``built_data_event``) from a record of the table."""
        table = held.table
        known = self._events.get(id(table))
        if known is None or known[0] is not table:
            _values, op, lsn, _seq, tx, last, _raw = held.changes[0]
            record = data_record(
                op, self._source(tx, table, lsn, last), None, {}, None, None, table
            )
            known = (table, built_data_event(record))
            self._events[id(table)] = known
        return known[1]
