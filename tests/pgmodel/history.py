"""Source histories of a small PostgreSQL database and the Debezium records they produce.

This is the one Debezium PostgreSQL generator of the tests: :mod:`tests.pgmodel.strategies`
draws histories with hypothesis, :mod:`tests.pgmodel.streams` walks long ones with a seeded
``random.Random`` (for fixtures and benchmarks); both emit through :meth:`SourceHistory.records`.

A :class:`SourceHistory` is what happened in a PostgreSQL :class:`Database`: an optional initial
snapshot, then transactions, in commit order, of inserts, updates, deletes, primary-key moves,
truncates, updates whose unchanged TOAST column (``notes``) arrives as the unavailable-value
placeholder, and ``ADD COLUMN`` (later rows carry a new nullable column, and the table's value
schema changes).

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
  (Debezium 1.2). A transaction may be *interleaved* with the next one: the two ran concurrently,
  their per-row LSNs alternate, and either may have started first, so per-row LSN order is not
  commit order (bronze positions must get it right anyway).

PostgreSQL's logical decoding carries no DDL: a column added after the last change of its table
is invisible to every consumer. :meth:`SourceHistory.final_state` therefore shows each table with
the columns of the last value schema emitted for it; :meth:`SourceHistory.source_state` gives the
unprojected rows.

:func:`to_lines` writes records in the line formats the ``debezium_json`` source reads
(:data:`LINE_FORMATS`); :func:`to_jsonl` is its ``kafka_json`` form with inline schemas.

Example:
    >>> h = SourceHistory(("customers",), (Transaction((Insert("customers", 1, {"qty": 2}),)),))
    >>> [r.topic for r in h.records()]
    ['hist.transaction', 'hist.public.customers', 'hist.transaction']
    >>> h.final_state()
    {'public.customers': {'{"id":1}': {'id': 1, 'qty': 2, 'label': None, 'notes': None}}}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

import orjson

from bronze.connect_schema import envelope_schema, primitive, source_schema, struct
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
from tests.pgmodel.reference import LiveRows, canonical_json

__all__ = [
    "SCHEMA",
    "TABLES",
    "BASE_COLUMNS",
    "TOAST_COLUMN",
    "STYLES",
    "LINE_FORMATS",
    "Column",
    "Database",
    "HIST",
    "Row",
    "DbState",
    "Insert",
    "Update",
    "Delete",
    "MoveKey",
    "Truncate",
    "AddColumn",
    "Operation",
    "Transaction",
    "SourceHistory",
    "to_lines",
    "to_jsonl",
]

SCHEMA: Final = "public"
TABLES: Final = ("customers", "orders", "items")
"""Table names of :data:`HIST`, in the order histories use them."""
BASE_COLUMNS: Final = ("id", "qty", "label", "notes")
"""Every :data:`HIST` table's columns before any ADD COLUMN; ``id`` is the primary key."""
TOAST_COLUMN: Final = "notes"
"""The TOAST-like text column: an update that leaves it unchanged may carry the placeholder."""
STYLES: Final = ("sequence", "commit_lsn", "lsn_only")
"""How ``source`` blocks carry commit order: ``source.sequence`` (Debezium 2.x),
``source.commit_lsn``, or only ``lsn``/``txId`` (Debezium 1.2, positions derived by bronze)."""
LINE_FORMATS: Final = ("kafka_json", "key_tab_value", "envelope")
"""Line formats of :func:`to_lines`."""

SNAPSHOT_LSN: Final = 10_000
"""LSN of the snapshot point; streamed LSNs come after it."""
LSN_STEP: Final = 16
TXID_START: Final = 500
TS_START: Final = 1_700_000_000_000
VERSION: Final = "2.7.0.Final"

Row: TypeAlias = dict[str, Any]


@dataclass(frozen=True)
class Column:
    """A column of a source table, as its Connect field.

    Attributes:
        name: Column name.
        type: Connect primitive type.
        optional: Nullable.
        logical: Connect logical type name (``io.debezium.time.MicroTimestamp``), if any.
    """

    name: str
    type: str = "string"
    optional: bool = True
    logical: str | None = None

    def schema(self) -> dict[str, Any]:
        """The Connect field schema of the column."""
        if self.logical is None:
            return schema_field(self.name, self.type, optional=self.optional)
        logical = primitive(self.type, optional=self.optional, name=self.logical, version=1)
        return schema_field(self.name, logical)


