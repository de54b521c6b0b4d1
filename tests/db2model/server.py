"""The state of a modelled Db2 LUW database under ASN capture (SQL replication).

Follows IBM's documentation of SQL replication's control tables and Debezium's setup scripts
(``asncdctables.sql``, ``asncdcaddremove.sql``) where the agent can observe them:

* **Names are case-sensitive.** Db2 stores identifiers as written between double quotes;
  ``"MyTable"`` and ``"MYTABLE"`` are two tables. SQLite's names are not, so every table and
  column is stored under an internal name (``t<n>``, ``c<i>``) and the catalog keeps the Db2
  names.
* **The log.** A committed transaction gets log sequence numbers (16-byte LSNs, Db2 10.1 and
  later): one per change row, then its commit record.
* **ASN capture** (``ASNCDC.ASNCDCSERVICES('start'|'stop'|'reinit','asncdc')``) reads the log
  of committed transactions. For each change to a table whose registration is active
  (``STATE = 'A'``) and was picked up by a start or reinit (``CD_OLD_SYNCHPOINT`` set then), it
  inserts rows into the registration's CD table: ``I`` for an insert, ``D`` for a delete, and for
  an update a ``D`` (before image) then an ``I`` (after image), because Debezium's
  ``ADDTABLE`` registers with ``CHG_UPD_TO_DEL_INS = 'Y'``. ``IBMSNAP_COMMITSEQ`` is the commit
  LSN, ``IBMSNAP_INTENTSEQ`` a sequence unique and increasing within the log (a split update's
  two rows take consecutive ones). A unit of work that changed a registered table gets one
  ``IBMSNAP_UOW`` row (``IBMSNAP_COMMITSEQ``, ``IBMSNAP_LOGMARKER`` = commit time, local time).
  After each cycle capture advances the global row's ``SYNCHPOINT`` to the end of the log it
  read and each registration's ``CD_NEW_SYNCHPOINT`` to its newest CD row: everything at or
  below ``max(SYNCHPOINT, CD_NEW_SYNCHPOINT)`` is in the CD tables. With capture stopped the log
  waits and the synchpoints stay.
* **Locks.** ``SET CURRENT ISOLATION = RR`` (or ``RS``) keeps a share lock on every table read,
  ``LOCK TABLE ... IN EXCLUSIVE MODE`` an exclusive one, until the commit; a write to a locked
  table fails with SQL0911N reason 68 (lock timeout), since the model cannot block.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import pickle
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests import sqlite_model
from tests.sqlite_model import Change, SqliteInstance

__all__ = ["Column", "Db2Model", "LockTimeout", "ModelTx", "decode", "encode", "lsn_of"]

FIRST_LSN = 0x0000000000000000000000000048FCA0
"""Where a new database's log starts (any LSN would do)."""
ASN = "ASNCDC"
"""The control and CD tables' schema (Debezium's setup scripts)."""
IBMSNAP = ("IBMSNAP_COMMITSEQ", "IBMSNAP_INTENTSEQ", "IBMSNAP_OPERATION")
"""The CD table's first three columns."""
_TEXT_TYPES = frozenset({"CHAR", "VARCHAR", "CLOB", "GRAPHIC", "VARGRAPHIC", "DBCLOB"})


def lsn_of(n: int) -> bytes:
    """A 16-byte LSN."""
    return n.to_bytes(16, "big")


