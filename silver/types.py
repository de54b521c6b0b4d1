"""Debezium value payloads decoded into typed Spark columns, driven by the Kafka Connect schema.

Bronze keeps every value payload as JSON text (``value_json``) and the Connect schema it was
written with (``bronze.schemas``, keyed by ``value_schema_id``). Silver decodes in two steps, both
Spark built-in expressions (no Python UDF: one cannot run inside the ``transform`` that decodes
an array column):

1. **Parse** with ``from_json(value_json, envelope_json_schema(schema))``. :func:`json_type` is the
   Spark type of what ``JsonConverter`` wrote for one field: numbers as numbers, ``bytes`` as base64
   text, structs, arrays and maps as such. ``source`` stays JSON text (silver orders by bronze's
   ``position``, never by ``source``).
2. **Decode** with :func:`decode_row`: one column per field of the ``before``/``after`` struct, the
   logical types applied. :func:`row_schema` is the resulting :class:`StructType` (what a silver
   table is created with) and :func:`spark_type` the type of one field; :func:`unavailable_flags`
   lists the fields that carried Debezium's unavailable-value placeholder.

    >>> from bronze import connect_schema as cs
    >>> row = cs.struct([
    ...     cs.field("id", "int32"),
    ...     cs.field("price", cs.decimal(2, precision=10, optional=True)),
    ...     cs.field("born", cs.date(optional=True)),
    ...     cs.field("wake", cs.micro_time(optional=True)),
    ... ])
    >>> json_type(row).simpleString()
    'struct<id:int,price:string,born:int,wake:bigint>'
    >>> row_schema(row).simpleString()
    'struct<id:int,price:decimal(10,2),born:date,wake:bigint>'

Types (Connect physical type, or logical name → decoded Spark type):

======================================================  ===========================================
Connect type / logical name                             decoded Spark type
======================================================  ===========================================
``int8`` / ``int16`` / ``int32`` / ``int64``            ``tinyint`` / ``smallint`` / ``int`` /
                                                        ``bigint``
``float32`` / ``float64`` (``JsonConverter``:         ``float`` / ``double`` / ``boolean`` /
``float`` / ``double``) / ``boolean`` / ``string``
                                                        ``string``
``bytes``                                               ``binary`` (base64 decoded)
``struct`` / ``array`` / ``map``                        the same, members decoded recursively
``org.apache.kafka.connect.data.Decimal``               ``decimal(p, s)``: ``s`` = ``scale``, ``p``
                                                        = ``connect.decimal.precision`` or 38;
                                                        ``string`` (exact plain text) when ``p`` or
                                                        ``s`` exceeds 38
``io.debezium.data.VariableScaleDecimal``               ``string``: exact plain decimal text
``io.debezium.time.Date``, ``connect.data.Date``        ``date``
``io.debezium.time.Time`` / ``MicroTime`` /             ``bigint`` microseconds past midnight (the
``NanoTime``, ``connect.data.Time``                     field's comment says so)
``io.debezium.time.Timestamp`` / ``MicroTimestamp``     ``timestamp_ntz`` (zone-less wall clock)
/ ``NanoTimestamp``, ``connect.data.Timestamp``
``io.debezium.time.ZonedTimestamp``                     ``timestamp`` (the UTC instant; PostgreSQL
                                                        ``"infinity"``/``"-infinity"``: the
                                                        ``MicroTimestamp`` ±infinity sentinels)
``io.debezium.time.ZonedTime`` / ``Interval``           ``string`` (ISO-8601, as sent)
``io.debezium.time.Year`` / ``MicroDuration``           the physical type (``int`` / ``bigint``)
``io.debezium.data.Json`` / ``Xml`` / ``Uuid`` /        ``string``
``Ltree`` / ``Enum`` / ``EnumSet``
``io.debezium.data.Bits``                               ``binary``, big-endian, ``ceil(length/8)``
                                                        bytes
``io.debezium.data.geometry.Geometry`` / ``Geography``  ``struct<wkb: binary, srid: int>``
``io.debezium.data.geometry.Point``                     ``struct<x: double, y: double, wkb: binary,
                                                        srid: int>`` (the fields the schema has)
any other logical name                                  its physical type
======================================================  ===========================================

Every decoded column and member is nullable, whatever Connect's ``optional`` says: a placeholder
decodes to NULL, a delete's ``before`` may omit columns, and a nullable type keeps
``select(*decode_row(...)).schema == row_schema(...)``.

**Decimals.** ``Decimal`` bytes are the big-endian two's-complement unscaled value. Values of up to
15 bytes are decoded with ``decimal(38,0)`` arithmetic: the hex digits are split into two 64-bit
halves (``conv``) and joined. Wider values (any width) fold their hex digits, 7 at a time, into
base-10^9 limbs with ``aggregate``, which gives the exact integer text. The scale is applied by
casting the text ``<unscaled>E<-scale>`` (exact), or by placing the point in the text. A value
too wide for its declared ``decimal(p, s)`` decodes to NULL, and the job refuses such an event
(a non-null JSON value that decodes to NULL) rather than applying it.

``VariableScaleDecimal`` (PostgreSQL ``NUMERIC`` without scale, Oracle ``NUMBER``) carries a scale
*per value*, so no single ``decimal(p, s)`` column holds every value exactly: ``1.5``,
``0.000001`` and ``10^40`` are all legal in one column. Its decoded form is the exact text
``BigDecimal.toPlainString`` would give (``"12.340"``, ``"-0.5"``, ``"500"`` for unscaled 5 at
scale -2), which casts losslessly wherever a reader picks a precision.

**Times of day.** PySpark 4.2 has ``TimeType``, but it is off by default
(``spark.sql.timeType.enabled=false``, ``UNSUPPORTED_TIME_TYPE``) and Delta 4.4 refuses to store it
(``UNSUPPORTED_DATA_TYPE_FOR_DATASOURCE`` for ``TIME(6)``). ``Time``, ``MicroTime``, ``NanoTime``
and Connect's ``Time`` therefore decode to ``bigint`` **microseconds past midnight**: one unit for
all four, exact for every source except ``NanoTime`` (SQL Server ``TIME(7)``, truncated to µs), and
``time_from_micros`` turns it into a ``TIME`` once both sides support one. The column carries a
``comment`` in its field metadata saying so. ``NanoTimestamp`` is truncated to microseconds too
(Spark's timestamp resolution); ``timestamp_ntz`` is built with ``timestamp_add`` from the NTZ
epoch, so the session time zone never touches the wall clock Debezium sent.

**Unavailable values.** A PostgreSQL TOAST column not in the replica identity, or an Oracle LOB
not captured, arrives as the placeholder (``__debezium_unavailable_value`` unless
``unavailable.value.placeholder`` / ``toasted.value.placeholder`` says otherwise; a ``hex:`` prefix
spells it as bytes). It is recognised in the forms Debezium writes: a ``string`` field equal to the
placeholder, a ``bytes`` field equal to the base64 of its bytes (or to the placeholder text), a
``text[]``/``bytea[]`` array holding just the placeholder, an ``int[]``/``bigint[]`` array of its
byte values, and a ``hstore`` map ``{placeholder: placeholder}``. Such a field decodes to NULL
and is named by :func:`unavailable_flags`, so the MERGE keeps the stored value of exactly those
columns.

**YugabyteDB.** ``yboutput`` wraps every column as ``{"value": v, "set": bool}``
(:func:`unwrap_set`): the column decodes as its ``value``, and a column not sent (``null``, or
``"set": false``) is flagged by :func:`unavailable_flags` like a placeholder.

Not supported: ``JsonConverter`` with ``decimal.format=NUMERIC`` and a schema (decimals as JSON
numbers: the text cannot be told from base64; schema-less, they are inferred as exact decimals,
see :func:`infer_row_schema`); PostgreSQL ``±infinity`` timestamps decode to Spark timestamps
far outside Python's ``datetime`` range (Spark holds them, ``collect()`` cannot; read them with
``unix_micros``); other ``ZonedTimestamp`` text that is not ISO-8601 decodes to NULL (refused by
the job).
"""

