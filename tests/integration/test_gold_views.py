"""Gold views at consistent cuts, time travel, derived tables (real PostgreSQL, Spark, Delta).

The key property: two tables written in one source transaction are never seen in gold one
without the other, even when the transaction reaches bronze in parts and silver applies the
micro-batches in between.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from deltalake import DeltaTable

from gold.cuts import cut_at, latest_cut
from gold.publish import published_cuts
from gold.refresh import refresh_gold
from pipeline.config import load_config
from pipeline.errors import GoldError
from silver.job import SilverJob
from tests.integration import test_pg_capture
from tests.integration.test_pg_capture import Pg, land

pg = test_pg_capture.pg  # the fixture: one private schema, slot and publication per test

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


def config_for(tmp_path: Path, lake: Path, **sections: Any) -> Any:
    raw = {"lake": {"root": str(lake)}, "quality": {"enabled": False}, **sections}
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(raw))
    return load_config(path)


def gold_rows(spark: Any, pg: Pg, table: str) -> list[tuple[Any, ...]]:
    name = f"gold.pg__{pg.schema}__{table}"
    return sorted(tuple(r) for r in spark.sql(f"SELECT * FROM {name}").collect())


def view_batch(spark: Any, pg: Pg, table: str) -> int:
    """The silver batch of the cut the session's gold view of ``table`` shows."""
    name = f"gold.pg__{pg.schema}__{table}"
    rows = spark.sql(f"SHOW TBLPROPERTIES {name} ('medallion.silverBatch')").collect()
    return int(rows[0][1])


def test_a_transaction_over_two_tables_is_never_half_visible_and_time_travel(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.orders (id int PRIMARY KEY, total int NOT NULL)",
        f"CREATE TABLE {s}.lines (order_id int, line int, qty int, PRIMARY KEY (order_id, line))",
        f"INSERT INTO {s}.orders VALUES (1, 10)",
        f"INSERT INTO {s}.lines VALUES (1, 1, 10)",
    )
    source = pg.config()
    land(source, lake)
    config = config_for(tmp_path, lake)
    SilverJob(spark, lake).run_once()
    first = refresh_gold(spark, config, lake)
    assert set(first.published) == {"pg"}
    assert gold_rows(spark, pg, "orders") == [(1, 10)]
    assert gold_rows(spark, pg, "lines") == [(1, 1, 10)]

    # One transaction: 6 order rows, then 6 line rows; bronze takes it in parts of 4 events.
    values = ", ".join(f"({i}, {i * 10})" for i in range(2, 8))
    lines = ", ".join(f"({i}, 1, {i})" for i in range(2, 8))
    pg.sql(
        f"BEGIN; INSERT INTO {s}.orders VALUES {values}; INSERT INTO {s}.lines VALUES {lines}; "
        "COMMIT"
    )
    from bronze.writer import BronzeTables, BronzeWriter
    from capture.registry import create_source
    from pipeline.landing import LandingAgent

    agent = LandingAgent(
        create_source(source),
        BronzeWriter(BronzeTables.under(lake)),
        max_events=4,
        max_transaction_events=4,
    )
    agent.run(max_batches=2)  # BEGIN + the first orders only: the transaction is incomplete
    SilverJob(spark, lake).run_once()
    second = refresh_gold(spark, config, lake)
    assert gold_rows(spark, pg, "orders") == [(1, 10)], "half a transaction reached gold"
    assert gold_rows(spark, pg, "lines") == [(1, 1, 10)]
    assert second.current["pg"].silver_batch == first.current["pg"].silver_batch

    land(source, lake)  # the rest of the transaction
    SilverJob(spark, lake).run_once()
    third = refresh_gold(spark, config, lake)
    assert set(third.published) == {"pg"}
    assert len(gold_rows(spark, pg, "orders")) == 7
    assert len(gold_rows(spark, pg, "lines")) == 7
    props = {
        r["key"]: r["value"]
        for r in spark.sql(f"SHOW TBLPROPERTIES gold.pg__{s}__orders").collect()
    }
    assert props["medallion.silverBatch"] == str(third.current["pg"].silver_batch)
    assert bytes.fromhex(props["medallion.position"]) == third.current["pg"].position

    # Time travel: back to the first cut by source position and by source time.
    from gold.views import current_state

    early, late = first.current["pg"], third.current["pg"]
    assert late.position > early.position

    def orders_at(cut: Any) -> int:
        (table,) = [t for t in cut.tables.values() if t.collection.endswith(".orders")]
        return int(current_state(spark, lake, table).count())

    by_position = cut_at(lake, "pg", position=early.position)
    assert by_position == early and orders_at(by_position) == 1
    assert cut_at(lake, "pg", position=late.position) == late and orders_at(late) == 7
    assert early.source_time is not None and late.source_time is not None
    assert cut_at(lake, "pg", time=early.source_time) == early
    assert cut_at(lake, "pg", time=late.source_time) == late
    assert cut_at(lake, "pg", position=b"\x00") is None


def revenue(spark: Any, tables: dict[str, Any]) -> Any:
    """A Python-defined gold table: total per label (used by the config below)."""
    from pyspark.sql import functions as F

    (frame,) = [f for name, f in tables.items() if name.endswith(".items")]
    return frame.groupBy("label").agg(F.sum("qty").alias("qty"))


