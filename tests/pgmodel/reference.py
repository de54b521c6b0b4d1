"""The silver reference model: what silver must hold after a set of change events (the oracle).

Pure Python, no Spark. The silver MERGE is compared against :func:`replay`, so this module does
everything the plain way, one rule per function, and states each rule here:

Ordering and idempotence
    **R1.** Events are applied in bronze ``position`` order (memcmp of the bytes: source commit
    order). :func:`replay` sorts them itself, so its input may come in any order and with any
    duplication. Ties (equal bytes) happen only for re-sends of one record or for records of
    different keys; they are broken by key and op so the result never depends on input order.
    **R2.** A row event is applied only if its position is newer (strictly greater) than the
    position silver stores for its key, and newer than the table's last truncate. Replaying any
    event again therefore changes nothing, and a late older event is ignored.

Row events (one silver table per source collection, keyed by the record key)
    **R3.** ``c`` and ``r`` upsert the ``after`` image; ``u`` replaces the row with its ``after``
    image (an update of an absent or deleted key upserts).
    **R4.** A column whose ``after`` value is ``__debezium_unavailable_value`` (an unchanged
    TOAST column) keeps the key's previous value. For the ``c`` of a primary-key change (header
    ``__debezium.oldkey``) the previous value is the old key's last row image. With no previous
    value the event is *not applied* and a :class:`Problem` is reported instead of raising
    (silver would have to invent a value; the MERGE rejects such events the same way).
    **R5.** ``d`` deletes the row but keeps a tombstone (the delete's position and the last row
    image), so a late older event cannot resurrect the row.
    **R6.** A primary-key change is ``d`` (old key) + tombstone + ``c`` (new key) at one source
    position with increasing intra-position seq; R3-R5 applied in order handle it as two keys.

Other records
    **R7.** Kafka tombstones (null value) are no-ops: the ``d`` before them did the delete.
    **R8.** ``t`` (truncate) deletes every row of its collection whose position is older than
    the truncate's (they become tombstones at the truncate's position) and raises the table's
    truncate watermark, so a late event older than the truncate is ignored even for a key that
    silver did not hold when the truncate arrived (R2).
    **R9.** ``m`` (logical message), transaction BEGIN/END, heartbeats and schema changes are
    not row changes and change nothing.
    **R10.** A row event with a null key (a keyless table) cannot be keyed: it is reported as a
    :class:`Problem` and skipped.

Columns
    **R11.** Silver evolves additively: a table's columns are the union of the ``after``-struct
    fields of every value schema seen for the collection (and of the keys of ``after`` images,
    for schemaless streams). A live row shows every such column; a value its image lacks is
    None. (PostgreSQL's logical decoding carries no DDL, so this is all a consumer can know.)

Keys are compared as canonical JSON (:func:`canonical_json`: compact, object keys sorted), so the
same key written in another field order is the same row. Positions compare only within one
Debezium source partition: give the model the events of one source stream.

Example:
    >>> p = lambda n: bytes([1, n])  # stand-in position bytes
    >>> events = [
    ...     SilverEvent(p(2), RecordKind.DATA, Op.UPDATE, "public.t", '{"id":1}',
    ...                 after={"id": 1, "v": "b"}),
    ...     SilverEvent(p(1), RecordKind.DATA, Op.CREATE, "public.t", '{"id":1}',
    ...                 after={"id": 1, "v": "a"}),
    ... ]
    >>> replay(events)
    {'public.t': {'{"id":1}': {'id': 1, 'v': 'b'}}}
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Final, TypeAlias

import orjson

from bronze import schema as S
from bronze.envelope import (
    HEADER_NEW_KEY,
    HEADER_OLD_KEY,
    UNAVAILABLE_VALUE,
    ChangeEvent,
    ConnectRecord,
    Op,
    RecordKind,
    classify,
)
from bronze.positions import Position, PositionResolver

__all__ = [
    "LiveRows",
    "ProblemKind",
    "Problem",
    "SilverEvent",
    "KeyState",
    "TableState",
    "SilverState",
    "canonical_json",
    "row_columns",
    "event_from_change",
    "event_from_bronze_row",
    "events_from_records",
    "ordered",
    "apply_event",
    "apply_in_order",
    "replay",
]

LiveRows: TypeAlias = dict[str, dict[str, dict[str, Any]]]
"""collection -> canonical key JSON -> row (column -> value): the live rows of silver."""

_ROW_OPS: Final = frozenset({Op.CREATE, Op.READ, Op.UPDATE, Op.DELETE})
_NEVER: Final = b""
"""Position below every real position (every encoding starts with a version byte)."""


class ProblemKind(StrEnum):
    """What kind of event the model could not apply."""

    UNAVAILABLE_WITHOUT_PREVIOUS = "unavailable_without_previous"
    """R4: a placeholder column, but silver has no previous value for it."""
    NULL_KEY = "null_key"
    """R10: a row change without a record key."""


@dataclass(frozen=True, slots=True)
class Problem:
    """An event the model refused, with the reason.

    Attributes:
        kind: Which rule refused it.
        collection: The event's collection.
        key: Its canonical key JSON, if any.
        position: Its bronze position.
        detail: A sentence naming what is missing (e.g. the placeholder columns).
    """

    kind: ProblemKind
    collection: str | None
    key: str | None
    position: bytes
    detail: str


@dataclass(frozen=True, slots=True)
class SilverEvent:
    """One decoded bronze event, reduced to what silver needs.

    Attributes:
        position: Bronze position bytes (source commit order plus intra-position seq).
        kind: What the record is (data, tombstone, transaction, message, ...).
        op: Debezium op code for data and message records, else None.
        collection: ``schema.table`` (PostgreSQL), as bronze's ``collection`` column; None for
            tombstones and control records.
        key: Canonical JSON of the record key (:func:`canonical_json`); None for keyless.
        after: The ``after`` row image (c, r, u), else None.
        columns: Row columns named by the value schema's ``after`` struct, in schema order;
            empty when the record came without a schema.
        old_key: Canonical ``__debezium.oldkey`` header (the ``c`` of a primary-key change).
        new_key: Canonical ``__debezium.newkey`` header (the ``d`` of a primary-key change).
    """

    position: bytes
    kind: RecordKind
    op: Op | None = None
    collection: str | None = None
    key: str | None = None
    after: Mapping[str, Any] | None = None
    columns: tuple[str, ...] = ()
    old_key: str | None = None
    new_key: str | None = None


@dataclass(slots=True)
class KeyState:
    """What silver stores for one key.

    Attributes:
        position: Position of the last change applied to the key (or of the truncate that
            removed it).
        row: The live row, or None when the key is deleted (a tombstone).
        last_image: The last row image the key had, kept after a delete (R4, R5).
    """

    position: bytes
    row: dict[str, Any] | None
    last_image: dict[str, Any] | None


@dataclass(slots=True)
class TableState:
    """One silver table.

    Attributes:
        columns: Known columns, in first-seen order (R11).
        keys: Canonical key JSON -> stored state.
        truncated_at: Position of the newest truncate applied (R8); empty bytes if none.
    """

    columns: list[str] = field(default_factory=list)
    keys: dict[str, KeyState] = field(default_factory=dict)
    truncated_at: bytes = _NEVER


@dataclass(slots=True)
class SilverState:
    """All silver tables of one source stream.

    Attributes:
        tables: Collection name -> table.
    """

    tables: dict[str, TableState] = field(default_factory=dict)

    def table(self, collection: str) -> TableState:
        """The table of ``collection``, created empty on first use."""
        found = self.tables.get(collection)
        if found is None:
            found = self.tables[collection] = TableState()
        return found

    def live(self) -> LiveRows:
        """The live rows, every known column filled in (R11); tables without live rows omitted.

        Returns:
            collection -> canonical key JSON -> row; fresh dicts the caller may change.
        """
        out: LiveRows = {}
        for collection, table in self.tables.items():
            rows = {
                key: {column: state.row.get(column) for column in table.columns}
                for key, state in table.keys.items()
                if state.row is not None
            }
            if rows:
                out[collection] = rows
        return out


# --- decoding ------------------------------------------------------------------------------


def canonical_json(value: Any) -> str:
    """Compact JSON text with object keys sorted: the form keys are compared in.

    Example:
        >>> canonical_json({"b": 1, "a": [2, None]})
        '{"a":[2,null],"b":1}'
    """
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


def row_columns(value_schema: Mapping[str, Any] | None) -> tuple[str, ...]:
    """Column names of the ``after`` struct of a Debezium envelope schema.

    Args:
        value_schema: The record's value schema (``schemas.enable=true``), or None.

    Returns:
        The names in schema order; empty without a schema or an ``after`` struct.
    """
    if not value_schema:
        return ()
    for envelope_field in value_schema.get("fields") or ():
        if envelope_field.get("field") == "after":
            return tuple(str(f["field"]) for f in envelope_field.get("fields") or ())
    return ()


def _header_key(text: str | None) -> str | None:
    return None if text is None else canonical_json(orjson.loads(text))


def event_from_change(event: ChangeEvent, position: bytes | Position) -> SilverEvent:
    """Reduce a classified record and its bronze position to a :class:`SilverEvent`.

    Args:
        event: The record as :func:`bronze.envelope.classify` returned it.
        position: Its position bytes (or :class:`~bronze.positions.Position`).

    Returns:
        The event.
    """
    record = event.record
    value = record.value
    return SilverEvent(
        position=position if isinstance(position, bytes) else position.encode(),
        kind=event.kind,
        op=event.op,
        collection=event.collection,
        key=None if record.key is None else canonical_json(record.key),
        after=value.get("after") if value is not None and event.op is not None else None,
        columns=row_columns(record.value_schema),
        old_key=_header_key(record.header(HEADER_OLD_KEY)),
        new_key=_header_key(record.header(HEADER_NEW_KEY)),
    )


def event_from_bronze_row(
    row: Mapping[str, Any], schemas: Mapping[str, Mapping[str, Any] | str] | None = None
) -> SilverEvent:
    """Build a :class:`SilverEvent` from one ``bronze.events`` row.

    Args:
        row: The row as a mapping of bronze column names (``bronze/schema.py``) to values.
        schemas: ``bronze.schemas`` as schema id -> schema (dict or JSON text), to learn the
            row columns of each value schema (R11); None when the stream had no schemas.

    Returns:
        The event.
    """
    value_json = row.get(S.VALUE_JSON)
    key_json = row.get(S.KEY_JSON)
    kind = RecordKind(row[S.KIND])
    op_code = row.get(S.OP)
    op = None if op_code is None else Op(op_code)
    value = None if value_json is None else orjson.loads(value_json)
    headers: dict[str, str | None] = {}
    for header in row.get(S.HEADERS) or ():
        headers[header["key"]] = header["value"]  # the last one of a name wins, as in Connect
    schema: Mapping[str, Any] | str | None = None
    schema_id = row.get(S.VALUE_SCHEMA_ID)
    if schemas is not None and schema_id is not None:
        schema = schemas.get(schema_id)
    if isinstance(schema, str):
        schema = orjson.loads(schema)
    return SilverEvent(
        position=bytes(row[S.POSITION]),
        kind=kind,
        op=op,
        collection=row.get(S.COLLECTION),
        key=None if key_json is None else canonical_json(orjson.loads(key_json)),
        after=value.get("after") if isinstance(value, dict) and op is not None else None,
        columns=row_columns(schema if isinstance(schema, Mapping) else None),
        old_key=_header_key(headers.get(HEADER_OLD_KEY)),
        new_key=_header_key(headers.get(HEADER_NEW_KEY)),
    )


def events_from_records(
    records: Iterable[ConnectRecord], *, connector: str = "postgresql"
) -> list[SilverEvent]:
    """Classify and position records of one source stream, in arrival order, as bronze does.

    Data records take :meth:`PositionResolver.for_data`; records without a ``source`` block
    (tombstones, BEGIN/END) take :meth:`PositionResolver.for_control`. Control records that
    arrive before the stream's first data record wait for it and sort just before it, as in
    ``capture/debezium_json/source.py``. Redelivered records get the positions bronze would give
    them.

    Args:
        records: The records in arrival (delivery) order, duplicates included.
        connector: The stream's connector.

    Returns:
        One event per record, in arrival order.

    Raises:
        EnvelopeError: A record is not a valid Debezium record (bronze would quarantine it).
        PositionError: A record's position cannot be resolved.
    """
    resolver = PositionResolver(connector)
    pending: list[ChangeEvent] = []
    out: list[SilverEvent] = []
    for record in records:
        event = classify(record, connector_hint=connector)
        if event.source is None or event.kind is RecordKind.TOMBSTONE:
            if resolver.last is None:
                pending.append(event)
            else:
                out.append(event_from_change(event, resolver.for_control()))
            continue
        position = resolver.for_data(event.source)
        if pending:
            out.extend(event_from_change(p, resolver.for_control()) for p in pending)
            pending.clear()
            position = resolver.for_control()
        out.append(event_from_change(event, position))
    return out


# --- the rules -----------------------------------------------------------------------------


def _order_key(event: SilverEvent) -> tuple[bytes, str, str, str]:
    return (event.position, event.key or "", event.op or "", event.kind)


def ordered(events: Iterable[SilverEvent]) -> list[SilverEvent]:
    """R1: the events in position order, ties broken by key, op and kind."""
    return sorted(events, key=_order_key)


def _learn_columns(table: TableState, event: SilverEvent) -> None:
    """R11: add the event's schema columns and image columns to the table's columns."""
    known = set(table.columns)
    for column in (*event.columns, *(event.after or ())):
        if column not in known:
            table.columns.append(column)
            known.add(column)


def _is_newer(table: TableState, key: str, position: bytes) -> bool:
    """R2: newer than the key's stored position and the table's last truncate."""
    state = table.keys.get(key)
    stored = _NEVER if state is None else state.position
    return position > stored and position > table.truncated_at


def _previous_image(table: TableState, event: SilverEvent, key: str) -> dict[str, Any] | None:
    """R4: the image placeholder columns take their values from, or None."""
    if event.op is Op.CREATE and event.old_key is not None:
        old = table.keys.get(event.old_key)
        return None if old is None else old.last_image
    state = table.keys.get(key)
    return None if state is None else state.row


def _resolve_placeholders(
    table: TableState, event: SilverEvent, key: str
) -> tuple[dict[str, Any], list[str]]:
    """R4: the ``after`` image with placeholders replaced; also the columns left unresolved."""
    image = dict(event.after or {})
    wanted = [column for column, value in image.items() if value == UNAVAILABLE_VALUE]
    if not wanted:
        return image, []
    previous = _previous_image(table, event, key)
    missing: list[str] = []
    for column in wanted:
        if previous is not None and column in previous:
            image[column] = previous[column]
        else:
            missing.append(column)
    return image, missing


def _apply_upsert(table: TableState, event: SilverEvent, key: str) -> Problem | None:
    """R3 + R4: c, r and u write the after image (placeholders resolved) at the event's position."""
    image, missing = _resolve_placeholders(table, event, key)
    if missing:
        return Problem(
            ProblemKind.UNAVAILABLE_WITHOUT_PREVIOUS,
            event.collection,
            key,
            event.position,
            f"op '{event.op}' carries the unavailable-value placeholder in "
            f"{', '.join(missing)} but silver has no previous value for key {key}",
        )
    table.keys[key] = KeyState(event.position, image, image)
    return None


