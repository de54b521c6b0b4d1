"""The explicit table of capture sources.

Each loader imports its module (and so its database driver) only when that source is used, so
a missing optional driver fails with an error that says what to install, and only for the user
who needs it.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Any

from capture.base import CaptureSource
from pipeline.config import SourceType
from pipeline.errors import ConfigError, NotBuiltError, NotInstalledError

__all__ = ["SourceType", "AVAILABLE_SOURCES", "create_source"]


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


def _not_built(kind: SourceType, where: str) -> Callable[[Any], CaptureSource]:
    def load(config: Any) -> CaptureSource:
        raise NotBuiltError(
            f"the {kind.value} capture agent is not built yet ({where}); land its Debezium "
            f"output with a 'debezium_json' source in the meantime"
        )

    return load


AVAILABLE_SOURCES: dict[SourceType, Callable[[Any], CaptureSource]] = {
    SourceType.DEBEZIUM_JSON: load_debezium_json,
    SourceType.POSTGRESQL: load_postgresql,
    SourceType.MYSQL: load_mysql,
    SourceType.MONGODB: _not_built(SourceType.MONGODB, "planned"),
    SourceType.SQLSERVER: _not_built(SourceType.SQLSERVER, "planned"),
    SourceType.ORACLE: _not_built(SourceType.ORACLE, "planned"),
    SourceType.DB2: _not_built(SourceType.DB2, "planned"),
    SourceType.YUGABYTEDB: _not_built(SourceType.YUGABYTEDB, "planned"),
}


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
        close = difflib.get_close_matches(kind, [t.value for t in SourceType], n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ConfigError(f"unknown connector '{kind}'{hint}", key_path="connector") from None
    return AVAILABLE_SOURCES[source_type](config)
