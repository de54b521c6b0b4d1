"""Deterministic Debezium-shaped change streams for demos, tests and benchmarks.

:func:`postgres_stream` writes what Debezium's PostgreSQL connector (pgoutput,
``provide.transaction.metadata=true``) would emit for a small shop database: an initial
snapshot, then transactions of inserts, updates, deletes with tombstones, primary-key changes
(delete + tombstone + create with the ``__debezium.oldkey``/``newkey`` headers), TOAST
placeholders and BEGIN/END records. Concurrent transactions interleave their per-row LSNs while
committing in another order, so any consumer that orders by the per-row LSN gets it wrong.

The generator also returns the source tables' final state, which later stages compare with.
Same seed, same stream, byte for byte.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = ["SyntheticStream", "postgres_stream", "write_lines", "LINE_FORMATS"]

LINE_FORMATS = ("envelope", "kafka_json", "key_tab_value")
UNAVAILABLE = "__debezium_unavailable_value"
SERVER = "shop"
SNAPSHOT_LSN = 23_000_000

_KEY_FIELDS = [{"type": "int32", "optional": False, "field": "id"}]
_VALUE_FIELDS: dict[str, list[dict[str, Any]]] = {
    "customers": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "string", "optional": True, "field": "email"},
        {"type": "string", "optional": True, "field": "notes"},
        {
            "type": "int64",
            "optional": True,
            "name": "io.debezium.time.MicroTimestamp",
            "version": 1,
            "field": "updated_at",
        },
    ],
    "orders": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "int32", "optional": False, "field": "customer_id"},
        {"type": "int64", "optional": False, "field": "amount_cents"},
        {"type": "string", "optional": False, "field": "status"},
    ],
}
_SOURCE_FIELDS = [
    {"type": "string", "optional": False, "field": "version"},
    {"type": "string", "optional": False, "field": "connector"},
    {"type": "string", "optional": False, "field": "name"},
    {"type": "int64", "optional": False, "field": "ts_ms"},
    {
        "type": "string",
        "optional": True,
        "name": "io.debezium.data.Enum",
        "version": 1,
        "parameters": {"allowed": "true,last,false,incremental"},
        "default": "false",
        "field": "snapshot",
    },
    {"type": "string", "optional": False, "field": "db"},
    {"type": "string", "optional": True, "field": "sequence"},
    {"type": "string", "optional": False, "field": "schema"},
    {"type": "string", "optional": False, "field": "table"},
    {"type": "int64", "optional": True, "field": "txId"},
    {"type": "int64", "optional": True, "field": "lsn"},
    {"type": "int64", "optional": True, "field": "xmin"},
]
_TX_FIELDS = [
    {"type": "string", "optional": False, "field": "id"},
    {"type": "int64", "optional": False, "field": "total_order"},
    {"type": "int64", "optional": False, "field": "data_collection_order"},
]


def _key_schema(table: str) -> dict[str, Any]:
    return {
        "type": "struct",
        "fields": _KEY_FIELDS,
        "optional": False,
        "name": f"{SERVER}.public.{table}.Key",
    }


def _value_schema(table: str) -> dict[str, Any]:
    row = {
        "type": "struct",
        "fields": _VALUE_FIELDS[table],
        "optional": True,
        "name": f"{SERVER}.public.{table}.Value",
    }
    return {
        "type": "struct",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {
                "type": "struct",
                "fields": _SOURCE_FIELDS,
                "optional": False,
                "name": "io.debezium.connector.postgresql.Source",
                "field": "source",
            },
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
            {
                "type": "struct",
                "fields": _TX_FIELDS,
                "optional": True,
                "name": "event.block",
                "version": 1,
                "field": "transaction",
            },
        ],
        "optional": False,
        "name": f"{SERVER}.public.{table}.Envelope",
        "version": 1,
    }


@dataclass(slots=True)
class SyntheticStream:
    """A generated stream.

    Attributes:
        records: (key, value, headers, topic) tuples in emission order; value None = tombstone.
        final_state: table -> id -> row, the source after the last transaction.
        data_events: Number of change events (c, u, d, r), excluding tombstones and BEGIN/END.
    """

    records: list[tuple[Any, Any, dict[str, str], str]] = field(default_factory=list)
    final_state: dict[str, dict[int, dict[str, Any]]] = field(default_factory=dict)
    data_events: int = 0

    def lines(self, line_format: str = "kafka_json", *, schemas: bool = True) -> Iterator[bytes]:
        """Serialize the records, one line each (without the newline).

        Args:
            line_format: One of :data:`LINE_FORMATS`. ``envelope`` drops keys, tombstones and
                headers, as Debezium Server's value-only output does.
            schemas: Write JsonConverter's ``{"schema", "payload"}`` form.
        """
        for key, value, headers, topic in self.records:
            table = topic.rsplit(".", 1)[-1]
            with_schema = schemas and table in _VALUE_FIELDS
            k = {"schema": _key_schema(table), "payload": key} if with_schema and key else key
            v = value
            if with_schema and value is not None:
                v = {"schema": _value_schema(table), "payload": value}
            if line_format == "kafka_json":
                obj: dict[str, Any] = {"topic": topic, "key": k, "value": v}
                if headers:
                    obj["headers"] = headers
                yield orjson.dumps(obj)
            elif line_format == "key_tab_value":
                yield orjson.dumps(k) + b"\t" + orjson.dumps(v)
            elif line_format == "envelope":
                if value is not None:
                    yield orjson.dumps(v)
            else:
                raise ValueError(f"unknown line format {line_format!r}")


def _lsn_text(lsn: int) -> str:
    return str(lsn)


class _Pg:
    """Minimal model of a PostgreSQL database emitting Debezium records."""

    def __init__(self, rng: random.Random, stream: SyntheticStream, source_style: str) -> None:
        self.rng = rng
        self.out = stream
        self.style = source_style
        self.lsn = SNAPSHOT_LSN
        self.last_commit = SNAPSHOT_LSN
        self.txid = 700
        self.ts_ms = 1_700_000_000_000
        self.tables: dict[str, dict[int, dict[str, Any]]] = {"customers": {}, "orders": {}}
        self.next_id = {"customers": 1, "orders": 1}

    def source(self, table: str, lsn: int, txid: int | None, snapshot: str) -> dict[str, Any]:
        src: dict[str, Any] = {
            "version": "2.5.0.Final",
            "connector": "postgresql",
            "name": SERVER,
            "ts_ms": self.ts_ms,
            "snapshot": snapshot,
            "db": "shop",
            "schema": "public",
            "table": table,
            "txId": txid,
            "lsn": lsn,
            "xmin": None,
        }
        if self.style == "sequence":
            src["sequence"] = orjson.dumps([_lsn_text(self.last_commit), _lsn_text(lsn)]).decode()
        elif self.style == "commit_lsn":
            src["sequence"] = None
        return src

    def row(self, table: str, ident: int) -> dict[str, Any]:
        r = self.rng
        if table == "customers":
            return {
                "id": ident,
                "name": f"customer {ident}",
                "email": f"c{ident}@example.com" if r.random() < 0.9 else None,
                "notes": "x" * r.randint(0, 40),
                "updated_at": self.ts_ms * 1000,
            }
        customers = list(self.tables["customers"]) or [1]
        return {
            "id": ident,
            "customer_id": r.choice(customers),
            "amount_cents": r.randint(100, 100_000),
            "status": "new",
        }

    def snapshot(self, rows_per_table: int) -> None:
        for table in ("customers", "orders"):
            for i in range(rows_per_table):
                ident = self.next_id[table]
                self.next_id[table] += 1
                row = self.row(table, ident)
                self.tables[table][ident] = row
                last = table == "orders" and i == rows_per_table - 1
                marker = (
                    "last" if last else ("first" if ident == 1 and table == "customers" else "true")
                )
                src = self.source(table, SNAPSHOT_LSN, None, marker)
                src["ts_ms"] = self.ts_ms
                value = {
                    "before": None,
                    "after": row,
                    "source": src,
                    "op": "r",
                    "ts_ms": self.ts_ms,
                    "transaction": None,
                }
                self.emit(table, {"id": ident}, value)

    def emit(self, table: str, key: Any, value: Any, headers: dict[str, str] | None = None) -> None:
        self.out.records.append((key, value, headers or {}, f"{SERVER}.public.{table}"))
        if value is not None and value.get("op") in ("c", "u", "d", "r"):
            self.out.data_events += 1

    def plan_transaction(self) -> list[tuple[str, str, int]]:
        """A list of (op, table, id) planned against the current state."""
        r = self.rng
        plan: list[tuple[str, str, int]] = []
        for _ in range(r.randint(1, 4)):
            table = "customers" if r.random() < 0.5 else "orders"
            rows = self.tables[table]
            roll = r.random()
            if not rows or roll < 0.45:
                ident = self.next_id[table]
                self.next_id[table] += 1
                plan.append(("c", table, ident))
            elif roll < 0.80:
                plan.append(("u", table, r.choice(list(rows))))
            elif roll < 0.93:
                plan.append(("d", table, r.choice(list(rows))))
            else:
                plan.append(("k", table, r.choice(list(rows))))
        return plan

    def run_transactions(self, count: int) -> None:
        """Commit ``count`` transactions, two at a time with interleaved per-row LSNs."""
        done = 0
        while done < count:
            pair = min(2, count - done)
            txs = [(self.txid + i, self.plan_transaction()) for i in range(pair)]
            self.txid += pair
            # Interleave the writes: row LSNs alternate between the concurrent transactions.
            lsns: dict[int, list[int]] = {txid: [] for txid, _ in txs}
            longest = max(len(plan) for _, plan in txs)
            for step in range(longest):
                for txid, plan in txs:
                    if step < len(plan):
                        self.lsn += 40 + self.rng.randint(0, 20)
                        lsns[txid].append(self.lsn)
            # The later-started transaction commits first half the time.
            if pair == 2 and self.rng.random() < 0.5:
                txs.reverse()
            for txid, plan in txs:
                self.lsn += 40
                self.apply(txid, plan, lsns[txid], commit_lsn=self.lsn)
                self.last_commit = self.lsn
                done += 1

    def apply(
        self, txid: int, plan: list[tuple[str, str, int]], lsns: list[int], commit_lsn: int
    ) -> None:
        self.ts_ms += self.rng.randint(1, 50)
        tx_id = str(txid)
        self.emit_tx("BEGIN", tx_id, None)
        order = 0
        per_table: dict[str, int] = {}
        counts: dict[str, int] = {}

        def block(table: str) -> dict[str, Any]:
            nonlocal order
            order += 1
            per_table[table] = per_table.get(table, 0) + 1
            counts[f"shop.public.{table}"] = counts.get(f"shop.public.{table}", 0) + 1
            return {"id": tx_id, "total_order": order, "data_collection_order": per_table[table]}

        for (op, table, ident), lsn in zip(plan, lsns, strict=True):
            rows = self.tables[table]
            src = self.source(table, lsn, txid, "false")
            if self.style == "commit_lsn":
                src["commit_lsn"] = commit_lsn
            if op == "c" and ident not in rows:
                row = self.row(table, ident)
                rows[ident] = row
                self.emit(
                    table,
                    {"id": ident},
                    {
                        "before": None,
                        "after": row,
                        "source": src,
                        "op": "c",
                        "ts_ms": self.ts_ms,
                        "transaction": block(table),
                    },
                )
            elif op == "u" and ident in rows:
                before = rows[ident]
                after = dict(before)
                if table == "customers":
                    after["email"] = f"new{self.rng.randint(0, 999)}@example.com"
                    after["updated_at"] = self.ts_ms * 1000
                    emitted = dict(after)
                    if self.rng.random() < 0.3:
                        emitted["notes"] = UNAVAILABLE  # unchanged TOAST column
                else:
                    after["status"] = self.rng.choice(["paid", "shipped", "cancelled"])
                    emitted = dict(after)
                rows[ident] = after
                self.emit(
                    table,
                    {"id": ident},
                    {
                        "before": {"id": ident},
                        "after": emitted,
                        "source": src,
                        "op": "u",
                        "ts_ms": self.ts_ms,
                        "transaction": block(table),
                    },
                )
            elif op == "d" and ident in rows:
                del rows[ident]
                self.emit(
                    table,
                    {"id": ident},
                    {
                        "before": {"id": ident},
                        "after": None,
                        "source": src,
                        "op": "d",
                        "ts_ms": self.ts_ms,
                        "transaction": block(table),
                    },
                )
                self.emit(table, {"id": ident}, None)
            elif op == "k" and ident in rows:
                new_id = self.next_id[table]
                self.next_id[table] += 1
                row = dict(rows.pop(ident))
                row["id"] = new_id
                rows[new_id] = row
                old_key, new_key = {"id": ident}, {"id": new_id}
                self.emit(
                    table,
                    old_key,
                    {
                        "before": {"id": ident},
                        "after": None,
                        "source": src,
                        "op": "d",
                        "ts_ms": self.ts_ms,
                        "transaction": block(table),
                    },
                    {"__debezium.newkey": orjson.dumps(new_key).decode()},
                )
                self.emit(table, old_key, None)
                self.emit(
                    table,
                    new_key,
                    {
                        "before": None,
                        "after": row,
                        "source": dict(src),
                        "op": "c",
                        "ts_ms": self.ts_ms,
                        "transaction": block(table),
                    },
                    {"__debezium.oldkey": orjson.dumps(old_key).decode()},
                )
        self.emit_tx("END", tx_id, (order, counts))

    def emit_tx(self, status: str, tx_id: str, end: tuple[int, dict[str, int]] | None) -> None:
        value: dict[str, Any] = {
            "status": status,
            "id": tx_id,
            "ts_ms": self.ts_ms,
            "event_count": None,
            "data_collections": None,
        }
        if end is not None:
            value["event_count"] = end[0]
            value["data_collections"] = [
                {"data_collection": name, "event_count": n} for name, n in sorted(end[1].items())
            ]
        self.out.records.append(({"id": tx_id}, value, {}, f"{SERVER}.transaction"))


def postgres_stream(
    *,
    snapshot_rows: int = 5,
    transactions: int = 20,
    seed: int = 7,
    source_style: str = "sequence",
) -> SyntheticStream:
    """Generate a PostgreSQL connector stream.

    Args:
        snapshot_rows: Rows per table in the initial snapshot.
        transactions: Streamed transactions after the snapshot.
        seed: Random seed; the same seed gives the same stream.
        source_style: ``sequence`` (Debezium 2.x ``source.sequence``), ``commit_lsn``
            (``source.commit_lsn``) or ``lsn_only`` (Debezium 1.2: ``lsn`` and ``txId`` only).

    Returns:
        The stream and the source's final state.
    """
    if source_style not in ("sequence", "commit_lsn", "lsn_only"):
        raise ValueError(f"unknown source_style {source_style!r}")
    stream = SyntheticStream()
    pg = _Pg(random.Random(seed), stream, source_style)
    pg.snapshot(snapshot_rows)
    pg.run_transactions(transactions)
    stream.final_state = {t: dict(rows) for t, rows in pg.tables.items()}
    return stream


def write_lines(path: Any, lines: Iterator[bytes]) -> int:
    """Write lines to ``path`` with newlines; returns the number written."""
    n = 0
    with open(path, "wb") as f:
        for line in lines:
            f.write(line)
            f.write(b"\n")
            n += 1
    return n
