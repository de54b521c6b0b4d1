"""The metric objects without a process around them: Debezium's snapshot and streaming values from
committed batches, the address, the quarantine reason classes, the ``--output json`` document,
and the Grafana dashboard naming only metrics the code serves."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from pipeline import run_report
from pipeline.config import load_config
from pipeline.errors import ConfigError
from pipeline.metrics import metric_names
from pipeline.metrics_debezium import DebeziumCollector
from pipeline.metrics_lake import reason_class
from pipeline.metrics_server import parse_address
from tests.fix_servers import REPO_ROOT

DASHBOARD = REPO_ROOT / "docs" / "grafana" / "medallion.json"


def _scrape(collector: DebeziumCollector) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _value(samples: dict[Any, float], name: str, context: str, **extra: str) -> float:
    labels = {"plugin": "postgres", "name": "pg", "context": context, **extra}
    return samples[(f"debezium_metrics_{name}", tuple(sorted(labels.items())))]


def _row(op: str, table: str, snapshot: str | None, tx: str | None, ts: int) -> tuple[Any, ...]:
    return ("data", op, table, tx, snapshot, ts)


def test_debezium_metrics_follow_the_snapshot_then_the_stream() -> None:
    collector = DebeziumCollector()
    stats = collector.source("pg", "postgresql")
    stats.connected, stats.queue_capacity = True, 100
    started = 1_700_000_000_000
    progress = {"tables": [["public", "a"], ["public", "b"], ["public", "c"]], "index": 1}
    stats.committed(
        [_row("r", "public.a", "true", None, started)] * 3
        + [_row("r", "public.b", "true", None, started)],
        quarantined=0,
        offset={"snapshot": {**progress, "ts_ms": started}},
    )
    during = _scrape(collector)
    assert _value(during, "SnapshotRunning", "snapshot") == 1
    assert _value(during, "TotalTableCount", "snapshot") == 3
    assert _value(during, "RemainingTableCount", "snapshot") == 2
    assert _value(during, "RowsScanned", "snapshot", table="public.a") == 3
    assert _value(during, "SnapshotDurationInSeconds", "snapshot") > 0
    stats.queue(40)
    assert _value(_scrape(collector), "QueueRemainingCapacity", "streaming") == 60

    stats.committed(
        [_row("r", "public.c", "last", None, started), ("heartbeat", None, None, None, None, 1)],
        quarantined=2,
        offset={"snapshot": None},
    )
    stream = [
        _row("c", "public.a", None, "tx1", started + 10),
        _row("u", "public.a", None, "tx1", started + 10),
        _row("d", "public.b", "false", "tx2", started + 20),
        ("transaction", None, None, "tx2", None, started + 20),
    ]
    stats.committed(stream, quarantined=1, offset={"lsn": "0/1"})
    after = _scrape(collector)
    assert _value(after, "SnapshotRunning", "snapshot") == 0
    assert _value(after, "SnapshotCompleted", "snapshot") == 1
    assert _value(after, "RemainingTableCount", "snapshot") == 0
    assert _value(after, "TotalNumberOfEventsSeen", "snapshot") == 5
    assert _value(after, "NumberOfErroneousEvents", "snapshot") == 2
    assert _value(after, "TotalNumberOfEventsSeen", "streaming") == 3  # data events only
    assert _value(after, "NumberOfErroneousEvents", "streaming") == 1
    assert [
        _value(after, f"TotalNumberOf{op}EventsSeen", "streaming")
        for op in ("Create", "Update", "Delete")
    ] == [1, 1, 1]
    assert _value(after, "NumberOfCommittedTransactions", "streaming") == 2
    cut = [_row("c", "public.a", None, "tx3", started + 30)] * 2
    stats.committed(cut, quarantined=0, offset=None, partial=frozenset({"tx3"}))
    assert _value(_scrape(collector), "NumberOfCommittedTransactions", "streaming") == 2
    stats.committed(cut[:1], quarantined=0, offset=None)  # the rest of tx3, with its end
    assert _value(_scrape(collector), "NumberOfCommittedTransactions", "streaming") == 3
    after = _scrape(collector)
    assert _value(after, "MilliSecondsBehindSource", "streaming") > 0
    assert _value(after, "QueueRemainingCapacity", "streaming") == 100
    assert _value(after, "Connected", "streaming") == 1
    duration = _value(after, "SnapshotDurationInSeconds", "snapshot")
    assert duration == _value(_scrape(collector), "SnapshotDurationInSeconds", "snapshot")


def test_a_snapshot_inside_one_batch_counts_its_tables_from_the_rows() -> None:
    collector = DebeziumCollector()
    stats = collector.source("m", "mysql")
    stats.committed(
        [("data", "r", "db.a", None, "first", 5), ("data", "r", "db.b", None, "last", 5)],
        quarantined=0,
        offset={"file": "binlog.000001", "pos": 4},
    )
    samples = _scrape(collector)
    labels = {"plugin": "mysql", "name": "m", "context": "snapshot"}
    assert samples[("debezium_metrics_TotalTableCount", tuple(sorted(labels.items())))] == 2
    assert samples[("debezium_metrics_SnapshotCompleted", tuple(sorted(labels.items())))] == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), ("[::1]:80", ("::1", 80)), ("host:1", ("host", 1))],
)
def test_address_parses(text: str, expected: tuple[str, int]) -> None:
    assert parse_address(text) == expected


@pytest.mark.parametrize("text", ["9464", "host:", "host:70000", "a b:1", "host:0"])
def test_bad_address_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="host:port|outside"):
        parse_address(text)


def test_metrics_config_is_validated_once_with_did_you_mean(tmp_path: Path) -> None:
    good = tmp_path / "good.yaml"
    good.write_text("metrics: {address: '127.0.0.1:9464'}\n")
    assert load_config(good).metrics.address == "127.0.0.1:9464"
    assert load_config(tmp_path / "good.yaml", env={}).metrics.address == "127.0.0.1:9464"
    typo = tmp_path / "typo.yaml"
    typo.write_text("metrics: {adress: '127.0.0.1:9464'}\n")
    with pytest.raises(ConfigError, match="did you mean 'address'"):
        load_config(typo)
    bad = tmp_path / "bad.yaml"
    bad.write_text("metrics: {address: '127.0.0.1'}\n")
    with pytest.raises(ConfigError, match="metrics.address.*not host:port"):
        load_config(bad)


def test_reason_classes_drop_values() -> None:
    assert reason_class("value does not decode: amount='x1'") == "value does not decode"
    assert reason_class("unknown op 'z'") == "unknown op"
    assert reason_class(None) == "unknown"
    assert reason_class("'x' cannot be cast") == "'x' cannot be cast"[:48]


def test_run_report_is_one_document_with_the_exit_meaning() -> None:
    report = run_report.begin("run")
    run_report.add_result("silver", [{"table": "t", "events": 3}])
    run_report.add_message("done")
    run_report.add_stages("gold", {"publish": 0.25})
    run_report.add_stages("gold", {"publish": 0.5})
    with run_report.stage("quality", "checks"):
        pass
    doc = json.loads(report.render(75, "error: lost"))
    assert doc["command"] == "run" and doc["exit_code"] == 75 and doc["outcome"] == "retryable"
    assert doc["results"] == [{"title": "silver", "rows": [{"table": "t", "events": 3}]}]
    assert doc["messages"] == ["done"] and doc["error"] == "error: lost"
    assert doc["timings"]["gold"] == {"publish": 0.75} and "checks" in doc["timings"]["quality"]
    assert run_report.exit_meaning(143)[0] == "signal"
    assert run_report.exit_meaning(2)[0] == "config"


def _expressions(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("expr", "definition") and isinstance(value, str):
                yield value
            else:
                yield from _expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from _expressions(item)


def test_grafana_dashboard_names_only_served_metrics() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    served = metric_names()
    used: set[str] = set()
    for panel in panels:
        assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
        assert panel["targets"] and {"x", "y", "w", "h"} <= set(panel["gridPos"])
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${datasource}"
    for expr in _expressions(dashboard):
        names = set(re.findall(r"\b(?:debezium_metrics|medallion)_\w+", expr))
        assert names, expr
        assert names <= served, names - served
        used |= names
    families = {
        re.sub(r"_(bucket|sum|count)$", "", n)
        for n in served
        if not n.endswith(("_sum", "_count")) or n.endswith("_bucket")
    }
    assert not {n for n in families if n not in used and f"{n}_bucket" not in used}


@pytest.mark.delta
def test_lake_metrics_read_bronze_from_statistics_and_files_that_mix_sources(
    tmp_path: Path,
) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    from pipeline.metrics_lake import read_lake

    events = tmp_path / "bronze" / "events"
    one = pa.table({"source": ["a", "a"], "source_ts_ms": [5, 9]})
    write_deltalake(str(events), one)
    write_deltalake(
        str(events), pa.table({"source": ["b", "a"], "source_ts_ms": [7, 11]}), mode="append"
    )
    quarantine = tmp_path / "bronze" / "quarantine"
    write_deltalake(
        str(quarantine), pa.table({"source": ["a"], "error_class": ["JSONDecodeError"]})
    )
    snap = read_lake(tmp_path)
    assert snap.errors == 0
    assert snap.bronze_rows == {"a": 3, "b": 1}
    assert snap.bronze_ts_ms == {"a": 11, "b": 7}
    assert snap.quarantined == {("bronze", "a", "JSONDecodeError"): 1}
    assert read_lake(tmp_path / "nothing").bronze_rows == {}
