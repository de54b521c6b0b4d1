"""What the Db2 agent reads off a ``db2`` source config: the settings."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from capture.captured_table import AgentRules, TableFilter
from capture.column_types import ValueModes

__all__ = ["ASN_SCHEMA", "DBAPI_ENV", "ODBC_DRIVER", "Db2Settings"]

DBAPI_ENV = "MEDALLION_DB2_DBAPI"
"""Names a module to use instead of ``pyodbc`` (its ``connect`` and exceptions): the tests set
it to the ASN model's stand-in (``tests.db2model.dbapi``). Unset in production."""
ODBC_DRIVER = "IBM DB2 ODBC DRIVER"
"""The ODBC driver pyodbc loads (the name IBM's Data Server Driver registers)."""
ASN_SCHEMA = "ASNCDC"
"""Schema of the ASN control tables and CD tables (Debezium's setup scripts create them there)."""
SYSTEM_SCHEMAS = frozenset(
    {ASN_SCHEMA, "SYSIBM", "SYSCAT", "SYSSTAT", "SYSFUN", "SYSPROC", "SYSTOOLS", "SYSIBMADM"}
)
"""Never captured, whatever the lists say."""
SNAPSHOT_FETCH_SIZE = 2000
"""Debezium's ``snapshot.fetch.size`` default."""
MAX_ITERATION_TRANSACTIONS = 500
"""Units of work read from ``IBMSNAP_UOW`` per streaming window."""


@dataclass(frozen=True, slots=True)
class Db2Settings:
    """Everything the agent needs from a ``db2`` source config.

    Build it with :meth:`from_config`. ``password`` is the config's ``SecretStr``, revealed only
    in the connection string handed to the driver.
    """

    host: str
    port: int
    user: str
    database: str
    password: Any = None
    server_name: str = "db2"
    snapshot_mode: str = "initial"
    isolation: str = "repeatable_read"
    table_filter: TableFilter = field(default_factory=TableFilter)
    handling: ValueModes = field(default_factory=ValueModes)
    rules: AgentRules = field(default_factory=AgentRules)
    include_schema_changes: bool = True
    dbapi_module: str = "pyodbc"
    odbc_driver: str = ODBC_DRIVER
    snapshot_fetch_size: int = SNAPSHOT_FETCH_SIZE

    @classmethod
    def from_config(cls, config: Any) -> Db2Settings:
        """Read a validated :class:`capture.db2.config.Db2SourceConfig`."""
        return cls(
            host=str(config.database_hostname or "localhost"),
            port=int(config.database_port),
            user=str(config.database_user),
            database=str(config.database_dbname),
            password=config.database_password,
            server_name=str(config.logical_name),
            snapshot_mode=str(config.snapshot_mode),
            isolation=str(config.snapshot_isolation_mode),
            table_filter=TableFilter.from_config(config, system=SYSTEM_SCHEMAS),
            handling=ValueModes.from_config(config),
            rules=AgentRules.from_config(config),
            include_schema_changes=bool(config.include_schema_changes),
            dbapi_module=os.environ.get(DBAPI_ENV) or "pyodbc",
        )
