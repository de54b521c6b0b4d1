"""What the PostgreSQL agent needs from a ``postgresql`` source config: the settings.."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from capture.captured_table import AgentRules
from capture.postgresql.schema import TableFilter
from capture.postgresql.types import ValueHandling
from capture.signals import SignalSettings

__all__ = ["SNAPSHOT_FETCH_SIZE", "PgSourceSettings"]

SNAPSHOT_FETCH_SIZE = 10_240
"""Rows per ``FETCH`` of the snapshot cursor (Debezium's ``snapshot.fetch.size`` for PG)."""


@dataclass(frozen=True, slots=True)
class PgSourceSettings:
    """Everything the agent needs from a ``postgresql`` source config.

    Build it with :meth:`from_config`; tests may build it directly. ``password`` is the config's
    ``SecretStr`` and is revealed only when connecting.
    """

    host: str
    port: int
    user: str
    dbname: str
    password: Any = None
    server_name: str = "postgres"
    slot_name: str = "debezium"
    publication_name: str = "dbz_publication"
    publication_autocreate_mode: str = "all_tables"
    snapshot_mode: str = "initial"
    table_filter: TableFilter = field(default_factory=TableFilter)
    handling: ValueHandling = field(default_factory=ValueHandling)
    rules: AgentRules = field(default_factory=AgentRules)
    toasted_value_placeholder: str = "__debezium_unavailable_value"
    slot_drop_on_stop: bool = False
    snapshot_fetch_size: int = SNAPSHOT_FETCH_SIZE
    signals: SignalSettings = field(default_factory=SignalSettings)

    @classmethod
    def from_config(cls, config: Any) -> PgSourceSettings:
        """Read a validated :class:`capture.postgresql.config.PostgresSourceConfig`."""
        return cls(
            **cls.slot_fields(config),
            signals=SignalSettings.from_config(config),
            toasted_value_placeholder=str(config.toasted_value_placeholder),
        )

    @staticmethod
    def slot_fields(config: Any) -> dict[str, Any]:
        """The fields every logical-replication config has (PostgreSQL's and YugabyteDB's)."""
        return {
            "host": str(config.database_hostname),
            "port": int(config.database_port),
            "user": str(config.database_user),
            "dbname": str(config.database_dbname),
            "password": config.database_password,
            "server_name": str(config.logical_name),
            "slot_name": str(config.slot_name),
            "publication_name": str(config.publication_name),
            "publication_autocreate_mode": str(config.publication_autocreate_mode),
            "snapshot_mode": str(config.snapshot_mode),
            "table_filter": TableFilter.from_config(config),
            "handling": ValueHandling.from_config(config),
            "rules": AgentRules.from_config(config),
            "slot_drop_on_stop": bool(config.slot_drop_on_stop),
        }
