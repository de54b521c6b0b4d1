"""Contract driver of the ``mongodb`` connector: a wire-protocol peer in the test process.

No mongod can run on these machines, so the driver starts :class:`tests.mongomodel.wire.
MongoPeer` (pymongo talks to it over TCP as to a one-member replica set) over a
:class:`tests.mongomodel.replset.ReplicaSet`, whose collections are the ground truth. The
history's rows become documents ``{_id: Int32(id), <column>: Int32 | string}`` in database
``contract``; an update is a ``$set`` of the row's columns, a multi-change transaction is a
multi-document transaction (one ``lsid``/``txnNumber``, one cluster time), and a primary-key
change (``_id`` is immutable in MongoDB) is a delete and an insert in one transaction.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from tests.contract.drivers.base import Capability, ContractDriver
from tests.contract.history import TABLES, Change, State, Transaction
from tests.mongomodel.bson import Int32, Int64
from tests.mongomodel.replset import ReplicaSet, Write
from tests.mongomodel.wire import MongoPeer

__all__ = ["MongoDbDriver"]

DB = "contract"
POISON_MARK = b"@@"
POISON_BYTES = b"\xff\xfe"
"""Swapped into the encoded event: a string that is not UTF-8, as an unchecked driver may store."""
POISON_REASON = "invalid BSON"


def _value(value: Any) -> Any:
    return Int32(value) if isinstance(value, int) else value


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, Int32 | Int64) else value


class MongoDbDriver(ContractDriver):
    """Database ``contract`` of a private :class:`MongoPeer`."""

    CONNECTOR: ClassVar[str] = "mongodb"
    SOURCE_NAME: ClassVar[str] = "mongo"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset(
        {Capability.SNAPSHOT, Capability.RESTART, Capability.REPORTS_LOG}
    )

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        self.peer = MongoPeer(ReplicaSet(seed=17)).start()
        self.replset = self.peer.replset

    def setup(self) -> None:
        """Nothing to create: a collection exists from its first insert, as in MongoDB."""
        workdir = self.workdir
        workdir.mkdir(parents=True, exist_ok=True)

    def apply(self, transactions: list[Transaction]) -> None:
        """Each transaction as one write, or as a multi-document transaction."""
        for transaction in transactions:
            writes = [w for change in transaction for w in self._writes(change)]
            self.replset.commit(writes, transaction=len(writes) > 1)

    def _writes(self, change: Change) -> list[Write]:
        ns = (DB, change.table)
        if change.op == "d":
            return [Write("delete", ns, Int32(change.key))]
        assert change.row is not None
        document = {"_id": Int32(change.row["id"])}
        document |= {k: _value(v) for k, v in change.row.items() if k != "id"}
        if change.op == "c":
            return [Write("insert", ns, document=document)]
        if change.op == "k":
            return [Write("delete", ns, Int32(change.key)), Write("insert", ns, document=document)]
        ops = tuple(("$set", k, v) for k, v in document.items() if k != "_id")
        return [Write("update", ns, Int32(change.key), ops=ops)]

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The peer's replica set, database ``contract``."""
        return {
            "name": self.SOURCE_NAME,
            "connector": self.CONNECTOR,
            "mongodb.connection.string": self.peer.uri,
            "database.include.list": DB,
            **extra,
        }

    def truth(self) -> State:
        """The model's documents as rows."""
        state: State = {}
        for spec in TABLES:
            documents = self.replset.collection(DB, spec.name).documents.values()
            state[spec.name] = {
                _plain(d["_id"]): {
                    "id": _plain(d["_id"]),
                    **{k: _plain(v) for k, v in d.items() if k != "_id"},
                }
                for d in documents
            }
        return state

    def collection(self, table: str) -> str:
        """``contract.<table>``."""
        return f"{DB}.{table}"

    def event_key(self, key: dict[str, Any]) -> int:
        """The key's ``id`` is the ``_id`` in relaxed Extended JSON: ``"5"``."""
        return int(key["id"])

    def poison(self) -> str:
        """An insert whose string is not valid UTF-8 in the change event the server sends."""
        with self.replset.lock:  # no reader sees the event before its bytes are swapped
            (entry,) = self.replset.commit(
                [Write("insert", (DB, "poison"), document={"_id": Int32(1), "note": "@@"})]
            )
            entry.raw_patch = (POISON_MARK, POISON_BYTES)
        return POISON_REASON

    def restart(self) -> None:
        """Restart the peer under the following agent: once its change stream is open (a
        restart before the agent connects would pass unseen), drop connections and cursors,
        keep data and oplog."""
        assert self.peer.wait_for_stream(), "no agent opened a change stream to restart under"
        self.peer.restart()

    def close(self) -> None:
        """Stop the peer."""
        self.peer.stop()