from __future__ import annotations

import base64
import decimal
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
    VariantType,
)

from bronze import connect_schema as cs

__all__ = [
    "UNAVAILABLE_VALUE_PLACEHOLDER",
    "DEFAULT_DECIMAL_PRECISION",
    "DECIMAL_FORMAT_PARAMETER",
    "RAW_JSON_ENVELOPE_FIELDS",
    "json_type",
    "spark_type",
    "row_schema",
    "decode_value",
    "decode_row",
    "unavailable_flags",
    "unwrap_set",
    "row_fields",
    "field_text",
    "envelope_json_schema",
    "infer_row_schema",
    "plain_decimal_text",
]

UNAVAILABLE_VALUE_PLACEHOLDER: Final = "__debezium_unavailable_value"
"""Debezium's default ``unavailable.value.placeholder`` (``toasted.value.placeholder`` in 1.x)."""

DEFAULT_DECIMAL_PRECISION: Final = 38
"""Precision of a ``Decimal`` field without ``connect.decimal.precision``: Spark's maximum."""

RAW_JSON_ENVELOPE_FIELDS: Final[frozenset[str]] = frozenset({"source"})
"""Envelope fields :func:`envelope_json_schema` keeps as JSON text instead of parsing them."""

SchemaMap = Mapping[str, Any]
"""A Connect schema as ``JsonConverter`` writes it (see :mod:`bronze.connect_schema`)."""

# Logical type names (the ``name`` of a schema).
DECIMAL: Final = "org.apache.kafka.connect.data.Decimal"
CONNECT_DATE: Final = "org.apache.kafka.connect.data.Date"
CONNECT_TIME: Final = "org.apache.kafka.connect.data.Time"
CONNECT_TIMESTAMP: Final = "org.apache.kafka.connect.data.Timestamp"
VARIABLE_SCALE_DECIMAL: Final = "io.debezium.data.VariableScaleDecimal"
DATE: Final = "io.debezium.time.Date"
TIME: Final = "io.debezium.time.Time"
MICRO_TIME: Final = "io.debezium.time.MicroTime"
NANO_TIME: Final = "io.debezium.time.NanoTime"
TIMESTAMP: Final = "io.debezium.time.Timestamp"
MICRO_TIMESTAMP: Final = "io.debezium.time.MicroTimestamp"
NANO_TIMESTAMP: Final = "io.debezium.time.NanoTimestamp"
ZONED_TIMESTAMP: Final = "io.debezium.time.ZonedTimestamp"
ZONED_TIME: Final = "io.debezium.time.ZonedTime"
YEAR: Final = "io.debezium.time.Year"
MICRO_DURATION: Final = "io.debezium.time.MicroDuration"
INTERVAL: Final = "io.debezium.time.Interval"
JSON: Final = "io.debezium.data.Json"
XML: Final = "io.debezium.data.Xml"
UUID: Final = "io.debezium.data.Uuid"
LTREE: Final = "io.debezium.data.Ltree"
ENUM: Final = "io.debezium.data.Enum"
ENUM_SET: Final = "io.debezium.data.EnumSet"
BITS: Final = "io.debezium.data.Bits"
GEOMETRY: Final = "io.debezium.data.geometry.Geometry"
GEOGRAPHY: Final = "io.debezium.data.geometry.Geography"
POINT: Final = "io.debezium.data.geometry.Point"

_BUILTIN_TEXT_BYTES: Final = 15
"""Widest value decoded to text by the built-ins: below 2^119, it cannot overflow decimal(38,0)."""

_INTEGER_TYPES: Final = frozenset({"int8", "int16", "int32", "int64"})

DECIMAL_FORMAT_PARAMETER: Final = "medallion.decimal.format"
"""Parameter of a ``Decimal`` schema :func:`infer_row_schema` makes for integers beyond int64:
``NUMERIC`` says the JSON holds the value as a number (as ``JsonConverter`` writes it with
``decimal.format=NUMERIC``), not as base64 bytes."""

_NUMBER_TEXT: Final = r"^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$"
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_DOUBLE_DIGITS: Final = 15
"""Significant digits of every decimal a double holds exactly (``DBL_DIG``)."""
_BIG_INTEGER_DIGITS: Final = 38
"""Digits of the widest integer a schema-less column holds exactly: ``decimal(38,0)``."""


# --- schema access -------------------------------------------------------------------------------


_CONVERTER_TYPE_NAMES: Final[Mapping[str, str]] = {"float": "float32", "double": "float64"}
"""Kafka's ``JsonConverter`` spells ``FLOAT32``/``FLOAT64`` as ``float``/``double``; every other
Connect type it writes under the Connect name (``int8`` ... ``int64``, ``boolean``, ``string``,
``bytes``, ``array``, ``map``, ``struct``)."""


def _type_of(schema: SchemaMap) -> str:
    type_ = schema.get("type")
    type_ = _CONVERTER_TYPE_NAMES.get(str(type_), type_)
    if type_ not in _JSON_TYPES:
        raise ValueError(
            f"unknown Kafka Connect type {type_!r} in schema {_label(schema)}; expected one of: "
            f"{', '.join(_JSON_TYPES)} (or JsonConverter's float, double)"
        )
    return str(type_)


def _label(schema: SchemaMap) -> str:
    return str(schema.get("field") or schema.get("name") or schema.get("type"))


