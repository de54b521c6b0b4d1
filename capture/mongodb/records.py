"""Debezium MongoDB records (change-stream generation) from decoded documents and change events.

What Debezium 2.x/3.x's ``MongoDbChangeRecordEmitter`` and ``MongoDbCollectionSchema`` write,
with ``json.serialization.mode=extended`` (every value in canonical Extended JSON, so Int32,
Int64 and Double stay apart; see docs/silver-mongodb.md):

* key ``{"id": <the _id in relaxed Extended JSON>}`` (``JsonSerialization.getDocumentId``),
  schema ``struct{id string}`` named ``<topic>.Key``;
* value ``before``, ``after`` (``io.debezium.data.Json`` strings), ``updateDescription``
  (``removedFields``, ``updatedFields`` as Json, ``truncatedArrays`` of ``{field, size}``),
  ``source``, ``op``, ``ts_ms``, ``transaction``;
* ``source``: the common fields, ``rs``, ``collection``, ``ord``, ``stxnid``
  (``<lsid>:<txnNumber>``), ``lsid``, ``txnNumber`` and ``wallTime``. ``ts_ms`` is the event's
  cluster time (seconds x 1000), the order bronze keeps; ``wallTime`` is the server's wall clock.

``field.exclude.list`` paths are removed from every image and from the update description,
then ``field.renames`` rules rename fields there (:mod:`capture.mongodb.renames`), and
``column.mask.*`` rules apply to top-level string fields (``db.collection.field``, the new
names).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Final

import orjson
from bson import json_util
from bson.int64 import Int64

from bronze.connect_schema import array, field, json, source_schema, struct
from bronze.envelope import ConnectRecord, TransactionInfo, fast_record
from capture.database_source import VERSION
from capture.mongodb.settings import MongoSettings

__all__ = ["CONNECTOR", "CollectionRecords", "document_text", "id_text", "without_paths"]

CONNECTOR: Final = "mongodb"
_CANONICAL = json_util.CANONICAL_JSON_OPTIONS
_RELAXED = json_util.RELAXED_JSON_OPTIONS

_SOURCE = struct(
    [
        *source_schema(CONNECTOR)["fields"],
        field("lsid", "string", optional=True),
        field("txnNumber", "int64", optional=True),
        field("wallTime", "int64", optional=True),
    ],
    name="io.debezium.connector.mongo.Source",
)
_UPDATE_DESCRIPTION = struct(
    [
        field("removedFields", array("string", optional=True)),
        field("updatedFields", json(optional=True)),
        field(
            "truncatedArrays",
            array(
                struct(
                    [field("field", "string"), field("size", "int32")],
                    name="io.debezium.connector.mongodb.changestream.truncatedarray",
                    version=1,
                ),
                optional=True,
            ),
        ),
    ],
    name="io.debezium.connector.mongodb.changestream.updatedescription",
    optional=True,
    version=1,
)
_TRANSACTION = struct(
    [field("id", "string"), field("total_order", "int64"), field("data_collection_order", "int64")],
    name="event.block",
    optional=True,
    version=1,
)


def document_text(document: Any) -> str:
    """A document (or any value) as canonical Extended JSON v2 text, compact.

    The same values as ``json_util.dumps(document, json_options=CANONICAL_JSON_OPTIONS)``;
    the common types are converted here and written by orjson (four times faster), the rest
    by ``json_util.default``.
    """
    return orjson.dumps(_canonical(document)).decode()


def _canonical(value: Any) -> Any:
    cls = value.__class__
    if cls is dict:
        return {k: _canonical(v) for k, v in value.items()}
    if cls is list:
        return [_canonical(v) for v in value]
    if cls is str or cls is bool or value is None:
        return value
    if cls is int:
        wrapper = "$numberInt" if -(2**31) <= value < 2**31 else "$numberLong"
        return {wrapper: str(value)}
    if cls is Int64:
        return {"$numberLong": str(int(value))}
    # floats (NaN, infinities, shortest repr), dates, ObjectId, binary, ...: already
    # JSON-ready wrappers (a $timestamp's t and i are bare numbers, as the spec says)
    return json_util.default(value, json_options=_CANONICAL)


def id_text(id_value: Any) -> str:
    """The key's ``id``: the ``_id`` in relaxed Extended JSON (``1``, ``"a"``, ``{"$oid": ..}``)."""
    return json_util.dumps(id_value, json_options=_RELAXED)


def without_paths(document: Any, paths: tuple[str, ...]) -> Any:
    """``document`` without the dotted ``paths``; a path walks through documents and through
    arrays of documents (every element that is a document; arrays of arrays are not looked
    into), as Debezium's ``FieldSelector`` does. Copies only what changes: ``document`` itself
    when no path is present."""
    for path in paths:
        document = _without(document, path.split("."))
    return document


def _without(node: Any, parts: list[str]) -> Any:
    if isinstance(node, list):
        items = [_without(item, parts) if isinstance(item, dict) else item for item in node]
        return node if all(a is b for a, b in zip(items, node, strict=True)) else items
    if not isinstance(node, dict) or parts[0] not in node:
        return node
    out = dict(node)
    if len(parts) == 1:
        del out[parts[0]]
        return out
    inner = _without(node[parts[0]], parts[1:])
    if inner is node[parts[0]]:
        return node
    out[parts[0]] = inner
    return out


def _names(path: str) -> list[str]:
    """A dotted path's field names, array indexes left out (``items.0.sku`` -> items, sku)."""
    return [part for part in path.split(".") if not part.isdigit()]


