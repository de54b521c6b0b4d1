"""Reconciliation of a MongoDB source (``gold/reconcile_documents.py``) against the wire peer.

The agent lands the peer's documents into bronze, the real :class:`SilverJob` applies them, and
``reconcile_source`` compares silver at the cut with an independent pymongo read of the peer.
Then the source is changed **behind the pipeline's back** (the model's documents edited with no
oplog entry: what a silver corruption or a lost event looks like from the reconciler's side), one
type at a time, and each change must be found by ``_id`` and field path; a document deleted the
same way must come out as extra in silver, one inserted that way as missing. Changes made the
normal way after the cut (with oplog entries) are *changed after the cut*, never differences.

A silver run of MongoDB documents costs tens of seconds of Spark, so one silver run and two
reconciliations cover it all; what needs no Spark (the reader through a mongos, an undecodable
document, a change stream history that no longer reaches the cut) is in
``test_mongodb_source_read.py``.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gold.cuts import latest_cut
from gold.reconcile import can_reconcile, last_reconciled, reconcile_source
from pipeline.config import PipelineConfig
from pipeline.orchestration import reconcile_due
from silver.job import SilverJob
from tests.integration.test_mongodb_capture import COLL, DB, NS, config, land
from tests.mongomodel.bson import Binary, Date, Decimal128, Double, Int32, Int64, ObjectId
from tests.mongomodel.collection import identity
from tests.mongomodel.replset import ReplicaSet, Write
from tests.mongomodel.wire import MongoPeer

pytestmark = [pytest.mark.spark, pytest.mark.delta]


@pytest.fixture
def peer() -> Iterator[MongoPeer]:
    """A peer of its own for the test."""
    server = MongoPeer(ReplicaSet(seed=5)).start()
    yield server
    server.stop()


def _document(n: int) -> dict[str, Any]:
    return {
        "_id": Int32(n),
        "name": f"order {n}",
        "total": Decimal128(f"{n}.50"),
        "placed": Date(1_700_000_000_000 + n),
        "ref": ObjectId(f"{n:024x}"),
        "blob": Binary(bytes([n, 1, 2]), 0),
        "count": Int64(n * 10),
        "ratio": Double(n / 4),
        "address": {"city": "Oslo", "zip": {"code": Int32(100 + n)}},
        "items": [{"sku": "a", "qty": Int32(1)}, {"sku": "b", "qty": Int32(2)}],
        "card": {"no": f"4111-{n}", "exp": "12/30"},  # card.no: excluded by the config
    }


def _behind_the_back(peer: MongoPeer, n: int, field: str, value: Any) -> None:
    """Set a (nested) field of document ``n`` in the source with no oplog entry."""
    document = peer.replset.collection(*NS).documents[identity(Int32(n))]
    *parents, last = field.split(".")
    node: Any = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    node[last] = value


def test_clean_then_every_difference_is_found_and_changes_after_the_cut_are_not(
    spark: Any, peer: MongoPeer, tmp_path: Path
) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document=_document(n)) for n in range(1, 11)])
    raw = config(peer, **{"field.exclude.list": f"{DB}.{COLL}.card.no"})
    lake = tmp_path / "lake"
    land(raw, lake)
    SilverJob(spark, lake).run_once()
    cut = latest_cut(lake, "mongo")
    assert cut is not None
    pipeline = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
    assert can_reconcile(pipeline.source("mongo"))

    # Clean, as `medallion quality` runs it (and recorded in gold/_reconciliations).
    warning, verdict = reconcile_due(pipeline, spark, lake, force=True)({"mongo": cut})
    assert (verdict.check, verdict.table, verdict.success) == ("reconcile", f"{DB}.orders", True)
    assert verdict.observed.startswith("source 10 rows, gold 10;"), verdict.observed
    assert "the source has no change beyond the cut" in verdict.details
    # Excluded on purpose: taken out of both sides, and said (a warning), never a pass.
    assert (warning.check, warning.success) == ("reconcile_not_comparable", False)
    assert warning.sample == ("card.no: excluded by field.exclude.list",)
    assert "mongo" in last_reconciled(lake)

    # Behind the pipeline's back: one kind of difference per document.
    changes = {
        1: ("address.zip.code", Int32(999)),  # nested value
        2: ("total", Decimal128("2.5")),  # Decimal128: 2.50 is not 2.5
        3: ("placed", Date(1_700_000_000_000)),  # a date a millisecond off
        4: ("ref", ObjectId("ffffffffffffffffffffffff")),
        5: ("blob", Binary(bytes([5, 1, 2]), 4)),  # same bytes, another subtype
        6: ("count", Double(60.0)),  # int64 60 became a double 60.0
        7: ("items.1.qty", Int32(3)),  # an array element's field
    }
    for n, (field, value) in changes.items():
        _behind_the_back(peer, n, field, value)
    del rs.collection(*NS).documents[identity(Int32(8))]  # deleted behind the back
    rs.collection(*NS).documents[identity(Int32(12))] = _document(12)  # inserted so
    # After the cut, with oplog entries: lag, not differences.
    rs.commit([Write("update", NS, Int32(9), ops=(("$set", "name", "late"),))])
    rs.commit([Write("insert", NS, document=_document(11))])

    result = reconcile_source(spark, pipeline, lake, "mongo", record=False)
    (orders,) = result.tables
    assert not orders.success
    assert result.source_ahead is True
    assert "2 captured documents changed" in result.notes[0]
    assert orders.extra_in_gold == ('{"$numberInt":"8"}',)
    assert orders.missing_in_gold == ('{"$numberInt":"12"}',)
    assert orders.differing_count == 7
    assert orders.differing == tuple(f'{{"$numberInt":"{n}"}}' for n in range(1, 8))
    assert orders.values is not None
    by_field = {c.column: c for c in orders.values.columns if c.status == "compared"}
    assert set(by_field) == {field for field, _ in changes.values()}
    assert all(c.differing == 1 for c in by_field.values())
    shown = {f: by_field[f].examples[0] for f in by_field}
    assert (shown["total"].source, shown["total"].silver) == (
        '{"$numberDecimal":"2.5"}',
        '{"$numberDecimal":"2.50"}',
    )
    assert shown["count"].key.endswith("(type)")
    assert (shown["count"].source, shown["count"].silver) == (
        '{"$numberDouble":"60.0"}',
        '{"$numberLong":"60"}',
    )
    assert shown["blob"].source == (
        '{"$binary":{"base64":"'
        + base64.b64encode(bytes([5, 1, 2])).decode()
        + '","subType":"04"}}'
    )
    assert shown["placed"].silver == '{"$date":{"$numberLong":"1700000000003"}}'
    assert shown["address.zip.code"].source == '{"$numberInt":"999"}'
    assert shown["items.1.qty"].silver == '{"$numberInt":"2"}'
    assert any("2 documents changed in the source after the cut" in n for n in orders.notes)
    outcome = result.outcomes()[-1]
    assert outcome.check == "reconcile" and not outcome.success
    assert "possibly lag" in outcome.observed
    assert any("total: 1 differing" in line for line in orders.values.differences())
