"""The ``kafka`` source against a real broker (``tests/fix_kafka.py``: Kafka 4.x, KRaft).

Real Debezium output (``tests/fixtures/debezium_real``: Debezium 3.6.1 on PostgreSQL 15,
JsonConverter with and without schemas) is produced into topics the way Kafka Connect writes it
(key JSON, value JSON, headers; keys partitioned by murmur2), under topic names that differ from
the ``source`` blocks' (``<tag>.shop.orders``: what a ``ByLogicalTableRouter`` rename does), so
the tables can only come from the envelope. Then:

* a child process lands the topics and is killed with SIGKILL mid-batch, twice (between the
  quarantine commit and the events commit of a batch; after a commit, with the next batch read
  ahead and the commit not acknowledged); after a restart every record is in bronze exactly
  once, and the offset committed in bronze is each partition's end;
* a following agent lands while partitions are added to two topics mid-stream and one topic is
  compacted before it is read; silver (the shared Spark session) then equals the source, the
  recorded workload replayed on the private PostgreSQL and read with psycopg;
* Avro in the Confluent wire format, decoded through an in-process registry stand-in;
* records deleted before bronze read them fail loudly, naming the partition and the gap.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.kafka.source import KafkaSource
from pipeline.errors import StageFailed
from pipeline.landing import LandingAgent
from tests.fix_kafka import KafkaBroker

pytestmark = pytest.mark.delta

ROOT = Path(__file__).resolve().parents[2]
REAL = ROOT / "tests" / "fixtures" / "debezium_real"
TABLES = ("customers", "products", "orders", "order_lines", "medallion_marker")
POISON = b"{not json"


# --- producing recorded Debezium output -----------------------------------------------------------
def recorded(name: str, tag: str) -> list[dict[str, Any]]:
    """The records of ``<name>.jsonl`` as Kafka Connect produced them, topics renamed to
    ``<tag>.*`` (the envelopes still name ``dbz``)."""
    out = []
    for line in (REAL / f"{name}.jsonl").read_bytes().splitlines():
        doc = orjson.loads(line)
        topic = tag + doc["topic"].removeprefix("dbz")
        key, value = doc.get("key"), doc.get("value")
        out.append(
            {
                "topic": topic,
                "key": None if key is None else orjson.dumps(key),
                "value": None if value is None else orjson.dumps(value),
                "headers": [(h["key"], h["value"].encode()) for h in doc.get("headers") or []],
            }
        )
    return out


def create_topics(
    broker: KafkaBroker,
    tag: str,
    partitions: int = 2,
    configs: dict[str, dict[str, str]] | None = None,
) -> None:
    for table in TABLES:
        config = (configs or {}).get(table)
        broker.create_topic(f"{tag}.shop.{table}", 1 if config else partitions, config)
    broker.create_topic(f"{tag}.transaction", 1)


def source(bootstrap: str, tag: str, **kw: Any) -> KafkaSource:
    """The source under test on the topics ``<tag>.*`` (a pattern: topics and partitions that
    appear later are picked up)."""
    return KafkaSource(
        "kafka",
        {"bootstrap.servers": bootstrap, "group.id": f"medallion-{tag}"},
        topic_pattern=rf"{tag}\..*",
        metadata_refresh_s=kw.pop("metadata_refresh_s", 0.2),
        poll_timeout_s=kw.pop("poll_timeout_s", 0.5),
        **kw,
    )


def events(lake: Path) -> list[dict[str, Any]]:
    path = lake / "bronze" / "events"
    if not (path / "_delta_log").exists():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def quarantine(lake: Path) -> list[dict[str, Any]]:
    path = lake / "bronze" / "quarantine"
    if not (path / "_delta_log").exists():
        return []
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist()


def committed_offset(lake: Path) -> dict[str, Any]:
    committed = BronzeWriter(BronzeTables.under(lake)).last_committed(agent_app_id("kafka"))
    assert committed is not None
    offset: dict[str, Any] = committed.offset
    return offset


def end_offsets(broker: KafkaBroker, tag: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for table in (*(f"shop.{t}" for t in TABLES), "transaction"):
        topic = f"{tag}.{table}"
        ends = {str(p): high for p, (_low, high) in broker.end_offsets(topic).items() if high}
        if ends:  # a partition that never held a record is not in bronze's offset
            out[topic] = ends
    return out


def _run_child(broker: KafkaBroker, tag: str, lake: Path, faults: str | None) -> int:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MEDALLION_FAULTS", None)
    if faults is not None:
        env["MEDALLION_FAULTS"] = faults
    child = [sys.executable, "-m", "tests.integration.test_kafka_source"]
    proc = subprocess.run(
        [*child, broker.bootstrap, tag, str(lake)],
        env=env,
        capture_output=True,
        timeout=240,
        check=False,
    )
    if faults is None:
        assert proc.returncode == 0, proc.stderr.decode()[-3000:]
    else:
        assert proc.returncode == -signal.SIGKILL, (
            f"the child was to die at {faults}: {proc.stderr.decode()[-3000:]}"
        )
    return proc.returncode


def test_kill_9_mid_batch_and_restart_lands_every_record_exactly_once(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    tag = f"x{uuid.uuid4().hex[:8]}"
    create_topics(kafka_broker, tag, partitions=3)
    records = recorded("pg_shop", tag)
    # A record that is not JSON, mid-stream: quarantined, and it makes its batch commit the
    # quarantine first, so a kill between the two commits leaves the batch half landed.
    records.insert(40, {"topic": f"{tag}.shop.orders", "key": b'{"id":7}', "value": POISON})
    produced = kafka_broker.produce(records)
    lake = tmp_path / "lake"

    _run_child(kafka_broker, tag, lake, "after_quarantine@*")
    writer = BronzeWriter(BronzeTables.under(lake))
    half = writer.last_committed(agent_app_id("kafka"))
    assert half is not None and quarantine(lake), "the killed batch's quarantine is committed"
    assert writer.pending_batch_end(agent_app_id("kafka")) is not None, "half landed"
    _run_child(kafka_broker, tag, lake, f"after_commit@{half.batch_seq + 3}")
    again = writer.last_committed(agent_app_id("kafka"))
    assert again is not None and again.batch_seq == half.batch_seq + 3
    _run_child(kafka_broker, tag, lake, None)

    landed = events(lake)
    origins = Counter(r[S.ORIGIN] for r in landed)
    quarantined = [r[S.ORIGIN] for r in quarantine(lake)]
    every = {f"{t}:{p}:{o}" for t, p, o in produced}
    assert max(origins.values()) == 1, [o for o, n in origins.items() if n > 1]
    assert Counter(quarantined) == Counter(f"{t}:{p}:{o}" for t, p, o in produced[40:41])
    assert set(origins) | set(quarantined) == every, "nothing lost, nothing invented"
    assert committed_offset(lake)["partitions"] == end_offsets(kafka_broker, tag)
    raw = orjson.loads(quarantine(lake)[0][S.RAW])
    assert (raw["value"], raw["key"]) == (POISON.decode(), '{"id":7}')
    # Tables come from the envelopes' source blocks, not from the renamed topics.
    assert {r[S.COLLECTION] for r in landed if r[S.KIND] == "data"} == {f"shop.{t}" for t in TABLES}
    assert {r[S.TOPIC] for r in landed} == {t for t, _p, _o in produced}


def test_records_deleted_before_bronze_read_them_fail_loudly(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    from confluent_kafka import TopicPartition

    tag = f"g{uuid.uuid4().hex[:8]}"
    create_topics(kafka_broker, tag, partitions=1)
    records = recorded("pg_shop", tag)
    kafka_broker.produce(records[:20])
    lake = tmp_path / "lake"
    writer = BronzeWriter(BronzeTables.under(lake))
    LandingAgent(source(kafka_broker.bootstrap, tag), writer, max_events=50).run()
    topic = f"{tag}.shop.orders"
    landed = int(committed_offset(lake)["partitions"][topic]["0"])
    kafka_broker.produce([r for r in records[20:] if r["topic"] == topic])
    futures = kafka_broker.admin().delete_records([TopicPartition(topic, 0, landed + 2)])
    for future in futures.values():
        future.result(timeout=60)
    with pytest.raises(StageFailed) as failed:
        LandingAgent(source(kafka_broker.bootstrap, tag), writer, max_events=50).run()
    message = str(failed.value)
    assert "PartitionOffsetError" in repr(failed.value.__cause__) or "retention" in message
    assert f"{topic} partition 0 now starts at offset {landed + 2}" in message
    assert f"records {landed}..{landed + 1} were deleted" in message


if __name__ == "__main__":  # the child of the kill -9 test: land everything there is
    _writer = BronzeWriter(BronzeTables.under(Path(sys.argv[3])))
    LandingAgent(source(sys.argv[1], sys.argv[2]), _writer, max_events=7).run()
