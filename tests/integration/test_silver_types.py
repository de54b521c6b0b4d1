"""silver.types on the shared SparkSession: every logical type decoded to a hand-checked value.

Each case builds Debezium value payloads (``value_json`` text) for a one-table envelope, parses them
with ``from_json`` and :func:`envelope_json_schema`, decodes ``after`` with :func:`decode_row` and
compares with Python values worked out by hand (the comment beside each says how). Inputs that are
not literal come from ``_b64``, an encoder written the way Java's ``BigInteger.toByteArray`` is.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Mapping, Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze import connect_schema as cs
from silver.types import (
    UNAVAILABLE_VALUE_PLACEHOLDER,
    decode_row,
    decode_value,
    envelope_json_schema,
    infer_row_schema,
    plain_decimal_text,
    row_schema,
    unavailable_flags,
)

pytestmark = pytest.mark.spark

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"
UTC = dt.UTC
FLAGS = "_unavailable"


def _b64(unscaled: int) -> str:
    """Minimal big-endian two's complement, base64: what Connect's Decimal writes."""
    length = (unscaled.bit_length() + 8) // 8
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def _decode(
    spark: Any,
    fields: Sequence[Mapping[str, Any]],
    afters: Sequence[Mapping[str, Any] | None],
    *,
    placeholder: str = UNAVAILABLE_VALUE_PLACEHOLDER,
) -> list[dict[str, Any]]:
    """Decode ``after`` rows of a one-table envelope; each result has the flags under FLAGS."""
    from pyspark.sql import functions as F

    row = cs.struct(list(fields), name="srv.db.t.Value")
    envelope = cs.envelope_schema(
        "srv.db.t", row, cs.source_schema("mysql"), with_transaction=False
    )
    values = [
        orjson.dumps({"before": None, "after": after, "source": {"connector": "mysql"}, "op": "c"})
        for after in afters
    ]
    df = spark.createDataFrame([(v.decode(),) for v in values], "value_json string")
    parsed = df.select(F.from_json("value_json", envelope_json_schema(envelope)).alias("env"))
    after = F.col("env.after")
    out = parsed.select(
        *decode_row(after, row, placeholder=placeholder),
        unavailable_flags(after, row, placeholder=placeholder).alias(FLAGS),
    )
    assert out.schema.fields[:-1] == row_schema(row).fields
    return [r.asDict(recursive=True) for r in out.collect()]


def _values(spark: Any, schema: Mapping[str, Any], raws: Sequence[Any]) -> list[Any]:
    """Decode one field (named ``v``) per payload; return the decoded values in order."""
    rows = _decode(spark, [cs.field("v", cs.with_optional(schema, True))], [{"v": r} for r in raws])
    return [r["v"] for r in rows]


# --- one test per logical type ------------------------------------------------------------------


def test_decimal_scale_2(spark: Any) -> None:
    # 0x01D4 = 468 -> 4.68; 0xFE2C = 65068 - 65536 = -468; 0xFF = -1; 0x00 = 0.
    values = _values(spark, cs.decimal(2, precision=10), ["AdQ=", "/iw=", "/w==", "AA==", None])
    assert values == [Decimal("4.68"), Decimal("-4.68"), Decimal("-0.01"), Decimal("0.00"), None]


def test_decimal_wider_than_8_bytes(spark: Any) -> None:
    # decimal(38,0) extremes are 16 bytes: 0x4B3B4CA85A86C47A098A223FFFFFFFFF = 10^38 - 1.
    big = 10**38 - 1
    assert _b64(big) == "SztMqFqGxHoJiiI//////w=="
    values = _values(
        spark,
        cs.decimal(0, precision=38),
        ["SztMqFqGxHoJiiI//////w==", _b64(-big), _b64(2**64), _b64(-(2**64) - 1)],
    )
    assert values == [
        Decimal("99999999999999999999999999999999999999"),
        Decimal("-99999999999999999999999999999999999999"),
        Decimal("18446744073709551616"),
        Decimal("-18446744073709551617"),
    ]
    # 12 bytes with a scale: 1234567890123456789012.345678 (28 digits) in decimal(30,6).
    scaled = _values(spark, cs.decimal(6, precision=30), [_b64(1234567890123456789012345678)])
    assert scaled == [Decimal("1234567890123456789012.345678")]


def test_decimal_without_precision_is_decimal_38(spark: Any) -> None:
    # No connect.decimal.precision: decimal(38, 3); 12345 at scale 3 is 12.345.
    assert _values(spark, cs.decimal(3), ["MDk="]) == [Decimal("12.345")]


def test_decimal_negative_scale(spark: Any) -> None:
    # Oracle NUMBER(5,-2): unscaled 5 at scale -2 is 500, held in decimal(7,0).
    assert _values(spark, cs.decimal(-2, precision=5), ["BQ=="]) == [Decimal("500")]


def test_decimal_too_wide_for_its_precision_decodes_to_null_for_the_job_to_refuse(
    spark: Any,
) -> None:
    # 17 bytes cannot be a decimal(38, 0) (nor 10^38 a decimal(38,0)). The decoder gives NULL
    # for a non-null value, which the job refuses per event instead of applying it
    # (C5, test_silver_poison_pill): one event never fails the micro-batch.
    assert _values(spark, cs.decimal(0, precision=38), [_b64(2**130), _b64(10**38), None]) == [
        None,
        None,
        None,
    ]


def test_decimal_precision_above_38_is_exact_text(spark: Any) -> None:
    # 45 digits at scale 5 (19 bytes, the wide built-in path) and -5 at scale 5 (built-ins).
    unscaled = 123456789012345678901234567890123456789012345
    values = _values(
        spark, cs.decimal(5, precision=50), [_b64(unscaled), _b64(-unscaled), _b64(-5), None]
    )
    assert values == [
        "1234567890123456789012345678901234567890.12345",
        "-1234567890123456789012345678901234567890.12345",
        "-0.00005",
        None,
    ]


def test_no_python_udf_in_any_decoding_plan(spark: Any) -> None:
    from pyspark.sql import functions as F

    df = spark.createDataFrame([('{"v": null}',)], "value_json string")

    def plan(schema: dict[str, Any]) -> str:
        row = cs.struct([cs.field("v", schema)])
        parsed = df.select(F.from_json("value_json", envelope_json_schema(row)).alias("r"))
        decoded = parsed.select(*decode_row(F.col("r"), row))
        return str(decoded._jdf.queryExecution().executedPlan().toString())

    # A Python UDF cannot run inside a higher-order function (numeric[] is a transform).
    assert "BatchEvalPython" not in plan(cs.decimal(2, precision=38))
    assert "BatchEvalPython" not in plan(cs.variable_scale_decimal())
    assert "BatchEvalPython" not in plan(cs.array(cs.variable_scale_decimal()))
    assert "BatchEvalPython" not in plan(cs.decimal(3, precision=60))


def test_variable_scale_decimal(spark: Any) -> None:
    raws = [
        {"scale": 3, "value": "MDk="},  # 12345 -> 12.345
        {"scale": 0, "value": "AA=="},  # 0
        {"scale": 2, "value": "AA=="},  # 0 at scale 2 keeps its zeros: 0.00
        {"scale": -2, "value": "BQ=="},  # 5 * 10^2
        {"scale": 1, "value": "/w=="},  # -1 -> -0.1
        {"scale": 0, "value": _b64(10**40 + 1)},  # 17 bytes: the limb fold
        None,
    ]
    values = _values(spark, cs.variable_scale_decimal(), raws)
    assert values == ["12.345", "0", "0.00", "500", "-0.1", "1" + "0" * 39 + "1", None]


def test_decimal_text_built_ins_agree_with_python_at_the_15_16_byte_boundary(spark: Any) -> None:
    # 2^119 - 1 is the widest 15-byte value (built-ins); 2^119 needs 16 bytes (Python).
    cases = [(u, s) for u in (2**119 - 1, 2**119, -(2**119), 7, -7, 10**20) for s in (-3, 0, 4, 30)]
    raws = [{"scale": s, "value": _b64(u)} for u, s in cases]
    values = _values(spark, cs.variable_scale_decimal(), raws)
    assert values == [plain_decimal_text(u, s) for u, s in cases]
    assert values[0] == "664613997892457936451903530140172287000"  # 2^119 - 1 at scale -3


def test_date(spark: Any) -> None:
    # 17000 days: 46 years to 2016-01-01 are 16801 days (11 leap days); day 199 of 2016 (0-based,
    # leap year: Jan..Jun = 182 days) is July 18. -1 is the day before the epoch.
    expected = [dt.date(2016, 7, 18), dt.date(1970, 1, 1), dt.date(1969, 12, 31), None]
    assert _values(spark, cs.date(), [17000, 0, -1, None]) == expected
    assert _values(spark, cs.connect_date(), [17000]) == [dt.date(2016, 7, 18)]


def test_times_are_microseconds_past_midnight(spark: Any) -> None:
    # 13:53:16.945104 = (13*3600 + 53*60 + 16) s = 49996 s, + .945104 s.
    assert _values(spark, cs.time_millis(), [49996945, None]) == [49996945000, None]
    assert _values(spark, cs.connect_time(), [49996945]) == [49996945000]
    assert _values(spark, cs.micro_time(), [49996945104]) == [49996945104]
    # NanoTime truncates to microseconds.
    assert _values(spark, cs.nano_time(), [49996945104789]) == [49996945104]


def test_timestamps_are_zone_less_wall_clock(spark: Any) -> None:
    # The guide's examples: DATETIME '2018-06-20 06:37:03' -> 1529476623000 (ms) and
    # TIMESTAMP '2018-06-20 15:13:16.945104' -> 1529507596945104 (us).
    assert _values(spark, cs.timestamp_millis(), [1529476623000, None]) == [
        dt.datetime(2018, 6, 20, 6, 37, 3),
        None,
    ]
    assert _values(spark, cs.connect_timestamp(), [1529476623000]) == [
        dt.datetime(2018, 6, 20, 6, 37, 3)
    ]
    assert _values(spark, cs.micro_timestamp(), [1529507596945104, -1]) == [
        dt.datetime(2018, 6, 20, 15, 13, 16, 945104),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    ]
    # Nanoseconds truncate toward the past: -1 ns is the last microsecond before the epoch.
    assert _values(spark, cs.nano_timestamp(), [1529507596945104789, -1]) == [
        dt.datetime(2018, 6, 20, 15, 13, 16, 945104),
        dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    ]


def test_zoned_timestamp_is_the_utc_instant(spark: Any) -> None:
    raws = ["2018-06-20T13:37:03Z", "2018-06-20T15:37:03.123456+02:00", "not a time", None]
    values = _values(spark, cs.zoned_timestamp(), raws)
    # PySpark hands TIMESTAMP back as a naive local datetime; .timestamp() undoes that.
    instants = [None if v is None else v.timestamp() for v in values]
    assert instants == [
        dt.datetime(2018, 6, 20, 13, 37, 3, tzinfo=UTC).timestamp(),
        dt.datetime(2018, 6, 20, 13, 37, 3, 123456, tzinfo=UTC).timestamp(),
        None,
        None,
    ]


def test_zoned_timestamp_infinity_is_debeziums_timestamp_sentinel(spark: Any) -> None:
    from pyspark.sql import functions as F

    # C2: timestamptz ±infinity holds the µs sentinels of timestamp ±infinity (MicroTimestamp).
    row = cs.struct([cs.field("v", cs.zoned_timestamp(optional=True))])
    payloads = [orjson.dumps({"v": v}).decode() for v in ("infinity", "-infinity")]
    df = spark.createDataFrame([(p,) for p in payloads], "value_json string")
    parsed = df.select(F.from_json("value_json", envelope_json_schema(row)).alias("r"))
    micros = parsed.select(F.unix_micros(decode_row(F.col("r"), row)[0]).alias("us")).collect()
    assert [r["us"] for r in micros] == [9223372036825200000, -9223372036832400000]


@pytest.mark.parametrize(
    ("schema", "raw"),
    [
        (cs.zoned_time(), "13:37:03.5Z"),
        (cs.interval(), "P1Y2M3DT4H5M6.78S"),
        (cs.json(), '{"a": [1, 2]}'),
        (cs.xml(), "<a>1</a>"),
        (cs.uuid(), "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"),
        (cs.logical("string", "io.debezium.data.Ltree"), "Top.Science.Astronomy"),
        (cs.enum(["red", "green"]), "green"),
        (cs.enum_set(["a", "b", "c"]), "a,c"),
        (cs.year(), 2018),
        (cs.micro_duration(), 3600000000),
    ],
    ids=lambda v: v.get("name", "?").rsplit(".", 1)[-1] if isinstance(v, dict) else "raw",
)
def test_types_decoded_as_sent(spark: Any, schema: dict[str, Any], raw: Any) -> None:
    assert _values(spark, schema, [raw, None]) == [raw, None]


def test_bits_little_endian_to_big_endian(spark: Any) -> None:
    # BIT(10) b'1000000001' = 0x0201: Debezium sends little-endian [0x01, 0x02] ("AQI="), PostgreSQL
    # may trim to [0x01] ("AQ==", the value 1), a 4-byte int gives [0x01, 0x02, 0, 0].
    values = _values(spark, cs.bits(10), ["AQI=", "AQ==", "AQIAAA==", None])
    assert values == [b"\x02\x01", b"\x00\x01", b"\x02\x01", None]


def test_bytes(spark: Any) -> None:
    assert _values(spark, cs.primitive("bytes"), ["AQID", ""]) == [b"\x01\x02\x03", b""]


def test_geometry_and_geography(spark: Any) -> None:
    # MySQL POINT(1 1) as WKB: 01 (little-endian) 01000000 (point) and 1.0 = 000000000000F03F twice.
    wkb = bytes.fromhex("0101000000000000000000f03f000000000000f03f")
    raw = {"wkb": "AQEAAAAAAAAAAADwPwAAAAAAAPA/", "srid": 4326}
    assert _values(spark, cs.geometry(), [raw, None]) == [{"wkb": wkb, "srid": 4326}, None]
    assert _values(spark, cs.geography(), [{"wkb": "AQID", "srid": None}]) == [
        {"wkb": b"\x01\x02\x03", "srid": None}
    ]


def test_point(spark: Any) -> None:
    raw = {"x": 1.5, "y": -2.25, "wkb": "AQID", "srid": None}
    assert _values(spark, cs.point(), [raw]) == [
        {"x": 1.5, "y": -2.25, "wkb": b"\x01\x02\x03", "srid": None}
    ]


def test_physical_primitives(spark: Any) -> None:
    fields = [
        cs.field("i8", "int8"),
        cs.field("i16", "int16"),
        cs.field("i64", "int64"),
        cs.field("f32", "float32"),
        cs.field("f64", "float64"),
        cs.field("b", "boolean"),
        cs.field("s", "string"),
    ]
    after = {"i8": -128, "i16": 32767, "i64": 2**63 - 1, "f32": 0.5, "f64": -1e300, "b": True}
    (row,) = _decode(spark, fields, [{**after, "s": "é"}])
    assert row == {**after, "s": "é", FLAGS: []}


def test_arrays(spark: Any) -> None:
    fields = [
        cs.field("ints", cs.array("int32", optional=True)),
        cs.field("days", cs.array(cs.date(optional=True), optional=True)),
        cs.field("prices", cs.array(cs.decimal(2, precision=5), optional=True)),
        cs.field("texts", cs.array("string", optional=True)),
    ]
    after = {"ints": [1, None, 3], "days": [0, 17000], "prices": ["AdQ="], "texts": []}
    rows = _decode(spark, fields, [after, {}])
    assert rows == [
        {
            "ints": [1, None, 3],
            "days": [dt.date(1970, 1, 1), dt.date(2016, 7, 18)],
            "prices": [Decimal("4.68")],
            "texts": [],
            FLAGS: [],
        },
        {"ints": None, "days": None, "prices": None, "texts": None, FLAGS: []},
    ]


def test_nested_structs(spark: Any) -> None:
    inner = cs.struct([cs.field("price", cs.decimal(2, precision=10))], name="inner", optional=True)
    outer = cs.struct(
        [
            cs.field("n", "int32"),
            cs.field("at", cs.micro_timestamp()),
            cs.field("inner", inner),
            cs.field("tags", cs.array(inner, optional=True)),
        ],
        name="outer",
        optional=True,
    )
    after = {
        "o": {
            "n": 7,
            "at": 1529507596945104,
            "inner": {"price": "/iw="},
            "tags": [{"price": "AdQ="}, None],
        }
    }
    rows = _decode(spark, [cs.field("o", outer)], [after, {"o": None}])
    assert rows[0]["o"] == {
        "n": 7,
        "at": dt.datetime(2018, 6, 20, 15, 13, 16, 945104),
        "inner": {"price": Decimal("-4.68")},
        "tags": [{"price": Decimal("4.68")}, None],
    }
    assert rows[1]["o"] is None


def test_maps(spark: Any) -> None:
    fields = [
        # hstore.handling.mode=map, and a map with logical values: JSON objects.
        cs.field("hstore", cs.map_schema("string", cs.with_optional(cs.primitive("string")))),
        cs.field("when", cs.map_schema("string", cs.date(optional=True), optional=True)),
        # Non-string keys: JsonConverter writes [[key, value], ...].
        cs.field("by_id", cs.map_schema("int32", cs.primitive("string", optional=True))),
        cs.field("by_day", cs.map_schema(cs.date(), cs.decimal(2, precision=5))),
    ]
    after = {
        "hstore": {"k": "v", "n": None},
        "when": {"a": 17000},
        "by_id": [[1, "a"], [2, None]],
        "by_day": [[17000, "AdQ="]],
    }
    (row,) = _decode(spark, fields, [after])
    assert row == {
        "hstore": {"k": "v", "n": None},
        "when": {"a": dt.date(2016, 7, 18)},
        "by_id": {1: "a", 2: None},
        "by_day": {dt.date(2016, 7, 18): Decimal("4.68")},
        FLAGS: [],
    }


def test_nullable_nulls_and_a_null_row(spark: Any) -> None:
    fields = [
        cs.field("id", "int32"),
        cs.field("price", cs.decimal(2, precision=10, optional=True)),
        cs.field("born", cs.date(optional=True)),
        cs.field("at", cs.micro_timestamp(optional=True)),
        cs.field("amount", cs.variable_scale_decimal(optional=True)),
        cs.field("flags", cs.bits(3, optional=True)),
        cs.field("doc", cs.json(optional=True)),
    ]
    nulls = {"id": 1, "price": None, "born": None, "at": None, "amount": None, "flags": None}
    rows = _decode(spark, fields, [nulls, None])
    assert rows[0] == {**nulls, "doc": None, FLAGS: []}
    assert rows[1] == {f["field"]: None for f in fields} | {FLAGS: []}


# --- unavailable-value placeholder --------------------------------------------------------------


def test_placeholder_decodes_to_null_and_is_flagged(spark: Any) -> None:
    placeholder_bytes = b"__debezium_unavailable_value"
    fields = [
        cs.field("id", "int32"),
        cs.field("body", cs.primitive("string", optional=True)),
        cs.field("blob", cs.primitive("bytes", optional=True)),
        cs.field("doc", cs.json(optional=True)),
        cs.field("words", cs.array("string", optional=True)),
        cs.field("codes", cs.array("int32", optional=True)),
        cs.field("attrs", cs.map_schema("string", cs.primitive("string", optional=True))),
    ]
    unavailable = {
        "id": 1,
        "body": UNAVAILABLE_VALUE_PLACEHOLDER,
        "blob": "X19kZWJleml1bV91bmF2YWlsYWJsZV92YWx1ZQ==",  # base64 of the placeholder's bytes
        "doc": UNAVAILABLE_VALUE_PLACEHOLDER,
        "words": [UNAVAILABLE_VALUE_PLACEHOLDER],
        "codes": list(placeholder_bytes),  # PostgreSQL int[]: the placeholder's byte values
        "attrs": {UNAVAILABLE_VALUE_PLACEHOLDER: UNAVAILABLE_VALUE_PLACEHOLDER},
    }
    present = {
        "id": 2,
        "body": "text",
        "blob": "AQID",
        "doc": "{}",
        "words": ["a", UNAVAILABLE_VALUE_PLACEHOLDER],
        "codes": [95],
        "attrs": {"k": "v"},
    }
    rows = _decode(spark, fields, [unavailable, present])
    assert rows[0] == {
        "id": 1,
        "body": None,
        "blob": None,
        "doc": None,
        "words": None,
        "codes": None,
        "attrs": None,
        FLAGS: ["body", "blob", "doc", "words", "codes", "attrs"],
    }
    assert rows[1] == {**present, "blob": b"\x01\x02\x03", FLAGS: []}


def test_hex_placeholder_on_a_bytes_column(spark: Any) -> None:
    # unavailable.value.placeholder=hex:00ff means the bytes 00 FF, base64 "AP8=".
    fields = [cs.field("blob", cs.primitive("bytes", optional=True))]
    rows = _decode(spark, fields, [{"blob": "AP8="}, {"blob": "AP4="}], placeholder="hex:00ff")
    assert rows == [{"blob": None, FLAGS: ["blob"]}, {"blob": b"\x00\xfe", FLAGS: []}]


# --- the spec's recorded examples ---------------------------------------------------------------

CUSTOMER_1004 = {
    "id": 1004,
    "first_name": "Anne",
    "last_name": "Kretchmar",
    "email": "annek@noanswer.org",
}
JOHN_DOE_1005 = {
    "id": 1005,
    "first_name": "john",
    "last_name": "doe",
    "email": "john.doe@example.org",
}

FIXTURE_AFTER: dict[str, dict[str, Any]] = {
    "mysql_create": CUSTOMER_1004,
    "mysql_v0_5_create": CUSTOMER_1004,
    "postgresql_create": {**CUSTOMER_1004, "id": 1},
    "yugabytedb_create": {**CUSTOMER_1004, "id": 1},
    "sqlserver_create": JOHN_DOE_1005,
    "sqlserver_v3_create": JOHN_DOE_1005,
    "db2_create": {k.upper(): v for k, v in JOHN_DOE_1005.items()},
    "oracle_create": {k.upper(): v for k, v in CUSTOMER_1004.items()},
    "oracle_read_example_7_5": {"product_id": 101, "quantity": 3},
}
"""``after`` of every recorded create that carries its schema, read off the documents by hand."""


def _fixture(name: str) -> tuple[dict[str, Any], Any]:
    doc = orjson.loads((FIXTURE_DIR / f"{name}.json").read_bytes())
    return doc["value"]["schema"], doc["value"]["payload"]


@pytest.mark.parametrize("name", sorted(FIXTURE_AFTER))
def test_recorded_examples_decode(spark: Any, name: str) -> None:
    from pyspark.sql import functions as F

    schema, payload = _fixture(name)
    fields = {f["field"]: f for f in schema["fields"]}
    df = spark.createDataFrame([(orjson.dumps(payload).decode(),)], "value_json string")
    env = df.select(F.from_json("value_json", envelope_json_schema(schema)).alias("env"))
    (row,) = env.select(
        F.struct(*decode_row(F.col("env.after"), fields["after"])).alias("after"),
        F.struct(*decode_row(F.col("env.before"), fields["before"])).alias("before"),
        "env.op",
        "env.source",
    ).collect()
    assert row["after"].asDict() == FIXTURE_AFTER[name]
    assert set(row["before"].asDict().values()) == {None}  # creates have no before
    assert row["op"] == payload["op"]
    assert orjson.loads(row["source"]) == payload["source"]  # source stays JSON text


def test_recorded_mongodb_after_is_json_text(spark: Any) -> None:
    from pyspark.sql import functions as F

    schema, payload = _fixture("mongodb_create")
    after_schema = next(f for f in schema["fields"] if f["field"] == "after")
    df = spark.createDataFrame([(orjson.dumps(payload).decode(),)], "value_json string")
    env = df.select(F.from_json("value_json", envelope_json_schema(schema)).alias("env"))
    (row,) = env.select(decode_value(F.col("env.after"), after_schema).alias("after")).collect()
    assert orjson.loads(row["after"]) == {
        "_id": {"$numberLong": "1004"},
        "first_name": "Anne",
        "last_name": "Kretchmar",
        "email": "annek@noanswer.org",
    }


def test_schema_less_payloads_with_an_inferred_schema(spark: Any) -> None:
    from pyspark.sql import functions as F

    afters = [{"id": 1, "name": "a", "score": 1}, {"id": 2, "score": 2.5, "tags": ["x"]}]
    row = infer_row_schema(afters)
    df = spark.createDataFrame(
        [(orjson.dumps({"after": a}).decode(),) for a in afters], "value_json string"
    )
    env_schema = envelope_json_schema(cs.struct([cs.field("after", row)]))
    parsed = df.select(F.from_json("value_json", env_schema).alias("env"))
    rows = [r.asDict() for r in parsed.select(*decode_row(F.col("env.after"), row)).collect()]
    assert rows == [
        {"id": 1, "name": "a", "score": 1.0, "tags": None},
        {"id": 2, "name": None, "score": 2.5, "tags": ["x"]},
    ]


def test_schema_less_numbers_no_double_holds_decode_exactly_or_to_null(spark: Any) -> None:
    from pyspark.sql import functions as F

    # As bronze.exact_json reads them: a Decimal where a double would round, floats elsewhere.
    long = Decimal("12345678901234567890.123456789")
    row = infer_row_schema([{"n": long, "xs": [long, 1.5]}, {"n": 1.5, "xs": []}])
    assert row_schema(row).simpleString() == "struct<n:decimal(38,9),xs:array<decimal(38,9)>>"
    texts = [
        f'{{"after":{{"n":{long},"xs":[{long},1.5]}}}}',
        '{"after":{"n":1E-9,"xs":[]}}',  # BigDecimal.toString's form: exact
        '{"after":{"n":0.0000000001,"xs":[]}}',  # one fraction digit too many: not rounded
        '{"after":{"n":1.23456789012345678E-5,"xs":[]}}',  # read as a double: may have lost
    ]
    df = spark.createDataFrame([(t,) for t in texts], "value_json string")
    env_schema = envelope_json_schema(cs.struct([cs.field("after", row)]))
    parsed = df.select(F.from_json("value_json", env_schema).alias("env"))
    got = [tuple(r) for r in parsed.select(*decode_row(F.col("env.after"), row)).collect()]
    assert got == [
        (long, [long, Decimal("1.5")]),
        (Decimal("1E-9"), []),
        (None, []),
        (None, []),
    ]
