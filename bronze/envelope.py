"""The Debezium change-event model: parse, classify and build Kafka Connect records.

Bronze lands every record it is given. :func:`classify` decides what a record is (a data change, a
tombstone, a transaction boundary, a schema change, a heartbeat or a logical-decoding message) and
checks it the way a Debezium consumer would rely on it; whatever fails goes to quarantine with the
:class:`~pipeline.errors.EnvelopeError` reason, so every reason names the field and what is wrong.

The record shapes are those of Debezium 1.2 to 3.x as written by Kafka Connect's ``JsonConverter``
(spec: ``debezium-guide-1.2.md`` §1 and §6, and §0 of the MySQL/SQL Server and Oracle/YugabyteDB
guides). Older and newer spellings are both accepted where the documents disagree: ``snapshot`` as
boolean, string or null; ``transaction.total_order`` as number or numeric string; a 0.x ``source``
without ``connector`` when the caller supplies ``connector_hint``.

``classify`` sits on the bronze hot path (the landing benchmark needs >= 100k events/s on one core),
so it only does dict lookups on the already-parsed payload: no copies, no regexes, no models.

Builders (:func:`data_record`, :func:`primary_key_change`, :func:`transaction_begin`, ...) let our
own capture agents produce records that Debezium consumers accept::

    >>> rec = heartbeat("server1", 1700000000000)
    >>> to_json_converter(rec, schemas_enable=False)
    ('{"serverName":"server1"}', '{"ts_ms":1700000000000}')
    >>> classify(rec).kind
    <RecordKind.HEARTBEAT: 'heartbeat'>
"""

from __future__ import annotations

import base64
import dataclasses
import decimal
import json as _stdlib_json
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Final

import orjson

from bronze import exact_json
from bronze.connect_schema import (
    HEARTBEAT_KEY_SCHEMA,
    HEARTBEAT_VALUE_SCHEMA,
    SNAPSHOT_VALUES,
    TRANSACTION_KEY_SCHEMA,
    TRANSACTION_VALUE_SCHEMA,
)
from pipeline.errors import EnvelopeError, InternalError

__all__ = [
    "RecordKind",
    "Op",
    "HEADER_OLD_KEY",
    "HEADER_NEW_KEY",
    "UNAVAILABLE_VALUE",
    "HEARTBEAT_TOPIC_PREFIX",
    "ConnectRecord",
    "TransactionInfo",
    "ChangeEvent",
    "classify",
    "built_data_event",
    "BUILT_DATA_OPS",
    "require_collection",
    "normalize_tx_id",
    "TX_ID_WITH_LSN",
    "ORDER_BY_OPTION",
    "fast_record",
    "parse_json_converter",
    "split_connect",
    "to_json_converter",
    "data_record",
    "tombstone_for",
    "primary_key_change",
    "transaction_begin",
    "transaction_end",
    "heartbeat",
    "schema_change",
    "truncate_record",
    "message_record",
]


class RecordKind(StrEnum):
    """What a record is, as far as bronze and silver are concerned."""

    DATA = "data"
    """A row change: op ``c``, ``u``, ``d``, ``r`` or ``t``."""
    TOMBSTONE = "tombstone"
    """Null value after a delete; lets Kafka compaction drop the key. A no-op for silver."""
    TRANSACTION = "transaction"
    """A BEGIN or END boundary from ``<prefix>.transaction``."""
    SCHEMA_CHANGE = "schema_change"
    """DDL from the schema-change topic (MySQL, SQL Server, Db2, Oracle)."""
    HEARTBEAT = "heartbeat"
    """``{"ts_ms": N}`` from ``__debezium-heartbeat.<prefix>``; only advances offsets."""
    MESSAGE = "message"
    """op ``m``: a PostgreSQL logical-decoding message (``pg_logical_emit_message``)."""


class Op(StrEnum):
    """Debezium operation codes. ``t`` and ``m`` are later than 1.2 and optional (spec §1.4)."""

    CREATE = "c"
    UPDATE = "u"
    DELETE = "d"
    READ = "r"
    TRUNCATE = "t"
    MESSAGE = "m"


HEADER_OLD_KEY: Final = "__debezium.oldkey"
"""Header on the ``c`` of a primary-key change: the row's previous key, as JSON text."""
HEADER_NEW_KEY: Final = "__debezium.newkey"
"""Header on the ``d`` of a primary-key change: the row's new key, as JSON text."""
UNAVAILABLE_VALUE: Final = "__debezium_unavailable_value"
"""Placeholder for unchanged TOAST/LOB columns (``toasted.value.placeholder``); silver keeps the
stored value. A ``hex:`` prefix on a custom placeholder marks bytes."""

HEARTBEAT_TOPIC_PREFIX: Final = "__debezium-heartbeat"
"""Default ``heartbeat.topics.prefix``; heartbeats go to ``<prefix>.<server name>``."""

_OP_NAMES: Final[dict[Op, str]] = {
    Op.CREATE: "create",
    Op.UPDATE: "update",
    Op.DELETE: "delete",
    Op.READ: "read",
    Op.TRUNCATE: "truncate",
    Op.MESSAGE: "message",
}
_OPS: Final[dict[str, Op]] = {op.value: op for op in Op}
_ALLOWED_OPS: Final = ", ".join(op.value for op in Op)

_CONNECTORS: Final[dict[str, str]] = {
    "postgresql": "postgresql",
    "mysql": "mysql",
    "sqlserver": "sqlserver",
    "oracle": "oracle",
    "mongodb": "mongodb",
    "db2": "db2",
    "yugabytedb": "yugabytedb",
    # YugabyteDB writes its product name; normalise so silver has one spelling per connector.
    "YugabyteDB": "yugabytedb",
}
"""Exact spellings seen in ``source.connector``; anything else is lower-cased."""

_SNAPSHOT: Final[dict[str, str]] = {v: v for v in SNAPSHOT_VALUES}
_SNAPSHOT_FALSE: Final = "false"
_SNAPSHOT_TRUE: Final = "true"

# Tables keep schema.table in Debezium topics except MySQL (db.table) and MongoDB (db.collection).
_DB_QUALIFIED: Final = frozenset({"mysql", "mongodb"})

_MISSING: Final = object()

_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1

TX_ID_WITH_LSN: Final = frozenset({"postgresql", "yugabytedb"})
"""Connectors whose Debezium 2.x+ transaction ids are ``"<txId>:<LSN>"`` with an LSN that differs
per record (``PostgresTransactionMonitor.adjustTxId``); :func:`normalize_tx_id` keeps ``<txId>``."""

ORDER_BY_OPTION: Final = "order.by: arrival"
"""The ``debezium_json`` setting that lands records without a ``source`` block."""


