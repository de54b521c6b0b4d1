"""The MongoDB capture agent: a consistent snapshot, then a change stream resumed by token.

:class:`MongoDbSource` composes the agent's parts: :mod:`.agent` (state, connection, decoding),
:mod:`.snapshot` (the snapshot at one cluster time), :mod:`.stream` (the change stream) and
:mod:`.records` (Debezium's records); :mod:`.settings` reads the config. This module opens,
restores and writes the offset.

The offset (format 1)::

    {"format": 1, "phase": "snapshot" | "stream",
     "resume": <resume token, canonical Extended JSON> | null, "start_after": bool,
     "start_at": [seconds, ordinal] | null,       # no token yet: the first time after the snapshot
     "read_to": [seconds, ordinal] | null,        # the resume point's cluster time (for status)
     "tx": {"id": "<lsid>:<txnNumber>", "emitted": n} | null,   # a transaction cut in bronze
     "snapshot": {"point": [s, o], "tables": [[db, coll], ...], "index": i,
                  "after": [<last _id read>] | null, "seq": n, "ts_ms": ms} | null}

Nothing is acknowledged to the server: the change stream keeps no server-side state a consumer
must advance, so bronze's offset is the only record of what was read (``ACKNOWLEDGES`` false).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

from capture.database_source import SnapshotProgress
from capture.mongodb.agent import ClusterTime
from capture.mongodb.settings import MongoSettings
from capture.mongodb.snapshot import after_point
from capture.mongodb.status import OplogStatus
from capture.mongodb.stream import StreamReader

__all__ = ["OFFSET_FORMAT", "MongoDbSource"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""


class MongoDbSource(StreamReader, OplogStatus):
    """Captures the collections of a MongoDB replica set or sharded cluster.

    Args:
        name: The configured source name.
        settings: Connection, filters, capture mode and record options.
    """

    KIND: ClassVar[str] = "mongodb"
    SETTINGS: ClassVar[Any] = MongoSettings
    REPORTS_LOG: ClassVar[bool] = True

    def _open(self, offset: Mapping[str, Any] | None) -> None:
        self._close_stream()
        self._close_client()
        self._tx = None
        self._records.clear()
        self._mark_start = False
        self._connect()
        if offset is None:
            if self.settings.snapshot_mode == "never":
                self._phase = "stream"
                self._resume, self._start_after, self._cut = None, False, None
                self._seen = self._cluster_time()
                self._start_at = after_point(self._seen)
                self._read_to = self._seen
                self._mark_start = True  # committed even if nothing changes before a stop
                logger.info(
                    "source %s: no snapshot (snapshot.mode=never); streaming from cluster time "
                    "%d.%d",
                    self.name,
                    *self._start_at,
                )
                return
            self._start_snapshot()
            return
        self._restore(offset)

    def _restore(self, offset: Mapping[str, Any]) -> None:
        self._check_offset_format(offset, OFFSET_FORMAT)
        self._phase = str(offset["phase"])
        resume = offset.get("resume")
        self._resume = None if resume is None else str(resume)
        self._start_after = bool(offset.get("start_after"))
        start = offset.get("start_at")
        self._start_at = None if start is None else _point(start)
        read_to = offset.get("read_to")
        self._read_to = None if read_to is None else _point(read_to)
        cut = offset.get("tx")
        self._cut = None if cut is None else (str(cut["id"]), int(cut["emitted"]))
        snap = offset.get("snapshot")
        self._snapshot = (
            None if snap is None else SnapshotProgress.from_json(snap, _point(snap["point"]))
        )

    def _offset_now(self) -> dict[str, Any]:
        return {
            "format": OFFSET_FORMAT,
            "phase": self._phase,
            "resume": self._resume,
            "start_after": self._start_after,
            "start_at": None if self._start_at is None else list(self._start_at),
            "read_to": None if self._read_to is None else list(self._read_to),
            "tx": None if self._cut is None else {"id": self._cut[0], "emitted": self._cut[1]},
            "snapshot": self._snapshot_json(lambda point: {"point": list(point)}),
        }

    def close(self) -> None:
        """Close the change stream and the client."""
        self._close_stream()
        self._close_client()


def _point(value: Any) -> ClusterTime:
    """A cluster time from its offset form ``[seconds, ordinal]``."""
    return int(value[0]), int(value[1])
