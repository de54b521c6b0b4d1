"""Long deterministic Debezium PostgreSQL streams of a small shop, for tests, fixtures, benchmarks.

:func:`postgres_stream` walks a seeded ``random.Random`` through the :data:`SHOP` database
(``customers``, ``orders``): an initial snapshot, then transactions of inserts, updates (a third
of the customer updates leave ``notes`` unchanged, so it arrives as the TOAST placeholder),
deletes and primary-key moves, committed in pairs that ran concurrently (interleaved per-row
LSNs, either one started first). The walk only chooses operations: the records are the ones
:meth:`tests.pgmodel.history.SourceHistory.records` emits, the generator the hypothesis
histories use too, and the source's final state comes from applying the operations directly.

Hypothesis draws short histories that shrink; this walk makes long ones fast (a benchmark asks
for 10^5 transactions) that stay the same for a seed, byte for byte, so fixtures can be committed.

Example:
    >>> stream = postgres_stream(snapshot_rows=1, transactions=2, seed=1)
    >>> sorted(stream.final_state)
    ['customers', 'orders']
    >>> stream.records[0].topic, stream.records[0].value["op"]
    ('shop.public.customers', 'r')
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from os import PathLike
from typing import Final

from bronze.envelope import ConnectRecord
from tests.pgmodel.history import (
    STYLES,
    TOAST_COLUMN,
    TS_START,
    Column,
    Database,
    DbState,
    Delete,
    Insert,
    MoveKey,
    Operation,
    Row,
    SourceHistory,
    Transaction,
    Update,
    to_lines,
)

__all__ = ["SHOP", "SyntheticStream", "postgres_stream", "write_lines"]

_ID: Final = Column("id", "int32", optional=False)
SHOP: Final = Database(
    "shop",
    "shop",
    (
        (
            "customers",
            (
                _ID,
                Column("name", optional=False),
                Column("email"),
                Column(TOAST_COLUMN),
                Column("updated_at", "int64", logical="io.debezium.time.MicroTimestamp"),
            ),
        ),
        (
            "orders",
            (
                _ID,
                Column("customer_id", "int32", optional=False),
                Column("amount_cents", "int64", optional=False),
                Column("status", optional=False),
            ),
        ),
    ),
)
"""The shop: server and database ``shop``, topics ``shop.public.customers`` and ``...orders``."""

_DATA_OPS: Final = frozenset({"c", "u", "d", "r"})


@dataclass(slots=True)
class SyntheticStream:
    """A generated stream.

    Attributes:
        records: The records in emission order (a tombstone's value is None).
        final_state: table -> id -> row, the source after the last transaction.
        data_events: Number of change events (c, u, d, r), excluding tombstones and BEGIN/END.
    """

    records: list[ConnectRecord] = field(default_factory=list)
    final_state: dict[str, dict[int, Row]] = field(default_factory=dict)
    data_events: int = 0

    def lines(self, line_format: str = "kafka_json", *, schemas: bool = True) -> Iterator[bytes]:
        """Serialize the records, one line each (without the newline).

        Args:
            line_format: One of :data:`tests.pgmodel.history.LINE_FORMATS`.
            schemas: Write JsonConverter's ``{"schema", "payload"}`` form.

        Returns:
            The lines (see :func:`tests.pgmodel.history.to_lines`).
        """
        return to_lines(self.records, line_format, schemas=schemas)


class _Walk:
    """Chooses the shop's operations, each valid against the state before it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.db = DbState.empty(SHOP, ("customers", "orders"))
        self.next_id = {"customers": 1, "orders": 1}
        # Row values only: the emitter keeps its own clock for ts_ms.
        self.clock_ms = TS_START

    def new_id(self, table: str) -> int:
        ident = self.next_id[table]
        self.next_id[table] += 1
        return ident

    def values(self, table: str, ident: int) -> Row:
        r = self.rng
        if table == "customers":
            return {
                "name": f"customer {ident}",
                "email": f"c{ident}@example.com" if r.random() < 0.9 else None,
                "notes": "x" * r.randint(0, 40),
                "updated_at": self.clock_ms * 1000,
            }
        return {
            "customer_id": r.choice(list(self.db.rows["customers"]) or [1]),
            "amount_cents": r.randint(100, 100_000),
            "status": "new",
        }

    def apply(self, op: Operation) -> Operation:
        self.db.apply(op)
        return op

    def snapshot(self, rows_per_table: int) -> list[Insert]:
        return [
            self.insert(table) for table in ("customers", "orders") for _ in range(rows_per_table)
        ]

    def insert(self, table: str) -> Insert:
        ident = self.new_id(table)
        op = Insert(table, ident, self.values(table, ident))
        self.db.apply(op)
        return op

    def operation(self) -> Operation:
        r = self.rng
        table = "customers" if r.random() < 0.5 else "orders"
        rows = self.db.rows[table]
        roll = r.random()
        if not rows or roll < 0.45:
            return self.insert(table)
        ident = r.choice(list(rows))
        if roll < 0.80:
            if table == "orders":
                changes: Row = {"status": r.choice(["paid", "shipped", "cancelled"])}
                return self.apply(Update(table, ident, changes))
            changes = {"email": f"new{r.randint(0, 999)}@example.com"}
            changes["updated_at"] = self.clock_ms * 1000
            toast = rows[ident][TOAST_COLUMN] is not None and r.random() < 0.3
            return self.apply(Update(table, ident, changes, toast))
        if roll < 0.93:
            return self.apply(Delete(table, ident))
        return self.apply(MoveKey(table, ident, self.new_id(table), {}))

    def transactions(self, count: int) -> list[Transaction]:
        """``count`` transactions, committed in pairs that ran concurrently."""
        out: list[Transaction] = []
        while len(out) < count:
            pair = min(2, count - len(out))
            started_first = self.rng.random() < 0.5
            for n in range(pair):
                self.clock_ms += self.rng.randint(1, 50)
                ops = tuple(self.operation() for _ in range(self.rng.randint(1, 4)))
                out.append(Transaction(ops, n == 0 and pair == 2, started_first))
        return out


def postgres_stream(
    *,
    snapshot_rows: int = 5,
    transactions: int = 20,
    seed: int = 7,
    source_style: str = "sequence",
) -> SyntheticStream:
    """Generate a PostgreSQL connector stream of the shop.

    Args:
        snapshot_rows: Rows per table in the initial snapshot.
        transactions: Streamed transactions after the snapshot.
        seed: Random seed; the same seed gives the same stream.
        source_style: One of :data:`tests.pgmodel.history.STYLES`: ``sequence`` (Debezium 2.x
            ``source.sequence``), ``commit_lsn`` (``source.commit_lsn``) or ``lsn_only``
            (Debezium 1.2: ``lsn`` and ``txId`` only).

    Returns:
        The stream and the source's final state.

    Raises:
        ValueError: Unknown ``source_style``.
    """
    if source_style not in STYLES:
        raise ValueError(f"unknown source_style {source_style!r}")
    walk = _Walk(random.Random(seed))
    snapshot = walk.snapshot(snapshot_rows)
    history = SourceHistory(
        ("customers", "orders"),
        tuple(walk.transactions(transactions)),
        tuple(snapshot),
        source_style,
        SHOP,
    )
    records = history.records()
    data = sum(1 for r in records if r.value is not None and r.value.get("op") in _DATA_OPS)
    return SyntheticStream(records, history.source_state(), data)


def write_lines(path: str | PathLike[str], lines: Iterable[bytes]) -> int:
    """Write lines to ``path`` with newlines.

    Args:
        path: The file (replaced).
        lines: The lines, without newlines.

    Returns:
        The number written.
    """
    n = 0
    with open(path, "wb") as f:
        for line in lines:
            f.write(line)
            f.write(b"\n")
            n += 1
    return n