def _excluded(path: str, paths: tuple[str, ...]) -> bool:
    """Whether an update-description path is at or under an excluded field (array indexes
    are not names: ``items.0.sku`` is under ``items.sku``)."""
    names = _names(path)
    return any(names[: len(p.split("."))] == p.split(".") for p in paths)


@dataclass
class CollectionRecords:
    """Builds the records of one collection (schemas made once).

    Args:
        settings: The agent's settings.
        db: The database.
        coll: The collection.
        replica_set: The replica set name (``source.rs``), or None for a mongos.
    """

    settings: MongoSettings
    db: str
    coll: str
    replica_set: str | None

    def __post_init__(self) -> None:
        self.collection = f"{self.db}.{self.coll}"
        self.topic = f"{self.settings.server_name}.{self.collection}"
        self.excluded = self.settings.field_exclusions.paths(self.db, self.coll)
        self.renames = self.settings.field_renames.for_collection(self.db, self.coll)
        self.key_schema = struct([field("id", "string")], name=f"{self.topic}.Key")
        self.value_schema = struct(
            [
                field("before", json(optional=True)),
                field("after", json(optional=True)),
                field("updateDescription", _UPDATE_DESCRIPTION),
                field("source", _SOURCE),
                field("op", "string", optional=True),
                field("ts_ms", "int64", optional=True),
                field("transaction", _TRANSACTION),
            ],
            name=f"{self.topic}.Envelope",
        )

    # --- images ---------------------------------------------------------------------------------
    def image(self, document: dict[str, Any] | None) -> str | None:
        """A before/after image as text: excluded fields removed, renames and masks applied
        (in Debezium's order: exclusions, then renames; masks see the new names)."""
        if document is None:
            return None
        if self.excluded:
            document = without_paths(document, self.excluded)
        if self.renames:
            document = self.renames.document(document)
        masker = self.settings.rules.masker
        if masker:
            document = masker.apply(self.collection, document) or document
        return document_text(document)

    def update_description(self, description: dict[str, Any]) -> dict[str, Any]:
        """A change event's ``updateDescription`` as Debezium writes it."""
        updated = dict(description.get("updatedFields") or {})
        removed = list(description.get("removedFields") or [])
        truncated = list(description.get("truncatedArrays") or [])
        if self.excluded:
            updated = self._without_excluded(updated)
            removed = [r for r in removed if not _excluded(r, self.excluded)]
            truncated = [t for t in truncated if not _excluded(str(t["field"]), self.excluded)]
        if self.renames:
            updated = self.renames.updated(updated)
            removed = [self.renames.path(r) for r in removed]
            truncated = [{**t, "field": self.renames.path(str(t["field"]))} for t in truncated]
        masker = self.settings.rules.masker
        if masker:
            updated = masker.apply(self.collection, updated) or updated
        return {
            "removedFields": removed or None,
            "updatedFields": document_text(updated),
            "truncatedArrays": [{"field": t["field"], "size": int(t["newSize"])} for t in truncated]
            or None,
        }

    def _without_excluded(self, updated: dict[str, Any]) -> dict[str, Any]:
        """``updatedFields`` without excluded paths: an excluded path, or one inside an
        excluded field, is dropped; a document set whole loses the excluded fields inside it."""
        out = {}
        for path, value in updated.items():
            if _excluded(path, self.excluded):
                continue
            names = _names(path)
            inner = tuple(
                ".".join(p.split(".")[len(names) :])
                for p in self.excluded
                if p.split(".")[: len(names)] == names and len(p.split(".")) > len(names)
            )
            out[path] = without_paths(value, inner) if inner else value
        return out

    # --- records --------------------------------------------------------------------------------
    def source(
        self,
        cluster_time: tuple[int, int],
        snapshot: str,
        *,
        wall_ms: int | None = None,
        session: tuple[str, int] | None = None,
    ) -> dict[str, Any]:
        """The ``source`` block of an event at ``cluster_time``."""
        ts_ms = cluster_time[0] * 1000
        return {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": self.settings.server_name,
            "ts_ms": ts_ms,
            "snapshot": snapshot,
            "db": self.db,
            "sequence": None,
            "ts_us": ts_ms * 1000,
            "ts_ns": ts_ms * 1_000_000,
            "rs": self.replica_set or "",
            "collection": self.coll,
            "ord": cluster_time[1],
            "h": None,
            "tord": None,
            "stxnid": None if session is None else f"{session[0]}:{session[1]}",
            "lsid": None if session is None else session[0],
            "txnNumber": None if session is None else session[1],
            "wallTime": wall_ms,
        }

    def record(
        self,
        op: str,
        id_value: Any,
        source: dict[str, Any],
        *,
        before: str | None = None,
        after: str | None = None,
        description: dict[str, Any] | None = None,
        transaction: TransactionInfo | None = None,
    ) -> ConnectRecord:
        """One data record (``c``, ``r``, ``u`` or ``d``)."""
        value: dict[str, Any] = {
            "before": before,
            "after": after,
            "updateDescription": description,
            "source": source,
            "op": op,
            "ts_ms": time.time_ns() // 1_000_000,
            "transaction": None
            if transaction is None
            else {
                "id": transaction.id,
                "total_order": transaction.total_order,
                "data_collection_order": transaction.data_collection_order,
            },
        }
        return fast_record(
            {"id": id_text(id_value)}, value, self.key_schema, self.value_schema, (), self.topic
        )
