"""Line formats of Debezium JSON files: what each common producer writes, read back as records.

One line holds one Kafka record. :func:`parse_line` turns it into a
:class:`~bronze.envelope.ConnectRecord` plus, when the line holds them verbatim, the JSON text of
the key and value payloads (bronze stores that text as produced). Formats, see
``docs/bronze.md`` ("The debezium_json source") for examples:

``envelope``
    The value as Kafka Connect's ``JsonConverter`` writes it: ``{"schema": ..., "payload": ...}``,
    ``{"schema": null, "payload": ...}``, ``{"payload": ...}`` or the bare payload (Debezium
    Server's output, Kafka Connect's ``FileStreamSink`` with a ``StringConverter``).
``kafka_json``
    One object with ``key`` and ``value`` (or kcat's ``payload``), optional ``headers`` (object,
    kcat's flat ``[name, value, ...]`` list, or ``[{key, value}]``) and ``topic``; key and value
    as JSON or as JSON text (``kcat -J``). Other members (``partition``, ``offset``, ``ts``...)
    are allowed and not stored.
``key_tab_value`` / ``console``
    ``kafka-console-consumer`` output with its default separators: optional ``CreateTime:<ms>``
    (``print.timestamp``), ``Partition:<n>``, ``Offset:<n>``, ``Delivery:<n>``, then the
    headers (``print.headers``: ``name:value,name:value`` or ``NO_HEADERS``), the key
    (``print.key``) and the value, separated by tabs; ``null`` for a null key or value.
``cloudevents``
    Debezium's ``CloudEventsConverter`` in structured JSON mode: ``data`` holds the row images,
    ``iodebezium*`` extension attributes hold ``op``, the ``source`` fields and the transaction
    block. It is mapped back to the Debezium envelope, so it lands like the plain form; the
    CloudEvents context attributes (``id``, ``source``, ``type``, ``time``...) are kept as
    ``ce_<name>`` headers (the CloudEvents Kafka binding's names).

``auto`` detects the format per line. Everything that cannot be read raises
:class:`~pipeline.errors.EnvelopeError` with a reason naming the field and the fix.
"""

from __future__ import annotations

import json as _stdlib_json
import re
from collections.abc import Mapping
from typing import Any, Final

import orjson

from bronze import exact_json
from bronze.connect_schema import CONNECTORS, source_schema
from bronze.envelope import ConnectRecord, fast_record, split_connect
from bronze.exact_json import exact, stdlib_loads
from pipeline.errors import EnvelopeError

__all__ = [
    "FORMATS",
    "Parsed",
    "parse_line",
    "parse_record",
    "loads",
    "dumps",
    "from_cloudevent",
]

FORMATS: Final = ("auto", "envelope", "kafka_json", "key_tab_value", "console", "cloudevents")
"""Accepted values of the ``format`` setting; ``key_tab_value`` and ``console`` are one reader."""

Parsed = tuple[ConnectRecord, bytes | None, bytes | None]
"""A parsed record and, when available verbatim, the JSON text of its key and value payloads."""

# --- JSON ------------------------------------------------------------------------------------


def loads(text: bytes, origin: str, what: str) -> Any:
    """Parse JSON: orjson, with the stdlib's parser as a second opinion on what orjson refuses.

    orjson reads integers beyond 64 bits and decimals beyond double precision inexactly. Where
    a payload is written again instead of stored as produced (a wrapper is taken off), its
    numbers are made exact first (:func:`bronze.exact_json.exact`); what orjson refuses (a number
    beyond the double range) is read by the stdlib with exact numbers.

    Raises:
        EnvelopeError: Not valid JSON; the reason names ``what`` and the parser's message.
    """
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        try:  # orjson refuses numbers beyond the double range, which Jackson writes.
            return stdlib_loads(text)
        except ValueError:
            pass
        raise EnvelopeError(f"{what} is not valid JSON: {exc}", origin=origin) from None


def dumps(doc: Any) -> str:
    """Compact JSON text of a parsed document (big integers and exact decimals included)."""
    return exact_json.dumps(doc)


# --- dispatch --------------------------------------------------------------------------------


