"""Captured PostgreSQL tables: filters, key columns and the Debezium schemas of one table.

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

import base64
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from bronze import connect_schema as cs
from capture.masking import ColumnMasker
from capture.pg_types import (
    ColumnType,
    TypeLookup,
    ValueConversionError,
    ValueHandling,
    column_type,
)
from capture.pgoutput import UNCHANGED_TOAST, BinaryDatum, Value

__all__ = ["SYSTEM_SCHEMAS", "CatalogColumn", "TableFilter", "TableSchema", "KeyOverrides"]

SYSTEM_SCHEMAS = frozenset({"pg_catalog", "information_schema", "pg_toast"})
"""Never captured, whatever the include lists say."""


def _matcher(patterns: Sequence[str]) -> Callable[[str], bool] | None:
    if not patterns:
        return None
    compiled = [re.compile(p, re.IGNORECASE) for p in patterns]
    return lambda name: any(c.fullmatch(name) for c in compiled)


@dataclass(frozen=True, slots=True)
class TableFilter:
    """Schema, table and column include/exclude lists (Debezium regexes, full match, any case)."""

    schema_include: tuple[str, ...] = ()
    schema_exclude: tuple[str, ...] = ()
    table_include: tuple[str, ...] = ()
    table_exclude: tuple[str, ...] = ()
    column_include: tuple[str, ...] = ()
    column_exclude: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, config: Any) -> TableFilter:
        """Read the lists off a source config."""
        return cls(
            tuple(getattr(config, "schema_include_list", ())),
            tuple(getattr(config, "schema_exclude_list", ())),
            tuple(getattr(config, "table_include_list", ())),
            tuple(getattr(config, "table_exclude_list", ())),
            tuple(getattr(config, "column_include_list", ())),
            tuple(getattr(config, "column_exclude_list", ())),
        )

    def table(self, schema: str, table: str) -> bool:
        """Whether ``schema.table`` is captured."""
        if schema in SYSTEM_SCHEMAS:
            return False
        inc, exc = _matcher(self.schema_include), _matcher(self.schema_exclude)
        if (inc is not None and not inc(schema)) or (exc is not None and exc(schema)):
            return False
        name = f"{schema}.{table}"
        inc, exc = _matcher(self.table_include), _matcher(self.table_exclude)
        return not ((inc is not None and not inc(name)) or (exc is not None and exc(name)))

    def column(self, collection: str, column: str) -> bool:
        """Whether ``collection.column`` stays in row images."""
        name = f"{collection}.{column}"
        inc, exc = _matcher(self.column_include), _matcher(self.column_exclude)
        return not ((inc is not None and not inc(name)) or (exc is not None and exc(name)))


@dataclass(frozen=True, slots=True)
class KeyOverrides:
    """``message.key.columns``: ``<table regex>:<col>,<col>;...``."""

    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def parse(cls, value: str | None) -> KeyOverrides:
        """Parse the property (already validated by the config model)."""
        if not value:
            return cls()
        rules = []
        for entry in value.split(";"):
            table, _, columns = entry.strip().rpartition(":")
            if table.strip():
                cols = tuple(c.strip() for c in columns.split(",") if c.strip())
                rules.append((table.strip(), cols))
        return cls(tuple(rules))

    def columns_for(self, collection: str) -> tuple[str, ...] | None:
        """Key columns configured for ``schema.table``, or None."""
        for pattern, columns in self.rules:
            if re.fullmatch(pattern, collection, re.IGNORECASE):
                return columns
        return None


@dataclass(frozen=True, slots=True)
class CatalogColumn:
    """One column as the agent knows it: name, type, ``NOT NULL``, primary-key membership."""

    name: str
    type_oid: int
    type_modifier: int
    not_null: bool = False
    in_primary_key: bool = False
    in_identity: bool = False


class TableSchema:
    """Debezium schemas and payload builders for one captured table.

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
        self.schema = schema
        self.table = table
        self.collection = f"{schema}.{table}"
        self.topic = f"{server}.{schema}.{table}"
        self.snapshot_origin = f"pg:snapshot:{self.collection}"
        self.columns = tuple(columns)
        self.names = tuple(c.name for c in columns)
        self.replica_identity = replica_identity
        self.types: tuple[ColumnType, ...] = tuple(
            column_type(c.type_oid, c.type_modifier, handling, lookup) for c in columns
        )
        self.converters = tuple(t.convert for t in self.types)
        # Text types convert with str(); skipping that call is most of a text column's cost.
        self._fast_converters = tuple(None if c is str else c for c in self.converters)
        override = key_overrides.columns_for(self.collection)
        if override is not None:
            key_names = [n for n in override if n in self.names]
        elif any(c.in_primary_key for c in columns):
            key_names = [c.name for c in columns if c.in_primary_key]
        elif replica_identity == "i":
            key_names = [c.name for c in columns if c.in_identity]
        else:
            key_names = []
        self.key_idx = tuple(self.names.index(n) for n in key_names)
        self.value_idx = tuple(
            i
            for i, c in enumerate(columns)
            if i in self.key_idx or column_filter.column(self.collection, c.name)
        )
        self._key_in_row = all(i in self.value_idx for i in self.key_idx)
        self.masker = masker if masker is not None and masker.applies_to(self.collection) else None
        self.placeholder = placeholder
        placeholder_bytes = (
            bytes.fromhex(placeholder[4:])
            if placeholder.startswith("hex:")
            else placeholder.encode("utf-8")
        )
        self._placeholder_b64 = base64.b64encode(placeholder_bytes).decode("ascii")
        self.key_schema: dict[str, Any] | None = (
            cs.struct(
                [self.types[i].field_schema(self.names[i], False) for i in self.key_idx],
                name=f"{self.topic}.Key",
            )
            if self.key_idx
            else None
        )
        row = cs.struct(
            [
                self.types[i].field_schema(
                    self.names[i], not (columns[i].not_null or i in self.key_idx)
                )
                for i in self.value_idx
            ],
            name=f"{self.topic}.Value",
        )
        self.row_schema = row
        self.envelope_schema = cs.envelope_schema(
            self.topic, row, cs.source_schema("postgresql"), with_transaction=with_transaction
        )
        self.key_schema_id = None if self.key_schema is None else cs.schema_id(self.key_schema)
        self.envelope_schema_id = cs.schema_id(self.envelope_schema)

    @property
    def has_key(self) -> bool:
        """Whether records of this table have a key (a primary key or an override)."""
        return bool(self.key_idx)

    def _convert(self, i: int, value: Value) -> Any:
        if value is None:
            return None
        if value is UNCHANGED_TOAST:
            return self._placeholder_b64 if self.types[i].is_binary else self.placeholder
        if isinstance(value, BinaryDatum):
            raise ValueConversionError(
                f"{self.collection}.{self.names[i]}: binary-format value; the agent asks "
                "pgoutput for text values"
            )
        try:
            return self.converters[i](value)  # type: ignore[arg-type]
        except (ValueError, ArithmeticError, IndexError) as exc:
            raise ValueConversionError(
                f"{self.collection}.{self.names[i]} ({self.types[i].type_name}): cannot convert "
                f"{value!r:.80}: {exc}"
            ) from None

    def _fast(self, idx: tuple[int, ...], values: Sequence[Value]) -> dict[str, Any] | None:
        """Convert the columns ``idx`` of a tuple of plain texts; None if the tuple needs care.

        The landing budget is a few microseconds per row, so the common case (text or NULL in
        every column, no conversion error) skips the per-column checks of :meth:`_convert`;
        anything else (unchanged TOAST, binary values, a value that does not parse) goes the
        slow way, which also builds the error message.
        """
        names, fast = self.names, self._fast_converters
        try:
            out: dict[str, Any] = {}
            for i in idx:
                v = values[i]
                if v is None:
                    out[names[i]] = None
                elif v.__class__ is str:
                    c = fast[i]
                    out[names[i]] = v if c is None else c(v)
                else:
                    return None
            return out
        except (ValueError, ArithmeticError, IndexError):
            return None

    def row(self, values: Sequence[Value]) -> dict[str, Any]:
        """The ``before``/``after`` payload of a full tuple, masked."""
        row = self._fast(self.value_idx, values)
        if row is None:
            names, convert = self.names, self._convert
            row = {names[i]: convert(i, values[i]) for i in self.value_idx}
        if self.masker is not None:
            masked = self.masker.apply(self.collection, row)
            return row if masked is None else masked
        return row

    def row_and_key(self, values: Sequence[Value]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """:meth:`row` and :meth:`key` of one tuple, converting the key columns once."""
        converted = self._fast(self.value_idx, values)
        if converted is None or not self._key_in_row:
            return self.row(values), self.key(values)
        names = self.names
        key = {names[i]: converted[names[i]] for i in self.key_idx} if self.key_idx else None
        if self.masker is not None:
            masked = self.masker.apply(self.collection, converted)
            return (converted if masked is None else masked), key
        return converted, key

    def key(self, values: Sequence[Value]) -> dict[str, Any] | None:
        """The key payload of a tuple (None for a keyless table)."""
        if not self.key_idx:
            return None
        key = self._fast(self.key_idx, values)
        if key is None:
            names, convert = self.names, self._convert
            key = {names[i]: convert(i, values[i]) for i in self.key_idx}
        return key

    def identity_row(self, values: Sequence[Value]) -> dict[str, Any]:
        """A ``K`` old tuple: only the replica-identity columns the server sent, masked."""
        sent = [i for i, c in enumerate(self.columns) if c.in_identity or i in self.key_idx]
        row = {
            self.names[i]: self._convert(i, values[i])
            for i in sent
            if i in self.value_idx and values[i] is not None
        }
        if self.masker is not None:
            masked = self.masker.apply(self.collection, row)
            return row if masked is None else masked
        return row

    def key_only_row(self, key: dict[str, Any] | None) -> dict[str, Any] | None:
        """A ``before`` image holding only the key (REPLICA IDENTITY DEFAULT, key unchanged)."""
        if key is None:
            return None
        if self._key_in_row:
            return dict(key)
        return {k: v for k, v in key.items() if self.names.index(k) in self.value_idx}
