"""A DB-API stand-in for pyodbc (IBM Db2 ODBC/CLI driver) in front of
:class:`tests.db2model.server.Db2Model`.

``connect("DRIVER={IBM DB2 ODBC DRIVER};DATABASE=<db>;HOSTNAME=<model root>;PORT=...;
PROTOCOL=TCPIP;UID=...;PWD=...")`` returns a connection whose cursors accept these statement
forms and nothing else (anything else is SQL0104N, as Db2 answers a statement it cannot parse):

* ``SELECT CURRENT SERVER FROM SYSIBM.SYSDUMMY1``;
* Debezium's maximum-LSN query over ``IBMSNAP_REGISTER`` (``max`` of ``CD_NEW_SYNCHPOINT`` and
  ``SYNCHPOINT``), and plain ``SELECT``s of ``ASNCDC.IBMSNAP_REGISTER``,
  ``ASNCDC.IBMSNAP_UOW``, ``SYSCAT.COLUMNS`` and ``SYSCAT.TABLES`` (``FETCH FIRST n ROWS ONLY``
  becomes SQLite's ``LIMIT``);
* Debezium's change-data-table query (``CASE ... LEAD/LAG(IBMSNAP_OPERATION) OVER (PARTITION BY
  IBMSNAP_COMMITSEQ ORDER BY IBMSNAP_INTENTSEQ) ... OPCODE, cdc.* FROM ASNCDC."CDC_..." cdc
  WHERE IBMSNAP_COMMITSEQ >= ? AND IBMSNAP_COMMITSEQ <= ? order by ...``), run by SQLite's
  window functions;
* ``SELECT "a", "b" FROM "SCHEMA"."TABLE" [WHERE ...] [ORDER BY ...]``: every double-quoted
  name must be a column of that table, exactly as cased (else SQL0206N; an unknown table is
  SQL0204N);
* ``SET CURRENT ISOLATION = UR|CS|RS|RR`` and ``LOCK TABLE "S"."T" IN SHARE|EXCLUSIVE MODE``;
* ``VALUES ASNCDC.ASNCDCSERVICES('status', 'asncdc')``.

A database without the ASN control tables answers SQL0204N for them. Errors carry pyodbc's
``(sqlstate, message)`` arguments with the CLI driver's text: an instance that is down or was
restarted is ``OperationalError('08001'/'40003', '... SQL30081N ...')``.
"""

from __future__ import annotations

import datetime as dt
import re
import sqlite3
import uuid
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tests.db2model.server import IBMSNAP, Column, Db2Model, decode
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

_CLI = "[IBM][CLI Driver][DB2/LINUXX8664]"


def _error(cls: type[Error], state: str, text: str) -> Error:
    return cls(state, f"[{state}] {_CLI} {text} (SQLExecDirectW)")


def connect(connection_string: str, *, autocommit: bool = False, timeout: int = 0) -> Connection:
    """Open a connection, like ``pyodbc.connect``.

    Raises:
        OperationalError: The instance is down (SQL30081N).
        ProgrammingError: No such database (SQL1013N).
    """
    parts = _parse(connection_string)
    model = Db2Model(Path(parts["HOSTNAME"]))
    state = model.server_state()
    if state["refuse"]:
        raise OperationalError(
            "08001",
            f"[08001] {_CLI} SQL30081N  A communication error has been detected. Communication "
            'protocol being used: "TCP/IP".  Location where the error was detected: '
            '"127.0.0.1".  Communication function detecting the error: "connect".  Protocol '
            'specific error code(s): "111", "*", "*".  SQLSTATE=08001 (SQLDriverConnect)',
        )
    if parts.get("PWD") == "wrong":
        raise OperationalError(
            "08001",
            f'[08001] {_CLI} SQL30082N  Security processing failed with reason "24" '
            '("USERNAME AND/OR PASSWORD INVALID").  SQLSTATE=08001 (SQLDriverConnect)',
        )
    db = parts.get("DATABASE", "")
    if db not in state["databases"]:
        raise ProgrammingError(
            "08001",
            f'[08001] {_CLI} SQL1013N  The database alias name or database name "{db.upper()}" '
            "could not be found.  SQLSTATE=42705 (SQLDriverConnect)",
        )
    return Connection(model, db, int(state["generation"]))


