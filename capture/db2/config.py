"""The ``db2`` source's config model (the agent is not built yet). Imports no driver."""

from __future__ import annotations

from typing import Literal

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
from pipeline.config_model import Port, config_key

__all__ = ["Db2SourceConfig"]

DB2_PORT_DEFAULT = 50000

Db2SnapshotMode = Literal["initial", "schema_only"]
Db2IsolationMode = Literal["read_uncommitted", "read_committed", "repeatable_read", "exclusive"]


class Db2SourceConfig(SchemaFilters, RelationalSourceConfig):
    """Db2 through ASN capture tables."""

    KIND = SourceType.DB2

    connector: Literal["db2"] = config_key(..., CONNECTOR)
    """Discriminator: ``db2``."""
    database_port: Port = config_key(DB2_PORT_DEFAULT, DATABASE_PORT)
    """Db2 port."""
    database_dbname: str = config_key(..., DATABASE_DBNAME)
    """Database to capture."""
    snapshot_mode: Db2SnapshotMode = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial`` or ``schema_only``."""
    snapshot_isolation_mode: Db2IsolationMode = config_key(
        SNAPSHOT_ISOLATION_MODE_DEFAULT, SNAPSHOT_ISOLATION_MODE
    )
    """Only ``exclusive`` is fully consistent."""
    include_schema_changes: bool = config_key(
        INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES
    )
    """Land DDL as schema-change records."""
