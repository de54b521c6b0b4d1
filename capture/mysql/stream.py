"""The MySQL / MariaDB agent's binlog stream: events to records, :class:`StreamReader`.

Reads the ROW binlog with mysql-replication (through :class:`capture.mysql.binlog.BinlogReader`,
its faster reader) from the offset's file and position, keeps the schema history in step with
the DDL it reads and turns row events into Debezium records (see :mod:`capture.mysql.source`,
steps 4 and 5). A read's plain inserts and updates are held and landed per table, column by
column (:mod:`capture.mysql.stream_columns`); everything else, and a held table's events whose
values need care, takes the per-event road in its place.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from pymysqlreplication.event import (
    GtidEvent,
    MariadbAnnotateRowsEvent,
    MariadbGtidEvent,
    QueryEvent,
    RotateEvent,
    RowsQueryLogEvent,
    XidEvent,
)
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from bronze.batch import BatchBuilder
from bronze.envelope import (
    ConnectRecord,
    Op,
    heartbeat,
    schema_change,
    truncate_record,
)
from bronze.position_base import Phase
from capture.captured_table import AgentRules
from capture.change_records import RowAppender, delete_records, insert_records, update_records
from capture.column_types import ValueConversionError
from capture.database_source import VERSION, BatchLimits
from capture.mysql.agent import CONNECTOR, MySqlTable, MySqlTx, raw_row
from capture.mysql.binlog import BinlogReader
from capture.mysql.client_id import binlog_client
from capture.mysql.ddl import DdlParseError, SchemaChange, statement_kind
from capture.mysql.history import HistoryEntry
from capture.mysql.position import MySqlPosition
from capture.mysql.schema import TableDef
from capture.mysql.server import (
    BinlogPoint,
    merge_gtid,
)
from capture.mysql.stream_columns import HeldEvent, HeldRows, position_of, warm_pandas_import
from capture.mysql.tables import TableTracker
from capture.mysql.types import stream_row, stream_values
from pipeline.errors import (
    CaptureError,
    CaptureStopped,
    InternalError,
    PipelineError,
    SourceUnavailable,
)

__all__ = ["StreamReader"]

logger = logging.getLogger(__name__)

_EVENTS = [
    GtidEvent,
    MariadbGtidEvent,
    QueryEvent,
    XidEvent,
    RotateEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
    MariadbAnnotateRowsEvent,
    RowsQueryLogEvent,
]


class StreamReader(TableTracker):
    """The stream side of the agent: the binlog read loop and event handling."""

    STREAM_COLUMNS: ClassVar[bool] = True
    """Hold a read's plain inserts and updates and land them per table, column by column
    (:mod:`capture.mysql.stream_columns`); False: every row event takes the per-event road
    (:meth:`_decoded_rows`), as the columnar road's equivalence test compares."""

    _appender: RowAppender | None = None
    _held: HeldRows | None = None
    """The held row events of the read in progress (None: the read holds none)."""
    _per_event: dict[str, int] | None = None
    """Row events of the read that the columnar road could have held but did not, by reason
    (logged at DEBUG when the read ends)."""
    _numbered: tuple[str, int] = ("", 0)
    """The binlog file :meth:`_file_number` numbered last, and its number."""

    def _start_stream_at(self, point: BinlogPoint, *, reset_schema: bool) -> None:
        """``snapshot.mode=never``: stream from ``point`` with an empty schema history."""
        dialect = self._dialect
        if dialect is None:
            raise InternalError("capture.mysql.stream: expected dialect is not None")
        self._server_id = dialect.server_id
        self._phase = "stream"
        self._resume = point
        self._cut = None
        if reset_schema:
            marker = _position(point.file_number, point.pos, Phase.SNAPSHOT, 0, 0, point.file, None)
            self._record_history([HistoryEntry(marker, "reset", None, None)])
        self._replay_history()

    def _open_stream(self) -> None:
        if self._resume is None:
            raise InternalError("capture.mysql.stream: expected self._resume is not None")
        if self.STREAM_COLUMNS:
            warm_pandas_import()
        s = self.settings
        start = self._resume
        if self._cut is not None:
            start = BinlogPoint(self._cut[0], self._cut[1], self._resume.gtids)
        lake = None if self._history is None else self._history.path
        client = binlog_client(self._side(), self._dialect, s, self.name, lake)
        self._stream = BinlogReader(
            connection_settings=s.connection(),
            server_id=client.server_id,
            report_slave=client.report_host,
            blocking=False,
            resume_stream=True,
            log_file=start.file,
            log_pos=start.pos,
            only_events=_EVENTS,
            annotate_rows_event=s.include_query,
            enable_logging=False,
        )
        self._file = start.file
        self._stream_at = start.pos
        if s.include_query and self._dialect is not None and self._dialect.mariadb:
            if not self._query_warned:
                self._query_warned = True
                logger.warning(
                    "source %s: include.query: MariaDB sends annotate-rows events only to "
                    "GTID-positioned readers and the agent reads by file and position, so "
                    "source.query stays null",
                    self.name,
                )

    def _read_stream(self, builder: BatchBuilder, limits: BatchLimits, now: dt.datetime) -> bool:
        """Add binlog records to ``builder`` (see ``read_batch``); True when the binlog is
        exhausted for now."""
        until = limits.until
        exhausted = False
        if self._stream is None:
            self._open_stream()
        stream = self._stream
        max_events = limits.max_events
        # A re-read of a half-landed batch (until) counts its way to where that batch ended
        # event by event: it holds nothing.
        held = None
        if self.STREAM_COLUMNS and until is None:
            held = HeldRows(self._source, self.partition, now)
        self._held, self._per_event = held, {}
        while True:
            # _batch_ends is False below max_events outside a re-read: asked only from there.
            if until is not None or len(builder) + (0 if held is None else held.rows) >= max_events:
                self._land_held(builder)
                if self._batch_ends(
                    builder, self._tx, limits, reached=until is not None and self._reached(until)
                ):
                    break
            event = stream.fetchone()
            if event is None:
                self._land_held(builder)
                # Non-blocking dump: the server sent everything it had.
                self._close_stream()
                if self._tx is not None:
                    raise SourceUnavailable(
                        f"source {self.name}: the binlog ended inside a transaction at "
                        f"{self._file}:{self._stream_at}"
                    )
                if until is None:
                    self._maybe_heartbeat(builder, now)
                exhausted = True
                break
            self._handle(builder, event, now)
        self._land_held(builder)
        self._held = None
        if held is not None and (held.replayed or self._per_event):
            logger.debug(
                "source %s: %d row events landed column by column; per event: %d replayed "
                "(values that need care), not held: %s",
                self.name,
                held.landed - held.replayed,
                held.replayed,
                self._per_event,
            )
        if self._history is not None and self._pending_history:
            self._record_history(self._pending_history)
            self._pending_history = []
        return exhausted

    def _land_held(self, builder: BatchBuilder) -> None:
        """Land the held row events (before anything else reaches the batch)."""
        held = self._held
        if held is None or not held.rows:
            return
        why, last = held.land(builder, self._replay)
        if last is not None:
            self._last_position = position_of(last)
        if why:
            logger.debug(
                "source %s: row events of %s took the per-event road", self.name, "; ".join(why)
            )

    def _hold(
        self,
        builder: BatchBuilder,
        held: HeldRows,
        event: Any,
        images: list[tuple[list[Any], dict[int, str] | None]],
        table: MySqlTable,
        tx: MySqlTx,
        where: tuple[int, str, int, int],
    ) -> None:
        """Hold the inserts or updates of ``event`` for the columnar road, counted in ``tx``
        as :meth:`_decoded_rows` counts its rows (``tx`` has no records left to skip)."""
        update = isinstance(event, UpdateRowsEvent)
        rows = len(images) >> update
        if not rows:
            return
        registered = self._batch_schemas
        if table.key_schema_id not in registered:
            self._register(builder, table.key_schema_id, table.key_schema)
        if table.envelope_schema_id not in registered:
            self._register(builder, table.envelope_schema_id, table.envelope_schema)
        tx.emitted += rows
        tx.in_batch += rows
        tx.data_events += rows
        per_collection = tx.per_collection
        collection = table.collection
        per_collection[collection] = per_collection.get(collection, 0) + rows
        start, _origin, ts_ms, file_number = where
        held.add(
            table,
            (
                update,
                rows,
                start,
                file_number,
                ts_ms,
                tx.gtid,
                tx.thread,
                tx.query,
                tx.id,
                self._file,
                event,
                images,
                tx,
            ),
        )

    def _replay(self, builder: BatchBuilder, held: HeldEvent) -> None:
        """Land a held event through the per-event road: its counts in its transaction are
        taken back first, since :meth:`_decoded_rows` counts its records itself (a key move is
        two or three)."""
        tx, rows, collection = held.tx, held.rows, held.table.collection
        tx.emitted -= rows
        tx.in_batch -= rows
        tx.data_events -= rows
        left = tx.per_collection[collection] - rows
        if left:
            tx.per_collection[collection] = left
        else:
            del tx.per_collection[collection]
        now = self._held.now if self._held is not None else dt.datetime.now(dt.UTC)
        self._decoded_rows(builder, held.event, held.images, held.table, tx, held.where, now)

    def _close_stream(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None

    def _cut_inside(self, builder: BatchBuilder, tx: MySqlTx) -> None:
        """End the batch inside ``tx``: bronze marks it partial, the offset resumes inside it."""
        builder.mark_partial(tx.id)
        self._cut = (tx.start[0], tx.start[1], tx.emitted)

    def _reached(self, until: Mapping[str, Any]) -> bool:
        cut = until.get("tx")
        tx = self._tx
        if cut is not None:
            if tx is not None and tx.start == (str(cut["file"]), int(cut["pos"])):
                return tx.emitted >= int(cut["emitted"])
            resume = self._resume
            if resume is None:
                raise InternalError("capture.mysql.stream: expected resume is not None")
            return resume.key() > BinlogPoint(str(cut["file"]), int(cut["pos"])).key()
        target = BinlogPoint(str(until["file"]), int(until["pos"]))
        resume = self._resume
        if resume is None:
            raise InternalError("capture.mysql.stream: expected resume is not None")
        return tx is None and resume.key() >= target.key()

    def _run_action_query(self, sql: str) -> None:
        with self._side().cursor() as cur:
            cur.execute(sql)

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        s = self.settings
        if self._tx is not None or self._resume is None:
            return
        if not self._heartbeat_due(s.rules.heartbeat_interval_ms, s.rules.heartbeat_action_query):
            return
        resume = self._resume
        # Every event before the resume point was read; a heartbeat just below it lets the
        # committed offset move past changes of tables that are not captured.
        position = _position(resume.file_number, resume.pos - 1, _STREAM, 0, 0, resume.file, None)
        last = self._last_position
        if last is not None and last.encode() >= position.encode():
            return
        self._last_heartbeat = time.monotonic()
        record = heartbeat(s.server_name, int(time.time() * 1000))
        self._add(
            builder,
            record,
            position,
            f"mysql:heartbeat@{resume.file}:{resume.pos}",
            now,
            None,
            None,
        )
        self._last_position = position

    def _handle(self, builder: BatchBuilder, event: Any, now: dt.datetime) -> None:
        if self._held is not None and not isinstance(event, _HOLDS_NOTHING):
            # A rotation, an annotation (its query goes into the next rows' source blocks):
            # the held rows go first.
            self._land_held(builder)
        stream = self._stream
        end = int(event.packet.log_pos)
        start = end - int(event.packet.event_size)
        if isinstance(event, RotateEvent):
            self._file = str(event.next_binlog)
            if self._tx is None and self._resume is not None:
                self._resume = BinlogPoint(self._file, int(event.position), self._gtids)
            return
        if stream is not None and stream.log_file:
            self._file = str(stream.log_file)
        self._stream_at = end
        if isinstance(event, _ROW_EVENTS):  # the most frequent first
            self._rows(builder, event, start, now)
        elif isinstance(event, (MariadbGtidEvent, GtidEvent)):
            self._begin(event, start)
        elif isinstance(event, QueryEvent):
            self._query(builder, event, start, end, now)
        elif isinstance(event, XidEvent):
            self._commit(builder, start, end, now, event)
        elif isinstance(event, MariadbAnnotateRowsEvent | RowsQueryLogEvent):
            if self._tx is not None:
                raw = getattr(event, "sql_statement", None) or getattr(event, "query", None)
                self._tx.query = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw

    def _begin(self, event: Any, start: int) -> None:
        gtid = str(event.gtid)
        self._open_tx(start, gtid, int(event.timestamp) * 1000)

    def _open_tx(self, start: int, gtid: str | None, ts_ms: int) -> MySqlTx:
        skip = 0
        if self._cut is not None and (self._cut[0], self._cut[1]) == (self._file, start):
            skip = self._cut[2]
        tx = MySqlTx(
            id=gtid or f"{self._file}:{start}",
            ts_ms=ts_ms,
            skip=skip,
            start=(self._file, start),
            gtid=gtid,
        )
        self._tx = tx
        return tx

    def _query(
        self, builder: BatchBuilder, event: Any, start: int, end: int, now: dt.datetime
    ) -> None:
        sql = str(event.query)
        kind = statement_kind(sql)
        tx = self._tx
        if kind == "begin":
            if tx is None:  # MySQL without GTIDs: BEGIN opens the group
                tx = self._open_tx(start, None, int(event.timestamp) * 1000)
            tx.thread = int(event.slave_proxy_id)
            return
        if kind in ("commit", "rollback"):
            # A ROLLBACK in the binlog ends a group whose non-transactional changes happened.
            self._commit(builder, start, end, now, event)
            return
        if kind == "dml":
            self._land_held(builder)
        if kind == "dml" and (tx is None or tx.count()):
            # A session with binlog_format=STATEMENT/MIXED wrote SQL instead of rows: the rows
            # it changed cannot be captured, which must not pass unnoticed.
            self._quarantine(
                builder,
                sql.encode("utf-8"),
                f"mysql:{self._file}:{start}",
                CaptureError(
                    "a statement-format change in the binlog (a session with binlog_format "
                    "STATEMENT or MIXED): its rows are not captured; set binlog_format=ROW "
                    "for every session and re-snapshot the tables it changed: "
                    # The statement carries the values it wrote: with column masks it is
                    # withheld (the quarantine's raw form is withheld too).
                    + (
                        "(statement withheld: the source masks columns)"
                        if self.masker
                        else sql[:200]
                    )
                ),
                now,
            )
        if kind in ("savepoint", "other", "dml"):
            if tx is None:
                self._advance(end)
            return
        self._land_held(builder)
        self._ddl(builder, event, sql, start, end, now)

    def _ddl(
        self, builder: BatchBuilder, event: Any, sql: str, start: int, end: int, now: dt.datetime
    ) -> None:
        s = self.settings
        raw_db = event.schema
        database = (raw_db.decode("utf-8") if isinstance(raw_db, bytes) else str(raw_db)) or None
        tx = self._tx
        gtid = None if tx is None else tx.gtid
        ts_ms = int(event.timestamp) * 1000
        position = _position(self._file_number(), start, _STREAM, 0, 0, self._file, gtid)
        try:
            changes = self._schema.apply(sql, database, ts_ms)
        except DdlParseError as exc:
            raise CaptureStopped(
                f"source {self.name}: cannot parse the DDL at {self._file}:{start}: {exc}"
            ) from exc
        self._pending_history.append(HistoryEntry(position, "ddl", database, sql, gtid, ts_ms))
        for change in changes:
            self._tables.pop((change.database, change.table), None)
            if change.previous is not None:
                self._tables.pop(change.previous, None)
        seq = 0
        emit = self._tx_count_ddl()
        if s.include_schema_changes and emit:
            # DDL that changes no captured table (views, users, other databases) is kept in
            # the history only.
            captured = [c for c in changes if s.table_filter.table(c.database, c.table)]
            if captured:
                record = self._schema_change_record(
                    database or captured[0].database,
                    sql,
                    captured,
                    position,
                    gtid,
                    int(event.slave_proxy_id),
                    ts_ms,
                )
                self._add(
                    builder,
                    record,
                    position,
                    f"mysql:{self._file}:{start}",
                    now,
                    None,
                    None,
                )
                self._last_position = position
                seq = 1
        for change in changes:
            if change.kind == "TRUNCATE" and "t" not in s.rules.skipped_operations:
                table = self._captured(change.database, change.table)
                if isinstance(table, MySqlTable):
                    self._incremental_truncated(table)
                    pos = _position(self._file_number(), start, _STREAM, 0, seq, self._file, gtid)
                    seq += 1
                    source = self._source(table, start, 0, gtid, ts_ms, int(event.slave_proxy_id))
                    record = truncate_record(
                        source, value_schema=table.envelope_schema, topic=table.topic
                    )
                    self._add(builder, record, pos, f"mysql:{self._file}:{start}", now, None, table)
                    self._last_position = pos
        # DDL commits implicitly: the group (GTID + statement) is complete.
        self._tx = None
        self._cut = None
        if gtid is not None:
            self._gtids = self._merge_gtid(gtid)
        self._advance(end)

    def _tx_count_ddl(self) -> bool:
        """Whether the DDL of the open group is new (not landed before a cut)."""
        tx = self._tx
        return True if tx is None else tx.count()

    def _schema_change_record(
        self,
        database: str,
        ddl: str,
        changes: list[SchemaChange],
        position: MySqlPosition,
        gtid: str | None,
        thread: int,
        ts_ms: int,
    ) -> ConnectRecord:
        s = self.settings
        source = {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": s.server_name,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": database,
            "table": changes[0].table if len(changes) == 1 else None,
            "server_id": self._server_id or 0,
            "gtid": gtid,
            "file": position.file,
            "pos": position.pos,
            "row": 0,
            "thread": thread,
            "query": None,
        }
        return schema_change(
            database,
            source,
            ddl=ddl,
            table_changes=[_table_change(c) for c in changes],
            ts_ms=int(time.time() * 1000),
            topic=s.server_name,
        )

    def _commit(
        self, builder: BatchBuilder, start: int, end: int, now: dt.datetime, event: Any
    ) -> None:
        tx = self._tx
        if tx is None:
            self._advance(end)
            return
        if tx.begun:
            self._land_held(builder)
            position = _position(self._file_number(), start, _STREAM, 0, 0, self._file, tx.gtid)
            self._emit_end(builder, tx, position, now)
            self._last_position = position
        self._tx = None
        self._cut = None
        if tx.gtid is not None:
            self._gtids = self._merge_gtid(tx.gtid)
        self._advance(end)

    def _advance(self, end: int) -> None:
        """Everything before ``end`` in the current file is read and complete."""
        self._resume = BinlogPoint(self._file, end, self._gtids)

    def _merge_gtid(self, gtid: str) -> str:
        mariadb = self._dialect is not None and self._dialect.mariadb
        return merge_gtid(self._gtids, gtid, mariadb=mariadb)

    def _file_number(self) -> int:
        numbered = self._numbered
        if numbered[0] == self._file:  # every event asks; the file changes at a rotation
            return numbered[1]
        number = int(self._file.rsplit(".", 1)[-1])
        self._numbered = (self._file, number)
        return number

    def _source(
        self,
        table: MySqlTable,
        pos: int,
        row: int,
        gtid: str | None,
        ts_ms: int,
        thread: int | None,
        query: str | None = None,
        server_id: int | None = None,
    ) -> dict[str, Any]:
        return {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": self.settings.server_name,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": table.schema,
            "table": table.table,
            "server_id": self._server_id if server_id is None else server_id,
            "gtid": gtid,
            "file": self._file,
            "pos": pos,
            "row": row,
            "thread": thread,
            "query": query if self.settings.include_query else None,
        }

    def _rows(self, builder: BatchBuilder, event: Any, start: int, now: dt.datetime) -> None:
        s = self.settings
        tx = self._tx
        if tx is None:  # a row event outside a group: only when the binlog starts mid-group
            tx = self._open_tx(start, None, int(event.timestamp) * 1000)
        db, name = str(event.schema), str(event.table)
        origin = f"mysql:{self._file}:{start}"
        file_number = self._file_number()
        if (db, name) == self.signals.table:
            self._land_held(builder)
            if isinstance(event, WriteRowsEvent):  # the signaling table's rows are never data
                for row_index, row in enumerate(event.rows):
                    at = (file_number, start, row_index, tx)
                    signal = _signal_columns(row["values"])
                    self._signal_row(builder, signal, f"{origin}#{row_index}", at, now)
            return
        table = self._captured(db, name)
        if table is None:
            return
        ts_ms = int(event.timestamp) * 1000
        if isinstance(table, PipelineError):
            self._land_held(builder)
            for row_index, row in enumerate(event.rows):
                position = _position(file_number, start, _STREAM, row_index, 0, self._file, tx.gtid)
                if tx.count():
                    self._quarantine(builder, raw_row(row), f"{origin}#{row_index}", table, now)
                self._last_position = position
            return
        definition = table.definition
        rules = s.rules
        images = getattr(event, "images", None)
        if (
            images is not None
            and self._window is None
            and not isinstance(event, DeleteRowsEvent)
            and not ("c" in rules.skipped_operations or "u" in rules.skipped_operations)
        ):
            where = (start, origin, ts_ms, file_number)
            held = self._held
            if (
                held is not None
                and not rules.provide_transaction_metadata
                and tx.emitted >= tx.skip
            ):
                self._hold(builder, held, event, images, table, tx, where)
                return
            if held is not None:
                self._land_held(builder)
                self._not_held(
                    "transaction metadata"
                    if rules.provide_transaction_metadata
                    else "a cut transaction's replayed part"
                )
            self._decoded_rows(builder, event, images, table, tx, where, now)
            return
        if self._held is not None:
            self._land_held(builder)
            self._not_held(_per_event_reason(event, images, self._window is not None))
        origin_server = int(event.packet.server_id)
        for row_index, row in enumerate(event.rows):
            source = self._source(
                table, start, row_index, tx.gtid, ts_ms, tx.thread, tx.query, origin_server
            )
            try:
                records = self._row_records(event, row, definition, table, source, tx, rules)
            except (ValueConversionError, PipelineError) as exc:
                position = _position(file_number, start, _STREAM, row_index, 0, self._file, tx.gtid)
                if tx.count():
                    self._quarantine(
                        builder, raw_row(row), f"{origin}#{row_index}", exc, now, table
                    )
                self._last_position = position
                continue
            if self._window is not None:
                self._incremental_saw(table, [record.key for record in records])
            self._land(builder, records, (file_number, start, row_index), tx, table, now)

    def _not_held(self, reason: str) -> None:
        counts = self._per_event
        if counts is not None:
            counts[reason] = counts.get(reason, 0) + 1

    def _decoded_rows(
        self,
        builder: BatchBuilder,
        event: Any,
        images: list[tuple[list[Any], dict[int, str] | None]],
        table: MySqlTable,
        tx: MySqlTx,
        where: tuple[int, str, int, int],
        now: dt.datetime,
    ) -> None:
        """The inserts and updates of a row event :class:`BinlogReader` decoded, when neither
        is a skipped operation and no incremental snapshot is open: the same records as the loop of
        :meth:`_rows`, appended to the batch by :class:`RowAppender` (a row whose image has an
        unrepresentable value, or an update that moved the key, takes that loop's road).
        ``where`` is what :meth:`_rows` worked out: the event's start, origin, ``ts_ms`` and
        file number."""
        start, origin, ts_ms, file_number = where
        rules = self.settings.rules
        metadata = rules.provide_transaction_metadata
        definition, collection = table.definition, table.collection
        file, gtid = self._file, tx.gtid
        origin_server = int(event.packet.server_id)
        update = isinstance(event, UpdateRowsEvent)
        op = _OP_UPDATE if update else _OP_CREATE
        appender = self._appender
        if appender is None:
            appender = self._appender = RowAppender(self.partition)
        registered = self._batch_schemas  # what _register would leave alone, not asked again
        if table.key_schema_id not in registered:
            self._register(builder, table.key_schema_id, table.key_schema)
        if table.envelope_schema_id not in registered:
            self._register(builder, table.envelope_schema_id, table.envelope_schema)
        before = old_key = None
        for row_index in range(len(images) >> update):
            source = self._source(
                table, start, row_index, gtid, ts_ms, tx.thread, tx.query, origin_server
            )
            try:
                if update:
                    before, old_key = table.row_and_key(
                        stream_row(definition, *images[2 * row_index])
                    )
                    after, key = table.row_and_key(
                        stream_row(definition, *images[2 * row_index + 1])
                    )
                else:
                    after, key = table.row_and_key(stream_row(definition, *images[row_index]))
            except (ValueConversionError, PipelineError) as exc:
                position = _position(file_number, start, _STREAM, row_index, 0, file, gtid)
                if tx.count():
                    self._quarantine(
                        builder,
                        raw_row(event.rows[row_index]),
                        f"{origin}#{row_index}",
                        exc,
                        now,
                        table,
                    )
                self._last_position = position
                continue
            if (
                after.__class__ is not dict
                or (update and before.__class__ is not dict)
                or (old_key != key and old_key is not None and key is not None)
            ):
                if update:
                    records = update_records(
                        source, (before, after), (old_key, key), table, tx, rules
                    )
                else:
                    records = insert_records(source, after, key, table, tx, rules)
                self._land(builder, records, (file_number, start, row_index), tx, table, now)
                continue
            if metadata and not tx.begun:
                self._begin_record(builder, tx, now)
            position = _position(file_number, start, _STREAM, row_index, 0, file, gtid)
            if tx.count():
                appender.add(
                    builder,
                    op,
                    source,
                    (before, after),
                    key,
                    tx.block(collection, metadata),
                    table,
                    (position, f"{origin}#{row_index}", now, tx.id),
                )
                tx.in_batch += 1
            tx.note_data(collection)
            self._last_position = position

    def _land(
        self,
        builder: BatchBuilder,
        records: list[ConnectRecord],
        at: tuple[int, int, int],
        tx: MySqlTx,
        table: MySqlTable,
        now: dt.datetime,
    ) -> None:
        """Add the records of one row at ``at`` (file number, event start, row index)."""
        file_number, start, row_index = at
        metadata = self.settings.rules.provide_transaction_metadata
        for seq, record in enumerate(records):
            if record.value is not None and not tx.begun and metadata:
                self._begin_record(builder, tx, now)
            position = _position(file_number, start, _STREAM, row_index, seq, self._file, tx.gtid)
            if tx.count():
                origin = f"mysql:{self._file}:{start}#{row_index}"
                self._add(builder, record, position, origin, now, tx, table)
            if record.value is not None:
                tx.note_data(table.collection)
            self._last_position = position

    def _begin_record(self, builder: BatchBuilder, tx: MySqlTx, now: dt.datetime) -> None:
        # BEGIN sorts before every change of its group: it takes the group's first position.
        file, start = tx.start
        position = _position(int(file.rsplit(".", 1)[-1]), start, _STREAM, 0, 0, file, tx.gtid)
        self._emit_begin(builder, tx, position, now)

    def _row_records(
        self,
        event: Any,
        row: Mapping[str, Any],
        definition: TableDef,
        table: MySqlTable,
        source: dict[str, Any],
        tx: MySqlTx,
        rules: AgentRules,
    ) -> list[ConnectRecord]:
        if isinstance(event, WriteRowsEvent):
            if "c" in rules.skipped_operations:
                return []
            values = stream_values(definition, row["values"], row.get("none_sources", {}))
            after, key = table.row_and_key(values)
            return insert_records(source, after, key, table, tx, rules)
        if isinstance(event, DeleteRowsEvent):
            if "d" in rules.skipped_operations:
                return []
            values = stream_values(definition, row["values"], row.get("none_sources", {}))
            before, key = table.row_and_key(values)
            return delete_records(source, before, key, table, tx, rules)
        old = stream_values(definition, row["before_values"], row.get("before_none_sources", {}))
        new = stream_values(definition, row["after_values"], row.get("after_none_sources", {}))
        before, old_key = table.row_and_key(old)
        after, new_key = table.row_and_key(new)
        return update_records(source, (before, after), (old_key, new_key), table, tx, rules)


def _signal_columns(values: Mapping[str, Any]) -> dict[str, Any]:
    """A signaling-table row image -> ``id``, ``type``, ``data`` (its first three columns, by
    position: without ``binlog_row_metadata=FULL`` the image has no column names)."""
    texts = [v.decode("utf-8", "replace") if isinstance(v, bytes) else v for v in values.values()]
    texts += [None] * (3 - len(texts))
    return {"id": texts[0], "type": texts[1], "data": texts[2]}


def _table_change(change: SchemaChange) -> dict[str, Any]:
    """Debezium's ``tableChanges`` item (``id`` is ``"db"."table"``, ``old,new`` on a rename)."""
    table_id = f'"{change.database}"."{change.table}"'
    if change.previous is not None:
        table_id = f'"{change.previous[0]}"."{change.previous[1]}",{table_id}'
    definition = change.definition
    return {
        "type": change.kind,
        "id": table_id,
        "table": None
        if definition is None
        else {
            "defaultCharsetName": definition.charset,
            "primaryKeyColumnNames": list(definition.primary_key),
            "columns": [
                {
                    "name": c.name,
                    "typeName": c.type_name.upper(),
                    "length": c.length,
                    "scale": c.scale,
                    "position": i + 1,
                    "optional": c.nullable,
                    "autoIncremented": c.auto_increment,
                    "generated": c.generated,
                    "enumValues": list(c.values) if c.values else None,
                    "charsetName": c.charset,
                }
                for i, c in enumerate(definition.columns)
            ],
        },
    }


def _per_event_reason(event: Any, images: Any, window: bool) -> str:
    """Why a row event of a captured table takes the per-event road (for the DEBUG log)."""
    if window:
        return "an incremental-snapshot window is open"
    if isinstance(event, DeleteRowsEvent):
        return "deletes"
    if images is None:
        return "images the library decoded"
    return "a skipped operation"


_ROW_EVENTS: Final = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
_HOLDS_NOTHING: Final = (
    GtidEvent,
    MariadbGtidEvent,
    XidEvent,
    QueryEvent,
    WriteRowsEvent,
    UpdateRowsEvent,
    DeleteRowsEvent,
)
"""Events that add no record before their handler lands the held rows where it must (a row
event that is not held, a statement that adds a record, an END)."""

_position = MySqlPosition._new
_OP_CREATE, _OP_UPDATE = Op.CREATE.value, Op.UPDATE.value
_STREAM = Phase.STREAM
"""Looked up once: an enum member read from its class is a descriptor call (Python 3.11), and
the row loop needs it for every record."""
