"""PostgreSQL type mapping: Connect schemas and value conversion per the Debezium guide."""

from __future__ import annotations

import base64
import logging
from decimal import Decimal

import pytest

from capture.column_types import Unrepresentable, decimal_bytes, json_float
from capture.postgresql.types import (
    DATE_NEGATIVE_INFINITY,
    DATE_POSITIVE_INFINITY,
    TIMESTAMP_NEGATIVE_INFINITY_US,
    TIMESTAMP_POSITIVE_INFINITY_US,
    PgType,
    ValueHandling,
    column_type,
    parse_array,
    parse_hstore,
)

pytestmark = pytest.mark.unit

DEFAULT = ValueHandling()


def convert(
    oid: int, text: str, typmod: int = -1, handling: ValueHandling = DEFAULT, dims: int = 0
) -> object:
    return column_type(oid, typmod, handling, None, dims).convert(text)


def unrepresentable(
    oid: int, text: str, typmod: int = -1, handling: ValueHandling = DEFAULT, dims: int = 0
) -> str:
    """The reason the converter gives for a value without a representation."""
    with pytest.raises(Unrepresentable) as info:
        convert(oid, text, typmod, handling, dims)
    return info.value.reason


def schema_of(oid: int, typmod: int = -1, handling: ValueHandling = DEFAULT) -> dict[str, object]:
    return column_type(oid, typmod, handling).schema


def unscaled(b64: str) -> int:
    return int.from_bytes(base64.b64decode(b64), "big", signed=True)


def test_integers_floats_bool() -> None:
    assert schema_of(21)["type"] == "int16" and convert(21, "-5") == -5
    assert schema_of(23)["type"] == "int32" and convert(23, "7") == 7
    assert schema_of(20)["type"] == "int64" and convert(20, "9223372036854775807") == 2**63 - 1
    assert schema_of(700)["type"] == "float32" and convert(700, "1.5") == 1.5
    assert schema_of(701)["type"] == "float64" and convert(701, "2.25") == 2.25
    # JSON numbers cannot hold these; Jackson's strings keep them (orjson would write null)
    for text in ("NaN", "Infinity", "-Infinity"):
        assert convert(700, text) == text and convert(701, text) == text
    assert convert(701, "-1.7976931348623157e+308") == -1.7976931348623157e308
    assert convert(700, "1.17549435e-38") == 1.17549435e-38
    assert schema_of(16)["type"] == "boolean" and convert(16, "t") is True
    assert schema_of(1560, 1)["type"] == "boolean" and convert(1560, "1", 1) is True


