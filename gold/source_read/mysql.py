"""MySQL / MariaDB: each value as the server's own canonical text, chosen per column type.

One connection of its own (the source config's host, port, user and password), session
``time_zone '+00:00'``, one ``START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY`` for every
table, an unbuffered cursor per table. Dates and datetimes are counted by the server
(``TO_DAYS``, ``TIMESTAMPDIFF``) so a zero or invalid date is told apart (``invalid <text>``)
instead of read as NULL; ``TIME`` durations are parsed from the server's text here. No
capture-agent code is involved.
"""

from __future__ import annotations

import logging
import re
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
from pipeline.sql import qualified, quote_identifier

__all__ = ["read_tables", "column_for", "time_micros"]

logger = logging.getLogger(__name__)

_INTEGERS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_TEXTS = frozenset(
    {
        "char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set", "json",
        "inet4", "inet6", "uuid",
    }
)  # fmt: skip
_BINARIES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
_VALID = "({c} + INTERVAL 0 DAY) IS NOT NULL"
_SQL: dict[Canon, str] = {
    Canon.TEXT: "CAST({c} AS CHAR)",
    Canon.INTEGER: "CAST({c} + 0 AS CHAR)",
    Canon.DECIMAL: "CAST({c} AS CHAR)",
    Canon.FLOAT32: "CAST({c} AS CHAR)",
    Canon.FLOAT64: "CAST({c} AS CHAR)",
    Canon.HEX: "LOWER(HEX({c}))",
    Canon.DAYS: (
        "CASE WHEN " + _VALID + " THEN CAST(TO_DAYS({c}) - 719528 AS CHAR) "
        "ELSE CONCAT('invalid ', CAST({c} AS CHAR)) END"
    ),
    Canon.MICROS: (
        "CASE WHEN " + _VALID + " THEN "
        "CAST(TIMESTAMPDIFF(MICROSECOND, TIMESTAMP'1970-01-01 00:00:00', {c}) AS CHAR) "
        "ELSE CONCAT('invalid ', CAST({c} AS CHAR)) END"
    ),
    Canon.NONE: "NULL",
}
_TIME = re.compile(r"(-?)(\d+):(\d\d):(\d\d)(?:\.(\d{1,6}))?")

_CATALOG = """
SELECT c.COLUMN_NAME, c.COLUMN_TYPE, c.DATA_TYPE, c.NUMERIC_PRECISION,
       (SELECT s.SEQ_IN_INDEX FROM information_schema.STATISTICS s
         WHERE s.TABLE_SCHEMA = c.TABLE_SCHEMA AND s.TABLE_NAME = c.TABLE_NAME
           AND s.INDEX_NAME = 'PRIMARY' AND s.COLUMN_NAME = c.COLUMN_NAME)
FROM information_schema.COLUMNS c
WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s
ORDER BY c.ORDINAL_POSITION
"""


def time_micros(text: str | None) -> str | None:
    """``-838:59:59.000001`` (the server's TIME text) -> signed microseconds as text.

    >>> time_micros("-00:00:00.000001")
    '-1'
    >>> time_micros("838:59:59.5")
    '3020399500000'
    """
    if text is None:
        return None
    match = _TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"not a TIME text: {text!r}")
    sign, h, m, s, frac = match.groups()
    micros = ((int(h) * 60 + int(m)) * 60 + int(s)) * 1_000_000 + int((frac or "").ljust(6, "0"))
    return str(-micros if sign else micros)


