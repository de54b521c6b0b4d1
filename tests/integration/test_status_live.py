"""``medallion status`` tells the truth about a running agent (real PostgreSQL and MariaDB, the
CLI as a child process).

While ``medallion capture --follow`` runs, bronze's counts and positions move as rows arrive
and the source -> bronze lag is measured. PostgreSQL: the replication slot is active while the
agent runs (its walsender is the agent's; the agent answers keepalives between batches) and
inactive once it has stopped. MariaDB: the binlog end and the binlog after bronze's offset are
reported; ``slot_active`` stays unknown (None), because the agent's binlog dumps end at the
binlog's end and reconnect at the next poll, so no connection stands for "running". After the
stop, the committed offset stays where the agent left it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from pipeline.config import load_config
from pipeline.status import pipeline_status
from tests.fix_servers import REPO_ROOT
from tests.integration.test_mysql_capture import My, corner
from tests.integration.test_pg_capture import Pg, pg_corner
from tests.integration.test_shutdown import _config

pytestmark = pytest.mark.delta

WAIT_S = 60.0
"""How long a state may take to appear on a loaded machine (a wait, never an assertion)."""

Row = dict[str, Any]


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    yield from corner(mariadb_conn)


def _status(config: Path) -> Row:
    (row,), _tables = pipeline_status(load_config(config))
    return row


def _wait_for(config: Path, what: str, ok: Callable[[Row], bool]) -> Row:
    deadline = time.monotonic() + WAIT_S
    row = _status(config)
    while not ok(row):
        assert time.monotonic() < deadline, f"status never showed {what}: {row}"
        time.sleep(0.2)
        row = _status(config)
    return row


def _follow(config: Path, running: Callable[[Row], bool], insert: Callable[[], None]) -> Row:
    """Run ``capture --follow``; once status shows ``running`` and the first rows, insert two
    more; the status row that shows them, taken while the agent still runs. The agent is
    stopped with SIGTERM and must exit 0."""
    agent = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "--config", str(config), "capture", "--follow"],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        first = _wait_for(config, "5 rows, running", lambda r: r["landed"] >= 5 and running(r))
        insert()
        moved = _wait_for(config, "the new rows", lambda r: r["landed"] >= first["landed"] + 2)
        assert running(moved), moved
        assert moved["last_batch"] > first["last_batch"], (first, moved)
        assert moved["bronze_position"] != first["bronze_position"], (first, moved)
        assert moved["lag_source_bronze_s"] is not None and moved["lag_source_bronze_s"] >= 0
        assert moved["slot_lag_bytes"] is not None and moved["slot_lag_bytes"] >= 0, moved
        assert moved["slot_error"] is None, moved
    finally:
        agent.send_signal(signal.SIGTERM)
        _out, err = agent.communicate(timeout=WAIT_S)
    assert agent.returncode == 0, err[-2000:]
    return moved


@pytest.mark.postgres
def test_status_follows_a_running_postgres_agent_and_its_stop(pg: Pg, tmp_path: Path) -> None:
    pg.sql(
        f"CREATE TABLE {pg.schema}.items (id int PRIMARY KEY, name text)",
        f"INSERT INTO {pg.schema}.items SELECT g, 'n' || g FROM generate_series(1, 5) g",
    )
    config = _config(pg, tmp_path)
    moved = _follow(
        config,
        lambda r: r["slot_active"] is True and r["slot"] == pg.slot,
        lambda: pg.sql(f"INSERT INTO {pg.schema}.items VALUES (6, 'six'), (7, 'seven')"),
    )
    stopped = _wait_for(config, "the slot inactive", lambda r: r["slot_active"] is False)
    assert (stopped["landed"], stopped["offset"]) == (moved["landed"], moved["offset"]), stopped
    assert stopped["slot_error"] is None, stopped


@pytest.mark.mysql
def test_status_follows_a_running_mariadb_agent_and_its_stop(my: My, tmp_path: Path) -> None:
    my.sql(
        f"CREATE TABLE {my.database}.items (id INT PRIMARY KEY, name TEXT)",
        f"INSERT INTO {my.database}.items VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd'), (5, 'e')",
    )
    document = {"lake": {"root": "lake"}, "sources": [my.raw(**{"poll.interval.ms": 50})]}
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    moved = _follow(
        config,
        lambda r: str(r["slot"]).startswith("binlog ") and r["slot_active"] is None,
        lambda: my.sql(f"INSERT INTO {my.database}.items VALUES (6, 'six'), (7, 'seven')"),
    )
    stopped = _status(config)
    assert (stopped["landed"], stopped["offset"]) == (moved["landed"], moved["offset"]), stopped
    assert stopped["slot_error"] is None and stopped["slot_lag_bytes"] is not None, stopped
