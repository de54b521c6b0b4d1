"""Data-quality checks on gold (``gold/quality.py``) with the shared Spark session.

One small lake is built once per module the real way (synthetic PostgreSQL stream -> bronze ->
``SilverJob``). On it every check passes. A copy is then damaged on purpose, one defect per
check, each in a place no other check looks at:

* ``primary_key``: a second orders row with an existing ``id`` (another ``_cdc_key``);
* ``not_null``: an orders row with ``status`` NULL (declared ``optional: false``);
* ``expectation:expect_column_values_to_be_between``: that row's ``amount_cents`` is -5;
* ``types``: customers rewritten with ``id`` as bigint (declared int32);
* ``quarantine``: customers events in ``silver/_quarantine`` beyond ``quarantine.max``;
* ``late_events``: an orders event refused as "would have resurrected";
* ``positions_monotonic``: an orders event landed in a new bronze batch below its key's position;
* ``update_before_insert``: a customers key whose only event is an update;
* ``freshness``: the run's clock two hours after the cut's source time (SLO 60 s).

A second source ``ware`` has only warning failures (stale, bronze quarantine, a failed
``reconcile`` outcome from the caller) and must not be blocked.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import inspect
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable, write_deltalake

from bronze.schema import QUARANTINE_SCHEMA
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from gold.checks import LATE_REASON, latest_schemas, source_events
from gold.cuts import Cut, TableAtCut, latest_cut
from gold.latest_schemas import LatestSchemas
from gold.outcome import CheckOutcome
from gold.quality import CHECKS, Gate, QualityRun, quality_history, run_quality, severity_of
from gold.quality_results import append_results, results_path
from gold.quality_schedule import BackgroundQuality
from pipeline.config import PipelineConfig, Severity
from pipeline.landing import LandingAgent
from silver import merge
from silver.job import SilverJob
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.delta]

ORDERS = "public.orders"
CUSTOMERS = "public.customers"
AMOUNT_RULE = {
    "type": "expect_column_values_to_be_between",
    "kwargs": {"column": "amount_cents", "min_value": 0},
    "severity": "block",
}


def config(lake: Path, **quality: Any) -> PipelineConfig:
    return PipelineConfig.model_validate(
        {
            "lake": {"root": str(lake)},
            "quality": {
                "freshness.slo.seconds": 60,
                "quarantine.max": 1,
                "report.dir": str(lake / "report"),
                "expectations": {f"shop.{ORDERS}": [AMOUNT_RULE]},
                **quality,
            },
        }
    )


@pytest.fixture(scope="module")
def good_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Cut]:
    """A lake applied by the silver job, and its newest consistent cut."""
    root = tmp_path_factory.mktemp("quality")
    stream = postgres_stream(snapshot_rows=3, transactions=6, seed=5)
    path = root / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=True))
    lake = root / "lake"
    LandingAgent(DebeziumJsonSource("shop", path), BronzeWriter(BronzeTables.under(lake))).run()
    SilverJob(spark, lake).run_once()
    cut = latest_cut(lake, "shop")
    assert cut is not None and {t.collection for t in cut.tables.values()} == {ORDERS, CUSTOMERS}
    return lake, cut


def by_check(run: QualityRun, source: str, table: str | None) -> dict[str, Any]:
    return {r.check: r for r in run.results if r.source == source and r.table == table}


def blocking_verdicts(run: QualityRun) -> dict[tuple[Any, ...], tuple[bool, int | None]]:
    return {
        (r.source, r.table, r.check): (r.success, r.unexpected_count)
        for r in run.results
        if r.severity is Severity.BLOCK
    }


def assert_gate_agrees(spark: Any, cfg: PipelineConfig, lake: Path, cut: Cut, full: Any) -> None:
    """The gate (one aggregate per table; metadata from the bronze files it has not read) gives
    the full run's verdict and count on every blocking check, and the same table metadata."""
    gate = Gate()
    gated = run_quality(spark, cfg, lake, {"shop": cut}, write=False, gate=gate)
    shop = {k: v for k, v in blocking_verdicts(full).items() if k[0] == "shop"}
    assert shop and blocking_verdicts(gated) == shop
    events = source_events(spark, lake, cut)
    try:
        expected = sorted(latest_schemas(events), key=lambda r: r["collection"])
    finally:
        events.unpersist()
    assert sorted(gate.latest.latest(lake, cut), key=lambda r: r["collection"]) == expected
    # A file is read again only while it holds rows beyond the cut; past every row, never.
    cache, end = LatestSchemas(), dataclasses.replace(cut, position=b"\xff" * 64)
    assert cache.latest(lake, end) and cache.files_read > 0
    read = cache.files_read
    assert cache.latest(lake, end) and cache.files_read == read


