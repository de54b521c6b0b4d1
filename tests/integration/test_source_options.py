"""A source's own ``max.batch.size`` and ``poll.interval.ms`` reach its landing agent."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.config import load_config
from pipeline.landing import LandingAgent
from pipeline.orchestration import landing_agent

pytestmark = pytest.mark.delta


class _StopAfterOneWait(threading.Event):
    """A stop event that records the idle wait of a following agent and then stops it."""

    waited: float | None = None

    def wait(self, timeout: float | None = None) -> bool:
        self.waited = timeout
        self.set()
        return True


def test_a_sources_batch_size_and_poll_interval_reach_its_agent(tmp_path: Path) -> None:
    (tmp_path / "files").mkdir()
    config_path = tmp_path / "pipeline.yaml"
    config_path.write_text(
        "bronze: {max.batch.size: 500}\n"
        "sources:\n"
        "  - {name: pg, connector: postgresql, database.hostname: h, database.user: u,\n"
        "     database.dbname: d, max.batch.size: 7, poll.interval.ms: 250}\n"
        "  - {name: files, connector: debezium_json, path: files}\n"
    )
    config = load_config(config_path, env={})
    writer = BronzeWriter(BronzeTables.under(tmp_path / "lake"))
    pg_agent = landing_agent(config, config.source("pg"), writer)
    assert (pg_agent.max_events, pg_agent.poll_interval_s) == (7, 0.25)
    files_agent = landing_agent(config, config.source("files"), writer)
    assert files_agent.max_events == 500  # no source-level key: bronze.max.batch.size

    # The agent sleeps its own interval when a followed source has nothing new.
    stop = _StopAfterOneWait()
    agent = LandingAgent(
        DebeziumJsonSource("files", tmp_path / "files"), writer, poll_interval_s=0.25
    )
    agent.run(follow=True, stop=stop)
    assert stop.waited == 0.25
