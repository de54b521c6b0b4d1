"""The PostgreSQL agent's incremental snapshots: :class:`IncrementalReader`.

The hooks of :class:`capture.incremental_snapshot.IncrementalSnapshots` for PostgreSQL: chunks
are read on the side connection (each ``SELECT`` its own snapshot, between the two watermark
inserts, each committed at once), as the text the output functions write, like the initial
snapshot and pgoutput: through text ``COPY``, split in C into columns
(:mod:`capture.incremental_columnar`) when the connection speaks UTF-8, else row by row through a
text cursor; a chunk's rows take the high watermark's place in the log, ``(commit LSN
of its transaction, stream, its LSN, 0..n-1)``: the watermark's transaction holds nothing else.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import orjson
from psycopg import sql

from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.incremental_columnar import ColumnarIncremental, ColumnRows
from capture.postgresql.agent import PgTx
from capture.postgresql.position import PostgresPosition
from capture.postgresql.schema import TableSchema
from capture.postgresql.snapshot import copy_rows, text_cursor, utf8
from capture.postgresql.stream import StreamReader
from capture.signals import Signal
from pipeline.errors import InternalError

__all__ = ["IncrementalReader"]

logger = logging.getLogger(__name__)


class IncrementalReader(ColumnarIncremental, StreamReader):
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
    ) -> list[Any] | ColumnRows:
        ts = self._pg_table(table)
        side = self._side()
        if self.COLUMNAR_INCREMENTAL and self.COLUMNAR_SNAPSHOT and utf8(side):
            # COPY takes no parameters: the bounds are literals, untyped as bound parameters are.
            query = _chunk_query(ts, after, until, condition, limit, sql.Literal)
            with side.cursor() as cur:
                return ColumnRows(copy_rows(cur, query, len(ts.names), table=ts.collection))
        cur = text_cursor(side, ts)
        try:
            params = [*until, *(after or [])]
            cur.execute(_chunk_query(ts, after, until, condition, limit, _placeholder), params)
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


def _chunk_query(
    ts: TableSchema,
    after: list[Any] | None,
    until: list[Any],
    condition: str | None,
    limit: int,
    value: Callable[[Any], sql.Composable],
) -> sql.Composed:
    """The chunk's ``SELECT``: ``after < key <= until`` under ``condition``, in key order, at most
    ``limit`` rows; each bound value is written by ``value`` (a placeholder: then the values are
    the parameters, ``until``'s first; or a literal)."""
    order = sql.SQL(", ").join(sql.Identifier(ts.names[i]) for i in ts.key_idx)

    def row(values: list[Any]) -> sql.Composable:
        return sql.SQL(", ").join(value(v) for v in values)

    bounds = [sql.SQL("({}) <= ({})").format(order, row(until))]
    if after is not None:
        bounds.append(sql.SQL("({}) > ({})").format(order, row(after)))
    if condition:
        bounds.append(sql.SQL("({})").format(sql.SQL(condition)))
    return sql.SQL("SELECT {} FROM {} WHERE {} ORDER BY {} LIMIT {}").format(
        sql.SQL(", ").join(sql.Identifier(n) for n in ts.names),
        sql.Identifier(ts.schema, ts.table),
        sql.SQL(" AND ").join(bounds),
        order,
        sql.Literal(limit),
    )


def _placeholder(_value: Any) -> sql.Composable:
    return sql.Placeholder()


def _where(condition: str | None) -> sql.Composable:
    """`` WHERE (<condition>)`` for an ``additional-conditions`` filter (SQL the signal's
    sender wrote, as in Debezium: whoever may insert signals may read the table)."""
    if not condition:
        return sql.SQL("")
    return sql.SQL(" WHERE ({})").format(sql.SQL(condition))


_position = PostgresPosition._new
