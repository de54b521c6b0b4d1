"""Land Debezium's Kafka topics in bronze, exactly once, with bronze as the only truth.

The records of the configured topics (a list, or a pattern read again every
``metadata.refresh.ms``) are read with confluent-kafka (librdkafka) under a *manual*
assignment: no consumer-group rebalancing decides what is read. Each partition starts at the
next offset recorded in bronze's last commit of this source, or at its first offset when bronze
never read it. The batch's offset, every partition's next offset, is committed inside the same
bronze Delta commit as the batch's records (the landing agent's exactly-once argument,
:mod:`pipeline.landing`), so a crash anywhere re-reads at most the uncommitted batch and never
skips a record. Consumer-group offsets are committed after each bronze commit for monitoring
tools only, and never read.

Records land exactly as ``debezium_json`` lands them (the same envelope handling, positions,
transactions and quarantine; this class is that source with records instead of lines), with
``topic`` set and ``origin`` = ``<topic>:<partition>:<offset>``; keys, values and headers are
kept as produced. Positions come from each record's ``source`` block, so records of different
partitions (and partitions added later, which move keys) are ordered by the source, never by
arrival; the transaction topic is one more partition whose BEGIN/END records silver matches by
transaction id.

Within one partition, offsets are consumed in order: a record that cannot land yet (a BEGIN
before any data record) holds back the rest of its partition until the next batch, so the
committed next offset never passes a record that is not in bronze.
"""

from __future__ import annotations

import base64
import collections
import logging
import re
import time
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, ClassVar, cast

import orjson

from capture.base import SourceBatch
from capture.debezium_json.formats import Parsed, loads, parse_record
from capture.debezium_json.source import DebeziumJsonSource, _Line
from capture.kafka.avro import AvroDecoder, SchemaRegistry, is_avro
from capture.kafka.offsets import PartitionOffsetError, PartitionOffsets, TopicPartitionKey
from capture.masking import ColumnMasker
from pipeline.config_model import reveal
from pipeline.errors import CaptureError, EnvelopeError, SourceUnavailable

if TYPE_CHECKING:
    from confluent_kafka import Consumer, Message

__all__ = ["KafkaSource", "OFFSET_FORMAT"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""

_FETCH_MAX = 2_000
"""Records taken from the client's buffer per call (it prefetches in the background)."""
_METADATA_TIMEOUT_S = 10.0
_CATCH_UP_WAIT_S = 60.0
"""How long a run that is not following waits, without a record, for partitions to report their
end before it stops anyway (a broker down); see :meth:`KafkaSource._stop_waiting`."""


class _KafkaRecord(_Line):
    """One consumed record, shaped as the line the landing loop expects.

    ``name`` is ``<topic>:<partition>`` and ``number`` the offset, so ``origin`` reads
    ``<topic>:<partition>:<offset>``. ``raw`` (what quarantine keeps) is the whole record as one
    JSON object in ``kcat -J``'s shape, which a ``debezium_json`` source with ``format:
    kafka_json`` can land again once fixed; binary keys or values are base64 there.
    """

    __slots__ = ("tp", "offset", "key", "value", "headers", "consumed")

    def __init__(self, message: Message) -> None:
        topic = cast(str, message.topic())
        partition = cast(int, message.partition())
        offset = cast(int, message.offset())
        self.tp: TopicPartitionKey = (topic, partition)
        self.offset = offset
        self.name = f"{topic}:{partition}"
        self.number = offset
        self.key: bytes | None = message.key() or None
        self.value: bytes | None = message.value()
        # The client returns headers as a list of (name, bytes) pairs when it reads them.
        raw_headers = cast("list[tuple[str, bytes | None]] | None", message.headers())
        self.headers: tuple[tuple[str, str | None], ...] = (
            tuple((k, _text(v)) for k, v in raw_headers) if raw_headers else ()
        )
        self.consumed = False
        self.raw = orjson.dumps(
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "key": _raw_field(self.key),
                "value": _raw_field(self.value),
                "headers": [[k, v] for k, v in self.headers],
            }
        )


def _text(data: bytes | str | None) -> str | None:
    if data is None or isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(data).decode("ascii")


