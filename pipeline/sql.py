"""Quoting for the SQL text medallion sends to Spark (and to MySQL, which quotes alike).

SQL is built only from constant templates plus values passed through this module: identifiers
(schema, table and column names) through :func:`quote_identifier` / :func:`qualified`, and the
rare string literal that cannot be a parameter marker (a ``LOCATION`` path, for instance) through
:func:`quote_string_literal`. Never put a name or a path into SQL text any other way.

>>> quote_identifier("orders")
'`orders`'
>>> quote_identifier("we`ird")
'`we``ird`'
>>> qualified("silver", "pg__public__orders")
'`silver`.`pg__public__orders`'
>>> quote_string_literal("/lake/bronze/it's")
"'/lake/bronze/it\\\\'s'"
"""

from __future__ import annotations

__all__ = [
    "quote_identifier",
    "qualified",
    "quote_string_literal",
    "quote_datafusion_identifier",
    "quote_datafusion_literal",
]


def quote_identifier(name: str) -> str:
    """Quote one SQL identifier for Spark SQL.

    The name is wrapped in backticks and every backtick inside it is doubled, so any string,
    including ones with dots, spaces, quotes or backticks, becomes exactly one identifier part.

    Args:
        name: The raw identifier, e.g. a table or column name. Not already quoted.

    Returns:
        The quoted identifier, e.g. ```my``table``` for ``my`table``.

    Raises:
        ValueError: If ``name`` is empty (Spark rejects the empty identifier).
    """
    if not name:
        raise ValueError("an SQL identifier cannot be empty")
    return "`" + name.replace("`", "``") + "`"


def qualified(*parts: str) -> str:
    """Quote and join a multi-part name such as ``schema.table`` or ``catalog.schema.table``.

    Each part is quoted separately with :func:`quote_identifier`, so a dot inside a part stays
    part of that name instead of starting a new level.

    Args:
        *parts: The raw name parts, outermost first.

    Returns:
        The quoted parts joined by dots, e.g. ```bronze`.`events```.

    Raises:
        ValueError: If no part is given or a part is empty.
    """
    if not parts:
        raise ValueError("a qualified name needs at least one part")
    return ".".join(quote_identifier(part) for part in parts)


def quote_string_literal(value: str) -> str:
    """Quote a string as a Spark SQL string literal.

    Use it only where Spark's grammar accepts no parameter marker (``LOCATION '<path>'``); pass
    other values as ``spark.sql(text, args={...})`` parameters. Backslashes and single quotes are
    escaped with a backslash, which is what Spark's parser expects by default. The legacy setting
    ``spark.sql.parser.escapedStringLiterals=true`` turns escapes off; callers running under it
    must refuse values that contain either character.

    Args:
        value: The raw string, e.g. a file system path.

    Returns:
        The literal including its surrounding single quotes.

    Raises:
        ValueError: If ``value`` contains a NUL character, which no SQL literal can carry.
    """
    if "\0" in value:
        raise ValueError("an SQL string literal cannot contain a NUL character")
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def quote_datafusion_identifier(name: str) -> str:
    """Quote one identifier for the SQL text deltalake (delta-rs) parses with DataFusion.

    DataFusion folds unquoted names to lower case and quotes with double quotes: the name is
    wrapped in them and every double quote inside it is doubled.

    >>> quote_datafusion_identifier('We"ird')
    '"We""ird"'

    Args:
        name: The raw identifier (a column name).

    Returns:
        The quoted identifier.

    Raises:
        ValueError: If ``name`` is empty.
    """
    if not name:
        raise ValueError("an SQL identifier cannot be empty")
    return '"' + name.replace('"', '""') + '"'


def quote_datafusion_literal(value: str) -> str:
    """Quote a string as a DataFusion string literal (deltalake predicates).

    DataFusion's parser takes every character between single quotes as it is (backslashes
    included; NUL too: tests/unit/test_merge_driver_sql.py runs them through delta-rs), a
    doubled single quote standing for one.

    >>> quote_datafusion_literal("it's")
    "'it''s'"

    Args:
        value: The raw string.

    Returns:
        The literal including its surrounding single quotes.
    """
    return "'" + value.replace("'", "''") + "'"