def parse_line(line: bytes, fmt: str, origin: str) -> Parsed:
    """Parse one stripped, non-empty line in format ``fmt`` (see the module docstring).

    Raises:
        EnvelopeError: The line is not a record of that format.
    """
    if fmt == "auto":
        if b"\t" in line:
            parsed = _console_or_none(line, origin)
            if parsed is not None:
                return parsed
        obj = _loads_line(line, origin)
        if obj.__class__ is dict:
            if "key" in obj and ("value" in obj or "payload" in obj):
                return _from_wrapper(obj, origin, line)
            if "specversion" in obj and "data" in obj:
                return _cloudevent_record(exact(obj, line), origin)
        return _record(None, obj, (), None, origin, None, line)
    if fmt == "key_tab_value" or fmt == "console":
        return _console(line, origin)
    obj = _loads_line(line, origin)
    if fmt == "kafka_json":
        if obj.__class__ is not dict:
            raise EnvelopeError(
                f"a kafka_json line must be a JSON object, got {type(obj).__name__}",
                origin=origin,
            )
        return _from_wrapper(obj, origin, line)
    if fmt == "cloudevents":
        return _cloudevent_record(exact(obj, line), origin)
    return _record(None, obj, (), None, origin, None, line)


def parse_record(
    key: Any,
    value: Any,
    headers: tuple[tuple[str, str | None], ...],
    topic: str | None,
    origin: str,
    key_text: bytes | None = None,
    value_text: bytes | None = None,
) -> Parsed:
    """Read one Kafka record whose key and value are already decoded documents (or None).

    The entry point of sources that get records, not lines (the ``kafka`` source): the same
    envelope handling as a ``kafka_json`` line, with JsonConverter's ``{"schema", "payload"}``
    wrapper, and CloudEventsConverter values, recognised the same way.

    Args:
        key: The decoded key document, or None.
        value: The decoded value document, or None for a tombstone.
        headers: ``(name, text)`` pairs.
        topic: The topic the record was read from.
        origin: Where it came from, for error messages.
        key_text: The key's JSON text as produced, when it is exactly ``key``.
        value_text: The value's JSON text as produced, when it is exactly ``value``.

    Raises:
        EnvelopeError: The value is not a Debezium record.
    """
    if value.__class__ is dict and "specversion" in value and "op" not in value:
        if value_text is not None:
            value = exact(value, value_text)  # mapped to an envelope: written again
        return _cloudevent_in_record(key, value, headers, topic, origin, key_text)
    return _record(key, value, headers, topic, origin, key_text, value_text)


def _loads_line(line: bytes, origin: str) -> Any:
    try:
        return orjson.loads(line)
    except orjson.JSONDecodeError:
        pass
    if _CONNECT_TO_STRING.match(line):
        raise EnvelopeError(
            "line is Kafka Connect's toString() of a record value (FileStreamSink with a "
            "JsonConverter or AvroConverter as value.converter), not JSON: types and nulls cannot "
            "be recovered from it. Configure the sink with value.converter="
            "org.apache.kafka.connect.storage.StringConverter, which writes the JSON as it is "
            "in the topic",
            origin=origin,
        )
    return loads(line, origin, "line")


# Struct{after=Struct{...},op=c} (Struct.toString) or {before=null, after={id=1}} (Map.toString).
_CONNECT_TO_STRING: Final = re.compile(rb"^\s*(Struct\{|\{[A-Za-z_][A-Za-z0-9_]*=)")

# --- envelope and kafka_json -----------------------------------------------------------------


def _record(
    key: Any,
    value: Any,
    headers: tuple[tuple[str, str | None], ...],
    topic: Any,
    origin: str,
    key_text: bytes | None,
    value_text: bytes | None,
) -> Parsed:
    # Inline fast path: most payloads come without the {"schema", "payload"} wrapper. A payload
    # taken out of one is written again, so its integers must be exact.
    if key.__class__ is dict and "payload" in key:
        if key_text is not None:
            key = exact(key, key_text)
        key_schema, key_payload = split_connect(key, "key", origin)
    else:
        key_schema, key_payload = None, key
    if value.__class__ is dict and "payload" in value:
        if value_text is not None:
            value = exact(value, value_text)
        value_schema, value_payload = split_connect(value, "value", origin)
    else:
        value_schema, value_payload = None, value
    if value_payload is not None and value_payload.__class__ is not dict:
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
        topic if topic.__class__ is str else None,
    )
    # The text as produced is kept when it is exactly the payload (no wrapper); it is what
    # bronze stores, and re-serializing would cost a microsecond per record.
    return (
        record,
        key_text if key_payload is key and key is not None else None,
        value_text if value_payload is value and value is not None else None,
    )


