"""Reconciliation that cannot be fooled: an independent read of the source compared with silver
value by value (``gold/source_read``, ``gold/reconcile_compare``), against the real PostgreSQL
15 (``pg``) and MariaDB 10.11 (``mariadb_conn``) and the shared Spark session.

Each test lands a tiny table of edge values with the project's agent, applies it with
``SilverJob``, checks that every value compares equal, then corrupts silver on purpose (Delta
SQL on the silver table, the cut pointed at the corrupted version) in each way the agent or
silver could go wrong, and asserts that reconcile names every corruption with its column. A
lossy handling mode is configured and must come out as "not comparable", never as equal.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from gold.cuts import Cut, latest_cut
from gold.reconcile import NOT_COMPARABLE_CHECK, TableReconciliation, reconcile_source
from gold.reconcile_compare import TableValues
from pipeline.cli import cli
from pipeline.config import PipelineConfig
from pipeline.sql import quote_identifier
from silver.job import SilverJob
from tests.integration.test_mysql_capture import My
from tests.integration.test_mysql_capture import land as land_mysql
from tests.integration.test_mysql_reconcile import my
from tests.integration.test_pg_capture import Pg, land, pg, raw_config

pytestmark = [pytest.mark.postgres, pytest.mark.mysql, pytest.mark.spark, pytest.mark.delta]

__all__ = ["my", "pg"]  # the fixtures, re-used from test_mysql_reconcile and test_pg_capture


def corrupt(spark: Any, lake: Path, cut: Cut, collection: str, *statements: str) -> Cut:
    """Run Delta SQL statements on a table's silver copy; the cut at the version they made."""
    (table,) = [t for t in cut.tables.values() if t.collection == collection]
    path = str((lake / "silver" / table.silver_table).absolute())
    for statement in statements:
        spark.sql(statement.format(t=f"delta.{quote_identifier(path)}"))
    moved = dataclasses.replace(table, version=DeltaTable(path).version())
    return dataclasses.replace(cut, tables={**cut.tables, table.silver_table: moved})


def add_copy(spark: Any, lake: Path, cut: Cut, collection: str, key: str, value: int) -> Cut:
    """Append a copy of the first silver row under another key (a row the source lacks)."""
    from pyspark.sql import functions as F

    (table,) = [t for t in cut.tables.values() if t.collection == collection]
    path = str((lake / "silver" / table.silver_table).absolute())
    frame = spark.read.format("delta").load(path).limit(1)
    frame.withColumn(key, F.lit(value).cast(dict(frame.dtypes)[key])).write.format("delta").mode(
        "append"
    ).save(path)
    moved = dataclasses.replace(table, version=DeltaTable(path).version())
    return dataclasses.replace(cut, tables={**cut.tables, table.silver_table: moved})


def quarantine_value(
    spark: Any, lake: Path, source: str, collection: str, key: str, column: str
) -> None:
    """Record a quarantined value in ``silver/_quarantine`` as silver does for C1."""
    row = (source, collection, key, "value", column, "00:00:00", "no representation (test)")
    frame = spark.createDataFrame(
        [row],
        "source string, collection string, key string, kind string, column string, "
        "value_text string, reason string",
    )
    path = str((lake / "silver" / "_quarantine").absolute())
    frame.write.format("delta").mode("append").option("mergeSchema", "true").save(path)


def values_of(result: Any, collection: str) -> tuple[TableReconciliation, TableValues]:
    (table,) = [t for t in result.tables if t.collection == collection]
    assert table.values is not None
    return table, table.values


def differing(values: TableValues) -> dict[str, tuple[int, tuple[str, ...]]]:
    """Column -> (differing rows, example keys)."""
    return {
        c.column: (c.differing, tuple(e.key for e in c.examples))
        for c in values.columns
        if c.differing
    }


# --- PostgreSQL -----------------------------------------------------------------------------

