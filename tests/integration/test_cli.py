"""The ``medallion`` command line, run in-process with click's runner."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from click.testing import CliRunner
from psycopg import sql

from bronze.writer import BronzeTables, BronzeWriter
from capture.postgresql.slot import parse_lsn
from capture.registry import create_source
from pipeline.cli import EXIT_CONFIG, EXIT_NOT_BUILT, cli
from pipeline.config import load_config
from pipeline.landing import LandingAgent
from tests.pgmodel.streams import postgres_stream, write_lines

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


def test_quality_before_any_cut_says_what_to_run(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    result = CliRunner().invoke(cli, ["--config", str(config), "quality"])
    assert result.exit_code == 1
    assert "no source has a consistent cut" in result.output
    assert "medallion run" in result.output


def test_reconcile_needs_a_database_source(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    runner = CliRunner()
    unknown = runner.invoke(cli, ["--config", str(config), "reconcile", "shp"])
    assert unknown.exit_code == EXIT_CONFIG and "did you mean 'shop'" in unknown.output
    result = runner.invoke(cli, ["--config", str(config), "reconcile", "shop"])
    assert result.exit_code == 1, result.output
    assert "shop" in result.output and "debezium_json" in result.output


def test_capture_then_status(tmp_path: Path) -> None:
    config = write_config(tmp_path)
    runner = CliRunner()
    result = runner.invoke(cli, ["--config", str(config), "--output", "json", "capture"])
    assert result.exit_code == 0, result.output
    landed = titled(result.stdout, "landed")[0]
    assert landed["read"] == landed["landed"] + landed["quarantined"]
    assert landed["quarantined"] == 1 and landed["batches"] > 1
    again = runner.invoke(cli, ["--config", str(config), "--output", "json", "capture"])
    assert titled(again.stdout, "landed")[0]["read"] == 0
    status = runner.invoke(cli, ["--config", str(config), "--output", "json", "status"])
    assert status.exit_code == 0, status.output
    row = titled(status.stdout, "sources")[0]
    assert (row["landed"], row["bronze_quarantined"]) == (landed["landed"], 1)
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


def test_the_configs_log_level_applies_unless_the_option_is_given(tmp_path: Path) -> None:
    config = str(write_config(tmp_path, "logging: {level: WARNING}\n"))
    root = logging.getLogger()
    before = root.level
    try:
        root.setLevel(logging.NOTSET)
        CliRunner().invoke(cli, ["--config", config, "capture", "-s", "shp"])
        assert root.level == logging.WARNING
        root.setLevel(logging.NOTSET)
        args = ["--config", config, "--log-level", "DEBUG", "capture", "-s", "shp"]
        CliRunner().invoke(cli, args)
        assert root.level != logging.WARNING  # the option wins over the file
    finally:
        root.setLevel(before)


def test_unbuilt_source_kind_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from capture import registry
    from capture.db2.config import Db2SourceConfig

    # db2 is built now: a kind registered as designed-only stands in for the next one
    unbuilt = registry.Connector(
        Db2SourceConfig, registry._not_built(registry.SourceType.DB2, "planned")
    )
    monkeypatch.setitem(registry.CONNECTORS, registry.SourceType.DB2, unbuilt)
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "lake: {root: lake}\nsources:\n  - name: ibm\n    connector: db2\n"
        "    database.hostname: localhost\n    database.user: u\n    database.dbname: d\n"
    )
    result = CliRunner().invoke(cli, ["--config", str(config), "capture"])
    assert result.exit_code == EXIT_NOT_BUILT, result.output
    assert "db2 capture agent is not built yet" in result.output


@pytest.mark.spark
def test_capture_then_run_fills_silver(spark: object, tmp_path: Path) -> None:
    config = write_config(tmp_path)
    runner = CliRunner()
    assert runner.invoke(cli, ["--config", str(config), "capture"]).exit_code == 0
    result = runner.invoke(
        cli, ["--config", str(config), "--output", "json", "run", "--once", "--no-quality"]
    )
    assert result.exit_code == 0, result.output
    rows = {r["table"]: r for r in titled(result.stdout, "silver")}
    assert set(rows) == {"shop__public__customers", "shop__public__orders"}
    assert all(r["inserted"] > 0 and r["quarantined"] == 0 for r in rows.values())
    gold = {r["source"]: r for r in titled(result.stdout, "gold")}
    assert gold["shop"]["status"] == "moved"
    again = runner.invoke(cli, ["--config", str(config), "--output", "json", "run", "--no-quality"])
    assert again.exit_code == 0, again.output
    assert titled(again.stdout, "silver") == []
    assert titled(again.stdout, "gold")[0]["status"] == "unchanged"


def document(output: str) -> dict[str, Any]:
    """The one JSON document a command printed with ``--output json``."""
    found = [json.loads(line) for line in output.splitlines() if line.startswith('{"command"')]
    assert len(found) == 1, f"expected one JSON document in {output!r}"
    return dict(found[0])


def titled(output: str, title: str) -> list[dict[str, Any]]:
    """The rows of the JSON result called ``title`` in a command's output."""
    for result in document(output)["results"]:
        if result["title"] == title:
            return list(result["rows"])
    raise AssertionError(f"no result '{title}' in {output!r}")