def _from_wrapper(obj: dict[str, Any], origin: str, line: bytes) -> Parsed:
    if "payload_error" in obj or "key_error" in obj:
        problem = "payload_error" if obj.get("payload_error") is not None else "key_error"
        if obj.get(problem) is not None:
            raise EnvelopeError(
                f"the dump tool could not read this record: {problem} = {obj[problem]!r}",
                origin=origin,
            )
    value = obj["value"] if "value" in obj else obj.get("payload")
    key = obj.get("key")
    if not (key is None or key.__class__ is str) or not (value is None or value.__class__ is str):
        # Key or value held as JSON, not as text: bronze writes it again, integers exact.
        obj = exact(obj, line)
        value = obj["value"] if "value" in obj else obj.get("payload")
        key = obj.get("key")
    key_text = value_text = None
    # kcat -J and similar dumps write key and value as JSON text.
    if key.__class__ is str:
        key_text = key.encode()
        key = loads(key_text, origin, "key")
    if value.__class__ is str:
        value_text = value.encode()
        value = loads(value_text, origin, "value")
    headers = _headers(obj["headers"], origin) if "headers" in obj else ()
    if value.__class__ is dict and "specversion" in value and "op" not in value:
        # A topic written by CloudEventsConverter, dumped with kcat -J or similar: the record
        # value is the CloudEvent; the key and headers are the record's own.
        return _cloudevent_in_record(key, value, headers, obj.get("topic"), origin, key_text)
    return _record(key, value, headers, obj.get("topic"), origin, key_text, value_text)


def _cloudevent_in_record(
    key: Any,
    event: dict[str, Any],
    headers: tuple[tuple[str, str | None], ...],
    topic: Any,
    origin: str,
    key_text: bytes | None,
) -> Parsed:
    envelope, value_schema, ce_headers = from_cloudevent(event, origin)
    if key.__class__ is dict and "payload" in key:
        key_schema, key_payload = split_connect(key, "key", origin)
    else:
        key_schema, key_payload = None, key
    record = fast_record(
        key_payload,
        envelope,
        key_schema,
        value_schema,
        (*headers, *ce_headers),
        topic if topic.__class__ is str else None,
    )
    return record, key_text if key_payload is key and key is not None else None, None


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
            out.append((name, dumps(value)))
    return tuple(out)


# --- kafka-console-consumer ------------------------------------------------------------------

_CONSOLE_META: Final = (
    b"CreateTime:",
    b"LogAppendTime:",
    b"NO_TIMESTAMP",
    b"Partition:",
    b"Offset:",
    b"Delivery:",
)
_NO_HEADERS: Final = b"NO_HEADERS"


def _console_or_none(line: bytes, origin: str) -> Parsed | None:
    # A raw tab cannot occur inside JSON text, only as whitespace between tokens: if the line is
    # not a console layout it is read as one JSON document instead.
    parts = line.split(b"\t")
    if not parts[0].startswith(_CONSOLE_META) and not _is_json(parts[0].strip()):
        if not _looks_like_headers(parts[0]) or len(parts) < 2:
            return None
    try:
        return _console_parts(parts, origin)
    except EnvelopeError:
        if _is_json(line):
            return None
        raise


def _console(line: bytes, origin: str) -> Parsed:
    return _console_parts(line.split(b"\t"), origin)


def _console_parts(parts: list[bytes], origin: str) -> Parsed:
    i = 0
    while i < len(parts) - 1 and parts[i].startswith(_CONSOLE_META):
        i += 1
    rest = [p.strip() for p in parts[i:]]
    headers: tuple[tuple[str, str | None], ...] = ()
    if rest[0] == _NO_HEADERS:
        rest = rest[1:]
    elif len(rest) == 3 or (len(rest) == 2 and not _is_json(rest[0])):
        headers = _console_headers(rest[0], origin)
        rest = rest[1:]
    if len(rest) == 2:
        key_text: bytes | None = rest[0]
        key = loads(rest[0], origin, "key")
        value_text = rest[1]
    elif len(rest) == 1:
        key_text, key, value_text = None, None, rest[0]
    else:
        raise EnvelopeError(
            f"{len(parts)} tab-separated fields: more than kafka-console-consumer writes "
            "(timestamp, partition, offset, delivery, headers, key, value)",
            origin=origin,
        )
    value = loads(value_text, origin, "value")
    return _record(key, value, headers, None, origin, key_text, value_text)


