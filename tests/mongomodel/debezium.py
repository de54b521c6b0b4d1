"""The Debezium MongoDB connector's records for the model's changes, as its code writes them.

Two generations, each as ``kafka_json`` lines (``{"topic", "key", "value", "headers"}``) with
JsonConverter's ``{"schema", "payload"}`` (every schema field present, null when unset):

* **1.x oplog capture** (``MongoDbChangeSnapshotOplogRecordEmitter`` and
  ``MongoDbCollectionSchema.valueFromDocumentOplog`` of 1.9.7.Final): ``c``/``r`` carry
  ``after``; ``u`` carries ``patch`` (the oplog entry's ``o``) and ``filter`` (``o2``); ``d``
  carries ``filter``; all strict Extended JSON (``COMPACT_JSON_SETTINGS``). Source:
  ``version, connector, name, ts_ms (oplog seconds x 1000), snapshot, db, sequence, rs,
  collection, ord, h, tord, stxnid, lsid, txnNumber``; the operations of a transaction share one
  oplog timestamp and count ``tord`` from 1.
* **2.x/3.x change streams** (``MongoDbChangeRecordEmitter`` and
  ``MongoDbCollectionSchema.valueFromDocumentChangeStream`` of 3.3): ``c`` carries ``after``;
  an update carries ``updateDescription`` (``updatedFields`` as ``BsonDocument.toJson()``,
  relaxed, under ``json.serialization.mode=legacy``), plus ``after`` under
  ``capture.mode=change_streams_update_full*`` and ``before`` under ``*_with_pre_image``; a
  replace carries ``after`` (and ``before``); a delete ``before`` under pre-image modes. Source:
  ``version, connector, name, ts_ms (wallTime), snapshot, db, sequence, ts_us, ts_ns,
  collection, ord, lsid, txnNumber, wallTime``; snapshot reads carry the cluster time the
  snapshot started at and no wallTime.

Keys are ``{"id": <the _id in relaxed Extended JSON, compact>}`` (``JsonSerialization.
getDocumentId``). With transaction metadata, data events carry ``transaction`` ``{id,
total_order, data_collection_order}`` and BEGIN/END records go to ``<server>.transaction``.
After each delete a tombstone (null value) follows.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.mongomodel.bson import Binary
from tests.mongomodel.collection import Change
from tests.mongomodel.jsonwriter import JsonWriter

__all__ = ["ClusterClock", "Connector", "Emitter", "Transaction"]

STRICT = JsonWriter("strict", indent=True)
RELAXED = JsonWriter("relaxed", indent=True)
CANONICAL = JsonWriter("extended", indent=True)
RELAXED_DEFAULT = JsonWriter("relaxed", indent=False)
"""``BsonDocument.toJson()``: the driver's default settings."""

CaptureMode = Literal[
    "change_streams",
    "change_streams_update_full",
    "change_streams_with_pre_image",
    "change_streams_update_full_with_pre_image",
]


def _json_schema(name: str) -> dict[str, Any]:
    return {"type": "string", "optional": True, "name": "io.debezium.data.Json", "version": 1,
            "field": name}  # fmt: skip


def _field(name: str, kind: str, optional: bool = True) -> dict[str, Any]:
    return {"type": kind, "optional": optional, "field": name}


@dataclass
class ClusterClock:
    """MongoDB's cluster time ``(t, i)``: seconds and the ordinal within the second."""

    t: int = 1_700_000_000
    i: int = 0

    def tick(self, rng: random.Random) -> tuple[int, int]:
        if rng.random() < 0.3:
            self.t += rng.randrange(1, 3)
            self.i = 1
        else:
            self.i += 1
        return self.t, self.i


@dataclass
class Transaction:
    """A multi-document transaction: one session, one txnNumber, one commit time."""

    number: int
    t: int
    i: int
    events: int = 0

    @property
    def lsid(self) -> str:
        # The session id as Debezium writes it: the lsid document in strict JSON.
        session = {"id": Binary(self.number.to_bytes(16, "big"), 4), "uid": Binary(b"\x01" * 32, 0)}
        return STRICT.write(session)

    @property
    def id(self) -> str:
        return f"{self.lsid}:{self.number}"


