"""The MongoDB agent against the wire-level peer: what the contract suite does not cover.

pymongo talks to :class:`tests.mongomodel.wire.MongoPeer` over TCP; the peer's replica set
(:mod:`tests.mongomodel.replset`) keeps the ground truth in the model collections of
:mod:`tests.mongomodel.collection` (every BSON type, nested ``$set``/``$unset``, array growth
and truncation, ``$inc`` type promotion, transactions). Checked here:

* random histories in every ``capture.mode``, landed in small batches by agents that stop and
  resume: silver's document fold (:func:`silver.documents_apply.fold`, what the silver job
  applies) over bronze gives the model's documents exactly, type and field order included;
* the records of a known sequence, field by field (envelopes, source block, transaction
  blocks and BEGIN/END, tombstones);
* ``ChangeStreamHistoryLost``: a terminal error naming the lost point, or a new snapshot under
  ``snapshot.mode: when_needed``;
* ``field.exclude.list`` and ``column.mask.*``; heartbeats moving the offset past collections
  that are not captured; ``snapshot.mode: never``; drop and rename; a snapshot document that is
  not valid BSON quarantined.
"""

from __future__ import annotations

import ipaddress
import logging
import random
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.mongodb.agent import ResumePointLost
from capture.mongodb.settings import MongoSettings
from capture.registry import create_source
from gold.source_read.mongodb import read_collections
from pipeline.config import load_config
from pipeline.errors import CaptureError, PipelineError, SourceUnavailable, StageFailed
from pipeline.landing import LandingAgent
from silver.documents_apply import Event, document_id, fold
from tests.contract.harness import agent, quarantined
from tests.mongomodel.bson import Int32, Int64, from_canonical, same
from tests.mongomodel.collection import identity, random_document, random_id, random_update
from tests.mongomodel.replset import ReplicaSet, Write
from tests.mongomodel.wire import MongoPeer

pytestmark = pytest.mark.delta

DB, COLL = "shop", "orders"
NS = (DB, COLL)
MODES = (
    "change_streams",
    "change_streams_update_full",
    "change_streams_with_pre_image",
    "change_streams_update_full_with_pre_image",
)


@pytest.fixture
def peer() -> Iterator[MongoPeer]:
    """A peer of its own for the test."""
    server = MongoPeer(ReplicaSet(seed=5)).start()
    yield server
    server.stop()


def config(peer: MongoPeer, **extra: Any) -> dict[str, Any]:
    """A ``mongodb`` source on the peer, database ``shop``."""
    return {
        "name": "mongo",
        "connector": "mongodb",
        "mongodb.connection.string": peer.uri,
        "database.include.list": DB,
        "topic.prefix": "shop1",
        **extra,
    }


def land(raw: dict[str, Any], lake: Path, **limits: int) -> None:
    """Land what the source has, one agent per batch (each resumes from bronze's offset)."""
    while agent(raw, lake, **limits).run(max_batches=1).batches:
        pass


def bronze_rows(lake: Path) -> list[dict[str, Any]]:
    """``bronze/events`` in position order."""
    rows = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    return sorted(rows, key=lambda r: r[S.POSITION])


def silver_documents(lake: Path) -> dict[Any, dict[str, Any]]:
    """Silver's fold over bronze's data events: the live documents by identity."""
    events: dict[str, list[Event]] = {}
    for row in bronze_rows(lake):
        if row[S.KIND] != "data":
            continue
        payload = orjson.loads(row[S.VALUE_JSON])
        key, id_value = document_id(row[S.KEY_JSON], payload)
        events.setdefault(key, []).append(Event(row[S.POSITION], row[S.OP], payload, id_value))
    documents = {}
    for batch in events.values():
        images, refusals = fold(None, batch)
        assert refusals == [], refusals
        last = images[-1]
        assert last.stale is None
        if not last.deleted:
            document = from_canonical(last.document)
            documents[identity(document["_id"])] = document
    return documents


def assert_documents(lake: Path, replset: ReplicaSet) -> None:
    truth = replset.collection(*NS).documents
    silver = silver_documents(lake)
    assert set(silver) == set(truth)
    for key, document in truth.items():
        assert same(silver[key], document), (key, silver[key], document)