def _fields(schema: SchemaMap) -> Sequence[SchemaMap]:
    if schema.get("type") != "struct":
        raise ValueError(f"schema {_label(schema)} is not a struct: type {schema.get('type')!r}")
    fields: Sequence[SchemaMap] = schema.get("fields", ())
    return fields


def _parameters(schema: SchemaMap) -> Mapping[str, str]:
    params: Mapping[str, str] = schema.get("parameters") or {}
    return params


def _int_parameter(schema: SchemaMap, key: str, default: int | None = None) -> int:
    value = _parameters(schema).get(key)
    if value is None:
        if default is None:
            raise ValueError(
                f"schema {_label(schema)} ({schema.get('name')}) needs parameter {key}"
            )
        return default
    return int(value)


# --- json_type: what JsonConverter wrote ---------------------------------------------------------


def _json_struct(schema: SchemaMap) -> DataType:
    return StructType([StructField(f["field"], json_type(f), True) for f in _fields(schema)])


def _json_array(schema: SchemaMap) -> DataType:
    return ArrayType(json_type(schema["items"]), True)


def _json_map(schema: SchemaMap) -> DataType:
    if _string_keyed(schema):
        return MapType(StringType(), json_type(schema["values"]), True)
    # JsonConverter writes other maps as [[key, value], ...]. Spark parses any JSON token into a
    # string column as its text (a JSON string as its content), which decode_value re-parses.
    return ArrayType(ArrayType(StringType(), True), True)


def _string_keyed(schema: SchemaMap) -> bool:
    return bool(schema["keys"].get("type") == "string")


_JSON_TYPES: Final[Mapping[str, Callable[[SchemaMap], DataType]]] = {
    "int8": lambda _: ByteType(),
    "int16": lambda _: ShortType(),
    "int32": lambda _: IntegerType(),
    "int64": lambda _: LongType(),
    "float32": lambda _: FloatType(),
    "float64": lambda _: DoubleType(),
    "boolean": lambda _: BooleanType(),
    "string": lambda _: StringType(),
    "bytes": lambda _: StringType(),
    "struct": _json_struct,
    "array": _json_array,
    "map": _json_map,
}


def json_type(schema: SchemaMap) -> DataType:
    """The Spark type that parses one field's JSON as ``JsonConverter`` wrote it.

    Logical types do not change the JSON shape: a ``Decimal`` is base64 text like any ``bytes``, a
    ``Date`` a number like any ``int32``. Every struct member, array element and map value is
    nullable.

    Args:
        schema: The field's Connect schema.

    Returns:
        ``int32`` → ``IntegerType``, ``int64`` → ``LongType``, ``bytes`` → ``StringType`` (base64),
        ``struct``/``array`` recursively, a string-keyed ``map`` → ``MapType``, any other map →
        array of ``[key, value]`` text pairs (JsonConverter's form for it).

    Raises:
        ValueError: The schema has an unknown type, or a struct without fields.

    Example:
        >>> json_type({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal"})
        StringType()
    """
    if _numeric(schema):
        # A variant keeps a JSON number of up to 38 digits exact (a decimal); a string column
        # would get a fraction's text through a double.
        return VariantType()
    return _JSON_TYPES[_type_of(schema)](schema)


def _numeric(schema: SchemaMap) -> bool:
    """A ``Decimal`` written as a JSON number (:data:`DECIMAL_FORMAT_PARAMETER`)."""
    return (
        schema.get("name") == DECIMAL
        and _parameters(schema).get(DECIMAL_FORMAT_PARAMETER) == "NUMERIC"
    )


# --- codecs: decoded type + decoding expression, per physical type and per logical name --------


@dataclass(frozen=True)
class _Codec:
    """How one kind of field decodes: its Spark type, and the expression from the parsed value."""

    spark_type: Callable[[SchemaMap], DataType]
    decode: Callable[[Column, SchemaMap], Column]


def _identity(raw: Column, _schema: SchemaMap) -> Column:
    return raw


def _plain(type_: DataType) -> _Codec:
    return _Codec(lambda _: type_, _identity)


def _struct_type(schema: SchemaMap) -> DataType:
    return StructType(
        [StructField(f["field"], spark_type(f), True, _metadata(f)) for f in _fields(schema)]
    )


def _decode_struct(raw: Column, schema: SchemaMap) -> Column:
    members = [_decode_member(raw.getField(f["field"]), f) for f in _fields(schema)]
    return F.when(raw.isNotNull(), F.struct(*members))


def _decode_member(raw: Column, schema: SchemaMap) -> Column:
    metadata = _metadata(schema)
    decoded = decode_value(raw, schema)
    if metadata:
        return decoded.alias(schema["field"], metadata=metadata)
    return decoded.alias(schema["field"])


def _array_type(schema: SchemaMap) -> DataType:
    return ArrayType(spark_type(schema["items"]), True)


def _decode_array(raw: Column, schema: SchemaMap) -> Column:
    items = schema["items"]
    return F.transform(raw, lambda item: decode_value(item, items))


def _map_type(schema: SchemaMap) -> DataType:
    return MapType(spark_type(schema["keys"]), spark_type(schema["values"]), True)


def _decode_map(raw: Column, schema: SchemaMap) -> Column:
    keys, values = schema["keys"], schema["values"]
    if not _string_keyed(schema):
        pairs = F.transform(
            raw,
            lambda pair: F.struct(
                decode_value(_parse_text(pair.getItem(0), keys), keys).alias("key"),
                decode_value(_parse_text(pair.getItem(1), values), values).alias("value"),
            ),
        )
        return F.map_from_entries(pairs)
    decoded = F.transform_values(raw, lambda _k, v: decode_value(v, values))
    if spark_type(keys) != StringType():
        decoded = F.transform_keys(decoded, lambda k, _v: decode_value(k, keys))
    return decoded


def _parse_text(text: Column, schema: SchemaMap) -> Column:
    """Parse a JSON token Spark kept as text (see :func:`_json_map`) with :func:`json_type`."""
    parsed_type = json_type(schema)
    if parsed_type == StringType():
        return text  # a JSON string: Spark already gave its content
    wrapper = StructType([StructField("v", parsed_type, True)])
    return F.from_json(F.concat(F.lit('{"v":'), text, F.lit("}")), wrapper).getField("v")


def _decode_bytes(raw: Column, _schema: SchemaMap) -> Column:
    return F.unbase64(raw)


_PHYSICAL: Final[Mapping[str, _Codec]] = {
    "int8": _plain(ByteType()),
    "int16": _plain(ShortType()),
    "int32": _plain(IntegerType()),
    "int64": _plain(LongType()),
    "float32": _plain(FloatType()),
    "float64": _plain(DoubleType()),
    "boolean": _plain(BooleanType()),
    "string": _plain(StringType()),
    "bytes": _Codec(lambda _: BinaryType(), _decode_bytes),
    "struct": _Codec(_struct_type, _decode_struct),
    "array": _Codec(_array_type, _decode_array),
    "map": _Codec(_map_type, _decode_map),
}


