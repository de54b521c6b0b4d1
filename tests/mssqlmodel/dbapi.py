"""A DB-API stand-in for pyodbc in front of :class:`tests.mssqlmodel.server.SqlServerModel`.

``connect("DRIVER={FreeTDS};SERVER=<model root>;PORT=...;DATABASE=<db>;UID=...;PWD=...")``
returns a connection whose cursors accept the T-SQL the SQL Server agent sends and nothing else.
Each statement is matched against the forms Microsoft documents for it:

* ``SELECT sys.fn_cdc_get_max_lsn()``, ``sys.fn_cdc_get_min_lsn(?)``,
  ``sys.fn_cdc_increment_lsn(?)``, ``sys.fn_cdc_map_lsn_to_time(?)``: evaluated here;
* ``cdc.fn_cdc_get_all_changes_<ci>(@from_lsn, @to_lsn, N'all update old' | N'all')``: checked
  like SQL Server checks it (an unknown capture instance, ``from_lsn`` below the instance's
  ``start_lsn`` or ``to_lsn`` beyond the max LSN fail with error 313, as documented), then read
  from ``cdc.<ci>_CT`` with the row filter's meaning;
* ``EXEC sys.sp_cdc_help_change_data_capture``: the documented result columns;
* the SQL Server Agent query of Debezium's ``database.sqlserver.agent.status.query``, and
  ``sys.databases.is_cdc_enabled``;
* plain ``SELECT``s of tables and catalog views (``INFORMATION_SCHEMA.COLUMNS``,
  ``cdc.lsn_time_mapping``, ``cdc.captured_columns``, ``cdc.change_tables``): two-part names,
  ``TOP (n)``, ``N'...'`` and ``WITH (TABLOCKX)`` are translated to SQLite, which runs them;
* ``SET TRANSACTION ISOLATION LEVEL ...``: ``SNAPSHOT`` reads one SQLite snapshot until the
  commit; ``REPEATABLE READ`` keeps a lock on every table read, and ``TABLOCKX`` an exclusive one,
  until the commit (a write to a locked table fails with error 1222, since the model cannot
  block); ``READ COMMITTED``/``READ UNCOMMITTED`` read the latest commit per statement.

Errors carry pyodbc's ``(sqlstate, message)`` arguments: a server that is down or restarted is
``OperationalError('08S01', ...)``, as FreeTDS reports it.

Columns of the types FreeTDS reports with an ODBC type pyodbc has no mapping for
(``datetimeoffset``: -155 ``SQL_SS_TIMESTAMPOFFSET``; ``sql_variant``: 0 ``SQL_UNKNOWN_TYPE``,
FreeTDS's ``data_variant_server_to_sql_type`` "TODO support it"; Microsoft's driver says -150)
fail the fetch of a row with pyodbc's ``ProgrammingError('HY106', 'ODBC SQL type -155 is not
yet supported.  column-index=N  type=-155')`` unless the connection registered an output
converter for the type (``Connection.add_output_converter``, pyodbc wiki "Using an Output
Converter function", mkleehammer/pyodbc#134, #404); the converter gets the value as the
driver's ``SQL_C_BINARY`` bytes (``None`` for NULL): a ``datetimeoffset`` as FreeTDS's
``odbc_convert_datetime_to_binary`` writes it, ``SQL_SS_TIMESTAMPOFFSET_STRUCT`` (``struct``
``<6hI2h``: the local year, month, day, hour, minute, second, the fraction in nanoseconds, the
offset's hours and minutes, both negative west of UTC). FreeTDS reports the CLR types
(``hierarchyid``, ``geometry``, ``geography``) as ``SQL_LONGVARBINARY``: their bytes
(Microsoft's driver says -151 ``SQL_SS_UDT``, for which the agent registers a converter too).
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import struct
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from tests.mssqlmodel.server import ZERO_LSN, Column, SqlServerModel, decode
from tests.sqlite_model import (
    DatabaseError,
    Error,
    InterfaceError,
    OperationalError,
    ProgrammingError,
    ResultCursor,
)

__all__ = [
    "Connection",
    "Cursor",
    "DatabaseError",
    "Error",
    "InterfaceError",
    "OperationalError",
    "ProgrammingError",
    "connect",
]

apilevel = "2.0"
paramstyle = "qmark"


def connect(connection_string: str, *, autocommit: bool = False, timeout: int = 0) -> Connection:
    """Open a session, like ``pyodbc.connect``.

    Raises:
        OperationalError: The server is down (``08S01``).
        ProgrammingError: The database does not exist (error 4060).
    """
    parts = _parse(connection_string)
    model = SqlServerModel(Path(parts["SERVER"]))
    state = model.server_state()
    if state["refuse"]:
        raise OperationalError(
            "08S01",
            "[08S01] [FreeTDS][SQL Server]Unable to connect: Adaptive Server is unavailable or "
            "does not exist (20009) (SQLDriverConnect)",
        )
    db = parts.get("DATABASE", "master")
    if db not in state["databases"]:
        raise ProgrammingError(
            "42000",
            f'[42000] [FreeTDS][SQL Server]Cannot open database "{db}" requested by the login. '
            "The login failed. (4060) (SQLDriverConnect)",
        )
    return Connection(model, db, int(state.get("generation", 0)), autocommit)


def _parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for match in re.finditer(r"([^=;]+)=(\{(?:[^}]|\}\})*\}|[^;]*);?", text):
        value = match.group(2)
        if value.startswith("{"):
            value = value[1:-1].replace("}}", "}")
        out[match.group(1).strip().upper()] = value
    return out


class Connection:
    """A session on one database (see the module docstring)."""

    def __init__(self, model: SqlServerModel, db: str, generation: int, autocommit: bool) -> None:
        self.model = model
        self.db = db
        self.autocommit = autocommit
        self.timeout = 0
        self._generation = generation
        self._sqlite: sqlite3.Connection | None = model.open(db)
        self._isolation = "READ COMMITTED"
        self._id = uuid.uuid4().hex
        self.statements: list[str] = []
        self.converters: dict[int, Callable[[Any], Any]] = {}

    def cursor(self) -> Cursor:
        """A cursor."""
        return Cursor(self)

    def execute(self, sql: str, *params: Any) -> Cursor:
        """``pyodbc.Connection.execute``: a new cursor that ran ``sql``."""
        return self.cursor().execute(sql, *params)

    def _alive(self) -> sqlite3.Connection:
        if self._sqlite is None:
            raise ProgrammingError("HY000", "Attempt to use a closed connection.")
        state = self.model.server_state()
        if state["refuse"] or int(state.get("generation", 0)) != self._generation:
            raise OperationalError(
                "08S01", "[08S01] [FreeTDS][SQL Server]Communication link failure (SQLExecDirectW)"
            )
        return self._sqlite

    def commit(self) -> None:
        """End the transaction: the snapshot and the locks go."""
        conn = self._alive()
        if conn.in_transaction:
            conn.execute("COMMIT")
        self.model.release(self._id)

    def rollback(self) -> None:
        """Like :meth:`commit` (the agent only reads)."""
        self.commit()

    def close(self) -> None:
        """Close the session (an open transaction ends)."""
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None
            self.model.release(self._id)

    def add_output_converter(self, sqltype: int, func: Callable[[Any], Any] | None) -> None:
        """``pyodbc.Connection.add_output_converter``: ``func`` turns the driver's bytes of
        ``sqltype`` columns into the value fetched (None removes it)."""
        if func is None:
            self.converters.pop(sqltype, None)
        else:
            self.converters[sqltype] = func

    def get_output_converter(self, sqltype: int) -> Callable[[Any], Any] | None:
        """The converter registered for ``sqltype``, or None."""
        return self.converters.get(sqltype)


_AGENT_QUERY = re.compile(
    r"SELECT CASE WHEN dss\.\[status\]\s*=\s*4 THEN 1 ELSE 0 END AS isRunning FROM "
    r"sys\.dm_server_services dss WHERE dss\.\[servicename\] LIKE N'SQL Server Agent \(%'",
    re.IGNORECASE,
)
_SCALAR = re.compile(
    r"SELECT sys\.(fn_cdc_get_max_lsn|fn_cdc_get_min_lsn|fn_cdc_increment_lsn|"
    r"fn_cdc_map_lsn_to_time)\((\?|)\)",
    re.IGNORECASE,
)
_ALL_CHANGES = re.compile(
    r"cdc\.fn_cdc_get_all_changes_(\w+)\(\s*\?\s*,\s*\?\s*,\s*N'(all|all update old)'\s*\)",
    re.IGNORECASE,
)
_ISOLATION = re.compile(
    r"SET TRANSACTION ISOLATION LEVEL (READ UNCOMMITTED|READ COMMITTED|REPEATABLE READ|"
    r"SNAPSHOT|SERIALIZABLE)",
    re.IGNORECASE,
)
_CDC_ENABLED = re.compile(
    r"SELECT is_cdc_enabled FROM sys\.databases WHERE name = \?", re.IGNORECASE
)
_HELP = re.compile(r"EXEC sys\.sp_cdc_help_change_data_capture", re.IGNORECASE)
_TWO_PART = re.compile(r"\[([^\]]+)\]\.\[([^\]]+)\]")
_CATALOG = re.compile(
    r"\b(cdc\.(?:lsn_time_mapping|captured_columns|change_tables)|INFORMATION_SCHEMA\.COLUMNS)\b",
    re.IGNORECASE,
)
_TOP = re.compile(r"SELECT TOP \((\?|\d+)\)", re.IGNORECASE)
_TABLOCKX = re.compile(r"\s+WITH \(TABLOCKX\)", re.IGNORECASE)
_FROM_TABLE = re.compile(r"FROM \[([^\].]+)\.([^\]]+)\]")
_UNKNOWN_FUNCTION = re.compile(r"\b(?:cdc|sys)\.fn_\w+\(", re.IGNORECASE)
_KNOWN = re.compile(r"^\s*SELECT\b", re.IGNORECASE)

_HELP_COLUMNS = (
    "source_schema",
    "source_table",
    "capture_instance",
    "object_id",
    "source_object_id",
    "start_lsn",
    "end_lsn",
    "supports_net_changes",
    "has_drop_pending",
    "role_name",
    "index_name",
    "filegroup_name",
    "create_date",
    "index_column_list",
    "captured_column_list",
)
_DATETIME_COLUMNS = frozenset({"tran_begin_time", "tran_end_time", "create_date"})


SQL_UNKNOWN_TYPE = 0
SQL_SS_TIMESTAMPOFFSET = -155
_UNMAPPED = {"datetimeoffset": SQL_SS_TIMESTAMPOFFSET, "sql_variant": SQL_UNKNOWN_TYPE}
"""SQL Server types pyodbc has no mapping for, by the ODBC type FreeTDS reports for them."""
_CLR = frozenset({"hierarchyid", "geometry", "geography"})
"""Reported as ``SQL_LONGVARBINARY`` by FreeTDS: pyodbc returns their bytes."""
_OFFSET_TEXT = re.compile(
    r"^(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d):(\d\d)(?:\.(\d{1,7}))? ?([+-])(\d\d):(\d\d)$"
)


def offset_struct(value: Any) -> bytes:
    """A stored ``datetimeoffset`` (text with up to 7 fraction digits, or an aware datetime) as
    ``SQL_SS_TIMESTAMPOFFSET_STRUCT``."""
    text = value.isoformat(sep=" ") if isinstance(value, dt.datetime) else str(value).strip()
    match = _OFFSET_TEXT.match(text)
    if match is None:
        raise ValueError(f"not a datetimeoffset: {value!r}")
    y, mo, d, h, mi, sec, fraction, sign, oh, om = match.groups()
    nanos = int(((fraction or "") + "000000000")[:9])
    factor = -1 if sign == "-" else 1
    fields = (int(y), int(mo), int(d), int(h), int(mi), int(sec))
    return struct.pack("<6hI2h", *fields, nanos, factor * int(oh), factor * int(om))


def _driver_bytes(base: str, value: Any) -> bytes | None:
    if value is None:
        return None
    if base == "datetimeoffset":
        return offset_struct(value)
    return bytes(value) if isinstance(value, bytes | bytearray) else str(value).encode("utf-8")


class Cursor(ResultCursor):
    """A cursor of a :class:`Connection`."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.connection = conn
        self._unsupported: ProgrammingError | None = None

    def _check_fetch(self) -> None:
        # pyodbc fails on the first row it reads a column of an unmapped type from
        if self._unsupported is not None and self._at < len(self._rows):
            raise self._unsupported

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or None."""
        self._check_fetch()
        return super().fetchone()

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        """Up to ``size`` rows."""
        self._check_fetch()
        return super().fetchmany(size)

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The remaining rows."""
        self._check_fetch()
        return super().fetchall()

    def _typed(self, names: Sequence[str], types: dict[str, Column], raw: tuple[Any, ...]) -> Any:
        """One row as pyodbc returns it; an unmapped type through the connection's converter
        (without one, the fetch fails: :meth:`_check_fetch`)."""
        out: list[Any] = []
        for index, (name, value) in enumerate(zip(names, raw, strict=True)):
            column = types.get(name)
            code = None if column is None else _UNMAPPED.get(column.base)
            if column is not None and code is not None:
                convert = self.connection.converters.get(code)
                if convert is None:
                    self._unsupported = self._unsupported or ProgrammingError(
                        "HY106",
                        f"ODBC SQL type {code} is not yet supported.  column-index={index}  "
                        f"type={code}",
                    )
                    out.append(None)
                else:
                    out.append(convert(_driver_bytes(column.base, value)))
            elif column is not None and column.base in _CLR and value is not None:
                out.append(_driver_bytes(column.base, value))
            elif column is not None:
                out.append(decode(column, value))
            elif name in _DATETIME_COLUMNS and isinstance(value, str):
                out.append(dt.datetime.fromisoformat(value))
            else:
                out.append(value)
        return tuple(out)

    def execute(self, sql: str, *params: Any) -> Cursor:
        """Run one statement (pyodbc style: parameters as arguments or one sequence)."""
        if len(params) == 1 and isinstance(params[0], list | tuple):
            params = tuple(params[0])
        conn = self.connection
        lite = conn._alive()
        conn.statements.append(sql)
        self._at = 0
        self._unsupported = None
        if match := _ISOLATION.fullmatch(sql.strip()):
            conn._isolation = match.group(1).upper()
            self._result([], [])
            return self
        if conn._isolation == "SNAPSHOT" and not lite.in_transaction:
            lite.execute("BEGIN")  # the snapshot is taken at the first read, as in SQL Server
        if _AGENT_QUERY.fullmatch(sql.strip()):
            running = conn.model.server_state()["agent_running"]
            self._result(["isRunning"], [(1 if running else 0,)])
        elif _CDC_ENABLED.fullmatch(sql.strip()):
            dbs = conn.model.server_state()["databases"]
            name = params[0]
            self._result(["is_cdc_enabled"], [(bool(dbs[name]),)] if name in dbs else [])
        elif match := _SCALAR.fullmatch(sql.strip()):
            self._scalar(lite, match.group(1).lower(), params)
        elif _HELP.fullmatch(sql.strip()):
            self._help(lite)
        elif _UNKNOWN_FUNCTION.search(sql) and not _ALL_CHANGES.search(sql):
            raise ProgrammingError("42000", f"the SQL Server model does not know: {sql!r}")
        elif _KNOWN.match(sql):
            self._select(lite, sql, params)
        else:
            raise ProgrammingError("42000", f"the SQL Server model does not know: {sql!r}")
        return self

    def _scalar(self, lite: sqlite3.Connection, name: str, params: Sequence[Any]) -> None:
        if name == "fn_cdc_get_max_lsn":
            (value,) = lite.execute("SELECT MAX(start_lsn) FROM [cdc.lsn_time_mapping]").fetchone()
        elif name == "fn_cdc_get_min_lsn":
            row = lite.execute(
                "SELECT start_lsn FROM [cdc.change_tables] WHERE capture_instance = ?",
                (params[0],),
            ).fetchone()
            value = ZERO_LSN if row is None else row[0]  # documented: 0x00... for no instance
        elif name == "fn_cdc_increment_lsn":
            value = _increment(bytes(params[0]))
        else:
            row = lite.execute(
                "SELECT tran_end_time FROM [cdc.lsn_time_mapping] WHERE start_lsn <= ? "
                "ORDER BY start_lsn DESC LIMIT 1",
                (bytes(params[0]),),
            ).fetchone()
            value = None if row is None else dt.datetime.fromisoformat(row[0])
        self._result([""], [(value,)])

    def _help(self, lite: sqlite3.Connection) -> None:
        rows = []
        for object_id, ci, schema, table, start, index_columns, created in lite.execute(
            "SELECT object_id, capture_instance, source_schema, source_table, start_lsn, "
            "index_column_list, create_date FROM [cdc.change_tables] ORDER BY object_id"
        ).fetchall():
            captured = ", ".join(
                f"[{n}]"
                for (n,) in lite.execute(
                    "SELECT column_name FROM [cdc.captured_columns] WHERE object_id = ? "
                    "ORDER BY column_ordinal",
                    (object_id,),
                )
            )
            rows.append(
                (
                    schema,
                    table,
                    ci,
                    object_id,
                    object_id + 100_000,
                    start,
                    None,
                    False,
                    None,
                    None,
                    "PK_" + table,
                    None,
                    dt.datetime.fromisoformat(created),
                    index_columns,
                    captured,
                )
            )
        self._result(_HELP_COLUMNS, rows)

    def _select(self, lite: sqlite3.Connection, sql: str, params: Sequence[Any]) -> None:
        conn = self.connection
        args = [bytes(p) if isinstance(p, bytearray) else p for p in params]
        types: dict[str, Column] = {}
        text = sql
        if match := _ALL_CHANGES.search(text):
            ci, row_filter = match.group(1), match.group(2).lower()
            marks = text[: match.start()].count("?")
            from_lsn, to_lsn = bytes(args[marks]), bytes(args[marks + 1])
            source = self._check_all_changes(lite, ci, from_lsn, to_lsn)
            types = {c.name: c for c in SqlServerModel.columns_in(lite, *source)}
            captured = [
                n
                for (n,) in lite.execute(
                    "SELECT cc.column_name FROM [cdc.captured_columns] cc JOIN "
                    "[cdc.change_tables] ct ON cc.object_id = ct.object_id WHERE "
                    "ct.capture_instance = ? ORDER BY cc.column_ordinal",
                    (ci,),
                )
            ]
            wanted = "" if row_filter == "all update old" else " AND [__$operation] <> 3"
            cols = ", ".join(f"[{n}]" for n in captured)
            inner = (
                f"(SELECT [__$start_lsn], [__$seqval], [__$operation], [__$update_mask], {cols} "
                f"FROM [cdc.{ci}_CT] WHERE [__$start_lsn] BETWEEN ? AND ?{wanted})"
            )
            text = text[: match.start()] + inner + text[match.end() :]
        elif match := _FROM_TABLE.search(_TWO_PART.sub(r"[\1.\2]", text)):
            schema, table = match.group(1), match.group(2)
            types = {c.name: c for c in SqlServerModel.columns_in(lite, schema, table)}
            if _TABLOCKX.search(text) or conn._isolation in ("REPEATABLE READ", "SERIALIZABLE"):
                conn.model.lock(conn.db, schema, table, conn._id)
        text = _TWO_PART.sub(r"[\1.\2]", text)
        text = _CATALOG.sub(lambda m: f"[{m.group(1)}]", text)
        text = _TABLOCKX.sub("", text)
        text = text.replace("N'", "'")
        if top := _TOP.search(text):
            limit = top.group(1)
            if limit == "?":
                position = text[: top.start()].count("?")
                limit = str(int(args.pop(position)))
            text = text[: top.start()] + "SELECT" + text[top.end() :] + f" LIMIT {limit}"
        try:
            cursor = lite.execute(text, args)
        except sqlite3.Error as exc:
            raise ProgrammingError("42000", f"{exc} in {sql!r}") from None
        names = [d[0] for d in cursor.description or []]
        self._unsupported = None
        rows = [self._typed(names, types, raw) for raw in cursor.fetchall()]
        self._result(names, rows)

    @staticmethod
    def _check_all_changes(
        lite: sqlite3.Connection, ci: str, from_lsn: bytes, to_lsn: bytes
    ) -> tuple[str, str]:
        row = lite.execute(
            "SELECT source_schema, source_table, start_lsn FROM [cdc.change_tables] "
            "WHERE capture_instance = ?",
            (ci,),
        ).fetchone()
        (max_lsn,) = lite.execute("SELECT MAX(start_lsn) FROM [cdc.lsn_time_mapping]").fetchone()
        if row is None or from_lsn < row[2] or max_lsn is None or to_lsn > max_lsn:
            # Microsoft documents this (odd) message for an LSN range outside the instance's.
            raise ProgrammingError(
                "42000",
                "[42000] [FreeTDS][SQL Server]An insufficient number of arguments were supplied "
                f"for the procedure or function cdc.fn_cdc_get_all_changes_{ci}. (313)",
            )
        return str(row[0]), str(row[1])


def _increment(lsn: bytes) -> bytes:
    """``sys.fn_cdc_increment_lsn``: the next LSN (the next slot)."""
    return (int.from_bytes(lsn, "big") + 1).to_bytes(10, "big")
