"""The mining loop's knobs, honoured against the Oracle LogMiner model: the adaptive sleep
between rounds (``log.mining.sleep.time.*``), abandoning long transactions
(``log.mining.transaction.retention.ms``) and the LGWR flush table
(``log.mining.flush.table.name``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.oracle.agent import DBAPI_ENV
from tests.integration.test_oracle_capture import CUSTOMERS, Corner, _insert, _person, corner
from tests.oraclemodel.database import OracleModel

pytestmark = pytest.mark.delta

__all__ = ["corner"]  # the fixture, shared with the capture tests

SLEEPS = {  # the documented defaults (the tests' Corner turns the sleep off)
    "log.mining.sleep.time.min.ms": 0,
    "log.mining.sleep.time.default.ms": 1000,
    "log.mining.sleep.time.max.ms": 3000,
    "log.mining.sleep.time.increment.ms": 200,
}


def test_the_sleep_between_mining_rounds_shrinks_while_behind_and_grows_when_caught_up(
    corner: Corner,
) -> None:
    corner.land()
    for n in range(1, 101):
        _insert(corner, _person(n), thread=1 + n % 2)  # far more SCNs than the default window
    committed = BronzeWriter(BronzeTables.under(corner.lake)).last_committed(agent_app_id("ora"))
    assert committed is not None
    windows = {  # small windows: many rounds while behind
        "log.mining.batch.size.min": 2,
        "log.mining.batch.size.default": 10,
        "log.mining.batch.size.max": 20,
    }
    source = corner.source(**SLEEPS, **windows)
    pauses: list[float] = []
    source._sleep = pauses.append  # type: ignore[assignment]  # the requested pauses
    source.open(committed.offset)
    while not source.read_batch(max_events=1000, max_transaction_events=1000).exhausted:
        pass
    # none before the first round, then 1000 ms less 200 ms per round while behind, down to
    # the minimum, 0 (no pause at all)
    assert pauses == pytest.approx([0.8, 0.6, 0.4, 0.2])
    assert source._pace.sleep_ms == 200  # the last round caught up: 200 ms more
    for n in range(101, 104):  # caught up: a little redo per round
        _insert(corner, _person(n))
        source.read_batch(max_events=1000, max_transaction_events=1000)
    source.close()
    assert pauses[4:] == pytest.approx([0.2, 0.4, 0.6])  # caught up: 200 ms more per round


def test_a_transaction_open_longer_than_the_retention_is_abandoned(
    corner: Corner, caplog: pytest.LogCaptureFixture
) -> None:
    retention = {"log.mining.transaction.retention.ms": 50}  # model time: 1 ms per SCN
    corner.land(corner.source(**retention))
    with corner.edit() as model:
        long = model.begin(thread=2)
        model.insert(long, "DEBEZIUM", "CUSTOMERS", _person(100))
    for n in range(1, 31):
        _insert(corner, _person(n))
    caplog.set_level("WARNING", "capture.oracle.stream")
    corner.land(corner.source(**retention))
    assert f"transaction {long} (started at SCN" in caplog.text
    assert "longer than log.mining.transaction.retention.ms 50: abandoned" in caplog.text
    # the abandoned transaction goes on and commits; a new agent resumes from the offset, which
    # no longer holds its start: its later rows and COMMIT must not make a partial transaction
    with corner.edit() as model:
        model.insert(long, "DEBEZIUM", "CUSTOMERS", _person(101))
        model.commit(long)
    _insert(corner, _person(31))
    corner.land(corner.source(**retention))
    assert [r["key"]["ID"] for r in corner.records()] == list(range(1, 32))


def _open_row_then_commit(corner: Corner, source: Any) -> list[int]:
    """A committed row, then an open transaction's row written after that commit (still in the
    log buffer), a round mined and landed, then the open transaction's COMMIT: the keys."""
    corner.land()
    _insert(corner, _person(10))
    with corner.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", _person(1))
    corner.land(source)  # lands row 10; the round also covers the open transaction's row
    with corner.edit() as model:
        model.insert(xid, "DEBEZIUM", "CUSTOMERS", _person(2))
        model.commit(xid)
    corner.land()
    return [r["key"]["ID"] for r in corner.records()]


@pytest.fixture
def buffered(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Corner:
    """A model whose redo since the last COMMIT stays in LGWR's log buffer."""
    monkeypatch.setenv(DBAPI_ENV, "tests.oraclemodel.dbapi")
    model = OracleModel(log_buffer=True)
    model.create_table("DEBEZIUM", "CUSTOMERS", CUSTOMERS, ["ID"])
    model.save(tmp_path / "db.model")
    return Corner(tmp_path / "db.model", tmp_path / "lake")


def test_the_flush_table_makes_lgwr_write_the_redo_before_each_round(buffered: Corner) -> None:
    source = buffered.source(**{"log.mining.flush.table.name": "DBZ_FLUSH"})
    assert _open_row_then_commit(buffered, source) == [10, 1, 2]
    model = OracleModel.load(buffered.path)
    (last_scn,) = model.flush_tables["DBZ_FLUSH"]  # created with its one row, updated
    assert 0 < last_scn <= model.scn
    assert list(model.flush_tables) == ["DBZ_FLUSH", "LOG_MINING_FLUSH"]


def test_without_the_flush_an_open_transactions_row_is_missed(buffered: Corner) -> None:
    # what the flush prevents: the round mines past a row LGWR has not written yet
    source = buffered.source()
    source._flush_log_writer = lambda current: None  # type: ignore[method-assign]
    assert _open_row_then_commit(buffered, source) == [10, 2]  # row 1 is lost