def random_writes(replset: ReplicaSet, rng: random.Random, serial: list[int], count: int) -> None:
    """``count`` random writes; runs of two or three share a transaction."""
    model = replset.collection(*NS)
    done = 0
    while done < count:
        size = rng.choice([1, 1, 1, 2, 3])
        writes: list[Write] = []
        ids = [d["_id"] for d in model.documents.values()]
        for _ in range(size):
            roll = rng.random()
            live = [i for i in ids if all(w.id is not i for w in writes)]
            if roll < 0.25 or not live:
                serial[0] += 1
                new_id = random_id(rng, serial[0])
                writes.append(Write("insert", NS, document={"_id": new_id, **random_document(rng)}))
            elif roll < 0.35:
                writes.append(Write("replace", NS, rng.choice(live), random_document(rng)))
            elif roll < 0.85:
                target = rng.choice(live)
                document = model.get(target)
                assert document is not None
                writes.append(Write("update", NS, target, ops=tuple(random_update(rng, document))))
            else:
                writes.append(Write("delete", NS, rng.choice(live)))
            if writes[-1].kind != "insert":
                ids = [i for i in ids if i is not writes[-1].id]
        replset.commit(writes)
        done += len(writes)


@pytest.mark.parametrize("mode", MODES)
def test_random_histories_land_as_the_model_documents(
    peer: MongoPeer, tmp_path: Path, mode: str
) -> None:
    rng = random.Random(MODES.index(mode))
    replset, serial = peer.replset, [0]
    for _ in range(6):
        serial[0] += 1
        replset.commit([Write("insert", NS, document={"_id": random_id(rng, serial[0]),
                                                       **random_document(rng)})])  # fmt: skip
    raw, lake = config(peer, **{"capture.mode": mode}), tmp_path / "lake"
    land(raw, lake, max_events=4, max_transaction_events=2)
    for _ in range(3):
        random_writes(replset, rng, serial, 15)
        land(raw, lake, max_events=4, max_transaction_events=2)
        assert_documents(lake, replset)
    assert quarantined(lake) == []


def records(lake: Path) -> list[tuple[str | None, dict[str, Any] | None]]:
    """Every landed record as (kind, value), in position order (heartbeats left out)."""
    return [
        (r[S.KIND], None if r[S.VALUE_JSON] is None else orjson.loads(r[S.VALUE_JSON]))
        for r in bronze_rows(lake)
        if r[S.KIND] != "heartbeat"
    ]


def test_the_records_of_a_known_sequence(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document={"_id": Int32(1), "name": "Anne", "qty": Int32(2)})])
    raw = config(peer, **{"capture.mode": "change_streams_with_pre_image",
                          "provide.transaction.metadata": True})  # fmt: skip
    lake = tmp_path / "lake"
    land(raw, lake)
    rs.commit([Write("update", NS, Int32(1), ops=(("$inc", "qty", Int64(3)),))])
    rs.commit(
        [
            Write("insert", NS, document={"_id": "b", "tags": ["x"]}),
            Write("replace", NS, Int32(1), document={"name": "Anne Marie"}),
        ]
    )
    rs.commit([Write("delete", NS, "b")])
    land(raw, lake)
    got = records(lake)
    kinds = [k for k, _ in got]
    assert kinds == ["data", "data", "transaction", "data", "data", "transaction", "data",
                     "tombstone"]  # fmt: skip
    (_, snap), (_, update), (_, begin), (_, insert), (_, replace), (_, end), (_, delete) = [
        (k, v) for k, v in got if k != "tombstone"
    ]
    assert snap is not None and snap["op"] == "r" and snap["source"]["snapshot"] == "last"
    assert snap["after"] == '{"_id":{"$numberInt":"1"},"name":"Anne","qty":{"$numberInt":"2"}}'
    assert update is not None and update["op"] == "u" and update["after"] is None
    assert update["before"] == snap["after"]
    assert update["updateDescription"] == {
        "removedFields": None,
        "updatedFields": '{"qty":{"$numberLong":"5"}}',  # Int32 + Int64 is an Int64
        "truncatedArrays": None,
    }
    source = update["source"]
    assert (source["connector"], source["name"], source["db"], source["collection"]) == (
        "mongodb", "shop1", DB, COLL)  # fmt: skip
    assert source["rs"] == "rs0" and source["snapshot"] == "false" and source["txnNumber"] is None
    assert begin is not None and begin["status"] == "BEGIN"
    assert insert is not None and insert["op"] == "c" and insert["before"] is None
    assert insert["after"] == '{"_id":"b","tags":["x"]}'
    assert replace is not None and replace["op"] == "u"
    assert replace["after"] == '{"_id":{"$numberInt":"1"},"name":"Anne Marie"}'
    assert insert["source"]["txnNumber"] == replace["source"]["txnNumber"] == 1
    assert insert["source"]["lsid"] and insert["source"]["stxnid"].endswith(":1")
    assert end is not None and end["status"] == "END" and end["event_count"] == 2
    assert insert["transaction"]["id"] == replace["transaction"]["id"] == end["id"]
    assert [insert["transaction"]["total_order"], replace["transaction"]["total_order"]] == [1, 2]
    assert delete is not None and delete["op"] == "d" and delete["after"] is None
    assert delete["before"] == '{"_id":"b","tags":["x"]}'
    keys = [orjson.loads(r[S.KEY_JSON]) for r in bronze_rows(lake) if r[S.KIND] == "data"]
    assert keys[-1] == {"id": '"b"'} and keys[0] == {"id": "1"}  # relaxed Extended JSON