def column_for(
    name: str, column_type: str, data_type: str
) -> tuple[SourceColumn, str, Callable[[Any], str | None]]:
    """The column's canonical form, its SQL template (``{c}``: the quoted column) and the
    conversion of the fetched text.

    Args:
        name: Column name.
        column_type: ``COLUMN_TYPE`` (``bigint(20) unsigned``).
        data_type: ``DATA_TYPE`` (``bigint``).
    """
    data_type = data_type.lower()
    if data_type in _INTEGERS:
        unsigned = "unsigned" in column_type.lower()
        family = Family.UNSIGNED_BIGINT if data_type == "bigint" and unsigned else Family.INTEGER
        return SourceColumn(name, column_type, Canon.INTEGER, family), _SQL[Canon.INTEGER], as_text
    if data_type == "bit":
        column = SourceColumn(name, column_type, Canon.INTEGER, Family.INTEGER)
        return column, _SQL[Canon.INTEGER], as_text
    if data_type in ("decimal", "numeric"):
        column = SourceColumn(name, column_type, Canon.DECIMAL, Family.DECIMAL)
        return column, _SQL[Canon.DECIMAL], as_text
    if data_type in ("float", "double", "real"):
        canon = Canon.FLOAT32 if data_type == "float" else Canon.FLOAT64
        return SourceColumn(name, column_type, canon, Family.FLOAT), _SQL[canon], as_text
    if data_type == "date":
        return SourceColumn(name, column_type, Canon.DAYS, Family.DATE), _SQL[Canon.DAYS], as_text
    if data_type in ("datetime", "timestamp"):
        column = SourceColumn(name, column_type, Canon.MICROS, Family.TIMESTAMP)
        return column, _SQL[Canon.MICROS], as_text
    if data_type == "time":
        column = SourceColumn(name, column_type, Canon.INTEGER, Family.TIME)
        return column, "CAST({c} AS CHAR)", time_micros
    if data_type in _BINARIES:
        column = SourceColumn(name, column_type, Canon.HEX, Family.BINARY)
        return column, _SQL[Canon.HEX], as_text
    if data_type in _TEXTS:
        return SourceColumn(name, column_type, Canon.TEXT), _SQL[Canon.TEXT], as_text
    column = SourceColumn(
        name,
        column_type,
        Canon.NONE,
        why_not=f"no independent normalisation for {column_type} yet",
    )
    return column, _SQL[Canon.NONE], as_text


def _connect(config: Any) -> Any:
    import pymysql

    from pipeline.config_model import reveal

    kwargs: dict[str, Any] = {
        "host": config.database_hostname,
        "port": config.database_port,
        "user": config.database_user,
        "charset": "utf8mb4",
        "connect_timeout": 10,
        "autocommit": True,
        "init_command": "SET time_zone = '+00:00'",
    }
    password = reveal(config.database_password)
    if password is not None:
        kwargs["password"] = password
    try:
        return pymysql.connect(**kwargs)
    except pymysql.err.MySQLError as exc:
        why = exc.args[-1] if exc.args else exc
        raise SourceUnavailable(
            f"source {config.name}: cannot connect to MySQL {config.database_hostname}:"
            f"{config.database_port}: {why}"
        ) from None


def _read_one(conn: Any, collection: str, work: Path, index: int, fetch: int) -> SourceTable:
    import pymysql

    database, _, table = collection.partition(".")
    with conn.cursor() as cursor:
        cursor.execute(_CATALOG, (database, table))
        catalog = cursor.fetchall()
    if not catalog:
        return SourceTable(collection, (), (), notes=("the table does not exist in the source",))
    columns: list[SourceColumn] = []
    selects: list[str] = []
    converts: list[Callable[[Any], str | None]] = []
    keys: list[tuple[int, str]] = []
    for name, column_type, data_type, _precision, key_at in catalog:
        column, template, convert = column_for(str(name), str(column_type), str(data_type))
        columns.append(column)
        selects.append(template.format(c=quote_identifier(str(name))))
        converts.append(convert)
        if key_at:
            keys.append((int(key_at), str(name)))
    # Identifiers through the one quoting helper; the templates are constants.
    query = "SELECT " + ", ".join(selects) + " FROM " + qualified(database, table)
    path = work / f"source-{index}.jsonl"

    def rows() -> Iterator[Sequence[Any]]:
        with conn.cursor(pymysql.cursors.SSCursor) as cursor:
            cursor.execute(query)
            while chunk := cursor.fetchmany(fetch):
                yield from chunk

    return staged_table(collection, columns, keys, path, rows(), converts)


def read_tables(
    config: Any, collections: Sequence[str], work: Any, *, fetch: int = 10_000
) -> dict[str, SourceTable]:
    """Read ``collections`` in one consistent-snapshot, read-only transaction.

    See :class:`gold.source_read.SourceReader`.
    """
    return read_each(_connect(config), collections, work, fetch, _read_one, _begin)


def _begin(conn: Any) -> None:
    with conn.cursor() as cursor:
        cursor.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        cursor.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
