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
  recorded workload replayed on the private PostgreSQL and read with psycopg (three tables and
  the transaction topic, to keep the silver run cheap);
* Avro in the Confluent wire format, decoded through an in-process registry stand-in;
* records deleted before bronze read them fail loudly, naming the partition and the gap (on
  the recording made with JsonConverter without schemas, which lands whole first).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from decimal import Decimal
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


def _run_child(
    broker: KafkaBroker, tag: str, lake: Path, faults: str | None, logs: list[str]
) -> int:
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
    logs.append(proc.stderr.decode(errors="replace")[-4000:])
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

    logs: list[str] = []
    _run_child(kafka_broker, tag, lake, "after_quarantine@*", logs)
    writer = BronzeWriter(BronzeTables.under(lake))
    half = writer.last_committed(agent_app_id("kafka"))  # None: the poison was in batch 0
    half_seq = -1 if half is None else half.batch_seq
    assert quarantine(lake), "the killed batch's quarantine is committed"
    assert writer.pending_batch_end(agent_app_id("kafka")) is not None, "half landed"
    # The consumer group says everything was read: bronze, not the group, decides where to go on.
    _commit_group(kafka_broker, tag, end_offsets(kafka_broker, tag))
    _run_child(kafka_broker, tag, lake, "after_commit@*", logs)
    again = writer.last_committed(agent_app_id("kafka"))
    # It died after committing the batch that finished the half-landed one.
    assert again is not None and again.batch_seq == half_seq + 1
    behind = {t: dict.fromkeys(parts, 0) for t, parts in end_offsets(kafka_broker, tag).items()}
    _commit_group(kafka_broker, tag, behind)  # and now it says nothing was read
    _run_child(kafka_broker, tag, lake, None, logs)

    landed = events(lake)
    origins = Counter(r[S.ORIGIN] for r in landed)
    quarantined = [r[S.ORIGIN] for r in quarantine(lake)]
    every = {f"{t}:{p}:{o}" for t, p, o in produced}
    assert max(origins.values()) == 1, [o for o, n in origins.items() if n > 1]
    assert Counter(quarantined) == Counter(f"{t}:{p}:{o}" for t, p, o in produced[40:41])
    lost = sorted(every - set(origins) - set(quarantined))
    invented = sorted((set(origins) | set(quarantined)) - every)
    assert not lost and not invented, (
        f"lost {lost}, invented {invented}; bronze's offset {committed_offset(lake)}; "
        f"children: {logs}"
    )
    assert committed_offset(lake)["partitions"] == end_offsets(kafka_broker, tag)
    # The group follows bronze, for monitoring (it was set behind before the last run).
    assert _group_offsets(kafka_broker, tag) == end_offsets(kafka_broker, tag)
    raw = orjson.loads(quarantine(lake)[0][S.RAW])
    assert (raw["value"], raw["key"]) == (POISON.decode(), '{"id":7}')
    # Tables come from the envelopes' source blocks, not from the renamed topics.
    assert {r[S.COLLECTION] for r in landed if r[S.KIND] == "data"} == {f"shop.{t}" for t in TABLES}
    assert {r[S.TOPIC] for r in landed} == {t for t, _p, _o in produced}


def _group(broker: KafkaBroker, tag: str) -> Any:
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"medallion-{tag}"})


def _commit_group(broker: KafkaBroker, tag: str, offsets: dict[str, dict[str, int]]) -> None:
    from confluent_kafka import TopicPartition

    consumer = _group(broker, tag)
    try:
        consumer.commit(
            offsets=[
                TopicPartition(t, int(p), n)
                for t, parts in offsets.items()
                for p, n in parts.items()
            ],
            asynchronous=False,
        )
    finally:
        consumer.close()


def _group_offsets(broker: KafkaBroker, tag: str) -> dict[str, dict[str, int]]:
    from confluent_kafka import TopicPartition

    ends = end_offsets(broker, tag)
    consumer = _group(broker, tag)
    try:
        wanted = [TopicPartition(t, int(p)) for t, parts in ends.items() for p in parts]
        out: dict[str, dict[str, int]] = {}
        for tp in consumer.committed(wanted, timeout=30):
            out.setdefault(tp.topic, {})[str(tp.partition)] = tp.offset
        return out
    finally:
        consumer.close()


