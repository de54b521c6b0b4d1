"""Kafka Connect schemas as the JSON converter writes them, for records our capture agents emit.

With ``schemas.enable=true`` Kafka Connect's ``JsonConverter`` writes each key and value as
``{"schema": <schema>, "payload": <payload>}``. A schema is a JSON object whose keys come in a fixed
order: ``type``; then ``fields`` (struct), ``items`` (array) or ``keys``/``values`` (map);
``optional``; ``name``; ``version``; ``doc``; ``parameters``; ``default``; and, for a struct field,
``field`` last. The builders here keep that order, so a dict they return serialises (compactly, keys
in insertion order) to the same text a Debezium connector would produce::

    >>> key = struct([field("id", "int32")], name="server1.inventory.customers.Key")
    >>> key
    {'type': 'struct', 'fields': [{'type': 'int32', 'optional': False, 'field': 'id'}], \
'optional': False, 'name': 'server1.inventory.customers.Key'}

Schema shapes (names, versions, field lists) follow Debezium's ``SchemaFactory`` and the
per-connector ``SourceInfoStructMaker`` classes; see the spec guides in ``shared/spec``. Every
builder returns a fresh ``dict``; the module constants are typed ``Mapping`` because callers must
not mutate them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

import orjson

from bronze.positions import POSITION_TYPES
from bronze.source_block import SourceBlock

__all__ = [
    "ConnectType",
    "CONNECTORS",
    "SNAPSHOT_VALUES",
    "TRANSACTION_BLOCK_SCHEMA",
    "TRANSACTION_KEY_SCHEMA",
    "TRANSACTION_VALUE_SCHEMA",
    "HEARTBEAT_KEY_SCHEMA",
    "HEARTBEAT_VALUE_SCHEMA",
    "primitive",
    "field",
    "struct",
    "array",
    "map_schema",
    "with_optional",
    "logical",
    "date",
    "time_millis",
    "micro_time",
    "nano_time",
    "timestamp_millis",
    "micro_timestamp",
    "nano_timestamp",
    "zoned_timestamp",
    "zoned_time",
    "year",
    "micro_duration",
    "interval",
    "connect_date",
    "connect_time",
    "connect_timestamp",
    "decimal",
    "variable_scale_decimal",
    "json",
    "xml",
    "uuid",
    "enum",
    "enum_set",
    "bits",
    "geometry",
    "geography",
    "point",
    "snapshot_schema",
    "source_schema",
    "envelope_schema",
    "mongodb_envelope_schema",
    "schema_change_key_schema",
    "schema_change_value_schema",
    "schema_id",
]


class ConnectType(StrEnum):
    """Kafka Connect physical schema types, spelled as the JSON converter writes them."""

    INT8 = "int8"
    INT16 = "int16"
    INT32 = "int32"
    INT64 = "int64"
    FLOAT32 = "float32"
    FLOAT64 = "float64"
    BOOLEAN = "boolean"
    STRING = "string"
    BYTES = "bytes"
    ARRAY = "array"
    MAP = "map"
    STRUCT = "struct"


CONNECTORS: Final[tuple[str, ...]] = (
    "postgresql",
    "mysql",
    "sqlserver",
    "oracle",
    "mongodb",
    "db2",
    "yugabytedb",
)
"""Connector names as medallion normalises them (lower case; ``YugabyteDB`` -> ``yugabytedb``)."""

SNAPSHOT_VALUES: Final[tuple[str, ...]] = (
    "true",
    "first",
    "first_in_data_collection",
    "last_in_data_collection",
    "last",
    "false",
    "incremental",
)
"""Values of ``source.snapshot`` in Debezium 2.x, in ``SnapshotRecord`` declaration order."""

SNAPSHOT_DEFAULT: Final = "false"

SOURCE_SCHEMA_VERSION: Final = 1
LOGICAL_TYPE_VERSION: Final = 1
"""Every Debezium and Connect logical type used here is at schema version 1."""

DECIMAL_PRECISION_PARAMETER: Final = "connect.decimal.precision"
"""Schema parameter Debezium adds beside ``scale`` when it knows a column's precision."""

_DECIMAL = "org.apache.kafka.connect.data.Decimal"


# --- generic builders --------------------------------------------------------------------------


