"""The SQL Server capture agent: a snapshot, then the CDC change tables, over pyodbc.

:class:`SqlServerSource` composes :mod:`.snapshot`, :mod:`.stream` and :mod:`.current`
(reconciliation reads) on :mod:`.agent`;
:mod:`.settings` reads the config, :mod:`.connection` holds every statement sent and classifies
driver errors, :mod:`.types` maps column types. See ``docs/capture-sqlserver.md``.

1. **Checks.** Each database of ``database.names`` must have CDC enabled
   (``sys.databases.is_cdc_enabled``); without a max LSN, SQL Server Agent must be running
   (Debezium's ``sys.dm_server_services`` query), else a clear error.
2. **Snapshot** (``initial``, ``initial_only``; ``schema_only`` reads no table but lands the
   snapshot's end marker, so the stream's starting LSN is committed): :mod:`.snapshot`.
3. **Stream**: :mod:`.stream`.
4. **Offsets.** Per database, the commit LSN of the last transaction read whole and, for a
   transaction cut by ``max.transaction.size``, its commit LSN and the records already landed.
   Nothing is acknowledged to the server (the change tables are read, not consumed: the cleanup
   job alone removes rows), so the offset bronze commits is the whole resume state, and a
   restart re-reads exactly what bronze does not hold. An offset below an instance's
   ``sys.fn_cdc_get_min_lsn`` (the cleanup job removed changes bronze does not have) is an error.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from capture.database_source import SnapshotProgress
from capture.sqlserver import connection as q
from capture.sqlserver.agent import format_lsn, parse_lsn
from capture.sqlserver.current import CurrentReader
from capture.sqlserver.position import SqlServerPosition
from capture.sqlserver.settings import SqlServerSettings
from capture.sqlserver.stream import StreamReader
from pipeline.errors import CaptureError

__all__ = ["OFFSET_FORMAT", "SqlServerSource"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""


class SqlServerSource(CurrentReader, StreamReader):
    """Captures the CDC change tables of one or more SQL Server databases.

    Args:
        name: The configured source name.
        settings: Connection, databases, filters and value handling.
    """

    KIND: ClassVar[str] = "sqlserver"
    SETTINGS: ClassVar[Any] = SqlServerSettings

    def _open(self, offset: Mapping[str, Any] | None) -> None:
        self._close_sessions()
        self._close_snapshot_session()
        self._snap_rows = None
        self._tx = None
        for db in self.settings.databases:
            self._check_database(db)
        if offset is None:
            self._start_snapshot()
            return
        self._restore(offset)
        if self._phase == "stream":
            self._check_retained()

    def _check_retained(self) -> None:
        """Every change after the offset must still be in the change tables."""
        for db, state in self._db.items():
            session = self._session(db)
            after = bytes(session.scalar(q.INCREMENT_LSN, (state.lsn,)))
            for inst in self._instances(db):
                if inst.name not in state.known:
                    continue  # created after the offset: it holds nothing older
                low = bytes(session.scalar(q.MIN_LSN, (inst.name,)))
                if low > after:
                    raise CaptureError(
                        f"source {self.name}: the cleanup job removed changes of {inst.name} "
                        f"after bronze's offset {format_lsn(state.lsn)} (the instance now starts "
                        f"at {format_lsn(low)}); take a new snapshot (clear the source's offset)"
                    )
            session.commit()

    def _restore(self, offset: Mapping[str, Any]) -> None:
        self._check_offset_format(offset, OFFSET_FORMAT)
        self._phase = str(offset["phase"])
        self._restore_db(offset)
        position = offset.get("position")
        self._last_position = None if position is None else SqlServerPosition.from_json(position)
        snap = offset.get("snapshot")
        self._snapshot = (
            None if snap is None else SnapshotProgress.from_json(snap, dict(snap["point"]))
        )
        if self._phase == "snapshot":
            if self._snapshot is None:
                raise CaptureError(f"source {self.name}: offset in phase snapshot has no progress")
            for db, point in self._snapshot.point.items():
                self._db[db].lsn = parse_lsn(point)
            logger.warning(
                "source %s: resuming the snapshot at table %d of %d in a new transaction; the "
                "stream from the snapshot's LSN corrects rows changed since",
                self.name,
                self._snapshot.index + 1,
                len(self._snapshot.tables),
            )

    def _offset_now(self) -> dict[str, Any]:
        return {
            "format": OFFSET_FORMAT,
            "phase": self._phase,
            "databases": self._db_offsets(),
            "position": None if self._last_position is None else self._last_position.to_json(),
            "snapshot": self._snapshot_json(lambda point: {"point": dict(point)}),
        }

    def _stops_after_snapshot(self) -> bool:
        return self.settings.snapshot_mode == "initial_only"

    def close(self) -> None:
        """Close the sessions."""
        self._close_snapshot_session()
        self._close_sessions()
