"""MySQL/MariaDB type mapping: Connect schemas and converters per type and handling mode."""

from __future__ import annotations

import base64
import datetime as dt
import struct
from decimal import Decimal
from types import SimpleNamespace
from typing import Any

import pytest
from pymysql.constants import FIELD_TYPE

from capture.captured_table import ColumnDefault
from capture.mysql.schema import ColumnDef, TableDef
from capture.mysql.types import (
    SNAPSHOT_SESSION_SQL,
    MySqlHandling,
    Unrepresentable,
    ValueConversionError,
    column_default,
    column_type,
    snapshot_connect_kwargs,
    snapshot_values,
    stream_values,
)

pytestmark = pytest.mark.unit

DEFAULT = MySqlHandling()


def col(type_name: str, **kwargs: Any) -> ColumnDef:
    return ColumnDef(kwargs.pop("name", "c"), type_name, **kwargs)


def schema_of(column: ColumnDef, handling: MySqlHandling = DEFAULT) -> dict[str, Any]:
    return column_type(column, None, handling).schema


def convert(
    column: ColumnDef,
    value: Any,
    handling: MySqlHandling = DEFAULT,
    table_charset: str | None = None,
) -> Any:
    return column_type(column, table_charset, handling).convert(value)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


# --- handling modes -------------------------------------------------------------------------------


def test_handling_from_config_and_defaults() -> None:
    # exact by default (contract C2): BIGINT UNSIGNED as a Decimal, not Debezium's wrapping long
    assert MySqlHandling.from_config(SimpleNamespace()) == MySqlHandling(
        "precise", "adaptive_time_microseconds", "precise", "bytes"
    )
    config = SimpleNamespace(
        decimal_handling_mode="string",
        time_precision_mode="connect",
        bigint_unsigned_handling_mode="precise",
        binary_handling_mode="hex",
    )
    assert MySqlHandling.from_config(config) == MySqlHandling("string", "connect", "precise", "hex")
    with pytest.raises(ValueError, match="decimal"):
        MySqlHandling(decimal="exact")


# --- integers and bits ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("type_name", "unsigned", "connect"),
    [
        ("tinyint", False, "int16"),
        ("tinyint", True, "int16"),
        ("smallint", False, "int16"),
        ("smallint", True, "int32"),
        ("mediumint", False, "int32"),
        ("mediumint", True, "int32"),
        ("int", False, "int32"),
        ("int", True, "int64"),
        ("integer", False, "int32"),
        ("bigint", False, "int64"),
    ],
)
def test_integer_schemas(type_name: str, unsigned: bool, connect: str) -> None:
    assert schema_of(col(type_name, unsigned=unsigned)) == {"type": connect, "optional": False}


def test_bool_is_int16() -> None:
    column = col("tinyint", length=1)
    assert schema_of(column)["type"] == "int16"
    assert convert(column, 1) == 1 and convert(column, 0) == 0


def test_unsigned_values_and_signed_readings() -> None:
    # A row event decoded without signedness metadata carries the signed reading.
    assert convert(col("tinyint", unsigned=True), -1) == 255
    assert convert(col("smallint", unsigned=True), -2) == 65534
    assert convert(col("mediumint", unsigned=True), -1) == 16777215
    assert convert(col("int", unsigned=True), -1) == 4294967295
    assert convert(col("int", unsigned=True), 4294967295) == 4294967295


def test_bigint_unsigned_long_wraps_like_java() -> None:
    column = col("bigint", unsigned=True)
    long = MySqlHandling(bigint_unsigned="long")
    assert convert(column, 2**63 - 1, long) == 2**63 - 1
    assert convert(column, 2**63, long) == -(2**63)
    assert convert(column, 2**64 - 1, long) == -1
    assert convert(column, -1, long) == -1  # signed reading of 2^64-1


def test_bigint_unsigned_precise_is_decimal() -> None:
    handling = DEFAULT
    column = col("bigint", unsigned=True)
    assert schema_of(column, handling) == {
        "type": "bytes",
        "optional": False,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "0", "connect.decimal.precision": "20"},
    }
    assert convert(column, 2**64 - 1, handling) == "AP//////////"
    assert convert(column, -1, handling) == "AP//////////"
    assert convert(column, 5, handling) == "BQ=="


