"""A model of a MongoDB replica set: collections, the oplog, and the change events it yields.

The ground truth is :class:`~tests.mongomodel.collection.MongoCollection` (one per namespace);
this module adds what a replica set has around them, as the MongoDB manual describes it:

* **Cluster time.** Every write gets an oplog timestamp ``(t, i)``, strictly increasing; the
  writes of one multi-document transaction share the commit's timestamp and carry the session
  (``lsid``) and ``txnNumber`` (manual: "Change Events", "Transactions").
* **The oplog** (:class:`OplogEntry`) keeps each write with its pre- and post-image, so the set
  can answer snapshot reads at any retained cluster time (``readConcern: {level: "snapshot",
  atClusterTime}``), and a truncation point (``truncate_history``) below which a resume point is
  gone: error 286 ``ChangeStreamHistoryLost``.
* **Change events** (:meth:`ReplicaSet.change_event`) with the documented fields:
  ``_id`` (resume token ``{"_data": <hex>}``), ``operationType``, ``clusterTime``,
  ``wallTime``, ``ns``, ``documentKey``, ``fullDocument`` (insert and replace always;
  update with ``fullDocument: updateLookup``, the document *at lookup time*, null when deleted
  since), ``fullDocumentBeforeChange`` (with ``whenAvailable``/``required``),
  ``updateDescription`` (``updatedFields``, ``removedFields``, ``truncatedArrays`` of
  ``{field, newSize}``), ``lsid`` and ``txnNumber`` for transactions; ``drop``, ``rename``
  (with ``to``) and ``dropDatabase`` events; ``invalidate`` for a collection-level stream whose
  collection is dropped or renamed.

Resume tokens are opaque to clients (the manual says so); the model's are hex of the event's
cluster time, its index inside a transaction and whether the token is an event's or a
high-water mark (``postBatchResumeToken`` of a batch that reached the end of the oplog).
"""

from __future__ import annotations

import copy
import random
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

import bson
from bson.decimal128 import Decimal128 as BsonDecimal128
from bson.int64 import Int64 as BsonInt64
from bson.max_key import MaxKey as BsonMaxKey
from bson.min_key import MinKey as BsonMinKey
from bson.regex import Regex as BsonRegex

from tests.mongomodel import bson as B
from tests.mongomodel.collection import Change, MongoCollection, UpdateOp, identity

__all__ = [
    "HIGH",
    "HISTORY_LOST",
    "OplogEntry",
    "ReplicaSet",
    "ResumePoint",
    "Write",
    "bson_order",
    "to_bson",
]

HIGH = 0xFFFFFF
"""The index of a high-water mark: after every event of its cluster time."""
HISTORY_LOST = 286
"""``ChangeStreamHistoryLost``."""
START_SECONDS = 1_700_000_000

Kind = Literal["insert", "update", "replace", "delete", "drop", "rename", "dropDatabase"]


def to_bson(value: Any) -> Any:
    """A model value as the Python value pymongo's ``bson`` encodes to the same BSON type."""
    if isinstance(value, dict):
        return {k: to_bson(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_bson(v) for v in value]
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, B.Int32):
        return int(value.value)  # bson writes an int that fits as Int32
    if isinstance(value, B.Int64):
        return BsonInt64(value.value)
    if isinstance(value, B.Double):
        return float(value.value)
    if isinstance(value, B.Decimal128):
        return BsonDecimal128(value.text)
    if isinstance(value, B.ObjectId):
        return bson.ObjectId(value.hex)
    if isinstance(value, B.Date):
        return bson.DatetimeMS(value.millis)
    if isinstance(value, B.Binary):
        return bson.Binary(value.data, value.subtype)
    if isinstance(value, B.Timestamp):
        return bson.Timestamp(value.t, value.i)
    if isinstance(value, B.Regex):
        return BsonRegex(value.pattern, value.options)
    if isinstance(value, B.MinKey):
        return BsonMinKey()
    if isinstance(value, B.MaxKey):
        return BsonMaxKey()
    raise TypeError(f"not a model value: {value!r}")


# MongoDB's comparison order of BSON types (manual: "Comparison/Sort Order").
_TYPE_RANK = {
    "minkey": 0,
    "null": 1,
    "number": 2,
    "string": 3,
    "object": 4,
    "array": 5,
    "binary": 6,
    "objectid": 7,
    "bool": 8,
    "date": 9,
    "timestamp": 10,
    "regex": 11,
    "maxkey": 12,
}


