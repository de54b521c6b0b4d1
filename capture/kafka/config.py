"""The ``kafka`` source's config model: which broker, which topics, how values are encoded.

Keys are the Kafka client's property names (``bootstrap.servers``, ``group.id``,
``security.protocol``, ``sasl.*``) and the schema registry's (``schema.registry.url``), so a
Debezium deployment's settings can be copied. Importing this module imports no Kafka client.
"""

from __future__ import annotations

import re
from typing import Literal, Self

from pydantic import SecretStr, model_validator

from capture.source_config import CONNECTOR, ColumnRules, SourceConfigBase, SourceType
from pipeline.config_model import NameList, PositiveInt, config_key, keyed_error

__all__ = ["KafkaSourceConfig"]

BOOTSTRAP_SERVERS = "bootstrap.servers"
TOPICS = "topics"
TOPICS_DEFAULT: tuple[str, ...] = ()
TOPIC_PATTERN = "topic.pattern"
TOPIC_PATTERN_DEFAULT = None
GROUP_ID = "group.id"
GROUP_ID_DEFAULT = None
VALUE_CONVERTER = "value.converter"
VALUE_CONVERTER_DEFAULT = "auto"
SCHEMA_REGISTRY_URL = "schema.registry.url"
SCHEMA_REGISTRY_URL_DEFAULT = None
SCHEMA_REGISTRY_USER_INFO = "schema.registry.basic.auth.user.info"
SECURITY_PROTOCOL = "security.protocol"
SECURITY_PROTOCOL_DEFAULT = "PLAINTEXT"
SASL_MECHANISM = "sasl.mechanism"
SASL_MECHANISM_DEFAULT = None
SASL_USERNAME = "sasl.username"
SASL_PASSWORD = "sasl.password"
SSL_CA_LOCATION = "ssl.ca.location"
METADATA_REFRESH_MS = "metadata.refresh.ms"
METADATA_REFRESH_MS_DEFAULT = 5_000
POLL_TIMEOUT_MS = "poll.timeout.ms"
POLL_TIMEOUT_MS_DEFAULT = 1_000
CONNECTOR_HINT = "connector.hint"
ORDER_BY = "order.by"
ORDER_BY_DEFAULT = "source"

ValueConverter = Literal["auto", "json", "avro"]
"""How record keys and values are encoded; see :attr:`KafkaSourceConfig.value_converter`."""
SecurityProtocol = Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"]
ConnectorHint = Literal[
    "postgresql", "mysql", "mariadb", "mongodb", "sqlserver", "oracle", "db2", "yugabytedb"
]
OrderBy = Literal["source", "arrival"]


class KafkaSourceConfig(ColumnRules, SourceConfigBase):
    """Debezium change events read from Kafka topics, landed exactly once.

    Bronze, not the consumer group, holds the truth of what was read: each partition's next
    offset is committed inside the bronze Delta commit of its records (docs/kafka.md).
    """

    KIND = SourceType.KAFKA

    connector: Literal["kafka"] = config_key(..., CONNECTOR)
    """Discriminator: ``kafka``."""
    bootstrap_servers: str = config_key(..., BOOTSTRAP_SERVERS)
    """``host:port[,host:port...]`` of the brokers."""
    topics: NameList = config_key(TOPICS_DEFAULT, TOPICS)
    """Topics to read (a list or a comma-separated string): the table topics, and the
    ``<prefix>.transaction`` and schema-change (``<prefix>``) topics where they are wanted."""
    topic_pattern: str | None = config_key(TOPIC_PATTERN_DEFAULT, TOPIC_PATTERN)
    """A regular expression (anchored) over topic names, read again every
    ``metadata.refresh.ms``: topics created later are picked up and read from their start."""
    group_id: str | None = config_key(GROUP_ID_DEFAULT, GROUP_ID)
    """Consumer group whose offsets are committed after each bronze commit, for monitoring
    tools only (default ``medallion-<source name>``); never read back."""
    value_converter: ValueConverter = config_key(VALUE_CONVERTER_DEFAULT, VALUE_CONVERTER)
    """``json``: Kafka Connect's JsonConverter, with or without schemas. ``avro``: the
    Confluent wire format (magic byte 0, 4-byte schema id, Avro body), which needs
    ``schema.registry.url``. ``auto``: Avro for a key or value that starts with the magic byte
    while a registry is configured, JSON otherwise."""
    schema_registry_url: str | None = config_key(SCHEMA_REGISTRY_URL_DEFAULT, SCHEMA_REGISTRY_URL)
    """Base URL of a Confluent-compatible schema registry (``GET /schemas/ids/<id>``)."""
    schema_registry_user_info: SecretStr | None = config_key(None, SCHEMA_REGISTRY_USER_INFO)
    """``user:password`` for the registry's basic authentication (from a secret file or the
    environment, never literal)."""
    security_protocol: SecurityProtocol = config_key(SECURITY_PROTOCOL_DEFAULT, SECURITY_PROTOCOL)
    """The client's ``security.protocol``."""
    sasl_mechanism: str | None = config_key(SASL_MECHANISM_DEFAULT, SASL_MECHANISM)
    """``PLAIN``, ``SCRAM-SHA-256``, ``SCRAM-SHA-512``..."""
    sasl_username: str | None = config_key(None, SASL_USERNAME)
    """SASL user."""
    sasl_password: SecretStr | None = config_key(None, SASL_PASSWORD)
    """SASL password (from a secret file or the environment, never literal)."""
    ssl_ca_location: str | None = config_key(None, SSL_CA_LOCATION)
    """CA certificate file for ``SSL``/``SASL_SSL``."""
    metadata_refresh_ms: PositiveInt = config_key(METADATA_REFRESH_MS_DEFAULT, METADATA_REFRESH_MS)
    """How often the topic list and partition counts are read again (new partitions and new
    topics of the pattern are read from their first offset)."""
    poll_timeout_ms: PositiveInt = config_key(POLL_TIMEOUT_MS_DEFAULT, POLL_TIMEOUT_MS)
    """How long one poll waits for records. A following agent ends its read when a poll brings
    nothing; a run that stops once the topics are read waits for every partition to report its
    end (up to 60 s without any record, then it stops with a warning naming them)."""
    connector_hint: ConnectorHint | None = config_key(None, CONNECTOR_HINT)
    """Connector to assume for records whose ``source`` block has no ``connector``."""
    order_by: OrderBy = config_key(ORDER_BY_DEFAULT, ORDER_BY)
    """``source`` (default): order by each record's source position. ``arrival``: by reading
    order (weaker; see ``debezium_json``'s key of the same name)."""

    @model_validator(mode="after")
    def _topics_given(self) -> Self:
        if not self.topics and self.topic_pattern is None:
            raise keyed_error(TOPICS, f"give '{TOPICS}' or '{TOPIC_PATTERN}'")
        if self.topic_pattern is not None:
            try:
                re.compile(self.topic_pattern)
            except re.error as exc:
                raise keyed_error(TOPIC_PATTERN, f"not a regular expression: {exc}") from None
        if self.value_converter == "avro" and self.schema_registry_url is None:
            raise keyed_error(
                SCHEMA_REGISTRY_URL, f"'{VALUE_CONVERTER}: avro' needs the schema registry's URL"
            )
        if self.security_protocol.startswith("SASL") and self.sasl_mechanism is None:
            raise keyed_error(SASL_MECHANISM, f"'{SECURITY_PROTOCOL}' SASL needs a mechanism")
        return self

    @property
    def consumer_group(self) -> str:
        """The group the monitoring commits go to."""
        return self.group_id or f"medallion-{self.name}"