# --- the model ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ConnectRecord:
    """One record as Kafka Connect sees it: key and value payloads, their schemas, headers.

    Attributes:
        key: Key payload (usually a dict), or None for a keyless table or a truncate.
        value: Value payload (the Debezium envelope); None means a tombstone.
        key_schema: Connect schema of the key; None when ``schemas.enable=false``.
        value_schema: Connect schema of the value; None when ``schemas.enable=false``.
        headers: ``(name, value)`` pairs in record order; values are JSON text or None.
        topic: The Kafka topic (or its bronze equivalent), when known.
    """

    key: Any | None
    value: dict[str, Any] | None
    key_schema: dict[str, Any] | None = None
    value_schema: dict[str, Any] | None = None
    headers: tuple[tuple[str, str | None], ...] = ()
    topic: str | None = None

    def header(self, name: str) -> str | None:
        """The value of the last header called ``name`` (Connect keeps duplicates), or None."""
        for hname, hvalue in reversed(self.headers):
            if hname == name:
                return hvalue
        return None


@dataclass(frozen=True, slots=True)
class TransactionInfo:
    """A transaction reference: a data event's ``transaction`` block, or a BEGIN/END id.

    Attributes:
        id: Transaction id as the connector writes it (PG txId, SQL Server commit LSN, ...).
        total_order: 1-based position of the event among all events of the transaction.
        data_collection_order: 1-based position among the events of the same table.
    """

    id: str
    total_order: int | None
    data_collection_order: int | None


@dataclass(frozen=True, slots=True)
class ChangeEvent:
    """The classified view of a :class:`ConnectRecord` that bronze stores and silver applies.

    Attributes:
        record: The record as received.
        kind: What the record is.
        op: Operation code for data and message records, else None.
        connector: ``postgresql``, ``mysql``, ``sqlserver``, ``oracle``, ``mongodb``, ``db2``,
            ``yugabytedb`` (or another Debezium connector's name, lower-cased), from
            ``source.connector`` or the caller's hint.
        collection: Data collection: ``db.table`` (MySQL), ``db.collection`` (MongoDB),
            ``schema.table`` (the others); ``databaseName[.schemaName]`` for schema changes;
            None for transactions, heartbeats and tombstones.
        source: The ``source`` block, not copied.
        ts_ms: Envelope ``ts_ms``: when the connector processed the event (not DB time).
        source_ts_ms: ``source.ts_ms``: when the change happened in the database
            (0.x ``ts_sec`` is converted).
        snapshot: ``source.snapshot`` normalised to one of ``true``, ``first``, ``last``,
            ``false``, ``incremental``, ``first_in_data_collection``, ``last_in_data_collection``
            (null and absent mean ``false``); None when there is no source.
        transaction: A data event's transaction block, or the id of a BEGIN/END record.
        tx_status: ``BEGIN`` or ``END`` for transaction records.
        tx_event_count: Events in the transaction (END only).
        tx_data_collections: ``(data_collection, event_count)`` pairs (END only).
    """

    record: ConnectRecord
    kind: RecordKind
    op: Op | None
    connector: str | None
    collection: str | None
    source: Mapping[str, Any] | None
    ts_ms: int | None
    source_ts_ms: int | None
    snapshot: str | None
    transaction: TransactionInfo | None
    tx_status: str | None
    tx_event_count: int | None
    tx_data_collections: tuple[tuple[str, int], ...] | None


# A frozen dataclass sets each field through object.__setattr__, about 1.5 us for ChangeEvent's 13
# fields: a sixth of the per-event budget of the bronze landing benchmark (>= 100k events/s).
# Calling the slot descriptors' setters directly does the same work in half the time. _event()
# is private to classify(); a unit test checks it builds what ChangeEvent(...) builds.
_new_object = object.__new__
(
    _set_record,
    _set_kind,
    _set_op,
    _set_connector,
    _set_collection,
    _set_source,
    _set_ts_ms,
    _set_source_ts_ms,
    _set_snapshot,
    _set_transaction,
    _set_tx_status,
    _set_tx_event_count,
    _set_tx_data_collections,
) = (ChangeEvent.__dict__[f.name].__set__ for f in dataclasses.fields(ChangeEvent))


def _event(
    record: ConnectRecord,
    kind: RecordKind,
    op: Op | None,
    connector: str | None,
    collection: str | None,
    source: Mapping[str, Any] | None,
    ts_ms: int | None,
    source_ts_ms: int | None,
    snapshot: str | None,
    transaction: TransactionInfo | None,
    tx_status: str | None,
    tx_event_count: int | None,
    tx_data_collections: tuple[tuple[str, int], ...] | None,
) -> ChangeEvent:
    event: ChangeEvent = _new_object(ChangeEvent)
    _set_record(event, record)
    _set_kind(event, kind)
    _set_op(event, op)
    _set_connector(event, connector)
    _set_collection(event, collection)
    _set_source(event, source)
    _set_ts_ms(event, ts_ms)
    _set_source_ts_ms(event, source_ts_ms)
    _set_snapshot(event, snapshot)
    _set_transaction(event, transaction)
    _set_tx_status(event, tx_status)
    _set_tx_event_count(event, tx_event_count)
    _set_tx_data_collections(event, tx_data_collections)
    return event


(
    _set_rec_key,
    _set_rec_value,
    _set_rec_key_schema,
    _set_rec_value_schema,
    _set_rec_headers,
    _set_rec_topic,
) = (ConnectRecord.__dict__[f.name].__set__ for f in dataclasses.fields(ConnectRecord))


def fast_record(
    key: Any,
    value: dict[str, Any] | None,
    key_schema: dict[str, Any] | None,
    value_schema: dict[str, Any] | None,
    headers: tuple[tuple[str, str | None], ...],
    topic: str | None,
) -> ConnectRecord:
    """Build a :class:`ConnectRecord` without the frozen-dataclass ``__init__`` overhead.

    Readers on the landing hot path call this once per record; it builds exactly what
    ``ConnectRecord(key, value, key_schema, value_schema, headers, topic)`` builds.
    """
    record: ConnectRecord = _new_object(ConnectRecord)
    _set_rec_key(record, key)
    _set_rec_value(record, value)
    _set_rec_key_schema(record, key_schema)
    _set_rec_value_schema(record, value_schema)
    _set_rec_headers(record, headers)
    _set_rec_topic(record, topic)
    return record


# --- classification ----------------------------------------------------------------------------