def test_every_check_passes_on_good_data(spark: Any, good_lake: tuple[Path, Cut]) -> None:
    lake, cut = good_lake
    assert cut.source_time is not None
    run = run_quality(
        spark, config(lake), lake, {"shop": cut}, now=cut.source_time + dt.timedelta(seconds=10)
    )
    failures = [(r.table, r.check, r.observed) for r in run.results if not r.success]
    assert failures == []
    assert run.success and run.blocked_sources == frozenset()
    assert_gate_agrees(spark, config(lake), lake, cut, run)
    for table in (ORDERS, CUSTOMERS):
        checks = by_check(run, "shop", table)
        expected = {
            "primary_key",
            "not_null",
            "types",
            "quarantine",
            "positions_monotonic",
            "update_before_insert",
            "freshness",
            "late_events",
            "resnapshot",
        }
        if table == ORDERS:
            expected.add("expectation:expect_column_values_to_be_between")
        assert set(checks) == expected, table
        assert checks["primary_key"].engine == "great_expectations"
        assert checks["primary_key"].severity is Severity.BLOCK
        assert checks["freshness"].observed.startswith("lag 10.0 s")
    assert run.report_path is not None and run.report_path.name == "index.html"
    assert run.report_path.parent == lake / "report"
    rows = quality_history(lake)
    assert len(rows) == len(run.results) and {r["run_id"] for r in rows} == {run.run_id}


def _silver(lake: Path, table: TableAtCut) -> str:
    return str(lake / "silver" / table.silver_table)


def damage(spark: Any, lake: Path, cut: Cut) -> Cut:
    """One defect per check (module docstring); returns the cut pointed at the damaged tables."""
    from pyspark.sql import functions as F

    tables = {t.collection: t for t in cut.tables.values()}
    orders, customers = tables[ORDERS], tables[CUSTOMERS]
    frame = (
        spark.read.format("delta").option("versionAsOf", orders.version).load(_silver(lake, orders))
    )
    live = frame.where(~F.col(merge.DELETED)).orderBy("id").limit(1)
    twin = live.withColumn(merge.KEY, F.lit('{"id":"dup"}'))  # same id, another MERGE key
    nulls = live.select(
        F.lit('{"id":"998"}').alias(merge.KEY),
        *[c for c in frame.columns if c not in (merge.KEY, "id", "status", "amount_cents")],
        F.lit(998).alias("id"),
        F.lit(None).cast("string").alias("status"),
        F.lit(-5).cast("bigint").alias("amount_cents"),
    )
    twin.unionByName(nulls).write.format("delta").mode("append").save(_silver(lake, orders))
    customers_frame = (
        spark.read.format("delta")
        .option("versionAsOf", customers.version)
        .load(_silver(lake, customers))
    )
    (
        customers_frame.withColumn("id", F.col("id").cast("bigint"))
        .write.format("delta")
        .mode("overwrite")
        .option("overwriteSchema", "true")
        .save(_silver(lake, customers))
    )
    placeholder = "unavailable-value placeholder for a row silver does not have: notes"
    quarantined = [
        ("shop", CUSTOMERS, "f:1", '{"id":"1"}', b"\x01", "b#1", placeholder, 0),
        ("shop", CUSTOMERS, "f:2", '{"id":"2"}', b"\x01", "b#1", placeholder, 0),
        ("shop", ORDERS, "f:3", '{"id":"3"}', b"\x01", "b#1", f"{LATE_REASON}: older than", 0),
    ]
    spark.createDataFrame(
        quarantined,
        "source string, collection string, origin string, key string, position binary, "
        "bronze_batch string, reason string, silver_batch long",
    ).withColumn("quarantined_at", F.current_timestamp()).write.format("delta").mode("append").save(
        str(lake / "silver" / "_quarantine")
    )

    events_path = str(lake / "bronze" / "events")
    events = DeltaTable(events_path).to_pyarrow_table()
    data = events.filter(pc.equal(events["kind"], "data"))
    next_batch = pc.max(events["batch_seq"]).as_py() + 1
    order_events = data.filter(pc.equal(data["collection"], ORDERS)).to_pylist()
    newest = max(order_events, key=lambda r: r["position"])
    # A position just below the key's newest one, landed in a later batch: arrival out of order.
    lower = (int.from_bytes(newest["position"]) - 1).to_bytes(len(newest["position"]))
    assert lower not in {r["position"] for r in order_events if r["key_json"] == newest["key_json"]}
    late = {**newest, "op": "c", "position": lower, "batch_seq": next_batch}
    customer = data.filter(pc.equal(data["collection"], CUSTOMERS)).to_pylist()[0]
    orphan = {
        **customer,
        "op": "u",
        "key_json": '{"id":777}',
        "position": (int.from_bytes(customer["position"]) + 1).to_bytes(len(customer["position"])),
        "batch_seq": next_batch,
    }
    assert late["position"] <= cut.position and orphan["position"] <= cut.position
    write_deltalake(
        events_path, pa.Table.from_pylist([late, orphan], schema=events.schema), mode="append"
    )
    bronze_refused = [
        {
            "source": "ware",
            "ingest_date": dt.date(2026, 11, 21),
            "origin": f"ware.jsonl:{i}",
            "reason": "not JSON",
            "error_class": "EnvelopeError",
            "raw": b"{",
            "capture_ts": dt.datetime.now(dt.UTC),
            "ingest_ts": dt.datetime.now(dt.UTC),
            "agent_id": "medallion-agent:ware",
            "batch_seq": 1,
        }
        for i in range(2)
    ]
    write_deltalake(
        str(lake / "bronze" / "quarantine"),
        pa.Table.from_pylist(bronze_refused, schema=QUARANTINE_SCHEMA),
        mode="append",
    )
    return dataclasses.replace(
        cut,
        tables={
            orders.silver_table: dataclasses.replace(orders, version=orders.version + 1),
            customers.silver_table: dataclasses.replace(customers, version=customers.version + 1),
        },
    )


