"""Contract driver of the MySQL/MariaDB connector: a database of the session's MariaDB
(``mariadb_conn``), or of a private one (``own_mariadb``) when the test restarts the server."""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, ClassVar

import pymysql

from tests.contract.drivers.base import Capability, SqlDriver
from tests.fix_servers import OwnMariaDb
from tests.integration.test_mysql_capture import corner

__all__ = ["MySqlDriver"]

STATEMENT_REASON = "statement-format change"
"""A change logged as SQL text (``binlog_format=STATEMENT``) has no row image to land."""


class MySqlDriver(SqlDriver):
    """The history in a private database; the binlog keeps no position per reader."""

    CONNECTOR: ClassVar[str] = "mysql"
    SOURCE_NAME: ClassVar[str] = "my"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset(
        {
            Capability.SNAPSHOT,
            Capability.RESTART,
            Capability.REPORTS_LOG,
            Capability.INCREMENTAL_SNAPSHOT,
        }
    )
    MARKERS: ClassVar[tuple[str, ...]] = ("mysql",)
    SERVER_FIXTURE: ClassVar[str | None] = "mariadb_conn"
    RESTARTABLE_SERVER_FIXTURE: ClassVar[str | None] = "own_mariadb"
    INT_TYPE: ClassVar[str] = "INT"
    TEXT_TYPE: ClassVar[str] = "VARCHAR(40)"

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        self._own = server if isinstance(server, OwnMariaDb) else None
        settings = self._own.settings if self._own is not None else server
        self._corner = contextlib.ExitStack()
        self.my = self._corner.enter_context(contextlib.contextmanager(corner)(settings))

    def connect(self) -> Any:
        """A PyMySQL connection."""
        return pymysql.connect(**self.my.conn)

    def qualified(self, table: str) -> str:
        """``<database>.<table>``."""
        return f"{self.my.database}.{table}"

    def setup(self) -> None:
        """The history's tables and a ``poison`` table."""
        super().setup()
        self.execute(f"CREATE TABLE {self.qualified('poison')} (id INT PRIMARY KEY)")

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The corner's database."""
        return self.my.raw(**extra)

    def collection(self, table: str) -> str:
        """``<database>.<table>``."""
        return self.qualified(table)

    def poison(self) -> str:
        """An insert logged in statement format."""
        self.execute(
            "SET SESSION binlog_format = 'STATEMENT'",
            f"INSERT INTO {self.qualified('poison')} VALUES (1)",
        )
        return STATEMENT_REASON

    def restart(self) -> None:
        """Restart the private server (SIGTERM, start on the same data)."""
        if self._own is None:
            raise NotImplementedError("the shared MariaDB is never restarted; use own_mariadb")
        self._own.restart()

    def close(self) -> None:
        """Drop the database."""
        self._corner.close()
