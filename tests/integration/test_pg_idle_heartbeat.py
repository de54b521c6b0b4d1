"""Heartbeats land while the whole database is idle (a private PostgreSQL nobody else writes).

With ``heartbeat.interval.ms`` set, a heartbeat needs a WAL position past the last confirmed
one; on a database where nothing at all is written there is none, so the agent writes a slot
marker (a logical message it skips when read back) and the next batch lands the heartbeat and
moves the slot. The session cluster cannot show this (other tests write WAL all the time), so
this test starts a cluster of its own.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from bronze import schema as S
from capture.postgresql.slot import parse_lsn
from tests.fix_servers import _private_server
from tests.integration.test_pg_capture import Pg, land, rows

pytestmark = [pytest.mark.postgres, pytest.mark.delta]


@pytest.fixture
def idle_pg(request: pytest.FixtureRequest) -> Iterator[Pg]:
    with _private_server(
        request.config, "PostgreSQL (idle)", "pg_test_cluster.sh", "medallion-pg-idle-"
    ) as (port, _dir):
        tag = uuid.uuid4().hex[:8]
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        pg = Pg(dsn, f"t_{tag}", f"medallion_{tag}", f"pub_{tag}")
        pg.sql(f"CREATE SCHEMA {pg.schema}", f"CREATE TABLE {pg.schema}.quiet (id int PRIMARY KEY)")
        yield pg


def _confirmed(pg: Pg) -> int:
    (lsn,) = pg.query(
        "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = %s",
        (pg.slot,),
    )[0]
    return parse_lsn(lsn)


def _beats(lake: Path) -> list[str]:
    return [r[S.ORIGIN] for r in rows(lake) if r[S.KIND] == "heartbeat"]


def test_heartbeats_keep_landing_and_moving_the_slot_on_an_idle_database(
    idle_pg: Pg, tmp_path: Path
) -> None:
    config = idle_pg.config(**{"heartbeat.interval.ms": 100})
    lake = tmp_path / "lake"
    land(config, lake)  # the (empty) snapshot and the slot
    # The first heartbeat confirms what the slot's creation wrote; after it nothing at all is
    # written to this cluster but by the agent, so later ones need its marker.
    for _ in range(30):
        if len(_beats(lake)) >= 1:
            break
        time.sleep(0.15)
        land(config, lake)
    first_wal = parse_lsn(idle_pg.query("SELECT pg_current_wal_lsn()::text")[0][0])
    for _ in range(30):
        if len(_beats(lake)) >= 3:
            break
        time.sleep(0.15)
        land(config, lake)
    beats = _beats(lake)
    assert len(beats) >= 3, f"heartbeats stopped on the idle database: {beats}"
    land(config, lake)  # acknowledges the batch that held the last heartbeat
    assert _confirmed(idle_pg) > first_wal
    assert not [r for r in rows(lake) if r[S.KIND] == "message"]  # markers are skipped
