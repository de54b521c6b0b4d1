"""Random source histories and the Debezium PostgreSQL records they produce (hypothesis).

A :class:`SourceHistory` is what happened in a small PostgreSQL database: an optional initial
snapshot, then transactions, in commit order, of inserts, updates, deletes, primary-key moves,
truncates, updates whose unchanged TOAST-like column (``notes``) arrives as the unavailable-value
placeholder, and ``ADD COLUMN`` (later rows carry a new nullable column, and the table's value
schema changes). Tables have an ``int32`` primary key ``id`` drawn from a small range, so keys
are reused: deleted and re-inserted, moved onto freed keys, moved A->B->A in one transaction.

Two things come out of a history, computed independently of each other and of silver:

* :meth:`SourceHistory.final_state`, the ground truth, by applying the operations to plain dicts;
* :meth:`SourceHistory.records`, the records Debezium's PostgreSQL connector (pgoutput,
  ``provide.transaction.metadata=true``, ``tombstones.on.delete=true``, JsonConverter with
  ``schemas.enable=true``, ``REPLICA IDENTITY DEFAULT``) would emit for it, built with
  :mod:`bronze.envelope` and :mod:`bronze.connect_schema`: BEGIN, the data events with their
  ``transaction`` block, END with per-collection counts; a tombstone after every delete; a
  primary-key change as ``d`` (header ``__debezium.newkey``) + tombstone + ``c`` (header
  ``__debezium.oldkey``) at one LSN; one ``t`` per truncated table (null key); ``r`` rows for
  the snapshot; ``before`` images key-only (REPLICA IDENTITY DEFAULT); one value schema per
  table version. ``source`` blocks carry ``lsn`` and ``txId`` plus, per :data:`STYLES`,
  ``sequence`` (``["<lastCommitLsn>","<lsn>"]``, Debezium 2.x), ``commit_lsn``, or nothing more
  (Debezium 1.2). A transaction may be *interleaved* with the next one: the later-committing
  transaction started first and their per-row LSNs alternate, so per-row LSN order is not
  commit order (bronze positions must get it right anyway).

PostgreSQL's logical decoding carries no DDL: a column added after the last change of its table
is invisible to every consumer. :meth:`SourceHistory.final_state` therefore shows each table with
the columns of the last value schema emitted for it; :meth:`SourceHistory.source_state` gives the
unprojected rows.

Strategies: :func:`histories` draws histories; :func:`deliveries` re-delivers a record list the
way Debezium does after crashes (a :class:`Delivery` of batches). :func:`to_jsonl` writes records
as ``kafka_json`` lines for the ``debezium_json`` source. Test support: needs ``hypothesis``
(the ``dev`` extra).

Example:
    >>> h = SourceHistory(("customers",), (Transaction((Insert("customers", 1, {"qty": 2}),)),))
    >>> [r.topic for r in h.records()]
    ['hist.transaction', 'hist.public.customers', 'hist.transaction']
    >>> h.final_state()
    {'public.customers': {'{"id":1}': {'id': 1, 'qty': 2, 'label': None, 'notes': None}}}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson
from hypothesis import strategies as st

from bronze.connect_schema import envelope_schema, source_schema, struct
from bronze.connect_schema import field as schema_field
from bronze.envelope import (
    HEADER_NEW_KEY,
    HEADER_OLD_KEY,
    UNAVAILABLE_VALUE,
    ConnectRecord,
    Op,
    TransactionInfo,
    data_record,
    to_json_converter,
    tombstone_for,
    transaction_begin,
    transaction_end,
    truncate_record,
)
from silver.reference import LiveRows, canonical_json

__all__ = [
    "SERVER",
    "SCHEMA",
    "TABLES",
    "BASE_COLUMNS",
    "TOAST_COLUMN",
    "STYLES",
    "KEY_SPACE",
    "Row",
    "Insert",
    "Update",
    "Delete",
    "MoveKey",
    "Truncate",
    "AddColumn",
    "Operation",
    "Transaction",
    "SourceHistory",
    "histories",
    "Delivery",
    "deliveries",
    "to_jsonl",
]

SERVER: Final = "hist"
"""Logical server name (``topic.prefix``); topics are ``hist.public.<table>``."""
SCHEMA: Final = "public"
DATABASE: Final = "histdb"
TABLES: Final = ("customers", "orders", "items")
"""Table names, in the order histories use them."""
BASE_COLUMNS: Final = ("id", "qty", "label", "notes")
"""Every table's columns before any ADD COLUMN; ``id`` is the primary key."""
TOAST_COLUMN: Final = "notes"
"""The TOAST-like text column: an update that leaves it unchanged may carry the placeholder."""
STYLES: Final = ("sequence", "commit_lsn", "lsn_only")
"""How ``source`` blocks carry commit order: ``source.sequence`` (Debezium 2.x),
``source.commit_lsn``, or only ``lsn``/``txId`` (Debezium 1.2, positions derived by bronze)."""
KEY_SPACE: Final = 5
"""Primary keys are drawn from ``range(KEY_SPACE)``: small, so keys get reused."""
MAX_ADDED_COLUMNS: Final = 2
"""ADD COLUMNs per table at most."""