def _is_json(text: bytes) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


_HEADER_NAME: Final = re.compile(rb"^[^\s:{}\[\]\"]+:")


def _looks_like_headers(text: bytes) -> bool:
    return text == _NO_HEADERS or _HEADER_NAME.match(text) is not None


def _console_headers(text: bytes, origin: str) -> tuple[tuple[str, str | None], ...]:
    """``name:value,name:value`` as DefaultMessageFormatter prints it (values as raw text).

    A value may itself contain commas (JSON text such as ``{"id":1,"k":2}``): a value that
    starts like JSON is read as one JSON value, so its commas do not split it.
    """
    try:
        s = text.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise EnvelopeError(f"headers are not UTF-8 text: {exc}", origin=origin) from None
    out: list[tuple[str, str | None]] = []
    pos = 0
    decoder = _stdlib_json.JSONDecoder()
    while pos < len(s):
        colon = s.find(":", pos)
        if colon < 0:
            raise EnvelopeError(
                f"header {s[pos:]!r} has no ':' between its name and value "
                "(kafka-console-consumer prints name:value,name:value)",
                origin=origin,
            )
        name = s[pos:colon]
        start = colon + 1
        end = -1
        if s[start : start + 1] in ("{", "[", '"'):
            try:
                end = decoder.raw_decode(s, start)[1]
            except ValueError:
                end = -1
            if end >= 0 and end < len(s) and s[end] != ",":
                end = -1
        if end < 0:
            comma = s.find(",", start)
            end = len(s) if comma < 0 else comma
        raw = s[start:end]
        out.append((name, None if raw == "null" else raw))
        pos = end + 1
    return tuple(out)


# --- CloudEvents -----------------------------------------------------------------------------

_CE_PREFIX: Final = "iodebezium"
_CE_OP: Final = "iodebeziumop"
_CE_TX: Final = {
    # TransactionMonitor.TRANSACTION_BLOCK_SCHEMA fields, named "iodebezium" + "tx" + field
    # with every character outside [A-Za-z0-9] removed (CloudEventsConverter.txExtensionName).
    "iodebeziumtxid": "id",
    "iodebeziumtxtotalorder": "total_order",
    "iodebeziumtxdatacollectionorder": "data_collection_order",
}
_CE_CONTEXT: Final = frozenset(
    {"id", "source", "specversion", "type", "time", "datacontenttype", "dataschema", "subject"}
)
_EXTRA_SOURCE_FIELDS: Final = (
    # Fields of older/newer source blocks that connect_schema.source_schema() does not list.
    ("ts_sec", "int64"),
    ("txnNumber", "int64"),
    ("lsid", "string"),
    ("wallTime", "int64"),
    ("row_id", "string"),
    ("start_scn", "string"),
    ("commit_ts_ms", "int64"),
    ("start_ts_ms", "int64"),
)


def _ce_name(field_name: str) -> str:
    """CloudEventsConverter.adjustExtensionName: prefix, drop characters outside [A-Za-z0-9]."""
    return _CE_PREFIX + re.sub(r"[^A-Za-z0-9]", "", field_name)


def _source_fields() -> dict[str | None, dict[str, tuple[str, str]]]:
    """Per connector: extension attribute name -> (source field, Connect type)."""
    extra = {_ce_name(f): (f, t) for f, t in _EXTRA_SOURCE_FIELDS}
    out: dict[str | None, dict[str, tuple[str, str]]] = {}
    union: dict[str, tuple[str, str]] = dict(extra)
    for connector in CONNECTORS:
        fields = {
            _ce_name(f["field"]): (str(f["field"]), str(f["type"]))
            for f in source_schema(connector)["fields"]
        }
        out[connector] = {**extra, **fields}
        for k, v in fields.items():
            union.setdefault(k, v)
    out[None] = union
    return out


_SOURCE_FIELDS: Final = _source_fields()


