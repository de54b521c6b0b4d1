"""The Oracle model: ground-truth tables, transactions, redo logs, flashback.

Changes go through :class:`OracleModel` (``begin``, ``insert``/``update``/``delete``,
``rollback_statement``, ``commit``/``rollback``); each becomes redo rows in the log of the
transaction's redo thread, as ``V$LOGMNR_CONTENTS`` would show them. The model is saved in a
file (:meth:`OracleModel.edit`, :meth:`OracleModel.load`) so that the agent (in this process or
a child) and the test share one database.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import os
import pickle
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

__all__ = ["Column", "LogFile", "OracleModel", "RedoRow", "Span", "Table", "render"]

Span = tuple[int, int]
"""``(amount, offset)`` of a ``DBMS_LOB`` call, the offset 1-based."""
MAX_SCN = 18446744073709551615
"""``NEXT_CHANGE#`` of a log still being written (Oracle 12c+)."""
BASE_TIME = dt.datetime(2026, 11, 27, 12, 0, 0)
OP_INSERT, OP_DELETE, OP_UPDATE, OP_DDL, OP_START, OP_COMMIT, OP_ROLLBACK = 1, 2, 3, 5, 6, 7, 36
OP_SEL_LOB_LOCATOR, OP_LOB_WRITE, OP_LOB_TRIM, OP_LOB_ERASE = 9, 10, 11, 29
OP_UNSUPPORTED = 255
LOB_TYPES = frozenset({"CLOB", "NCLOB", "BLOB"})
LOB_DECLARE = (
    "DECLARE \n loc_c CLOB; \n buf_c VARCHAR2(6174); \n loc_b BLOB; \n buf_b RAW(6174); \n"
    " loc_nc NCLOB; \n buf_nc NVARCHAR2(6174); \nBEGIN\n"
)
"""The block LogMiner wraps a ``SEL_LOB_LOCATOR`` row's ``select ... for update`` in."""
OPERATIONS = {
    OP_INSERT: "INSERT",
    OP_DELETE: "DELETE",
    OP_UPDATE: "UPDATE",
    OP_DDL: "DDL",
    OP_START: "START",
    OP_COMMIT: "COMMIT",
    OP_ROLLBACK: "ROLLBACK",
    OP_SEL_LOB_LOCATOR: "SEL_LOB_LOCATOR",
    OP_LOB_WRITE: "LOB_WRITE",
    OP_LOB_TRIM: "LOB_TRIM",
    OP_LOB_ERASE: "LOB_ERASE",
    OP_UNSUPPORTED: "UNSUPPORTED",
}


@dataclass(frozen=True)
class Column:
    """A column: ``ALL_TAB_COLUMNS`` facts; ``default`` is its ``DEFAULT`` expression as
    written, which ``DATA_DEFAULT`` keeps as text (the model evaluates constants only)."""

    name: str
    data_type: str
    precision: int | None = None
    scale: int | None = None
    nullable: bool = True
    default: str | None = None


@dataclass
class Table:
    """A table: its columns, key, committed rows and their committed versions."""

    owner: str
    name: str
    columns: list[Column]
    key: list[str]
    object_id: int
    unsupported: bool = False
    """LogMiner cannot reconstruct its changes (an unsupported column type): ``OPERATION_CODE
    255`` with ``SQL_REDO`` ``Unsupported``."""
    live: dict[str, dict[str, Any]] = field(default_factory=dict)
    """ROW_ID -> row, with uncommitted changes (what the changing sessions see)."""
    versions: list[tuple[int, str, dict[str, Any] | None]] = field(default_factory=list)
    """(commit SCN, ROW_ID, row or None when deleted), in commit order: flashback reads."""
    next_row: int = 0

    def committed(self, scn: int) -> dict[str, dict[str, Any]]:
        """ROW_ID -> row as committed at ``scn`` (``AS OF SCN``)."""
        rows: dict[str, dict[str, Any]] = {}
        for commit_scn, row_id, row in self.versions:
            if commit_scn > scn:
                break
            if row is None:
                rows.pop(row_id, None)
            else:
                rows[row_id] = row
        return rows