def classify(
    record: ConnectRecord,
    *,
    origin: str | None = None,
    connector_hint: str | None = None,
    allow_sourceless: bool = False,
) -> ChangeEvent:
    """Classify and check one record.

    Rules, in order: a null value is a tombstone; a value with ``op`` is a data (``c u d r t``) or
    message (``m``) record; with ``status`` a transaction boundary; with ``ddl`` or
    ``tableChanges`` (or ``databaseName`` plus ``source``) a schema change; exactly
    ``{"ts_ms": N}`` a heartbeat.

    Args:
        record: The record to classify.
        origin: Where the record came from (file:line, topic/partition/offset); put in errors.
        connector_hint: The connector that produced the record, for records that do not say:
            transactions, heartbeats, tombstones and 0.x ``source`` blocks without ``connector``.
            ``source.connector`` wins when present.
        allow_sourceless: Accept data records without a ``source`` block (``order.by:
            arrival``): the connector is then ``connector_hint`` and the table comes from the
            record's topic (``<prefix>.<schema or db>.<table>``).

    Returns:
        The classified event.

    Raises:
        EnvelopeError: The record is not a valid Debezium record; ``reason`` says what is wrong.
    """
    value = record.value
    if value is None:
        if record.key is None:
            raise EnvelopeError(
                "tombstone (null value) has a null key; a tombstone must carry the key of the "
                "deleted row",
                origin=origin,
            )
        return _event(
            record,
            RecordKind.TOMBSTONE,
            None,
            _hint(connector_hint, origin),
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
            None,
        )
    if value.__class__ is not dict:
        raise EnvelopeError(
            f"value must be a JSON object (a Debezium envelope), got {_describe(value)}",
            origin=origin,
        )
    op_raw = value.get("op", _MISSING)
    if op_raw is not _MISSING:
        return _classify_op(record, value, op_raw, origin, connector_hint, allow_sourceless)
    if "status" in value:
        return _classify_transaction(record, value, origin, connector_hint)
    if "ddl" in value or "tableChanges" in value or ("databaseName" in value and "source" in value):
        return _classify_schema_change(record, value, origin, connector_hint)
    if len(value) == 1 and "ts_ms" in value:
        ts_ms = _as_int(value["ts_ms"], "heartbeat 'ts_ms'", origin)
        if ts_ms is None:
            raise EnvelopeError("heartbeat 'ts_ms' is null", origin=origin)
        return _event(
            record,
            RecordKind.HEARTBEAT,
            None,
            _hint(connector_hint, origin),
            None,
            None,
            ts_ms,
            None,
            None,
            None,
            None,
            None,
            None,
        )
    fields = ", ".join(sorted(value)) or "none"
    if "before" in value or "after" in value or "source" in value or "patch" in value:
        raise EnvelopeError(f"data record has no 'op' field (fields: {fields})", origin=origin)
    raise EnvelopeError(
        "value is not a Debezium record: no 'op' (data), 'status' (transaction), 'ddl'/"
        f"'tableChanges' (schema change) or lone 'ts_ms' (heartbeat) (fields: {fields})",
        origin=origin,
    )


BUILT_DATA_OPS: Final = frozenset({"c", "u", "d", "r"})
"""The ``op`` values of the records :func:`built_data_event` takes."""


def built_data_event(record: ConnectRecord) -> ChangeEvent:
    """What :func:`classify` returns for a data record a database agent built itself.

    The agents build their row changes with ``capture.change_records.data_record``: a dict
    envelope with ``op`` in :data:`BUILT_DATA_OPS`, a ``source`` dict with ``connector``,
    ``before``/``after`` rows as dicts (or null where the op has none) and an int ``ts_ms``.
    Checking that shape again record by record was ~8 % of a MySQL stream's CPU; this skips
    only those structural checks and derives every field with the same helpers as
    :func:`classify` (``tests/unit/test_built_events.py`` compares the two).

    Args:
        record: A record built by ``data_record`` (never one read from outside).

    Returns:
        The classified event, equal to ``classify(record)``.
    """
    value = record.value
    if value is None:
        raise InternalError("built_data_event takes a data record, not a tombstone")
    source = value["source"]
    connector = _connector(source, None, None)
    return _event(
        record,
        RecordKind.DATA,
        _OPS[value["op"]],
        connector,
        _collection(connector, source),
        source,
        _as_int(value["ts_ms"], "'ts_ms'", None),
        _source_ts_ms(source, None),
        _snapshot(source.get("snapshot"), None),
        _transaction_block(value.get("transaction"), None),
        None,
        None,
        None,
    )


def _classify_op(
    record: ConnectRecord,
    value: dict[str, Any],
    op_raw: Any,
    origin: str | None,
    connector_hint: str | None,
    allow_sourceless: bool = False,
) -> ChangeEvent:
    if op_raw.__class__ is not str:
        raise EnvelopeError(
            f"'op' must be a string such as \"c\", got {_describe(op_raw)}", origin=origin
        )
    op = _OPS.get(op_raw)
    if op is None:
        raise EnvelopeError(f"unknown op '{op_raw}' (allowed: {_ALLOWED_OPS})", origin=origin)
    source = value.get("source")
    if source is None:
        if not allow_sourceless:
            raise EnvelopeError(
                f"op '{op_raw}' ({_OP_NAMES[op]}) record has no 'source' object, so it has no "
                "source position and cannot be ordered or deduplicated (an SMT may have removed "
                f"the block); to land such records in arrival order set '{ORDER_BY_OPTION}' on "
                "this debezium_json source (weaker: see docs/bronze.md)",
                origin=origin,
            )
        connector = _sourceless_connector(op_raw, connector_hint, origin)
    elif source.__class__ is not dict:
        raise EnvelopeError(
            f"'source' must be a JSON object, got {_describe(source)}", origin=origin
        )
    else:
        connector = _connector(source, connector_hint, origin)
    mongo = connector == "mongodb"

    if op is Op.CREATE or op is Op.READ:
        after = value.get("after")
        if after is None:
            raise EnvelopeError(
                f"op '{op_raw}' ({_OP_NAMES[op]}) record has no 'after' (it is missing or null)",
                origin=origin,
            )
        _check_row(after, "after", mongo, origin)
    elif op is Op.UPDATE:
        if mongo:
            _check_mongo_update(value, origin)
        else:
            after = value.get("after")
            if after is None:
                raise EnvelopeError(
                    "op 'u' (update) record has no 'after' (it is missing or null)", origin=origin
                )
            _check_row(after, "after", False, origin)
            before = value.get("before")
            if before is not None:
                _check_row(before, "before", False, origin)
    elif op is Op.DELETE:
        if mongo:
            filt = value.get("filter")
            if filt is None and record.key is None:
                raise EnvelopeError(
                    "MongoDB op 'd' (delete) record has neither 'filter' nor a record key; "
                    "cannot tell which document was deleted",
                    origin=origin,
                )
            if filt is not None and filt.__class__ is not str:
                raise EnvelopeError(
                    f"MongoDB 'filter' must be a JSON string, got {_describe(filt)}",
                    origin=origin,
                )
        else:
            before = value.get("before")
            if before is None:
                # PG with REPLICA IDENTITY DEFAULT/NOTHING may omit the before image; the record
                # key then identifies the row, so only a delete with neither is unusable.
                if record.key is None:
                    raise EnvelopeError(
                        "op 'd' (delete) record has neither 'before' nor a record key; cannot "
                        "tell which row was deleted",
                        origin=origin,
                    )
            else:
                _check_row(before, "before", False, origin)
    elif op is Op.TRUNCATE:
        if record.key is not None:
            raise EnvelopeError(
                f"op 't' (truncate) record must have a null key, got {_describe(record.key)}",
                origin=origin,
            )
    else:  # Op.MESSAGE
        _check_message(value, origin)

    ts_ms = value.get("ts_ms")
    if source is None:
        collection = _topic_collection(record.topic)
        source_ts_ms = None
        snapshot = _SNAPSHOT_FALSE
    else:
        collection = _collection(connector, source)
        source_ts_ms = _source_ts_ms(source, origin)
        snapshot = _snapshot(source.get("snapshot"), origin)
    return _event(
        record,
        RecordKind.MESSAGE if op is Op.MESSAGE else RecordKind.DATA,
        op,
        connector,
        collection,
        source,
        _as_int(ts_ms, "'ts_ms'", origin) if ts_ms is not None else _sub_ms(value, "", origin),
        source_ts_ms,
        snapshot,
        _transaction_block(value.get("transaction"), origin),
        None,
        None,
        None,
    )


