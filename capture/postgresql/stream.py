"""The PostgreSQL agent's stream: pgoutput messages to records, :class:`StreamReader`.

Reads the slot on a ``replication=database`` connection, turns each transaction's messages into
Debezium records with positions ``(commit LSN, stream, change LSN, seq)`` and confirms the
flush LSN from :meth:`StreamReader.acknowledge` only (see :mod:`capture.postgresql.source`,
steps 3 and 4).
"""

from __future__ import annotations

import datetime as dt
import logging
import struct
import time
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import psycopg

from bronze.batch import BatchBuilder
from bronze.envelope import (
    ConnectRecord,
    Op,
    heartbeat,
    message_record,
    truncate_record,
)
from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.change_records import RowAppender, delete_records, insert_records, update_records
from capture.column_types import ValueConversionError
from capture.columnar_snapshot import _plain_images
from capture.database_source import VERSION, BatchLimits, OpenTransaction
from capture.postgresql import slot as pg_slot
from capture.postgresql.agent import CONNECTOR, PgTx, PostgresAgent
from capture.postgresql.pgoutput import (
    UNCHANGED_TOAST,
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Origin,
    PgOutputMessage,
    ProtocolError,
    Relation,
    Truncate,
    TypeInfo,
    Update,
    decode_keepalive,
    decode_message,
    decode_xlog_data,
    pg_time_to_unix_ms,
    transaction_boundary,
)
from capture.postgresql.position import PostgresPosition, format_pg_lsn
from capture.postgresql.schema import TableSchema
from capture.postgresql.slot import parse_lsn
from capture.postgresql.stream_columns import XLOG_HEADER, Change, PendingChanges
from pipeline.errors import (
    CaptureError,
    CaptureStopped,
    InternalError,
    PipelineError,
    SourceUnavailable,
)

try:
    from capture.postgresql._pgdecode import plain_change
except ImportError as _missing:  # pragma: no cover - the bootstrap builds it
    # Not optional: the Python reference (pgoutput.plain_change) is what it is tested against.
    raise ImportError(
        "capture.postgresql._pgdecode (the C parser of pgoutput's common changes) is not "
        "built: run `make bootstrap` or `python setup.py build_ext --inplace` in the repository"
    ) from _missing

__all__ = ["CATCH_UP_TIMEOUT_S", "STATUS_INTERVAL_S", "StreamReader"]

logger = logging.getLogger(__name__)

STATUS_INTERVAL_S = 10.0
"""Standby status updates at least this often (``wal_sender_timeout`` defaults to 60 s)."""

CATCH_UP_TIMEOUT_S = 10.0
"""A batch that saw nothing from the server for this long stops waiting for it to confirm it
sent everything up to the WAL position seen when the batch started."""