def _parse(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for match in re.finditer(r"([^=;]+)=(\{(?:[^}]|\}\})*\}|[^;]*);?", text):
        value = match.group(2)
        if value.startswith("{"):
            value = value[1:-1].replace("}}", "}")
        out[match.group(1).strip().upper()] = value
    return out


class Connection:
    """A connection to one database (see the module docstring)."""

    def __init__(self, model: Db2Model, db: str, generation: int) -> None:
        self.model = model
        self.db = db
        self._generation = generation
        self._sqlite: sqlite3.Connection | None = model.open(db)
        self.isolation = "CS"
        self._id = uuid.uuid4().hex
        self.statements: list[str] = []

    def cursor(self) -> Cursor:
        """A cursor."""
        return Cursor(self)

    def alive(self) -> sqlite3.Connection:
        """The SQLite connection, if the instance has not gone away since the connect."""
        if self._sqlite is None:
            raise ProgrammingError("08003", "Attempt to use a closed connection.")
        state = self.model.server_state()
        if state["refuse"] or int(state["generation"]) != self._generation:
            raise _error(
                OperationalError,
                "40003",
                "SQL30081N  A communication error has been detected. Communication protocol "
                'being used: "TCP/IP".  Communication function detecting the error: "recv".  '
                'Protocol specific error code(s): "104", "*", "0".  SQLSTATE=08001',
            )
        return self._sqlite

    def commit(self) -> None:
        """End the unit of work: its snapshot and locks go."""
        conn = self.alive()
        if conn.in_transaction:
            conn.execute("COMMIT")
        self.model.release(self._id)

    def rollback(self) -> None:
        """Like :meth:`commit` (the agent only reads)."""
        self.commit()

    def close(self) -> None:
        """Close the connection (its unit of work ends)."""
        if self._sqlite is not None:
            self._sqlite.close()
            self._sqlite = None
            self.model.release(self._id)


_MAX_LSN = re.compile(
    r"SELECT max\(t\.SYNCHPOINT\) FROM \( SELECT CD_NEW_SYNCHPOINT AS SYNCHPOINT FROM "
    r"ASNCDC\.IBMSNAP_REGISTER UNION ALL SELECT SYNCHPOINT AS SYNCHPOINT FROM "
    r"ASNCDC\.IBMSNAP_REGISTER\) t"
)
_CHANGES = re.compile(
    r"SELECT CASE WHEN IBMSNAP_OPERATION = 'D' AND \(LEAD\(cdc\.IBMSNAP_OPERATION,1,'X'\) OVER "
    r"\(PARTITION BY cdc\.IBMSNAP_COMMITSEQ ORDER BY cdc\.IBMSNAP_INTENTSEQ\)\) ='I' THEN 3 "
    r"WHEN IBMSNAP_OPERATION = 'I' AND \(LAG\(cdc\.IBMSNAP_OPERATION,1,'X'\) OVER \(PARTITION "
    r"BY cdc\.IBMSNAP_COMMITSEQ ORDER BY cdc\.IBMSNAP_INTENTSEQ\)\) ='D' THEN 4 WHEN "
    r"IBMSNAP_OPERATION = 'D' THEN 1 WHEN IBMSNAP_OPERATION = 'I' THEN 2 END OPCODE, cdc\.\* "
    r"FROM \"((?:[^\"]|\"\")+)\"\.\"((?:[^\"]|\"\")+)\" cdc WHERE IBMSNAP_COMMITSEQ >= \? AND "
    r"IBMSNAP_COMMITSEQ <= \? order by IBMSNAP_COMMITSEQ, IBMSNAP_INTENTSEQ"
)
_CURRENT_SERVER = re.compile(r"SELECT CURRENT SERVER FROM SYSIBM\.SYSDUMMY1")
_ISOLATION = re.compile(r"SET CURRENT ISOLATION = (UR|CS|RS|RR)")
_LOCK = re.compile(
    r"LOCK TABLE \"((?:[^\"]|\"\")+)\"\.\"((?:[^\"]|\"\")+)\" IN (SHARE|EXCLUSIVE) MODE"
)
_SERVICES = re.compile(r"VALUES ASNCDC\.ASNCDCSERVICES\('(status)', ?'asncdc'\)")
_CONTROL = re.compile(r"\b(ASNCDC\.IBMSNAP_(?:REGISTER|UOW)|SYSCAT\.(?:COLUMNS|TABLES))\b")
_FETCH_FIRST = re.compile(r" FETCH FIRST (\d+) ROWS ONLY$")
_FROM_TABLE = re.compile(r"FROM \"((?:[^\"]|\"\")+)\"\.\"((?:[^\"]|\"\")+)\"")
_QUOTED = re.compile(r"\"((?:[^\"]|\"\")+)\"")
_WITH_ISOLATION = re.compile(r" WITH (UR|CS|RS|RR)$")
_TIME_COLUMNS = frozenset({"IBMSNAP_LOGMARKER", "SYNCHTIME"})


class Cursor(ResultCursor):
    """A cursor of a :class:`Connection`."""

    def __init__(self, conn: Connection) -> None:
        super().__init__()
        self.connection = conn

    def execute(self, sql: str, *params: Any) -> Cursor:
        """Run one statement (parameters as arguments or one sequence)."""
        if len(params) == 1 and isinstance(params[0], list | tuple):
            params = tuple(params[0])
        args = [bytes(p) if isinstance(p, bytearray) else p for p in params]
        conn = self.connection
        lite = conn.alive()
        conn.statements.append(sql)
        self._at = 0
        text = sql.strip()
        if match := _ISOLATION.fullmatch(text):
            conn.isolation = match.group(1)
            self._result([], [])
        elif _CURRENT_SERVER.fullmatch(text):
            self._result(["1"], [(conn.db.upper(),)])
        elif match := _SERVICES.fullmatch(text):
            self._result(["1"], [(conn.model.asncdc_services(conn.db, "status"),)])
        elif match := _LOCK.fullmatch(text):
            schema, table = _name(match.group(1)), _name(match.group(2))
            self._table(lite, schema, table)
            conn.model.lock(conn.db, schema, table, conn._id)
            self._result([], [])
        elif _MAX_LSN.fullmatch(text):
            self._control(lite, text, [])  # SQLite runs the same UNION ALL
        elif match := _CHANGES.fullmatch(text):
            self._changes(lite, _name(match.group(1)), _name(match.group(2)), args)
        elif (
            text.startswith("SELECT ")
            and _CONTROL.search(text)
            # a delimited name there: only SYSCAT.COLUMNS."DEFAULT", a reserved word
            and '"' not in text.replace('"DEFAULT"', "")
        ):
            self._control(lite, text, args)
        elif text.startswith("SELECT ") and _FROM_TABLE.search(text):
            self._select(lite, text, args)
        else:
            raise _error(
                ProgrammingError,
                "42601",
                f"SQL0104N  The Db2 model does not know the statement {sql!r}.  SQLSTATE=42601",
            )
        return self

    def _run(self, lite: sqlite3.Connection, text: str, args: Sequence[Any]) -> sqlite3.Cursor:
        if self.connection.isolation in ("RR", "RS") and not lite.in_transaction:
            lite.execute("BEGIN")  # one read snapshot until the commit, like held share locks
        try:
            return lite.execute(text, list(args))
        except sqlite3.OperationalError as exc:
            if "no such table" in str(exc):
                name = str(exc).rsplit(":", 1)[-1].strip()
                raise _error(
                    ProgrammingError,
                    "42S02",
                    f'SQL0204N  "{name}" is an undefined name.  SQLSTATE=42704',
                ) from None
            raise _error(ProgrammingError, "42601", f"SQL0104N  {exc}.  SQLSTATE=42601") from None

    def _control(self, lite: sqlite3.Connection, text: str, args: Sequence[Any]) -> None:
        text = _CONTROL.sub(lambda m: f"[{m.group(1)}]", text)
        if match := _FETCH_FIRST.search(text):
            text = text[: match.start()] + f" LIMIT {int(match.group(1))}"
        cursor = self._run(lite, text, args)
        names = [d[0] for d in cursor.description or []]
        rows = [
            tuple(
                dt.datetime.fromisoformat(v) if n in _TIME_COLUMNS and isinstance(v, str) else v
                for n, v in zip(names, raw, strict=True)
            )
            for raw in cursor.fetchall()
        ]
        self._result(names, rows)

    def _table(self, lite: sqlite3.Connection, schema: str, table: str) -> tuple[str, list[Column]]:
        try:
            return Db2Model.lookup(lite, schema, table)
        except KeyError:
            raise _error(
                ProgrammingError,
                "42S02",
                f'SQL0204N  "{schema}.{table}" is an undefined name.  SQLSTATE=42704',
            ) from None

    def _changes(
        self, lite: sqlite3.Connection, owner: str, cd_table: str, args: Sequence[Any]
    ) -> None:
        inner, columns = self._table(lite, owner, cd_table)
        names = [c.name for c in columns]
        if tuple(names[:3]) != IBMSNAP:
            raise _error(ProgrammingError, "42703", "SQL0206N  not a CD table.  SQLSTATE=42703")
        op, commit, intent = "c2", "c0", "c1"
        every = ", ".join(f"cdc.c{i}" for i in range(len(columns)))
        text = (
            f"SELECT CASE WHEN {op} = 'D' AND (LEAD(cdc.{op}, 1, 'X') OVER (PARTITION BY "
            f"cdc.{commit} ORDER BY cdc.{intent})) = 'I' THEN 3 WHEN {op} = 'I' AND "
            f"(LAG(cdc.{op}, 1, 'X') OVER (PARTITION BY cdc.{commit} ORDER BY cdc.{intent})) = "
            f"'D' THEN 4 WHEN {op} = 'D' THEN 1 WHEN {op} = 'I' THEN 2 END, {every} FROM {inner} "
            f"cdc WHERE {commit} >= ? AND {commit} <= ? ORDER BY {commit}, {intent}"
        )
        rows = [
            (raw[0], *(decode(c, v) for c, v in zip(columns, raw[1:], strict=True)))
            for raw in self._run(lite, text, args).fetchall()
        ]
        self._result(["OPCODE", *names], rows)

    def _select(self, lite: sqlite3.Connection, text: str, args: Sequence[Any]) -> None:
        conn = self.connection
        match = _FROM_TABLE.search(text)
        assert match is not None
        schema, table = _name(match.group(1)), _name(match.group(2))
        inner, columns = self._table(lite, schema, table)
        if conn.isolation in ("RR", "RS"):
            conn.model.lock(conn.db, schema, table, conn._id)
        text = _WITH_ISOLATION.sub("", text)
        by_name = {c.name: f"c{i}" for i, c in enumerate(columns)}
        head, tail = text[: match.start()], text[match.end() :]
        selected: list[Column] = []

        def column(found: re.Match[str]) -> str:
            name = _name(found.group(1))
            if name not in by_name:
                raise _error(
                    ProgrammingError,
                    "42S22",
                    f'SQL0206N  "{name}" is not valid in the context where it is used.  '
                    "SQLSTATE=42703",
                )
            return by_name[name]

        sql = _QUOTED.sub(column, head) + f"FROM {inner}" + _QUOTED.sub(column, tail)
        for found in _QUOTED.finditer(head):
            selected.append(next(c for c in columns if c.name == _name(found.group(1))))
        rows = [
            tuple(decode(c, v) for c, v in zip(selected, raw, strict=True))
            for raw in self._run(lite, sql, args).fetchall()
        ]
        self._result([c.name for c in selected], rows)


def _name(quoted: str) -> str:
    return quoted.replace('""', '"')
