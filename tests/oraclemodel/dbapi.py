"""A DB-API 2.0 stand-in for python-oracledb over the Oracle model (:mod:`.database`).

``connect(user=..., password=..., dsn=<model file>)`` opens a session on the model saved at
``dsn``. :meth:`Cursor.execute` interprets the statements the Oracle agent sends, by their text
(statements it does not know raise ``ORA-00900: invalid SQL statement``), and answers from the
model as Oracle would: the ``V$`` views, the catalog views, flashback ``SELECT ... AS OF SCN``,
and the LogMiner session, which is private to the connection (``ADD_LOGFILE`` registers files,
``START_LOGMNR`` checks that the registered logs cover the SCN range of every thread, the
``V$LOGMNR_CONTENTS`` query returns their rows). Errors carry Oracle's codes and texts.

Fetched values are typed as python-oracledb types them (its documentation and sources, thin
mode), not as a test stored them: ``NUMBER`` is an ``int`` when the column's scale is 0 (or the
``NUMBER`` is unconstrained) and the value integral, else a binary ``float``, unless an output
type handler (``Connection.outputtypehandler`` / ``Cursor.outputtypehandler``, the
``(cursor, metadata)`` form) returns ``cursor.var(decimal.Decimal)``; ``TIMESTAMP WITH TIME
ZONE`` is a naive ``datetime`` holding the value's own wall clock, its offset dropped
(oracle/python-oracledb#274, #373); ``SYS_EXTRACT_UTC(...)`` is a naive ``TIMESTAMP`` in UTC.

The agent picks this module instead of ``oracledb`` when ``MEDALLION_ORACLE_DBAPI`` names it.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, localcontext
from pathlib import Path
from typing import Any

from tests.oraclemodel.database import (
    MAX_SCN,
    Column,
    OracleModel,
    RedoRow,
)

__all__ = [
    "DB_TYPE_NUMBER",
    "DB_TYPE_TIMESTAMP",
    "DB_TYPE_TIMESTAMP_TZ",
    "DatabaseError",
    "Error",
    "InterfaceError",
    "OperationalError",
    "connect",
]

apilevel = "2.0"
paramstyle = "numeric"


class Error(Exception):
    """DB-API root."""


class DatabaseError(Error):
    """An ORA- error."""


class OperationalError(DatabaseError):
    """The session or the network is gone."""


class InterfaceError(Error):
    """The connection was closed."""


@dataclass(frozen=True)
class DbType:
    """A database type object (``oracledb.DB_TYPE_*``): compared by identity."""

    name: str


DB_TYPE_NUMBER = DbType("DB_TYPE_NUMBER")
DB_TYPE_BINARY_FLOAT = DbType("DB_TYPE_BINARY_FLOAT")
DB_TYPE_BINARY_DOUBLE = DbType("DB_TYPE_BINARY_DOUBLE")
DB_TYPE_VARCHAR = DbType("DB_TYPE_VARCHAR")
DB_TYPE_NVARCHAR = DbType("DB_TYPE_NVARCHAR")
DB_TYPE_CHAR = DbType("DB_TYPE_CHAR")
DB_TYPE_NCHAR = DbType("DB_TYPE_NCHAR")
DB_TYPE_RAW = DbType("DB_TYPE_RAW")
DB_TYPE_DATE = DbType("DB_TYPE_DATE")
DB_TYPE_TIMESTAMP = DbType("DB_TYPE_TIMESTAMP")
DB_TYPE_TIMESTAMP_TZ = DbType("DB_TYPE_TIMESTAMP_TZ")
DB_TYPE_TIMESTAMP_LTZ = DbType("DB_TYPE_TIMESTAMP_LTZ")
DB_TYPE_INTERVAL_DS = DbType("DB_TYPE_INTERVAL_DS")
DB_TYPE_INTERVAL_YM = DbType("DB_TYPE_INTERVAL_YM")
DB_TYPE_CLOB = DbType("DB_TYPE_CLOB")
DB_TYPE_NCLOB = DbType("DB_TYPE_NCLOB")
DB_TYPE_BLOB = DbType("DB_TYPE_BLOB")
DB_TYPE_ROWID = DbType("DB_TYPE_ROWID")

_DB_TYPES = {
    "NUMBER": DB_TYPE_NUMBER,
    "INTEGER": DB_TYPE_NUMBER,
    "FLOAT": DB_TYPE_NUMBER,
    "BINARY_FLOAT": DB_TYPE_BINARY_FLOAT,
    "BINARY_DOUBLE": DB_TYPE_BINARY_DOUBLE,
    "VARCHAR2": DB_TYPE_VARCHAR,
    "VARCHAR": DB_TYPE_VARCHAR,
    "NVARCHAR2": DB_TYPE_NVARCHAR,
    "CHAR": DB_TYPE_CHAR,
    "NCHAR": DB_TYPE_NCHAR,
    "RAW": DB_TYPE_RAW,
    "DATE": DB_TYPE_DATE,
    "CLOB": DB_TYPE_CLOB,
    "NCLOB": DB_TYPE_NCLOB,
    "BLOB": DB_TYPE_BLOB,
    "ROWID": DB_TYPE_ROWID,
}


def _db_type(data_type: str) -> DbType:
    if data_type.startswith("TIMESTAMP"):
        if "LOCAL" in data_type:
            return DB_TYPE_TIMESTAMP_LTZ
        return DB_TYPE_TIMESTAMP_TZ if "TIME ZONE" in data_type else DB_TYPE_TIMESTAMP
    if data_type.startswith("INTERVAL"):
        return DB_TYPE_INTERVAL_YM if "YEAR" in data_type else DB_TYPE_INTERVAL_DS
    return _DB_TYPES.get(data_type, DB_TYPE_VARCHAR)


@dataclass(frozen=True)
class FetchInfo:
    """The metadata python-oracledb hands a ``(cursor, metadata)`` output type handler."""

    name: str
    type_code: DbType
    precision: int
    scale: int
    null_ok: bool


def _fetch_info(name: str, column: Column, utc: bool) -> FetchInfo:
    """As Oracle describes the select item: an unconstrained ``NUMBER`` and ``FLOAT(P)`` have
    scale -127 (precision 0 and P), ``INTEGER`` is ``NUMBER(38,0)``; ``SYS_EXTRACT_UTC`` of a
    zoned timestamp is a ``TIMESTAMP``."""
    kind = column.data_type
    precision, scale = column.precision or 0, column.scale or 0
    if kind == "INTEGER":
        precision, scale = 38, 0
    elif kind == "FLOAT" or (kind == "NUMBER" and column.precision is None):
        scale = -127
    code = DB_TYPE_TIMESTAMP if utc else _db_type(kind)
    return FetchInfo(name, code, precision, scale, column.nullable)


def _dictionary_type(column: Column) -> tuple[str, int | None, int | None]:
    """``DATA_TYPE``, ``DATA_PRECISION``, ``DATA_SCALE`` as ``ALL_TAB_COLUMNS`` shows a column:
    Oracle stores ``INTEGER``/``INT``/``SMALLINT`` as ``NUMBER(*,0)``, no precision, scale 0."""
    if column.data_type in ("INTEGER", "INT", "SMALLINT"):
        return "NUMBER", None, 0
    return column.data_type, column.precision, column.scale


@dataclass(frozen=True)
class Var:
    """What ``cursor.var(...)`` returns: the Python type fetched values take."""

    type: Any
    size: int = 0
    arraysize: int = 1


def _number_text(value: Any) -> str:
    """A NUMBER as Oracle's text of it: no exponent, no trailing fractional zeros."""
    number = value if isinstance(value, Decimal) else Decimal(str(value))
    with localcontext() as context:
        context.prec = len(number.as_tuple().digits) + 1  # normalize() rounds to the context
        return format(number.normalize(), "f")