@dataclass(frozen=True)
class Connector:
    """One Debezium MongoDB connector configuration.

    Attributes:
        generation: ``oplog`` (1.x) or ``change_streams`` (2.x/3.x).
        capture_mode: For change streams.
        json_mode: ``legacy`` (the default) or ``extended`` (canonical everywhere).
        transaction_metadata: ``provide.transaction.metadata``.
    """

    generation: Literal["oplog", "change_streams"]
    server: str = "shop"
    db: str = "inventory"
    collection: str = "orders"
    capture_mode: CaptureMode = "change_streams"
    json_mode: Literal["legacy", "extended"] = "legacy"
    transaction_metadata: bool = False

    @property
    def version(self) -> str:
        return "1.9.7.Final" if self.generation == "oplog" else "3.3.2.Final"

    @property
    def topic(self) -> str:
        return f"{self.server}.{self.db}.{self.collection}"

    @property
    def document_writer(self) -> JsonWriter:
        return CANONICAL if self.json_mode == "extended" else STRICT

    @property
    def updated_fields_writer(self) -> JsonWriter:
        return CANONICAL if self.json_mode == "extended" else RELAXED_DEFAULT

    def source_schema(self) -> dict[str, Any]:
        common = [
            _field("version", "string", False),
            _field("connector", "string", False),
            _field("name", "string", False),
            _field("ts_ms", "int64", False),
            {**_field("snapshot", "string"), "name": "io.debezium.data.Enum", "version": 1,
             "parameters": {"allowed": "true,last,false,incremental"}, "default": "false"},
            _field("db", "string", False),
            _field("sequence", "string"),
        ]  # fmt: skip
        if self.generation == "oplog":
            rest = [
                _field("rs", "string", False),
                _field("collection", "string", False),
                _field("ord", "int32", False),
                _field("h", "int64"),
                _field("tord", "int64"),
                _field("stxnid", "string"),
                _field("lsid", "string"),
                _field("txnNumber", "int64"),
            ]
        else:
            rest = [
                _field("ts_us", "int64"),
                _field("ts_ns", "int64"),
                _field("collection", "string", False),
                _field("ord", "int32", False),
                _field("lsid", "string"),
                _field("txnNumber", "int64"),
                _field("wallTime", "int64"),
            ]
        return {"type": "struct", "fields": common + rest, "optional": False,
                "name": "io.debezium.connector.mongo.Source", "field": "source"}  # fmt: skip

    def value_schema(self) -> dict[str, Any]:
        transaction = {
            "type": "struct",
            "fields": [
                _field("id", "string", False),
                _field("total_order", "int64", False),
                _field("data_collection_order", "int64", False),
            ],
            "optional": True,
            "name": "event.block",
            "version": 1,
            "field": "transaction",
        }
        description = {
            "type": "struct",
            "fields": [
                {"type": "array", "items": {"type": "string", "optional": False},
                 "optional": True, "field": "removedFields"},
                _json_schema("updatedFields"),
                {"type": "array", "items": {"type": "struct", "fields": [
                    _field("field", "string", False), _field("size", "int32", False)],
                    "optional": False,
                    "name": "io.debezium.connector.mongodb.changestream.truncatedarray",
                    "version": 1}, "optional": True, "field": "truncatedArrays"},
            ],
            "optional": True,
            "name": "io.debezium.connector.mongodb.changestream.updatedescription",
            "version": 1,
            "field": "updateDescription",
        }  # fmt: skip
        if self.generation == "oplog":
            images = [_json_schema("after"), _json_schema("patch"), _json_schema("filter")]
        else:
            images = [_json_schema("before"), _json_schema("after")]
        return {
            "type": "struct",
            "fields": [
                *images,
                description,
                self.source_schema(),
                _field("op", "string"),
                _field("ts_ms", "int64"),
                transaction,
            ],
            "optional": False,
            "name": f"{self.topic}.Envelope",
        }

    def key_schema(self) -> dict[str, Any]:
        return {"type": "struct", "fields": [_field("id", "string", False)], "optional": False,
                "name": f"{self.topic}.Key"}  # fmt: skip


