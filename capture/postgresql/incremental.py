"""The PostgreSQL agent's incremental snapshots: :class:`IncrementalReader`.

The hooks of :class:`capture.incremental_snapshot.IncrementalSnapshots` for PostgreSQL: chunks
are read on the side connection (each ``SELECT`` its own snapshot, between the two watermark
inserts, each committed at once), as the text the output functions write, like the initial
snapshot and pgoutput; a chunk's rows take the high watermark's place in the log, ``(commit LSN
of its transaction, stream, its LSN, 0..n-1)``: the watermark's transaction holds nothing else.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
from psycopg import sql

from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.postgresql.agent import PgTx
from capture.postgresql.position import PostgresPosition
from capture.postgresql.schema import TableSchema
from capture.postgresql.snapshot import text_cursor
from capture.postgresql.stream import StreamReader
from capture.signals import Signal
from pipeline.errors import InternalError

__all__ = ["IncrementalReader"]

logger = logging.getLogger(__name__)


class IncrementalReader(StreamReader):
    """Chunks, watermarks and positions of the PostgreSQL agent's incremental snapshots."""

    def _incremental_table(self, collection: str) -> TableSchema | None:
        schema, _, name = collection.partition(".")
        if not name or not self.settings.table_filter.table(schema, name):
            return None
        return self._table_schema(self._side(), schema, name, track=False)

    @staticmethod
    def _pg_table(table: CapturedTable) -> TableSchema:
        if not isinstance(table, TableSchema):
            raise InternalError("capture.postgresql.incremental: expected a TableSchema")
        return table

    @staticmethod
    def _key_list(ts: TableSchema) -> sql.Composable:
        return sql.SQL(", ").join(sql.Identifier(ts.names[i]) for i in ts.key_idx)

    def _incremental_bound(self, table: CapturedTable, condition: str | None) -> list[Any] | None:
        ts = self._pg_table(table)
        # Aliased: ORDER BY would take a bare name for the (text) output column.
        keys = sql.SQL(", ").join(
            sql.SQL("{}::text AS {}").format(sql.Identifier(ts.names[i]), sql.Identifier(f"k{n}"))
            for n, i in enumerate(ts.key_idx)
        )
        descending = sql.SQL(", ").join(
            sql.SQL("{} DESC").format(sql.Identifier(ts.names[i])) for i in ts.key_idx
        )
        query = sql.SQL("SELECT {} FROM {}{} ORDER BY {} LIMIT 1").format(
            keys, sql.Identifier(ts.schema, ts.table), _where(condition), descending
        )
        row = self._side().execute(query).fetchone()
        return None if row is None else list(row)

    def _incremental_read(
        self,
        table: CapturedTable,
        after: list[Any] | None,
        until: list[Any],
        condition: str | None,
        limit: int,
    ) -> list[Any]:
        ts = self._pg_table(table)
        order = self._key_list(ts)
        marks = sql.SQL(", ").join(sql.Placeholder() for _ in ts.key_idx)
        bounds = [sql.SQL("({}) <= ({})").format(order, marks)]
        params = list(until)
        if after is not None:
            bounds.append(sql.SQL("({}) > ({})").format(order, marks))
            params += list(after)
        if condition:
            bounds.append(sql.SQL("({})").format(sql.SQL(condition)))
        query = sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT {}").format(
            sql.SQL(", ").join(sql.Identifier(n) for n in ts.names),
            sql.Identifier(ts.schema, ts.table),
            sql.SQL(" AND ").join(bounds),
            order,
            sql.Literal(limit),
        )
        cur = text_cursor(self._side(), ts)
        try:
            cur.execute(query, params)
            return [list(row) for row in cur.fetchall()]
        finally:
            cur.close()

    def _write_signal(self, signal: Signal) -> None:
        target = self.signals.table
        if target is None:
            raise InternalError("capture.postgresql.incremental: no signaling table")
        self._side().execute(
            sql.SQL("INSERT INTO {} (id, type, data) VALUES (%s, %s, %s)").format(
                sql.Identifier(*target)
            ),
            (signal.id, signal.type, orjson.dumps(dict(signal.data)).decode()),
        )

    def _incremental_source(self, table: CapturedTable, at: Any) -> dict[str, Any]:
        tx, lsn = at
        return {**self._source(tx, self._pg_table(table), lsn), "snapshot": "incremental"}

    def _incremental_positions(self, at: Any, count: int) -> list[PostgresPosition]:
        tx, lsn = at
        if not isinstance(tx, PgTx):
            raise InternalError("capture.postgresql.incremental: expected the watermark's tx")
        positions = [_position(tx.commit_lsn, Phase.STREAM, lsn, seq) for seq in range(count)]
        if positions:
            self._last_position = positions[-1]
        return positions


def _where(condition: str | None) -> sql.Composable:
    """`` WHERE (<condition>)`` for an ``additional-conditions`` filter (SQL the signal's
    sender wrote, as in Debezium: whoever may insert signals may read the table)."""
    if not condition:
        return sql.SQL("")
    return sql.SQL(" WHERE ({})").format(sql.SQL(condition))


_position = PostgresPosition._new
