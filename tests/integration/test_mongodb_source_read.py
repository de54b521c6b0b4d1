"""The reconciler's own read of a MongoDB deployment (``gold/source_read/mongodb.py``) through
pymongo and the wire peer, without Spark: a snapshot read through a mongos, an undecodable
document staged as unreadable (never as equal), the changes after a cut from a change stream,
and a history that no longer reaches the cut."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from gold.source_read.mongodb import changes_after, read_collections, source_collections
from pipeline.errors import SourceUnavailable
from tests.mongomodel.bson import Decimal128, Int32, Int64
from tests.mongomodel.replset import ReplicaSet, Write
from tests.mongomodel.wire import MongoPeer

NS = ("shop", "orders")


@pytest.fixture(params=["replica set", "mongos"])
def peer(request: pytest.FixtureRequest) -> Iterator[MongoPeer]:
    """A replica set primary, or a router of a sharded cluster."""
    server = MongoPeer(ReplicaSet(seed=3), role=request.param).start()
    yield server
    server.stop()


def staged(path: Path | None) -> list[dict[str, str]]:
    assert path is not None
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_read_at_one_cluster_time_and_the_changes_after_a_cut(
    peer: MongoPeer, tmp_path: Path
) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document={"_id": Int32(n), "q": Int64(n)}) for n in (1, 2)])
    rs.commit([Write("insert", ("other", "c"), document={"_id": "x"})])
    rs.commit([Write("insert", NS, document={"_id": Int32(3), "d": Decimal128("1.50")})])
    cut = (rs.now().t, rs.now().i)
    rs.commit([Write("update", NS, Int32(2), ops=(("$set", "q", Int64(20)),))])
    rs.commit([Write("update", ("other", "c"), "x", ops=(("$set", "y", Int32(1)),))])

    assert source_collections(peer.uri, lambda db, coll: db == "shop") == ["shop.orders"]
    read = read_collections(peer.uri, ["shop.orders", "shop.gone"], tmp_path, fetch=2)
    assert read.point == (rs.now().t, rs.now().i)
    assert read.collections["shop.gone"].path is None
    orders = read.collections["shop.orders"]
    assert (orders.documents, orders.unreadable, orders.fields) == (3, 0, {"_id", "q", "d"})
    lines = staged(orders.path)
    assert [line["i"] for line in lines] == [f'{{"$numberInt":"{n}"}}' for n in (1, 2, 3)]
    assert lines[1]["d"] == '{"_id":{"$numberInt":"2"},"q":{"$numberLong":"20"}}'
    assert lines[2]["d"] == '{"_id":{"$numberInt":"3"},"d":{"$numberDecimal":"1.50"}}'

    changes = changes_after(peer.uri, cut, read.point, ["shop.orders"])
    assert changes.known and changes.any
    assert changes.ids == {"shop.orders": {lines[1]["k"]}}  # not other.c: not captured
    assert "1 captured documents changed" in changes.reason
    nothing = changes_after(peer.uri, read.point, read.point, ["shop.orders"])
    assert nothing.known and not nothing.any

    rs.truncate_history()
    lost = changes_after(peer.uri, cut, read.point, ["shop.orders"])
    assert not lost.known and "ChangeStreamHistoryLost" in lost.reason


def test_an_undecodable_document_is_unreadable_not_equal(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document={"_id": Int32(n), "s": f"ok{n}"}) for n in (1, 2)])
    peer.invalid_utf8 = ("ok2", b"ok\xff")  # the server holds bytes that are not UTF-8
    orders = read_collections(peer.uri, ["shop.orders"], tmp_path, fetch=10).collections[
        "shop.orders"
    ]
    assert (orders.documents, orders.unreadable) == (2, 1)
    bad = staged(orders.path)[1]
    assert bad["i"] == '{"$numberInt":"2"}' and "InvalidBSON" in bad["u"]
    assert "h" not in bad


def test_an_unreachable_deployment_is_source_unavailable(tmp_path: Path) -> None:
    with pytest.raises(SourceUnavailable, match="cannot be reached"):
        read_collections("mongodb://127.0.0.1:9/", ["a.b"], tmp_path, fetch=1, timeout_ms=200)
