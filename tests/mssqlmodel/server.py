"""The state of a modelled SQL Server: databases, tables, the log and the CDC objects.

Follows Microsoft's documentation of change data capture (``cdc.<capture_instance>_CT``,
``cdc.fn_cdc_get_all_changes_<capture_instance>``, ``sys.fn_cdc_get_max_lsn``,
``cdc.lsn_time_mapping``, ``sys.sp_cdc_help_change_data_capture``) to the letter where the agent
can observe it:

* A committed transaction is written to the log with LSNs: one per change (``__$seqval``) and
  its commit LSN (``__$start_lsn`` of every change row it produces, and ``start_lsn`` of its
  ``cdc.lsn_time_mapping`` row). LSNs are ``binary(10)`` (VLF 4 bytes, block 4, slot 2),
  increasing, compared bytewise (SQLite compares BLOBs with ``memcmp``, as SQL Server does).
* The capture job (SQL Server Agent) moves the log into the change tables of the capture
  instances that existed when the change was logged (``start_lsn`` of the instance below the
  commit LSN). With the Agent stopped the log waits and ``sys.fn_cdc_get_max_lsn()`` stays put.
* An update is two change rows with one ``__$seqval``: operation 3 (before) and 4 (after);
  an update of the primary key is logged as a delete and an insert (1 and 2) with one
  ``__$seqval``. ``__$update_mask`` has bit ``column_ordinal - 1`` set for each column the change
  wrote (all columns for an insert or delete), lowest ordinal in the last byte;
  ``__$command_id`` numbers the statements of the transaction.
* A table has up to two capture instances (the schema-evolution procedure); each has its own
  captured column list, fixed when it was created.
* The cleanup job deletes change rows below a low-water LSN and raises the instances'
  ``start_lsn`` (``sys.fn_cdc_get_min_lsn``) to it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import pickle
import re
import sqlite3
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

from tests import sqlite_model
from tests.sqlite_model import Change, SqliteInstance

__all__ = ["Column", "ModelTx", "SqlServerModel", "format_lsn", "lsn_of", "printed_default"]

ZERO_LSN = bytes(10)


FIRST_LSN = bytes.fromhex("00000027000007580000")
"""Where a new database's log starts (any LSN would do; this is the seed's neighbourhood)."""


def lsn_of(n: int) -> bytes:
    """The LSN ``n`` log records after :data:`FIRST_LSN` (LSNs are 80-bit big-endian numbers:
    the next record of a block is the next slot)."""
    return (int.from_bytes(FIRST_LSN, "big") + n).to_bytes(10, "big")


def format_lsn(lsn: bytes) -> str:
    """``00000027:00000758:0003``, as SQL Server tools and Debezium print an LSN."""
    digits = lsn.hex()
    return f"{digits[:8]}:{digits[8:16]}:{digits[16:]}"


@dataclass(frozen=True, slots=True)
class Column:
    """A column as ``CREATE TABLE`` declares it.

    Attributes:
        name: Column name.
        type: T-SQL type with its arguments (``int``, ``varchar(40)``, ``decimal(10,2)``).
        nullable: ``NULL`` (True) or ``NOT NULL``.
        pk: Part of the primary key (the capture instance's unique index).
        default: The ``DEFAULT`` expression as written (``0``, ``'abc'``, ``getdate()``); the
            catalog keeps it as SQL Server prints it (:func:`printed_default`).
    """

    name: str
    type: str
    nullable: bool = True
    pk: bool = False
    default: str | None = None

    @property
    def base(self) -> str:
        """The type name without arguments (``decimal``)."""
        return self.type.split("(")[0].strip().lower()

    @property
    def args(self) -> tuple[int, ...]:
        """The type's numeric arguments (``(10, 2)``; ``max`` is -1)."""
        if "(" not in self.type:
            return ()
        inner = self.type.split("(", 1)[1].rstrip(")")
        return tuple(-1 if a.strip().lower() == "max" else int(a) for a in inner.split(","))


class ModelTx(sqlite_model.ModelTx):
    """Changes of one transaction, applied and logged when it commits.

    Obtained from :meth:`SqlServerModel.transaction`; values are what pyodbc would send
    (ints, str, Decimal, datetime, bytes...).
    """

    DUPLICATE = "Violation of PRIMARY KEY constraint: duplicate key {key!r}"


class SqlServerModel(SqliteInstance):
    """A modelled SQL Server under ``root`` (see the module docstring).

    Args:
        root: Directory of the server's files (created).
    """

    def __init__(self, root: Path) -> None:
        # ``agent_running``: SQL Server Agent (the capture job); ``databases``: name -> CDC on.
        super().__init__(root, {"agent_running": True, "databases": {}})

    # --- server level ------------------------------------------------------------------------
    def set_agent(self, running: bool) -> None:
        """Start or stop SQL Server Agent (the capture job); a start harvests the waiting log."""
        self._set(agent_running=running)
        if running:
            for db in self.server_state()["databases"]:
                with self._write(db) as conn:
                    self._capture_job(conn)

    def create_database(self, db: str, *, cdc: bool = True, log_start: bytes = FIRST_LSN) -> None:
        """``CREATE DATABASE``, and ``EXEC sys.sp_cdc_enable_db`` unless ``cdc`` is False; its
        log starts after ``log_start``."""
        conn = self.open(db)
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.executescript(_CATALOG)
            conn.execute("INSERT OR IGNORE INTO [model.state] VALUES ('lsn', ?)", (log_start,))
        finally:
            conn.close()
        self._set(databases={**self.server_state()["databases"], db: cdc})

    def enable_cdc(self, db: str) -> None:
        """``EXEC sys.sp_cdc_enable_db``."""
        self._set(databases={**self.server_state()["databases"], db: True})

    # --- tables ------------------------------------------------------------------------------
    def create_table(self, db: str, schema: str, table: str, columns: Sequence[Column]) -> None:
        """``CREATE TABLE [schema].[table] (...)`` with the primary key of the ``pk`` columns."""
        with self._write(db) as conn:
            cols = ", ".join(f"[{c.name}]" for c in columns)
            conn.execute(f"CREATE TABLE [{schema}.{table}] ({cols})")
            for i, c in enumerate(columns, 1):
                self._describe(conn, schema, table, c, i)

    def add_column(
        self, db: str, schema: str, table: str, column: Column, *, with_values: bool = False
    ) -> None:
        """``ALTER TABLE [schema].[table] ADD column [WITH VALUES]`` (capture instances do not
        follow it).

        The rows that exist get the column's default when it is ``NOT NULL`` or the statement
        says ``WITH VALUES``, NULL otherwise (Microsoft's ALTER TABLE, "WITH VALUES"); the
        change tables record nothing. The model evaluates constant defaults only.
        """
        with self._write(db) as conn:
            conn.execute(f"ALTER TABLE [{schema}.{table}] ADD COLUMN [{column.name}]")
            if column.default is not None and (with_values or not column.nullable):
                # A T-SQL constant (a number, a quoted string) is the same literal in SQLite.
                conn.execute(f"UPDATE [{schema}.{table}] SET [{column.name}] = {column.default}")
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM [model.columns] WHERE schema_name = ? AND table_name = ?",
                (schema, table),
            ).fetchone()
            self._describe(conn, schema, table, column, count + 1)

    def _describe(
        self, conn: sqlite3.Connection, schema: str, table: str, c: Column, i: int
    ) -> None:
        conn.execute(
            "INSERT INTO [model.columns] VALUES (?, ?, ?, ?, ?, ?, ?)",
            (schema, table, i, c.name, c.type, int(c.nullable), int(c.pk)),
        )
        args = c.args
        length = args[0] if c.base in _CHAR_TYPES and args else None
        precision = args[0] if c.base in ("decimal", "numeric") and args else None
        scale = args[1] if c.base in ("decimal", "numeric") and len(args) > 1 else None
        fraction = args[0] if c.base in _FRACTION_TYPES and args else None
        if c.base in _FRACTION_TYPES and not args:
            fraction = 7 if c.base in ("datetime2", "time", "datetimeoffset") else None
        if c.base == "datetime":
            fraction = 3
        if c.base == "smalldatetime":
            fraction = 0
        if c.base in ("money", "smallmoney"):
            precision, scale = (19 if c.base == "money" else 10), 4
        conn.execute(
            "INSERT INTO [INFORMATION_SCHEMA.COLUMNS] VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                schema,
                table,
                c.name,
                i,
                None if c.default is None else printed_default(c.default),
                "YES" if c.nullable else "NO",
                c.base,
                length,
                precision,
                scale,
                fraction,
            ),
        )

    def columns(self, db: str, schema: str, table: str) -> list[Column]:
        """The table's columns, in order."""
        conn = self.open(db)
        try:
            rows = conn.execute(
                "SELECT name, type, nullable, pk FROM [model.columns] WHERE schema_name = ? "
                "AND table_name = ? ORDER BY ordinal",
                (schema, table),
            ).fetchall()
        finally:
            conn.close()
        return [Column(n, t, bool(nl), bool(pk)) for n, t, nl, pk in rows]

    def key_of(self, db: str, schema: str, table: str, row: Mapping[str, Any]) -> Any:
        """The primary key of ``row`` (the value, or a tuple for a composite key)."""
        key = tuple(row[c.name] for c in self.columns(db, schema, table) if c.pk)
        return key[0] if len(key) == 1 else key

    def truth(self, db: str, schema: str, table: str) -> dict[Any, dict[str, Any]]:
        """The table's rows now, by primary key (the ground truth)."""
        columns = self.columns(db, schema, table)
        conn = self.open(db)
        try:
            rows = conn.execute(f"SELECT * FROM [{schema}.{table}]").fetchall()
        finally:
            conn.close()
        out = {}
        for raw in rows:
            row = {c.name: decode(c, v) for c, v in zip(columns, raw, strict=True)}
            out[self.key_of(db, schema, table, row)] = row
        return out

    # --- CDC objects -------------------------------------------------------------------------
    def enable_table(
        self,
        db: str,
        schema: str,
        table: str,
        capture_instance: str | None = None,
        *,
        captured: Sequence[str] | None = None,
    ) -> str:
        """``EXEC sys.sp_cdc_enable_table @source_schema, @source_name, @role_name = NULL,
        @capture_instance, @captured_column_list``; returns the capture instance name.

        Raises:
            ValueError: CDC is not enabled on the database, or the table has two instances.
        """
        if not self.server_state()["databases"].get(db):
            raise ValueError(f"Database '{db}' is not enabled for Change Data Capture (22901)")
        ci = capture_instance or f"{schema}_{table}"
        columns = self.columns(db, schema, table)
        names = list(captured) if captured is not None else [c.name for c in columns]
        with self._write(db) as conn:
            (count,) = conn.execute(
                "SELECT COUNT(*) FROM [cdc.change_tables] WHERE source_schema = ? AND "
                "source_table = ?",
                (schema, table),
            ).fetchone()
            if count >= 2:
                raise ValueError(f"{schema}.{table} already has two capture instances (22962)")
            start = self._next_lsn(conn)
            (object_id,) = conn.execute(
                "SELECT COALESCE(MAX(object_id), 1000) + 1 FROM [cdc.change_tables]"
            ).fetchone()
            index_columns = ", ".join(f"[{c.name}]" for c in columns if c.pk)
            conn.execute(
                "INSERT INTO [cdc.change_tables] VALUES (?, ?, ?, ?, ?, ?, ?)",
                (object_id, ci, schema, table, start, index_columns, _now()),
            )
            by_name = {c.name: c for c in columns}
            for ordinal, name in enumerate(names, 1):
                conn.execute(
                    "INSERT INTO [cdc.captured_columns] VALUES (?, ?, ?, ?)",
                    (object_id, name, ordinal, by_name[name].base),
                )
            cols = ", ".join(f"[{n}]" for n in names)
            conn.execute(
                f"CREATE TABLE [cdc.{ci}_CT] ([__$start_lsn] BLOB, [__$end_lsn] BLOB, "
                f"[__$seqval] BLOB, [__$operation] INTEGER, [__$update_mask] BLOB, {cols}, "
                "[__$command_id] INTEGER)"
            )
        return ci

    def disable_table(self, db: str, capture_instance: str) -> None:
        """``EXEC sys.sp_cdc_disable_table ... @capture_instance``: its change table goes."""
        with self._write(db) as conn:
            (object_id,) = conn.execute(
                "SELECT object_id FROM [cdc.change_tables] WHERE capture_instance = ?",
                (capture_instance,),
            ).fetchone()
            conn.execute("DELETE FROM [cdc.change_tables] WHERE object_id = ?", (object_id,))
            conn.execute("DELETE FROM [cdc.captured_columns] WHERE object_id = ?", (object_id,))
            conn.execute(f"DROP TABLE [cdc.{capture_instance}_CT]")

    def cleanup(self, db: str, low_water: bytes) -> None:
        """The cleanup job: change rows below ``low_water`` go; ``start_lsn`` rises to it."""
        with self._write(db) as conn:
            for (ci,) in conn.execute(
                "SELECT capture_instance FROM [cdc.change_tables]"
            ).fetchall():
                conn.execute(f"DELETE FROM [cdc.{ci}_CT] WHERE [__$start_lsn] < ?", (low_water,))
            conn.execute(
                "UPDATE [cdc.change_tables] SET start_lsn = ? WHERE start_lsn < ?",
                (low_water, low_water),
            )
            conn.execute("DELETE FROM [cdc.lsn_time_mapping] WHERE start_lsn < ?", (low_water,))

    # --- transactions ------------------------------------------------------------------------
    @contextlib.contextmanager
    def transaction(
        self, db: str, at: tuple[Sequence[bytes], bytes] | None = None
    ) -> Iterator[ModelTx]:
        """A transaction on ``db``, committed (applied, logged, captured) when the block ends
        (at the LSNs ``at`` when given, see :meth:`commit`)."""
        tx = ModelTx(self, db)
        yield tx
        self.commit(tx, at)

    def commit(self, tx: ModelTx, at: tuple[Sequence[bytes], bytes] | None = None) -> bytes | None:
        """Apply and log ``tx``; returns its commit LSN (None for an empty transaction).

        Args:
            tx: The transaction.
            at: ``(change LSNs, commit LSN)`` to log it at (a documented example's LSNs);
                by default the next LSNs of the log.
        """
        if not tx.changes:
            return None
        with self._write(tx.db) as conn:
            self._check_locks(tx.db, {(c.schema, c.table) for c in tx.changes})
            begin_lsn = self._next_lsn(conn) if at is None else at[0][0]
            entries = []
            for command, change in enumerate(tx.changes, 1):
                self._apply(conn, tx.db, change)
                lsn = self._next_lsn(conn, None if at is None else at[0][command - 1])
                entries.append((lsn, command, change))
            commit_lsn = self._next_lsn(conn, None if at is None else at[1])
            now = _now()
            payload = pickle.dumps((begin_lsn, commit_lsn, now, entries))
            conn.execute("INSERT INTO [model.log] VALUES (?, ?)", (commit_lsn, payload))
            if self.server_state()["agent_running"]:
                self._capture_job(conn)
        return commit_lsn

    def _apply(self, conn: sqlite3.Connection, db: str, change: Change) -> None:
        columns = self.columns(db, change.schema, change.table)
        pk = [c for c in columns if c.pk]
        name = f"[{change.schema}.{change.table}]"
        if change.before is not None:
            where = " AND ".join(f"[{c.name}] = ?" for c in pk)
            conn.execute(
                f"DELETE FROM {name} WHERE {where}",
                [encode(c, change.before[c.name]) for c in pk],
            )
        if change.after is not None:
            marks = ", ".join("?" for _ in columns)
            conn.execute(
                f"INSERT INTO {name} VALUES ({marks})",
                [encode(c, change.after[c.name]) for c in columns],
            )

    def _next_lsn(self, conn: sqlite3.Connection, at: bytes | None = None) -> bytes:
        """The next LSN of the log (``at``: this one, which must be ahead of the log)."""
        (now,) = conn.execute("SELECT value FROM [model.state] WHERE key = 'lsn'").fetchone()
        lsn = (int.from_bytes(now, "big") + 1).to_bytes(10, "big") if at is None else at
        if lsn <= now:
            raise ValueError(f"LSN {format_lsn(lsn)} is not ahead of the log ({format_lsn(now)})")
        conn.execute("UPDATE [model.state] SET value = ? WHERE key = 'lsn'", (lsn,))
        return lsn

    def _capture_job(self, conn: sqlite3.Connection) -> None:
        """Move the waiting log into the change tables (one capture-job scan)."""
        instances = conn.execute(
            "SELECT ct.object_id, ct.capture_instance, ct.source_schema, ct.source_table, "
            "ct.start_lsn FROM [cdc.change_tables] ct"
        ).fetchall()
        captured: dict[str, list[str]] = {}
        for object_id, ci, *_ in instances:
            captured[ci] = [
                n
                for (n,) in conn.execute(
                    "SELECT column_name FROM [cdc.captured_columns] WHERE object_id = ? "
                    "ORDER BY column_ordinal",
                    (object_id,),
                )
            ]
        for commit_lsn, payload in conn.execute(
            "SELECT commit_lsn, payload FROM [model.log] ORDER BY commit_lsn"
        ).fetchall():
            begin_lsn, commit_lsn, when, entries = pickle.loads(payload)
            wrote = False
            for seqval, command, change in entries:
                for _oid, ci, schema, table, start in instances:
                    if (schema, table) != (change.schema, change.table) or commit_lsn <= start:
                        continue
                    wrote = True
                    types = {c.name: c for c in self.columns_in(conn, schema, table)}
                    for op, image in _change_rows(change, self._key_names(types)):
                        names = captured[ci]
                        mask = _update_mask(names, change, op)
                        values = [encode(types[n], image.get(n)) for n in names]
                        marks = ", ".join("?" for _ in range(len(names) + 6))
                        conn.execute(
                            f"INSERT INTO [cdc.{ci}_CT] VALUES ({marks})",
                            [commit_lsn, None, seqval, op, mask, *values, command],
                        )
            if wrote:
                conn.execute(
                    "INSERT INTO [cdc.lsn_time_mapping] VALUES (?, ?, ?, ?, ?)",
                    (commit_lsn, when, when, begin_lsn, begin_lsn),
                )
        conn.execute("DELETE FROM [model.log]")

    @staticmethod
    def _key_names(types: Mapping[str, Column]) -> list[str]:
        return [c.name for c in types.values() if c.pk]

    @staticmethod
    def columns_in(conn: sqlite3.Connection, schema: str, table: str) -> list[Column]:
        """The columns of a table, read on an open connection."""
        rows = conn.execute(
            "SELECT name, type, nullable, pk FROM [model.columns] WHERE schema_name = ? "
            "AND table_name = ? ORDER BY ordinal",
            (schema, table),
        ).fetchall()
        return [Column(n, t, bool(nl), bool(pk)) for n, t, nl, pk in rows]

    def _lock_timeout(self, schema: str, table: str, holder: str) -> Exception:
        return LockTimeout(
            f"Lock request time out period exceeded (1222): {schema}.{table} is locked by {holder}"
        )


