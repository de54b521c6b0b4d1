"""Db2: each value converted here, exactly, from what pyodbc returns for its type.

One connection of its own (the source config's host, port, database, user and password) at
``CURRENT ISOLATION = RR``, every table read in that one unit of work (its share locks keep the
rows read unchanged until the end: a consistent read). No capture-agent code converts a value
(the DB-API module is pyodbc, or the one ``MEDALLION_DB2_DBAPI`` names, as for the agent: the
test suite's ASN model); identifiers are quoted by the agent's one Db2 quoting helper.

=====================================  ================  =========================================
Db2 type (``SYSCAT.COLUMNS``)          canon             text
=====================================  ================  =========================================
SMALLINT, INTEGER, BIGINT              INTEGER           the integer
DECIMAL(p, s)                          DECIMAL           the value with ``s`` decimals
REAL / DOUBLE                          FLOAT32/FLOAT64   ``repr`` of the value
BOOLEAN                                BOOLEAN           ``true`` / ``false``
CHAR (blank-padded), VARCHAR, CLOB,    TEXT              the text as stored
GRAPHIC, VARGRAPHIC, DBCLOB, XML
BINARY, VARBINARY, BLOB, FOR BIT DATA  HEX               lowercase hex
DATE                                   DAYS              days since 1970-01-01
TIME                                   INTEGER           microseconds past midnight
TIMESTAMP(p)                           MICROS            microseconds since 1970 (wall clock)
DECFLOAT, user-defined, others         NONE              not comparable (DECFLOAT has no scale of
                                                         its own and holds NaN and Infinity)
=====================================  ================  =========================================
"""

from __future__ import annotations

import datetime as dt
import importlib
import os
from collections.abc import Callable, Iterator, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

from capture.db2.connection import quote
from gold.source_read import Canon, Family, SourceColumn, SourceTable, read_each, staged_table
from pipeline.errors import NotInstalledError, SourceUnavailable

__all__ = ["column_for", "read_tables"]

DBAPI_ENV = "MEDALLION_DB2_DBAPI"
"""The DB-API module to use instead of ``pyodbc`` (the Db2 agent reads the same variable)."""

_CATALOG = (
    "SELECT COLNAME, TYPENAME, LENGTH, SCALE, NULLS, KEYSEQ, CODEPAGE FROM SYSCAT.COLUMNS "
    "WHERE TABSCHEMA = ? AND TABNAME = ? ORDER BY COLNO"
)
_EPOCH = dt.datetime(1970, 1, 1)
_INTEGERS = frozenset({"SMALLINT", "INTEGER", "BIGINT"})
_BIT_DATA_CAPABLE = frozenset({"CHARACTER", "CHAR", "VARCHAR", "LONG VARCHAR"})
"""Character types that hold bytes when ``FOR BIT DATA`` (``CODEPAGE`` 0)."""
_TEXTS = _BIT_DATA_CAPABLE | {"CLOB", "GRAPHIC", "VARGRAPHIC", "DBCLOB", "XML"}


def _integer(value: Any) -> str | None:
    return None if value is None else str(int(value))


def _scaled(scale: int) -> Callable[[Any], str | None]:
    """DECIMAL(p, s): the value with exactly ``s`` decimals (a value with more is an error,
    never rounded)."""

    def text(value: Any) -> str | None:
        if value is None:
            return None
        sign, digits, exponent = Decimal(str(value)).as_tuple()
        if not isinstance(exponent, int) or exponent < -scale and any(digits[exponent + scale :]):
            raise ValueError(f"{value!r} is not a DECIMAL with scale {scale}")
        unscaled = int("".join(map(str, digits)) or "0") * 10 ** max(exponent + scale, 0)
        unscaled //= 10 ** max(-exponent - scale, 0)
        whole, fraction = divmod(unscaled, 10**scale)
        body = f"{whole}.{fraction:0{scale}d}" if scale else str(whole)
        return ("-" if sign and unscaled else "") + body

    return text


def _float(value: Any) -> str | None:
    return None if value is None else repr(float(value))


def _boolean(value: Any) -> str | None:
    return None if value is None else ("true" if value else "false")


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _hex(value: Any) -> str | None:
    return None if value is None else bytes(value).hex()


def _days(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dt.date):
        raise ValueError(f"not a DATE: {value!r}")
    return str((value - dt.date(1970, 1, 1)).days)


def _time(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dt.time):
        raise ValueError(f"not a TIME: {value!r}")
    return str(((value.hour * 60 + value.minute) * 60 + value.second) * 1_000_000)


