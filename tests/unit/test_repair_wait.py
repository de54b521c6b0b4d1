"""``reconcile --repair`` decides who lands its snapshot from bronze's committed offset, and
``quality.reconcile.repair`` is a validated config key."""

from __future__ import annotations

from typing import Any

import pytest

from capture.incremental_snapshot import ENDED_KEPT, IncrementalSnapshots
from gold.reconcile_repair import snapshot_outcome, wait_landed
from pipeline.errors import ConfigError, ReconcileError


def offset(ended: dict[str, str] | None = None) -> dict[str, Any]:
    return {"signals": {"snapshot": None, "file_lines": 0, "ended": ended or {}}}


class Bronze:
    """Committed batches as a running agent (or this command's landing) would leave them."""

    def __init__(self, batches: list[tuple[int, dict[str, Any]] | None]) -> None:
        self.batches = batches
        self.reads = 0

    def committed(self) -> tuple[int, dict[str, Any]] | None:
        batch = self.batches[min(self.reads, len(self.batches) - 1)]
        self.reads += 1
        return batch


def test_a_running_agent_that_lands_the_snapshot_is_waited_for() -> None:
    bronze = Bronze([(4, offset()), (5, offset()), (6, offset({"s1": "complete"}))])
    landed: list[bool] = []
    who = wait_landed(
        bronze.committed, "s1", lambda: landed.append(True), baseline=(4, offset()), poll_s=0
    )
    assert who == ("running agent", "complete") and not landed


def test_without_an_agent_the_command_lands_the_source_itself() -> None:
    bronze = Bronze([(4, offset())])

    def land() -> None:
        bronze.batches.append((5, offset({"s1": "complete"})))
        bronze.reads = len(bronze.batches) - 1

    who = wait_landed(bronze.committed, "s1", land, baseline=(4, offset()), agent_wait_s=0.01)
    assert who == ("this command", "complete")


def test_a_snapshot_that_does_not_end_after_landing_is_an_error() -> None:
    bronze = Bronze([None])
    with pytest.raises(ReconcileError, match="did not end after landing"):
        wait_landed(bronze.committed, "s1", lambda: None, baseline=None, agent_wait_s=0.01)


def test_a_running_agent_that_never_finishes_times_out() -> None:
    bronze = Bronze([(4, offset()), (5, offset())])
    with pytest.raises(ReconcileError, match="did not finish the repair's snapshot s1"):
        wait_landed(
            bronze.committed, "s1", lambda: None, baseline=(4, offset()), timeout_s=0.01, poll_s=0
        )


def test_a_refused_snapshot_is_told_as_it_ended() -> None:
    assert snapshot_outcome(offset({"s1": "refused: no key"}), "s1") == "refused: no key"
    assert snapshot_outcome(offset(), "s1") is None and snapshot_outcome(None, "s1") is None


def test_the_offset_remembers_the_latest_ended_signals() -> None:
    class Agent(IncrementalSnapshots):
        def _open(self, offset: Any) -> None:
            return None

    agent = Agent("x")
    for n in range(ENDED_KEPT + 3):
        agent._end([f"s{n}"], "complete")
    saved = agent._signals_json()
    assert saved is not None and len(saved["ended"]) == ENDED_KEPT
    assert "s0" not in saved["ended"] and saved["ended"][f"s{ENDED_KEPT + 2}"] == "complete"
    again = Agent("x")
    again._signals_restore(saved)
    assert again._signals_json() == saved


def test_scheduled_repair_is_a_validated_quality_key() -> None:
    from pipeline.config import PipelineConfig

    base = {"lake": {"root": "/tmp/lake"}, "sources": []}
    config = PipelineConfig.model_validate({**base, "quality": {"reconcile.repair": True}})
    assert config.quality.reconcile_repair is True
    assert PipelineConfig.model_validate(base).quality.reconcile_repair is False
    with pytest.raises((ConfigError, ValueError), match="did you mean 'reconcile.repair'"):
        PipelineConfig.model_validate({**base, "quality": {"reconcile.repiar": True}})