def _raw_field(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


class KafkaSource(DebeziumJsonSource):
    """Reads Debezium records from Kafka topics and lands them in bronze.

    Args:
        name: The configured source name.
        consumer_config: librdkafka properties (``bootstrap.servers``, security, ``group.id``).
        topics: Topic names to read.
        topic_pattern: A regular expression over topic names (matched whole), or None.
        value_converter: ``json``, ``avro`` or ``auto`` (see the config model).
        registry: The schema registry for Avro records, or None.
        connector_hint: Connector for records whose ``source`` has no ``connector``.
        masker: Column masks applied before bronze.
        order_by: ``source`` or ``arrival``.
        metadata_refresh_s: How often topics and partition counts are read again.
        poll_timeout_s: How long a read waits for records before the topics count as caught up.
    """

    KIND: ClassVar[str] = "kafka"
    ACKNOWLEDGES: ClassVar[bool] = False
    REPLAYABLE: ClassVar[bool] = True

    def __init__(
        self,
        name: str,
        consumer_config: Mapping[str, Any],
        *,
        topics: tuple[str, ...] = (),
        topic_pattern: str | None = None,
        value_converter: str = "auto",
        registry: SchemaRegistry | None = None,
        connector_hint: str | None = None,
        masker: ColumnMasker | None = None,
        order_by: str = "source",
        metadata_refresh_s: float = 5.0,
        poll_timeout_s: float = 1.0,
    ) -> None:
        # The line reader's state (path, file tracker) does not apply: only the landing state.
        super(DebeziumJsonSource, self).__init__(name)
        self._init_landing(connector_hint, masker, order_by)
        if value_converter == "avro" and registry is None:
            raise CaptureError(f"source {name}: value.converter avro needs schema.registry.url")
        self._consumer_config = dict(consumer_config)
        self.topics = tuple(topics)
        self.topic_pattern = None if topic_pattern is None else re.compile(topic_pattern)
        self.value_converter = value_converter
        self._avro = None if registry is None else AvroDecoder(registry)
        self.metadata_refresh_s = metadata_refresh_s
        self.poll_timeout_s = poll_timeout_s
        self._offsets = PartitionOffsets(name)
        self._consumer: Consumer | None = None
        self._assigned: set[TopicPartitionKey] = set()
        self._fetched_next: dict[TopicPartitionKey, int] = {}
        self._eof: dict[TopicPartitionKey, int] = {}
        self._queue: collections.deque[_KafkaRecord] = collections.deque()
        self._refreshed_at: float | None = None
        self._until: Mapping[str, Mapping[str, Any]] | None = None
        self._missing_warned: set[str] = set()
        self._acknowledged: list[Any] = []
        self._stream_of: dict[TopicPartitionKey, str] = {}
        """The Debezium source partition of each Kafka partition's last data record."""

    def __repr__(self) -> str:
        servers = self._consumer_config.get("bootstrap.servers")
        return f"KafkaSource({self.name!r}, bootstrap.servers={servers!r})"

    @classmethod
    def from_config(cls, config: Any) -> KafkaSource:
        """Build from a validated ``kafka`` source config."""
        consumer: dict[str, Any] = {
            "bootstrap.servers": config.bootstrap_servers,
            "group.id": config.consumer_group,
            "security.protocol": config.security_protocol,
        }
        if config.sasl_mechanism is not None:
            consumer["sasl.mechanism"] = config.sasl_mechanism
        if config.sasl_username is not None:
            consumer["sasl.username"] = config.sasl_username
        password = reveal(config.sasl_password)
        if password is not None:
            consumer["sasl.password"] = password
        if config.ssl_ca_location is not None:
            consumer["ssl.ca.location"] = config.ssl_ca_location
        registry = (
            None
            if config.schema_registry_url is None
            else SchemaRegistry(
                config.schema_registry_url, reveal(config.schema_registry_user_info)
            )
        )
        return cls(
            config.name,
            consumer,
            topics=tuple(config.topics),
            topic_pattern=config.topic_pattern,
            value_converter=str(config.value_converter),
            registry=registry,
            connector_hint=config.connector_hint,
            masker=ColumnMasker.from_source(config),
            order_by=str(config.order_by),
            metadata_refresh_s=config.metadata_refresh_ms / 1000,
            poll_timeout_s=config.poll_timeout_ms / 1000,
        )

    # --- offsets -----------------------------------------------------------------------------
    def open(self, offset: Mapping[str, Any] | None) -> None:
        """Seek every partition to bronze's committed offset (never the consumer group's).

        Raises:
            SourceUnavailable: The brokers cannot be reached.
            PartitionOffsetError: A partition lost records bronze has not read.
            CaptureError: The offset has a format this version cannot read.
        """
        if offset is not None:
            fmt = offset.get("format")
            if fmt != OFFSET_FORMAT:
                raise CaptureError(
                    f"source {self.name}: committed offset has format {fmt!r}, this version "
                    f"reads format {OFFSET_FORMAT}"
                )
            self._offsets.load(offset.get("partitions", {}))
            self._last_partition = offset.get("last_partition")
            self._stream_of = {
                (topic, int(part)): stream
                for topic, parts in offset.get("streams", {}).items()
                for part, stream in parts.items()
            }
            self._arrival = int(offset.get("arrival", 0))
            from bronze.positions import PositionResolver

            self._resolvers = {
                part: PositionResolver(state["connector"], state["state"])
                for part, state in offset.get("positions", {}).items()
            }
        from confluent_kafka import Consumer

        config = {
            **self._consumer_config,
            "client.id": f"medallion-{self.name}",
            # Bronze holds the offsets: the group's are written after each commit, never read.
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
            # A committed offset outside the log is an error to report, never a silent jump.
            "auto.offset.reset": "error",
            "enable.partition.eof": True,
            # Records of aborted producer transactions (Connect's exactly-once source) are skipped.
            "isolation.level": "read_committed",
        }
        self._consumer = Consumer(config, logger=logger)
        self._refresh(force=True)

    def _offset(self) -> dict[str, Any]:
        return {
            "format": OFFSET_FORMAT,
            "partitions": self._offsets.dump(),
            "last_partition": self._last_partition,
            "streams": self._streams_doc(),
            "arrival": self._arrival,
            "positions": {
                part: {"connector": r.connector, "state": r.state()}
                for part, r in self._resolvers.items()
            },
        }

    def acknowledge(self, offset: Mapping[str, Any]) -> None:
        """Commit ``offset``'s partitions to the consumer group, for monitoring only."""
        consumer = self._consumer
        if consumer is None:
            return
        from confluent_kafka import KafkaException, TopicPartition

        partitions = [
            TopicPartition(topic, int(part), int(nxt))
            for topic, parts in offset.get("partitions", {}).items()
            for part, nxt in parts.items()
        ]
        if not partitions:
            return
        self._acknowledged = partitions
        try:
            consumer.commit(offsets=partitions, asynchronous=True)
        except KafkaException as exc:
            # Monitoring only: bronze holds the truth, so a failed group commit loses nothing.
            logger.warning("source %s: consumer-group offset commit failed: %s", self.name, exc)

    def close(self) -> None:
        """Copy the last acknowledged offsets to the group once more, synchronously (the
        asynchronous commits may still be in flight), and close the consumer."""
        consumer, self._consumer = self._consumer, None
        if consumer is None:
            return
        from confluent_kafka import KafkaException

        try:
            if self._acknowledged:
                consumer.commit(offsets=self._acknowledged, asynchronous=False)
        except KafkaException as exc:
            logger.warning("source %s: consumer-group offset commit failed: %s", self.name, exc)
        finally:
            consumer.close()

    # --- topics and partitions ---------------------------------------------------------------
    def _wanted(self, topic: str) -> bool:
        if topic in self.topics:
            return True
        pattern = self.topic_pattern
        return pattern is not None and not topic.startswith("__") and bool(pattern.fullmatch(topic))

    def _refresh(self, *, force: bool = False) -> None:
        """Assign partitions that appeared since the last look (new topics of the pattern, and
        partitions added to a topic), each at bronze's offset or at its first offset."""
        now = time.monotonic()
        if not force and self._refreshed_at is not None:
            if now - self._refreshed_at < self.metadata_refresh_s:
                return
        consumer = self._require_consumer()
        from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

        try:
            metadata = consumer.list_topics(timeout=_METADATA_TIMEOUT_S)
        except KafkaException as exc:
            raise SourceUnavailable(
                f"source {self.name}: cannot read the topic list from "
                f"{self._consumer_config.get('bootstrap.servers')}: {exc}"
            ) from exc
        self._refreshed_at = now
        initial = not self._assigned
        new: list[Any] = []
        for topic, meta in sorted(metadata.topics.items()):
            if not self._wanted(topic) or meta.error is not None:
                continue
            for part in sorted(meta.partitions):
                tp = (topic, part)
                if tp in self._assigned:
                    continue
                start = self._offsets.get(tp)
                try:
                    low, high = consumer.get_watermark_offsets(
                        TopicPartition(topic, part), timeout=_METADATA_TIMEOUT_S
                    )
                except KafkaException as exc:
                    raise SourceUnavailable(
                        f"source {self.name}: cannot read the offsets of {topic} "
                        f"partition {part}: {exc}"
                    ) from exc
                if start is not None:
                    self._offsets.check_range(tp, low, high)
                elif low > 0:
                    # Bronze never read this partition, so nothing it holds is missing; but
                    # its first records are gone (retention), which a person should know.
                    logger.warning(
                        "source %s: %s partition %s is read from offset %s: records 0..%s were "
                        "deleted before bronze first read it, so its tables need a snapshot "
                        "to be complete",
                        self.name,
                        topic,
                        part,
                        low,
                        low - 1,
                    )
                elif not initial:
                    logger.info(
                        "source %s: new partition %s of %s, read from its first offset",
                        self.name,
                        part,
                        topic,
                    )
                new.append(
                    TopicPartition(topic, part, OFFSET_BEGINNING if start is None else start)
                )
                self._assigned.add(tp)
                self._fetched_next[tp] = 0 if start is None else start
        for topic in self.topics:
            if topic not in metadata.topics and topic not in self._missing_warned:
                self._missing_warned.add(topic)
                logger.warning(
                    "source %s: topic %s does not exist (yet); it is read once it does",
                    self.name,
                    topic,
                )
        if new:
            consumer.incremental_assign(new)

    def _require_consumer(self) -> Consumer:
        if self._consumer is None:
            raise CaptureError(f"source {self.name}: read before open()")
        return self._consumer

    # --- reading -----------------------------------------------------------------------------
    def read_batch(
        self,
        *,
        max_events: int,
        max_transaction_events: int,
        until: Mapping[str, Any] | None = None,
    ) -> SourceBatch:
        """Read the next batch; see :meth:`CaptureSource.read_batch`.

        Raises:
            PartitionOffsetError: Records after bronze's offset are gone from a partition.
            SourceUnavailable: The brokers or the schema registry cannot be reached.
        """
        self._until = None if until is None else until.get("partitions", {})
        try:
            batch = super().read_batch(
                max_events=max_events, max_transaction_events=max_transaction_events, until=until
            )
        finally:
            self._until = None
        if batch.exhausted and (until is not None or self._queue):
            # Not exhausted: the batch that ends a half-landed one stops at that batch's end,
            # and records held back behind one that could not land yet are still to be read.
            return SourceBatch(batch.builder, batch.offset, exhausted=False)
        return batch

    def _reached(self, until: Mapping[str, Any]) -> bool:
        return self._offsets.all_reached(until.get("partitions", {}))

    def _consume(self, line: _Line) -> None:
        record = cast(_KafkaRecord, line)
        record.consumed = True
        self._offsets.advance(record.tp, record.offset)
        if record.value is not None and self._last_partition is not None:
            self._stream_of[record.tp] = self._last_partition

    def _streams_doc(self) -> dict[str, dict[str, str]]:
        out: dict[str, dict[str, str]] = {}
        for (topic, part), stream in sorted(self._stream_of.items()):
            out.setdefault(topic, {})[str(part)] = stream
        return out

    def _lines(self) -> Iterator[_KafkaRecord]:
        """Records after bronze's offsets, partition order kept, until the topics are caught up.

        Records taken but not consumed when the batch ends (the record that ended it, records
        held back) go back to the front of the queue, in their order, for the next batch.
        """
        self._refresh()
        queue, until = self._queue, self._until
        taken: list[_KafkaRecord] = []
        silent_since: float | None = None
        last: dict[TopicPartitionKey, _KafkaRecord] = {}
        held: set[TopicPartitionKey] = set()
        try:
            while True:
                if until is not None and self._offsets.all_reached(until):
                    return
                if not queue:
                    if self._caught_up():
                        return
                    if self._fetch():
                        silent_since = None
                    elif self._stop_waiting(silent_since):
                        return
                    elif silent_since is None:
                        silent_since = time.monotonic()
                    continue
                record = queue.popleft()
                taken.append(record)
                tp = record.tp
                previous = last.get(tp)
                if (
                    tp in held
                    or (previous is not None and not previous.consumed)
                    or (until is not None and self._offsets.reached(until, tp))
                ):
                    held.add(tp)  # the rest of this partition waits for the next batch
                    continue
                last[tp] = record
                self._fetch_schemas(record)
                if record.value is None:
                    # A tombstone follows its delete in its own partition: it belongs to the
                    # source stream of that partition's last data record, whatever other
                    # partitions were read in between, so every re-read of a half-landed batch
                    # orders it the same way. (A partition added between a delete and its
                    # tombstone has no data record yet: the last stream read is taken.)
                    self._last_partition = self._stream_of.get(tp, self._last_partition)
                yield record
        finally:
            back = [r for r in taken if not r.consumed]
            queue.extendleft(reversed(back))

    def _stop_waiting(self, silent_since: float | None) -> bool:
        """Whether a read that got nothing for ``poll.timeout.ms`` ends before every partition
        reported its end.

        A following agent polls again soon, so its read ends at once. A run that stops when
        the topics are exhausted must not take a slow broker for an empty topic: it waits for
        every partition's end, up to :data:`_CATCH_UP_WAIT_S` of silence (a broker that is
        down), and then says which partitions it could not read to the end.
        """
        if self.follow:
            return True
        if silent_since is None or time.monotonic() - silent_since < _CATCH_UP_WAIT_S:
            return False
        behind = sorted(tp for tp, nxt in self._fetched_next.items() if self._eof.get(tp, -1) < nxt)
        logger.warning(
            "source %s: no records and no end of partition for %.0f s from %s; stopping "
            "before they were read to their end",
            self.name,
            _CATCH_UP_WAIT_S,
            ", ".join(f"{t}[{p}]" for t, p in behind[:10]),
        )
        return True

    def _caught_up(self) -> bool:
        """True when every assigned partition reported its end after the last record fetched."""
        eof = self._eof
        return all(eof.get(tp, -1) >= nxt for tp, nxt in self._fetched_next.items())

    def _fetch(self) -> bool:
        """Move records from the client into the queue; False when none came in time."""
        consumer = self._require_consumer()
        first = consumer.poll(self.poll_timeout_s)
        if first is None:
            return False
        messages = [first, *consumer.consume(_FETCH_MAX, 0)]
        for message in messages:
            error = message.error()
            if error is not None:
                self._on_error(message, error)
                continue
            record = _KafkaRecord(message)
            self._queue.append(record)
            self._fetched_next[record.tp] = record.offset + 1
        return True

    def _on_error(self, message: Message, error: Any) -> None:
        from confluent_kafka import KafkaError

        code = error.code()
        tp = (cast(str, message.topic()), cast(int, message.partition()))
        if code == KafkaError._PARTITION_EOF:
            self._eof[tp] = cast(int, message.offset())
            return
        if code in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
            raise PartitionOffsetError(
                f"source {self.name}: {tp[0]} partition {tp[1]}: the offset to read "
                f"({self._fetched_next.get(tp)}) is outside the partition's log: records were "
                f"deleted before bronze read them, or the topic was created again ({error.str()})"
            )
        if error.fatal():
            raise CaptureError(f"source {self.name}: the Kafka client failed: {error.str()}")
        # Broker restarts, leader moves: librdkafka retries these itself.
        logger.warning("source %s: Kafka client reports %s", self.name, error.str())

    def _fetch_schemas(self, record: _KafkaRecord) -> None:
        """Fetch unknown Avro writer schemas before the record is parsed, so that a registry
        outage fails the batch (retryable) instead of quarantining the record."""
        avro = self._avro
        if avro is None or self.value_converter == "json":
            return
        for data in (record.key, record.value):
            if is_avro(data):
                try:
                    avro.registry.schema(int.from_bytes(cast(bytes, data)[1:5], "big"))
                except EnvelopeError:
                    pass  # an unknown id is this record's fault: quarantined when parsed

    def _parse(self, line: _Line, origin: str) -> Parsed | None:
        record = cast(_KafkaRecord, line)
        key, key_text = self._decode(record.key, "key", origin)
        value, value_text = self._decode(record.value, "value", origin)
        return parse_record(key, value, record.headers, record.tp[0], origin, key_text, value_text)

    def _decode(self, data: bytes | None, what: str, origin: str) -> tuple[Any, bytes | None]:
        """A key or value as the JSON document JsonConverter would have written, and its text
        when that is exactly the bytes read."""
        if data is None:
            return None, None
        avro = self._avro
        if avro is not None and (self.value_converter == "avro" or is_avro(data)):
            payload, schema = avro.decode(data, what, origin)
            return {"schema": schema, "payload": payload}, None
        if self.value_converter == "avro":
            raise EnvelopeError(f"{what} is not Avro", origin=origin)
        if avro is None and is_avro(data) and data[:1] != b"{":
            raise EnvelopeError(
                f"{what} starts with the Confluent Avro wire format's magic byte 0: set "
                "schema.registry.url on the source to decode Avro",
                origin=origin,
            )
        return loads(data, origin, what), data
