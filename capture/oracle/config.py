"""The ``oracle`` source's config model (agent: :mod:`capture.oracle.source`). Imports no driver."""

from __future__ import annotations

from typing import ClassVar, Literal

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
INTERVAL_HANDLING_MODE = "interval.handling.mode"
INTERVAL_HANDLING_MODE_DEFAULT = "numeric"  # Debezium's (see the field's docstring)
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

LOG_MINING_SLEEP_TIME_MIN_MS = "log.mining.sleep.time.min.ms"
LOG_MINING_SLEEP_TIME_MAX_MS = "log.mining.sleep.time.max.ms"
LOG_MINING_SLEEP_TIME_DEFAULT_MS = "log.mining.sleep.time.default.ms"
LOG_MINING_SLEEP_TIME_INCREMENT_MS = "log.mining.sleep.time.increment.ms"
LOG_MINING_TRANSACTION_RETENTION_MS = "log.mining.transaction.retention.ms"
LOG_MINING_FLUSH_TABLE_NAME = "log.mining.flush.table.name"

OracleSnapshotMode = Literal[
    "always", "initial", "initial_only", "schema_only", "schema_only_recovery"
]
OracleAdapter = Literal["logminer", "xstream", "olr"]
LogMiningStrategy = Literal["redo_log_catalog", "online_catalog", "hybrid"]
LogMiningQueryFilterMode = Literal["none", "in", "regex"]
IntervalHandlingMode = Literal["numeric", "string"]


class OracleSourceConfig(SchemaFilters, RelationalSourceConfig):
    """Oracle through LogMiner."""

    KIND = SourceType.ORACLE
    INTERVAL_UNITS_SEPARATE: ClassVar[bool] = True
    """Each INTERVAL type holds one unit family (YEAR TO MONTH, DAY TO SECOND), so
    ``interval.handling.mode=numeric`` encodes it one to one: reconciliation compares it."""

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
    interval_handling_mode: IntervalHandlingMode = config_key(
        INTERVAL_HANDLING_MODE_DEFAULT, INTERVAL_HANDLING_MODE
    )
    """INTERVAL columns as ``io.debezium.time.MicroDuration`` microseconds (``numeric``,
    Debezium's default: a month is 365.25 / 12 days, lossy) or ``io.debezium.time.Interval``
    ISO-8601 text (``string``: exact, ``P1Y2M0DT0H0M0S``)."""
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

    log_mining_sleep_time_min_ms: int = config_key(0, LOG_MINING_SLEEP_TIME_MIN_MS, ge=0)
    """Shortest sleep between mining rounds (while the agent is behind)."""
    log_mining_sleep_time_max_ms: int = config_key(3000, LOG_MINING_SLEEP_TIME_MAX_MS, ge=0)
    """Longest sleep between mining rounds (once it has caught up)."""
    log_mining_sleep_time_default_ms: int = config_key(1000, LOG_MINING_SLEEP_TIME_DEFAULT_MS, ge=0)
    """First sleep between mining rounds."""
    log_mining_sleep_time_increment_ms: int = config_key(
        200, LOG_MINING_SLEEP_TIME_INCREMENT_MS, ge=0
    )
    """Step by which the sleep shrinks while behind and grows once caught up."""
    log_mining_transaction_retention_ms: int = config_key(
        0, LOG_MINING_TRANSACTION_RETENTION_MS, ge=0
    )
    """An open transaction older than this (database time) is abandoned with a warning and
    never emitted; 0 keeps every transaction until its COMMIT or ROLLBACK."""
    log_mining_flush_table_name: str = config_key(
        "LOG_MINING_FLUSH", LOG_MINING_FLUSH_TABLE_NAME, min_length=1
    )
    """Table the agent updates and commits before each mining round, so LGWR has written the
    redo up to the current SCN (created in the PDB if missing)."""

    def _connection_problem(self) -> tuple[str, str] | None:
        if not self.database_hostname and not self.database_url:
            return DATABASE_HOSTNAME, f"missing required key (or set '{DATABASE_URL}')"
        return None
