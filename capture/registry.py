"""The explicit table of connectors: for each kind, its config model and its loader.

:data:`CONNECTORS` is the one place a connector is registered. :mod:`pipeline.config` builds the
``sources[]`` models from it, and :func:`create_source` builds the agent. The config models import
no driver; each loader imports its agent module (and so its database driver) only when that
source is used, so a missing optional driver fails with an error that says what to install, and
only for the user who needs it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from capture.db2.config import Db2SourceConfig
from capture.debezium_json.config import DebeziumJsonSourceConfig
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


def load_postgresql(config: Any) -> CaptureSource:
    """PostgreSQL logical decoding (pgoutput) with a consistent initial snapshot."""
    try:
        from capture.postgresql.source import PostgresSource
    except ImportError as exc:
        raise NotInstalledError(
            "the postgresql capture agent needs psycopg 3: pip install '.[postgres]'"
        ) from exc
    return PostgresSource.from_config(config)


def load_mysql(config: Any) -> CaptureSource:
    """MySQL / MariaDB ROW binlog (mysql-replication) with a consistent initial snapshot."""
    try:
        from capture.mysql.source import MySqlSource
    except ImportError as exc:
        raise NotInstalledError(
            "the mysql capture agent needs PyMySQL and mysql-replication: pip install '.[mysql]'"
        ) from exc
    return MySqlSource.from_config(config)


def load_mongodb(config: Any) -> CaptureSource:
    """MongoDB change streams (pymongo) with a consistent initial snapshot."""
    try:
        from capture.mongodb.source import MongoDbSource
    except ImportError as exc:
        raise NotInstalledError(
            "the mongodb capture agent needs pymongo: pip install '.[mongodb]'"
        ) from exc
    return MongoDbSource.from_config(config)


def load_sqlserver(config: Any) -> CaptureSource:
    """SQL Server CDC change tables over pyodbc (FreeTDS), with a snapshot at the max LSN."""
    from capture.sqlserver.source import SqlServerSource  # pyodbc is imported when connecting

    return SqlServerSource.from_config(config)


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


def load_oracle(config: Any) -> CaptureSource:
    """Oracle through LogMiner (python-oracledb, thin mode)."""
    try:
        from capture.oracle.source import OracleSource
    except ImportError as exc:
        raise NotInstalledError(
            "the oracle capture agent needs python-oracledb: pip install '.[oracle]'"
        ) from exc
    return OracleSource.from_config(config)


CONNECTORS: Mapping[SourceType, Connector] = {
    SourceType.DEBEZIUM_JSON: Connector(DebeziumJsonSourceConfig, load_debezium_json),
    SourceType.POSTGRESQL: Connector(PostgresSourceConfig, load_postgresql),
    SourceType.MYSQL: Connector(MySqlSourceConfig, load_mysql),
    SourceType.MONGODB: Connector(MongoDbSourceConfig, load_mongodb),
    SourceType.SQLSERVER: Connector(SqlServerSourceConfig, load_sqlserver),
    SourceType.ORACLE: Connector(OracleSourceConfig, load_oracle),
    SourceType.DB2: Connector(Db2SourceConfig, _not_built(SourceType.DB2, "planned")),
    SourceType.YUGABYTEDB: Connector(
        YugabyteDbSourceConfig, _not_built(SourceType.YUGABYTEDB, "planned")
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
