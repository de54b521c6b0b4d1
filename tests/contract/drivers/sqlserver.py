"""Contract driver of the SQL Server connector: a database of the CDC model
(:mod:`tests.mssqlmodel`), which the agent reaches through the model's pyodbc stand-in."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar

from capture.sqlserver.settings import DBAPI_ENV
from tests.contract.drivers.base import Capability, ContractDriver
from tests.contract.history import TABLES, State, Transaction
from tests.mssqlmodel.server import Column, SqlServerModel

__all__ = ["DATABASE", "SqlServerDriver", "model_tables"]

DATABASE = "testDB"
POISON_REASON = "cannot convert '25:61:00'"
"""A ``time`` value FreeTDS hands over as text (TDS < 7.3) that is no time of day."""


def model_tables(model: SqlServerModel, db: str) -> None:
    """The history's tables in ``db`` (schema ``dbo``), CDC-enabled."""
    kinds = {"int": "int", "text": "varchar(40)"}
    for spec in TABLES:
        columns = [Column("id", "int", False, True)]
        columns += [Column(name, kinds[kind]) for name, kind in spec.columns]
        model.create_table(db, "dbo", spec.name, columns)
        model.enable_table(db, "dbo", spec.name)


class SqlServerDriver(ContractDriver):
    """The history in a database of a private CDC model; "restart" breaks every session."""

    CONNECTOR: ClassVar[str] = "sqlserver"
    SOURCE_NAME: ClassVar[str] = "mssql"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.SNAPSHOT, Capability.RESTART}
    )

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        # The agent (here or in a child process) connects through the model's stand-in.
        self._previous = os.environ.get(DBAPI_ENV)
        os.environ[DBAPI_ENV] = "tests.mssqlmodel.dbapi"
        self.model = SqlServerModel(workdir / "mssql")

    def setup(self) -> None:
        """The database with CDC enabled, the history's tables and a ``poison`` table."""
        self.model.create_database(DATABASE)
        model_tables(self.model, DATABASE)
        self.model.create_table(
            DATABASE, "dbo", "poison", [Column("id", "int", False, True), Column("t", "time(3)")]
        )
        self.model.enable_table(DATABASE, "dbo", "poison")

    def apply(self, transactions: list[Transaction]) -> None:
        """Commit each transaction on the model."""
        for transaction in transactions:
            with self.model.transaction(DATABASE) as tx:
                for change in transaction:
                    if change.op == "c":
                        assert change.row is not None
                        tx.insert("dbo", change.table, change.row)
                    elif change.op == "d":
                        tx.delete("dbo", change.table, change.key)
                    else:
                        assert change.row is not None
                        values = {k: v for k, v in change.row.items() if k != "id"}
                        if change.op == "k":
                            values = {"id": change.new_key}
                        tx.update("dbo", change.table, change.key, values)

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The model's database; ``snapshot`` isolation (the only level that lets the driver
        write while the snapshot transaction is open, on a real server too)."""
        return {
            "name": self.SOURCE_NAME,
            "connector": self.CONNECTOR,
            "topic.prefix": "server1",
            "database.hostname": str(self.model.root),
            "database.user": "sa",
            "database.names": DATABASE,
            "snapshot.isolation.mode": "snapshot",
            "table.include.list": "dbo\\.(items|orders|poison)",
            **extra,
        }

    def truth(self) -> State:
        """The model's ground truth."""
        return {spec.name: self.model.truth(DATABASE, "dbo", spec.name) for spec in TABLES}

    def collection(self, table: str) -> str:
        """``dbo.<table>`` (bronze names SQL Server collections by schema and table)."""
        return f"dbo.{table}"

    def poison(self) -> str:
        """A ``time`` value that is no time of day."""
        with self.model.transaction(DATABASE) as tx:
            tx.insert("dbo", "poison", {"id": 1, "t": "25:61:00"})
        return POISON_REASON

    def restart(self) -> None:
        """Restart the server: every open session's link breaks."""
        self.model.restart()

    def close(self) -> None:
        """Put the environment back."""
        if self._previous is None:
            os.environ.pop(DBAPI_ENV, None)
        else:
            os.environ[DBAPI_ENV] = self._previous