def _sourceless_connector(op_raw: str, connector_hint: str | None, origin: str | None) -> str:
    if connector_hint is None:
        raise EnvelopeError(
            f"op '{op_raw}' record has no 'source' object and the source has no "
            "'connector.hint': set connector.hint so bronze knows which connector wrote it",
            origin=origin,
        )
    return _normalize_connector(connector_hint, "connector_hint", origin)


def _topic_collection(topic: str | None) -> str | None:
    # Debezium topics are <prefix>.<schema or database>.<table>; SQL Server 2.x+ adds the
    # database before the schema. The last two parts are what bronze's collection holds.
    if topic is None:
        return None
    parts = topic.split(".")
    if len(parts) < 3 or not all(parts[-2:]):
        return None
    return f"{parts[-2]}.{parts[-1]}"


def require_collection(event: ChangeEvent, origin: str | None = None) -> None:
    """Refuse a data event whose table bronze cannot name (it would land with a null collection).

    Silver routes every data event to the table ``collection`` names; an event without one can
    only be quarantined, with a reason that says which field is missing and what would fix it.

    Raises:
        EnvelopeError: ``event`` is a data event (op ``c u d r t``) without a collection.
    """
    if event.collection is not None or event.kind is not RecordKind.DATA:
        return
    source = event.source
    op = event.op.value if event.op is not None else "?"
    if source is None:
        raise EnvelopeError(
            f"op '{op}' record has no 'source' block and no usable topic "
            f"({_describe(event.record.topic)}) to name its table: land it from a topic dump "
            'that keeps the topic (kcat -J, kafka_json with "topic") whose name is '
            "<prefix>.<schema>.<table>",
            origin=origin,
        )
    field_name = "collection" if event.connector == "mongodb" else "table"
    fields = ", ".join(sorted(source)) or "none"
    raise EnvelopeError(
        f"op '{op}' record names no table: 'source.{field_name}' is missing or null "
        f"(connector {event.connector}; source fields: {fields}), so bronze cannot route it to a "
        "silver table. Debezium 0.x and some documentation examples (Oracle 2.3) omit it; "
        f"capture with a Debezium version that writes source.{field_name} (every 1.x+ "
        "connector does)",
        origin=origin,
    )


def normalize_tx_id(connector: str | None, tx_id: str) -> str:
    """The transaction identity bronze stores in ``tx_id`` (contract C3).

    Debezium 2.x+ PostgreSQL and YugabyteDB write ``"<txId>:<LSN>"`` with the LSN of each record,
    so BEGIN, END and the data events of one transaction would all differ; bronze keeps
    ``<txId>``. Other connectors' ids (and 1.x PostgreSQL's plain ``txId``) are used as written.

        >>> normalize_tx_id("postgresql", "571:53195829"), normalize_tx_id("mysql", "a:1-5")
        ('571', 'a:1-5')
    """
    if connector in TX_ID_WITH_LSN:
        head, sep, _ = tx_id.partition(":")
        if sep and head.isdigit():
            return head
    return tx_id


def _check_row(row: Any, name: str, mongo: bool, origin: str | None) -> None:
    if mongo:
        # MongoDB rows are extended-JSON documents serialised as strings (io.debezium.data.Json).
        if row.__class__ is not str:
            raise EnvelopeError(
                f"MongoDB '{name}' must be a JSON string (io.debezium.data.Json), got "
                f"{_describe(row)}",
                origin=origin,
            )
    elif row.__class__ is not dict:
        raise EnvelopeError(
            f"'{name}' must be a JSON object (the row), got {_describe(row)}", origin=origin
        )


def _check_mongo_update(value: dict[str, Any], origin: str | None) -> None:
    # Oplog-era connectors send the idempotent update in 'patch'; change-stream connectors send
    # the full document in 'after' and/or an 'updateDescription'. Any one of them is enough.
    patch = value.get("patch")
    after = value.get("after")
    if patch is None and after is None and value.get("updateDescription") is None:
        raise EnvelopeError(
            "MongoDB op 'u' (update) record has none of 'patch', 'after' or 'updateDescription'",
            origin=origin,
        )
    if patch is not None and patch.__class__ is not str:
        raise EnvelopeError(
            f"MongoDB 'patch' must be a JSON string, got {_describe(patch)}", origin=origin
        )
    if after is not None and after.__class__ is not str:
        raise EnvelopeError(
            f"MongoDB 'after' must be a JSON string (io.debezium.data.Json), got "
            f"{_describe(after)}",
            origin=origin,
        )


def _check_message(value: dict[str, Any], origin: str | None) -> None:
    message = value.get("message")
    if message.__class__ is not dict:
        raise EnvelopeError(
            f"op 'm' (message) record needs a 'message' object {{prefix, content}}, got "
            f"{_describe(message)}",
            origin=origin,
        )
    prefix = message.get("prefix")
    if prefix.__class__ is not str:
        raise EnvelopeError(
            f"'message.prefix' must be a string, got {_describe(prefix)}", origin=origin
        )
    content = message.get("content")
    if content is not None and content.__class__ is not str:
        raise EnvelopeError(
            f"'message.content' must be base64 text or null, got {_describe(content)}",
            origin=origin,
        )