def bson_order(value: Any) -> tuple[Any, ...]:
    """A sort key of a model value in MongoDB's comparison order (numbers by value)."""
    if isinstance(value, B.MinKey):
        return (_TYPE_RANK["minkey"],)
    if value is None:
        return (_TYPE_RANK["null"],)
    if isinstance(value, B.Int32 | B.Int64 | B.Double):
        return (_TYPE_RANK["number"], float(value.value))
    if isinstance(value, B.Decimal128):
        return (_TYPE_RANK["number"], float(value.text))
    if isinstance(value, str):
        return (_TYPE_RANK["string"], value.encode())
    if isinstance(value, dict):
        return (_TYPE_RANK["object"], tuple((k, bson_order(v)) for k, v in value.items()))
    if isinstance(value, list):
        return (_TYPE_RANK["array"], tuple(bson_order(v) for v in value))
    if isinstance(value, B.Binary):
        return (_TYPE_RANK["binary"], len(value.data), value.subtype, value.data)
    if isinstance(value, B.ObjectId):
        return (_TYPE_RANK["objectid"], value.hex)
    if isinstance(value, bool):
        return (_TYPE_RANK["bool"], value)
    if isinstance(value, B.Date):
        return (_TYPE_RANK["date"], value.millis)
    if isinstance(value, B.Timestamp):
        return (_TYPE_RANK["timestamp"], value.t, value.i)
    if isinstance(value, B.Regex):
        return (_TYPE_RANK["regex"], value.pattern, value.options)
    return (_TYPE_RANK["maxkey"],)


@dataclass(frozen=True, order=True)
class ResumePoint:
    """Where an event sits in the oplog: cluster time, index inside a transaction, and whether
    it is an event (1) or a high-water mark after everything at that time (2)."""

    t: int
    i: int
    index: int = 0
    kind: int = 1

    def token(self) -> dict[str, str]:
        """The resume token, ``{"_data": "<hex>"}`` (opaque to clients)."""
        return {"_data": f"82{self.t:08X}{self.i:08X}{self.index:06X}{self.kind:02X}"}

    @classmethod
    def parse(cls, token: Any) -> ResumePoint:
        """Read a token this model issued.

        Raises:
            ValueError: Not such a token.
        """
        data = token.get("_data") if isinstance(token, dict) else None
        if not isinstance(data, str) or len(data) != 26 or not data.startswith("82"):
            raise ValueError(f"not a resume token of this server: {token!r}")
        return cls(
            int(data[2:10], 16), int(data[10:18], 16), int(data[18:24], 16), int(data[24:], 16)
        )


@dataclass
class OplogEntry:
    """One write as the oplog keeps it, with both images (what the change events are made of)."""

    point: ResumePoint
    kind: Kind
    db: str
    coll: str
    change: Change | None
    wall_ms: int
    lsid: dict[str, Any] | None = None
    txn_number: int | None = None
    to: tuple[str, str] | None = None
    dropped: dict[Any, dict[str, Any]] = field(default_factory=dict)
    """The documents a drop removed (to read snapshots from before it)."""
    raw_patch: tuple[bytes, bytes] | None = None
    """Bytes of the encoded event to swap (a test's invalid UTF-8)."""


@dataclass(frozen=True)
class Write:
    """One write of :meth:`ReplicaSet.commit`.

    Attributes:
        kind: ``insert``, ``update``, ``replace`` or ``delete``.
        ns: ``(db, collection)``.
        id: The ``_id`` (model value) of the document written.
        document: The document (insert, replace).
        ops: The update operators (update).
    """

    kind: Literal["insert", "update", "replace", "delete"]
    ns: tuple[str, str]
    id: Any = None
    document: dict[str, Any] | None = None
    ops: tuple[UpdateOp, ...] = ()


