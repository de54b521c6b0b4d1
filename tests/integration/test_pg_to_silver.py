"""PostgreSQL → capture agent → bronze → silver, against the real PostgreSQL 15 (``pg_dsn``):
silver's live rows equal the source table row by row and column by column.

Each test captures its own schema with its own slot and publication (the ``pg`` corner of
``test_pg_capture``), lands into a temp lake with :class:`LandingAgent` + :class:`BronzeWriter`,
applies bronze with ``SilverJob.run_once()`` and compares ``WHERE NOT _cdc_deleted`` with a
``SELECT`` from PostgreSQL. Where silver's documented decoding (docs/silver.md, "Decoding")
differs from what psycopg returns, the comparison converts one side with an independent
computation: time of day as bigint microseconds (``extract(epoch ...)``), ``ZonedTimestamp`` as
the UTC instant, ``VariableScaleDecimal`` as the exact decimal text PostgreSQL prints,
``MicroDuration`` with the 365.25/12-day month computed in SQL, ``Bits`` as big-endian bytes.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.envelope import UNAVAILABLE_VALUE
from bronze.writer import BronzeTables, BronzeWriter
from capture.registry import create_source
from pipeline.landing import LandingAgent
from silver.job import SilverJob, SilverRunResult, silver_table_name
from silver.merge import DELETED
from tests.integration.test_pg_capture import (
    Pg,
    assert_positions_unique_and_ordered,
    data,
    land,
    pg,
)

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.delta]

__all__ = ["pg"]  # the fixture, re-used from test_pg_capture

SOURCE = "pg"
"""The source name :meth:`Pg.config` gives."""


# --- comparing silver with the source -------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    """One compared column: how each side reads it so that equal values compare equal.

    Attributes:
        name: The column (and the name of the compared value).
        source: SQL expression on the PostgreSQL side; the column itself by default. ``{s}``
            stands for the test's schema.
        silver: Spark SQL expression on the silver side; the column itself by default.
        convert: Applied to silver's non-NULL value in Python.
        convert_source: Applied to PostgreSQL's non-NULL value in Python.
    """

    name: str
    source: str | None = None
    silver: str | None = None
    convert: Callable[[Any], Any] | None = None
    convert_source: Callable[[Any], Any] | None = None


def _apply(convert: Callable[[Any], Any] | None, value: Any) -> Any:
    return value if convert is None or value is None else convert(value)


def source_rows(pg: Pg, table: str, columns: Sequence[Col]) -> dict[Any, dict[str, Any]]:
    """The source table, by ``id``, each column read as ``Col.source`` says."""
    select = ", ".join((c.source or c.name).replace("{s}", pg.schema) for c in columns)
    out = {}
    with psycopg.connect(pg.dsn, autocommit=True) as conn:  # no parameters: '%' is literal
        fetched = conn.execute(f"SELECT id, {select} FROM {pg.schema}.{table}").fetchall()
    for row in fetched:
        out[row[0]] = {
            c.name: _apply(c.convert_source, v) for c, v in zip(columns, row[1:], strict=True)
        }
    return out


def silver_path(lake: Path, schema: str, table: str) -> Path:
    return lake / "silver" / silver_table_name(SOURCE, f"{schema}.{table}")


def silver_rows(
    spark: Any, lake: Path, schema: str, table: str, columns: Sequence[Col]
) -> dict[Any, dict[str, Any]]:
    """Silver's live rows, by ``id``, each column read as ``Col.silver`` says."""
    from pyspark.sql import functions as F

    frame = spark.read.format("delta").load(str(silver_path(lake, schema, table)))
    live = frame.where(f"NOT {DELETED}").select(
        "id", *[F.expr(c.silver or f"`{c.name}`").alias(c.name) for c in columns]
    )
    out: dict[Any, dict[str, Any]] = {}
    for row in live.collect():
        assert row["id"] not in out, f"two live silver rows for id {row['id']}"
        out[row["id"]] = {c.name: _apply(c.convert, row[c.name]) for c in columns}
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else f"{text[:60]}...{text[-40:]} ({len(text)} chars)"