def test_bit_one_is_boolean() -> None:
    column = col("bit", length=1)
    assert schema_of(column) == {"type": "boolean", "optional": False}
    assert convert(column, "1") is True and convert(column, b"\x01") is True
    assert convert(column, "0") is False and convert(column, b"\x00") is False
    assert schema_of(col("bit"))["type"] == "boolean"


def test_bits_little_endian() -> None:
    column = col("bit", length=10)
    assert schema_of(column) == {
        "type": "bytes",
        "optional": False,
        "name": "io.debezium.data.Bits",
        "version": 1,
        "parameters": {"length": "10"},
    }
    # 0b1010000001 = 0x0281: SELECT gives big-endian bytes, the binlog a bit string.
    assert convert(column, "1010000001") == b64(b"\x81\x02")
    assert convert(column, b"\x02\x81") == b64(b"\x81\x02")
    assert convert(col("bit", length=16), b"\x00\x01") == b64(b"\x01\x00")
    assert convert(col("bit", length=64), "1" + "0" * 63) == b64(b"\x00" * 7 + b"\x80")


# --- floating point and decimals ------------------------------------------------------------------


def f32(value: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", value))[0])


def test_float_rounds_like_the_servers_text() -> None:
    column = col("float")
    assert schema_of(column)["type"] == "float32"
    assert convert(column, 1.1) == 1.1
    assert convert(column, f32(1.1)) == 1.1  # binlog: 1.100000023841858
    assert convert(column, f32(1.2345678)) == 1.23457  # FLT_DIG significant digits
    assert convert(column, 1234565.0) == 1234560.0  # ties to even, like the server
    assert convert(column, 1234575.0) == 1234580.0
    assert convert(column, f32(3.4028234663852886e38)) == 3.40282e38


def test_float_with_scale_and_precision() -> None:
    assert convert(col("float", length=7, scale=3), f32(12.3456)) == 12.346
    assert schema_of(col("float", length=7, scale=3))["type"] == "float32"
    assert schema_of(col("float", length=23))["type"] == "float32"
    assert schema_of(col("float", length=24))["type"] == "float64"
    assert convert(col("float", length=24), f32(1.2345678)) == 1.23457  # still single
    assert schema_of(col("float", length=30))["type"] == "float64"
    assert convert(col("float", length=30), 0.30000000000000004) == 0.30000000000000004


def test_double() -> None:
    assert schema_of(col("double"))["type"] == "float64"
    assert schema_of(col("real"))["type"] == "float64"
    assert convert(col("double"), 0.30000000000000004) == 0.30000000000000004
    assert convert(col("double", length=10, scale=2), 1234.5699999999999) == 1234.57


def test_decimal_precise() -> None:
    column = col("decimal", length=10, scale=2)
    assert schema_of(column) == {
        "type": "bytes",
        "optional": False,
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
    }
    assert convert(column, Decimal("1.50")) == "AJY="
    assert convert(column, Decimal("1.5")) == "AJY="
    assert convert(column, Decimal("-1.50")) == "/2o="
    wide = col("decimal", length=65, scale=30)
    value = Decimal("-12345678901234567890123456789012345.123456789012345678901234567891")
    unscaled = int.from_bytes(base64.b64decode(convert(wide, value)), "big", signed=True)
    assert unscaled == -12345678901234567890123456789012345123456789012345678901234567891
    assert schema_of(col("decimal"))["parameters"] == {
        "scale": "0",
        "connect.decimal.precision": "10",
    }


def test_decimal_double_and_string() -> None:
    column = col("decimal", length=10, scale=2)
    double = MySqlHandling(decimal="double")
    assert schema_of(column, double) == {"type": "float64", "optional": False}
    assert convert(column, Decimal("-12345678.99"), double) == -12345678.99
    string = MySqlHandling(decimal="string")
    assert schema_of(column, string) == {"type": "string", "optional": False}
    assert convert(column, Decimal("1.5"), string) == "1.50"
    assert convert(column, Decimal("-0.00"), string) == "0.00"
    wide = col("decimal", length=65, scale=30)
    text = "12345678901234567890123456789012345.123456789012345678901234567891"
    assert convert(wide, Decimal(text), string) == text


# --- strings --------------------------------------------------------------------------------------


def test_text_types_and_charsets() -> None:
    for name in ("char", "varchar", "tinytext", "text", "mediumtext", "longtext"):
        assert schema_of(col(name)) == {"type": "string", "optional": False}
    assert convert(col("varchar"), "ü€𝄞") == "ü€𝄞"
    assert convert(col("varchar"), "é".encode()) == "é"
    latin1 = col("varchar", charset="latin1")
    assert convert(latin1, b"\xe9\x80\x81") == "é€\x81"  # MySQL latin1 = cp1252 + 5 bytes
    assert convert(col("varchar", charset="ucs2"), b"\x00\xe9 \xac") == "é€"
    assert convert(col("varchar", charset="utf16"), "é𝄞".encode("utf-16-be")) == "é𝄞"
    assert convert(col("varchar"), b"\xe9", table_charset="latin1") == "é"
    assert convert(col("varchar", charset="cp1251"), b"\xe6") == "ж"


def test_unknown_charset_fails_at_column_type() -> None:
    with pytest.raises(ValueConversionError, match="swe7"):
        column_type(col("varchar", charset="swe7"), None, DEFAULT)


def test_enum() -> None:
    column = col("enum", values=("a", "b", "c"))
    assert schema_of(column) == {
        "type": "string",
        "optional": False,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {"allowed": "a,b,c"},
    }
    assert convert(column, "b") == "b"
    assert convert(column, 2) == "b"
    assert convert(column, "") == "" and convert(column, 0) == ""


def test_set() -> None:
    column = col("set", values=("x", "y", "z"))
    assert schema_of(column) == {
        "type": "string",
        "optional": False,
        "name": "io.debezium.data.EnumSet",
        "version": 1,
        "parameters": {"allowed": "x,y,z"},
    }
    assert convert(column, {"z", "x"}) == "x,z"
    assert convert(column, "x,z") == "x,z"
    assert convert(column, frozenset()) == ""
    assert convert(column, "") == ""
    assert convert(column, 0b101) == "x,z"


def test_json() -> None:
    column = col("json")
    assert schema_of(column) == {
        "type": "string",
        "optional": False,
        "name": "io.debezium.data.Json",
        "version": 1,
    }
    assert convert(column, '{"a": [1, "ü"]}') == '{"a": [1, "ü"]}'
    # MySQL binary JSON as mysql-replication decodes it.
    assert convert(column, {b"a": [1, b"\xc3\xbc", None, True], b"bb": 1.5}) == (
        '{"a": [1, "ü", null, true], "bb": 1.5}'  # as MySQL prints JSON
    )
    assert convert(column, 5) == "5"


def test_mariadb_uuid_and_inet() -> None:
    for name in ("uuid", "inet6", "inet4"):
        assert schema_of(col(name)) == {"type": "string", "optional": False}
    assert convert(col("uuid"), "123e4567-e89b-12d3-a456-426614174000").startswith("123e")
    raw = bytes.fromhex("123e4567e89b12d3a45642661417")
    assert convert(col("uuid"), raw) == "123e4567-e89b-12d3-a456-426614170000"
    assert convert(col("inet4"), b"\x0a") == "10.0.0.0"
    assert convert(col("inet6"), b"") == "::"
    assert convert(col("inet6"), bytes(10) + b"\xff\xff\x01\x02\x03\x04") == "::ffff:1.2.3.4"
    assert convert(col("inet6"), bytes(12) + b"\x01\x02\x03\x04") == "::1.2.3.4"
    assert convert(col("inet6"), bytes(15) + b"\x02") == "::2"
    assert convert(col("inet6"), bytes.fromhex("9f09000100010000a992000000010000")) == (
        "9f09:1:1::a992:0:1:0"  # MariaDB shortens a single zero group too
    )


# --- binary -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "schema_type", "expected"),
    [
        ("bytes", "bytes", "+/8="),
        ("base64", "string", "+/8="),
        ("base64-url-safe", "string", "-_8="),
        ("hex", "string", "fbff"),
    ],
)
def test_binary_modes(mode: str, schema_type: str, expected: str) -> None:
    handling = MySqlHandling(binary=mode)
    for name in ("varbinary", "blob", "tinyblob", "mediumblob", "longblob"):
        assert schema_of(col(name), handling) == {"type": schema_type, "optional": False}
        assert convert(col(name), b"\xfb\xff", handling) == expected
    assert column_type(col("blob"), None, handling).is_binary is (mode == "bytes")


