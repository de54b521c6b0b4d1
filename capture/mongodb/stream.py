"""The MongoDB agent's change stream: :class:`StreamReader`.

One cluster-wide change stream (``client.watch()``; on a sharded cluster, through mongos)
with ``fullDocument``/``fullDocumentBeforeChange`` per ``capture.mode``, filtered by the
include/exclude lists in the agent. Each event becomes Debezium's record(s) (see
:mod:`capture.mongodb.records`):

* ``insert`` -> ``c`` with ``after``; ``replace`` -> ``u`` with ``after``; ``update`` -> ``u``
  with ``updateDescription`` (and ``after`` under ``*_update_full*``: the document at lookup
  time, null when it was deleted since); ``delete`` -> ``d`` and, with
  ``tombstones.on.delete``, a tombstone; ``before`` is the pre-image under ``*_with_pre_image``.
* ``drop``, ``rename``, ``dropDatabase``: logged, nothing landed (Debezium emits nothing).
  ``invalidate`` (a stream on a dropped or renamed collection; not sent to a cluster-wide
  stream, but handled): the stream is reopened with ``startAfter`` the invalidate's token.

**Transactions.** The events of one multi-document transaction carry its ``lsid`` and
``txnNumber`` and share one cluster time; they are read as one :class:`MongoTx` (BEGIN/END with
``provide.transaction.metadata``). A change stream marks no transaction's end: it is the next
event of another transaction, or the end of what the server has, since a transaction's events
all become visible at once when it commits.

**Offsets.** ``resume`` is the resume token after the last complete event or transaction; a
transaction cut by ``max.transaction.size`` adds its id and the records landed, and is read
again from its first event, skipping those. Positions are ``(cluster time, stream, txnNumber,
seq)`` with ``seq`` counting the transaction's records (BEGIN first), so a re-read gives the
same positions. The ``postBatchResumeToken`` of an empty batch is not used: offsets move only
with events, so a re-read reaches the same offsets.

**Errors.** ``ChangeStreamHistoryLost`` (286; the resume point rolled off the oplog) stops the
agent with :class:`~capture.mongodb.agent.ResumePointLost` naming the lost point, or takes a new
snapshot under ``snapshot.mode: when_needed``. A lost connection is retried by
:class:`~capture.database_source.DatabaseSource` from the previous batch's offset.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from typing import Any

import bson
from bson import json_util
from bson.raw_bson import RawBSONDocument
from pymongo.change_stream import ChangeStream
from pymongo.errors import OperationFailure

from bronze.batch import BatchBuilder
from bronze.envelope import ConnectRecord, heartbeat, tombstone_for
from bronze.position_base import Phase
from capture.database_source import BatchLimits
from capture.mongodb.agent import (
    HISTORY_LOST,
    ClusterTime,
    MongoTx,
    ResumePointLost,
    decode,
    position,
)
from capture.mongodb.records import CollectionRecords, document_text
from capture.mongodb.snapshot import SnapshotReader
from pipeline.errors import CaptureError, InternalError, PipelineError

__all__ = ["StreamReader"]

logger = logging.getLogger(__name__)

_CANONICAL = json_util.CANONICAL_JSON_OPTIONS
_HEARTBEAT_TXN = 2**64 - 1
"""A heartbeat's ``txnNumber``: after every record at its cluster time."""
_DATA_OPS = {"insert": "c", "replace": "u", "update": "u", "delete": "d"}
_NAMESPACE_EVENTS = frozenset({"drop", "rename", "dropDatabase"})


