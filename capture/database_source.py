"""What the database capture agents share: landing records, transactions, reconnection.

The PostgreSQL and MySQL agents differ in how they read their log and what a position is;
everything after a change is decoded is the same and lives here, once:

* :class:`OpenTransaction`: the transaction being read, with the counting that makes a
  transaction cut by ``max.transaction.size`` resumable (records already landed are skipped)
  and the ``transaction`` blocks of ``provide.transaction.metadata``;
* :meth:`DatabaseSource._add` / :meth:`DatabaseSource._quarantine`: classify a record, register
  its schemas once per batch and add it to the batch, or quarantine what could not be decoded;
* :meth:`DatabaseSource._read_with_retries`: a lost connection or a restarted server is retried
  with backoff, reading the interrupted batch again from the previous batch's offset, so nothing
  is lost or doubled;
* the records of a decoded change are built by :mod:`capture.change_records`.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from abc import abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar, Final, Generic, NamedTuple, Self, TypeVar

import orjson

from bronze.batch import BatchBuilder, QuarantinedRecord
from bronze.connect_schema import schema_id
from bronze.envelope import (
    BUILT_DATA_OPS,
    ConnectRecord,
    Op,
    TransactionInfo,
    built_data_event,
    classify,
    heartbeat,
    transaction_begin,
    transaction_end,
)
from bronze.positions import Position
from capture.base import CaptureSource, SourceBatch, gc_paused
from capture.captured_table import CapturedTable
from capture.change_records import data_record
from capture.column_types import ValueConversionError
from capture.masking import ColumnMasker
from capture.server_errors import RetryPolicy, ServerErrors
from pipeline.errors import CaptureError, InternalError, PipelineError, SourceUnavailable

__all__ = [
    "VERSION",
    "BatchLimits",
    "DatabaseSource",
    "OpenTransaction",
    "SnapshotProgress",
    "SnapshotRow",
    "schema_ids",
    "with_last",
]

logger = logging.getLogger(__name__)


def _version() -> str:
    try:
        return f"medallion-{metadata.version('medallion')}"
    except metadata.PackageNotFoundError:
        return "medallion"


VERSION = _version()
"""``source.version`` of every record the agents write."""


PointT = TypeVar("PointT")
"""The type of a connector's log point (an LSN, a binlog coordinate...)."""


@dataclass(slots=True)
class OpenTransaction:
    """The source transaction being read.

    Attributes:
        id: The transaction id in BEGIN/END records and ``transaction.id``.
        ts_ms: Commit time (ms since the epoch).
        skip: Records of this transaction already landed (from a cut offset): counted, dropped.
        emitted: Records of this transaction counted so far (landed or skipped).
        data_events: Data events so far (END's ``event_count``).
        in_batch: Records of this transaction in the current batch.
        per_collection: Data events per table (END's ``data_collections``).
        begun: BEGIN was emitted.
    """

    id: str
    ts_ms: int
    skip: int = 0
    emitted: int = 0
    data_events: int = 0
    in_batch: int = 0
    per_collection: dict[str, int] = field(default_factory=dict)
    begun: bool = False

    def count(self) -> bool:
        """Count one record; False when it was already landed before a cut."""
        self.emitted += 1
        return self.emitted > self.skip

    def block(self, collection: str, enabled: bool, ahead: int = 0) -> TransactionInfo | None:
        """The ``transaction`` block of the next data event of ``collection`` (``ahead`` later)."""
        if not enabled:
            return None
        total = self.data_events + 1 + ahead
        per = self.per_collection.get(collection, 0) + 1 + ahead
        return TransactionInfo(self.id, total, per)

    def note_data(self, collection: str) -> None:
        """Count a data event of ``collection`` for END and the next blocks."""
        self.data_events += 1
        self.per_collection[collection] = self.per_collection.get(collection, 0) + 1


class BatchLimits(NamedTuple):
    """Where a stream batch ends (see :meth:`CaptureSource.read_batch`)."""

    max_events: int
    """Records per batch; a transaction is never cut below it."""
    max_transaction_events: int
    """Records of one transaction per batch before it is cut."""
    until: Mapping[str, Any] | None
    """The offset a half-landed batch ended at: the batch is read again up to it exactly."""


