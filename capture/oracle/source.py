"""The Oracle capture agent: a flashback snapshot, then LogMiner.

:class:`OracleSource` composes :mod:`.agent` (state, sessions, tables), :mod:`.snapshot`
(``AS OF SCN`` reads and the handover of open transactions), :mod:`.stream` (the mining
loop, the transaction buffer of :mod:`.buffer`, ``SQL_REDO`` parsed by :mod:`.redo`) and
:mod:`.current` (reconciliation reads); this
module opens, restores and writes the offset and reports the redo logs for ``medallion
status``. python-oracledb runs in thin mode (no Oracle client libraries).

Offset (``format`` 1): ``phase``; ``scn``, the low watermark mining resumes after; ``commit_scn``
and ``commit_xids``, the newest commit in bronze (``*``: all at that SCN, the snapshot's);
``tx``, a transaction cut by ``max.transaction.size`` (``xid``, ``commit_scn``, ``emitted``);
``snapshot`` while one runs. Nothing is acknowledged to Oracle: the offset in bronze is the
only record of what was read (``ACKNOWLEDGES`` False), committed by the landing agent after the
bronze commit.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from capture.database_source import SnapshotProgress
from capture.oracle.current import CurrentReader
from capture.oracle.settings import OracleSettings

__all__ = ["OFFSET_FORMAT", "OracleSource"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
LOG_SIZES_SQL = (
    "SELECT THREAD#, SEQUENCE#, FIRST_CHANGE#, NEXT_CHANGE#, BYTES FROM V$LOG UNION ALL "
    "SELECT THREAD#, SEQUENCE#, FIRST_CHANGE#, NEXT_CHANGE#, BLOCKS * BLOCK_SIZE "
    "FROM V$ARCHIVED_LOG WHERE STATUS = 'A'"
)


class OracleSource(CurrentReader):
    """Captures one Oracle database (or one PDB of a CDB) through LogMiner.

    Args:
        name: The configured source name.
        settings: Connection, filters, mining windows and value handling.
    """

    KIND: ClassVar[str] = "oracle"
    SETTINGS: ClassVar[Any] = OracleSettings
    REPORTS_LOG: ClassVar[bool] = True

    def _open(self, offset: Mapping[str, Any] | None) -> None:
        self._close_connections()
        self._tables.clear()
        self._known = {}
        self._flush_ready = False
        self._snap_rows = None
        mode = self.settings.snapshot_mode
        if offset is None or mode == "always" and offset.get("phase") != "snapshot":
            self._start_snapshot(data=mode not in ("schema_only", "schema_only_recovery"))
            return
        self._restore(offset)

    def _restore(self, offset: Mapping[str, Any]) -> None:
        self._check_offset_format(offset, OFFSET_FORMAT)
        self._phase = str(offset["phase"])
        snap = offset.get("snapshot")
        if snap is not None:
            self._snapshot = SnapshotProgress.from_json(snap, int(snap["scn"]))
            self._pending = {str(k): int(v) for k, v in snap.get("pending", {}).items()}
        if self._history is not None:
            # the definitions the changes still to emit were written with
            point = int(offset["commit_scn"])
            if self._phase == "snapshot" and snap is not None:
                point = int(snap["scn"])
            self._known = self._history.as_of(point)
        self._restore_stream(offset)

    def _offset_now(self) -> dict[str, Any]:
        done_scn, done_xids, cut = self._emission_state()
        return {
            "format": OFFSET_FORMAT,
            "phase": self._phase,
            "scn": self._low_watermark(),
            "commit_scn": done_scn,
            "commit_xids": sorted(done_xids),
            "tx": None if cut is None else {"xid": cut[0], "commit_scn": cut[1], "emitted": cut[2]},
            "position": None if self._last_position is None else self._last_position.to_json(),
            "abandoned": sorted(self._abandoned),
            "snapshot": self._snapshot_json(lambda scn: {"scn": scn, "pending": self._pending}),
        }

    def _stops_after_snapshot(self) -> bool:
        return self.settings.snapshot_mode == "initial_only"

    @property
    def log_name(self) -> str:
        """What ``medallion status`` reports on: the database's redo."""
        return f"logminer:{self.settings.pdb or self.settings.dbname}"

    def log_status(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """The redo behind the source: ``slot_lag_bytes`` is the size of the logs holding
        changes after bronze's offset (whole logs: Oracle sizes logs, not SCN ranges), and
        ``retained_wal_bytes`` of every online and archived log LogMiner can still read. An
        offset older than the oldest log is reported in ``slot_error``."""
        row: dict[str, Any] = {"slot": self.log_name, "slot_active": None}
        conn = self._connect()
        try:
            logs = self._query(conn, LOG_SIZES_SQL)
        finally:
            conn.close()
        low = None if offset is None else int(offset.get("scn", 0))
        row["retained_wal_bytes"] = sum(int(b) for *_, b in logs)
        row["slot_lag_bytes"] = sum(
            int(b) for _t, _s, _first, nxt, b in logs if low is None or int(nxt) > low
        )
        oldest = min((int(first) for _t, _s, first, _n, _b in logs), default=None)
        row["slot_error"] = (
            f"the offset SCN {low} is older than the oldest redo log (SCN {oldest})"
            if low is not None and oldest is not None and oldest > low + 1
            else None
        )
        return row

    def close(self) -> None:
        """Close both sessions (the LogMiner session ends with its connection) and delete
        the spill files."""
        self._drop_buffers()
        self._close_connections()
