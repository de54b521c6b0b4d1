"""An independent read of a source table: every value in a canonical text of its own.

Reconciliation must not see the source through the capture agent's eyes (its handling modes,
decoders and failures are what it checks), so this package reads the database with its own
connection and asks the **database** for a canonical text of each value, chosen per catalog
type. :mod:`gold.reconcile_compare` then turns silver's values into the same text with Spark
expressions and compares the two, value by value.

A canonical form (:class:`Canon`) is a small contract both sides meet:

========================  ==========================================================================
canon                     text
========================  ==========================================================================
``TEXT``                  the value's text as the database prints it (strings, enums, JSON byte for
                          byte, uuids, network addresses)
``INTEGER``               a decimal integer (integers of any width and sign, time of day and
                          ``TIME`` durations as microseconds, ``YEAR``, MySQL ``BIT`` as unsigned)
``DECIMAL``               the exact decimal text with the source's scale (``99999999.99``)
``FLOAT32``/``FLOAT64``   a text the float parses back from exactly (``NaN``, ``Infinity`` too)
``BOOLEAN``               ``true`` / ``false``
``BITS``                  a string of ``0``/``1``, as long as the bit string
``DAYS``                  days since 1970-01-01 (proleptic Gregorian); ``infinity``/``-infinity``;
                          ``invalid <text>`` for a date the database holds but no calendar has
``MICROS``                microseconds since 1970-01-01 00:00 (UTC for instants); ``infinity``,
                          ``-infinity``, ``invalid <text>`` as for dates
``INTERVAL``              ``<months> <days> <microseconds>``, PostgreSQL's three exact parts
``HEX``                   lowercase hexadecimal bytes
``ARRAY``                 PostgreSQL's array text (``{{1,2},{3,NULL}}``, quoted elements)
``NONE``                  no independent normalisation (yet): the column is *not comparable*
========================  ==========================================================================

Readers are registered per connector in :data:`SOURCE_READERS`; a reader for a new connector
is one module with a ``read_tables`` function of the :class:`SourceReader` shape.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

__all__ = [
    "Canon",
    "Family",
    "SourceColumn",
    "SourceReader",
    "SourceTable",
    "SOURCE_READERS",
    "reader_for",
]


class Canon(enum.Enum):
    """The canonical text a source column is read as (see the module docstring)."""

    TEXT = "text"
    INTEGER = "integer"
    DECIMAL = "decimal"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    BITS = "bits"
    DAYS = "days"
    MICROS = "micros"
    INTERVAL = "interval"
    HEX = "hex"
    ARRAY = "array"
    NONE = "none"


class Family(enum.Enum):
    """What kind of source type a column has, for the lossy-by-config rules."""

    INTEGER = "integer"
    UNSIGNED_BIGINT = "unsigned bigint"
    DECIMAL = "decimal"
    FLOAT = "float"
    DATE = "date"
    TIMESTAMP = "timestamp"
    TIME = "time"
    INTERVAL = "interval"
    BINARY = "binary"
    OTHER = "other"


@dataclass(frozen=True, slots=True)
class SourceColumn:
    """One column of a source table and how it is read.

    Attributes:
        name: The column name.
        type_text: The type as the database names it (``numeric(10,2)``, ``bigint unsigned``).
        canon: The canonical text the reader produces for it.
        family: The kind of type, for the lossy-by-config rules.
        length: For ``BITS``: the declared bit length (None: varying).
        element: For ``ARRAY``: the element's canonical form.
        why_not: For ``NONE``: why it has no normalisation.
    """

    name: str
    type_text: str
    canon: Canon
    family: Family = Family.OTHER
    length: int | None = None
    element: Canon | None = None
    why_not: str = ""


@dataclass(frozen=True, slots=True)
class SourceTable:
    """A source table as read: its columns, key columns and where its rows were staged.

    Rows are staged as JSON lines, one object per row: ``c<i>`` is the canonical text of
    column ``i`` (absent: NULL), ``u`` the reason the row could not be read (absent: read).

    Attributes:
        collection: ``<schema>.<table>`` (MySQL: ``<database>.<table>``).
        columns: Every column, in the table's order.
        keys: The primary key's column names, in key order (empty: no key).
        rows: How many rows were staged.
        path: The JSON lines file (None when the table does not exist in the source).
        unreadable: How many rows could not be read (staged with ``u``).
        notes: Remarks (the table does not exist in the source).
    """

    collection: str
    columns: tuple[SourceColumn, ...]
    keys: tuple[str, ...]
    rows: int = 0
    path: Any = None
    unreadable: int = 0
    notes: tuple[str, ...] = field(default_factory=tuple)


class SourceReader(Protocol):
    """Reads source tables into staged JSON lines, in one consistent transaction."""

    def __call__(
        self, config: Any, collections: Sequence[str], work: Any, *, fetch: int
    ) -> dict[str, SourceTable]:
        """Read ``collections`` of the source ``config`` into files under ``work``.

        Args:
            config: The source's config (connection settings, credentials).
            collections: ``<schema>.<table>`` names to read.
            work: A directory for the staged files.
            fetch: Rows per fetch (Python holds one fetch at a time).

        Returns:
            One :class:`SourceTable` per collection (path None when the table is missing).

        Raises:
            SourceUnavailable: The database cannot be reached.
        """
        ...


def _load_pg() -> SourceReader:
    from gold.source_read.pg import read_tables

    return read_tables


def _load_mysql() -> SourceReader:
    from gold.source_read.mysql import read_tables

    return read_tables


def _load_oracle() -> SourceReader:
    from gold.source_read.oracle import read_tables

    return read_tables


def _load_db2() -> SourceReader:
    from gold.source_read.db2 import read_tables

    return read_tables


def _load_yugabytedb() -> SourceReader:
    from gold.source_read.yugabytedb import read_tables

    return read_tables


SOURCE_READERS: dict[str, Callable[[], SourceReader]] = {
    "postgresql": _load_pg,
    "mysql": _load_mysql,
    "mariadb": _load_mysql,
    "oracle": _load_oracle,
    "db2": _load_db2,
    "yugabytedb": _load_yugabytedb,
}
"""Connector -> loader of its independent reader (drivers are imported lazily)."""


def reader_for(connector: str) -> SourceReader | None:
    """The independent reader of a connector, or None when there is none."""
    load = SOURCE_READERS.get(connector)
    return None if load is None else load()


def stage_rows(
    path: Any, rows: Iterator[Sequence[Any]], convert: Sequence[Callable[[Any], str | None]]
) -> tuple[int, int]:
    """Write rows as JSON lines (``c<i>`` texts, ``u`` for an unreadable row).

    Returns:
        (rows written, rows that could not be read).
    """
    import orjson

    written = unreadable = 0
    with open(path, "wb") as out:
        for row in rows:
            record: dict[str, str] = {}
            try:
                for i, (value, conv) in enumerate(zip(row, convert, strict=True)):
                    text = conv(value)
                    if text is not None:
                        record[f"c{i}"] = text
            except (ValueError, TypeError, UnicodeDecodeError) as exc:
                record = {f"c{i}": str(v) for i, v in enumerate(row) if v is not None}
                record["u"] = f"{type(exc).__name__}: {exc}"
                unreadable += 1
            out.write(orjson.dumps(record) + b"\n")
            written += 1
    return written, unreadable


def staged_table(
    collection: str,
    columns: Sequence[SourceColumn],
    keys: Sequence[tuple[int, str]],
    path: Any,
    rows: Iterator[Sequence[Any]],
    convert: Sequence[Callable[[Any], str | None]],
) -> SourceTable:
    """Stage ``rows`` at ``path`` (:func:`stage_rows`); the table as read.

    Args:
        collection: ``<schema>.<table>``.
        columns: The columns, in the table's order.
        keys: ``(position in the key, column name)`` of the key columns.
        path: The JSON lines file to write.
        rows: The rows, fetched as the columns' SQL texts.
        convert: Per column, fetched value -> canonical text.
    """
    written, unreadable = stage_rows(path, rows, convert)
    return SourceTable(
        collection,
        tuple(columns),
        tuple(name for _, name in sorted(keys)),
        rows=written,
        path=path,
        unreadable=unreadable,
    )


def read_each(
    conn: Any,
    collections: Sequence[str],
    work: Any,
    fetch: int,
    read_one: Callable[[Any, str, Path, int, int], SourceTable],
    begin: Callable[[Any], None] = lambda conn: None,
) -> dict[str, SourceTable]:
    """Open the transaction (``begin``), read every collection with ``read_one`` in it, then
    end it (read only: rolled back) and close the connection, also on failure."""
    try:
        begin(conn)
        out = {c: read_one(conn, c, Path(work), i, fetch) for i, c in enumerate(collections)}
        conn.rollback()
        return out
    finally:
        conn.close()


def as_text(value: Any) -> str | None:
    """A fetched value as text (the readers ask the database for text already)."""
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8")
    return str(value)