class SnapshotRow(NamedTuple):
    """A snapshot row as the agent read it (:meth:`DatabaseSource._snapshot_decode`)."""

    key: list[Any]
    """The row's key in the offset's JSON form: the next chunk starts after it."""
    values: Callable[[], Sequence[Any]]
    """The column values (raises :class:`ValueConversionError` for a value that does not
    convert: the row is quarantined)."""
    raw: Callable[[], bytes]
    """What the quarantine keeps of the row."""


@dataclass(slots=True)
class SnapshotProgress(Generic[PointT]):
    """Progress of an agent's initial snapshot (saved in the offset).

    Attributes:
        point: The log point the snapshot is consistent at (the connector's own type).
        tables: ``(schema or database, table)`` of every table to read, in order.
        index: The table being read.
        after: Key of the last row read in that table (the next chunk starts after it).
        seq: Snapshot records emitted so far.
        ts_ms: When the snapshot started (ms since the epoch).
    """

    point: PointT
    tables: list[tuple[str, str]]
    index: int = 0
    after: list[Any] | None = None
    seq: int = 0
    ts_ms: int = 0

    def to_json(self, point: Mapping[str, Any]) -> dict[str, Any]:
        """The offset's ``snapshot`` entry: ``point`` (the log point's fields), then progress."""
        return {
            **point,
            "tables": [list(t) for t in self.tables],
            "index": self.index,
            "after": self.after,
            "seq": self.seq,
            "ts_ms": self.ts_ms,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], point: PointT) -> SnapshotProgress[PointT]:
        """Read :meth:`to_json`'s output back, with ``point`` already decoded from it."""
        return cls(
            point,
            [(a, b) for a, b in data["tables"]],
            int(data["index"]),
            data.get("after"),
            int(data["seq"]),
            int(data.get("ts_ms", 0)),
        )