def test_binary_n_is_padded() -> None:
    column = col("binary", length=4)
    assert convert(column, b"\x01") == b64(b"\x01\x00\x00\x00")  # binlog drops the padding
    assert convert(column, b"\x01\x00\x00\x00") == b64(b"\x01\x00\x00\x00")  # SELECT keeps it
    assert convert(column, "") == b64(bytes(4))
    assert convert(col("varbinary", length=4), b"\x01") == b64(b"\x01")


def test_text_with_binary_charset_is_binary() -> None:
    column = col("char", length=3, charset="binary")
    assert schema_of(column) == {"type": "bytes", "optional": False}
    assert convert(column, b"\x01") == b64(b"\x01\x00\x00")
    assert schema_of(col("text", charset="binary"))["type"] == "bytes"
    assert convert(col("varchar", charset="binary"), b"a\x00") == b64(b"a\x00")
    assert column_type(col("text"), "binary", DEFAULT).schema["type"] == "bytes"


# --- temporal ---------------------------------------------------------------------------------


def test_date() -> None:
    column = col("date")
    assert schema_of(column)["name"] == "io.debezium.time.Date"
    assert convert(column, dt.date(2024, 2, 29)) == 19782
    assert convert(column, dt.date(1969, 12, 31)) == -1
    assert convert(column, dt.date(1000, 1, 1)) == -354285
    assert convert(column, "0000-01-01") == -719528  # a real date of year 0, proleptic
    connect = MySqlHandling(time_precision="connect")
    assert schema_of(column, connect)["name"] == "org.apache.kafka.connect.data.Date"


