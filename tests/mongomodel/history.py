"""Random histories of one collection: the connector's records and the truth along the way."""

from __future__ import annotations

import copy
import random
from dataclasses import dataclass
from typing import Any

from tests.mongomodel.bson import same
from tests.mongomodel.collection import (
    MongoCollection,
    random_document,
    random_id,
    random_update,
)
from tests.mongomodel.debezium import Connector, Emitter

__all__ = ["Checkpoint", "History", "random_history"]


@dataclass(frozen=True)
class Checkpoint:
    """After ``lines`` records the collection held ``documents`` (no transaction open)."""

    lines: int
    documents: dict[Any, dict[str, Any]]


@dataclass(frozen=True)
class History:
    lines: list[dict[str, Any]]
    checkpoints: list[Checkpoint]

    @property
    def final(self) -> dict[Any, dict[str, Any]]:
        return self.checkpoints[-1].documents


def random_history(
    connector: Connector,
    seed: int,
    *,
    snapshot: int = 5,
    changes: int = 40,
    transactions: bool = True,
) -> History:
    """A snapshot of ``snapshot`` documents, then ``changes`` random writes.

    Writes: inserts (some re-inserting a deleted ``_id``), replaces, updates with one to three
    operators, deletes; with ``transactions``, runs of two or three writes share a transaction.
    """
    rng = random.Random(seed)
    # Relaxed updatedFields (json.serialization.mode legacy, no full document) cannot tell an
    # Int64 from an Int32: such histories write no Int64 through updates (docs/silver-mongodb.md).
    int64 = not (
        connector.generation == "change_streams"
        and connector.json_mode == "legacy"
        and "update_full" not in connector.capture_mode
    )
    model = MongoCollection(connector.db, connector.collection)
    emitter = Emitter(connector, random.Random(seed + 1))
    serial = 0
    documents = []
    for _ in range(snapshot):
        serial += 1
        documents.append(
            model.insert({"_id": random_id(rng, serial), **random_document(rng, 0, int64)}).after
        )
    emitter.snapshot([d for d in documents if d is not None])
    checkpoints = [Checkpoint(len(emitter.lines), copy.deepcopy(model.documents))]
    deleted: list[Any] = []
    open_for = 0
    for _ in range(changes):
        if transactions and open_for == 0 and rng.random() < 0.15:
            emitter.begin()
            open_for = rng.randrange(2, 4)
        live = [d["_id"] for d in model.documents.values()]
        roll = rng.random()
        if roll < 0.2 or not live:
            if deleted and rng.random() < 0.5:
                id_value = deleted.pop(rng.randrange(len(deleted)))
            else:
                serial += 1
                id_value = random_id(rng, serial)
            change = model.insert({"_id": id_value, **random_document(rng, 0, int64)})
        elif roll < 0.3:
            change = model.replace(rng.choice(live), random_document(rng, 0, int64))
        elif roll < 0.85:
            target = rng.choice(live)
            document = model.get(target)
            assert document is not None
            change = model.update(target, random_update(rng, document, int64), rng)
        else:
            change = model.delete(rng.choice(live))
            deleted.append(change.id)
        if change.kind != "update" or not same(change.before, change.after):
            emitter.change(change)  # an update that changes nothing writes no oplog entry
        if open_for:
            open_for -= 1
            if open_for == 0:
                emitter.commit()
        if not open_for:
            checkpoints.append(Checkpoint(len(emitter.lines), copy.deepcopy(model.documents)))
    if open_for:
        emitter.commit()
        checkpoints.append(Checkpoint(len(emitter.lines), copy.deepcopy(model.documents)))
    return History(emitter.lines, checkpoints)