def assert_silver_equals_source(
    spark: Any, pg: Pg, lake: Path, table: str, columns: Sequence[Col]
) -> int:
    """Silver's live rows equal the source's rows, key by key and column by column.

    Returns:
        The number of rows compared.
    """
    expected = source_rows(pg, table, columns)
    got = silver_rows(spark, lake, pg.schema, table, columns)
    problems = [f"id {k}: missing in silver" for k in sorted(expected.keys() - got.keys())]
    problems += [f"id {k}: in silver, not in the source" for k in sorted(got.keys() - expected)]
    for key in sorted(expected.keys() & got.keys()):
        for c in columns:
            want, have = expected[key][c.name], got[key][c.name]
            if want != have:
                problems.append(
                    f"id {key} {c.name}: source {_short(want)} != silver {_short(have)}"
                )
    assert not problems, f"{table}: {len(problems)} differences\n" + "\n".join(problems[:30])
    return len(expected)


def run_silver(spark: Any, lake: Path) -> SilverRunResult:
    result = SilverJob(spark, lake).run_once()
    assert result.quarantined == 0, _quarantine(spark, lake)
    return result


def _quarantine(spark: Any, lake: Path) -> list[tuple[Any, ...]]:
    frame = spark.read.format("delta").load(str(lake / "silver" / "_quarantine"))
    return [(r["collection"], r["key"], r["reason"]) for r in frame.collect()]


def out(column: str) -> str:
    """SQL for a column's text as its type's output function writes it (what pgoutput sends).

    ``::text`` is not always that: ``inet::text`` appends the netmask.
    """
    return f"CASE WHEN {column} IS NULL THEN NULL ELSE format('%s', {column}) END"


def micros_of_day(column: str) -> str:
    return f"(extract(epoch FROM {column}) * 1000000)::bigint"


def _micros_of_iso_time(text: str) -> int:
    t = dt.time.fromisoformat(text)
    assert t.utcoffset() == dt.timedelta(0), text  # ZonedTime is sent in UTC
    return ((t.hour * 60 + t.minute) * 60 + t.second) * 1_000_000 + t.microsecond


def _big_endian_bits(value: bytes) -> tuple[int, int]:
    return len(value), int.from_bytes(value, "big")


def _bit_text(declared: int) -> Callable[[str], tuple[int, int]]:
    def convert(text: str) -> tuple[int, int]:
        return (declared + 7) // 8, int(text, 2) if text else 0

    return convert


def _point_of_wkb(wkb: bytes) -> list[float]:
    order, kind, x, y = struct.unpack("<BIdd", bytes(wkb))
    assert (order, kind) == (1, 1), wkb  # little-endian WKB point
    return [x, y]


# --- a workload on TOASTed tables -----------------------------------------------------------------

DOC_COLUMNS = [Col("body"), Col("tag"), Col("n")]
ITEM_COLUMNS = [Col("name"), Col("qty")]


