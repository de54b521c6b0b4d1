"""A collected micro-batch's events decoded on the driver, exactly as the Spark decode does.

In the continuous pipeline each table's share of a micro-batch is a few hundred rows already on
the driver (:mod:`silver.collected_split`). Decoding them with Spark (``silver.job._Decoder``)
costs a job per table and schema, 0.6-1.4 s of planning, code generation and scheduling for
milliseconds of work. :func:`driver_decoder` builds, once per value schema, a
:class:`DriverDecoder` whose :meth:`~DriverDecoder.decode` turns the bronze rows of that schema
(a ``pa.Table`` with bronze's columns) into the very table ``_Decoder(envelope).decode(df)
.toArrow()`` gives: the same columns, Arrow types, values, metadata columns and ``__reason``
texts (:mod:`silver.driver_values` holds the per-value rules, each a mirror of one Spark step).

Exactness before coverage: :func:`driver_decoder` returns None for a schema with a field type,
logical name or parameter it does not decode exactly as :mod:`silver.types` does (arrays, maps,
structs other than ``VariableScaleDecimal``, ``Bits``, geometries, YugabyteDB's wrapped columns,
``Decimal`` read from JSON numbers), and :meth:`~DriverDecoder.decode` returns None for a batch
holding any value it cannot match (:class:`silver.driver_values.Fallback`): the caller then
decodes with Spark, as before. ``tests/integration/test_silver_driver_decode.py`` compares both
decoders cell by cell.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from bronze import schema as B
from bronze.envelope import HEADER_NEW_KEY, HEADER_OLD_KEY
from silver import driver_values as V
from silver import merge as M
from silver import types as T

__all__ = ["DriverDecoder", "DriverDecoders", "driver_decoder"]

logger = logging.getLogger(__name__)

REASON: Final = "__reason"
SHOWN_VALUE_CHARS: Final = 120
"""Characters of an undecodable value quoted in a reason (``silver.job._SHOWN_VALUE_CHARS``)."""
_NO_IMAGE: Final = "no 'after' image: missing, or not a JSON object of the table's columns"
_IMAGE_OPS: Final = frozenset(("c", "u", "r"))

_PASSTHROUGH_NAMES: Final = frozenset(
    (
        T.YEAR,
        T.MICRO_DURATION,
        T.ZONED_TIME,
        T.INTERVAL,
        T.JSON,
        T.XML,
        T.UUID,
        T.LTREE,
        T.ENUM,
        T.ENUM_SET,
    )
)
"""Logical names silver decodes as their physical type."""

_TEMPORAL: Final[Mapping[tuple[str, str], Callable[[Any], Any]]] = {
    (T.DATE, "int32"): V.DATE_DAYS,
    (T.CONNECT_DATE, "int32"): V.DATE_DAYS,
    (T.TIME, "int32"): V.MILLIS_OF_DAY,
    (T.CONNECT_TIME, "int32"): V.MILLIS_OF_DAY,
    (T.MICRO_TIME, "int64"): V.MICROS_OF_DAY,
    (T.NANO_TIME, "int64"): V.NANOS_OF_DAY,
    (T.TIMESTAMP, "int64"): V.MILLIS_TIMESTAMP,
    (T.CONNECT_TIMESTAMP, "int64"): V.MILLIS_TIMESTAMP,
    (T.MICRO_TIMESTAMP, "int64"): V.MICROS_TIMESTAMP,
    (T.NANO_TIMESTAMP, "int64"): V.NANOS_TIMESTAMP,
    (T.ZONED_TIMESTAMP, "string"): V.zoned_timestamp,
}
"""Temporal logical names with the physical type each is decoded from."""

_PRIMITIVES: Final = frozenset(V.FIELD_DECODERS)
_PLACEHOLDER_TYPES: Final = frozenset(("string", "bytes"))
"""Physical types whose fields can carry the unavailable-value placeholder (arrays and maps
can too, but are not decoded here)."""


@dataclass(frozen=True)
class _Field:
    """One column of the row: how its token decodes, and how its placeholder looks."""

    name: str
    decode: Callable[[Any], Any]
    placeholders: frozenset[str]
    """Tokens that are the placeholder (empty: the type never carries one)."""
    reason_suffix: str
    """`` does not decode as <type>`` of a refused value."""


def _physical(schema: Mapping[str, Any]) -> str:
    type_ = schema.get("type")
    return {"float": "float32", "double": "float64"}.get(str(type_), str(type_))


def _field_codec(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    """How a field decodes, when this module decodes it exactly as :mod:`silver.types`."""
    physical = _physical(schema)
    name = str(schema.get("name") or "")
    if name == T.DECIMAL:
        return _decimal_codec(schema) if physical == "bytes" else None
    if name == T.VARIABLE_SCALE_DECIMAL:
        members = {(f.get("field"), _physical(f), f.get("name")) for f in schema.get("fields", ())}
        wanted = {("scale", "int32", None), ("value", "bytes", None)}
        return V.variable_scale_decimal if physical == "struct" and members == wanted else None
    if (name, physical) in _TEMPORAL:
        return _TEMPORAL[(name, physical)]
    if name in _PASSTHROUGH_NAMES or name not in _KNOWN_NAMES:
        return V.FIELD_DECODERS.get(physical)
    return None


_KNOWN_NAMES: Final = frozenset(
    {
        T.DECIMAL,
        T.VARIABLE_SCALE_DECIMAL,
        *(n for n, _ in _TEMPORAL),
        *_PASSTHROUGH_NAMES,
        T.BITS,
        T.GEOMETRY,
        T.GEOGRAPHY,
        T.POINT,
    }
)
"""Every logical name :mod:`silver.types` decodes specially; any other decodes as its physical
type (``_codec``)."""


def _decimal_codec(schema: Mapping[str, Any]) -> Callable[[Any], Any] | None:
    params = schema.get("parameters") or {}
    if params.get(T.DECIMAL_FORMAT_PARAMETER) is not None:
        return None  # a JSON number read through a variant: Spark decodes it
    try:
        scale = int(params["scale"])
    except (KeyError, TypeError, ValueError):
        return None
    target = T.spark_type(schema)
    if isinstance(target, StringType):
        return V.decimal_text_codec(scale)
    precision = getattr(target, "precision", None)
    if precision is None:
        return None
    return V.decimal_codec(scale, precision)


def _row_schema(envelope: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The before/after row struct, when both (where present) are that one struct."""
    rows = [
        f
        for f in envelope.get("fields", ())
        if isinstance(f, Mapping) and f.get("field") in ("before", "after")
    ]
    structs = [f for f in rows if f.get("type") == "struct"]
    if not structs:
        return None
    first = structs[0].get("fields")
    if any(f.get("type") != "struct" or f.get("fields") != first for f in rows):
        return None
    return structs[0]


