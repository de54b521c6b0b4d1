"""The wire-level peer answers as MongoDB's documentation says, checked through pymongo itself.

The agent's tests are only as good as the peer (``tests/mongomodel/wire.py``); these pin the
documented behaviours the agent relies on, with the real driver's own API (no agent code):
``startAtOperationTime`` is inclusive and ``resumeAfter`` exclusive, ``postBatchResumeToken``
resumes after filtered-out events, snapshot reads are as of ``atClusterTime``, a resume point
no longer in the oplog is error 286 with the ``NonResumableChangeStreamError`` label, a stream
on one collection ends with ``invalidate`` when it is dropped, and a lost cursor after a restart
is resumed by the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import bson
import pymongo
import pytest
from pymongo.errors import OperationFailure

from tests.mongomodel.bson import Int32
from tests.mongomodel.replset import ReplicaSet, Write
from tests.mongomodel.wire import MongoPeer

NS = ("shop", "orders")


@pytest.fixture
def peer() -> Iterator[MongoPeer]:
    server = MongoPeer(ReplicaSet(seed=3)).start()
    yield server
    server.stop()


@pytest.fixture
def client(peer: MongoPeer) -> Iterator[pymongo.MongoClient[dict[str, Any]]]:
    made: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(
        peer.uri, serverSelectionTimeoutMS=5000
    )
    yield made
    made.close()


def insert(peer: MongoPeer, n: int, ns: tuple[str, str] = NS) -> bson.Timestamp:
    (entry,) = peer.replset.commit([Write("insert", ns, document={"_id": Int32(n)})])
    return bson.Timestamp(entry.point.t, entry.point.i)


def ids(stream: Any) -> list[Any]:
    out = []
    while (event := stream.try_next()) is not None:
        out.append(event["documentKey"]["_id"])
    return out


def test_start_at_is_inclusive_and_resume_after_exclusive(
    peer: MongoPeer, client: pymongo.MongoClient[dict[str, Any]]
) -> None:
    first = insert(peer, 1)
    insert(peer, 2)
    with client.watch(start_at_operation_time=first) as stream:
        events = [stream.try_next(), stream.try_next()]
    assert [e["documentKey"]["_id"] for e in events if e] == [1, 2]
    assert events[0] is not None
    with client.watch(resume_after=events[0]["_id"]) as stream:
        assert ids(stream) == [2]


def test_post_batch_resume_token_passes_filtered_events(
    peer: MongoPeer, client: pymongo.MongoClient[dict[str, Any]]
) -> None:
    insert(peer, 1)
    with client.shop.orders.watch(start_at_operation_time=bson.Timestamp(1, 0)) as stream:
        assert ids(stream) == [1]
        insert(peer, 2, ("shop", "other"))  # another collection: not in this stream
        assert stream.try_next() is None
        token = stream.resume_token
    insert(peer, 3)
    with client.shop.orders.watch(resume_after=token) as stream:
        assert ids(stream) == [3]


def test_snapshot_reads_are_as_of_their_cluster_time(
    peer: MongoPeer, client: pymongo.MongoClient[dict[str, Any]]
) -> None:
    at = insert(peer, 1)
    insert(peer, 2)
    reply = client.shop.command(
        {"find": "orders", "readConcern": {"level": "snapshot", "atClusterTime": at}}
    )
    assert [d["_id"] for d in reply["cursor"]["firstBatch"]] == [1]
    assert reply["cursor"]["atClusterTime"] == at
    peer.replset.truncate_history(keep=0)
    with pytest.raises(OperationFailure) as failed:
        client.shop.command(
            {"find": "orders", "readConcern": {"level": "snapshot", "atClusterTime": at}}
        )
    assert failed.value.code == 239  # SnapshotTooOld


def test_a_lost_resume_point_is_error_286(
    peer: MongoPeer, client: pymongo.MongoClient[dict[str, Any]]
) -> None:
    first = insert(peer, 1)
    insert(peer, 2)
    peer.replset.truncate_history(keep=1)
    with pytest.raises(OperationFailure) as failed:
        client.watch(start_at_operation_time=first)
    assert failed.value.code == 286
    assert failed.value.has_error_label("NonResumableChangeStreamError")


def test_a_dropped_collection_invalidates_its_stream(
    peer: MongoPeer, client: pymongo.MongoClient[dict[str, Any]]
) -> None:
    insert(peer, 1)
    with client.shop.orders.watch() as stream:
        peer.replset.drop(*NS)
        kinds = [stream.try_next(), stream.try_next()]
        assert [k["operationType"] for k in kinds if k] == ["drop", "invalidate"]
        assert not stream.alive


def test_the_driver_resumes_after_a_restart(
    peer: MongoPeer, client: pymongo.MongoClient[dict[str, Any]]
) -> None:
    insert(peer, 1)
    with client.watch(start_at_operation_time=bson.Timestamp(1, 0)) as stream:
        assert ids(stream) == [1]
        peer.restart()  # the cursor is gone with the server
        insert(peer, 2)
        assert ids(stream) == [2]
    assert "aggregate" in peer.commands[peer.commands.index("getMore") :]
