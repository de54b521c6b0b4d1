"""The MySQL / MariaDB agent's incremental snapshots: :class:`IncrementalReader`.

The hooks of :class:`capture.incremental_snapshot.IncrementalSnapshots` for MySQL: chunks are
read on a connection of their own with the snapshot's conversions (each ``SELECT`` autocommitted,
between the two watermark inserts); a chunk's rows take the high watermark's row event's place in
the binlog, ``(file, event position, stream, row, 0..n-1)``.

A table added to the include lists after the schema history was started (its ``CREATE TABLE``
predates the history, so the history never saw it) gets its current ``SHOW CREATE TABLE``
recorded at the stream's point when an incremental snapshot first names it.
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import Any, ClassVar

import orjson

from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.mysql.agent import MySqlTable
from capture.mysql.history import HistoryEntry
from capture.mysql.position import MySqlPosition
from capture.mysql.snapshot import _decode_key, _encode_key
from capture.mysql.stream import StreamReader
from capture.mysql.types import SNAPSHOT_SESSION_SQL, snapshot_connect_kwargs
from capture.signals import Signal, SignalError
from pipeline.errors import InternalError, PipelineError
from pipeline.sql import qualified, quote_identifier

__all__ = ["IncrementalReader"]

logger = logging.getLogger(__name__)


class IncrementalReader(StreamReader):
    """Chunks, watermarks and positions of the MySQL agent's incremental snapshots."""

    IDENTIFIER_QUOTE: ClassVar[str] = "`"
    BACKSLASH_ESCAPES: ClassVar[bool] = True

    def _chunks(self) -> Any:
        conn = self._chunk_conn
        if conn is None or not conn.open:
            conn = self._connect(**snapshot_connect_kwargs())
            with conn.cursor() as cur:
                for statement in SNAPSHOT_SESSION_SQL:
                    cur.execute(statement)
            self._chunk_conn = conn
        return conn

    def _incremental_table(self, collection: str) -> MySqlTable | None:
        db, _, name = collection.partition(".")
        if not name or not self.settings.table_filter.table(db, name):
            return None
        if self._schema.table(db, name) is None and not self._learn_table(db, name):
            return None
        table = self._captured(db, name)
        if isinstance(table, PipelineError):
            raise SignalError(f"table {collection}: {table}")
        return table

    def _learn_table(self, db: str, name: str) -> bool:
        """Record ``db.name``'s current definition in the schema history at the stream's point
        (a table the history never saw); False when it does not exist."""
        resume = self._resume
        if resume is None:
            raise InternalError("capture.mysql.incremental: expected resume is not None")
        with self._side().cursor() as cur:
            cur.execute(
                "SELECT 1 FROM information_schema.tables WHERE table_schema = %s "
                "AND table_name = %s AND table_type = 'BASE TABLE'",
                (db, name),
            )
            if cur.fetchone() is None:
                return False
            cur.execute(f"SHOW CREATE TABLE {qualified(db, name)}")
            ddl = str(cur.fetchone()[1])
        ts_ms = int(time.time() * 1000)
        self._schema.apply(ddl, db, ts_ms)
        # Just below the resume point, where nothing else of the history is; one seq per table.
        seq = zlib.crc32(f"{db}.{name}".encode())
        position = _position(
            resume.file_number, resume.pos - 1, Phase.STREAM, 0, seq, resume.file, None
        )
        self._pending_history.append(HistoryEntry(position, "snapshot", db, ddl, None, ts_ms))
        self._tables.pop((db, name), None)
        logger.info("source %s: table %s.%s recorded in the schema history", self.name, db, name)
        return True

    @staticmethod
    def _my_table(table: CapturedTable) -> MySqlTable:
        if not isinstance(table, MySqlTable):
            raise InternalError("capture.mysql.incremental: expected a MySqlTable")
        return table

    @staticmethod
    def _key_columns(table: MySqlTable) -> str:
        return ", ".join(quote_identifier(table.names[i]) for i in table.key_idx)

    def _incremental_bound(self, table: CapturedTable, condition: str | None) -> list[Any] | None:
        t = self._my_table(table)
        definition = t.definition
        descending = ", ".join(f"{quote_identifier(t.names[i])} DESC" for i in t.key_idx)
        where = f" WHERE ({condition})" if condition else ""
        with self._chunks().cursor() as cur:
            cur.execute(
                f"SELECT {self._key_columns(t)} FROM "
                f"{qualified(definition.database, definition.name)}{where} "
                f"ORDER BY {descending} LIMIT 1"
            )
            row = cur.fetchone()
        return None if row is None else _encode_key(row)

    def _incremental_read(
        self,
        table: CapturedTable,
        after: list[Any] | None,
        until: list[Any],
        condition: str | None,
        limit: int,
    ) -> list[Any]:
        t = self._my_table(table)
        definition = t.definition
        order = self._key_columns(t)
        marks = ", ".join(["%s"] * len(t.key_idx))
        bounds = [f"({order}) <= ({marks})"]
        params = list(_decode_key(until))
        if after is not None:
            bounds.append(f"({order}) > ({marks})")
            params += _decode_key(after)
        if condition:
            bounds.append(f"({condition})")
        cols = ", ".join(quote_identifier(c.name) for c in definition.columns)
        with self._chunks().cursor() as cur:
            cur.execute(
                f"SELECT {cols} FROM {qualified(definition.database, definition.name)} "
                f"WHERE {' AND '.join(bounds)} ORDER BY {order} LIMIT %s",
                (*params, limit),
            )
            rows = cur.fetchall()
        return [(row, [row[i] for i in t.key_idx]) for row in rows]

    def _write_signal(self, signal: Signal) -> None:
        target = self.signals.table
        if target is None:
            raise InternalError("capture.mysql.incremental: no signaling table")
        with self._side().cursor() as cur:
            cur.execute(
                f"INSERT INTO {qualified(*target)} (id, type, data) VALUES (%s, %s, %s)",
                (signal.id, signal.type, orjson.dumps(dict(signal.data)).decode()),
            )

    def _incremental_source(self, table: CapturedTable, at: Any) -> dict[str, Any]:
        _file_number, start, row_index, tx = at
        return {
            **self._source(self._my_table(table), start, row_index, tx.gtid, tx.ts_ms, tx.thread),
            "snapshot": "incremental",
        }

    def _incremental_positions(self, at: Any, count: int) -> list[MySqlPosition]:
        file_number, start, row_index, tx = at
        positions = [
            _position(file_number, start, Phase.STREAM, row_index, seq, self._file, tx.gtid)
            for seq in range(count)
        ]
        if positions:
            self._last_position = positions[-1]
        return positions


_position = MySqlPosition._new