def _physical(schema: SchemaMap) -> _Codec:
    return _PHYSICAL[_type_of(schema)]


_AS_PHYSICAL: Final = _Codec(
    lambda s: _physical(s).spark_type(s), lambda raw, s: _physical(s).decode(raw, s)
)
"""Logical types whose decoded value is their physical one (strings, Year, geometry structs)."""


# --- decimals ------------------------------------------------------------------------------------


def _decimal_type(schema: SchemaMap) -> DataType:
    scale = _int_parameter(schema, "scale")
    precision = _int_parameter(schema, cs.DECIMAL_PRECISION_PARAMETER, DEFAULT_DECIMAL_PRECISION)
    if scale < 0:
        # 10^-scale times an integer of `precision` digits: an integer of precision - scale digits.
        precision, scale = precision - scale, 0
    precision = max(precision, scale)  # Oracle NUMBER(2,5): values below 10^-3 need 5 digits
    if precision > DEFAULT_DECIMAL_PRECISION:
        return StringType()
    return DecimalType(precision, scale)


def _byte_length(b64: Column) -> Column:
    return F.octet_length(F.unbase64(b64))


def _unscaled(b64: Column) -> Column:
    """The two's-complement big-endian integer in base64 ``b64`` as ``decimal(38,0)``.

    Correct for values of at most 16 bytes (and below 10^38). A negative value is decoded through
    its one's complement (``-x = ~x + 1``): ``~x`` is non-negative, so each partial sum stays within
    the final magnitude and cannot overflow before the result does.
    """
    hex_ = F.hex(F.unbase64(b64))
    negative = hex_.substr(1, 1) >= F.lit("8")
    magnitude = F.when(
        negative, F.translate(hex_, "0123456789ABCDEF", "FEDCBA9876543210")
    ).otherwise(hex_)
    padded = F.lpad(magnitude, 32, "0")
    high = F.conv(padded.substr(1, 16), 16, 10).cast(DecimalType(20, 0))
    low = F.conv(padded.substr(17, 16), 16, 10).cast(DecimalType(20, 0))
    unsigned = high * F.lit(decimal.Decimal(2**64)) + low
    # -1 - ~x rather than -(~x) - 1: Spark's decimal negation rounds to 34 digits.
    return F.when(negative, F.lit(decimal.Decimal(-1)) - unsigned).otherwise(unsigned)


def _plain_text(digits: Column, scale: Column) -> Column:
    """``BigDecimal(digits, scale).toPlainString()`` with built-ins (``digits``: integer text)."""
    negative = digits.startswith("-")
    magnitude = F.regexp_replace(digits, "^-", "")
    whole = F.when(magnitude == F.lit("0"), F.lit("0")).otherwise(
        F.concat(magnitude, F.repeat(F.lit("0"), -scale))
    )
    padded = F.lpad(magnitude, F.greatest(F.length(magnitude), scale + 1), "0")
    point = F.length(padded) - scale
    fraction = F.concat(padded.substr(F.lit(1), point), F.lit("."), padded.substr(point + 1, scale))
    body = F.when(scale <= 0, whole).otherwise(fraction)
    return F.concat(F.when(negative, F.lit("-")).otherwise(F.lit("")), body)


def plain_decimal_text(unscaled: int, scale: int) -> str:
    """The exact plain text of ``unscaled * 10^-scale``, as Java's ``toPlainString`` writes it.

    Args:
        unscaled: The unscaled integer value.
        scale: Digits after the decimal point; negative appends zeros.

    Returns:
        Decimal text without exponent; trailing zeros the scale implies are kept.

    Example:
        >>> plain_decimal_text(468, 2), plain_decimal_text(-5, 3), plain_decimal_text(5, -2)
        ('4.68', '-0.005', '500')
    """
    digits = tuple(int(d) for d in str(abs(unscaled)))
    return format(decimal.Decimal((int(unscaled < 0), digits, -scale)), "f")


_LIMB: Final = 10**9
"""Base of the limbs :func:`_wide_digits` accumulates in (a limb times 2^28 fits a bigint)."""

_CHUNK_NIBBLES: Final = 7
"""Hex digits folded in per step: 2^28 times a limb below 10^9 stays below 2^63."""


def _mul_add(limbs: Column, factor: int, addend: Column) -> Column:
    """``limbs * factor + addend`` on little-endian base-10^9 limbs (``array<bigint>``)."""
    start = F.struct(
        F.array().cast(ArrayType(LongType())).alias("out"), addend.cast(LongType()).alias("carry")
    )

    def step(acc: Column, limb: Column) -> Column:
        total = limb * F.lit(factor) + acc["carry"]
        rest = total % F.lit(_LIMB)
        # `/` divides in double, which rounds above 2^53: divide the exact multiple as decimal.
        carry = (total - rest).cast(DecimalType(20, 0)) / F.lit(decimal.Decimal(_LIMB))
        return F.struct(
            F.array_append(acc["out"], rest).alias("out"),
            carry.cast(LongType()).alias("carry"),
        )

    def finish(acc: Column) -> Column:
        return F.when(acc["carry"] > 0, F.array_append(acc["out"], acc["carry"])).otherwise(
            acc["out"]
        )

    return F.aggregate(limbs, start, step, finish)


def _wide_digits(b64: Column) -> Column:
    """The signed decimal integer text of a big-endian two's-complement value of any width.

    Built-ins only (a Python UDF cannot run inside the ``transform`` of an array column): the
    magnitude's hex digits are folded in 7 at a time into base-10^9 limbs with ``aggregate``. A
    negative value is ``-(~x + 1)``; ``~x`` is the nibble-wise complement of the hex text.
    """
    hex_ = F.hex(F.unbase64(b64))
    negative = hex_.substr(1, 1) >= F.lit("8")
    magnitude = F.when(
        negative, F.translate(hex_, "0123456789ABCDEF", "FEDCBA9876543210")
    ).otherwise(hex_)
    chunks = F.ceil(F.length(magnitude) / F.lit(_CHUNK_NIBBLES)).cast(IntegerType())
    padded = F.lpad(magnitude, chunks * F.lit(_CHUNK_NIBBLES), "0")
    values = F.transform(
        F.sequence(F.lit(0), chunks - 1),
        lambda i: F.conv(
            padded.substr(i * F.lit(_CHUNK_NIBBLES) + 1, F.lit(_CHUNK_NIBBLES)), 16, 10
        ).cast(LongType()),
    )
    zero = F.array(F.lit(0).cast(LongType()))
    limbs = F.aggregate(values, zero, lambda acc, v: _mul_add(acc, 2 ** (4 * _CHUNK_NIBBLES), v))
    limbs = F.when(negative, _mul_add(limbs, 1, F.lit(1))).otherwise(limbs)
    text = F.array_join(
        F.transform(
            F.reverse(limbs),
            lambda limb, i: F.when(i == 0, limb.cast("string")).otherwise(
                F.lpad(limb.cast("string"), 9, "0")
            ),
        ),
        "",
    )
    return F.when(b64.isNotNull(), F.concat(F.when(negative, F.lit("-")).otherwise(""), text))


