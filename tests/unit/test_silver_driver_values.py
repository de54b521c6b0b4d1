"""silver.driver_values and driver_decode without Spark: what is left to Spark, and the helpers
whose Spark twins are tested elsewhere (the cell-by-cell comparison with Spark is
tests/integration/test_silver_driver_decode.py)."""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bronze import connect_schema as cs
from silver import driver_decode as DD
from silver import driver_values as V
from silver.types import DECIMAL_FORMAT_PARAMETER as NUMERIC
from silver.types import plain_decimal_text


def _envelope(*fields: dict[str, Any]) -> dict[str, Any]:
    row = cs.struct([cs.field("id", "int32"), *fields], name="s.d.t.Value")
    return cs.envelope_schema("s.d.t", row, cs.source_schema("mysql"), with_transaction=False)


@pytest.mark.parametrize(
    "text",
    [
        '{"a": 1, "a": 2}',  # Spark's map of it fails the query; its struct takes the last
        '{"a": NaN}',
        "{'a': 1}",  # Jackson with Spark's options reads single quotes
        '{"a": 1} trailing',  # Jackson stops after the first value
        '{"a": -0}',
        '{"a": "\\ud800"}',
        '{"a": ' + "1" * 1001 + "}",
        "",
    ],
)
def test_json_the_two_parsers_read_differently_is_left_to_spark(text: str) -> None:
    with pytest.raises(V.Fallback):
        value = V.parse(text)
        V.token_text(value.get("a"))  # the lone surrogate is refused where it is read


@pytest.mark.parametrize("token", [1.5, V.FloatText("1.50"), {"a": 1}, [1]])
def test_text_spark_writes_through_jackson_is_left_to_spark(token: Any) -> None:
    if isinstance(token, float):
        token = V.FloatText(repr(token))
    with pytest.raises(V.Fallback):
        V.token_text(token)


def test_tokens_spark_spells_as_text() -> None:
    assert [V.token_text(t) for t in (None, True, False, 12, -(2**80), "x")] == [
        None,
        "true",
        "false",
        "12",
        str(-(2**80)),
        "x",
    ]


@given(st.integers(-(10**50), 10**50), st.integers(-60, 60))
def test_plain_text_is_javas_to_plain_string(unscaled: int, scale: int) -> None:
    assert V.plain_text(unscaled, scale) == plain_decimal_text(unscaled, scale)


def test_decimal_codec_refuses_what_its_type_cannot_hold() -> None:
    decode = V.decimal_codec(2, 4)
    assert decode("Jw8=") == Decimal("99.99")  # 9999
    assert decode("JxA=") is None  # 10000: five digits in decimal(4,2)
    negative = V.decimal_codec(-2, 7)
    assert negative("BQ==") == Decimal("500")


@pytest.mark.parametrize("token", ["AQ", "A=Q=", "!!!!", 5])
def test_base64_that_is_not_canonical_is_left_to_spark(token: Any) -> None:
    with pytest.raises(V.Fallback):
        V.base64_bytes(token)


@pytest.mark.parametrize(
    "text",
    ["2024-01-01 10:00:00", "2024-01-01T10:00:00", "2024-02-30T00:00:00Z", "x", 5],
)
def test_zoned_timestamps_other_than_iso_with_offset_are_left_to_spark(text: Any) -> None:
    with pytest.raises(V.Fallback):
        V.zoned_timestamp(text)


def test_zoned_timestamp_truncates_nanoseconds_and_applies_the_offset() -> None:
    assert V.zoned_timestamp("1970-01-01T00:00:00.0000019Z") == 1
    assert V.zoned_timestamp("1969-12-31T23:59:59.999999999Z") == -1
    assert V.zoned_timestamp("1970-01-01T01:00:00+01:00") == 0


def test_float_literals_at_a_double_rounding_midpoint_are_left_to_spark() -> None:
    with pytest.raises(V.Fallback):
        V.FIELD_DECODERS["float32"](16777217)  # halfway between two floats, as a double
    assert V.FIELD_DECODERS["float32"](16777216) == 16777216.0
    with pytest.raises(V.Fallback):
        V.FIELD_DECODERS["float32"](V.FloatText(repr(2.0**-150)))  # halfway to 2^-149
    assert (
        V.FIELD_DECODERS["float32"](V.FloatText("1.17549e-38"))
        == struct.unpack("<f", struct.pack("<f", 1.17549e-38))[0]
    )


def test_keys_in_each_form() -> None:
    assert V.canonical_key('{"id": 1, "b": "x\\"y"}') == '{"id":"1","b":"x\\"y"}'
    assert V.canonical_key('{"schema": {}, "payload": {"id": 2}}') == '{"id":"2"}'
    assert V.canonical_key('"abc"') == '"abc"'
    assert V.canonical_key("null") is None
    assert V.canonical_key(None) is None
    with pytest.raises(V.Fallback):
        V.canonical_key('{"id": 1.5}')


@pytest.mark.parametrize(
    "field",
    [
        cs.array(cs.primitive("int32", optional=True), optional=True),
        cs.bits(3, optional=True),
        cs.geometry(optional=True),
        cs.point(optional=True),
        {
            **cs.decimal(2, optional=True),
            "parameters": {"scale": "2", NUMERIC: "NUMERIC"},
        },
        {"type": "int64", "name": "io.debezium.time.Date", "optional": True},
        cs.struct([cs.field("value", "int32"), cs.field("set", "boolean")], optional=True),
    ],
)
def test_schemas_with_a_type_not_decoded_on_the_driver_are_left_to_spark(
    field: dict[str, Any],
) -> None:
    assert DD.driver_decoder(_envelope(cs.field("x", field))) is None
    assert DD.driver_decoder(_envelope(cs.field("x", "string", optional=True))) is not None
