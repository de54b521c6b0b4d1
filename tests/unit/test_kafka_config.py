"""The ``kafka`` source's config: keys, checks, and the agent built from it (no broker)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from capture.kafka.config import KafkaSourceConfig
from capture.registry import create_source
from pipeline.config import load_config
from pipeline.errors import ConfigError

pytestmark = pytest.mark.unit


def _load(tmp_path: Path, body: str, env: dict[str, str] | None = None) -> KafkaSourceConfig:
    path = tmp_path / "pipeline.yaml"
    source = textwrap.indent(textwrap.dedent(body), "    ")
    path.write_text("sources:\n  - name: k\n    connector: kafka\n" + source)
    config = load_config(path, env=env or {})
    source_config = config.source("k")
    assert isinstance(source_config, KafkaSourceConfig)
    return source_config


def test_topics_or_a_pattern_is_required_and_keys_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as missing:
        _load(tmp_path, "bootstrap.servers: b:9092\n")
    assert "give 'topics' or 'topic.pattern'" in missing.value.reason
    with pytest.raises(ConfigError) as typo:
        _load(tmp_path, "bootstrap.servers: b:9092\ntopic: [a]\n")
    assert "did you mean 'topics'?" in typo.value.reason
    with pytest.raises(ConfigError) as avro:
        _load(tmp_path, "bootstrap.servers: b:9092\ntopics: a\nvalue.converter: avro\n")
    assert (
        "schema.registry.url" in str(avro.value)
        and "needs the schema registry" in avro.value.reason
    )
    with pytest.raises(ConfigError) as pattern:
        _load(tmp_path, "bootstrap.servers: b:9092\ntopic.pattern: 'a('\n")
    assert "not a regular expression" in pattern.value.reason


def test_the_agent_gets_the_client_settings_and_hides_the_password(tmp_path: Path) -> None:
    config = _load(
        tmp_path,
        """
        bootstrap.servers: b1:9092,b2:9092
        topics: dbz.inventory.orders, dbz.transaction
        security.protocol: SASL_SSL
        sasl.mechanism: SCRAM-SHA-512
        sasl.username: medallion
        sasl.password: ${KAFKA_PASSWORD}
        """,
        env={"KAFKA_PASSWORD": "s3cret-kafka"},
    )
    assert config.topics == ("dbz.inventory.orders", "dbz.transaction")
    assert config.consumer_group == "medallion-k"
    assert "s3cret-kafka" not in repr(config)
    source = create_source(config)
    assert source.KIND == "kafka" and "s3cret-kafka" not in repr(source)
    consumer = source._consumer_config  # type: ignore[attr-defined]
    assert consumer["sasl.password"] == "s3cret-kafka"
    assert (consumer["group.id"], consumer["security.protocol"]) == ("medallion-k", "SASL_SSL")


def test_a_literal_password_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as literal:
        _load(
            tmp_path,
            "bootstrap.servers: b:9092\ntopics: a\nsasl.username: u\nsasl.password: hunter2\n",
        )
    assert "sasl.password" in literal.value.reason
