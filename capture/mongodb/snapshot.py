"""The MongoDB agent's initial snapshot: :class:`SnapshotReader`.

The snapshot is consistent at one cluster time P: P is the server's last applied cluster time
when the snapshot starts (``operationTime`` of a ``ping``), and every collection is read with
``readConcern: {level: "snapshot", atClusterTime: P}`` (MongoDB 5.0+), in ``_id`` order, in
chunks that resume after the last ``_id`` read. The change stream then starts at the first
cluster time after P (``startAtOperationTime``), so each write is either in the snapshot (at or
before P) or in the stream (after P): no gap, no double. Rows are ``op r`` at position
``(P, snapshot, 0, seq)``, which sorts before every streamed change.

A restarted agent goes on at the same P after the last committed chunk. If the server no
longer keeps history back to P (``minSnapshotHistoryWindowInSeconds``, 300 s by default) the
read fails with ``SnapshotTooOld`` and the agent stops with an error that says so: mixing two
points would break the no-double guarantee.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from typing import Any

import bson
from bson import json_util
from pymongo.errors import OperationFailure

from bronze.batch import BatchBuilder
from bronze.position_base import Phase
from capture.database_source import SnapshotProgress
from capture.mongodb.agent import (
    RAW,
    SNAPSHOT_TOO_OLD,
    ClusterTime,
    MongoAgent,
    decode,
    position,
)
from capture.mongodb.records import CollectionRecords, document_text
from pipeline.errors import CaptureError, InternalError, PipelineError

__all__ = ["SnapshotReader", "after_point"]

logger = logging.getLogger(__name__)

_CANONICAL = json_util.CANONICAL_JSON_OPTIONS


def after_point(point: ClusterTime) -> ClusterTime:
    """The first cluster time after ``point`` (the ordinal is a u32)."""
    return (point[0], point[1] + 1) if point[1] < 2**32 - 1 else (point[0] + 1, 0)


class SnapshotReader(MongoAgent):
    """The snapshot side of the agent."""

    def _start_snapshot(self) -> None:
        """Take P and the list of collections; the stream will start just after P."""
        point = self._cluster_time()
        collections = self._collections()
        self._snapshot = SnapshotProgress(
            point, [(db, coll) for db, coll in collections], ts_ms=int(time.time() * 1000)
        )
        self._phase = "snapshot"
        self._resume = None
        self._start_after = False
        self._start_at = after_point(point)
        self._read_to = point
        self._cut = None
        logger.info(
            "source %s: snapshot of %d collections at cluster time %d.%d",
            self.name,
            len(collections),
            point[0],
            point[1],
        )

    def _read_snapshot(self, builder: BatchBuilder, max_events: int, now: dt.datetime) -> bool:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mongodb.snapshot: expected snap is not None")
        while len(builder) < max_events and snap.index < len(snap.tables):
            db, coll = snap.tables[snap.index]
            records = self._records_of(db, coll)
            if records is None:
                raise InternalError(
                    "capture.mongodb.snapshot: the snapshot reads captured collections only"
                )
            want = min(self.settings.snapshot_fetch_size, max_events - len(builder))
            documents = self._find(db, coll, snap.point, snap.after, want + 1)
            chunk = documents[:want]
            # Records are never mutated: the rows of a chunk share one source block.
            source = records.source(snap.point, "true")
            final = snap.index == len(snap.tables) - 1 and len(documents) <= want
            for n, raw in enumerate(chunk):
                if final and n == len(chunk) - 1:
                    source = records.source(snap.point, "last")
                id_value = self._snapshot_document(builder, records, raw, source, now)
            if chunk:
                snap.after = [document_text({"_id": id_value})]
            if len(documents) <= want:
                snap.index += 1
                snap.after = None
                self._snapshot_progress(snap.seq, snap.index - 1, len(snap.tables), f"{db}.{coll}")
        if snap.index < len(snap.tables):
            return False
        self._phase = "stream"
        return True

    def _snapshot_document(
        self,
        builder: BatchBuilder,
        records: CollectionRecords,
        raw: Any,
        source: dict[str, Any],
        now: dt.datetime,
    ) -> Any:
        """Land one snapshot document (or quarantine it); returns its ``_id``."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mongodb.snapshot: expected snap is not None")
        document, view, problem = decode(raw)
        id_value = view.get("_id")
        snap.seq += 1
        at = position(snap.point, Phase.SNAPSHOT, 0, snap.seq)
        origin = f"mongodb:snapshot:{records.collection}:{snap.seq}"
        try:
            if document is None:
                raise CaptureError(f"document of {records.collection} cannot be read: {problem}")
            record = records.record("r", id_value, source, after=records.image(document))
            self._add(builder, record, at, origin, now, None, None)
        except PipelineError as exc:
            self._quarantine(builder, bytes(raw.raw), origin, exc, now)
        self._last_position = at
        return id_value

    def _find(
        self, db: str, coll: str, point: ClusterTime, after: list[Any] | None, limit: int
    ) -> list[Any]:
        """Up to ``limit`` raw documents of ``db.coll`` after ``_id`` ``after``, as of ``point``."""
        query: dict[str, Any] = {}
        if after is not None:
            query = {"_id": {"$gt": json_util.loads(after[0], json_options=_CANONICAL)["_id"]}}
        command = {
            "find": coll,
            "filter": query,
            "sort": {"_id": 1},
            "limit": limit,
            "batchSize": limit,
            "readConcern": {"level": "snapshot", "atClusterTime": bson.Timestamp(*point)},
        }
        database = self._connect()[db]
        try:
            reply = database.command(command, codec_options=RAW)
        except OperationFailure as exc:
            if exc.code == SNAPSHOT_TOO_OLD:
                raise CaptureError(
                    f"source {self.name}: the snapshot at cluster time {point[0]}.{point[1]} is "
                    "older than the history the server keeps (SnapshotTooOld); raise "
                    "minSnapshotHistoryWindowInSeconds, or clear the source's bronze offset to "
                    f"snapshot again: {exc}"
                ) from None
            raise
        cursor = reply["cursor"]
        documents = list(cursor["firstBatch"])
        if int(cursor["id"]):
            database.command({"killCursors": coll, "cursors": [cursor["id"]]})
        return documents

    def _end_marker(self, builder: BatchBuilder, now: dt.datetime) -> None:
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.mongodb.snapshot: expected snap is not None")
        snap.seq += 1
        at = position(snap.point, Phase.SNAPSHOT, 0, snap.seq)
        self._snapshot_marker(builder, at, "mongodb:snapshot:end", now)
        self._last_position = at