class DatabaseSource(CaptureSource):
    """A capture source that reads a database's log; see the module docstring.

    Subclasses implement ``_open(offset)`` (connect and position; also used to reconnect) and
    ``_read_batch(...)``, and name their driver's connection errors in :attr:`OUTAGES`.
    """

    OUTAGES: ClassVar[tuple[type[BaseException], ...]] = ()
    """Driver exceptions that may mean the server went away (restart, network); the server's
    code decides (:attr:`SERVER_ERRORS`): retried, or terminal (a wrong password)."""
    SERVER_ERRORS: ClassVar[ServerErrors | None] = None
    """The engine's code table (:mod:`capture.server_errors`); None: every outage retried."""
    ORIGIN: ClassVar[str] = "db"
    """Prefix of record origins (``pg``, ``mysql``)."""
    PAUSE_GC: ClassVar[bool] = True
    """Pause the cyclic garbage collector while a batch is read (:func:`gc_paused`): right when
    decoding creates no reference cycles, so reference counting frees everything."""

    INCREMENTAL_SNAPSHOTS: ClassVar[bool] = False
    """The agent reads signals and takes incremental snapshots (``execute-snapshot``): it
    implements the hooks of :class:`capture.incremental_snapshot.IncrementalSnapshots`."""

    SETTINGS: ClassVar[Any] = None
    """The agent's settings class: its ``from_config`` reads a validated source config."""

    @classmethod
    def from_config(cls, config: Any) -> Self:
        """Build from a validated source config of this connector (through :attr:`SETTINGS`)."""
        build: Callable[[str, Any], Self] = cls  # every agent takes (name, settings)
        return build(config.name, cls.SETTINGS.from_config(config))

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self._offset: dict[str, Any] | None = None
        self._batch_schemas: set[str] = set()
        self._phase = "stream"
        """``snapshot``, ``stream`` or ``done`` (a snapshot-only source that has finished)."""
        self.partition: str | None = None
        """``source_partition`` of every landed record (the logical server name)."""
        self._last_heartbeat = 0.0
        self._last_action = 0.0
        self._snapshot: SnapshotProgress[Any] | None = None
        self._snap_conn: Any = None
        """The connection of the snapshot's transaction (None: not open in this run)."""
        self._snap_rows: Iterator[tuple[Any, ...]] | None = None
        """``(table index, table, row, last)`` of the snapshot being read (:meth:`with_last`)."""
        self._last_position: Position | None = None
        self.retry_policy = RetryPolicy()
        """``errors.max.retries`` and the retry delays (subclasses set the configured one)."""
        self.masker: ColumnMasker | None = None
        """The source's column masks (subclasses set them): they reach the quarantine too."""

    def release(self) -> None:
        """Close the agent's connections, and nothing else (:meth:`close` may also drop a
        replication slot under ``slot.drop.on.stop``): for tools that borrow the agent."""
        self._close_connections()

    def _close_connections(self) -> None:
        """Close every connection the agent holds (each engine knows its own)."""
        return None  # an agent without connections of its own has nothing to close

    def _outage(self, exc: BaseException, doing: str) -> CaptureError:
        """The medallion error for a driver error (see :attr:`SERVER_ERRORS`)."""
        if self.SERVER_ERRORS is None:
            return SourceUnavailable(f"source {self.name}: {str(exc).strip()}")
        return self.SERVER_ERRORS.classify(self.name, exc, doing)

    def open(self, offset: Mapping[str, Any] | None) -> None:
        """Connect and position at ``offset`` (see :meth:`CaptureSource.open`).

        A server that cannot be reached (restarting, network) is retried with the same backoff
        as a lost connection while reading; a terminal refusal (:class:`SourceRefused`: wrong
        password, missing database) is raised at once.
        """
        self._offset = None if offset is None else dict(offset)
        delays = self.retry_policy.delays()
        attempt = 0
        while True:
            try:
                try:
                    self._open(self._offset)
                    return
                except self.OUTAGES as exc:
                    raise self._outage(exc, "connect") from exc
            except SourceUnavailable as exc:
                attempt += 1
                self._wait(exc, next(delays, None), attempt)

    def _wait(self, exc: SourceUnavailable, delay: float | None, attempt: int) -> None:
        """Sleep ``delay`` before retry ``attempt``; re-raise ``exc`` when retries are spent."""
        if delay is None:
            logger.error(
                "source %s: %s; giving up after %d retries (errors.max.retries)",
                self.name,
                exc,
                attempt - 1,
            )
            raise exc
        limit = self.retry_policy.max_retries
        logger.warning(
            "source %s: %s; reconnecting in %.1f s (retry %d of %s)",
            self.name,
            exc,
            delay,
            attempt,
            "unlimited" if limit < 0 else limit,
        )
        time.sleep(delay)

    def _check_offset_format(self, offset: Mapping[str, Any], version: int) -> None:
        """Refuse a committed offset written in another format than the one this agent reads."""
        if offset.get("format") != version:
            raise CaptureError(
                f"source {self.name}: committed offset has format {offset.get('format')!r}, this "
                f"version reads format {version}"
            )

    @abstractmethod
    def _open(self, offset: Mapping[str, Any] | None) -> None:
        """Connect and position at ``offset``; called again to reconnect after an outage."""

    def _read_batch(
        self, max_events: int, max_transaction_events: int, until: Mapping[str, Any] | None
    ) -> SourceBatch:
        """Read one batch (see :meth:`CaptureSource.read_batch`): snapshot rows while the
        snapshot runs (its end marker once it is done), then the log."""
        builder = BatchBuilder(self.name)
        self._batch_schemas = set()
        now = dt.datetime.now(dt.UTC)
        if self._phase == "snapshot":
            done = self._read_snapshot(builder, max_events, now)
            if done and len(builder) == 0:
                self._end_marker(builder, now)
            exhausted = done and self._stops_after_snapshot()
            return SourceBatch(builder, self._offset_now(), exhausted)
        if self._phase == "done":
            return SourceBatch(builder, self._offset_now(), True)
        limits = BatchLimits(max_events, max_transaction_events, until)
        if until is None:
            self._stream_starting(builder, now)
        exhausted = self._read_stream(builder, limits, now)
        for _ in range(_PENDING_READS):
            # Work of its own (a chunk whose watermarks were written after the log's end was
            # taken) shows in the log only now: an empty batch would end a run that stops when
            # the source is exhausted, with that work not done.
            if not exhausted or len(builder) or until is not None or not self._work_pending():
                break
            exhausted = self._read_stream(builder, limits, now)
        exhausted = exhausted and not self._work_pending()
        return SourceBatch(builder, self._offset_now(), exhausted)

    def _stream_starting(self, builder: BatchBuilder, now: dt.datetime) -> None:
        """Before a stream batch (not a re-read of a half-landed one): signals from a side
        channel, an incremental-snapshot chunk due (:mod:`capture.incremental_snapshot`)."""
        return None  # agents without signals have nothing to do here

    def _work_pending(self) -> bool:
        """Whether the source has work of its own left although its log is read (a running
        incremental snapshot): a run that stops when the source is exhausted goes on."""
        return False

    def _stops_after_snapshot(self) -> bool:
        """Whether the source is exhausted for good once its snapshot is read."""
        return False

    def _read_snapshot(self, builder: BatchBuilder, max_events: int, now: dt.datetime) -> bool:
        """Add up to ``max_events`` snapshot rows; True when the snapshot is complete.

        The rows come from :meth:`_snapshot_rows` (resumed after ``snapshot.after`` in table
        ``snapshot.index``); each is landed by :meth:`_snapshot_emit` at the next snapshot
        position, and the progress saved in the offset moves with it.
        """
        snap = self._snapshot
        if snap is None:
            raise PipelineError(f"source {self.name}: snapshot phase without snapshot progress")
        if self._snap_conn is None:
            self._resume_snapshot()
        if self._snap_rows is None:
            self._snap_rows = with_last(self._snapshot_rows())
        count = 0
        # Every row of a table shares one source block (records are never mutated), so it is
        # built once per table, plus once for the snapshot's last row.
        sources: dict[tuple[str, bool], dict[str, Any]] = {}
        for table_index, table, row, last in self._snap_rows:
            # by topic: SQL Server's databases may each have a table of one schema.table name
            source = sources.get((table.topic, last))
            if source is None:
                source = sources[(table.topic, last)] = self._snapshot_source(table, last)
            position = self._snapshot_position()
            snap.after, values, raw = self._snapshot_decode(table, row)
            self._snapshot_row(builder, table, values, source, position, now, raw)
            self._last_position = position
            snap.index = table_index
            count += 1
            if last:
                break
            if count >= max_events:
                self._snapshot_progress(snap.seq, snap.index, len(snap.tables), table.collection)
                return False
        self._snap_rows = None
        self._finish_snapshot()
        return True

    def _end_marker(self, builder: BatchBuilder, now: dt.datetime) -> None:
        """Add the record that closes a snapshot without rows (Debezium's ``snapshot: last``
        went on its last row otherwise)."""
        position = self._snapshot_position()
        self._snapshot_marker(builder, position, self._snapshot_end_origin(), now)
        self._last_position = position

    def _snapshot_json(self, point: Callable[[Any], Mapping[str, Any]]) -> dict[str, Any] | None:
        """The offset's ``snapshot`` entry while the snapshot runs (``point`` gives the log
        point's fields), else None."""
        snap = self._snapshot
        if snap is None or self._phase != "snapshot":
            return None
        return snap.to_json(point(snap.point))

    # The snapshot hooks of a database agent that takes one.
    def _resume_snapshot(self) -> None:
        """Reopen the snapshot's connection and transaction to go on from the saved progress."""
        raise NotImplementedError(f"{type(self).__name__} takes no snapshot")

    def _snapshot_rows(self) -> Iterator[tuple[int, CapturedTable, Any]]:
        """``(table index, table, row)`` of the rows left, in key order per table."""
        raise NotImplementedError(f"{type(self).__name__} takes no snapshot")

    def _snapshot_source(self, table: CapturedTable, last: bool) -> dict[str, Any]:
        """The ``source`` block of ``table``'s snapshot rows (``snapshot: last`` when ``last``):
        :meth:`_snapshot_source_head`, then the connector's own fields."""
        raise NotImplementedError(f"{type(self).__name__} takes no snapshot")

    def _source_head(self, ts_ms: int, snapshot: str) -> dict[str, Any]:
        """The fields every connector's ``source`` block starts with."""
        return {
            "version": VERSION,
            "connector": self.KIND,
            "name": self.partition,
            "ts_ms": ts_ms,
            "snapshot": snapshot,
        }

    def _snapshot_source_head(self, last: bool) -> dict[str, Any]:
        """:meth:`_source_head` for a snapshot row (``snapshot: last`` on the last one)."""
        snap = self._snapshot
        if snap is None:
            raise InternalError("capture.database_source: expected snap is not None")
        return self._source_head(snap.ts_ms, "last" if last else "true")

    def _snapshot_position(self) -> Position:
        """The next snapshot position (it counts ``seq``)."""
        raise NotImplementedError(f"{type(self).__name__} takes no snapshot")

    def _snapshot_decode(self, table: CapturedTable, row: Any) -> SnapshotRow:
        """``row``'s key (saved to resume after it), its values (a call: a value that does not
        convert quarantines the row) and its raw form (for the quarantine)."""
        raise NotImplementedError(f"{type(self).__name__} takes no snapshot")

    def _snapshot_end_origin(self) -> str:
        """The origin of the record that closes an empty snapshot."""
        raise NotImplementedError(f"{type(self).__name__} takes no snapshot")

    def _finish_snapshot(self) -> None:
        """Close the snapshot's transaction and hand over to the stream."""
        raise NotImplementedError(f"{type(self).__name__} takes no snapshot")

    def _read_stream(self, builder: BatchBuilder, limits: BatchLimits, now: dt.datetime) -> bool:
        """Add streamed records to ``builder``; True when the log is exhausted for now."""
        raise NotImplementedError(f"{type(self).__name__} reads no log")

    def _offset_now(self) -> dict[str, Any]:
        """The offset that resumes right after what was read so far."""
        raise NotImplementedError(f"{type(self).__name__} has no offset")

    def _cut_inside(self, builder: BatchBuilder, tx: Any) -> None:
        """End the batch inside ``tx``: bronze marks it partial, the offset resumes inside it."""
        raise NotImplementedError(f"{type(self).__name__} cuts no transaction")

    def _batch_ends(
        self,
        builder: BatchBuilder,
        tx: OpenTransaction | None,
        limits: BatchLimits,
        *,
        reached: bool,
    ) -> bool:
        """Whether the stream batch ends before the next log record; cuts ``tx`` where it must.

        Args:
            builder: The batch being read.
            tx: The transaction being read, if any.
            limits: The batch's limits; a batch that re-reads a half-landed one (``until``)
                ends where that one ended, never at ``max_events``, and a transaction is never
                cut below ``max_events``.
            reached: A re-read of a half-landed batch has come to where that batch ended.

        Returns:
            True when the batch ends here.
        """
        if reached:
            if tx is not None:
                # The half-landed batch ended inside this transaction: the re-read batch must
                # carry the same cut, or its offset would resume at the transaction's start
                # and land its first part twice.
                self._cut_inside(builder, tx)
            return True
        if limits.until is not None or len(builder) < limits.max_events:
            return False
        if tx is None:
            return True
        if tx.in_batch >= limits.max_transaction_events:
            self._cut_inside(builder, tx)
            return True
        return False

    def read_batch(
        self,
        *,
        max_events: int,
        max_transaction_events: int,
        until: Mapping[str, Any] | None = None,
    ) -> SourceBatch:
        """Read the next batch; see :meth:`CaptureSource.read_batch`.

        A lost connection (server restart, network) is retried with backoff: the batch is read
        again from the offset of the previous batch, so nothing is lost or doubled.
        """
        if not self.PAUSE_GC:
            return self._read_with_retries(max_events, max_transaction_events, until)
        with gc_paused():
            return self._read_with_retries(max_events, max_transaction_events, until)

    def _read_with_retries(
        self, max_events: int, max_transaction_events: int, until: Mapping[str, Any] | None
    ) -> SourceBatch:
        delays = self.retry_policy.delays()
        attempt = 0
        while True:
            try:
                try:
                    batch = self._read_batch(max_events, max_transaction_events, until)
                except self.OUTAGES as exc:
                    raise self._outage(exc, "read the log") from exc
            except SourceUnavailable as exc:
                attempt += 1
                self._wait(exc, next(delays, None), attempt)
                try:
                    self._open(self._offset)
                except SourceUnavailable:
                    pass  # still down: the next read fails again and waits longer
                except self.OUTAGES as exc:
                    # Terminal (the password changed while we were away) stops here.
                    refused = self._outage(exc, "reconnect")
                    if not isinstance(refused, SourceUnavailable):
                        raise refused from exc
                continue
            self._offset = batch.offset
            return batch

    # --- snapshot, transactions and heartbeats -------------------------------------------------
    def _snapshot_row(
        self,
        builder: BatchBuilder,
        table: CapturedTable,
        values: Callable[[], Sequence[Any]],
        source: dict[str, Any],
        position: Position,
        now: dt.datetime,
        raw: Callable[[], bytes],
    ) -> None:
        """Add one snapshot row as an ``op r`` record, or quarantine it (``raw()`` is kept)."""
        origin = table.snapshot_origin
        try:
            after, key = table.row_and_key(values())
            record = data_record(_OP_READ, source, None, after, key, None, table)
            self._add(builder, record, position, origin, now, None, table)
        except (ValueConversionError, PipelineError) as exc:
            self._quarantine(builder, raw(), origin, exc, now, table)

    def _snapshot_progress(self, rows: int, index: int, tables: int, collection: str) -> None:
        logger.info(
            "source %s: snapshot progress: %d rows, table %d of %d (%s)",
            self.name,
            rows,
            index + 1,
            tables,
            collection,
        )

    def _snapshot_marker(
        self, builder: BatchBuilder, position: Position, origin: str, now: dt.datetime
    ) -> None:
        """A heartbeat for a snapshot that ended without rows (empty tables): bronze commits
        only non-empty batches, and the switch from snapshot to stream must be committed, or the
        next start would snapshot again."""
        record = heartbeat(str(self.partition), int(time.time() * 1000))
        self._add(builder, record, position, origin, now, None, None)

    def _emit_begin(
        self, builder: BatchBuilder, tx: OpenTransaction, position: Position, now: dt.datetime
    ) -> None:
        """BEGIN of ``tx`` (``provide.transaction.metadata``); counted like any record, so a
        transaction replayed after a cut skips it too."""
        tx.begun = True
        if tx.count():
            record = transaction_begin(tx.id, ts_ms=tx.ts_ms, topic=f"{self.partition}.transaction")
            self._add(builder, record, position, f"{self.ORIGIN}:begin:{tx.id}", now, tx, None)

    def _emit_end(
        self, builder: BatchBuilder, tx: OpenTransaction, position: Position, now: dt.datetime
    ) -> None:
        """END of ``tx`` with its event counts per table."""
        if tx.count():
            record = transaction_end(
                tx.id,
                tx.data_events,
                list(tx.per_collection.items()),
                ts_ms=tx.ts_ms,
                topic=f"{self.partition}.transaction",
            )
            self._add(builder, record, position, f"{self.ORIGIN}:end:{tx.id}", now, tx, None)

    def _heartbeat_due(self, interval_ms: int, action_query: str | None) -> bool:
        """Whether a heartbeat is due (``heartbeat.interval.ms``); runs ``heartbeat.action.query``
        when it is, so a quiet database still writes log the agent can confirm."""
        if interval_ms <= 0:
            return False
        if (time.monotonic() - self._last_heartbeat) * 1000 < interval_ms:
            return False
        if action_query and (time.monotonic() - self._last_action) * 1000 >= interval_ms:
            self._last_action = time.monotonic()
            try:
                self._run_action_query(action_query)
            except Exception as exc:  # noqa: BLE001 - the driver's error; the heartbeat goes on
                logger.warning("source %s: heartbeat.action.query failed: %s", self.name, exc)
        return True

    def _run_action_query(self, sql: str) -> None:
        """Run ``heartbeat.action.query`` on the source's side connection."""
        raise NotImplementedError(f"{type(self).__name__} has no heartbeat action")

    # --- landing -------------------------------------------------------------------------------
    def _register(
        self, builder: BatchBuilder, sid: str | None, schema: Mapping[str, Any] | None
    ) -> None:
        if sid is None or schema is None or sid in self._batch_schemas:
            return
        self._batch_schemas.add(sid)
        name = schema.get("name")
        builder.add_schema(
            sid,
            name if isinstance(name, str) else None,
            orjson.dumps(schema, option=orjson.OPT_SORT_KEYS).decode(),
        )

    def _add(
        self,
        builder: BatchBuilder,
        record: ConnectRecord,
        position: Position,
        origin: str,
        now: dt.datetime,
        tx: OpenTransaction | None,
        table: CapturedTable | None,
    ) -> None:
        """Classify ``record`` (which checks it) and add it to the batch at ``position``.

        A row change of a captured table (``table`` set) was built by the agent itself
        (:func:`capture.change_records.data_record`) and is not checked again."""
        value = record.value
        if table is not None and value is not None and value.get("op") in BUILT_DATA_OPS:
            event = built_data_event(record)
        else:
            event = classify(record, origin=origin)
        key_sid = value_sid = None
        if table is not None:
            if record.key_schema is not None:
                key_sid = table.key_schema_id
                self._register(builder, key_sid, table.key_schema)
            if record.value is not None and record.value_schema is not None:
                value_sid = table.envelope_schema_id
                self._register(builder, value_sid, table.envelope_schema)
        else:
            if record.key_schema is not None:
                key_sid = schema_ids(record.key_schema)
                self._register(builder, key_sid, record.key_schema)
            if record.value is not None and record.value_schema is not None:
                value_sid = schema_ids(record.value_schema)
                self._register(builder, value_sid, record.value_schema)
        builder.add_event(
            event,
            position,
            key_json=None if record.key is None else orjson.dumps(record.key).decode(),
            value_json=None if record.value is None else orjson.dumps(record.value).decode(),
            key_schema_id=key_sid,
            value_schema_id=value_sid,
            origin=origin,
            capture_ts=now,
            tx_id=None if tx is None else tx.id,
            source_partition=self.partition,
        )
        if tx is not None:
            tx.in_batch += 1

    def _quarantine(
        self,
        builder: BatchBuilder,
        raw: bytes,
        origin: str,
        exc: Exception,
        now: dt.datetime,
        table: CapturedTable | None = None,
    ) -> None:
        """Quarantine a change that cannot be landed; ``raw`` is what is kept of it, masked
        like a landed row (:func:`masked_raw`) when the source has column masks."""
        reason = getattr(exc, "reason", None) or str(exc)
        logger.warning("source %s: quarantined the change at %s: %s", self.name, origin, reason)
        if self.masker:
            raw = masked_raw(raw, self.masker, table)
        builder.add_quarantined(QuarantinedRecord(origin, reason, type(exc).__name__, raw, now))


