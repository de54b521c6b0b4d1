"""The standard randomized history every contract driver runs on its source.

A history is engine-neutral: seeded transactions of inserts, updates, deletes and primary-key
changes over :data:`TABLES`, generated against a model of the tables, so the model is the source's
state after the history and :func:`expected_events` is the change stream a connector must land, in
commit order. Drivers turn the same changes into SQL (:func:`statements`) or Debezium JSON.
"""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "TABLES",
    "Change",
    "Event",
    "History",
    "State",
    "TableSpec",
    "Transaction",
    "expected_events",
    "statements",
]

Op = Literal["c", "u", "d", "k"]
"""insert, update, delete, primary-key change (Debezium: a delete of the old key + a create)."""

State = dict[str, dict[int, dict[str, Any]]]
"""table -> primary key -> row (column -> value)."""

Event = tuple[str, str, int]
"""One landed data event as the suite compares it: (table, Debezium op, key ``id``)."""


@dataclass(frozen=True, slots=True)
class TableSpec:
    """One table of the history: an ``int`` primary key ``id`` and some plain columns.

    Attributes:
        name: The table name (the same in every source).
        columns: (name, kind) of every column but ``id``; kind is ``int`` or ``text``.
    """

    name: str
    columns: tuple[tuple[str, str], ...]


TABLES = (
    TableSpec("items", (("name", "text"), ("qty", "int"))),
    TableSpec("orders", (("item", "int"), ("status", "text"), ("amount", "int"))),
)
"""Small and of types every connector and silver decode alike, so that values compare equal."""


@dataclass(frozen=True, slots=True)
class Change:
    """One row change.

    Attributes:
        op: What happens (:data:`Op`).
        table: The table.
        key: The row's primary key before the change (the new row's key for ``c``).
        row: The full row after the change (None for ``d``).
        new_key: For ``k``: the key the row moves to (also ``row["id"]``).
    """

    op: Op
    table: str
    key: int
    row: dict[str, Any] | None
    new_key: int | None = None


Transaction = tuple[Change, ...]


@dataclass(slots=True)
class History:
    """A seeded history and the state it has led the tables to.

    Args:
        seed: The random seed; the same seed gives the same history.
    """

    seed: int
    state: State = field(default_factory=dict)
    _rng: random.Random = field(init=False)
    _next_id: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self.state = {t.name: {} for t in TABLES}
        self._next_id = dict.fromkeys(self.state, 1)

    def initial_rows(self, per_table: int) -> Transaction:
        """Inserts of ``per_table`` rows into every table (what a snapshot will read)."""
        return tuple(self._insert(t) for t in TABLES for _ in range(per_table))

    def transactions(
        self, count: int, *, max_changes: int = 4, size: int | None = None
    ) -> list[Transaction]:
        """The next ``count`` transactions of 1 to ``max_changes`` random changes each (of
        exactly ``size`` changes when given)."""
        return [
            tuple(self._change() for _ in range(size or self._rng.randint(1, max_changes)))
            for _ in range(count)
        ]

    def snapshot(self) -> State:
        """A copy of the state now (the history goes on changing its own)."""
        return copy.deepcopy(self.state)

    def _change(self) -> Change:
        spec = self._rng.choice(TABLES)
        rows = self.state[spec.name]
        roll = self._rng.random()
        if not rows or roll < 0.35:
            return self._insert(spec)
        key = self._rng.choice(sorted(rows))
        if roll < 0.7:
            row = {"id": key, **self._values(spec)}
            rows[key] = row
            return Change("u", spec.name, key, dict(row))
        if roll < 0.85:
            del rows[key]
            return Change("d", spec.name, key, None)
        new_key = self._new_key(spec.name)
        row = {**rows.pop(key), "id": new_key}
        rows[new_key] = row
        return Change("k", spec.name, key, dict(row), new_key)

    def _insert(self, spec: TableSpec) -> Change:
        key = self._new_key(spec.name)
        row = {"id": key, **self._values(spec)}
        self.state[spec.name][key] = row
        return Change("c", spec.name, key, dict(row))

    def _new_key(self, table: str) -> int:
        key = self._next_id[table]
        self._next_id[table] += 1
        return key

    def _values(self, spec: TableSpec) -> dict[str, Any]:
        rng = self._rng
        return {
            name: rng.randint(0, 999) if kind == "int" else f"{name}-{rng.randint(0, 99999)}"
            for name, kind in spec.columns
        }


def expected_events(transactions: list[Transaction]) -> list[Event]:
    """The data events a connector lands for ``transactions``, in commit order."""
    events: list[Event] = []
    for transaction in transactions:
        for change in transaction:
            if change.op == "k":
                assert change.new_key is not None
                events += [(change.table, "d", change.key), (change.table, "c", change.new_key)]
            else:
                events.append((change.table, change.op, change.key))
    return events


def statements(change: Change, table: str) -> tuple[str, tuple[Any, ...]]:
    """The SQL (``%s`` parameters: psycopg and PyMySQL alike) that makes ``change`` on a server.

    Args:
        change: The change.
        table: The table's qualified, quoted name on that server.

    Returns:
        The statement and its parameters.
    """
    if change.op == "d":
        return f"DELETE FROM {table} WHERE id = %s", (change.key,)
    assert change.row is not None
    names = list(change.row)
    if change.op == "c":
        columns, marks = ", ".join(names), ", ".join(["%s"] * len(names))
        return f"INSERT INTO {table} ({columns}) VALUES ({marks})", tuple(change.row.values())
    if change.op == "k":
        return f"UPDATE {table} SET id = %s WHERE id = %s", (change.new_key, change.key)
    settings = ", ".join(f"{n} = %s" for n in names if n != "id")
    values = tuple(v for n, v in change.row.items() if n != "id")
    return f"UPDATE {table} SET {settings} WHERE id = %s", (*values, change.key)