def test_a_lost_resume_point_is_a_clear_error(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document={"_id": Int32(1)})])
    raw, lake = config(peer), tmp_path / "lake"
    land(raw, lake)
    rs.commit([Write("insert", NS, document={"_id": Int32(2)})])
    land(raw, lake)
    rs.commit([Write("insert", NS, document={"_id": Int32(3)})])
    rs.truncate_history(keep=0)  # the oplog rolled over past bronze's resume point
    with pytest.raises(StageFailed) as failed:
        agent(raw, lake).run()
    error = failed.value.__cause__
    assert isinstance(error, ResumePointLost), repr(error)
    assert "ChangeStreamHistoryLost" in str(error) and "when_needed" in str(error)
    assert "$numberInt" not in str(error) and '"_data"' in str(error)  # names the token


def test_when_needed_snapshots_again(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document={"_id": Int32(1), "v": Int32(1)})])
    raw, lake = config(peer, **{"snapshot.mode": "when_needed"}), tmp_path / "lake"
    land(raw, lake)
    rs.commit([Write("update", NS, Int32(1), ops=(("$set", "v", Int32(2)),))])
    rs.commit([Write("insert", NS, document={"_id": Int32(2)})])
    rs.truncate_history(keep=0)
    land(raw, lake)
    ops = [r[S.OP] for r in bronze_rows(lake) if r[S.KIND] == "data"]
    assert ops == ["r", "r", "r"]  # the first snapshot, then a new one of both documents
    assert_documents(lake, rs)