_WITHHELD: Final = (
    b'{"withheld": "the source has column masks and this change could not be masked '
    b'column by column, so its raw form is not kept; the reason and position are"}'
)


def masked_raw(raw: bytes, masker: ColumnMasker, table: CapturedTable | None) -> bytes:
    """The raw form of a quarantined change with the masked columns masked.

    A JSON document of a known table (the MySQL agent keeps row images as JSON objects keyed by
    column name) has every object in it masked as a row of ``table``; anything else (pgoutput's
    binary tuples, a change of a table the agent could not build) cannot be masked column by
    column and is withheld whole: a masked value never reaches bronze in clear, not even in the
    quarantine.
    """
    if table is None:
        return _WITHHELD
    if not masker.applies_to(table.collection):
        return raw
    try:
        document = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return _WITHHELD
    return orjson.dumps(_mask_tree(document, masker, table.collection))


def _mask_tree(node: Any, masker: ColumnMasker, collection: str) -> Any:
    if isinstance(node, dict):
        masked = masker.apply(collection, node) or node
        return {k: _mask_tree(v, masker, collection) for k, v in masked.items()}
    if isinstance(node, list):
        return [_mask_tree(v, masker, collection) for v in node]
    return node


def with_last(rows: Iterator[tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    """Each item of ``rows`` with one more element: True on the very last one.

    A snapshot's final row is marked ``last``, so each row waits for the next one to be read.
    """
    pending = next(rows, None)
    while pending is not None:
        following = next(rows, None)
        yield (*pending, following is None)
        pending = following


_OP_READ = Op.READ.value

_PENDING_READS: Final = 3
"""Reads of the log within one batch while the source has work of its own pending and nothing
was read yet (see :meth:`DatabaseSource._read_batch`)."""

_SCHEMA_ID_CACHE: dict[int, str] = {}


def schema_ids(schema: Mapping[str, Any]) -> str:
    """The schema id of a module-constant schema (transaction, heartbeat), cached by its text."""
    key = hash(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS))
    sid = _SCHEMA_ID_CACHE.get(key)
    if sid is None:
        sid = schema_id(schema)
        _SCHEMA_ID_CACHE[key] = sid
    return sid
