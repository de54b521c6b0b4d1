"""What the YugabyteDB agent needs from a ``yugabytedb`` source config: the settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from capture.postgresql.settings import PgSourceSettings
from pipeline.errors import CaptureError

__all__ = ["YbSourceSettings", "tservers"]


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
        fields = cls.slot_fields(config)
        fields["host"], fields["port"] = tservers(str(config.database_hostname), fields["port"])
        return cls(
            **fields,
            plugin_name=str(config.plugin_name),
            slot_lsn_type=str(config.slot_lsn_type),
        )


def tservers(hostname: str, port: int) -> tuple[str, int]:
    """``database.hostname`` as libpq takes it: ``IP1:PORT1,IP2:PORT2`` (any TServer; spec B2)
    becomes the host list ``IP1,IP2`` (libpq tries them in turn) and their one port.

    >>> tservers("10.0.0.1:5433,10.0.0.2:5433", 5432)
    ('10.0.0.1,10.0.0.2', 5433)
    >>> tservers("yb1,yb2", 5433)
    ('yb1,yb2', 5433)

    Raises:
        CaptureError: The TServers listen on different ports (one ``database.port`` here).
    """
    hosts, ports = [], set()
    for entry in (e.strip() for e in hostname.split(",") if e.strip()):
        host, sep, given = entry.rpartition(":")
        # A bare IPv6 address has several colons and no port; "[addr]:port" names one.
        bracketed = host.startswith("[") and host.endswith("]")
        if sep and given.isdigit() and (bracketed or ":" not in host):
            hosts.append(host.strip("[]"))
            ports.add(int(given))
        else:
            hosts.append(entry)
            ports.add(port)
    if len(ports) > 1:
        raise CaptureError(
            f"database.hostname {hostname!r}: the TServers listen on different ports "
            f"{sorted(ports)}; list hosts of one port, with database.port"
        )
    return ",".join(hosts), ports.pop() if ports else port