def _micros(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dt.datetime):
        raise ValueError(f"not a TIMESTAMP: {value!r}")
    delta = value.replace(tzinfo=None) - _EPOCH
    return str((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def column_for(
    name: str, typename: str, length: int, scale: int, codepage: int
) -> tuple[SourceColumn, Callable[[Any], str | None]]:
    """How a column is read: its :class:`SourceColumn` and its conversion to canonical text."""
    kind = typename.strip().upper()
    text = kind if kind not in ("DECIMAL",) else f"DECIMAL({length},{scale})"
    if kind in _INTEGERS:
        return SourceColumn(name, text, Canon.INTEGER, Family.INTEGER), _integer
    if kind == "DECIMAL":
        return SourceColumn(name, text, Canon.DECIMAL, Family.DECIMAL), _scaled(scale)
    if kind in ("REAL", "DOUBLE"):
        canon = Canon.FLOAT32 if kind == "REAL" else Canon.FLOAT64
        return SourceColumn(name, text, canon, Family.FLOAT), _float
    if kind == "BOOLEAN":
        return SourceColumn(name, text, Canon.BOOLEAN), _boolean
    if kind in ("BINARY", "VARBINARY", "BLOB") or (codepage == 0 and kind in ("CHAR", "VARCHAR")):
        return SourceColumn(name, text, Canon.HEX, Family.BINARY), _hex
    if kind in _TEXTS:
        return SourceColumn(name, text, Canon.TEXT), _text
    if kind == "DATE":
        return SourceColumn(name, text, Canon.DAYS, Family.DATE), _days
    if kind == "TIME":
        return SourceColumn(name, text, Canon.INTEGER, Family.TIME), _time
    if kind == "TIMESTAMP":
        return SourceColumn(name, f"TIMESTAMP({scale})", Canon.MICROS, Family.TIMESTAMP), _micros
    why = (
        "DECFLOAT has no scale of its own and holds NaN and Infinity"
        if kind == "DECFLOAT"
        else f"{kind} has no canonical form here"
    )
    return SourceColumn(name, text, Canon.NONE, why_not=why), lambda v: None


def _connect(config: Any) -> Any:
    from pipeline.config_model import reveal

    name = os.environ.get(DBAPI_ENV) or "pyodbc"
    try:
        driver = importlib.import_module(name)
    except ImportError as exc:
        raise NotInstalledError(
            "reconciling a Db2 source needs pyodbc and IBM's ODBC driver: pip install '.[db2]'"
        ) from exc
    where = f"{config.database_hostname}:{config.database_port}/{config.database_dbname}"
    parts = [
        "DRIVER={IBM DB2 ODBC DRIVER}",
        f"DATABASE={config.database_dbname}",
        f"HOSTNAME={config.database_hostname}",
        f"PORT={int(config.database_port)}",
        "PROTOCOL=TCPIP",
        f"UID={config.database_user}",
    ]
    password = reveal(config.database_password)
    if password is not None:
        parts.append("PWD={" + str(password).replace("}", "}}") + "}")
    try:
        conn = driver.connect(";".join(parts), autocommit=False)
        conn.cursor().execute("SET CURRENT ISOLATION = RR")
    except driver.Error as exc:
        raise SourceUnavailable(
            f"source {config.name}: cannot connect to Db2 {where}: {exc.args[-1]}"
        ) from None
    return conn


def _read_one(conn: Any, collection: str, work: Path, index: int, fetch: int) -> SourceTable:
    schema, _, table = collection.partition(".")
    cursor = conn.cursor()
    cursor.execute(_CATALOG, schema, table)
    catalog = cursor.fetchall()
    if not catalog:
        return SourceTable(collection, (), (), notes=("the table does not exist in the source",))
    columns: list[SourceColumn] = []
    converts: list[Callable[[Any], str | None]] = []
    keys: list[tuple[int, str]] = []
    for name, typename, length, scale, _nulls, keyseq, codepage in catalog:
        column, convert = column_for(
            str(name), str(typename), int(length or 0), int(scale or 0), int(codepage or 0)
        )
        columns.append(column)
        converts.append(convert)
        if keyseq is not None:
            keys.append((int(keyseq), str(name)))
    names = ", ".join(quote(c.name) for c in columns)
    query = f"SELECT {names} FROM {quote(schema)}.{quote(table)}"

    def rows() -> Iterator[Sequence[Any]]:
        reader = conn.cursor()
        reader.execute(query)
        while chunk := reader.fetchmany(fetch):
            yield from chunk

    return staged_table(collection, columns, keys, work / f"source-{index}.jsonl", rows(), converts)


def read_tables(
    config: Any, collections: Sequence[str], work: Any, *, fetch: int = 10_000
) -> dict[str, SourceTable]:
    """Read ``collections`` in one ``RR`` unit of work (a consistent read).

    See :class:`gold.source_read.SourceReader`.
    """
    return read_each(_connect(config), collections, work, fetch, _read_one)
