"""The PostgreSQL agent's slot status for ``medallion status``: :class:`SlotStatus`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import psycopg

from capture.postgresql import slot as pg_slot
from capture.postgresql.agent import PostgresAgent
from pipeline.errors import CaptureError

__all__ = ["SlotStatus"]


class SlotStatus(PostgresAgent):
    """What ``medallion status`` reports of the agent's replication slot."""

    @property
    def log_name(self) -> str:
        """The replication slot's name."""
        return self.settings.slot_name

    def log_status(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """The slot: whether a consumer is connected, the WAL written since its confirmed flush
        LSN (``slot_lag_bytes``: not yet acknowledged, i.e. not yet in bronze), since its restart
        LSN (``retained_wal_bytes``: what the server keeps on disk for it) and what may still be
        written before ``max_slot_wal_keep_size`` invalidates it (``retention_headroom_bytes``;
        None: unlimited). A missing or invalidated slot is reported in ``slot_error``."""
        row: dict[str, Any] = {"slot": self.settings.slot_name}
        lag = self.slot_lag()
        if lag is None:
            row["slot_error"] = f"replication slot {row['slot']} does not exist"
            return row
        row["slot_active"] = lag["active"]
        row["slot_lag_bytes"] = lag["lag_bytes"]
        row["retained_wal_bytes"] = lag["retained_wal_bytes"]
        row["retention_headroom_bytes"] = lag.get("safe_wal_bytes")
        if lag["wal_status"] == "lost":
            row["slot_error"] = f"replication slot {row['slot']} is invalidated (wal_status lost)"
        return row

    def slot_lag(self) -> dict[str, Any] | None:
        """The slot's state and retained WAL for ``medallion status`` (see
        :func:`capture.postgresql.slot.slot_lag`), on a short-lived connection of its own; None
        when the slot does not exist.

        Raises:
            SourceUnavailable: The server cannot be reached.
            CaptureError: The query failed (e.g. the user may not read ``pg_replication_slots``).
        """
        with self._connect() as conn:
            try:
                return self._slot_lag_query(conn, self.settings.slot_name)
            except psycopg.Error as exc:
                raise CaptureError(
                    f"source {self.name}: cannot read slot {self.settings.slot_name}: "
                    f"{str(exc).strip()}"
                ) from exc

    @staticmethod
    def _slot_lag_query(conn: psycopg.Connection[Any], slot: str) -> dict[str, Any] | None:
        """The query behind :meth:`slot_lag` (a hook: YugabyteDB cannot size its WAL)."""
        return pg_slot.slot_lag(conn, slot)
