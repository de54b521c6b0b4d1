"""Hypothesis strategies over :mod:`tests.pgmodel.history`: random histories and deliveries.

:func:`histories` draws :class:`~tests.pgmodel.history.SourceHistory` values in the
:data:`~tests.pgmodel.history.HIST` database, each operation valid against the state before it;
:func:`deliveries` re-delivers a record list the way Debezium does after crashes (a
:class:`Delivery` of batches).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from hypothesis import strategies as st

from bronze.envelope import ConnectRecord
from tests.pgmodel.history import (
    BASE_COLUMNS,
    HIST,
    STYLES,
    TABLES,
    TOAST_COLUMN,
    AddColumn,
    DbState,
    Delete,
    Insert,
    MoveKey,
    Operation,
    SourceHistory,
    Transaction,
    Truncate,
    Update,
)

__all__ = ["KEY_SPACE", "histories", "Delivery", "deliveries"]

KEY_SPACE: Final = 5
"""Primary keys are drawn from ``range(KEY_SPACE)``: small, so keys get reused."""
MAX_ADDED_COLUMNS: Final = 2
"""ADD COLUMNs per table at most."""


def _values(column: str) -> st.SearchStrategy[Any]:
    if column == "qty":
        return st.none() | st.integers(0, 99)
    if column == TOAST_COLUMN:  # mostly set: only a non-NULL value can be TOASTed
        return st.one_of(st.none(), *[st.text("xyz", min_size=1, max_size=6)] * 3)
    return st.none() | st.text("abc", max_size=3)


def _draw_values(draw: st.DrawFn, columns: Sequence[str]) -> dict[str, Any]:
    return {c: draw(_values(c)) for c in columns}


_KINDS: Final = (
    ("insert",) * 3 + ("update",) * 3 + ("move",) * 3 + ("delete",) * 2 + ("truncate", "add_column")
)
"""Operation kinds, weighted by repetition; hypothesis shrinks towards the first (insert)."""


def _pick(draw: st.DrawFn, candidates: Iterable[int], hot: Sequence[int]) -> int:
    """One of ``candidates``, with the recently touched keys in ``hot`` three times as likely,
    so keys come back: re-inserted after a delete, moved back (A->B->A)."""
    pool = sorted(candidates)
    return draw(st.sampled_from([k for k in hot if k in pool] * 2 + pool))


def _draw_op(
    draw: st.DrawFn,
    db: DbState,
    tables: tuple[str, ...],
    hot: dict[str, list[int]],
    toast_on_key_move: bool,
    placeholders: bool = True,
) -> Operation:
    table = draw(st.sampled_from(tables))
    rows = db.rows[table]
    recent = hot[table]
    columns = [c for c in db.columns[table] if c != "id"]
    free = [i for i in range(KEY_SPACE) if i not in rows]
    possible = {"truncate"}
    if free:
        possible.add("insert")
    if rows:
        possible |= {"update", "delete"}
    if rows and free:
        possible.add("move")
    if len(db.columns[table]) < len(BASE_COLUMNS) + MAX_ADDED_COLUMNS:
        possible.add("add_column")
    kind = draw(st.sampled_from([k for k in _KINDS if k in possible]))
    if kind == "insert":
        return Insert(table, _pick(draw, free, recent), _draw_values(draw, columns))
    if kind == "truncate":
        chosen = draw(st.lists(st.sampled_from(tables), min_size=1, unique=True))
        return Truncate(tuple(t for t in tables if t in chosen))
    if kind == "add_column":
        return AddColumn(table, f"extra{len(db.columns[table]) - len(BASE_COLUMNS) + 1}")
    ident = _pick(draw, rows, recent)
    if kind == "delete":
        return Delete(table, ident)
    changed = draw(st.lists(st.sampled_from(columns), unique=True))
    changes = _draw_values(draw, changed)
    can_toast = (
        placeholders and TOAST_COLUMN not in changes and rows[ident].get(TOAST_COLUMN) is not None
    )
    if kind == "update":
        return Update(table, ident, changes, can_toast and draw(st.booleans()))
    toast = can_toast and toast_on_key_move and draw(st.booleans())
    return MoveKey(table, ident, _pick(draw, free, recent), changes, toast)


def _touch(hot: dict[str, list[int]], op: Operation) -> None:
    """Remember the keys ``op`` touched, most recent last (three per table)."""
    if isinstance(op, Insert | Update | Delete):
        touched = [op.id]
    elif isinstance(op, MoveKey):
        touched = [op.new_id, op.old_id]
    else:
        return
    keys = hot[op.table]
    for ident in touched:
        if ident in keys:
            keys.remove(ident)
        keys.append(ident)
    del keys[:-3]


@st.composite
def histories(
    draw: st.DrawFn,
    *,
    max_tables: int = 3,
    max_transactions: int = 6,
    max_ops: int = 5,
    max_snapshot_rows: int = 3,
    styles: Sequence[str] = STYLES,
    toast_on_key_move: bool = True,
    placeholders: bool = True,
) -> SourceHistory:
    """Random :class:`SourceHistory` values, each operation valid against the state before it.

    Covered: 1-3 tables; an optional initial snapshot (``r`` rows); 1-``max_transactions``
    transactions of 1-``max_ops`` operations each: insert, update of some columns (or none),
    update with the TOAST placeholder, delete (and re-insert of the key later), primary-key move
    (onto a freed key, A->B->A, with a placeholder in its ``c`` when ``toast_on_key_move``),
    truncate of one or several tables, ADD COLUMN (up to two per table); transactions
    interleaved with the next one (either of the two started first); every source style of
    :data:`STYLES`.

    Args:
        draw: Hypothesis' draw function (supplied by ``st.composite``).
        max_tables: Most tables (at most 3).
        max_transactions: Most streamed transactions.
        max_ops: Most operations per transaction.
        max_snapshot_rows: Most snapshot rows per table.
        styles: Source styles to draw from.
        toast_on_key_move: Let primary-key moves carry the placeholder (PostgreSQL does: the
            new tuple of a key-changing UPDATE still holds unchanged TOAST values as pointers).
        placeholders: Let updates and moves carry the placeholder at all (off for deliveries
            that reorder events: a placeholder needs the value's event to arrive first).

    Returns:
        The strategy.
    """
    tables = TABLES[: draw(st.integers(1, min(max_tables, len(TABLES))))]
    style = draw(st.sampled_from(list(styles)))
    db = DbState.empty(HIST, tables)
    snapshot: list[Insert] = []
    for table in tables:
        count = draw(st.integers(0, max_snapshot_rows))
        idents = draw(st.lists(st.integers(0, KEY_SPACE - 1), unique=True, max_size=count))
        for ident in idents:
            insert = Insert(table, ident, _draw_values(draw, BASE_COLUMNS[1:]))
            db.apply(insert)
            snapshot.append(insert)
    transactions: list[Transaction] = []
    hot: dict[str, list[int]] = {t: [] for t in tables}
    for _ in range(draw(st.integers(1, max_transactions))):
        ops: list[Operation] = []
        for _ in range(draw(st.integers(1, max_ops))):
            op = _draw_op(draw, db, tables, hot, toast_on_key_move, placeholders)
            db.apply(op)
            _touch(hot, op)
            ops.append(op)
        interleaved = draw(st.booleans())
        # Drawn only for an interleaved pair, so other draws keep their place in the sequence.
        started_first = interleaved and draw(st.booleans())
        transactions.append(Transaction(tuple(ops), interleaved, started_first))
    return SourceHistory(tables, tuple(transactions), tuple(snapshot), style)


class Delivery(list[list[ConnectRecord]]):
    """Batches of records in arrival order (a list of lists), with a short repr.

    Attributes:
        spans: ``(start, end)`` slice of the emitted record list each batch holds; a repr of
            the records themselves would run to hundreds of kilobytes in hypothesis reports.
    """

    spans: tuple[tuple[int, int], ...]

    def __init__(self, records: Sequence[ConnectRecord], spans: Iterable[tuple[int, int]]):
        self.spans = tuple(spans)
        super().__init__(list(records[a:b]) for a, b in self.spans)

    def __repr__(self) -> str:
        return f"Delivery(spans={list(self.spans)!r})"

    def records(self) -> list[ConnectRecord]:
        """The records in arrival order."""
        return [record for batch in self for record in batch]


@st.composite
def deliveries(
    draw: st.DrawFn,
    records: Sequence[ConnectRecord],
    *,
    max_batches: int = 8,
    max_crashes: int = 3,
) -> Delivery:
    """Deliver ``records`` as Debezium does: consecutive batches, and re-sends after crashes.

    The records are cut into up to ``max_batches`` consecutive batches (files), delivered in
    order. After any batch the connector may crash (up to ``max_crashes`` times): it restarts
    from its last flushed offset, which lies at a batch boundary no earlier than the previous
    restart point, and re-sends every batch from there up to the crash, in the original order,
    then goes on. That is the only duplication Debezium produces (at least once, spec §4).

    The order matters: bronze assigns positions in arrival order (a tombstone or BEGIN/END takes
    the previous record's position, a record sharing a source position takes the next
    ``seq``), and a re-sent stretch gets the positions it got the first time, or positions that
    repeat the same changes. An arbitrary shuffle of records is *not* a delivery: it would make
    bronze give tombstones and key-move triples other positions than Debezium's order implies.
    To test order independence of silver, shuffle positioned events instead.

    Args:
        draw: Hypothesis' draw function (supplied by ``st.composite``).
        records: The records in emission order.
        max_batches: Most batches before duplication.
        max_crashes: Most crashes (re-sent stretches).

    Returns:
        The strategy of deliveries: batches (lists of records) whose concatenation is the
        arrival order.
    """
    count = len(records)
    cuts = draw(st.sets(st.integers(1, count - 1), max_size=max_batches - 1)) if count > 1 else ()
    bounds = [0, *sorted(cuts), count] if count else [0]
    batches = list(zip(bounds, bounds[1:], strict=False))
    spans: list[tuple[int, int]] = []
    flushed = crashes = 0
    for i, batch in enumerate(batches):
        spans.append(batch)
        if crashes < max_crashes and draw(st.booleans()):
            flushed = draw(st.integers(flushed, i))
            spans += batches[flushed : i + 1]
            crashes += 1
    return Delivery(records, spans)
