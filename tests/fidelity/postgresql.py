"""PostgreSQL 15's type table: every type of the seed's mapping table, at its edges.

Expected values are written from PostgreSQL's documentation and contract C2 (docs/types.md);
temporal ones are computed with :mod:`tests.fidelity.calendar` (Python's calendar). The
database side is read with SQL chosen to be independent of the agent's text parsing
(``extract``, date arithmetic, ``hstore_to_json``...).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from typing import Any

from tests.fidelity.calendar import days, micros
from tests.fidelity.model import Edge, Reading, TypeCase, TypeTable, array_of, c1, float32

__all__ = ["SETUP", "TYPE_TABLE"]

SETUP = (
    "CREATE EXTENSION IF NOT EXISTS hstore SCHEMA public",
    "CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy')",
    "CREATE DOMAIN {s}.posint AS integer CHECK (VALUE > 0)",
)
"""Statements run in the test's schema ``{s}`` before the table is created."""

NAN, INF = float("nan"), float("inf")
INT32_MAX_DAYS, INT32_MIN_DAYS = 2**31 - 1, -(2**31)
TS_POS_INF, TS_NEG_INF = 9_223_372_036_825_200_000, -9_223_372_036_832_400_000
"""Contract C2: Debezium's PostgreSQL ±infinity sentinels, in microseconds."""

NUMERIC_C1 = "has no representation in a Connect Decimal"
RANGE_C1 = "outside the range of int64 microseconds"


def _int(value: Any) -> int:
    return int(value)


