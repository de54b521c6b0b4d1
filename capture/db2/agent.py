"""State, connection and registrations of the Db2 agent: :class:`Db2Agent`.

The agent is one :class:`~capture.db2.source.Db2Source`, composed of
:class:`~capture.db2.snapshot.SnapshotReader`, :class:`~capture.db2.stream.StreamReader` and
:class:`~capture.db2.current.CurrentReader`, all on this base.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, ClassVar

from capture.captured_table import CapturedTable, CatalogColumn
from capture.database_source import DatabaseSource, OpenTransaction
from capture.db2 import connection as q
from capture.db2.connection import Db2Session
from capture.db2.settings import Db2Settings
from capture.db2.types import Db2Column, column_type
from capture.errors_db2 import DB2
from capture.server_errors import ServerErrors
from capture.sql_defaults import DB2_DEFAULTS, column_default

__all__ = ["CONNECTOR", "ZERO_LSN", "Db2Agent", "Db2Tx", "Registration", "format_lsn", "lsn"]

logger = logging.getLogger(__name__)

CONNECTOR = "db2"
ZERO_LSN = bytes(16)
_CHARACTER_TYPES = frozenset({"CHARACTER", "CHAR", "VARCHAR", "LONG VARCHAR"})
"""``TYPENAME``s that hold bytes when ``FOR BIT DATA`` (``CODEPAGE`` 0)."""
IBMSNAP_COLUMNS = 3
"""``IBMSNAP_COMMITSEQ``, ``IBMSNAP_INTENTSEQ``, ``IBMSNAP_OPERATION`` lead every CD table."""


def lsn(value: Any) -> bytes:
    """A fetched ``VARCHAR(16) FOR BIT DATA`` LSN as 16 bytes (older 10-byte LSNs left-padded,
    so they compare as the same numbers)."""
    return bytes(value).rjust(16, b"\x00")


def format_lsn(value: bytes) -> str:
    """``00000000:00000000:000000000048fca5`` (Debezium's Db2 ``Lsn`` text)."""
    digits = value.hex()
    return f"{digits[:8]}:{digits[8:16]}:{digits[16:]}"


def parse_lsn(text: str) -> bytes:
    """The inverse of :func:`format_lsn`."""
    return bytes.fromhex(text.replace(":", ""))


@dataclass(slots=True)
class Registration:
    """One registered source table (a row of ``IBMSNAP_REGISTER``) and its CD table.

    Attributes:
        cd_owner: The CD table's schema.
        cd_table: The CD table's name.
        start: ``CD_OLD_SYNCHPOINT``: capture writes the table's changes committed after it
            (set when capture was started or reinitialised after ``ADDTABLE``).
        table: Schemas and payload builders for the CD table's columns.
    """

    cd_owner: str
    cd_table: str
    start: bytes
    table: CapturedTable


@dataclass(slots=True)
class Db2Tx(OpenTransaction):
    """The unit of work being read, with its commit sequence."""

    commit: bytes = ZERO_LSN


class Db2Agent(DatabaseSource):
    """The connection, position and registrations of one Db2 agent.

    Args:
        name: The configured source name.
        settings: Connection, filters and value handling.
    """

    KIND: ClassVar[str] = CONNECTOR
    ORIGIN = "db2"
    SERVER_ERRORS: ClassVar[ServerErrors | None] = DB2
    """Applied where pyodbc raises: each :class:`Db2Session` classifies its own errors."""

    def __init__(self, name: str, settings: Db2Settings) -> None:
        super().__init__(name)
        self.partition = settings.server_name
        self.settings = settings
        self.retry_policy = settings.rules.retry
        self.masker = settings.rules.masker
        self._session: Db2Session | None = None
        self._lsn = ZERO_LSN
        """Commit sequence of the last unit of work read whole (or the snapshot's point)."""
        self._cut: tuple[bytes, int] | None = None
        """``(commit sequence, records landed)`` of a unit of work cut across batches."""
        self._waiting: set[tuple[str, str]] = set()
        """Registered tables capture has not started yet (told once)."""
        self._width = 16
        """Bytes of an LSN as this database's ASN tables hold them (16; 10 in older ones)."""
        self._known: dict[str, str] = {}
        """Start LSN of each registration read up to ``_lsn``: a new one, or a new start of a
        table registered again (the offline schema-update procedure), gets a schema-change
        record."""

    def _conn(self) -> Db2Session:
        if self._session is None:
            self._session = Db2Session(self.settings, self.name)
        return self._session

    def _close_connections(self) -> None:
        if self._session is not None:
            self._session.close()
            self._session = None

    def _read_lsn(self, value: Any) -> bytes:
        """A fetched LSN as 16 bytes; it also tells the database's LSN width."""
        self._width = len(bytes(value))
        return lsn(value)

    def _wire(self, value: bytes) -> bytes:
        """A 16-byte LSN as the database holds it (the width its tables compare at)."""
        return value[16 - self._width :]

    def _text(self, value: bytes) -> str:
        """An LSN's text as Debezium prints the bytes the database holds."""
        return format_lsn(self._wire(value))

    def _max_lsn(self) -> bytes | None:
        """Everything at or below it is in the CD tables; None: capture has never run."""
        session = self._conn()
        value = session.one(q.MAX_LSN)
        session.end()
        return None if value is None else self._read_lsn(value)

    def _registrations(self) -> list[Registration]:
        """The registered tables the filters keep and capture has started, oldest first."""
        session = self._conn()
        out = []
        for schema, table, cd_owner, cd_table, start, state in session.all(q.REGISTRATIONS):
            schema, table = str(schema).strip(), str(table).strip()
            if not self.settings.table_filter.table(schema, table):
                continue
            if start is None:
                if (schema, table) in self._waiting:
                    continue
                self._waiting.add((schema, table))
                logger.warning(
                    "source %s: %s.%s is registered but ASN capture has not started it yet "
                    "(VALUES ASNCDC.ASNCDCSERVICES('reinit','asncdc'))",
                    self.name,
                    schema,
                    table,
                )
                continue
            if str(state).strip() != "A":
                logger.debug("source %s: %s.%s is registered INACTIVE", self.name, schema, table)
            cd = (str(cd_owner).strip(), str(cd_table).strip())
            out.append(Registration(*cd, self._read_lsn(start), self._captured(schema, table, *cd)))
        session.end()
        return sorted(out, key=lambda r: (r.start, r.table.collection))

    def _captured(self, schema: str, table: str, cd_owner: str, cd_table: str) -> CapturedTable:
        """The table as its CD table carries it: the CD table's columns after the three
        ``IBMSNAP_`` ones (a column added to the source shows once the CD table has it), the key
        from the source table's catalog."""
        session = self._conn()
        described = session.all(q.COLUMNS, (schema, table))
        keys = {str(r[0]): int(r[5]) for r in described if r[5] is not None}
        # SYSCAT.COLUMNS.DEFAULT of the source table (the CD table has none); NULL: no DEFAULT.
        clauses = {str(r[0]): None if r[7] is None else str(r[7]) for r in described}
        cd_columns = session.all(q.COLUMNS, (cd_owner, cd_table))[IBMSNAP_COLUMNS:]
        s = self.settings
        columns, types, defaults = [], [], []
        for name, typename, length, scale, nulls, _keyseq, codepage, _default in cd_columns:
            fact = Db2Column(
                str(name),
                str(typename).strip().upper(),
                int(length or 0),
                int(scale or 0),
                str(nulls).strip() == "Y",
                keys.get(str(name)),
                codepage == 0 and str(typename).strip().upper() in _CHARACTER_TYPES,
            )
            columns.append(
                CatalogColumn(fact.name, 0, 0, not fact.nullable, fact.key_seq is not None)
            )
            converted = column_type(fact, s.handling)
            types.append(converted)
            defaults.append(
                column_default(
                    clauses.get(fact.name),
                    converted,
                    nullable=fact.nullable,
                    rules=DB2_DEFAULTS,
                )
            )
        return CapturedTable(
            s.server_name,
            schema,
            table,
            columns,
            types,
            defaults=defaults,
            **s.rules.table_options(CONNECTOR, s.table_filter, self.ORIGIN),
        )

    def _source(
        self,
        table: CapturedTable,
        ts_ms: int,
        snapshot: str,
        commit: str | None,
        change: str | None,
    ) -> dict[str, Any]:
        """The ``source`` block (the guide's Db2 fields)."""
        return {
            **self._source_head(ts_ms, snapshot),
            "db": self.settings.database,
            "schema": table.schema,
            "table": table.table,
            "change_lsn": change,
            "commit_lsn": commit,
        }