def _tail(
    schema: dict[str, Any],
    *,
    optional: bool,
    name: str | None,
    version: int | None,
    doc: str | None,
    parameters: Mapping[str, str] | None,
    default: Any,
) -> dict[str, Any]:
    # JsonConverter.asJsonSchema appends these keys in exactly this order and skips null ones.
    schema["optional"] = optional
    if name is not None:
        schema["name"] = name
    if version is not None:
        schema["version"] = version
    if doc is not None:
        schema["doc"] = doc
    if parameters is not None:
        schema["parameters"] = dict(parameters)
    if default is not None:
        schema["default"] = default
    return schema


_PRIMITIVES: Final = frozenset(
    t for t in ConnectType if t not in (ConnectType.ARRAY, ConnectType.MAP, ConnectType.STRUCT)
)


def primitive(
    type_: str,
    *,
    optional: bool = False,
    name: str | None = None,
    version: int | None = None,
    doc: str | None = None,
    parameters: Mapping[str, str] | None = None,
    default: Any = None,
) -> dict[str, Any]:
    """A schema of a primitive Connect type (``int32``, ``string``, ``bytes``, ...).

    Args:
        type_: One of the primitive :class:`ConnectType` values.
        optional: Whether the value may be null.
        name: Logical type name, e.g. ``io.debezium.time.Date``.
        version: Logical type version.
        doc: Documentation string.
        parameters: Schema parameters; Connect requires string values.
        default: Default value in its JSON form; ``None`` means no default, as in Connect.

    Returns:
        The schema as a new dict.

    Raises:
        ValueError: ``type_`` is not a primitive Connect type.
    """
    if type_ not in _PRIMITIVES:
        raise ValueError(f"'{type_}' is not a primitive Kafka Connect type; use struct/array/map")
    return _tail(
        {"type": str(type_)},
        optional=optional,
        name=name,
        version=version,
        doc=doc,
        parameters=parameters,
        default=default,
    )


def with_optional(schema: Mapping[str, Any], value: bool = True) -> dict[str, Any]:
    """Return a copy of ``schema`` with its ``optional`` flag set, keeping the key order."""
    if "optional" not in schema:
        raise ValueError("schema has no 'optional' key; build it with primitive()/struct()")
    return {k: (value if k == "optional" else v) for k, v in schema.items()}


def field(
    name: str,
    schema: str | Mapping[str, Any],
    *,
    optional: bool | None = None,
) -> dict[str, Any]:
    """A struct field: the field's schema with ``"field": name`` appended, as Connect writes it.

    Args:
        name: Field (column) name.
        schema: A primitive type name such as ``"int32"``, or a schema built by this module.
        optional: Override the schema's ``optional`` flag; ``None`` keeps it (a bare type name
            is required unless told otherwise).

    Returns:
        The field schema as a new dict.

    Example:
        >>> field("email", "string", optional=True)
        {'type': 'string', 'optional': True, 'field': 'email'}
    """
    if isinstance(schema, str):
        out = primitive(schema, optional=bool(optional))
    else:
        out = {
            k: (optional if k == "optional" and optional is not None else v)
            for k, v in schema.items()
            if k != "field"
        }
    out["field"] = name
    return out