@pytest.fixture
def pg_corner(pg_dsn: str) -> Iterator[dict[str, str]]:
    """A private schema, slot and publication name on the real PostgreSQL; all dropped after."""
    tag = uuid.uuid4().hex[:8]
    corner = {"schema": f"cli_{tag}", "slot": f"medallion_cli_{tag}", "publication": f"pub_{tag}"}
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(corner["schema"])))
    yield corner
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
            "WHERE slot_name = %s AND active_pid IS NOT NULL",
            (corner["slot"],),
        )
        for _ in range(50):
            try:
                conn.execute(
                    "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                    "WHERE slot_name = %s",
                    (corner["slot"],),
                )
                break
            except psycopg.errors.ObjectInUse:
                time.sleep(0.1)
        conn.execute(
            sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(corner["publication"]))
        )
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(corner["schema"])))


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.mark.postgres
def test_status_shows_the_postgresql_slot_and_its_wal_lag(
    pg_dsn: str, pg_corner: dict[str, str], tmp_path: Path
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    s = pg_corner["schema"]
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        "lake: {root: lake}\n"
        "sources:\n"
        "  - name: pg\n"
        "    connector: postgresql\n"
        f"    database.hostname: {info.get('host', '127.0.0.1')}\n"
        f"    database.port: {info.get('port', 5432)}\n"
        f"    database.user: {info.get('user', 'postgres')}\n"
        f"    database.dbname: {info.get('dbname', 'postgres')}\n"
        "    topic.prefix: srv\n"
        f"    slot.name: {pg_corner['slot']}\n"
        f"    publication.name: {pg_corner['publication']}\n"
        f"    schema.include.list: {s}\n"
        "  - name: down\n"
        "    connector: postgresql\n"
        "    database.hostname: 127.0.0.1\n"
        f"    database.port: {_closed_port()}\n"
        "    database.user: postgres\n"
        "    database.dbname: postgres\n"
        "    topic.prefix: down\n"
        "    slot.name: never_created\n"
    )
    runner = CliRunner()

    def status() -> dict[str, dict[str, Any]]:
        result = runner.invoke(cli, ["--config", str(config), "--output", "json", "status"])
        assert result.exit_code == 0, result.output
        return {r["source"]: r for r in titled(result.stdout, "sources")}

    def server(query: str) -> Any:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            row = conn.execute(query, (pg_corner["slot"],)).fetchone()
            assert row is not None
            return row[0]

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {s}.t (id int PRIMARY KEY, v text)")
    before = status()
    assert before["pg"]["slot"] == pg_corner["slot"] and before["pg"]["slot_active"] is None
    assert "does not exist" in before["pg"]["slot_error"]
    down = before["down"]
    assert down["slot"] == "never_created" and down["slot_active"] is None
    assert "cannot connect" in down["slot_error"]

    assert runner.invoke(cli, ["--config", str(config), "capture", "-s", "pg"]).exit_code == 0
    caught_up = status()["pg"]
    assert caught_up["slot_error"] is None and caught_up["slot_active"] is False
    # the agent confirmed everything it read: what is behind the slot is what came after
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        start = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
        conn.execute(
            f"INSERT INTO {s}.t SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g"
        )
        end = conn.execute("SELECT pg_current_wal_lsn()::text").fetchone()
    assert start is not None and end is not None
    written = parse_lsn(end[0]) - parse_lsn(start[0])
    behind = status()["pg"]
    expected_lag = server(
        "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint "
        "FROM pg_replication_slots WHERE slot_name = %s"
    )
    assert written > 400_000  # 2000 rows of 200+ bytes
    assert written <= behind["slot_lag_bytes"] <= expected_lag
    assert behind["retained_wal_bytes"] >= behind["slot_lag_bytes"]
    # max_slot_wal_keep_size is unlimited on the test server: no headroom limit to report
    assert behind["retention_headroom_bytes"] is None

    # while an agent follows the slot it is active; once it has landed the rows, the lag is gone
    agent = LandingAgent(
        create_source(load_config(str(config)).source("pg")),
        BronzeWriter(BronzeTables.under(tmp_path / "lake")),
    )
    stop = threading.Event()
    follower = threading.Thread(
        target=lambda: agent.run(follow=True, poll_interval_s=0.1, stop=stop)
    )
    follower.start()
    try:
        deadline = time.monotonic() + 60
        while True:
            running = status()["pg"]
            if running["slot_active"] and running["slot_lag_bytes"] < written:
                break
            assert time.monotonic() < deadline, running
            time.sleep(0.2)
    finally:
        stop.set()
        follower.join(timeout=60)
    text = runner.invoke(cli, ["--config", str(config), "status"])
    assert text.exit_code == 0, text.output
    header, pg_line = text.output.splitlines()[1:3]
    for column in (
        "slot",
        "slot_active",
        "slot_lag_bytes",
        "retained_wal_bytes",
        "retention_headroom_bytes",
        "slot_error",
    ):
        assert column in header.split()
    assert pg_line.split()[0] == "pg" and pg_corner["slot"] in pg_line.split()
