"""MySQL type mapping against a live MariaDB: a snapshot SELECT and the binlog agree exactly.

One table with a column of every type is written under ``sql_mode=''`` (zero dates, invalid
ENUM values) and a non-UTC session time zone; the rows are then read twice, with a SELECT on a
connection set up like the agent's snapshot connection and from the binlog with
mysql-replication (its date readers replaced, as the agent's are), and every value must convert
to the same hand-written Debezium value, or, for a zero or invalid date, be unrepresentable
with the same server text.
"""

from __future__ import annotations

import base64
import datetime as dt
import random
import struct
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import UpdateRowsEvent, WriteRowsEvent

from capture.mysql.schema import ColumnDef, TableDef
from capture.mysql.types import (
    SNAPSHOT_SESSION_SQL,
    MySqlHandling,
    Unrepresentable,
    ValueConversionError,
    column_type,
    snapshot_connect_kwargs,
    snapshot_values,
    stream_values,
)

pytestmark = pytest.mark.mysql

DB = "types_live"

# (DDL of the column, its definition as the schema history holds it)
COLUMNS: list[tuple[str, ColumnDef]] = [
    ("id int not null primary key", ColumnDef("id", "int", nullable=False)),
    ("ti tinyint", ColumnDef("ti", "tinyint")),
    ("tu tinyint unsigned", ColumnDef("tu", "tinyint", unsigned=True)),
    ("si smallint", ColumnDef("si", "smallint")),
    ("su smallint unsigned", ColumnDef("su", "smallint", unsigned=True)),
    ("mi mediumint", ColumnDef("mi", "mediumint")),
    ("mu mediumint unsigned", ColumnDef("mu", "mediumint", unsigned=True)),
    ("i int", ColumnDef("i", "int")),
    ("iu int unsigned", ColumnDef("iu", "int", unsigned=True)),
    ("bi bigint", ColumnDef("bi", "bigint")),
    ("bu bigint unsigned", ColumnDef("bu", "bigint", unsigned=True)),
    ("bo boolean", ColumnDef("bo", "tinyint", length=1)),
    ("b1 bit(1)", ColumnDef("b1", "bit", length=1)),
    ("b10 bit(10)", ColumnDef("b10", "bit", length=10)),
    ("f float", ColumnDef("f", "float")),
    ("f73 float(7,3)", ColumnDef("f73", "float", length=7, scale=3)),
    ("d double", ColumnDef("d", "double")),
    ("d102 double(10,2)", ColumnDef("d102", "double", length=10, scale=2)),
    ("dc decimal(65,30)", ColumnDef("dc", "decimal", length=65, scale=30)),
    ("d2 decimal(10,2)", ColumnDef("d2", "decimal", length=10, scale=2)),
    ("c char(5)", ColumnDef("c", "char", length=5)),
    ("vc varchar(20)", ColumnDef("vc", "varchar", length=20)),
    ("tx text", ColumnDef("tx", "text")),
    ("l1 varchar(10) charset latin1", ColumnDef("l1", "varchar", length=10, charset="latin1")),
    ("u16 varchar(10) charset utf16", ColumnDef("u16", "varchar", length=10, charset="utf16")),
    ("uc varchar(10) charset ucs2", ColumnDef("uc", "varchar", length=10, charset="ucs2")),
    ("bn binary(4)", ColumnDef("bn", "binary", length=4)),
    ("cb char(3) charset binary", ColumnDef("cb", "char", length=3, charset="binary")),
    ("vb varbinary(10)", ColumnDef("vb", "varbinary", length=10)),
    ("bl blob", ColumnDef("bl", "blob")),
    ("e enum('a','b','c')", ColumnDef("e", "enum", values=("a", "b", "c"))),
    ("s set('x','y','z')", ColumnDef("s", "set", values=("x", "y", "z"))),
    ("sn set('x','y') not null", ColumnDef("sn", "set", values=("x", "y"), nullable=False)),
    ("j json", ColumnDef("j", "json")),
    ("y year", ColumnDef("y", "year")),
    ("dt date", ColumnDef("dt", "date")),
    ("dtn date not null", ColumnDef("dtn", "date", nullable=False)),
    ("t0 time", ColumnDef("t0", "time")),
    ("t3 time(3)", ColumnDef("t3", "time", length=3)),
    ("t6 time(6)", ColumnDef("t6", "time", length=6)),
    ("dt0 datetime", ColumnDef("dt0", "datetime")),
    ("dt3 datetime(3)", ColumnDef("dt3", "datetime", length=3)),
    ("dt6 datetime(6) not null", ColumnDef("dt6", "datetime", length=6, nullable=False)),
    ("ts timestamp(6) null", ColumnDef("ts", "timestamp", length=6)),
    (
        "tsn timestamp not null default '2000-01-01 00:00:00'",
        ColumnDef("tsn", "timestamp", nullable=False),
    ),
    ("g geometry", ColumnDef("g", "geometry")),
    ("p point", ColumnDef("p", "point")),
    ("uu uuid", ColumnDef("uu", "uuid")),
    ("i6 inet6", ColumnDef("i6", "inet6")),
    ("i4 inet4", ColumnDef("i4", "inet4")),
]
TABLE = TableDef(DB, "t", tuple(c for _, c in COLUMNS), primary_key=("id",), charset="utf8mb4")
NAMES = [c.name for c in TABLE.columns]

