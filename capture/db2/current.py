"""What reconciliation reads of a Db2 source: :class:`CurrentReader`
(:class:`capture.current_state.CurrentStateReader`).

:meth:`CurrentReader.read_current`: one unit of work at ``RR`` on a connection of its own, the
maximum LSN read first, then every registered table read in key order, each row converted as
the snapshot converts it. :meth:`CurrentReader.changes_after`: whether ``IBMSNAP_UOW`` holds a
captured unit of work after the cut, up to that LSN.
"""

from __future__ import annotations

from collections.abc import Iterator

from bronze.positions import decode_position
from capture.current_state import CurrentRows, LogCheck, current_payload
from capture.db2 import connection as q
from capture.db2.agent import ZERO_LSN, format_lsn
from capture.db2.connection import Db2Session
from capture.db2.position import Db2Position
from capture.db2.stream import StreamReader
from pipeline.errors import CaptureError, InternalError

__all__ = ["CurrentReader"]


class CurrentReader(StreamReader):
    """The reconciliation side of the agent; nothing of the capture's state is touched."""

    def read_current(self, *, fetch_size: int | None = None) -> Iterator[CurrentRows]:
        """Every registered table's current rows (see the module docstring); the point is the
        maximum LSN as 16 bytes.

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        size = int(fetch_size or self.settings.snapshot_fetch_size)
        session = Db2Session(self.settings, self.name)
        try:
            session.execute("SET CURRENT ISOLATION = RR")
            value = session.one(q.MAX_LSN)
            point = ZERO_LSN if value is None else self._read_lsn(value)
            for reg in self._registrations():
                t = reg.table
                yield point, t, []
                keys = [t.names[i] for i in t.key_idx]
                cursor = session.execute(*q.select_table(t.schema, t.table, t.names, keys, None))
                while chunk := session.more(cursor, size):
                    yield point, t, [current_payload(self.name, t, row) for row in chunk]
            session.end()
        finally:
            session.close()
            self._close_connections()

    def point_text(self, point: bytes) -> str:
        """The LSN as Debezium prints a Db2 LSN."""
        return self._text(point)

    def changes_after(self, position: bytes, point: bytes) -> LogCheck:
        """Whether a captured unit of work committed after the cut's commit LSN, up to
        ``point``."""
        cut = decode_position("db2", position)
        if not isinstance(cut, Db2Position):
            raise InternalError("capture.db2.current: not a Db2 position")
        session = Db2Session(self.settings, self.name)
        try:
            wired = (self._wire(cut.commit_lsn), self._wire(point))
            rows = session.all(q.UNITS_OF_WORK.format(limit=1), wired)
        except CaptureError as exc:
            return LogCheck(None, f"IBMSNAP_UOW could not be read: {exc}")
        finally:
            session.close()
        low, high = self._text(cut.commit_lsn), self._text(point)
        if rows:
            return LogCheck(
                True,
                f"unit of work {format_lsn(bytes(rows[0][0]))} committed after the cut ({low}) "
                f"and before the read ({high})",
            )
        return LogCheck(
            False, f"no captured unit of work between the cut ({low}) and the read ({high})"
        )
