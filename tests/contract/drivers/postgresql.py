"""Contract driver of the PostgreSQL connector: a schema, slot and publication of the session's
PostgreSQL (``pg_dsn``), which it restarts with ``pg_ctl``."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import psycopg

from tests.contract.drivers.base import Capability, SqlDriver
from tests.fix_servers import restart_postgres
from tests.integration.test_pg_capture import pg_corner, raw_config

__all__ = ["PostgresDriver"]

NAN_KEY_REASON = "key column value 'NaN'"
"""A numeric key PostgreSQL accepts and a Connect key cannot carry."""


class PostgresDriver(SqlDriver):
    """The history in a private schema; the slot is the acknowledged position."""

    CONNECTOR: ClassVar[str] = "postgresql"
    SOURCE_NAME: ClassVar[str] = "pg"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset(Capability)
    MARKERS: ClassVar[tuple[str, ...]] = ("postgres",)
    SERVER_FIXTURE: ClassVar[str | None] = "pg_dsn"
    RESTARTABLE_SERVER_FIXTURE: ClassVar[str | None] = "pg_dsn"

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        self._corner = contextlib.ExitStack()
        self.pg = self._corner.enter_context(contextlib.contextmanager(pg_corner)(server))

    def connect(self) -> Any:
        """A psycopg connection."""
        return psycopg.connect(self.pg.dsn)

    def qualified(self, table: str) -> str:
        """``<schema>.<table>``."""
        return f"{self.pg.schema}.{table}"

    def setup(self) -> None:
        """The history's tables and a ``poison`` table with a numeric key."""
        super().setup()
        self.execute(f"CREATE TABLE {self.qualified('poison')} (id numeric PRIMARY KEY)")

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The schema's tables, through the corner's slot and publication."""
        return raw_config(self.pg, **extra)

    def collection(self, table: str) -> str:
        """``<schema>.<table>``."""
        return self.qualified(table)

    def poison(self) -> str:
        """A row whose key is ``NaN``."""
        self.execute(f"INSERT INTO {self.qualified('poison')} VALUES ('NaN')")
        return NAN_KEY_REASON

    def restart(self) -> None:
        """``pg_ctl restart -m fast``."""
        restart_postgres(self.pg.dsn)

    def acknowledged(self) -> int:
        """The slot's ``confirmed_flush_lsn``."""
        found = self.pg.query(
            "SELECT (confirmed_flush_lsn - '0/0')::bigint FROM pg_replication_slots"
            " WHERE slot_name = %s",
            (self.pg.slot,),
        )
        return int(found[0][0])

    def offset_position(self, offset: Mapping[str, Any]) -> int:
        """The offset's LSN."""
        return int(self.pg.query("SELECT (%s::pg_lsn - '0/0')::bigint", (offset["lsn"],))[0][0])

    def close(self) -> None:
        """Drop the slot, publication and schema."""
        self._corner.close()