def _metadata_fields() -> list[StructField]:
    return [
        StructField(M.KEY, StringType(), True),
        StructField(M.POSITION, BinaryType(), True),
        StructField(M.OP, StringType(), True),
        StructField(M.SOURCE_TS, LongType(), True),
        StructField(M.TX_ID, StringType(), True),
        StructField(M.BRONZE_BATCH, StringType(), False),
    ]


class DriverDecoder:
    """The events of one envelope schema decoded on the driver (see the module docstring)."""

    def __init__(self, row: Mapping[str, Any], fields: Sequence[_Field], spark_schema: StructType):
        self._row = row
        self._fields = tuple(fields)
        self.spark_schema = spark_schema
        """The Spark schema of the decoded part (``_Decoder(envelope).decode(df).schema``)."""
        self._flagged = any(f.placeholders for f in fields)

    def arrow_schema(self, *, large_types: bool = False) -> pa.Schema:
        """The Arrow schema ``toArrow`` gives the decoded part (``large_types``: the session's
        ``spark.sql.execution.arrow.useLargeVarTypes``)."""
        return to_arrow_schema(
            self.spark_schema,
            error_on_duplicated_field_names_in_struct=True,
            timezone="UTC",
            prefers_large_types=large_types,
        )

    def decode(self, events: pa.Table, *, large_types: bool = False) -> pa.Table | None:
        """The decoded events (with ``__reason``), or None when Spark must decode them.

        Args:
            events: Bronze rows of this schema (bronze's columns; others are ignored), each a
                row event (op c, u, d or r).
            large_types: As :meth:`arrow_schema`.

        Returns:
            ``_Decoder(envelope).decode(df).toArrow()`` of the same rows, in their order; None
            when a value is one this decoder does not reproduce exactly.
        """
        try:
            return self._decode(events, large_types)
        except V.Fallback as exc:
            logger.debug("driver decode falls back to Spark: %s", exc)
            return None

    def _decode(self, events: pa.Table, large_types: bool) -> pa.Table:
        columns: dict[str, list[Any]] = {
            name: events.column(name).to_pylist()
            for name in (
                B.KEY_JSON,
                B.VALUE_JSON,
                B.OP,
                B.HEADERS,
                B.AGENT_ID,
                B.BATCH_SEQ,
            )
        }
        n = events.num_rows
        keys = [V.canonical_key(k) for k in columns[B.KEY_JSON]]
        batches = [
            "#".join(p for p in (agent, None if seq is None else str(seq)) if p is not None)
            for agent, seq in zip(columns[B.AGENT_ID], columns[B.BATCH_SEQ], strict=True)
        ]
        headers = columns[B.HEADERS]
        old_keys = [V.header_key(h, HEADER_OLD_KEY) for h in headers]
        next_keys = [V.header_key(h, HEADER_NEW_KEY) for h in headers]
        values: list[list[Any]] = [[None] * n for _ in self._fields]
        flags: list[list[str]] = [[] for _ in range(n)]
        reasons: list[str | None] = [None] * n
        for i, (text, op) in enumerate(zip(columns[B.VALUE_JSON], columns[B.OP], strict=True)):
            image = self._image(text, op)
            if image is None:
                if op in _IMAGE_OPS:
                    reasons[i] = _NO_IMAGE
                continue
            refused: list[str] = []
            for j, f in enumerate(self._fields):
                token = image.get(f.name)
                if token is None:
                    continue
                if f.placeholders and isinstance(token, str) and token in f.placeholders:
                    flags[i].append(f.name)
                    continue
                decoded = f.decode(token)
                if decoded is None:  # a JSON value that decodes to NULL: refused, with its text
                    shown = str(V.token_text(token))[:SHOWN_VALUE_CHARS]
                    refused.append(f"column {f.name}: {shown}{f.reason_suffix}")
                values[j][i] = decoded
            if refused:
                reasons[i] = "value does not decode: " + "; ".join(refused)
        schema = self.arrow_schema(large_types=large_types)
        arrays: list[pa.Array | pa.ChunkedArray] = [
            pa.array(keys, pa.string()),
            events.column(B.POSITION),
            events.column(B.OP),
            events.column(B.SOURCE_TS_MS),
            events.column(B.TX_ID),
            pa.array(batches, pa.string()),
            pa.array(flags, pa.list_(pa.string())),
            pa.array(old_keys, pa.string()),
            pa.array(next_keys, pa.string()),
            events.column(B.ORIGIN),
        ]
        for column in values:
            arrays.append(_array(column, schema.field(len(arrays)).type))
        arrays.append(pa.array(reasons, pa.string()))
        return pa.Table.from_arrays(
            [a.cast(f.type) for a, f in zip(arrays, schema, strict=True)], schema=schema
        )

    def _image(self, text: str | None, op: str | None) -> dict[str, Any] | None:
        """The image the event applies (``before`` for a delete), None when it has none."""
        if text is None:
            return None  # from_json of NULL: every field NULL
        envelope = V.parse(text)
        if not isinstance(envelope, dict):
            raise V.Fallback("value JSON that is not an object")
        image = envelope.get("before" if op == "d" else "after")
        return image if isinstance(image, dict) else None


