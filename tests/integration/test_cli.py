"""The ``medallion`` command line, run in-process with click's runner."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from capture.synthetic import postgres_stream, write_lines
from pipeline.cli import EXIT_CONFIG, EXIT_NOT_BUILT, cli

pytestmark = pytest.mark.delta


def write_config(tmp_path: Path, extra: str = "") -> Path:
    stream = postgres_stream(snapshot_rows=3, transactions=12, seed=5)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    lines = [*stream.lines("kafka_json", schemas=True), b"{oops"]
    write_lines(inbox / "a.jsonl", iter(lines))
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "lake: {root: lake}\n"
        "bronze: {max.batch.size: 20}\n"
        "sources:\n"
        "  - name: shop\n"
        "    connector: debezium_json\n"
        "    path: inbox\n" + extra
    )
    return config


def test_help_lists_every_command() -> None:
    result = CliRunner().invoke(cli, ["--help"])
    assert result.exit_code == 0
    for command in ("capture", "run", "quality", "reconcile", "status", "demo"):
        assert command in result.output
    assert "--config" in result.output and "--log-level" in result.output


@pytest.mark.parametrize("command", [["quality"], ["reconcile"]])
def test_unbuilt_commands_say_so(command: list[str], tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = CliRunner().invoke(cli, ["--config", str(config), *command])
    assert result.exit_code == EXIT_NOT_BUILT
    assert "not built yet" in result.output


def test_capture_then_status(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["--config", str(config), "--output", "json", "capture"])
    assert result.exit_code == 0, result.output
    landed = json.loads(result.output.strip().splitlines()[-1])["rows"][0]
    assert landed["read"] == landed["landed"] + landed["quarantined"]
    assert landed["quarantined"] == 1 and landed["batches"] > 1
    again = runner.invoke(cli, ["--config", str(config), "--output", "json", "capture"])
    assert json.loads(again.output.strip().splitlines()[-1])["rows"][0]["read"] == 0
    status = runner.invoke(cli, ["--config", str(config), "--output", "json", "status"])
    assert status.exit_code == 0, status.output
    row = json.loads(status.output.strip().splitlines()[-1])["rows"][0]
    assert (row["landed"], row["quarantined"]) == (landed["landed"], 1)
    assert row["last_batch"] == landed["last_batch"]
    assert row["offset"]["files"]["a.jsonl"][1] == landed["read"]


def test_broken_config_fails_before_any_work(tmp_path: Path) -> None:
    config = write_config(tmp_path, "    fromat: auto\n")
    result = CliRunner().invoke(cli, ["--config", str(config), "capture"])
    assert result.exit_code == EXIT_CONFIG
    assert str(config) in result.output and "did you mean 'format'" in result.output
    assert not (tmp_path / "lake").exists()


def test_unknown_source_name_suggests(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = CliRunner().invoke(cli, ["--config", str(config), "capture", "-s", "shp"])
    assert result.exit_code == EXIT_CONFIG
    assert "did you mean 'shop'" in result.output


def test_unbuilt_source_kind_is_reported(tmp_path: Path) -> None:
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "lake: {root: lake}\nsources:\n  - name: mongo\n    connector: mongodb\n"
        "    mongodb.connection.string: mongodb://localhost:27017/?replicaSet=rs0\n"
    )
    result = CliRunner().invoke(cli, ["--config", str(config), "capture"])
    assert result.exit_code == EXIT_NOT_BUILT
    assert "mongodb capture agent is not built yet" in result.output


@pytest.mark.spark
def test_capture_then_run_fills_silver(spark: object, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["--config", str(config), "capture"]).exit_code == 0
    result = runner.invoke(cli, ["--config", str(config), "--output", "json", "run", "--once"])
    assert result.exit_code == 0, result.output
    rows = {r["table"]: r for r in json.loads(result.output.strip().splitlines()[-1])["rows"]}
    assert set(rows) == {"shop__public__customers", "shop__public__orders"}
    assert all(r["inserted"] > 0 and r["quarantined"] == 0 for r in rows.values())
    again = runner.invoke(cli, ["--config", str(config), "--output", "json", "run"])
    assert again.exit_code == 0, again.output
    assert json.loads(again.output.strip().splitlines()[-1])["rows"] == []
