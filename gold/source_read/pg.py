"""PostgreSQL: each value as PostgreSQL's own canonical text, chosen per catalog type.

One connection of its own (the source config's host, port, user, database and password), one
``REPEATABLE READ, READ ONLY`` transaction for every table, a server-side cursor per table
(``fetch`` rows per ``FETCH``). No capture-agent code is involved: the texts come from
PostgreSQL's output functions and exact ``numeric`` arithmetic (``extract`` returns ``numeric``
since PostgreSQL 14), never from the agent's decoders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from gold.source_read import (
    Canon,
    Family,
    SourceColumn,
    SourceTable,
    as_text,
    read_each,
    staged_table,
)
from pipeline.errors import SourceUnavailable

__all__ = ["column_for", "connect_as", "read_tables"]

logger = logging.getLogger(__name__)

_TEXT_TYPES = frozenset(
    {
        "text", "varchar", "bpchar", "name", "char", "citext", "uuid", "json", "jsonb",
        "inet", "cidr", "macaddr", "macaddr8", "xml", "ltree",
    }
)  # fmt: skip
_INTEGERS = frozenset({"int2", "int4", "int8", "oid"})
_ARRAY_ELEMENTS = {
    "int2": Canon.INTEGER,
    "int4": Canon.INTEGER,
    "int8": Canon.INTEGER,
    "numeric": Canon.DECIMAL,
    "bool": Canon.BOOLEAN,
    "text": Canon.TEXT,
    "varchar": Canon.TEXT,
}

# One template per canonical form; {c} is the quoted column. All yield text.
_SQL: dict[Canon, str] = {
    Canon.TEXT: "{c}::text",
    Canon.INTEGER: "{c}::text",
    Canon.DECIMAL: "{c}::text",
    Canon.FLOAT32: "{c}::text",
    Canon.FLOAT64: "{c}::text",
    Canon.BOOLEAN: "{c}::text",
    Canon.BITS: "{c}::text",
    Canon.HEX: "encode({c}, 'hex')",
    Canon.ARRAY: "{c}::text",
    Canon.DAYS: ("CASE WHEN isfinite({c}) THEN ({c} - date '1970-01-01')::text ELSE {c}::text END"),
    Canon.MICROS: (
        "CASE WHEN isfinite({c}) THEN trunc(extract(epoch FROM {c}) * 1000000)::text "
        "ELSE {c}::text END"
    ),
    Canon.INTERVAL: (
        "(extract(year FROM {c}) * 12 + extract(month FROM {c}))::text || ' ' || "
        "extract(day FROM {c})::text || ' ' || "
        "trunc((extract(hour FROM {c}) * 3600 + extract(minute FROM {c}) * 60) * 1000000 "
        "+ extract(microseconds FROM {c}))::text"
    ),
    Canon.NONE: "{c}::text",
}
_TIME_OF_DAY = "trunc(extract(epoch FROM {c}) * 1000000)::text"

_CATALOG = """
SELECT a.attname, format_type(a.atttypid, a.atttypmod),
       CASE WHEN t.typtype = 'd' THEN bt.typname ELSE t.typname END,
       CASE WHEN t.typtype = 'd' THEN bt.typtype ELSE t.typtype END,
       et.typname, a.atttypmod,
       coalesce((SELECT k.n FROM unnest(i.indkey::int2[]) WITH ORDINALITY k(attnum, n)
                 WHERE k.attnum = a.attnum), 0)
FROM pg_attribute a
JOIN pg_class c ON c.oid = a.attrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type bt ON bt.oid = t.typbasetype
LEFT JOIN pg_type et ON et.oid = (CASE WHEN t.typtype = 'd' THEN bt.typelem ELSE t.typelem END)
     AND (CASE WHEN t.typtype = 'd' THEN bt.typcategory ELSE t.typcategory END) = 'A'
LEFT JOIN pg_index i ON i.indrelid = c.oid AND i.indisprimary
WHERE n.nspname = %s AND c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