class ReplicaSet:
    """A replica set of one member: collections, oplog, cluster time. Thread-safe.

    Args:
        name: The replica set name (``setName``).
        seed: Randomness of the update descriptions and of the clock.
    """

    def __init__(self, name: str = "rs0", seed: int = 0) -> None:
        self.name = name
        self.rng = random.Random(seed)
        self.lock = threading.RLock()
        self.collections: dict[tuple[str, str], MongoCollection] = {}
        self.oplog: list[OplogEntry] = []
        self.lost_up_to: ResumePoint | None = None
        """The newest entry removed from the oplog (resume points at or before it are lost)."""
        self.t = START_SECONDS
        self.i = 0
        self._sessions = 0

    # --- time ------------------------------------------------------------------------------------
    def _tick(self) -> ResumePoint:
        if self.rng.random() < 0.2:
            self.t += 1
            self.i = 1
        else:
            self.i += 1
        return ResumePoint(self.t, self.i)

    def now(self) -> ResumePoint:
        """The last applied cluster time (``operationTime`` of a read)."""
        return ResumePoint(self.t, self.i, HIGH, 2)

    # --- writes ----------------------------------------------------------------------------------
    def collection(self, db: str, coll: str) -> MongoCollection:
        """The namespace's collection, created on first use (as MongoDB creates it on insert)."""
        with self.lock:
            found = self.collections.get((db, coll))
            if found is None:
                found = self.collections[(db, coll)] = MongoCollection(db, coll)
            return found

    def _apply(self, write: Write) -> Change:
        target = self.collection(*write.ns)
        if write.kind == "insert":
            assert write.document is not None
            return target.insert(copy.deepcopy(write.document))
        if write.kind == "replace":
            assert write.document is not None
            return target.replace(write.id, copy.deepcopy(write.document))
        if write.kind == "update":
            return target.update(write.id, list(write.ops), self.rng)
        return target.delete(write.id)

    def commit(self, writes: list[Write], *, transaction: bool | None = None) -> list[OplogEntry]:
        """Apply ``writes`` atomically: one write alone, several as one multi-document
        transaction (or one write in a transaction with ``transaction=True``).

        An update that changes nothing writes no oplog entry (as MongoDB does).
        """
        in_txn = len(writes) > 1 if transaction is None else transaction
        with self.lock:
            point = self._tick()
            lsid = txn = None
            if in_txn:
                self._sessions += 1
                lsid = {
                    "id": bson.Binary(self._sessions.to_bytes(16, "big"), 4),
                    "uid": bson.Binary(b"\x01" * 32, 0),
                }
                txn = self._sessions
            entries = []
            wall = point.t * 1000 + self.rng.randrange(1000)
            for index, write in enumerate(writes):
                change = self._apply(write)
                if change.kind == "update" and B.same(change.before, change.after):
                    continue
                entry = OplogEntry(
                    ResumePoint(point.t, point.i, index if in_txn else 0),
                    change.kind,
                    write.ns[0],
                    write.ns[1],
                    change,
                    wall,
                    lsid,
                    txn,
                )
                entries.append(entry)
            self.oplog.extend(entries)
            return entries

    def drop(self, db: str, coll: str) -> OplogEntry:
        """``db.coll.drop()``: a ``drop`` event (and ``invalidate`` for streams on it)."""
        with self.lock:
            point = self._tick()
            gone = self.collections.pop((db, coll), MongoCollection(db, coll))
            entry = OplogEntry(
                point, "drop", db, coll, None, point.t * 1000, dropped=gone.documents
            )
            self.oplog.append(entry)
            return entry

    def rename(self, db: str, coll: str, to: str) -> OplogEntry:
        """``renameCollection``: a ``rename`` event with ``to``."""
        with self.lock:
            point = self._tick()
            moved = self.collections.pop((db, coll))
            moved.name = to
            self.collections[(db, to)] = moved
            entry = OplogEntry(point, "rename", db, coll, None, point.t * 1000, to=(db, to))
            self.oplog.append(entry)
            return entry

    def oplog_document(self, entry: OplogEntry) -> dict[str, Any]:
        """``entry`` as a ``local.oplog.rs`` document (``ts, t, op, ns, o, o2, wall`` and the
        session of a transaction; an update's ``o`` is its v1 ``$set``/``$unset`` patch)."""
        change = entry.change
        op = {"insert": "i", "update": "u", "replace": "u", "delete": "d"}.get(entry.kind, "c")
        document: dict[str, Any] = {
            "ts": bson.Timestamp(entry.point.t, entry.point.i),
            "t": BsonInt64(1),
            "op": op,
            "ns": f"{entry.db}.{entry.coll}",
        }
        if change is None:
            document["o"] = {entry.kind: entry.coll}
        elif change.kind == "update":
            document["o"] = to_bson(change.patch or {})
            document["o2"] = {"_id": to_bson(change.id)}
        elif change.kind == "delete":
            document["o"] = {"_id": to_bson(change.id)}
        else:
            document["o"] = to_bson(change.after)
        if entry.lsid is not None:
            document["lsid"] = entry.lsid
            document["txnNumber"] = BsonInt64(entry.txn_number or 0)
        document["wall"] = bson.DatetimeMS(entry.wall_ms)
        return document

    def truncate_history(self, keep: int = 0) -> None:
        """Drop all but the newest ``keep`` oplog entries (the capped oplog rolled over)."""
        with self.lock:
            cut = len(self.oplog) - keep
            if cut > 0:
                self.lost_up_to = self.oplog[cut - 1].point
                del self.oplog[:cut]

    # --- reads -----------------------------------------------------------------------------------
    def documents_at(self, db: str, coll: str, at: ResumePoint) -> list[dict[str, Any]]:
        """The collection's documents as of cluster time ``at``, in ``_id`` order.

        Raises:
            LookupError: ``at`` is older than the retained history (``SnapshotTooOld``).
        """
        with self.lock:
            if self.lost_up_to is not None and (at.t, at.i) < (
                self.lost_up_to.t,
                self.lost_up_to.i,
            ):
                raise LookupError("snapshot too old")
            current = self.collections.get((db, coll))
            docs = dict(current.documents) if current is not None else {}
            for entry in reversed(self.oplog):
                if (entry.point.t, entry.point.i) <= (at.t, at.i):
                    break
                if entry.kind == "drop" and (entry.db, entry.coll) == (db, coll):
                    docs = dict(entry.dropped)
                elif entry.change is not None and (entry.db, entry.coll) == (db, coll):
                    change = entry.change
                    if change.before is None:
                        docs.pop(identity(change.id), None)
                    else:
                        docs[identity(change.id)] = change.before
            out = [copy.deepcopy(d) for d in docs.values()]
            out.sort(key=lambda d: bson_order(d["_id"]))
            return out

    def first_after(self, point: ResumePoint, *, inclusive: bool) -> int:
        """The oplog index of the first entry after (or at, ``inclusive``) ``point``.

        Raises:
            LookupError: Entries after ``point`` were truncated (history lost).
        """
        with self.lock:
            lost = self.lost_up_to
            if lost is not None and (point <= lost if inclusive else point < lost):
                raise LookupError("history lost")
            for n, entry in enumerate(self.oplog):
                if (entry.point >= point) if inclusive else (entry.point > point):
                    return n
            return len(self.oplog)

    def change_event(
        self, entry: OplogEntry, full_document: str, before_change: str
    ) -> dict[str, Any]:
        """The change event of ``entry`` (pymongo-encodable values)."""
        event: dict[str, Any] = {
            "_id": entry.point.token(),
            "operationType": entry.kind,
            "clusterTime": bson.Timestamp(entry.point.t, entry.point.i),
            "wallTime": bson.DatetimeMS(entry.wall_ms),
        }
        if entry.kind == "dropDatabase":
            event["ns"] = {"db": entry.db}
            return event
        event["ns"] = {"db": entry.db, "coll": entry.coll}
        if entry.kind == "rename":
            assert entry.to is not None
            event["to"] = {"db": entry.to[0], "coll": entry.to[1]}
            return event
        change = entry.change
        if change is None:
            return event
        event["documentKey"] = {"_id": to_bson(change.id)}
        if change.kind == "update":
            event["updateDescription"] = {
                "updatedFields": {path: to_bson(v) for path, v in change.updated},
                "removedFields": list(change.removed),
                "truncatedArrays": [{"field": f, "newSize": n} for f, n in change.truncated],
            }
        if change.kind in ("insert", "replace"):
            event["fullDocument"] = to_bson(change.after)
        elif change.kind == "update" and full_document in ("updateLookup", "whenAvailable"):
            now = self.collections.get((entry.db, entry.coll))
            current = None if now is None else now.get(change.id)
            event["fullDocument"] = None if current is None else to_bson(current)
        if before_change in ("whenAvailable", "required") and change.kind != "insert":
            event["fullDocumentBeforeChange"] = to_bson(change.before)
        if entry.lsid is not None:
            event["lsid"] = entry.lsid
            event["txnNumber"] = BsonInt64(entry.txn_number or 0)
        return event
