"""What the SQLite-backed models of a database server share (tests/db2model, tests/mssqlmodel).

Both keep one SQLite file per database and a small JSON file for the instance (up or down, its
restarts, its own flags), so that an agent in a child process sees the same server as the test
that drives it; both record a transaction's changes as they are made and apply and log them when
it commits; both reach the agent through a pyodbc stand-in whose errors carry pyodbc's
``(sqlstate, message)`` arguments. Only the vendor-specific parts (the CDC tables, messages,
LSNs) live in each model.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

__all__ = [
    "Change",
    "DatabaseError",
    "Error",
    "InterfaceError",
    "ModelTx",
    "OperationalError",
    "ProgrammingError",
    "ResultCursor",
    "SqliteInstance",
    "replace_json",
]


def replace_json(path: Path, state: Mapping[str, Any]) -> None:
    """Write ``path`` atomically: readers in other processes see the old or the new state."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}")
    tmp.write_text(json.dumps(state))
    os.replace(tmp, path)


@dataclass(slots=True)
class Change:
    """One row change of a transaction: ``op`` is insert, update or delete."""

    op: str
    schema: str
    table: str
    before: dict[str, Any] | None
    after: dict[str, Any] | None


class _Tables(Protocol):
    def columns(self, db: str, schema: str, table: str) -> Sequence[Any]: ...

    def key_of(self, db: str, schema: str, table: str, row: Mapping[str, Any]) -> Any: ...

    def truth(self, db: str, schema: str, table: str) -> dict[Any, dict[str, Any]]: ...


@dataclass(slots=True)
class ModelTx:
    """Changes of one transaction, applied and logged when the model commits it (values as
    pyodbc sends them: int, str, Decimal, date, datetime, bytes...).

    A subclass names the server's duplicate-key message in :attr:`DUPLICATE` (formatted with
    ``key``, ``schema`` and ``table``).
    """

    DUPLICATE: ClassVar[str] = "duplicate key {key!r} in {schema}.{table}"

    model: _Tables
    db: str
    changes: list[Change] = field(default_factory=list)
    truth: dict[tuple[str, str], dict[Any, dict[str, Any]]] = field(default_factory=dict)

    def _rows(self, schema: str, table: str) -> dict[Any, dict[str, Any]]:
        if (schema, table) not in self.truth:
            self.truth[(schema, table)] = self.model.truth(self.db, schema, table)
        return self.truth[(schema, table)]

    def _claim(self, rows: dict[Any, Any], key: Any, schema: str, table: str) -> None:
        if key in rows:
            raise ValueError(self.DUPLICATE.format(key=key, schema=schema, table=table))

    def insert(self, schema: str, table: str, row: Mapping[str, Any]) -> None:
        """``INSERT`` one row (every column; missing ones are NULL)."""
        full = {c.name: row.get(c.name) for c in self.model.columns(self.db, schema, table)}
        key = self.model.key_of(self.db, schema, table, full)
        rows = self._rows(schema, table)
        self._claim(rows, key, schema, table)
        rows[key] = full
        self.changes.append(Change("insert", schema, table, None, full))

    def update(self, schema: str, table: str, key: Any, values: Mapping[str, Any]) -> None:
        """``UPDATE ... SET values WHERE <primary key> = key``."""
        rows = self._rows(schema, table)
        before = rows.pop(key)
        after = {**before, **values}
        new_key = self.model.key_of(self.db, schema, table, after)
        self._claim(rows, new_key, schema, table)
        rows[new_key] = after
        self.changes.append(Change("update", schema, table, before, after))

    def delete(self, schema: str, table: str, key: Any) -> None:
        """``DELETE ... WHERE <primary key> = key``."""
        before = self._rows(schema, table).pop(key)
        self.changes.append(Change("delete", schema, table, before, None))


