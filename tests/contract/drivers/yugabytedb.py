"""Contract driver of the ``yugabytedb`` connector: the agent, unmodified, against a wire peer.

No YugabyteDB can run here. :class:`tests.ybmodel.wire.YbPeer` listens for the agent's psycopg
(in this process or in a child the suite kills): normal connections reach the session's real
PostgreSQL (``pg_dsn``), where the driver keeps the history's tables in a private schema, and
replication connections are served by :class:`tests.ybmodel.vwal.YbModel` (three tablets,
``SEQUENCE`` LSNs, ``yboutput``; ``items`` with replica identity ``CHANGE``, ``orders`` with
``FULL``). Every transaction commits on both, under the peer's lock, so a slot's consistent
point is one state of both; :meth:`YugabyteDbDriver.truth` is the model's rows, checked equal
to the real tables'.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import psycopg

from capture.postgresql.slot import parse_lsn
from tests.contract.drivers.base import Capability, SqlDriver
from tests.contract.history import TABLES, Change, State, Transaction, statements
from tests.integration.test_pg_capture import pg_corner
from tests.ybmodel.vwal import INT4_OID, TEXT_OID, Table, YbModel
from tests.ybmodel.wire import YbPeer

__all__ = ["YugabyteDbDriver"]

NUMERIC_OID = 1700
NAN_KEY_REASON = "key column value 'NaN'"
"""A numeric key YugabyteDB accepts and a Connect key cannot carry."""
IDENTITIES = {"items": "c", "orders": "f"}
"""Replica identity per history table: CHANGE (yboutput's default) and FULL."""


class YugabyteDbDriver(SqlDriver):
    """The history on the peer: the model's slot is the acknowledged position; "restart"
    breaks every connection of the peer (slots and data kept)."""

    CONNECTOR: ClassVar[str] = "yugabytedb"
    SOURCE_NAME: ClassVar[str] = "yb"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.SNAPSHOT, Capability.RESTART, Capability.ACKNOWLEDGES, Capability.REPORTS_LOG}
    )
    MARKERS: ClassVar[tuple[str, ...]] = ("postgres",)
    SERVER_FIXTURE: ClassVar[str | None] = "pg_dsn"
    RESTARTABLE_SERVER_FIXTURE: ClassVar[str | None] = "pg_dsn"
    TEXT_TYPE: ClassVar[str] = "text"
    LOG_IN_BYTES: ClassVar[bool] = False

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        self._corner = contextlib.ExitStack()
        self.pg = self._corner.enter_context(contextlib.contextmanager(pg_corner)(server))
        self.model = YbModel(tablets=3)
        self.peer = YbPeer(self.model, server).start()
        self._corner.callback(self.peer.close)

    def connect(self) -> Any:
        """A psycopg connection to the real PostgreSQL (the SQL side)."""
        return psycopg.connect(self.pg.dsn)

    def qualified(self, table: str) -> str:
        """``<schema>.<table>``."""
        return f"{self.pg.schema}.{table}"

    def _relid(self, table: str) -> int:
        return int(self.pg.query("SELECT %s::regclass::oid", (self.qualified(table),))[0][0])

    def setup(self) -> None:
        """The history's tables and a ``poison`` table with a numeric key, in both."""
        super().setup()
        self.execute(f"CREATE TABLE {self.qualified('poison')} (id numeric PRIMARY KEY)")
        kinds = {"int": INT4_OID, "text": TEXT_OID}
        for spec in TABLES:
            columns = (("id", INT4_OID), *((n, kinds[k]) for n, k in spec.columns))
            self.model.create_table(
                Table(
                    self.pg.schema,
                    spec.name,
                    self._relid(spec.name),
                    columns,
                    ("id",),
                    IDENTITIES[spec.name],
                )
            )
        self.model.create_table(
            Table(self.pg.schema, "poison", self._relid("poison"), (("id", NUMERIC_OID),), ("id",))
        )

    def apply(self, transactions: list[Transaction]) -> None:
        """Commit each transaction on the real tables, then on the model, under the peer's
        lock (no slot is created between the two)."""
        conn = self.connect()
        try:
            cursor = conn.cursor()
            for transaction in transactions:
                with self.peer.lock:
                    for change in transaction:
                        cursor.execute(*statements(change, self.qualified(change.table)))
                    conn.commit()
                    self.model.commit([_statement(change) for change in transaction])
        finally:
            conn.close()

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The corner's schema through the peer."""
        info = psycopg.conninfo.conninfo_to_dict(self.pg.dsn)
        return {
            "name": self.SOURCE_NAME,
            "connector": self.CONNECTOR,
            "database.hostname": "127.0.0.1",
            "database.port": self.peer.port,
            "database.user": info.get("user", "postgres"),
            "database.dbname": info.get("dbname", "postgres"),
            "topic.prefix": "dbserver",
            "slot.name": self.pg.slot,
            "publication.name": self.pg.publication,
            "schema.include.list": self.pg.schema,
            **extra,
        }

    def truth(self) -> State:
        """The model's rows (checked equal to the real tables': the peer's two sides agree)."""
        with self.peer.lock:
            state = {
                spec.name: {row["id"]: row for row in self.model.truth(spec.name)}
                for spec in TABLES
            }
            assert super().truth() == state, "the model and the real tables diverged"
        return state

    def collection(self, table: str) -> str:
        """``<schema>.<table>``."""
        return self.qualified(table)

    def poison(self) -> str:
        """A row whose key is ``NaN``."""
        with self.peer.lock:
            self.execute(f"INSERT INTO {self.qualified('poison')} VALUES ('NaN')")
            self.model.commit([("insert", "poison", {"id": "NaN"})])
        return NAN_KEY_REASON

    def restart(self) -> None:
        """Break every connection of the peer; the model's slots and data stay."""
        self.peer.restart()

    def acknowledged(self) -> int:
        """The model slot's confirmed flush LSN."""
        with self.peer.lock:
            return self.model.slots[self.pg.slot].confirmed_flush

    def offset_position(self, offset: Mapping[str, Any]) -> int:
        """The offset's LSN."""
        return parse_lsn(offset["lsn"])

    def close(self) -> None:
        """Stop the peer; drop the publication and schema."""
        self.peer.close()
        # A backend of a proxied connection outlives the peer until it notices its socket went;
        # one left in a transaction (a killed agent's snapshot) would block DROP SCHEMA.
        self.pg.query(
            "SELECT pg_terminate_backend(pid) FROM (SELECT DISTINCT l.pid FROM pg_locks l"
            " JOIN pg_class c ON c.oid = l.relation"
            " JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND l.pid <> pg_backend_pid()) held",
            (self.pg.schema,),
        )
        self._corner.close()


def _statement(change: Change) -> tuple[str, str, Mapping[str, Any]]:
    """``change`` as :meth:`YbModel.commit` takes it."""
    if change.op == "d":
        return "delete", change.table, {"id": change.key}
    assert change.row is not None
    if change.op == "c":
        return "insert", change.table, change.row
    if change.op == "k":
        return "update", change.table, {"id": change.key, "__new_key": {"id": change.new_key}}
    return "update", change.table, {**change.row, "id": change.key}