class StreamReader(PostgresAgent):
    """The stream side of the agent: the read loop, message handling and acknowledgement."""

    COLUMNAR_STREAM: ClassVar[bool] = True
    """Hold a read's common row changes as columns and land them per table
    (:mod:`capture.postgresql.stream_columns`); False: every change the per-event road. An
    agent class that writes its own ``source`` blocks or handles messages its own way
    (YugabyteDB) takes the per-event road whatever this says."""

    _appender: RowAppender | None = None
    _pending: PendingChanges | None = None
    """The changes held in the current read (None: the columnar road is off for it)."""
    _per_event_changes = 0
    """Row changes of the current read that took the per-event road (for the DEBUG log)."""

    def _start_streaming(self) -> None:
        repl = self._repl if self._repl is not None and not self._repl.closed else None
        self._repl = None
        stream = self._stream_class()(repl or self._connect(replication=True), self.name)
        self._stream = stream
        stream.start(
            self.settings.slot_name,
            self._resume_lsn,
            self.settings.publication_name,
            messages=self._server_version >= 140000,
        )
        self._server_end = 0
        stream.send_status(self._acked)
        logger.info(
            "source %s: streaming slot %s from %s",
            self.name,
            self.settings.slot_name,
            format_pg_lsn(self._resume_lsn),
        )

    def _run_action_query(self, sql: str) -> None:
        self._side().execute(sql)

    def _send_status(self, *, reply: bool) -> None:
        if self._stream is not None:
            self._stream.send_status(self._acked, reply=reply)

    def _current_wal(self) -> int:
        row = self._side().execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
        if row is None:
            raise InternalError("capture.postgresql.stream: expected row is not None")
        return parse_lsn(row[0])

    def _read_stream(self, builder: BatchBuilder, limits: BatchLimits, now: dt.datetime) -> bool:
        """Add streamed records to ``builder`` (see ``read_batch``); True when the stream is
        exhausted for now."""
        pending = self._pending = self._columnar_changes(now)
        self._held_tables: dict[int, TableSchema] = {}
        """Relation id -> the table whose changes the road holds (checked once a schema)."""
        self._per_event_changes = 0
        try:
            exhausted = self._read_messages(builder, limits, now)
            self._land_pending(builder)
            if pending is not None and (pending.landed or self._per_event_changes):
                logger.debug(
                    "source %s: stream read: %d row changes landed as columns, %d per event "
                    "(%d of them held, then replayed)",
                    self.name,
                    pending.landed - pending.replayed,
                    self._per_event_changes + pending.replayed,
                    pending.replayed,
                )
            return exhausted
        finally:
            # A read that fails is read again from the offset into a new batch: what it held
            # goes with the batch it was read for.
            self._pending = None

    def _read_messages(self, builder: BatchBuilder, limits: BatchLimits, now: dt.datetime) -> bool:
        """The read loop of :meth:`_read_stream`."""
        pending = self._pending
        until = limits.until
        if self._stream is None:
            self._start_streaming()
        stream = self._stream
        if stream is None:
            raise InternalError("capture.postgresql.stream: expected stream is not None")
        target = self._current_wal()
        until_lsn = None if until is None else parse_lsn(until["lsn"])
        until_cut = None if until is None or until.get("tx") is None else until["tx"]
        exhausted = False
        idle_since: float | None = None
        last_reply = 0.0
        while True:
            tx = self._tx
            if self._batch_ends(
                builder,
                tx,
                limits,
                reached=until_lsn is not None and self._reached(until_lsn, until_cut),
            ):
                break
            if tx is None and self._server_end >= target:
                if until is not None:
                    # Re-reading a half-landed batch that ended on a heartbeat: everything the
                    # server had is read, so the batch ends where the heartbeat had put it.
                    if until_lsn is not None and until_cut is None:
                        if self._server_end >= until_lsn:
                            self._resume_lsn = max(self._resume_lsn, until_lsn)
                    break
                self._maybe_heartbeat(builder, now)
                exhausted = True
                break
            if time.monotonic() - stream.last_status > STATUS_INTERVAL_S:
                self._send_status(reply=False)
            data = stream.read(0.05 if tx is None else 1.0)
            if data is None:
                idle_since = idle_since or time.monotonic()
                if (
                    tx is None
                    and until is None
                    and time.monotonic() - idle_since > CATCH_UP_TIMEOUT_S
                ):
                    exhausted = True  # the server never confirmed the target; stop waiting
                    break
                if tx is None and time.monotonic() - last_reply > 0.1:
                    # Ask for a keepalive: its WAL end says how far the server has sent.
                    self._send_status(reply=True)
                    last_reply = time.monotonic()
                self._maybe_heartbeat(builder, now)
                continue
            idle_since = None
            kind = data[:1]
            if kind == b"w":
                if pending is not None:
                    if self._hold_change(pending, data):
                        continue
                    boundary = transaction_boundary(data, XLOG_HEADER)
                    if boundary is not None:  # adds no row on the columnar road
                        (start,) = _XLOG_START.unpack_from(data, 1)
                        self._handle_other(builder, boundary, start, data[XLOG_HEADER:], now)
                        continue
                start, _end, _ts, payload = decode_xlog_data(data)
                try:
                    message = decode_message(payload)
                except ProtocolError as exc:
                    raise CaptureStopped(
                        f"source {self.name}: at {format_pg_lsn(start)}: {exc}"
                    ) from exc
                if pending is not None and message.__class__ not in _ADDS_NO_ROWS:
                    # Whatever this adds comes after the held changes.
                    self._land_pending(builder)
                    if message.__class__ in _ROW_CHANGES:
                        self._per_event_changes += 1
                self._handle(builder, message, start, payload, now)
            elif kind == b"k":
                wal_end, _ts, reply = decode_keepalive(data)
                if wal_end > self._server_end:
                    self._server_end = wal_end
                if reply:
                    self._send_status(reply=False)
                if self._tx is None:
                    self._maybe_heartbeat(builder, now)
        return exhausted

    def _cut_inside(self, builder: BatchBuilder, tx: PgTx) -> None:
        """End the batch inside ``tx``: bronze marks it partial, the offset resumes inside it."""
        builder.mark_partial(str(tx.xid))
        self._cut = (tx.commit_lsn, tx.emitted)

    def _reached(self, until_lsn: int, until_cut: Mapping[str, Any] | None) -> bool:
        if until_cut is None:
            return self._tx is None and self._resume_lsn >= until_lsn
        commit = parse_lsn(until_cut["commit_lsn"])
        tx = self._tx
        if tx is not None and tx.commit_lsn == commit:
            return tx.emitted >= int(until_cut["emitted"])
        return self._resume_lsn > commit

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        s = self.settings
        if self._tx is not None:
            return
        if not self._heartbeat_due(s.rules.heartbeat_interval_ms, s.rules.heartbeat_action_query):
            return
        point = max(self._server_end, self._resume_lsn)
        if point <= self._acked:
            self._nudge_idle_wal()
            return  # nothing new to confirm yet
        self._last_heartbeat = time.monotonic()
        # Every transaction committed before the keepalive's WAL end was sent before it, so
        # confirming that point after this batch commits loses nothing; it lets WAL be recycled.
        key = point - 1
        self._land_pending(builder)  # the held changes come first, and set the last position
        last = self._last_position
        if last is not None and (last.commit_lsn, last.lsn) >= (key, key):
            return
        position = _position(key, Phase.STREAM, key, 0)
        record = heartbeat(s.server_name, int(time.time() * 1000))
        self._add(
            builder, record, position, f"pg:heartbeat@{format_pg_lsn(point)}", now, None, None
        )
        self._last_position = position
        self._resume_lsn = point

    def _nudge_idle_wal(self) -> None:
        """The whole database is idle: no WAL moves, so no heartbeat could land and the lag
        would grow although bronze is complete. Write a slot marker (skipped when read back),
        at most once per heartbeat interval: the next batch reads it and lands the heartbeat."""
        interval_s = self.settings.rules.heartbeat_interval_ms / 1000
        if time.monotonic() - self._last_nudge < interval_s:
            return
        self._last_nudge = time.monotonic()
        try:
            pg_slot.emit_marker(self._side(), self.name, self.settings.slot_name)
        except psycopg.Error as exc:
            logger.warning("source %s: cannot write a heartbeat marker: %s", self.name, exc)

    def _handle(
        self,
        builder: BatchBuilder,
        message: PgOutputMessage,
        lsn: int,
        raw: bytes,
        now: dt.datetime,
    ) -> None:
        cls = message.__class__
        if cls is not Insert and cls is not Update and cls is not Delete:
            self._handle_other(builder, message, lsn, raw, now)
            return
        if not isinstance(message, (Insert, Update, Delete)):
            raise InternalError(
                "capture.postgresql.stream: expected isinstance(message, (Insert, Update, Delete))"
            )
        tx = self._tx
        if tx is None:
            raise CaptureError(
                f"source {self.name}: {cls.__name__} at {format_pg_lsn(lsn)} outside a transaction"
            )
        table = self._relations.get(message.relation_id, _MISSING_TABLE)
        if table is _MISSING_TABLE:
            raise CaptureError(
                f"source {self.name}: change for relation {message.relation_id} before its "
                "Relation message"
            )
        if table is None:
            return  # not captured
        if table.collection == self.signals.collection:
            if isinstance(message, Insert):
                self._signal_row(
                    builder, table.row(message.new), f"pg:{format_pg_lsn(lsn)}", (tx, lsn), now
                )
            return  # the signaling table's rows are signals, never data
        rules = self.settings.rules
        if (
            not isinstance(message, Delete)
            and self._window is None
            and not ("c" in rules.skipped_operations or "u" in rules.skipped_operations)
        ):
            self._append_change(builder, message, table, tx, lsn, raw, now)
            return
        try:
            records = self._change_records(table, message, lsn, tx)
        except (ValueConversionError, PipelineError) as exc:
            self._quarantine_change(builder, exc, (tx, table, lsn, raw), now)
            return
        if self._window is not None:
            self._incremental_saw(table, [record.key for record in records])
        self._land(builder, records, table, tx, lsn, now)

    def _quarantine_change(
        self,
        builder: BatchBuilder,
        exc: Exception,
        at: tuple[PgTx, TableSchema, int, bytes],
        now: dt.datetime,
    ) -> None:
        """Quarantine the change at ``at`` (transaction, table, LSN, message bytes)."""
        tx, table, lsn, raw = at
        position = self._position(tx, lsn)
        if tx.count():
            self._quarantine(builder, raw, f"pg:{format_pg_lsn(lsn)}", exc, now, table)
        self._last_position = position

    def _land(
        self,
        builder: BatchBuilder,
        records: list[ConnectRecord],
        table: TableSchema,
        tx: PgTx,
        lsn: int,
        now: dt.datetime,
    ) -> None:
        """Add the records of the change at ``lsn``."""
        for record in records:
            if record.value is not None:
                self._begin_if_needed(builder, tx, now)
            position = self._position(tx, lsn)
            if tx.count():
                self._add(builder, record, position, f"pg:{format_pg_lsn(lsn)}", now, tx, table)
            if record.value is not None:
                tx.note_data(table.collection)
            self._last_position = position

    def _append_change(
        self,
        builder: BatchBuilder,
        message: Insert | Update,
        table: TableSchema,
        tx: PgTx,
        lsn: int,
        raw: bytes,
        now: dt.datetime,
    ) -> None:
        """An insert or update when neither is a skipped operation and no incremental snapshot
        is open: the same record as :meth:`_change_records` gives, appended to the batch by
        :class:`RowAppender` (an image with an unrepresentable value, or an update that moved
        the key, takes the records' road)."""
        source = self._source(tx, table, lsn)
        try:
            if isinstance(message, Insert):
                before, old_key = None, None
                after, key = table.row_and_key(message.new)
            else:
                before, after, old_key, key = self._update_images(table, message)
        except (ValueConversionError, PipelineError) as exc:
            self._quarantine_change(builder, exc, (tx, table, lsn, raw), now)
            return
        rules = self.settings.rules
        if (
            after.__class__ is not dict
            or (before is not None and before.__class__ is not dict)
            or (old_key != key and old_key is not None and key is not None)
        ):
            if before is None and message.__class__ is Insert:
                records = insert_records(source, after, key, table, tx, rules)
            else:
                records = update_records(source, (before, after), (old_key, key), table, tx, rules)
            self._land(builder, records, table, tx, lsn, now)
            return
        self._begin_if_needed(builder, tx, now)
        position = self._position(tx, lsn)
        if tx.count():
            appender = self._appender
            if appender is None:
                appender = self._appender = RowAppender(self.partition)
            self._register(builder, table.key_schema_id, table.key_schema)
            self._register(builder, table.envelope_schema_id, table.envelope_schema)
            appender.add(
                builder,
                _OP_CREATE if message.__class__ is Insert else _OP_UPDATE,
                source,
                (before, after),
                key,
                tx.block(table.collection, rules.provide_transaction_metadata),
                table,
                (position, f"pg:{format_pg_lsn(lsn)}", now, tx.id),
            )
            tx.in_batch += 1
        tx.note_data(table.collection)
        self._last_position = position

    def _update_images(
        self, table: TableSchema, message: Update
    ) -> tuple[dict[str, Any] | None, dict[str, Any], Any, Any]:
        """An update's ``before`` and ``after`` images and its old and new keys."""
        new_values = message.new
        if message.old_kind == "O" and message.old is not None:
            # REPLICA IDENTITY FULL logs the whole old row, so an unchanged TOAST value the new
            # tuple leaves out ('u') is known: take it instead of the placeholder.
            old_values = message.old
            new_values = tuple(
                old_values[i] if v is UNCHANGED_TOAST else v for i, v in enumerate(new_values)
            )
        after, new_key = table.row_and_key(new_values)
        old_key = new_key
        before: dict[str, Any] | None
        if message.old is not None:
            old_key = table.key(message.old)
            before = self._old_image(table, message.old, message.old_kind)
        elif table.replica_identity in ("d", "i"):
            before = table.key_only_row(new_key)
        else:
            before = None
        return before, after, old_key, new_key

    def _handle_other(
        self,
        builder: BatchBuilder,
        message: PgOutputMessage,
        lsn: int,
        raw: bytes,
        now: dt.datetime,
    ) -> None:
        if isinstance(message, Begin):
            skip = 0
            if self._cut is not None and self._cut[0] == message.final_lsn:
                skip = self._cut[1]
            self._tx = PgTx(
                id=str(message.xid),
                ts_ms=pg_time_to_unix_ms(message.commit_time_us),
                skip=skip,
                xid=message.xid,
                commit_lsn=message.final_lsn,
            )
        elif isinstance(message, Commit):
            self._commit(builder, message, now)
        elif isinstance(message, Relation):
            self._relation(message)
        elif isinstance(message, LogicalMessage):
            self._logical_message(builder, message, raw, now)
        elif isinstance(message, Truncate):
            if self._tx is None:
                raise CaptureError(
                    f"source {self.name}: Truncate at {format_pg_lsn(lsn)} outside a transaction"
                )
            self._truncate(builder, message, lsn, raw, now)
        elif not isinstance(message, (TypeInfo, Origin)):
            # Stream Start/Stop/Commit/Abort need 'streaming on', which the agent never asks for.
            raise CaptureError(
                f"source {self.name}: unexpected {type(message).__name__} message at "
                f"{format_pg_lsn(lsn)}"
            )

    def _position(self, tx: PgTx, lsn: int) -> PostgresPosition:
        if lsn == tx.last_lsn:
            tx.seq += 1
        else:
            tx.last_lsn, tx.seq = lsn, 0
        return _position(tx.commit_lsn, Phase.STREAM, lsn, tx.seq)

    def _begin_if_needed(self, builder: BatchBuilder, tx: PgTx, now: dt.datetime) -> None:
        if tx.begun or not self.settings.rules.provide_transaction_metadata:
            return
        # BEGIN sorts before every change of its transaction: LSN 0 at the commit key.
        self._emit_begin(builder, tx, _position(tx.commit_lsn, Phase.STREAM, 0, 0), now)

    def _commit(self, builder: BatchBuilder, message: Commit, now: dt.datetime) -> None:
        tx = self._tx
        if tx is None:
            raise CaptureError(f"source {self.name}: Commit without Begin")
        if tx.begun:
            # END sorts after every change. No PostgreSQL change is at its commit LSN; under
            # YugabyteDB's HYBRID_TIME LSNs every change is, so END follows the last one's seq.
            seq = tx.seq + 1 if tx.last_lsn == message.commit_lsn else 0
            position = _position(tx.commit_lsn, Phase.STREAM, message.commit_lsn, seq)
            self._emit_end(builder, tx, position, now)
            self._last_position = position
        self._tx = None
        self._cut = None
        self._resume_lsn = message.end_lsn
        self._last_commit = message.commit_lsn

    def _relation(self, message: Relation) -> None:
        schema = message.namespace or "pg_catalog"
        signaling = self.signals.table == (schema, message.name)
        if not signaling and not self.settings.table_filter.table(schema, message.name):
            self._relations[message.relation_id] = None
            return
        self._relations[message.relation_id] = self._table_schema(
            self._side(), schema, message.name, message
        )

    def _source(self, tx: PgTx, table: TableSchema | None, lsn: int) -> dict[str, Any]:
        return self._source_at(tx, table, lsn, self._last_commit)

    def _source_at(
        self, tx: PgTx, table: TableSchema | None, lsn: int, last: int | None
    ) -> dict[str, Any]:
        """The ``source`` block of a change at ``lsn`` read after the commit at ``last``."""
        s = self.settings
        return {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": s.server_name,
            "ts_ms": tx.ts_ms,
            "snapshot": "false",
            "db": s.dbname,
            # Debezium 2.x's ["<last commit LSN>","<LSN>"], as JSON text (LSNs are digits).
            "sequence": f'["{last}","{lsn}"]' if last is not None else f'[null,"{lsn}"]',
            "schema": None if table is None else table.schema,
            "table": None if table is None else table.table,
            "txId": tx.xid,
            "lsn": lsn,
            "xmin": None,
            "commit_lsn": tx.commit_lsn,
        }

    def _change_records(
        self, table: TableSchema, message: Insert | Update | Delete, lsn: int, tx: PgTx
    ) -> list[ConnectRecord]:
        rules = self.settings.rules
        source = self._source(tx, table, lsn)
        if isinstance(message, Insert):
            if "c" in rules.skipped_operations:
                return []
            after, key = table.row_and_key(message.new)
            return insert_records(source, after, key, table, tx, rules)
        if isinstance(message, Delete):
            if "d" in rules.skipped_operations:
                return []
            return delete_records(
                source,
                self._old_image(table, message.old, message.old_kind),
                table.key(message.old),
                table,
                tx,
                rules,
            )
        before, after, old_key, new_key = self._update_images(table, message)
        return update_records(source, (before, after), (old_key, new_key), table, tx, rules)

    @staticmethod
    def _old_image(
        table: TableSchema, old: Sequence[Any], kind: str | None
    ) -> dict[str, Any] | None:
        """The ``before`` image of an old tuple: the whole row under REPLICA IDENTITY FULL
        (``O``), else the identity columns (``K``)."""
        return table.row(old) if kind == "O" else table.identity_row(old)

    def _truncate(
        self, builder: BatchBuilder, message: Truncate, lsn: int, raw: bytes, now: dt.datetime
    ) -> None:
        tx = self._tx
        if tx is None:
            raise InternalError("capture.postgresql.stream: expected tx is not None")
        s = self.settings
        for relid in message.relation_ids:
            table = self._relations.get(relid)
            if table is None:
                continue
            self._incremental_truncated(table)
            if "t" in self.settings.rules.skipped_operations:
                continue
            self._begin_if_needed(builder, tx, now)
            position = self._position(tx, lsn)
            record = truncate_record(
                self._source(tx, table, lsn),
                transaction=tx.block(table.collection, s.rules.provide_transaction_metadata),
                value_schema=table.envelope_schema,
                topic=table.topic,
            )
            if tx.count():
                self._add(builder, record, position, f"pg:{format_pg_lsn(lsn)}", now, tx, table)
            tx.note_data(table.collection)
            self._last_position = position

    def _logical_message(
        self, builder: BatchBuilder, message: LogicalMessage, raw: bytes, now: dt.datetime
    ) -> None:
        tx = self._tx
        s = self.settings
        if pg_slot.is_marker(message):
            if tx is None:
                self._resume_lsn = max(self._resume_lsn, message.lsn)
            return  # the agent's own slot marker, not a change of the database
        if message.transactional and tx is not None:
            position = self._position(tx, message.lsn)
            source = self._source(tx, None, message.lsn)
            if tx.count():
                record = message_record(message.prefix, message.content, source=source)
                self._add(
                    builder, record, position, f"pg:{format_pg_lsn(message.lsn)}", now, tx, None
                )
            self._last_position = position
            return
        # A non-transactional message is decoded at its own LSN, between transactions.
        lsn = message.lsn
        position = _position(lsn, Phase.STREAM, lsn, 0)
        source = {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": s.server_name,
            "ts_ms": int(time.time() * 1000),
            "snapshot": "false",
            "db": s.dbname,
            "sequence": None,
            "schema": None,
            "table": None,
            "txId": None,
            "lsn": lsn,
            "xmin": None,
            "commit_lsn": lsn,
        }
        if lsn >= self._resume_lsn:
            record = message_record(message.prefix, message.content, source=source)
            self._add(builder, record, position, f"pg:{format_pg_lsn(lsn)}", now, None, None)
            self._last_position = position
            if tx is None:
                self._resume_lsn = lsn

    # --- the columnar road (capture.postgresql.stream_columns) ---------------------------------
    def _columnar_changes(self, now: dt.datetime) -> PendingChanges | None:
        """A holder of this read's common changes, or None when every change of it takes the
        per-event road: transaction metadata (its blocks and END count each change as it is
        built), a skipped insert or update, or an agent class of its own ``source`` blocks or
        message handling."""
        rules = self.settings.rules
        cls = type(self)
        if (
            not self.COLUMNAR_STREAM
            or rules.provide_transaction_metadata
            or "c" in rules.skipped_operations
            or "u" in rules.skipped_operations
            or any(getattr(cls, m) is not getattr(StreamReader, m) for m in _ROAD_METHODS)
        ):
            return None
        return PendingChanges(self._source_at, self.partition, now)

    def _holdable(self, table: TableSchema) -> bool:
        """Whether the columnar road may take ``table``'s changes: not the signaling table, and
        its images built and its values converted as :class:`TableSchema` does (the road
        writes those)."""
        cls = type(table)
        return (
            table.collection != self.signals.collection
            and _plain_images(table)
            and cls.key_only_row is CapturedTable.key_only_row
            and cls._convert is TableSchema._convert
        )

    def _hold_change(self, pending: PendingChanges, data: bytes) -> bool:
        """Hold the XLogData message ``data`` if it is a change the columnar road takes (or
        skip it if its table is not captured); False: it takes the per-event road."""
        change = plain_change(data, XLOG_HEADER)
        tx = self._tx
        if change is None or tx is None or self._window is not None:
            return False
        op, relid, values = change
        table = self._relations.get(relid)
        if table is None:
            return relid in self._relations  # not captured; unknown: the long way says so
        if table is not self._held_tables.get(relid):
            if not self._holdable(table):
                return False
            self._held_tables[relid] = table
        if len(values) != len(table.names):
            return False
        (lsn,) = _XLOG_START.unpack_from(data, 1)
        # What _position does, without a position object: the road encodes them at once.
        if lsn == tx.last_lsn:
            tx.seq += 1
        else:
            tx.last_lsn, tx.seq = lsn, 0
        if tx.count():
            pending.add(table, (values, op, lsn, tx.seq, tx, self._last_commit, data))
            tx.in_batch += 1
        tx.note_data(table.collection)
        pending.last = (tx.commit_lsn, lsn, tx.seq)
        return True

    def _land_pending(self, builder: BatchBuilder) -> None:
        """Add the held changes to the batch (see :meth:`PendingChanges.land`)."""
        pending = self._pending
        if pending is None:
            return
        for why in pending.land(builder, self._replay_change, self._register):
            logger.debug("source %s: held changes of %s take the per-event road", self.name, why)
        if pending.last is not None:
            commit_lsn, lsn, seq = pending.last
            self._last_position = _position(commit_lsn, Phase.STREAM, lsn, seq)
            pending.last = None

    def _replay_change(
        self, builder: BatchBuilder, table: TableSchema, change: Change, now: dt.datetime
    ) -> None:
        """Land a held change the per-event way: what :meth:`_append_change` does with it
        (the change is counted and positioned already)."""
        values, op, lsn, seq, tx, last, data = change
        position = _position(tx.commit_lsn, Phase.STREAM, lsn, seq)
        origin = f"pg:{format_pg_lsn(lsn)}"
        try:
            after, key = table.row_and_key(values)
            before = None
            if op == _OP_UPDATE and table.replica_identity in ("d", "i"):
                before = table.key_only_row(key)
        except (ValueConversionError, PipelineError) as exc:
            self._quarantine(builder, data[XLOG_HEADER:], origin, exc, now, table)
            return
        source = self._source_at(tx, table, lsn, last)
        rules = self.settings.rules
        if op == _OP_CREATE:
            records = insert_records(source, after, key, table, tx, rules)
        else:
            records = update_records(source, (before, after), (key, key), table, tx, rules)
        for record in records:
            self._add(builder, record, position, origin, now, tx, table)

    def _batch_ends(
        self,
        builder: BatchBuilder,
        tx: OpenTransaction | None,
        limits: BatchLimits,
        *,
        reached: bool,
    ) -> bool:
        pending = self._pending
        if pending is None:
            return super()._batch_ends(builder, tx, limits, reached=reached)
        if not reached and (
            limits.until is not None or len(builder) + len(pending.order) < limits.max_events
        ):
            return False  # the common case, checked here: this runs before every message
        if reached or tx is None or tx.in_batch >= limits.max_transaction_events:
            # The batch ends here: what it holds is part of it, and counts.
            self._land_pending(builder)
        return super()._batch_ends(builder, tx, limits, reached=reached)

    def acknowledge(self, offset: Mapping[str, Any]) -> None:
        """Confirm the offset's LSN to the slot: everything before it is durable in bronze."""
        if offset.get("phase") == "snapshot":
            return  # the slot stays at the snapshot point until streaming starts
        if offset.get("phase") == "done":
            self._drop_slot_after_initial_only()
            return
        lsn = parse_lsn(offset["lsn"])
        if lsn <= self._acked and self._stream is not None:
            return
        self._acked = max(self._acked, lsn)
        try:
            self._send_status(reply=False)
        except SourceUnavailable as exc:
            # Sent again after the reconnect, and again at the next start.
            logger.warning("source %s: acknowledgement not sent: %s", self.name, exc)

    def _stop_streaming(self) -> None:
        if self._stream is not None:
            self._stream.stop(self._acked)


_MISSING_TABLE: Any = object()
# The frozen dataclass constructor validates every component; the agent builds them from LSNs
# it decoded itself, so it takes the unchecked constructor the landing path uses.

_position = PostgresPosition._new
_OP_CREATE, _OP_UPDATE = Op.CREATE.value, Op.UPDATE.value
_XLOG_START = struct.Struct("!Q")
_ADDS_NO_ROWS: frozenset[type] = frozenset({Begin, Commit, Relation, TypeInfo, Origin})
"""Messages that add no row while the columnar road is on (no transaction metadata): the
held changes need not be landed before them."""
_ROW_CHANGES: frozenset[type] = frozenset({Insert, Update, Delete})
_ROAD_METHODS = ("_source", "_source_at", "_handle", "_append_change", "_update_images")
"""What the columnar road stands in for: a class overriding any of them keeps the per-event
road."""