def from_cloudevent(
    event: Mapping[str, Any], origin: str
) -> tuple[dict[str, Any], dict[str, Any] | None, tuple[tuple[str, str | None], ...]]:
    """Map a structured-mode CloudEvent written by Debezium back to the Debezium envelope.

    The ``data`` member holds the envelope's data fields (``before``/``after``, MongoDB's
    ``after``/``patch``/``filter``...), possibly wrapped as ``{"schema", "payload"}``; the
    ``iodebezium*`` extension attributes hold ``op``, every ``source`` field (int64 fields as
    strings, per the CloudEvents type system) and the ``transaction`` block. Extension names lose
    their underscores (``ts_ms`` -> ``iodebeziumtsms``), so they are mapped back through the
    connector's source schema; an attribute no schema knows keeps its name without the prefix.

    Returns:
        ``(envelope payload, data schema or None, ce_* headers)``.

    Raises:
        EnvelopeError: Not a Debezium CloudEvent, ``data`` is not JSON (Avro data), or the
            extension attributes are missing (``extension.attributes.enable=false``).
    """
    data = event.get("data")
    if isinstance(data, str):
        raise EnvelopeError(
            f"CloudEvent 'data' is {event.get('datacontenttype') or 'not JSON'} (base64 text), "
            "which bronze cannot decode without the schema registry: configure the "
            "CloudEventsConverter with data.serializer.type=json",
            origin=origin,
        )
    if not isinstance(data, dict):
        raise EnvelopeError(
            f"CloudEvent 'data' must be a JSON object, got {type(data).__name__}", origin=origin
        )
    schema, payload = split_connect(data, "CloudEvent data", origin)
    if not isinstance(payload, dict):
        raise EnvelopeError(
            f"CloudEvent data payload must be a JSON object, got {type(payload).__name__}",
            origin=origin,
        )
    op = event.get(_CE_OP)
    if op is None:
        raise EnvelopeError(
            f"CloudEvent has no '{_CE_OP}' attribute: bronze needs Debezium's extension "
            "attributes (CloudEventsConverter extension.attributes.enable=true, the default) to "
            "know the operation and source position",
            origin=origin,
        )
    connector = event.get("iodebeziumconnector")
    known = _SOURCE_FIELDS.get(connector if isinstance(connector, str) else None)
    known = known if known is not None else _SOURCE_FIELDS[None]
    source: dict[str, Any] = {}
    transaction: dict[str, Any] = {}
    headers: list[tuple[str, str | None]] = []
    for name, value in event.items():
        if name == "data" or name == _CE_OP:
            continue
        tx_field = _CE_TX.get(name)
        if tx_field is not None:
            transaction[tx_field] = value
        elif name.startswith(_CE_PREFIX):
            field_name, type_ = known.get(name, (name[len(_CE_PREFIX) :], "string"))
            if type_ == "int64" and isinstance(value, str) and value.lstrip("-").isdigit():
                value = int(value)
            source[field_name] = value
        else:
            headers.append((f"ce_{name}", None if value is None else dumps(value)))
    envelope = dict(payload)
    envelope["source"] = source
    envelope["op"] = op
    if transaction.get("id") is not None:
        envelope["transaction"] = {
            "id": transaction["id"],
            "total_order": _ce_int(transaction.get("total_order")),
            "data_collection_order": _ce_int(transaction.get("data_collection_order")),
        }
    return envelope, _envelope_schema(schema), tuple(headers)


def _ce_int(value: Any) -> Any:
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value


def _envelope_schema(data_schema: dict[str, Any] | None) -> dict[str, Any] | None:
    # The data schema describes before/after only; silver decodes row images with it, and the
    # envelope's own fields (op, source) are added as in Debezium's envelope schema.
    if data_schema is None:
        return None
    fields = list(data_schema.get("fields") or [])
    fields.append({"type": "string", "optional": False, "field": "op"})
    return {**data_schema, "fields": fields}


def _cloudevent_record(obj: Any, origin: str) -> Parsed:
    if not isinstance(obj, dict) or "specversion" not in obj:
        raise EnvelopeError(
            "a cloudevents line must be a JSON object with 'specversion' and 'data'",
            origin=origin,
        )
    envelope, schema, headers = from_cloudevent(obj, origin)
    record = fast_record(None, envelope, None, schema, headers, None)
    return record, None, None