def _integer_digits(b64: Column) -> Column:
    """The integer text of a two's-complement value: ``decimal(38,0)`` arithmetic where it
    cannot overflow (up to 15 bytes), the limb fold above."""
    wide = _byte_length(b64) > F.lit(_BUILTIN_TEXT_BYTES)
    return F.when(wide, _wide_digits(b64)).otherwise(_unscaled(b64).cast("string"))


def _decimal_text(b64: Column, scale: Column) -> Column:
    return _plain_text(_integer_digits(b64), scale)


def _fits_scale(text: Column, scale: int) -> Column:
    """Whether the JSON number ``text`` (``1.50``, ``-2E-5``...) has at most ``scale`` digits
    after the point once trailing zeros are dropped and its exponent applied: a cast to
    ``decimal(p, scale)`` then keeps its value (or overflows to NULL), never rounds it."""
    fraction = F.regexp_replace(F.regexp_extract(text, r"^-?[0-9]+\.([0-9]+)", 1), "0+$", "")
    exponent_text = F.regexp_extract(text, r"[eE]([-+]?[0-9]+)$", 1)
    exponent = F.when(exponent_text == F.lit(""), F.lit(0)).otherwise(
        exponent_text.try_cast(IntegerType())  # NULL beyond int: refused
    )
    return text.rlike(_NUMBER_TEXT) & (F.length(fraction) - exponent <= F.lit(scale))


def _decode_decimal(raw: Column, schema: SchemaMap) -> Column:
    target = _decimal_type(schema)
    scale = _int_parameter(schema, "scale")
    if _numeric(schema):
        # The variant holds the JSON number as a decimal when it has up to 38 digits and no
        # exponent: its text is exact. Else it holds a double, whose text is the literal's value
        # only when it has at most 15 significant digits (a double holds every such decimal).
        text = F.try_variant_get(raw, "$", "string")
        rounded = (F.schema_of_variant(raw) == F.lit("DOUBLE")) & (
            F.length(F.regexp_replace(F.regexp_replace(text, "[eE].*$|[^0-9]", ""), "^0+", ""))
            > F.lit(_DOUBLE_DIGITS)
        )
        # NULL (refused by the job) when it has more fraction digits than the scale (a cast
        # would round them), too many digits, or may have lost digits in the double.
        return F.when(~rounded & _fits_scale(text, scale), text.try_cast(target))
    if not isinstance(target, DecimalType):
        return _decimal_text(raw, F.lit(scale))
    # A value wider than its declared type decodes to NULL, which the job refuses per event
    # (a non-null value that decodes to NULL): never a silently different number.
    return F.concat(_integer_digits(raw), F.lit(f"E{-scale}")).try_cast(target)


def _decode_variable_scale_decimal(raw: Column, _schema: SchemaMap) -> Column:
    return _decimal_text(raw.getField("value"), raw.getField("scale"))


# --- temporal ------------------------------------------------------------------------------------


def _floor_div(value: Column, divisor: int) -> Column:
    # Exact for the whole bigint range, negative values included (a double would round).
    return F.floor(value.cast(DecimalType(20, 0)) / F.lit(divisor)).cast(LongType())


def _wall_clock(unit: str, value: Column) -> Column:
    epoch = F.lit("1970-01-01 00:00:00").cast(TimestampNTZType())
    return F.timestamp_add(unit, value, epoch)


def _time_of_day(decode: Callable[[Column], Column]) -> _Codec:
    return _Codec(lambda _: LongType(), lambda raw, _s: decode(raw))


def _timestamp(decode: Callable[[Column], Column]) -> _Codec:
    return _Codec(lambda _: TimestampNTZType(), lambda raw, _s: decode(raw))


TIMESTAMP_POSITIVE_INFINITY_MICROS: Final = 9223372036825200000
"""PostgreSQL ``timestamp 'infinity'`` as Debezium's ``MicroTimestamp`` (contract C2)."""

TIMESTAMP_NEGATIVE_INFINITY_MICROS: Final = -9223372036832400000
"""PostgreSQL ``timestamp '-infinity'`` as Debezium's ``MicroTimestamp``."""


def _zoned_timestamp(raw: Column) -> Column:
    # Debezium writes timestamptz ±infinity as the text "infinity"/"-infinity"; silver holds
    # the same sentinels as the zone-less MicroTimestamp, so both columns compare alike.
    return (
        F.when(
            raw == F.lit("infinity"), F.timestamp_micros(F.lit(TIMESTAMP_POSITIVE_INFINITY_MICROS))
        )
        .when(
            raw == F.lit("-infinity"),
            F.timestamp_micros(F.lit(TIMESTAMP_NEGATIVE_INFINITY_MICROS)),
        )
        .otherwise(raw.try_cast("timestamp"))
    )


_DATE: Final = _Codec(lambda _: DateType(), lambda raw, _s: F.date_from_unix_date(raw))
_MILLIS_OF_DAY: Final = _time_of_day(lambda raw: raw.cast(LongType()) * F.lit(1000))
_MILLIS_TIMESTAMP: Final = _timestamp(lambda raw: _wall_clock("MILLISECOND", raw))


# --- bits ----------------------------------------------------------------------------------------


