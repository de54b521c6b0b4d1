"""Which columns reconciliation reports as not comparable (``gold/reconcile_lossy.py``), and the
independent readers' choice of canonical form per source type (``gold/source_read``)."""

from __future__ import annotations

from typing import Any

import pytest

from capture.mysql.config import MySqlSourceConfig
from capture.postgresql.config import PostgresSourceConfig
from gold.reconcile_lossy import lossy_by_config
from gold.source_read import Canon, Family, SourceColumn
from gold.source_read import mysql as my_read
from gold.source_read import pg as pg_read

pytestmark = pytest.mark.unit


def pg_config(**extra: Any) -> PostgresSourceConfig:
    raw = {
        "name": "pg",
        "connector": "postgresql",
        "database.hostname": "localhost",
        "database.user": "u",
        "database.dbname": "d",
        "topic.prefix": "p",
        **extra,
    }
    return PostgresSourceConfig.model_validate(raw)


def my_config(**extra: Any) -> MySqlSourceConfig:
    raw = {
        "name": "my",
        "connector": "mariadb",
        "database.hostname": "localhost",
        "database.user": "u",
        "topic.prefix": "p",
        **extra,
    }
    return MySqlSourceConfig.model_validate(raw)


INTERVAL = SourceColumn("iv", "interval", Canon.INTERVAL, Family.INTERVAL)
UNSIGNED = SourceColumn("u", "bigint(20) unsigned", Canon.INTEGER, Family.UNSIGNED_BIGINT)
NUMERIC = SourceColumn("n", "numeric(10,2)", Canon.DECIMAL, Family.DECIMAL)
TIME = SourceColumn("t", "time", Canon.INTEGER, Family.TIME)
TEXT = SourceColumn("email", "text", Canon.TEXT)


def test_the_exact_defaults_are_comparable() -> None:
    for column in (INTERVAL, NUMERIC, TIME, TEXT):
        assert lossy_by_config(pg_config(), "s.t", column) is None
    assert lossy_by_config(my_config(), "db.t", UNSIGNED) is None


@pytest.mark.parametrize(
    ("config", "column", "reason"),
    [
        (pg_config(**{"interval.handling.mode": "numeric"}), INTERVAL,
         "interval.handling.mode=numeric"),
        (my_config(**{"bigint.unsigned.handling.mode": "long"}), UNSIGNED,
         "bigint.unsigned.handling.mode=long"),
        (pg_config(**{"decimal.handling.mode": "double"}), NUMERIC, "decimal.handling.mode=double"),
        (pg_config(**{"time.precision.mode": "connect"}), TIME, "time.precision.mode=connect"),
        (pg_config(**{"column.truncate.to.3.chars": r"s\.t\.email"}), TEXT,
         r"column.truncate.to.3.chars=s\.t\.email"),
        (pg_config(**{"column.mask.with.4.chars": r"S\.T\.EMAIL"}), TEXT,
         r"column.mask.with.4.chars=S\.T\.EMAIL"),
    ],
)  # fmt: skip
def test_lossy_modes_and_column_rules_are_named(config: Any, column: Any, reason: str) -> None:
    assert lossy_by_config(config, "s.t", column) == f"lossy by config {reason}"


def test_a_rule_for_another_column_or_another_type_does_not_apply() -> None:
    config = pg_config(**{"column.truncate.to.3.chars": r"s\.t\.other"})
    assert lossy_by_config(config, "s.t", TEXT) is None
    assert lossy_by_config(pg_config(**{"interval.handling.mode": "numeric"}), "s.t", TIME) is None


def test_postgres_types_get_their_canonical_form() -> None:
    def canon(typname: str, typtype: str = "b", element: str | None = None) -> Canon:
        column, _sql = pg_read.column_for("c", typname, typname, typtype, element, -1)
        return column.canon

    assert canon("int8") is Canon.INTEGER and canon("numeric") is Canon.DECIMAL
    assert canon("float4") is Canon.FLOAT32 and canon("date") is Canon.DAYS
    assert canon("timestamptz") is Canon.MICROS and canon("interval") is Canon.INTERVAL
    assert canon("mood", typtype="e") is Canon.TEXT and canon("jsonb") is Canon.TEXT
    assert canon("_int4", element="int4") is Canon.ARRAY
    assert canon("_point", element="point") is Canon.NONE
    time, sql = pg_read.column_for("t", "time", "time", "b", None, -1)
    assert time.canon is Canon.INTEGER and time.family is Family.TIME and "epoch" in sql
    money, sql = pg_read.column_for("m", "money", "money", "b", None, -1)
    assert money.canon is Canon.DECIMAL and sql == "{c}::numeric::text"
    bits, _sql = pg_read.column_for("b", "bit(10)", "bit", "b", None, 10)
    assert bits.canon is Canon.BITS and bits.length == 10
    other, _sql = pg_read.column_for("g", "timetz", "timetz", "b", None, -1)
    assert other.canon is Canon.NONE and "timetz" in other.why_not


def test_mysql_types_get_their_canonical_form() -> None:
    unsigned, sql, _convert = my_read.column_for("u", "bigint(20) unsigned", "bigint")
    assert unsigned.family is Family.UNSIGNED_BIGINT and sql == "CAST({c} + 0 AS CHAR)"
    signed, _sql, _convert = my_read.column_for("s", "bigint(20)", "bigint")
    assert signed.family is Family.INTEGER
    date, sql, _convert = my_read.column_for("d", "date", "date")
    assert date.canon is Canon.DAYS and "invalid " in sql
    time, _sql, convert = my_read.column_for("t", "time(6)", "time")
    assert time.family is Family.TIME and convert("-838:59:59.000000") == "-3020399000000"
    with pytest.raises(ValueError, match="not a TIME text"):
        convert("soon")
    geometry, _sql, _convert = my_read.column_for("g", "point", "point")
    assert geometry.canon is Canon.NONE


def test_oracle_numeric_intervals_stay_comparable() -> None:
    # An Oracle INTERVAL holds one unit family (YEAR TO MONTH or DAY TO SECOND), so numeric
    # encodes it one to one; PostgreSQL's mixes months with days and time: lossy.
    from capture.oracle.config import OracleSourceConfig

    raw = {"name": "ora", "connector": "oracle", "topic.prefix": "p", "database.user": "u"}
    raw |= {"database.dbname": "ORCLCDB", "database.hostname": "h"}
    oracle = OracleSourceConfig.model_validate(raw)
    assert oracle.interval_handling_mode == "numeric"
    column = SourceColumn("IV", "INTERVAL DAY(2) TO SECOND(6)", Canon.INTERVAL, Family.INTERVAL)
    assert lossy_by_config(oracle, "S.T", column) is None
    assert lossy_by_config(pg_config(**{"interval.handling.mode": "numeric"}), "s.t", INTERVAL)
