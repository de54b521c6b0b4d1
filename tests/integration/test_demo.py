"""``medallion demo`` end to end (private PostgreSQL, Spark, Delta), then the notebooks on its lake.

The demo itself fails when a layer does not equal the source; this test also checks what it
printed, that its report and config are where it says, and executes every notebook in
notebooks/ against the demo's lake with nbclient (a fresh kernel each, as a person would).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import nbformat
import pytest
from click.testing import CliRunner
from nbclient import NotebookClient

from pipeline.cli import cli
from tests.fix_cluster import SHORT_LIVED_JVM

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))


def results(output: str) -> dict[str, Any]:
    doc = document(output)
    found: dict[str, Any] = {r["title"]: r for r in doc["results"]}
    found.update({m[:12]: {"message": m} for m in doc["messages"]})
    return found


def document(output: str) -> dict[str, Any]:
    """The one JSON document of ``--output json``."""
    found = [json.loads(line) for line in output.splitlines() if line.startswith('{"command"')]
    assert len(found) == 1, output
    return dict(found[0])


def test_committed_notebooks_have_no_outputs() -> None:
    assert len(NOTEBOOKS) >= 3
    for path in NOTEBOOKS:
        notebook = nbformat.read(path, as_version=4)
        for cell in notebook.cells:
            if cell.cell_type == "code":
                assert not cell.outputs and cell.execution_count is None, path.name


@pytest.fixture(scope="module")
def demo_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    lake = tmp_path_factory.mktemp("demo") / "lake"
    config = lake.parent / "pipeline.yaml"
    config.write_text(f"lake: {{root: {lake.parent / 'unused'}}}\n")
    partitions = spark.conf.get("spark.sql.shuffle.partitions")
    try:
        result = CliRunner().invoke(
            cli, ["--config", str(config), "--output", "json", "demo", "--lake", str(lake)]
        )
    finally:
        # The demo's config sets this runtime setting on the (shared) session; put it back.
        spark.conf.set("spark.sql.shuffle.partitions", partitions)
    assert result.exit_code == 0, result.output
    (lake / "demo-output.txt").write_text(result.stdout)
    return lake


def test_demo_runs_end_to_end(demo_lake: Path) -> None:
    output = (demo_lake / "demo-output.txt").read_text()
    found = results(output)
    layers = next(v for k, v in found.items() if k.startswith("8. rows per layer"))["rows"]
    assert {r["table"] for r in layers} == {
        "public.customers",
        "public.products",
        "public.orders",
        "public.order_lines",
    }
    assert all(r["equal"] and r["gold"] > 0 for r in layers), layers
    assert any(r["silver_tombstones"] > 0 for r in layers)
    messages = document(output)["messages"]
    quality = next(m for m in messages if m.startswith("10. quality"))
    assert " 0 blocking failures" in quality
    report = Path(quality.rsplit("report: ", 1)[1])
    assert report.is_file() and "<html" in report.read_text().lower()
    assert (demo_lake / "pipeline.yaml").is_file()
    assert (demo_lake / "gold" / "customer_revenue" / "_delta_log").is_dir()
    # The demo ran the pipeline twice: gold has two consistent cuts to travel between.
    from gold.cuts import consistent_cuts

    assert len(consistent_cuts(demo_lake)["shop"]) >= 2


def test_status_on_the_demo_lake(demo_lake: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--config", str(demo_lake / "pipeline.yaml"), "--output", "json", "status"]
    )
    assert result.exit_code == 0, result.output
    found = results(result.stdout)
    (source,) = found["sources"]["rows"]
    assert source["source"] == "shop" and source["landed"] > 0
    assert source["lag_bronze_silver_s"] == 0 and source["lag_silver_gold_s"] == 0
    assert source["gold_behind_consistent_cuts"] == 0
    assert source["slot_error"]  # the demo's server is gone: reported, not raised
    tables = {r["table"]: r for r in found["tables"]["rows"]}
    assert set(tables) >= {"public.orders", "public.order_lines"}
    assert all(r["gold_version"] == r["silver_version"] for r in tables.values())


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_executes_against_the_demo_lake(path: Path, demo_lake: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    env = {
        "MEDALLION_CONFIG": str(demo_lake / "pipeline.yaml"),
        # The kernel's Spark JVM lives for one notebook: C1 only and the serial collector, as
        # the cluster's short-lived JVMs (01_silver_and_gold: 70.2 -> 41.2 CPU s side by side,
        # docs/benchmarks.md, "The test suite").
        "SPARK_SUBMIT_OPTS": SHORT_LIVED_JVM,
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        NotebookClient(
            notebook,
            timeout=300,
            kernel_name="python3",
            resources={"metadata": {"path": path.parent}},
        ).execute()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    outputs = [o for c in notebook.cells if c.cell_type == "code" for o in c.outputs]
    assert outputs and not [o for o in outputs if o.output_type == "error"]


def test_quality_command_on_the_demo_lake(demo_lake: Path) -> None:
    from deltalake import DeltaTable

    runs_before = DeltaTable(str(demo_lake / "gold" / "_quality")).to_pandas()["run_id"].nunique()
    # The demo's sources are gone by now; reconciling them is the next test's subject.
    args = ["--config", str(demo_lake / "pipeline.yaml"), "--output", "json", "quality"]
    result = CliRunner().invoke(cli, [*args, "--no-reconcile"])
    assert result.exit_code == 0, result.output
    doc = document(result.stdout)
    failed = next(r for r in doc["results"] if r["title"].startswith("quality run"))
    assert failed["rows"] == []  # the rows listed are the failures
    summary = doc["messages"][-1]
    assert summary.startswith("checks: ") and "0 failed (block)" in summary
    assert (doc["exit_code"], doc["outcome"]) == (0, "ok") and doc["timings"]["quality"]
    results = DeltaTable(str(demo_lake / "gold" / "_quality")).to_pandas()
    assert results["run_id"].nunique() == runs_before + 1


def test_reconciliation_against_a_database_that_is_gone_fails_the_check_not_the_run(
    demo_lake: Path,
) -> None:
    result = CliRunner().invoke(
        cli,
        [
            "--config",
            str(demo_lake / "pipeline.yaml"),
            "--output",
            "json",
            "quality",
            "--reconcile",
        ],
    )
    assert result.exit_code == 0, result.output  # reconcile is a warn check by default
    doc = document(result.stdout)
    failed = next(r for r in doc["results"] if r["title"].startswith("quality run"))["rows"]
    assert [(r["check"], r["severity"], r["ok"]) for r in failed] == [("reconcile", "warn", False)]
    assert "not reconciled" in failed[0]["observed"] and "cannot connect" in failed[0]["observed"]