@dataclass
class RedoRow:
    """One ``V$LOGMNR_CONTENTS`` row."""

    scn: int
    thread: int
    xid: str
    operation_code: int
    seg_owner: str | None
    table_name: str | None
    sql_redo: str
    row_id: str | None
    rollback: int
    rs_id: str
    ssn: int
    csf: int
    timestamp: dt.datetime
    username: str
    src_con_name: str
    info: str | None = None

    @property
    def operation(self) -> str:
        return OPERATIONS[self.operation_code]


@dataclass
class LogFile:
    """One redo log of a thread: online in a group until reused, archived after its switch."""

    thread: int
    sequence: int
    group: int
    first_change: int
    next_change: int = MAX_SCN
    online: bool = True
    archived: bool = False
    purged: bool = False
    rows: list[RedoRow] = field(default_factory=list)

    @property
    def member(self) -> str:
        return f"/u01/oradata/ORCL/redo{self.thread:02d}_{self.group}.log"

    @property
    def archive_name(self) -> str:
        return f"/u01/fra/ORCL/archivelog/{self.thread}_{self.sequence}_1187000000.arc"

    @property
    def current(self) -> bool:
        return self.next_change == MAX_SCN

    def size(self) -> int:
        """Bytes of redo (the SQL text stands in for Oracle's redo record sizes)."""
        return sum(len(r.sql_redo) + 64 for r in self.rows)


@dataclass
class Change:
    """An uncommitted change, for commit (versions) and rollback (undo)."""

    table: tuple[str, str]
    row_id: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


@dataclass
class Transaction:
    """An open transaction."""

    xid: str
    thread: int
    start_scn: int
    changes: list[Change] = field(default_factory=list)
    statements: list[int] = field(default_factory=list)
    """Index into ``changes`` where each statement began (statement rollback)."""


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _datetime(value: dt.datetime) -> str:
    # YYYY is always four digits in Oracle (0999), unlike strftime's %Y on some platforms
    return f"{value.year:04d}-{value:%m-%d %H:%M:%S}"


def render(column: Column, value: Any) -> str:
    """A value as LogMiner prints it in ``SQL_REDO`` (session NLS formats of the agent)."""
    if value is None:
        return "NULL"
    kind = column.data_type
    if kind in ("NUMBER", "INTEGER", "FLOAT", "BINARY_FLOAT", "BINARY_DOUBLE"):
        return _quote(format(value, "f") if isinstance(value, Decimal) else str(value))
    if kind == "DATE":
        return f"TO_DATE('{_datetime(value)}', 'YYYY-MM-DD HH24:MI:SS')"
    if kind.startswith("TIMESTAMP"):
        fraction = f"{value.microsecond:06d}".rstrip("0")
        if kind.endswith(" WITH TIME ZONE") and value.tzinfo is not None:
            # NLS_TIMESTAMP_TZ_FORMAT 'YYYY-MM-DD HH24:MI:SS.FF TZH:TZM'
            offset = value.strftime("%z")
            zone = f"{offset[:3]}:{offset[3:]}"
            return f"TO_TIMESTAMP_TZ('{_datetime(value)}.{fraction} {zone}')"
        return f"TO_TIMESTAMP('{_datetime(value)}.{fraction}')"
    if kind.startswith("INTERVAL DAY"):
        sign = "-" if value < dt.timedelta(0) else "+"
        magnitude = abs(value)
        hours, rest = divmod(magnitude.seconds, 3600)
        minutes, seconds = divmod(rest, 60)
        return (
            f"TO_DSINTERVAL('{sign}{magnitude.days:02d} {hours:02d}:{minutes:02d}:{seconds:02d}"
            f".{magnitude.microseconds:06d}')"
        )
    if kind.startswith("INTERVAL YEAR"):
        years, months = value
        sign = "-" if years < 0 or months < 0 else "+"
        return f"TO_YMINTERVAL('{sign}{abs(years):02d}-{abs(months):02d}')"
    if kind in ("RAW", "BLOB"):
        return "EMPTY_BLOB()" if value == b"" else f"HEXTORAW('{bytes(value).hex()}')"
    if kind in ("CLOB", "NCLOB") and value == "":
        return "EMPTY_CLOB()"
    text = str(value)
    if kind.startswith("N") and not text.isascii():
        # LogMiner prints national-character text as UNISTR with UTF-16 code-unit escapes
        units = text.encode("utf-16-be")
        escaped = "".join(
            f"\\{int.from_bytes(units[i : i + 2], 'big'):04x}" for i in range(0, len(units), 2)
        )
        return f"UNISTR('{escaped}')"
    return _quote(text)