def _decode_bits(raw: Column, schema: SchemaMap) -> Column:
    little_endian = F.hex(F.unbase64(raw))
    length = _parameters(schema).get("length")
    if length is not None:
        # Debezium may send fewer bytes (PostgreSQL trims to the highest set bit) or more (a
        # 4-byte int for BIT(10)); the extra bytes are the high ones, so pad or cut at the end.
        little_endian = F.rpad(little_endian, 2 * ((int(length) + 7) // 8), "0")
    # Reverse the bytes: reversing the hex text reverses the nibbles too, so swap them back.
    big_endian = F.regexp_replace(F.reverse(little_endian), "(.)(.)", "$2$1")
    return F.unhex(big_endian)


_LOGICAL: Final[Mapping[str, _Codec]] = {
    DECIMAL: _Codec(_decimal_type, _decode_decimal),
    VARIABLE_SCALE_DECIMAL: _Codec(lambda _: StringType(), _decode_variable_scale_decimal),
    DATE: _DATE,
    CONNECT_DATE: _DATE,
    TIME: _MILLIS_OF_DAY,
    CONNECT_TIME: _MILLIS_OF_DAY,
    MICRO_TIME: _time_of_day(lambda raw: raw.cast(LongType())),
    NANO_TIME: _time_of_day(lambda raw: _floor_div(raw, 1000)),
    TIMESTAMP: _MILLIS_TIMESTAMP,
    CONNECT_TIMESTAMP: _MILLIS_TIMESTAMP,
    MICRO_TIMESTAMP: _timestamp(lambda raw: _wall_clock("MICROSECOND", raw)),
    NANO_TIMESTAMP: _timestamp(lambda raw: _wall_clock("MICROSECOND", _floor_div(raw, 1000))),
    ZONED_TIMESTAMP: _Codec(lambda _: TimestampType(), lambda raw, _s: _zoned_timestamp(raw)),
    ZONED_TIME: _AS_PHYSICAL,
    YEAR: _AS_PHYSICAL,
    MICRO_DURATION: _AS_PHYSICAL,
    INTERVAL: _AS_PHYSICAL,
    JSON: _AS_PHYSICAL,
    XML: _AS_PHYSICAL,
    UUID: _AS_PHYSICAL,
    LTREE: _AS_PHYSICAL,
    ENUM: _AS_PHYSICAL,
    ENUM_SET: _AS_PHYSICAL,
    BITS: _Codec(lambda _: BinaryType(), _decode_bits),
    GEOMETRY: _AS_PHYSICAL,
    GEOGRAPHY: _AS_PHYSICAL,
    POINT: _AS_PHYSICAL,
}
"""Codecs by logical name; a name not listed decodes as its physical type."""

_TIME_OF_DAY_NAMES: Final = frozenset({TIME, CONNECT_TIME, MICRO_TIME, NANO_TIME})


def _codec(schema: SchemaMap) -> _Codec:
    return _LOGICAL.get(schema.get("name") or "", None) or _physical(schema)


def _metadata(schema: SchemaMap) -> dict[str, str]:
    """Field metadata of a decoded field: a ``comment`` where the Spark type needs explaining."""
    name = schema.get("name")
    if name in _TIME_OF_DAY_NAMES:
        return {"comment": f"time of day in microseconds past midnight (from {name})"}
    if name == NANO_TIMESTAMP:
        return {"comment": f"truncated to microseconds (from {name})"}
    return {}


def spark_type(schema: SchemaMap) -> DataType:
    """The Spark type of one field's decoded value: logical types applied (see the module table).

    Args:
        schema: The field's Connect schema.

    Returns:
        The decoded type; struct members, array elements and map values are nullable.

    Raises:
        ValueError: Unknown Connect type, or a ``Decimal`` without its ``scale`` parameter.

    Example:
        >>> spark_type({"type": "int64", "name": "io.debezium.time.MicroTimestamp"})
        TimestampNTZType()
        >>> spark_type({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal",
        ...             "parameters": {"scale": "40"}})
        StringType()
    """
    return _codec(schema).spark_type(schema)


def row_schema(row_schema: SchemaMap) -> StructType:
    """The decoded :class:`StructType` of a ``before``/``after`` row struct.

    Args:
        row_schema: The row's Connect struct schema (e.g. ``<prefix>.<db>.<table>.Value``).

    Returns:
        One nullable field per Connect field, in order, with :func:`spark_type`; time-of-day
        fields carry a ``comment`` in their metadata.

    Raises:
        ValueError: The schema is not a struct, or holds an unknown type.
    """
    return StructType(
        [
            StructField(f["field"], spark_type(f), True, _metadata(f))
            for f in (unwrap_set(g) or g for g in _fields(row_schema))
        ]
    )


def decode_value(raw: Column, schema: SchemaMap) -> Column:
    """The decoded value of one field from its parsed (:func:`json_type`) column.

    Args:
        raw: The field as ``from_json`` parsed it.
        schema: The field's Connect schema.

    Returns:
        An unaliased column of type :func:`spark_type` ``(schema)``.
    """
    return _codec(schema).decode(raw, schema)


def decode_row(
    raw: Column,
    row_schema: SchemaMap,
    *,
    placeholder: str = UNAVAILABLE_VALUE_PLACEHOLDER,
) -> list[Column]:
    """Columns that decode a parsed row struct, one per field, named and ordered as the schema.

    Args:
        raw: The row struct as ``from_json`` parsed it with :func:`json_type` (e.g.
            ``col("env.after")``); NULL gives NULL in every column.
        row_schema: The row's Connect struct schema.
        placeholder: The connector's unavailable-value placeholder; a field carrying it decodes to
            NULL (see :func:`unavailable_flags`).

    Returns:
        Columns aliased with the field names; ``select(*decode_row(...))`` has schema
        :func:`row_schema` ``(row_schema)``.

    Raises:
        ValueError: The schema is not a struct, or holds an unknown type.

    Example:
        ``df.select(*decode_row(from_json("value_json", envelope_json_schema(s))["after"], row))``
    """
    marker = _Marker.of(placeholder)
    columns = []
    for g in _fields(row_schema):
        f = unwrap_set(g) or g
        value = _field_value(raw, g)
        decoded = decode_value(value, f)
        unavailable = _field_unavailable(raw, g, marker)
        if unavailable is not None:
            decoded = F.when(unavailable, F.lit(None)).otherwise(decoded)
        metadata = _metadata(f)
        columns.append(
            decoded.alias(f["field"], metadata=metadata) if metadata else decoded.alias(f["field"])
        )
    return columns


# --- unavailable-value placeholder ---------------------------------------------------------------


@dataclass(frozen=True)
class _Marker:
    """The placeholder in each form Debezium writes it."""

    text: str
    data: bytes

    @classmethod
    def of(cls, placeholder: str) -> _Marker:
        # CommonConnectorConfig.getUnavailableValuePlaceholder: "hex:" spells the bytes in hex;
        # string columns get new String(bytes).
        if placeholder.startswith("hex:"):
            data = bytes.fromhex(placeholder[4:])
        else:
            data = placeholder.encode()
        return cls(text=data.decode(errors="replace"), data=data)

    @property
    def b64(self) -> str:
        return base64.b64encode(self.data).decode("ascii")

    @property
    def signed_bytes(self) -> list[int]:
        # int[]/bigint[] columns get the placeholder's bytes as Java (signed) byte values.
        return [b - 256 if b > 127 else b for b in self.data]


def _string_unavailable(raw: Column, _schema: SchemaMap, marker: _Marker) -> Column | None:
    return raw == F.lit(marker.text)


def _bytes_unavailable(raw: Column, _schema: SchemaMap, marker: _Marker) -> Column | None:
    return raw.isin(marker.b64, marker.text)


def _array_unavailable(raw: Column, schema: SchemaMap, marker: _Marker) -> Column | None:
    if _numeric(schema["items"]):
        return None  # JSON numbers: never the placeholder
    items = _type_of(schema["items"])
    values: list[Any]
    if items == "string":
        values = [marker.text]
    elif items == "bytes":
        values = [marker.b64]
    elif items in _INTEGER_TYPES:
        values = marker.signed_bytes
    else:
        return None
    return raw == F.array(*[F.lit(v) for v in values]).cast(json_type(schema))


def _map_unavailable(raw: Column, schema: SchemaMap, marker: _Marker) -> Column | None:
    if not _string_keyed(schema) or _type_of(schema["values"]) != "string":
        return None
    return (F.size(raw) == F.lit(1)) & (
        F.try_element_at(raw, F.lit(marker.text)) == F.lit(marker.text)
    )


_UNAVAILABLE_TESTS: Final[Mapping[str, Callable[[Column, SchemaMap, _Marker], Column | None]]] = {
    "string": _string_unavailable,
    "bytes": _bytes_unavailable,
    "array": _array_unavailable,
    "map": _map_unavailable,
}
"""Placeholder tests by physical type; other types never carry the placeholder."""


def _unavailable(raw: Column, schema: SchemaMap, marker: _Marker) -> Column | None:
    if _numeric(schema):
        return None  # a JSON number: never the placeholder
    test = _UNAVAILABLE_TESTS.get(_type_of(schema))
    return None if test is None else test(raw, schema, marker)


def unwrap_set(schema: SchemaMap) -> SchemaMap | None:
    """The value schema of a YugabyteDB ``yboutput`` column, or None for any other field.

    ``yboutput`` wraps every column of ``before``/``after`` as a struct ``{value, set}``:
    ``{"value": v, "set": true}`` is the value (``v`` may be null: SET NULL), while ``null`` or
    ``"set": false`` means the column was not sent (unchanged), like an unavailable-value
    placeholder. Recognised by shape: a struct of exactly ``value`` and a boolean ``set``.

    Example:
        >>> unwrap_set({"type": "struct", "field": "n", "fields": [
        ...     {"type": "int32", "field": "value"}, {"type": "boolean", "field": "set"}]})
        {'type': 'int32', 'field': 'n'}
    """
    if schema.get("type") != "struct":
        return None
    members = {f.get("field"): f for f in schema.get("fields", ())}
    if set(members) != {"value", "set"} or members["set"].get("type") != "boolean":
        return None
    return {**members["value"], "field": schema.get("field")}


def _field_value(raw: Column, schema: SchemaMap) -> Column:
    """The parsed value of a row field (the ``value`` of a ``yboutput`` wrapper)."""
    value = raw.getField(schema["field"])
    return value.getField("value") if unwrap_set(schema) is not None else value


def _field_unavailable(raw: Column, schema: SchemaMap, marker: _Marker) -> Column | None:
    """When the field carries no value: a placeholder, or a ``yboutput`` column not sent."""
    inner = unwrap_set(schema)
    value = _field_value(raw, schema)
    placeholder = _unavailable(value, inner or schema, marker)
    if inner is None:
        return placeholder
    wrapper = raw.getField(schema["field"])
    unset = wrapper.isNull() | (F.coalesce(wrapper.getField("set"), F.lit(True)) == F.lit(False))
    return unset if placeholder is None else unset | F.coalesce(placeholder, F.lit(False))


def row_fields(row_schema: SchemaMap) -> list[SchemaMap]:
    """The Connect schemas of a row struct's fields, in order (as :func:`field_text` takes)."""
    return list(_fields(row_schema))


def field_text(text_image: Column, schema: SchemaMap) -> Column:
    """The JSON text a row field held (NULL for JSON null), from the image parsed as
    ``map<string,string>``; for a ``yboutput`` wrapper, the text of its ``value``.

    The job compares it with the decoded column: a value present in the JSON that decodes to
    NULL is refused per event, never applied as NULL.
    """
    text = text_image[schema["field"]]
    if unwrap_set(schema) is not None:
        return F.get_json_object(text, "$.value")
    return text


def unavailable_flags(
    raw: Column,
    row_schema: SchemaMap,
    *,
    placeholder: str = UNAVAILABLE_VALUE_PLACEHOLDER,
) -> Column:
    """The names of the row's fields that carried the unavailable-value placeholder.

    The MERGE keeps the stored value for exactly these columns; :func:`decode_row` decodes them to
    NULL. Only top-level fields are checked: Debezium substitutes whole columns.

    Args:
        raw: The row struct as ``from_json`` parsed it with :func:`json_type`.
        row_schema: The row's Connect struct schema.
        placeholder: The connector's placeholder (``hex:`` prefix: the bytes in hex).

    Returns:
        An ``array<string>`` column, in field order; empty (never NULL) when no field is flagged.
    """
    marker = _Marker.of(placeholder)
    flags = []
    for f in _fields(row_schema):
        test = _field_unavailable(raw, f, marker)
        if test is not None:
            flags.append(F.when(raw.isNotNull() & test, F.lit(f["field"])))
    if not flags:
        return F.array().cast(ArrayType(StringType(), True))
    return F.array_compact(F.array(*flags))


# --- envelope ------------------------------------------------------------------------------------


def envelope_json_schema(value_schema: SchemaMap) -> StructType:
    """The ``from_json`` schema of a whole value payload (the envelope).

    Args:
        value_schema: The value's Connect schema (``<prefix>.Envelope``, or any value struct).

    Returns:
        Every envelope field with :func:`json_type` (``before``/``after`` as the row struct,
        ``op``, ``ts_ms``, ``transaction``, ...), except ``source``, which stays JSON text
        (:data:`RAW_JSON_ENVELOPE_FIELDS`): bronze already extracted what ordering needs, and its
        shape varies by connector and version.

    Raises:
        ValueError: The schema is not a struct, or holds an unknown type.
    """
    return StructType(
        [
            StructField(
                f["field"],
                StringType() if f["field"] in RAW_JSON_ENVELOPE_FIELDS else json_type(f),
                True,
            )
            for f in _fields(value_schema)
        ]
    )


# --- schema-less events --------------------------------------------------------------------------


def _kind(value: Any) -> str:
    # bool before int: True is an int in Python.
    if isinstance(value, int) and not isinstance(value, bool):
        return "int64" if _INT64_MIN <= value <= _INT64_MAX else _big_integer_kind(value)
    for python_type, kind in _KINDS:
        if isinstance(value, python_type):
            return kind
    raise ValueError(f"a JSON value cannot be a {type(value).__name__}")


def _big_integer_kind(value: int) -> str:
    # Up to 38 digits: decimal(38,0) holds it exactly. Wider: no column type does, so it does
    # not widen the column; it is refused when decoded (it decodes to NULL), whatever the type.
    return "bigint" if len(str(abs(value))) <= _BIG_INTEGER_DIGITS else "int64"


_KINDS: Final[tuple[tuple[type, str], ...]] = (
    (bool, "boolean"),
    (int, "int64"),
    (float, "float64"),
    (decimal.Decimal, "decimal"),
    (str, "string"),
    (Mapping, "struct"),
    (list, "array"),
)

_NUMBER_KINDS: Final = frozenset({"int64", "bigint", "float64", "decimal"})


def _numeric_schema(precision: int = _BIG_INTEGER_DIGITS, scale: int = 0) -> dict[str, Any]:
    """``decimal(precision, scale)`` read from a JSON number: a schema-less column of numbers no
    ``bigint`` or ``double`` holds."""
    schema = cs.decimal(scale, precision=precision, optional=True)
    schema["parameters"][DECIMAL_FORMAT_PARAMETER] = "NUMERIC"
    return schema


def _exact_decimal(value: Any) -> decimal.Decimal:
    # A float's repr is the shortest text that reads back as it: the literal it was read from.
    return decimal.Decimal(repr(value) if isinstance(value, float) else value)


def _decimal_schema(values: Sequence[Any], stored: DecimalType | None = None) -> dict[str, Any]:
    """The ``decimal(38, s)`` that holds every sample exactly (``s``: the most fraction digits
    seen, and no fewer than the ``stored`` column's). When no decimal(38, s) does: the ``stored``
    type, else the one that keeps the integer digits seen; the samples it cannot hold are
    refused. (Text would not do: Spark reads a fraction's text through a double.)"""
    exact = [_exact_decimal(v) for v in values]
    scale = max((-int(d.as_tuple().exponent) for d in exact), default=0)
    whole = max((d.adjusted() + 1 for d in exact if d), default=0)
    if stored is not None:
        scale, whole = max(scale, stored.scale), max(whole, stored.precision - stored.scale)
    scale = max(scale, 0)
    if scale + whole > DEFAULT_DECIMAL_PRECISION:
        if stored is not None:
            return _numeric_schema(stored.precision, stored.scale)
        return _numeric_schema(DEFAULT_DECIMAL_PRECISION, max(0, DEFAULT_DECIMAL_PRECISION - whole))
    return _numeric_schema(DEFAULT_DECIMAL_PRECISION, scale)


def _infer(values: Sequence[Any]) -> dict[str, Any]:
    present = [v for v in values if v is not None]
    kinds = {_kind(v) for v in present}
    if kinds == {"int64", "bigint"}:
        kinds = {"bigint"}
    if kinds == {"int64", "float64"}:
        kinds = {"float64"}
    if "decimal" in kinds and kinds <= _NUMBER_KINDS:
        # A number no double holds: every number of the field as a decimal, exact.
        return _decimal_schema(present)
    # {"bigint", "float64"} stays a conflict (text): as a double the integer would lose digits.
    if len(kinds) != 1:
        # Nothing seen, or conflicting kinds: a string column parses any JSON token as its text.
        return cs.primitive("string", optional=True)
    kind = kinds.pop()
    if kind == "struct":
        return _infer_struct(present)
    if kind == "array":
        return cs.array(_infer([item for v in present for item in v]), optional=True)
    if kind == "bigint":
        return _numeric_schema()
    return cs.primitive(kind, optional=True)


def _infer_struct(
    rows: Sequence[Mapping[str, Any]], stored: Mapping[str, DataType] | None = None
) -> dict[str, Any]:
    names = list(dict.fromkeys(name for row in rows for name in row))
    stored = stored or {}
    return cs.struct(
        [
            cs.field(name, _infer_column([row.get(name) for row in rows], stored.get(name)))
            for name in names
        ],
        optional=True,
    )


def _infer_column(values: Sequence[Any], stored: DataType | None) -> dict[str, Any]:
    # A decimal column stays one while the values are numbers: a batch of short fractions
    # (doubles on their own) would otherwise be a double, which a decimal column cannot take.
    if isinstance(stored, DecimalType):
        present = [v for v in values if v is not None]
        if {_kind(v) for v in present} <= _NUMBER_KINDS:
            return _decimal_schema(present, stored)
    return _infer(values)


def infer_row_schema(
    sample_rows: list[dict[str, Any]], stored: Mapping[str, DataType] | None = None
) -> dict[str, Any]:
    """A Connect-like row schema for schema-less events (``schemas.enable=false``), from samples.

    Lossy by nature: JSON carries no logical types, so dates, times and timestamps stay numbers,
    decimals and bytes stay (base64) strings, every integer is ``int64`` and every number with a
    fraction ``float64``. A field whose samples disagree, or are all null, becomes ``string`` (Spark
    parses any JSON value into a string column as its text). Every field is optional; fields are
    ordered by first appearance.

    Integers beyond int64 are never made doubles: a field with one of up to 38 digits is a
    ``Decimal`` of scale 0 and precision 38 read from the JSON number
    (:data:`DECIMAL_FORMAT_PARAMETER`), and stays ``string`` beside fractions. A wider one fits
    no type: it leaves the field ``int64`` and decodes to NULL, so the job refuses its event.
    Likewise a number no double holds (``JsonConverter`` with ``decimal.format=NUMERIC`` writes
    ``NUMERIC(38,10)`` values with every digit) makes its field ``decimal(38, s)`` read from the
    JSON number, ``s`` the most fraction digits of the field's samples (when integer and
    fraction digits exceed 38: the integer digits seen are kept, the scale is what is left); a
    value with more fraction or integer digits than its column holds decodes to NULL and is
    refused, never rounded. The samples must be
    parsed exactly (:func:`bronze.exact_json.loads`): orjson reads such literals as doubles.

    Args:
        sample_rows: ``before``/``after`` objects of sample events; ``None`` entries are skipped.
        stored: The silver table's column types, when it exists: a ``decimal`` column stays a
            decimal while its samples are numbers, widened to what they need when 38 digits
            hold it (else the values it cannot hold are refused).

    Returns:
        An optional struct schema usable with :func:`json_type`, :func:`row_schema` and
        :func:`decode_row`.

    Raises:
        ValueError: A sample holds something that is not a JSON value.

    Example:
        >>> s = infer_row_schema([{"id": 1, "tags": ["a"]}, {"id": 2, "price": 9.5}])
        >>> row_schema(s).simpleString()
        'struct<id:bigint,tags:array<string>,price:double>'
        >>> row_schema(infer_row_schema([{"id": 1}, {"id": 10**20}])).simpleString()
        'struct<id:decimal(38,0)>'
        >>> big = decimal.Decimal("12345678901234567890.123456789")
        >>> row_schema(infer_row_schema([{"n": 1.5}, {"n": big}])).simpleString()
        'struct<n:decimal(38,9)>'
    """
    return _infer_struct([row for row in sample_rows if row is not None], stored)