@dataclass(frozen=True, slots=True)
class Column:
    """A column as ``CREATE TABLE`` declares it.

    Attributes:
        name: Column name, case-sensitive (``"Name"``).
        type: Db2 type with its arguments (``INTEGER``, ``VARCHAR(40)``, ``DECIMAL(10,2)``,
            ``TIMESTAMP(6)``).
        nullable: ``NOT NULL`` when False.
        pk: Part of the primary key (in declaration order).
        default: ``SYSCAT.COLUMNS.DEFAULT``: the default "expressed as a constant, special
            register, or cast-function" (``0``, ``'abc'``, ``'2021-01-02'``: date and time
            constants in ISO format; ``CURRENT TIMESTAMP``); None without a DEFAULT clause.
    """

    name: str
    type: str
    nullable: bool = True
    pk: bool = False
    default: str | None = None

    @property
    def base(self) -> str:
        """The type name without arguments, upper case (``DECIMAL``)."""
        return self.type.split("(")[0].strip().upper()

    @property
    def args(self) -> tuple[int, ...]:
        """The type's numeric arguments."""
        if "(" not in self.type:
            return ()
        inner = self.type.split("(", 1)[1].split(")")[0]
        units = {"K": 1024, "M": 1024**2, "G": 1024**3}  # CLOB(1M), BLOB(2G)
        return tuple(
            int(a[:-1]) * units[a[-1]] if a[-1] in units else int(a)
            for a in (part.strip().upper() for part in inner.split(","))
        )

    @property
    def codepage(self) -> int:
        """``SYSCAT.COLUMNS.CODEPAGE``: 1208 (UTF-8) for character data, 0 for binary
        (``FOR BIT DATA``, ``BINARY``, ``BLOB``) and non-character types."""
        if "BIT DATA" in self.type.upper():
            return 0
        return 1208 if self.base in _TEXT_TYPES else 0

    def catalog(self) -> tuple[str, int, int]:
        """``SYSCAT.COLUMNS`` ``TYPENAME``, ``LENGTH`` and ``SCALE`` as Db2 records them."""
        base, args = self.base, self.args
        fixed = {"SMALLINT": 2, "INTEGER": 4, "BIGINT": 8, "REAL": 4, "DOUBLE": 8, "DATE": 4}
        if base in fixed:
            return base, fixed[base], 0
        if base in ("DECIMAL", "NUMERIC"):
            return "DECIMAL", args[0] if args else 5, args[1] if len(args) > 1 else 0
        if base == "DECFLOAT":
            return base, 8 if args == (16,) else 16, 0
        if base == "TIME":
            return base, 3, 0
        if base == "TIMESTAMP":
            scale = args[0] if args else 6
            return base, 10 if scale == 0 else 11 + scale, scale
        if base == "BOOLEAN":
            return base, 1, 0
        if base == "CHAR":
            return "CHARACTER", args[0] if args else 1, 0  # SYSCAT.COLUMNS spells it out
        return base, args[0] if args else 1, 0


class ModelTx(sqlite_model.ModelTx):
    """Changes of one transaction, applied and logged when it commits (values as pyodbc
    sends them: int, str, Decimal, date, datetime, bytes...)."""

    DUPLICATE = "SQL0803N duplicate key {key!r} in {schema}.{table}"


class LockTimeout(RuntimeError):
    """A write met a lock a snapshot holds (SQL0911N reason 68; the model does not wait)."""


