"""SIGTERM and SIGINT stop a real ``medallion capture --follow`` process cleanly, with a log
line, and lose or double nothing (real PostgreSQL, the CLI as a child process).

After the initial snapshot, the agent follows a table while transactions keep arriving. The
first SIGTERM lets it commit the batch in flight and exit 0 ("stopped on SIGTERM after its
last committed batch"). A second run is stopped with two signals in a row: the second abandons
the batch in flight (exit 143; 0 if the first already let it finish). A last run without
``--follow`` catches up; bronze then holds every inserted row exactly once.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psycopg
import pytest
import yaml
from deltalake import DeltaTable

from tests.fix_servers import REPO_ROOT
from tests.integration.test_pg_capture import (
    Pg,
    assert_positions_unique_and_ordered,
    data,
    pg_corner,
)

pytestmark = [pytest.mark.postgres, pytest.mark.delta]


@pytest.fixture
def pg(pg_dsn: str) -> object:
    yield from pg_corner(pg_dsn)


def _config(pg: Pg, tmp_path: Path) -> Path:
    info = psycopg.conninfo.conninfo_to_dict(pg.dsn)
    source = {
        "name": "pg",
        "connector": "postgresql",
        "database.hostname": info.get("host", "127.0.0.1"),
        "database.port": int(str(info.get("port", 5432))),
        "database.user": info.get("user", "postgres"),
        "database.dbname": info.get("dbname", "postgres"),
        "topic.prefix": "srv",
        "slot.name": pg.slot,
        "publication.name": pg.publication,
        "schema.include.list": pg.schema,
        "poll.interval.ms": 50,
    }
    document = {"lake": {"root": "lake"}, "bronze": {"max.batch.size": 100}, "sources": [source]}
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(document), encoding="utf-8")
    return config


def _agent(config: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "pipeline.cli", "--config", str(config), "capture", "-s", "pg"]
        + list(args),
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _landed(lake: Path) -> int:
    path = lake / "bronze" / "events"
    if not (path / "_delta_log").exists():
        return 0
    return DeltaTable(str(path)).to_pyarrow_table().num_rows


class Writer:
    """Inserts 20-row transactions until stopped; ``ids`` is everything committed."""

    def __init__(self, pg: Pg, start: int) -> None:
        self.pg = pg
        self.next = start
        self.ids: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        with psycopg.connect(self.pg.dsn, autocommit=True) as conn:
            while not self._stop.is_set():
                ids = list(range(self.next, self.next + 20))
                conn.execute(
                    f"INSERT INTO {self.pg.schema}.t SELECT g, 'v' || g FROM unnest(%s::int[]) g",
                    [ids],
                )
                self.ids += ids
                self.next += 20
                time.sleep(0.1)

    def __enter__(self) -> Writer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _wait_for_rows(lake: Path, agent: subprocess.Popen[str], more_than: int) -> None:
    for _ in range(600):
        if _landed(lake) > more_than:
            return
        if agent.poll() is not None:
            pytest.fail(f"the agent exited early: {agent.communicate()}")
        time.sleep(0.1)
    pytest.fail("the agent landed nothing within 60 s")


def test_sigterm_finishes_the_batch_and_a_second_signal_abandons_it(pg: Pg, tmp_path: Path) -> None:
    pg.sql(f"CREATE TABLE {pg.schema}.t (id int PRIMARY KEY, v text)")
    config = _config(pg, tmp_path)
    lake = tmp_path / "lake"
    # The (empty) snapshot first: a snapshot resumed in a fresh transaction may read a row the
    # stream delivers too (by design, as Debezium's); exactly once is the stream's promise.
    first = _agent(config)
    _out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    inserted: list[int] = []
    with Writer(pg, 0) as writer:
        agent = _agent(config, "--follow")
        _wait_for_rows(lake, agent, _landed(lake))
        agent.send_signal(signal.SIGTERM)
        _out, err = agent.communicate(timeout=120)
    inserted += writer.ids
    assert agent.returncode == 0, err
    assert "received SIGTERM: stopping after the batch in flight" in err
    assert "capture stopped on SIGTERM after its last committed batch" in err

    with Writer(pg, 1_000_000) as writer:
        agent = _agent(config, "--follow")
        _wait_for_rows(lake, agent, _landed(lake))
        agent.send_signal(signal.SIGTERM)
        agent.send_signal(signal.SIGTERM)
        _out, err = agent.communicate(timeout=120)
    inserted += writer.ids
    assert agent.returncode in (0, 128 + signal.SIGTERM), err
    assert "received SIGTERM" in err

    catch_up = _agent(config)
    _out, err = catch_up.communicate(timeout=300)
    assert catch_up.returncode == 0, err
    landed = Counter(r["key"]["id"] for r in data(lake, "t"))
    assert landed == Counter(inserted), "rows lost or landed twice"
    assert_positions_unique_and_ordered(lake)
