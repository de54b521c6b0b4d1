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

import time
from collections.abc import Iterator
from decimal import Decimal
from functools import partial
from typing import Any

import orjson

from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.database_source import SnapshotProgress, SnapshotRow
from capture.oracle.agent import TABLES_SQL, OracleTable, exact_numbers, ora_code, quote
from capture.oracle.position import OraclePosition
from capture.oracle.stream import _ALL, StreamReader
from capture.oracle.types import OracleColumn
from pipeline.errors import CaptureError, InternalError

__all__ = ["PENDING_SQL", "SnapshotReader", "select_item"]

PENDING_SQL = (
    "SELECT d.CURRENT_SCN, RAWTOHEX(t.XID), t.START_SCN FROM V$DATABASE d "
    "LEFT OUTER JOIN V$TRANSACTION t ON t.START_SCN < d.CURRENT_SCN"
)
FETCH_ROWS = 10_000
"""``snapshot.fetch.size``."""


def select_item(column: OracleColumn) -> str:
    """The column in the snapshot's select list. ``TIMESTAMP WITH TIME ZONE`` is read as
    ``SYS_EXTRACT_UTC(...)``: python-oracledb hands the column itself over as a naive datetime
    in the value's own zone with the offset dropped (oracle/python-oracledb#274, #373), which
    is not an instant; its UTC wall clock is, and is what the redo's ``TO_TIMESTAMP_TZ`` gives."""
    name = quote(column.name)
    zoned = column.data_type.endswith(" WITH TIME ZONE") and "LOCAL" not in column.data_type
    return f"SYS_EXTRACT_UTC({name})" if zoned else name


def _key_value(value: Any) -> Any:
    """A key value as JSON keeps it exactly: an int (a ``Decimal`` with no fraction, as the
    ``NUMBER`` handler hands an unconstrained ``NUMBER``, too, within a 64-bit integer: what
    offsets saved before the handler hold), else text."""
    if isinstance(value, Decimal) and value == value.to_integral_value() and abs(value) < 2**63:
        return int(value)
    return value if isinstance(value, int | str) else str(value)


class SnapshotReader(StreamReader):
    """The snapshot side of the agent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._pending: dict[str, int] = {}
        """XID -> start SCN of the transactions open at the snapshot SCN."""

    def _start_snapshot(self, *, data: bool = True) -> None:
        """Read the snapshot SCN and the open transactions; list the tables (none for
        ``schema_only``, which only positions the stream)."""
        rows = self._query(self._miner(), PENDING_SQL)
        scn = int(rows[0][0])
        self._pending = {str(x): int(s) for _, x, s in rows if x is not None}
        captured = [
            (str(o), str(t))
            for o, t in self._query(self._side(), TABLES_SQL)
            if self._captured(str(o), str(t))
        ]
        tables = captured if data else []
        # the definitions the stream starts from (schema history), as the catalog has them now
        self._remember(scn, [(o, t, self._table(o, t)) for o, t in captured])
        self._snapshot = SnapshotProgress(scn, tables, ts_ms=int(time.time() * 1000))
        self._phase = "snapshot" if data else "stream"
        if not data:
            self._hand_over()

    def _hand_over(self) -> None:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.oracle.snapshot: expected snap is not None")
        low = min(self._pending.values()) - 1 if self._pending else snap.point
        self._reset_stream(low, snap.point, {_ALL}, None)
        self._phase = "done" if self.settings.snapshot_mode == "initial_only" else "stream"

    # --- the hooks of DatabaseSource's snapshot loop ---------------------------------------------
    def _resume_snapshot(self) -> None:
        # Flashback reads need no transaction of their own: the side session reads AS OF SCN.
        self._snap_conn = self._side()

    def _snapshot_rows(self) -> Iterator[tuple[int, CapturedTable, tuple[Any, ...]]]:
        """``(table index, table, row)`` of the rows left, in key order, read ``AS OF SCN``;
        after a crash, the rows of the interrupted table up to the saved key are read again
        and passed over (the same SCN gives the same rows in the same order)."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.oracle.snapshot: expected snap is not None")
        for index in range(snap.index, len(snap.tables)):
            owner, name = snap.tables[index]
            table = self._table(owner, name)
            if table is None:
                continue
            after = snap.after if index == snap.index else None
            for row in self._flashback(table, snap.point):
                if after is not None:
                    if self._key_json(table.captured, row) == after:
                        after = None
                    continue
                yield index, table.captured, row

    def _flashback(self, table: OracleTable, scn: int) -> Iterator[tuple[Any, ...]]:
        captured = table.captured
        names = [c.name for c in table.columns]
        keys = [captured.names[i] for i in captured.key_idx] or names
        sql = (
            f"SELECT {', '.join(select_item(c) for c in table.columns)} FROM "
            f"{quote(captured.schema)}.{quote(captured.table)} AS OF SCN :1 "
            f"ORDER BY {', '.join(quote(k) for k in keys)}"
        )
        cursor = self._side().cursor()
        cursor.arraysize = FETCH_ROWS
        cursor.outputtypehandler = exact_numbers(self.driver)
        try:
            cursor.execute(sql, [scn])
        except self.driver.DatabaseError as exc:
            if ora_code(exc) == 1555:
                raise CaptureError(
                    f"source {self.name}: the snapshot of {captured.collection} AS OF SCN {scn} "
                    f"is older than the undo kept ({str(exc).strip()}); raise UNDO_RETENTION, "
                    "or use snapshot.mode=schema_only and an incremental snapshot"
                ) from None
            raise
        while True:
            chunk = cursor.fetchmany(FETCH_ROWS)
            if not chunk:
                return
            yield from (tuple(row) for row in chunk)

    @staticmethod
    def _key_json(table: CapturedTable, row: tuple[Any, ...]) -> list[Any]:
        """The row's key as the offset saves it (JSON: numbers that are not ints as text)."""
        if not table.key_idx:
            return [str(v) for v in row]
        return [_key_value(row[i]) for i in table.key_idx]

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.oracle.snapshot: expected snap is not None")
        return {**self._snapshot_source_head(last), **self._source_fields(table, scn=snap.point)}

    def _snapshot_position(self) -> OraclePosition:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.oracle.snapshot: expected snap is not None")
        position = OraclePosition._new(snap.point, Phase.SNAPSHOT, snap.point, None, 0, snap.seq)
        snap.seq += 1
        return position

    def _snapshot_decode(self, table: CapturedTable, row: Any) -> SnapshotRow:
        return SnapshotRow(
            self._key_json(table, row),
            partial(tuple, row),
            partial(orjson.dumps, row, default=str),
        )

    def _snapshot_end_origin(self) -> str:
        if self._snapshot is None:
            raise InternalError("capture.oracle.snapshot: expected self._snapshot is not None")
        return f"oracle:snapshot-end@{self._snapshot.point}"

    def _finish_snapshot(self) -> None:
        self._snap_conn = None
        self._hand_over()