class Db2Model(SqliteInstance):
    """A modelled Db2 instance under ``root`` (see the module docstring).

    Args:
        root: Directory of the instance's files (created).
    """

    def __init__(self, root: Path) -> None:
        # ``capture``: ASN capture running; ``databases``: the instance's databases.
        super().__init__(root, {"capture": True, "databases": []})

    def create_database(
        self, db: str, *, asn: bool = True, width: int = 16, log_start: int = FIRST_LSN
    ) -> None:
        """``CREATE DATABASE``; with ``asn``, also the ASN control tables of
        ``asncdctables.sql`` and their global register row.

        Args:
            db: The database name.
            asn: Create the ASN control tables.
            width: Bytes of an LSN as the control and CD tables hold it: 16 (Db2 10.1 and
                later), or 10 (the older format the guide's examples print).
            log_start: Where the log starts.
        """
        conn = self.open(db)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.executescript(_CATALOG)
            conn.execute("INSERT INTO [model.state] VALUES ('lsn', ?)", (lsn_of(log_start),))
            conn.execute("INSERT INTO [model.state] VALUES ('width', ?)", (width,))
            if asn:
                conn.executescript(_ASN_TABLES)
                conn.execute(
                    "INSERT INTO [ASNCDC.IBMSNAP_REGISTER] (SOURCE_OWNER, SOURCE_TABLE, "
                    "GLOBAL_RECORD, STATE) VALUES ('', '', 'Y', 'A')"
                )
        finally:
            conn.close()
        self._set(databases=[*self.server_state()["databases"], db])

    # --- tables --------------------------------------------------------------------------------
    def create_table(self, db: str, schema: str, table: str, columns: Sequence[Column]) -> None:
        """``CREATE TABLE "schema"."table" (...)`` with the primary key of the ``pk`` columns."""
        with self._write(db) as conn:
            self._create(conn, schema, table, columns, "T")

    def _create(
        self,
        conn: sqlite3.Connection,
        schema: str,
        table: str,
        columns: Sequence[Column],
        kind: str,
        prefix: Sequence[Column] = (),
    ) -> str:
        (n,) = conn.execute("SELECT COUNT(*) FROM [model.tables]").fetchone()
        inner = f"t{n}"
        every = [*prefix, *columns]
        conn.execute(f"CREATE TABLE {inner} ({', '.join(f'c{i}' for i in range(len(every)))})")
        conn.execute(
            "INSERT INTO [model.tables] VALUES (?, ?, ?, ?)",
            (
                schema,
                table,
                inner,
                json.dumps([[c.name, c.type, c.nullable, c.pk, c.default] for c in every]),
            ),
        )
        conn.execute(
            "INSERT INTO [SYSCAT.TABLES] VALUES (?, ?, ?, 2, ?)", (schema, table, kind, n + 4)
        )
        keyseq = 0
        for colno, c in enumerate(every):
            typename, length, scale = c.catalog()
            key = None
            if c.pk and kind == "T":
                keyseq += 1
                key = keyseq
            conn.execute(
                "INSERT INTO [SYSCAT.COLUMNS] VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (schema, table, c.name, colno, typename, length, scale,
                 "Y" if c.nullable else "N", key, c.codepage, c.default),
            )  # fmt: skip
        return inner

    @staticmethod
    def lookup(conn: sqlite3.Connection, schema: str, table: str) -> tuple[str, list[Column]]:
        """The internal name and the columns of ``schema.table`` (case-sensitive).

        Raises:
            KeyError: No such table.
        """
        row = conn.execute(
            "SELECT inner_name, columns FROM [model.tables] WHERE schema_name = ? AND "
            "table_name = ?",
            (schema, table),
        ).fetchone()
        if row is None:
            raise KeyError(f"{schema}.{table}")
        return str(row[0]), [
            Column(n, t, bool(nl), bool(pk), *default)
            for n, t, nl, pk, *default in json.loads(row[1])
        ]

    def columns(self, db: str, schema: str, table: str) -> list[Column]:
        """The table's columns, in order."""
        conn = self.open(db)
        try:
            return self.lookup(conn, schema, table)[1]
        finally:
            conn.close()

    def key_of(self, db: str, schema: str, table: str, row: Mapping[str, Any]) -> Any:
        """The primary key of ``row`` (the value, or a tuple for a composite key)."""
        key = tuple(row[c.name] for c in self.columns(db, schema, table) if c.pk)
        return key[0] if len(key) == 1 else key

    def truth(self, db: str, schema: str, table: str) -> dict[Any, dict[str, Any]]:
        """The table's rows now, by primary key (the ground truth)."""
        conn = self.open(db)
        try:
            inner, columns = self.lookup(conn, schema, table)
            rows = conn.execute(f"SELECT * FROM {inner}").fetchall()
        finally:
            conn.close()
        out = {}
        for raw in rows:
            row = {c.name: decode(c, v) for c, v in zip(columns, raw, strict=True)}
            out[self.key_of(db, schema, table, row)] = row
        return out

    def add_column(self, db: str, schema: str, table: str, column: Column) -> None:
        """``ALTER TABLE "schema"."table" ADD COLUMN ...``: Db2 gives every existing row the
        column's default, nullable or not (NULL without one). Capture does not follow it: the CD
        table keeps its columns until the table is removed from capture and added again (the
        guide's online schema update). The model evaluates constants only (a number, a quoted
        string).
        """
        with self._write(db) as conn:
            inner, columns = self.lookup(conn, schema, table)
            slot = f"c{len(columns)}"
            conn.execute(f"ALTER TABLE {inner} ADD COLUMN {slot}")
            if column.default is not None:
                text = column.default.strip()
                value: Any
                if text.startswith("'"):
                    value = text[1:-1].replace("''", "'")
                elif column.base in ("SMALLINT", "INTEGER", "BIGINT"):
                    value = int(text)
                else:
                    value = Decimal(text)
                conn.execute(f"UPDATE {inner} SET {slot} = ?", (encode(column, value),))
            every = [*columns, column]
            conn.execute(
                "UPDATE [model.tables] SET columns = ? WHERE inner_name = ?",
                (json.dumps([[c.name, c.type, c.nullable, c.pk, c.default] for c in every]), inner),
            )
            typename, length, scale = column.catalog()
            conn.execute(
                "INSERT INTO [SYSCAT.COLUMNS] VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (schema, table, column.name, len(columns), typename, length, scale,
                 "Y" if column.nullable else "N", None, column.codepage, column.default),
            )  # fmt: skip

    # --- ASN administration ---------------------------------------------------------------------
    def add_table(self, db: str, schema: str, table: str) -> None:
        """``CALL ASNCDC.ADDTABLE('schema', 'table')``: the CD table ``ASNCDC."CDC_s_t"`` and an
        active register row whose synchpoints are NULL until capture is reinitialised."""
        cd = f"CDC_{schema}_{table}"
        with self._write(db) as conn:
            _, columns = self.lookup(conn, schema, table)
            prefix = [Column(name, "VARCHAR(16) FOR BIT DATA", False) for name in IBMSNAP[:2]]
            prefix.append(Column(IBMSNAP[2], "CHAR(1)", False))
            plain = [Column(c.name, c.type, c.nullable, False) for c in columns]
            self._create(conn, ASN, cd, plain, "T", prefix)
            conn.execute(
                "INSERT INTO [ASNCDC.IBMSNAP_REGISTER] (SOURCE_OWNER, SOURCE_TABLE, "
                "GLOBAL_RECORD, CD_OWNER, CD_TABLE, CHG_UPD_TO_DEL_INS, STATE) "
                "VALUES (?, ?, 'N', ?, ?, 'Y', 'A')",
                (schema, table, ASN, cd),
            )

    def remove_table(self, db: str, schema: str, table: str) -> None:
        """``CALL ASNCDC.REMOVETABLE('schema', 'table')``: the register row and CD table go."""
        with self._write(db) as conn:
            conn.execute(
                "DELETE FROM [ASNCDC.IBMSNAP_REGISTER] WHERE SOURCE_OWNER = ? AND SOURCE_TABLE = ?",
                (schema, table),
            )
            inner, _ = self.lookup(conn, ASN, f"CDC_{schema}_{table}")
            conn.execute(f"DROP TABLE {inner}")
            conn.execute("DELETE FROM [model.tables] WHERE inner_name = ?", (inner,))
            conn.execute(
                "DELETE FROM [SYSCAT.COLUMNS] WHERE TABSCHEMA = ? AND TABNAME = ?",
                (ASN, f"CDC_{schema}_{table}"),
            )

    def set_register_state(self, db: str, schema: str, table: str, state: str) -> None:
        """``UPDATE ASNCDC.IBMSNAP_REGISTER SET STATE = 'A'|'I'`` (schema update procedures)."""
        with self._write(db) as conn:
            conn.execute(
                "UPDATE [ASNCDC.IBMSNAP_REGISTER] SET STATE = ? WHERE SOURCE_OWNER = ? AND "
                "SOURCE_TABLE = ?",
                (state, schema, table),
            )

    def asncdc_services(self, db: str, command: str) -> str:
        """``VALUES ASNCDC.ASNCDCSERVICES(command, 'asncdc')``: ``start``, ``stop``, ``reinit``
        or ``status``."""
        if command == "stop":
            self._set(capture=False)
            return "asncap stopped"
        if command == "status":
            return (
                "asncap is doing work"
                if self.server_state()["capture"]
                else "asncap is not running"
            )
        self._set(capture=True)
        with self._write(db) as conn:
            # start/reinit: capture reads the register; new active registrations begin at the
            # end of the log.
            now = self.wire(conn, self._next_lsn(conn))
            conn.execute(
                "UPDATE [ASNCDC.IBMSNAP_REGISTER] SET CD_OLD_SYNCHPOINT = ?, "
                "CD_NEW_SYNCHPOINT = ? WHERE GLOBAL_RECORD = 'N' AND STATE = 'A' AND "
                "CD_OLD_SYNCHPOINT IS NULL",
                (now, now),
            )
            self._capture(conn)
        return f"asncap {command} done"

    # --- transactions ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(
        self, db: str, at: tuple[Sequence[int], int] | None = None
    ) -> Iterator[ModelTx]:
        """A transaction on ``db``, committed (applied, logged, captured) when the block ends
        (at the LSNs ``at`` when given, see :meth:`commit`)."""
        tx = ModelTx(self, db)
        yield tx
        self.commit(tx, at)

    def commit(self, tx: ModelTx, at: tuple[Sequence[int], int] | None = None) -> bytes | None:
        """Apply and log ``tx``; its commit LSN (None for an empty transaction).

        Args:
            tx: The transaction.
            at: ``(change LSNs, commit LSN)`` to log it at (a documented example's); by
                default the next LSNs of the log. An update takes two: its ``D`` row's just
                below its ``I`` row's, which is the change's.
        """
        if not tx.changes:
            return None
        with self._write(tx.db) as conn:
            self._check_locks(tx.db, {(c.schema, c.table) for c in tx.changes})
            entries = []
            for n, change in enumerate(tx.changes):
                self._apply(conn, change)
                if at is None:
                    lsns = [self._next_lsn(conn)]
                    if change.op == "update":
                        lsns.append(self._next_lsn(conn))
                else:
                    lsns = [self._next_lsn(conn, at[0][n])]
                    if change.op == "update":
                        lsns.insert(0, lsn_of(at[0][n] - 1))
                entries.append((lsns, change))
            commit_lsn = self._next_lsn(conn, None if at is None else at[1])
            when = dt.datetime.now().replace(microsecond=0) + dt.timedelta(
                microseconds=int.from_bytes(commit_lsn, "big") % 1_000_000
            )
            conn.execute(
                "INSERT INTO [model.log] VALUES (?, ?)",
                (commit_lsn, pickle.dumps((when, entries))),
            )
            if self.server_state()["capture"]:
                self._capture(conn)
        return commit_lsn

    def _apply(self, conn: sqlite3.Connection, change: Change) -> None:
        inner, columns = self.lookup(conn, change.schema, change.table)
        pk = [(i, c) for i, c in enumerate(columns) if c.pk]
        if change.before is not None:
            where = " AND ".join(f"c{i} = ?" for i, _ in pk)
            values = [encode(c, change.before[c.name]) for _, c in pk]
            conn.execute(f"DELETE FROM {inner} WHERE {where}", values)
        if change.after is not None:
            marks = ", ".join("?" for _ in columns)
            values = [encode(c, change.after[c.name]) for c in columns]
            conn.execute(f"INSERT INTO {inner} VALUES ({marks})", values)

    def _next_lsn(self, conn: sqlite3.Connection, at: int | None = None) -> bytes:
        """The next LSN of the log (``at``: this one, which must be ahead of the log)."""
        (now,) = conn.execute("SELECT value FROM [model.state] WHERE key = 'lsn'").fetchone()
        lsn = lsn_of(int.from_bytes(now, "big") + 1 if at is None else at)
        if lsn <= now:
            raise ValueError(f"LSN {lsn.hex()} is not ahead of the log ({bytes(now).hex()})")
        conn.execute("UPDATE [model.state] SET value = ? WHERE key = 'lsn'", (lsn,))
        return lsn

    @staticmethod
    def wire(conn: sqlite3.Connection, lsn: bytes) -> bytes:
        """An LSN as the database's control and CD tables hold it (its width)."""
        (width,) = conn.execute("SELECT value FROM [model.state] WHERE key = 'width'").fetchone()
        return lsn[16 - int(width) :]

    def _capture(self, conn: sqlite3.Connection) -> None:
        """One capture cycle: the waiting log into the CD tables, UOW rows, synchpoints."""
        registered = {
            (str(s), str(t)): (str(owner), str(cd), bytes(start))
            for s, t, owner, cd, start in conn.execute(
                "SELECT SOURCE_OWNER, SOURCE_TABLE, CD_OWNER, CD_TABLE, CD_OLD_SYNCHPOINT FROM "
                "[ASNCDC.IBMSNAP_REGISTER] WHERE GLOBAL_RECORD = 'N' AND STATE = 'A' AND "
                "CD_OLD_SYNCHPOINT IS NOT NULL"
            ).fetchall()
        }
        for commit_lsn, payload in conn.execute(
            "SELECT commit_lsn, payload FROM [model.log] ORDER BY commit_lsn"
        ).fetchall():
            when, entries = pickle.loads(payload)
            wrote = False
            for lsns, change in entries:
                target = registered.get((change.schema, change.table))
                if target is None or self.wire(conn, commit_lsn) <= target[2]:
                    continue
                inner, columns = self.lookup(conn, target[0], target[1])
                for intent, (op, image) in zip(lsns, _cd_rows(change), strict=True):
                    values = [encode(c, image.get(c.name)) for c in columns[3:]]
                    marks = ", ".join("?" for _ in columns)
                    commit, seq = self.wire(conn, commit_lsn), self.wire(conn, intent)
                    conn.execute(
                        f"INSERT INTO {inner} VALUES ({marks})", [commit, seq, op, *values]
                    )
                    wrote = True
                conn.execute(
                    "UPDATE [ASNCDC.IBMSNAP_REGISTER] SET CD_NEW_SYNCHPOINT = ? WHERE "
                    "CD_OWNER = ? AND CD_TABLE = ?",
                    (self.wire(conn, commit_lsn), *target[:2]),
                )
            if wrote:
                conn.execute(
                    "INSERT INTO [ASNCDC.IBMSNAP_UOW] VALUES (?, ?, ?, 'ASNTKN', 'DB2INST1', "
                    "'0', '')",
                    (commit_lsn[-10:], self.wire(conn, commit_lsn), when.isoformat(sep=" ")),
                )
        conn.execute("DELETE FROM [model.log]")
        (end,) = conn.execute("SELECT value FROM [model.state] WHERE key = 'lsn'").fetchone()
        conn.execute(
            "UPDATE [ASNCDC.IBMSNAP_REGISTER] SET SYNCHPOINT = ?, SYNCHTIME = ? "
            "WHERE GLOBAL_RECORD = 'Y'",
            (self.wire(conn, end), dt.datetime.now().isoformat(sep=" ")),
        )

    def _lock_timeout(self, schema: str, table: str, holder: str) -> Exception:
        return LockTimeout(
            "SQL0911N The current transaction has been rolled back because of a deadlock "
            f'or timeout. Reason code "68". SQLSTATE=40001 ({schema}.{table})'
        )