def test_time_modes() -> None:
    t6 = col("time", length=6)
    t0 = col("time")
    value = -dt.timedelta(hours=1, minutes=2, seconds=3, microseconds=456789)
    assert schema_of(t6)["name"] == "io.debezium.time.MicroTime"
    assert schema_of(t0)["name"] == "io.debezium.time.MicroTime"
    assert convert(t6, value) == -3_723_456_789
    assert convert(t0, dt.timedelta(hours=838, minutes=59, seconds=59)) == 3_020_399_000_000
    assert convert(t6, "-01:02:03.456789") == -3_723_456_789
    assert convert(t6, dt.timedelta(hours=25, microseconds=500_000)) == 90_000_500_000
    adaptive = MySqlHandling(time_precision="adaptive")
    assert schema_of(col("time", length=3), adaptive)["name"] == "io.debezium.time.Time"
    assert schema_of(col("time", length=3), adaptive)["type"] == "int32"
    assert convert(col("time", length=3), dt.timedelta(seconds=-1.5), adaptive) == -1500
    assert schema_of(col("time", length=4), adaptive)["name"] == "io.debezium.time.MicroTime"
    connect = MySqlHandling(time_precision="connect")
    assert schema_of(t6, connect)["name"] == "org.apache.kafka.connect.data.Time"
    assert convert(t6, value, connect) == -3_723_457  # floored milliseconds


