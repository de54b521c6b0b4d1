"""MongoDB: every document of the captured collections as pymongo's canonical Extended JSON.

A client of its own (the source's connection string; credentials from the config's secret,
never logged), one **snapshot session** (``readConcern: snapshot``: every collection is read at
one cluster time, the session's first read's), ``find`` sorted by ``_id`` per collection. Each
document is decoded by pymongo's BSON decoder and written with ``bson.json_util`` in canonical
mode (``CANONICAL_JSON_OPTIONS``, dates as ``$numberLong`` milliseconds so no year is out of
range) and staged as a JSON line; :mod:`gold.documents_canon` turns that text into the normal
form compared with silver. A document pymongo cannot decode (invalid UTF-8 in a string) is
staged as *unreadable*, with its ``_id``, never as equal. No capture-agent code is involved.

:func:`changes_after` answers "which documents changed after the cut": a change stream of the
whole deployment opened at the cut's cluster time (``startAtOperationTime``) and read up to the
snapshot's cluster time.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from gold.documents_canon import normal_text, parse
from pipeline.errors import SourceUnavailable

__all__ = ["Changes", "DocumentRead", "StagedCollection", "changes_after", "read_collections"]

logger = logging.getLogger(__name__)

_DATA_OPS = frozenset({"insert", "update", "replace", "delete"})
_WHOLE_OPS = frozenset({"drop", "rename", "dropDatabase", "invalidate"})
_HISTORY_LOST = 286
_STREAM_WAIT_MS = 200
_COMPACT = (",", ":")
_SYSTEM_DATABASES = frozenset({"admin", "local", "config"})  # never captured


def _json_options() -> Any:
    from bson import json_util
    from bson.codec_options import DatetimeConversion

    # Canonical mode; dates as $numberLong milliseconds, so no year is out of range.
    return json_util.JSONOptions(
        json_mode=json_util.JSONMode.CANONICAL,
        datetime_conversion=DatetimeConversion.DATETIME_MS,
    )


@dataclass(frozen=True, slots=True)
class StagedCollection:
    """One source collection as read.

    Staged rows are JSON lines ``{"k": <normal _id>, "i": <_id, canonical EJSON>,
    "h": <normal document>, "d": <document, canonical EJSON>}``; an unreadable document has
    ``u`` (the reason) instead of ``h`` and ``d``.

    Attributes:
        collection: ``<database>.<collection>``.
        path: The JSON lines file (None when the collection does not exist in the source).
        documents: Documents staged.
        unreadable: Documents that could not be decoded.
        fields: Top-level field names seen (for the masking rules).
    """

    collection: str
    path: Path | None
    documents: int = 0
    unreadable: int = 0
    fields: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class DocumentRead:
    """The source's collections at one cluster time.

    Attributes:
        collections: By ``<database>.<collection>``.
        point: The snapshot's cluster time ``(seconds, increment)``, None if unknown.
    """

    collections: dict[str, StagedCollection]
    point: tuple[int, int] | None


@dataclass(frozen=True, slots=True)
class Changes:
    """What changed in the source between the cut and the read.

    Attributes:
        known: False when it could not be told (the change stream's history is gone).
        ids: Per collection, the normal ``_id`` texts of documents changed after the cut.
        whole: Collections dropped, renamed or invalidated after the cut.
        reason: How it was decided, for the report.
    """

    known: bool
    ids: dict[str, set[str]] = field(default_factory=dict)
    whole: frozenset[str] = frozenset()
    reason: str = ""

    @property
    def any(self) -> bool:
        """Whether a captured collection changed after the cut."""
        return bool(self.whole) or any(self.ids.values())


def client_for(uri: str, timeout_ms: int = 10_000) -> Any:
    """A pymongo client on ``uri`` (BSON decoded with dates kept as milliseconds)."""
    from bson.codec_options import DatetimeConversion
    from bson.raw_bson import RawBSONDocument
    from pymongo import MongoClient

    return MongoClient(
        uri,
        serverSelectionTimeoutMS=timeout_ms,
        document_class=RawBSONDocument,
        datetime_conversion=DatetimeConversion.DATETIME_MS,
        appname="medallion-reconcile",
    )


@contextlib.contextmanager
def _connected(uri: str, timeout_ms: int) -> Iterator[Any]:
    """A client, closed at the end; an unreachable deployment is :class:`SourceUnavailable`."""
    from pymongo.errors import ConnectionFailure

    client = client_for(uri, timeout_ms)
    try:
        yield client
    except ConnectionFailure as exc:
        raise SourceUnavailable(
            f"reconcile: the MongoDB deployment cannot be reached: {exc}"
        ) from exc
    finally:
        client.close()


def _canonical(raw: bytes) -> tuple[str, str]:
    """A BSON document -> (its ``_id``, itself) as canonical Extended JSON."""
    import bson
    from bson import json_util
    from bson.codec_options import CodecOptions, DatetimeConversion

    options = _json_options()
    decoded: dict[str, Any] = bson.decode(
        raw,
        codec_options=CodecOptions(datetime_conversion=DatetimeConversion.DATETIME_MS),
    )
    return (
        json_util.dumps(decoded["_id"], json_options=options, separators=_COMPACT),
        json_util.dumps(decoded, json_options=options, separators=_COMPACT),
    )


def _id_only(raw: bytes) -> str:
    """The ``_id`` of a document that does not decode (strings with replacement characters)."""
    import bson
    from bson import json_util
    from bson.codec_options import CodecOptions, DatetimeConversion

    decoded: dict[str, Any] = bson.decode(
        raw,
        codec_options=CodecOptions(
            unicode_decode_error_handler="replace",
            datetime_conversion=DatetimeConversion.DATETIME_MS,
        ),
    )
    return str(
        json_util.dumps(decoded.get("_id"), json_options=_json_options(), separators=_COMPACT)
    )


def _stage(cursor: Iterable[Any], path: Path, collection: str) -> StagedCollection:
    from bson.errors import InvalidBSON

    documents = unreadable = 0
    names: set[str] = set()
    with path.open("wb") as out:
        for document in cursor:
            raw = bytes(document.raw)
            try:
                id_text, text = _canonical(raw)
                node = parse(text)
                names.update(name for name, _ in node[1])
                record = {
                    "k": normal_text(parse(id_text)),
                    "i": id_text,
                    "h": normal_text(node),
                    "d": text,
                }
            except (InvalidBSON, ValueError, UnicodeDecodeError) as exc:
                id_text = _id_only(raw)
                record = {
                    "k": normal_text(parse(id_text)),
                    "i": id_text,
                    "u": f"{type(exc).__name__}: {exc}",
                }
                unreadable += 1
            out.write(orjson.dumps(record) + b"\n")
            documents += 1
    return StagedCollection(collection, path, documents, unreadable, frozenset(names))


def read_collections(
    uri: str, collections: Sequence[str], work: Path, *, fetch: int, timeout_ms: int = 10_000
) -> DocumentRead:
    """Read ``collections`` (``<database>.<collection>``) at one cluster time into ``work``.

    Args:
        uri: The connection string (secret: never logged).
        collections: The collections to read; a name the source does not have gets
            ``path`` None.
        work: A directory for the staged files.
        fetch: Documents per batch.
        timeout_ms: Server selection timeout.

    Returns:
        The staged collections and the snapshot's cluster time.

    Raises:
        SourceUnavailable: The deployment cannot be reached.
    """
    with _connected(uri, timeout_ms) as client:
        existing: dict[str, set[str]] = {}
        out: dict[str, StagedCollection] = {}
        with client.start_session(snapshot=True) as session:
            for i, collection in enumerate(collections):
                db, _, coll = collection.partition(".")
                if db not in existing:
                    existing[db] = set(client[db].list_collection_names())
                if coll not in existing[db]:
                    out[collection] = StagedCollection(collection, None)
                    continue
                cursor = client[db][coll].find(
                    {}, sort=[("_id", 1)], batch_size=fetch, session=session
                )
                out[collection] = _stage(cursor, work / f"documents-{i}.jsonl", collection)
            if not out or all(s.path is None for s in out.values()):
                client.admin.command("ping", session=session)
            stamp = session.operation_time
        point = None if stamp is None else (int(stamp.time), int(stamp.inc))
        return DocumentRead(out, point)


def source_collections(uri: str, wanted: Any, timeout_ms: int = 10_000) -> list[str]:
    """The source's ``<database>.<collection>`` names for which ``wanted(db, coll)`` is true
    (views and ``system.*`` collections left out)."""
    with _connected(uri, timeout_ms) as client:
        names = []
        for db in client.list_database_names():
            if db in _SYSTEM_DATABASES:
                continue
            for info in client[db].list_collections():
                coll = str(info["name"])
                if info.get("type", "collection") != "collection" or coll.startswith("system."):
                    continue
                if wanted(db, coll):
                    names.append(f"{db}.{coll}")
        return sorted(names)


def changes_after(
    uri: str,
    cut: tuple[int, int],
    until: tuple[int, int] | None,
    collections: Iterable[str],
    timeout_ms: int = 10_000,
) -> Changes:
    """The documents of ``collections`` changed after the cluster time ``cut`` and up to
    ``until`` (the read's cluster time; None: up to the newest change).

    Raises:
        SourceUnavailable: The deployment cannot be reached.
    """
    from bson import Timestamp
    from pymongo.errors import OperationFailure

    wanted = set(collections)
    ids: dict[str, set[str]] = {c: set() for c in wanted}
    whole: set[str] = set()
    try:
        with (
            _connected(uri, timeout_ms) as client,
            client.watch(
                start_at_operation_time=Timestamp(*cut), max_await_time_ms=_STREAM_WAIT_MS
            ) as stream,
        ):
            while stream.alive:
                change = stream.try_next()
                if change is None:
                    break  # an empty batch: the stream has read up to the present
                at = change["clusterTime"]
                point = (int(at.time), int(at.inc))
                if point <= cut:
                    continue
                if until is not None and point > until:
                    break
                ns = change.get("ns") or {}
                collection = f"{ns.get('db')}.{ns.get('coll')}"
                op = change["operationType"]
                if op in _DATA_OPS and collection in wanted:
                    _id = change["documentKey"].raw
                    ids[collection].add(normal_text(parse(_canonical(_id)[0])))
                elif op in _WHOLE_OPS:
                    db = ns.get("db")
                    whole.update(
                        c
                        for c in wanted
                        if c == collection or (op == "dropDatabase" and c.startswith(f"{db}."))
                    )
    except OperationFailure as exc:
        if exc.code != _HISTORY_LOST:
            raise
        return Changes(
            False,
            reason=(
                f"the change stream no longer reaches back to the cut's cluster time "
                f"{cut[0]}.{cut[1]} (ChangeStreamHistoryLost): whether documents changed "
                "after the cut cannot be told"
            ),
        )
    count = sum(len(v) for v in ids.values())
    upto = (
        "the newest change" if until is None else f"the read's cluster time {until[0]}.{until[1]}"
    )
    reason = (
        f"change stream from the cut's cluster time {cut[0]}.{cut[1]} to {upto}: "
        f"{count} captured documents changed"
        + (f", {len(whole)} collections dropped or renamed" if whole else "")
    )
    return Changes(True, ids, frozenset(whole), reason)
