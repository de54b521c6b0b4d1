"""What a connector gives the contract suite: a driver with one interface for every source.

A driver owns one private corner of its source (a schema and slot, a database, an inbox of
files) and can: create the history's tables, apply transactions of the standard history
(:mod:`tests.contract.history`), read the tables back (the ground truth silver must equal),
make one record the connector must quarantine, and restart its server if it has one. What a
connector cannot do is declared in :attr:`ContractDriver.CAPABILITIES`; the suite generates no
test for a guarantee a connector does not claim (``tests/contract/conftest.py``), and
``test_capabilities.py`` pins the table so that a lost capability is a failing test, not a test
that silently stops running.
"""

from __future__ import annotations

import enum
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from tests.contract.history import TABLES, State, Transaction, statements

__all__ = ["Capability", "ContractDriver", "SqlDriver"]


class Capability(enum.StrEnum):
    """A guarantee that applies only to some connectors."""

    SNAPSHOT = "snapshot"
    """The agent snapshots the rows that exist, then streams from the snapshot's point."""
    RESTART = "restart"
    """The driver can restart the source's server under a following agent."""
    ACKNOWLEDGES = "acknowledges"
    """The source is told what bronze holds (a PostgreSQL slot flush): ``ACKNOWLEDGES``."""
    REPORTS_LOG = "reports_log"
    """``medallion status`` reports the database log behind the source: ``REPORTS_LOG``."""
    INCREMENTAL_SNAPSHOT = "incremental_snapshot"
    """The agent reads signals and takes incremental and blocking snapshots
    (``INCREMENTAL_SNAPSHOTS``; test_signal_snapshots.py, and on the real servers
    tests/integration/test_incremental_snapshot.py and test_incremental_kill.py)."""


class ContractDriver(ABC):
    """One connector's corner of its source, for the contract suite.

    Args:
        server: The value of the :attr:`SERVER_FIXTURE` fixture (None when there is none).
        workdir: A directory of the driver's own.
    """

    CONNECTOR: ClassVar[str]
    """The registry name (the ``connector`` config value)."""
    SOURCE_NAME: ClassVar[str]
    """The configured source name; silver tables are named after it."""
    CAPABILITIES: ClassVar[frozenset[Capability]]
    """The guarantees that apply beyond those every connector keeps."""
    MARKERS: ClassVar[tuple[str, ...]] = ()
    """The pytest markers of the connector's tests (``postgres``, ``mysql``: what they need)."""
    SERVER_FIXTURE: ClassVar[str | None] = None
    """The session fixture of the shared server, if the connector has one."""
    RESTARTABLE_SERVER_FIXTURE: ClassVar[str | None] = None
    """A fixture of a server this driver may restart, when the shared one must not be."""
    LOG_IN_BYTES: ClassVar[bool] = True
    """With ``REPORTS_LOG``: the log's lag and retention are measured in bytes (YugabyteDB's
    LSNs are not byte offsets: its status shows the slot without byte counts)."""

    def __init__(self, server: Any, workdir: Path) -> None:
        self.server = server
        self.workdir = workdir

    @abstractmethod
    def setup(self) -> None:
        """Create the history's tables (empty)."""

    @abstractmethod
    def apply(self, transactions: list[Transaction]) -> None:
        """Commit ``transactions`` on the source, one after another."""

    def load(self, rows: Transaction) -> None:
        """Put the initial rows in place, before any agent runs (a snapshot reads them)."""
        self.apply([rows])

    @abstractmethod
    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The ``sources[]`` entry that captures the corner, as YAML would give it."""

    @abstractmethod
    def truth(self) -> State:
        """The history's tables as the source has them now."""

    @abstractmethod
    def collection(self, table: str) -> str:
        """The bronze ``collection`` (and silver table suffix) of ``table``."""

    @abstractmethod
    def poison(self) -> str:
        """Commit one change the connector cannot land (called once per corner).

        Returns:
            A fragment the quarantine reason must contain.
        """

    def event_key(self, key: dict[str, Any]) -> int:
        """The history's key of a landed record key (``{"id": 5}``)."""
        return int(key["id"])

    def signal_table(self) -> str:
        """Create the signaling table (``Capability.INCREMENTAL_SNAPSHOT``); returns its
        ``signal.data.collection``."""
        raise NotImplementedError(f"{self.CONNECTOR} takes no signals")

    def restart(self) -> None:
        """Restart the server (``Capability.RESTART``)."""
        raise NotImplementedError(f"{self.CONNECTOR} has no server to restart")

    def acknowledged(self) -> int:
        """Where the source was last told bronze is (``Capability.ACKNOWLEDGES``)."""
        raise NotImplementedError(f"{self.CONNECTOR} is never acknowledged")

    def offset_position(self, offset: Mapping[str, Any]) -> int:
        """The point of a committed offset on the scale of :meth:`acknowledged`."""
        raise NotImplementedError(f"{self.CONNECTOR} is never acknowledged")

    def close(self) -> None:
        """Drop the corner."""
        return None  # a corner under the driver's workdir goes with it


class SqlDriver(ContractDriver):
    """A driver whose source is a SQL database reached with a DB-API connection."""

    INT_TYPE: ClassVar[str] = "int"
    TEXT_TYPE: ClassVar[str] = "varchar(40)"

    @abstractmethod
    def connect(self) -> Any:
        """A new DB-API connection (not autocommit) to the server."""

    @abstractmethod
    def qualified(self, table: str) -> str:
        """``table`` with its schema or database, quoted for the server."""

    def execute(self, *sql: str) -> None:
        """Run statements, each committed on its own."""
        conn = self.connect()
        try:
            for statement in sql:
                conn.cursor().execute(statement)
                conn.commit()
        finally:
            conn.close()

    def signal_table(self) -> str:
        """``medallion_signal (id, type, data)``, as the seed documents define it."""
        self.execute(
            f"CREATE TABLE {self.qualified('medallion_signal')} (id varchar(64) PRIMARY KEY, "
            "type varchar(32) NOT NULL, data varchar(2048))"
        )
        return self.collection("medallion_signal")

    def setup(self) -> None:
        """Create the history's tables."""
        kinds = {"int": self.INT_TYPE, "text": self.TEXT_TYPE}
        self.execute(
            *(
                f"CREATE TABLE {self.qualified(spec.name)} (id int PRIMARY KEY, "
                + ", ".join(f"{name} {kinds[kind]}" for name, kind in spec.columns)
                + ")"
                for spec in TABLES
            )
        )

    def apply(self, transactions: list[Transaction]) -> None:
        """Commit each transaction on one connection."""
        conn = self.connect()
        try:
            cursor = conn.cursor()
            for transaction in transactions:
                for change in transaction:
                    cursor.execute(*statements(change, self.qualified(change.table)))
                conn.commit()
        finally:
            conn.close()

    def truth(self) -> State:
        """``SELECT`` every history table."""
        conn = self.connect()
        try:
            cursor = conn.cursor()
            state: State = {}
            for spec in TABLES:
                names = ["id", *(name for name, _ in spec.columns)]
                cursor.execute(f"SELECT {', '.join(names)} FROM {self.qualified(spec.name)}")
                state[spec.name] = {
                    row[0]: dict(zip(names, row, strict=True)) for row in cursor.fetchall()
                }
            conn.commit()
            return state
        finally:
            conn.close()
