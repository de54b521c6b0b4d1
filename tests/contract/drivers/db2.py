"""Contract driver of the Db2 connector: a database of the ASN capture model
(:mod:`tests.db2model`), which the agent reaches through the model's pyodbc stand-in."""

from __future__ import annotations

import os
from decimal import Decimal
from pathlib import Path
from typing import Any, ClassVar

from capture.db2.settings import DBAPI_ENV
from tests.contract.drivers.base import Capability, ContractDriver
from tests.contract.history import TABLES, State, Transaction
from tests.db2model.server import Column, Db2Model

__all__ = ["DATABASE", "SCHEMA", "Db2Driver", "model_tables"]

DATABASE = "TESTDB"
SCHEMA = "DB2INST1"
POISON_REASON = "NaN has no Connect Decimal representation"
"""A ``DECFLOAT`` NaN: Db2 holds it, a Connect Decimal cannot."""


def model_tables(model: Db2Model, db: str) -> None:
    """The history's tables in ``db`` (schema ``DB2INST1``, lower-case quoted names), each put
    in capture mode (``ADDTABLE``), then ASN capture started."""
    kinds = {"int": "INTEGER", "text": "VARCHAR(40)"}
    for spec in TABLES:
        columns = [Column("id", "INTEGER", False, True)]
        columns += [Column(name, kinds[kind]) for name, kind in spec.columns]
        model.create_table(db, SCHEMA, spec.name, columns)
        model.add_table(db, SCHEMA, spec.name)


class Db2Driver(ContractDriver):
    """The history in a database of a private ASN model; "restart" breaks every connection.

    No ``SNAPSHOT`` capability: its handover test commits changes while the snapshot's unit of
    work is open, and Db2 has no snapshot isolation (a consistent snapshot holds locks that
    block those writers: the model fails them as a lock timeout). The snapshot itself runs in
    every shared history; tests/integration/test_db2_capture.py checks the handover with the
    writers after the snapshot and the locks they meet during it.
    """

    CONNECTOR: ClassVar[str] = "db2"
    SOURCE_NAME: ClassVar[str] = "db2"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset({Capability.RESTART})

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        # The agent (here or in a child process) connects through the model's stand-in.
        self._previous = os.environ.get(DBAPI_ENV)
        os.environ[DBAPI_ENV] = "tests.db2model.dbapi"
        self.model = Db2Model(workdir / "db2")

    def setup(self) -> None:
        """The database with the ASN control tables, the history's tables and a ``poison``
        table, all in capture mode."""
        self.model.create_database(DATABASE)
        model_tables(self.model, DATABASE)
        poison = [Column("id", "INTEGER", False, True), Column("d", "DECFLOAT(34)")]
        self.model.create_table(DATABASE, SCHEMA, "poison", poison)
        self.model.add_table(DATABASE, SCHEMA, "poison")
        self.model.asncdc_services(DATABASE, "reinit")

    def apply(self, transactions: list[Transaction]) -> None:
        """Commit each transaction on the model."""
        for transaction in transactions:
            with self.model.transaction(DATABASE) as tx:
                for change in transaction:
                    if change.op == "c":
                        assert change.row is not None
                        tx.insert(SCHEMA, change.table, change.row)
                    elif change.op == "d":
                        tx.delete(SCHEMA, change.table, change.key)
                    else:
                        assert change.row is not None
                        values = {k: v for k, v in change.row.items() if k != "id"}
                        if change.op == "k":
                            values = {"id": change.new_key}
                        tx.update(SCHEMA, change.table, change.key, values)

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The model's database (``read_committed``: see the class docstring)."""
        return {
            "name": self.SOURCE_NAME,
            "connector": self.CONNECTOR,
            "topic.prefix": "db2server",
            "database.hostname": str(self.model.root),
            "database.user": "db2inst1",
            "database.dbname": DATABASE,
            "snapshot.isolation.mode": "read_committed",
            "table.include.list": "DB2INST1\\.(items|orders|poison)",
            **extra,
        }

    def truth(self) -> State:
        """The model's ground truth."""
        return {spec.name: self.model.truth(DATABASE, SCHEMA, spec.name) for spec in TABLES}

    def collection(self, table: str) -> str:
        """``DB2INST1.<table>``."""
        return f"{SCHEMA}.{table}"

    def poison(self) -> str:
        """A ``DECFLOAT`` NaN."""
        with self.model.transaction(DATABASE) as tx:
            tx.insert(SCHEMA, "poison", {"id": 1, "d": Decimal("NaN")})
        return POISON_REASON

    def restart(self) -> None:
        """Restart the instance: every open connection breaks."""
        self.model.restart()

    def close(self) -> None:
        """Put the environment back."""
        if self._previous is None:
            os.environ.pop(DBAPI_ENV, None)
        else:
            os.environ[DBAPI_ENV] = self._previous