def test_datetime_modes() -> None:
    value = dt.datetime(2024, 2, 29, 12, 34, 56, 789000)
    millis = 1709210096789
    for precision in (None, 0, 3):
        column = col("datetime", length=precision)
        assert schema_of(column)["name"] == "io.debezium.time.Timestamp"
        assert schema_of(column)["type"] == "int64"
        assert convert(column, value) == millis
    d6 = col("datetime", length=6)
    assert schema_of(d6)["name"] == "io.debezium.time.MicroTimestamp"
    assert convert(d6, value.replace(microsecond=789123)) == millis * 1000 + 123
    assert convert(d6, dt.datetime(1000, 1, 1)) == -30610224000000000
    adaptive = MySqlHandling(time_precision="adaptive")
    assert schema_of(d6, adaptive)["name"] == "io.debezium.time.MicroTimestamp"
    connect = MySqlHandling(time_precision="connect")
    assert schema_of(d6, connect)["name"] == "org.apache.kafka.connect.data.Timestamp"
    assert convert(d6, value.replace(microsecond=789999), connect) == millis


def test_timestamp_is_zoned_utc_text() -> None:
    column = col("timestamp", length=6)
    assert schema_of(column) == {
        "type": "string",
        "optional": False,
        "name": "io.debezium.time.ZonedTimestamp",
        "version": 1,
    }
    assert convert(column, dt.datetime(2024, 1, 1, 0, 0, 0, 123456)) == (
        "2024-01-01T00:00:00.123456Z"
    )
    assert convert(column, dt.datetime(2024, 1, 1, 0, 0, 0, 500000)) == "2024-01-01T00:00:00.500Z"
    assert convert(column, dt.datetime(2038, 1, 19, 3, 14, 7)) == "2038-01-19T03:14:07Z"
    assert convert(column, dt.datetime(1970, 1, 1)) == "1970-01-01T00:00:00Z"


def test_year_and_geometry() -> None:
    assert schema_of(col("year"))["name"] == "io.debezium.time.Year"
    assert convert(col("year"), 2155) == 2155 and convert(col("year"), 0) == 0
    wkb = struct.pack("<BI2d", 1, 1, 1.0, 2.0)
    for name in ("geometry", "point", "linestring", "polygon", "geometrycollection"):
        assert schema_of(col(name))["name"] == "io.debezium.data.geometry.Geometry"
    assert convert(col("point"), struct.pack("<I", 4326) + wkb) == {
        "wkb": b64(wkb),
        "srid": 4326,
    }


def test_zero_and_invalid_dates_have_no_representation() -> None:
    # contract C1: null plus the server's text, nullable or NOT NULL (Debezium: null or epoch)
    for column, text in [
        (col("date"), "0000-00-00"),
        (col("date", nullable=False), "0000-00-00"),
        (col("date"), "2020-00-15"),
        (col("datetime", length=6), "0000-00-00 00:00:00.000000"),
        (col("datetime"), "2020-02-30 10:00:00"),
        (col("timestamp", nullable=False), "0000-00-00 00:00:00"),
    ]:
        with pytest.raises(Unrepresentable) as info:
            convert(column, text)
        assert info.value.text == text
        kind = "zero" if text.startswith("0000-00-00") else "invalid"
        assert info.value.reason.startswith(f"{kind} date {text}")


# --- errors -------------------------------------------------------------------------------------


def test_unknown_type_raises_naming_it() -> None:
    with pytest.raises(ValueConversionError, match="'vector'"):
        column_type(col("vector", name="emb"), None, DEFAULT)


def test_bad_value_raises_naming_the_column() -> None:
    with pytest.raises(ValueConversionError, match="'price'.*decimal"):
        convert(col("decimal", name="price", length=5, scale=2), "abc")
    with pytest.raises(ValueConversionError, match="'g'"):
        convert(col("geometry", name="g"), b"\x00")


# --- the two roads ------------------------------------------------------------------------------

ROAD = TableDef(
    "db",
    "t",
    (
        ColumnDef("id", "int", nullable=False),
        ColumnDef("s", "set", values=("x", "y")),
        ColumnDef("sn", "set", values=("x", "y"), nullable=False),
        ColumnDef("d", "date"),
        ColumnDef("dn", "date", nullable=False),
        ColumnDef("dt", "datetime", length=6),
        ColumnDef("dtn", "datetime", nullable=False),
        ColumnDef("ts", "timestamp"),
        ColumnDef("tsn", "timestamp", nullable=False),
        ColumnDef("y", "year"),
        ColumnDef("t", "time", length=6),
        ColumnDef("u16", "varchar", length=5, charset="utf16"),
        ColumnDef("uu", "uuid"),
        ColumnDef("i6", "inet6"),
    ),
    primary_key=("id",),
)