def test_excluded_and_masked_fields(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    secret = {"_id": Int32(1), "name": "Anne", "card": {"no": "4111", "exp": "12/30"}}
    rs.commit([Write("insert", NS, document=secret)])
    raw = config(peer, **{"field.exclude.list": f"{DB}.*.card.no",
                          "column.mask.with.4.chars": f"{DB}.{COLL}.name",
                          "capture.mode": "change_streams"})  # fmt: skip
    lake = tmp_path / "lake"
    land(raw, lake)
    rs.commit([Write("update", NS, Int32(1), ops=(("$set", "card.no", "5500"),
                                                   ("$set", "name", "Bob")))])  # fmt: skip
    rs.commit([Write("update", NS, Int32(1), ops=(("$set", "card", {"no": "1", "exp": "x"}),))])
    land(raw, lake)
    (_, snap), (_, first), (_, second) = records(lake)
    assert snap is not None and first is not None and second is not None
    assert snap["after"] == '{"_id":{"$numberInt":"1"},"name":"****","card":{"exp":"12/30"}}'
    # The peer describes a change as paths or whole values at random (both are MongoDB's).
    first_fields = orjson.loads(first["updateDescription"]["updatedFields"])
    assert first_fields["name"] == "****" and "5500" not in str(first_fields)
    assert first_fields.get("card", {"exp": "12/30"}) == {"exp": "12/30"}
    second_fields = orjson.loads(second["updateDescription"]["updatedFields"])
    assert second_fields in ({"card": {"exp": "x"}}, {"card.exp": "x"}), second_fields


def test_heartbeats_move_the_offset_past_other_collections(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    raw = config(peer, **{"heartbeat.interval.ms": 1, "collection.include.list": f"{DB}.{COLL}"})
    lake = tmp_path / "lake"
    rs.commit([Write("insert", NS, document={"_id": Int32(1)})])
    land(raw, lake)
    writer = BronzeWriter(BronzeTables.under(lake))
    before = writer.last_committed(agent_app_id("mongo"))
    for n in range(3):
        rs.commit([Write("insert", (DB, "audit"), document={"_id": Int32(n)})])  # not captured
    land(raw, lake)
    after = writer.last_committed(agent_app_id("mongo"))
    assert before is not None and after is not None
    assert after.offset["resume"] != before.offset["resume"]
    assert [r[S.KIND] for r in bronze_rows(lake)][-1] == "heartbeat"
    assert {r[S.COLLECTION] for r in bronze_rows(lake) if r[S.KIND] == "data"} == {f"{DB}.{COLL}"}


def test_never_streams_from_now_and_drop_or_rename_lands_nothing(
    peer: MongoPeer, tmp_path: Path
) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document={"_id": Int32(1)})])  # before the agent: not landed
    raw, lake = config(peer, **{"snapshot.mode": "never"}), tmp_path / "lake"
    first = agent(raw, lake).run()
    assert first.landed == 1  # a heartbeat at the start point: the next agent goes on from it
    rs.commit([Write("insert", NS, document={"_id": Int32(2)})])
    rs.drop(DB, "scratch")
    rs.rename(DB, COLL, "orders_old")
    rs.commit([Write("insert", (DB, "orders_old"), document={"_id": Int32(3)})])
    land(raw, lake)
    data = [(r[S.COLLECTION], r[S.OP]) for r in bronze_rows(lake) if r[S.KIND] == "data"]
    assert data == [(f"{DB}.{COLL}", "c"), (f"{DB}.orders_old", "c")]


def test_a_snapshot_document_that_is_not_valid_bson_is_quarantined(
    peer: MongoPeer, tmp_path: Path
) -> None:
    rs = peer.replset
    rs.commit([Write("insert", NS, document={"_id": Int32(n), "s": "ok"}) for n in (1, 2)])
    peer.invalid_utf8 = ("ok", b"\xc3\x28")  # the server sends every "ok" as invalid UTF-8
    lake = tmp_path / "lake"
    land(config(peer), lake)
    reasons = [q[S.REASON] for q in quarantined(lake)]
    assert len(reasons) == 2 and all("invalid BSON" in r for r in reasons)


def follow_until(
    peer: MongoPeer, raw: dict[str, Any], lake: Path, writes: list[Any], landed: int
) -> None:
    """A following agent while ``writes`` (callables) run in turn, each once a change stream
    is open, until ``landed`` data events are in bronze."""
    follower, stop = agent(raw, lake), threading.Event()
    runner = threading.Thread(
        target=lambda: follower.run(follow=True, poll_interval_s=0.02, stop=stop)
    )
    runner.start()
    try:
        for write in writes:
            assert peer.wait_for_stream()
            write()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            rows = bronze_rows(lake) if (lake / "bronze" / "events").exists() else []
            if sum(r[S.KIND] == "data" for r in rows) >= landed:
                break
            time.sleep(0.05)
    finally:
        stop.set()
        runner.join(timeout=30)


