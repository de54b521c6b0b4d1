"""The table definitions in force for the MySQL / MariaDB agent: :class:`TableTracker`.

Every DDL and every snapshot's ``SHOW CREATE TABLE`` is kept in the schema history
(:mod:`capture.mysql.history`); each start replays it below the resume point, so every row is
decoded with the definition in force when it was written (see :mod:`capture.mysql.source`, step 2).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from bronze.position_base import Phase
from capture.captured_table import CatalogColumn
from capture.column_types import ColumnType
from capture.mysql.agent import CONNECTOR, MySqlAgent, MySqlTable
from capture.mysql.ddl import DdlParseError, SchemaState
from capture.mysql.history import HistoryEntry
from capture.mysql.position import MySqlPosition
from capture.mysql.schema import TableDef
from capture.mysql.settings import SYSTEM_DATABASES
from capture.mysql.types import (
    column_default,
    column_type,
)
from pipeline.errors import CaptureError, CaptureStopped, InternalError, PipelineError
from pipeline.sql import qualified, quote_identifier

__all__ = ["TableTracker"]

logger = logging.getLogger(__name__)


class TableTracker(MySqlAgent):
    """Schema history replay and recording, and the captured tables built from it."""

    def _replay_history(self) -> None:
        """Rebuild the table definitions from the history entries below the resume point."""
        if self._history is None or self._resume is None:
            raise InternalError(f"source {self.name}: schema history replay before the resume")
        limit = _position(
            self._resume.file_number, self._resume.pos, Phase.STREAM, 0, 0, None, None
        )
        state = SchemaState()
        for entry in self._history.before(limit):
            if entry.kind == "reset":
                state = SchemaState()
            elif entry.ddl:
                try:
                    state.apply(entry.ddl, entry.database, entry.ts_ms)
                except DdlParseError as exc:
                    raise CaptureStopped(
                        f"source {self.name}: schema history entry at "
                        f"{entry.position.to_json()} no longer parses: {exc}"
                    ) from exc
        self._schema = state
        self._tables.clear()

    def _record_history(self, entries: list[HistoryEntry]) -> None:
        # Written before the batch is committed: the replay ignores entries beyond bronze's
        # offset, and a re-read writes nothing twice (deduplicated by position).
        if self._history is None:
            raise InternalError(f"source {self.name}: schema history written before it opened")
        self._history.append(entries)

    def _recover_schema(self) -> None:
        """``schema_only_recovery``: rebuild the history from the tables as they are now, at the
        offset (unsafe if DDL ran since the offset, as Debezium warns)."""
        if self._resume is None:
            raise InternalError(f"source {self.name}: schema recovery without an offset")
        logger.warning(
            "source %s: schema_only_recovery: recording the current table definitions at %s:%d",
            self.name,
            self._resume.file,
            self._resume.pos,
        )
        ddls = self._read_schemas(self._side())
        point = _position(
            self._resume.file_number,
            self._resume.pos,
            Phase.SNAPSHOT,
            0,
            0,
            self._resume.file,
            None,
        )
        self._record_history(self._snapshot_entries(point, ddls, int(time.time() * 1000)))

    def _read_schemas(self, conn: Any) -> list[tuple[str, str, str]]:
        """``(database, table, SHOW CREATE TABLE)`` of every captured base table."""
        out = []
        with conn.cursor() as cur:
            cur.execute("SHOW DATABASES")
            databases = [str(r[0]) for r in cur.fetchall()]
            for db in databases:
                if db in SYSTEM_DATABASES:
                    continue
                cur.execute(
                    f"SHOW FULL TABLES FROM {quote_identifier(db)} WHERE Table_type = 'BASE TABLE'"
                )
                for table, _kind in cur.fetchall():
                    if not self.settings.table_filter.table(db, str(table)):
                        continue
                    cur.execute(f"SHOW CREATE TABLE {qualified(db, str(table))}")
                    out.append((db, str(table), str(cur.fetchone()[1])))
        return out

    def _snapshot_entries(
        self, point: MySqlPosition, ddls: list[tuple[str, str, str]], ts_ms: int
    ) -> list[HistoryEntry]:
        entries = [HistoryEntry(point, "reset", None, None, None, ts_ms)]
        entries += [HistoryEntry(point, "snapshot", db, ddl, None, ts_ms) for db, _t, ddl in ddls]
        return entries

    def _captured(self, db: str, table: str) -> MySqlTable | PipelineError | None:
        """The captured table (None: not captured; an error: its rows must be quarantined)."""
        key = (db, table)
        if key in self._tables:
            return self._tables[key]
        result: MySqlTable | PipelineError | None
        if not self.settings.table_filter.table(db, table):
            result = None
        else:
            definition = self._schema.table(db, table)
            if definition is None:
                result = CaptureError(
                    f"table {db}.{table} is not in the schema history (created before the "
                    "binlog the agent read, or by DDL it could not see)"
                )
            else:
                try:
                    result = self._build_table(definition)
                except PipelineError as exc:
                    result = exc
        self._tables[key] = result
        return result

    def _build_table(self, definition: TableDef) -> MySqlTable:
        s = self.settings
        keys = {k.lower() for k in definition.key_columns()}
        columns = [
            CatalogColumn(
                c.name, 0, -1, not_null=not c.nullable, in_primary_key=c.name.lower() in keys
            )
            for c in definition.columns
        ]
        types: list[ColumnType] = [
            column_type(c, definition.charset, s.handling) for c in definition.columns
        ]
        defaults = [
            column_default(c, t, definition.charset)
            for c, t in zip(definition.columns, types, strict=True)
        ]
        return MySqlTable(
            definition,
            s.server_name,
            definition.database,
            definition.name,
            columns,
            types,
            **s.rules.table_options(CONNECTOR, s.table_filter, self.ORIGIN),
            defaults=defaults,
        )


_position = MySqlPosition._new