def _classify_transaction(
    record: ConnectRecord, value: dict[str, Any], origin: str | None, connector_hint: str | None
) -> ChangeEvent:
    status = value["status"]
    if status != "BEGIN" and status != "END":
        raise EnvelopeError(
            f'transaction record \'status\' must be "BEGIN" or "END", got {_describe(status)}',
            origin=origin,
        )
    tx_id = value.get("id")
    if tx_id.__class__ is not str:
        raise EnvelopeError(
            f"transaction {status} record 'id' must be a string, got {_describe(tx_id)}",
            origin=origin,
        )
    event_count = value.get("event_count")
    collections = value.get("data_collections")
    pairs: tuple[tuple[str, int], ...] | None = None
    if status == "BEGIN":
        if event_count is not None or collections is not None:
            raise EnvelopeError(
                "transaction BEGIN record must have null 'event_count' and 'data_collections' "
                f"(they belong on END), got event_count={_describe(event_count)}, "
                f"data_collections={_describe(collections)}",
                origin=origin,
            )
    else:
        if event_count is None:
            raise EnvelopeError(
                "transaction END record has no 'event_count' (missing or null)", origin=origin
            )
        event_count = _as_int(event_count, "transaction END 'event_count'", origin)
        if collections is None:
            raise EnvelopeError(
                "transaction END record has no 'data_collections' (missing or null)",
                origin=origin,
            )
        pairs = _data_collections(collections, origin)
    return _event(
        record,
        RecordKind.TRANSACTION,
        None,
        _hint(connector_hint, origin),
        None,
        None,
        _as_int(value.get("ts_ms"), "transaction 'ts_ms'", origin),
        None,
        None,
        TransactionInfo(tx_id, None, None),
        status,
        event_count,
        pairs,
    )


def _data_collections(raw: Any, origin: str | None) -> tuple[tuple[str, int], ...]:
    if raw.__class__ is not list:
        raise EnvelopeError(
            f"transaction END 'data_collections' must be an array, got {_describe(raw)}",
            origin=origin,
        )
    pairs = []
    for i, item in enumerate(raw):
        where = f"transaction END 'data_collections[{i}]'"
        if item.__class__ is not dict:
            raise EnvelopeError(f"{where} must be an object, got {_describe(item)}", origin=origin)
        name = item.get("data_collection")
        if name.__class__ is not str:
            raise EnvelopeError(
                f"{where}.data_collection must be a string, got {_describe(name)}", origin=origin
            )
        count = _as_int(item.get("event_count"), f"{where}.event_count", origin)
        if count is None:
            raise EnvelopeError(f"{where} has no 'event_count'", origin=origin)
        pairs.append((name, count))
    return tuple(pairs)


def _classify_schema_change(
    record: ConnectRecord, value: dict[str, Any], origin: str | None, connector_hint: str | None
) -> ChangeEvent:
    database = value.get("databaseName")
    if database is not None and database.__class__ is not str:
        raise EnvelopeError(
            f"schema-change record 'databaseName' must be a string, got {_describe(database)}",
            origin=origin,
        )
    schema_name = value.get("schemaName")
    if schema_name is not None and schema_name.__class__ is not str:
        raise EnvelopeError(
            f"schema-change record 'schemaName' must be a string, got {_describe(schema_name)}",
            origin=origin,
        )
    ddl = value.get("ddl")
    if ddl is not None and ddl.__class__ is not str:
        raise EnvelopeError(
            f"schema-change record 'ddl' must be a string, got {_describe(ddl)}", origin=origin
        )
    changes = value.get("tableChanges")
    if changes is not None and changes.__class__ is not list:
        raise EnvelopeError(
            f"schema-change record 'tableChanges' must be an array, got {_describe(changes)}",
            origin=origin,
        )
    source = value.get("source")
    if source is not None and source.__class__ is not dict:
        raise EnvelopeError(
            f"schema-change record 'source' must be a JSON object, got {_describe(source)}",
            origin=origin,
        )
    if source is None:
        connector = _hint(connector_hint, origin)
        source_ts_ms = None
        snapshot = None
    else:
        connector = (
            _connector(source, connector_hint, origin)
            if "connector" in source or connector_hint is not None
            else None  # 0.x/1.2 MySQL schema changes carry a source without 'connector'
        )
        source_ts_ms = _source_ts_ms(source, origin)
        snapshot = _snapshot(source.get("snapshot"), origin)
    if database and schema_name:
        collection: str | None = f"{database}.{schema_name}"
    else:
        collection = database or None
    return _event(
        record,
        RecordKind.SCHEMA_CHANGE,
        None,
        connector,
        collection,
        source,
        _as_int(value.get("ts_ms"), "schema-change 'ts_ms'", origin),
        source_ts_ms,
        snapshot,
        None,
        None,
        None,
        None,
    )


# --- field helpers (hot path: keep them to dict lookups) ---------------------------------------


def _hint(connector_hint: str | None, origin: str | None) -> str | None:
    if connector_hint is None:
        return None
    return _normalize_connector(connector_hint, "connector_hint", origin)


def _connector(source: dict[str, Any], connector_hint: str | None, origin: str | None) -> str:
    raw = source.get("connector")
    if raw is None:
        if connector_hint is None:
            raise EnvelopeError(
                "'source' has no 'connector' field (Debezium 0.x omitted it): set "
                "'connector.hint' on the source (connector_hint) for such records",
                origin=origin,
            )
        return _normalize_connector(connector_hint, "connector_hint", origin)
    return _normalize_connector(raw, "'source.connector'", origin)


def _normalize_connector(raw: Any, what: str, origin: str | None) -> str:
    known = _CONNECTORS.get(raw) if raw.__class__ is str else None
    if known is not None:
        return known
    if raw.__class__ is not str or not raw:
        raise EnvelopeError(
            f'{what} must be a non-empty string such as "mysql", got {_describe(raw)}',
            origin=origin,
        )
    return str(raw).lower()


def _collection(connector: str, source: dict[str, Any]) -> str | None:
    if connector == "mongodb":
        table = source.get("collection")
    else:
        table = source.get("table")
    if not table:
        return None
    if connector in _DB_QUALIFIED:
        qualifier = source.get("db")
    else:
        qualifier = source.get("schema") or source.get("db")
    return f"{qualifier}.{table}" if qualifier else str(table)


def _snapshot(raw: Any, origin: str | None) -> str:
    if raw is None or raw is False:
        return _SNAPSHOT_FALSE
    if raw is True:
        return _SNAPSHOT_TRUE
    if raw.__class__ is str:
        norm = _SNAPSHOT.get(raw) or _SNAPSHOT.get(raw.lower())
        if norm is not None:
            return norm
    raise EnvelopeError(
        f"'source.snapshot' must be a boolean, null or one of {', '.join(SNAPSHOT_VALUES)}; got "
        f"{_describe(raw)}",
        origin=origin,
    )


