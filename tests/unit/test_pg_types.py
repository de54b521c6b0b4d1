"""PostgreSQL type mapping: Connect schemas and value conversion per the Debezium guide."""

from __future__ import annotations

import base64
import logging
from decimal import Decimal

import pytest

from capture.pg_types import (
    PgType,
    ValueHandling,
    column_type,
    decimal_bytes,
    parse_array,
    parse_hstore,
)

pytestmark = pytest.mark.unit

DEFAULT = ValueHandling()


def convert(oid: int, text: str, typmod: int = -1, handling: ValueHandling = DEFAULT) -> object:
    return column_type(oid, typmod, handling).convert(text)


def schema_of(oid: int, typmod: int = -1, handling: ValueHandling = DEFAULT) -> dict[str, object]:
    return column_type(oid, typmod, handling).schema


def unscaled(b64: str) -> int:
    return int.from_bytes(base64.b64decode(b64), "big", signed=True)


def test_integers_floats_bool() -> None:
    assert schema_of(21)["type"] == "int16" and convert(21, "-5") == -5
    assert schema_of(23)["type"] == "int32" and convert(23, "7") == 7
    assert schema_of(20)["type"] == "int64" and convert(20, "9223372036854775807") == 2**63 - 1
    assert schema_of(700)["type"] == "float32" and convert(700, "1.5") == 1.5
    assert schema_of(701)["type"] == "float64" and convert(701, "-Infinity") == float("-inf")
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
    assert convert(1700, "NaN", typmod) is None
    double = ValueHandling(decimal="double")
    assert convert(1700, "1.25", typmod, double) == 1.25
    assert schema_of(1700, typmod, double)["type"] == "float64"
    string = ValueHandling(decimal="string")
    assert convert(1700, "1.250", typmod, string) == "1.250"
    assert convert(1700, "NaN", typmod, string) == "NAN"


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
    assert convert(1114, "infinity") is None


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
    assert schema_of(1186)["name"] == "io.debezium.time.MicroDuration"
    assert convert(1186, "P1Y2M3DT4H5M6.78S") == (
        14 * 2_629_800_000_000 + 3 * 86_400_000_000 + (4 * 3600 + 5 * 60) * 1_000_000 + 6_780_000
    )
    assert convert(1186, "PT-1S") == -1_000_000
    string = ValueHandling(interval="string")
    assert schema_of(1186, -1, string)["name"] == "io.debezium.time.Interval"
    assert convert(1186, "P1Y2M3DT4H5M6.78S", -1, string) == "P1Y2M3DT4H5M6.78S"
    assert convert(1186, "PT0S", -1, string) == "P0Y0M0DT0H0M0S"


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
    schema = schema_of(1562, 10)
    assert schema["name"] == "io.debezium.data.Bits" and schema["parameters"] == {"length": "10"}
    # character i from the right is bit i; bytes little-endian
    assert base64.b64decode(str(convert(1560, "0000000011", 10))) == b"\x03\x00"
    assert base64.b64decode(str(convert(1560, "1000000000", 10))) == b"\x00\x02"
    point = convert(600, "(1.5,-2)")
    assert isinstance(point, dict) and point["x"] == 1.5 and point["y"] == -2.0
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