def _name(identifier: str) -> str:
    return '"' + identifier.replace('"', '""') + '"'


class OracleModel:
    """One database (CDB with one PDB) and its redo.

    Args:
        threads: Redo threads (RAC instances).
        redo_chunk: Characters of ``SQL_REDO`` per ``V$LOGMNR_CONTENTS`` row before a ``CSF``
            continuation row (Oracle: 4000 bytes; tests lower it to meet continuations often).
        log_rows: Redo rows per log before an automatic log switch.
        online_groups: Online log groups per thread (a group is reused once archived).
        lob_chunk: Characters (CLOB) or bytes (BLOB) per ``LOB_WRITE`` row.
        log_buffer: Model LGWR's log buffer: redo written since the last COMMIT (of any
            transaction, the flush table's included) is not in the logs yet, so
            ``V$LOGMNR_CONTENTS`` does not show it.
    """

    def __init__(
        self,
        *,
        threads: int = 1,
        redo_chunk: int = 4000,
        log_rows: int = 10_000,
        online_groups: int = 3,
        lob_chunk: int = 1024,
        log_buffer: bool = False,
        dbname: str = "ORCLCDB",
        pdb: str = "ORCLPDB1",
    ) -> None:
        self.dbname, self.pdb = dbname, pdb
        self.redo_chunk, self.log_rows, self.online_groups = redo_chunk, log_rows, online_groups
        self.lob_chunk = lob_chunk
        self.log_buffer = log_buffer
        self.flushed_scn = 0
        """With ``log_buffer``: redo up to this SCN is in the logs (the last COMMIT's)."""
        self.flush_tables: dict[str, list[int]] = {}
        """Tables of the connector's user (the LGWR flush table): name -> LAST_SCN rows."""
        self.scn = 1_000_000
        self.undo_low_scn = 0
        """Flashback reads below this SCN raise ORA-01555 (undo retention exceeded)."""
        self.epoch = 0
        self.down_until = 0.0
        """Bumped by :meth:`restart`: sessions of an older epoch are gone (ORA-03113)."""
        self.tables: dict[tuple[str, str], Table] = {}
        self.open: dict[str, Transaction] = {}
        self.logs: list[LogFile] = []
        self._next_xid = 1
        for thread in range(1, threads + 1):
            self.logs.append(LogFile(thread, 1, 1, self._tick()))
        self._rows_in = dict.fromkeys(range(1, threads + 1), 0)

    # --- persistence -------------------------------------------------------------------------
    def save(self, path: Path) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_bytes(pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL))
        os.replace(tmp, path)

    @staticmethod
    def load(path: Path) -> OracleModel:
        with _locked(path, fcntl.LOCK_SH):
            model = pickle.loads(path.read_bytes())
        assert isinstance(model, OracleModel)
        return model

    @staticmethod
    @contextlib.contextmanager
    def edit(path: Path) -> Iterator[OracleModel]:
        """Load, change and save the model under an exclusive lock."""
        with _locked(path, fcntl.LOCK_EX):
            model = pickle.loads(path.read_bytes())
            yield model
            model.save(path)

    # --- clock and logs ----------------------------------------------------------------------
    def _tick(self) -> int:
        self.scn += 1
        return self.scn

    def current_log(self, thread: int) -> LogFile:
        return next(log for log in reversed(self.logs) if log.thread == thread and log.current)

    def switch_log(self, thread: int) -> None:
        """``ALTER SYSTEM SWITCH LOGFILE`` on ``thread``: the current log is closed and
        archived, the next group takes the next sequence, and the log that group held before
        is then only in its archive."""
        log = self.current_log(thread)
        log.next_change = self._tick()
        log.archived = True
        group = log.group % self.online_groups + 1
        for old in self.logs:
            if old.thread == thread and old.online and old.group == group:
                old.online = False
        self.logs.append(LogFile(thread, log.sequence + 1, group, log.next_change))
        self._rows_in[thread] = 0

    def purge_archives(self, before_scn: int) -> None:
        """``RMAN DELETE ARCHIVELOG UNTIL SCN``: archives of logs that ended before the SCN."""
        for log in self.logs:
            if log.archived and not log.online and log.next_change <= before_scn:
                log.purged = True

    def restart(self, down_s: float = 1.0) -> None:
        """``SHUTDOWN ABORT`` + ``STARTUP``: sessions are lost, open transactions roll back, and
        the listener refuses connections for ``down_s`` seconds (the instance starting)."""
        for xid in list(self.open):
            self.rollback(xid)
        self.epoch += 1
        self.down_until = time.time() + down_s

    def _emit(
        self,
        tx: Transaction,
        code: int,
        sql: str,
        table: Table | None = None,
        row_id: str | None = None,
        *,
        rollback: int = 0,
        scn: int | None = None,
        info: str | None = None,
    ) -> None:
        scn = self._tick() if scn is None else scn
        log = self.current_log(tx.thread)
        block, offset = divmod(len(log.rows), 8)
        rs_id = f" 0x{log.sequence:06x}.{block + 2:08x}.{offset * 16 + 16:04x} "
        chunks = [sql[i : i + self.redo_chunk] for i in range(0, len(sql), self.redo_chunk)] or [""]
        for index, chunk in enumerate(chunks):
            log.rows.append(
                RedoRow(
                    scn,
                    tx.thread,
                    tx.xid,
                    code,
                    None if table is None else table.owner,
                    None if table is None else table.name,
                    chunk,
                    row_id,
                    rollback,
                    rs_id,
                    1 if table is not None else 0,
                    1 if index < len(chunks) - 1 else 0,
                    BASE_TIME + dt.timedelta(milliseconds=scn - 1_000_000),
                    "APP",
                    self.pdb,
                    info,
                )
            )
        self._rows_in[tx.thread] += 1
        if self._rows_in[tx.thread] >= self.log_rows and code in (OP_COMMIT, OP_ROLLBACK):
            self.switch_log(tx.thread)

    # --- DDL ---------------------------------------------------------------------------------
    def _ddl(self, table: Table, sql: str) -> None:
        """A DDL statement: its own transaction (Oracle commits before and after DDL) with one
        ``OPERATION_CODE`` 5 row, ``SQL_REDO`` the statement's text, ``INFO`` ``USER DDL``."""
        xid = self.begin()
        tx = self.open[xid]
        tx.start_scn = self._tick()
        self._emit(tx, OP_START, "set transaction read write;", scn=tx.start_scn)
        self._emit(tx, OP_DDL, sql, table, None, info="USER DDL (PlSql=0 RecDep=0)")
        del self.open[xid]
        self._emit(tx, OP_COMMIT, "commit;")

    def create_table(
        self, owner: str, name: str, columns: list[Column], key: list[str], **flags: Any
    ) -> Table:
        table = Table(owner, name, columns, key, 70_000 + len(self.tables), **flags)
        self.tables[(owner, name)] = table
        definitions = [f"{_name(c.name)} {_type_text(c)}" for c in columns]
        if key:
            definitions.append(f"PRIMARY KEY ({', '.join(_name(k) for k in key)}) ENABLE")
        self._ddl(table, f"CREATE TABLE {_qualified(table)} ({', '.join(definitions)})")
        return table

    def add_column(self, owner: str, name: str, column: Column) -> None:
        """``ALTER TABLE ... ADD (column)``: existing rows show its default (NULL without one;
        Oracle Database SQL Language Reference, ALTER TABLE, "DEFAULT": "the default value is
        inserted into the new column in all existing rows"), with no redo for them."""
        table = self.tables[(owner, name)]
        table.columns.append(column)
        value = None if column.default is None else constant_value(column.default)
        for row in table.live.values():
            row[column.name] = value
        self._ddl(
            table,
            f"ALTER TABLE {_qualified(table)} ADD ({_name(column.name)} {_type_text(column)})",
        )

    def drop_column(self, owner: str, name: str, column: str) -> None:
        """``ALTER TABLE ... DROP COLUMN``: the column is gone from every row (a flashback read
        from before it raises ORA-01466 in Oracle; the model just forgets the column)."""
        table = self.tables[(owner, name)]
        table.columns = [c for c in table.columns if c.name != column]
        for row in [*table.live.values(), *(r for _, _, r in table.versions if r is not None)]:
            row.pop(column, None)
        self._ddl(table, f"alter table {_qualified(table)} drop column {_name(column)}")

    def modify_column(self, owner: str, name: str, column: Column) -> None:
        """``ALTER TABLE ... MODIFY (column)``: a new type (values are kept)."""
        table = self.tables[(owner, name)]
        table.columns = [column if c.name == column.name else c for c in table.columns]
        self._ddl(
            table,
            f"ALTER TABLE {_qualified(table)} MODIFY ({_name(column.name)} {_type_text(column)})",
        )

    # --- transactions ------------------------------------------------------------------------
    def begin(self, thread: int = 1) -> str:
        """Start a transaction on ``thread``; its START row is written with its first change."""
        if thread not in self._rows_in:
            raise ValueError(f"the model has redo threads {sorted(self._rows_in)}, not {thread}")
        usn, self._next_xid = self._next_xid, self._next_xid + 1
        xid = f"{usn % 0xFFFF:04X}{(usn * 7) % 0x20:04X}{usn:08X}"
        self.open[xid] = Transaction(xid, thread, 0)
        return xid

    def _started(self, xid: str) -> Transaction:
        tx = self.open[xid]
        if not tx.start_scn:
            tx.start_scn = self._tick()
            self._emit(tx, OP_START, "set transaction read write;", scn=tx.start_scn)
        tx.statements.append(len(tx.changes))
        return tx

    def _row_id(self, table: Table) -> str:
        table.next_row += 1
        alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        n, digits = table.object_id * 1_000_000 + table.next_row, []
        for _ in range(18):
            n, d = divmod(n, 64)
            digits.append(alphabet[d])
        return "".join(reversed(digits))

    def find(self, owner: str, name: str, key: dict[str, Any]) -> str:
        """The ROW_ID of the live row with ``key``."""
        table = self.tables[(owner, name)]
        for row_id, row in table.live.items():
            if all(row[k] == v for k, v in key.items()):
                return row_id
        raise KeyError(f"{owner}.{name}: no row {key}")

    def insert(self, xid: str, owner: str, name: str, row: dict[str, Any]) -> str:
        tx, table = self._started(xid), self.tables[(owner, name)]
        row = _stored(table, {c.name: row.get(c.name) for c in table.columns})
        row_id = self._row_id(table)
        table.live[row_id] = row
        tx.changes.append(Change((owner, name), row_id, None, row))
        self._redo_dml(tx, table, row_id, None, row)
        return row_id

    def update(
        self, xid: str, owner: str, name: str, key: dict[str, Any], values: dict[str, Any]
    ) -> None:
        tx, table = self._started(xid), self.tables[(owner, name)]
        row_id = self.find(owner, name, key)
        before = table.live[row_id]
        after = _stored(table, {**before, **values})
        table.live[row_id] = after
        tx.changes.append(Change((owner, name), row_id, before, after))
        self._redo_dml(tx, table, row_id, before, after)

    def delete(self, xid: str, owner: str, name: str, key: dict[str, Any]) -> None:
        tx, table = self._started(xid), self.tables[(owner, name)]
        row_id = self.find(owner, name, key)
        before = table.live.pop(row_id)
        tx.changes.append(Change((owner, name), row_id, before, None))
        self._redo_dml(tx, table, row_id, before, None)

    def _redo_dml(
        self,
        tx: Transaction,
        table: Table,
        row_id: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        *,
        rollback: int = 0,
    ) -> None:
        if table.unsupported:
            self._emit(tx, OP_UNSUPPORTED, "Unsupported", table, row_id, rollback=rollback)
            return
        code, sql = _sql_redo(table, before, after)
        self._emit(tx, code, sql, table, row_id, rollback=rollback)
        if after is None or rollback:
            return
        for column in table.columns:
            value = after.get(column.name)
            changed = before is None or before.get(column.name) != value
            if column.data_type in LOB_TYPES and changed and value not in (None, "", b""):
                self._lob_write(tx, table, row_id, after, column, value, 1)

    # --- LOBs --------------------------------------------------------------------------------
    def _lob_locator(
        self, tx: Transaction, table: Table, row_id: str, row: dict[str, Any], column: Column
    ) -> None:
        """The ``SEL_LOB_LOCATOR`` row: the column selected ``for update`` by the row's non-LOB
        columns (LogMiner does not log LOB columns in a ``where`` list)."""
        kind = {"CLOB": "c", "NCLOB": "nc", "BLOB": "b"}[column.data_type]
        sql = (
            f"{LOB_DECLARE} select {_name(column.name)} into loc_{kind} from "
            f"{_name(table.owner)}.{_name(table.name)} where {_where(table, row)} for update;"
        )
        self._emit(tx, OP_SEL_LOB_LOCATOR, sql, table, row_id)

    def _lob_write(
        self,
        tx: Transaction,
        table: Table,
        row_id: str,
        row: dict[str, Any],
        column: Column,
        data: str | bytes,
        offset: int,
    ) -> None:
        """A locator and one ``LOB_WRITE`` row per ``lob_chunk`` of ``data`` at ``offset``
        (1-based, as ``DBMS_LOB.WRITE`` takes it)."""
        self._lob_locator(tx, table, row_id, row, column)
        kind = {"CLOB": "c", "NCLOB": "nc", "BLOB": "b"}[column.data_type]
        for start in range(0, len(data), self.lob_chunk):
            piece = data[start : start + self.lob_chunk]
            buffer = (
                f"HEXTORAW('{piece.hex()}')" if isinstance(piece, bytes) else _quote(str(piece))
            )
            sql = (
                f" buf_{kind} := {buffer}; \n  dbms_lob.write(loc_{kind}, {len(piece)}, "
                f"{offset + start}, buf_{kind});"
            )
            self._emit(tx, OP_LOB_WRITE, sql, table, row_id)

    def _lob_statement(
        self, xid: str, owner: str, name: str, key: dict[str, Any], column_name: str, value: Any
    ) -> tuple[Transaction, Table, str, dict[str, Any], Column]:
        tx, table = self._started(xid), self.tables[(owner, name)]
        column = next(c for c in table.columns if c.name == column_name)
        if column.data_type not in LOB_TYPES:
            raise ValueError(f"{owner}.{name}.{column_name} is not a LOB column")
        row_id = self.find(owner, name, key)
        before = table.live[row_id]
        if before[column_name] is None:
            raise ValueError(f"ORA-22275: invalid LOB locator specified ({column_name} is NULL)")
        after = {**before, column_name: value}
        table.live[row_id] = after
        tx.changes.append(Change((owner, name), row_id, before, after))
        return tx, table, row_id, after, column

    def lob_write(
        self,
        xid: str,
        owner: str,
        name: str,
        key: dict[str, Any],
        column: str,
        data: str | bytes,
        offset: int = 1,
    ) -> None:
        """``DBMS_LOB.WRITE`` through a locator of an existing row (no UPDATE row): LogMiner
        shows a ``SEL_LOB_LOCATOR`` row and ``LOB_WRITE`` rows. Past the end the gap is spaces
        (CLOB) or zero bytes (BLOB)."""
        current = self.tables[(owner, name)].live[self.find(owner, name, key)][column]
        fill: Any = b"\0" if isinstance(current, bytes) else " "
        start = offset - 1
        padded = current + fill * max(0, start - len(current))
        value = padded[:start] + data + padded[start + len(data) :]
        tx, table, row_id, after, col = self._lob_statement(xid, owner, name, key, column, value)
        self._lob_write(tx, table, row_id, after, col, data, offset)

    def lob_trim(
        self, xid: str, owner: str, name: str, key: dict[str, Any], column: str, length: int
    ) -> None:
        """``DBMS_LOB.TRIM``: ``SEL_LOB_LOCATOR`` and ``LOB_TRIM`` rows."""
        current = self.tables[(owner, name)].live[self.find(owner, name, key)][column]
        tx, table, row_id, after, col = self._lob_statement(
            xid, owner, name, key, column, current[:length]
        )
        self._lob_locator(tx, table, row_id, after, col)
        kind = {"CLOB": "c", "NCLOB": "nc", "BLOB": "b"}[col.data_type]
        self._emit(tx, OP_LOB_TRIM, f" dbms_lob.trim(loc_{kind}, {length});", table, row_id)

    def lob_erase(
        self, xid: str, owner: str, name: str, key: dict[str, Any], column: str, span: Span
    ) -> None:
        """``DBMS_LOB.ERASE`` of ``span`` (amount, 1-based offset): the part becomes spaces
        (CLOB) or zero bytes (BLOB), the length stays; ``SEL_LOB_LOCATOR`` and ``LOB_ERASE``
        rows."""
        amount, offset = span
        current = self.tables[(owner, name)].live[self.find(owner, name, key)][column]
        fill: Any = b"\0" if isinstance(current, bytes) else " "
        start = offset - 1
        end = min(len(current), start + amount)
        value = current[:start] + fill * max(0, end - start) + current[end:]
        tx, table, row_id, after, col = self._lob_statement(xid, owner, name, key, column, value)
        self._lob_locator(tx, table, row_id, after, col)
        kind = {"CLOB": "c", "NCLOB": "nc", "BLOB": "b"}[col.data_type]
        sql = f" dbms_lob.erase(loc_{kind}, {amount}, {offset});"
        self._emit(tx, OP_LOB_ERASE, sql, table, row_id)

    def rollback_statement(self, xid: str) -> None:
        """Undo the transaction's last statement (a failed statement, ``ROLLBACK TO
        SAVEPOINT``): LogMiner shows the undo as ``ROLLBACK = 1`` rows on the same ROW_IDs,
        and the transaction goes on."""
        tx = self.open[xid]
        start = tx.statements.pop()
        for change in reversed(tx.changes[start:]):
            table = self.tables[change.table]
            if change.before is None:
                table.live.pop(change.row_id)
            else:
                table.live[change.row_id] = change.before
            self._redo_dml(tx, table, change.row_id, change.after, change.before, rollback=1)
        del tx.changes[start:]

    def flush(self) -> None:
        """A COMMIT: LGWR writes the log buffer, so every redo row so far is in the logs."""
        self.flushed_scn = self.scn

    def commit(self, xid: str) -> int:
        tx = self.open.pop(xid)
        scn = self._tick()
        self.flushed_scn = scn
        for change in tx.changes:
            self.tables[change.table].versions.append((scn, change.row_id, change.after))
        if tx.start_scn:
            self._emit(tx, OP_COMMIT, "commit;", scn=scn)
        return scn

    def rollback(self, xid: str) -> None:
        """``ROLLBACK``: undo rows (``ROLLBACK = 1``) and a ROLLBACK row (code 36)."""
        tx = self.open[xid]
        while tx.statements:
            self.rollback_statement(xid)
        del self.open[xid]
        if tx.start_scn:
            self._emit(tx, OP_ROLLBACK, "rollback;")
        self.flushed_scn = self.scn

    # --- reads ---------------------------------------------------------------------------------
    def committed_rows(self, owner: str, name: str) -> list[dict[str, Any]]:
        """The table's rows as committed now (the ground truth)."""
        return list(self.tables[(owner, name)].committed(self.scn).values())


