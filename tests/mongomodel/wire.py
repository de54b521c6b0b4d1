"""A MongoDB wire-protocol server in the test process, backed by :class:`ReplicaSet`.

pymongo (the real driver, unchanged) connects to it over TCP as to a one-member replica set.
It speaks the wire protocol as MongoDB documents it: ``OP_MSG`` (opcode 2013: flag bits, a
body section of kind 0, document sequences of kind 1, the optional CRC-32C checksum) and the
legacy ``OP_QUERY``/``OP_REPLY`` of the first handshake. Commands answered:

* ``hello``/``isMaster`` (a primary of ``setName``, ``maxWireVersion`` 21 = MongoDB 7.0,
  ``logicalSessionTimeoutMinutes`` so the driver sends ``lsid``; no ``topologyVersion``, so the
  driver polls instead of streaming), ``ping``, ``buildInfo``, ``endSessions``;
* ``listDatabases``, ``listCollections``;
* ``find`` (filter ``{}`` or ``{_id: {$gt: v}}``, sort ``{_id: 1}``, ``limit``, ``batchSize``,
  ``readConcern`` ``{level: "snapshot", atClusterTime}``: the cursor reports ``atClusterTime``;
  a time older than the history is error 239 ``SnapshotTooOld``), ``getMore``, ``killCursors``;
* ``aggregate`` whose first stage is ``$changeStream`` (``allChangesForCluster`` on ``admin``,
  a database, or a collection; ``startAtOperationTime``, ``resumeAfter``, ``startAfter``,
  ``fullDocument``, ``fullDocumentBeforeChange``), its ``getMore`` (``nextBatch`` and
  ``postBatchResumeToken``); a resume point no longer in the oplog is error 286
  ``ChangeStreamHistoryLost`` with the ``NonResumableChangeStreamError`` label.

Every reply carries ``$clusterTime`` and ``operationTime`` (the last applied cluster time), as a
replica set member's do. :meth:`MongoPeer.restart` closes every connection and listens again
on the same port with the data kept (a server restart: cursors are gone).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import socketserver
import ssl
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import bson
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.int64 import Int64
from bson.raw_bson import RawBSONDocument

from tests.mongomodel import bson as B
from tests.mongomodel.replset import (
    HIGH,
    HISTORY_LOST,
    OplogEntry,
    ReplicaSet,
    ResumePoint,
    bson_order,
    to_bson,
)
from tests.mongomodel.scram import AuthFailed, Conversation, ScramUsers

__all__ = ["MongoPeer"]

OP_REPLY, OP_QUERY, OP_MSG = 1, 2004, 2013
_UNAUTHENTICATED = frozenset({"hello", "ismaster", "ping", "buildinfo", "endsessions"})
"""Commands a connection may run before it authenticates (the handshake's)."""
_CHECKSUM_PRESENT = 1
_HEADER = struct.Struct("<iiii")
_DECODE: CodecOptions[dict[str, Any]] = CodecOptions(
    datetime_conversion=DatetimeConversion.DATETIME_MS
)
_INTERNAL = frozenset({"admin", "local", "config"})


class CommandError(Exception):
    """A command failure reply: ``{ok: 0, errmsg, code, codeName}``."""

    def __init__(self, code: int, name: str, message: str, labels: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.code, self.name, self.labels = code, name, labels


@dataclass
class _FindCursor:
    ns: str
    documents: list[dict[str, Any]]


@dataclass
class _StreamCursor:
    ns: str
    db: str
    coll: str | None
    next_index: int
    full_document: str
    before_change: str
    resume: ResumePoint | None = None
    invalidate: bool = False
    """End with an ``invalidate`` at the next ``getMore`` (:meth:`MongoPeer.invalidate_streams`)."""
    closed: bool = False
    batch_size: int = 101
    seen: list[str] = field(default_factory=list)


def _to_model(value: Any) -> Any:
    """A decoded BSON value back as a model value (for ``_id`` comparisons in ``find``)."""
    if isinstance(value, dict):
        return {k: _to_model(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_to_model(v) for v in value]
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, Int64):
        return B.Int64(int(value))
    if isinstance(value, int):
        return B.Int32(value)
    if isinstance(value, float):
        return B.Double(value)
    if isinstance(value, bson.ObjectId):
        return B.ObjectId(str(value))
    if isinstance(value, bson.DatetimeMS):
        return B.Date(int(value))
    if isinstance(value, bson.Timestamp):
        return B.Timestamp(value.time, value.inc)
    if isinstance(value, bson.Binary):
        return B.Binary(bytes(value), value.subtype)
    if isinstance(value, bytes):
        return B.Binary(value, 0)
    if isinstance(value, bson.decimal128.Decimal128):
        return B.Decimal128(str(value))
    if isinstance(value, bson.regex.Regex):
        return B.Regex(value.pattern, str(value.flags) if isinstance(value.flags, str) else "")
    if isinstance(value, bson.min_key.MinKey):
        return B.MinKey()
    if isinstance(value, bson.max_key.MaxKey):
        return B.MaxKey()
    raise TypeError(f"cannot compare {value!r}")


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        self.conversation = Conversation()
        sock: socket.socket = self.request
        self.server.connections.add(sock)
        try:
            tls = self.server.peer.tls
            if tls is not None:
                # TLS from the first byte (MongoDB has no STARTTLS); a client that does not
                # trust the certificate fails the handshake (ssl.SSLError is an OSError).
                sock = tls.wrap_socket(sock, server_side=True)
            while True:
                header = _recv(sock, 16)
                if header is None:
                    return
                length, request_id, _, opcode = _HEADER.unpack(header)
                body = _recv(sock, length - 16)
                if body is None:
                    return
                if opcode == OP_MSG:
                    reply = self._op_msg(body)
                    if reply is not None:
                        sock.sendall(_message(request_id, OP_MSG, b"\x00\x00\x00\x00\x00" + reply))
                elif opcode == OP_QUERY:
                    sock.sendall(_message(request_id, OP_REPLY, self._op_query(body)))
                else:
                    return
        except OSError:
            return
        finally:
            self.server.connections.discard(sock)

    def _op_msg(self, body: bytes) -> bytes | None:
        flags = struct.unpack_from("<I", body)[0]
        end = len(body) - (4 if flags & _CHECKSUM_PRESENT else 0)
        offset, command, sequences = 4, None, {}
        while offset < end:
            kind = body[offset]
            offset += 1
            if kind == 0:
                size = struct.unpack_from("<i", body, offset)[0]
                command = bson.decode(body[offset : offset + size], _DECODE)
                offset += size
            else:
                size = struct.unpack_from("<i", body, offset)[0]
                section = body[offset + 4 : offset + size]
                name, _, docs = section.partition(b"\x00")
                sequences[name.decode()] = list(bson.decode_all(docs, _DECODE))
                offset += size
        assert command is not None
        command.update(sequences)
        reply = self.server.peer.run(command, self.conversation)
        return bson.encode(reply) if not flags & 2 else None  # moreToCome: no reply

    def _op_query(self, body: bytes) -> bytes:
        offset = 4
        name_end = body.index(b"\x00", offset)
        offset = name_end + 1 + 8
        size = struct.unpack_from("<i", body, offset)[0]
        query = bson.decode(body[offset : offset + size], _DECODE)
        if "$query" in query:
            query = query["$query"]
        reply = bson.encode(self.server.peer.run(query, self.conversation))
        return struct.pack("<iqii", 0, 0, 0, 1) + reply


def _recv(sock: socket.socket, n: int) -> bytes | None:
    chunks, got = [], 0
    while got < n:
        chunk = sock.recv(n - got)
        if not chunk:
            return None
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


_request_ids = itertools.count(1)


def _message(response_to: int, opcode: int, body: bytes) -> bytes:
    return _HEADER.pack(16 + len(body), next(_request_ids), response_to, opcode) + body


class _Server(socketserver.ThreadingTCPServer):
    allow_reuse_address = True
    daemon_threads = True

    def __init__(self, address: tuple[str, int], peer: MongoPeer) -> None:
        self.peer = peer
        self.connections: set[socket.socket] = set()
        super().__init__(address, _Handler)


class MongoPeer:
    """The server: start it, point pymongo at :attr:`uri`, change :attr:`replset` directly.

    Args:
        replset: The replica set it serves (a new one by default).
    """

    def __init__(self, replset: ReplicaSet | None = None, *, role: str = "replica set") -> None:
        self.replset = replset or ReplicaSet()
        self.role = role
        """``replica set`` (a primary), ``mongos`` (a router of a sharded cluster, here over
        one shard) or ``standalone`` (no oplog: ``$changeStream`` is refused)."""
        self.port = 0
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._cursors: dict[int, _FindCursor | _StreamCursor] = {}
        self._cursor_ids = itertools.count(1000)
        self.lock = threading.Lock()
        self.commands: list[str] = []
        """Names of the commands received, in order (what the driver asked)."""
        self.oplog_max_bytes = 990 * 1024 * 1024
        """``maxSize`` of ``local.oplog.rs`` (MongoDB's default is 5% of the disk, 990 MB at
        least)."""
        self.users = ScramUsers()
        """Users (``users.passwords[name] = password``): when any is set, every connection must
        authenticate with SCRAM-SHA-256 (:mod:`tests.mongomodel.scram`) before other commands."""
        self.tls: ssl.SSLContext | None = None
        """A server-side TLS context (``net.tls.mode: requireTLS``): every connection is TLS."""
        self.invalid_utf8: tuple[str, bytes] | None = None
        """``(text, same-length bytes)``: documents read by ``find`` carry the bytes where the
        string has the text (a server holding strings an unchecked driver wrote)."""

    @property
    def uri(self) -> str:
        """A connection string for pymongo (the replica set by name)."""
        if self.role != "replica set":
            return f"mongodb://127.0.0.1:{self.port}/"
        return f"mongodb://127.0.0.1:{self.port}/?replicaSet={self.replset.name}"

    def start(self) -> MongoPeer:
        """Listen (on a free port the first time, on the same port after a restart)."""
        self._server = _Server(("127.0.0.1", self.port), self)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop listening and drop every connection (open cursors die with the server)."""
        server = self._server
        if server is None:
            return
        server.shutdown()
        server.server_close()
        for sock in list(server.connections):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self._server = None
        with self.lock:
            self._cursors.clear()

    def restart(self) -> None:
        """A server restart: connections and cursors gone, data and oplog kept."""
        self.stop()
        self.start()

    def invalidate_streams(self) -> None:
        """End every open change stream with an ``invalidate`` event at its next ``getMore``
        (what a collection or database stream gets when its namespace is dropped)."""
        with self.lock:
            for cursor in self._cursors.values():
                if isinstance(cursor, _StreamCursor):
                    cursor.invalidate = True

    def wait_for_stream(self, timeout_s: float = 30.0) -> bool:
        """Wait until a change stream is open on the server (a follower is reading)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self.lock:
                if any(isinstance(c, _StreamCursor) for c in self._cursors.values()):
                    return True
            time.sleep(0.01)
        return False

    # --- commands --------------------------------------------------------------------------------
    def run(
        self, command: dict[str, Any], conversation: Conversation | None = None
    ) -> dict[str, Any]:
        """Answer one command document (``conversation``: the connection's authentication)."""
        name = next(iter(command))
        with self.lock:
            self.commands.append(name)
        handler = getattr(self, f"_cmd_{name.lower()}", None)
        try:
            if self.users and name.lower() in ("saslstart", "saslcontinue"):
                return self._finish(
                    self._sasl(name.lower(), command, conversation or Conversation())
                )
            if (
                self.users
                and name.lower() not in _UNAUTHENTICATED
                and (conversation is None or conversation.authenticated is None)
            ):
                raise CommandError(13, "Unauthorized", f"command {name} requires authentication")
            if command.get("$db") == "local" and self.role == "mongos":
                raise CommandError(
                    20, "IllegalOperation", "Can't use 'local' database through mongos"
                )
            if handler is None:
                raise CommandError(59, "CommandNotFound", f"no such command: '{name}'")
            reply = handler(command)
        except CommandError as exc:
            reply = {"ok": 0.0, "errmsg": str(exc), "code": exc.code, "codeName": exc.name}
            if exc.labels:
                reply["errorLabels"] = list(exc.labels)
        else:
            reply.setdefault("ok", 1.0)
        return self._finish(reply)

    def _finish(self, reply: dict[str, Any]) -> dict[str, Any]:
        now = self.replset.now()
        reply["$clusterTime"] = {
            "clusterTime": bson.Timestamp(now.t, now.i),
            "signature": {"hash": bson.Binary(b"\x00" * 20), "keyId": Int64(0)},
        }
        reply["operationTime"] = bson.Timestamp(now.t, now.i)
        return reply

    def _sasl(
        self, name: str, command: dict[str, Any], conversation: Conversation
    ) -> dict[str, Any]:
        try:
            if name == "saslstart":
                if command.get("mechanism") != "SCRAM-SHA-256":
                    raise AuthFailed(f"mechanism {command.get('mechanism')} not offered")
                payload = self.users.start(conversation, bytes(command["payload"]))
                done = False
            else:
                payload = self.users.finish(conversation, bytes(command["payload"]))
                done = True
        except (AuthFailed, KeyError, ValueError):
            conversation.user = None
            return {"ok": 0.0, "errmsg": "Authentication failed.", "code": 18,
                    "codeName": "AuthenticationFailed"}  # fmt: skip
        return {"conversationId": 1, "done": done, "payload": bson.Binary(payload), "ok": 1.0}

    def _cmd_hello(self, command: dict[str, Any]) -> dict[str, Any]:
        me = f"127.0.0.1:{self.port}"
        now = self.replset.now()
        common = {
            "helloOk": True,
            "isWritablePrimary": True,
            "ismaster": True,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "maxMessageSizeBytes": 48_000_000,
            "maxWriteBatchSize": 100_000,
            "localTime": bson.DatetimeMS(now.t * 1000),
            "logicalSessionTimeoutMinutes": 30,
            "connectionId": 1,
            "minWireVersion": 0,
            "maxWireVersion": 21,
            "readOnly": False,
        }
        asked = command.get("saslSupportedMechs")
        if (
            self.users
            and isinstance(asked, str)
            and asked.split(".", 1)[-1] in self.users.passwords
        ):
            common["saslSupportedMechs"] = ["SCRAM-SHA-256"]
        if self.role == "mongos":
            return {**common, "msg": "isdbgrid"}
        if self.role != "replica set":
            return common
        return {
            **common,
            "secondary": False,
            "setName": self.replset.name,
            "setVersion": 1,
            "hosts": [me],
            "primary": me,
            "me": me,
            "electionId": bson.ObjectId("7fffffff0000000000000001"),
            "lastWrite": {
                "opTime": {"ts": bson.Timestamp(now.t, now.i), "t": Int64(1)},
                "lastWriteDate": bson.DatetimeMS(now.t * 1000),
            },
        }

    _cmd_ismaster = _cmd_hello

    def _cmd_ping(self, command: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _cmd_buildinfo(self, command: dict[str, Any]) -> dict[str, Any]:
        return {"version": "7.0.0", "versionArray": [7, 0, 0, 0], "maxBsonObjectSize": 16777216}

    def _cmd_endsessions(self, command: dict[str, Any]) -> dict[str, Any]:
        return {}

    def _cmd_killcursors(self, command: dict[str, Any]) -> dict[str, Any]:
        killed = []
        with self.lock:
            for cursor_id in command.get("cursors", []):
                if self._cursors.pop(int(cursor_id), None) is not None:
                    killed.append(cursor_id)
        return {
            "cursorsKilled": killed,
            "cursorsNotFound": [],
            "cursorsAlive": [],
            "cursorsUnknown": [],
        }

    def _cmd_listdatabases(self, command: dict[str, Any]) -> dict[str, Any]:
        rs = self.replset
        with rs.lock:
            names = sorted({db for db, _ in rs.collections} | {"admin", "local", "config"})
        return {
            "databases": [{"name": n, "sizeOnDisk": 8192, "empty": False} for n in names],
            "totalSize": 8192 * len(names),
        }

    def _cmd_listcollections(self, command: dict[str, Any]) -> dict[str, Any]:
        db = command["$db"]
        rs = self.replset
        with rs.lock:
            names = sorted(coll for d, coll in rs.collections if d == db)
        batch = [
            {"name": n, "type": "collection", "options": {}, "info": {"readOnly": False}}
            for n in names
        ]
        return {"cursor": {"id": Int64(0), "ns": f"{db}.$cmd.listCollections", "firstBatch": batch}}

    # --- find ------------------------------------------------------------------------------------
    def _cmd_collstats(self, command: dict[str, Any]) -> dict[str, Any]:
        if (command["$db"], command["collStats"]) != ("local", "oplog.rs"):
            raise CommandError(2, "BadValue", "the peer has collStats for local.oplog.rs only")
        sizes = [len(bson.encode(d)) for d in self._oplog_documents()]
        return {
            "ns": "local.oplog.rs",
            "size": sum(sizes),
            "count": len(sizes),
            "capped": True,
            "maxSize": self.oplog_max_bytes,
        }

    def _oplog_documents(self) -> list[dict[str, Any]]:
        rs = self.replset
        with rs.lock:
            return [rs.oplog_document(e) for e in rs.oplog]

    def _oplog_find(self, command: dict[str, Any]) -> dict[str, Any]:
        if command.get("sort") not in (None, {}, {"$natural": 1}) or command.get("filter"):
            raise CommandError(2, "BadValue", "the peer reads the oplog in $natural order only")
        documents = self._oplog_documents()[: int(command.get("limit") or 0) or None]
        return {"cursor": {"id": Int64(0), "ns": "local.oplog.rs", "firstBatch": documents}}

    def _oplog_aggregate(self, pipeline: list[dict[str, Any]]) -> dict[str, Any]:
        """``[{$match: {ts: {$gt: T}}}, {$group: {_id: null, <f>: {$sum: {$bsonSize:
        "$$ROOT"}}}}]``: the one pipeline the peer runs on the oplog."""
        match, group = (pipeline + [{}, {}])[:2]
        after = (match.get("$match") or {}).get("ts", {}).get("$gt")
        spec = group.get("$group") or {}
        fields = [k for k in spec if k != "_id"]
        if len(pipeline) != 2 or not isinstance(after, bson.Timestamp) or len(fields) != 1:
            raise CommandError(2, "BadValue", f"the peer cannot run {pipeline!r} on the oplog")
        if spec[fields[0]] != {"$sum": {"$bsonSize": "$$ROOT"}}:
            raise CommandError(2, "BadValue", f"the peer cannot run {pipeline!r} on the oplog")
        later = [
            d
            for d in self._oplog_documents()
            if (d["ts"].time, d["ts"].inc) > (after.time, after.inc)
        ]
        batch = [{"_id": None, fields[0]: sum(len(bson.encode(d)) for d in later)}] if later else []
        return {"cursor": {"id": Int64(0), "ns": "local.oplog.rs", "firstBatch": batch}}

    def _cmd_find(self, command: dict[str, Any]) -> dict[str, Any]:
        db, coll = command["$db"], command["find"]
        if (db, coll) == ("local", "oplog.rs"):
            return self._oplog_find(command)
        concern = command.get("readConcern") or {}
        at = None
        if concern.get("level") == "snapshot":
            stamp = concern.get("atClusterTime")
            at = (
                self.replset.now() if stamp is None else ResumePoint(stamp.time, stamp.inc, HIGH, 2)
            )
        else:
            at = self.replset.now()
        try:
            documents = self.replset.documents_at(db, coll, at)
        except LookupError:
            raise CommandError(
                239,
                "SnapshotTooOld",
                f"Read timestamp Timestamp({at.t}, {at.i}) is older than the oldest available "
                "timestamp.",
            ) from None
        documents = self._filter(documents, command.get("filter") or {})
        if command.get("sort") not in (None, {}, {"_id": 1}):
            raise CommandError(2, "BadValue", f"the peer sorts only by _id: {command['sort']!r}")
        limit = int(command.get("limit") or 0)
        if limit:
            documents = documents[:limit]
        size = int(command.get("batchSize", 101))
        first, rest = documents[:size], documents[size:]
        reply_cursor: dict[str, Any] = {
            "ns": f"{db}.{coll}",
            "firstBatch": self._out(first),
        }
        cursor_id = 0
        if rest:
            cursor_id = next(self._cursor_ids)
            with self.lock:
                self._cursors[cursor_id] = _FindCursor(f"{db}.{coll}", rest)
        reply_cursor["id"] = Int64(cursor_id)
        if concern.get("level") == "snapshot":
            reply_cursor["atClusterTime"] = bson.Timestamp(at.t, at.i)
        return {"cursor": reply_cursor}

    def _out(self, documents: list[dict[str, Any]]) -> list[Any]:
        swap = self.invalid_utf8
        if swap is None:
            return [to_bson(d) for d in documents]
        text, raw = swap
        return [
            RawBSONDocument(bson.encode(to_bson(d)).replace(text.encode(), raw)) for d in documents
        ]

    @staticmethod
    def _filter(documents: list[dict[str, Any]], query: dict[str, Any]) -> list[dict[str, Any]]:
        if not query:
            return documents
        condition = query.get("_id")
        if set(query) != {"_id"} or not isinstance(condition, dict) or set(condition) != {"$gt"}:
            raise CommandError(2, "BadValue", f"the peer filters only on _id $gt: {query!r}")
        floor = bson_order(_to_model(condition["$gt"]))
        return [d for d in documents if bson_order(d["_id"]) > floor]

    def _cmd_getmore(self, command: dict[str, Any]) -> dict[str, Any]:
        cursor_id = int(command["getMore"])
        with self.lock:
            cursor = self._cursors.get(cursor_id)
        if cursor is None:
            raise CommandError(43, "CursorNotFound", f"cursor id {cursor_id} not found")
        size = int(command.get("batchSize") or 101)
        if isinstance(cursor, _FindCursor):
            batch, cursor.documents = cursor.documents[:size], cursor.documents[size:]
            if not cursor.documents:
                with self.lock:
                    self._cursors.pop(cursor_id, None)
                cursor_id = 0
            return {
                "cursor": {
                    "id": Int64(cursor_id),
                    "ns": cursor.ns,
                    "nextBatch": self._out(batch),
                }
            }
        return {"cursor": self._stream_batch(cursor_id, cursor, "nextBatch", size)}

    # --- change streams --------------------------------------------------------------------------
    def _cmd_aggregate(self, command: dict[str, Any]) -> dict[str, Any]:
        pipeline = command.get("pipeline") or []
        if (command["$db"], command["aggregate"]) == ("local", "oplog.rs"):
            return self._oplog_aggregate(pipeline)
        if self.role == "standalone":
            raise CommandError(
                40573, "Location40573", "The $changeStream stage is only supported on replica sets"
            )
        if not pipeline or "$changeStream" not in pipeline[0]:
            raise CommandError(2, "BadValue", "the peer runs only $changeStream pipelines")
        if len(pipeline) > 1:
            raise CommandError(2, "BadValue", "the peer runs $changeStream without more stages")
        spec = pipeline[0]["$changeStream"]
        db = command["$db"]
        target = command["aggregate"]
        coll = None if target == 1 else str(target)
        if spec.get("allChangesForCluster") and (db != "admin" or coll is not None):
            raise CommandError(2, "BadValue", "allChangesForCluster requires aggregate: 1 on admin")
        rs = self.replset
        try:
            if "resumeAfter" in spec or "startAfter" in spec:
                token = spec.get("resumeAfter") or spec.get("startAfter")
                point = ResumePoint.parse(token)
                if point.kind == 3 and "resumeAfter" in spec:
                    raise CommandError(
                        260,
                        "InvalidResumeToken",
                        "Attempting to resume a change stream using 'resumeAfter' is not allowed "
                        "from an invalidate notification.",
                    )
                start = rs.first_after(point, inclusive=False)
            elif "startAtOperationTime" in spec:
                stamp = spec["startAtOperationTime"]
                start = rs.first_after(ResumePoint(stamp.time, stamp.inc, 0, 0), inclusive=True)
            else:
                start = rs.first_after(rs.now(), inclusive=False)
        except LookupError:
            raise CommandError(
                HISTORY_LOST,
                "ChangeStreamHistoryLost",
                "PlanExecutor error during aggregation :: caused by :: Resume of change stream "
                "was not possible, as the resume point may no longer be in the oplog.",
                ("NonResumableChangeStreamError",),
            ) from None
        except ValueError as exc:
            raise CommandError(260, "InvalidResumeToken", str(exc)) from None
        cursor = _StreamCursor(
            f"{db}.{coll or '$cmd.aggregate'}",
            db,
            coll,
            start,
            spec.get("fullDocument", "default"),
            spec.get("fullDocumentBeforeChange", "off"),
        )
        cursor_id = next(self._cursor_ids)
        with self.lock:
            self._cursors[cursor_id] = cursor
        size = int((command.get("cursor") or {}).get("batchSize", 101))
        return {"cursor": self._stream_batch(cursor_id, cursor, "firstBatch", size)}

    def _matches(self, cursor: _StreamCursor, entry: OplogEntry) -> bool:
        if cursor.db == "admin" and cursor.coll is None:
            return entry.db not in _INTERNAL
        if entry.db != cursor.db:
            return False
        return cursor.coll is None or entry.coll == cursor.coll

    def _stream_batch(
        self, cursor_id: int, cursor: _StreamCursor, name: str, size: int
    ) -> dict[str, Any]:
        rs = self.replset
        batch: list[Any] = []
        with rs.lock:
            if cursor.invalidate:
                # at the cursor's place: the events not yet read come after it
                at = (
                    rs.oplog[cursor.next_index - 1].point
                    if cursor.next_index
                    else ResumePoint(0, 0)
                )
                batch.append(_invalidate(ResumePoint(at.t, at.i, at.index, 3), at.t * 1000))
                cursor.closed = True
            while len(batch) < size and cursor.next_index < len(rs.oplog) and not cursor.closed:
                entry = rs.oplog[cursor.next_index]
                cursor.next_index += 1
                cursor.resume = entry.point
                if not self._matches(cursor, entry):
                    continue
                batch.append(self._encode(entry, cursor))
                if cursor.coll is not None and entry.kind in ("drop", "rename"):
                    point = entry.point
                    batch.append(
                        _invalidate(ResumePoint(point.t, point.i, point.index, 3), entry.wall_ms)
                    )
                    cursor.closed = True
            if cursor.next_index >= len(rs.oplog) or cursor.resume is None:
                token = rs.now().token()  # a high-water mark: everything so far was scanned
            else:
                token = cursor.resume.token()  # scanned up to here (events filtered out too)
        if cursor.closed:
            with self.lock:
                self._cursors.pop(cursor_id, None)
            cursor_id = 0
        return {"id": Int64(cursor_id), "ns": cursor.ns, name: batch, "postBatchResumeToken": token}

    def _encode(self, entry: OplogEntry, cursor: _StreamCursor) -> Any:
        event = self.replset.change_event(entry, cursor.full_document, cursor.before_change)
        if entry.raw_patch is None:
            return event
        old, new = entry.raw_patch
        raw = bson.encode(event)
        assert raw.count(old) == 1, "the bytes to swap must occur once"
        return RawBSONDocument(raw.replace(old, new))


def _invalidate(point: ResumePoint, wall_ms: int) -> dict[str, Any]:
    return {
        "_id": point.token(),
        "operationType": "invalidate",
        "clusterTime": bson.Timestamp(point.t, point.i),
        "wallTime": bson.DatetimeMS(wall_ms),
    }
