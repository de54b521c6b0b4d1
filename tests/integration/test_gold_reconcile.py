"""Reconciliation of gold with the source database (``gold/reconcile.py``), against the real
PostgreSQL 15 (``pg_dsn``) and the shared Spark session.

Each test captures its own schema (the ``pg`` corner of ``test_pg_capture``) into a temp lake,
applies it to silver with ``SilverJob.run_once()``, and reconciles at the newest cut. Corruption is
made by hand on the silver tables (an ``UPDATE`` and a ``DELETE`` with Delta SQL), and the cut is
pointed at the corrupted versions, so the reconciliation must name exactly those keys.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from gold.cuts import Cut, TableAtCut, latest_cut
from gold.reconcile import (
    ReconcileResult,
    TableReconciliation,
    can_reconcile,
    last_reconciled,
    reconcile_source,
)
from pipeline.config import PipelineConfig, SourceConfig
from pipeline.errors import ConfigError, ReconcileError
from pipeline.sql import quote_identifier
from silver.job import SilverJob
from tests.integration.test_pg_capture import Pg, land, pg, raw_config

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.delta]

__all__ = ["pg"]  # the fixture, re-used from test_pg_capture

ROOT = Path(__file__).resolve().parents[2]
ORDERS = 40


def pipeline_config(pg: Pg, lake: Path, **extra: Any) -> PipelineConfig:
    """A pipeline with the test's PostgreSQL source ``pg`` and a ``debezium_json`` source."""
    return PipelineConfig.model_validate(
        {
            "lake": {"root": str(lake)},
            "sources": [
                raw_config(pg, **extra),
                {
                    "name": "files",
                    "connector": "debezium_json",
                    "path": str(ROOT / "tests" / "fixtures" / "debezium_jsonl"),
                },
            ],
        }
    )


def create_shop(pg: Pg) -> dict[str, Any]:
    """Orders (int key, masked customer, decimal, date, jsonb, timestamptz), order lines
    (composite key) and a keyless log with a duplicated row; returns the source config extras."""
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.orders (id int PRIMARY KEY, customer text NOT NULL, "
        "amount numeric(10,2), placed date, attrs jsonb, at timestamptz)",
        f"INSERT INTO {s}.orders SELECT g, 'customer' || g, g * 1.25, "
        "date '2026-01-01' + g, jsonb_build_object('g', g), "
        f"timestamptz '2026-01-01 00:00:00+00' + g * interval '1 hour' "
        f"FROM generate_series(1, {ORDERS}) g",
        f"CREATE TABLE {s}.lines (order_id int, line int, sku text, qty int, "
        "PRIMARY KEY (order_id, line))",
        f"INSERT INTO {s}.lines SELECT o, l, 'sku-' || o || '-' || l, l "
        "FROM generate_series(1, 5) o, generate_series(1, 3) l",
        f"CREATE TABLE {s}.log (msg text, n int)",
        f"INSERT INTO {s}.log VALUES ('a', 1), ('a', 1), ('b', NULL)",
    )
    # The reconciliation must see the masked value the agent landed, not the clear text.
    return {"column.mask.hash.SHA-256.with.salt.s3cr3t": f"{s}\\.orders\\.customer"}


def capture_and_apply(spark: Any, config: SourceConfig, lake: Path) -> Cut:
    """Land a database source once and apply it to silver; the source's newest cut."""
    land(config, lake)
    SilverJob(spark, lake).run_once()
    cut = latest_cut(lake, config.name)
    assert cut is not None
    return cut


def by_table(result: ReconcileResult, pg: Pg) -> dict[str, TableReconciliation]:
    return {t.collection.removeprefix(pg.schema + "."): t for t in result.tables}


def silver_version_after(spark: Any, lake: Path, table: TableAtCut, statement: str) -> TableAtCut:
    """Run a Delta SQL statement on a silver table; the table at the version it made."""
    path = str((lake / "silver" / table.silver_table).absolute())
    spark.sql(statement.format(t=f"delta.{quote_identifier(path)}"))
    return dataclasses.replace(table, version=DeltaTable(path).version())


