"""What the Oracle agent reads off an ``oracle`` source config: :class:`OracleSettings`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from capture.captured_table import AgentRules, TableFilter
from capture.oracle.types import OracleHandling
from pipeline.errors import ConfigError

__all__ = ["SPILL_EVENTS", "SYSTEM_SCHEMAS", "OracleSettings"]

SPILL_EVENTS = 10_000
"""Events of one open transaction kept in memory; the rest go to a file until its COMMIT."""

SYSTEM_SCHEMAS = frozenset(
    s.upper()
    for s in (
        "appqossys audsys ctxsys dvsys dbsfwuser dbsnmp qsmadmin_internal lbacsys mdsys "
        "ojvmsys olapsys orddata ordsys outln sys system wmsys xdb"
    ).split()
)
"""Schemas Debezium never captures (seed Oracle document, "Schemas excluded")."""


@dataclass(frozen=True, slots=True)
class OracleSettings:
    """Everything the agent needs from an ``oracle`` source config (:meth:`from_config`).

    ``password`` is the config's ``SecretStr``, revealed only when connecting.
    """

    host: str
    port: int
    user: str
    dbname: str
    password: Any = None
    pdb: str | None = None
    url: str | None = None
    server_name: str = "oracle"
    snapshot_mode: str = "initial"
    strategy: str = "redo_log_catalog"
    table_filter: TableFilter = field(default_factory=TableFilter)
    handling: OracleHandling = field(default_factory=OracleHandling)
    rules: AgentRules = field(default_factory=AgentRules)
    batch_min: int = 1000
    batch_max: int = 100_000
    batch_default: int = 20_000
    spill_events: int = SPILL_EVENTS
    lob_enabled: bool = False
    include_schema_changes: bool = True
    sleep_min_ms: int = 0
    sleep_max_ms: int = 3000
    sleep_default_ms: int = 1000
    sleep_increment_ms: int = 200
    retention_ms: int = 0
    flush_table: str = "LOG_MINING_FLUSH"
    placeholder: str = "__debezium_unavailable_value"

    @property
    def dsn(self) -> str:
        """``database.url`` when set (a JDBC thin URL's ``jdbc:oracle:thin:@`` prefix dropped:
        python-oracledb takes what follows, an Easy Connect string or a TNS descriptor), else
        ``host:port/dbname`` (Easy Connect)."""
        if self.url:
            return self.url.removeprefix("jdbc:oracle:thin:@")
        return f"{self.host}:{self.port}/{self.dbname}"

    @classmethod
    def from_config(cls, config: Any) -> OracleSettings:
        """Read a validated :class:`capture.oracle.config.OracleSourceConfig`."""
        if config.database_connection_adapter != "logminer":
            raise ConfigError(
                f"database.connection.adapter {config.database_connection_adapter!r} is not "
                "implemented: this agent reads LogMiner only (set it to 'logminer')",
                key_path="database.connection.adapter",
            )
        if config.log_mining_query_filter_mode != "none":
            raise ConfigError(
                f"log.mining.query.filter.mode {config.log_mining_query_filter_mode!r} is not "
                "implemented: the agent applies the filters to the mined rows itself (set it to "
                "'none', which captures the same changes)",
                key_path="log.mining.query.filter.mode",
            )
        low, high = int(config.log_mining_batch_size_min), int(config.log_mining_batch_size_max)
        first = int(config.log_mining_batch_size_default)
        if not low <= first <= high:
            raise ConfigError(
                f"log.mining.batch.size.default {first} must lie between "
                f"log.mining.batch.size.min {low} and log.mining.batch.size.max {high}",
                key_path="log.mining.batch.size.default",
            )
        sleep_low = int(config.log_mining_sleep_time_min_ms)
        sleep_high = int(config.log_mining_sleep_time_max_ms)
        sleep_first = int(config.log_mining_sleep_time_default_ms)
        if not sleep_low <= sleep_first <= sleep_high:
            raise ConfigError(
                f"log.mining.sleep.time.default.ms {sleep_first} must lie between "
                f"log.mining.sleep.time.min.ms {sleep_low} and "
                f"log.mining.sleep.time.max.ms {sleep_high}",
                key_path="log.mining.sleep.time.default.ms",
            )
        return cls(
            host=str(config.database_hostname or ""),
            port=int(config.database_port),
            user=str(config.database_user),
            dbname=str(config.database_dbname),
            password=config.database_password,
            pdb=config.database_pdb_name,
            url=config.database_url,
            server_name=str(config.logical_name),
            snapshot_mode=str(config.snapshot_mode),
            strategy=str(config.log_mining_strategy),
            table_filter=TableFilter.from_config(config, SYSTEM_SCHEMAS),
            handling=OracleHandling.from_config(config),
            rules=AgentRules.from_config(config),
            batch_min=low,
            batch_max=high,
            batch_default=first,
            lob_enabled=bool(config.lob_enabled),
            include_schema_changes=bool(config.include_schema_changes),
            sleep_min_ms=sleep_low,
            sleep_max_ms=sleep_high,
            sleep_default_ms=sleep_first,
            sleep_increment_ms=int(config.log_mining_sleep_time_increment_ms),
            retention_ms=int(config.log_mining_transaction_retention_ms),
            flush_table=str(config.log_mining_flush_table_name),
            placeholder=str(config.unavailable_value_placeholder),
        )