def _fetched(info: FetchInfo, var: Var | None, value: Any) -> Any:
    """``value`` as python-oracledb returns it for ``info`` (``var``: the handler's)."""
    if value is None:
        return None
    if info.type_code is DB_TYPE_NUMBER:
        text = _number_text(value)
        if var is not None and var.type is Decimal:
            return Decimal(text)
        if var is not None and var.type is str:
            return text
        # get_preferred_num_type: int for scale 0 or an unconstrained NUMBER; an int only when
        # the text has no decimal point, else float (thin and thick modes alike)
        wants_int = info.scale == 0 or (info.scale == -127 and info.precision == 0)
        if (var is not None and var.type is int) or (wants_int and "." not in text):
            return int(Decimal(text))
        return float(text)
    if info.type_code in (DB_TYPE_BINARY_FLOAT, DB_TYPE_BINARY_DOUBLE):
        return float(value)
    if info.type_code is DB_TYPE_TIMESTAMP_TZ and isinstance(value, dt.datetime):
        return value.replace(tzinfo=None)  # the wall clock in its own zone, offset dropped
    return value


_SPACE = re.compile(r"\s+")


def _norm(sql: str) -> str:
    return _SPACE.sub(" ", sql).strip()


def connect(*, user: str, password: str | None = None, dsn: str, **_: Any) -> Connection:
    """Open a session on the model saved at ``dsn``."""
    path = Path(dsn)
    if not path.exists():
        raise OperationalError(
            f"DPY-6005: cannot connect to database (CONNECTION_ID=model).\n"
            f"[Errno 111] Connection refused: no model at {dsn}"
        )
    if time.time() < _cached(path).down_until:
        raise OperationalError(
            "DPY-6005: cannot connect to database (CONNECTION_ID=model).\n"
            "ORA-01033: ORACLE initialization or shutdown in progress"
        )
    return Connection(path, user)