def struct(
    fields: Sequence[Mapping[str, Any]],
    *,
    name: str | None = None,
    optional: bool = False,
    version: int | None = None,
    doc: str | None = None,
    parameters: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A struct schema from fields built with :func:`field`.

    Raises:
        ValueError: A field has no ``field`` name, or two fields share a name.
    """
    names = [f.get("field") for f in fields]
    if any(not isinstance(n, str) for n in names):
        raise ValueError("every struct field needs a name; build fields with field(name, ...)")
    if len(set(names)) != len(names):
        dupes = sorted({n for n in names if names.count(n) > 1 and isinstance(n, str)})
        raise ValueError(f"struct {name or '(unnamed)'} has duplicate field names: {dupes}")
    return _tail(
        {"type": "struct", "fields": [dict(f) for f in fields]},
        optional=optional,
        name=name,
        version=version,
        doc=doc,
        parameters=parameters,
        default=None,
    )


def array(
    items: str | Mapping[str, Any],
    *,
    optional: bool = False,
    name: str | None = None,
    version: int | None = None,
) -> dict[str, Any]:
    """An array schema; ``items`` is a primitive type name or a schema."""
    item_schema = primitive(items) if isinstance(items, str) else dict(items)
    return _tail(
        {"type": "array", "items": item_schema},
        optional=optional,
        name=name,
        version=version,
        doc=None,
        parameters=None,
        default=None,
    )


def map_schema(
    keys: str | Mapping[str, Any],
    values: str | Mapping[str, Any],
    *,
    optional: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """A map schema; ``keys`` and ``values`` are primitive type names or schemas."""
    return _tail(
        {
            "type": "map",
            "keys": primitive(keys) if isinstance(keys, str) else dict(keys),
            "values": primitive(values) if isinstance(values, str) else dict(values),
        },
        optional=optional,
        name=name,
        version=None,
        doc=None,
        parameters=None,
        default=None,
    )


def logical(
    type_: str,
    name: str,
    *,
    optional: bool = False,
    parameters: Mapping[str, str] | None = None,
    default: Any = None,
) -> dict[str, Any]:
    """A primitive schema carrying a version-1 logical type name (Debezium or Connect)."""
    return primitive(
        type_,
        optional=optional,
        name=name,
        version=LOGICAL_TYPE_VERSION,
        parameters=parameters,
        default=default,
    )


# --- logical types: io.debezium.time.* and Connect's own -----------------------------------------


def date(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.Date``: INT32 days since 1970-01-01."""
    return logical("int32", "io.debezium.time.Date", optional=optional)


def time_millis(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.Time``: INT32 milliseconds past midnight."""
    return logical("int32", "io.debezium.time.Time", optional=optional)


def micro_time(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.MicroTime``: INT64 microseconds past midnight."""
    return logical("int64", "io.debezium.time.MicroTime", optional=optional)


def nano_time(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.NanoTime``: INT64 nanoseconds past midnight."""
    return logical("int64", "io.debezium.time.NanoTime", optional=optional)


def timestamp_millis(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.Timestamp``: INT64 milliseconds since the epoch, zone-less."""
    return logical("int64", "io.debezium.time.Timestamp", optional=optional)


def micro_timestamp(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.MicroTimestamp``: INT64 microseconds since the epoch, zone-less."""
    return logical("int64", "io.debezium.time.MicroTimestamp", optional=optional)


def nano_timestamp(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.NanoTimestamp``: INT64 nanoseconds since the epoch, zone-less."""
    return logical("int64", "io.debezium.time.NanoTimestamp", optional=optional)


def zoned_timestamp(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.ZonedTimestamp``: ISO-8601 string with offset."""
    return logical("string", "io.debezium.time.ZonedTimestamp", optional=optional)


def zoned_time(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.ZonedTime``: ISO-8601 time string with offset."""
    return logical("string", "io.debezium.time.ZonedTime", optional=optional)


def year(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.Year``: INT32 year (MySQL ``YEAR``)."""
    return logical("int32", "io.debezium.time.Year", optional=optional)


def micro_duration(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.MicroDuration``: INT64 approximate microseconds (PG ``INTERVAL``)."""
    return logical("int64", "io.debezium.time.MicroDuration", optional=optional)


def interval(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.time.Interval``: ISO-8601 duration text (``interval.handling.mode=string``)."""
    return logical("string", "io.debezium.time.Interval", optional=optional)


def connect_date(*, optional: bool = False) -> dict[str, Any]:
    """``org.apache.kafka.connect.data.Date`` (``time.precision.mode=connect``)."""
    return logical("int32", "org.apache.kafka.connect.data.Date", optional=optional)


def connect_time(*, optional: bool = False) -> dict[str, Any]:
    """``org.apache.kafka.connect.data.Time``: INT32 ms past midnight."""
    return logical("int32", "org.apache.kafka.connect.data.Time", optional=optional)


def connect_timestamp(*, optional: bool = False) -> dict[str, Any]:
    """``org.apache.kafka.connect.data.Timestamp``: INT64 ms since the epoch."""
    return logical("int64", "org.apache.kafka.connect.data.Timestamp", optional=optional)


# --- logical types: numbers and io.debezium.data.* ----------------------------------------------


def decimal(scale: int, *, precision: int | None = None, optional: bool = False) -> dict[str, Any]:
    """``org.apache.kafka.connect.data.Decimal``: big-endian two's-complement bytes, base64 in JSON.

    Args:
        scale: Digits after the decimal point; written as the string parameter ``scale``.
        precision: Column precision; Debezium adds it as ``connect.decimal.precision``.
        optional: Whether the value may be null.
    """
    params = {"scale": str(scale)}
    if precision is not None:
        params[DECIMAL_PRECISION_PARAMETER] = str(precision)
    return logical("bytes", _DECIMAL, optional=optional, parameters=params)


def variable_scale_decimal(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.VariableScaleDecimal``: struct ``{scale, value}`` for unscaled NUMERIC."""
    return struct(
        [field("scale", "int32"), field("value", "bytes")],
        name="io.debezium.data.VariableScaleDecimal",
        optional=optional,
        version=LOGICAL_TYPE_VERSION,
        doc="Variable scaled decimal",
    )


def json(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.Json``: a JSON document as text (also MongoDB's after/patch/filter)."""
    return logical("string", "io.debezium.data.Json", optional=optional)


def xml(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.Xml``: an XML document as a string."""
    return logical("string", "io.debezium.data.Xml", optional=optional)


def uuid(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.Uuid``: canonical UUID text."""
    return logical("string", "io.debezium.data.Uuid", optional=optional)


def enum(
    allowed: Sequence[str], *, optional: bool = False, default: str | None = None
) -> dict[str, Any]:
    """``io.debezium.data.Enum`` with the comma-joined ``allowed`` parameter."""
    return logical(
        "string",
        "io.debezium.data.Enum",
        optional=optional,
        parameters={"allowed": ",".join(allowed)},
        default=default,
    )


def enum_set(allowed: Sequence[str], *, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.EnumSet`` (MySQL ``SET``) with the ``allowed`` parameter."""
    return logical(
        "string",
        "io.debezium.data.EnumSet",
        optional=optional,
        parameters={"allowed": ",".join(allowed)},
    )


def bits(length: int, *, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.Bits``: little-endian bytes with the bit ``length`` parameter."""
    return logical(
        "bytes", "io.debezium.data.Bits", optional=optional, parameters={"length": str(length)}
    )


def geometry(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.geometry.Geometry``: struct ``{wkb, srid}`` (MySQL spatial, PostGIS)."""
    return struct(
        [field("wkb", "bytes"), field("srid", "int32", optional=True)],
        name="io.debezium.data.geometry.Geometry",
        optional=optional,
        version=LOGICAL_TYPE_VERSION,
        doc="Geometry",
    )


def geography(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.geometry.Geography``: struct ``{wkb, srid}`` (PostGIS geography)."""
    return struct(
        [field("wkb", "bytes"), field("srid", "int32", optional=True)],
        name="io.debezium.data.geometry.Geography",
        optional=optional,
        version=LOGICAL_TYPE_VERSION,
        doc="Geography",
    )


def point(*, optional: bool = False) -> dict[str, Any]:
    """``io.debezium.data.geometry.Point``: struct ``{x, y, wkb, srid}`` (PostgreSQL ``POINT``)."""
    return struct(
        [
            field("x", "float64"),
            field("y", "float64"),
            field("wkb", "bytes", optional=True),
            field("srid", "int32", optional=True),
        ],
        name="io.debezium.data.geometry.Point",
        optional=optional,
        version=LOGICAL_TYPE_VERSION,
        doc="Geometry (POINT)",
    )


# --- Debezium envelope parts ---------------------------------------------------------------------


def snapshot_schema() -> dict[str, Any]:
    """The ``source.snapshot`` field schema: an optional Enum string defaulting to ``"false"``."""
    return enum(SNAPSHOT_VALUES, optional=True, default=SNAPSHOT_DEFAULT)


def _common_source_fields() -> list[dict[str, Any]]:
    # Debezium SchemaFactory.sourceInfoSchemaBuilder(): shared by every connector, in this order.
    return [
        field("version", "string"),
        field("connector", "string"),
        field("name", "string"),
        field("ts_ms", "int64"),
        field("snapshot", snapshot_schema()),
        field("db", "string"),
        field("sequence", "string", optional=True),
        field("ts_us", "int64", optional=True),
        field("ts_ns", "int64", optional=True),
    ]


def _source_block(connector: str) -> SourceBlock:
    position = POSITION_TYPES.get(connector)
    if position is None:
        raise ValueError(
            f"unknown connector '{connector}'; expected one of: {', '.join(CONNECTORS)}"
        )
    return position.SOURCE_BLOCK


def source_schema(connector: str) -> dict[str, Any]:
    """The ``source`` block schema for one connector.

    Args:
        connector: One of :data:`CONNECTORS`, any case (``YugabyteDB`` is accepted).

    Returns:
        A required struct named ``io.debezium.connector.<x>.Source``: the common Debezium fields
        then the connector's own position fields.

    Raises:
        ValueError: The connector is unknown.
    """
    block = _source_block(connector.lower())
    specific = [field(f.name, f.type, optional=f.optional) for f in block.fields]
    return struct(
        [*_common_source_fields(), *specific], name=block.schema_name, version=SOURCE_SCHEMA_VERSION
    )


def _transaction_block_schema() -> dict[str, Any]:
    return struct(
        [
            field("id", "string"),
            field("total_order", "int64"),
            field("data_collection_order", "int64"),
        ],
        name="event.block",
        optional=True,
        version=1,
    )


TRANSACTION_BLOCK_SCHEMA: Final[Mapping[str, Any]] = _transaction_block_schema()
"""Schema of a data event's optional ``transaction`` field (``provide.transaction.metadata``)."""

TRANSACTION_KEY_SCHEMA: Final[Mapping[str, Any]] = struct(
    [field("id", "string")], name="io.debezium.connector.common.TransactionMetadataKey", version=1
)
"""Key schema of BEGIN/END records on ``<prefix>.transaction``."""

TRANSACTION_VALUE_SCHEMA: Final[Mapping[str, Any]] = struct(
    [
        field("status", "string"),
        field("id", "string"),
        field("event_count", "int64", optional=True),
        field(
            "data_collections",
            array(
                struct(
                    [field("data_collection", "string"), field("event_count", "int64")],
                    name="event.collection",
                    optional=True,
                    version=1,
                ),
                optional=True,
            ),
        ),
        field("ts_ms", "int64"),
    ],
    name="io.debezium.connector.common.TransactionMetadataValue",
    version=1,
)
"""Value schema of BEGIN/END records: counts are null on BEGIN and set on END."""

HEARTBEAT_KEY_SCHEMA: Final[Mapping[str, Any]] = struct(
    [field("serverName", "string")], name="io.debezium.connector.common.ServerNameKey", version=1
)
"""Key schema of heartbeat records (``__debezium-heartbeat.<prefix>``)."""

HEARTBEAT_VALUE_SCHEMA: Final[Mapping[str, Any]] = struct(
    [field("ts_ms", "int64")], name="io.debezium.connector.common.Heartbeat", version=1
)
"""Value schema of heartbeat records: just the time the heartbeat was emitted."""


def envelope_schema(
    name_prefix: str,
    value_schema: Mapping[str, Any],
    source_schema: Mapping[str, Any],
    *,
    with_transaction: bool,
) -> dict[str, Any]:
    """The value schema of a relational data event: ``<name_prefix>.Envelope``.

    Args:
        name_prefix: ``<topic prefix>.<db|schema>.<table>``, e.g. ``server1.inventory.customers``.
        value_schema: The row struct (conventionally named ``<name_prefix>.Value``); it is made
            optional for ``before`` and ``after`` as Debezium does.
        source_schema: From :func:`source_schema`.
        with_transaction: Add the optional ``transaction`` block, as connectors do when
            ``provide.transaction.metadata=true``.

    Returns:
        A required struct with ``before, after, source, op, ts_ms[, transaction]``.
    """
    row = with_optional(value_schema, True)
    fields = [
        field("before", row),
        field("after", row),
        field("source", source_schema),
        field("op", "string"),
        field("ts_ms", "int64", optional=True),
    ]
    if with_transaction:
        fields.append(field("transaction", TRANSACTION_BLOCK_SCHEMA))
    return struct(fields, name=f"{name_prefix}.Envelope")


def mongodb_envelope_schema(name_prefix: str, *, with_transaction: bool) -> dict[str, Any]:
    """The value schema of a MongoDB data event: ``after``/``patch``/``filter`` are Json strings."""
    fields = [
        field("after", json(optional=True)),
        field("patch", json(optional=True)),
        field("filter", json(optional=True)),
        field("source", source_schema("mongodb")),
        field("op", "string", optional=True),
        field("ts_ms", "int64", optional=True),
    ]
    if with_transaction:
        fields.append(field("transaction", TRANSACTION_BLOCK_SCHEMA))
    return struct(fields, name=f"{name_prefix}.Envelope")


def schema_change_key_schema(connector: str) -> dict[str, Any]:
    """Key schema of schema-change records: ``io.debezium.connector.<x>.SchemaChangeKey``."""
    return struct(
        [field("databaseName", "string")],
        name=f"io.debezium.connector.{_schema_change_connector(connector)}.SchemaChangeKey",
        version=1,
    )


def schema_change_value_schema(connector: str) -> dict[str, Any]:
    """Value schema of schema-change records (``source, ts_ms, databaseName, schemaName, ddl,
    tableChanges``), with the structured ``tableChanges`` of Debezium's history serializer."""
    column = struct(
        [
            field("name", "string"),
            field("jdbcType", "int32"),
            field("nativeType", "int32", optional=True),
            field("typeName", "string"),
            field("typeExpression", "string", optional=True),
            field("charsetName", "string", optional=True),
            field("length", "int32", optional=True),
            field("scale", "int32", optional=True),
            field("position", "int32"),
            field("optional", "boolean", optional=True),
            field("autoIncremented", "boolean", optional=True),
            field("generated", "boolean", optional=True),
            field("comment", "string", optional=True),
            field("defaultValueExpression", "string", optional=True),
            field("enumValues", array("string", optional=True)),
        ],
        name="io.debezium.connector.schema.Column",
        version=1,
    )
    table = struct(
        [
            field("defaultCharsetName", "string", optional=True),
            field("primaryKeyColumnNames", array("string", optional=True)),
            field("columns", array(column)),
            field("comment", "string", optional=True),
        ],
        name="io.debezium.connector.schema.Table",
        optional=True,
        version=1,
    )
    change = struct(
        [field("type", "string"), field("id", "string"), field("table", table)],
        name="io.debezium.connector.schema.Change",
        version=1,
    )
    return struct(
        [
            field("source", source_schema(connector)),
            field("ts_ms", "int64"),
            field("databaseName", "string", optional=True),
            field("schemaName", "string", optional=True),
            field("ddl", "string", optional=True),
            field("tableChanges", array(change)),
        ],
        name=f"io.debezium.connector.{_schema_change_connector(connector)}.SchemaChangeValue",
        version=1,
    )


def _schema_change_connector(connector: str) -> str:
    c = connector.lower()
    if c not in CONNECTORS:
        raise ValueError(
            f"unknown connector '{connector}'; expected one of: {', '.join(CONNECTORS)}"
        )
    if not _source_block(c).emits_schema_changes:
        raise ValueError(f"connector '{c}' emits no schema-change records")
    return c


# --- fingerprint -------------------------------------------------------------------------------

SCHEMA_ID_LENGTH: Final = 32
"""Hex characters kept from the sha256 digest (128 bits: collisions are not a practical concern)."""


def _jsonable(obj: Any) -> Any:
    # orjson serialises dict/list/tuple natively; other Mappings (MappingProxyType, ...) need help.
    if isinstance(obj, Mapping):
        return dict(obj)
    raise TypeError(f"schema holds a {type(obj).__name__}, which has no JSON form")


def schema_id(schema: Mapping[str, Any]) -> str:
    """A stable content fingerprint of a Connect schema.

    The sha256 of the canonical JSON text (keys sorted, no whitespace, UTF-8 without ``\\u``
    escapes), as hex, first :data:`SCHEMA_ID_LENGTH` characters. Key order in the input does not
    matter; list order (struct fields) does, because Connect treats field order as significant.

    Args:
        schema: The schema object (the ``"schema"`` part of a JsonConverter envelope).

    Returns:
        32 lowercase hex characters.

    Raises:
        TypeError: The schema holds something with no JSON form.
    """
    canonical = orjson.dumps(schema, default=_jsonable, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(canonical).hexdigest()[:SCHEMA_ID_LENGTH]
