"""The connector contract suite: every guarantee, checked alike for every connector that runs here.

One module per guarantee, each test parametrized over the drivers of ``tests/contract/drivers/``
(PostgreSQL, MariaDB, Debezium JSON files, MongoDB on a wire-level peer), all running the
standard randomized history of :mod:`tests.contract.history`:

============================  ====================================================================
``test_commit_order``         bronze positions sort in the source's commit order
``test_exactly_once``         exactly once under ``kill -9`` at every fault point
``test_acknowledgement``      the source is acknowledged only after the bronze commit
``test_snapshot_handover``    snapshot -> stream with no gap and no overlap
``test_resume``               each agent resumes from the offset bronze committed
``test_reconnect``            a following agent reconnects after a server restart
``test_quarantine_reasons``   what cannot be landed is quarantined with its reason
``test_status``               ``medallion status`` fields
``test_silver``               silver equals the source after the history
``test_signal_snapshots``     incremental and blocking snapshots under changes: bronze = source
``test_capabilities``         which of these apply to which connector
============================  ====================================================================

A test takes ``connector`` (or a fixture built on it) and names the capabilities it needs with
``@pytest.mark.needs(Capability.X, ...)``; it is generated only for the drivers that declare them
all. A connector a guarantee does not apply to gets no test for it (never a skip counted as a
pass); ``test_capabilities.py`` states, for each connector, which guarantees those are.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from pipeline.landing import LandingResult
from tests.contract.drivers import DRIVERS, Capability, ContractDriver
from tests.contract.harness import agent, begin
from tests.contract.history import History, State, Transaction

TRANSACTIONS = 15
"""Transactions of each of the shared history's two parts."""


def pytest_configure(config: pytest.Config) -> None:
    """Register ``needs``."""
    config.addinivalue_line(
        "markers", "needs(*capabilities): run only for connectors whose driver declares them"
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per connector whose driver has every capability the test needs."""
    if "connector" not in metafunc.fixturenames:
        return
    needs = {c for mark in metafunc.definition.iter_markers("needs") for c in mark.args}
    connectors = [
        # the server markers let a developer run a subset (-m "not mysql"); bronze is Delta
        pytest.param(
            name, marks=[pytest.mark.delta, *(getattr(pytest.mark, m) for m in cls.MARKERS)]
        )
        for name, cls in DRIVERS.items()
        if needs <= cls.CAPABILITIES
    ]
    metafunc.parametrize("connector", connectors, scope="session")


def make_driver(
    connector: str, request: pytest.FixtureRequest, workdir: Path, *, restartable: bool = False
) -> ContractDriver:
    """A driver on its server (one it may restart with ``restartable``), tables created."""
    cls = DRIVERS[connector]
    fixture = cls.RESTARTABLE_SERVER_FIXTURE if restartable else cls.SERVER_FIXTURE
    server = request.getfixturevalue(fixture) if fixture else None
    driver = cls(server, workdir)
    driver.setup()
    return driver


@pytest.fixture
def driver(
    connector: str, request: pytest.FixtureRequest, tmp_path: Path
) -> Iterator[ContractDriver]:
    """A fresh corner of the connector's source for one test (restartable if it needs it)."""
    marks = request.node.iter_markers("needs")
    restartable = any(Capability.RESTART in mark.args for mark in marks)
    made = make_driver(connector, request, tmp_path / "source", restartable=restartable)
    yield made
    made.close()


@dataclass
class SharedHistory:
    """The standard history, landed once per connector by agents that stop after every batch.

    Attributes:
        driver: The corner it ran in (open for the whole session).
        lake: The lake it landed in.
        history: The history; ``history.state`` is the source after it.
        initial: The snapshot's state (the rows before capture started).
        transactions: The streamed transactions, in commit order.
        runs: Each agent run's result, with bronze's committed offset right after it.
    """

    driver: ContractDriver
    lake: Path
    history: History
    initial: State
    transactions: list[Transaction] = field(default_factory=list)
    runs: list[tuple[LandingResult, dict[str, Any] | None]] = field(default_factory=list)

    def land_batch_by_batch(self) -> None:
        """Run agents of one batch each until one finds nothing to land."""
        writer = BronzeWriter(BronzeTables.under(self.lake))
        while True:
            result = agent(self.driver.raw_config(), self.lake).run(max_batches=1)
            committed = writer.last_committed(agent_app_id(self.driver.SOURCE_NAME))
            self.runs.append((result, committed.offset if committed else None))
            if result.batches == 0:
                return


_SHARED = pytest.StashKey[dict[str, SharedHistory]]()
"""The session's shared histories, by connector."""


@pytest.fixture
def shared(
    connector: str, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> SharedHistory:
    """The standard history of ``connector`` landed in a lake (see :class:`SharedHistory`).

    Built once per connector and session, on first use, and closed when the session ends.
    Not a session-scoped fixture: ``connector`` is a session parameter, so pytest would tear
    that fixture down and build it again at every switch of connector, and the modules using it
    run one after another, each over every connector (one build per module and connector).
    """
    built = request.config.stash.setdefault(_SHARED, {})
    if connector not in built:
        workdir = tmp_path_factory.mktemp(f"contract-{connector}")
        made = make_driver(connector, request, workdir / "source")
        # Registered after the driver's server fixture was set up: closed before it stops.
        request.session.addfinalizer(made.close)
        history = begin(made)
        run = SharedHistory(made, workdir / "lake", history, history.snapshot())
        run.land_batch_by_batch()  # the snapshot, on a quiet source
        for _part in range(2):
            transactions = history.transactions(TRANSACTIONS)
            made.apply(transactions)
            run.transactions += transactions
            run.land_batch_by_batch()
        built[connector] = run
    return built[connector]