def test_derived_tables_rebuild_at_each_published_cut(spark: Any, pg: Pg, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.items (id int PRIMARY KEY, label text, qty int)",
        f"INSERT INTO {s}.items VALUES (1, 'a', 1), (2, 'a', 2), (3, 'b', 5)",
    )
    source = pg.config()
    land(source, lake)
    config = config_for(
        tmp_path,
        lake,
        gold={
            "tables": {
                "by_sql": {
                    "sql": f"SELECT count(*) AS n FROM gold.pg__{s}__items",
                    "description": "how many items",
                },
                "by_python": {"python": f"{__name__}:revenue"},
            }
        },
    )
    SilverJob(spark, lake).run_once()
    first = refresh_gold(spark, config, lake)
    assert {d.name for d in first.derived} == {"by_python", "by_sql"}
    read = spark.read.format("delta")
    assert read.load(str(lake / "gold" / "by_sql")).collect()[0]["n"] == 3
    by_label = {r["label"]: r["qty"] for r in read.load(str(lake / "gold" / "by_python")).collect()}
    assert by_label == {"a": 3, "b": 5}
    assert DeltaTable(str(lake / "gold" / "by_sql")).metadata().description == "how many items"
    # Nothing new: no rebuild.
    assert refresh_gold(spark, config, lake).derived == ()
    pg.sql(f"DELETE FROM {s}.items WHERE id = 3")
    land(source, lake)
    SilverJob(spark, lake).run_once()
    refresh_gold(spark, config, lake)
    assert read.load(str(lake / "gold" / "by_sql")).collect()[0]["n"] == 2
    history = spark.sql(f"DESCRIBE HISTORY delta.`{lake / 'gold' / 'by_sql'}`").collect()
    assert all('"pg"' in (h["userMetadata"] or "") for h in history)

    broken = config_for(
        tmp_path, lake, gold={"tables": {"oops": {"sql": "SELECT nope FROM gold.missing"}}}
    )
    pg.sql(f"INSERT INTO {s}.items VALUES (9, 'c', 1)")
    land(source, lake)
    SilverJob(spark, lake).run_once()
    with pytest.raises(GoldError, match=r"gold table 'oops'.*gold\.tables\.oops\.sql"):
        refresh_gold(spark, broken, lake)
    # The views moved before the derived table failed; the published cut is recorded.
    newest = latest_cut(lake, "pg")
    assert newest is not None and published_cuts(lake)["pg"].silver_batch == newest.silver_batch


def test_a_blocking_failure_keeps_gold_at_the_last_good_cut(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.stock (id int PRIMARY KEY, qty int NOT NULL)",
        f"INSERT INTO {s}.stock VALUES (1, 5), (2, 7)",
    )
    source = pg.config()
    land(source, lake)
    config = config_for(
        tmp_path,
        lake,
        quality={
            "enabled": True,
            "reconcile.interval.seconds": None,
            "expectations": {
                f"{s}.stock": [
                    {
                        "type": "expect_column_values_to_be_between",
                        "kwargs": {"column": "qty", "min_value": 0},
                        "severity": "block",
                    }
                ]
            },
        },
    )
    SilverJob(spark, lake).run_once()
    good = refresh_gold(spark, config, lake)
    assert set(good.published) == {"pg"} and not good.held
    assert good.quality is not None and good.quality.success

    pg.sql(f"UPDATE {s}.stock SET qty = -3 WHERE id = 2", f"INSERT INTO {s}.stock VALUES (3, 1)")
    land(source, lake)
    SilverJob(spark, lake).run_once()
    bad = refresh_gold(spark, config, lake)
    assert set(bad.held) == {"pg"} and not bad.published
    assert bad.current["pg"] == good.current["pg"]
    assert gold_rows(spark, pg, "stock") == [(1, 5), (2, 7)], "gold moved past a blocking failure"
    failed = [r for r in bad.quality.results if not r.success]
    assert [(r.table, str(r.severity)) for r in failed] == [(f"{s}.stock", "block")]

    pg.sql(f"UPDATE {s}.stock SET qty = 0 WHERE id = 2")
    land(source, lake)
    SilverJob(spark, lake).run_once()
    fixed = refresh_gold(spark, config, lake)
    assert set(fixed.published) == {"pg"}
    assert gold_rows(spark, pg, "stock") == [(1, 5), (2, 0), (3, 1)]


def test_run_continuous_moves_gold_after_each_micro_batch(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    import threading
    import time

    from pipeline.orchestration import run_pipeline

    lake = tmp_path / "lake"
    s = pg.schema
    pg.sql(f"CREATE TABLE {s}.t (id int PRIMARY KEY)", f"INSERT INTO {s}.t VALUES (1)")
    source = pg.config()
    land(source, lake)
    config = config_for(tmp_path, lake)
    failures: list[BaseException] = []

    def pipeline() -> None:
        try:
            run_pipeline(config, continuous=True, interval=0.5, lake_root=lake)
        except BaseException as exc:  # reported by the test below
            failures.append(exc)

    def published() -> int:
        cut = published_cuts(lake).get("pg")
        return -1 if cut is None else cut.silver_batch

    thread = threading.Thread(target=pipeline, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 120
        while published() < 0:
            assert not failures and time.monotonic() < deadline, failures
            time.sleep(0.5)
        first = published()
        pg.sql(f"INSERT INTO {s}.t VALUES (2), (3)")
        land(source, lake)
        # The cut is recorded in the lake first, then the session's views move to it: stopping
        # the stream between the two would interrupt the views' move, so wait for the views.
        while published() <= first or view_batch(spark, pg, "t") < published():
            assert not failures and time.monotonic() < deadline, failures
            time.sleep(0.5)
    finally:
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=60)
    assert not failures, failures
    assert gold_rows(spark, pg, "t") == [(1,), (2,), (3,)]
