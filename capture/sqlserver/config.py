"""The ``sqlserver`` source's config model (the agent is not built yet). Imports no driver."""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from capture.source_config import (
    CONNECTOR,
    DATABASE_DBNAME,
    DATABASE_PORT,
    INCLUDE_SCHEMA_CHANGES,
    INCLUDE_SCHEMA_CHANGES_DEFAULT,
    SNAPSHOT_ISOLATION_MODE,
    SNAPSHOT_ISOLATION_MODE_DEFAULT,
    SNAPSHOT_MODE,
    SNAPSHOT_MODE_DEFAULT,
    RelationalSourceConfig,
    SchemaFilters,
    SourceType,
)
from pipeline.config_model import NameList, Port, config_key

__all__ = ["SqlServerSourceConfig"]

SQLSERVER_PORT_DEFAULT = 1433
DATABASE_NAMES = "database.names"
SOURCE_TIMESTAMP_MODE = "source.timestamp.mode"
SOURCE_TIMESTAMP_MODE_DEFAULT = "commit"

SqlServerSnapshotMode = Literal["initial", "initial_only", "schema_only"]
SqlServerIsolationMode = Literal[
    "read_uncommitted", "read_committed", "repeatable_read", "snapshot", "exclusive"
]
SourceTimestampMode = Literal["commit", "processing"]


class SqlServerSourceConfig(SchemaFilters, RelationalSourceConfig):
    """SQL Server CDC change tables."""

    KIND = SourceType.SQLSERVER

    connector: Literal["sqlserver"] = config_key(..., CONNECTOR)
    """Discriminator: ``sqlserver``."""
    database_port: Port = config_key(SQLSERVER_PORT_DEFAULT, DATABASE_PORT)
    """SQL Server port."""
    database_names: NameList = config_key(..., DATABASE_NAMES, DATABASE_DBNAME)
    """Databases to capture (1.2: a single ``database.dbname``)."""
    snapshot_mode: SqlServerSnapshotMode = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``initial_only`` or ``schema_only``."""
    snapshot_isolation_mode: SqlServerIsolationMode = config_key(
        SNAPSHOT_ISOLATION_MODE_DEFAULT, SNAPSHOT_ISOLATION_MODE
    )
    """Only ``snapshot`` and ``exclusive`` make snapshot plus stream one linear history."""
    source_timestamp_mode: SourceTimestampMode = config_key(
        SOURCE_TIMESTAMP_MODE_DEFAULT, SOURCE_TIMESTAMP_MODE
    )
    """``source.ts_ms`` from the ``commit`` time or the ``processing`` time."""
    include_schema_changes: bool = config_key(
        INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES
    )
    """Land DDL as schema-change records."""

    @field_validator("database_names")
    @classmethod
    def _some_database(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one database is required")
        return value
