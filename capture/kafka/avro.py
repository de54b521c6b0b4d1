"""Confluent's Avro wire format, read back as JsonConverter would have written the record.

Debezium with Confluent's ``AvroConverter`` writes each key and value as a magic byte ``0``, the
writer schema's registry id (4 bytes, big-endian) and the Avro binary body. The writer schema is
fetched once per id from the registry (``GET /schemas/ids/<id>``, Confluent's API) and cached.

Bronze stores what JsonConverter with schemas would have produced, so that silver reads Avro and
JSON topics alike: the payload as JSON (bytes as base64, logical types as their Connect
encodings: a ``Decimal`` as the base64 of its unscaled bytes, ``Date`` as days, ``Timestamp`` as
epoch milliseconds), and the Connect schema rebuilt from the Avro schema the way Confluent's
``AvroData.toConnectSchema`` does (``connect.name``, ``connect.type``, ``connect.parameters``,
optional fields as unions with ``null``).

fastavro is imported only when a source decodes Avro.
"""

from __future__ import annotations

import base64
import io
import logging
import struct
import urllib.error
import urllib.request
from collections.abc import Mapping
from typing import Any, Final

import orjson

from pipeline.errors import EnvelopeError, SourceUnavailable

__all__ = ["MAGIC_BYTE", "SchemaRegistry", "AvroDecoder", "is_avro"]

logger = logging.getLogger(__name__)

MAGIC_BYTE: Final = 0
_HEADER = struct.Struct(">bI")
_PRIMITIVES: Final = {
    "boolean": "boolean",
    "int": "int32",
    "long": "int64",
    "float": "float32",
    "double": "float64",
    "bytes": "bytes",
    "string": "string",
    "fixed": "bytes",
    "enum": "string",
}

_LOGICAL_NAMES: Final = {
    # Logical types written by producers other than Connect (no connect.name): Connect's names.
    "decimal": "org.apache.kafka.connect.data.Decimal",
    "date": "org.apache.kafka.connect.data.Date",
    "time-millis": "org.apache.kafka.connect.data.Time",
    "timestamp-millis": "org.apache.kafka.connect.data.Timestamp",
}


def is_avro(data: bytes | None) -> bool:
    """True when ``data`` starts like Confluent's wire format (magic byte 0 and a schema id)."""
    return data is not None and len(data) >= _HEADER.size and data[0] == MAGIC_BYTE


class SchemaRegistry:
    """A read-only client of a Confluent-compatible schema registry: writer schemas by id.

    Args:
        url: The registry's base URL.
        user_info: ``user:password`` for basic authentication, or None.
        timeout_s: Per-request timeout.
    """

    def __init__(self, url: str, user_info: str | None = None, timeout_s: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self._auth = (
            None
            if user_info is None
            else "Basic " + base64.b64encode(user_info.encode()).decode("ascii")
        )
        self.timeout_s = timeout_s
        self._by_id: dict[int, Any] = {}
        self._unknown: dict[int, EnvelopeError] = {}
        """Ids the registry answered 4xx for: asked once per process (ids are never reused)."""

    def __repr__(self) -> str:
        return f"SchemaRegistry({self.url!r}, auth={'***' if self._auth else None})"

    def schema(self, schema_id: int) -> Any:
        """The parsed writer schema ``schema_id`` (fetched once, then cached).

        Raises:
            SourceUnavailable: The registry cannot be reached or answers with a server error.
            EnvelopeError: The registry does not know the id, or the schema is not Avro.
        """
        cached = self._by_id.get(schema_id)
        if cached is not None:
            return cached
        unknown = self._unknown.get(schema_id)
        if unknown is not None:
            raise EnvelopeError(unknown.reason)
        import fastavro

        request = urllib.request.Request(
            f"{self.url}/schemas/ids/{schema_id}",
            headers={"Accept": "application/vnd.schemaregistry.v1+json, application/json"},
        )
        if self._auth is not None:
            request.add_header("Authorization", self._auth)
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:  # noqa: S310
                body = orjson.loads(response.read())
        except urllib.error.HTTPError as exc:
            if exc.code >= 500:
                raise SourceUnavailable(
                    f"schema registry {self.url} answered {exc.code} for schema id {schema_id}"
                ) from exc
            error = EnvelopeError(
                f"schema registry {self.url} answered {exc.code} for schema id {schema_id}: "
                "the record names a schema the registry does not hold"
            )
            self._unknown[schema_id] = error
            raise error from exc
        except (urllib.error.URLError, OSError) as exc:
            raise SourceUnavailable(f"schema registry {self.url} unreachable: {exc}") from exc
        schema_type = body.get("schemaType", "AVRO")
        if schema_type != "AVRO":
            raise EnvelopeError(f"schema id {schema_id} is {schema_type}, not AVRO")
        writer = orjson.loads(body["schema"])
        parsed = fastavro.parse_schema(_without_logical_types(writer))
        self._by_id[schema_id] = (writer, parsed)
        return self._by_id[schema_id]


class AvroDecoder:
    """Decodes wire-format keys and values into ``(payload, Connect schema)``.

    Args:
        registry: Where writer schemas come from.
    """

    def __init__(self, registry: SchemaRegistry) -> None:
        self.registry = registry
        self._connect: dict[int, dict[str, Any]] = {}

    def decode(self, data: bytes, what: str, origin: str) -> tuple[Any, dict[str, Any]]:
        """Decode one key or value.

        Returns:
            The payload (JSON-ready, as JsonConverter writes it) and its Connect schema.

        Raises:
            EnvelopeError: Not the wire format, an unknown schema id, or a body that does not
                match its schema.
            SourceUnavailable: The registry cannot be reached (retryable: nothing is consumed).
        """
        import fastavro

        if not is_avro(data):
            raise EnvelopeError(
                f"{what} is not in the Confluent Avro wire format (magic byte 0 + schema id)",
                origin=origin,
            )
        _magic, schema_id = _HEADER.unpack_from(data)
        try:
            writer, parsed = self.registry.schema(schema_id)
        except EnvelopeError as exc:
            raise EnvelopeError(f"{what}: {exc.reason}", origin=origin) from None
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(data[_HEADER.size :]), parsed)
        except Exception as exc:  # noqa: BLE001 - any decoding failure is this record's
            raise EnvelopeError(
                f"{what} does not decode with schema id {schema_id}: {type(exc).__name__}: {exc}",
                origin=origin,
            ) from None
        connect = self._connect.get(schema_id)
        if connect is None:
            connect = connect_schema(writer)
            self._connect[schema_id] = connect
        return _jsonable(datum), connect


