"""silver.types without Spark: parse and decoded types for every type in the spec's tables."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
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
)

from bronze import connect_schema as cs
from silver.types import (
    DECIMAL_FORMAT_PARAMETER,
    envelope_json_schema,
    infer_row_schema,
    json_type,
    plain_decimal_text,
    row_schema,
    spark_type,
    unwrap_set,
)

pytestmark = pytest.mark.unit

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"


def _struct(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, t, True) for name, t in fields])


WKB_SRID = _struct(("wkb", BinaryType()), ("srid", IntegerType()))
WKB_SRID_JSON = _struct(("wkb", StringType()), ("srid", IntegerType()))

# (schema, json_type, spark_type): every type of the guide §2.1/2.2/2.4/2.5/2.6, Oracle A7,
# YugabyteDB B7, MySQL §1.7 and SQL Server §2.7.
CASES: list[tuple[str, dict[str, Any], DataType, DataType]] = [
    # physical types (BOOLEAN/BIT(1), TINYINT..BIGINT, REAL/FLOAT/DOUBLE, CHAR/TEXT, BLOB/BYTEA)
    ("int8", cs.primitive("int8"), ByteType(), ByteType()),
    ("int16", cs.primitive("int16"), ShortType(), ShortType()),
    ("int32", cs.primitive("int32"), IntegerType(), IntegerType()),
    ("int64", cs.primitive("int64"), LongType(), LongType()),
    ("float32", cs.primitive("float32"), FloatType(), FloatType()),
    ("float64", cs.primitive("float64"), DoubleType(), DoubleType()),
    ("boolean", cs.primitive("boolean"), BooleanType(), BooleanType()),
    ("string", cs.primitive("string"), StringType(), StringType()),
    ("bytes", cs.primitive("bytes"), StringType(), BinaryType()),
    # numbers
    ("Decimal(10,2)", cs.decimal(2, precision=10), StringType(), DecimalType(10, 2)),
    ("Decimal scale only", cs.decimal(3), StringType(), DecimalType(38, 3)),
    ("Decimal(38,38)", cs.decimal(38, precision=38), StringType(), DecimalType(38, 38)),
    ("Decimal(5,-2)", cs.decimal(-2, precision=5), StringType(), DecimalType(7, 0)),
    ("Decimal(2,5)", cs.decimal(5, precision=2), StringType(), DecimalType(5, 5)),
    ("Decimal(50,5)", cs.decimal(5, precision=50), StringType(), StringType()),
    ("Decimal scale 40", cs.decimal(40), StringType(), StringType()),
    ("Decimal(38,-1)", cs.decimal(-1, precision=38), StringType(), StringType()),
    (
        "VariableScaleDecimal",
        cs.variable_scale_decimal(),
        _struct(("scale", IntegerType()), ("value", StringType())),
        StringType(),
    ),
    # io.debezium.time.* and Connect's own
    ("Date", cs.date(), IntegerType(), DateType()),
    ("connect Date", cs.connect_date(), IntegerType(), DateType()),
    ("Time", cs.time_millis(), IntegerType(), LongType()),
    ("connect Time", cs.connect_time(), IntegerType(), LongType()),
    ("MicroTime", cs.micro_time(), LongType(), LongType()),
    ("NanoTime", cs.nano_time(), LongType(), LongType()),
    ("Timestamp", cs.timestamp_millis(), LongType(), TimestampNTZType()),
    ("connect Timestamp", cs.connect_timestamp(), LongType(), TimestampNTZType()),
    ("MicroTimestamp", cs.micro_timestamp(), LongType(), TimestampNTZType()),
    ("NanoTimestamp", cs.nano_timestamp(), LongType(), TimestampNTZType()),
    ("ZonedTimestamp", cs.zoned_timestamp(), StringType(), TimestampType()),
    ("ZonedTime", cs.zoned_time(), StringType(), StringType()),
    ("Year", cs.year(), IntegerType(), IntegerType()),
    ("MicroDuration", cs.micro_duration(), LongType(), LongType()),
    (
        "MicroDuration float64 (Oracle A7)",
        cs.logical("float64", "io.debezium.time.MicroDuration"),
        DoubleType(),
        DoubleType(),
    ),
    ("Interval", cs.interval(), StringType(), StringType()),
    # io.debezium.data.*
    ("Json", cs.json(), StringType(), StringType()),
    ("Xml", cs.xml(), StringType(), StringType()),
    ("Uuid", cs.uuid(), StringType(), StringType()),
    ("Ltree", cs.logical("string", "io.debezium.data.Ltree"), StringType(), StringType()),
    ("Enum", cs.enum(["a", "b"]), StringType(), StringType()),
    ("EnumSet", cs.enum_set(["a", "b"]), StringType(), StringType()),
    ("Bits", cs.bits(10), StringType(), BinaryType()),
    ("Geometry", cs.geometry(), WKB_SRID_JSON, WKB_SRID),
    ("Geography", cs.geography(), WKB_SRID_JSON, WKB_SRID),
    (
        "Point",
        cs.point(),
        _struct(
            ("x", DoubleType()), ("y", DoubleType()), ("wkb", StringType()), ("srid", IntegerType())
        ),
        _struct(
            ("x", DoubleType()), ("y", DoubleType()), ("wkb", BinaryType()), ("srid", IntegerType())
        ),
    ),
    ("unknown logical name", cs.logical("string", "io.acme.Custom"), StringType(), StringType()),
    # containers
    ("array<int32>", cs.array("int32"), ArrayType(IntegerType()), ArrayType(IntegerType())),
    ("array<Date>", cs.array(cs.date()), ArrayType(IntegerType()), ArrayType(DateType())),
    (
        "array<Decimal>",
        cs.array(cs.decimal(2, precision=5)),
        ArrayType(StringType()),
        ArrayType(DecimalType(5, 2)),
    ),
    (
        "map<string,string> (hstore)",
        cs.map_schema("string", "string"),
        MapType(StringType(), StringType()),
        MapType(StringType(), StringType()),
    ),
    (
        "map<string,MicroTimestamp>",
        cs.map_schema("string", cs.micro_timestamp()),
        MapType(StringType(), LongType()),
        MapType(StringType(), TimestampNTZType()),
    ),
    (
        "map<int32,bytes> ([[k, v], ...] in JSON)",
        cs.map_schema("int32", "bytes"),
        ArrayType(ArrayType(StringType())),
        MapType(IntegerType(), BinaryType()),
    ),
    (
        "struct",
        cs.struct([cs.field("d", cs.date()), cs.field("p", cs.decimal(1, precision=3))]),
        _struct(("d", IntegerType()), ("p", StringType())),
        _struct(("d", DateType()), ("p", DecimalType(3, 1))),
    ),
]


@pytest.mark.parametrize(
    ("schema", "parsed", "decoded"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_json_and_spark_types(schema: dict[str, Any], parsed: DataType, decoded: DataType) -> None:
    assert json_type(schema) == parsed
    assert spark_type(schema) == decoded


def test_every_logical_type_of_the_semantic_table_is_covered() -> None:
    # Guide §2.6 plus the Connect types, by the names the schemas carry.
    names = {c[1].get("name") for c in CASES}
    expected = {
        "org.apache.kafka.connect.data.Decimal",
        "org.apache.kafka.connect.data.Date",
        "org.apache.kafka.connect.data.Time",
        "org.apache.kafka.connect.data.Timestamp",
        "io.debezium.data.VariableScaleDecimal",
        *(
            f"io.debezium.time.{n}"
            for n in (
                "Date Time MicroTime NanoTime Timestamp MicroTimestamp NanoTimestamp "
                "ZonedTimestamp ZonedTime Year MicroDuration Interval"
            ).split()
        ),
        *(f"io.debezium.data.{n}" for n in "Json Xml Uuid Ltree Enum EnumSet Bits".split()),
        *(f"io.debezium.data.geometry.{n}" for n in ("Geometry", "Geography", "Point")),
    }
    assert expected <= names


def test_row_schema_comments_times_and_keeps_field_order() -> None:
    row = cs.struct(
        [
            cs.field("id", "int32"),
            cs.field("t", cs.micro_time(optional=True)),
            cs.field("ms", cs.time_millis()),
            cs.field("at", cs.nano_timestamp()),
        ]
    )
    schema = row_schema(row)
    assert schema.names == ["id", "t", "ms", "at"]
    assert all(f.nullable for f in schema.fields)
    assert schema["id"].metadata == {}
    assert schema["t"].metadata == {
        "comment": "time of day in microseconds past midnight (from io.debezium.time.MicroTime)"
    }
    assert "microseconds past midnight" in schema["ms"].metadata["comment"]
    assert schema["at"].metadata == {
        "comment": "truncated to microseconds (from io.debezium.time.NanoTimestamp)"
    }


def test_envelope_json_schema_keeps_source_as_text() -> None:
    row = cs.struct(
        [cs.field("id", "int32"), cs.field("d", cs.date(optional=True))], name="t.Value"
    )
    envelope = cs.envelope_schema("t", row, cs.source_schema("postgresql"), with_transaction=True)
    parsed = envelope_json_schema(envelope)
    row_type = _struct(("id", IntegerType()), ("d", IntegerType()))
    assert parsed == StructType(
        [
            StructField("before", row_type, True),
            StructField("after", row_type, True),
            StructField("source", StringType(), True),
            StructField("op", StringType(), True),
            StructField("ts_ms", LongType(), True),
            StructField(
                "transaction",
                _struct(
                    ("id", StringType()),
                    ("total_order", LongType()),
                    ("data_collection_order", LongType()),
                ),
                True,
            ),
        ]
    )


@pytest.mark.parametrize(
    "name", ["mysql_create", "postgresql_create", "sqlserver_v3_create", "mongodb_create"]
)
def test_envelope_json_schema_of_recorded_examples(name: str) -> None:
    schema = orjson.loads((FIXTURE_DIR / f"{name}.json").read_bytes())["value"]["schema"]
    parsed = envelope_json_schema(schema)
    assert parsed.names == [f["field"] for f in schema["fields"]]
    assert parsed["source"].dataType == StringType()
    assert parsed["op"].dataType == StringType()


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="unknown Kafka Connect type 'int128'"):
        json_type({"type": "int128", "optional": False, "field": "x"})
    with pytest.raises(ValueError, match="needs parameter scale"):
        spark_type({"type": "bytes", "name": "org.apache.kafka.connect.data.Decimal"})
    with pytest.raises(ValueError, match="is not a struct"):
        row_schema(cs.primitive("int32"))


def test_json_converter_type_names() -> None:
    # Kafka's JsonConverter writes FLOAT64 as "double" and FLOAT32 as "float" (issue 12).
    assert json_type({"type": "double", "field": "score"}) == DoubleType()
    assert spark_type({"type": "float", "field": "ratio"}) == FloatType()
    row = {
        "type": "struct",
        "fields": [{"type": "array", "items": {"type": "double"}, "field": "a"}],
    }
    assert row_schema(row).simpleString() == "struct<a:array<double>>"


def _yb(name: str, value: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "struct",
        "optional": True,
        "field": name,
        "fields": [{**value, "field": "value"}, {"type": "boolean", "field": "set"}],
    }


def test_yboutput_columns_decode_as_their_value() -> None:
    row = cs.struct(
        [
            _yb("id", cs.primitive("int32")),
            _yb("price", cs.decimal(2, precision=10, optional=True)),
            cs.field("plain", "string"),
        ]
    )
    assert unwrap_set(row["fields"][0]) == {"type": "int32", "optional": False, "field": "id"}
    assert unwrap_set(row["fields"][2]) is None
    # a struct that merely has a value field is not a wrapper
    assert unwrap_set(cs.struct([cs.field("value", "int32")])) is None
    assert row_schema(row).simpleString() == "struct<id:int,price:decimal(10,2),plain:string>"


@pytest.mark.parametrize(
    ("unscaled", "scale", "text"),
    [
        (468, 2, "4.68"),
        (-468, 2, "-4.68"),
        (0, 0, "0"),
        (0, 3, "0.000"),
        (0, -2, "0"),
        (5, -2, "500"),
        (-5, 5, "-0.00005"),
        (12345, 3, "12.345"),
        (10**40 + 1, 0, "1" + "0" * 39 + "1"),
        (1, 40, "0." + "0" * 39 + "1"),
    ],
)
def test_plain_decimal_text(unscaled: int, scale: int, text: str) -> None:
    assert plain_decimal_text(unscaled, scale) == text


def test_infer_row_schema_is_lossy_but_parses_everything() -> None:
    samples: list[dict[str, Any]] = [
        {"id": 1, "ok": True, "price": 1, "tags": ["a"], "addr": {"zip": "1"}, "mixed": 1},
        {"id": 2, "ok": False, "price": 2.5, "tags": [], "addr": {"city": "x"}, "mixed": "b"},
        {"id": 3, "gone": None},
    ]
    schema = infer_row_schema(samples)
    assert schema["optional"] is True
    assert row_schema(schema) == _struct(
        ("id", LongType()),
        ("ok", BooleanType()),
        ("price", DoubleType()),  # int and float seen: float64
        ("tags", ArrayType(StringType())),
        ("addr", _struct(("zip", StringType()), ("city", StringType()))),
        ("mixed", StringType()),  # conflicting kinds: text of any JSON value
        ("gone", StringType()),  # only nulls seen
    )
    assert infer_row_schema([]) == cs.struct([], optional=True)


def test_inferred_integers_beyond_int64_are_decimals_never_doubles() -> None:
    samples: list[dict[str, Any]] = [
        {"wide": 1, "negative": 2, "huge": 10**40, "mixed": 10**20, "uint": 2**64 - 1},
        {"wide": 2**64, "negative": -(2**63) - 1, "huge": 7, "mixed": 1.5, "uint": 1},
    ]
    assert row_schema(infer_row_schema(samples)) == _struct(
        ("wide", DecimalType(38, 0)),
        ("negative", DecimalType(38, 0)),
        ("huge", LongType()),  # 41 digits fit no type: refused when decoded, no widening
        ("mixed", StringType()),  # a double would lose the integer's digits: exact text
        ("uint", DecimalType(38, 0)),
    )
    (field,) = infer_row_schema([{"id": 10**20}])["fields"]
    assert field["parameters"][DECIMAL_FORMAT_PARAMETER] == "NUMERIC"


def test_schema_less_decimals_no_double_holds_infer_exact_decimals() -> None:
    long = Decimal("12345678901234567890.123456789")  # as bronze.exact_json reads it
    tiny = Decimal("1.234567890123456789012345678901234567890E-30")
    samples = [{"n": long, "t": tiny, "m": 1}, {"n": 1.5, "t": -2.5, "m": long}]
    assert row_schema(infer_row_schema(samples)) == _struct(
        ("n", DecimalType(38, 9)),  # the most fraction digits seen
        ("t", DecimalType(38, 37)),  # 70 digits: the integer digit kept, tiny refused
        ("m", DecimalType(38, 9)),
    )


def test_a_stored_decimal_column_stays_decimal_for_short_fractions() -> None:
    short: list[dict[str, Any]] = [{"n": 2.25}, {"n": 3}]
    assert row_schema(infer_row_schema(short)) == _struct(("n", DoubleType()))
    stored = {"n": DecimalType(38, 9)}
    assert row_schema(infer_row_schema(short, stored)) == _struct(("n", DecimalType(38, 9)))
    # Widened when 38 digits hold both; else the stored type (the value is refused).
    wider = [{"n": Decimal("0.0000000001")}]
    assert row_schema(infer_row_schema(wider, {"n": DecimalType(20, 9)})) == _struct(
        ("n", DecimalType(38, 10))
    )
    assert row_schema(infer_row_schema(wider, stored)) == _struct(("n", DecimalType(38, 9)))
    # Not numbers: the stored type does not apply.
    assert row_schema(infer_row_schema([{"n": "x"}], stored)) == _struct(("n", StringType()))
