"""The Db2 capture agent: a snapshot, then the ASN change-data tables, over pyodbc.

:class:`Db2Source` composes :mod:`.snapshot`, :mod:`.stream` and :mod:`.current`
(reconciliation reads) on :mod:`.agent`; :mod:`.settings` reads the config,
:mod:`.connection` holds every statement sent and classifies driver errors, :mod:`.types`
maps column types. See ``docs/capture-db2.md``.

1. **Checks.** The database must answer ``CURRENT SERVER`` and hold the ASN control tables
   (a missing ``ASNCDC.IBMSNAP_REGISTER`` is SQL0204N: terminal, with the setup to run).
2. **Snapshot** (``initial``; ``schema_only`` reads no table but lands the snapshot's end
   marker, so the LSN the stream starts at is committed): :mod:`.snapshot`.
3. **Stream**: :mod:`.stream`.
4. **Offsets.** The commit sequence of the last unit of work read whole and, for one cut by
   ``max.transaction.size``, its commit sequence and the records already landed; the start LSN
   of every registration read. Nothing is acknowledged to the server (the CD tables are read,
   not consumed), so the offset bronze commits is the whole resume state, and a restart
   re-reads exactly what bronze does not hold.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from capture.database_source import SnapshotProgress
from capture.db2 import connection as q
from capture.db2.agent import format_lsn, parse_lsn
from capture.db2.current import CurrentReader
from capture.db2.position import Db2Position
from capture.db2.settings import Db2Settings
from capture.db2.snapshot import SnapshotReader
from pipeline.errors import CaptureError

__all__ = ["OFFSET_FORMAT", "Db2Source"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""


class Db2Source(CurrentReader, SnapshotReader):
    """Captures the ASN change-data tables of one Db2 database.

    Args:
        name: The configured source name.
        settings: Connection, filters and value handling.
    """

    SETTINGS: ClassVar[Any] = Db2Settings

    def _open(self, offset: Mapping[str, Any] | None) -> None:
        self._close_connections()
        self._close_snapshot()
        self._snap_rows = None
        self._tx = None
        self._conn().one(q.CURRENT_SERVER)
        self._max_lsn()  # SQL0204N here when ASN capture is not set up; the LSN width
        if offset is None:
            self._start_snapshot()
            return
        self._check_offset_format(offset, OFFSET_FORMAT)
        self._phase = str(offset["phase"])
        self._lsn = parse_lsn(offset["lsn"])
        cut = offset.get("cut")
        self._cut = None if cut is None else (parse_lsn(cut[0]), int(cut[1]))
        self._known = dict(offset.get("registrations") or {})
        self._width = int(offset.get("width", 16))
        position = offset.get("position")
        self._last_position = None if position is None else Db2Position.from_json(position)
        snap = offset.get("snapshot")
        self._snapshot = (
            None if snap is None else SnapshotProgress.from_json(snap, str(snap["point"]))
        )
        if self._phase == "snapshot":
            if self._snapshot is None:
                raise CaptureError(f"source {self.name}: offset in phase snapshot has no progress")
            logger.warning(
                "source %s: resuming the snapshot at table %d of %d in a new unit of work; the "
                "stream from the snapshot's LSN corrects rows changed since",
                self.name,
                self._snapshot.index + 1,
                len(self._snapshot.tables),
            )

    def _offset_now(self) -> dict[str, Any]:
        return {
            "format": OFFSET_FORMAT,
            "phase": self._phase,
            "lsn": format_lsn(self._lsn),
            "width": self._width,
            "cut": None if self._cut is None else [format_lsn(self._cut[0]), self._cut[1]],
            "registrations": dict(sorted(self._known.items())),
            "position": None if self._last_position is None else self._last_position.to_json(),
            "snapshot": self._snapshot_json(lambda point: {"point": point}),
        }

    def close(self) -> None:
        """Close the connections."""
        self._close_snapshot()
        self._close_connections()