_CACHE: dict[Path, tuple[tuple[int, int], OracleModel]] = {}


def _cached(path: Path) -> OracleModel:
    """The model saved at ``path``, read again only when the file changed (every save
    replaces the file, so its inode and mtime change)."""
    stat = path.stat()
    stamp = (stat.st_ino, stat.st_mtime_ns)
    hit = _CACHE.get(path)
    if hit is None or hit[0] != stamp:
        hit = _CACHE[path] = (stamp, OracleModel.load(path))
    return hit[1]


class Connection:
    """One session: its container and its LogMiner session."""

    def __init__(self, path: Path, user: str) -> None:
        self.path = path
        self.user = user
        self.closed = False
        self.container = "CDB$ROOT"
        self.epoch = _cached(path).epoch
        self.logfiles: dict[str, tuple[int, int]] = {}
        """LogMiner's file list: name -> (thread, sequence) the file held when added."""
        self.mining: tuple[int, int] | None = None
        self.outputtypehandler: Callable[..., Any] | None = None

    def model(self) -> OracleModel:
        if self.closed:
            raise InterfaceError("DPY-1001: not connected to database")
        model = _cached(self.path)
        if model.epoch != self.epoch:
            raise OperationalError("DPY-4011: the database or network closed the connection")
        return model

    def cursor(self) -> Cursor:
        return Cursor(self)

    def commit(self) -> None:
        self.model()

    def rollback(self) -> None:
        self.model()

    def close(self) -> None:
        self.closed = True


