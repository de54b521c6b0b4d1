"""Captured PostgreSQL tables: the PostgreSQL side of :mod:`capture.captured_table`.

A :class:`TableSchema` turns a row as pgoutput (or the snapshot) sends it, a tuple of column
texts, into Debezium's key and ``before``/``after`` payloads, and holds the Connect schemas of the
key, the row and the envelope. It is built from catalog facts the agent looks up (columns, types,
``NOT NULL``, the primary key) plus the source's filters and masks; no database access here.

Key columns follow Debezium: the primary key (looked up in the catalog, not the replica identity,
which is every column under REPLICA IDENTITY FULL), else the columns of a ``USING INDEX``
replica identity, else no key; ``message.key.columns`` overrides both. Key columns stay in the key
even when ``column.exclude.list`` drops them from the row.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from capture.captured_table import CapturedTable, CatalogColumn, KeyOverrides, TableFilter
from capture.masking import ColumnMasker
from capture.pg_types import TypeLookup, ValueConversionError, ValueHandling, column_type
from capture.pgoutput import UNCHANGED_TOAST, BinaryDatum, Value

__all__ = ["SYSTEM_SCHEMAS", "CatalogColumn", "TableFilter", "TableSchema", "KeyOverrides"]

SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})
"""Never captured, whatever the include lists say."""


class TableSchema(CapturedTable):
    """Debezium schemas and payload builders for one captured PostgreSQL table.

    Args:
        server: Logical server name (``topic.prefix``).
        schema: PostgreSQL schema.
        table: Table name.
        columns: The columns, in the order tuples send them.
        replica_identity: ``d``, ``n``, ``f`` or ``i``.
        handling: Value-handling modes.
        lookup: ``pg_type`` lookup for non-builtin types.
        column_filter: Include/exclude lists (only the column part is used here).
        key_overrides: ``message.key.columns``.
        masker: Column masks applied to ``before`` and ``after``.
        placeholder: ``toasted.value.placeholder``.
        with_transaction: Add the ``transaction`` block to the envelope schema.
    """

    TEXT_VALUES: ClassVar[bool] = True

    def __init__(
        self,
        server: str,
        schema: str,
        table: str,
        columns: Sequence[CatalogColumn],
        replica_identity: str,
        *,
        handling: ValueHandling,
        lookup: TypeLookup | None,
        column_filter: TableFilter,
        key_overrides: KeyOverrides,
        masker: ColumnMasker | None,
        placeholder: str,
        with_transaction: bool,
    ) -> None:
        super().__init__(
            server,
            schema,
            table,
            columns,
            [column_type(c.type_oid, c.type_modifier, handling, lookup) for c in columns],
            connector="postgresql",
            replica_identity=replica_identity,
            column_filter=column_filter,
            key_overrides=key_overrides,
            masker=masker,
            placeholder=placeholder,
            with_transaction=with_transaction,
            origin_prefix="pg",
        )

    def _convert(self, i: int, value: Value | Any) -> Any:
        if value is UNCHANGED_TOAST:
            return self._placeholder_b64 if self.types[i].is_binary else self.placeholder
        if isinstance(value, BinaryDatum):
            raise ValueConversionError(
                f"{self.collection}.{self.names[i]}: binary-format value; the agent asks "
                "pgoutput for text values"
            )
        return super()._convert(i, value)
