"""The flashback snapshot: :class:`SnapshotReader`.

Seed Oracle document, "Snapshots", and spec digest §A3: the agent reads the current SCN and the
transactions open at it in one query (``V$DATABASE`` left-joined with ``V$TRANSACTION``), then
each captured table ``AS OF SCN`` that SCN, in key order. Every row is ``op r`` at the snapshot
SCN. Flashback reads are stable, so a snapshot interrupted by a crash resumes at the next row
of the same SCN (``ORA-01555`` when undo no longer reaches back: a terminal error).

**Handover.** Streaming starts below the oldest transaction open at the snapshot SCN (its
start SCN − 1) with ``commit_scn`` = the snapshot SCN: a transaction committed at or before it
is in the snapshot and skipped; one still open then is mined whole and emitted at its COMMIT.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Iterator
from functools import partial
from typing import Any

import orjson

from bronze.batch import BatchBuilder
from bronze.position_base import Phase
from capture.database_source import SnapshotProgress
from capture.oracle.agent import TABLES_SQL, OracleTable, ora_code, quote
from capture.oracle.position import OraclePosition
from capture.oracle.stream import _ALL, StreamReader
from pipeline.errors import CaptureError

__all__ = ["PENDING_SQL", "SnapshotReader"]

PENDING_SQL = (
    "SELECT d.CURRENT_SCN, RAWTOHEX(t.XID), t.START_SCN FROM V$DATABASE d "
    "LEFT OUTER JOIN V$TRANSACTION t ON t.START_SCN < d.CURRENT_SCN"
)
FETCH_ROWS = 10_000
"""``snapshot.fetch.size``."""


class SnapshotReader(StreamReader):
    """The snapshot side of the agent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._snapshot: SnapshotProgress[int] | None = None
        self._pending: dict[str, int] = {}
        self._snap_rows: Iterator[tuple[int, OracleTable, tuple[Any, ...]]] | None = None

    def _start_snapshot(self, *, data: bool = True) -> None:
        """Read the snapshot SCN and the open transactions; list the tables (none for
        ``schema_only``, which only positions the stream)."""
        rows = self._query(self._miner(), PENDING_SQL)
        scn = int(rows[0][0])
        self._pending = {str(x): int(s) for _, x, s in rows if x is not None}
        tables: list[tuple[str, str]] = []
        if data:
            tables = [
                (str(o), str(t))
                for o, t in self._query(self._side(), TABLES_SQL)
                if self._captured(str(o), str(t))
            ]
        self._snapshot = SnapshotProgress(scn, tables, ts_ms=int(time.time() * 1000))
        self._phase = "snapshot" if data else "stream"
        if not data:
            self._hand_over()

    def _hand_over(self) -> None:
        snap = self._snapshot
        assert snap is not None
        low = min(self._pending.values()) - 1 if self._pending else snap.point
        self._reset_stream(low, snap.point, {_ALL}, None)
        self._phase = "done" if self.settings.snapshot_mode == "initial_only" else "stream"

    def _rows(self) -> Iterator[tuple[int, OracleTable, tuple[Any, ...]]]:
        snap = self._snapshot
        assert snap is not None
        skip = int(snap.after[0]) if snap.after else 0
        for index in range(snap.index, len(snap.tables)):
            owner, name = snap.tables[index]
            table = self._table(owner, name)
            if table is None:
                continue
            names = [c.name for c in table.columns]
            keys = [table.captured.names[i] for i in table.captured.key_idx] or names
            sql = (
                f"SELECT {', '.join(quote(n) for n in names)} FROM {quote(owner)}.{quote(name)} "
                f"AS OF SCN :1 ORDER BY {', '.join(quote(k) for k in keys)}"
            )
            cursor = self._side().cursor()
            cursor.arraysize = FETCH_ROWS
            try:
                cursor.execute(sql, [snap.point])
            except self.driver.DatabaseError as exc:
                if ora_code(exc) == 1555:
                    raise CaptureError(
                        f"source {self.name}: the snapshot of {owner}.{name} AS OF SCN "
                        f"{snap.point} is older than the undo kept ({str(exc).strip()}); raise "
                        "UNDO_RETENTION, or use snapshot.mode=schema_only and an incremental "
                        "snapshot"
                    ) from None
                raise
            done = skip if index == snap.index else 0
            while True:
                chunk = cursor.fetchmany(FETCH_ROWS)
                if not chunk:
                    break
                for row in chunk:
                    if done > 0:
                        done -= 1
                        continue
                    yield index, table, tuple(row)

    def _read_snapshot(self, builder: BatchBuilder, max_events: int, now: dt.datetime) -> bool:
        snap = self._snapshot
        assert snap is not None
        if self._snap_rows is None:
            self._snap_rows = self._rows()
        count = 0
        for index, table, values in self._snap_rows:
            if index != snap.index:
                snap.index, snap.after = index, [0]
            captured = table.captured
            source = self._source_block(captured, snapshot="true", ts_ms=snap.ts_ms, scn=snap.point)
            position = OraclePosition._new(
                snap.point, Phase.SNAPSHOT, snap.point, None, 0, snap.seq
            )
            snap.seq += 1
            self._snapshot_row(
                builder,
                captured,
                values,
                source,
                position,
                now,
                partial(orjson.dumps, values, default=str),
            )
            self._last_position = position
            snap.after = [int(snap.after[0]) + 1 if snap.after else 1]
            count += 1
            if count >= max_events:
                return False
        self._snap_rows = None
        snap.index = len(snap.tables)
        self._hand_over()
        return True

    def _end_marker(self, builder: BatchBuilder, now: dt.datetime) -> None:
        snap = self._snapshot
        assert snap is not None
        position = OraclePosition._new(snap.point, Phase.SNAPSHOT, snap.point, None, 0, snap.seq)
        snap.seq += 1
        self._snapshot_marker(builder, position, f"oracle:snapshot-end@{snap.point}", now)
        self._last_position = position