def _source_ts_ms(source: dict[str, Any], origin: str | None) -> int | None:
    raw = source.get("ts_ms")
    if raw is not None:
        return _as_int(raw, "'source.ts_ms'", origin)
    ts_sec = source.get("ts_sec")  # Debezium 0.x MySQL: seconds, not milliseconds
    if ts_sec is None:
        return _sub_ms(source, "source.", origin)
    sec = _as_int(ts_sec, "'source.ts_sec'", origin)
    return None if sec is None else sec * 1000


def _sub_ms(block: dict[str, Any], where: str, origin: str | None) -> int | None:
    # Debezium 2.x+ writes ts_us/ts_ns beside ts_ms; a producer (or SMT) may keep only those.
    raw = block.get("ts_us")
    if raw is not None:
        us = _as_int(raw, f"'{where}ts_us'", origin)
        return None if us is None else us // 1000
    raw = block.get("ts_ns")
    if raw is not None:
        ns = _as_int(raw, f"'{where}ts_ns'", origin)
        return None if ns is None else ns // 1_000_000
    return None


def _transaction_block(raw: Any, origin: str | None) -> TransactionInfo | None:
    if raw is None:
        return None
    if raw.__class__ is not dict:
        raise EnvelopeError(
            f"'transaction' must be a JSON object or null, got {_describe(raw)}", origin=origin
        )
    tx_id = raw.get("id")
    if tx_id.__class__ is not str:
        raise EnvelopeError(
            f"'transaction.id' must be a string, got {_describe(tx_id)}", origin=origin
        )
    return TransactionInfo(
        tx_id,
        _as_int(raw.get("total_order"), "'transaction.total_order'", origin),
        _as_int(raw.get("data_collection_order"), "'transaction.data_collection_order'", origin),
    )


def _as_int(raw: Any, what: str, origin: str | None) -> int | None:
    if raw is None:
        return None
    if raw.__class__ is int:
        if _INT64_MIN <= raw <= _INT64_MAX:
            return raw
    elif raw.__class__ is str:
        # The 1.2 guide prints some int64 fields as strings ("total_order": "1"), and the
        # CloudEvents converter writes every int64 as a string; accept digits.
        try:
            number = int(raw)
        except ValueError:
            raise EnvelopeError(
                f"{what} must be an integer, got {_describe(raw)}", origin=origin
            ) from None
        if _INT64_MIN <= number <= _INT64_MAX:
            return number
    else:
        raise EnvelopeError(f"{what} must be an integer, got {_describe(raw)}", origin=origin)
    raise EnvelopeError(
        f"{what} = {_describe(raw)} is outside the int64 range Kafka Connect allows",
        origin=origin,
    )


_DESCRIBE_LIMIT: Final = 60


def _describe(raw: Any) -> str:
    """A short JSON-flavoured description of a value for error reasons."""
    if raw is None:
        return "null"
    if raw is True or raw is False:
        return f"boolean {'true' if raw else 'false'}"
    if isinstance(raw, int | float):
        return f"number {raw!r}"
    if isinstance(raw, str):
        text = raw if len(raw) <= _DESCRIBE_LIMIT else raw[: _DESCRIBE_LIMIT - 3] + "..."
        return f"string {_stdlib_json.dumps(text, ensure_ascii=False)}"
    if isinstance(raw, list | tuple):
        return f"array of {len(raw)}"
    if isinstance(raw, dict):
        keys = ", ".join(list(raw)[:6])
        return f"object {{{keys}{', ...' if len(raw) > 6 else ''}}}"
    return type(raw).__name__


# --- JsonConverter -----------------------------------------------------------------------------


def parse_json_converter(
    key: str | bytes | None,
    value: str | bytes | None,
    *,
    headers: Iterable[tuple[str, str | bytes | None]] = (),
    topic: str | None = None,
    origin: str | None = None,
) -> ConnectRecord:
    """Read a record as Kafka Connect's ``JsonConverter`` wrote it.

    Key and value are read independently, each either with ``schemas.enable=true`` (an object
    holding exactly ``schema`` and ``payload``) or ``false`` (the bare payload). A null value, the
    JSON text ``null``, or ``{"schema": null, "payload": null}`` (what pre-2.x Kafka wrote for null,
    KAFKA-3832) is a tombstone.

    Args:
        key: Key bytes or text; None for a null key.
        value: Value bytes or text; None for a tombstone.
        headers: ``(name, value)`` pairs; bytes values are decoded as UTF-8.
        topic: The topic, kept on the record.
        origin: Where the record came from, for error reasons.

    Returns:
        The record; not yet classified.

    Raises:
        EnvelopeError: Key or value is not JSON, the value is not an object, a ``schema`` is
            neither an object nor null, or a header value is not UTF-8.
    """
    key_schema, key_payload = _unwrap(key, "key", origin)
    value_schema, value_payload = _unwrap(value, "value", origin)
    if value_payload is not None and value_payload.__class__ is not dict:
        raise EnvelopeError(
            f"value must be a JSON object (a Debezium envelope), got {_describe(value_payload)}",
            origin=origin,
        )
    return ConnectRecord(
        key_payload,
        value_payload,
        key_schema,
        value_schema,
        _headers(headers, origin) if headers else (),
        topic,
    )


def _unwrap(
    text: str | bytes | None, part: str, origin: str | None
) -> tuple[dict[str, Any] | None, Any]:
    if text is None:
        return None, None
    if not text:
        raise EnvelopeError(
            f"{part} is empty (zero bytes), which is not JSON; a null {part} must be null, "
            "not empty",
            origin=origin,
        )
    try:
        # Numbers exact: an integer beyond 64 bits stays an int, a decimal no double holds a
        # Decimal (orjson would read both as rounded doubles).
        doc = exact_json.loads(text)
    except orjson.JSONDecodeError:
        # orjson rejects numbers beyond the double range, which Jackson accepts; retry with the
        # stdlib parser, which also gives the line/column a person needs when the text is broken.
        try:
            doc = exact_json.stdlib_loads(text)
        except ValueError as exc:
            raise EnvelopeError(f"{part} is not valid JSON: {exc}", origin=origin) from exc
    return split_connect(doc, part, origin)


