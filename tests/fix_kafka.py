"""A real Apache Kafka broker in the tests (pytest plugin, listed in ``tests/conftest.py``).

``kafka_broker`` (session-scoped) starts one Kafka 4.x broker in KRaft mode (one process that
is broker and controller) from the jars ``make bootstrap`` fetched into ``.cache/kafka``
(``scripts/fetch_kafka.sh``): ``kafka.tools.StorageTool format`` on a fresh log directory, then
``kafka.Kafka server.properties`` on free loopback ports. It is killed at the end of the
session. A missing jar directory or JVM fails the test naming ``make bootstrap``; nothing here
skips.

:class:`KafkaBroker` has what the tests need: create topics (partitions, configs), add
partitions, produce records, read end offsets. The broker's log (WARN and above) is in its
directory and its tail is shown when it does not come up.
"""

from __future__ import annotations

import base64
import logging
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

logger = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[1]
KAFKA_DIR = Path(os.environ.get("MEDALLION_KAFKA_DIR") or REPO_ROOT / ".cache" / "kafka")
START_TIMEOUT_S = 120.0
"""A loaded 2-core machine: the JVM and the KRaft controller take 5-20 s there."""
JVM_OPTIONS = (
    # One small broker for a few hundred records: C1 only, serial GC, small heap.
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xmx384m",
    "-Xss512k",
    "-Djava.awt.headless=true",
)
LOG4J2 = """\
status = warn
appender.file.type = File
appender.file.name = FILE
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.file.ref = FILE
"""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class KafkaBroker:
    """One running broker.

    Attributes:
        bootstrap: ``127.0.0.1:<port>``.
        directory: Its configuration, data and log.
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.port = _free_port()
        self.controller_port = _free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.log = directory / "server.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._admin: Any = None

    # --- lifecycle -----------------------------------------------------------------------------
    def _java(self, main: str, *args: str) -> list[str]:
        java = shutil.which("java")
        if java is None:
            pytest.fail(
                "java not found: run `make bootstrap` (it installs a JDK 17)", pytrace=False
            )
        return [
            java,
            *JVM_OPTIONS,
            f"-Dlog4j2.configurationFile={self.directory / 'log4j2.properties'}",
            "-cp",
            f"{KAFKA_DIR}/*",
            main,
            *args,
        ]

    def start(self) -> None:
        """Format the storage and start the broker; wait until it answers metadata requests."""
        if not (KAFKA_DIR / "MANIFEST.sha256").is_file():
            pytest.fail(
                f"no Kafka broker jars in {KAFKA_DIR}: run `make bootstrap` "
                "(scripts/fetch_kafka.sh fetches them once); these tests never skip",
                pytrace=False,
            )
        data = self.directory / "data"
        properties = self.directory / "server.properties"
        properties.write_text(
            "\n".join(
                (
                    "process.roles=broker,controller",
                    "node.id=1",
                    f"controller.quorum.voters=1@127.0.0.1:{self.controller_port}",
                    f"listeners=PLAINTEXT://127.0.0.1:{self.port},"
                    f"CONTROLLER://127.0.0.1:{self.controller_port}",
                    f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
                    "controller.listener.names=CONTROLLER",
                    "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
                    "inter.broker.listener.name=PLAINTEXT",
                    f"log.dirs={data}",
                    "num.partitions=1",
                    "auto.create.topics.enable=false",
                    "offsets.topic.replication.factor=1",
                    "offsets.topic.num.partitions=1",
                    "transaction.state.log.replication.factor=1",
                    "transaction.state.log.min.isr=1",
                    "group.initial.rebalance.delay.ms=0",
                    "num.network.threads=2",
                    "num.io.threads=2",
                    "background.threads=2",
                    "log.cleaner.threads=1",
                    # The compaction test waits for the cleaner: look for dirty logs often.
                    "log.cleaner.backoff.ms=200",
                    "log.cleaner.dedupe.buffer.size=2097152",
                    "",
                )
            )
        )
        (self.directory / "log4j2.properties").write_text(LOG4J2.format(log=self.log))
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        formatted = subprocess.run(
            self._java(
                "kafka.tools.StorageTool",
                "format",
                f"--cluster-id={cluster_id}",  # an id may start with '-'
                "-c",
                str(properties),
                "--ignore-formatted",
            ),
            capture_output=True,
            text=True,
            timeout=START_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if formatted.returncode != 0:
            pytest.fail(
                f"kafka.tools.StorageTool format failed ({formatted.returncode}): "
                f"{formatted.stdout[-2000:]}{formatted.stderr[-2000:]}",
                pytrace=False,
            )
        out = (self.directory / "stdout.log").open("wb")
        self._process = subprocess.Popen(
            self._java("kafka.Kafka", str(properties)),
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        out.close()
        self._wait_ready()

    def _wait_ready(self) -> None:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient({"bootstrap.servers": self.bootstrap}, logger=logger)
        deadline = time.monotonic() + START_TIMEOUT_S
        last: Exception | None = None
        while time.monotonic() < deadline:
            process = self._process
            if process is not None and process.poll() is not None:
                pytest.fail(
                    f"the Kafka broker exited with {process.returncode}: {self._tail()}",
                    pytrace=False,
                )
            try:
                metadata = admin.list_topics(timeout=2)
                if metadata.brokers:
                    return
            except KafkaException as exc:
                last = exc
            time.sleep(0.2)
        self.stop()
        pytest.fail(
            f"the Kafka broker did not answer within {START_TIMEOUT_S:.0f} s ({last}): "
            f"{self._tail()}",
            pytrace=False,
        )

    def _tail(self) -> str:
        parts = []
        for path in (self.directory / "stdout.log", self.log):
            if path.exists():
                parts.append(f"{path.name}: {path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts) or "(no log)"

    def stop(self) -> None:
        """Kill the broker (its data is thrown away with the directory)."""
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)

    # --- topics and records --------------------------------------------------------------------
    def admin(self) -> Any:
        """The confluent-kafka AdminClient of this broker (kept: a client that is collected
        cancels its pending requests)."""
        from confluent_kafka.admin import AdminClient

        if self._admin is None:
            self._admin = AdminClient({"bootstrap.servers": self.bootstrap}, logger=logger)
        return self._admin

    def create_topic(
        self, name: str, partitions: int = 1, config: Mapping[str, str] | None = None
    ) -> None:
        """Create ``name`` and wait until it exists."""
        from confluent_kafka.cimpl import NewTopic

        futures = self.admin().create_topics(
            [NewTopic(name, partitions, 1, config=dict(config or {}))], operation_timeout=30
        )
        futures[name].result(timeout=60)

    def add_partitions(self, name: str, total: int) -> None:
        """Grow ``name`` to ``total`` partitions."""
        from confluent_kafka.cimpl import NewPartitions

        futures = self.admin().create_partitions([NewPartitions(name, total)])
        futures[name].result(timeout=60)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            topic = self.admin().list_topics(name, timeout=10).topics[name]
            if len(topic.partitions) >= total:
                return
            time.sleep(0.1)
        raise AssertionError(f"{name} did not reach {total} partitions")

    def produce(self, records: Iterable[Mapping[str, Any]]) -> list[tuple[str, int, int]]:
        """Produce ``records`` (``topic``, ``key``, ``value``, optional ``headers`` and
        ``partition``; key and value as bytes or None), in order, idempotently, and wait for
        every acknowledgement.

        Returns:
            ``(topic, partition, offset)`` of each record, in order.
        """
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self.bootstrap,
                "enable.idempotence": True,
                "linger.ms": 5,
                # Debezium (Kafka Connect) partitions by the key's murmur2 hash, as Java does.
                "partitioner": "murmur2_random",
            },
            logger=logger,
        )
        delivered: list[tuple[str, int, int] | None] = []
        errors: list[str] = []

        def report(index: int) -> Any:
            def on_delivery(err: Any, msg: Any) -> None:
                if err is not None:
                    errors.append(f"record {index}: {err}")
                else:
                    delivered[index] = (msg.topic(), msg.partition(), msg.offset())

            return on_delivery

        for index, record in enumerate(records):
            delivered.append(None)
            kwargs: dict[str, Any] = {}
            if record.get("partition") is not None:
                kwargs["partition"] = record["partition"]
            producer.produce(
                record["topic"],
                value=record.get("value"),
                key=record.get("key"),
                headers=list(record.get("headers") or []),
                on_delivery=report(index),
                **kwargs,
            )
            producer.poll(0)
        remaining = producer.flush(60)
        assert remaining == 0 and not errors, f"produce failed: {errors or remaining}"
        assert all(d is not None for d in delivered)
        return [d for d in delivered if d is not None]

    def offsets_held(self, topic: str) -> list[tuple[int, int]]:
        """``(partition, offset)`` of every record ``topic`` holds now (compaction leaves
        gaps)."""
        from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

        ends = self.end_offsets(topic)
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "medallion-probe",
                "enable.partition.eof": True,
                "enable.auto.commit": False,
            },
            logger=logger,
        )
        try:
            open_parts = {p for p, (low, high) in ends.items() if high > low}
            consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in open_parts])
            held: list[tuple[int, int]] = []
            deadline = time.monotonic() + 60
            while open_parts and time.monotonic() < deadline:
                message = consumer.poll(1.0)
                if message is None:
                    continue
                error = message.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    open_parts.discard(message.partition() or 0)
                elif error is None:
                    held.append((message.partition() or 0, message.offset() or 0))
            assert not open_parts, f"{topic}: partitions {open_parts} not read to their end"
            return held
        finally:
            consumer.close()

    def wait_compacted(self, topic: str, fewer_than: int) -> list[tuple[int, int]]:
        """Wait until the log cleaner has compacted ``topic`` below ``fewer_than`` records
        (bounded: fails after :data:`START_TIMEOUT_S`); returns what it holds then."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            held = self.offsets_held(topic)
            if len(held) < fewer_than:
                return held
            if time.monotonic() > deadline:
                raise AssertionError(
                    f"{topic} still holds {len(held)} records: the log cleaner never compacted "
                    f"it ({self._tail()})"
                )
            time.sleep(0.2)

    def end_offsets(self, topic: str) -> dict[int, tuple[int, int]]:
        """``partition -> (low, high)`` watermarks of ``topic``."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer(
            {"bootstrap.servers": self.bootstrap, "group.id": "medallion-probe"}, logger=logger
        )
        try:
            meta = consumer.list_topics(topic, timeout=10).topics[topic]
            return {
                p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
                for p in sorted(meta.partitions)
            }
        finally:
            consumer.close()


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[KafkaBroker]:
    """One Kafka broker (KRaft) for the session (module docstring)."""
    directory = Path(tempfile.mkdtemp(prefix="medallion-kafka-"))
    broker = KafkaBroker(directory)
    try:
        broker.start()
        yield broker
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)