PG_ROWS = (
    "(1, 9223372036854775807, 12.34, date '2024-02-29', timestamp '2024-01-01 10:00:00.123456', "
    "'NaN', interval '1 mon 2 days 03:04:05.678901', '{\"a\": 1,  \"b\": [1, 2]}', "
    "'\\xdeadbeef', true, 'x', time '24:00:00')",
    "(2, -9223372036854775808, 0.01, date '0001-01-01', timestamp '1970-01-01 00:00:00.000001', "
    "'-Infinity', interval '-00:00:01.5', '[ ]', '\\x', false, 'a \"quoted\" text', "
    "time '00:00:00')",
    "(3, 0, -99.99, date '1582-10-04', timestamp '1582-10-04 12:00:00', 5e-324, "
    "interval '1 year -1 month -2 days 100:00:00', 'null', '\\x00ff', NULL, NULL, NULL)",
    "(4, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)",
)


def create_edges(pg: Pg) -> str:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.edges (id int PRIMARY KEY, big bigint, amount numeric(12,2), d date, "
        "ts timestamp, f double precision, iv interval, j json, b bytea, flag boolean, "
        "name text, t time)",
        f"INSERT INTO {s}.edges VALUES " + ", ".join(PG_ROWS),
        # Arrays (quoting, NULL elements, empty), bit strings, variable-scale numeric, uuid.
        f"ALTER TABLE {s}.edges ADD COLUMN arr int[], ADD COLUMN tags text[], "
        "ADD COLUMN bits bit(10), ADD COLUMN vb varbit(20), ADD COLUMN n numeric, "
        "ADD COLUMN uid uuid",
        f"UPDATE {s}.edges SET arr = '{{1,NULL,3}}', "
        "tags = ARRAY['a,b', 'NULL', 'x\"y', '', NULL, 'back\\slash', 'two words'], "
        "bits = B'1010000001', vb = B'0010', n = 1.500, "
        "uid = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11' WHERE id = 1",
        f"UPDATE {s}.edges SET arr = '{{}}', tags = '{{}}', bits = B'0000000000', vb = B'', "
        "n = -0.000000000000000000000000000001, "
        "uid = '00000000-0000-0000-0000-000000000000' WHERE id = 2",
        f"UPDATE {s}.edges SET arr = '{{-2147483648}}', tags = ARRAY['plain'], "
        "bits = B'1111111111', vb = B'11111111111111111111', n = 1e40 WHERE id = 3",
    )
    return f"{s}.edges"


def landed(
    spark: Any, lake: Path, raw: dict[str, Any], agent: Callable[[Any, Path], Any]
) -> tuple[Cut, PipelineConfig]:
    """Land the source with its agent, apply silver; the newest cut and the pipeline config."""
    config = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
    agent(config.source(raw["name"]), lake)
    SilverJob(spark, lake).run_once()
    cut = latest_cut(lake, raw["name"])
    assert cut is not None
    return cut, config


