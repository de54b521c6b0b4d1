"""Captured PostgreSQL tables: the PostgreSQL side of :mod:`capture.captured_table`.

A :class:`TableSchema` turns a row as pgoutput (or the snapshot) sends it, a tuple of column
texts, into Debezium's key and ``before``/``after`` payloads, and holds the Connect schemas of the
key, the row and the envelope. It is built from catalog facts the agent looks up (columns, types,
``NOT NULL``, the primary key) plus the source's filters and masks; no database access here.

Key columns follow Debezium: the primary key (looked up in the catalog, not the replica identity,
which is every column under REPLICA IDENTITY FULL), else the columns of a ``USING INDEX``
replica identity, else no key; ``message.key.columns`` overrides both. Key columns stay in the key
even when ``column.exclude.list`` drops them from the row.

Column defaults (contract C4, :func:`column_default`): the field schema's ``default`` is what a
row that existed before the column was added shows. PostgreSQL 11+ keeps exactly that in
``pg_attribute.attmissingval`` for a column added with a non-volatile default (``now()``
included, evaluated once at the ``ALTER``), so that value wins; otherwise a constant default
(a literal, as ``pg_get_expr`` prints it) is the default, as in Debezium 3.x. A column the
agent saw being added whose existing rows' values are not in the catalog (a volatile default
rewrote the table, or a later rewrite dropped ``attmissingval``) carries the parameter
``medallion.default.unreproducible`` with the reason.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, ClassVar

from capture.captured_table import (
    CapturedTable,
    CatalogColumn,
    ColumnDefault,
    KeyOverrides,
    TableFilter,
)
from capture.column_types import ColumnType, Unrepresentable, ValueConversionError
from capture.masking import ColumnMasker
from capture.postgresql.pgoutput import UNCHANGED_TOAST, BinaryDatum, Value
from capture.postgresql.types import TypeLookup, ValueHandling, column_type, parse_array

__all__ = [
    "SYSTEM_SCHEMAS",
    "CatalogColumn",
    "TableFilter",
    "TableSchema",
    "KeyOverrides",
    "column_default",
]

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
        added: Columns the agent saw being added to the table (a Relation message with more
            columns than the table had): their defaults must be the existing rows' values.
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
        added: frozenset[str] = frozenset(),
    ) -> None:
        types = [
            column_type(c.type_oid, c.type_modifier, handling, lookup, c.dims) for c in columns
        ]
        super().__init__(
            server,
            schema,
            table,
            columns,
            types,
            connector="postgresql",
            replica_identity=replica_identity,
            column_filter=column_filter,
            key_overrides=key_overrides,
            masker=masker,
            placeholder=placeholder,
            with_transaction=with_transaction,
            origin_prefix="pg",
            defaults=[
                column_default(t, c.default_expression, c.missing_value, c.name in added)
                for c, t in zip(columns, types, strict=True)
            ],
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


_LITERAL_DEFAULT = re.compile(
    r"(?:'(?P<quoted>(?:[^']|'')*)'(?:::[\w .\"\[\]()]+)?|(?P<bare>-?\d+(?:\.\d+)?(?:e-?\d+)?)"
    r"|(?P<bool>true|false))",
    re.IGNORECASE,
)
"""A default that is a constant: a literal as ``pg_get_expr`` prints a Const (its type's output
text, quoted and cast, or a bare number or boolean). Anything else (a function call, an
operator, ``ARRAY[...]``) is an expression the agent does not evaluate."""


def _constant_text(expression: str) -> str | None:
    m = _LITERAL_DEFAULT.fullmatch(expression.strip())
    if m is None:
        return None
    if m.group("quoted") is not None:
        return m.group("quoted").replace("''", "'")
    if m.group("bool") is not None:
        return "t" if m.group("bool").lower() == "true" else "f"
    return m.group("bare")


def column_default(
    ctype: ColumnType, expression: str | None, missing: str | None, added: bool
) -> ColumnDefault | None:
    """The C4 default of one column (see the module docstring).

    Args:
        ctype: The column's converted type (its converter gives the field's JSON form).
        expression: ``pg_get_expr`` of the default; None without one.
        missing: ``attmissingval`` as text when ``atthasmissing``, else None.
        added: The agent saw this column being added to an existing table.

    Returns:
        None when the column has no default and nothing needs saying.
    """
    if missing is not None:
        try:
            values = parse_array(missing)
            return ColumnDefault(None if values[0] is None else ctype.convert(values[0]))
        except Unrepresentable as exc:
            return ColumnDefault(
                None,
                f"rows that existed before the column was added hold {values[0]}, which has no "
                f"representation: {exc.reason}",
            )
        except (ValueError, ArithmeticError, IndexError, TypeError) as exc:
            return ColumnDefault(None, f"attmissingval {missing!r} does not convert: {exc}")
    if expression is None:
        return None
    constant = _constant_text(expression)
    value = None
    if constant is not None:
        try:
            value = ctype.convert(constant)
        except (ValueError, ArithmeticError, IndexError, TypeError):
            value = None  # e.g. numeric 'NaN': no default rather than a wrong one
    if not added:
        return None if value is None else ColumnDefault(value)
    if constant is None:
        why = (
            f"the column was added with the default {expression}, which is volatile or was "
            "set later: PostgreSQL rewrote the table or kept no attmissingval, and the WAL "
            "does not carry the values the existing rows got"
        )
    else:
        why = (
            f"the column has the default {expression} but pg_attribute keeps no attmissingval "
            "for it: the table was rewritten since the column was added, or the default was "
            "set after the ADD; the values of the rows that existed before are not known"
        )
    return ColumnDefault(value, why)