def _cd_rows(change: Change) -> list[tuple[str, dict[str, Any]]]:
    """The CD rows of one change (``CHG_UPD_TO_DEL_INS = 'Y'``)."""
    if change.op == "insert":
        assert change.after is not None
        return [("I", change.after)]
    if change.op == "delete":
        assert change.before is not None
        return [("D", change.before)]
    assert change.before is not None and change.after is not None
    return [("D", change.before), ("I", change.after)]


_CATALOG = """
CREATE TABLE [model.state] (key TEXT PRIMARY KEY, value BLOB);
CREATE TABLE [model.log] (commit_lsn BLOB, payload BLOB);
CREATE TABLE [model.tables] (schema_name TEXT, table_name TEXT, inner_name TEXT, columns TEXT);
CREATE TABLE [SYSCAT.TABLES] (TABSCHEMA TEXT, TABNAME TEXT, TYPE TEXT, TBSPACEID INTEGER,
    TABLEID INTEGER);
CREATE TABLE [SYSCAT.COLUMNS] (TABSCHEMA TEXT, TABNAME TEXT, COLNAME TEXT, COLNO INTEGER,
    TYPENAME TEXT, LENGTH INTEGER, SCALE INTEGER, NULLS TEXT, KEYSEQ INTEGER, CODEPAGE INTEGER,
    "DEFAULT" TEXT);
"""

