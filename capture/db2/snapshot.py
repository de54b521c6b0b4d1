"""The Db2 agent's initial snapshot: :class:`SnapshotReader`.

The guide's procedure (section 6.2.1): one unit of work at ``snapshot.isolation.mode``
(``CURRENT ISOLATION`` UR, CS or RR; ``exclusive`` is RR plus ``LOCK TABLE ... IN EXCLUSIVE
MODE`` on every captured table, held to the end), the maximum LSN read inside it, then every
registered table read in key order. Every row is ``op r`` with that LSN as ``change_lsn`` (the
commit LSN is omitted on snapshot rows), and the stream starts right after it. Only
``exclusive`` (and ``repeatable_read``, whose share locks block writers to the rows read) makes
the rows exactly the database at that LSN; the other levels let a concurrent change show in
both the snapshot and the stream, which silver's ordering absorbs (the guide says the same).
A snapshot resumed after a restart runs in a new unit of work: its rows may be newer than the
LSN, and the stream from the LSN corrects them.
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
from capture.db2 import connection as q
from capture.db2.agent import ZERO_LSN, Db2Agent, Registration, lsn
from capture.db2.connection import Db2Session
from capture.db2.position import Db2Position
from pipeline.errors import InternalError

__all__ = ["SnapshotReader"]

logger = logging.getLogger(__name__)


class SnapshotReader(Db2Agent):
    """The snapshot side of the agent: the hooks of the shared snapshot loop
    (:meth:`capture.database_source.DatabaseSource._read_snapshot`)."""

    _snapshot: SnapshotProgress[str] | None = None

    def _progress(self) -> SnapshotProgress[str]:
        if self._snapshot is None:
            raise InternalError("capture.db2.snapshot: no snapshot in progress")
        return self._snapshot

    def _start_snapshot(self) -> None:
        regs = [] if self.settings.snapshot_mode == "schema_only" else self._registrations()
        tables = [(r.table.schema, r.table.table) for r in regs]
        self._snapshot = SnapshotProgress("", tables, ts_ms=int(time.time() * 1000))
        self._phase = "snapshot"
        logger.info("source %s: snapshot of %d table(s)", self.name, len(tables))

    def _resume_snapshot(self) -> None:
        self._open_snapshot()

    def _open_snapshot(self) -> Db2Session:
        """The snapshot's unit of work; on its first opening, the snapshot's LSN."""
        snap = self._progress()
        self._close_snapshot()
        session = Db2Session(self.settings, self.name)
        mode = self.settings.isolation
        session.execute(f"SET CURRENT ISOLATION = {q.ISOLATION[mode]}")
        if mode == "exclusive":
            for schema, table in snap.tables:
                session.execute(q.lock_table(schema, table))
        if not snap.point:
            value = session.one(q.MAX_LSN)
            regs = self._registrations()
            # No maximum yet: capture never ran, and every change to come commits after the
            # newest registration's start.
            point = (
                self._read_lsn(value)
                if value is not None
                else max((r.start for r in regs), default=ZERO_LSN)
            )
            snap.point = self._text(point)
            self._known = {}  # the stream starts with the snapshot tables' schema changes
            logger.info("source %s: snapshot at LSN %s", self.name, snap.point)
        self._snap_conn = session
        return session

    def _close_snapshot(self) -> None:
        """End the snapshot's unit of work (its locks go with it)."""
        if self._snap_conn is not None:
            self._snap_conn.end()
            self._snap_conn.close()
        self._snap_conn = None

    def _snapshot_rows(self) -> Iterator[tuple[int, CapturedTable, Any]]:
        snap = self._progress()
        session = self._snap_conn or self._open_snapshot()
        regs = {(r.table.schema, r.table.table): r for r in self._registrations()}
        index, after = snap.index, snap.after
        while index < len(snap.tables):
            reg: Registration | None = regs.get(snap.tables[index])
            if reg is not None:  # removed from capture since the snapshot began: nothing to read
                t = reg.table
                keys = [t.names[i] for i in t.key_idx]
                cursor = session.execute(*q.select_table(t.schema, t.table, t.names, keys, after))
                while chunk := session.more(cursor, self.settings.snapshot_fetch_size):
                    for values in chunk:
                        yield index, t, values
            index, after = index + 1, None

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        head = self._snapshot_source_head(last)
        return self._source(table, head["ts_ms"], head["snapshot"], None, self._progress().point)

    def _snapshot_position(self) -> Db2Position:
        snap = self._progress()
        point = lsn(bytes.fromhex(snap.point.replace(":", ""))) if snap.point else ZERO_LSN
        position = Db2Position._new(point, Phase.SNAPSHOT, point, snap.seq)
        snap.seq += 1
        return position

    def _snapshot_decode(self, table: CapturedTable, row: Any) -> SnapshotRow:
        values = tuple(row)
        # A keyless table cannot be resumed inside: its rows are read again from the start.
        key = [_json_key(values[i]) for i in table.key_idx]
        return SnapshotRow(key, lambda: values, partial(orjson.dumps, values, default=str))

    def _snapshot_end_origin(self) -> str:
        return f"db2:snapshot-end@{self._progress().point}"

    def _finish_snapshot(self) -> None:
        snap = self._progress()
        if not snap.point:
            self._open_snapshot()  # schema_only: the LSN the stream starts at
        self._close_snapshot()
        self._lsn = lsn(bytes.fromhex(snap.point.replace(":", "")))
        self._phase = "stream"
        logger.info("source %s: snapshot complete (%d rows)", self.name, snap.seq)


def _json_key(value: Any) -> Any:
    """A key value as the offset's JSON keeps it (read back as the same SQL parameter)."""
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, int | str | float) or value is None:
        return value
    return str(value)
