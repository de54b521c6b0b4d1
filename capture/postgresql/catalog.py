"""Catalog lookups of the PostgreSQL agent: a table's columns and keys, a type's description.

The WAL says which columns a change has (the Relation message) but not which are the primary
key under REPLICA IDENTITY FULL, which are ``NOT NULL``, or what a non-builtin type is; Debezium
reads those over JDBC and so does the agent, over an ordinary connection. The catalog is read
when a table is first seen (and again after DDL, when pgoutput resends its Relation message);
a primary-key change in between is the race the Debezium guide documents (§1.7).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg

from capture.postgresql.pgoutput import Relation
from capture.postgresql.schema import CatalogColumn
from capture.postgresql.types import PgType

__all__ = ["table_columns", "lookup_type"]


def table_columns(
    conn: psycopg.Connection[Any], schema: str, table: str, relation: Relation | None = None
) -> tuple[list[CatalogColumn], str] | None:
    """The columns of ``schema.table`` and its replica identity (``d``, ``n``, ``f``, ``i``).

    Args:
        conn: Any connection (the snapshot's, to read the catalog as of its snapshot).
        schema: Schema name.
        table: Table name.
        relation: The stream's Relation message: its columns (in tuple order) win over the
            catalog's, which may have moved on since the change was written.

    Returns:
        ``(columns, replica identity)``, or None when the table is gone and no Relation message
        describes it.
    """
    row = conn.execute(
        "SELECT c.oid, c.relreplident FROM pg_class c JOIN pg_namespace n"
        " ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relname = %s",
        (schema, table),
    ).fetchone()
    facts: dict[str, _Facts] = {}
    identity = "d"
    if row is not None:
        identity = row[1]
        for name, *rest in conn.execute(_FACTS_SQL, (row[0],)).fetchall():
            facts[name] = _Facts(*rest)
    if relation is not None:
        identity = relation.replica_identity
        return [
            _column(
                c.name,
                c.type_oid,
                c.type_modifier,
                facts.get(c.name),
                # Without catalog facts (table dropped since), DEFAULT's identity is the key.
                c.is_key and identity == "d",
                c.is_key,
            )
            for c in relation.columns
        ], identity
    if row is None:
        return None
    # Generated columns are not replicated by pgoutput (PostgreSQL 15), so not read either.
    cols = conn.execute(
        "SELECT a.attname, a.atttypid, a.atttypmod FROM pg_attribute a"
        " WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped"
        " AND a.attgenerated = '' ORDER BY a.attnum",
        (row[0],),
    ).fetchall()
    return [
        _column(n, int(t), int(m), facts[n], False, facts[n].in_identity) for n, t, m in cols
    ], identity


_FACTS_SQL = (
    "SELECT a.attname, a.attnotnull,"
    " coalesce(a.attnum = ANY(pk.indkey), false),"
    " coalesce(a.attnum = ANY(ri.indkey), false),"
    " a.attndims,"
    " pg_get_expr(d.adbin, d.adrelid),"
    " CASE WHEN a.atthasmissing THEN a.attmissingval::text END"
    " FROM pg_attribute a"
    " LEFT JOIN pg_index pk ON pk.indrelid = a.attrelid AND pk.indisprimary"
    " LEFT JOIN pg_index ri ON ri.indrelid = a.attrelid AND ri.indisreplident"
    " LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum"
    " WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped"
)
"""Per column: NOT NULL, primary key, replica identity, declared array dimensions, the default
expression and, for a column added with a non-volatile default, the value existing rows show
(``attmissingval``, PostgreSQL 11+; a one-element array as text)."""


@dataclass(frozen=True, slots=True)
class _Facts:
    not_null: bool
    in_primary_key: bool
    in_identity: bool
    dims: int
    default_expression: str | None
    missing_value: str | None


def _column(
    name: str,
    type_oid: int,
    typmod: int,
    facts: _Facts | None,
    key_without_facts: bool,
    in_identity: bool,
) -> CatalogColumn:
    if facts is None:
        return CatalogColumn(name, type_oid, typmod, False, key_without_facts, in_identity)
    return CatalogColumn(
        name,
        type_oid,
        typmod,
        bool(facts.not_null),
        bool(facts.in_primary_key),
        in_identity,
        dims=int(facts.dims or 0),
        default_expression=facts.default_expression,
        missing_value=facts.missing_value,
    )


def lookup_type(conn: psycopg.Connection[Any], oid: int) -> PgType | None:
    """Describe type ``oid`` from ``pg_type`` (enum labels included); None if unknown."""
    row = conn.execute(
        "SELECT t.typname, n.nspname, t.typtype, t.typelem, t.typbasetype, t.typtypmod,"
        " t.typcategory = 'A',"
        " ARRAY(SELECT e.enumlabel::text FROM pg_enum e WHERE e.enumtypid = t.oid"
        " ORDER BY e.enumsortorder)"
        " FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = %s",
        (oid,),
    ).fetchone()
    if row is None:
        return None
    return PgType(
        oid,
        name=row[0],
        namespace=row[1],
        typtype=row[2],
        element_oid=int(row[3]),
        base_oid=int(row[4]),
        base_typmod=int(row[5]),
        enum_labels=tuple(row[7]),
        is_array=bool(row[6]),
    )