def test_stream_values_undo_library_quirks() -> None:
    values = {
        "id": 1,
        "s": None,
        "sn": None,
        "d": "0000-00-00",  # install_binlog_date_readers: the text, not None
        "dn": "2020-00-15",
        "dt": "0000-00-00 00:00:00.000000",
        "dtn": "2020-02-30 00:00:00",
        "ts": dt.datetime(1970, 1, 1),
        "tsn": dt.datetime(1970, 1, 1),
        "y": 1900,
        # -00:00:01.25 decoded by mysql-replication 1.0.17 as -(1 + 0.75) s
        "t": -dt.timedelta(seconds=1, microseconds=750_000),
        "u16": "é𝄞".encode("utf-16-be").decode("utf-16-le"),
        "uu": b"\x12>Eg\xe8\x9b\x12\xd3\xa4VBf\x14\x17@",
        "i6": "",
    }
    none_sources = {"s": "empty set", "sn": "empty set"}
    out = stream_values(ROAD, values, none_sources)
    assert out[:10] == [
        1,
        frozenset(),
        frozenset(),
        "0000-00-00",
        "2020-00-15",
        "0000-00-00 00:00:00.000000",
        "2020-02-30 00:00:00",
        "0000-00-00 00:00:00",  # the zero TIMESTAMP (epoch second 0) as a SELECT prints it
        "0000-00-00 00:00:00",
        0,
    ]
    # without the replaced readers a zero date is None: its text is lost, so the row fails
    with pytest.raises(ValueConversionError, match=r"db\.t\.d: .*its text is lost"):
        stream_values(ROAD, {**values, "d": None}, {**none_sources, "d": "out of date range"})
    assert out[10] == -dt.timedelta(seconds=1, microseconds=250_000)
    assert column_type(ROAD.columns[11], None, DEFAULT).convert(out[11]) == "é𝄞"
    assert out[12] == "123e4567-e89b-12d3-a456-426614174000"
    assert out[13] == "::"


def test_stream_values_keep_plain_values_and_nulls() -> None:
    values = {
        "id": 2,
        "s": {"y"},
        "sn": {"x"},
        "d": None,
        "dn": dt.date(2000, 1, 1),
        "dt": dt.datetime(2000, 1, 1, 0, 0, 0, 5),
        "dtn": dt.datetime(2000, 1, 1),
        "ts": None,
        "tsn": dt.datetime(2000, 1, 1),
        "y": 1901,
        "t": -dt.timedelta(seconds=5),
        "u16": None,
        "uu": None,
        "i6": None,
    }
    none_sources = {k: "null" for k, v in values.items() if v is None}
    out = stream_values(ROAD, values, none_sources)
    assert out == [
        2,
        {"y"},
        {"x"},
        None,
        dt.date(2000, 1, 1),
        dt.datetime(2000, 1, 1, 0, 0, 0, 5),
        dt.datetime(2000, 1, 1),
        None,
        dt.datetime(2000, 1, 1),
        1901,
        -dt.timedelta(seconds=5),
        None,
        None,
        None,
    ]


def test_stream_values_match_columns_by_position() -> None:
    values: dict[str, Any] = {f"UNKNOWN_COL{i}": None for i in range(len(ROAD.columns))}
    values["UNKNOWN_COL0"] = 3
    values["UNKNOWN_COL1"] = {"x"}
    values["UNKNOWN_COL2"] = {"y"}
    values["UNKNOWN_COL4"] = dt.date(2000, 1, 2)  # NOT NULL date
    values["UNKNOWN_COL6"] = dt.datetime(2000, 1, 2)
    values["UNKNOWN_COL8"] = dt.datetime(2000, 1, 2)
    out = stream_values(ROAD, values, {})
    assert out[:3] == [3, {"x"}, {"y"}]
    assert out[4] == dt.date(2000, 1, 2)


