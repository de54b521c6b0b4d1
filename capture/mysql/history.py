"""The MySQL agent's schema history: every DDL with its binlog position, in a Delta table.

Binlog rows carry values, not a usable table definition (names and types come from the
``TABLE_MAP`` event only with ``binlog_row_metadata=FULL``, and never nullability or keys), so
the agent keeps its own: each DDL statement it reads, and the ``SHOW CREATE TABLE`` text of
every table at a snapshot, is appended here with its position before the batch holding it is
committed to bronze. On every start (and reconnect) the agent replays the entries *below the
offset it resumes from* into a fresh :class:`capture.mysql.ddl.SchemaState`, so a row is always
decoded with the definition in force when it was written, whatever the table looks like now.

Writing ahead of bronze is safe: an entry beyond the committed offset is ignored by the replay
and written again (deduplicated by position) when its event is read again.

Layout: ``<lake>/bronze/schema_history``, one row per entry, all sources in one table::

    source, seq, position (MySqlPosition bytes), position_json, kind (reset | snapshot | ddl),
    database, ddl, gtid, ts_ms, written_at

A ``reset`` entry (written when a snapshot starts) clears the state: the snapshot's tables follow.
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

import orjson
import pyarrow as pa
from deltalake import write_deltalake
from deltalake.exceptions import TableNotFoundError

from bronze.storage import LakePath, lake_path, open_delta, read_delta, storage_options
from capture.mysql.position import MySqlPosition
from pipeline.errors import CaptureError

__all__ = ["HISTORY_SCHEMA", "HistoryEntry", "SchemaHistory"]

logger = logging.getLogger(__name__)

HISTORY_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("position", pa.binary(), nullable=False),
        pa.field("position_json", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("database", pa.string()),
        pa.field("ddl", pa.string()),
        pa.field("gtid", pa.string()),
        pa.field("ts_ms", pa.int64()),
        pa.field("written_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class HistoryEntry:
    """One schema-history entry.

    Attributes:
        position: Where the statement is in the binlog (snapshot entries: the snapshot point).
        kind: ``reset`` (a snapshot starts: forget every table), ``snapshot`` (a table's
            ``SHOW CREATE TABLE`` at the snapshot) or ``ddl`` (a statement from the binlog).
        database: The session's default database when the statement ran.
        ddl: The statement text.
        gtid: The statement's GTID, when the server has them.
        ts_ms: Server time of the statement (ms).
    """

    position: MySqlPosition
    kind: str
    database: str | None
    ddl: str | None
    gtid: str | None = None
    ts_ms: int | None = None


_READ = [f.name for f in HISTORY_SCHEMA if f.name != "written_at"]
"""The columns :meth:`SchemaHistory.load` reads (a zoned timestamp's conversion to Python
imports pandas)."""


class SchemaHistory:
    """The history entries of one source, loaded once and appended to.

    Args:
        path: The Delta table (created on the first append).
        source: The source name.
    """

    def __init__(self, path: LakePath, source: str) -> None:
        self.path = lake_path(path)
        self.source = source
        self._entries: list[HistoryEntry] = []
        self._seen: set[tuple[bytes, str, str | None]] = set()
        self._next_seq = 0
        self._loaded = False

    def load(self) -> list[HistoryEntry]:
        """Read this source's entries, in the order they were written (cached after the first
        call; later appends are added to the cache)."""
        if self._loaded:
            return list(self._entries)
        try:
            table = read_delta(open_delta(self.path), _READ)
        except TableNotFoundError:
            table = HISTORY_SCHEMA.empty_table()
        rows = sorted(
            (r for r in table.to_pylist() if r["source"] == self.source),
            key=lambda r: r["seq"],
        )
        for row in rows:
            entry = HistoryEntry(
                MySqlPosition.from_json(orjson.loads(row["position_json"])),
                row["kind"],
                row["database"],
                row["ddl"],
                row["gtid"],
                row["ts_ms"],
            )
            identity = (entry.position.encode(), entry.kind, entry.ddl)
            if identity in self._seen:
                continue  # written twice by runs that crashed before their bronze commit
            self._seen.add(identity)
            self._entries.append(entry)
        self._next_seq = (max(r["seq"] for r in rows) + 1) if rows else 0
        self._loaded = True
        return list(self._entries)

    def before(self, limit: MySqlPosition) -> list[HistoryEntry]:
        """The entries strictly below ``limit``, in replay order (a resume point: the events at
        and after it are read again)."""
        bound = limit.encode()
        return [e for e in self.load() if e.position.encode() < bound]

    def append(self, entries: list[HistoryEntry]) -> int:
        """Append the entries not already stored; return how many were written.

        Raises:
            CaptureError: The Delta table could not be written.
        """
        self.load()
        fresh = []
        for entry in entries:
            identity = (entry.position.encode(), entry.kind, entry.ddl)
            if identity not in self._seen:
                self._seen.add(identity)
                fresh.append(entry)
        if not fresh:
            return 0
        now = dt.datetime.now(dt.UTC)
        rows = []
        for entry in fresh:
            rows.append(
                {
                    "source": self.source,
                    "seq": self._next_seq,
                    "position": entry.position.encode(),
                    "position_json": orjson.dumps(entry.position.to_json()).decode(),
                    "kind": entry.kind,
                    "database": entry.database,
                    "ddl": entry.ddl,
                    "gtid": entry.gtid,
                    "ts_ms": entry.ts_ms,
                    "written_at": now,
                }
            )
            self._next_seq += 1
        try:
            write_deltalake(
                str(self.path),
                pa.Table.from_pylist(rows, schema=HISTORY_SCHEMA),
                mode="append",
                storage_options=storage_options(self.path),
            )
        except OSError as exc:
            raise CaptureError(
                f"source {self.source}: cannot write the schema history at {self.path}: {exc}"
            ) from None
        self._entries.extend(fresh)
        return len(fresh)