def test_numeric_modes() -> None:
    typmod = ((10 << 16) | 2) + 4
    schema = schema_of(1700, typmod)
    assert schema["name"] == "org.apache.kafka.connect.data.Decimal"
    assert schema["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
    assert unscaled(str(convert(1700, "-12.50", typmod))) == -1250
    variable = convert(1700, "3.14159")
    assert isinstance(variable, dict) and variable["scale"] == 5
    assert unscaled(variable["value"]) == 314159
    assert schema_of(1700)["name"] == "io.debezium.data.VariableScaleDecimal"
    double = ValueHandling(decimal="double")
    assert convert(1700, "1.25", typmod, double) == 1.25
    assert schema_of(1700, typmod, double)["type"] == "float64"
    assert convert(1700, "NaN", typmod, double) == "NaN"
    assert convert(1700, "-Infinity", -1, double) == "-Infinity"


def test_numeric_special_values_are_unrepresentable_under_precise() -> None:
    typmod = ((10 << 16) | 2) + 4
    for text in ("NaN", "Infinity", "-Infinity"):
        reason = unrepresentable(1700, text, typmod)
        assert text in reason and "decimal.handling.mode=precise" in reason
        assert "Connect Decimal" in unrepresentable(1700, text)  # VariableScaleDecimal too
    # Debezium's string mode writes SpecialValueDecimal's names
    string = ValueHandling(decimal="string")
    assert convert(1700, "1.250", typmod, string) == "1.250"
    assert [convert(1700, t, typmod, string) for t in ("NaN", "Infinity", "-Infinity")] == [
        "NAN",
        "POSITIVE_INFINITY",
        "NEGATIVE_INFINITY",
    ]


def test_numeric_typmods_wide_and_negative_scale() -> None:
    wide = ((60 << 16) | 30) + 4
    assert schema_of(1700, wide)["parameters"] == {
        "scale": "30",
        "connect.decimal.precision": "60",
    }
    value = "-123456789012345678901234567890.123456789012345678901234567890"
    assert unscaled(str(convert(1700, value, wide))) == int(value.replace(".", ""))
    # numeric(5,-2) (PostgreSQL 15): the scale is an 11-bit signed field of the typmod
    negative = ((5 << 16) | (-2 & 0x7FF)) + 4
    assert schema_of(1700, negative)["parameters"] == {
        "scale": "-2",
        "connect.decimal.precision": "5",
    }
    assert unscaled(str(convert(1700, "12300", negative))) == 123
    # more digits than any fixed precision: VariableScaleDecimal keeps them all
    big = "9" * 100 + "." + "1" * 50
    free = convert(1700, big)
    assert isinstance(free, dict) and free["scale"] == 50
    assert unscaled(free["value"]) == int("9" * 100 + "1" * 50)


def test_decimal_bytes_match_java_big_integer() -> None:
    # BigInteger.toByteArray(): minimal two's complement.
    for value, expected in [(0, b"\x00"), (127, b"\x7f"), (128, b"\x00\x80"), (-128, b"\x80"),
                            (-129, b"\xff\x7f"), (255, b"\x00\xff")]:  # fmt: skip
        assert base64.b64decode(decimal_bytes(Decimal(value), 0)) == expected


def test_decimals_wider_than_the_default_context_stay_exact() -> None:
    # Python's default decimal context keeps 28 digits; NUMERIC keeps them all.
    for text, scale in [("-12345678901234567890123456789012345678901234.5678", 4),
                        ("9" * 60, 0), ("0." + "1" * 40, 40)]:  # fmt: skip
        expected = int(text.replace(".", "").replace("-", "")) * (-1 if text[0] == "-" else 1)
        got = base64.b64decode(decimal_bytes(Decimal(text), scale))
        assert int.from_bytes(got, "big", signed=True) == expected
        variable = convert(1700, text)  # NUMERIC without scale: VariableScaleDecimal
        assert isinstance(variable, dict)
        assert variable["scale"] == scale
        assert int.from_bytes(base64.b64decode(variable["value"]), "big", signed=True) == expected


def test_money() -> None:
    assert unscaled(str(convert(790, "$1,234.56"))) == 123456
    assert unscaled(str(convert(790, "-$0.01"))) == -1
    assert convert(790, "$2.50", handling=ValueHandling(decimal="double")) == 2.5


def test_temporal_adaptive() -> None:
    assert schema_of(1082)["name"] == "io.debezium.time.Date"
    assert convert(1082, "1970-01-02") == 1 and convert(1082, "1969-12-31") == -1
    assert convert(1082, "0001-01-01") == -719162
    assert convert(1082, "0001-01-01 BC") == -719162 - 366  # year 0 is a leap year
    assert schema_of(1083, 3)["name"] == "io.debezium.time.Time"
    assert convert(1083, "01:00:00.123", 3) == 3_600_123
    assert schema_of(1083)["name"] == "io.debezium.time.MicroTime"
    assert convert(1083, "00:00:01.000001") == 1_000_001
    assert schema_of(1114)["name"] == "io.debezium.time.MicroTimestamp"
    # the guide's example
    assert convert(1114, "2018-06-20 15:13:16.945104") == 1529507596945104
    assert schema_of(1114, 3)["name"] == "io.debezium.time.Timestamp"
    assert convert(1114, "2018-06-20 15:13:16.945", 3) == 1529507596945


def test_infinities_and_calendar_edges() -> None:
    # contract C2: int32 days for dates, Debezium's PostgreSQL sentinels for timestamps
    assert convert(1082, "infinity") == DATE_POSITIVE_INFINITY == 2**31 - 1
    assert convert(1082, "-infinity") == DATE_NEGATIVE_INFINITY == -(2**31)
    assert convert(1114, "infinity") == TIMESTAMP_POSITIVE_INFINITY_US == 9223372036825200000
    assert convert(1114, "-infinity") == TIMESTAMP_NEGATIVE_INFINITY_US
    assert convert(1114, "infinity", 3) == 9223372036825200  # Timestamp (ms)
    assert convert(1114, "-infinity", 0) == -9223372036832400
    assert convert(1184, "infinity") == "infinity" and convert(1184, "-infinity") == "-infinity"
    # proleptic Gregorian, as java.time: the Julian-Gregorian switch is not special
    assert convert(1082, "1582-10-15") - convert(1082, "1582-10-04") == 11  # type: ignore[operator]
    assert convert(1082, "1582-10-04") == -141438
    assert convert(1082, "9999-12-31") == 2932896
    # values PostgreSQL itself gives for date - '1970-01-01' (BC years are astronomical - 1)
    assert convert(1082, "4714-11-24 BC") == -2440588  # Julian day 0, PostgreSQL's first date
    assert convert(1082, "4713-01-01 BC") == -2440550
    assert convert(1082, "0002-01-01 BC") == -719893
    assert convert(1082, "0401-03-01 BC") == -865565
    assert convert(1082, "5874897-12-31") == 2145042905  # PostgreSQL's last date
    assert convert(1114, "0001-01-01 00:00:00") == -62135596800000000
    assert convert(1114, "9999-12-31 23:59:59.999999") == 253402300799999999
    assert convert(1114, "0044-03-15 12:00:00 BC") == -63517780800000000
    assert convert(1184, "0001-01-01 00:00:00+00 BC") == "0000-01-01T00:00:00Z"
    assert convert(1184, "12345-06-07 08:09:10.5+00") == "+12345-06-07T08:09:10.500Z"
    # beyond int64 microseconds (Spark's range): no representation, the row still lands (C1)
    assert "int64 microseconds" in unrepresentable(1114, "294276-12-31 23:59:59")
    assert "int64 microseconds" in unrepresentable(1184, "294276-12-31 23:59:59+00")
    assert "int64 microseconds" in unrepresentable(1114, "294276-12-31 23:59:59", 3)
    # the end of the day
    assert (
        convert(1083, "24:00:00") == 86_400_000_000 and convert(1083, "24:00:00", 0) == 86_400_000
    )
    assert convert(1266, "24:00:00+00") == "24:00:00Z"
    assert convert(1266, "00:30:00+01") == "23:30:00Z"


def test_temporal_other_modes() -> None:
    micro = ValueHandling(time_precision="adaptive_time_microseconds")
    assert schema_of(1083, 3, micro)["name"] == "io.debezium.time.MicroTime"
    connect = ValueHandling(time_precision="connect")
    assert schema_of(1082, -1, connect)["name"] == "org.apache.kafka.connect.data.Date"
    assert schema_of(1114, -1, connect)["name"] == "org.apache.kafka.connect.data.Timestamp"
    assert convert(1114, "1970-01-01 00:00:01.999999", -1, connect) == 1999


def test_zoned() -> None:
    assert schema_of(1184)["name"] == "io.debezium.time.ZonedTimestamp"
    assert convert(1184, "2018-06-20 15:13:16.945104+00") == "2018-06-20T15:13:16.945104Z"
    assert convert(1184, "2018-06-20 15:13:16.5+02") == "2018-06-20T13:13:16.500Z"
    assert convert(1184, "2018-06-20 00:00:00-05:30") == "2018-06-20T05:30:00Z"
    assert schema_of(1266)["name"] == "io.debezium.time.ZonedTime"
    assert convert(1266, "10:00:00.25+02") == "08:00:00.250Z"


def test_interval_modes() -> None:
    numeric = ValueHandling(interval="numeric")
    assert schema_of(1186, -1, numeric)["name"] == "io.debezium.time.MicroDuration"
    assert convert(1186, "P1Y2M3DT4H5M6.78S", -1, numeric) == (
        14 * 2_629_800_000_000 + 3 * 86_400_000_000 + (4 * 3600 + 5 * 60) * 1_000_000 + 6_780_000
    )
    assert convert(1186, "PT-1S", -1, numeric) == -1_000_000
    assert "int64" in unrepresentable(1186, "P178000000Y", -1, numeric)
    # the default: Debezium's Interval.toIsoString, every part kept as PostgreSQL keeps it
    assert schema_of(1186)["name"] == "io.debezium.time.Interval"
    assert convert(1186, "P1Y2M3DT4H5M6.78S") == "P1Y2M3DT4H5M6.78S"
    assert convert(1186, "PT0S") == "P0Y0M0DT0H0M0S"
    assert convert(1186, "P1M2DT3H4M5.678901S") == "P0Y1M2DT3H4M5.678901S"  # issue 24's value
    assert convert(1186, "P-1Y2M-3DT-4H5M-6.5S") == "P-1Y2M-3DT-4H5M-6.5S"
    assert convert(1186, "PT100H60S") == "P0Y0M0DT100H0M60S"  # stripTrailingZeros: 60, not 6E+1
    assert convert(1186, "P178000000Y") == "P178000000Y0M0DT0H0M0S"


def test_binary_modes() -> None:
    assert schema_of(17)["type"] == "bytes" and convert(17, "\\x0102") == "AQI="
    assert convert(17, "\\xfbff", handling=ValueHandling(binary="hex")) == "fbff"
    assert convert(17, "\\xfbff", handling=ValueHandling(binary="base64")) == "+/8="
    assert convert(17, "\\xfbff", handling=ValueHandling(binary="base64-url-safe")) == "-_8="
    assert schema_of(17, -1, ValueHandling(binary="hex"))["type"] == "string"


def test_semantic_strings() -> None:
    for oid, name in [(114, "Json"), (3802, "Json"), (142, "Xml"), (2950, "Uuid")]:
        assert schema_of(oid)["name"] == f"io.debezium.data.{name}"
        assert convert(oid, "x") == "x"
    for oid in (25, 1043, 1042, 869, 650, 829, 3904, 3614):
        assert schema_of(oid)["type"] == "string"


def test_bits_and_point() -> None:
    schema = schema_of(1560, 10)
    assert schema["name"] == "io.debezium.data.Bits" and schema["parameters"] == {"length": "10"}
    # character i from the right is bit i; bytes little-endian
    assert base64.b64decode(str(convert(1560, "0000000011", 10))) == b"\x03\x00"
    assert base64.b64decode(str(convert(1560, "1000000000", 10))) == b"\x00\x02"
    # varbit: the 0/1 text, so leading zeros and the length survive (Bits would drop them)
    assert schema_of(1562, 10) == {"type": "string", "optional": False}
    assert convert(1562, "0010", 10) == "0010" and convert(1562, "") == ""
    point = convert(600, "(1.5,-2)")
    assert isinstance(point, dict) and point["x"] == 1.5 and point["y"] == -2.0
    odd = convert(600, "(NaN,Infinity)")
    assert isinstance(odd, dict) and (odd["x"], odd["y"]) == ("NaN", "Infinity")
    assert json_float(float("-inf")) == "-Infinity" and json_float(0.5) == 0.5
    assert schema_of(600)["name"] == "io.debezium.data.geometry.Point"


def test_arrays() -> None:
    assert parse_array('{1,NULL,"a b","x\\"y"}') == ["1", None, "a b", 'x"y']
    assert parse_array("{{1,2},{3,4}}") == [["1", "2"], ["3", "4"]]
    assert parse_array("{}") == []
    assert schema_of(1007) == {
        "type": "array",
        "items": {"type": "int32", "optional": True},
        "optional": False,
    }
    assert convert(1007, "{1,NULL,3}") == [1, None, 3]
    assert convert(1009, '{"a,b",c}') == ["a,b", "c"]
    assert convert(1021, "{NaN,1.5,-Infinity}") == ["NaN", 1.5, "-Infinity"]
    assert convert(1182, "{infinity,1970-01-02}") == [2**31 - 1, 1]
    assert convert(1020, "{(1,1),(0,0);(2,2),(1,1)}") == ["(1,1),(0,0)", "(2,2),(1,1)"]


def test_multidimensional_arrays_follow_the_declared_dimensions() -> None:
    # contract C2: one nested ARRAY per pg_attribute.attndims
    assert column_type(1007, -1, DEFAULT, None, 2).schema == {
        "type": "array",
        "items": {
            "type": "array",
            "items": {"type": "int32", "optional": True},
            "optional": False,
        },
        "optional": False,
    }
    assert convert(1007, "{{1,2},{3,NULL}}", dims=2) == [[1, 2], [3, None]]
    assert convert(1007, "{}", dims=2) == []
    assert convert(1007, "{{{1}}}", dims=3) == [[[1]]]
    # dimensions other than the declared ones, or lower bounds other than 1: no faithful form
    assert "more dimensions" in unrepresentable(1007, "{{1,2},{3,4}}", dims=1)
    assert "fewer dimensions" in unrepresentable(1007, "{1,2}", dims=2)
    assert "lower bounds" in unrepresentable(1007, "[0:1]={1,2}")
    # an element without a representation makes the array one
    typmod = ((10 << 16) | 2) + 4
    assert "element NaN" in unrepresentable(1231, "{1.5,NaN}", typmod)


def test_hstore_modes() -> None:
    assert parse_hstore('"a"=>"1", "b"=>NULL, "c \\"q\\""=>"x"') == {
        "a": "1",
        "b": None,
        'c "q"': "x",
    }
    hstore = PgType(90001, "hstore", "public")
    column = column_type(90001, -1, DEFAULT, lambda oid: hstore)
    assert column.schema["name"] == "io.debezium.data.Json"
    assert column.convert('"k"=>"v"') == '{"k":"v"}'
    as_map = column_type(90001, -1, ValueHandling(hstore="map"), lambda oid: hstore)
    assert as_map.schema["type"] == "map" and as_map.convert('"k"=>"v"') == {"k": "v"}


def test_enum_domain_and_extension_arrays() -> None:
    mood = PgType(90002, "mood", "public", typtype="e", enum_labels=("sad", "ok", "happy"))
    moods = PgType(90003, "_mood", "public", element_oid=90002, is_array=True)
    money_domain = PgType(90004, "price", "public", typtype="d", base_oid=1700, base_typmod=-1)
    types = {t.oid: t for t in (mood, moods, money_domain)}
    column = column_type(90002, -1, DEFAULT, types.get)
    assert column.schema["name"] == "io.debezium.data.Enum"
    assert column.schema["parameters"] == {"allowed": "sad,ok,happy"}
    assert column_type(90003, -1, DEFAULT, types.get).convert("{sad,happy}") == ["sad", "happy"]
    domain = column_type(90004, -1, DEFAULT, types.get)
    assert domain.schema["name"] == "io.debezium.data.VariableScaleDecimal"


def test_unknown_type_is_text_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    weird = PgType(90005, "weird_thing_t", "public", typtype="c")
    with caplog.at_level(logging.WARNING):
        column = column_type(90005, -1, DEFAULT, lambda oid: weird)
    assert column.schema["type"] == "string" and not column.known
    assert column.convert("(1,2)") == "(1,2)"
    assert "weird_thing_t" in caplog.text
    assert column_type(99999, -1, DEFAULT, lambda oid: None).convert("?") == "?"