SNAPSHOT_LSN: Final = 10_000
"""LSN of the snapshot point; streamed LSNs come after it."""
LSN_STEP: Final = 16
TXID_START: Final = 500
TS_START: Final = 1_700_000_000_000
VERSION: Final = "2.7.0.Final"

_TYPES: Final[Mapping[str, str]] = {"id": "int32", "qty": "int32"}
"""Connect types of the columns; any other column is an optional string."""

Row: TypeAlias = dict[str, Any]


# --- operations ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Insert:
    """``INSERT`` of one row (also an initial-snapshot row).

    Attributes:
        table: Table name.
        id: The new primary key (must be free).
        values: Values of the non-key columns; columns left out are NULL.
    """

    table: str
    id: int
    values: Mapping[str, Any]


@dataclass(frozen=True)
class Update:
    """``UPDATE`` of some columns of one row.

    Attributes:
        table: Table name.
        id: The row's primary key.
        changes: New values of the changed columns (may be empty: ``SET qty = qty``).
        toast: The TOAST column is unchanged and not NULL, so Debezium writes the
            unavailable-value placeholder for it instead of its value.
    """

    table: str
    id: int
    changes: Mapping[str, Any]
    toast: bool = False


@dataclass(frozen=True)
class Delete:
    """``DELETE`` of one row."""

    table: str
    id: int


@dataclass(frozen=True)
class MoveKey:
    """``UPDATE`` that changes the primary key (and maybe other columns) of one row.

    Attributes:
        table: Table name.
        old_id: The row's key before.
        new_id: Its key after (must be free).
        changes: Other columns changed by the same statement.
        toast: As for :class:`Update`: the ``c`` of the move carries the placeholder.
    """

    table: str
    old_id: int
    new_id: int
    changes: Mapping[str, Any]
    toast: bool = False


@dataclass(frozen=True)
class Truncate:
    """``TRUNCATE`` of one or more tables in one statement (one ``t`` event per table)."""

    tables: tuple[str, ...]


@dataclass(frozen=True)
class AddColumn:
    """``ALTER TABLE ... ADD COLUMN <column> text`` (nullable, no default): emits nothing."""

    table: str
    column: str


Operation: TypeAlias = Insert | Update | Delete | MoveKey | Truncate | AddColumn


@dataclass(frozen=True)
class Transaction:
    """One source transaction.

    Attributes:
        ops: Its operations, in execution order.
        interleaved_with_next: The next transaction (which commits after this one) started
            before it, and their per-row LSNs alternate. Ignored on the last transaction and on
            a transaction already paired with the one before it.
    """

    ops: tuple[Operation, ...]
    interleaved_with_next: bool = False