def test_a_request_for_a_table_already_being_read_widens_it_and_reads_it_again() -> None:
    from capture.incremental_snapshot import IncrementalProgress

    snap = IncrementalProgress("s1", ["s.a", "s.b"], {"s.a": "id < 5"}, after=["3"], until=["4"])
    snap.queue("s.a", "id = 9")  # a repair of key 9 while s.a is read under its own filter
    snap.queue("s.b", "id = 1")  # s.b reads every row already
    snap.queue("s.c", "id = 2")
    assert snap.tables == ["s.a", "s.b", "s.a", "s.c"]
    assert snap.conditions == {"s.a": "(id < 5) OR (id = 9)", "s.c": "id = 2"}
    snap.queue("s.a", None)  # every row of s.a: no filter, and no third reading
    assert snap.tables == ["s.a", "s.b", "s.a", "s.c"] and "s.a" not in snap.conditions


def test_a_scheduled_reconciliation_that_finds_damage_requests_its_repair(tmp_path: Any) -> None:
    import orjson

    from gold.cuts import Cut
    from gold.reconcile import ReconcileResult, TableReconciliation
    from gold.reconcile_repair import scheduled_repair
    from pipeline.config import PipelineConfig

    signals = tmp_path / "pg.signals"
    source = {"name": "pg", "connector": "postgresql", "database.hostname": "localhost"}
    source |= {"database.user": "u", "database.dbname": "d", "signal.file": str(signals)}
    config = PipelineConfig.model_validate(
        {"lake": {"root": str(tmp_path / "lake")}, "sources": [source]}
    )
    damaged = TableReconciliation(
        "public.items", "silver_t", 30, 29, 4, (), ('{"id":12}',), (), ('{"id":7}',), 1, 0, 1
    )
    clean = TableReconciliation("public.other", "silver_o", 3, 3, 1)
    found = ReconcileResult("pg", Cut("pg", 3, b"\x01", None), (damaged, clean), False)
    outcomes = scheduled_repair(config, "pg", found, found.outcomes(), tmp_path / "lake")
    sent = orjson.loads(signals.read_bytes())
    assert sent["type"] == "execute-snapshot" and sent["data"]["data-collections"] == [
        "public.items"
    ]
    assert sent["data"]["additional-conditions"] == [
        {"data-collection": "public.items", "filter": '("id" = 12) OR ("id" = 7)'}
    ]
    failing = [o for o in outcomes if not o.success]
    assert [o.table for o in failing] == ["public.items"]
    assert f"repair requested: incremental snapshot {sent['id']} of public.items (2 key(s))" in (
        failing[0].details
    )
    assert all("repair" not in o.details for o in outcomes if o.success)


class _Table:
    has_key = True


class _Agent(IncrementalSnapshots):
    """An agent whose every table is captured and keyed; no database behind it."""

    def _open(self, offset: Any) -> None:
        return None

    def _incremental_table(self, collection: str) -> Any:
        return _Table()


@pytest.mark.parametrize(
    ("data", "at", "collection", "reason"),
    [
        ({"type": "blocking"}, None, None, "send it through the signaling table"),
        ({"type": "incremental"}, None, None, "set signal.data.collection"),
        (
            {
                "type": "blocking",
                "additional-conditions": [
                    {"data-collection": "s.a", "filter": "select * from s.a where id > 1"}
                ],
            },
            ("tx", 1),
            "s.sig",
            "give only its condition",
        ),
    ],
)
def test_snapshot_requests_an_agent_cannot_carry_out_are_refused(
    data: dict[str, Any], at: Any, collection: str | None, reason: str
) -> None:
    from capture.signals import EXECUTE_SNAPSHOT, Signal, SignalError, SignalSettings

    agent = _Agent("x")
    agent.signals = SignalSettings(collection)
    signal = Signal("s1", EXECUTE_SNAPSHOT, {"data-collections": ["s.a"], **data})
    with pytest.raises(SignalError, match=reason):
        agent._apply_signal(signal, at)


def test_a_blocking_request_is_carried_out_at_once_not_queued() -> None:
    from capture.signals import EXECUTE_SNAPSHOT, Signal, SignalSettings

    agent = _Agent("x")
    agent.signals = SignalSettings("s.sig")
    data = {"data-collections": ["s.a"], "type": "blocking"}
    request = agent._apply_signal(Signal("s1", EXECUTE_SNAPSHOT, data), ("tx", 1))
    assert request is not None and request.collections == ("s.a",)
    assert agent._incremental is None  # no incremental snapshot started