def _array(values: list[Any], type_: pa.DataType) -> pa.Array:
    """A decoded column as Arrow: dates and timestamps from their integers (no Python
    ``datetime``: PostgreSQL's ±infinity sentinels are beyond it)."""
    if pa.types.is_date32(type_):
        return pa.array(values, pa.int32()).cast(type_)
    if pa.types.is_timestamp(type_):
        return pa.array(values, pa.int64()).cast(type_)
    return pa.array(values, type_)


def _decoder_of(envelope: Mapping[str, Any]) -> DriverDecoder | None:
    row = _row_schema(envelope)
    if row is None:
        return None
    fields: list[_Field] = []
    for f in T.row_fields(row):
        if T.unwrap_set(f) is not None:
            return None  # YugabyteDB's wrapped columns: Spark decodes them
        decode = _field_codec(f)
        if decode is None:
            return None
        physical = _physical(f)
        placeholders: frozenset[str] = frozenset()
        if physical in _PLACEHOLDER_TYPES:
            text = T.UNAVAILABLE_VALUE_PLACEHOLDER  # the Spark decoder's (``_Decoder``)
            placeholders = frozenset(
                (text, V.base64_of(text.encode())) if physical == "bytes" else (text,)
            )
        fields.append(
            _Field(
                name=f["field"],
                decode=decode,
                placeholders=placeholders,
                reason_suffix=f" does not decode as {T.spark_type(f).simpleString()}",
            )
        )
    if len({f.name for f in fields}) != len(fields):
        return None
    flags_type = ArrayType(StringType(), not any(f.placeholders for f in fields))
    spark_schema = StructType(
        [
            *_metadata_fields(),
            StructField(M.UNAVAILABLE, flags_type, False),
            StructField(M.OLD_KEY, StringType(), True),
            StructField(M.NEXT_KEY, StringType(), True),
            StructField(M.ORIGIN, StringType(), True),
            *T.row_schema(row).fields,
            StructField(REASON, StringType(), True),
        ]
    )
    return DriverDecoder(row, fields, spark_schema)


