"""Column names and Arrow schemas of the bronze tables.

Bronze is three append-only Delta tables under ``<lake>/bronze``:

* ``events``: every record every capture agent read, as produced (key JSON, value JSON,
  headers) plus extracted columns for routing and ordering. One table for all sources,
  partitioned by ``source`` and ``ingest_date``.
* ``schemas``: the registry of Connect schemas, ``schema_id`` (a content fingerprint) to the
  schema JSON. Rows in ``events`` carry only the id.
* ``quarantine``: records that could not be landed, with the raw bytes, the reason and where
  they came from.

The names below are the contract with silver and gold; change them only with a migration.
"""

from __future__ import annotations

import pyarrow as pa

__all__ = [
    "EVENTS_SCHEMA",
    "QUARANTINE_SCHEMA",
    "SCHEMAS_SCHEMA",
    "PARTITION_COLUMNS",
    "HEADER_TYPE",
]

# --- events columns -------------------------------------------------------------------------
SOURCE = "source"
"""Configured source name (``sources[].name``); first partition column."""
INGEST_DATE = "ingest_date"
"""UTC date of the bronze commit; second partition column (keeps partitions bounded)."""
CONNECTOR = "connector"
"""Debezium connector kind that produced the record: postgresql, mysql, sqlserver, ..."""
SOURCE_PARTITION = "source_partition"
"""Debezium's source partition (logical server name, replica set or database).

Positions compare only within one source partition."""
COLLECTION = "collection"
"""Data collection: ``db.table`` (MySQL), ``schema.table`` (PG, SQL Server, Db2, Oracle),
``db.collection`` (MongoDB)."""
TOPIC = "topic"
"""Kafka topic the record was read from or would have been written to, when known."""
KIND = "kind"
"""data | tombstone | transaction | schema_change | heartbeat | message."""
OP = "op"
"""Debezium op code c u d r t m (null for non-data kinds)."""
POSITION = "position"
"""Order-preserving bytes of the source position plus intra-position sequence.

``bronze.positions.decode_position(connector, position).to_json()`` makes it readable (and
``medallion_position(connector, position)`` in Spark SQL); it is not stored twice because
formatting it per row would cost a tenth of the landing budget."""
SEQ = "seq"
"""Intra-position sequence (also the last component of ``position``)."""
TX_ID = "tx_id"
"""Source transaction id (``transaction.id``, else the native id; a tombstone gets its delete's)."""
TX_ORDER = "tx_order"
"""``transaction.total_order``: 1-based rank of the event within its transaction."""
TX_COLLECTION_ORDER = "tx_collection_order"
"""``transaction.data_collection_order``."""
TX_STATUS = "tx_status"
"""BEGIN or END for transaction records."""
TX_EVENT_COUNT = "tx_event_count"
"""``event_count`` of an END record."""
TX_PARTIAL = "tx_partial"
"""True when this batch cut the transaction (it exceeded ``max.transaction.size``): wait for END."""
SNAPSHOT = "snapshot"
"""Normalized ``source.snapshot`` (true, first, last, incremental, false) or null."""
KEY_JSON = "key_json"
"""The record key payload as JSON text (null for keyless records)."""
VALUE_JSON = "value_json"
"""The record value payload as JSON text; null is a tombstone."""
KEY_SCHEMA_ID = "key_schema_id"
"""Registry id of the key's Connect schema (null when the producer sent no schema)."""
VALUE_SCHEMA_ID = "value_schema_id"
"""Registry id of the value's Connect schema (null when the producer sent no schema)."""
HEADERS = "headers"
"""Record headers as (key, JSON text) pairs, e.g. ``__debezium.oldkey``."""
SOURCE_TS_MS = "source_ts_ms"
"""``source.ts_ms``: when the change happened in the database (0 for some snapshot rows)."""
EVENT_TS_MS = "event_ts_ms"
"""Envelope ``ts_ms``: when the connector processed the change."""
CAPTURE_TS = "capture_ts"
"""When the capture agent read the record."""
INGEST_TS = "ingest_ts"
"""When the bronze batch was committed (one value per batch)."""
ORIGIN = "origin"
"""Where the record came from: ``file:line`` or a source position string."""
AGENT_ID = "agent_id"
"""Delta app id of the writing agent (``medallion-agent:<source>``)."""
BATCH_SEQ = "batch_seq"
"""The agent's batch number; also the Delta app transaction version of the commit."""
BATCH_OFFSET = "batch_offset"
"""The source offset reached by the batch (JSON), set on the batch's last row only."""

HEADER_TYPE = pa.list_(pa.struct([("key", pa.string()), ("value", pa.string())]))
_TS = pa.timestamp("us", tz="UTC")

EVENTS_SCHEMA = pa.schema(
    [
        (SOURCE, pa.string()),
        (INGEST_DATE, pa.date32()),
        (CONNECTOR, pa.string()),
        (SOURCE_PARTITION, pa.string()),
        (COLLECTION, pa.string()),
        (TOPIC, pa.string()),
        (KIND, pa.string()),
        (OP, pa.string()),
        (POSITION, pa.binary()),
        (SEQ, pa.int64()),
        (TX_ID, pa.string()),
        (TX_ORDER, pa.int64()),
        (TX_COLLECTION_ORDER, pa.int64()),
        (TX_STATUS, pa.string()),
        (TX_EVENT_COUNT, pa.int64()),
        (TX_PARTIAL, pa.bool_()),
        (SNAPSHOT, pa.string()),
        (KEY_JSON, pa.string()),
        (VALUE_JSON, pa.string()),
        (KEY_SCHEMA_ID, pa.string()),
        (VALUE_SCHEMA_ID, pa.string()),
        (HEADERS, HEADER_TYPE),
        (SOURCE_TS_MS, pa.int64()),
        (EVENT_TS_MS, pa.int64()),
        (CAPTURE_TS, _TS),
        (INGEST_TS, _TS),
        (ORIGIN, pa.string()),
        (AGENT_ID, pa.string()),
        (BATCH_SEQ, pa.int64()),
        (BATCH_OFFSET, pa.string()),
    ]
)

PARTITION_COLUMNS: tuple[str, ...] = (SOURCE, INGEST_DATE)

# --- quarantine columns -------------------------------------------------------------------------
REASON = "reason"
"""Why the record could not be landed, one sentence naming what is wrong."""
ERROR_CLASS = "error_class"
"""The medallion error class that rejected it (EnvelopeError, PositionError, ...)."""
RAW = "raw"
"""The record bytes exactly as read."""

QUARANTINE_SCHEMA = pa.schema(
    [
        (SOURCE, pa.string()),
        (INGEST_DATE, pa.date32()),
        (ORIGIN, pa.string()),
        (REASON, pa.string()),
        (ERROR_CLASS, pa.string()),
        (RAW, pa.binary()),
        (CAPTURE_TS, _TS),
        (INGEST_TS, _TS),
        (AGENT_ID, pa.string()),
        (BATCH_SEQ, pa.int64()),
    ]
)

# --- schema registry columns --------------------------------------------------------------------
SCHEMA_ID = "schema_id"
SCHEMA_JSON = "schema_json"
SCHEMA_NAME = "schema_name"
FIRST_SEEN_TS = "first_seen_ts"

SCHEMAS_SCHEMA = pa.schema(
    [
        (SCHEMA_ID, pa.string()),
        (SCHEMA_NAME, pa.string()),
        (SCHEMA_JSON, pa.string()),
        (SOURCE, pa.string()),
        (FIRST_SEEN_TS, _TS),
    ]
)