def test_stream_values_refuse_a_lost_not_null_set() -> None:
    values = {c.name: None for c in ROAD.columns}
    with pytest.raises(ValueConversionError, match=r"db\.t\.sn"):
        stream_values(ROAD, values, {"s": "null", "sn": "null"})


def test_width_mismatch_names_the_table() -> None:
    with pytest.raises(ValueConversionError, match=r"db\.t: the binlog row image has 1 columns"):
        stream_values(ROAD, {"id": 1}, {})
    with pytest.raises(ValueConversionError, match=r"db\.t: the snapshot row has 2 columns"):
        snapshot_values(ROAD, (1, 2))


def test_snapshot_values_parse_dates_and_zero_forms() -> None:
    row = (
        1,
        "",
        "x",
        "0000-00-00",
        "0000-00-00",
        "2020-00-10 00:00:00.000000",
        "2020-02-30 00:00:00",
        "0000-00-00 00:00:00",
        "0000-00-00 00:00:00",
        0,
        dt.timedelta(seconds=-1, microseconds=-250_000),
        "é",
        "123e4567-e89b-12d3-a456-426614174000",
        "::",
    )
    out = snapshot_values(ROAD, row)
    assert out[3:9] == list(row[3:9])  # the server's text: the converter reports it (C1)
    assert out[:3] == [1, "", "x"] and out[9:] == list(row[9:])
    parsed = snapshot_values(
        ROAD,
        (1, None, "", "2024-02-29", "1969-12-31", "2024-02-29 12:34:56.5",
         "1000-01-01 00:00:00", "2024-01-01 00:00:00.123456", "2038-01-19 03:14:07",
         None, None, None, None, None),
    )  # fmt: skip
    assert parsed[3:9] == [
        dt.date(2024, 2, 29),
        dt.date(1969, 12, 31),
        dt.datetime(2024, 2, 29, 12, 34, 56, 500000),
        dt.datetime(1000, 1, 1),
        dt.datetime(2024, 1, 1, 0, 0, 0, 123456),
        dt.datetime(2038, 1, 19, 3, 14, 7),
    ]


def test_snapshot_connection_settings() -> None:
    assert "SET time_zone = '+00:00'" in SNAPSHOT_SESSION_SQL
    kwargs = snapshot_connect_kwargs()
    assert kwargs["charset"] == "utf8mb4"
    conv = kwargs["conv"]
    for field_type in (FIELD_TYPE.DATE, FIELD_TYPE.DATETIME, FIELD_TYPE.TIMESTAMP):
        assert conv[field_type](b"0000-00-00") == "0000-00-00"
    assert conv[FIELD_TYPE.NEWDECIMAL]("1.50") == Decimal("1.50")


# --- the binlog's zero and invalid dates (install_binlog_date_readers) ------------------------


class _Packet:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read_uint24(self) -> int:
        return int.from_bytes(self.data[:3], "little")

    def read_uint64(self) -> int:
        return int.from_bytes(self.data[:8], "little")

    def read_int_be_by_size(self, size: int) -> int:
        value, self.data = int.from_bytes(self.data[:size], "big"), self.data[size:]
        return value


def _datetime2(y: int, mo: int, d: int, h: int, mi: int, s: int, frac: bytes = b"") -> bytes:
    # MySQL's DATETIME2 layout, written here from the documented bit fields
    packed = (1 << 39) | ((y * 13 + mo) << 22) | (d << 17) | (h << 12) | (mi << 6) | s
    return packed.to_bytes(5, "big") + frac


