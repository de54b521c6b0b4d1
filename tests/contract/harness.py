"""Landing a contract driver's source into a lake, in this process or in a child that may be
killed, and reading bronze back as the suite compares it.

The child runs :mod:`tests.contract.agent` (the same landing as :func:`land`), so that
``MEDALLION_FAULTS`` can SIGKILL it at the points of :mod:`pipeline.faults`; it is forked from a
process that imported the agent once (:mod:`tests.contract.agent_forks`).
"""

from __future__ import annotations

import os
import signal
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from deltalake import DeltaTable
from pydantic import TypeAdapter

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter
from capture.registry import create_source
from pipeline.config import SourceConfig
from pipeline.landing import LandingAgent, LandingResult
from tests.contract.agent_forks import run_forked
from tests.contract.history import TABLES, Event, History

if TYPE_CHECKING:
    # Only a type here: the killed child (tests.contract.agent) imports this module, and the
    # drivers pull in the server fixtures, pytest and every connector's test module.
    from tests.contract.drivers import ContractDriver

__all__ = [
    "Landed",
    "agent",
    "begin",
    "assert_batches_without_gap",
    "land",
    "landed_events",
    "quarantined",
    "run_child",
]

ROOT = Path(__file__).resolve().parents[2]
SEED = 2026
INITIAL_ROWS = 8
"""Rows per table before capture starts: what a snapshot reads."""
MAX_EVENTS = 12
"""Small batches, so that a short history spans many of them."""
MAX_TRANSACTION_EVENTS = 3
"""Smaller than the history's larger transactions, so that some are cut across batches."""


def begin(driver: ContractDriver) -> History:
    """The standard history, its initial rows already on the driver's source."""
    history = History(SEED)
    driver.load(history.initial_rows(INITIAL_ROWS))
    return history


def agent(raw: dict[str, Any], lake: Path, **limits: int) -> LandingAgent:
    """A landing agent of the source ``raw`` describes, into the lake at ``lake``."""
    config = TypeAdapter(SourceConfig).validate_python(raw)
    return LandingAgent(
        create_source(config),
        BronzeWriter(BronzeTables.under(lake)),
        max_events=limits.get("max_events", MAX_EVENTS),
        max_transaction_events=limits.get("max_transaction_events", MAX_TRANSACTION_EVENTS),
    )


def land(raw: dict[str, Any], lake: Path, *, max_batches: int | None = None) -> LandingResult:
    """Land what the source has now, in this process."""
    return agent(raw, lake).run(max_batches=max_batches)


def run_child(
    raw: dict[str, Any],
    lake: Path,
    faults: str | None = None,
    *,
    max_transaction_events: int = MAX_TRANSACTION_EVENTS,
) -> int:
    """Land in a child process; ``faults`` arms ``MEDALLION_FAULTS`` there.

    Returns:
        The child's return code (``-SIGKILL`` when a fault point killed it).
    """
    env = {k: v for k, v in os.environ.items() if k != "MEDALLION_FAULTS"}
    env["PYTHONPATH"] = str(ROOT)
    if faults:
        env["MEDALLION_FAULTS"] = faults
    argv = [orjson.dumps(raw).decode(), str(lake), str(max_transaction_events)]
    child = run_forked(argv, env, timeout=180)
    assert child.returncode in (0, -signal.SIGKILL), child.output[-3000:]
    return child.returncode


@dataclass(frozen=True)
class Landed:
    """Bronze's rows of one source, in position order.

    Attributes:
        rows: Every ``bronze/events`` row (data, tombstones, transaction records ...).
        data: The data events as (table, op, key), snapshot reads first.
        snapshot: How many of ``data`` are snapshot reads (op ``r``).
    """

    rows: list[dict[str, Any]]
    data: list[Event]
    snapshot: int


def landed_events(driver: ContractDriver, lake: Path) -> Landed:
    """Read bronze back: rows in position order, the data events of the history's tables."""
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    rows = sorted(table, key=lambda r: r[S.POSITION])
    tables = {driver.collection(spec.name): spec.name for spec in TABLES}
    data = [
        (tables[r[S.COLLECTION]], r[S.OP], driver.event_key(orjson.loads(r[S.KEY_JSON])))
        for r in rows
        if r[S.KIND] == "data" and r[S.COLLECTION] in tables
    ]
    return Landed(rows, data, sum(1 for _, op, _ in data if op == "r"))


def quarantined(lake: Path) -> list[dict[str, Any]]:
    """The ``bronze/quarantine`` rows (none when the table was never made)."""
    path = lake / "bronze" / "quarantine"
    if not path.exists():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def assert_batches_without_gap(landed: Landed) -> None:
    """Positions are unique; batch numbers run 0..n without a gap or a repeat."""
    positions = Counter(r[S.POSITION] for r in landed.rows)
    assert max(positions.values()) == 1, "a position landed twice"
    batches = sorted({r[S.BATCH_SEQ] for r in landed.rows})
    assert batches == list(range(len(batches)))
