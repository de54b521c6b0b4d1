"""Column-wise builder for one bronze batch.

A capture agent reads records, classifies them and adds each one here, either as an event
(with its position) or as a quarantined record (with the reason). The builder keeps one Python
list per column because appending to lists and converting once with ``pa.array`` is several
times faster than building row dicts, and the landing path has a budget of a few microseconds
per event.

A columnar reader (:mod:`bronze.columnar`) hands whole Arrow chunks instead
(:meth:`BatchBuilder.add_columns`); the batch keeps its parts in arrival order, row lists and
chunks alike, and concatenates them once when it builds the table.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from bronze import schema as S
from bronze.envelope import ChangeEvent
from bronze.positions import Position
from pipeline.errors import InternalError

__all__ = ["ROW_COLUMNS", "ROW_SCHEMA", "BatchBuilder", "QuarantinedRecord", "BatchCounts"]

_TS_TYPE = S.EVENTS_SCHEMA.field(S.CAPTURE_TS).type

# Per-row columns, in the order add_event() packs them into one tuple. The batch keeps one tuple
# per row and transposes with zip() (in C) when it builds the Arrow table: one list append per
# event instead of one per column.
_ROW_COLUMNS: tuple[str, ...] = (
    S.CONNECTOR,
    S.SOURCE_PARTITION,
    S.COLLECTION,
    S.TOPIC,
    S.KIND,
    S.OP,
    S.POSITION,
    S.SEQ,
    S.TX_ID,
    S.TX_ORDER,
    S.TX_COLLECTION_ORDER,
    S.TX_STATUS,
    S.TX_EVENT_COUNT,
    S.SNAPSHOT,
    S.KEY_JSON,
    S.VALUE_JSON,
    S.KEY_SCHEMA_ID,
    S.VALUE_SCHEMA_ID,
    S.HEADERS,
    S.SOURCE_TS_MS,
    S.EVENT_TS_MS,
    S.CAPTURE_TS,
    S.ORIGIN,
)

ROW_COLUMNS: tuple[str, ...] = _ROW_COLUMNS
"""The columns of one :meth:`BatchBuilder.append_row` tuple, in order."""
ROW_SCHEMA = pa.schema([S.EVENTS_SCHEMA.field(name) for name in _ROW_COLUMNS])
"""The per-row columns of :data:`bronze.schema.EVENTS_SCHEMA`, in :meth:`BatchBuilder.add_event`
order: what a chunk given to :meth:`BatchBuilder.add_columns` holds."""


@dataclass(frozen=True, slots=True)
class QuarantinedRecord:
    """A record that could not be landed.

    Attributes:
        origin: Where it came from (``file:line``, a source position).
        reason: What is wrong, one sentence.
        error_class: Name of the error that rejected it.
        raw: The bytes exactly as read.
        capture_ts: When the agent read it.
    """

    origin: str
    reason: str
    error_class: str
    raw: bytes
    capture_ts: dt.datetime


@dataclass(frozen=True, slots=True)
class BatchCounts:
    """Per-batch counts; ``read == landed + quarantined`` always holds."""

    read: int
    landed: int
    quarantined: int


@dataclass(slots=True)
class BatchBuilder:
    """Accumulates one batch of bronze rows, column by column.

    Args:
        source: The configured source name, written into every row.
    """

    source: str
    _rows: list[tuple[Any, ...]] = field(init=False, default_factory=list)
    _parts: list[list[tuple[Any, ...]] | pa.Table] = field(init=False, default_factory=list)
    """Closed parts before ``_rows``, in order: row lists and columnar chunks."""
    _chunked: int = field(init=False, default=0)
    """Events in the closed parts."""
    _quarantine: list[QuarantinedRecord] = field(init=False, default_factory=list)
    _schemas: dict[str, tuple[str | None, str]] = field(init=False, default_factory=dict)
    _partial_tx: set[str] = field(init=False, default_factory=set)

    def __len__(self) -> int:
        """Number of events (not quarantined records) in the batch."""
        return self._chunked + len(self._rows)

    @property
    def quarantined(self) -> int:
        """Number of quarantined records in the batch."""
        return len(self._quarantine)

    @property
    def counts(self) -> BatchCounts:
        """Read, landed and quarantined counts of this batch."""
        landed = len(self)
        return BatchCounts(
            read=landed + self.quarantined, landed=landed, quarantined=self.quarantined
        )

    def add_event(
        self,
        event: ChangeEvent,
        position: Position,
        *,
        key_json: str | None,
        value_json: str | None,
        key_schema_id: str | None,
        value_schema_id: str | None,
        origin: str,
        capture_ts: dt.datetime,
        tx_id: str | None,
        source_partition: str | None,
    ) -> None:
        """Append one classified event.

        Args:
            event: The classified record.
            position: Its resolved position (with intra-position sequence).
            key_json: Key payload as JSON text, as produced.
            value_json: Value payload as JSON text, as produced (None for tombstones).
            key_schema_id: Registry id of the key schema, if the producer sent one.
            value_schema_id: Registry id of the value schema, if the producer sent one.
            origin: Where the record came from.
            capture_ts: When the agent read it.
            tx_id: The source transaction id (``transaction.id`` or the native id).
            source_partition: Debezium source partition the position belongs to.
        """
        tx = event.transaction
        headers = event.record.headers
        op = event.op
        self._rows.append(
            (
                event.connector,
                source_partition,
                event.collection,
                event.record.topic,
                event.kind.value,
                None if op is None else op.value,
                position.encode(),
                position.seq,
                tx_id,
                None if tx is None else tx.total_order,
                None if tx is None else tx.data_collection_order,
                event.tx_status,
                event.tx_event_count,
                event.snapshot,
                key_json,
                value_json,
                key_schema_id,
                value_schema_id,
                [{"key": k, "value": v} for k, v in headers] if headers else None,
                event.source_ts_ms,
                event.ts_ms,
                capture_ts,
                origin,
            )
        )

    def append_row(self, row: tuple[Any, ...]) -> None:
        """Append one event whose columns the caller derived itself, in :data:`ROW_COLUMNS`
        order (exactly what :meth:`add_event` packs), for an agent's row changes on the hot
        path (``capture.change_records.RowAppender``)."""
        self._rows.append(row)

    def add_columns(self, chunk: pa.Table) -> None:
        """Append a columnar chunk of events (schema :data:`ROW_SCHEMA`), after every event
        added so far."""
        if chunk.schema != ROW_SCHEMA:
            raise InternalError(
                f"bronze.batch: a columnar chunk must have the row schema, got {chunk.schema}"
            )
        if self._rows:
            self._parts.append(self._rows)
            self._chunked += len(self._rows)
            self._rows = []
        self._parts.append(chunk)
        self._chunked += chunk.num_rows

    def _all_parts(self) -> list[list[tuple[Any, ...]] | pa.Table]:
        return [*self._parts, self._rows] if self._rows or not self._parts else self._parts

    def column_values(self, *names: str) -> Iterator[tuple[Any, ...]]:
        """The named columns of every event, one tuple per event (for the metrics)."""
        pick = operator.itemgetter(*(_ROW_COLUMNS.index(n) for n in names))
        for part in self._all_parts():
            if isinstance(part, pa.Table):
                yield from zip(*(part.column(n).to_pylist() for n in names), strict=True)
            elif len(names) > 1:
                yield from map(pick, part)
            else:
                yield from ((pick(r),) for r in part)

    def add_quarantined(self, record: QuarantinedRecord) -> None:
        """Append one record that could not be landed."""
        self._quarantine.append(record)

    def add_schema(self, schema_id: str, name: str | None, schema_json: str) -> None:
        """Register a Connect schema seen in this batch (deduplicated by id)."""
        self._schemas.setdefault(schema_id, (name, schema_json))

    def schema_ids(self) -> Iterable[str]:
        """Ids of the schemas registered in this batch."""
        return self._schemas.keys()

    def mark_partial(self, tx_id: str) -> None:
        """Mark every row of ``tx_id`` in this batch as part of a transaction cut by the batch."""
        self._partial_tx.add(tx_id)

    @property
    def partial_transactions(self) -> frozenset[str]:
        """Transaction ids this batch cut because they exceeded ``max.transaction.size``."""
        return frozenset(self._partial_tx)

    def events_table(
        self, *, agent_id: str, batch_seq: int, ingest_ts: dt.datetime, offset: Mapping[str, Any]
    ) -> pa.Table:
        """Build the Arrow table of events for the bronze commit.

        Args:
            agent_id: The writing agent's app id.
            batch_seq: The batch number (Delta app transaction version).
            ingest_ts: The commit time written into every row.
            offset: The source offset the batch reaches; stored on the last row.

        Returns:
            A table with exactly :data:`bronze.schema.EVENTS_SCHEMA`.
        """
        n = len(self)
        cols: dict[str, Any]
        if not self._parts:
            columns = list(zip(*self._rows, strict=True)) if n else [()] * len(_ROW_COLUMNS)
            cols = dict(zip(_ROW_COLUMNS, columns, strict=True))
        else:
            rows = pa.concat_tables(
                p if isinstance(p, pa.Table) else _rows_table(p) for p in self._all_parts()
            )
            cols = {name: rows.column(name).combine_chunks() for name in _ROW_COLUMNS}
        if self._partial_tx:
            partial = self._partial_tx
            tx_ids = cols[S.TX_ID]
            if isinstance(tx_ids, pa.Array):
                cols[S.TX_PARTIAL] = pc.fill_null(
                    pc.is_in(tx_ids, pa.array(sorted(partial), pa.string())), False
                )
            else:
                cols[S.TX_PARTIAL] = [tx in partial for tx in tx_ids]
        else:
            cols[S.TX_PARTIAL] = pa.repeat(False, n)
        cols[S.SOURCE] = pa.repeat(pa.scalar(self.source, pa.string()), n)
        cols[S.INGEST_DATE] = pa.repeat(pa.scalar(ingest_ts.date(), pa.date32()), n)
        cols[S.INGEST_TS] = pa.repeat(pa.scalar(ingest_ts, _TS_TYPE), n)
        cols[S.AGENT_ID] = pa.repeat(pa.scalar(agent_id, pa.string()), n)
        cols[S.BATCH_SEQ] = pa.repeat(pa.scalar(batch_seq, pa.int64()), n)
        offsets: list[str | None] = [None] * n
        if n:
            offsets[-1] = orjson.dumps(offset).decode()
        cols[S.BATCH_OFFSET] = offsets
        arrays = [
            c if isinstance(c, pa.Array) else pa.array(c, f.type)
            for f, c in ((f, cols[f.name]) for f in S.EVENTS_SCHEMA)
        ]
        return pa.Table.from_arrays(arrays, schema=S.EVENTS_SCHEMA)

    def quarantine_table(
        self, *, agent_id: str, batch_seq: int, ingest_ts: dt.datetime
    ) -> pa.Table:
        """Build the Arrow table of quarantined records (may be empty)."""
        q = self._quarantine
        n = len(q)
        data: dict[str, list[Any]] = {
            S.SOURCE: [self.source] * n,
            S.INGEST_DATE: [ingest_ts.date()] * n,
            S.ORIGIN: [r.origin for r in q],
            S.REASON: [r.reason for r in q],
            S.ERROR_CLASS: [r.error_class for r in q],
            S.RAW: [r.raw for r in q],
            S.CAPTURE_TS: [r.capture_ts for r in q],
            S.INGEST_TS: [ingest_ts] * n,
            S.AGENT_ID: [agent_id] * n,
            S.BATCH_SEQ: [batch_seq] * n,
        }
        return pa.Table.from_pydict(data, schema=S.QUARANTINE_SCHEMA)

    def schemas_table(self, *, known: set[str], first_seen: dt.datetime) -> pa.Table:
        """Build the Arrow table of schemas not yet in the registry."""
        new = [(sid, name, js) for sid, (name, js) in self._schemas.items() if sid not in known]
        data: dict[str, list[Any]] = {
            S.SCHEMA_ID: [s[0] for s in new],
            S.SCHEMA_NAME: [s[1] for s in new],
            S.SCHEMA_JSON: [s[2] for s in new],
            S.SOURCE: [self.source] * len(new),
            S.FIRST_SEEN_TS: [first_seen] * len(new),
        }
        return pa.Table.from_pydict(data, schema=S.SCHEMAS_SCHEMA)


def _rows_table(rows: list[tuple[Any, ...]]) -> pa.Table:
    """A closed row list as a table of :data:`ROW_SCHEMA`."""
    columns = list(zip(*rows, strict=True)) if rows else [()] * len(_ROW_COLUMNS)
    return pa.Table.from_arrays(
        [pa.array(c, f.type) for f, c in zip(ROW_SCHEMA, columns, strict=True)],
        schema=ROW_SCHEMA,
    )