def _tables_of(op: Operation) -> tuple[str, ...]:
    """Tables whose change events ``op`` emits (none for ADD COLUMN)."""
    if isinstance(op, Truncate):
        return op.tables
    if isinstance(op, AddColumn):
        return ()
    return (op.table,)


@dataclass
class _Db:
    """The source database: rows per table, columns per table. Applies operations directly."""

    rows: dict[str, dict[int, Row]]
    columns: dict[str, list[str]]

    @classmethod
    def empty(cls, tables: Iterable[str]) -> _Db:
        names = list(tables)
        return cls({t: {} for t in names}, {t: list(BASE_COLUMNS) for t in names})

    def apply(self, op: Operation) -> None:
        """Apply one operation.

        Raises:
            ValueError: The operation does not fit the state (a hand-written history is wrong).
        """
        if isinstance(op, Truncate):
            for table in op.tables:
                self.rows[table].clear()
            return
        rows = self.rows[op.table]
        columns = self.columns[op.table]
        if isinstance(op, Insert):
            _require(op.id not in rows, f"insert of existing key {op.table}/{op.id}")
            _require_columns(op.values, columns, op)
            rows[op.id] = {c: op.id if c == "id" else op.values.get(c) for c in columns}
        elif isinstance(op, Update):
            _require(op.id in rows, f"update of missing key {op.table}/{op.id}")
            _require_columns(op.changes, columns, op)
            _require_toast(op.toast, op.changes, rows[op.id], op)
            rows[op.id].update(op.changes)
        elif isinstance(op, Delete):
            _require(op.id in rows, f"delete of missing key {op.table}/{op.id}")
            del rows[op.id]
        elif isinstance(op, MoveKey):
            _require(op.old_id in rows, f"key move from missing key {op.table}/{op.old_id}")
            _require(op.new_id not in rows, f"key move onto existing key {op.table}/{op.new_id}")
            _require_columns(op.changes, columns, op)
            _require_toast(op.toast, op.changes, rows[op.old_id], op)
            row = rows.pop(op.old_id)
            row.update(op.changes)
            row["id"] = op.new_id
            rows[op.new_id] = row
        else:
            _require(op.column not in columns, f"column {op.table}.{op.column} exists")
            columns.append(op.column)
            for row in rows.values():
                row[op.column] = None


def _require(condition: bool, what: str) -> None:
    if not condition:
        raise ValueError(f"inconsistent history: {what}")


def _require_columns(values: Mapping[str, Any], columns: list[str], op: Operation) -> None:
    unknown = sorted(set(values) - set(columns) | ({"id"} & set(values)))
    _require(not unknown, f"{op}: unknown or key columns {unknown}")


def _require_toast(toast: bool, changes: Mapping[str, Any], row: Row, op: Operation) -> None:
    if toast:
        _require(
            TOAST_COLUMN not in changes and row.get(TOAST_COLUMN) is not None,
            f"{op}: a placeholder needs an unchanged, non-NULL {TOAST_COLUMN}",
        )


# --- the history ---------------------------------------------------------------------------


