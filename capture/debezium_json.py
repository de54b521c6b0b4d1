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
from typing import Any, ClassVar

import orjson

from bronze.batch import BatchBuilder, QuarantinedRecord
from bronze.connect_schema import schema_id
from bronze.envelope import ChangeEvent, ConnectRecord, RecordKind, classify, fast_record
from bronze.positions import Position, PositionResolver
from capture.base import CaptureSource, SourceBatch, gc_paused
from capture.masking import ColumnMasker
from pipeline.errors import CaptureError, EnvelopeError, PipelineError, SourceUnavailable

__all__ = ["DebeziumJsonSource", "OFFSET_FORMAT"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""

FORMATS = ("auto", "envelope", "kafka_json", "key_tab_value")

_WRAPPER_KEYS = frozenset(
    {
        "key",
        "value",
        "payload",
        "headers",
        "topic",
        "partition",
        "offset",
        "timestamp",
        "ts",
        "tstype",
        "broker",
        "key_schema",
        "value_schema",
        "timestampType",
    }
)

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


_Parsed = tuple[ConnectRecord, bytes | None, bytes | None]
"""A parsed record and, when available verbatim, the JSON text of its key and value payloads."""
_Pending = tuple["_Line", ChangeEvent, _Parsed, str]


class _Line:
    __slots__ = ("raw", "number", "end", "file")

    def __init__(self, raw: bytes, number: int, end: int, file: str) -> None:
        self.raw = raw
        self.number = number
        self.end = end
        self.file = file


class DebeziumJsonSource(CaptureSource):
    """Reads Debezium JSON records from files and lands them in bronze.

    Args:
        name: The configured source name.
        path: A JSON-lines file or a directory of them.
        file_pattern: Glob of files to read inside a directory.
        line_format: One of :data:`FORMATS`.
        connector_hint: Connector for records that carry no ``source`` block.
        masker: Column masks applied to row images before they reach bronze.

    When the agent follows the source (``follow``), an unterminated last line is left for later
    (a writer may be mid-line); otherwise the last line of a file counts without a newline.
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
    ) -> None:
        super().__init__(name)
        if line_format not in FORMATS:
            raise CaptureError(f"source {name}: format '{line_format}' is not one of {FORMATS}")
        self.path = Path(path)
        self.file_pattern = file_pattern
        self.line_format = line_format
        self.connector_hint = connector_hint
        self.masker = masker
        self._progress: dict[str, tuple[int, int]] = {}
        self._resolvers: dict[str, PositionResolver] = {}
        self._last_partition: str | None = None
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
        )

    # --- offsets -----------------------------------------------------------------------------
    def open(self, offset: Mapping[str, Any] | None) -> None:
        """Resume after ``offset`` (None: from the first line of the first file)."""
        if not self.path.exists():
            raise SourceUnavailable(f"source {self.name}: {self.path} does not exist")
        if offset is None:
            return
        if offset.get("format") != OFFSET_FORMAT:
            raise CaptureError(
                f"source {self.name}: committed offset has format {offset.get('format')!r}, "
                f"this version reads format {OFFSET_FORMAT}"
            )
        self._progress = {
            name: (int(byte), int(line)) for name, (byte, line) in offset.get("files", {}).items()
        }
        self._last_partition = offset.get("last_partition")
        self._resolvers = {
            part: PositionResolver(state["connector"], state["state"])
            for part, state in offset.get("positions", {}).items()
        }

    def _offset(self) -> dict[str, Any]:
        return {
            "format": OFFSET_FORMAT,
            "files": {name: [byte, line] for name, (byte, line) in self._progress.items()},
            "last_partition": self._last_partition,
            "positions": {
                part: {"connector": r.connector, "state": r.state()}
                for part, r in self._resolvers.items()
            },
        }

    # --- files -------------------------------------------------------------------------------
    def _files(self) -> list[Path]:
        if self.path.is_file():
            return [self.path]
        return sorted(p for p in self.path.glob(self.file_pattern) if p.is_file())

    def _file_key(self, path: Path) -> str:
        return path.name if self.path.is_dir() else str(path)

    def _lines(self) -> Iterator[_Line]:
        """Lines after the committed progress, file by file in name order.

        The offset is not moved here: the caller consumes each line it lands or quarantines.
        Every file keeps its own (byte, line) progress, so a file that grows later (the newest
        file of a Debezium Server writer) is read on from where it was left.
        """
        for path in self._files():
            key = self._file_key(path)
            byte, number = self._progress.get(key, (0, 0))
            try:
                size = path.stat().st_size
            except FileNotFoundError:
                continue
            if size < byte:
                logger.warning(
                    "source %s: %s shrank below its committed offset %s; skipped (rotated or "
                    "rewritten files are not re-read)",
                    self.name,
                    path,
                    byte,
                )
                continue
            if size == byte:
                continue
            try:
                handle = path.open("rb")
            except FileNotFoundError as exc:
                raise SourceUnavailable(f"source {self.name}: {path} vanished") from exc
            with handle:
                handle.seek(byte)
                pos = byte
                for raw in handle:
                    pos += len(raw)
                    number += 1
                    if not raw.endswith(b"\n") and self.follow:
                        return  # a writer may still be appending this line
                    yield _Line(raw, number, pos, key)

    # --- reading -----------------------------------------------------------------------------
    def read_batch(
        self,
        *,
        max_events: int,
        max_transaction_events: int,
        until: Mapping[str, Any] | None = None,
    ) -> SourceBatch:
        """Read the next batch; see :meth:`CaptureSource.read_batch`."""
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
        parse, hint, masker = self._parse, self.connector_hint, self.masker
        for line in self._lines():
            if until is not None and self._reached(until):
                exhausted = False
                break
            stripped = line.raw.strip()
            if not stripped:
                self._consume(line)
                continue
            origin = f"{line.file}:{line.number}"
            try:
                parsed = parse(stripped, origin)
                event = classify(parsed[0], origin=origin, connector_hint=hint)
                if masker is not None and event.kind is RecordKind.DATA:
                    event, parsed = self._mask(event, parsed, origin)
            except PipelineError as exc:
                builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
                self._consume(line)
                continue
            kind = event.kind
            tx_key = _transaction_key(event)
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
            if not self._land(builder, line, event, parsed, origin, now, pending, tx_key):
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

    def _reached(self, until: Mapping[str, Any]) -> bool:
        progress = self._progress
        return all(
            progress.get(name, (0, 0))[0] >= int(target[0])
            for name, target in until.get("files", {}).items()
        )

    def _consume(self, line: _Line) -> None:
        # A held-back control line may belong to an earlier file than the one being read.
        self._progress[line.file] = (line.end, line.number)

    def _land(
        self,
        builder: BatchBuilder,
        line: _Line,
        event: ChangeEvent,
        parsed: _Parsed,
        origin: str,
        now: dt.datetime,
        pending: list[_Pending],
        tx_id: str | None,
    ) -> bool:
        """Resolve the position and add the event; False if it waits for a position."""
        source = event.source
        if source is None or event.kind is RecordKind.TOMBSTONE:
            resolver = self._resolvers.get(self._last_partition or "")
            if resolver is None:
                pending.append((line, event, parsed, origin))
                return False
            try:
                position = resolver.for_control()
            except PipelineError as exc:
                builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
                self._consume(line)
                return False
            self._add(builder, event, parsed, position, origin, now, self._last_partition, tx_id)
            self._consume(line)
            return True
        partition = _partition(event.connector or "", source)
        resolver = self._resolvers.get(partition)
        try:
            if resolver is None:
                resolver = PositionResolver(event.connector or "")
            position = resolver.for_data(source, origin=origin)
        except PipelineError as exc:
            builder.add_quarantined(_quarantined(line.raw, origin, exc, now))
            self._consume(line)
            return False
        self._resolvers[partition] = resolver
        self._last_partition = partition
        if pending:
            # Waiting control records sort just before this first data record.
            for p_line, p_event, p_parsed, p_origin in pending:
                control = resolver.for_control()
                self._add(
                    builder,
                    p_event,
                    p_parsed,
                    control,
                    p_origin,
                    now,
                    partition,
                    _transaction_key(p_event),
                )
                self._consume(p_line)
            pending.clear()
            position = resolver.for_control()
        self._add(builder, event, parsed, position, origin, now, partition, tx_id)
        self._consume(line)
        return True

    def _add(
        self,
        builder: BatchBuilder,
        event: ChangeEvent,
        parsed: _Parsed,
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
                key_text.decode()
                if key_text is not None
                else None
                if key is None
                else orjson.dumps(key).decode()
            ),
            value_json=(
                value_text.decode()
                if value_text is not None
                else None
                if value is None
                else orjson.dumps(value).decode()
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
        canonical = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        sid = self._schema_cache.get(canonical)
        if sid is None:
            sid = schema_id(schema)
            self._schema_cache[canonical] = sid
        name = schema.get("name")
        builder.add_schema(sid, name if isinstance(name, str) else None, canonical.decode())
        return sid

    def _mask(
        self, event: ChangeEvent, parsed: _Parsed, origin: str
    ) -> tuple[ChangeEvent, _Parsed]:
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
        for image in ("before", "after"):
            row = value.get(image)
            if isinstance(row, dict):
                masked[image] = masker.apply(event.collection, row)
        record = dataclasses.replace(record, value=masked)
        # The verbatim value text is unmasked: drop it so bronze stores the masked payload.
        event = classify(record, origin=origin, connector_hint=self.connector_hint)
        return event, (record, parsed[1], None)

    # --- line formats ------------------------------------------------------------------------
    def _parse(self, line: bytes, origin: str) -> _Parsed:
        """Parse one line; also return the key/value JSON text when the line holds it as is."""
        fmt = self.line_format
        if fmt == "key_tab_value" or (fmt == "auto" and b"\t" in line and _tab_split(line)):
            key_text, _, value_text = line.partition(b"\t")
            key = _loads(key_text, origin, "key")
            value = _loads(value_text, origin, "value")
            return _record(key, value, (), None, origin, key_text, value_text)
        obj = _loads(line, origin, "line")
        if fmt == "kafka_json" or (fmt == "auto" and _is_wrapper(obj)):
            if not isinstance(obj, dict):
                raise EnvelopeError("a kafka_json line must be a JSON object", origin=origin)
            return _from_wrapper(obj, origin)
        return _record(None, obj, (), None, origin, None, line)


# --- helpers -----------------------------------------------------------------------------------
def _loads(text: bytes, origin: str, what: str) -> Any:
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise EnvelopeError(f"{what} is not valid JSON: {exc}", origin=origin) from None


def _tab_split(line: bytes) -> bool:
    # A raw tab cannot occur inside a JSON string, so a tab outside whitespace between tokens
    # means key<TAB>value; confirm the left part is a whole JSON value.
    left = line.partition(b"\t")[0].strip()
    if not left:
        return False
    try:
        orjson.loads(left)
    except orjson.JSONDecodeError:
        return False
    return True


def _is_wrapper(obj: Any) -> bool:
    return (
        isinstance(obj, dict)
        and "key" in obj
        and ("value" in obj or "payload" in obj)
        and obj.keys() <= _WRAPPER_KEYS
    )


def _from_wrapper(obj: dict[str, Any], origin: str) -> _Parsed:
    value = obj["value"] if "value" in obj else obj.get("payload")
    key = obj.get("key")
    key_text = value_text = None
    # kcat -J and similar dumps write key and value as JSON text.
    if isinstance(key, str):
        key_text = key.encode()
        key = _loads(key_text, origin, "key")
    if isinstance(value, str):
        value_text = value.encode()
        value = _loads(value_text, origin, "value")
    topic = obj.get("topic")
    headers = _headers(obj["headers"], origin) if "headers" in obj else ()
    return _record(key, value, headers, topic, origin, key_text, value_text)


def _headers(raw: Any, origin: str) -> tuple[tuple[str, str | None], ...]:
    if raw is None:
        return ()
    pairs: list[tuple[Any, Any]]
    if isinstance(raw, dict):
        pairs = list(raw.items())
    elif isinstance(raw, list) and all(isinstance(h, dict) for h in raw):
        pairs = [(h.get("key"), h.get("value")) for h in raw]
    elif isinstance(raw, list) and len(raw) % 2 == 0:
        pairs = list(zip(raw[0::2], raw[1::2], strict=True))
    else:
        raise EnvelopeError(
            "headers must be an object, [name, value, ...] or [{key, value}]", origin=origin
        )
    out: list[tuple[str, str | None]] = []
    for name, value in pairs:
        if not isinstance(name, str):
            raise EnvelopeError(f"header name {name!r} is not a string", origin=origin)
        if value is None or isinstance(value, str):
            out.append((name, value))
        else:
            out.append((name, orjson.dumps(value).decode()))
    return tuple(out)


def _split_connect(obj: Any) -> tuple[Any, dict[str, Any] | None]:
    if isinstance(obj, dict) and len(obj) == 2 and "schema" in obj and "payload" in obj:
        schema = obj["schema"]
        return obj["payload"], schema if isinstance(schema, dict) else None
    return obj, None


def _record(
    key: Any,
    value: Any,
    headers: tuple[tuple[str, str | None], ...],
    topic: str | None,
    origin: str,
    key_text: bytes | None,
    value_text: bytes | None,
) -> _Parsed:
    key_payload, key_schema = _split_connect(key)
    value_payload, value_schema = _split_connect(value)
    if value_payload is not None and not isinstance(value_payload, dict):
        raise EnvelopeError(
            f"value must be a JSON object or null, got {type(value_payload).__name__}",
            origin=origin,
        )
    record = fast_record(
        key_payload,
        value_payload,
        key_schema,
        value_schema,
        headers,
        topic if isinstance(topic, str) else None,
    )
    # The text as produced is kept when it is exactly the payload (no schema wrapper); it is
    # what bronze stores, and re-serializing would cost a microsecond per record.
    return (
        record,
        None if key_schema is not None or key_text is None or key is None else key_text,
        None if value_schema is not None or value_text is None or value is None else value_text,
    )


def _partition(connector: str, source: Mapping[str, Any]) -> str:
    fields = _PARTITION_FIELDS.get(connector, _DEFAULT_PARTITION_FIELDS)
    return "/".join(str(source.get(f, "")) for f in fields)


def _transaction_key(event: ChangeEvent) -> str | None:
    if event.transaction is not None:
        return event.transaction.id
    source = event.source
    if source is None:
        return None
    for name in _NATIVE_TX_FIELDS:
        value = source.get(name)
        if value is not None:
            return str(value)
    return None


def _quarantined(
    raw: bytes, origin: str, exc: PipelineError, now: dt.datetime
) -> QuarantinedRecord:
    reason = getattr(exc, "reason", None) or str(exc)
    return QuarantinedRecord(origin, reason, type(exc).__name__, raw.rstrip(b"\r\n"), now)
