"""The MongoDB agent's state and connection: :class:`MongoAgent`, the base of its parts.

Documents and change events arrive as raw BSON (``RawBSONDocument``) and are decoded here, one
at a time and strictly: a string that is not valid UTF-8 (which a server keeps when a driver
wrote it unchecked) fails that one document, which is quarantined with its raw bytes, instead
of failing the whole batch the server sent.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import bson
import pymongo
from bson.codec_options import CodecOptions, DatetimeConversion
from bson.errors import InvalidBSON
from bson.raw_bson import RawBSONDocument
from pymongo import monitoring
from pymongo.errors import ConfigurationError, ConnectionFailure, OperationFailure

from bronze.position_base import Phase
from capture.database_source import DatabaseSource, OpenTransaction, SnapshotProgress
from capture.errors_mongodb import MONGODB, MONGODB_ERRORS
from capture.mongodb.position import MongoDbPosition
from capture.mongodb.records import CollectionRecords
from capture.mongodb.settings import MongoSettings
from capture.server_errors import ServerErrors
from pipeline.errors import CaptureError, Terminal

__all__ = ["ClusterTime", "MongoAgent", "MongoTx", "ResumePointLost", "position"]

logger = logging.getLogger(__name__)

ClusterTime = tuple[int, int]
"""A cluster time (oplog timestamp): seconds and the ordinal within the second."""

RAW = CodecOptions(
    document_class=RawBSONDocument,
    datetime_conversion=DatetimeConversion.DATETIME_MS,
    unicode_decode_error_handler="replace",
)
"""What the driver decodes replies with: documents stay raw BSON (the driver itself reads only
the fields it needs, e.g. a change event's ``_id``, leniently)."""
STRICT: CodecOptions[dict[str, Any]] = CodecOptions(
    datetime_conversion=DatetimeConversion.DATETIME_MS
)
"""How the agent decodes each document: exact types (Int64, dates of any year), strict UTF-8."""
LENIENT: CodecOptions[dict[str, Any]] = CodecOptions(
    datetime_conversion=DatetimeConversion.DATETIME_MS, unicode_decode_error_handler="replace"
)
"""For what the agent must know of a document it quarantines (its ``_id``, its cluster time)."""
HISTORY_LOST = 286
"""``ChangeStreamHistoryLost``: the resume point is no longer in the oplog."""
SNAPSHOT_TOO_OLD = 239
"""``SnapshotTooOld``: the snapshot's cluster time is older than the history the server keeps."""


class ResumePointLost(CaptureError, Terminal):
    """The change stream cannot resume: its resume point is gone from the oplog."""


def position(at: ClusterTime, phase: Phase, txn_number: int = 0, seq: int = 0) -> MongoDbPosition:
    """The bronze position of a record at cluster time ``at``."""
    return MongoDbPosition._new(at[0], at[1], phase, txn_number, seq)


@dataclass(slots=True)
class MongoTx(OpenTransaction):
    """A multi-document transaction being read (events sharing ``lsid`` and ``txnNumber``).

    Attributes:
        at: Its commit's cluster time (every event of it has this one).
        number: ``txnNumber``.
        last_token: The resume token of its last event read.
    """

    at: ClusterTime = (0, 0)
    number: int = 0
    last_token: str | None = None


def decode(raw: RawBSONDocument) -> tuple[dict[str, Any] | None, dict[str, Any], str | None]:
    """``(document, lenient view, why it failed)``: the document decoded strictly, or None with
    the reason, and always a view decoded leniently (invalid UTF-8 replaced)."""
    try:
        document = bson.decode(raw.raw, STRICT)
        return document, document, None
    except (InvalidBSON, UnicodeDecodeError) as exc:
        return None, bson.decode(raw.raw, LENIENT), f"invalid BSON: {exc}"


_OUTAGE_CODES = frozenset(
    int(rule.code) for rule in MONGODB_ERRORS.values() if rule.code.isdigit() and not rule.terminal
)
"""Server error codes that mean the server went away or lost the cursor (host unreachable,
``CursorNotFound``, shutdown in progress, stepped down, ...): what a restart or failover gives.
Taken from the error table, so the log and the retry decision never disagree about a code."""


class _OutageLog(monitoring.CommandListener):
    """Logs the outages the driver rides out itself: pymongo retries a read and resumes a change
    stream once after a network error or a lost cursor, so a server restart may never reach the
    agent's own retry loop; this keeps it visible."""

    def __init__(self, source: str) -> None:
        self.source = source

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        return None  # only failures are worth a line

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        return None

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        failure = event.failure if isinstance(event.failure, Mapping) else {}
        code = failure.get("code")
        if code is not None and code not in _OUTAGE_CODES:
            return  # a command error the agent handles where it is raised
        logger.warning(
            "source %s: %s on %s:%s failed (%s); the driver is reconnecting and the change "
            "stream resumes from its last token",
            self.source,
            event.command_name,
            *event.connection_id,
            failure.get("errmsg") or failure.get("codeName") or "connection lost",
        )


class MongoAgent(DatabaseSource):
    """The agent's state and connection; :class:`~capture.mongodb.source.MongoDbSource` is it.

    Args:
        name: The configured source name.
        settings: What the agent reads off its config.
    """

    KIND: ClassVar[str] = "mongodb"
    OUTAGES: ClassVar[tuple[type[BaseException], ...]] = (
        ConnectionFailure,
        OperationFailure,
        ConfigurationError,
    )
    """What may reach the retry loop; MONGODB's codes and labels decide: a lost server retried,
    ``Unauthorized`` or a failed authentication terminal, an unknown command error raised."""
    SERVER_ERRORS: ClassVar[ServerErrors | None] = MONGODB
    ORIGIN: ClassVar[str] = "mongodb"

    def __init__(self, name: str, settings: MongoSettings) -> None:
        super().__init__(name)
        self.settings = settings
        self.retry_policy = settings.rules.retry
        self.partition = settings.server_name
        self._client: pymongo.MongoClient[RawBSONDocument] | None = None
        self._replica_set: str | None = None
        self._records: dict[tuple[str, str], CollectionRecords | None] = {}
        self._snapshot: SnapshotProgress[ClusterTime] | None = None
        self._resume: str | None = None
        """Resume token (canonical Extended JSON) after the last complete event or transaction."""
        self._start_after = False
        """The token is an ``invalidate`` event's: reopen with ``startAfter``."""
        self._start_at: ClusterTime | None = None
        """Where the stream starts when there is no token yet (just after the snapshot point)."""
        self._cut: tuple[str, int] | None = None
        """A transaction cut by ``max.transaction.size``: its id and the records landed."""
        self._tx: MongoTx | None = None
        self._last_position: MongoDbPosition | None = None
        self._seen: ClusterTime | None = None
        """Cluster time of the last event read (captured or not), for heartbeats."""
        self._read_to: ClusterTime | None = None
        """Everything at or before this cluster time is read (the resume point's time, or the
        snapshot's point): what ``medallion status`` measures the oplog after."""

    # --- connection ------------------------------------------------------------------------------
    def _connect(self) -> pymongo.MongoClient[RawBSONDocument]:
        if self._client is None:
            s = self.settings
            client: pymongo.MongoClient[RawBSONDocument] = pymongo.MongoClient(
                s.connection_string(),
                document_class=RawBSONDocument,
                datetime_conversion=DatetimeConversion.DATETIME_MS,
                unicode_decode_error_handler="replace",
                serverSelectionTimeoutMS=s.server_selection_timeout_ms,
                appname=f"medallion:{self.name}",
                event_listeners=[_OutageLog(self.name)],
            )
            self._client = client
            hello = client.admin.command("hello", codec_options=STRICT)
            self._replica_set = hello.get("setName")
            if self._replica_set is None and hello.get("msg") != "isdbgrid":
                raise CaptureError(
                    f"source {self.name}: the server is a standalone mongod, which has no oplog "
                    "and no change streams; run it as a (one-member) replica set"
                )
        return self._client

    def _close_client(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    def _cluster_time(self) -> ClusterTime:
        """The server's last applied cluster time (``operationTime`` of a ``ping``)."""
        reply = self._connect().admin.command("ping", codec_options=STRICT)
        stamp = reply.get("operationTime")
        if not isinstance(stamp, bson.Timestamp):
            raise CaptureError(
                f"source {self.name}: the server reports no operationTime; change streams need "
                "a replica set or a sharded cluster"
            )
        return stamp.time, stamp.inc

    def _collections(self) -> list[tuple[str, str]]:
        """Every captured collection now, in name order (views and ``system.*`` left out)."""
        client = self._connect()
        filters = self.settings.collections
        out = []
        for db in sorted(client.list_database_names()):
            if db in filters.system:
                continue
            specs = client[db].list_collections()
            for spec in specs:
                coll = str(spec["name"])
                if spec.get("type", "collection") != "collection" or coll.startswith("system."):
                    continue
                if filters.table(db, coll):
                    out.append((db, coll))
        return sorted(out)

    def _records_of(self, db: str, coll: str) -> CollectionRecords | None:
        """The record builder of ``db.coll``, or None when it is not captured."""
        key = (db, coll)
        if key not in self._records:
            captured = self.settings.collections.table(db, coll)
            self._records[key] = (
                CollectionRecords(self.settings, db, coll, self._replica_set) if captured else None
            )
        return self._records[key]
