"""What the YugabyteDB agent needs from a ``yugabytedb`` source config: the settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capture.postgresql.settings import PgSourceSettings

__all__ = ["YbSourceSettings"]


@dataclass(frozen=True, slots=True)
class YbSourceSettings(PgSourceSettings):
    """The PostgreSQL agent's settings plus the plugin and the slot's LSN type.

    Build it with :meth:`from_config`; tests may build it directly.
    """

    plugin_name: str = "yboutput"
    slot_lsn_type: str = "SEQUENCE"

    @classmethod
    def from_config(cls, config: Any) -> YbSourceSettings:
        """Read a validated :class:`capture.yugabytedb.config.YugabyteDbSourceConfig`."""
        return cls(
            **cls.slot_fields(config),
            plugin_name=str(config.plugin_name),
            slot_lsn_type=str(config.slot_lsn_type),
        )
