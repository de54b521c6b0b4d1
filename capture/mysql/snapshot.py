"""The MySQL / MariaDB agent's snapshot: :class:`SnapshotReader`.

Locks per ``snapshot.locking.mode``, takes the binlog point of a consistent-snapshot
transaction and reads each captured table in key order (see :mod:`capture.mysql.source`,
step 3).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Iterator, Sequence
from decimal import Decimal
from functools import partial
from typing import Any

import pymysql

from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.database_source import SnapshotRow
from capture.mysql.agent import CONNECTION_LOST, MySqlTable, SnapshotProgress, raw_row
from capture.mysql.position import MySqlPosition
from capture.mysql.server import (
    snapshot_point,
)
from capture.mysql.tables import TableTracker
from capture.mysql.types import (
    SNAPSHOT_SESSION_SQL,
    snapshot_connect_kwargs,
    snapshot_values,
)
from pipeline.errors import CaptureError, InternalError
from pipeline.sql import qualified, quote_identifier

__all__ = ["SnapshotReader", "keyed_chunks"]

logger = logging.getLogger(__name__)


def _encode_key(values: Sequence[Any]) -> list[Any]:
    """Key values -> JSON (tagged where JSON has no type), so a resume can bind them again."""
    out: list[Any] = []
    for v in values:
        if isinstance(v, Decimal):
            out.append({"decimal": str(v)})
        elif isinstance(v, dt.datetime | dt.date | dt.time):
            out.append({"temporal": v.isoformat()})
        elif isinstance(v, dt.timedelta):
            out.append({"seconds": v.total_seconds()})
        elif isinstance(v, bytes | bytearray):
            out.append({"hex": bytes(v).hex()})
        else:
            out.append(v)
    return out


def _decode_key(values: Sequence[Any]) -> list[Any]:
    out: list[Any] = []
    for v in values:
        if isinstance(v, dict):
            if "decimal" in v:
                out.append(Decimal(v["decimal"]))
            elif "hex" in v:
                out.append(bytes.fromhex(v["hex"]))
            elif "seconds" in v:
                out.append(dt.timedelta(seconds=v["seconds"]))
            else:
                out.append(v["temporal"])  # MySQL compares ISO text with temporal columns
        else:
            out.append(v)
    return out


class SnapshotReader(TableTracker):
    """The snapshot side of the agent: start, resume, read and finish a snapshot."""

    def _start_snapshot(self, *, with_data: bool) -> None:
        s = self.settings
        conn = self._connect(**snapshot_connect_kwargs())
        lock = s.snapshot_locking_mode
        dialect = self._dialect
        if dialect is None:
            raise InternalError("capture.mysql.snapshot: expected dialect is not None")
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            if lock != "none":
                try:
                    cur.execute("FLUSH TABLES WITH READ LOCK")
                except pymysql.err.MySQLError as exc:
                    conn.close()
                    if exc.args and exc.args[0] in CONNECTION_LOST:
                        raise
                    raise CaptureError(
                        f"source {self.name}: FLUSH TABLES WITH READ LOCK failed "
                        f"({exc.args[-1]}): grant RELOAD to {s.user}, or set "
                        "snapshot.locking.mode=none if no DDL runs during the snapshot"
                    ) from exc
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
            point = snapshot_point(conn, dialect)
            ddls = self._read_schemas(conn)
            if lock == "minimal":
                cur.execute("UNLOCK TABLES")
        ts_ms = int(time.time() * 1000)
        self._server_id = dialect.server_id
        marker = _position(point.file_number, point.pos, Phase.SNAPSHOT, 0, 0, point.file, None)
        self._record_history(self._snapshot_entries(marker, ddls, ts_ms))
        self._resume = point
        self._gtids = point.gtids
        self._cut = None
        self._replay_history()
        tables = [(db, t) for db, t, _ in ddls] if with_data else []
        self._snapshot = SnapshotProgress(point, tables, ts_ms=ts_ms)
        self._phase = "snapshot"
        self._snap_conn = conn
        logger.info(
            "source %s: snapshot of %d table(s) at %s:%d (locking %s)",
            self.name,
            len(tables),
            point.file,
            point.pos,
            lock,
        )

    def _resume_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise CaptureError(f"source {self.name}: offset in phase snapshot has no progress")
        logger.warning(
            "source %s: resuming the snapshot at table %d of %d in a fresh transaction; the "
            "binlog from %s:%d corrects rows changed since",
            self.name,
            snap.index + 1,
            len(snap.tables),
            snap.point.file,
            snap.point.pos,
        )
        conn = self._connect(**snapshot_connect_kwargs())
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            cur.execute("START TRANSACTION WITH CONSISTENT SNAPSHOT")
        self._snap_conn = conn

    def _snapshot_rows(self) -> Iterator[tuple[int, MySqlTable, tuple[list[Any], list[Any]]]]:
        """``(table index, table, (values, key))`` of the remaining rows, in key order."""
        snap, conn = self._snapshot, self._snap_conn
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        if conn is None:
            raise InternalError("capture.mysql.snapshot: expected conn is not None")
        size = int(self.settings.snapshot_fetch_size)
        index, after = snap.index, snap.after
        while index < len(snap.tables):
            table = self._captured(*snap.tables[index])
            if isinstance(table, MySqlTable):
                bound = None if after is None else _decode_key(after)
                for chunk in keyed_chunks(conn, table, size, after=bound):
                    for row_and_key in chunk:
                        yield index, table, row_and_key
            index, after = index + 1, None

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        return {
            **self._snapshot_source_head(last),
            "db": table.schema,
            "table": table.table,
            "server_id": 0,
            "gtid": None,
            "file": snap.point.file,
            "pos": snap.point.pos,
            "row": 0,
            "thread": None,
            "query": None,
        }

    def _snapshot_position(self) -> MySqlPosition:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        point = snap.point
        position = _position(
            point.file_number, point.pos, Phase.SNAPSHOT, 0, snap.seq, point.file, None
        )
        snap.seq += 1
        return position

    def _snapshot_decode(self, table: CapturedTable, row: Any) -> SnapshotRow:
        if not isinstance(table, MySqlTable):
            raise InternalError("capture.mysql.snapshot: expected isinstance(table, MySqlTable)")
        values, key = row
        return SnapshotRow(
            _encode_key(key),
            partial(snapshot_values, table.definition, values),
            partial(raw_row, values),
        )

    def _snapshot_end_origin(self) -> str:
        if self._snapshot is None:
            raise InternalError("capture.mysql.snapshot: expected self._snapshot is not None")
        point = self._snapshot.point
        return f"mysql:snapshot-end@{point.file}:{point.pos}"

    def _finish_snapshot(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mysql.snapshot: expected snap is not None")
        if self._snap_conn is not None:
            try:
                with self._snap_conn.cursor() as cur:
                    cur.execute("COMMIT")
                    if self.settings.snapshot_locking_mode == "extended":
                        cur.execute("UNLOCK TABLES")
            finally:
                self._snap_conn.close()
                self._snap_conn = None
        self._phase = "stream"
        self._resume = snap.point
        logger.info("source %s: snapshot complete (%d rows)", self.name, snap.seq)


def keyed_chunks(
    conn: Any, table: MySqlTable, size: int, *, after: Sequence[Any] | None = None
) -> Iterator[list[tuple[list[Any], list[Any]]]]:
    """A table's rows in key order, ``size`` per query, as ``(row, key)`` pairs.

    ``row`` is the driver's tuple in the definition's column order (:func:`snapshot_values`
    makes it ready for :meth:`CapturedTable.row`, row by row, so that one value that does not
    convert costs only its row); ``key`` is what resumes after the row (``after``): its key
    values, or for a keyless table
    its ordinal (such a table has nothing to seek on, so the rows before are skipped by count,
    which is exact inside one consistent snapshot).
    """
    definition = table.definition
    cols = ", ".join(quote_identifier(c.name) for c in definition.columns)
    source = qualified(definition.database, definition.name)
    key_idx = list(table.key_idx)
    order = ", ".join(quote_identifier(table.names[i]) for i in key_idx)
    bound = None if after is None else list(after)
    while True:
        skipped = 0
        with conn.cursor() as cur:
            if not key_idx:
                skipped = 0 if bound is None else int(bound[0])
                cur.execute(f"SELECT {cols} FROM {source} LIMIT %s OFFSET %s", (size, skipped))
            elif bound is None:
                cur.execute(f"SELECT {cols} FROM {source} ORDER BY {order} LIMIT %s", (size,))
            else:
                marks = ", ".join(["%s"] * len(key_idx))
                cur.execute(
                    f"SELECT {cols} FROM {source} WHERE ({order}) > ({marks}) "
                    f"ORDER BY {order} LIMIT %s",
                    (*bound, size),
                )
            rows = cur.fetchall()
        yield [
            (row, [row[i] for i in key_idx] if key_idx else [skipped + n + 1])
            for n, row in enumerate(rows)
        ]
        if len(rows) < size:
            return
        bound = [rows[-1][i] for i in key_idx] if key_idx else [skipped + len(rows)]


_position = MySqlPosition._new