def _without_logical_types(schema: Any) -> Any:
    """The schema with ``logicalType`` removed: values decode to their underlying Avro types,
    which are what JsonConverter's Connect encodings are built from."""
    if isinstance(schema, list):
        return [_without_logical_types(s) for s in schema]
    if isinstance(schema, dict):
        out = {k: _without_logical_types(v) for k, v in schema.items() if k != "logicalType"}
        return out
    return schema


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def connect_schema(
    avro: Any, field: str | None = None, names: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The Connect schema (JsonConverter's JSON form) of an Avro schema, as Confluent's
    ``AvroData.toConnectSchema`` maps it.

    Args:
        avro: The Avro schema (parsed JSON).
        field: The field name, when this schema is a record field's.
        names: Named types seen so far (a later use of ``Value`` refers to the first).

    Raises:
        EnvelopeError: A union of several non-null types, or a name no earlier type defined.
    """
    names = {} if names is None else names
    optional = False
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        optional = len(branches) < len(avro)
        if len(branches) != 1:
            raise EnvelopeError(f"Avro union {avro!r} has more than one non-null branch")
        avro = branches[0]
    out = _connect_type(avro, names)
    out["optional"] = optional
    if field is not None:
        out["field"] = field
    return out


def _connect_type(avro: Any, names: dict[str, Any]) -> dict[str, Any]:
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return {"type": _PRIMITIVES[avro]}
        named = names.get(avro) or names.get(avro.rpartition(".")[2])
        if named is None:
            raise EnvelopeError(f"Avro type {avro!r} is not defined before its use")
        return {k: v for k, v in named.items() if k not in ("optional", "field")}
    kind = avro["type"]
    out: dict[str, Any]
    if isinstance(kind, dict | list):
        return _connect_type(kind, names)
    if kind == "record":
        full = _full_name(avro)
        out = {"type": "struct", "fields": []}
        out["name"] = avro.get("connect.name") or full
        names[full] = out
        names.setdefault(str(avro.get("name")), out)
        namespace = avro.get("namespace") or full.rpartition(".")[0]
        for f in avro["fields"]:
            ftype = f["type"]
            out["fields"].append(connect_schema(_qualify(ftype, namespace), f["name"], names))
    elif kind == "array":
        out = {"type": "array", "items": connect_schema(avro["items"], None, names)}
    elif kind == "map":
        out = {
            "type": "map",
            "keys": {"type": "string", "optional": False},
            "values": connect_schema(avro["values"], None, names),
        }
    else:
        out = {"type": avro.get("connect.type") or _PRIMITIVES.get(kind, kind)}
        name = avro.get("connect.name") or _LOGICAL_NAMES.get(avro.get("logicalType"))
        if name is not None:
            out["name"] = name
        if kind in ("enum", "fixed") and "name" in avro:
            names[_full_name(avro)] = out
    if "connect.version" in avro:
        out["version"] = avro["connect.version"]
    params = avro.get("connect.parameters")
    if isinstance(params, Mapping):
        out["parameters"] = {str(k): str(v) for k, v in params.items()}
    elif avro.get("logicalType") == "decimal":
        out["parameters"] = {"scale": str(avro.get("scale", 0))}
    if "connect.default" in avro:
        out["default"] = avro["connect.default"]
    return out


def _qualify(avro: Any, namespace: str) -> Any:
    """A short name used inside ``namespace`` means ``namespace.name`` (Avro's rule); the
    lookup falls back to the short name for types defined without a namespace."""
    if isinstance(avro, list):
        return [_qualify(a, namespace) for a in avro]
    if isinstance(avro, str) and avro not in _PRIMITIVES and avro != "null" and "." not in avro:
        return f"{namespace}.{avro}" if namespace else avro
    if (
        isinstance(avro, dict)
        and avro.get("type") in ("record", "enum", "fixed")
        and "namespace" not in avro
        and "." not in str(avro.get("name", ""))
        and namespace
    ):
        return {**avro, "namespace": namespace}
    return avro


def _full_name(avro: Mapping[str, Any]) -> str:
    name = str(avro.get("name", ""))
    namespace = avro.get("namespace")
    return f"{namespace}.{name}" if namespace and "." not in name else name
