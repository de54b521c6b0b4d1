"""C5: one event never stops silver. Each class of bad event is injected mid-stream into bronze
for several sources and tables; silver quarantines each one (``kind = 'event'``) with a reason
naming what and where, every other event of the micro-batch and every other table is applied,
and the counts reconcile (read = applied + quarantined).

Also: YugabyteDB ``yboutput``'s ``{"value", "set"}`` column wrapping, where a column not sent
(``null`` or ``"set": false``) keeps silver's value and ``{"value": null, "set": true}`` sets
NULL.

The streams are the synthetic PostgreSQL connector's (``tests.pgmodel.streams``), landed with the
real landing agent; the bad events are written straight into ``bronze/events`` (bronze itself
refuses most of them at landing, so this is how silver gets to see them: a row landed by an
older bronze, a schema registry edited by hand, a decoder bug).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.delta]

COLUMNS = {
    "customers": ["id", "name", "email", "notes"],
    "orders": ["id", "customer_id", "amount_cents", "status"],
}


def land(path: Path, lake: Path, name: str) -> None:
    LandingAgent(DebeziumJsonSource(name, path), BronzeWriter(BronzeTables.under(lake))).run()


def live(spark: Any, lake: Path, source: str, table: str) -> dict[int, dict[str, Any]]:
    path = lake / "silver" / silver_table_name(source, f"public.{table}")
    df = spark.read.format("delta").load(str(path))
    return {
        r["id"]: {c: r[c] for c in COLUMNS[table]} for r in df.where(f"NOT {DELETED}").collect()
    }


# --- injecting bad events into bronze ------------------------------------------------------------


def _poison(template: dict[str, Any], ident: int, **changes: Any) -> dict[str, Any]:
    """A copy of a landed data row for a key no real event has, just after ``template``
    (its position with a byte appended), outside any transaction, with ``changes``."""
    value = orjson.loads(template[S.VALUE_JSON])
    value["before"], value["after"], value["op"] = None, value["after"], "c"
    value["after"] = {**value["after"], "id": ident}
    row = {
        **template,
        S.POSITION: template[S.POSITION] + b"\x01",
        S.OP: "c",
        S.KEY_JSON: orjson.dumps({"id": ident}).decode(),
        S.VALUE_JSON: orjson.dumps(value).decode(),
        S.TX_ID: None,
        S.TX_ORDER: None,
        S.TX_COLLECTION_ORDER: None,
        S.TX_PARTIAL: False,
        S.ORIGIN: f"poison:{ident}",
        S.HEADERS: [],
    }
    after = changes.pop("after", None)
    if after is not None:
        value["after"] = after(value["after"])
        row[S.VALUE_JSON] = orjson.dumps(value).decode()
    if "value_json" in changes:
        row[S.VALUE_JSON] = changes.pop("value_json")
    row.update(changes)
    return row


def inject(lake: Path) -> dict[int, tuple[str, str, str]]:
    """Append the bad events; returns ``id -> (source, table, reason fragment)``."""
    landed = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    rows = landed.to_pylist()

    def middle(source: str, collection: str) -> dict[str, Any]:
        data = sorted(
            (
                r
                for r in rows
                if r[S.SOURCE] == source
                and r[S.COLLECTION] == collection
                and r[S.KIND] == "data"
                and r[S.OP] == "c"
            ),
            key=lambda r: r[S.POSITION],
        )
        return data[len(data) // 2]

    cust_a, orders_a = middle("a", "public.customers"), middle("a", "public.orders")
    cust_b, orders_b = middle("b", "public.customers"), middle("b", "public.orders")
    bad = {
        # an op no connector writes
        9001: ("a", "customers", "unknown op 'x'", _poison(cust_a, 9001, op="x")),
        # an after image that is not an object of the table's columns
        9002: (
            "a",
            "orders",
            "no 'after' image",
            _poison(orders_a, 9002, after=lambda _a: "not a row"),
        ),
        # a create without any after image
        9003: ("b", "customers", "no 'after' image", _poison(cust_b, 9003, after=lambda _a: [])),
        # a value its schema's type cannot hold (a string in an int32 column)
        9004: (
            "b",
            "orders",
            "column customer_id: abc does not decode as int",
            _poison(orders_b, 9004, after=lambda a: {**a, "customer_id": "abc"}),
        ),
        # written with a schema the registry does not hold
        9005: (
            "a",
            "customers",
            "cannot decode with value schema nowhere",
            _poison(cust_a, 9005, value_schema_id="nowhere"),
        ),
        # not JSON at all
        9006: ("b", "orders", "no 'after' image", _poison(orders_b, 9006, value_json="{oops")),
    }
    # The []-after of 9003 decodes as a missing image too (a JSON array is not a row).
    write_deltalake(
        str(lake / "bronze" / "events"),
        pa.Table.from_pylist([r for *_, r in bad.values()], schema=landed.schema),
        mode="append",
    )
    return {ident: (source, t, reason) for ident, (source, t, reason, _r) in bad.items()}


def test_each_bad_event_is_quarantined_and_everything_else_applies(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = tmp_path / "lake"
    streams = {}
    for name, seed in (("a", 3), ("b", 4), ("flaky", 5)):
        stream = postgres_stream(snapshot_rows=3, transactions=8, seed=seed)
        path = tmp_path / f"{name}.jsonl"
        write_lines(
            path,
            (
                line.replace(b'"shop', f'"{name}'.encode())
                for line in stream.lines("kafka_json", schemas=True)
            ),
        )
        land(path, lake, name)
        streams[name] = stream
    bad = inject(lake)

    # A decoder failing at run time for one table (a bug): that table's events are quarantined,
    # the other tables go on.
    original = SilverJob._conform

    def exploding(self: SilverJob, path: str, *args: Any, **kwargs: Any) -> Any:
        if "flaky__public__orders" in path:
            raise ValueError("decoder exploded")
        return original(self, path, *args, **kwargs)

    monkeypatch.setattr(SilverJob, "_conform", exploding)
    result = SilverJob(spark, lake).run_once()

    quarantine = [
        r.asDict()
        for r in spark.read.format("delta").load(str(lake / "silver" / "_quarantine")).collect()
    ]
    by_origin = {r["origin"]: r for r in quarantine}
    problems = []
    for ident, (source, table, fragment) in bad.items():
        row = by_origin.get(f"poison:{ident}")
        if row is None:
            problems.append(f"{ident} ({source}.{table}, {fragment}): not quarantined")
            continue
        if fragment not in row["reason"] or row["kind"] != "event":
            problems.append(f"{ident}: {row['kind']} {row['reason']!r} lacks {fragment!r}")
        if (row["source"], row["collection"]) != (source, f"public.{table}"):
            problems.append(f"{ident}: quarantined under {row['source']} {row['collection']}")
    flaky = [r for r in quarantine if r["source"] == "flaky"]
    assert flaky and all("decoder exploded" in r["reason"] for r in flaky)
    assert {r["collection"] for r in flaky} == {"public.orders"}
    assert not problems, "\n".join(problems)

    # every other table equals its source, the poisoned keys are absent
    for name, stream in streams.items():
        for table in COLUMNS:
            if (name, table) == ("flaky", "orders"):
                continue
            expected = {
                i: {c: row[c] for c in COLUMNS[table]}
                for i, row in stream.final_state[table].items()
            }
            assert live(spark, lake, name, table) == expected, (name, table)

    # counts reconcile: every data event read is applied or quarantined, once
    bronze = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    data = sum(1 for r in bronze if r[S.KIND] == "data")
    assert result.read == data
    assert result.quarantined == len(quarantine) == len(bad) + len(flaky)
    assert result.read == result.applied + result.quarantined

    # a second run reads nothing and appends nothing
    again = SilverJob(spark, lake).run_once()
    assert (again.read, again.quarantined) == (0, 0)


# --- YugabyteDB yboutput -------------------------------------------------------------------------


def _yb_line(
    op: str, after: dict[str, Any] | None, before: dict[str, Any] | None, lsn: int
) -> bytes:
    def column(name: str, type_: str) -> dict[str, Any]:
        return {
            "type": "struct",
            "optional": True,
            "field": name,
            "fields": [
                {"type": type_, "optional": True, "field": "value"},
                {"type": "boolean", "optional": False, "field": "set"},
            ],
        }

    row = {
        "type": "struct",
        "optional": True,
        "name": "yb.public.employee.Value",
        "fields": [column("id", "int32"), column("name", "string"), column("dept", "string")],
    }
    schema = {
        "type": "struct",
        "name": "yb.public.employee.Envelope",
        "fields": [
            {**row, "field": "before"},
            {**row, "field": "after"},
            {
                "type": "struct",
                "optional": False,
                "field": "source",
                "fields": [
                    {"type": "string", "optional": False, "field": f}
                    for f in ("version", "connector", "name", "db", "schema", "table")
                ]
                + [
                    {"type": "int64", "optional": False, "field": "ts_ms"},
                    {"type": "int64", "optional": True, "field": "txId"},
                    {"type": "int64", "optional": True, "field": "lsn"},
                ],
            },
            {"type": "string", "optional": False, "field": "op"},
            {"type": "int64", "optional": True, "field": "ts_ms"},
        ],
    }
    source = {
        "version": "2.5.2.Final",
        "connector": "YugabyteDB",
        "name": "yb",
        "db": "yugabyte",
        "schema": "public",
        "table": "employee",
        "ts_ms": 1700000000000 + lsn,
        "txId": lsn,
        "lsn": lsn,
        "sequence": f'[null,"{lsn}"]',
    }
    value = {"before": before, "after": after, "source": source, "op": op, "ts_ms": 1}
    return orjson.dumps(
        {
            "topic": "yb.public.employee",
            "key": {"id": 1},
            "value": {"schema": schema, "payload": value},
        }
    )


def _set(value: Any) -> dict[str, Any]:
    return {"value": value, "set": True}


def test_yboutput_unset_columns_keep_the_silver_value(spark: Any, tmp_path: Path) -> None:
    lines = [
        _yb_line("c", {"id": _set(1), "name": _set("Alice"), "dept": _set("Packaging")}, None, 10),
        # CHANGE identity: only the changed column and the key; dept not sent (null)
        _yb_line("u", {"id": _set(1), "name": _set("Bob"), "dept": None}, None, 20),
        # name explicitly unset, dept SET NULL
        _yb_line(
            "u",
            {"id": _set(1), "name": {"value": None, "set": False}, "dept": _set(None)},
            None,
            30,
        ),
    ]
    path = tmp_path / "yb.jsonl"
    lake = tmp_path / "lake"
    table = lake / "silver" / silver_table_name("yb", "public.employee")
    seen = []
    for line in lines:  # one run per event: the unset columns keep what silver *stored*
        with path.open("ab") as f:
            f.write(line + b"\n")
        land(path, lake, "yb")
        assert SilverJob(spark, lake).run_once().quarantined == 0
        df = spark.read.format("delta").load(str(table))
        seen += [
            r.asDict() for r in df.where(f"NOT {DELETED}").select("id", "name", "dept").collect()
        ]
    assert df.schema["name"].dataType.simpleString() == "string"
    assert seen == [
        {"id": 1, "name": "Alice", "dept": "Packaging"},
        {"id": 1, "name": "Bob", "dept": "Packaging"},
        {"id": 1, "name": "Bob", "dept": None},
    ]
