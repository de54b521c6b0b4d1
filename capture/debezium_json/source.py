"""Land existing Debezium output: JSON-lines files of change records.

Users of a running Debezium deployment adopt medallion through this source, and every later
stage can be tested against real Debezium output. It reads one file or a directory of files
(consumed in name order, each exactly once) in these line formats, detected per line when
``format: auto``:

``envelope``
    One value per line as Kafka Connect's JsonConverter writes it, with (``{"schema":..,
    "payload":..}``) or without schemas: Debezium Server's output. Such lines carry no key.
``kafka_json``
    One object per line with ``key``, ``value`` (or kcat's ``payload``), optional ``headers``
    (object, ``[name, value, ...]`` list, or list of ``{key, value}``) and ``topic``. Key and
    value may be JSON objects or JSON text: the shape of ``kcat -J`` and similar topic dumps.
``key_tab_value``
    ``<key JSON>\\t<value JSON>``: ``kafka-console-consumer --property print.key=true``.

Records land with the same columns and positions the native agents produce. A line that cannot
be landed goes to quarantine with the raw bytes, the reason and ``file:line``; the batch goes
on. The offset (file, byte, line, finished files and the position resolvers' state) is committed
with each batch, so a restart continues exactly after the last committed line.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar, Final

import orjson

from bronze.batch import BatchBuilder, QuarantinedRecord
from bronze.connect_schema import schema_id
from bronze.envelope import (
    TX_ID_WITH_LSN,
    ChangeEvent,
    RecordKind,
    classify,
    normalize_tx_id,
    require_collection,
)
from bronze.positions import ArrivalPosition, Position, PositionResolver
from capture.base import CaptureSource, SourceBatch, gc_paused
from capture.debezium_json.formats import FORMATS, Parsed, dumps, parse_line
from capture.debezium_json.offsets import FileTracker, TrackedFile
from capture.masking import ColumnMasker
from pipeline.errors import CaptureError, EnvelopeError, PipelineError, SourceUnavailable

__all__ = ["DebeziumJsonSource", "OFFSET_FORMAT", "ORDER_BY"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 2
"""Version of the offset document this source writes (1: files keyed by name only, migrated)."""

ORDER_BY = ("source", "arrival")
"""``order.by`` values: source positions (default) or arrival order (docs/bronze.md)."""

_PARTITION_FIELDS: dict[str, tuple[str, ...]] = {
    # Positions compare only within Debezium's source partition: per replica set for MongoDB,
    # per database for SQL Server; one logical server elsewhere.
    "mongodb": ("name", "rs"),
    "sqlserver": ("name", "db"),
}
_DEFAULT_PARTITION_FIELDS = ("name",)

_NATIVE_TX_FIELDS = ("txId", "gtid", "commit_lsn", "commit_scn", "stxnid", "txnNumber")
"""Source fields that identify a transaction when ``transaction.id`` is absent, in the order
tried (PG/Oracle/YB txId, MySQL GTID, SQL Server/Db2 commit LSN, Oracle commit SCN, MongoDB)."""

_TRANSACTION_TOPIC_SUFFIX = ".transaction"

_Pending = tuple["_Line", ChangeEvent, Parsed, str]


_ORPHAN_TOMBSTONE: Final = (
    "tombstone (null value) before any landed data record of its stream: no position to order it "
    "by (its delete was quarantined, or is not in this source); a tombstone changes nothing in "
    "silver, so nothing is lost"
)


class _Line:
    __slots__ = ("raw", "number", "end", "entry", "name")

    def __init__(self, raw: bytes, number: int, end: int, entry: TrackedFile) -> None:
        self.raw = raw
        self.number = number
        self.end = end
        self.entry = entry
        self.name = entry.name


class DebeziumJsonSource(CaptureSource):
    """Reads Debezium JSON records from files and lands them in bronze.

    Args:
        name: The configured source name.
        path: A JSON-lines file or a directory of them.
        file_pattern: Glob of files to read inside a directory.
        line_format: One of :data:`capture.debezium_json.formats.FORMATS`.
        connector_hint: Connector for records that carry no ``source`` block (or no
            ``source.connector``).
        masker: Column masks applied to row images before they reach bronze.
        order_by: ``source`` (positions from each record's source block; records without one
            are quarantined) or ``arrival`` (every record ordered by when it was read).

    A line is read only once its newline is there: an unterminated last line is left for later,
    whether or not the agent follows the source (a writer may be mid-line).
    """

    KIND: ClassVar[str] = "debezium_json"
    ACKNOWLEDGES: ClassVar[bool] = False
    REPLAYABLE: ClassVar[bool] = True

    def __init__(
        self,
        name: str,
        path: Path,
        *,
        file_pattern: str = "*.jsonl",
        line_format: str = "auto",
        connector_hint: str | None = None,
        masker: ColumnMasker | None = None,
        order_by: str = "source",
    ) -> None:
        super().__init__(name)
        if line_format not in FORMATS:
            raise CaptureError(f"source {name}: format '{line_format}' is not one of {FORMATS}")
        self.path = Path(path)
        self.file_pattern = file_pattern
        self.line_format = line_format
        self._files = FileTracker(name, self.path, file_pattern)
        self._warned_tail: set[tuple[str, int]] = set()
        self._init_landing(connector_hint, masker, order_by)

    def _init_landing(
        self, connector_hint: str | None, masker: ColumnMasker | None, order_by: str
    ) -> None:
        """The state of turning records into bronze rows, shared with the ``kafka`` source
        (which reads records instead of lines through the hooks :meth:`_lines`,
        :meth:`_parse`, :meth:`_consume`, :meth:`_reached` and :meth:`_offset`)."""
        if order_by not in ORDER_BY:
            raise CaptureError(
                f"source {self.name}: order.by '{order_by}' is not one of {ORDER_BY}"
            )
        self.connector_hint = connector_hint
        self.masker = masker
        self.arrival_order = order_by == "arrival"
        self._resolvers: dict[str, PositionResolver] = {}
        self._last_partition: str | None = None
        self._arrival = 0
        self._schema_cache: dict[bytes, str] = {}

    @classmethod
    def from_config(cls, config: Any) -> DebeziumJsonSource:
        """Build from a validated ``debezium_json`` source config."""
        return cls(
            config.name,
            Path(config.path),
            file_pattern=config.file_pattern,
            line_format=str(config.format),
            connector_hint=config.connector_hint,
            masker=ColumnMasker.from_source(config),
            order_by=str(config.order_by),
        )

    # --- offsets -----------------------------------------------------------------------------
    def open(self, offset: Mapping[str, Any] | None) -> None:
        """Resume after ``offset`` (None: from the first line of the first file).

        Raises:
            SourceUnavailable: ``path`` does not exist.
            CaptureError: The offset has a format this version cannot read.
        """
        if not self.path.exists():
            raise SourceUnavailable(f"source {self.name}: {self.path} does not exist")
        if offset is None:
            return
        fmt = offset.get("format")
        if fmt not in (1, OFFSET_FORMAT):
            raise CaptureError(
                f"source {self.name}: committed offset has format {fmt!r}, this version reads "
                f"formats 1 and {OFFSET_FORMAT}; it was written by a newer medallion"
            )
        self._files.load(offset.get("files", {}), int(fmt))
        self._last_partition = offset.get("last_partition")
        self._arrival = int(offset.get("arrival", 0))
        self._resolvers = {
            part: PositionResolver(state["connector"], state["state"])
            for part, state in offset.get("positions", {}).items()
        }

    def _offset(self) -> dict[str, Any]:
        return {
            "format": OFFSET_FORMAT,
            "files": self._files.dump(),
            "last_partition": self._last_partition,
            "arrival": self._arrival,
            "positions": {
                part: {"connector": r.connector, "state": r.state()}
                for part, r in self._resolvers.items()
            },
        }

    # --- files -------------------------------------------------------------------------------
    def _lines(self) -> Iterator[_Line]:
        """Complete lines after the committed progress, file by file in name order.

        Progress is not moved here: the caller consumes each line it lands or quarantines.
        Every file keeps its own progress, so a file that grows later (the newest file of a
        Debezium Server writer) is read on from where it was left.
        """
        for path, entry, size in self._files.scan():
            self._files.mark_size(entry, size)
            if size == entry.byte:
                continue
            try:
                handle = path.open("rb")
            except FileNotFoundError as exc:
                raise SourceUnavailable(f"source {self.name}: {path} vanished") from exc
            with handle:
                handle.seek(entry.byte)
                pos, number = entry.byte, entry.line
                for raw in handle:
                    if raw[-1:] != b"\n":
                        self._unterminated(path, pos, len(raw))
                        break  # a writer may still be appending this line
                    pos += len(raw)
                    number += 1
                    yield _Line(raw, number, pos, entry)

    def _unterminated(self, path: Path, at: int, length: int) -> None:
        if self.follow or (str(path), at) in self._warned_tail:
            return
        self._warned_tail.add((str(path), at))
        logger.warning(
            "source %s: %s ends with %s bytes without a newline at byte %s; they are read once "
            "the line's newline is written (a producer must end every record with one)",
            self.name,
            path,
            length,
            at,
        )

    # --- reading -----------------------------------------------------------------------------
    def read_batch(
        self,
        *,
        max_events: int,
        max_transaction_events: int,
        until: Mapping[str, Any] | None = None,
    ) -> SourceBatch:
        """Read the next batch; see :meth:`CaptureSource.read_batch`.

        Raises:
            FileIdentityError: A file shrank, was replaced or vanished with unread bytes.
        """
        with gc_paused():
            return self._read_batch(max_events, max_transaction_events, until)

    def _read_batch(
        self, max_events: int, max_transaction_events: int, until: Mapping[str, Any] | None
    ) -> SourceBatch:
        builder = BatchBuilder(self.name)
        now = dt.datetime.now(dt.UTC)
        open_tx: str | None = None
        open_tx_rows = 0
        pending: list[_Pending] = []
        exhausted = True
        hint, masker = self.connector_hint, self.masker
        sourceless = self.arrival_order
        land = self._land_arrival if sourceless else self._land
        for line in self._lines():
            if until is not None and self._reached(until):
                exhausted = False
                break
            origin = f"{line.name}:{line.number}"
            try:
                parsed = self._parse(line, origin)
                if parsed is None:
                    self._consume(line)
                    continue
                event = classify(
                    parsed[0], origin=origin, connector_hint=hint, allow_sourceless=sourceless
                )
                kind = event.kind
                if kind is RecordKind.DATA:
                    if event.collection is None:
                        require_collection(event, origin)
                    if masker is not None:
                        event, parsed = self._mask(event, parsed, origin)
                tx_key = self._transaction_key(event)
            except Exception as exc:  # noqa: BLE001 - one bad record never stops the batch
                builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
                self._consume(line)
                continue
            if tx_key is None and kind is RecordKind.TOMBSTONE:
                # A tombstone follows its delete and belongs to the delete's transaction.
                tx_key = open_tx
            if until is None and len(builder) >= max_events:
                if open_tx is None or tx_key != open_tx:
                    exhausted = False
                    break
                if open_tx_rows >= max_transaction_events:
                    builder.mark_partial(open_tx)
                    exhausted = False
                    break
            if not land(builder, line, event, parsed, origin, now, pending, tx_key):
                continue
            if kind is RecordKind.TRANSACTION:
                if event.tx_status == "BEGIN":
                    open_tx, open_tx_rows = tx_key, 0
                else:
                    open_tx, open_tx_rows = None, 0
            elif tx_key is not None:
                if tx_key != open_tx:
                    open_tx, open_tx_rows = tx_key, 0
                open_tx_rows += 1
            elif kind is not RecordKind.TOMBSTONE:
                open_tx, open_tx_rows = None, 0
        if pending:
            # Control records before the stream's first data record have no position yet;
            # they stay unconsumed and land with the first data record.
            logger.warning(
                "source %s: %s record(s) from %s wait for the first data record to get a position",
                self.name,
                len(pending),
                pending[0][3],
            )
        return SourceBatch(builder, self._offset(), exhausted)

    def _parse(self, line: _Line, origin: str) -> Parsed | None:
        """The record of ``line``; None for a blank line (consumed, nothing landed).

        Raises:
            EnvelopeError: The line is not a record of the configured format.
        """
        stripped = line.raw.strip()
        if not stripped:
            return None
        return parse_line(stripped, self.line_format, origin)

    def _reached(self, until: Mapping[str, Any]) -> bool:
        """True when everything up to ``until`` (a committed offset) has been consumed."""
        return self._files.reached(until.get("files", {}))

    def _consume(self, line: _Line) -> None:
        # A held-back control line may belong to an earlier file than the one being read.
        entry = line.entry
        entry.byte = line.end
        entry.line = line.number

    # --- transactions ------------------------------------------------------------------------
    def _transaction_key(self, event: ChangeEvent) -> str | None:
        """The normalised transaction identity (contract C3) bronze stores in ``tx_id``."""
        tx = event.transaction
        if tx is not None:
            tx_id = tx.id
            if ":" in tx_id:
                connector = event.connector
                if connector is None:  # BEGIN/END carry no source block
                    connector = self._control_connector(event)
                if connector in TX_ID_WITH_LSN:
                    return normalize_tx_id(connector, tx_id)
            return tx_id
        source = event.source
        if source is None:
            return None
        for name in _NATIVE_TX_FIELDS:
            value = source.get(name)
            if value is not None:
                return str(value)
        return None

    def _control_connector(self, event: ChangeEvent) -> str | None:
        """The connector of a record without a source block: that of its source partition.

        The transaction topic is ``<topic.prefix>.transaction`` and the prefix is the logical
        server name, the first part of the partition; without a topic, the partition of the
        last data record (Debezium writes BEGIN/END into the stream they delimit).
        """
        topic = event.record.topic
        if topic is not None and topic.endswith(_TRANSACTION_TOPIC_SUFFIX):
            server = topic[: -len(_TRANSACTION_TOPIC_SUFFIX)]
            for part, known in self._resolvers.items():
                if part.split("/", 1)[0] == server:
                    return known.connector
        last = self._resolvers.get(self._last_partition or "")
        return None if last is None else last.connector

    # --- positions ---------------------------------------------------------------------------
    def _land(
        self,
        builder: BatchBuilder,
        line: _Line,
        event: ChangeEvent,
        parsed: Parsed,
        origin: str,
        now: dt.datetime,
        pending: list[_Pending],
        tx_id: str | None,
    ) -> bool:
        """Resolve the position and add the event; False if it waits or was quarantined."""
        source = event.source
        if source is None or event.kind is RecordKind.TOMBSTONE:
            resolver = self._resolvers.get(self._last_partition or "")
            if resolver is None:
                if event.kind is RecordKind.TOMBSTONE:
                    # A tombstone follows its delete; with no landed data record before it (its
                    # delete was quarantined, or never was in this source) nothing can order it,
                    # and waiting would leave it in neither bronze table.
                    orphan = EnvelopeError(_ORPHAN_TOMBSTONE, origin=origin)
                    builder.add_quarantined(_quarantined(line.raw, origin, orphan, now))
                    self._consume(line)
                    return False
                pending.append((line, event, parsed, origin))
                return False
            try:
                position = resolver.for_control()
                self._add(
                    builder, event, parsed, position, origin, now, self._last_partition, tx_id
                )
            except Exception as exc:  # noqa: BLE001 - quarantined with its reason
                builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
                self._consume(line)
                return False
            self._consume(line)
            return True
        try:
            connector = event.connector
            if connector is None:
                event = self._schema_change_connector(event, origin)
                connector = event.connector or ""
            partition = _partition(connector, source)
            resolver = self._resolvers.get(partition)
            if resolver is None:
                resolver = PositionResolver(connector)
            position = resolver.for_data(source, origin=origin)
        except Exception as exc:  # noqa: BLE001 - quarantined with its reason
            builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
            self._consume(line)
            return False
        self._resolvers[partition] = resolver
        self._last_partition = partition
        if pending:
            # Waiting control records sort just before this first data record.
            for p_line, p_event, p_parsed, p_origin in pending:
                control = resolver.for_control()
                self._add_or_quarantine(
                    builder,
                    p_line,
                    p_event,
                    p_parsed,
                    control,
                    p_origin,
                    now,
                    partition,
                    self._transaction_key(p_event),
                )
            pending.clear()
            position = resolver.for_control()
        try:
            self._add(builder, event, parsed, position, origin, now, partition, tx_id)
        except Exception as exc:  # noqa: BLE001 - quarantined with its reason
            builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
            self._consume(line)
            return False
        self._consume(line)
        return True

    def _schema_change_connector(self, event: ChangeEvent, origin: str) -> ChangeEvent:
        # 0.x/1.2 MySQL schema changes carry a source block without 'connector'.
        connector = self._control_connector(event)
        if connector is None:
            raise EnvelopeError(
                f"{event.kind.value} record's source has no 'connector' and no data record of "
                "this source came before it to take the connector from: set 'connector.hint' "
                "on the source",
                origin=origin,
            )
        return dataclasses.replace(event, connector=connector)

    def _land_arrival(
        self,
        builder: BatchBuilder,
        line: _Line,
        event: ChangeEvent,
        parsed: Parsed,
        origin: str,
        now: dt.datetime,
        pending: list[_Pending],
        tx_id: str | None,
    ) -> bool:
        """``order.by: arrival``: every record's position is its arrival number."""
        source = event.source
        if source is not None and event.connector is not None:
            partition: str | None = _partition(event.connector, source)
        else:
            partition = _topic_server(event.record.topic) or self._last_partition
        position = ArrivalPosition._new(self._arrival, 0)
        if not self._add_or_quarantine(
            builder, line, event, parsed, position, origin, now, partition, tx_id
        ):
            return False
        self._arrival += 1
        if partition is not None:
            self._last_partition = partition
        return True

    def _add_or_quarantine(
        self,
        builder: BatchBuilder,
        line: _Line,
        event: ChangeEvent,
        parsed: Parsed,
        position: Position,
        origin: str,
        now: dt.datetime,
        partition: str | None,
        tx_id: str | None,
    ) -> bool:
        try:
            self._add(builder, event, parsed, position, origin, now, partition, tx_id)
        except Exception as exc:  # noqa: BLE001 - quarantined with its reason
            builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
            self._consume(line)
            return False
        self._consume(line)
        return True

    def _add(
        self,
        builder: BatchBuilder,
        event: ChangeEvent,
        parsed: Parsed,
        position: Position,
        origin: str,
        now: dt.datetime,
        partition: str | None,
        tx_id: str | None,
    ) -> None:
        record, key_text, value_text = parsed
        key, value = record.key, record.value
        builder.add_event(
            event,
            position,
            key_json=(
                key_text.decode() if key_text is not None else None if key is None else dumps(key)
            ),
            value_json=(
                value_text.decode()
                if value_text is not None
                else None
                if value is None
                else dumps(value)
            ),
            key_schema_id=None
            if record.key_schema is None
            else self._register(builder, record.key_schema),
            value_schema_id=None
            if record.value_schema is None
            else self._register(builder, record.value_schema),
            origin=origin,
            capture_ts=now,
            tx_id=tx_id,
            source_partition=partition,
        )

    def _register(self, builder: BatchBuilder, schema: Mapping[str, Any] | None) -> str | None:
        if schema is None:
            return None
        try:
            canonical = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # an integer beyond 64 bits (a default value, a parameter)
            canonical = dumps(_sorted(schema)).encode()
        sid = self._schema_cache.get(canonical)
        if sid is None:
            sid = schema_id(schema)
            self._schema_cache[canonical] = sid
        name = schema.get("name")
        builder.add_schema(sid, name if isinstance(name, str) else None, canonical.decode())
        return sid

    def _mask(self, event: ChangeEvent, parsed: Parsed, origin: str) -> tuple[ChangeEvent, Parsed]:
        masker = self.masker
        record = parsed[0]
        value = record.value
        if (
            masker is None
            or value is None
            or event.collection is None
            or not masker.applies_to(event.collection)
        ):
            return event, parsed
        masked = dict(value)
        retyped: set[str] = set()
        for image in ("before", "after"):
            row = value.get(image)
            if isinstance(row, dict):
                masked[image] = masker.apply(event.collection, row)
                retyped |= _retyped(masker, event.collection, row)
        key = record.key
        key_schema = record.key_schema
        if isinstance(key, dict):
            key_retyped = _retyped(masker, event.collection, key)
            key = masker.apply(event.collection, key)
            if key_retyped and isinstance(key_schema, dict):
                key_schema = _as_strings(key_schema, key_retyped)
        value_schema = record.value_schema
        if retyped and isinstance(value_schema, dict):
            # A masked number or document is text now: its schema field must say so.
            value_schema = {
                **value_schema,
                "fields": [
                    _as_strings(f, retyped) if f.get("field") in ("before", "after") else f
                    for f in value_schema.get("fields", [])
                ],
            }
        record = dataclasses.replace(
            record, key=key, key_schema=key_schema, value=masked, value_schema=value_schema
        )
        # The verbatim value text is unmasked: drop it so bronze stores the masked payload.
        event = classify(
            record,
            origin=origin,
            connector_hint=self.connector_hint,
            allow_sourceless=self.arrival_order,
        )
        return event, (record, parsed[1], None)