class StreamReader(SnapshotReader):
    """The change-stream side of the agent."""

    _stream: ChangeStream[RawBSONDocument] | None = None
    _pending: RawBSONDocument | None = None
    _mark_start = False
    """``snapshot.mode: never`` without an offset: the first batch holds a heartbeat at the
    start point, so the point is committed (a change stream keeps nothing on the server: an
    agent stopped before its first commit would otherwise start again at a later "now")."""

    def _open_stream(self) -> bool:
        """Open the change stream at the offset; False when a new snapshot was started instead."""
        s = self.settings
        options: dict[str, Any] = {}
        if s.full_document != "default":
            options["full_document"] = s.full_document
        if s.before_change != "off":
            options["full_document_before_change"] = s.before_change
        if self._resume is not None:
            token = json_util.loads(self._resume, json_options=_CANONICAL)
            options["start_after" if self._start_after else "resume_after"] = token
        elif self._start_at is not None:
            options["start_at_operation_time"] = bson.Timestamp(*self._start_at)
        try:
            self._stream = self._connect().watch(**options)
        except OperationFailure as exc:
            if exc.code != HISTORY_LOST:
                raise
            return self._history_lost(exc)
        return True

    def _history_lost(self, exc: OperationFailure) -> bool:
        where = self._resume or (
            None
            if self._start_at is None
            else f"cluster time {self._start_at[0]}.{self._start_at[1]}"
        )
        if self.settings.snapshot_mode == "when_needed":
            logger.warning(
                "source %s: the change stream cannot resume from %s (ChangeStreamHistoryLost); "
                "taking a new snapshot (snapshot.mode=when_needed)",
                self.name,
                where,
            )
            self._close_stream()
            self._tx = None
            self._start_snapshot()
            return False
        raise ResumePointLost(
            f"source {self.name}: the change stream cannot resume from {where}: it is no longer "
            "in the oplog (ChangeStreamHistoryLost), so changes after it are lost. Set "
            "snapshot.mode to 'when_needed' to take a new snapshot, or enlarge the oplog "
            f"(replSetResizeOplog) before restarting from a new snapshot: {exc}"
        ) from None

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None
        self._pending = None

    def _read_stream(
        self,
        builder: BatchBuilder,
        limits: BatchLimits,
        now: dt.datetime,
    ) -> bool:
        until = limits.until
        if self._mark_start and self._seen is not None:
            self._mark_start = False
            self._heartbeat_at(builder, self._seen, now)
        if self._stream is None and not self._open_stream():
            return self._snapshot_instead(builder, limits.max_events, now)
        while True:
            reached = until is not None and self._reached(until)
            if self._batch_ends(builder, self._tx, limits, reached=reached):
                return False
            raw = self._next()
            if self._phase != "stream":
                return self._snapshot_instead(builder, limits.max_events, now)
            if raw is None:
                if self._tx is not None:
                    self._finish_tx(builder, now)
                    continue  # the batch may end right here (a re-read's end)
                if until is None:
                    self._maybe_heartbeat(builder, now)
                return True
            self._handle(builder, raw, now)
            if self._phase != "stream":
                return False

    def _snapshot_instead(self, builder: BatchBuilder, max_events: int, now: dt.datetime) -> bool:
        """The history was lost and a new snapshot started: its first rows fill this batch (an
        agent that lands one batch per run must still get past the lost point)."""
        if self._read_snapshot(builder, max_events, now) and len(builder) == 0:
            self._end_marker(builder, now)
        return False

    def _next(self) -> RawBSONDocument | None:
        if self._pending is not None:
            raw, self._pending = self._pending, None
            return raw
        if self._stream is None and not self._open_stream():  # reopened after an invalidate
            return None
        stream = self._stream
        if stream is None:
            raise InternalError("capture.mongodb.stream: expected stream is not None")
        try:
            return stream.try_next()
        except OperationFailure as exc:
            if exc.code != HISTORY_LOST:
                raise
            self._history_lost(exc)
            return None

    def _reached(self, until: Mapping[str, Any]) -> bool:
        tx = self._tx
        cut = until.get("tx")
        if cut is not None:
            return tx is not None and tx.id == cut["id"] and tx.emitted >= int(cut["emitted"])
        return tx is None and self._resume == until.get("resume")

    def _cut_inside(self, builder: BatchBuilder, tx: MongoTx) -> None:
        builder.mark_partial(tx.id)
        self._cut = (tx.id, tx.emitted)

    # --- events ----------------------------------------------------------------------------------
    def _handle(self, builder: BatchBuilder, raw: RawBSONDocument, now: dt.datetime) -> None:
        event, view, problem = decode(raw)
        token = document_text(view["_id"])
        stamp = view.get("clusterTime")
        if not isinstance(stamp, bson.Timestamp):
            raise CaptureError(
                f"source {self.name}: change event {token} has no clusterTime, so it cannot be "
                "ordered; every MongoDB 4.0+ change event has one"
            )
        at: ClusterTime = (stamp.time, stamp.inc)
        self._seen = at
        session = view.get("lsid"), view.get("txnNumber")
        tx = self._tx
        if tx is not None and (session[1] is None or self._tx_id(view) != tx.id):
            self._pending = raw  # the transaction ended before this event
            self._finish_tx(builder, now)
            return
        kind = view.get("operationType")
        if kind == "invalidate":
            logger.warning("source %s: the change stream was invalidated; reopening", self.name)
            self._close_stream()
            self._resume, self._start_after, self._cut = token, True, None
            return
        if session[1] is not None and tx is None:
            tx = self._open_tx(view, at)
        ns = view.get("ns") or {}
        db, coll = str(ns.get("db", "")), str(ns.get("coll", ""))
        if kind in _NAMESPACE_EVENTS:
            self._namespace_event(view, str(kind), db, coll, at)
        records = self._records_of(db, coll) if kind in _DATA_OPS else None
        if records is not None:
            self._data_event(builder, raw, (event, problem), records, at, tx, now)
        if tx is None:
            self._resume, self._start_after, self._cut = token, False, None
            self._read_to = at
        else:
            tx.last_token = token

    def _namespace_event(
        self, view: Mapping[str, Any], kind: str, db: str, coll: str, at: ClusterTime
    ) -> None:
        """``drop``, ``rename`` or ``dropDatabase``: nothing to land (Debezium emits nothing);
        logged when it touches what is captured."""
        if not self.settings.collections.table(db, coll or "*"):
            return
        renamed = f" (now {view.get('to')}: captured by its new name)" if kind == "rename" else ""
        logger.warning(
            "source %s: %s of %s.%s at cluster time %d.%d%s",
            self.name,
            kind,
            db,
            coll,
            *at,
            renamed,
        )

    def _data_event(
        self,
        builder: BatchBuilder,
        raw: RawBSONDocument,
        decoded: tuple[Mapping[str, Any] | None, str | None],
        records: CollectionRecords,
        at: ClusterTime,
        tx: MongoTx | None,
        now: dt.datetime,
    ) -> None:
        """Land the records of a captured collection's event, or quarantine the event."""
        event, problem = decoded
        origin = f"mongodb:{records.collection}@{at[0]}.{at[1]}"
        try:
            if event is None:
                raise CaptureError(
                    f"change event of {records.collection} cannot be read: {problem}"
                )
            made = self._event_records(records, event, at, tx)
        except PipelineError as exc:
            if tx is None or tx.count():
                self._quarantine(builder, bytes(raw.raw), origin, exc, now)
            return
        for seq, record in enumerate(made):
            self._land(builder, record, (at, seq), tx, records.collection, origin, now)

    def _tx_id(self, view: Mapping[str, Any]) -> str:
        return f"{document_text(view.get('lsid'))}:{view.get('txnNumber')}"

    def _open_tx(self, view: Mapping[str, Any], at: ClusterTime) -> MongoTx:
        tx_id = self._tx_id(view)
        skip = self._cut[1] if self._cut is not None and self._cut[0] == tx_id else 0
        stamp = view.get("wallTime")
        wall = int(stamp) if isinstance(stamp, bson.DatetimeMS) else at[0] * 1000
        tx = MongoTx(tx_id, wall, skip=skip, at=at, number=int(view.get("txnNumber") or 0))
        self._tx = tx
        return tx

    def _land(
        self,
        builder: BatchBuilder,
        record: ConnectRecord,
        where: tuple[ClusterTime, int],
        tx: MongoTx | None,
        collection: str,
        origin: str,
        now: dt.datetime,
    ) -> None:
        """Add one record at its position: ``(cluster time, stream, 0, n)`` for the n-th record
        of a single event, ``(cluster time, stream, txnNumber, k)`` for the k-th of a
        transaction (BEGIN is its first)."""
        at, seq = where
        if tx is None:
            at_position = position(at, Phase.STREAM, 0, seq)
            self._add(builder, record, at_position, origin, now, None, None)
            self._last_position = at_position
            return
        metadata = self.settings.rules.provide_transaction_metadata
        if record.value is not None and not tx.begun and metadata:
            self._emit_begin(builder, tx, position(at, Phase.STREAM, tx.number, tx.emitted), now)
        at_position = position(at, Phase.STREAM, tx.number, tx.emitted + 1)
        if tx.count():
            self._add(builder, record, at_position, origin, now, tx, None)
        if record.value is not None:
            tx.note_data(collection)
        self._last_position = at_position

    def _finish_tx(self, builder: BatchBuilder, now: dt.datetime) -> None:
        tx = self._tx
        if tx is None:
            raise InternalError("capture.mongodb.stream: expected tx is not None")
        if tx.begun:
            at_position = position(tx.at, Phase.STREAM, tx.number, tx.emitted + 1)
            self._emit_end(builder, tx, at_position, now)
            self._last_position = at_position
        self._tx = None
        self._cut = None
        self._resume, self._start_after = tx.last_token, False
        self._read_to = tx.at

    def _event_records(
        self,
        records: CollectionRecords,
        event: Mapping[str, Any],
        at: ClusterTime,
        tx: MongoTx | None,
    ) -> list[ConnectRecord]:
        kind = str(event["operationType"])
        op = _DATA_OPS[kind]
        if op in self.settings.rules.skipped_operations:
            return []
        key = event.get("documentKey")
        if not isinstance(key, Mapping) or "_id" not in key:
            raise CaptureError(f"{kind} event without documentKey._id")
        id_value = key["_id"]
        stamp = event.get("wallTime")
        wall = int(stamp) if isinstance(stamp, bson.DatetimeMS) else None
        session = None if tx is None else (document_text(event.get("lsid")), tx.number)
        source = records.source(at, "false", wall_ms=wall, session=session)
        block = (
            None
            if tx is None
            else tx.block(records.collection, self.settings.rules.provide_transaction_metadata)
        )
        before = records.image(event.get("fullDocumentBeforeChange"))
        after = records.image(event.get("fullDocument")) if kind != "delete" else None
        description = None
        if kind == "update":
            description = records.update_description(event.get("updateDescription") or {})
        elif kind in ("insert", "replace") and after is None:
            raise CaptureError(f"{kind} event without fullDocument")
        record = records.record(
            op, id_value, source, before=before, after=after, description=description,
            transaction=block,
        )  # fmt: skip
        if op == "d" and self.settings.rules.tombstones_on_delete:
            return [record, tombstone_for(record)]
        return [record]

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        """A heartbeat after the last event read, when it is newer than what was landed: it
        carries the offset past events of collections that are not captured."""
        seen = self._seen
        if seen is None or not self._heartbeat_due(self.settings.rules.heartbeat_interval_ms, None):
            return
        self._heartbeat_at(builder, seen, now)

    def _heartbeat_at(self, builder: BatchBuilder, seen: ClusterTime, now: dt.datetime) -> None:
        """A heartbeat just after every record at cluster time ``seen`` (unless one is landed
        there or later already)."""
        at = position(seen, Phase.STREAM, _HEARTBEAT_TXN, 0)
        last = self._last_position
        if last is not None and last.encode() >= at.encode():
            return
        self._last_heartbeat = time.monotonic()
        record = heartbeat(self.settings.server_name, int(time.time() * 1000))
        self._add(builder, record, at, f"mongodb:heartbeat@{seen[0]}.{seen[1]}", now, None, None)
        self._last_position = at
