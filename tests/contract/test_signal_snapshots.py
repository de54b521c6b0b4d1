"""Incremental and blocking snapshots (``execute-snapshot``), alike for every connector that
declares them.

The history's tables are captured, then an incremental snapshot of all of them is requested
through the agent's signal channel while the history goes on changing them: transactions
committed between batches, and inside every chunk's window (after the chunk is read, before its
high watermark is written); chunks of 3 rows.
Bronze, folded in position order the way silver applies it (the newest position of a key wins,
a delete removes it), without the initial snapshot's rows, must equal the source: every row
that existed before capture came from the incremental snapshot, and no chunk row overwrote a
newer change or brought a deleted row back. The committed offset records the signal complete.

A blocking snapshot (``"type": "blocking"``) is requested the same way, with transactions
committed before and after the signal: its rows are one unbroken run at the signal's place in
bronze (streaming paused there), and bronze folded without the initial snapshot again equals the
source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.base import SourceBatch
from capture.registry import create_source
from capture.signals import EXECUTE_SNAPSHOT, Signal, new_signal_id
from pipeline.config import SourceConfig
from tests.contract.drivers import Capability, ContractDriver
from tests.contract.harness import agent, begin, landed_events
from tests.contract.history import TABLES, State


def fold(driver: ContractDriver, lake: Path, initial_batches: int) -> tuple[State, int]:
    """The tables as bronze's data events, applied in position order, leave them (the
    initial snapshot, in the first ``initial_batches`` batches, left out); and how many rows
    the incremental or blocking snapshot read."""
    names = {driver.collection(spec.name): spec.name for spec in TABLES}
    state: State = {spec.name: {} for spec in TABLES}
    incremental = 0
    for row in landed_events(driver, lake).rows:
        if row[S.KIND] != "data" or row[S.COLLECTION] not in names:
            continue
        value = orjson.loads(row[S.VALUE_JSON]) if row[S.VALUE_JSON] else None
        if value is None:
            continue  # a tombstone: the delete before it removed the key
        if value["op"] == "r" and row[S.BATCH_SEQ] < initial_batches:
            continue
        incremental += value["op"] == "r"
        table = state[names[row[S.COLLECTION]]]
        key = driver.event_key(orjson.loads(row[S.KEY_JSON]))
        if value["op"] == "d":
            table.pop(key, None)
        else:
            table[key] = dict(value["after"])
    return state, incremental


@pytest.mark.needs(Capability.INCREMENTAL_SNAPSHOT)
def test_an_incremental_snapshot_under_changes_leaves_bronze_equal_to_the_source(
    driver: ContractDriver, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    history = begin(driver)
    lake = tmp_path / "lake"
    raw = driver.raw_config(
        **{"signal.data.collection": driver.signal_table(), "incremental.snapshot.chunk.size": 3}
    )
    initial = agent(raw, lake).run()  # the initial snapshot, then the stream
    source = create_source(TypeAdapter(SourceConfig).validate_python(raw))
    signal_id = new_signal_id()
    data = {"data-collections": [driver.collection(t.name) for t in TABLES], "type": "incremental"}
    source.send_signal(Signal(signal_id, EXECUTE_SNAPSHOT, data))  # type: ignore[attr-defined]
    source.release()  # type: ignore[attr-defined]

    landing = agent(raw, lake)
    read_batch = landing.source.read_batch
    read_chunk = landing.source._incremental_read  # type: ignore[attr-defined]
    batches = chunks = 0

    def change_between_batches(**limits: Any) -> SourceBatch:
        nonlocal batches
        batch = read_batch(**limits)
        batches += 1
        if batches in (1, 3, 5):
            driver.apply(history.transactions(4))
        return batch

    def change_inside_the_window(*args: Any) -> list[Any]:
        # Committed after the chunk was read and before its high watermark is written: the
        # stream's newer state of the keys they touch must win over the chunk's copy.
        nonlocal chunks
        rows: list[Any] = read_chunk(*args)
        chunks += 1
        driver.apply(history.transactions(2))
        return rows

    monkeypatch.setattr(landing.source, "read_batch", change_between_batches)
    monkeypatch.setattr(landing.source, "_incremental_read", change_inside_the_window)
    landing.run()
    assert batches > 5 and chunks >= 2 * len(TABLES)  # changes came while the snapshot ran
    # The changes committed inside the last (empty) read came after the end of the log that
    # run set out to read (MySQL reads up to the binlog end it saw): the next run lands them.
    agent(raw, lake).run()

    state, incremental = fold(driver, lake, initial.batches)
    truth = driver.truth()
    assert state == truth
    # Equal although the initial snapshot is left out: a row no change touched since capture
    # began is in the fold only through the incremental snapshot.
    assert incremental > 0
    committed = BronzeWriter(BronzeTables.under(lake)).last_committed(
        agent_app_id(driver.SOURCE_NAME)
    )
    assert committed is not None
    assert committed.offset["signals"]["ended"][signal_id] == "complete"


@pytest.mark.needs(Capability.INCREMENTAL_SNAPSHOT)
def test_a_blocking_snapshot_pauses_the_stream_at_its_signal(
    driver: ContractDriver, tmp_path: Path
) -> None:
    history = begin(driver)
    lake = tmp_path / "lake"
    raw = driver.raw_config(
        **{"signal.data.collection": driver.signal_table(), "incremental.snapshot.chunk.size": 3}
    )
    initial = agent(raw, lake).run()
    driver.apply(history.transactions(6))
    source = create_source(TypeAdapter(SourceConfig).validate_python(raw))
    signal_id = new_signal_id()
    data = {"data-collections": [driver.collection(t.name) for t in TABLES], "type": "blocking"}
    source.send_signal(Signal(signal_id, EXECUTE_SNAPSHOT, data))  # type: ignore[attr-defined]
    source.release()  # type: ignore[attr-defined]
    driver.apply(history.transactions(6))  # after the signal: read by the snapshot and streamed
    agent(raw, lake).run()

    truth = driver.truth()
    state, read = fold(driver, lake, initial.batches)
    assert state == truth
    assert read == sum(len(rows) for rows in truth.values())  # every row, once
    landed = landed_events(driver, lake)
    later = [r for r in landed.rows if r[S.BATCH_SEQ] >= initial.batches and r[S.KIND] == "data"]
    ops = [orjson.loads(r[S.VALUE_JSON])["op"] if r[S.VALUE_JSON] else "-" for r in later]
    first, last = ops.index("r"), len(ops) - 1 - ops[::-1].index("r")
    assert set(ops[first : last + 1]) == {"r"}  # one run: the stream paused while it was read
    assert "r" not in ops[:first] and first > 0 and last < len(ops) - 1  # changes both sides
    marks = [orjson.loads(r[S.VALUE_JSON])["source"]["snapshot"] for r in later[first : last + 1]]
    assert marks == ["true"] * (len(marks) - 1) + ["last"]
    committed = BronzeWriter(BronzeTables.under(lake)).last_committed(
        agent_app_id(driver.SOURCE_NAME)
    )
    assert committed is not None
    assert committed.offset["signals"]["ended"][signal_id] == "complete"
