"""The explicit table of connectors: for each kind, its config model and its loader.

:data:`CONNECTORS` is the one place a connector is registered. :mod:`pipeline.config` builds the
``sources[]`` models from it, and :func:`create_source` builds the agent. The config models import
no driver; each loader imports its agent module (and so its database driver) only when that
source is used, so a missing optional driver fails with an error that says what to install, and
only for the user who needs it.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from capture.db2.config import Db2SourceConfig
from capture.debezium_json.config import DebeziumJsonSourceConfig
from capture.kafka.config import KafkaSourceConfig
from capture.mongodb.config import MongoDbSourceConfig
from capture.mysql.config import MySqlSourceConfig
from capture.oracle.config import OracleSourceConfig
from capture.postgresql.config import PostgresSourceConfig
from capture.source_config import SourceConfigBase, SourceType
from capture.sqlserver.config import SqlServerSourceConfig
from capture.yugabytedb.config import YugabyteDbSourceConfig
from pipeline.config_model import did_you_mean
from pipeline.errors import ConfigError, NotBuiltError, NotInstalledError

if TYPE_CHECKING:
    # Only for annotations: capture.base pulls in bronze and pyarrow, which loading a config
    # does not need.
    from capture.base import CaptureSource

__all__ = [
    "SourceType",
    "Connector",
    "CONNECTORS",
    "AVAILABLE_SOURCES",
    "SOURCE_CONFIG_MODELS",
    "create_source",
]


def load_debezium_json(config: Any) -> CaptureSource:
    """Debezium JSON-lines files (Debezium Server file output, Kafka topic dumps)."""
    from capture.debezium_json.source import DebeziumJsonSource

    return DebeziumJsonSource.from_config(config)


def _agent(module: str, agent: str, missing: str) -> Callable[[Any], CaptureSource]:
    """A loader that imports ``module`` (and so its driver) only when a source of its kind is
    built; a missing driver is a :class:`NotInstalledError` that says what to install."""

    def load(config: Any) -> CaptureSource:
        try:
            source_class = getattr(importlib.import_module(module), agent)
        except ImportError as exc:
            raise NotInstalledError(missing) from exc
        source: CaptureSource = source_class.from_config(config)
        return source

    return load


def _not_built(kind: SourceType, where: str) -> Callable[[Any], CaptureSource]:
    def load(config: Any) -> CaptureSource:
        raise NotBuiltError(
            f"the {kind.value} capture agent is not built yet ({where}); land its Debezium "
            f"output with a 'debezium_json' source in the meantime"
        )

    return load


@dataclass(frozen=True, slots=True)
class Connector:
    """One registered connector."""

    config_model: type[SourceConfigBase]
    """Validates its ``sources[]`` entries: its Debezium property names, defaults and checks.
    The ``connector`` values it accepts are the ``Literal`` of its ``connector`` field."""
    load: Callable[[Any], CaptureSource]
    """Builds the agent from a validated config, importing the agent and its driver lazily."""


CONNECTORS: Mapping[SourceType, Connector] = {
    SourceType.DEBEZIUM_JSON: Connector(DebeziumJsonSourceConfig, load_debezium_json),
    SourceType.POSTGRESQL: Connector(
        PostgresSourceConfig,
        _agent(
            "capture.postgresql.source",
            "PostgresSource",
            "the postgresql capture agent needs psycopg 3: pip install '.[postgres]'",
        ),
    ),
    SourceType.MYSQL: Connector(
        MySqlSourceConfig,
        _agent(
            "capture.mysql.source",
            "MySqlSource",
            "the mysql capture agent needs PyMySQL and mysql-replication: pip install '.[mysql]'",
        ),
    ),
    SourceType.MONGODB: Connector(
        MongoDbSourceConfig,
        _agent(
            "capture.mongodb.source",
            "MongoDbSource",
            "the mongodb capture agent needs pymongo: pip install '.[mongodb]'",
        ),
    ),
    SourceType.SQLSERVER: Connector(
        SqlServerSourceConfig,
        # pyodbc is imported when connecting, where a missing unixODBC/FreeTDS is reported.
        _agent(
            "capture.sqlserver.source",
            "SqlServerSource",
            "the sqlserver capture agent needs pyodbc: pip install '.[sqlserver]'",
        ),
    ),
    SourceType.ORACLE: Connector(
        OracleSourceConfig,
        _agent(
            "capture.oracle.source",
            "OracleSource",
            "the oracle capture agent needs python-oracledb: pip install '.[oracle]'",
        ),
    ),
    SourceType.DB2: Connector(
        Db2SourceConfig,
        # pyodbc is imported when connecting, where a missing IBM ODBC driver is reported.
        _agent(
            "capture.db2.source",
            "Db2Source",
            "the db2 capture agent needs pyodbc: pip install '.[db2]'",
        ),
    ),
    SourceType.YUGABYTEDB: Connector(
        YugabyteDbSourceConfig,
        _agent(
            "capture.yugabytedb.source",
            "YugabyteDbSource",
            "the yugabytedb capture agent needs psycopg 3: pip install '.[postgres]'",
        ),
    ),
    SourceType.KAFKA: Connector(
        KafkaSourceConfig,
        _agent(
            "capture.kafka.source",
            "KafkaSource",
            "the kafka source needs confluent-kafka (and fastavro for Avro): "
            "pip install '.[kafka]'",
        ),
    ),
}
"""Every connector, by kind. Adding a connector is one line here (docs/extending.md)."""

AVAILABLE_SOURCES: Mapping[SourceType, Callable[[Any], CaptureSource]] = {
    kind: connector.load for kind, connector in CONNECTORS.items()
}
"""The loader of each kind (a view of :data:`CONNECTORS`)."""
SOURCE_CONFIG_MODELS: Mapping[SourceType, type[SourceConfigBase]] = {
    kind: connector.config_model for kind, connector in CONNECTORS.items()
}
"""The config model of each kind (a view of :data:`CONNECTORS`)."""


def create_source(config: Any) -> CaptureSource:
    """Build the capture source a ``sources[]`` entry describes.

    Args:
        config: A validated source config (its ``connector`` selects the loader).

    Returns:
        The source, not yet opened.

    Raises:
        ConfigError: Unknown connector kind (with the closest known kind).
        NotBuiltError: The kind is designed but not implemented yet.
    """
    kind = getattr(config, "kind", None) or str(config.connector)
    try:
        source_type = SourceType(kind)
    except ValueError:
        hint = did_you_mean(kind, [t.value for t in SourceType])
        note = f"; {hint}" if hint else ""
        raise ConfigError(f"unknown connector '{kind}'{note}", key_path="connector") from None
    return CONNECTORS[source_type].load(config)
