"""What reconciliation reads of a SQL Server source: :class:`CurrentReader`
(:class:`capture.current_state.CurrentStateReader`).

:meth:`CurrentReader.read_current`: per database, one ``SNAPSHOT`` transaction on a session of
its own (the database must allow snapshot isolation), its ``sys.fn_cdc_get_max_lsn()``, and every
captured table read in key order through the newest capture instance's columns, each row
converted as the snapshot converts it. :meth:`CurrentReader.changes_after`: whether
``cdc.lsn_time_mapping`` holds a captured transaction after the cut, up to that max LSN.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from bronze.positions import decode_position
from capture.column_types import ValueConversionError
from capture.current_state import CurrentRows, LogCheck
from capture.sqlserver import connection as q
from capture.sqlserver.agent import ZERO_LSN, format_lsn
from capture.sqlserver.connection import Session
from capture.sqlserver.position import SqlServerPosition
from capture.sqlserver.snapshot import SnapshotReader, snapshot_select
from pipeline.errors import CaptureError, InternalError, PipelineError

__all__ = ["CurrentReader"]

logger = logging.getLogger(__name__)


class CurrentReader(SnapshotReader):
    """The reconciliation side of the agent; nothing of the capture's state is touched."""

    def read_current(self, *, fetch_size: int | None = None) -> Iterator[CurrentRows]:
        """Every captured table's current rows (see the module docstring); the point is a
        ``{database: max LSN}`` mapping.

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        size = int(fetch_size or self.settings.snapshot_fetch_size)
        point: dict[str, bytes] = {}
        for db in self.settings.databases:
            session = Session(self.settings, db, self.name)
            try:
                session.run("SET TRANSACTION ISOLATION LEVEL SNAPSHOT")
                value = session.scalar(q.MAX_LSN)
                point[db] = ZERO_LSN if value is None else bytes(value)
                for inst in self._newest(self._instances(db)):
                    table = inst.table
                    yield point, table, []
                    cursor = session.run(*snapshot_select(inst, table.schema, table.table, None))
                    while chunk := session.fetch(cursor, size):
                        yield point, table, [self._current_row(table, row) for row in chunk]
                session.commit()
            finally:
                session.close()
                self._close_sessions()

    def _current_row(self, table: Any, row: tuple[Any, ...]) -> dict[str, Any] | None:
        try:
            after: dict[str, Any] = table.row_and_key(row)[0]
            return after
        except (ValueConversionError, PipelineError) as exc:
            logger.warning(
                "source %s: %s: a row the agent would quarantine: %s",
                self.name,
                table.collection,
                exc,
            )
            return None

    def point_text(self, point: Any) -> str:
        """``testDB@00000027:00000758:0005`` per database."""
        return ", ".join(f"{db}@{format_lsn(lsn)}" for db, lsn in sorted(point.items()))

    def changes_after(self, position: bytes, point: Any) -> LogCheck:
        """Whether a captured transaction committed after the cut's commit LSN, up to
        ``point``. Several databases have LSN scales of their own that a bronze position does
        not name, so only a one-database source can be told."""
        if len(point) != 1:
            return LogCheck(None, "several databases: a cut's LSN names none of them")
        ((db, high),) = point.items()
        cut = decode_position("sqlserver", position)
        if not isinstance(cut, SqlServerPosition):
            raise InternalError(
                "capture.sqlserver.current: expected isinstance(cut, SqlServerPosition)"
            )
        session = Session(self.settings, db, self.name)
        try:
            rows = session.rows(q.TRANSACTIONS, (1, cut.commit_lsn, high))
        except CaptureError as exc:
            return LogCheck(None, f"cdc.lsn_time_mapping could not be read: {exc}")
        finally:
            session.close()
        if rows:
            return LogCheck(
                True,
                f"{db}: transaction {format_lsn(bytes(rows[0][0]))} committed after the cut "
                f"({format_lsn(cut.commit_lsn)}) and before the read ({format_lsn(high)})",
            )
        return LogCheck(
            False,
            f"{db}: no captured transaction between the cut ({format_lsn(cut.commit_lsn)}) and "
            f"the read ({format_lsn(high)})",
        )
