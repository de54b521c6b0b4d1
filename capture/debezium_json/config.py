"""The ``debezium_json`` source's config model: where the files are and how to read them.

Importing this module imports nothing of the source itself.
"""

from __future__ import annotations

from typing import Literal

from capture.source_config import CONNECTOR, ColumnRules, SourceConfigBase, SourceType
from pipeline.config_model import ConfigPath, config_key

__all__ = ["DebeziumJsonSourceConfig"]

JSON_PATH = "path"
JSON_FILE_PATTERN = "file.pattern"
JSON_FILE_PATTERN_DEFAULT = "*.jsonl"
JSON_FORMAT = "format"
JSON_FORMAT_DEFAULT = "auto"
JSON_CONNECTOR_HINT = "connector.hint"
JSON_CONNECTOR_HINT_DEFAULT = None
JSON_ORDER_BY = "order.by"
JSON_ORDER_BY_DEFAULT = "source"

JsonFormat = Literal["auto", "envelope", "kafka_json", "key_tab_value", "console", "cloudevents"]
"""Line formats of ``debezium_json`` files; see :attr:`DebeziumJsonSourceConfig.format`."""
JsonOrderBy = Literal["source", "arrival"]
"""How ``debezium_json`` orders records; see :attr:`DebeziumJsonSourceConfig.order_by`."""
ConnectorHint = Literal[
    "postgresql", "mysql", "mariadb", "mongodb", "sqlserver", "oracle", "db2", "yugabytedb"
]


class DebeziumJsonSourceConfig(ColumnRules, SourceConfigBase):
    """Debezium change events already serialized as JSON lines (files or a directory of them).

    Every record is landed: table filters and ``skipped.operations`` were Debezium's to apply
    when it wrote the files. Column rules still apply, so data can be masked before bronze.
    """

    KIND = SourceType.DEBEZIUM_JSON

    connector: Literal["debezium_json"] = config_key(..., CONNECTOR)
    """Discriminator: ``debezium_json``."""
    path: ConfigPath = config_key(..., JSON_PATH)
    """A JSON-lines file, or a directory whose ``file.pattern`` files are read in name order."""
    file_pattern: str = config_key(JSON_FILE_PATTERN_DEFAULT, JSON_FILE_PATTERN)
    """Glob of the files to read when ``path`` is a directory."""
    format: JsonFormat = config_key(JSON_FORMAT_DEFAULT, JSON_FORMAT)
    """Line format (see :mod:`capture.debezium_json.source`).

    * ``envelope``: one Debezium value per line as Kafka Connect's JsonConverter writes it, with
      schemas (``{"schema": ..., "payload": {...}}``) or without; no key.
    * ``kafka_json``: one Kafka record per line, a JSON object with ``key`` and ``value`` (or
      kcat's ``payload``; ``null`` for a tombstone) and optional ``headers`` and ``topic``, as
      ``kcat -J`` and similar topic dumps write it.
    * ``key_tab_value`` / ``console``: ``kafka-console-consumer`` output with its default
      separators: ``[CreateTime:<ms>\\t][Partition:<n>\\t][Offset:<n>\\t][<headers>\\t]
      [<key>\\t]<value>`` (``print.timestamp``, ``print.partition``, ``print.offset``,
      ``print.headers``, ``print.key``).
    * ``cloudevents``: Debezium's CloudEventsConverter, structured JSON mode, JSON data.
    * ``auto``: detect the format per line.
    """
    connector_hint: ConnectorHint | None = config_key(
        JSON_CONNECTOR_HINT_DEFAULT, JSON_CONNECTOR_HINT
    )
    """Connector to assume for records whose ``source`` block is missing or has no ``connector``."""
    order_by: JsonOrderBy = config_key(JSON_ORDER_BY_DEFAULT, JSON_ORDER_BY)
    """``source`` (default): order by each record's source position; a data record without a
    ``source`` block is quarantined. ``arrival``: order every record of this source by when it
    was read (file, line) and accept records without ``source`` (their table comes from the
    topic, their connector from ``connector.hint``). Weaker: no deduplication of records
    Debezium redelivers, no order across files but the reading order (docs/bronze.md)."""
