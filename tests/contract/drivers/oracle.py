"""Contract driver of the Oracle connector: the Oracle LogMiner model (``tests/oraclemodel``).

No Oracle can run here. The corner is a model database saved in the driver's workdir, which the
agent reaches through the DB-API stand-in (``MEDALLION_ORACLE_DBAPI``), in this process and in
the killed children alike. The history runs on two redo threads with small logs (many log
switches and reused online groups), a short ``SQL_REDO`` row width (``CSF`` continuation rows),
small mining windows (transactions span windows), and around it the traffic LogMiner makes the
agent sort out: each history transaction overlaps the next when their rows are disjoint,
statement rollbacks (``ROLLBACK = 1`` rows) inside committed transactions, and transactions of a
``noise`` table that stay open across several history transactions and then roll back.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, ClassVar

from capture.oracle.agent import DBAPI_ENV
from tests.contract.drivers.base import Capability, ContractDriver
from tests.contract.history import TABLES, Change, State, Transaction
from tests.oraclemodel.database import Column, OracleModel

__all__ = ["OWNER", "OracleDriver"]

OWNER = "APP"
DBAPI = "tests.oraclemodel.dbapi"
UNSUPPORTED_REASON = "UNSUPPORTED"


def _columns(spec: Any) -> list[Column]:
    kinds = {"int": Column("", "NUMBER", 10, 0), "text": Column("", "VARCHAR2")}
    out = [Column("id", "NUMBER", 10, 0, nullable=False)]
    for name, kind in spec.columns:
        base = kinds[kind]
        out.append(Column(name, base.data_type, base.precision, base.scale))
    return out


class OracleDriver(ContractDriver):
    """The history in schema ``APP`` of the model's PDB."""

    CONNECTOR: ClassVar[str] = "oracle"
    SOURCE_NAME: ClassVar[str] = "ora"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.SNAPSHOT, Capability.RESTART, Capability.REPORTS_LOG}
    )

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        workdir.mkdir(parents=True, exist_ok=True)
        self.path = workdir / "oracle.model"
        self._rng = random.Random(19)
        self._noise: list[str] = []
        self._noise_id = 0
        self._previous_env = os.environ.get(DBAPI_ENV)
        os.environ[DBAPI_ENV] = DBAPI

    def setup(self) -> None:
        """The model (two redo threads, small logs), the history's tables, noise and poison."""
        model = OracleModel(threads=2, redo_chunk=48, log_rows=25, online_groups=3)
        for spec in TABLES:
            model.create_table(OWNER, spec.name, _columns(spec), ["id"])
        model.create_table(OWNER, "noise", [Column("id", "NUMBER", 10, 0)], ["id"])
        model.create_table(
            OWNER, "poison", [Column("id", "NUMBER", 10, 0)], ["id"], unsupported=True
        )
        model.save(self.path)

    def apply(self, transactions: list[Transaction]) -> None:
        """Commit the transactions in order, overlapping where their rows are disjoint."""
        with OracleModel.edit(self.path) as model:
            pending: tuple[str, Transaction] | None = None
            for index, transaction in enumerate(transactions):
                if pending is not None and pending[1] is transaction:
                    xid = pending[0]
                    rest = transaction[1:]
                else:
                    xid = model.begin(thread=1 + index % 2)
                    rest = transaction
                for change in rest:
                    self._change(model, xid, change)
                self._maybe_noise(model)
                if self._rng.random() < 0.3:
                    self._statement_rollback(model, xid, transaction[0].table)
                nxt = transactions[index + 1] if index + 1 < len(transactions) else None
                pending = None
                if nxt is not None and not (_rows(nxt) & _rows(transaction)):
                    # the next transaction's first change comes before this one commits
                    other = model.begin(thread=1 + (index + 1) % 2)
                    self._change(model, other, nxt[0])
                    pending = (other, nxt)
                model.commit(xid)
            assert pending is None

    def _change(self, model: OracleModel, xid: str, change: Change) -> None:
        table = change.table
        if change.op == "c":
            assert change.row is not None
            model.insert(xid, OWNER, table, change.row)
        elif change.op == "d":
            model.delete(xid, OWNER, table, {"id": change.key})
        elif change.op == "k":
            model.update(xid, OWNER, table, {"id": change.key}, {"id": change.new_key})
        else:
            assert change.row is not None
            values = {k: v for k, v in change.row.items() if k != "id"}
            model.update(xid, OWNER, table, {"id": change.key}, values)

    def _statement_rollback(self, model: OracleModel, xid: str, table: str) -> None:
        """A statement that failed: an insert of a row that is then undone (``ROLLBACK = 1``)."""
        self._noise_id += 1
        spec = next(s for s in TABLES if s.name == table)
        row = {"id": 900_000 + self._noise_id, **{n: None for n, _ in spec.columns}}
        model.insert(xid, OWNER, table, row)
        model.rollback_statement(xid)

    def _maybe_noise(self, model: OracleModel) -> None:
        """Long transactions on ``noise``: opened, written across several history
        transactions, then rolled back (never in bronze)."""
        self._noise = [xid for xid in self._noise if xid in model.open]  # a restart rolled back
        if self._noise and self._rng.random() < 0.3:
            model.rollback(self._noise.pop(0))
        if len(self._noise) < 2 and self._rng.random() < 0.4:
            self._noise.append(model.begin(thread=2))
        for xid in self._noise:
            self._noise_id += 1
            model.insert(xid, OWNER, "noise", {"id": self._noise_id})

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The model's PDB, schema ``APP``, small mining windows."""
        return {
            "name": self.SOURCE_NAME,
            "connector": self.CONNECTOR,
            "topic.prefix": "ora",
            "database.url": str(self.path),
            "database.user": "c##dbzuser",
            "database.password": "dbz",
            "database.dbname": "ORCLCDB",
            "database.pdb.name": "ORCLPDB1",
            "schema.include.list": OWNER,
            "table.exclude.list": f"ORCLPDB1\\.{OWNER}\\.noise",
            "log.mining.strategy": "online_catalog",
            "log.mining.batch.size.min": 4,
            "log.mining.batch.size.default": 16,
            "log.mining.batch.size.max": 64,
            # no pause between mining rounds: the tests drive the model as fast as it goes
            "log.mining.sleep.time.default.ms": 0,
            "log.mining.sleep.time.max.ms": 0,
            **extra,
        }

    def truth(self) -> State:
        """The committed rows of the history's tables."""
        model = OracleModel.load(self.path)
        return {
            spec.name: {row["id"]: dict(row) for row in model.committed_rows(OWNER, spec.name)}
            for spec in TABLES
        }

    def collection(self, table: str) -> str:
        """``APP.<table>``."""
        return f"{OWNER}.{table}"

    def poison(self) -> str:
        """An insert into a table LogMiner cannot reconstruct (``OPERATION_CODE`` 255)."""
        with OracleModel.edit(self.path) as model:
            xid = model.begin()
            model.insert(xid, OWNER, "poison", {"id": 1})
            model.commit(xid)
        return UNSUPPORTED_REASON

    def restart(self) -> None:
        """``SHUTDOWN ABORT`` + ``STARTUP``: every session is gone."""
        with OracleModel.edit(self.path) as model:
            model.restart()

    def close(self) -> None:
        """Put the environment back."""
        if self._previous_env is None:
            os.environ.pop(DBAPI_ENV, None)
        else:
            os.environ[DBAPI_ENV] = self._previous_env


def _rows(transaction: Transaction) -> set[tuple[str, int]]:
    keys: set[tuple[str, int]] = set()
    for change in transaction:
        keys.add((change.table, change.key))
        if change.new_key is not None:
            keys.add((change.table, change.new_key))
    return keys
