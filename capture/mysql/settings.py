"""What the MySQL / MariaDB agent needs from a ``mysql`` source config: the settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from capture.captured_table import AgentRules, TableFilter
from capture.mysql.config import default_server_id
from capture.mysql.types import (
    MySqlHandling,
)
from capture.signals import SignalSettings

__all__ = ["SNAPSHOT_FETCH_SIZE", "SYSTEM_DATABASES", "MySqlSettings", "default_server_id"]

SYSTEM_DATABASES = frozenset({"mysql", "information_schema", "performance_schema", "sys"})
"""Never captured, whatever the include lists say."""

SNAPSHOT_FETCH_SIZE = 10_240
"""Rows per snapshot query (Debezium's ``snapshot.fetch.size``)."""


@dataclass(frozen=True, slots=True)
class MySqlSettings:
    """Everything the agent needs from a ``mysql`` source config (tests may build it directly).

    ``password`` is the config's ``SecretStr`` and is revealed only when connecting.
    """

    host: str
    port: int
    user: str
    password: Any = None
    server_name: str = "mysql"
    server_id: int = 5400
    server_id_given: bool = False
    """``database.server.id`` was set (else ``server_id`` is the default drawn from the name)."""
    snapshot_mode: str = "initial"
    snapshot_locking_mode: str = "minimal"
    table_filter: TableFilter = field(default_factory=lambda: TableFilter(system=SYSTEM_DATABASES))
    handling: MySqlHandling = field(default_factory=MySqlHandling)
    rules: AgentRules = field(default_factory=AgentRules)
    include_schema_changes: bool = True
    include_query: bool = False
    connect_timeout_s: float = 30.0
    snapshot_fetch_size: int = SNAPSHOT_FETCH_SIZE
    signals: SignalSettings = field(default_factory=SignalSettings)

    @classmethod
    def from_config(cls, config: Any) -> MySqlSettings:
        """Read a validated :class:`capture.mysql.config.MySqlSourceConfig`."""
        server_id = config.database_server_id
        return cls(
            host=str(config.database_hostname),
            port=int(config.database_port),
            user=str(config.database_user),
            password=config.database_password,
            server_name=str(config.logical_name),
            server_id=int(server_id) if server_id else default_server_id(config.name),
            server_id_given=bool(server_id),
            snapshot_mode=str(config.snapshot_mode),
            snapshot_locking_mode=str(config.snapshot_locking_mode),
            table_filter=TableFilter.from_config(config, SYSTEM_DATABASES),
            handling=MySqlHandling.from_config(config),
            rules=AgentRules.from_config(config),
            signals=SignalSettings.from_config(config),
            include_schema_changes=bool(config.include_schema_changes),
            include_query=bool(config.include_query),
            connect_timeout_s=int(config.connect_timeout_ms) / 1000,
        )

    def connection(self) -> dict[str, Any]:
        """PyMySQL connection arguments (the password revealed here only)."""
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": "" if self.password is None else self.password.get_secret_value(),
            "connect_timeout": max(1, int(self.connect_timeout_s)),
            "charset": "utf8mb4",
        }
        return kwargs

    def __repr__(self) -> str:
        return (
            f"MySqlSettings(host={self.host!r}, port={self.port}, user={self.user!r}, "
            f"password={'***' if self.password else None}, server_id={self.server_id})"
        )
