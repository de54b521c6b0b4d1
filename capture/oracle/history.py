"""The Oracle agent's schema history: each captured table's columns from an SCN on, in Delta.

``SQL_REDO`` is parsed with the table's column list, which must be the one in force when the
change was written, not the catalog's now (a column added or dropped since). The agent keeps
its own history, as Debezium keeps its schema-history topic: the definition of every captured
table at the snapshot SCN, and the definition a DDL row (``OPERATION_CODE`` 5) leaves at the
DDL's SCN. On every start it takes, per table, the newest definition at or below the commit SCN
bronze has (``commit_scn`` of the offset): every transaction emitted after it committed later,
and a DDL waits for the transactions holding its table's rows, so those definitions are the
ones their changes were written with. A table with no entry is described from the catalog.

Entries are written before the batch holding the DDL's record is committed; one beyond bronze's
commit SCN is ignored by the replay and written again (deduplicated) when mined again.

Layout: ``<bronze_root>/oracle_schema_history``, all Oracle sources in one table::

    source, owner, table_name, scn, kind (table | drop), columns (JSON), key (JSON), written_at
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import write_deltalake
from deltalake.exceptions import TableNotFoundError

from bronze.storage import LakePath, lake_path, open_delta, storage_options
from capture.oracle.types import OracleColumn
from pipeline.errors import CaptureError

__all__ = ["HISTORY_SCHEMA", "Definition", "OracleSchemaHistory"]

HISTORY_SCHEMA = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("owner", pa.string(), nullable=False),
        pa.field("table_name", pa.string(), nullable=False),
        pa.field("scn", pa.int64(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("columns", pa.string()),
        pa.field("key", pa.string()),
        pa.field("written_at", pa.timestamp("us", tz="UTC"), nullable=False),
    ]
)


@dataclass(frozen=True, slots=True)
class Definition:
    """A table's columns and primary key from ``scn`` on (``columns`` None: dropped)."""

    scn: int
    owner: str
    table: str
    columns: tuple[OracleColumn, ...] | None
    key: tuple[str, ...] = ()


def _columns_json(columns: tuple[OracleColumn, ...]) -> str:
    return orjson.dumps(
        [
            [c.name, c.data_type, c.precision, c.scale, c.nullable, c.length, c.default]
            for c in columns
        ]
    ).decode()


class OracleSchemaHistory:
    """Table definitions of the source ``source`` kept in the Delta table at ``path`` (made
    by the first :meth:`append`); read once, then kept in memory."""

    def __init__(self, path: LakePath, source: str) -> None:
        self._entries: list[Definition] | None = None
        self.source = source
        self.path = lake_path(path)

    def load(self) -> list[Definition]:
        """This source's definitions in SCN order (cached; appends are added)."""
        if self._entries is not None:
            return list(self._entries)
        try:
            table = (
                open_delta(self.path)
                .to_pyarrow_dataset()
                .to_table(filter=pc.field("source") == self.source)
            )
        except TableNotFoundError:
            table = HISTORY_SCHEMA.empty_table()
        entries = {}
        for row in table.to_pylist():
            columns = None
            if row["kind"] == "table":
                columns = tuple(OracleColumn(*c) for c in orjson.loads(row["columns"]))
            entry = Definition(
                int(row["scn"]),
                row["owner"],
                row["table_name"],
                columns,
                tuple(orjson.loads(row["key"] or "[]")),
            )
            entries[(entry.scn, entry.owner, entry.table)] = entry  # written twice: one
        self._entries = sorted(entries.values(), key=lambda e: e.scn)
        return list(self._entries)

    def as_of(self, scn: int) -> dict[tuple[str, str], Definition]:
        """Per table, the newest definition at or below ``scn``."""
        out: dict[tuple[str, str], Definition] = {}
        for entry in self.load():
            if entry.scn <= scn:
                out[(entry.owner, entry.table)] = entry
        return out

    def append(self, entries: list[Definition]) -> None:
        """Store the definitions not stored yet.

        Raises:
            CaptureError: The Delta table could not be written.
        """
        known = {(e.scn, e.owner, e.table): e for e in self.load()}
        fresh = [e for e in entries if known.get((e.scn, e.owner, e.table)) != e]
        if not fresh:
            return
        now = dt.datetime.now(dt.UTC)
        rows = [
            {
                "source": self.source,
                "scn": e.scn,
                "owner": e.owner,
                "table_name": e.table,
                "kind": "drop" if e.columns is None else "table",
                "columns": None if e.columns is None else _columns_json(e.columns),
                "key": orjson.dumps(list(e.key)).decode(),
                "written_at": now,
            }
            for e in fresh
        ]
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
        for entry in fresh:
            known[(entry.scn, entry.owner, entry.table)] = entry
        self._entries = sorted(known.values(), key=lambda e: e.scn)