# Rows as SQL expressions (session time_zone '+05:30', sql_mode '').
INSERTS: list[dict[str, str]] = [
    {
        "id": "1", "ti": "127", "tu": "255", "si": "32767", "su": "65535", "mi": "8388607",
        "mu": "16777215", "i": "2147483647", "iu": "4294967295", "bi": "9223372036854775807",
        "bu": "18446744073709551615", "bo": "true", "b1": "b'1'", "b10": "b'1010000001'",
        "f": "1.2345678", "f73": "12.3456", "d": "0.1e0 + 0.2e0", "d102": "1234.567",
        "dc": "'12345678901234567890123456789012345.123456789012345678901234567891'",
        "d2": "'-12345678.99'", "c": "'héllo'", "vc": "'ü€𝄞 trail  '", "tx": "'text ✓'",
        "l1": "'é€'", "u16": "'é𝄞'", "uc": "'é€'", "bn": "x'0100'", "cb": "x'01'",
        "vb": "x'000100'", "bl": "x'00ff00'", "e": "'b'", "s": "'z,x'", "sn": "'y'",
        "j": "'{\"a\": [1, \"ü\"]}'", "y": "2155", "dt": "'2024-02-29'", "dtn": "'1969-12-31'",
        "t0": "'-838:59:59'", "t3": "'-00:00:01.5'", "t6": "'-01:02:03.456789'",
        "dt0": "'1000-01-01 00:00:00'", "dt3": "'2024-02-29 12:34:56.789'",
        "dt6": "'9999-12-31 23:59:59.999999'", "ts": "'2024-01-01 05:30:00.123456'",
        "tsn": "'2038-01-19 08:44:07'", "g": "ST_GeomFromText('LINESTRING(0 0,1 1)', 4326)",
        "p": "ST_GeomFromText('POINT(1 2)')", "uu": "'123e4567-e89b-12d3-a456-426614174000'",
        "i6": "'2001:db8::1'", "i4": "'192.168.0.1'",
    },
    {
        "id": "2", "ti": "-128", "tu": "0", "si": "-32768", "su": "0", "mi": "-8388608",
        "mu": "0", "i": "-2147483648", "iu": "0", "bi": "-9223372036854775808",
        "bu": "9223372036854775808", "bo": "false", "b1": "b'0'", "b10": "b'0000000001'",
        "f": "1234565", "f73": "-1.5", "d": "-1.7976931348623157e308", "d102": "-0.5",
        "dc": "'-0.000000000000000000000000000001'", "d2": "'0.00'", "c": "''", "vc": "''",
        "tx": "''", "l1": "''", "u16": "''", "uc": "''", "bn": "x'00000000'", "cb": "x''",
        "vb": "x''", "bl": "x'00'", "e": "'zzz'", "s": "''", "sn": "''", "j": "'[]'",
        "y": "0", "dt": "'0000-00-00'", "dtn": "'0000-00-00'", "t0": "'838:59:59'",
        "t3": "'-00:00:00.001'", "t6": "'-00:00:00.000001'", "dt0": "'0000-00-00 00:00:00'",
        "dt3": "'2020-00-10 00:00:00'", "dt6": "'0000-00-00 00:00:00'", "ts": "0", "tsn": "0",
        "g": "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))')", "p": "Point(-1.5, 2.25)",
        "uu": "'ffffffff-ffff-4fff-bfff-ffffffffff00'", "i6": "'::ffff:1.2.3.4'",
        "i4": "'10.0.0.0'",
    },
    {"id": "3", "sn": "'x,y'", "dtn": "'2000-01-01'", "dt6": "'1970-01-01 00:00:00'",
     "tsn": "'1970-01-01 05:30:01'"},
    {"id": "4", "sn": "'x'", "dtn": "'2000-01-01'", "dt6": "'2000-01-01 00:00:00'",
     "f": "0.1", "d2": "'99999999.99'", "bn": "x''", "t0": "'00:00:00'", "t3": "'25:00:00.5'",
     "t6": "'25:00:00.5'", "i6": "'::'", "uu": "'00000000-0000-0000-0000-000000000001'",
     "i4": "'0.0.0.0'", "e": "'a'", "s": "'x,y,z'", "j": "'{\"k\":null}'", "y": "1901"},
]  # fmt: skip
UPDATE = "UPDATE t SET ti = 1, s = '', dt = '0000-00-00', bu = 1 WHERE id = 1"


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unscaled(number: int) -> str:
    """Base64 of a Connect Decimal's unscaled value (minimal big-endian two's complement)."""
    size = (number.bit_length() if number >= 0 else (~number).bit_length()) // 8 + 1
    return b64(number.to_bytes(size, "big", signed=True))