def driver_decoder(envelope: Mapping[str, Any]) -> DriverDecoder | None:
    """The driver decoder of an envelope schema, or None when Spark must decode its events.

    Args:
        envelope: The value's Connect schema (``<prefix>.Envelope``).

    Returns:
        A decoder when every field of the row is of a type decoded here exactly as
        :mod:`silver.types` decodes it; None otherwise (or for a schema that is malformed).
    """
    try:
        return _decoder_of(envelope)
    except (KeyError, TypeError, ValueError, V.Fallback) as exc:
        logger.debug("no driver decoder for the schema: %s", exc)
        return None


_ROW_OPS: Final = ("c", "u", "d", "r")
_LARGE_TYPES_CONF: Final = "spark.sql.execution.arrow.useLargeVarTypes"


class DriverDecoders:
    """The silver job's driver decoders, one per value schema id, built on first use.

    Thread-safe enough for the job's table workers: a decoder is immutable, and two workers
    building one for the same schema build equal ones.
    """

    def __init__(self) -> None:
        self._decoders: dict[str, DriverDecoder | None] = {}
        self._verified: dict[str, StructType] = {}
        self._large_types: bool | None = None
        self.decoded = 0
        """Parts decoded on the driver."""
        self.declined = 0
        """Parts left to Spark (a schema or a value not decoded here)."""

    def verified(self, schema_id: str | None) -> StructType | None:
        """The Spark schema of a schema id's decoded parts, once a part of it was compared
        with Spark's (the caller may then skip building the Spark decode)."""
        return None if schema_id is None else self._verified.get(schema_id)

    def decode_part(
        self,
        spark: Any,
        schema_id: str | None,
        envelope: Mapping[str, Any] | None,
        spark_schema: StructType,
        rows: pa.Table | None,
    ) -> pa.Table | None:
        """The decoded rows of one schema's part of a table, or None (then Spark decodes).

        Args:
            spark: The session (its ``useLargeVarTypes`` setting, read once).
            schema_id: The part's value schema id (None: schema-less, decoded by Spark).
            envelope: Its envelope schema.
            spark_schema: The schema of the part as Spark decodes it; a decoder whose schema
                differs is not used.
            rows: The table's collected bronze rows (every schema and op), or None.
        """
        if rows is None or schema_id is None or envelope is None:
            return None
        if schema_id not in self._decoders:
            self._decoders[schema_id] = driver_decoder(envelope)
        decoder = self._decoders[schema_id]
        if decoder is not None and decoder.spark_schema == spark_schema:
            self._verified[schema_id] = spark_schema
        if decoder is None or decoder.spark_schema != spark_schema:
            if decoder is not None:
                logger.debug(
                    "driver decoder of schema %s has another schema: %s",
                    schema_id,
                    decoder.spark_schema.simpleString(),
                )
            self.declined += 1
            return None
        if self._large_types is None:
            self._large_types = spark.conf.get(_LARGE_TYPES_CONF, "false") == "true"
        ids = rows.column(B.VALUE_SCHEMA_ID)
        ops = rows.column(B.OP)
        mine = pc.and_(
            pc.fill_null(pc.equal(ids, schema_id), False),
            pc.fill_null(pc.is_in(ops, pa.array(_ROW_OPS)), False),
        )
        decoded = decoder.decode(rows.filter(mine), large_types=self._large_types)
        if decoded is None:
            self.declined += 1
        else:
            self.decoded += 1
        return decoded
