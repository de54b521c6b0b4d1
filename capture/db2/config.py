"""The ``db2`` source's config model. Imports no driver."""

from __future__ import annotations

from typing import Literal

from capture import source_config as sc
from pipeline.config_model import Port, config_key

__all__ = ["Db2SourceConfig"]

DB2_PORT_DEFAULT = 50000

Db2SnapshotMode = Literal["initial", "schema_only"]
Db2IsolationMode = Literal["read_uncommitted", "read_committed", "repeatable_read", "exclusive"]


class Db2SourceConfig(sc.SchemaFilters, sc.RelationalSourceConfig):
    """Db2 through ASN capture tables."""

    KIND = sc.SourceType.DB2

    connector: Literal["db2"] = config_key(..., sc.CONNECTOR)
    """Discriminator: ``db2``."""
    database_port: Port = config_key(DB2_PORT_DEFAULT, sc.DATABASE_PORT)
    """Db2 port."""
    database_dbname: str = config_key(..., sc.DATABASE_DBNAME)
    """Database to capture."""
    snapshot_mode: Db2SnapshotMode = config_key(sc.SNAPSHOT_MODE_DEFAULT, sc.SNAPSHOT_MODE)
    """``initial`` or ``schema_only``."""
    snapshot_isolation_mode: Db2IsolationMode = config_key(
        sc.SNAPSHOT_ISOLATION_MODE_DEFAULT, sc.SNAPSHOT_ISOLATION_MODE
    )
    """Only ``exclusive`` is fully consistent."""
    include_schema_changes: bool = config_key(
        sc.INCLUDE_SCHEMA_CHANGES_DEFAULT, sc.INCLUDE_SCHEMA_CHANGES
    )
    """Land DDL as schema-change records."""