class Cursor:
    """Runs one statement at a time; rows are fetched from a list."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.arraysize = 100
        self.description: list[tuple[Any, ...]] | None = None
        self.outputtypehandler: Callable[..., Any] | None = None
        self._rows: list[tuple[Any, ...]] = []

    def var(self, typ: Any, size: int = 0, arraysize: int = 1, **_: Any) -> Var:
        """``Cursor.var``: a variable fetching values as ``typ``."""
        return Var(typ, size, arraysize)

    def __enter__(self) -> Cursor:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._rows = []

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> None:
        model = self.conn.model()
        text = _norm(sql)
        args = list(params.values()) if isinstance(params, dict) else list(params or ())
        self._rows, names = _run(self.conn, model, text, args, self)
        self.description = [(n, None, None, None, None, None, None) for n in names]

    def fetchone(self) -> tuple[Any, ...] | None:
        return self._rows.pop(0) if self._rows else None

    def fetchmany(self, size: int | None = None) -> list[tuple[Any, ...]]:
        n = size or self.arraysize
        out, self._rows = self._rows[:n], self._rows[n:]
        return out

    def fetchall(self) -> list[tuple[Any, ...]]:
        out, self._rows = self._rows, []
        return out


Result = tuple[list[tuple[Any, ...]], list[str]]


def _ora(code: str, text: str) -> DatabaseError:
    return DatabaseError(f"ORA-{code}: {text}")


def _run(conn: Connection, model: OracleModel, sql: str, args: list[Any], cursor: Cursor) -> Result:
    upper = sql.upper()
    if upper.startswith("ALTER SESSION SET CONTAINER"):
        name = sql.split("=", 1)[1].strip().strip('"')
        if name.upper() not in (model.pdb, "CDB$ROOT"):
            raise _ora("65011", f"Pluggable database {name.upper()} does not exist.")
        conn.container = name.upper()
        return [], []
    if upper.startswith(("ALTER SESSION SET NLS_", "ALTER SESSION SET TIME_ZONE")):
        return [], []
    if upper.startswith("BEGIN"):
        return _plsql(conn, model, upper, args), []
    if upper == "SELECT CURRENT_SCN FROM V$DATABASE":
        return [(model.scn,)], ["CURRENT_SCN"]
    rows: list[tuple[Any, ...]]
    if "FROM V$DATABASE D LEFT OUTER JOIN V$TRANSACTION T" in upper:
        rows = [
            (model.scn, tx.xid, tx.start_scn)
            for tx in model.open.values()
            if tx.start_scn and tx.start_scn < model.scn
        ]
        return rows or [(model.scn, None, None)], ["CURRENT_SCN", "XID", "START_SCN"]
    if upper.startswith("SELECT OWNER, TABLE_NAME FROM ALL_TABLES"):
        _in_pdb(conn, model)
        return sorted(model.tables), ["OWNER", "TABLE_NAME"]
    # a catalog view shows no rows for a table that does not exist (no error)
    if "FROM ALL_TAB_COLUMNS" in upper:
        _in_pdb(conn, model)
        found = model.tables.get((args[0], args[1]))
        every = ["COLUMN_NAME", "DATA_TYPE", "DATA_PRECISION", "DATA_SCALE", "NULLABLE"]
        every.append("DATA_DEFAULT")
        rows = [
            (c.name, *_dictionary_type(c), "Y" if c.nullable else "N", c.default)
            for c in ([] if found is None else found.columns)
        ]
        # the columns the statement selects, in its order
        listed = upper.split("SELECT", 1)[1].split("FROM ALL_TAB_COLUMNS", 1)[0]
        names = [n.strip() for n in listed.split(",")]
        at = [every.index(n) for n in names]
        return [tuple(r[i] for i in at) for r in rows], names
    if "FROM ALL_CONSTRAINTS" in upper:
        _in_pdb(conn, model)
        found = model.tables.get((args[0], args[1]))
        return [(k,) for k in ([] if found is None else found.key)], ["COLUMN_NAME"]
    if " AS OF SCN " in upper:
        return _flashback(conn, model, sql, args, cursor)
    if upper.startswith("SELECT MIN(FIRST_CHANGE#)"):
        firsts = [log.first_change for log in model.logs if log.online or not log.purged]
        return [(min(firsts),)], ["MIN(FIRST_CHANGE#)"]
    if "FROM V$LOG L JOIN V$LOGFILE F" in upper:
        return _log_list(model, int(args[0]))
    if upper.startswith("SELECT THREAD#, SEQUENCE# FROM V$LOG WHERE STATUS = 'CURRENT'"):
        return [(log.thread, log.sequence) for log in model.logs if log.current], ["T", "S"]
    if upper.startswith("SELECT THREAD#, SEQUENCE#, FIRST_CHANGE#, NEXT_CHANGE#, BYTES FROM"):
        rows = [
            (log.thread, log.sequence, log.first_change, log.next_change, log.size())
            for log in model.logs
            if log.online or (log.archived and not log.purged)
        ]
        return rows, ["THREAD#", "SEQUENCE#", "FIRST_CHANGE#", "NEXT_CHANGE#", "BYTES"]
    if "FROM V$LOGMNR_CONTENTS" in upper:
        return _contents(conn, model, sql, args)
    flush = _flush_table(conn, model, sql, args)
    if flush is not None:
        return flush
    raise _ora("00900", f"invalid SQL statement (the model does not know: {sql[:120]})")


_USER_TABLE = re.compile(
    r'^(?:CREATE TABLE "(?P<create>[^"]+)" \(LAST_SCN NUMBER\(19,0\)\)'
    r'|SELECT COUNT\(\*\) FROM "(?P<count>[^"]+)"'
    r'|DELETE FROM "(?P<delete>[^"]+)"'
    r'|INSERT INTO "(?P<insert>[^"]+)" VALUES \(0\)'
    r'|UPDATE "(?P<update>[^"]+)" SET LAST_SCN = :1)$',
    re.IGNORECASE,
)


def _flush_table(conn: Connection, model: OracleModel, sql: str, args: list[Any]) -> Result | None:
    """The LGWR flush table of the connector's user, in the PDB: its catalog row, CREATE, and
    the statements on its one ``LAST_SCN`` row. An UPDATE is committed at once (the agent
    commits it): with ``log_buffer`` the commit makes LGWR write the log buffer."""
    if sql.upper().startswith("SELECT COUNT(*) FROM USER_TABLES WHERE TABLE_NAME = :1"):
        _in_pdb(conn, model)
        return [(1 if str(args[0]) in model.flush_tables else 0,)], ["COUNT(*)"]
    match = _USER_TABLE.match(sql)
    if match is None:
        return None
    _in_pdb(conn, model)
    name = next(v for v in match.groupdict().values() if v is not None)
    if match["create"] is None and name not in model.flush_tables:
        raise _ora("00942", "table or view does not exist")
    if match["count"] is not None:
        return [(len(model.flush_tables[name]),)], ["COUNT(*)"]
    if match["update"] is not None and not model.log_buffer:
        return [], []  # nothing observable changes: spare the model file a write per round
    with OracleModel.edit(conn.path) as edited:
        if match["create"] is not None:
            if name in edited.flush_tables:
                raise _ora("00955", "name is already used by an existing object")
            edited.flush_tables[name] = []
        elif match["delete"] is not None:
            edited.flush_tables[name] = []
        elif match["insert"] is not None:
            edited.flush_tables[name].append(0)
        else:
            edited.flush_tables[name] = [int(args[0])] * len(edited.flush_tables[name])
            edited.scn += 1  # the flush transaction's commit
            edited.flush()
    return [], []


def _in_pdb(conn: Connection, model: OracleModel) -> None:
    if conn.container != model.pdb:
        # The application tables live in the PDB; from CDB$ROOT they are not visible.
        raise _ora("00942", "table or view does not exist (session is in CDB$ROOT)")


def _table(conn: Connection, model: OracleModel, owner: str, name: str) -> Any:
    _in_pdb(conn, model)
    table = model.tables.get((owner, name))
    if table is None:
        raise _ora("00942", "table or view does not exist")
    return table


_FLASHBACK = re.compile(
    r'^SELECT (?P<cols>.+?) FROM "(?P<owner>[^"]+)"\."(?P<table>[^"]+)" AS OF SCN :1'
    r"(?: ORDER BY (?P<order>.+))?$",
    re.IGNORECASE,
)


def _flashback(
    conn: Connection, model: OracleModel, sql: str, args: list[Any], cursor: Cursor
) -> Result:
    match = _FLASHBACK.match(sql)
    if match is None:
        raise _ora("00900", f"invalid SQL statement: {sql[:120]}")
    table = _table(conn, model, match["owner"], match["table"])
    scn = int(args[0])
    if scn > model.scn:
        raise _ora("08181", "specified number is not a valid system change number")
    if scn < model.undo_low_scn:
        raise _ora(
            "01555", 'snapshot too old: rollback segment number 7 with name "_SYSSMU7$" too small'
        )
    items = [_select_item(c.strip()) for c in match["cols"].split(",")]
    names = [name for name, _, _ in items]
    columns = {c.name: c for c in table.columns}
    infos = [_fetch_info(n, columns[n], utc) for n, _, utc in items]
    handler = cursor.outputtypehandler or conn.outputtypehandler
    variables = [None if handler is None else handler(cursor, info) for info in infos]
    rows = list(table.committed(scn).values())
    if match["order"]:
        order = [c.strip().strip('"') for c in match["order"].split(",")]
        rows.sort(key=lambda r: tuple(r[c] for c in order))
    fetched = [
        tuple(
            _fetched(info, var, f(r[n]))
            for (n, f, _), info, var in zip(items, infos, variables, strict=True)
        )
        for r in rows
    ]
    return fetched, names


_UTC = re.compile(r'^SYS_EXTRACT_UTC\("(?P<name>[^"]+)"\)$', re.IGNORECASE)


def _select_item(item: str) -> tuple[str, Any, bool]:
    """A select-list item: ``"COL"``, or ``SYS_EXTRACT_UTC("COL")`` (the instant in UTC, zone
    dropped): the column, the function on its value, and whether it is ``SYS_EXTRACT_UTC``."""
    match = _UTC.match(item)
    if match is None:
        return item.strip('"'), lambda v: v, False

    def utc(value: Any) -> Any:
        if isinstance(value, dt.datetime) and value.tzinfo is not None:
            return value.astimezone(dt.UTC).replace(tzinfo=None)
        return value

    return match["name"], utc, True


def _log_list(model: OracleModel, after_scn: int) -> Result:
    """Online logs not yet archived, and available archives ending after ``after_scn``."""
    rows: list[tuple[Any, ...]] = []
    for log in model.logs:
        if log.online and not log.archived:
            rows.append((log.member, log.first_change, log.next_change, log.sequence, log.thread))
        elif log.archived and not log.purged and log.next_change > after_scn:
            rows.append(
                (log.archive_name, log.first_change, log.next_change, log.sequence, log.thread)
            )
    rows.sort(key=lambda r: (r[4], r[3]))
    return rows, ["FILE_NAME", "FIRST_CHANGE", "NEXT_CHANGE", "SEQ", "THREAD"]


def _file(model: OracleModel, name: str) -> Any:
    for log in model.logs:
        if (log.online and log.member == name) or (
            log.archived and not log.purged and log.archive_name == name
        ):
            return log
    raise _ora("01284", f"file {name} cannot be opened")


def _plsql(conn: Connection, model: OracleModel, upper: str, args: list[Any]) -> list[Any]:
    if "DBMS_LOGMNR.ADD_LOGFILE" in upper:
        if "DBMS_LOGMNR.NEW" in upper:
            conn.logfiles.clear()
            conn.mining = None
        log = _file(model, str(args[0]))
        conn.logfiles[str(args[0])] = (log.thread, log.sequence)
        return []
    if "DBMS_LOGMNR.REMOVE_LOGFILE" in upper:
        conn.logfiles.pop(str(args[0]), None)
        return []
    if "DBMS_LOGMNR_D.BUILD" in upper:
        return []
    if "DBMS_LOGMNR.START_LOGMNR" in upper:
        if not conn.logfiles:
            raise _ora("01292", "no log file has been specified for the current LogMiner session")
        start, end = int(args[0]), int(args[1])
        registered = set(conn.logfiles.values())
        for log in model.logs:
            if log.first_change <= end and log.next_change > start:
                if (log.thread, log.sequence) not in registered:
                    raise _ora("01291", "missing logfile")
        conn.mining = (start, end)
        return []
    if "DBMS_LOGMNR.END_LOGMNR" in upper:
        if conn.mining is None and not conn.logfiles:
            raise _ora("01307", "no LogMiner session is currently active")
        conn.mining = None
        conn.logfiles.clear()
        return []
    raise _ora("06550", f"PLS-00201: identifier must be declared: {upper[:100]}")


_SELECT_LIST = re.compile(r"^SELECT (?P<cols>.+?) FROM V\$LOGMNR_CONTENTS", re.IGNORECASE)
_CODES = re.compile(r"OPERATION_CODE IN \((?P<codes>[\d, ]+)\)", re.IGNORECASE)
_COLUMNS = {
    "SCN": "scn",
    "SQL_REDO": "sql_redo",
    "OPERATION_CODE": "operation_code",
    "TIMESTAMP": "timestamp",
    "XID": "xid",
    "CSF": "csf",
    "TABLE_NAME": "table_name",
    "SEG_OWNER": "seg_owner",
    "OPERATION": "operation",
    "USERNAME": "username",
    "ROW_ID": "row_id",
    "ROLLBACK": "rollback",
    "RS_ID": "rs_id",
    "SSN": "ssn",
    "THREAD#": "thread",
    "INFO": "info",
    "SRC_CON_NAME": "src_con_name",
}


def _contents(conn: Connection, model: OracleModel, sql: str, args: list[Any]) -> Result:
    """``SELECT ... FROM V$LOGMNR_CONTENTS WHERE SCN > :1 AND SCN <= :2 AND SRC_CON_NAME = :3
    AND (OPERATION_CODE IN (...) ...)``: the registered logs' rows in the session's range."""
    if conn.mining is None:
        raise _ora(
            "01306",
            "dbms_logmnr.start_logmnr() must be invoked before selecting from v$logmnr_contents",
        )
    select, codes = _SELECT_LIST.match(sql), _CODES.search(sql)
    if select is None or codes is None or "SCN > :1 AND SCN <= :2" not in sql.upper():
        raise _ora("00900", f"invalid SQL statement: {sql[:120]}")
    names = [c.strip().upper() for c in select["cols"].split(",")]
    wanted = {int(c) for c in codes["codes"].split(",")}
    ddl = "OR (OPERATION_CODE = 5 AND INFO NOT LIKE 'INTERNAL DDL%')" in sql.upper()
    low, high = int(args[0]), int(args[1])
    container = str(args[2]).upper() if len(args) > 2 else None
    start, end = conn.mining
    rows: list[RedoRow] = []
    for name, (thread, sequence) in conn.logfiles.items():
        log = _file(model, name)
        if (log.thread, log.sequence) != (thread, sequence):
            # the online group was reused after the file was added
            raise _ora(
                "00310",
                f"archived log contains sequence {log.sequence}; sequence {sequence} required",
            )
        rows += [
            r
            for r in log.rows
            if start <= r.scn <= end
            and low < r.scn <= high
            and (
                r.operation_code in wanted
                or (ddl and r.operation_code == 5 and not (r.info or "").startswith("INTERNAL DDL"))
            )
            and (container is None or r.src_con_name == container)
        ]
    if model.log_buffer:
        rows = [r for r in rows if r.scn <= model.flushed_scn]  # the rest is still in memory
    rows.sort(key=lambda r: (r.scn, r.thread, r.rs_id))
    return [tuple(_column(r, n) for n in names) for r in rows], names


def _column(row: RedoRow, name: str) -> Any:
    value = getattr(row, _COLUMNS[name])
    return bytes.fromhex(value) if name == "XID" else value  # XID is RAW(8)


_ = MAX_SCN