@dataclass
class Emitter:
    """Turns the model's changes into one connector's records, in stream order.

    Args:
        connector: The configuration.
        rng: Randomness for operation ids and wall-clock milliseconds.
    """

    connector: Connector
    rng: random.Random
    clock: ClusterClock = field(default_factory=ClusterClock)
    lines: list[dict[str, Any]] = field(default_factory=list)
    _tx: Transaction | None = None
    _txn_numbers: int = 0
    _snapshot: tuple[int, int] | None = None

    # --- records ------------------------------------------------------------------------------
    def _key(self, id_value: Any) -> dict[str, Any]:
        # getDocumentId: {"_": id} in relaxed JSON, cut down to the id's text.
        return {"schema": self.connector.key_schema(), "payload": {"id": RELAXED.write(id_value)}}

    def _source(self, t: int, i: int, snapshot: str) -> dict[str, Any]:
        c = self.connector
        tx = self._tx
        if c.generation == "oplog":
            return {
                "version": c.version, "connector": "mongodb", "name": c.server,
                "ts_ms": t * 1000, "snapshot": snapshot, "db": c.db, "sequence": None,
                "rs": "rs0", "collection": c.collection, "ord": i,
                "h": self.rng.randrange(-(2**63), 2**63) if snapshot == "false" else None,
                "tord": tx.events if tx else None, "stxnid": tx.id if tx else None,
                "lsid": None, "txnNumber": None,
            }  # fmt: skip
        # Snapshot reads: wallTime 0 (absent), ts_ms from the cluster time the snapshot began.
        wall = None if snapshot != "false" else t * 1000 + self.rng.randrange(1000)
        ts_ms = wall if wall is not None else t * 1000
        return {
            "version": c.version, "connector": "mongodb", "name": c.server, "ts_ms": ts_ms,
            "snapshot": snapshot, "db": c.db, "sequence": None, "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000, "collection": c.collection, "ord": i,
            "lsid": tx.lsid if tx else None, "txnNumber": tx.number if tx else None,
            "wallTime": wall,
        }  # fmt: skip

    def _emit(self, change: Change, op: str, images: dict[str, Any], snapshot: str) -> None:
        c = self.connector
        if self._tx is not None:
            if not self._tx.events:  # Debezium writes BEGIN with the transaction's first event
                self._marker("BEGIN", self._tx)
            t, i = self._tx.t, self._tx.i
            self._tx.events += 1
        elif self._snapshot is not None:
            t, i = self._snapshot
        else:
            t, i = self.clock.tick(self.rng)
        names = ("after", "patch", "filter") if c.generation == "oplog" else ("before", "after")
        payload: dict[str, Any] = {n: images.get(n) for n in names}
        payload["updateDescription"] = images.get("updateDescription")
        payload["source"] = self._source(t, i, snapshot)
        payload["op"] = op
        payload["ts_ms"] = t * 1000 + 1500
        payload["transaction"] = (
            {"id": self._tx.id, "total_order": self._tx.events,
             "data_collection_order": self._tx.events}
            if self._tx is not None and c.transaction_metadata
            else None
        )  # fmt: skip
        self.lines.append(
            {
                "topic": c.topic,
                "key": self._key(change.id),
                "value": {"schema": c.value_schema(), "payload": payload},
                "headers": {},
            }
        )
        if op == "d":  # tombstones.on.delete
            self.lines.append(
                {"topic": c.topic, "key": self._key(change.id), "value": None, "headers": {}}
            )

    def snapshot(self, documents: list[dict[str, Any]]) -> None:
        """The initial snapshot: one ``r`` per document at the position the snapshot began."""
        self._snapshot = self.clock.tick(self.rng)
        for n, document in enumerate(documents):
            last = n == len(documents) - 1
            flag = "last" if last else ("true" if n or self.connector.generation == "oplog"
                                          else "first")  # fmt: skip
            change = Change("insert", document["_id"], None, document)
            self._emit(change, "r", {"after": self.connector.document_writer.write(document)}, flag)
        self._snapshot = None

    def change(self, change: Change) -> None:
        """The record(s) of one streamed change."""
        c = self.connector
        write = c.document_writer.write
        id_filter = {"_id": change.id}
        if change.kind == "insert":
            self._emit(change, "c", {"after": write(change.after)}, "false")
        elif c.generation == "oplog":
            if change.kind == "delete":
                self._emit(change, "d", {"filter": write(id_filter)}, "false")
                return
            patch = change.after if change.kind == "replace" else change.patch
            self._emit(change, "u", {"patch": write(patch), "filter": write(id_filter)}, "false")
        else:
            full = c.capture_mode in (
                "change_streams_update_full",
                "change_streams_update_full_with_pre_image",
            )
            pre = c.capture_mode.endswith("with_pre_image")
            images: dict[str, Any] = {"before": write(change.before)} if pre else {}
            if change.kind == "delete":
                self._emit(change, "d", images, "false")
                return
            if change.kind == "replace" or full:
                images["after"] = write(change.after)
            if change.kind == "update":
                images["updateDescription"] = {
                    "removedFields": change.removed or None,
                    "updatedFields": c.updated_fields_writer.write(dict(change.updated)),
                    "truncatedArrays": [{"field": f, "size": n} for f, n in change.truncated]
                    or None,
                }
            self._emit(change, "u", images, "false")

    # --- transactions ---------------------------------------------------------------------------
    def _marker(self, status: str, tx: Transaction) -> None:
        if not self.connector.transaction_metadata:
            return
        value: dict[str, Any] = {"status": status, "id": tx.id, "event_count": None,
                                 "data_collections": None, "ts_ms": tx.t * 1000}  # fmt: skip
        if status == "END":
            value["event_count"] = tx.events
            value["data_collections"] = [
                {"data_collection": f"{self.connector.db}.{self.connector.collection}",
                 "event_count": tx.events}
            ]  # fmt: skip
        self.lines.append(
            {"topic": f"{self.connector.server}.transaction", "key": {"id": tx.id},
             "value": value, "headers": {}}
        )  # fmt: skip

    def begin(self) -> None:
        """Start a multi-document transaction: its changes share one commit time."""
        self._txn_numbers += 1
        t, i = self.clock.tick(self.rng)
        self._tx = Transaction(self._txn_numbers, t, i)

    def commit(self) -> None:
        """End the transaction (Debezium writes END when the next event arrives)."""
        assert self._tx is not None
        if self._tx.events:
            self._marker("END", self._tx)
        self._tx = None


def lines_of(emitter: Emitter) -> Iterator[dict[str, Any]]:
    yield from emitter.lines