def _apply_delete(table: TableState, event: SilverEvent, key: str) -> None:
    """R5: the key becomes a tombstone at the delete's position, keeping its last image."""
    state = table.keys.get(key)
    last_image = None if state is None else state.last_image
    table.keys[key] = KeyState(event.position, None, last_image)


def _apply_truncate(table: TableState, event: SilverEvent) -> None:
    """R8: rows older than the truncate become tombstones at its position; raise the watermark."""
    for state in table.keys.values():
        if state.row is not None and state.position < event.position:
            state.row = None
            state.position = event.position
    table.truncated_at = max(table.truncated_at, event.position)


def apply_event(state: SilverState, event: SilverEvent) -> Problem | None:
    """Apply one event to ``state`` (R2-R11), assuming every older event was applied before it.

    Args:
        state: The silver state, changed in place.
        event: The event.

    Returns:
        The problem when the event was refused (R4, R10), else None.
    """
    if event.kind is not RecordKind.DATA or event.collection is None:
        return None  # R7 tombstones, R9 messages and control records
    table = state.table(event.collection)
    _learn_columns(table, event)
    if event.op is Op.TRUNCATE:
        _apply_truncate(table, event)
        return None
    if event.op not in _ROW_OPS:
        return None
    key = event.key
    if key is None:
        return Problem(
            ProblemKind.NULL_KEY,
            event.collection,
            None,
            event.position,
            f"op '{event.op}' has a null record key (keyless table): silver cannot key it",
        )
    if not _is_newer(table, key, event.position):
        return None  # R2: a duplicate or a late older event
    if event.op is Op.DELETE:
        _apply_delete(table, event, key)
        return None
    return _apply_upsert(table, event, key)