def _bits(width: int) -> Any:
    def convert(text: str) -> bytes:
        return int(text, 2).to_bytes((width + 7) // 8, "big")

    return convert


def _iso_time(us: int) -> str:
    """ZonedTime as Debezium formats it (java.time ISO, fraction in groups of 3 digits, Z)."""
    if us == 86_400_000_000:
        return "24:00:00Z"
    seconds, fraction = divmod(us, 10**6)
    text = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
    if fraction:
        text += f".{fraction // 1000:03d}" if fraction % 1000 == 0 else f".{fraction:06d}"
    return text + "Z"


def _iso_interval(parts: Sequence[Decimal]) -> str:
    """Debezium's Interval.toIsoString from extract()'s parts: every part signed as stored,
    seconds without trailing zeros."""
    y, mo, d, h, mi = (int(p) for p in parts[:5])
    seconds = Decimal(parts[5])
    sec = format(seconds.normalize(), "f") if seconds else "0"
    return f"P{y}Y{mo}M{d}DT{h}H{mi}M{sec}S"


TEXT = Reading("{c}::text")
FLOAT4 = Reading(db_map=float32, silver_map=float32)
DATE = Reading(
    "CASE WHEN {c} = 'infinity' THEN 2147483647 WHEN {c} = '-infinity' THEN -2147483648"
    " ELSE {c} - DATE '1970-01-01' END",
    _int,
    "unix_date({c})",
)
_EPOCH_MICROS = (
    "CASE WHEN {c} = 'infinity' THEN 9223372036825200000"
    " WHEN {c} = '-infinity' THEN -9223372036832400000"
    " ELSE (extract(epoch FROM {c}) * 1000000)::numeric(40, 0) END"
)
TIMESTAMP = Reading(_EPOCH_MICROS, _int, "unix_micros(CAST({c} AS TIMESTAMP))")
TIMESTAMPTZ = Reading(_EPOCH_MICROS, _int, "unix_micros({c})")
TIME = Reading("(extract(epoch FROM {c}) * 1000000)::bigint", _int)
TIMETZ = Reading(
    "(extract(epoch FROM ({c} AT TIME ZONE 'UTC')::time) * 1000000)::bigint", _iso_time
)
INTERVAL = Reading(
    "ARRAY[extract(year FROM {c}), extract(month FROM {c}), extract(day FROM {c}),"
    " extract(hour FROM {c}), extract(minute FROM {c}), extract(second FROM {c})]",
    _iso_interval,
)
NUMERIC_TEXT = TEXT
MONEY = Reading("{c}::numeric")
POINT = Reading(
    "ARRAY[{c}[0], {c}[1]]", silver_sql="CASE WHEN {c} IS NOT NULL THEN array({c}.x, {c}.y) END"
)
HSTORE = Reading("hstore_to_json({c})::text", json.loads, silver_map=json.loads)


def bits(width: int) -> Reading:
    """bit(n): big-endian bytes, ceil(n/8) of them (contract C2)."""
    return Reading("{c}::text", _bits(width))


def case(column: str, sql_type: str, silver_type: str, *edges: Edge | str, **kw: Any) -> TypeCase:
    """A column; a bare string edge is a literal whose expected value is its own text."""
    listed = tuple(e if isinstance(e, Edge) else Edge(e, e.strip("'")) for e in edges)
    return TypeCase(column, sql_type, listed, silver_type, kw.get("reading", Reading()))


E = Edge
d, us = days, micros

CASES: tuple[TypeCase, ...] = (
    case("c_bool", "boolean", "boolean", E("true", True), E("false", False)),
    case("c_int2", "smallint", "smallint", E("-32768", -32768), E("32767", 32767)),
    case("c_int4", "integer", "int", E("-2147483648", -(2**31)), E("2147483647", 2**31 - 1)),
    case("c_int8", "bigint", "bigint", E("-9223372036854775808", -(2**63)),
         E("9223372036854775807", 2**63 - 1)),
    case("c_float4", "real", "float", E("'NaN'", NAN), E("'Infinity'", INF),
         E("'-Infinity'", -INF), E("'3.4028235e38'", float32(3.4028235e38)),
         E("'1.4e-45'", float32(1.4e-45)), E("'-0.1'", float32(-0.1)), reading=FLOAT4),
    case("c_float8", "double precision", "double", E("'NaN'", NAN), E("'-Infinity'", -INF),
         E("'Infinity'", INF), E("'1.7976931348623157e308'", 1.7976931348623157e308),
         E("'5e-324'", 5e-324), E("'0.1'", 0.1)),
    case("c_num", "numeric(10,2)", "decimal(10,2)", E("99999999.99", Decimal("99999999.99")),
         E("-99999999.99", Decimal("-99999999.99")), E("0.01", Decimal("0.01")),
         c1("'NaN'", NUMERIC_C1, "NaN")),
    case("c_num_wide", "numeric(50,20)", "string",
         "'123456789012345678901234567890.12345678901234567890'",
         "'-0.00000000000000000001'", E("0", "0.00000000000000000000"),
         reading=NUMERIC_TEXT),
    case("c_num_free", "numeric", "string", "'1.500'", "'-0.000000000000000000000000000001'",
         E("'1e40'", "1" + "0" * 40), c1("'NaN'", NUMERIC_C1, "NaN"),
         c1("'Infinity'", NUMERIC_C1, "Infinity"), c1("'-Infinity'", NUMERIC_C1, "-Infinity"),
         reading=NUMERIC_TEXT),
    case("c_money", "money", "decimal(38,2)",
         E("92233720368547758.07", Decimal("92233720368547758.07")),
         E("-92233720368547758.08", Decimal("-92233720368547758.08")),
         E("0.01", Decimal("0.01")), reading=MONEY),
    case("c_date", "date", "date", E("'infinity'", INT32_MAX_DAYS),
         E("'-infinity'", INT32_MIN_DAYS), E("'4714-11-24 BC'", d(-4713, 11, 24)),
         E("'5874897-12-31'", d(5874897, 12, 31)), E("'1582-10-04'", d(1582, 10, 4)),
         E("'1582-10-15'", d(1582, 10, 15)), E("'0001-01-01'", d(1, 1, 1)),
         E("'9999-12-31'", d(9999, 12, 31)), E("'0001-12-31 BC'", d(0, 12, 31)), reading=DATE),
    case("c_ts", "timestamp", "timestamp_ntz", E("'infinity'", TS_POS_INF),
         E("'-infinity'", TS_NEG_INF), E("'4713-01-01 00:00:00 BC'", us(-4712, 1, 1)),
         E("'1582-10-04 12:00:00'", us(1582, 10, 4, 12)),
         E("'9999-12-31 23:59:59.999999'", us(9999, 12, 31, 23, 59, 59, 999999)),
         E("'12345-06-07 08:09:10.5'", us(12345, 6, 7, 8, 9, 10, 500000)),
         c1("'294276-12-31 23:59:59'", RANGE_C1, "294276-12-31 23:59:59"),
         E("'1970-01-01 00:00:00.000001'", 1), reading=TIMESTAMP),
    case("c_ts3", "timestamp(3)", "timestamp_ntz",
         E("'2024-02-29 12:34:56.789'", us(2024, 2, 29, 12, 34, 56, 789000)),
         E("'infinity'", TS_POS_INF), E("'-infinity'", TS_NEG_INF), reading=TIMESTAMP),
    case("c_tstz", "timestamptz", "timestamp", E("'infinity'", TS_POS_INF),
         E("'-infinity'", TS_NEG_INF),
         E("'2024-01-01 00:00:00.5+05:30'", us(2023, 12, 31, 18, 30, 0, 500000)),
         E("'0044-03-15 12:00:00+00 BC'", us(-43, 3, 15, 12)),
         c1("'294276-12-31 23:59:59+00'", RANGE_C1, "294276-12-31 23:59:59+00"),
         reading=TIMESTAMPTZ),
    case("c_time", "time", "bigint", E("'24:00:00'", 86_400_000_000), E("'00:00:00'", 0),
         E("'23:59:59.999999'", 86_399_999_999), reading=TIME),
    case("c_time3", "time(3)", "bigint", E("'24:00:00'", 86_400_000_000),
         E("'12:00:00.123'", 43_200_123_000), reading=TIME),
    case("c_timetz", "timetz", "string", E("'24:00:00+00'", "24:00:00Z"),
         E("'00:30:00+01'", "23:30:00Z"), E("'12:00:00.5-05:30'", "17:30:00.500Z"),
         E("'23:59:59.999999+14'", "09:59:59.999999Z"), reading=TIMETZ),
    case("c_interval", "interval", "string",
         E("'1 mon 2 days 03:04:05.678901'", "P0Y1M2DT3H4M5.678901S"),
         E("'-178000000 years'", "P-178000000Y0M0DT0H0M0S"),
         E("'1 year -1 month -2 days 100:00:00'", "P0Y11M-2DT100H0M0S"),
         E("'-00:00:01.5'", "P0Y0M0DT0H0M-1.5S"), E("'0'", "P0Y0M0DT0H0M0S"),
         reading=INTERVAL),
    case("c_bit1", "bit(1)", "boolean", E("B'1'", True), E("B'0'", False),
         reading=Reading("{c} = B'1'")),
    case("c_bit", "bit(10)", "binary", E("B'1010000001'", b"\x02\x81"),
         E("B'0000000000'", b"\x00\x00"), E("B'1111111111'", b"\x03\xff"), reading=bits(10)),
    case("c_varbit", "varbit(20)", "string", E("B''", ""), E("B'0010'", "0010"),
         E("B'11111111111111111111'", "1" * 20), reading=TEXT),
    case("c_json", "json", "string",
         E(r"""'{"b": 1,  "a" : [1, 2.50, "x"], "c":"\u00e9"}'""",
           r"""{"b": 1,  "a" : [1, 2.50, "x"], "c":"\u00e9"}"""),
         E("'null'", "null"), E("'  [ ]  '", "  [ ]  "), reading=TEXT),
    case("c_jsonb", "jsonb", "string",
         E("""'{"b": 1, "a": [1, 2.50]}'""", """{"a": [1, 2.50], "b": 1}"""),
         E("'null'", "null"), reading=TEXT),
    case("c_bytea", "bytea", "binary", E("'\\x'", b""), E("'\\x00ff'", b"\x00\xff"),
         E("'\\xdeadbeef'", b"\xde\xad\xbe\xef")),
    case("c_uuid", "uuid", "string", "'00000000-0000-0000-0000-000000000000'",
         "'ffffffff-ffff-ffff-ffff-ffffffffffff'", reading=TEXT),
    case("c_mood", "{s}.mood", "string", "'sad'", "'happy'", reading=TEXT),
    case("c_dom", "{s}.posint", "int", E("1", 1), E("2147483647", 2**31 - 1)),
    case("c_point", "point", "struct<x:double,y:double,wkb:binary,srid:int>",
         E("'(1.5,-2)'", [1.5, -2.0]), E("'(1e308,-1e-308)'", [1e308, -1e-308]),
         E("'(NaN,Infinity)'", [NAN, INF]), reading=POINT),
    case("c_hstore", "hstore", "string",
         E("""'"a"=>"1", "b"=>NULL, "c d"=>"x\\"y"'""", {"a": "1", "b": None, "c d": 'x"y'}),
         E("''", {}), reading=HSTORE),
    # arrays: the declared dimensions decide the nesting (pg_attribute.attndims, contract C2)
    case("c_int_arr", "integer[]", "array<int>", E("'{1,NULL,3}'", [1, None, 3]),
         E("'{}'", []), c1("'{{1,2},{3,4}}'", "more dimensions", "{{1,2},{3,4}}"),
         c1("'[0:1]={5,6}'", "lower bounds", "[0:1]={5,6}")),
    case("c_int_2d", "integer[][]", "array<array<int>>",
         E("'{{1,2},{3,NULL}}'", [[1, 2], [3, None]]), E("'{}'", []),
         c1("'{{{1}}}'", "more dimensions", "{{{1}}}")),
    case("c_num_arr", "numeric[]", "array<string>",
         E("'{1.5,-0.000001,123456789012345678901234567890}'",
           ["1.5", "-0.000001", "123456789012345678901234567890"]),
         c1("'{NaN,1}'", "element NaN", "{NaN,1}"), E("'{}'", []),
         reading=array_of(NUMERIC_TEXT)),
    case("c_num2_arr", "numeric(10,2)[]", "array<decimal(10,2)>",
         E("'{1.50,NULL,-0.01}'", [Decimal("1.50"), None, Decimal("-0.01")])),
    case("c_bool_arr", "boolean[]", "array<boolean>", E("'{t,f,NULL}'", [True, False, None])),
    case("c_int2_arr", "smallint[]", "array<smallint>",
         E("'{-32768,32767}'", [-32768, 32767])),
    case("c_int8_arr", "bigint[]", "array<bigint>",
         E("'{-9223372036854775808,9223372036854775807}'", [-(2**63), 2**63 - 1])),
    case("c_float4_arr", "real[]", "array<float>",
         E("'{NaN,-Infinity,1.5}'", [NAN, -INF, 1.5])),
    case("c_float8_arr", "double precision[]", "array<double>",
         E("'{Infinity,NaN,-0.5}'", [INF, NAN, -0.5])),
    case("c_text_arr", "text[]", "array<string>",
         E(r"""'{"a,b","","NULL",NULL,"x\"y",é}'""", ["a,b", "", "NULL", None, 'x"y', "é"])),
    case("c_varchar_arr", "varchar(5)[]", "array<string>", E("""'{ab,"c d"}'""", ["ab", "c d"])),
    case("c_bytea_arr", "bytea[]", "array<binary>",
         E(r"""'{"\\x00ff",NULL,"\\x"}'""", [b"\x00\xff", None, b""])),
    case("c_date_arr", "date[]", "array<date>",
         E("'{infinity,-infinity,1970-01-02,0001-01-01}'",
           [INT32_MAX_DAYS, INT32_MIN_DAYS, 1, d(1, 1, 1)]), reading=array_of(DATE)),
    case("c_time_arr", "time[]", "array<bigint>",
         E("'{24:00:00,00:00:01}'", [86_400_000_000, 1_000_000]), reading=array_of(TIME)),
    case("c_ts_arr", "timestamp[]", "array<timestamp_ntz>",
         E("""'{infinity,"1970-01-01 00:00:01"}'""", [TS_POS_INF, 1_000_000]),
         reading=array_of(TIMESTAMP)),
    case("c_tstz_arr", "timestamptz[]", "array<timestamp>",
         E("""'{-infinity,"1970-01-01 00:00:00+01"}'""", [TS_NEG_INF, -3_600_000_000]),
         reading=array_of(TIMESTAMPTZ)),
    case("c_timetz_arr", "timetz[]", "array<string>",
         E("'{24:00:00+00,12:00:00+01}'", ["24:00:00Z", "11:00:00Z"]),
         reading=array_of(TIMETZ)),
    case("c_interval_arr", "interval[]", "array<string>",
         E("""'{"1 mon 2 days","-1.5 seconds"}'""", ["P0Y1M2DT0H0M0S", "P0Y0M0DT0H0M-1.5S"]),
         reading=array_of(INTERVAL)),
    case("c_uuid_arr", "uuid[]", "array<string>",
         E("'{00000000-0000-0000-0000-000000000001}'",
           ["00000000-0000-0000-0000-000000000001"]), reading=array_of(TEXT)),
    case("c_json_arr", "json[]", "array<string>",
         E(r"""'{"{\"a\":  1}"}'""", ['{"a":  1}']), reading=array_of(TEXT)),
    case("c_jsonb_arr", "jsonb[]", "array<string>",
         E(r"""'{"{\"b\":1,\"a\":2}"}'""", ['{"a": 2, "b": 1}']), reading=array_of(TEXT)),
    case("c_bit_arr", "bit(3)[]", "array<binary>", E("'{101,000}'", [b"\x05", b"\x00"]),
         reading=array_of(bits(3))),
    case("c_varbit_arr", "varbit[]", "array<string>", E("""'{0010,""}'""", ["0010", ""]),
         reading=array_of(TEXT)),
    case("c_money_arr", "money[]", "array<decimal(38,2)>",
         E("'{1.50,-2.00}'", [Decimal("1.50"), Decimal("-2.00")]), reading=array_of(MONEY)),
    case("c_mood_arr", "{s}.mood[]", "array<string>", E("'{sad,happy}'", ["sad", "happy"]),
         reading=array_of(TEXT)),
    case("c_inet_arr", "inet[]", "array<string>",
         E("'{192.168.0.1/24,::1}'", ["192.168.0.1/24", "::1"]),
         reading=array_of(Reading("format('%s', {c})"))),
    case("c_point_arr", "point[]",
         "array<struct<x:double,y:double,wkb:binary,srid:int>>",
         E("""'{"(1,2)","(3,-4.5)"}'""", [[1.0, 2.0], [3.0, -4.5]]), reading=array_of(POINT)),
)  # fmt: skip

TYPE_TABLE = TypeTable(
    "postgresql", CASES, "CASE WHEN {c} IS NULL THEN NULL ELSE format('%s', {c}) END"
)
"""``format('%s', x)`` is the type's output text (``x::text`` is not, for ``inet``)."""
