"""What the SQL Server agent reads off a ``sqlserver`` source config: the settings."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from capture.captured_table import AgentRules, TableFilter
from capture.sqlserver.types import SqlServerHandling

__all__ = ["DBAPI_ENV", "ODBC_DRIVER", "SqlServerSettings"]

DBAPI_ENV = "MEDALLION_SQLSERVER_DBAPI"
"""Names a module to use instead of ``pyodbc`` (its ``connect`` and exceptions): the tests set
it to the CDC model's stand-in (``tests.mssqlmodel.dbapi``). Unset in production."""
ODBC_DRIVER = "FreeTDS"
"""The ODBC driver pyodbc loads (Debian's ``tdsodbc`` registers it under this name)."""
SYSTEM_SCHEMAS = frozenset({"cdc", "sys", "INFORMATION_SCHEMA", "guest"})
"""Never captured, whatever the lists say."""
SNAPSHOT_FETCH_SIZE = 2000
"""Debezium's ``snapshot.fetch.size`` default for SQL Server."""
MAX_ITERATION_TRANSACTIONS = 500
"""Debezium's ``max.iteration.transactions``: commit LSNs per streaming window."""


@dataclass(frozen=True, slots=True)
class SqlServerSettings:
    """Everything the agent needs from a ``sqlserver`` source config.

    Build it with :meth:`from_config`. ``password`` is the config's ``SecretStr``, revealed only
    in the connection string handed to the driver.
    """

    host: str
    port: int
    user: str
    databases: tuple[str, ...]
    password: Any = None
    server_name: str = "sqlserver"
    snapshot_mode: str = "initial"
    isolation: str = "repeatable_read"
    table_filter: TableFilter = field(default_factory=TableFilter)
    handling: SqlServerHandling = field(default_factory=SqlServerHandling)
    rules: AgentRules = field(default_factory=AgentRules)
    processing_time: bool = False
    include_schema_changes: bool = True
    dbapi_module: str = "pyodbc"
    snapshot_fetch_size: int = SNAPSHOT_FETCH_SIZE
    max_iteration_transactions: int = MAX_ITERATION_TRANSACTIONS

    @classmethod
    def from_config(cls, config: Any) -> SqlServerSettings:
        """Read a validated :class:`capture.sqlserver.config.SqlServerSourceConfig`."""
        return cls(
            host=str(config.database_hostname or "localhost"),
            port=int(config.database_port),
            user=str(config.database_user),
            databases=tuple(config.database_names),
            password=config.database_password,
            server_name=str(config.logical_name),
            snapshot_mode=str(config.snapshot_mode),
            isolation=str(config.snapshot_isolation_mode),
            table_filter=TableFilter.from_config(config, system=SYSTEM_SCHEMAS),
            handling=SqlServerHandling.from_config(config),
            rules=AgentRules.from_config(config),
            processing_time=str(config.source_timestamp_mode) == "processing",
            include_schema_changes=bool(config.include_schema_changes),
            dbapi_module=os.environ.get(DBAPI_ENV) or "pyodbc",
        )