@dataclass(frozen=True)
class SourceHistory:
    """What happened in the source, and what Debezium made of it.

    Attributes:
        tables: The tables (1 to 3 of :data:`TABLES`).
        transactions: Streamed transactions, in commit order.
        snapshot: Rows of the initial snapshot (emitted as ``r``), before any transaction.
        style: One of :data:`STYLES`.
    """

    tables: tuple[str, ...]
    transactions: tuple[Transaction, ...]
    snapshot: tuple[Insert, ...] = ()
    style: str = "sequence"

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"style {self.style!r} is not one of {STYLES}")

    @staticmethod
    def collection(table: str) -> str:
        """Bronze's collection name of a table (``public.<table>``)."""
        return f"{SCHEMA}.{table}"

    def operations(self) -> Iterable[Operation]:
        """Snapshot inserts, then every transaction's operations, in commit order."""
        yield from self.snapshot
        for tx in self.transactions:
            yield from tx.ops

    def source_state(self) -> dict[str, dict[int, Row]]:
        """The source tables after the last transaction: table -> id -> row (all columns)."""
        db = _Db.empty(self.tables)
        for op in self.operations():
            db.apply(op)
        return db.rows

    def final_state(self) -> LiveRows:
        """The ground truth silver must equal, computed by applying the operations directly.

        Returns:
            collection -> canonical key JSON -> row, each table projected on the columns of
            the last value schema emitted for it (see the module docstring); tables without
            rows are left out, as :func:`silver.reference.replay` leaves them out.
        """
        db = _Db.empty(self.tables)
        visible: dict[str, list[str]] = {}
        for op in self.operations():
            db.apply(op)
            for table in _tables_of(op):
                visible[table] = list(db.columns[table])
        return {
            self.collection(table): {
                canonical_json({"id": ident}): {c: row[c] for c in visible[table]}
                for ident, row in rows.items()
            }
            for table, rows in db.rows.items()
            if rows
        }

    def records(self) -> list[ConnectRecord]:
        """The records Debezium's PostgreSQL connector emits for this history, in order."""
        return _Emitter(self).run()


# --- emission ------------------------------------------------------------------------------


def _slots(tx: Transaction) -> int:
    """LSNs a transaction needs: one per row change (a key move's triple and a multi-table
    truncate share one)."""
    return sum(1 for op in tx.ops if not isinstance(op, AddColumn))


def _plan(transactions: Sequence[Transaction]) -> list[tuple[int, list[int], int]]:
    """``(txId, per-row LSNs, commit LSN)`` per transaction, in commit order.

    An interleaved pair: the second transaction (committing later) started first, so it has the
    lower txId and the first LSN; then the LSNs alternate; then both commit, in order.
    """
    plans: list[tuple[int, list[int], int]] = []
    lsn, txid, i = SNAPSHOT_LSN, TXID_START, 0
    while i < len(transactions):
        first = transactions[i]
        if first.interleaved_with_next and i + 1 < len(transactions):
            a, b = _slots(first), _slots(transactions[i + 1])
            lsns_a: list[int] = []
            lsns_b: list[int] = []
            for step in range(max(a, b)):
                if step < b:
                    lsn += LSN_STEP
                    lsns_b.append(lsn)
                if step < a:
                    lsn += LSN_STEP
                    lsns_a.append(lsn)
            plans.append((txid + 1, lsns_a, lsn + LSN_STEP))
            plans.append((txid, lsns_b, lsn + 2 * LSN_STEP))
            lsn, txid, i = lsn + 2 * LSN_STEP, txid + 2, i + 2
            continue
        lsns = [lsn + LSN_STEP * (n + 1) for n in range(_slots(first))]
        lsn += LSN_STEP * (len(lsns) + 1)
        plans.append((txid, lsns, lsn))
        txid, i = txid + 1, i + 1
    return plans


def _column_schema(column: str) -> dict[str, Any]:
    if column == "id":
        return schema_field("id", "int32")
    return schema_field(column, _TYPES.get(column, "string"), optional=True)


