"""Type tables: source types, edge values, and how the database and silver are read back.

Everything a connector's table needs is here; :mod:`tests.fidelity.suite` runs a table.

A value is compared in a *canonical* form chosen per column, because Python cannot hold every
value Spark and the databases can (``collect()`` of a ``date`` 'infinity' or a year-0 timestamp
raises): dates as days since 1970-01-01, timestamps as microseconds since the epoch (UTC),
times as microseconds past midnight, binaries as ``bytes``, floats as the exact float of their
type (a ``real`` as the float32 value), NaN equal to NaN.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

__all__ = [
    "Connector",
    "Edge",
    "Reading",
    "TypeCase",
    "TypeTable",
    "array_of",
    "c1",
    "float32",
    "same",
]


def _identity(value: Any) -> Any:
    return value


@dataclass(frozen=True)
class Edge:
    """One edge value of a column.

    Attributes:
        literal: The SQL literal inserted (``'infinity'``, ``B'101'``, ``NULL``...).
        expected: The canonical value silver must hold, and the database reading gives.
        c1: For a value without a representation in its Connect type (contract C1): a
            fragment of the reason the agent gives. Silver then holds NULL and a
            ``kind = 'value'`` quarantine row; ``expected`` is unused.
        text: The database's text form of a C1 value (the header's ``text``).
    """

    literal: str
    expected: Any = None
    c1: str | None = None
    text: str | None = None


def c1(literal: str, reason: str, text: str) -> Edge:
    """An edge whose value has no representation: silver NULL plus a value quarantine row."""
    return Edge(literal, None, reason, text)


@dataclass(frozen=True)
class Reading:
    """How the test reads one column's value, on each side, in its canonical form.

    Attributes:
        db_sql: SQL over the database column (``{c}``), run with the plain driver.
        db_map: The driver's value -> canonical (never called with None).
        silver_sql: Spark SQL over the silver column (``{c}``).
        silver_map: The collected value -> canonical (never called with None).
    """

    db_sql: str = "{c}"
    db_map: Callable[[Any], Any] = _identity
    silver_sql: str = "{c}"
    silver_map: Callable[[Any], Any] = _identity


@dataclass(frozen=True)
class TypeCase:
    """One column of a type table.

    Attributes:
        column: Column name.
        sql_type: The type as the DDL writes it.
        edges: Edge values, one per row (row k holds edge k; rows past the last hold NULL).
        silver_type: The silver column's Spark type (``simpleString``), per docs/types.md.
        reading: How each side is read back.
    """

    column: str
    sql_type: str
    edges: tuple[Edge, ...]
    silver_type: str
    reading: Reading = field(default_factory=Reading)


@dataclass(frozen=True)
class TypeTable:
    """A connector's type table: one source table of ``cases`` columns plus ``id``.

    Attributes:
        connector: Debezium connector name (``postgresql``, ``mysql``...).
        cases: The columns.
        text_sql: SQL giving the database's text form of a column (``{c}``), for C1 values.
    """

    connector: str
    cases: tuple[TypeCase, ...]
    text_sql: str

    @property
    def depth(self) -> int:
        """Rows with edge values (the longest column); one all-NULL row follows them."""
        return max(len(c.edges) for c in self.cases)

    def edge(self, case: TypeCase, row: int) -> Edge | None:
        """Edge ``row`` (1-based) of ``case``; None: the row holds NULL there."""
        return case.edges[row - 1] if row <= len(case.edges) else None

    def literals(self, row: int) -> dict[str, str]:
        """Row ``row``'s values as SQL literals, by column."""
        out = {}
        for case in self.cases:
            edge = self.edge(case, row)
            out[case.column] = "NULL" if edge is None else edge.literal
        return out


class Connector(Protocol):
    """What the suite needs from a connector's fixture (see ``test_type_fidelity.py``)."""

    table: TypeTable
    source: str
    """The configured source name (silver tables are ``<source>__<schema>__<table>``)."""
    collection: str
    """``<schema|db>.<table>`` of the captured table."""

    def execute(self, *statements: str) -> None:
        """Run statements on the source (autocommit)."""

    def insert(self, row_id: int, literals: Mapping[str, str]) -> None:
        """Insert one row: ``id`` and the columns' SQL literals."""

    def select(self, expressions: Sequence[str]) -> dict[int, tuple[Any, ...]]:
        """``SELECT id, <expressions>`` from the table, by id, with the plain driver."""


def float32(value: float) -> float:
    """The float32 nearest ``value``, as a Python float (what a Spark FLOAT collects as)."""
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def array_of(
    element: Reading, *, db_from: str = "unnest({c}) WITH ORDINALITY AS u(e, o)"
) -> Reading:
    """The reading of a 1-D array whose elements are read as ``element`` (PostgreSQL:
    ``ARRAY(SELECT <element of e> FROM unnest(c) ... ORDER BY o)``; Spark: ``transform``)."""
    db_sql = (
        f"CASE WHEN {{c}} IS NULL THEN NULL ELSE ARRAY(SELECT "
        f"{element.db_sql.replace('{c}', 'e')} FROM {db_from} ORDER BY o) END"
    )
    silver_sql = f"transform({{c}}, e -> {element.silver_sql.replace('{c}', 'e')})"

    def db_map(values: Sequence[Any]) -> list[Any]:
        return [None if v is None else element.db_map(v) for v in values]

    def silver_map(values: Sequence[Any]) -> list[Any]:
        return [None if v is None else element.silver_map(v) for v in values]

    return Reading(db_sql, db_map, silver_sql, silver_map)


def same(a: Any, b: Any) -> bool:
    """Equality for canonical values: NaN equals NaN, bytes-likes by content, Decimals by
    value, containers element by element (a float never equals an int-typed value silently:
    ``1 == 1.0`` is accepted only where both are numbers of one kind)."""
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b
    if isinstance(a, (bytes, bytearray, memoryview)) and isinstance(
        b, (bytes, bytearray, memoryview)
    ):
        return bytes(a) == bytes(b)
    if isinstance(a, Decimal) and isinstance(b, Decimal):
        return a == b
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if type(a) is not type(b) and not (a is None or b is None):
        return False
    return bool(a == b)