@dataclass(frozen=True)
class Database:
    """The source database a history runs in.

    Attributes:
        server: Logical server name (``topic.prefix``); topics are ``<server>.public.<table>``.
        name: Database name (``source.db``).
        layouts: ``(table, columns)`` pairs; every table's first column is the ``int32``
            primary key ``id``. Columns added by :class:`AddColumn` are optional strings.
    """

    server: str
    name: str
    layouts: tuple[tuple[str, tuple[Column, ...]], ...]

    def columns(self, table: str) -> tuple[Column, ...]:
        """The columns ``table`` starts with.

        Raises:
            KeyError: No such table.
        """
        return dict(self.layouts)[table]


HIST: Final = Database(
    "hist",
    "histdb",
    tuple(
        (
            table,
            (
                Column("id", "int32", optional=False),
                Column("qty", "int32"),
                Column("label"),
                Column("notes"),
            ),
        )
        for table in TABLES
    ),
)
"""The hypothesis histories' database: :data:`TABLES`, each with :data:`BASE_COLUMNS`."""


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
        interleaved_with_next: The next transaction (which commits after this one) ran
            concurrently with this one, and their per-row LSNs alternate. Ignored on the last
            transaction and on a transaction already paired with the one before it.
        started_first: With ``interleaved_with_next``: this transaction started first (lower
            txId, first LSN) and still commits first. By default the next one started first,
            the harder case: per-row LSN order then puts a later commit's rows first.
    """

    ops: tuple[Operation, ...]
    interleaved_with_next: bool = False
    started_first: bool = False


def _tables_of(op: Operation) -> tuple[str, ...]:
    """Tables whose change events ``op`` emits (none for ADD COLUMN)."""
    if isinstance(op, Truncate):
        return op.tables
    if isinstance(op, AddColumn):
        return ()
    return (op.table,)


@dataclass
class DbState:
    """The source database's tables: rows per table, columns per table.

    Applies operations directly (the ground truth), and tells generators what is valid next.

    Attributes:
        rows: table -> primary key -> row.
        columns: table -> column names, in order (``ADD COLUMN`` appends).
    """

    rows: dict[str, dict[int, Row]]
    columns: dict[str, list[str]]

    @classmethod
    def empty(cls, database: Database, tables: Iterable[str]) -> DbState:
        """Empty ``tables`` of ``database``, with their initial columns."""
        names = list(tables)
        return cls(
            {t: {} for t in names},
            {t: [c.name for c in database.columns(t)] for t in names},
        )

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
        tables: The tables (some of ``database``'s).
        transactions: Streamed transactions, in commit order.
        snapshot: Rows of the initial snapshot (emitted as ``r``), before any transaction.
        style: One of :data:`STYLES`.
        database: Server, database and table layouts (:data:`HIST` unless told).
    """

    tables: tuple[str, ...]
    transactions: tuple[Transaction, ...]
    snapshot: tuple[Insert, ...] = ()
    style: str = "sequence"
    database: Database = HIST

    def __post_init__(self) -> None:
        if self.style not in STYLES:
            raise ValueError(f"style {self.style!r} is not one of {STYLES}")
        known = {table for table, _ in self.database.layouts}
        if not set(self.tables) <= known:
            raise ValueError(f"tables {sorted(set(self.tables) - known)} are not in the database")

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
        db = DbState.empty(self.database, self.tables)
        for op in self.operations():
            db.apply(op)
        return db.rows

    def final_state(self) -> LiveRows:
        """The ground truth silver must equal, computed by applying the operations directly.

        Returns:
            collection -> canonical key JSON -> row, each table projected on the columns of
            the last value schema emitted for it (see the module docstring); tables without
            rows are left out, as :func:`tests.pgmodel.reference.replay` leaves them out.
        """
        db = DbState.empty(self.database, self.tables)
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

    An interleaved pair: the transaction that started first has the lower txId and the first
    LSN (the second, later-committing one unless the first has ``started_first``); then the LSNs
    alternate; then both commit, in order.
    """
    plans: list[tuple[int, list[int], int]] = []
    lsn, txid, i = SNAPSHOT_LSN, TXID_START, 0
    while i < len(transactions):
        first = transactions[i]
        if first.interleaved_with_next and i + 1 < len(transactions):
            a, b = _slots(first), _slots(transactions[i + 1])
            lsns_a: list[int] = []
            lsns_b: list[int] = []
            starts = [(a, lsns_a), (b, lsns_b)]
            if not first.started_first:
                starts.reverse()
            for step in range(max(a, b)):
                for slots, lsns in starts:
                    if step < slots:
                        lsn += LSN_STEP
                        lsns.append(lsn)
            txid_a, txid_b = (txid, txid + 1) if first.started_first else (txid + 1, txid)
            plans.append((txid_a, lsns_a, lsn + LSN_STEP))
            plans.append((txid_b, lsns_b, lsn + 2 * LSN_STEP))
            lsn, txid, i = lsn + 2 * LSN_STEP, txid + 2, i + 2
            continue
        lsns = [lsn + LSN_STEP * (n + 1) for n in range(_slots(first))]
        lsn += LSN_STEP * (len(lsns) + 1)
        plans.append((txid, lsns, lsn))
        txid, i = txid + 1, i + 1
    return plans


class _Emitter:
    """Walks a history in commit order and emits what the connector would."""

    def __init__(self, history: SourceHistory) -> None:
        self.history = history
        self.server = history.database.server
        self.db = DbState.empty(history.database, history.tables)
        # Columns added later are optional strings (ADD COLUMN ... text).
        self.columns = {
            (table, c.name): c for table in history.tables for c in history.database.columns(table)
        }
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
        return f"{self.server}.{SCHEMA}.{table}"

    def key_schema(self, table: str) -> dict[str, Any]:
        return struct([schema_field("id", "int32")], name=f"{self.topic(table)}.Key")

    def value_schema(self, table: str) -> dict[str, Any]:
        columns = self.db.columns[table]
        cached = self.value_schemas.get((table, len(columns)))
        if cached is None:
            prefix = self.topic(table)
            fields = [self.columns.get((table, c), Column(c)).schema() for c in columns]
            row = struct(fields, name=f"{prefix}.Value")
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
            "name": self.server,
            "ts_ms": self.ts,
            "snapshot": snapshot,
            "db": self.history.database.name,
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
            topic = f"{self.server}.transaction"
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


def to_lines(
    records: Iterable[ConnectRecord], line_format: str = "kafka_json", *, schemas: bool = True
) -> Iterator[bytes]:
    """Write records as lines (without the newline) that the ``debezium_json`` source reads.

    Key and value are written as JsonConverter writes them
    (:func:`bronze.envelope.to_json_converter`: ``{"schema", "payload"}`` with ``schemas``, the
    bare payload without; a null key or a tombstone's value is ``null``).

    Args:
        records: The records, in emission order.
        line_format: One of :data:`LINE_FORMATS`: ``kafka_json`` (one object ``{"topic", "key",
            "value"[, "headers"]}``, headers as ``[{"key", "value"}]``), ``key_tab_value`` (key
            JSON, a tab, value JSON), or ``envelope`` (the value alone, without tombstones, as
            Debezium Server's value-only output).
        schemas: JsonConverter's ``schemas.enable``.

    Yields:
        One line per record (``envelope``: per record with a value).

    Raises:
        ValueError: Unknown ``line_format``.
    """
    if line_format not in LINE_FORMATS:
        raise ValueError(f"unknown line format {line_format!r}")
    for record in records:
        key_text, value_text = to_json_converter(record, schemas_enable=schemas)
        key = b"null" if key_text is None else key_text.encode()
        value = b"null" if value_text is None else value_text.encode()
        if line_format == "envelope":
            if record.value is not None:
                yield value
        elif line_format == "key_tab_value":
            yield key + b"\t" + value
        else:
            # Assembled from the converter's text, not re-parsed: benchmarks write 10^5+ lines.
            line = b'{"topic":' + orjson.dumps(record.topic) + b',"key":' + key
            line += b',"value":' + value
            if record.headers:
                headers = [{"key": k, "value": v} for k, v in record.headers]
                line += b',"headers":' + orjson.dumps(headers)
            yield line + b"}"


def to_jsonl(records: Iterable[ConnectRecord]) -> list[bytes]:
    """Write records as ``kafka_json`` lines with inline schemas (see :func:`to_lines`).

    Args:
        records: The records.

    Returns:
        One line per record.
    """
    return list(to_lines(records, "kafka_json", schemas=True))
