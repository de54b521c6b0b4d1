"""Contract driver of the ``debezium_json`` connector: the history written as the Kafka Connect
JSON lines Debezium's PostgreSQL connector produces, one file per :meth:`apply`, in an inbox.

There is no server: the files are the source, and the driver's model of what it wrote is the
ground truth. Initial rows are written as Debezium's own snapshot records (``op: r``); the
agent itself never snapshots anything, so the snapshot handover does not apply.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

import orjson

from tests.contract.drivers.base import Capability, ContractDriver
from tests.contract.history import TABLES, Change, State, Transaction

__all__ = ["DebeziumJsonDriver"]

SERVER = "contract"
SNAPSHOT_LSN = 1_000_000
MALFORMED = b'{"key": {"id": 1}, "value": {"op": "c"'
"""A line cut short: not JSON."""
MALFORMED_REASON = "not valid JSON"
_CONNECT_TYPES = {"int": "int32", "text": "string"}
_SOURCE_FIELDS = [
    {"type": "string", "optional": False, "field": "version"},
    {"type": "string", "optional": False, "field": "connector"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "int64", "optional": False, "field": "ts_ms"},
    {"type": "string", "optional": True, "field": "snapshot"},
    {"type": "string", "optional": False, "field": "db"},
    {"type": "string", "optional": False, "field": "schema"},
    {"type": "string", "optional": False, "field": "table"},
    {"type": "int64", "optional": True, "field": "txId"},
    {"type": "int64", "optional": True, "field": "lsn"},
    {"type": "int64", "optional": True, "field": "commit_lsn"},
]


def _schemas(table: str, columns: tuple[tuple[str, str], ...]) -> tuple[Any, Any]:
    """JsonConverter key and envelope schemas of one table."""
    key_field = {"type": "int32", "optional": False, "field": "id"}
    row = {
        "type": "struct",
        "optional": True,
        "name": f"{SERVER}.public.{table}.Value",
        "fields": [
            key_field,
            *({"type": _CONNECT_TYPES[k], "optional": True, "field": n} for n, k in columns),
        ],
    }
    key = {"type": "struct", "optional": False, "name": f"{SERVER}.public.{table}.Key"}
    envelope = {
        "type": "struct",
        "optional": False,
        "name": f"{SERVER}.public.{table}.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {
                "type": "struct",
                "optional": False,
                "name": "io.debezium.connector.postgresql.Source",
                "field": "source",
                "fields": _SOURCE_FIELDS,
            },
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }
    return {**key, "fields": [key_field]}, envelope


SCHEMAS = {spec.name: _schemas(spec.name, spec.columns) for spec in TABLES}


class DebeziumJsonDriver(ContractDriver):
    """Debezium JSON files in ``<workdir>/inbox``."""

    CONNECTOR: ClassVar[str] = "debezium_json"
    SOURCE_NAME: ClassVar[str] = "files"
    CAPABILITIES: ClassVar[frozenset[Capability]] = frozenset()

    def __init__(self, server: Any, workdir: Path) -> None:
        super().__init__(server, workdir)
        self.inbox = workdir / "inbox"
        self.state: State = {spec.name: {} for spec in TABLES}
        self._files = 0
        self._lsn = SNAPSHOT_LSN
        self._tx = 500

    def setup(self) -> None:
        """Make the inbox (the tables exist in the files' schemas)."""
        self.inbox.mkdir(parents=True, exist_ok=True)

    def load(self, rows: Transaction) -> None:
        """The initial rows as Debezium's snapshot records: ``op: r``, the last one ``last``."""
        lines = []
        for i, change in enumerate(rows):
            assert change.row is not None
            self.state[change.table][change.key] = dict(change.row)
            marker = "last" if i == len(rows) - 1 else "true"
            source = self._source(change.table, SNAPSHOT_LSN, SNAPSHOT_LSN, None, marker)
            lines.append(self._line(change.table, change.key, None, change.row, "r", source))
        self._write(lines)

    def apply(self, transactions: list[Transaction]) -> None:
        """One file with every transaction's records."""
        lines: list[bytes] = []
        for transaction in transactions:
            self._tx += 1
            commit_lsn = self._lsn + 8 * (len(transaction) + 1)
            for change in transaction:
                self._lsn += 8
                source = self._source(change.table, self._lsn, commit_lsn, self._tx, "false")
                lines += self._records(change, source)
            self._lsn = commit_lsn
        self._write(lines)

    def raw_config(self, **extra: Any) -> dict[str, Any]:
        """The inbox, Kafka Connect JSON lines."""
        return {
            "name": self.SOURCE_NAME,
            "connector": self.CONNECTOR,
            "path": str(self.inbox),
            "format": "kafka_json",
            **extra,
        }

    def truth(self) -> State:
        """What the files written so far leave in the tables."""
        return {table: {k: dict(v) for k, v in rows.items()} for table, rows in self.state.items()}

    def collection(self, table: str) -> str:
        """``public.<table>`` (the source block's schema and table)."""
        return f"public.{table}"

    def poison(self) -> str:
        """A file holding one malformed line."""
        self._write([MALFORMED])
        return MALFORMED_REASON

    def _records(self, change: Change, source: dict[str, Any]) -> list[bytes]:
        rows = self.state[change.table]
        table, key = change.table, change.key
        if change.op in ("c", "u"):
            assert change.row is not None
            before = None if change.op == "c" else {"id": key}
            rows[key] = dict(change.row)
            return [self._line(table, key, before, change.row, change.op, source)]
        delete = self._line(table, key, {"id": key}, None, "d", source)
        tombstone = orjson.dumps(
            {"topic": self._topic(table), "key": self._key(table, key), "value": None}
        )
        del rows[key]
        if change.op == "d":
            return [delete, tombstone]
        assert change.row is not None and change.new_key is not None
        rows[change.new_key] = dict(change.row)
        moved = {"__debezium.newkey": orjson.dumps({"id": change.new_key}).decode()}
        created = {"__debezium.oldkey": orjson.dumps({"id": key}).decode()}
        return [
            self._line(table, key, {"id": key}, None, "d", source, moved),
            tombstone,
            self._line(table, change.new_key, None, change.row, "c", source, created),
        ]

    def _source(
        self, table: str, lsn: int, commit_lsn: int, tx: int | None, snapshot: str
    ) -> dict[str, Any]:
        return {
            "version": "2.7.0.Final",
            "connector": "postgresql",
            "name": SERVER,
            "ts_ms": 1_700_000_000_000 + lsn,
            "snapshot": snapshot,
            "db": SERVER,
            "schema": "public",
            "table": table,
            "txId": tx,
            "lsn": lsn,
            "commit_lsn": commit_lsn,
        }

    def _line(
        self,
        table: str,
        key: int,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        op: str,
        source: dict[str, Any],
        headers: dict[str, str] | None = None,
    ) -> bytes:
        payload = {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1}
        line: dict[str, Any] = {
            "topic": self._topic(table),
            "key": self._key(table, key),
            "value": {"schema": SCHEMAS[table][1], "payload": payload},
        }
        if headers:
            line["headers"] = headers
        return orjson.dumps(line)

    def _key(self, table: str, key: int) -> dict[str, Any]:
        return {"schema": SCHEMAS[table][0], "payload": {"id": key}}

    def _topic(self, table: str) -> str:
        return f"{SERVER}.public.{table}"

    def _write(self, lines: list[bytes]) -> None:
        # One new file per call, named in order: the source reads a directory in name order and
        # each file exactly once, as Debezium Server's rotating file output is read.
        self._files += 1
        path = self.inbox / f"{self._files:05d}.jsonl"
        path.write_bytes(b"".join(line + b"\n" for line in lines))
