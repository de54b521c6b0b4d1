"""The MySQL / MariaDB agent's binlog status for ``medallion status``: :class:`BinlogStatus`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capture.mysql.agent import MySqlAgent
from capture.mysql.server import (
    BinlogPoint,
    ServerDialect,
    binlog_files,
    current_point,
)

__all__ = ["BinlogStatus"]


class BinlogStatus(MySqlAgent):
    """What ``medallion status`` reports of the binlog behind the agent."""

    @property
    def log_name(self) -> str:
        """The binlog (its end is reported once connected)."""
        return "binlog"

    def log_status(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """The binlog behind this source: ``slot`` names the binlog end (``binlog <file>:<pos>``),
        ``slot_lag_bytes`` is the binlog written after bronze's offset, ``retained_wal_bytes``
        the binlog the server keeps; a purged offset is reported in ``slot_error``. Binlog
        expiry is by age (``binlog_expire_logs_seconds``), so there is no byte headroom."""
        lag = self.binlog_lag(offset)
        row: dict[str, Any] = {
            "slot": f"binlog {lag['file']}:{lag['pos']}",
            "slot_lag_bytes": lag["lag_bytes"],
            "retained_wal_bytes": lag["retained_bytes"],
        }
        if offset is not None and offset.get("file") and lag["lag_bytes"] is None:
            row["slot_error"] = (
                f"binlog file {offset['file']} of bronze's offset is no longer on the server "
                f"(oldest: {lag['oldest_file']})"
            )
        return row

    def binlog_lag(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """How far the server's binlog is ahead of ``offset`` (bronze's committed offset), for
        ``medallion status``: bytes of binlog after it, the binlog kept on the server, and the
        oldest file still there (what ``expire_logs`` will purge next).

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        conn = self._connect()
        try:
            dialect = ServerDialect.read(conn)
            files = binlog_files(conn)
            now = current_point(conn, dialect)
        finally:
            conn.close()
        total = sum(size for _f, size in files)
        behind = None
        if offset is not None and offset.get("file"):
            point = BinlogPoint(str(offset["file"]), int(offset["pos"]))
            if point.file in dict(files):
                behind = sum(
                    size for f, size in files if BinlogPoint(f, 0).file_number > point.file_number
                ) + (dict(files)[point.file] - point.pos)
        return {
            "file": now.file,
            "pos": now.pos,
            "gtids": now.gtids,
            "lag_bytes": behind,
            "retained_bytes": total,
            "oldest_file": files[0][0] if files else None,
        }