def days(y: int, m: int, d: int) -> int:
    return (dt.date(y, m, d) - dt.date(1970, 1, 1)).days


def micros(
    year: int, month: int, day: int, hour: int = 0, minute: int = 0, second: int = 0, us: int = 0
) -> int:
    moment = dt.datetime(year, month, day, hour, minute, second, us)
    return (moment - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1)


def wkb_geometry(srid: int, wkb: bytes) -> dict[str, Any]:
    return {"wkb": b64(wkb), "srid": srid}


TIME_838 = (838 * 3600 + 59 * 60 + 59) * 1_000_000


def c1(text: str) -> tuple[str, str]:
    """A value without a representation: the converter names it with the server's text."""
    return ("unrepresentable", text)


# Debezium values under the default handling, row by row (missing columns: null).
EXPECTED: list[dict[str, Any]] = [
    {
        "id": 1, "ti": 127, "tu": 255, "si": 32767, "su": 65535, "mi": 8388607, "mu": 16777215,
        "i": 2147483647, "iu": 4294967295, "bi": 2**63 - 1, "bu": unscaled(2**64 - 1), "bo": 1,
        "b1": True,
        "b10": b64(bytes([0x81, 0x02])), "f": 1.23457, "f73": 12.346,
        "d": 0.30000000000000004, "d102": 1234.57,
        "dc": unscaled(12345678901234567890123456789012345123456789012345678901234567891),
        "d2": unscaled(-1234567899), "c": "héllo", "vc": "ü€𝄞 trail  ", "tx": "text ✓",
        "l1": "é€", "u16": "é𝄞", "uc": "é€", "bn": b64(b"\x01\x00\x00\x00"),
        "cb": b64(b"\x01\x00\x00"), "vb": b64(b"\x00\x01\x00"), "bl": b64(b"\x00\xff\x00"),
        "e": "b", "s": "x,z", "sn": "y", "j": '{"a": [1, "ü"]}', "y": 2155,
        "dt": days(2024, 2, 29), "dtn": -1, "t0": -TIME_838, "t3": -1_500_000,
        "t6": -3_723_456_789, "dt0": micros(1000, 1, 1) // 1000,
        "dt3": micros(2024, 2, 29, 12, 34, 56, 789000) // 1000,
        "dt6": micros(9999, 12, 31, 23, 59, 59, 999999), "ts": "2024-01-01T00:00:00.123456Z",
        "tsn": "2038-01-19T03:14:07Z",
        "g": wkb_geometry(4326, struct.pack("<BII4d", 1, 2, 2, 0, 0, 1, 1)),
        "p": wkb_geometry(0, struct.pack("<BI2d", 1, 1, 1, 2)),
        "uu": "123e4567-e89b-12d3-a456-426614174000", "i6": "2001:db8::1", "i4": "192.168.0.1",
    },
    {
        "id": 2, "ti": -128, "tu": 0, "si": -32768, "su": 0, "mi": -8388608, "mu": 0,
        "i": -(2**31), "iu": 0, "bi": -(2**63), "bu": unscaled(2**63), "bo": 0, "b1": False,
        "b10": b64(b"\x01\x00"), "f": 1234560.0, "f73": -1.5, "d": -1.7976931348623157e308,
        "d102": -0.5, "dc": unscaled(-1), "d2": unscaled(0), "c": "", "vc": "", "tx": "",
        "l1": "", "u16": "", "uc": "", "bn": b64(bytes(4)), "cb": b64(bytes(3)), "vb": "",
        "bl": b64(b"\x00"), "e": "", "s": "", "sn": "", "j": "[]", "y": 0,
        # zero and invalid dates: null plus their text in the record's header (contract C1)
        "dt": c1("0000-00-00"), "dtn": c1("0000-00-00"), "t0": TIME_838, "t3": -1000, "t6": -1,
        "dt0": c1("0000-00-00 00:00:00"), "dt3": c1("2020-00-10 00:00:00.000"),
        "dt6": c1("0000-00-00 00:00:00.000000"), "ts": c1("0000-00-00 00:00:00.000000"),
        "tsn": c1("0000-00-00 00:00:00"),
        "g": wkb_geometry(0, struct.pack("<BIII8d", 1, 3, 1, 4, 0, 0, 1, 0, 1, 1, 0, 0)),
        "p": wkb_geometry(0, struct.pack("<BI2d", 1, 1, -1.5, 2.25)),
        "uu": "ffffffff-ffff-4fff-bfff-ffffffffff00", "i6": "::ffff:1.2.3.4", "i4": "10.0.0.0",
    },
    {"id": 3, "sn": "x,y", "dtn": days(2000, 1, 1), "dt6": 0, "tsn": "1970-01-01T00:00:01Z"},
    {
        "id": 4, "sn": "x", "dtn": days(2000, 1, 1), "dt6": micros(2000, 1, 1),
        "tsn": "2000-01-01T00:00:00Z", "f": 0.1, "d2": unscaled(9999999999),
        "bn": b64(bytes(4)), "t0": 0, "t3": 90_000_500_000, "t6": 90_000_500_000, "i6": "::",
        "uu": "00000000-0000-0000-0000-000000000001", "i4": "0.0.0.0", "e": "a", "s": "x,y,z",
        "j": '{"k":null}', "y": 1901,
    },
]  # fmt: skip
AFTER_UPDATE = {**EXPECTED[0], "ti": 1, "s": "", "dt": c1("0000-00-00"), "bu": unscaled(1)}