_ASN_TABLES = """
CREATE TABLE [ASNCDC.IBMSNAP_REGISTER] (SOURCE_OWNER TEXT, SOURCE_TABLE TEXT,
    GLOBAL_RECORD TEXT, CD_OWNER TEXT, CD_TABLE TEXT, CD_OLD_SYNCHPOINT BLOB,
    CD_NEW_SYNCHPOINT BLOB, SYNCHPOINT BLOB, SYNCHTIME TEXT, CHG_UPD_TO_DEL_INS TEXT,
    STATE TEXT);
CREATE TABLE [ASNCDC.IBMSNAP_UOW] (IBMSNAP_UOWID BLOB, IBMSNAP_COMMITSEQ BLOB,
    IBMSNAP_LOGMARKER TEXT, IBMSNAP_AUTHTKN TEXT, IBMSNAP_AUTHID TEXT, IBMSNAP_REJ_CODE TEXT,
    IBMSNAP_APPLY_QUAL TEXT);
"""


def encode(column: Column, value: Any) -> Any:
    """A driver value as the model stores it (SQLite has no decimal or temporal types)."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, dt.datetime):
        return value.isoformat(sep=" ")
    if isinstance(value, Decimal | dt.date | dt.time):
        return str(value)
    return value


def decode(column: Column, value: Any) -> Any:
    """A stored value as pyodbc returns the column's type through the Db2 CLI driver."""
    if value is None:
        return None
    base = column.base
    if base in ("DECIMAL", "NUMERIC", "DECFLOAT"):
        return Decimal(value)
    if base == "BOOLEAN":
        return bool(value)
    if base in ("REAL", "DOUBLE"):
        return float(value)
    if base == "DATE":
        return dt.date.fromisoformat(value)
    if base == "TIME":
        return dt.time.fromisoformat(value)
    if base == "TIMESTAMP":
        return dt.datetime.fromisoformat(value)
    if base == "CHAR" and "BIT DATA" not in column.type.upper():
        # CHAR(n) is blank-padded to its length, as Db2 returns it.
        return str(value).ljust(column.args[0] if column.args else 1)
    if base in ("BINARY", "VARBINARY", "BLOB") or "BIT DATA" in column.type.upper():
        return bytes(value)
    return value
