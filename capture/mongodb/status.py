"""The oplog behind a MongoDB source, for ``medallion status``: :class:`OplogStatus`.

A change stream holds nothing on the server, so the log to watch is the replica set's oplog
(``local.oplog.rs``, a capped collection): ``retained_wal_bytes`` is its size,
``retention_headroom_bytes`` what it may still grow before it overwrites its oldest entries,
``slot_lag_bytes`` the entries after bronze's resume point (``$bsonSize`` summed, MongoDB
4.4+), and ``slot_error`` says when the resume point is older than the oldest entry (the
stream can no longer resume: ``ChangeStreamHistoryLost``). Through a mongos there is no oplog
to read: that is reported as the error.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import bson
from pymongo.errors import ConnectionFailure, OperationFailure

from capture.errors_mongodb import MONGODB
from capture.mongodb.agent import STRICT, MongoAgent

__all__ = ["OPLOG", "OplogStatus"]

OPLOG = "local.oplog.rs"


class OplogStatus(MongoAgent):
    """The status side of the agent."""

    @property
    def log_name(self) -> str:
        """The oplog's namespace."""
        return OPLOG

    def log_status(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """See :meth:`capture.base.CaptureSource.log_status` and the module docstring.

        Raises:
            SourceUnavailable: The server cannot be reached.
            SourceRefused: The user may not read ``local`` (``Unauthorized``) or log in.
            CaptureError: The oplog cannot be read (through a mongos).
        """
        read_to = None if offset is None else offset.get("read_to")
        try:
            local = self._connect()["local"]
            stats = local.command("collStats", "oplog.rs", codec_options=STRICT)
            oplog = local.get_collection("oplog.rs", codec_options=STRICT)
            oldest = next(iter(oplog.find({}, {"ts": 1}, sort=[("$natural", 1)], limit=1)), None)
            behind = 0
            if read_to is not None:
                after = {"ts": {"$gt": bson.Timestamp(int(read_to[0]), int(read_to[1]))}}
                size = {"$sum": {"$bsonSize": "$$ROOT"}}
                pipeline: list[dict[str, Any]] = [
                    {"$match": after},
                    {"$group": {"_id": None, "bytes": size}},
                ]
                behind = sum(int(group["bytes"]) for group in oplog.aggregate(pipeline))
        except (ConnectionFailure, OperationFailure) as exc:
            doing = f"read {OPLOG} (not through a mongos; the user needs read on 'local')"
            raise MONGODB.classify(self.name, exc, doing) from None
        finally:
            self._close_client()
        size_bytes = int(stats["size"])
        row: dict[str, Any] = {
            "slot": OPLOG,
            "slot_lag_bytes": behind,
            "retained_wal_bytes": size_bytes,
            "retention_headroom_bytes": max(int(stats.get("maxSize", size_bytes)) - size_bytes, 0),
        }
        first = None if oldest is None else oldest.get("ts")
        if read_to is not None and isinstance(first, bson.Timestamp):
            if (first.time, first.inc) > (int(read_to[0]), int(read_to[1])):
                row["slot_error"] = (
                    f"bronze's resume point (cluster time {read_to[0]}.{read_to[1]}) is older "
                    f"than the oldest oplog entry ({first.time}.{first.inc}): the change stream "
                    "cannot resume (ChangeStreamHistoryLost)"
                )
        return row