def test_equal_then_a_corrupted_and_a_deleted_row_are_found_by_key_and_range(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    extra = create_shop(pg)
    cut = capture_and_apply(spark, pg.config(**extra), lake)
    config = pipeline_config(pg, lake, **extra)

    result = reconcile_source(spark, config, lake, "pg", ranges=4)
    tables = by_table(result, pg)
    assert set(tables) == {"orders", "lines", "log"}
    for name, rows in (("orders", ORDERS), ("lines", 15)):
        t = tables[name]
        assert t.success, t
        assert (t.source_rows, t.gold_rows, t.ranges, t.differing_ranges) == (rows, rows, 4, ())
    # A keyless table cannot be merged (no key says which row an event changes): silver
    # quarantines its events with the reason, and the reconciliation, comparing the keyless
    # table as a multiset, finds all three rows (the duplicated one counted twice) missing.
    log = tables["log"]
    assert log.silver_table is not None and not log.keyed and not log.success
    assert (log.source_rows, log.gold_rows) == (3, 0)
    assert (log.missing_count, log.extra_count, log.differing_count) == (3, 0, 0)
    assert '{"msg":"a","n":1} x2' in log.missing_in_gold
    quarantined = (
        spark.read.format("delta")
        .load(str(lake / "silver" / "_quarantine"))
        .where(f"collection = '{pg.schema}.log'")
        .collect()
    )
    assert len(quarantined) == 3
    assert all("null record key" in r["reason"] for r in quarantined)
    assert result.source_ahead is False
    assert "pg" in last_reconciled(lake)

    # Corrupt one order's amount and lose one order line in silver, past the cut.
    tables_at = {t.collection.removeprefix(pg.schema + "."): t for t in cut.tables.values()}
    orders = silver_version_after(
        spark, lake, tables_at["orders"], "UPDATE {t} SET amount = amount + 0.01 WHERE id = 27"
    )
    lines = silver_version_after(
        spark, lake, tables_at["lines"], "DELETE FROM {t} WHERE order_id = 3 AND line = 2"
    )
    corrupted = dataclasses.replace(
        cut,
        tables={**cut.tables, orders.silver_table: orders, lines.silver_table: lines},
    )
    result = reconcile_source(spark, config, lake, "pg", cut=corrupted, ranges=4)
    tables = by_table(result, pg)
    o = tables["orders"]
    assert not o.success
    assert (o.source_rows, o.gold_rows) == (ORDERS, ORDERS)
    assert o.differing == ('{"id":27}',) and o.differing_count == 1
    assert (o.missing_count, o.extra_count) == (0, 0)
    # Lower bounds at ordinals 10, 20, 30 of 40: ids 11, 21, 31; id 27 is in range 2.
    assert [(r.index, r.lower_key) for r in o.differing_ranges] == [(2, '{"id":21}')]
    ln = tables["lines"]
    assert ln.missing_in_gold == ('{"order_id":3,"line":2}',)
    assert (ln.missing_count, ln.extra_count, ln.differing_count) == (1, 0, 0)
    assert (ln.source_rows, ln.gold_rows, len(ln.differing_ranges)) == (15, 14, 1)
    assert result.source_ahead is False  # nothing changed in the source: this is corruption

    outcomes = {o.table: o for o in result.outcomes()}
    out = outcomes[f"{pg.schema}.orders"]
    assert out.check == "reconcile" and not out.success and out.unexpected_count == 1
    assert out.sample == ('differing {"id":27}',)
    assert "range 2" in out.details and "not lag" in out.details
    assert outcomes[f"{pg.schema}.lines"].sample == ('missing {"order_id":3,"line":2}',)
    summary = {r["table"]: r for r in result.rows()}
    assert summary[f"{pg.schema}.orders"]["differing"] == 1
    assert not result.success


def test_changes_after_the_cut_are_reported_as_the_source_being_ahead(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    s = pg.schema
    lake = tmp_path / "lake"
    pg.sql(
        f"CREATE TABLE {s}.items (id int PRIMARY KEY, name text)",
        f"INSERT INTO {s}.items SELECT g, 'item ' || g FROM generate_series(1, 20) g",
    )
    capture_and_apply(spark, pg.config(), lake)
    config = pipeline_config(pg, lake)
    assert reconcile_source(spark, config, lake, "pg").success

    # Changed in the source, not captured: missing and differing, but the source is ahead.
    pg.sql(
        f"INSERT INTO {s}.items VALUES (21, 'new')",
        f"UPDATE {s}.items SET name = 'renamed' WHERE id = 5",
    )
    result = reconcile_source(spark, config, lake, "pg")
    (items,) = result.tables
    assert items.missing_in_gold == ('{"id":21}',)
    assert items.differing == ('{"id":5}',)
    assert result.source_ahead is True
    assert "possibly lag" in result.outcomes()[0].observed

    # Landed in bronze, not yet applied to silver: still ahead (bronze is past the cut).
    land(pg.config(), lake)
    result = reconcile_source(spark, config, lake, "pg")
    assert not result.success and result.source_ahead is True

    SilverJob(spark, lake).run_once()
    result = reconcile_source(spark, config, lake, "pg")
    assert result.success and result.source_ahead is False
    assert result.tables[0].source_rows == 21


def test_sources_without_a_database_or_a_cut_are_refused(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    config = pipeline_config(pg, lake)
    with pytest.raises(ReconcileError, match=r"source files \(debezium_json\) has no database"):
        reconcile_source(spark, config, lake, "files")
    assert not can_reconcile(config.source("files")) and can_reconcile(config.source("pg"))
    with pytest.raises(ConfigError, match="pgg"):
        reconcile_source(spark, config, lake, "pgg")
    with pytest.raises(ReconcileError, match="no consistent cut"):
        reconcile_source(spark, config, lake, "pg")