def column_for(
    name: str, type_text: str, typname: str, typtype: str, element: str | None, typmod: int
) -> tuple[SourceColumn, str]:
    """The column's canonical form and its SQL template (``{c}``: the quoted column).

    Args:
        name: Column name.
        type_text: ``format_type`` of the column.
        typname: The type's (a domain's base type's) ``typname``.
        typtype: Its ``typtype`` (``e`` for enums).
        element: An array's element ``typname`` (None: not an array).
        typmod: ``atttypmod`` (the bit length of ``bit(n)``).
    """
    if element is not None:
        canon = _ARRAY_ELEMENTS.get(element)
        if canon is None:
            return _none(name, type_text, f"arrays of {element}"), _SQL[Canon.NONE]
        return SourceColumn(name, type_text, Canon.ARRAY, element=canon), _SQL[Canon.ARRAY]
    family = Family.OTHER
    length = None
    if typname in _INTEGERS:
        canon = Canon.INTEGER
        family = Family.INTEGER
    elif typname == "numeric":
        canon, family = Canon.DECIMAL, Family.DECIMAL
    elif typname == "money":
        # money's text has a currency symbol and the locale's separators; numeric is exact.
        column = SourceColumn(name, type_text, Canon.DECIMAL, Family.DECIMAL)
        return column, "{c}::numeric::text"
    elif typname in ("float4", "float8"):
        canon = Canon.FLOAT32 if typname == "float4" else Canon.FLOAT64
        family = Family.FLOAT
    elif typname == "bool":
        canon = Canon.BOOLEAN
    elif typname in ("bit", "varbit"):
        canon = Canon.BITS
        length = typmod if typname == "bit" and typmod > 0 else None
    elif typname == "date":
        canon, family = Canon.DAYS, Family.DATE
    elif typname in ("timestamp", "timestamptz"):
        canon, family = Canon.MICROS, Family.TIMESTAMP
    elif typname == "time":
        column = SourceColumn(name, type_text, Canon.INTEGER, Family.TIME)
        return column, _TIME_OF_DAY
    elif typname == "interval":
        canon, family = Canon.INTERVAL, Family.INTERVAL
    elif typname == "bytea":
        canon, family = Canon.HEX, Family.BINARY
    elif typname in _TEXT_TYPES or typtype == "e":
        canon = Canon.TEXT
    else:
        return _none(name, type_text, type_text), _SQL[Canon.NONE]
    return SourceColumn(name, type_text, canon, family, length=length), _SQL[canon]


def _none(name: str, type_text: str, what: str) -> SourceColumn:
    return SourceColumn(
        name, type_text, Canon.NONE, why_not=f"no independent normalisation for {what} yet"
    )


SESSION_OPTIONS = "-c TimeZone=UTC -c DateStyle=ISO -c extra_float_digits=1"
"""UTC: timestamptz text and epochs are instants either way, but fix it for examples."""


def _connect(config: Any) -> Any:
    return connect_as(
        config, config.database_hostname, config.database_port, SESSION_OPTIONS, "PostgreSQL"
    )


def connect_as(config: Any, host: str, port: int, options: str, product: str) -> Any:
    """The reader's own connection to ``host:port`` with the config's user, database and
    password, and the session ``options``.

    Raises:
        SourceUnavailable: The server cannot be reached (``product`` names it).
    """
    import psycopg

    from pipeline.config_model import reveal

    kwargs: dict[str, Any] = {
        "host": host,
        "port": port,
        "user": config.database_user,
        "dbname": config.database_dbname,
        "application_name": f"medallion-reconcile-{config.name}",
        "connect_timeout": 10,
        "options": options,
    }
    password = reveal(config.database_password)
    if password is not None:
        kwargs["password"] = password
    try:
        return psycopg.connect(**kwargs)
    except psycopg.OperationalError as exc:
        # libpq messages name host and port, never the password.
        raise SourceUnavailable(
            f"source {config.name}: cannot connect to {product} {host}:{port}/"
            f"{config.database_dbname}: {str(exc).strip()}"
        ) from None


def _read_one(
    conn: Any,
    collection: str,
    work: Path,
    index: int,
    fetch: int,
    *,
    column: Callable[[str, str, str, str, str | None, int], tuple[SourceColumn, str]] = column_for,
) -> SourceTable:
    """Stage one table; ``column`` chooses each column's canon and SQL (a YugabyteDB hook)."""
    from psycopg import sql

    schema, _, table = collection.partition(".")
    catalog = conn.execute(_CATALOG, (schema, table)).fetchall()
    if not catalog:
        return SourceTable(collection, (), (), notes=("the table does not exist in the source",))
    columns: list[SourceColumn] = []
    selects: list[sql.Composable] = []
    keys: list[tuple[int, str]] = []
    for name, type_text, typname, typtype, element, typmod, key_at in catalog:
        described, template = column(name, type_text, typname, typtype, element, typmod)
        columns.append(described)
        selects.append(sql.SQL(template).format(c=sql.Identifier(name)))
        if key_at:
            keys.append((key_at, name))
    query = sql.SQL("SELECT {} FROM {}").format(
        sql.SQL(", ").join(selects), sql.Identifier(schema, table)
    )
    path = work / f"source-{index}.jsonl"

    def rows() -> Iterator[Sequence[Any]]:
        with conn.cursor(name=f"medallion_reconcile_{index}") as cursor:
            cursor.itersize = fetch
            cursor.execute(query)
            while chunk := cursor.fetchmany(fetch):
                yield from chunk

    return staged_table(collection, columns, keys, path, rows(), [as_text] * len(columns))


def read_tables(
    config: Any, collections: Sequence[str], work: Any, *, fetch: int = 10_000
) -> dict[str, SourceTable]:
    """Read ``collections`` in one ``REPEATABLE READ, READ ONLY`` transaction.

    See :class:`gold.source_read.SourceReader`.
    """
    return read_each(_connect(config), collections, work, fetch, _read_one, _begin)


def _begin(conn: Any) -> None:
    import psycopg

    # One snapshot for every table; the first statement opens the transaction.
    conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
    conn.read_only = True