def toast(rng: random.Random, size: int) -> str:
    """Incompressible text of ``size`` characters: stored out of line (TOAST), never inline."""
    return rng.randbytes(size // 2 + 1).hex()[:size]


def create_docs(pg: Pg, rng: random.Random, rows_per_table: int) -> None:
    """``docs`` (REPLICA IDENTITY DEFAULT) and ``docs_full`` (FULL), same rows, TOASTed bodies."""
    s = pg.schema
    for table in ("docs", "docs_full"):
        pg.sql(f"CREATE TABLE {s}.{table} (id int PRIMARY KEY, body text, tag text, n int)")
    pg.sql(f"ALTER TABLE {s}.docs_full REPLICA IDENTITY FULL")
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        for i in range(1, rows_per_table + 1):
            body = toast(rng, rng.randint(2500, 9000))
            for table in ("docs", "docs_full"):
                conn.execute(
                    f"INSERT INTO {s}.{table} VALUES (%s, %s, %s, %s)", (i, body, f"t{i}", i)
                )


def placeholders(lake: Path, table: str) -> int:
    """Streamed changes of ``table`` whose ``after`` carries the unavailable-value placeholder."""
    return sum(
        1
        for r in data(lake, table)
        if r["value"]["after"] and UNAVAILABLE_VALUE in r["value"]["after"].values()
    )


def test_workload_with_toast_key_moves_truncate_and_added_column(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    s = pg.schema
    rng = random.Random(7)
    create_docs(pg, rng, rows_per_table=12)
    pg.sql(
        f"CREATE TABLE {s}.items (id int PRIMARY KEY, name text, qty int)",
        f"INSERT INTO {s}.items SELECT g, 'i' || g, g FROM generate_series(1, 5) g",
    )
    config = pg.config(**{"provide.transaction.metadata": True})
    lake = tmp_path / "lake"
    land(config, lake, max_events=7)  # the snapshot

    def each(statements: Callable[[str], list[tuple[str, tuple[Any, ...]]]]) -> None:
        """One transaction per table, the same statements on docs and docs_full."""
        with psycopg.connect(pg.dsn, autocommit=True) as conn:
            for table in ("docs", "docs_full"):
                with conn.transaction():
                    for statement, params in statements(f"{s}.{table}"):
                        conn.execute(statement, params)

    def body() -> str:
        return toast(rng, rng.randint(2500, 9000))

    each(  # inserts, updates that leave the TOAST column unchanged
        lambda t: [
            *[
                (f"INSERT INTO {t} VALUES (%s, %s, %s, %s)", (i, body(), f"t{i}", i))
                for i in (21, 22, 23)
            ],
            (f"UPDATE {t} SET tag = tag || '+' WHERE id IN (1, 2, 3)", ()),
        ]
    )
    each(  # the TOAST column changes; another column only
        lambda t: [
            (f"UPDATE {t} SET body = %s WHERE id = 4", (body(),)),
            (f"UPDATE {t} SET n = n + 100 WHERE id = 5", ()),
        ]
    )
    land(config, lake, max_events=7)
    run_silver(spark, lake)  # silver now holds the snapshot rows the key moves below start from

    each(  # a key move of a stored row, TOAST unchanged: silver takes the body from row 8
        lambda t: [(f"UPDATE {t} SET id = 108 WHERE id = 8", ())]
    )
    each(  # insert, update and key move of one row in one transaction
        lambda t: [
            (f"INSERT INTO {t} VALUES (30, %s, 'new', 30)", (body(),)),
            (f"UPDATE {t} SET tag = 'updated' WHERE id = 30", ()),
            (f"UPDATE {t} SET id = 130 WHERE id = 30", ()),
        ]
    )
    each(  # a chain across transactions: 8 -> 108 -> 208
        lambda t: [
            (f"UPDATE {t} SET tag = 'moved twice' WHERE id = 108", ()),
            (f"UPDATE {t} SET id = 208 WHERE id = 108", ()),
        ]
    )
    each(  # deletes, of a snapshot row and of a streamed one
        lambda t: [(f"DELETE FROM {t} WHERE id IN (9, 21)", ())]
    )
    each(  # two keys swap: 10 -> 1010, 11 -> 10, 1010 -> 11
        lambda t: [
            (f"UPDATE {t} SET id = 1010 WHERE id = 10", ()),
            (f"UPDATE {t} SET id = 10 WHERE id = 11", ()),
            (f"UPDATE {t} SET id = 11 WHERE id = 1010", ()),
        ]
    )
    each(  # delete, then insert the same key again
        lambda t: [
            (f"DELETE FROM {t} WHERE id = 6", ()),
            (f"INSERT INTO {t} VALUES (6, %s, 'again', 66)", (body(),)),
            (f"UPDATE {t} SET body = NULL WHERE id = 7", ()),
        ]
    )
    pg.sql(
        f"INSERT INTO {s}.items VALUES (6, 'i6', 6)",
        f"UPDATE {s}.items SET qty = qty * 10 WHERE id = 1",
        f"TRUNCATE {s}.items",
        f"INSERT INTO {s}.items VALUES (1, 'after truncate', 1), (7, 'i7', 7)",
        f"ALTER TABLE {s}.docs ADD COLUMN extra int",
        f"ALTER TABLE {s}.docs_full ADD COLUMN extra int",
    )
    each(  # after the new column: TOAST unchanged, a key move, an insert with it
        lambda t: [
            (f"UPDATE {t} SET extra = id * 10 WHERE id IN (1, 2)", ()),
            (f"UPDATE {t} SET id = 303 WHERE id = 3", ()),
            (f"INSERT INTO {t} VALUES (40, %s, 'with extra', 40, 4)", (body(),)),
            (f"UPDATE {t} SET tag = 'late' WHERE id = 130", ()),
        ]
    )
    land(config, lake, max_events=7)
    run_silver(spark, lake)

    # the workload did exercise TOAST: DEFAULT sends placeholders, FULL never does
    assert placeholders(lake, "docs") >= 10
    assert placeholders(lake, "docs_full") == 0
    assert any(r["value"]["op"] == "t" for r in data(lake, "items"))
    assert_positions_unique_and_ordered(lake)
    columns = [*DOC_COLUMNS, Col("extra")]
    assert assert_silver_equals_source(spark, pg, lake, "docs", columns) == 15
    assert assert_silver_equals_source(spark, pg, lake, "docs_full", columns) == 15
    assert assert_silver_equals_source(spark, pg, lake, "items", ITEM_COLUMNS) == 2


# --- every type of the guide's table --------------------------------------------------------------

TYPES_DDL = """
CREATE EXTENSION IF NOT EXISTS hstore SCHEMA public;
CREATE EXTENSION IF NOT EXISTS ltree SCHEMA public;
CREATE EXTENSION IF NOT EXISTS citext SCHEMA public;
CREATE TYPE {s}.mood AS ENUM ('sad', 'ok', 'happy');
CREATE DOMAIN {s}.price AS numeric(8, 2);
CREATE TABLE {s}.all_types (
  id int PRIMARY KEY, c_bool boolean, c_bit1 bit(1), c_bits bit(10), c_varbit varbit(8),
  c_int2 smallint, c_int4 integer, c_int8 bigint, c_float4 real, c_float8 double precision,
  c_numeric numeric(10, 3), c_numeric_free numeric, c_money money,
  c_char char(3), c_varchar varchar(20), c_text text, c_citext public.citext,
  c_inet inet, c_cidr cidr, c_macaddr macaddr, c_macaddr8 macaddr8,
  c_int4range int4range, c_int8range int8range, c_numrange numrange, c_tsrange tsrange,
  c_tstzrange tstzrange, c_daterange daterange,
  c_date date, c_time time, c_time3 time(3), c_timetz timetz, c_ts timestamp,
  c_ts3 timestamp(3), c_tstz timestamptz, c_interval interval, c_bytea bytea,
  c_json json, c_jsonb jsonb, c_xml xml, c_uuid uuid, c_ltree public.ltree, c_hstore public.hstore,
  c_mood {s}.mood, c_price {s}.price, c_point point, c_box box, c_polygon polygon,
  c_int_array int[], c_text_array text[], c_oid oid, c_tsvector tsvector
);
"""
TYPES_COLUMNS = (
    "c_bool, c_bit1, c_bits, c_varbit, c_int2, c_int4, c_int8, c_float4, c_float8, c_numeric,"
    " c_numeric_free, c_money, c_char, c_varchar, c_text, c_citext, c_inet, c_cidr, c_macaddr,"
    " c_macaddr8, c_int4range, c_int8range, c_numrange, c_tsrange, c_tstzrange, c_daterange,"
    " c_date, c_time, c_time3, c_timetz, c_ts, c_ts3, c_tstz, c_interval, c_bytea, c_json,"
    " c_jsonb, c_xml, c_uuid, c_ltree, c_hstore, c_mood, c_price, c_point, c_box, c_polygon,"
    " c_int_array, c_text_array, c_oid, c_tsvector"
)
TYPES_ROWS = [
    # typical values (the guide's examples where it gives one)
    "1, true, B'1', B'0000000011', B'101', -2, 40000, 9000000000, 1.5, 2.25,"
    " 1234.567, 3.14159, 12.34, 'ab', 'varchar', 'text', 'MiXeD',"
    " '192.168.1.1', '10.0.0.0/8', '08:00:2b:01:02:03', '08:00:2b:01:02:03:04:05',"
    " '[1,5)', '[10,20]', '(1.5,2.5]', '[2020-01-01 10:00,2020-01-02)',"
    " '[2020-01-01 10:00+02,)', '[2020-01-01,2020-02-01)',"
    " '2020-03-04', '10:11:12.123456', '10:11:12.123', '10:11:12+02',"
    " '2018-06-20 15:13:16.945104', '2018-06-20 15:13:16.945', '2018-06-20 15:13:16.5+02',"
    " '1 year 2 months 3 days 04:05:06.78', '\\x0102ff', '{\"a\": 1}', '{\"b\": [1, 2]}',"
    " '<x>1</x>', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'top.science', 'a=>1, b=>NULL',"
    " 'happy', 9.99, '(1.5,-2)', '((0,0),(1,1))', '((0,0),(1,0),(1,1))', '{1,NULL,3}',"
    " '{\"a,b\",c}', 4242, 'a fat cat'",
    # edges: extremes, before 1970, wide and negative decimals, midnight, empty collections
    "2, false, B'0', B'1111111111', B'11111111', -32768, 2147483647, -9223372036854775808,"
    " 0.1, -1e-300, -9999999.999, '-12345678901234567890123456789012345678901234.5678',"
    " -12.34, 'xyz', 'ünïcödé ✓', E'quote \" and\\nnewline \\\\ backslash', 'ÄbC',"
    " '::1', '2001:db8::/32', 'ff:ff:ff:ff:ff:ff', 'ff:ff:ff:ff:ff:ff:ff:ff',"
    " 'empty', '[-9223372036854775808,0)', '[,1.000]', '(,)', 'empty', '[2020-01-01,)',"
    " '1900-02-28', '24:00:00', '00:00:00.001', '23:59:59.999999-05:30',"
    " '1969-12-31 23:59:59.999999', '1900-01-01 00:00:00.001', '1969-12-31 23:59:59.5+00',"
    " '-1 year -2 months +3 days -04:05:06.000001', '\\x00', '[]', 'null',"
    " '<a b=\"1\"/>', '00000000-0000-0000-0000-000000000000', '', '\"k y\"=>\"v,1\", e=>\"\"',"
    " 'sad', -0.01, '(-0.5,1e10)', '((-1,-1),(1,1))', '((0,0),(0,1),(1,1),(1,0))', '{}',"
    " '{NULL,\"\",x}', 4294967295, ''",
    # small decimals, trailing zeros the scale keeps
    "3, true, B'1', B'1000000000', B'1', 0, 0, 0, -3.5, 0, 0, '12.340', 0, '', '', '', '',"
    " '10.1.2.3/24', '192.168.0.0/16', '00:00:00:00:00:00', '00:00:00:00:00:00:00:00',"
    " '[0,1)', 'empty', '[0,0]', '[2000-01-01,2000-01-01]', 'empty', 'empty',"
    " '1970-01-01', '00:00:00', '23:59:59.999', '00:00:00+00', '1970-01-01 00:00:00',"
    " '2038-01-19 03:14:07.999', '2262-04-11 23:47:16.854775+00', '0 seconds', '\\x', '{}',"
    " '{}', '<r/>', 'ffffffff-ffff-ffff-ffff-ffffffffffff', 'a', '', 'ok', 0, '(0,0)',"
    " '((0,0),(0,0))', '((0,0))', '{0}', '{}', 0, 'x:1A'",
]
TYPES_COMPARED = [
    Col("c_bool"),
    Col("c_bit1", source="c_bit1 = B'1'"),
    Col("c_bits", source="c_bits::text", convert=_big_endian_bits, convert_source=_bit_text(10)),
    Col("c_varbit", source="c_varbit::text"),  # the 0/1 text (docs/types.md)
    Col("c_int2"),
    Col("c_int4"),
    Col("c_int8"),
    Col("c_float4", source="c_float4::float8"),  # silver's float, widened exactly
    Col("c_float8"),
    Col("c_numeric"),
    Col("c_numeric_free", source="c_numeric_free::text"),  # VariableScaleDecimal: exact text
    Col("c_money", source="c_money::numeric"),
    Col("c_char"),
    Col("c_varchar"),
    Col("c_text"),
    *[
        Col(name, source=out(name))
        for name in (
            "c_citext",
            "c_inet",
            "c_cidr",
            "c_macaddr",
            "c_macaddr8",
            "c_int4range",
            "c_int8range",
            "c_numrange",
            "c_tsrange",
            "c_tstzrange",
            "c_daterange",
            "c_json",
            "c_jsonb",
            "c_xml",
            "c_uuid",
            "c_ltree",
            "c_mood",
            "c_box",
            "c_polygon",
            "c_tsvector",
        )
    ],
    Col("c_date"),
    Col("c_time", source=micros_of_day("c_time")),  # bigint µs past midnight
    Col("c_time3", source=micros_of_day("c_time3")),
    # ZonedTime: ISO text in UTC; the source's time of day at UTC, in µs
    Col(
        "c_timetz",
        source=micros_of_day("(c_timetz AT TIME ZONE 'UTC')::time"),
        convert=_micros_of_iso_time,
    ),
    Col("c_ts"),  # timestamp_ntz: the wall clock
    Col("c_ts3"),
    Col(  # ZonedTimestamp: the UTC instant
        "c_tstz",
        source="(extract(epoch FROM c_tstz) * 1000000)::bigint",
        silver="unix_micros(c_tstz)",
    ),
    Col(  # MicroDuration: months of 365.25/12 days, computed here in exact numeric SQL
        "c_interval",
        source="((extract(year FROM c_interval) * 12 + extract(month FROM c_interval))"
        " * 2629800000000 + extract(day FROM c_interval) * 86400000000"
        " + extract(hour FROM c_interval) * 3600000000"
        " + extract(minute FROM c_interval) * 60000000"
        " + extract(second FROM c_interval) * 1000000)::bigint",
    ),
    Col("c_bytea"),
    # hstore.handling.mode json: a JSON object text
    Col("c_hstore", source="public.hstore_to_json(c_hstore)", convert=json.loads),
    Col("c_price"),
    Col("c_point_x", source="c_point[0]", silver="c_point.x"),
    Col("c_point_y", source="c_point[1]", silver="c_point.y"),
    Col(
        "c_point_wkb",
        source="CASE WHEN c_point IS NOT NULL THEN ARRAY[c_point[0], c_point[1]] END",
        silver="c_point.wkb",
        convert=_point_of_wkb,
    ),
    Col("c_int_array"),
    Col("c_text_array"),
    Col("c_oid", source="c_oid::bigint"),
]
TYPES_DECODED = {
    "c_bool": "boolean",
    "c_bit1": "boolean",
    "c_bits": "binary",
    "c_int2": "smallint",
    "c_int8": "bigint",
    "c_float4": "float",
    "c_numeric": "decimal(10,3)",
    "c_numeric_free": "string",
    "c_price": "decimal(8,2)",
    "c_date": "date",
    "c_time": "bigint",
    "c_time3": "bigint",
    "c_timetz": "string",
    "c_ts": "timestamp_ntz",
    "c_ts3": "timestamp_ntz",
    "c_tstz": "timestamp",
    "c_interval": "bigint",
    "c_bytea": "binary",
    "c_point": "struct<x:double,y:double,wkb:binary,srid:int>",
    "c_int_array": "array<int>",
    "c_oid": "bigint",
}
"""docs/silver.md's decoding table, for some columns: silver's Spark types."""


def test_every_type_of_the_guide_snapshot_and_stream(spark: Any, pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(TYPES_DDL.format(s=s))
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        for values in TYPES_ROWS:
            conn.execute(f"INSERT INTO {s}.all_types VALUES ({values})")
        conn.execute(f"INSERT INTO {s}.all_types (id) VALUES (4)")  # every column NULL
    # Debezium's lossy MicroDuration, checked here; the exact default: test_type_fidelity
    config = pg.config(**{"interval.handling.mode": "numeric"})
    lake = tmp_path / "lake"
    land(config, lake)  # the snapshot: rows 1-4
    # the same rows streamed (a different path through the agent), then changes
    pg.sql(
        f"INSERT INTO {s}.all_types SELECT id + 10, {TYPES_COLUMNS} FROM {s}.all_types",
        f"UPDATE {s}.all_types a SET ({TYPES_COLUMNS}) = "
        f"(SELECT {TYPES_COLUMNS} FROM {s}.all_types b WHERE b.id = 2) WHERE a.id = 1",
        f"UPDATE {s}.all_types a SET ({TYPES_COLUMNS}) = "
        f"(SELECT {TYPES_COLUMNS} FROM {s}.all_types b WHERE b.id = 1 + 10) WHERE a.id = 4",
        f"UPDATE {s}.all_types a SET ({TYPES_COLUMNS}) = "
        f"(SELECT {TYPES_COLUMNS} FROM {s}.all_types b WHERE b.id = 4 + 10) WHERE a.id = 3",
        f"DELETE FROM {s}.all_types WHERE id = 12",
    )
    land(config, lake)
    assert len(data(lake)) == 4 + 4 + 3 + 1
    run_silver(spark, lake)
    assert assert_silver_equals_source(spark, pg, lake, "all_types", TYPES_COMPARED) == 7
    table = spark.read.format("delta").load(str(silver_path(lake, s, "all_types")))
    decoded = {f.name: f.dataType.simpleString() for f in table.schema.fields}
    assert {c: decoded[c] for c in TYPES_DECODED} == TYPES_DECODED


# --- one transaction larger than max.transaction.size -------------------------------------------

BIG_TX_ROWS = 20_000
"""Rows of the big transaction: with the snapshot's rows and the updates, deletes and key moves
of the same transaction it is about 27,500 events, more than :data:`BIG_TX_MAX_EVENTS`."""
BIG_TX_MAX_EVENTS = 20_000
"""``max.transaction.size`` for the test (the default is 100,000)."""
BIG_TX_BATCH = 4_000
"""``max.batch.size`` for the test: a fifth of the transaction size, as in the defaults
(20,000 and 100,000). The test ran at the defaults with 100,000 rows until 2026-11-28 (it
passed them explicitly, so it never guarded the defaults themselves); the cut across batches,
the one transaction id and silver's equality are the same at a fifth of the size
(docs/benchmarks.md, "The test suite")."""


@pytest.mark.slow
def test_a_transaction_larger_than_max_transaction_size(spark: Any, pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.big (id int PRIMARY KEY, v text, n int)",
        f"INSERT INTO {s}.big SELECT -g, 'snapshot', g FROM generate_series(1, 10) g",
    )
    config = pg.config(**{"provide.transaction.metadata": True})
    lake = tmp_path / "lake"
    land(config, lake)
    with psycopg.connect(pg.dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(
            f"INSERT INTO {s}.big SELECT g, md5(g::text), g FROM generate_series(1, %s) g",
            (BIG_TX_ROWS,),
        )
        conn.execute(f"UPDATE {s}.big SET n = n * 2 WHERE id % 7 = 0")
        conn.execute(f"DELETE FROM {s}.big WHERE id % 11 = 0 OR id = -1")
        conn.execute(f"UPDATE {s}.big SET id = id + 1000000 WHERE id % 13 = 0")
    started = time.monotonic()
    land(config, lake, max_events=BIG_TX_BATCH, max_tx=BIG_TX_MAX_EVENTS)
    landed_s = time.monotonic() - started
    # Only the columns checked here: parsing every value into dicts (``rows``) proves nothing more.
    landed = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table(
        columns=[S.KIND, S.SNAPSHOT, S.TX_PARTIAL, S.TX_ID]
    )
    events = [r for r in landed.to_pylist() if r[S.KIND] == "data" and r[S.SNAPSHOT] == "false"]
    assert len(events) > BIG_TX_MAX_EVENTS
    assert any(r[S.TX_PARTIAL] for r in events)  # the transaction was cut across batches
    assert len({r[S.TX_ID] for r in events}) == 1
    assert_positions_unique_and_ordered(lake)
    started = time.monotonic()
    run_silver(spark, lake)
    applied_s = time.monotonic() - started
    compared = assert_silver_equals_source(spark, pg, lake, "big", [Col("v"), Col("n")])
    assert compared == BIG_TX_ROWS - BIG_TX_ROWS // 11 + 9
    print(f"{BIG_TX_ROWS:,} rows: landed in {landed_s:.1f} s, applied in {applied_s:.1f} s")


def test_snapshot_resumed_after_a_crash_while_rows_move(spark: Any, pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    create_docs(pg, random.Random(5), rows_per_table=30)
    config = pg.config()
    lake = tmp_path / "lake"
    agent = LandingAgent(
        create_source(config), BronzeWriter(BronzeTables.under(lake)), max_events=10
    )
    first = agent.run(max_batches=1)  # stops inside the snapshot, as a crash there would
    # preconditions of the scenario: the first run must stop inside the snapshot
    if first.offset is None or first.offset["phase"] != "snapshot":
        pytest.fail(f"the first run should stop inside the snapshot: {first.offset}")
    # after the slot's point, before the snapshot resumes: rows not read yet move, TOAST unchanged
    pg.sql(
        f"UPDATE {s}.docs SET id = 1000 WHERE id = 20",
        f"UPDATE {s}.docs SET id = 1001 WHERE id = 25",
        f"UPDATE {s}.docs SET id = 1002 WHERE id = 1001",
    )
    land(config, lake)  # resumes the snapshot (a fresh one), then streams from the slot's point
    if placeholders(lake, "docs") != 3:
        pytest.fail("the three key moves should carry TOAST placeholders")
    result = SilverJob(spark, lake).run_once()
    assert assert_silver_equals_source(spark, pg, lake, "docs", DOC_COLUMNS) == 30
    assert result.quarantined == 0, _quarantine(spark, lake)


def test_a_row_moved_five_times_in_one_batch(spark: Any, pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    create_docs(pg, random.Random(9), rows_per_table=3)
    config = pg.config()
    lake = tmp_path / "lake"
    land(config, lake)
    pg.sql(*[f"UPDATE {s}.docs SET id = {10 * (i + 1)} WHERE id = {10 * i or 1}" for i in range(5)])
    land(config, lake)
    if placeholders(lake, "docs") != 5:
        pytest.fail("the five key moves should carry TOAST placeholders")
    result = SilverJob(spark, lake).run_once()  # one micro-batch: snapshot and the five moves
    assert assert_silver_equals_source(spark, pg, lake, "docs", DOC_COLUMNS) == 3
    assert result.quarantined == 0, _quarantine(spark, lake)
