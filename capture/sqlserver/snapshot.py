"""The SQL Server agent's initial snapshot: :class:`SnapshotReader`.

Debezium's procedure (seed 003, "Snapshots"): per database, open a transaction at
``snapshot.isolation.mode`` (``exclusive``: also ``TABLOCKX`` on every captured table), read
``sys.fn_cdc_get_max_lsn()`` inside it, then read each captured table in key order; every row is
``op r`` at that LSN, and the stream of the database starts right after it. Only ``snapshot``
(row versioning) and ``exclusive`` make the rows exactly the database at that LSN; the other
levels let concurrent changes show in both the snapshot and the stream (Debezium documents the
same), which silver's ordering absorbs.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import orjson

from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.database_source import SnapshotProgress, SnapshotRow
from capture.keyset import after_key
from capture.sqlserver import connection as q
from capture.sqlserver.agent import ZERO_LSN, Instance, SqlServerAgent, format_lsn, parse_lsn
from capture.sqlserver.connection import Session, quote
from capture.sqlserver.position import SqlServerPosition
from pipeline.errors import InternalError

__all__ = ["SnapshotReader", "snapshot_select"]

logger = logging.getLogger(__name__)

_position = SqlServerPosition._new


class SnapshotReader(SqlServerAgent):
    """The snapshot side of the agent: the hooks of the shared snapshot loop
    (:meth:`capture.database_source.DatabaseSource._read_snapshot`)."""

    _snap_db: str | None = None

    def _start_snapshot(self) -> None:
        tables = []
        for db in self.settings.databases:
            self._check_database(db)
            if self.settings.snapshot_mode == "schema_only":
                continue  # no rows: the end marker commits the LSN the stream starts at
            for inst in self._newest(self._instances(db)):
                tables.append((db, inst.table.collection))
        self._snapshot = SnapshotProgress({}, tables, ts_ms=int(time.time() * 1000))
        self._phase = "snapshot"
        logger.info("source %s: snapshot of %d table(s)", self.name, len(tables))

    @staticmethod
    def _newest(instances: list[Instance]) -> list[Instance]:
        """The newest capture instance of each table (its columns are what the stream has)."""
        newest: dict[str, Instance] = {}
        for inst in instances:
            newest[inst.table.collection] = inst
        return list(newest.values())

    def _resume_snapshot(self) -> None:
        """Open the transaction of the database the snapshot is at (after a restart: a new
        one, whose rows may be newer than the snapshot's LSN; the stream from that LSN corrects
        them)."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.sqlserver.snapshot: expected snap is not None")
        if snap.index < len(snap.tables):
            self._open_snapshot_session(snap.tables[snap.index][0])

    def _open_snapshot_session(self, db: str) -> Session:
        """A transaction on ``db`` at the isolation level, with the snapshot's max LSN."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.sqlserver.snapshot: expected snap is not None")
        self._close_snapshot_session()
        session = Session(self.settings, db, self.name)
        mode = self.settings.isolation
        session.run(f"SET TRANSACTION ISOLATION LEVEL {q.ISOLATION[mode]}")
        if mode == "exclusive":
            for entry_db, name in snap.tables:
                if entry_db == db:
                    schema, table = name.split(".", 1)
                    session.rows(
                        f"SELECT TOP (0) * FROM {quote(schema)}.{quote(table)} WITH (TABLOCKX)"
                    )
        if db not in snap.point:
            self._check_database(db)
            value = session.scalar(q.MAX_LSN)
            if value is None:
                self._max_lsn(db)  # raises when the Agent is stopped; else nothing captured yet
            # No max LSN: nothing was ever captured, so every change to come commits after
            # the newest capture instance's start.
            instances = self._instances(db)
            point = max((i.start_lsn for i in instances), default=ZERO_LSN)
            point = point if value is None else bytes(value)
            self._db[db].known = frozenset(i.name for i in instances)
            snap.point[db] = format_lsn(point)
            self._db[db].lsn = point
            logger.info("source %s: snapshot of %s at LSN %s", self.name, db, format_lsn(point))
        self._snap_conn, self._snap_db = session, db
        return session

    def _close_snapshot_session(self) -> None:
        """End the snapshot transaction (its locks and row versions go with it)."""
        if self._snap_conn is not None:
            self._snap_conn.commit()
            self._snap_conn.close()
        self._snap_conn, self._snap_db = None, None

    def _snapshot_rows(self) -> Iterator[tuple[int, CapturedTable, Any]]:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.sqlserver.snapshot: expected snap is not None")
        size = self.settings.snapshot_fetch_size
        index, after = snap.index, snap.after
        while index < len(snap.tables):
            db, name = snap.tables[index]
            session = self._snap_conn
            if session is None or self._snap_db != db:
                session = self._open_snapshot_session(db)
            schema, table = name.split(".", 1)
            newest = self._newest(self._instances(db))
            inst = next((i for i in newest if i.table.collection == name), None)
            if inst is not None:
                self._table_db[id(inst.table)] = db
                cursor = session.run(*snapshot_select(inst, schema, table, after))
                while chunk := session.fetch(cursor, size):
                    for values in chunk:
                        yield index, inst.table, values
            index, after = index + 1, None

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.sqlserver.snapshot: expected snap is not None")
        db = self._table_db[id(table)]
        return {
            **self._snapshot_source_head(last),
            "db": db,
            "sequence": None,
            "schema": table.schema,
            "table": table.table,
            "change_lsn": None,
            "commit_lsn": snap.point[db],
            "event_serial_no": None,
        }

    def _snapshot_position(self) -> SqlServerPosition:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.sqlserver.snapshot: expected snap is not None")
        point = parse_lsn(snap.point[self._snap_db]) if self._snap_db else self._end_point()
        position = _position(point, Phase.SNAPSHOT, ZERO_LSN, 0, snap.seq)
        snap.seq += 1
        return position

    def _end_point(self) -> bytes:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.sqlserver.snapshot: expected snap is not None")
        return max((parse_lsn(p) for p in snap.point.values()), default=ZERO_LSN)

    def _snapshot_decode(self, table: CapturedTable, row: Any) -> SnapshotRow:
        values = tuple(row)
        # A keyless table cannot be resumed inside: its rows are read again from the start.
        key = [values[i] for i in table.key_idx]
        return SnapshotRow(key, lambda: values, partial(orjson.dumps, values, default=str))

    def _snapshot_end_origin(self) -> str:
        return f"mssql:snapshot-end@{format_lsn(self._end_point())}"

    def _finish_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.sqlserver.snapshot: expected snap is not None")
        self._close_snapshot_session()
        for db in self.settings.databases:
            if db not in snap.point:  # a database with no captured table: stream from now
                point = self._max_lsn(db) or ZERO_LSN
                snap.point[db] = format_lsn(point)
            self._db[db].lsn = parse_lsn(snap.point[db])
        self._phase = "done" if self.settings.snapshot_mode == "initial_only" else "stream"
        logger.info("source %s: snapshot complete (%d rows)", self.name, snap.seq)


def snapshot_select(
    inst: Instance, schema: str, table: str, after: list[Any] | None
) -> tuple[str, list[Any]]:
    """The snapshot ``SELECT`` of a table in key order, after the key ``after`` if given."""
    t = inst.table
    cols = ", ".join(quote(n) for n in t.names)
    sql = f"SELECT {cols} FROM {quote(schema)}.{quote(table)}"
    params: list[Any] = []
    keys = [t.names[i] for i in t.key_idx]
    if after is not None and keys:
        # T-SQL has no row-value comparison: (a > ?) OR (a = ? AND b > ?) ...
        condition, params = after_key(keys, after, quote)
        sql += " WHERE " + condition
    if keys:
        sql += " ORDER BY " + ", ".join(quote(k) for k in keys)
    return sql, params