# --- helpers -----------------------------------------------------------------------------------
def _retyped(masker: ColumnMasker, collection: str, row: Mapping[str, Any]) -> set[str]:
    """Columns of ``row`` a mask turns from a non-string value into text."""
    return {
        name
        for name, value in row.items()
        if value is not None
        and not isinstance(value, str | bytes)
        and masker.covers(collection, name)
    }


def _as_strings(struct: Mapping[str, Any], names: set[str]) -> dict[str, Any]:
    """``struct`` (a Connect struct schema) with the fields ``names`` made optional-or-not
    strings, as the masked values are."""
    fields = []
    for f in struct.get("fields", []):
        if isinstance(f, dict) and f.get("field") in names:
            f = {"type": "string", "optional": bool(f.get("optional")), "field": f["field"]}
        fields.append(f)
    return {**struct, "fields": fields}


def _partition(connector: str, source: Mapping[str, Any]) -> str:
    fields = _PARTITION_FIELDS.get(connector, _DEFAULT_PARTITION_FIELDS)
    return "/".join(str(source.get(f, "")) for f in fields)


def _topic_server(topic: str | None) -> str | None:
    # <prefix>.<schema>.<table> or <prefix>.transaction: the prefix is the logical server name.
    if not topic:
        return None
    if topic.endswith(_TRANSACTION_TOPIC_SUFFIX):
        return topic[: -len(_TRANSACTION_TOPIC_SUFFIX)] or None
    parts = topic.split(".")
    return ".".join(parts[:-2]) or None if len(parts) >= 3 else None


def _sorted(doc: Any) -> Any:
    if isinstance(doc, Mapping):
        return {k: _sorted(doc[k]) for k in sorted(doc)}
    if isinstance(doc, list):
        return [_sorted(v) for v in doc]
    return doc


def _quarantined(raw: bytes, origin: str, exc: Exception, now: dt.datetime) -> QuarantinedRecord:
    if isinstance(exc, PipelineError):
        reason = getattr(exc, "reason", None) or str(exc)
    else:
        # Not an expected rejection: still one record, still quarantined, but say it is ours.
        reason = (
            f"unexpected {type(exc).__name__} while landing this record: {exc} (a medallion "
            "bug: please report it with this record)"
        )
    return QuarantinedRecord(origin, reason, type(exc).__name__, raw.rstrip(b"\r\n"), now)
