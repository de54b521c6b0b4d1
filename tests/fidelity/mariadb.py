"""MariaDB 10.11's type table (the ``mysql`` connector): every type of the seed's MySQL mapping
table plus MariaDB's INET4/INET6/UUID, at their edges.

Rows are inserted with ``sql_mode = 'ALLOW_INVALID_DATES'`` (zero and invalid dates accepted)
and ``time_zone = '+00:00'``. Expected values follow MariaDB's documentation and contract C2
(docs/types.md). FLOAT is compared with what the server returns: its text protocol prints six
significant digits, and the agent gives that value on both paths (docs/capture-mysql.md).
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

from tests.fidelity.calendar import days, micros
from tests.fidelity.model import Edge, Reading, TypeCase, TypeTable, c1, float32

__all__ = ["SESSION", "TYPE_TABLE"]

SESSION = ("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'", "SET SESSION time_zone = '+00:00'")
"""Session settings of the connection that inserts and reads the rows."""

ZERO_C1 = "zero date"
INVALID_C1 = "invalid date"


def _int(value: Any) -> int:
    return int(value)


def _micros_of(value: dt.timedelta) -> int:
    return (value.days * 86_400 + value.seconds) * 10**6 + value.microseconds


def _geometry(text: str) -> str:
    return text  # "<WKB hex>:<srid>" on both sides


UNSIGNED_64 = Reading(db_map=_int, silver_map=_int)
DECIMAL_TEXT = Reading(db_map=Decimal, silver_map=Decimal)
FLOAT = Reading(db_map=float32, silver_map=float32)
DATE = Reading("DATEDIFF({c}, '1970-01-01')", _int, "unix_date({c})")
DATETIME = Reading(
    "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {c})",
    _int,
    "unix_micros(CAST({c} AS TIMESTAMP))",
)
TIMESTAMP = Reading(
    "TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', {c})", _int, "unix_micros({c})"
)
TIME = Reading(db_map=_micros_of)
BIT1 = Reading(db_map=lambda b: bytes(b) != b"\x00")
GEOMETRY = Reading(
    "CONCAT(HEX(ST_AsWKB({c})), ':', ST_SRID({c}))",
    _geometry,
    "concat(hex({c}.wkb), ':', coalesce({c}.srid, 0))",
)
TEXT = Reading("CAST({c} AS CHAR)")

E = Edge
d, us = days, micros
POINT_1_2 = "0101000000000000000000F03F0000000000000040"
LINE_0_0_1_1 = "010200000002000000" + "00" * 16 + "000000000000F03F000000000000F03F"


def case(column: str, sql_type: str, silver_type: str, *edges: Edge, **kw: Any) -> TypeCase:
    return TypeCase(column, sql_type, tuple(edges), silver_type, kw.get("reading", Reading()))


CASES: tuple[TypeCase, ...] = (
    case("m_tinyint", "tinyint", "smallint", E("-128", -128), E("127", 127)),
    case("m_tinyint_u", "tinyint unsigned", "smallint", E("0", 0), E("255", 255)),
    case("m_bool", "boolean", "smallint", E("true", 1), E("false", 0)),
    case("m_smallint_u", "smallint unsigned", "int", E("65535", 65535)),
    case("m_mediumint", "mediumint", "int", E("-8388608", -8388608), E("8388607", 8388607)),
    case("m_int_u", "int unsigned", "bigint", E("4294967295", 4294967295)),
    case("m_bigint", "bigint", "bigint", E("-9223372036854775808", -(2**63)),
         E("9223372036854775807", 2**63 - 1)),
    # bigint.unsigned.handling.mode=precise (our default): Decimal(20, 0), never wrapped
    case("m_bigint_u", "bigint unsigned", "decimal(20,0)",
         E("18446744073709551615", 2**64 - 1), E("9223372036854775808", 2**63), E("0", 0),
         reading=UNSIGNED_64),
    case("m_decimal", "decimal(65,30)", "string",
         E("12345678901234567890123456789012345.123456789012345678901234567891",
           Decimal("12345678901234567890123456789012345.123456789012345678901234567891")),
         E("-0.000000000000000000000000000001", Decimal("-1E-30")), E("0", Decimal(0)),
         reading=DECIMAL_TEXT),
    case("m_decimal2", "decimal(10,2)", "decimal(10,2)",
         E("99999999.99", Decimal("99999999.99")), E("-0.01", Decimal("-0.01"))),
    case("m_float", "float", "float", E("3.40282e38", float32(3.40282e38)),
         E("-1.17549e-38", float32(-1.17549e-38)), E("1.2345678", float32(1.23457)),
         reading=FLOAT),
    case("m_double", "double", "double", E("1.7976931348623157e308", 1.7976931348623157e308),
         E("-2.2250738585072014e-308", -2.2250738585072014e-308), E("0.1", 0.1)),
    case("m_date", "date", "date", E("'1000-01-01'", d(1000, 1, 1)),
         E("'9999-12-31'", d(9999, 12, 31)), c1("'0000-00-00'", ZERO_C1, "0000-00-00"),
         c1("'2020-02-30'", INVALID_C1, "2020-02-30"), E("'0001-01-01'", d(1, 1, 1)),
         E("'1582-10-04'", d(1582, 10, 4)), reading=DATE),
    case("m_datetime", "datetime(6)", "timestamp_ntz",
         E("'1000-01-01 00:00:00.000000'", us(1000, 1, 1)),
         E("'9999-12-31 23:59:59.999999'", us(9999, 12, 31, 23, 59, 59, 999999)),
         c1("'0000-00-00 00:00:00'", ZERO_C1, "0000-00-00 00:00:00.000000"),
         E("'1582-10-04 12:00:00.5'", us(1582, 10, 4, 12, 0, 0, 500000)),
         c1("'2020-00-10 10:00:00'", INVALID_C1, "2020-00-10 10:00:00.000000"),
         reading=DATETIME),
    case("m_timestamp", "timestamp(6) NULL", "timestamp",
         E("'1970-01-01 00:00:01'", 1_000_000),
         E("'2038-01-19 03:14:07.999999'", us(2038, 1, 19, 3, 14, 7, 999999)),
         c1("'0000-00-00 00:00:00'", ZERO_C1, "0000-00-00 00:00:00.000000"),
         reading=TIMESTAMP),
    case("m_time", "time(6)", "bigint", E("'-838:59:59'", -3_020_399_000_000),
         E("'838:59:59'", 3_020_399_000_000), E("'-00:00:00.000001'", -1),
         E("'24:00:00'", 86_400_000_000), reading=TIME),
    case("m_year", "year", "int", E("1901", 1901), E("2155", 2155), E("0", 0)),
    case("m_bit1", "bit(1)", "boolean", E("b'1'", True), E("b'0'", False), reading=BIT1),
    case("m_bit64", "bit(64)", "binary", E("b'1" + "0" * 63 + "'", b"\x80" + bytes(7)),
         E("b'0'", bytes(8)), E("b'" + "1" * 64 + "'", b"\xff" * 8)),
    case("m_enum", "enum('a','B','c d')", "string", E("'B'", "B"), E("'c d'", "c d"),
         E("'a'", "a")),
    case("m_set", "set('x','y','z')", "string", E("''", ""), E("'z,x'", "x,z"),
         E("'x,y,z'", "x,y,z")),
    case("m_json", "json", "string",
         E("""'{"a": [1, "ü"],  "b":null}'""", """{"a": [1, "ü"],  "b":null}"""),
         E("'null'", "null")),
    case("m_blob", "blob", "binary", E("x''", b""), E("x'00ff00'", b"\x00\xff\x00")),
    case("m_binary", "binary(4)", "binary", E("x'01'", b"\x01\x00\x00\x00"),
         E("x'00000000'", bytes(4))),
    case("m_varchar", "varchar(20)", "string", E("'ü€𝄞 trail  '", "ü€𝄞 trail  "),
         E("''", "")),
    case("m_char", "char(5)", "string", E("'ab'", "ab"), E("''", "")),
    case("m_geometry", "geometry", "struct<wkb:binary,srid:int>",
         E("ST_GeomFromText('POINT(1 2)', 4326)", f"{POINT_1_2}:4326"),
         E("ST_GeomFromText('LINESTRING(0 0,1 1)')", f"{LINE_0_0_1_1}:0"), reading=GEOMETRY),
    case("m_inet4", "inet4", "string", E("'192.168.0.1'", "192.168.0.1"),
         E("'0.0.0.0'", "0.0.0.0"), reading=TEXT),
    case("m_inet6", "inet6", "string", E("'2001:db8::1'", "2001:db8::1"), E("'::'", "::"),
         E("'::ffff:1.2.3.4'", "::ffff:1.2.3.4"), reading=TEXT),
    case("m_uuid", "uuid", "string",
         E("'123e4567-e89b-12d3-a456-426614174000'", "123e4567-e89b-12d3-a456-426614174000"),
         E("'00000000-0000-0000-0000-000000000000'", "00000000-0000-0000-0000-000000000000"),
         reading=TEXT),
)  # fmt: skip

TYPE_TABLE = TypeTable("mysql", CASES, "CONCAT({c})")
"""``CONCAT(x)``: the server's text of a value (``CAST(... AS CHAR)`` refuses GEOMETRY)."""
