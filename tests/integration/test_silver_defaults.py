"""Column defaults (contract C4) through silver, against the real PostgreSQL and MariaDB with the
project's agents: rows that existed before ``ALTER TABLE ... ADD COLUMN ... DEFAULT`` show the
default in silver as in the source; a default nobody can reproduce is recorded in
``silver/_resnapshot`` and shown by ``status`` and the ``resnapshot`` check, never guessed."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from gold.checks import CheckContext, check_resnapshot
from gold.cuts import latest_cut
from pipeline.config import TableOptions, load_config
from pipeline.status import pipeline_status
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from silver.resnapshot import needing_resnapshot
from tests.integration import test_mysql_capture as mysql_capture
from tests.integration.test_mysql_capture import My, my
from tests.integration.test_pg_capture import Pg, land, pg

pytestmark = [pytest.mark.spark, pytest.mark.delta]

__all__ = ["my", "pg"]  # the fixtures, re-used


def _silver(
    spark: Any, lake: Path, source: str, collection: str, columns: list[str]
) -> dict[Any, Any]:
    path = lake / "silver" / silver_table_name(source, collection)
    frame = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
    return {r["id"]: tuple(r[c] for c in columns) for r in frame.collect()}


def _history_current(
    spark: Any, lake: Path, source: str, collection: str, column: str
) -> dict[Any, Any]:
    path = lake / "silver" / (silver_table_name(source, collection) + "__history")
    frame = spark.read.format("delta").load(str(path)).where("_cdc_is_current AND NOT _cdc_deleted")
    return {r["id"]: r[column] for r in frame.collect()}


def _config(tmp_path: Path, lake: Path, source: str) -> Any:
    """A config naming the lake and the source (as a file source: status reads no server)."""
    path = tmp_path / "status.yaml"
    path.write_text(
        f"lake: {{root: {lake}}}\n"
        f"sources:\n  - name: {source}\n    connector: debezium_json\n    path: inbox\n"
    )
    return load_config(path)


def _history(_source: str, collection: str) -> TableOptions:
    return TableOptions(history=collection.endswith("orders"))


@pytest.mark.postgres
def test_postgresql_added_column_default_fills_older_rows(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.orders (id int PRIMARY KEY, qty int)",
        f"CREATE TABLE {s}.draws (id int PRIMARY KEY)",
        f"INSERT INTO {s}.orders SELECT g, g FROM generate_series(1, 4) g",
        f"INSERT INTO {s}.draws VALUES (1), (2)",
    )
    config = pg.config()
    lake = tmp_path / "lake"
    land(config, lake)
    SilverJob(spark, lake, table_options=_history).run_once()
    pg.sql(
        f"UPDATE {s}.orders SET qty = 40 WHERE id = 4",  # an event older than the ALTER
        f"ALTER TABLE {s}.orders ADD COLUMN channel text DEFAULT 'web'",
        f"ALTER TABLE {s}.orders ADD COLUMN price numeric(6,2) NOT NULL DEFAULT 9.5",
        f"ALTER TABLE {s}.orders ADD COLUMN note text",
        f"UPDATE {s}.orders SET channel = 'shop', note = 'n' WHERE id = 2",
        f"INSERT INTO {s}.orders (id, qty, channel, price) VALUES (5, 5, NULL, 1)",
        f"ALTER TABLE {s}.draws ADD COLUMN r float8 DEFAULT random()",
        f"INSERT INTO {s}.draws (id) VALUES (3)",
    )
    land(config, lake)
    SilverJob(spark, lake, table_options=_history).run_once()

    columns = ["qty", "channel", "price", "note"]
    expected = {
        r[0]: tuple(r[1:])
        for r in pg.query(f"SELECT id, qty, channel, price, note FROM {s}.orders")
    }
    assert expected[1] == (1, "web", Decimal("9.50"), None)  # what PostgreSQL shows
    assert _silver(spark, lake, "pg", f"{s}.orders", columns) == expected
    assert _history_current(spark, lake, "pg", f"{s}.orders", "channel") == {
        k: v[1] for k, v in expected.items()
    }
    # a replay of everything changes nothing, and nothing is recorded for orders
    assert SilverJob(spark, lake, table_options=_history).run_once().batches == 0
    # draws: random() gave every existing row its own value; silver keeps NULL and says so
    draws = _silver(spark, lake, "pg", f"{s}.draws", ["r"])
    assert draws[1] == (None,) and draws[3][0] is not None
    (entry,) = needing_resnapshot(lake)
    assert (entry.source, entry.collection, entry.column) == ("pg", f"{s}.draws", "r")
    assert "random()" in entry.reason
    config = _config(tmp_path, lake, "pg")
    sources, tables = pipeline_status(config, lake)
    assert sources[0]["tables_needing_resnapshot"] == 1
    flagged = {t["table"]: t["needs_resnapshot"] for t in tables}
    assert flagged[f"{s}.orders"] is None
    assert "r: " in flagged[f"{s}.draws"] and "random()" in flagged[f"{s}.draws"]
    # the quality check says so too
    cut = latest_cut(lake, "pg")
    assert cut is not None
    context = CheckContext(spark, config, lake, cut, dt.datetime.now(dt.UTC))
    outcomes = {o.table: o for o in check_resnapshot(context)}
    assert outcomes[f"{s}.orders"].success and not outcomes[f"{s}.draws"].success
    assert "random()" in outcomes[f"{s}.draws"].sample[0]


@pytest.mark.mysql
def test_mariadb_added_column_default_fills_older_rows(spark: Any, my: My, tmp_path: Path) -> None:
    d = my.database
    my.sql(
        f"CREATE TABLE {d}.orders (id INT PRIMARY KEY, qty INT)",
        f"INSERT INTO {d}.orders VALUES (1, 1), (2, 2), (3, 3)",
    )
    config = my.config()
    lake = tmp_path / "lake"
    mysql_capture.land(config, lake)
    SilverJob(spark, lake).run_once()
    my.sql(
        f"ALTER TABLE {d}.orders ADD COLUMN channel VARCHAR(10) DEFAULT 'web'",
        f"ALTER TABLE {d}.orders ADD COLUMN n INT NOT NULL",
        f"ALTER TABLE {d}.orders ADD COLUMN u VARCHAR(36) DEFAULT (uuid())",
        f"UPDATE {d}.orders SET channel = 'shop' WHERE id = 2",
        f"INSERT INTO {d}.orders (id, qty, n) VALUES (4, 4, 7)",
    )
    mysql_capture.land(config, lake)
    SilverJob(spark, lake).run_once()
    expected = {r[0]: tuple(r[1:]) for r in my.query(f"SELECT id, qty, channel, n FROM {d}.orders")}
    assert expected[1] == (1, "web", 0)
    assert _silver(spark, lake, "my", f"{d}.orders", ["qty", "channel", "n"]) == expected
    (entry,) = needing_resnapshot(lake)
    assert (entry.collection, entry.column) == (f"{d}.orders", "u")
    assert "uuid()" in entry.reason


REAL = Path(__file__).resolve().parent.parent / "fixtures" / "debezium_real"


@pytest.mark.parametrize("name", ["pg_shop", "mariadb_shop"])
def test_debezium_3_added_column_default_fills_older_rows(
    spark: Any, tmp_path: Path, name: str
) -> None:
    """Recorded Debezium 3.x output for ``ADD COLUMN channel varchar(10) DEFAULT 'web'``
    carries ``"default": "web"``; silver reads it as the agents' and fills older rows."""
    import orjson
    from pyspark.sql.types import StringType, StructField, StructType

    from silver import defaults as D

    row_schema = None
    for line in (REAL / f"{name}.jsonl").read_bytes().splitlines():
        value = orjson.loads(line).get("value") or {}
        fields = (value.get("schema") or {}).get("fields") or []
        after = next((f for f in fields if f.get("field") == "after"), None)
        if after and any(f["field"] == "channel" for f in after["fields"]):
            row_schema = after
            break
    assert row_schema is not None, "the recording has the added column"
    path = str(tmp_path / "orders")
    spark.createDataFrame(
        [("1", bytes([1]), False, 1), ("2", bytes([5]), False, 2), ("3", bytes([2]), True, 3)],
        "_cdc_key string, _cdc_position binary, _cdc_deleted boolean, id int",
    ).write.format("delta").save(path)
    have = StructType([StructField("id", StringType())])
    (added,) = D.added_columns(
        have, {"id": StringType(), "channel": StringType()}, [(bytes([3]), row_schema)]
    )
    assert (added.column, added.default, added.unreproducible) == ("channel", "web", None)
    D.record_added(spark, path, [added])
    spark.sql(f"ALTER TABLE delta.`{path}` ADD COLUMNS (channel string)")
    assert D.fill_defaults(spark, path) == 1
    got = {r["id"]: r["channel"] for r in spark.read.format("delta").load(path).collect()}
    # older than the column: 'web'; written with it (NULL there): kept; a tombstone: untouched
    assert got == {1: "web", 2: None, 3: None}
    assert D.fill_defaults(spark, path) == 0  # done: nothing runs twice
    assert D.fill_defaults(spark, path, oldest=bytes([2])) == 1  # a late older event arrived