def test_postgres_every_corruption_is_found_with_its_column(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    edges = create_edges(pg)
    cut, config = landed(spark, lake, raw_config(pg), land)

    result = reconcile_source(spark, config, lake, "pg", cut=cut, record=False)
    table, values = values_of(result, edges)
    assert values.clean, values.findings()
    assert values.not_comparable == () and table.not_comparable == ()
    assert (values.source_rows, values.silver_rows) == (4, 4)
    assert {c.status for c in values.columns} == {"compared"}
    assert table.success and result.success

    corrupted = corrupt(
        spark,
        lake,
        cut,
        edges,
        "UPDATE {t} SET name = NULL WHERE id = 1",  # a value set NULL
        "UPDATE {t} SET f = NULL WHERE id = 1",  # NaN became NULL
        'UPDATE {t} SET j = \'{{"a":1,"b":[1,2]}}\' WHERE id = 1',  # json spacing
        "UPDATE {t} SET iv = 'P0Y1M2DT3H4M5.678S' WHERE id = 1",  # an approximated interval
        "UPDATE {t} SET d = date_add(d, 1) WHERE id = 2",  # a date shifted by one day
        "UPDATE {t} SET big = big + 1 WHERE id = 2",  # an integer off by one
        "UPDATE {t} SET arr = array(0) WHERE id = 2",  # an empty array got an element
        "DELETE FROM {t} WHERE id = 3",  # a dropped row
    )
    corrupted = add_copy(spark, lake, corrupted, edges, "id", 99)  # a row the source lacks
    # A value the agent could not represent: NULL in silver, recorded in silver/_quarantine
    # (C1, kind 'value'). It is counted as quarantined: neither equal nor a difference.
    corrupted = corrupt(spark, lake, corrupted, edges, "UPDATE {t} SET t = NULL WHERE id = 2")
    quarantine_value(spark, lake, "pg", edges, '{"id":2}', "t")
    result = reconcile_source(spark, config, lake, "pg", cut=corrupted, record=False)
    table, values = values_of(result, edges)
    assert not table.success and not result.success
    assert (values.missing, values.missing_keys) == (1, ('{"id":3}',))
    assert (values.extra, values.extra_keys) == (1, ('{"id":99}',))
    assert values.differing_rows == 2 and values.unreadable == 0
    assert differing(values) == {
        "name": (1, ('{"id":1}',)),
        "f": (1, ('{"id":1}',)),
        "j": (1, ('{"id":1}',)),
        "iv": (1, ('{"id":1}',)),
        "d": (1, ('{"id":2}',)),
        "big": (1, ('{"id":2}',)),
        "arr": (1, ('{"id":2}',)),
    }
    (t,) = [c for c in values.columns if c.column == "t"]
    assert (t.differing, t.quarantined) == (0, 1)
    examples = {c.column: c.examples[0] for c in values.columns if c.examples}
    assert (examples["f"].source, examples["f"].silver) == ("NaN", None)
    assert (examples["iv"].source, examples["iv"].silver) == (
        "1 2 11045678901",
        "1 2 11045678000",
    )
    assert examples["j"].source == '{"a": 1,  "b": [1, 2]}'
    assert examples["d"].source == str(-719162) and examples["d"].silver == str(-719161)
    # The findings reach the check outcome and the CLI rows.
    (outcome,) = [o for o in result.outcomes() if o.table == edges]
    assert not outcome.success and "values: iv: 1 differing" in outcome.details
    rows = {(r["column"], r["finding"]) for r in result.value_rows()}
    assert {("d", "differing"), ("", "missing in silver"), ("", "extra in silver")} <= rows


def test_postgres_lossy_modes_and_masks_are_not_comparable(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    edges = create_edges(pg)
    extra = {
        "interval.handling.mode": "numeric",
        "column.mask.hash.SHA-256.with.salt.s4lt": rf"{pg.schema}\.edges\.name",
    }
    cut, config = landed(spark, lake, raw_config(pg, **extra), land)

    result = reconcile_source(spark, config, lake, "pg", cut=cut, record=False)
    table, values = values_of(result, edges)
    assert values.clean, values.findings()
    assert dict(c.split(": ", 1) for c in table.not_comparable) == {
        "iv": "lossy by config interval.handling.mode=numeric",
        "name": (
            rf"lossy by config column.mask.hash.SHA-256.with.salt.s4lt={pg.schema}\.edges\.name"
        ),
    }
    # Every other column is compared and equal; the table passes, with a warning of its own.
    assert table.success
    warning = [o for o in result.outcomes() if o.check == NOT_COMPARABLE_CHECK]
    assert len(warning) == 1 and not warning[0].success and warning[0].table == edges
    printed = {r["column"]: r["detail"] for r in result.value_rows() if r["column"]}
    assert set(printed) == {"iv", "name"}
    assert printed["iv"] == "lossy by config interval.handling.mode=numeric"


# --- MariaDB --------------------------------------------------------------------------------


def create_my_edges(my: My) -> str:
    d = my.database
    my.sql(
        f"CREATE TABLE {d}.edges (id INT PRIMARY KEY, u BIGINT UNSIGNED, amount DECIMAL(10,2), "
        "d DATE, dt DATETIME(6), t TIME(6), dbl DOUBLE, j JSON, name VARCHAR(20), "
        "bin VARBINARY(8), e ENUM('a','b'))",
        f"INSERT INTO {d}.edges VALUES "
        "(1, 18446744073709551615, 99999999.99, '2024-02-29', '9999-12-31 23:59:59.999999', "
        "'838:59:59', 0.1, '{\"a\":  1}', 'x', x'00ff', 'a'), "
        "(2, 9223372036854775808, -0.01, '1000-01-01', '1000-01-01 00:00:00', "
        "'-00:00:00.000001', -2.2250738585072014e-308, '[ ]', '', x'', 'b'), "
        "(3, 0, 0, '1970-01-01', '1970-01-01 00:00:00.5', '24:00:00', 1e308, 'null', NULL, "
        "NULL, NULL)",
    )
    return f"{d}.edges"


def test_mariadb_corruptions_are_found_and_long_unsigned_is_not_comparable(
    spark: Any, my: My, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    edges = create_my_edges(my)
    cut, config = landed(spark, lake, my.raw(), land_mysql)

    result = reconcile_source(spark, config, lake, "my", cut=cut, record=False)
    table, values = values_of(result, edges)
    assert values.clean and values.not_comparable == (), values.findings()
    assert table.success

    corrupted = corrupt(
        spark,
        lake,
        cut,
        edges,
        "UPDATE {t} SET u = -1 WHERE id = 1",  # unsigned wrapped to negative
        "UPDATE {t} SET d = date_add(d, -1) WHERE id = 2",  # a date shifted
        "UPDATE {t} SET amount = NULL WHERE id = 2",  # a value set NULL
        "UPDATE {t} SET j = '{{\"a\":1}}' WHERE id = 1",  # json spacing
        "DELETE FROM {t} WHERE id = 3",
    )
    result = reconcile_source(spark, config, lake, "my", cut=corrupted, record=False)
    table, values = values_of(result, edges)
    assert not table.success
    assert (values.missing, values.missing_keys, values.extra) == (1, ('{"id":3}',), 0)
    assert differing(values) == {
        "u": (1, ('{"id":1}',)),
        "d": (1, ('{"id":2}',)),
        "amount": (1, ('{"id":2}',)),
        "j": (1, ('{"id":1}',)),
    }
    (u,) = [c for c in values.columns if c.column == "u"]
    assert (u.examples[0].source, u.examples[0].silver) == ("18446744073709551615", "-1")

    # Debezium's lossy default for unsigned: the agent wraps, reconcile says so.
    lossy_lake = tmp_path / "lossy"
    extra = {"bigint.unsigned.handling.mode": "long"}
    cut, config = landed(spark, lossy_lake, my.raw(**extra), land_mysql)
    result = reconcile_source(spark, config, lossy_lake, "my", cut=cut, record=False)
    table, values = values_of(result, edges)
    assert table.not_comparable == ("u: lossy by config bigint.unsigned.handling.mode=long",)
    assert values.clean and table.success
    assert [o.check for o in result.outcomes()] == [NOT_COMPARABLE_CHECK, "reconcile"]

    # `medallion reconcile` prints the per-column findings; not comparable is not a failure.
    config_file = tmp_path / "pipeline.yaml"
    config_file.write_text(
        json.dumps({"lake": {"root": str(lossy_lake)}, "sources": [my.raw(**extra)]})
    )
    out = CliRunner().invoke(cli, ["--config", str(config_file), "reconcile", "my"])
    assert out.exit_code == 0, out.output
    assert "reconcile my: values" in out.output
    (line,) = [line for line in out.output.splitlines() if "not comparable" in line]
    assert line.split()[1:3] == ["u", "not"]
    assert "lossy by config bigint.unsigned.handling.mode=long" in line