def split_connect(doc: Any, part: str, origin: str | None) -> tuple[dict[str, Any] | None, Any]:
    """Split JsonConverter's ``{"schema": ..., "payload": ...}`` into (schema, payload).

    Accepts the wrapper with a schema, with ``"schema": null`` (schemaless values written with
    ``schemas.enable=true``) and without the ``schema`` member (``{"payload": ...}``, what some
    producers and SMT chains write); anything else is a bare payload.

    Raises:
        EnvelopeError: ``schema`` is neither an object nor null.
    """
    if doc.__class__ is not dict or "payload" not in doc:
        return None, doc
    size = len(doc)
    if size == 2 and "schema" in doc:
        schema = doc["schema"]
        if schema is not None and schema.__class__ is not dict:
            raise EnvelopeError(
                f"{part} 'schema' must be a JSON object or null, got {_describe(schema)}",
                origin=origin,
            )
        return schema, doc["payload"]
    if size == 1:
        return None, doc["payload"]
    return None, doc


def _headers(
    headers: Iterable[tuple[str, str | bytes | None]], origin: str | None
) -> tuple[tuple[str, str | None], ...]:
    out: list[tuple[str, str | None]] = []
    for name, raw in headers:
        if isinstance(raw, bytes | bytearray):
            try:
                out.append((name, bytes(raw).decode("utf-8")))
            except UnicodeDecodeError as exc:
                raise EnvelopeError(
                    f"header '{name}' is not UTF-8 text: {exc}", origin=origin
                ) from exc
        else:
            out.append((name, raw))
    return tuple(out)


_DUMPS_OPTIONS: Final = orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS


def _json_default(obj: Any) -> Any:
    # Connect BYTES (and Decimal's unscaled bytes) are base64 in JSON, as JsonConverter writes.
    if isinstance(obj, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(obj)).decode("ascii")
    if isinstance(obj, Mapping):
        return dict(obj)
    if isinstance(obj, decimal.Decimal) and obj.is_finite():
        # What parse_json_converter read from a number no double holds: its literal again.
        return orjson.Fragment(str(obj))
    raise TypeError  # orjson replaces the message with its own "Type is not JSON serializable"


def _dumps(doc: Any, part: str) -> str:
    try:
        return orjson.dumps(doc, default=_json_default, option=_DUMPS_OPTIONS).decode()
    except TypeError:
        pass
    try:  # an integer beyond 64 bits (parse_json_converter keeps them): written as its literal
        return orjson.dumps(
            exact_json.literals(doc), default=_json_default, option=_DUMPS_OPTIONS
        ).decode()
    except TypeError as exc:  # orjson.JSONEncodeError is a TypeError
        raise EnvelopeError(
            f"{part} cannot be written as JSON ({exc}); convert values to their Kafka Connect "
            "form first (temporal values to Debezium epoch numbers, decimals to Decimal bytes)"
        ) from exc


def _wrap(
    schema: dict[str, Any] | None, payload: Any, schemas_enable: bool, part: str
) -> str | None:
    # JsonConverter.fromConnectData returns null (no bytes) when both schema and value are null.
    if schema is None and payload is None:
        return None
    if schemas_enable:
        return _dumps({"schema": schema, "payload": payload}, part)
    return _dumps(payload, part)


def to_json_converter(
    record: ConnectRecord, *, schemas_enable: bool
) -> tuple[str | None, str | None]:
    """Write a record as Kafka Connect's ``JsonConverter`` would.

    Compact JSON, keys in insertion order (Connect writes struct fields in schema order), bytes as
    base64. With ``schemas_enable`` each part is ``{"schema": ..., "payload": ...}`` (``schema``
    null for schemaless parts); without, the bare payload. A null payload with no schema is
    written as no bytes at all (None), which is how tombstones and null keys travel.

    Args:
        record: The record.
        schemas_enable: The converter's ``schemas.enable`` setting.

    Returns:
        ``(key text, value text)``; either may be None.

    Raises:
        EnvelopeError: A payload holds a value with no JSON form.
    """
    return (
        _wrap(record.key_schema, record.key, schemas_enable, "key"),
        _wrap(record.value_schema, record.value, schemas_enable, "value"),
    )


# --- builders for our capture agents ------------------------------------------------------------


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _key_json(key: Any) -> str:
    return _dumps(key, "key")


def _transaction_payload(tx: TransactionInfo) -> dict[str, Any]:
    if tx.total_order is None or tx.data_collection_order is None:
        raise ValueError(
            f"transaction {tx.id}: total_order and data_collection_order are required on data "
            "events (Debezium's transaction block has no optional fields)"
        )
    return {
        "id": tx.id,
        "total_order": tx.total_order,
        "data_collection_order": tx.data_collection_order,
    }


def data_record(
    op: Op | str,
    *,
    source: Mapping[str, Any],
    before: Any = None,
    after: Any = None,
    key: Any = None,
    ts_ms: int | None = None,
    transaction: TransactionInfo | None = None,
    key_schema: dict[str, Any] | None = None,
    value_schema: dict[str, Any] | None = None,
    headers: Iterable[tuple[str, str | None]] = (),
    topic: str | None = None,
) -> ConnectRecord:
    """Build a row-change record (op ``c``, ``u``, ``d`` or ``r``).

    Args:
        op: The operation.
        source: The ``source`` block; must include ``connector``.
        before: Row before the change (``u``/``d``); None for ``c``/``r``.
        after: Row after the change (``c``/``r``/``u``); None for ``d``.
        key: Key payload (primary-key columns); None for a keyless table.
        ts_ms: Processing time in ms since the epoch; defaults to now.
        transaction: Transaction block, when transaction metadata is provided.
        key_schema: Key schema for ``schemas.enable=true``.
        value_schema: Envelope schema (see :func:`bronze.connect_schema.envelope_schema`).
        headers: Extra headers as ``(name, JSON text)``.
        topic: Topic name.

    Returns:
        The record, already checked with :func:`classify`.

    Raises:
        ValueError: ``op`` is ``t``/``m`` (use :func:`truncate_record`/:func:`message_record`).
        EnvelopeError: The record would not be valid (e.g. ``c`` without ``after``).
    """
    code = Op(op)
    if code is Op.TRUNCATE or code is Op.MESSAGE:
        raise ValueError(f"op '{code}': use truncate_record() or message_record()")
    value: dict[str, Any] = {
        "before": before,
        "after": after,
        "source": dict(source),
        "op": code.value,
        "ts_ms": _now_ms() if ts_ms is None else ts_ms,
    }
    if transaction is not None:
        value["transaction"] = _transaction_payload(transaction)
    record = ConnectRecord(key, value, key_schema, value_schema, tuple(headers), topic)
    classify(record)
    return record


def tombstone_for(record: ConnectRecord) -> ConnectRecord:
    """The tombstone that follows a delete: same key and key schema, null value, no headers.

    Raises:
        EnvelopeError: The record has no key, so no tombstone can address it.
    """
    if record.key is None:
        raise EnvelopeError("cannot build a tombstone for a record with a null key")
    return ConnectRecord(record.key, None, record.key_schema, None, (), record.topic)