class LockTimeout(RuntimeError):
    """A write waited on a lock a snapshot holds (the model does not wait: it fails)."""


def _now() -> str:
    return dt.datetime.now(dt.UTC).replace(tzinfo=None).isoformat(sep=" ")


def _change_rows(change: Change, keys: list[str]) -> list[tuple[int, dict[str, Any]]]:
    """The change rows of one logged change: ``(__$operation, image)``."""
    if change.op == "insert":
        assert change.after is not None
        return [(2, change.after)]
    if change.op == "delete":
        assert change.before is not None
        return [(1, change.before)]
    assert change.before is not None and change.after is not None
    if any(change.before[k] != change.after[k] for k in keys):
        # An update of the clustered key is logged as a delete and an insert.
        return [(1, change.before), (2, change.after)]
    return [(3, change.before), (4, change.after)]


def _update_mask(names: Sequence[str], change: Change, op: int) -> bytes:
    bits = 0
    for i, name in enumerate(names):
        if (
            op in (1, 2)
            or change.before is None
            or change.after is None
            or change.before.get(name) != change.after.get(name)
        ):
            bits |= 1 << i
    return bits.to_bytes((len(names) + 7) // 8, "big")


def printed_default(expression: str) -> str:
    """A ``DEFAULT`` expression as SQL Server keeps it (``COLUMN_DEFAULT``, the ``definition``
    of ``sys.default_constraints``): in parentheses, a number in two (``((0))``, ``('abc')``,
    ``(getdate())``)."""
    text = expression.strip()
    return f"(({text}))" if re.fullmatch(r"[+-]?[\d.]+", text) else f"({text})"


_CHAR_TYPES = frozenset({"char", "varchar", "nchar", "nvarchar", "binary", "varbinary"})
_FRACTION_TYPES = frozenset({"datetime2", "time", "datetimeoffset"})

_CATALOG = """
CREATE TABLE IF NOT EXISTS [model.state] (key TEXT PRIMARY KEY, value BLOB);
CREATE TABLE IF NOT EXISTS [model.columns] (schema_name TEXT, table_name TEXT, ordinal INTEGER,
    name TEXT, type TEXT, nullable INTEGER, pk INTEGER);
CREATE TABLE IF NOT EXISTS [model.log] (commit_lsn BLOB, payload BLOB);
CREATE TABLE IF NOT EXISTS [INFORMATION_SCHEMA.COLUMNS] (TABLE_SCHEMA TEXT, TABLE_NAME TEXT,
    COLUMN_NAME TEXT, ORDINAL_POSITION INTEGER, COLUMN_DEFAULT TEXT, IS_NULLABLE TEXT,
    DATA_TYPE TEXT,
    CHARACTER_MAXIMUM_LENGTH INTEGER, NUMERIC_PRECISION INTEGER, NUMERIC_SCALE INTEGER,
    DATETIME_PRECISION INTEGER);
CREATE TABLE IF NOT EXISTS [cdc.change_tables] (object_id INTEGER, capture_instance TEXT,
    source_schema TEXT, source_table TEXT, start_lsn BLOB, index_column_list TEXT,
    create_date TEXT);
CREATE TABLE IF NOT EXISTS [cdc.captured_columns] (object_id INTEGER, column_name TEXT,
    column_ordinal INTEGER, column_type TEXT);
CREATE TABLE IF NOT EXISTS [cdc.lsn_time_mapping] (start_lsn BLOB, tran_begin_time TEXT,
    tran_end_time TEXT, tran_id BLOB, tran_begin_lsn BLOB);
"""


def encode(column: Column, value: Any) -> Any:
    """A driver value as the model stores it (SQLite has no decimal or temporal types)."""
    if value is None:
        return None
    if isinstance(value, Decimal | dt.date | dt.time):
        return str(value) if not isinstance(value, dt.datetime) else value.isoformat(sep=" ")
    if isinstance(value, bool):
        return int(value)
    return value


def decode(column: Column, value: Any) -> Any:
    """A stored value as pyodbc returns the column's type (``Decimal``, ``datetime``...)."""
    if value is None:
        return None
    base = column.base
    if base in ("decimal", "numeric", "money", "smallmoney"):
        return Decimal(value)
    if base == "bit":
        return bool(value)
    parse = {
        "datetime": dt.datetime.fromisoformat,
        "datetime2": dt.datetime.fromisoformat,
        "smalldatetime": dt.datetime.fromisoformat,
        "date": dt.date.fromisoformat,
        "time": dt.time.fromisoformat,
    }.get(base)
    if parse is not None:
        try:
            return parse(value)
        except ValueError:
            return value  # as FreeTDS with TDS < 7.3 hands temporal values over: text

    if base in ("float", "real"):
        return float(value)
    return value