def test_each_check_fails_on_purpose_built_bad_data(
    spark: Any, good_lake: tuple[Path, Cut], tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(good_lake[0], lake)
    cut = damage(spark, lake, good_lake[1])
    assert cut.source_time is not None
    ware = Cut("ware", 3, b"\x01\x02", cut.source_ts_ms, {})
    mismatch = CheckOutcome("reconcile", "ware", "public.items", False, "2 rows differ")
    cfg = config(lake, severity={"positions_monotonic": "block", "types": "warn"})
    run = run_quality(
        spark,
        cfg,
        lake,
        {"shop": cut, "ware": ware},
        extra=[mismatch],
        now=cut.source_time + dt.timedelta(hours=2),
    )
    orders, customers = by_check(run, "shop", ORDERS), by_check(run, "shop", CUSTOMERS)

    pk = orders["primary_key"]
    assert not pk.success and pk.unexpected_count == 2 and pk.severity is Severity.BLOCK
    assert customers["primary_key"].success
    nn = orders["not_null"]
    assert not nn.success and nn.unexpected_count == 1 and "status" in nn.observed
    assert any("id=998" in s for s in nn.sample)
    assert customers["not_null"].success
    rule = orders["expectation:expect_column_values_to_be_between"]
    assert not rule.success and rule.unexpected_count == 1 and rule.severity is Severity.BLOCK
    types = customers["types"]
    assert not types.success and types.sample == ("id: declared int, gold bigint",)
    assert types.severity is Severity.WARN  # quality.severity overrides the default block
    assert orders["types"].success
    assert not customers["quarantine"].success and customers["quarantine"].unexpected_count == 2
    assert orders["quarantine"].success  # its one refused event is a late event, counted there
    late = orders["late_events"]
    assert not late.success and late.unexpected_count == 1 and "168 h" in late.observed
    assert customers["late_events"].success
    mono = orders["positions_monotonic"]
    assert not mono.success and mono.unexpected_count == 1 and mono.severity is Severity.BLOCK
    assert customers["positions_monotonic"].success
    ubi = customers["update_before_insert"]
    assert not ubi.success and ubi.sample == ('{"id":"777"} first op u',)
    assert orders["update_before_insert"].success
    for table in (orders, customers):
        assert not table["freshness"].success and "lag 7200.0 s" in table["freshness"].observed

    wares = {(r.table, r.check): r for r in run.results if r.source == "ware"}
    assert {k: v.success for k, v in wares.items()} == {
        (None, "quarantine"): False,
        (None, "freshness"): False,
        ("public.items", "reconcile"): False,
    }
    assert all(r.severity is Severity.WARN for r in wares.values())
    assert run.blocked_sources == frozenset({"shop"}) and not run.success
    assert {r.check for r in run.blocking_failures} == {
        "primary_key",
        "not_null",
        "expectation:expect_column_values_to_be_between",
        "positions_monotonic",
    }
    assert run.warned == run.failed - len(run.blocking_failures) > 0

    rows = [r for r in quality_history(lake) if r["run_id"] == run.run_id]
    assert len(rows) == len(run.results)
    recorded = {(r["source"], r["table"], r["check"]): r for r in rows}
    pk_row = recorded[("shop", ORDERS, "primary_key")]
    assert pk_row["success"] is False and pk_row["severity"] == "block"
    assert (
        pk_row["silver_batch"] == cut.silver_batch and pk_row["position_hex"] == cut.position.hex()
    )
    assert recorded[("ware", "public.items", "reconcile")]["observed"] == "2 rows differ"
    version = DeltaTable(str(results_path(lake))).version()
    assert append_results(lake, run) == 0  # a retried write adds nothing
    assert DeltaTable(str(results_path(lake))).version() == version
    assert run.report_path is not None
    assert (run.report_path.parent / f"run-{run.run_id}.html").is_file()
    assert_gate_agrees(spark, cfg, lake, cut, run)


def test_the_scheduled_full_run_runs_beside_the_loop(
    spark: Any, good_lake: tuple[Path, Cut], tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    shutil.copytree(good_lake[0], lake)
    cut = good_lake[1]
    gate = Gate()
    asked: list[Any] = []

    def reconcile(cuts: Any) -> list[CheckOutcome]:
        asked.append(dict(cuts))
        return [CheckOutcome("reconcile", "shop", ORDERS, True, "0 rows differ")]

    background = BackgroundQuality(
        spark, config(lake), lake, gate, interval_seconds=3600, extra_checks=reconcile
    )
    assert background.poke({"shop": cut})
    assert not background.poke({"shop": cut})  # one in flight, and not due again for an hour
    assert background.wait(600) and background.runs == 1 and background.failures == 0
    assert asked == [{"shop": cut}]
    run = background.last
    assert {r.check for r in run.results} >= {"primary_key", "positions_monotonic", "reconcile"}
    assert run.report_path is not None and run.report_path.is_file()
    assert {(t.silver_table, t.version) for t in cut.tables.values()} <= gate.passed
    assert not background.poke({"shop": cut}) and not background.due()


def test_severity_resolution_and_the_late_reason_silver_uses(tmp_path: Path) -> None:
    cfg = config(tmp_path, severity={"freshness": "block"})
    assert severity_of("freshness", cfg) is Severity.BLOCK
    assert severity_of("primary_key", cfg) is CHECKS["primary_key"] is Severity.BLOCK
    assert severity_of("reconcile", cfg) is Severity.WARN
    assert severity_of("something_new", cfg) is Severity.WARN
    assert severity_of("expectation:x", cfg, Severity.BLOCK) is Severity.BLOCK
    # The late-events check finds silver's refusals by this text; it must be what silver writes.
    assert f'"{LATE_REASON}: ' in inspect.getsource(merge)


def test_the_history_of_real_runs_renders_in_headless_chromium(
    spark: Any, good_lake: tuple[Path, Cut], browser: Any, tmp_path: Path
) -> None:
    """Real full runs on the good lake, ``freshness`` failing in the last (``gold/report*.py``).

    The lake's history holds the first test's run (clock 10 s after the cut's source time; run
    here when this test runs alone); two more runs follow at 30 s and two hours (SLO 60 s),
    gold published after the first of them. The report of the last run, opened in Chromium,
    must load without console errors and show ``freshness`` newly failing on both tables, a
    strip with a cell per run for every check, and a point per run on every plot.
    """
    from selenium.webdriver.common.by import By

    from gold.publish import publish
    from gold.report_history import read_history
    from gold.report_measures import BRONZE_TO_SILVER, FRESHNESS, SOURCE_TO_BRONZE
    from tests.fix_browser import ARTIFACTS

    lake = tmp_path / "lake"
    shutil.copytree(good_lake[0], lake)
    cut = good_lake[1]
    assert cut.source_time is not None
    cfg = config(lake)
    clocks = [30, 7200] if read_history(lake, 30).runs else [10, 30, 7200]
    runs = []
    for seconds in clocks:
        now = cut.source_time + dt.timedelta(seconds=seconds)
        runs.append(run_quality(spark, cfg, lake, {"shop": cut}, now=now))
        if len(runs) == 1:
            publish(lake, [cut], quality_run=runs[0].run_id)
    tables = sorted({t.collection for t in cut.tables.values()})
    failures = [
        (i, r.table, r.check) for i, run in enumerate(runs) for r in run.results if not r.success
    ]
    assert failures == [(len(runs) - 1, t, "freshness") for t in tables]
    history = read_history(lake, 30)
    assert len(history.runs) == 3 and history.runs[-1].run_id == runs[-1].run_id
    index = runs[-1].report_path
    assert index is not None and index.name == "index.html"
    page = index.read_text().replace("xmlns='http://www.w3.org/2000/svg'", "")
    assert "http://" not in page and "https://" not in page  # nothing fetched
    checks = {t: {r.check for r in runs[-1].results if r.table == t} for t in tables}

    browser.get(index.as_uri())
    assert [e for e in browser.get_log("browser") if e["level"] == "SEVERE"] == []
    newly = browser.find_elements(By.CSS_SELECTOR, "#newly-failing-list li")
    assert sorted(li.text.split(" fails")[0] for li in newly) == [
        f"freshness on shop.{t}" for t in tables
    ]
    assert all("first failure" in li.text and "(was: passed)" in li.text for li in newly)

    for table in tables:
        strips = browser.find_element(By.CSS_SELECTOR, f"table.strips[data-table='{table}']")
        rows = strips.find_elements(By.TAG_NAME, "tr")
        assert {row.find_element(By.TAG_NAME, "code").text for row in rows} == checks[table]
        for row in rows:
            assert len(row.find_elements(By.CSS_SELECTOR, "rect.cell")) == 3, row.text
        # Failing now, so first: passed, passed, warned; the hover names the run and the lag.
        assert rows[0].find_element(By.TAG_NAME, "code").text == "freshness"
        statuses = browser.execute_script(
            "return Array.from(arguments[0].querySelectorAll('rect.cell'))"
            ".map(c => c.getAttribute('class'))",
            rows[0],
        )
        assert statuses == ["cell pass", "cell pass", "cell warn"]
        hover = browser.execute_script(
            "return arguments[0].querySelector('rect.warn title').textContent", rows[0]
        )
        assert runs[-1].run_id in hover and "lag 7200.0 s" in hover

        plots = browser.find_element(By.CSS_SELECTOR, f"div.plots[data-table='{table}']")

        def heights(series: str, plots: Any = plots) -> list[float]:
            found = plots.find_elements(By.CSS_SELECTOR, f"circle.pt[data-series='{series}']")
            return [float(c.get_attribute("cy")) for c in found]

        measured = {
            name: [
                m.value
                for r in history.runs
                for m in r.measures
                if (m.table, m.name) == (table, name)
            ]
            for name in (SOURCE_TO_BRONZE, BRONZE_TO_SILVER, FRESHNESS)
        }
        rows_at = heights("rows")
        assert len(rows_at) == 3 and len(set(rows_at)) == 1  # one cut, three runs
        assert len(heights("quarantined")) == 3
        assert len(heights("→gold")) == 3  # every run checked the cut gold shows
        assert len(heights("→bronze")) == len(measured[SOURCE_TO_BRONZE]) == 3
        assert len(heights("→silver")) == len(measured[BRONZE_TO_SILVER]) == 3
        # Freshness grows with the clock: each point higher (a smaller y) than the one before.
        fresh = heights("freshness")
        assert len(fresh) == 3 and fresh[0] > fresh[1] > fresh[2]
        assert measured[FRESHNESS][2] - measured[FRESHNESS][0] == pytest.approx(7190)

    browser.set_window_size(1400, 1000)
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "quality-report-history.png"))