def primary_key_change(
    old_key: Any,
    new_key: Any,
    before: Any,
    after: Any,
    source: Mapping[str, Any],
    *,
    ts_ms: int | None = None,
    key_schema: dict[str, Any] | None = None,
    value_schema: dict[str, Any] | None = None,
    topic: str | None = None,
) -> tuple[ConnectRecord, ConnectRecord, ConnectRecord]:
    """The three records Debezium emits for an UPDATE that changes the primary key (spec §1.7).

    1. ``d`` for the old key with header ``__debezium.newkey`` = the new key (JSON text);
    2. the tombstone for the old key;
    3. ``c`` for the new key with header ``__debezium.oldkey`` = the old key (JSON text).

    All three share ``source`` (so the same position) and ``ts_ms``; bronze orders them by its
    intra-position sequence.

    Raises:
        ValueError: The keys are equal; that is a plain update.
        EnvelopeError: ``before``/``after``/``source`` do not make valid records.
    """
    if old_key == new_key:
        raise ValueError("old and new key are equal: emit a plain 'u' update instead")
    ts = _now_ms() if ts_ms is None else ts_ms
    delete = data_record(
        Op.DELETE,
        source=source,
        before=before,
        key=old_key,
        ts_ms=ts,
        key_schema=key_schema,
        value_schema=value_schema,
        headers=((HEADER_NEW_KEY, _key_json(new_key)),),
        topic=topic,
    )
    create = data_record(
        Op.CREATE,
        source=source,
        after=after,
        key=new_key,
        ts_ms=ts,
        key_schema=key_schema,
        value_schema=value_schema,
        headers=((HEADER_OLD_KEY, _key_json(old_key)),),
        topic=topic,
    )
    return delete, tombstone_for(delete), create


def transaction_begin(
    tx_id: str, *, ts_ms: int | None = None, topic: str | None = None
) -> ConnectRecord:
    """A BEGIN record for ``<prefix>.transaction``: counts are null until END."""
    value = {
        "status": "BEGIN",
        "id": tx_id,
        "event_count": None,
        "data_collections": None,
        "ts_ms": _now_ms() if ts_ms is None else ts_ms,
    }
    return ConnectRecord(
        {"id": tx_id},
        value,
        dict(TRANSACTION_KEY_SCHEMA),
        dict(TRANSACTION_VALUE_SCHEMA),
        (),
        topic,
    )


def transaction_end(
    tx_id: str,
    event_count: int,
    data_collections: Mapping[str, int] | Iterable[tuple[str, int]],
    *,
    ts_ms: int | None = None,
    topic: str | None = None,
) -> ConnectRecord:
    """An END record: total emitted events and the count per data collection.

    Raises:
        ValueError: The per-collection counts do not add up to ``event_count``.
    """
    pairs = list(
        data_collections.items() if isinstance(data_collections, Mapping) else data_collections
    )
    if sum(count for _, count in pairs) != event_count:
        raise ValueError(
            f"transaction {tx_id}: data_collections add up to "
            f"{sum(count for _, count in pairs)}, not event_count {event_count}"
        )
    value = {
        "status": "END",
        "id": tx_id,
        "event_count": event_count,
        "data_collections": [{"data_collection": n, "event_count": c} for n, c in pairs],
        "ts_ms": _now_ms() if ts_ms is None else ts_ms,
    }
    return ConnectRecord(
        {"id": tx_id},
        value,
        dict(TRANSACTION_KEY_SCHEMA),
        dict(TRANSACTION_VALUE_SCHEMA),
        (),
        topic,
    )


def heartbeat(server_name: str, ts_ms: int, *, topic: str | None = None) -> ConnectRecord:
    """A heartbeat: key ``{serverName}``, value ``{ts_ms}``, on ``__debezium-heartbeat.<name>``."""
    return ConnectRecord(
        {"serverName": server_name},
        {"ts_ms": ts_ms},
        dict(HEARTBEAT_KEY_SCHEMA),
        dict(HEARTBEAT_VALUE_SCHEMA),
        (),
        f"{HEARTBEAT_TOPIC_PREFIX}.{server_name}" if topic is None else topic,
    )


def schema_change(
    database_name: str,
    source: Mapping[str, Any],
    *,
    ddl: str | None = None,
    schema_name: str | None = None,
    table_changes: Iterable[Mapping[str, Any]] = (),
    ts_ms: int | None = None,
    key_schema: dict[str, Any] | None = None,
    value_schema: dict[str, Any] | None = None,
    topic: str | None = None,
) -> ConnectRecord:
    """A schema-change record (topic ``<prefix>``): key ``{databaseName}``.

    Raises:
        ValueError: Neither ``ddl`` nor ``table_changes`` is given.
    """
    changes = [dict(c) for c in table_changes]
    if ddl is None and not changes:
        raise ValueError("a schema change needs ddl text, table_changes, or both")
    value = {
        "source": dict(source),
        "ts_ms": _now_ms() if ts_ms is None else ts_ms,
        "databaseName": database_name,
        "schemaName": schema_name,
        "ddl": ddl,
        "tableChanges": changes,
    }
    return ConnectRecord(
        {"databaseName": database_name}, value, key_schema, value_schema, (), topic
    )


def truncate_record(
    source: Mapping[str, Any],
    *,
    ts_ms: int | None = None,
    transaction: TransactionInfo | None = None,
    value_schema: dict[str, Any] | None = None,
    topic: str | None = None,
) -> ConnectRecord:
    """A truncate (op ``t``): null key, null before/after, the table named in ``source``."""
    value: dict[str, Any] = {
        "before": None,
        "after": None,
        "source": dict(source),
        "op": Op.TRUNCATE.value,
        "ts_ms": _now_ms() if ts_ms is None else ts_ms,
    }
    if transaction is not None:
        value["transaction"] = _transaction_payload(transaction)
    record = ConnectRecord(None, value, None, value_schema, (), topic)
    classify(record)
    return record


def message_record(
    prefix: str,
    content: bytes | str | None,
    *,
    source: Mapping[str, Any],
    ts_ms: int | None = None,
    topic: str | None = None,
) -> ConnectRecord:
    """A logical-decoding message (op ``m``): key ``{prefix}``, ``message: {prefix, content}``.

    ``content`` is Connect BYTES, so it travels as base64; text is encoded as UTF-8 first.
    """
    raw = content.encode("utf-8") if isinstance(content, str) else content
    value = {
        "op": Op.MESSAGE.value,
        "ts_ms": _now_ms() if ts_ms is None else ts_ms,
        "source": dict(source),
        "message": {
            "prefix": prefix,
            "content": None if raw is None else base64.b64encode(raw).decode("ascii"),
        },
    }
    record = ConnectRecord({"prefix": prefix}, value, None, None, (), topic)
    classify(record)
    return record
