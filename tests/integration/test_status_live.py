"""``medallion status`` tells the truth about a running agent (real PostgreSQL, the CLI as a
child process).

While ``medallion capture --follow`` runs, the replication slot is active (its walsender is
the agent's; the agent answers keepalives between batches), bronze's counts and positions move
as rows arrive and the source -> bronze lag is measured; once the agent has stopped, the slot
is inactive and the committed offset stays where the agent left it.
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

from pipeline.config import load_config
from pipeline.status import pipeline_status
from tests.fix_servers import REPO_ROOT
from tests.integration.test_pg_capture import Pg, pg_corner
from tests.integration.test_shutdown import _config

pytestmark = [pytest.mark.postgres, pytest.mark.delta]

WAIT_S = 60.0
"""How long a state may take to appear on a loaded machine (a wait, never an assertion)."""


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


def _status(config: Path) -> dict[str, Any]:
    (row,), _tables = pipeline_status(load_config(config))
    return row


def _wait_for(config: Path, what: str, ok: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
    deadline = time.monotonic() + WAIT_S
    row = _status(config)
    while not ok(row):
        assert time.monotonic() < deadline, f"status never showed {what}: {row}"
        time.sleep(0.2)
        row = _status(config)
    return row


def test_status_follows_a_running_agent_and_its_stop(pg: Pg, tmp_path: Path) -> None:
    pg.sql(
        f"CREATE TABLE {pg.schema}.items (id int PRIMARY KEY, name text)",
        f"INSERT INTO {pg.schema}.items SELECT g, 'n' || g FROM generate_series(1, 5) g",
    )
    config = _config(pg, tmp_path)
    agent = subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "--config", str(config), "capture", "--follow"],
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # the snapshot (5 rows + its end marker) lands, and the stream holds the slot
        running = _wait_for(
            config, "the snapshot landed and the slot active", lambda r: r["slot_active"] is True
        )
        assert running["slot"] == pg.slot and running["slot_error"] is None, running
        first = _wait_for(config, "5 rows landed", lambda r: r["landed"] >= 5)
        pg.sql(f"INSERT INTO {pg.schema}.items VALUES (6, 'six'), (7, 'seven')")
        moved = _wait_for(config, "the new rows", lambda r: r["landed"] >= first["landed"] + 2)
        assert moved["slot_active"] is True, moved
        assert moved["last_batch"] > first["last_batch"], (first, moved)
        assert moved["bronze_position"] != first["bronze_position"], (first, moved)
        assert moved["lag_source_bronze_s"] is not None and moved["lag_source_bronze_s"] >= 0
        assert moved["slot_lag_bytes"] is not None and moved["slot_lag_bytes"] >= 0
        assert moved["offset"]["format"] is not None, moved
    finally:
        agent.send_signal(signal.SIGTERM)
        _out, err = agent.communicate(timeout=WAIT_S)
    assert agent.returncode == 0, err[-2000:]
    stopped = _wait_for(config, "the slot inactive", lambda r: r["slot_active"] is False)
    assert stopped["landed"] == moved["landed"] and stopped["offset"] == moved["offset"], (
        moved,
        stopped,
    )
    assert stopped["slot_error"] is None, stopped