_EMPTY_IS_NULL = frozenset({"CHAR", "NCHAR", "VARCHAR2", "NVARCHAR2", "VARCHAR", "RAW"})
"""Types whose empty value Oracle stores as NULL (a zero-length string is NULL; LOBs have
``EMPTY_CLOB()``/``EMPTY_BLOB()``, which are not)."""


def _stored(table: Table, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` as Oracle stores it: ``''`` and ``b''`` in character and RAW columns are NULL."""
    kinds = {c.name: c.data_type for c in table.columns}
    return {
        n: None if kinds.get(n) in _EMPTY_IS_NULL and v in ("", b"") else v for n, v in row.items()
    }


def _qualified(table: Table) -> str:
    return f"{_name(table.owner)}.{_name(table.name)}"


def _type_text(column: Column) -> str:
    """A column's type in DDL, as Oracle prints it in ``SQL_REDO``."""
    kind = column.data_type
    if kind == "NUMBER" and column.precision is not None:
        kind += f"({column.precision},{column.scale or 0})"
    elif kind == "FLOAT" and column.precision is not None:
        kind += f"({column.precision})"
    elif kind in ("VARCHAR2", "NVARCHAR2", "VARCHAR"):
        kind += "(4000)"
    elif kind in ("CHAR", "NCHAR", "RAW") and column.precision is not None:
        kind += f"({column.precision})"
    default = "" if column.default is None else f" DEFAULT {column.default}"
    return kind + default + ("" if column.nullable else " NOT NULL")


def constant_value(expression: str) -> Any:
    """The value of a constant ``DEFAULT`` expression as the driver returns it (a number as
    int or Decimal, a string's content)."""
    text = expression.strip()
    if text.startswith("'") and text.endswith("'"):
        return text[1:-1].replace("''", "'")
    number = Decimal(text)  # anything else: the model evaluates constants only
    return int(number) if number == number.to_integral_value() else number


def _lob(column: Column, value: Any) -> str:
    """A LOB value in a DML row: only ``EMPTY_CLOB()``/``EMPTY_BLOB()`` or NULL (the data follows
    in ``LOB_WRITE`` rows)."""
    if value is None:
        return "NULL"
    return "EMPTY_BLOB()" if column.data_type == "BLOB" else "EMPTY_CLOB()"


def _value(column: Column, value: Any) -> str:
    return _lob(column, value) if column.data_type in LOB_TYPES else render(column, value)


def _where(table: Table, row: dict[str, Any]) -> str:
    """A ``where`` list of the row's columns; LOB columns are never in it."""
    columns = {c.name: c for c in table.columns}
    terms = [
        f"{_name(n)} IS NULL" if v is None else f"{_name(n)} = {render(columns[n], v)}"
        for n, v in row.items()
        if columns[n].data_type not in LOB_TYPES
    ]
    return " and ".join(terms)


def _sql_redo(
    table: Table, before: dict[str, Any] | None, after: dict[str, Any] | None
) -> tuple[int, str]:
    columns = {c.name: c for c in table.columns}
    qualified = f"{_name(table.owner)}.{_name(table.name)}"
    if before is None:
        assert after is not None
        names = ",".join(_name(n) for n in after)
        values = ",".join(_value(columns[n], v) for n, v in after.items())
        return OP_INSERT, f"insert into {qualified}({names}) values ({values});"
    if after is None:
        return OP_DELETE, f"delete from {qualified} where {_where(table, before)};"
    changed = {n: v for n, v in after.items() if before.get(n) != v} or {
        n: after[n] for n in table.key
    }
    sets = ", ".join(f"{_name(n)} = {_value(columns[n], v)}" for n, v in changed.items())
    return OP_UPDATE, f"update {qualified} set {sets} where {_where(table, before)};"


@contextlib.contextmanager
def _locked(path: Path, mode: int) -> Iterator[None]:
    with open(f"{path}.lock", "a+b") as handle:
        fcntl.flock(handle, mode)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
