"""Prometheus scrapes a running capture agent and a running ``run --continuous`` during a small
workload, and the values match what landed (real PostgreSQL; the agent is ``medallion capture
--follow`` as a child process; the pipeline runs ``run_pipeline(continuous=True)``, what
``run --continuous`` runs, in this process on the shared SparkSession (a child would start a
JVM of its own); a bad record of a second source is quarantined in bronze).

While the agent runs, the other commands print their one ``--output json`` document on its
lake (capture of another source, status, signal, a reconcile that cannot run, a usage error),
with the exit code, its meaning and the per-stage timings.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.compute as pc
import pytest
import yaml
from click.testing import CliRunner
from deltalake import DeltaTable
from prometheus_client.parser import text_string_to_metric_families

from pipeline import metrics
from pipeline.cli import cli
from pipeline.config import load_config
from tests.fix_servers import REPO_ROOT
from tests.integration.test_cli import document
from tests.integration.test_pg_capture import Pg, pg_corner
from tests.integration.test_shutdown import _config as shutdown_config

pytestmark = [pytest.mark.postgres, pytest.mark.delta]

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


def _port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _config(pg: Pg, tmp_path: Path) -> Path:
    """test_shutdown's PostgreSQL source, with a signal file and a second source whose only
    record is not JSON (quarantined in bronze)."""
    path = shutdown_config(pg, tmp_path)
    document = yaml.safe_load(path.read_text(encoding="utf-8"))
    document["sources"][0]["signal.file"] = "signals.jsonl"
    document["sources"].append({"name": "files", "connector": "debezium_json", "path": "inbox"})
    document["quality"] = {"enabled": False, "reconcile.interval.seconds": None}
    # One table: a worker session of its own would only add Spark jobs.
    document["silver"] = {"apply.parallelism": 1}
    (tmp_path / "inbox").mkdir()
    (tmp_path / "inbox" / "bad.jsonl").write_bytes(b"{oops\n")
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def _scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _get(samples: Samples, metric: str, /, **labels: str) -> float:
    name = metric
    key = (name, frozenset(labels.items()))
    assert key in samples, (
        f"{name}{labels} not served; have {sorted(k for k in samples if k[0] == name)}"
    )
    return samples[key]


def _dbz(samples: Samples, attribute: str, context: str, **extra: str) -> float:
    labels = {"plugin": "postgres", "name": "pg", "context": context, **extra}
    return _get(samples, f"debezium_metrics_{attribute}", **labels)


def _wait(
    what: str, check: Any, agent: subprocess.Popen[str] | None = None, polls: int = 1200
) -> Any:
    """Poll ``check`` until it returns a truthy value (a bound on polls, not on time asserted;
    a metric not served yet reads as not yet)."""
    for _ in range(polls):
        try:
            found = check()
        except (OSError, AssertionError):
            found = None
        if found:
            return found
        if agent is not None and agent.poll() is not None:
            pytest.fail(f"the agent exited early: {agent.communicate()}")
        time.sleep(0.1)
    pytest.fail(f"never happened: {what}")


def _bronze(lake: Path, source: str) -> Any:
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    return table.filter(pc.equal(table.column("source"), source))


def _workload(pg: Pg) -> None:
    """Three transactions after the snapshot: an insert of two rows, an update, a delete."""
    pg.sql(f"INSERT INTO {pg.schema}.t VALUES (4, 'd'), (5, 'e')")
    pg.sql(f"UPDATE {pg.schema}.t SET v = 'A' WHERE id = 1")
    pg.sql(f"DELETE FROM {pg.schema}.t WHERE id = 2")


def _data_events(lake: Path, source: str) -> list[dict[str, Any]]:
    bronze = _bronze(lake, source)
    return list(bronze.filter(pc.equal(bronze.column("kind"), "data")).to_pylist())


def test_scraping_a_running_capture_agent(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.t (id int PRIMARY KEY, v text)",
        f"INSERT INTO {s}.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    config_path = _config(pg, tmp_path)
    lake = tmp_path / "lake"
    port = _port()
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pipeline.cli",
            "--config",
            str(config_path),
            "capture",
            "-s",
            "pg",
            "--follow",
            "--metrics-address",
            f"127.0.0.1:{port}",
        ],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        _wait(
            "the snapshot completed",
            lambda: _dbz(_scrape(port), "SnapshotCompleted", "snapshot") == 1,
            agent,
        )
        _workload(pg)
        _wait(
            "the three transactions landed",
            lambda: _dbz(_scrape(port), "NumberOfCommittedTransactions", "streaming") == 3,
            agent,
        )
        time.sleep(0.5)  # one more poll: nothing else may arrive
        got = _scrape(port)
        bronze = _bronze(lake, "pg")
        data = _data_events(lake, "pg")
        streamed = [r for r in data if r["snapshot"] in (None, "false")]
        assert _dbz(got, "TotalNumberOfEventsSeen", "snapshot") == len(data) - len(streamed) == 3
        assert _dbz(got, "TotalNumberOfEventsSeen", "streaming") == len(streamed) == 4
        assert _dbz(got, "RowsScanned", "snapshot", table=f"{s}.t") == 3
        assert _dbz(got, "TotalTableCount", "snapshot") == 1
        assert _dbz(got, "RemainingTableCount", "snapshot") == 0
        assert _dbz(got, "SnapshotRunning", "snapshot") == 0
        for op, attribute in (("c", "Create"), ("u", "Update"), ("d", "Delete")):
            landed = sum(1 for r in streamed if r["op"] == op)
            assert _dbz(got, f"TotalNumberOf{attribute}EventsSeen", "streaming") == landed
        assert len({r["tx_id"] for r in streamed}) == 3
        behind = _dbz(got, "MilliSecondsBehindSource", "streaming")
        assert 0 <= behind < 24 * 3600 * 1000  # milliseconds, not seconds or microseconds
        assert _dbz(got, "Connected", "streaming") == 1
        assert _dbz(got, "NumberOfErroneousEvents", "streaming") == 0
        assert _get(got, "medallion_capture_landed_events_total", source="pg") == bronze.num_rows
        _wait(  # the lake is read at most every MIN_INTERVAL_S seconds
            "bronze's rows in the lake metrics",
            lambda: _get(_scrape(port), "medallion_bronze_rows", source="pg") == bronze.num_rows,
        )
        _wait(  # asked at most every 2 s: the first answer may predate the slot
            "the slot's status",
            lambda: _get(_scrape(port), "medallion_source_log_up", source="pg", log=pg.slot) == 1,
        )
        got = _scrape(port)
        assert _get(got, "medallion_source_log_retained_bytes", source="pg", log=pg.slot) >= 0
        _every_command_prints_one_document(CliRunner(), config_path)
    finally:
        agent.terminate()
        _out, err = agent.communicate(timeout=60)
    assert agent.returncode == 0, err


@pytest.mark.spark
def test_scraping_a_running_pipeline(pg: Pg, tmp_path: Path, spark: Any) -> None:
    from pipeline.orchestration import land_sources

    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.t (id int PRIMARY KEY, v text)",
        f"INSERT INTO {s}.t VALUES (1, 'a'), (2, 'b'), (3, 'c')",
    )
    config_path = _config(pg, tmp_path)
    config = load_config(config_path)
    lake = tmp_path / "lake"
    land_sources(config, ["pg"])
    _workload(pg)
    land_sources(config)  # the three transactions, and the bad record of 'files'
    data = _data_events(lake, "pg")
    assert len(data) == 7
    port = _port()
    try:
        _run_continuously(config, lake, port, spark, len(data))
        ran = _wait(  # the lake is read at most every MIN_INTERVAL_S seconds
            "the lake metrics saw gold's cut",
            lambda: (
                (found := _scrape(port))
                and _get(found, "medallion_gold_cut_silver_batch", source="pg") >= 0
                and found
            ),
        )
        applied = _get(ran, "medallion_silver_events_applied_total")
        assert applied == _get(ran, "medallion_silver_events_read_total") == len(data)
        assert _get(ran, "medallion_silver_events_quarantined_total") == 0
        table = f"pg__{s}__t"
        assert _get(ran, "medallion_silver_table_events_total", table=table) == len(data)
        assert _get(ran, "medallion_silver_merge_duration_seconds_count", table=table) >= 1
        reason = _error_class(lake)
        quarantined = _get(
            ran, "medallion_quarantined_rows", layer="bronze", source="files", reason=reason
        )
        assert quarantined == 1
        for stage in ("source_bronze", "bronze_silver", "silver_gold"):
            assert _get(ran, "medallion_lag_seconds", source="pg", stage=stage) >= 0
        assert _get(ran, "medallion_lag_seconds", source="pg", stage="silver_gold") == 0
        assert 0 <= _get(ran, "medallion_gold_cut_age_seconds", source="pg") < 24 * 3600
        assert _get(ran, "medallion_gold_held", source="pg") == 0
        assert _get(ran, "medallion_bronze_rows", source="pg") == _bronze(lake, "pg").num_rows
    finally:
        metrics.stop()


def _error_class(lake: Path) -> str:
    rows = DeltaTable(str(lake / "bronze" / "quarantine")).to_pyarrow_table().to_pylist()
    assert [r["source"] for r in rows] == ["files"]
    return str(rows[0]["error_class"])


def _run_continuously(config: Any, lake: Path, port: int, spark: Any, events: int) -> None:
    from gold.publish import published_cuts
    from pipeline.orchestration import run_pipeline

    metrics.start(config, f"127.0.0.1:{port}")
    failures: list[BaseException] = []

    def pipeline() -> None:
        try:
            run_pipeline(config, continuous=True, interval=0.5, run_checks=False)
        except BaseException as exc:  # reported below
            failures.append(exc)

    thread = threading.Thread(target=pipeline, daemon=True)
    thread.start()
    try:

        def caught_up() -> bool:
            if failures:
                pytest.fail(f"run --continuous failed: {failures}")
            applied = _get(_scrape(port), "medallion_silver_events_applied_total")
            return applied == events and published_cuts(lake).get("pg") is not None

        # A loaded machine takes minutes for a first micro-batch: the bound is generous.
        _wait("silver applied every landed change and gold moved", caught_up, polls=6000)
    finally:
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=120)
    assert not failures, failures


def _every_command_prints_one_document(runner: CliRunner, config: Path) -> None:
    """The commands not run above (``quality``'s document is read in test_demo, ``run``'s in
    test_cli); a reconciliation that cannot start and a usage error print one too."""
    base = ["--config", str(config), "--output", "json"]
    captured = runner.invoke(cli, [*base, "capture", "-s", "files"])
    doc = document(captured.stdout)
    assert (doc["exit_code"], doc["outcome"]) == (0, "ok"), captured.output
    assert doc["results"][0]["rows"][0]["quarantined"] == 1 and "land" in doc["timings"]["capture"]
    status = document(runner.invoke(cli, [*base, "status"]).stdout)
    assert status["exit_code"] == 0 and "read" in status["timings"]["status"]
    sources = {r["source"]: r for r in status["results"][0]["rows"]}
    assert sources["files"]["bronze_quarantined"] == 1
    sent = document(runner.invoke(cli, [*base, "signal", "pg", "log", "--message", "hi"]).stdout)
    assert sent["exit_code"] == 0 and "signal file" in sent["messages"][0]
    refused = runner.invoke(cli, [*base, "reconcile", "files"])
    failed = document(refused.stdout)
    assert refused.exit_code == failed["exit_code"] == 1 and failed["outcome"] == "terminal"
    assert failed["error"] and "files" in failed["error"]
    usage = runner.invoke(cli, [*base, "capture", "--metrics-address", "127.0.0.1:1"])
    assert usage.exit_code == document(usage.stdout)["exit_code"] == 2