class _Emitter:
    """Walks a history in commit order and emits what the connector would."""

    def __init__(self, history: SourceHistory) -> None:
        self.history = history
        self.db = _Db.empty(history.tables)
        self.out: list[ConnectRecord] = []
        self.ts = TS_START
        self.last_commit: int | None = None
        self.source_schema = source_schema("postgresql")
        if history.style == "commit_lsn":
            self.source_schema["fields"].append(schema_field("commit_lsn", "int64", optional=True))
        self.value_schemas: dict[tuple[str, int], dict[str, Any]] = {}

    def run(self) -> list[ConnectRecord]:
        self.snapshot()
        plans = _plan(self.history.transactions)
        for tx, (txid, lsns, commit_lsn) in zip(self.history.transactions, plans, strict=True):
            self.transaction(tx, txid, lsns, commit_lsn)
        return self.out

    # schemas, topics, source blocks
    def topic(self, table: str) -> str:
        return f"{SERVER}.{SCHEMA}.{table}"

    def key_schema(self, table: str) -> dict[str, Any]:
        return struct([schema_field("id", "int32")], name=f"{self.topic(table)}.Key")

    def value_schema(self, table: str) -> dict[str, Any]:
        columns = self.db.columns[table]
        cached = self.value_schemas.get((table, len(columns)))
        if cached is None:
            prefix = self.topic(table)
            row = struct([_column_schema(c) for c in columns], name=f"{prefix}.Value")
            cached = envelope_schema(prefix, row, self.source_schema, with_transaction=True)
            self.value_schemas[(table, len(columns))] = cached
        return cached

    def source(
        self, table: str, lsn: int, txid: int, snapshot: str, commit_lsn: int | None
    ) -> dict[str, Any]:
        style = self.history.style
        sequence = None
        if style == "sequence":
            last = None if self.last_commit is None else str(self.last_commit)
            sequence = orjson.dumps([last, str(lsn)]).decode()
        src: dict[str, Any] = {
            "version": VERSION,
            "connector": "postgresql",
            "name": SERVER,
            "ts_ms": self.ts,
            "snapshot": snapshot,
            "db": DATABASE,
            "sequence": sequence,
            "ts_us": self.ts * 1000,
            "ts_ns": self.ts * 1_000_000,
            "schema": SCHEMA,
            "table": table,
            "txId": txid,
            "lsn": lsn,
            "xmin": None,
        }
        if style == "commit_lsn":
            src["commit_lsn"] = commit_lsn
        return src

    def data(
        self,
        op: Op,
        table: str,
        ident: int,
        src: Mapping[str, Any],
        tx: TransactionInfo | None,
        *,
        before: Row | None = None,
        after: Row | None = None,
        headers: tuple[tuple[str, str | None], ...] = (),
    ) -> ConnectRecord:
        return data_record(
            op,
            source=src,
            before=before,
            after=after,
            key={"id": ident},
            ts_ms=self.ts,
            transaction=tx,
            key_schema=self.key_schema(table),
            value_schema=self.value_schema(table),
            headers=headers,
            topic=self.topic(table),
        )

    # the stream
    def snapshot(self) -> None:
        rows = self.history.snapshot
        if not rows:
            return
        self.last_commit = SNAPSHOT_LSN
        for n, insert in enumerate(rows):
            marker = "last" if n == len(rows) - 1 else ("first" if n == 0 else "true")
            self.db.apply(insert)
            src = self.source(insert.table, SNAPSHOT_LSN, TXID_START - 1, marker, None)
            if self.history.style == "sequence":
                src["sequence"] = orjson.dumps([None, str(SNAPSHOT_LSN)]).decode()
            after = dict(self.db.rows[insert.table][insert.id])
            self.out.append(self.data(Op.READ, insert.table, insert.id, src, None, after=after))

    def transaction(self, tx: Transaction, txid: int, lsns: list[int], commit_lsn: int) -> None:
        self.ts += 7
        tx_id = str(txid)
        body: list[ConnectRecord] = []
        counts: dict[str, int] = {}

        def block(table: str) -> TransactionInfo:
            collection = SourceHistory.collection(table)
            counts[collection] = counts.get(collection, 0) + 1
            return TransactionInfo(tx_id, sum(counts.values()), counts[collection])

        slots = iter(lsns)
        for op in tx.ops:
            if isinstance(op, AddColumn):
                self.db.apply(op)
                continue
            lsn = next(slots)
            if isinstance(op, Truncate):
                for table in op.tables:
                    src = self.source(table, lsn, txid, "false", commit_lsn)
                    body.append(
                        truncate_record(
                            src,
                            ts_ms=self.ts,
                            transaction=block(table),
                            value_schema=self.value_schema(table),
                            topic=self.topic(table),
                        )
                    )
                self.db.apply(op)
                continue
            src = self.source(op.table, lsn, txid, "false", commit_lsn)
            if isinstance(op, Insert):
                self.db.apply(op)
                after = dict(self.db.rows[op.table][op.id])
                body.append(
                    self.data(Op.CREATE, op.table, op.id, src, block(op.table), after=after)
                )
            elif isinstance(op, Update):
                self.db.apply(op)
                after = dict(self.db.rows[op.table][op.id])
                if op.toast:
                    after[TOAST_COLUMN] = UNAVAILABLE_VALUE
                body.append(
                    self.data(
                        Op.UPDATE,
                        op.table,
                        op.id,
                        src,
                        block(op.table),
                        before={"id": op.id},
                        after=after,
                    )
                )
            elif isinstance(op, Delete):
                self.db.apply(op)
                delete = self.data(
                    Op.DELETE, op.table, op.id, src, block(op.table), before={"id": op.id}
                )
                body += [delete, tombstone_for(delete)]
            else:
                body += self.key_move(op, src, block)
        if body:
            topic = f"{SERVER}.transaction"
            end = transaction_end(tx_id, sum(counts.values()), counts, ts_ms=self.ts, topic=topic)
            begin = transaction_begin(tx_id, ts_ms=self.ts, topic=topic)
            self.out += [begin, *body, end]
        self.last_commit = commit_lsn

    def key_move(
        self, op: MoveKey, src: Mapping[str, Any], block: Callable[[str], TransactionInfo]
    ) -> list[ConnectRecord]:
        """The triple of spec §1.7, built like :func:`bronze.envelope.primary_key_change` but
        with the ``transaction`` blocks that builder cannot add."""
        old_key, new_key = {"id": op.old_id}, {"id": op.new_id}
        self.db.apply(op)
        after = dict(self.db.rows[op.table][op.new_id])
        if op.toast:
            after[TOAST_COLUMN] = UNAVAILABLE_VALUE
        delete = self.data(
            Op.DELETE,
            op.table,
            op.old_id,
            src,
            block(op.table),
            before=old_key,
            headers=((HEADER_NEW_KEY, orjson.dumps(new_key).decode()),),
        )
        create = self.data(
            Op.CREATE,
            op.table,
            op.new_id,
            src,
            block(op.table),
            after=after,
            headers=((HEADER_OLD_KEY, orjson.dumps(old_key).decode()),),
        )
        return [delete, tombstone_for(delete), create]


# --- strategies ----------------------------------------------------------------------------


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
    db: _Db,
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
    interleaved with the next one; every source style of :data:`STYLES`.

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
    db = _Db.empty(tables)
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
        transactions.append(Transaction(tuple(ops), draw(st.booleans())))
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


def to_jsonl(records: Iterable[ConnectRecord]) -> list[bytes]:
    """Write records as ``kafka_json`` lines (no trailing newline), as ``debezium_json`` reads.

    Each line is ``{"topic", "key", "value"[, "headers"]}``: key and value as JsonConverter
    writes them with ``schemas.enable=true`` (``{"schema", "payload"}``; null for a null key or a
    tombstone's value), headers as ``[{"key", "value"}]`` (values are JSON text).

    Args:
        records: The records.

    Returns:
        One line per record.
    """
    lines: list[bytes] = []
    for record in records:
        key_text, value_text = to_json_converter(record, schemas_enable=True)
        line: dict[str, Any] = {
            "topic": record.topic,
            "key": None if key_text is None else orjson.loads(key_text),
            "value": None if value_text is None else orjson.loads(value_text),
        }
        if record.headers:
            line["headers"] = [{"key": k, "value": v} for k, v in record.headers]
        lines.append(orjson.dumps(line))
    return lines