def full(expected: dict[str, Any]) -> list[Any]:
    return [expected.get(name) for name in NAMES]


DEFAULT = MySqlHandling()


def convert(values: list[Any], handling: MySqlHandling = DEFAULT) -> list[Any]:
    out: list[Any] = []
    for column, value in zip(TABLE.columns, values, strict=True):
        ctype = column_type(column, TABLE.charset, handling)
        try:
            out.append(None if value is None else ctype.convert(value))
        except Unrepresentable as exc:
            out.append(c1(str(exc.text)))
    return out


def insert_sql(row: dict[str, str]) -> str:
    return f"INSERT INTO t ({', '.join(row)}) VALUES ({', '.join(row.values())})"


@pytest.fixture(scope="module")
def rows(mariadb_conn: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """Write the rows; read them back by SELECT and from the binlog."""
    admin = pymysql.connect(**dict(mariadb_conn), autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {DB}")
            cur.execute(f"CREATE DATABASE {DB}")
            cur.execute(f"USE {DB}")
            ddl = ", ".join(d for d, _ in COLUMNS)
            cur.execute(f"CREATE TABLE t ({ddl}) DEFAULT CHARSET=utf8mb4")
            cur.execute("SHOW MASTER STATUS")
            log_file, log_pos = cur.fetchone()[:2]
            cur.execute("SET SESSION time_zone = '+05:30', SESSION sql_mode = ''")
            for row in INSERTS:
                cur.execute(insert_sql(row))
            cur.execute(UPDATE)
        snapshot = read_snapshot(mariadb_conn)
        stream, updates = read_stream(mariadb_conn, log_file, log_pos)
        yield {"snapshot": snapshot, "stream": stream, "updates": updates}
    finally:
        with admin.cursor() as cur:
            cur.execute(f"DROP DATABASE IF EXISTS {DB}")
        admin.close()


def read_snapshot(mariadb_conn: dict[str, Any]) -> list[list[Any]]:
    conn = pymysql.connect(**dict(mariadb_conn), database=DB, **snapshot_connect_kwargs())
    try:
        with conn.cursor() as cur:
            for statement in SNAPSHOT_SESSION_SQL:
                cur.execute(statement)
            # The SELECT runs after the UPDATE: its row 1 is compared with the after image.
            cur.execute(f"SELECT {', '.join(NAMES)} FROM t ORDER BY id")
            return [snapshot_values(TABLE, row) for row in cur.fetchall()]
    finally:
        conn.close()


def read_stream(
    mariadb_conn: dict[str, Any], log_file: str, log_pos: int
) -> tuple[list[list[Any]], list[tuple[list[Any], list[Any]]]]:
    reader = BinLogStreamReader(
        connection_settings=dict(mariadb_conn),
        server_id=4242,
        blocking=False,
        resume_stream=True,
        log_file=log_file,
        log_pos=log_pos,
        only_events=[WriteRowsEvent, UpdateRowsEvent],
    )
    inserted: list[list[Any]] = []
    updated: list[tuple[list[Any], list[Any]]] = []
    try:
        for event in reader:
            if event.schema != DB:
                continue
            for row in event.rows:
                if isinstance(event, UpdateRowsEvent):
                    before = stream_values(TABLE, row["before_values"], row["before_none_sources"])
                    after = stream_values(TABLE, row["after_values"], row["after_none_sources"])
                    updated.append((before, after))
                else:
                    inserted.append(stream_values(TABLE, row["values"], row["none_sources"]))
    finally:
        reader.close()
    return inserted, updated


def assert_same(label: str, got: list[Any], want: list[Any]) -> None:
    diffs = {n: (g, w) for n, g, w in zip(NAMES, got, want, strict=True) if g != w}
    assert not diffs, f"{label}: column -> (got, expected): {diffs}"


@pytest.mark.parametrize("index", range(len(INSERTS)))
def test_stream_row_matches_expected(rows: dict[str, Any], index: int) -> None:
    assert_same(f"binlog row {index + 1}", convert(rows["stream"][index]), full(EXPECTED[index]))


@pytest.mark.parametrize("index", range(1, len(INSERTS)))
def test_snapshot_row_matches_expected(rows: dict[str, Any], index: int) -> None:
    # Row 1 was updated after the inserts; the snapshot sees its after image (next test).
    got = convert(rows["snapshot"][index])
    assert_same(f"snapshot row {index + 1}", got, full(EXPECTED[index]))


def test_update_before_and_after(rows: dict[str, Any]) -> None:
    [(before, after)] = rows["updates"]
    assert_same("update before", convert(before), full(EXPECTED[0]))
    assert_same("update after", convert(after), full(AFTER_UPDATE))
    assert_same("snapshot of the updated row", convert(rows["snapshot"][0]), full(AFTER_UPDATE))


@pytest.mark.parametrize(
    "handling",
    [
        MySqlHandling("string", "adaptive", "precise", "hex"),
        MySqlHandling("double", "connect", "long", "base64-url-safe"),
        MySqlHandling("precise", "adaptive_time_microseconds", "precise", "base64"),
    ],
    ids=["string-adaptive-precise-hex", "double-connect-long-urlsafe", "precise-base64"],
)
def test_both_roads_agree_in_every_mode(rows: dict[str, Any], handling: MySqlHandling) -> None:
    stream = rows["stream"][1:] + [rows["updates"][0][1]]
    snapshot = rows["snapshot"][1:] + [rows["snapshot"][0]]
    for got, want in zip(stream, snapshot, strict=True):
        assert_same(str(handling), convert(got, handling), convert(want, handling))


def test_other_modes_spot_values(rows: dict[str, Any]) -> None:
    row1 = rows["stream"][0]
    string_mode = convert(row1, MySqlHandling("string", "adaptive", "precise", "hex"))
    values = dict(zip(NAMES, string_mode, strict=True))
    assert values["dc"] == "12345678901234567890123456789012345.123456789012345678901234567891"
    assert values["d2"] == "-12345678.99"
    assert values["bu"] == unscaled(2**64 - 1)
    assert values["bn"] == "01000000" and values["vb"] == "000100"
    assert values["t3"] == -1500 and values["t6"] == -3_723_456_789  # Time ms / MicroTime
    assert values["dt3"] == micros(2024, 2, 29, 12, 34, 56, 789000) // 1000
    connect = dict(
        zip(
            NAMES,
            convert(row1, MySqlHandling("double", "connect", "long", "base64-url-safe")),
            strict=True,
        )
    )
    assert connect["d2"] == -12345678.99
    assert connect["t6"] == -3_723_457  # floored milliseconds
    assert connect["dt6"] == micros(9999, 12, 31, 23, 59, 59, 999999) // 1000
    assert connect["bl"] == "AP8A"


def test_column_count_mismatch_names_table(rows: dict[str, Any]) -> None:
    with pytest.raises(ValueConversionError, match=r"types_live\.t"):
        stream_values(TABLE, {"UNKNOWN_COL0": 1}, {})


AGREE_COLUMNS: list[tuple[str, ColumnDef]] = [
    ("id int not null primary key", ColumnDef("id", "int", nullable=False)),
    ("f float", ColumnDef("f", "float")),
    ("f52 float(5,2)", ColumnDef("f52", "float", length=5, scale=2)),
    ("d double", ColumnDef("d", "double")),
    *((f"t{p} time({p})", ColumnDef(f"t{p}", "time", length=p)) for p in range(7)),
    ("u uuid", ColumnDef("u", "uuid")),
    ("i6 inet6", ColumnDef("i6", "inet6")),
    ("ts timestamp(3) null", ColumnDef("ts", "timestamp", length=3)),
]
AGREE = TableDef(DB, "agree", tuple(c for _, c in AGREE_COLUMNS), primary_key=("id",))


def test_random_values_agree(mariadb_conn: dict[str, Any], rows: dict[str, Any]) -> None:
    """Many random floats, negative fractional TIMEs, UUID()s and INET6s: both roads agree."""
    rng = random.Random(20261121)
    admin = pymysql.connect(**dict(mariadb_conn), database=DB, autocommit=True)
    with admin.cursor() as cur:
        cur.execute(f"CREATE TABLE agree ({', '.join(d for d, _ in AGREE_COLUMNS)})")
        cur.execute("SHOW MASTER STATUS")
        log_file, log_pos = cur.fetchone()[:2]
        cur.execute("SET SESSION time_zone = '-03:00'")
        for i in range(200):
            sign = rng.choice(["-", ""])
            times = [
                f"'{sign}{rng.randrange(839):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}"
                f".{rng.randrange(10**6):06d}'"
                for _ in range(7)
            ]
            groups = [rng.choice([0, 0, 1, rng.randrange(65536)]) for _ in range(8)]
            inet6 = ":".join(f"{g:x}" for g in groups)
            cur.execute(
                "INSERT INTO agree VALUES (%s, %s, %s, %s, " + ", ".join(times) + ", UUID(), "
                "%s, FROM_UNIXTIME(%s))",
                (i, rng.uniform(-1e6, 1e6) * 10 ** rng.randrange(-30, 30),
                 rng.uniform(-999, 999), rng.uniform(-1e300, 1e300), inet6,
                 rng.randrange(1, 2**31 - 1) + rng.randrange(1000) / 1000),
            )  # fmt: skip
    admin.close()
    conn = pymysql.connect(**dict(mariadb_conn), database=DB, **snapshot_connect_kwargs())
    with conn.cursor() as cur:
        for statement in SNAPSHOT_SESSION_SQL:
            cur.execute(statement)
        cur.execute("SELECT * FROM agree ORDER BY id")
        snapshot = [snapshot_values(AGREE, row) for row in cur.fetchall()]
    conn.close()
    reader = BinLogStreamReader(
        connection_settings=dict(mariadb_conn),
        server_id=4243,
        blocking=False,
        resume_stream=True,
        log_file=log_file,
        log_pos=log_pos,
        only_events=[WriteRowsEvent],
    )
    stream = [
        stream_values(AGREE, row["values"], row["none_sources"])
        for event in reader
        if event.table == "agree"
        for row in event.rows
    ]
    reader.close()
    assert len(stream) == len(snapshot) == 200
    for handling in (MySqlHandling(), MySqlHandling(time_precision="adaptive")):
        types = [column_type(c, None, handling) for c in AGREE.columns]
        for a, b in zip(snapshot, stream, strict=True):
            got = [t.convert(v) if v is not None else None for t, v in zip(types, b, strict=True)]
            want = [t.convert(v) if v is not None else None for t, v in zip(types, a, strict=True)]
            assert got == want, {
                c.name: (g, w) for c, g, w in zip(AGREE.columns, got, want, strict=True) if g != w
            }