def test_the_binlog_readers_keep_the_text_of_zero_and_invalid_dates() -> None:
    from pymysqlreplication.row_event import RowsEvent

    event = object.__new__(RowsEvent)

    def read(name: str, data: bytes, *args: Any) -> Any:
        event.packet = _Packet(data)
        return getattr(event, f"_RowsEvent__read_{name}")(*args)

    assert read("date", (0).to_bytes(3, "little")) == "0000-00-00"
    assert read("date", ((2020 << 9) | (0 << 5) | 15).to_bytes(3, "little")) == "2020-00-15"
    assert read("date", ((2020 << 9) | (2 << 5) | 30).to_bytes(3, "little")) == "2020-02-30"
    assert read("date", ((2024 << 9) | (2 << 5) | 29).to_bytes(3, "little")) == dt.date(2024, 2, 29)
    assert read("datetime", (0).to_bytes(8, "little")) == "0000-00-00 00:00:00"
    six = SimpleNamespace(fsp=6)
    zero6 = _datetime2(0, 0, 0, 0, 0, 0, b"\x00\x00\x00")
    assert read("datetime2", zero6, six) == "0000-00-00 00:00:00.000000"
    two = SimpleNamespace(fsp=2)
    odd = _datetime2(2020, 2, 30, 1, 2, 3, bytes([45]))
    assert read("datetime2", odd, two) == "2020-02-30 01:02:03.45"
    good = _datetime2(2024, 2, 29, 23, 59, 59, (999999).to_bytes(3, "big"))
    assert read("datetime2", good, six) == dt.datetime(2024, 2, 29, 23, 59, 59, 999999)


# --- column defaults (contract C4) ---------------------------------------------------------------


def default_of(column: ColumnDef) -> ColumnDefault | None:
    return column_default(column, column_type(column, None, DEFAULT), None)


def test_constant_defaults_of_created_columns() -> None:
    assert default_of(col("varchar", length=9, default="'it''s'")) == ColumnDefault("it's")
    assert default_of(col("int", default="-5")) == ColumnDefault(-5)
    assert default_of(col("decimal", length=5, scale=2, default="1.50")) == ColumnDefault(
        b64(b"\x00\x96")
    )
    assert default_of(col("enum", values=("A", "b"), default="'a'")) == ColumnDefault("A")
    assert default_of(col("bit", length=4, default="b'101'")) == ColumnDefault(b64(b"\x05"))
    assert default_of(col("datetime", default="'2020-01-02 03:04:05'")) == ColumnDefault(
        1577934245000
    )
    # not constants: no default (Debezium writes placeholders for these; we write nothing)
    for expression in ("current_timestamp()", "NULL", "(1 + 1)", "uuid()"):
        assert default_of(col("int", default=expression)) is None
    assert default_of(col("date", default="'0000-00-00'")) is None  # no representation


def test_defaults_of_added_columns_are_what_existing_rows_got() -> None:
    at = 1_767_225_600_000  # 2026-01-01T00:00:00Z, the ALTER's binlog time
    assert default_of(col("varchar", length=5, default="'web'", added_ms=at)) == ColumnDefault(
        "web"
    )
    assert default_of(col("varchar", length=5, added_ms=at)) is None  # nullable: NULL
    # NOT NULL without DEFAULT: the server's implicit default
    assert default_of(col("int", nullable=False, added_ms=at)) == ColumnDefault(0)
    assert default_of(col("varchar", nullable=False, added_ms=at)) == ColumnDefault("")
    assert default_of(col("enum", values=("x", "y"), nullable=False, added_ms=at)) == ColumnDefault(
        "x"
    )
    # CURRENT_TIMESTAMP: the statement's time, exact for a TIMESTAMP(0)
    stamped = col("timestamp", default="current_timestamp()", added_ms=at)
    assert default_of(stamped) == ColumnDefault("2026-01-01T00:00:00Z")

    def why(column: ColumnDef) -> str:
        result = default_of(column)
        assert result is not None and result.value is None and result.unreproducible
        return result.unreproducible

    assert "whole seconds" in why(col("timestamp", length=3, default="current_timestamp(3)",
                                      added_ms=at))  # fmt: skip
    assert "whole seconds" in why(col("datetime", default="now()", added_ms=at))
    assert "uuid()" in why(col("varchar", length=36, default="uuid()", added_ms=at))
    assert "0000-00-00" in why(col("date", nullable=False, added_ms=at))
    assert "numbered" in why(col("int", auto_increment=True, nullable=False, added_ms=at))
    assert "converts" in why(col("int", default="1.5", added_ms=at))  # the server rounds
    assert "renamed from old" in why(col("int", default="1", renamed_from="old"))