def test_records_deleted_before_bronze_read_them_fail_loudly(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    from confluent_kafka import TopicPartition

    tag = f"g{uuid.uuid4().hex[:8]}"
    create_topics(kafka_broker, tag, partitions=1)
    # JsonConverter without schemas this time (the same workload, recorded that way).
    records = recorded("pg_shop.noschema", tag)
    kafka_broker.produce(records[:20])
    lake = tmp_path / "lake"
    writer = BronzeWriter(BronzeTables.under(lake))
    LandingAgent(source(kafka_broker.bootstrap, tag), writer, max_events=50).run()
    first = events(lake)
    assert len(first) == 20 and not quarantine(lake)
    assert all(r[S.VALUE_SCHEMA_ID] is None for r in first)
    assert any(r[S.KIND] == "data" and r[S.COLLECTION] for r in first)
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
    import logging

    logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")
    _writer = BronzeWriter(BronzeTables.under(Path(sys.argv[3])))
    LandingAgent(source(sys.argv[1], sys.argv[2]), _writer, max_events=7).run()


# --- silver equals the source ---------------------------------------------------------------------
COMPACTED = {
    # The log cleaner may compact every closed segment at once: what a topic looks like when
    # bronze starts reading it long after Debezium wrote it.
    "cleanup.policy": "compact",
    "segment.ms": "1",
    "min.cleanable.dirty.ratio": "0.001",
    "min.compaction.lag.ms": "0",
    "delete.retention.ms": "86400000",
}


SHOP = (
    ("customers", ("id",), ("name", "email", "created_at")),
    ("products", ("id",), ("name", "price", "weight_kg", "tags")),
    ("orders", ("id",), ("customer_id", "status", "ordered_at", "note", "channel")),
    ("order_lines", ("order_id", "line_no"), ("product_id", "qty", "unit_price")),
)
"""Compared tables: key columns, other columns."""
SILVER = ("customers", "orders", "order_lines", "transaction")
"""The topics (last name part) the silver test lands."""
SOURCE_SQL = {
    # Read independently of silver: PostgreSQL's own text of the instants, in UTC.
    "created_at": "to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')",
    "ordered_at": "to_char(ordered_at, 'YYYY-MM-DD HH24:MI:SS.US')",
}
SILVER_SQL = {
    "created_at": "date_format(created_at, 'yyyy-MM-dd HH:mm:ss.SSSSSS')",
    "ordered_at": "date_format(ordered_at, 'yyyy-MM-dd HH:mm:ss.SSSSSS')",
}


def _nan(value: Any) -> Any:
    return "NaN" if isinstance(value, float) and value != value else value


def source_rows(
    pg_dsn: str, schema: str, table: str, key: tuple[str, ...], columns: tuple[str, ...]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    import psycopg

    exprs = ", ".join(SOURCE_SQL.get(c, c) for c in (*key, *columns))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        rows = conn.execute(f"SELECT {exprs} FROM {schema}.{table}".encode()).fetchall()
    return {
        tuple(r[: len(key)]): {c: _nan(v) for c, v in zip(columns, r[len(key) :], strict=True)}
        for r in rows
    }


def silver_rows(
    frame: Any, key: tuple[str, ...], columns: tuple[str, ...]
) -> dict[tuple[Any, ...], dict[str, Any]]:
    from pyspark.sql import functions as F

    exprs = [F.expr(SILVER_SQL.get(c, f"`{c}`")).alias(c) for c in (*key, *columns)]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in frame.select(*exprs).collect():
        out[tuple(r[c] for c in key)] = {c: _nan(r[c]) for c in columns}
    return out


def replay_source(pg_dsn: str) -> str:
    """The recorded workload replayed on the private PostgreSQL: the source state the recording
    ends in, in a schema of its own (returned)."""
    import psycopg

    from tests.fix_debezium import split_script

    schema = f"kshop_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}".encode())
        conn.execute(f"SET search_path TO {schema}".encode())
        for part in ("setup", "stream"):
            for statement in split_script((REAL / f"pg_shop.{part}.sql").read_text()):
                conn.execute(statement.encode())
    return schema


def test_silver_equals_the_source_with_partitions_added_mid_stream_and_a_compacted_topic(
    kafka_broker: KafkaBroker, tmp_path: Path, spark: Any, pg_dsn: str
) -> None:
    from silver.job import SilverJob, silver_table_name
    from silver.merge import DELETED

    tag = f"s{uuid.uuid4().hex[:8]}"
    create_topics(kafka_broker, tag, partitions=2, configs={"customers": COMPACTED})
    # Three tables are enough for what this test is about (a compacted topic, partitions added
    # to two others, the transaction topic); products (and Debezium's sync marker) are left out
    # to keep the silver run cheap: their BEGIN/END stay in bronze without data, as they would
    # for tables a source does not read.
    records = [r for r in recorded("pg_shop", tag) if r["topic"].rsplit(".", 1)[-1] in SILVER]
    customers = f"{tag}.shop.customers"
    compacted = [r for r in records if r["topic"] == customers]
    others = [r for r in records if r["topic"] != customers]
    # customers is compacted before bronze reads it: the snapshot row of 2 (updated later) and
    # everything of 3 but its tombstone are gone. Debezium redelivering its last record (at
    # least once) closes the segment that holds them.
    kafka_broker.produce(compacted)
    kafka_broker.produce(compacted[-1:])
    held = kafka_broker.wait_compacted(customers, len(compacted) + 1)

    lake = tmp_path / "lake"
    kafka = source(kafka_broker.bootstrap, tag)
    agent = LandingAgent(kafka, BronzeWriter(BronzeTables.under(lake)), max_events=9)
    stop = threading.Event()
    failure: list[BaseException] = []

    def follow() -> None:
        try:
            agent.run(follow=True, stop=stop, poll_interval_s=0.05)
        except BaseException as exc:  # noqa: BLE001 - reported by the test's thread
            failure.append(exc)

    def landed_at_least(count: int) -> None:
        deadline = time.monotonic() + 120
        while len(events(lake)) < count:
            assert not failure, failure
            assert time.monotonic() < deadline, (
                f"bronze has {len(events(lake))} of {count}; quarantined: "
                f"{[(q[S.ORIGIN], q[S.REASON]) for q in quarantine(lake)]}"
            )
            time.sleep(0.1)

    runner = threading.Thread(target=follow, name="kafka-follow")
    runner.start()
    try:
        half = len(others) // 2
        kafka_broker.produce(others[:half])
        landed_at_least(len(held) + half)
        # Mid-stream: more partitions, so keys move (murmur2 over 4, not 2), then the rest.
        for table in ("orders", "order_lines"):
            kafka_broker.add_partitions(f"{tag}.shop.{table}", 4)
        produced = kafka_broker.produce(others[half:])
        landed_at_least(len(held) + len(others))
    finally:
        stop.set()
        runner.join(timeout=120)
    assert not failure, failure
    moved = {(t, p) for t, p, _o in produced if p >= 2}
    assert moved, "some records of the second half went to the added partitions"
    rows = events(lake)
    assert len(rows) == len(held) + len(others) and not quarantine(lake)
    assert Counter(r[S.ORIGIN] for r in rows).most_common(1)[0][1] == 1

    result = SilverJob(spark, lake).run_once()
    assert result.quarantined == 0, result
    schema = replay_source(pg_dsn)
    problems: list[str] = []
    for table, key, columns in (t for t in SHOP if t[0] in SILVER):
        path = lake / "silver" / silver_table_name("kafka", f"shop.{table}")
        frame = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
        have = silver_rows(frame, key, columns)
        want = source_rows(pg_dsn, schema, table, key, columns)
        if have != want:
            problems.append(f"{table}: silver {have} != source {want}")
    assert not problems, "\n".join(problems)


# --- Avro: the Confluent wire format and a registry stand-in ------------------------------------
DECIMAL: dict[str, Any] = {
    "type": "bytes",
    "scale": 2,
    "precision": 10,
    "connect.version": 1,
    "connect.parameters": {"scale": "2", "connect.decimal.precision": "10"},
    "connect.name": "org.apache.kafka.connect.data.Decimal",
    "logicalType": "decimal",
}
AVRO_KEY: dict[str, Any] = {
    "type": "record",
    "name": "Key",
    "namespace": "avro.inventory.items",
    "fields": [{"name": "id", "type": "int"}],
    "connect.name": "avro.inventory.items.Key",
}
AVRO_VALUE: dict[str, Any] = {
    # What Confluent's AvroConverter registers for a Debezium PostgreSQL table (AvroData's
    # connect.* attributes; the second use of Value is a named reference).
    "type": "record",
    "name": "Envelope",
    "namespace": "avro.inventory.items",
    "fields": [
        {
            "name": "before",
            "type": [
                "null",
                {
                    "type": "record",
                    "name": "Value",
                    "fields": [
                        {"name": "id", "type": "int"},
                        {"name": "name", "type": ["null", "string"], "default": None},
                        {"name": "price", "type": DECIMAL},
                    ],
                    "connect.name": "avro.inventory.items.Value",
                },
            ],
            "default": None,
        },
        {"name": "after", "type": ["null", "Value"], "default": None},
        {
            "name": "source",
            "type": {
                "type": "record",
                "name": "Source",
                "namespace": "io.debezium.connector.postgresql",
                "fields": [
                    {"name": "version", "type": "string"},
                    {"name": "connector", "type": "string"},
                    {"name": "name", "type": "string"},
                    {"name": "ts_ms", "type": "long"},
                    {
                        "name": "snapshot",
                        "type": [
                            {
                                "type": "string",
                                "connect.version": 1,
                                "connect.parameters": {"allowed": "true,last,false,incremental"},
                                "connect.default": "false",
                                "connect.name": "io.debezium.data.Enum",
                            },
                            "null",
                        ],
                        "default": "false",
                    },
                    {"name": "db", "type": "string"},
                    {"name": "sequence", "type": ["null", "string"], "default": None},
                    {"name": "schema", "type": "string"},
                    {"name": "table", "type": "string"},
                    {"name": "txId", "type": ["null", "long"], "default": None},
                    {"name": "lsn", "type": ["null", "long"], "default": None},
                    {"name": "xmin", "type": ["null", "long"], "default": None},
                ],
                "connect.name": "io.debezium.connector.postgresql.Source",
            },
        },
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": ["null", "long"], "default": None},
    ],
    "connect.version": 2,
    "connect.name": "avro.inventory.items.Envelope",
}
SCHEMA_IDS: dict[int, dict[str, Any]] = {1: AVRO_KEY, 2: AVRO_VALUE}
UNKNOWN_ID = 99


class _Registry:
    """Serves ``GET /schemas/ids/<id>`` as Confluent's registry documents it, on loopback."""

    def __init__(self) -> None:
        import http.server

        registry = self
        self.requests: list[str] = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                registry.requests.append(self.path)
                parts = self.path.rstrip("/").split("/")
                sid = (
                    int(parts[-1])
                    if parts[-1].isdigit() and parts[-3:-1] == ["schemas", "ids"]
                    else -1
                )
                body: dict[str, Any]
                if sid in SCHEMA_IDS:
                    status, body = 200, {"schema": orjson.dumps(SCHEMA_IDS[sid]).decode()}
                else:
                    status, body = 404, {"error_code": 40403, "message": "Schema not found"}
                payload = orjson.dumps(body)
                self.send_response(status)
                self.send_header("Content-Type", "application/vnd.schemaregistry.v1+json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                return None

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def wire(schema_id: int, datum: Any) -> bytes:
    """Confluent's wire format: magic byte 0, the schema id (4 bytes, big-endian), Avro."""
    import io

    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(SCHEMA_IDS[schema_id]), datum)
    return b"\x00" + schema_id.to_bytes(4, "big") + buf.getvalue()


def avro_records(tag: str) -> list[dict[str, Any]]:
    """c, u, c, d + tombstone of ``inventory.items``, and one value under an unknown id."""

    def source(tx: int, lsn: int) -> dict[str, Any]:
        return {
            "version": "3.6.1.Final",
            "connector": "postgresql",
            "name": "avro",
            "ts_ms": 1_700_000_000_000 + lsn,
            "snapshot": "false",
            "db": "inv",
            "sequence": f'["{lsn - 50}","{lsn}"]',
            "schema": "inventory",
            "table": "items",
            "txId": tx,
            "lsn": lsn,
            "xmin": None,
        }

    kettle = {"id": 1, "name": "kettle", "price": Decimal("24.99")}
    dearer = {**kettle, "price": Decimal("27.49")}
    mug = {"id": 2, "name": None, "price": Decimal("4.50")}
    changes = [
        (1, None, kettle, "c", 500, 1000),
        (1, kettle, dearer, "u", 501, 1100),
        (2, None, mug, "c", 502, 1200),
        (1, dearer, None, "d", 503, 1300),
    ]
    topic = f"{tag}.inventory.items"
    out: list[dict[str, Any]] = [
        {
            "topic": topic,
            "key": wire(1, {"id": key}),
            "value": wire(
                2,
                {
                    "before": before,
                    "after": after,
                    "source": source(tx, lsn),
                    "op": op,
                    "ts_ms": 1_700_000_000_500 + lsn,
                },
            ),
        }
        for key, before, after, op, tx, lsn in changes
    ]
    out.append({"topic": topic, "key": wire(1, {"id": 1}), "value": None})  # the tombstone
    out.append({"topic": topic, "key": wire(1, {"id": 3}), "value": b"\x00\x00\x00\x00c" + b"x"})
    return out


def test_avro_in_the_confluent_wire_format_lands_as_jsonconverter_would_have_written_it(
    kafka_broker: KafkaBroker, tmp_path: Path
) -> None:
    from capture.kafka.avro import SchemaRegistry

    tag = f"a{uuid.uuid4().hex[:8]}"
    kafka_broker.create_topic(f"{tag}.inventory.items", 1)
    produced = kafka_broker.produce(avro_records(tag))
    lake = tmp_path / "lake"
    writer = BronzeWriter(BronzeTables.under(lake))
    # No registry there: the batch fails retryably and consumes nothing.
    down = SchemaRegistry(f"http://127.0.0.1:{_closed_port()}", timeout_s=2)
    with pytest.raises(StageFailed) as failed:
        LandingAgent(source(kafka_broker.bootstrap, tag, registry=down), writer).run()
    assert "SourceUnavailable" in repr(failed.value.__cause__), failed.value
    assert not events(lake)

    registry = _Registry()
    try:
        up = SchemaRegistry(registry.url)
        LandingAgent(source(kafka_broker.bootstrap, tag, registry=up), writer).run()
    finally:
        registry.close()
    assert sorted(registry.requests) == ["/schemas/ids/1", "/schemas/ids/2", "/schemas/ids/99"]
    rows = sorted(events(lake), key=lambda r: r[S.POSITION])
    assert [(r[S.OP], r[S.KIND], r[S.COLLECTION]) for r in rows] == [
        ("c", "data", "inventory.items"),
        ("u", "data", "inventory.items"),
        ("c", "data", "inventory.items"),
        ("d", "data", "inventory.items"),
        (None, "tombstone", None),  # no source block: silver ignores it
    ]
    assert [r[S.ORIGIN] for r in rows] == [f"{t}:{p}:{o}" for t, p, o in produced[:5]]
    # JsonConverter's encodings: a Decimal is the base64 of its unscaled two's complement bytes.
    first = orjson.loads(rows[0][S.VALUE_JSON])
    assert first["after"] == {"id": 1, "name": "kettle", "price": "CcM="}  # 2499
    assert orjson.loads(rows[2][S.VALUE_JSON])["after"] == {"id": 2, "name": None, "price": "AcI="}
    assert orjson.loads(rows[0][S.KEY_JSON]) == {"id": 1}
    schemas = {
        r[S.SCHEMA_ID]: orjson.loads(r[S.SCHEMA_JSON])
        for r in DeltaTable(str(lake / "bronze" / "schemas")).to_pyarrow_table().to_pylist()
    }
    value_schema = schemas[rows[0][S.VALUE_SCHEMA_ID]]
    after = next(f for f in value_schema["fields"] if f["field"] == "after")
    price = next(f for f in after["fields"] if f["field"] == "price")
    assert (after["name"], after["optional"]) == ("avro.inventory.items.Value", True)
    assert price == {
        "type": "bytes",
        "name": "org.apache.kafka.connect.data.Decimal",
        "version": 1,
        "parameters": {"scale": "2", "connect.decimal.precision": "10"},
        "optional": False,
        "field": "price",
    }
    (bad,) = quarantine(lake)
    assert bad[S.ORIGIN] == "{}:{}:{}".format(*produced[5])
    assert "schema id 99" in bad[S.REASON] and "404" in bad[S.REASON]


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port