def apply_in_order(state: SilverState, events: Iterable[SilverEvent]) -> list[Problem]:
    """Apply events to ``state`` in the order given.

    Correct results need position order (:func:`ordered`), at least per key. Calling it again
    with later batches models incremental application: R2 and R8 keep late older events out,
    but a placeholder (R4) is resolved against what was applied so far.

    Args:
        state: The silver state, changed in place.
        events: The events, in the order to apply them.

    Returns:
        The problems of the refused events, in application order.
    """
    problems: list[Problem] = []
    for event in events:
        problem = apply_event(state, event)
        if problem is not None:
            problems.append(problem)
    return problems


def replay(events: Iterable[SilverEvent], *, problems: list[Problem] | None = None) -> LiveRows:
    """The live silver rows for a set of events given in any order, with any duplication.

    Args:
        events: Decoded events of one source stream (e.g. :func:`events_from_records`).
        problems: When given, the problems of the refused events are appended to it, once per
            event however often it was delivered.

    Returns:
        collection -> canonical key JSON -> row, every known column present (R11).
    """
    state = SilverState()
    found = apply_in_order(state, ordered(events))
    if problems is not None:
        # A refused event stores nothing, so its duplicates are refused again: report it once.
        problems.extend(dict.fromkeys(found))
    return state.live()