class SqliteInstance:
    """A modelled server instance under ``root``: its state file, its databases' SQLite files,
    and the table locks a snapshot holds.

    Args:
        root: Directory of the instance's files (created).
        initial: The instance state written when ``root`` has none yet (``refuse`` and
            ``generation`` are added when missing).
    """

    def __init__(self, root: Path, initial: Mapping[str, Any]) -> None:
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        if not self._server_file.exists():
            replace_json(self._server_file, {"refuse": False, "generation": 0, **initial})

    @property
    def _server_file(self) -> Path:
        return self.root / "server.json"

    def server_state(self) -> dict[str, Any]:
        """The instance state: ``refuse`` (down), ``generation`` (restarts) and the model's own."""
        state: dict[str, Any] = json.loads(self._server_file.read_text())
        return state

    def _set(self, **changes: Any) -> None:
        replace_json(self._server_file, {**self.server_state(), **changes})

    def set_down(self, down: bool) -> None:
        """Make the instance refuse connections (``down``) or accept them again."""
        self._set(refuse=down)

    def restart(self) -> None:
        """Restart the instance: every open connection breaks."""
        self._set(generation=int(self.server_state().get("generation", 0)) + 1)

    def path(self, db: str) -> Path:
        """The SQLite file of database ``db``."""
        return self.root / f"{db}.sqlite"

    def open(self, db: str) -> sqlite3.Connection:
        """A SQLite connection to ``db`` in autocommit mode (transactions are explicit)."""
        conn = sqlite3.connect(self.path(db), isolation_level=None, timeout=30)
        conn.execute("PRAGMA busy_timeout = 30000")
        return conn

    @contextlib.contextmanager
    def _write(self, db: str) -> Iterator[sqlite3.Connection]:
        conn = self.open(db)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        finally:
            conn.close()

    # --- locks a snapshot holds (the model fails a writer that meets one: it does not wait) ---
    def lock(self, db: str, schema: str, table: str, holder: str) -> None:
        """A session holds a lock on a table that blocks writers until it commits."""
        locks = self._locks()
        locks[_lock_name(db, schema, table)] = holder
        replace_json(self.root / "locks.json", locks)

    def release(self, holder: str) -> None:
        """The session committed: its locks go."""
        held = self._locks()
        locks = {k: v for k, v in held.items() if v != holder}
        if locks != held:
            replace_json(self.root / "locks.json", locks)

    def _locks(self) -> dict[str, str]:
        path = self.root / "locks.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _check_locks(self, db: str, tables: set[tuple[str, str]]) -> None:
        locks = self._locks()
        for schema, table in sorted(tables):
            holder = locks.get(_lock_name(db, schema, table))
            if holder is not None:
                raise self._lock_timeout(schema, table, holder)

    def _lock_timeout(self, schema: str, table: str, holder: str) -> Exception:
        """The server's error for a writer that meets a lock (a subclass names its own)."""
        return RuntimeError(f"{schema}.{table} is locked by {holder}")


def _lock_name(db: str, schema: str, table: str) -> str:
    return f"{db}\x00{schema}\x00{table}"


# --- the pyodbc stand-ins' side --------------------------------------------------------------
class Error(Exception):
    """pyodbc.Error: ``args`` = (sqlstate, message)."""


class DatabaseError(Error):
    """pyodbc.DatabaseError."""


class OperationalError(DatabaseError):
    """pyodbc.OperationalError (e.g. ``08S01``: the link to the server is gone)."""


class ProgrammingError(DatabaseError):
    """pyodbc.ProgrammingError (``42xxx``: a statement the server rejects)."""


class InterfaceError(Error):
    """pyodbc.InterfaceError."""


class ResultCursor:
    """The result half of a pyodbc cursor: ``description`` and the fetch methods over the rows
    the last statement produced (a stand-in's ``execute`` calls :meth:`_result`)."""

    def __init__(self) -> None:
        self.description: list[tuple[Any, ...]] | None = None
        self._rows: list[tuple[Any, ...]] = []
        self._at = 0

    def _result(self, names: Sequence[str], rows: list[tuple[Any, ...]]) -> None:
        self.description = [(n, None, None, None, None, None, True) for n in names]
        self._rows = rows
        self._at = 0

    def fetchone(self) -> tuple[Any, ...] | None:
        """The next row, or None."""
        if self._at >= len(self._rows):
            return None
        self._at += 1
        return self._rows[self._at - 1]

    def fetchmany(self, size: int = 1) -> list[tuple[Any, ...]]:
        """Up to ``size`` rows."""
        rows = self._rows[self._at : self._at + size]
        self._at += len(rows)
        return rows

    def fetchall(self) -> list[tuple[Any, ...]]:
        """The remaining rows."""
        rows = self._rows[self._at :]
        self._at = len(self._rows)
        return rows

    def close(self) -> None:
        """Drop the result."""
        self._rows = []
