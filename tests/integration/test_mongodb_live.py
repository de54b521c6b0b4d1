"""The MongoDB agent against a real replica set: runs when ``MEDALLION_TEST_MONGODB_URI`` is set.

No mongod can run on the project's machines, so everything else about the agent is verified
against the wire-level peer (``tests/integration/test_mongodb_capture.py``, the contract
suite). Point this test at a real replica set (MongoDB 6.0+; 5.0 works without pre-images) to
check the same paths against a server::

    MEDALLION_TEST_MONGODB_URI='mongodb://localhost:27017/?replicaSet=rs0' \\
        pytest -n 0 tests/integration/test_mongodb_live.py

(``MEDALLION_TEST_MONGO_URI``, the issue's spelling, is read too.) The test writes only to a
database of its own, ``medallion_live_<random>``, and drops it afterwards.

When the variable is set and the server cannot be reached, the test **fails**. When it is not
set, ``tests/conftest.py`` does not collect the module (like the other connectors' live tests,
which are defined only when their server is named): nothing is skipped or counted.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pymongo
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from tests.contract.harness import agent

URI = os.environ.get("MEDALLION_TEST_MONGODB_URI") or os.environ.get("MEDALLION_TEST_MONGO_URI")

if not URI:  # tests/conftest.py does not collect this module then; run directly, it fails
    raise RuntimeError("MEDALLION_TEST_MONGODB_URI is not set (see docs/capture-mongodb.md)")

pytestmark = pytest.mark.delta


@pytest.fixture
def database() -> Iterator[Any]:
    """A database of the test's own on the real server (fails when it cannot be reached)."""
    client: Any = pymongo.MongoClient(URI, serverSelectionTimeoutMS=10_000)
    client.admin.command("ping")  # unreachable: ServerSelectionTimeoutError, a failure
    name = f"medallion_live_{secrets.token_hex(4)}"
    yield client[name]
    client.drop_database(name)
    client.close()


def rows(lake: Path) -> list[dict[str, Any]]:
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    return sorted(table, key=lambda r: r[S.POSITION])


def test_snapshot_then_change_stream_on_a_real_replica_set(database: Any, tmp_path: Path) -> None:
    orders = database["orders"]
    orders.insert_many([{"_id": n, "qty": n} for n in range(1, 4)])
    raw = {
        "name": "live",
        "connector": "mongodb",
        "mongodb.connection.string": URI,
        "database.include.list": database.name,
        "capture.mode": "change_streams_update_full",
        "provide.transaction.metadata": True,
    }
    lake = tmp_path / "lake"
    assert agent(raw, lake).run().landed == 3  # the snapshot
    follower, stop = agent(raw, lake), threading.Event()
    runner = threading.Thread(
        target=lambda: follower.run(follow=True, poll_interval_s=0.05, stop=stop)
    )
    runner.start()
    try:
        # No wait for the follower: its stream starts at the snapshot's point, whenever it opens.
        orders.update_one({"_id": 1}, {"$inc": {"qty": 10}})
        orders.delete_one({"_id": 2})
        with database.client.start_session() as session, session.start_transaction():
            orders.insert_one({"_id": 4, "qty": 4}, session=session)
            orders.replace_one({"_id": 3}, {"qty": 30}, session=session)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if sum(r[S.KIND] == "data" for r in rows(lake)) >= 7:
                break
            time.sleep(0.2)
    finally:
        stop.set()
        runner.join(timeout=60)
    data = [(r[S.OP], orjson.loads(r[S.KEY_JSON])["id"]) for r in rows(lake) if r[S.KIND] == "data"]
    assert data == [("r", "1"), ("r", "2"), ("r", "3"), ("u", "1"), ("d", "2"), ("c", "4"),
                    ("u", "3")]  # fmt: skip
    update = orjson.loads(next(r for r in rows(lake) if r[S.OP] == "u")[S.VALUE_JSON])
    assert update["after"] == '{"_id":{"$numberInt":"1"},"qty":{"$numberInt":"11"}}'
    statuses = [r[S.TX_STATUS] for r in rows(lake) if r[S.KIND] == "transaction"]
    assert statuses == ["BEGIN", "END"]


def test_reconcile_on_a_real_replica_set(spark: Any, database: Any, tmp_path: Path) -> None:
    """Reconciliation (``gold/reconcile_documents.py``) against the server: clean after capture
    and silver, a later write is lag (not a difference), a corrupted silver document is found by
    ``_id`` and field."""
    import dataclasses
    import datetime as dt
    from decimal import Decimal

    from bson import Binary, Decimal128, Int64, ObjectId

    from gold.cuts import latest_cut
    from gold.reconcile import reconcile_source
    from pipeline.config import PipelineConfig
    from silver.job import SilverJob

    orders = database["orders"]
    orders.insert_many(
        [
            {"_id": n, "total": Decimal128(Decimal(f"{n}.50")), "count": Int64(n),
             "ratio": n / 4, "at": dt.datetime(2026, 1, n, tzinfo=dt.UTC), "ref": ObjectId(),
             "blob": Binary(bytes([n]), 0), "address": {"city": "Oslo", "no": n}}
            for n in range(1, 6)
        ]
    )  # fmt: skip
    raw = {"name": "live", "connector": "mongodb", "mongodb.connection.string": URI,
           "database.include.list": database.name}  # fmt: skip
    lake = tmp_path / "lake"
    agent(raw, lake).run()
    SilverJob(spark, lake).run_once()
    config = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
    result = reconcile_source(spark, config, lake, "live", record=False)
    (table,) = result.tables
    assert table.success and table.source_rows == 5, table
    assert result.source_ahead is False

    orders.update_one({"_id": 2}, {"$set": {"address.city": "Bergen"}})
    result = reconcile_source(spark, config, lake, "live", record=False)
    (table,) = result.tables
    assert result.source_ahead is True and table.success, table  # lag, not a difference

    cut = latest_cut(lake, "live")
    assert cut is not None
    (at_cut,) = cut.tables.values()
    path = (lake / "silver" / at_cut.silver_table).absolute()
    spark.sql(
        f"UPDATE delta.`{path}` SET document = replace(document, '\"Oslo\"', '\"Paris\"') "
        'WHERE _id = \'{"$numberInt":"3"}\''
    )
    corrupted = dataclasses.replace(
        cut, tables={at_cut.silver_table: dataclasses.replace(
            at_cut, version=DeltaTable(str(path)).version())}
    )  # fmt: skip
    result = reconcile_source(spark, config, lake, "live", cut=corrupted, record=False)
    (table,) = result.tables
    assert table.differing == ('{"$numberInt":"3"}',)
    assert table.values is not None
    assert [c.column for c in table.values.columns] == ["address.city"]
