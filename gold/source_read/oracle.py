"""Oracle: each value converted here, exactly, from what python-oracledb returns for its type.

One connection of its own (the source config's address, user and password; switched into
``database.pdb.name`` when set), session ``TIME_ZONE '+00:00'``, and every table read ``AS OF
SCN`` the one SCN read first, so all tables are read at one consistent point. ``NUMBER`` is
fetched as ``decimal.Decimal`` (never a binary float), ``TIMESTAMP WITH TIME ZONE`` as
``SYS_EXTRACT_UTC(...)`` (the instant in UTC), LOBs read whole. No capture-agent code is
involved (the DB-API module is python-oracledb, or the one ``MEDALLION_ORACLE_DBAPI`` names, as
for the agent: the test suite's Oracle model).

=====================================  ================  =========================================
Oracle type                            canon             text
=====================================  ================  =========================================
NUMBER(p, s <= 0), p - s < 19          INTEGER           the integer
NUMBER(p, s) otherwise                 DECIMAL           the value with ``max(s, 0)`` decimals
NUMBER, FLOAT(p)                       DECIMAL           the plain decimal, no trailing zeros (a
                                                         NUMBER has no scale of its own)
BINARY_FLOAT / BINARY_DOUBLE           FLOAT32/FLOAT64   ``repr`` of the value
CHAR, NCHAR (blank-padded), VARCHAR2,  TEXT              the text as stored
NVARCHAR2, CLOB, NCLOB
RAW, BLOB                              HEX               lowercase hex
DATE, TIMESTAMP(p)                     MICROS            microseconds since 1970 (wall clock;
                                                         TIMESTAMP(7-9) read to the microsecond)
TIMESTAMP WITH (LOCAL) TIME ZONE       MICROS            the UTC instant
INTERVAL DAY TO SECOND                 INTEGER           microseconds
INTERVAL YEAR TO MONTH, LONG, BFILE,   NONE              not comparable (MicroDuration's month is
XMLTYPE, ROWID, user-defined                             an approximation; the rest is not
                                                         captured)
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

from gold.source_read import Canon, Family, SourceColumn, SourceTable, read_each, staged_table
from pipeline.errors import NotInstalledError, SourceUnavailable

__all__ = ["column_for", "read_tables"]

DBAPI_ENV = "MEDALLION_ORACLE_DBAPI"
"""The DB-API module to use instead of ``oracledb`` (the Oracle agent reads the same variable)."""

_CATALOG = (
    "SELECT COLUMN_NAME, DATA_TYPE, DATA_PRECISION, DATA_SCALE, NULLABLE FROM ALL_TAB_COLUMNS "
    "WHERE OWNER = :1 AND TABLE_NAME = :2 ORDER BY COLUMN_ID"
)
_KEY = (
    "SELECT cc.COLUMN_NAME FROM ALL_CONSTRAINTS c JOIN ALL_CONS_COLUMNS cc "
    "ON cc.OWNER = c.OWNER AND cc.CONSTRAINT_NAME = c.CONSTRAINT_NAME "
    "WHERE c.CONSTRAINT_TYPE = 'P' AND c.OWNER = :1 AND c.TABLE_NAME = :2 ORDER BY cc.POSITION"
)
_EPOCH = dt.datetime(1970, 1, 1)


def _quote(identifier: str) -> str:
    """An Oracle identifier, double-quoted (case kept, ``"`` doubled)."""
    return '"' + identifier.replace('"', '""') + '"'


def _read(value: Any) -> Any:
    return value.read() if hasattr(value, "read") else value


def _integer(value: Any) -> str | None:
    if value is None:
        return None
    number = Decimal(value) if not isinstance(value, Decimal) else value
    if number != number.to_integral_value():
        raise ValueError(f"{value!r} is not an integer")
    return str(int(number))


def _scaled(scale: int) -> Callable[[Any], str | None]:
    exponent = Decimal(1).scaleb(-scale)

    def text(value: Any) -> str | None:
        if value is None:
            return None
        number = Decimal(value) if not isinstance(value, Decimal) else value
        fixed = number.quantize(exponent)
        if fixed != number:
            raise ValueError(f"{value!r} has more than {scale} decimals")
        return format(fixed, "f")

    return text


def _plain(value: Any) -> str | None:
    """A NUMBER without declared scale: the plain decimal, no trailing fractional zeros."""
    if value is None:
        return None
    number = Decimal(value) if not isinstance(value, Decimal) else value
    if number == number.to_integral_value():
        return str(int(number))
    return format(number.normalize(), "f")


def _float(value: Any) -> str | None:
    return None if value is None else repr(float(value))


def _text(value: Any) -> str | None:
    return None if value is None else str(_read(value))


def _hex(value: Any) -> str | None:
    return None if value is None else bytes(_read(value)).hex()


def _micros(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, dt.datetime) and value.tzinfo is not None:
        value = value.astimezone(dt.UTC).replace(tzinfo=None)
    if not isinstance(value, dt.datetime):
        value = dt.datetime(value.year, value.month, value.day)
    delta = value - _EPOCH
    return str((delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds)


def _duration(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, dt.timedelta):
        raise ValueError(f"not an INTERVAL DAY TO SECOND: {value!r}")
    return str((value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds)


def column_for(
    name: str, data_type: str, precision: int | None, scale: int | None
) -> tuple[SourceColumn, str, Callable[[Any], str | None]]:
    """The column's canonical form, its select item (``{c}``: the quoted column) and the
    conversion of the fetched value.

    Args:
        name: ``COLUMN_NAME``.
        data_type: ``DATA_TYPE`` (``NUMBER``, ``TIMESTAMP(6) WITH TIME ZONE`` ...).
        precision: ``DATA_PRECISION``.
        scale: ``DATA_SCALE``.
    """
    text = data_type if precision is None else f"{data_type}({precision},{scale or 0})"
    if data_type in ("NUMBER", "FLOAT", "INTEGER"):
        if precision is None or data_type == "FLOAT":
            return SourceColumn(name, text, Canon.DECIMAL, Family.DECIMAL), "{c}", _plain
        s = scale or 0
        if s <= 0 and precision - s < 19:
            return SourceColumn(name, text, Canon.INTEGER, Family.INTEGER), "{c}", _integer
        return SourceColumn(name, text, Canon.DECIMAL, Family.DECIMAL), "{c}", _scaled(max(s, 0))
    if data_type in ("BINARY_FLOAT", "BINARY_DOUBLE"):
        canon = Canon.FLOAT32 if data_type == "BINARY_FLOAT" else Canon.FLOAT64
        return SourceColumn(name, text, canon, Family.FLOAT), "{c}", _float
    if data_type in ("CHAR", "NCHAR", "VARCHAR2", "NVARCHAR2", "VARCHAR", "CLOB", "NCLOB"):
        return SourceColumn(name, text, Canon.TEXT), "{c}", _text
    if data_type in ("RAW", "BLOB"):
        return SourceColumn(name, text, Canon.HEX, Family.BINARY), "{c}", _hex
    if data_type == "DATE":
        return SourceColumn(name, text, Canon.MICROS, Family.TIMESTAMP), "{c}", _micros
    if data_type.startswith("TIMESTAMP"):
        item = "SYS_EXTRACT_UTC({c})" if data_type.endswith(" WITH TIME ZONE") else "{c}"
        if "LOCAL" in data_type:
            item = "{c}"  # read in the session's time zone, UTC
        return SourceColumn(name, text, Canon.MICROS, Family.TIMESTAMP), item, _micros
    if data_type.startswith("INTERVAL DAY"):
        return SourceColumn(name, text, Canon.INTEGER, Family.INTERVAL), "{c}", _duration
    why = (
        "INTERVAL YEAR TO MONTH is an approximate MicroDuration (a month of 365.25 / 12 days)"
        if data_type.startswith("INTERVAL YEAR")
        else f"{data_type} is not captured"
    )
    return SourceColumn(name, text, Canon.NONE, why_not=why), "NULL", lambda v: None


def _connect(config: Any) -> Any:
    from pipeline.config_model import reveal

    name = os.environ.get(DBAPI_ENV, "oracledb")
    try:
        driver = importlib.import_module(name)
    except ImportError as exc:
        raise NotInstalledError(
            "reconciling an Oracle source needs python-oracledb: pip install '.[oracle]'"
        ) from exc
    dsn = config.database_url
    dsn = (
        dsn.removeprefix("jdbc:oracle:thin:@")
        if dsn
        else f"{config.database_hostname}:{config.database_port}/{config.database_dbname}"
    )
    try:
        conn = driver.connect(
            user=config.database_user, password=reveal(config.database_password), dsn=dsn
        )
    except driver.Error as exc:
        raise SourceUnavailable(
            f"source {config.name}: cannot connect to Oracle {dsn}: {str(exc).strip()}"
        ) from None
    number = getattr(driver, "DB_TYPE_NUMBER", None)

    def exact_numbers(cursor: Any, metadata: Any) -> Any:
        if number is not None and getattr(metadata, "type_code", None) is number:
            return cursor.var(Decimal, arraysize=cursor.arraysize)
        return None

    conn.outputtypehandler = exact_numbers
    cursor = conn.cursor()
    cursor.execute("ALTER SESSION SET TIME_ZONE = '+00:00'")
    if config.database_pdb_name:
        cursor.execute(f"ALTER SESSION SET CONTAINER = {_quote(config.database_pdb_name)}")
    return conn


class _Point:
    """The SCN every table is read at (read once, when the first table is)."""

    scn: int | None = None


def _read_one(
    point: _Point, conn: Any, collection: str, work: Path, index: int, fetch: int
) -> SourceTable:
    owner, _, table = collection.partition(".")
    cursor = conn.cursor()
    cursor.execute(_CATALOG, [owner, table])
    catalog = cursor.fetchall()
    if not catalog:
        return SourceTable(collection, (), (), notes=("the table does not exist in the source",))
    cursor.execute(_KEY, [owner, table])
    key = [str(r[0]) for r in cursor.fetchall()]
    columns: list[SourceColumn] = []
    selects: list[str] = []
    converts: list[Callable[[Any], str | None]] = []
    for name, data_type, precision, scale, _nullable in catalog:
        column, item, convert = column_for(
            str(name),
            str(data_type),
            None if precision is None else int(precision),
            None if scale is None else int(scale),
        )
        columns.append(column)
        selects.append(item.format(c=_quote(str(name))))
        converts.append(convert)
    if point.scn is None:
        cursor.execute("SELECT CURRENT_SCN FROM V$DATABASE")
        point.scn = int(cursor.fetchall()[0][0])
    # identifiers through _quote; the select items are constants around them
    query = f"SELECT {', '.join(selects)} FROM {_quote(owner)}.{_quote(table)} AS OF SCN :1"
    path = work / f"source-{index}.jsonl"

    def rows() -> Iterator[Sequence[Any]]:
        reader = conn.cursor()
        reader.arraysize = fetch
        reader.execute(query, [point.scn])
        while chunk := reader.fetchmany(fetch):
            yield from chunk

    keys = [(key.index(c.name), c.name) for c in columns if c.name in key]
    return staged_table(collection, columns, keys, path, rows(), converts)


def read_tables(
    config: Any, collections: Sequence[str], work: Any, *, fetch: int = 10_000
) -> dict[str, SourceTable]:
    """Read ``collections`` ``AS OF SCN`` one SCN (flashback: a consistent read).

    See :class:`gold.source_read.SourceReader`.
    """
    point = _Point()

    def read_one(conn: Any, collection: str, work: Path, index: int, fetch: int) -> SourceTable:
        return _read_one(point, conn, collection, work, index, fetch)

    return read_each(_connect(config), collections, work, fetch, read_one)
