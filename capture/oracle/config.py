"""The ``oracle`` source's config model (agent: :mod:`capture.oracle.source`). Imports no driver."""

from __future__ import annotations

from typing import Literal

from capture.source_config import (
    CONNECTOR,
    DATABASE_DBNAME,
    DATABASE_HOSTNAME,
    DATABASE_PORT,
    INCLUDE_SCHEMA_CHANGES,
    INCLUDE_SCHEMA_CHANGES_DEFAULT,
    SNAPSHOT_MODE,
    SNAPSHOT_MODE_DEFAULT,
    RelationalSourceConfig,
    SchemaFilters,
    SourceType,
)
from pipeline.config_model import Port, config_key

__all__ = ["OracleSourceConfig"]

ORACLE_PORT_DEFAULT = 1521
DATABASE_PDB_NAME = "database.pdb.name"
DATABASE_URL = "database.url"
DATABASE_CONNECTION_ADAPTER = "database.connection.adapter"
DATABASE_CONNECTION_ADAPTER_DEFAULT = "logminer"
LOG_MINING_STRATEGY = "log.mining.strategy"
LOG_MINING_STRATEGY_DEFAULT = "redo_log_catalog"
LOG_MINING_QUERY_FILTER_MODE = "log.mining.query.filter.mode"
LOG_MINING_QUERY_FILTER_MODE_DEFAULT = "none"
LOB_ENABLED = "lob.enabled"
LOB_ENABLED_DEFAULT = False
UNAVAILABLE_VALUE_PLACEHOLDER = "unavailable.value.placeholder"
UNAVAILABLE_VALUE_PLACEHOLDER_DEFAULT = "__debezium_unavailable_value"
LOG_MINING_BATCH_SIZE_MIN = "log.mining.batch.size.min"
LOG_MINING_BATCH_SIZE_MIN_DEFAULT = 1000
LOG_MINING_BATCH_SIZE_MAX = "log.mining.batch.size.max"
LOG_MINING_BATCH_SIZE_MAX_DEFAULT = 100_000
LOG_MINING_BATCH_SIZE_DEFAULT = "log.mining.batch.size.default"
LOG_MINING_BATCH_SIZE_DEFAULT_DEFAULT = 20_000

OracleSnapshotMode = Literal[
    "always", "initial", "initial_only", "schema_only", "schema_only_recovery"
]
OracleAdapter = Literal["logminer", "xstream", "olr"]
LogMiningStrategy = Literal["redo_log_catalog", "online_catalog", "hybrid"]
LogMiningQueryFilterMode = Literal["none", "in", "regex"]


class OracleSourceConfig(SchemaFilters, RelationalSourceConfig):
    """Oracle through LogMiner."""

    KIND = SourceType.ORACLE

    connector: Literal["oracle"] = config_key(..., CONNECTOR)
    """Discriminator: ``oracle``."""
    database_port: Port = config_key(ORACLE_PORT_DEFAULT, DATABASE_PORT)
    """Listener port."""
    database_dbname: str = config_key(..., DATABASE_DBNAME)
    """Database (the CDB name in a multitenant database)."""
    database_pdb_name: str | None = config_key(None, DATABASE_PDB_NAME)
    """Pluggable database to capture, in a CDB; filters then read ``pdb.schema.table``."""
    database_url: str | None = config_key(None, DATABASE_URL)
    """Raw JDBC URL or TNS descriptor (RAC); replaces hostname and port."""
    database_connection_adapter: OracleAdapter = config_key(
        DATABASE_CONNECTION_ADAPTER_DEFAULT, DATABASE_CONNECTION_ADAPTER
    )
    """Only ``logminer`` is implemented by our agent (others are refused when it starts)."""
    log_mining_strategy: LogMiningStrategy = config_key(
        LOG_MINING_STRATEGY_DEFAULT, LOG_MINING_STRATEGY
    )
    """``redo_log_catalog`` (follows DDL; rebuilds the dictionary each log switch),
    ``online_catalog`` (faster; cannot follow DDL) or ``hybrid``."""
    log_mining_query_filter_mode: LogMiningQueryFilterMode = config_key(
        LOG_MINING_QUERY_FILTER_MODE_DEFAULT, LOG_MINING_QUERY_FILTER_MODE
    )
    """Push filters into the LogMiner query: ``none``, ``in`` (no regexes!) or ``regex``."""
    lob_enabled: bool = config_key(LOB_ENABLED_DEFAULT, LOB_ENABLED)
    """Capture CLOB/NCLOB/BLOB values (mines the SEL_LOB_LOCATOR/LOB_WRITE/LOB_TRIM/LOB_ERASE
    rows); false leaves the LOB columns out of the records."""
    unavailable_value_placeholder: str = config_key(
        UNAVAILABLE_VALUE_PLACEHOLDER_DEFAULT, UNAVAILABLE_VALUE_PLACEHOLDER
    )
    """Written for a LOB value the redo does not carry (an unchanged LOB column); ``hex:``
    prefix: bytes given in hex."""
    snapshot_mode: OracleSnapshotMode = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``always``, ``initial``, ``initial_only``, ``schema_only`` or ``schema_only_recovery``."""
    include_schema_changes: bool = config_key(
        INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES
    )
    """Land DDL as schema-change records."""

    log_mining_batch_size_min: int = config_key(
        LOG_MINING_BATCH_SIZE_MIN_DEFAULT, LOG_MINING_BATCH_SIZE_MIN, gt=0
    )
    """Smallest mining window (SCNs), and the step by which the window grows or shrinks."""
    log_mining_batch_size_max: int = config_key(
        LOG_MINING_BATCH_SIZE_MAX_DEFAULT, LOG_MINING_BATCH_SIZE_MAX, gt=0
    )
    """Largest mining window (SCNs)."""
    log_mining_batch_size_default: int = config_key(
        LOG_MINING_BATCH_SIZE_DEFAULT_DEFAULT, LOG_MINING_BATCH_SIZE_DEFAULT, gt=0
    )
    """First mining window; the window grows while the agent is further behind than this."""

    def _connection_problem(self) -> tuple[str, str] | None:
        if not self.database_hostname and not self.database_url:
            return DATABASE_HOSTNAME, f"missing required key (or set '{DATABASE_URL}')"
        return None