def test_an_invalidated_stream_is_reopened_after_the_invalidate(
    peer: MongoPeer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rs = peer.replset
    raw, lake = config(peer), tmp_path / "lake"
    rs.commit([Write("insert", NS, document={"_id": Int32(1)})])
    land(raw, lake)
    follow_until(
        peer,
        raw,
        lake,
        [
            lambda: rs.commit([Write("insert", NS, document={"_id": Int32(2)})]),
            peer.invalidate_streams,
            lambda: rs.commit([Write("insert", NS, document={"_id": Int32(3)})]),
        ],
        3,
    )
    keys = [orjson.loads(r[S.KEY_JSON])["id"] for r in bronze_rows(lake) if r[S.KIND] == "data"]
    assert keys == ["1", "2", "3"]
    assert "invalidated; reopening" in caplog.text


def test_through_mongos_and_not_on_a_standalone(tmp_path: Path) -> None:
    router = MongoPeer(ReplicaSet(seed=9), role="mongos").start()
    try:
        router.replset.commit([Write("insert", NS, document={"_id": Int32(1)})])
        lake = tmp_path / "lake"
        land(config(router), lake)
        router.replset.commit([Write("insert", NS, document={"_id": Int32(2)})])
        land(config(router), lake)
        values = [v for k, v in records(lake) if k == "data"]
        assert [(v["op"], v["source"]["rs"]) for v in values if v] == [("r", ""), ("c", "")]
        with pytest.raises(CaptureError, match="cannot read local.oplog.rs"):
            agent(config(router), lake).source.log_status(None)
    finally:
        router.stop()
    alone = MongoPeer(role="standalone").start()
    try:
        with pytest.raises(StageFailed) as failed:
            agent(config(alone), tmp_path / "alone").run()
        assert "standalone mongod, which has no oplog" in str(failed.value.__cause__)
    finally:
        alone.stop()


def test_status_reports_the_oplog_after_the_resume_point(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    raw, lake = config(peer), tmp_path / "lake"
    rs.commit([Write("insert", NS, document={"_id": Int32(1)})])
    land(raw, lake)
    writer = BronzeWriter(BronzeTables.under(lake))

    def status() -> dict[str, Any]:
        committed = writer.last_committed(agent_app_id("mongo"))
        source = agent(raw, lake).source
        return source.log_status(None if committed is None else committed.offset)

    caught_up = status()
    assert caught_up["slot"] == "local.oplog.rs" and caught_up["slot_lag_bytes"] == 0
    assert caught_up["retained_wal_bytes"] > 0 and "slot_error" not in caught_up
    rs.commit([Write("insert", NS, document={"_id": Int32(2), "pad": "x" * 100})])
    behind = status()
    assert behind["slot_lag_bytes"] > 100  # the new entry, with its 100-byte string
    assert behind["retained_wal_bytes"] > caught_up["retained_wal_bytes"]
    rs.commit([Write("insert", NS, document={"_id": Int32(3)})])
    rs.truncate_history(keep=1)  # the entry right after bronze's resume point is gone
    assert "cannot resume" in status()["slot_error"]


def test_renamed_fields_in_images_and_update_descriptions(peer: MongoPeer, tmp_path: Path) -> None:
    rs = peer.replset
    first = {"_id": Int32(1), "name": "Anne", "addr": {"zip": "0150", "city": "Oslo"},
             "items": [{"sku": "a"}, {"sku": "b"}]}  # fmt: skip
    clash = {"_id": Int32(2), "name": "Bob", "addr": {"zip": "1", "code": "taken"}}
    rs.commit([Write("insert", NS, document=first), Write("insert", NS, document=clash)])
    raw = config(peer, **{"field.renames": [f"{DB}.{COLL}.addr.zip:code", "*.*.items.sku:id"],
                          "capture.mode": "change_streams_with_pre_image"})  # fmt: skip
    lake = tmp_path / "lake"
    land(raw, lake)
    rs.commit([Write("update", NS, Int32(1), ops=(("$set", "addr.zip", "0151"),
                                                   ("$set", "items.1.sku", "c")))])  # fmt: skip
    rs.commit([Write("update", NS, Int32(1), ops=(("$unset", "addr.zip", None),))])
    land(raw, lake)
    got = records(lake)
    (_, snap), (_, update), (_, unset) = [(k, v) for k, v in got if k == "data"]
    assert snap is not None and update is not None and unset is not None
    # Debezium's order: the renamed field moves to the end of its document.
    assert snap["after"] == (
        '{"_id":{"$numberInt":"1"},"name":"Anne","addr":{"city":"Oslo","code":"0150"},'
        '"items":[{"id":"a"},{"id":"b"}]}'
    )
    assert '"zip"' not in update["before"] and '"sku"' not in update["before"]
    fields = orjson.loads(update["updateDescription"]["updatedFields"])
    # The peer writes a change as paths or as whole values at random (both are MongoDB's).
    assert fields.get("addr.code", fields.get("addr", {}).get("code")) == "0151"
    assert "addr.zip" not in fields and "items.1.sku" not in fields
    assert fields.get("items.1.id", (fields.get("items") or [{}, {}])[1].get("id")) == "c"
    removed = unset["updateDescription"]["removedFields"]
    unset_fields = orjson.loads(unset["updateDescription"]["updatedFields"] or "{}")
    assert removed == ["addr.code"] or (
        removed is None and unset_fields == {"addr": {"city": "Oslo"}}
    )
    # The document whose new name is taken: quarantined with the reason, the rest landed.
    (bad,) = quarantined(lake)
    assert "already has a field 'code'" in bad[S.REASON], bad


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 (and its key), as PEM files."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "medallion test peer")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "peer.pem", directory / "peer.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


def test_through_tls_with_a_self_signed_certificate(peer: MongoPeer, tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    peer.tls = context
    peer.replset.commit([Write("insert", NS, document={"_id": Int32(1)})])
    secure = f"{peer.uri}&tls=true&tlsCAFile={cert}"
    lake = tmp_path / "lake"
    land(config(peer, **{"mongodb.connection.string": secure}), lake)
    peer.replset.commit([Write("insert", NS, document={"_id": Int32(2)})])
    land(config(peer, **{"mongodb.connection.string": secure}), lake)
    assert [v["op"] for k, v in records(lake) if k == "data" and v] == ["r", "c"]
    # The reconciler's reader connects the same way.
    read = read_collections(secure, ["shop.orders"], tmp_path, fetch=10)
    assert read.collections["shop.orders"].documents == 2
    # TLS is really on: a client that does not trust the certificate, or speaks plain TCP,
    # cannot connect.
    for uri in (f"{peer.uri}&tls=true", peer.uri):
        with pytest.raises(SourceUnavailable):
            read_collections(uri, ["shop.orders"], tmp_path, fetch=10, timeout_ms=300)


def test_scram_credentials_from_a_secret_file_and_the_environment(
    peer: MongoPeer, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "p@ss:/word s3cret"
    peer.users.passwords["cdc"] = secret
    peer.replset.commit([Write("insert", NS, document={"_id": Int32(1)})])
    (tmp_path / "mongo.secret").write_text(secret + "\n")
    text = (
        "lake: {root: lake}\n"
        "sources:\n"
        "  - name: mongo\n"
        "    connector: mongodb\n"
        f"    mongodb.hosts: {peer.replset.name}/127.0.0.1:{peer.port}\n"
        "    mongodb.user: cdc\n"
        "    mongodb.password.file: mongo.secret\n"
        f"    database.include.list: {DB}\n"
        "  - name: by_env\n"
        "    connector: mongodb\n"
        "    mongodb.connection.string: ${MONGO_URI}\n"
        f"    database.include.list: {DB}\n"
    )
    (tmp_path / "pipeline.yaml").write_text(text)
    uri = f"mongodb://cdc:{quote(secret, safe='')}@127.0.0.1:{peer.port}/?replicaSet=rs0"
    loaded = load_config(tmp_path / "pipeline.yaml", env={"MONGO_URI": uri})
    caplog.set_level(logging.DEBUG)

    def landing(name: str, lake: Path) -> LandingAgent:
        return LandingAgent(
            create_source(loaded.source(name)), BronzeWriter(BronzeTables.under(lake))
        )

    assert landing("mongo", tmp_path / "a").run().landed == 1  # SCRAM-SHA-256 with the file's
    settings = MongoSettings.from_config(loaded.source("by_env"))
    assert read_collections(settings.connection_string(), [f"{DB}.{COLL}"], tmp_path, fetch=10)
    assert secret not in repr(loaded) and quote(secret, safe="") not in repr(loaded)
    assert {"saslStart", "saslContinue"} <= set(peer.commands)

    peer.users.passwords["cdc"] = "another"  # the server's password changed: refused
    peer.users._keys.clear()
    with pytest.raises(PipelineError) as failed:
        landing("mongo", tmp_path / "a").run()
    shown = f"{failed.value!r} {failed.value.__cause__!r} {caplog.text}"
    assert "Authentication failed" in shown
    assert secret not in shown and quote(secret, safe="") not in shown
