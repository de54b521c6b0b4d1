"""Schema evolution through bronze -> silver: additions, widenings, and the per-table policy.

Events of one PostgreSQL table are written with successive Connect schemas (as after ``ALTER
TABLE``), landed in bronze and applied by :class:`SilverJob`. The expected rows and types are
literals; the report rows in ``silver/_schema_changes`` are checked column by column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze import connect_schema as cs
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.config import SchemaEvolutionPolicy, TableOptions
from pipeline.errors import SchemaEvolutionError
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED

pytestmark = [pytest.mark.spark, pytest.mark.delta]

SERVER = "evo"
TOPIC = f"{SERVER}.public.items"
KEY_SCHEMA = cs.struct([cs.field("id", "int32")], name=f"{TOPIC}.Key")


def envelope(*fields: tuple[str, Any]) -> dict[str, Any]:
    row = cs.struct(
        [cs.field("id", "int32"), *[cs.field(n, t) for n, t in fields]], name=f"{TOPIC}.Value"
    )
    return cs.envelope_schema(TOPIC, row, cs.source_schema("postgresql"), with_transaction=False)


V1 = envelope(
    ("qty", cs.primitive("int32", optional=True)), ("code", cs.primitive("string", optional=True))
)
V2 = envelope(
    ("qty", cs.primitive("int64", optional=True)),
    ("code", cs.primitive("string", optional=True)),
    ("note", cs.primitive("string", optional=True)),
)
V3_CODE_INT = envelope(
    ("qty", cs.primitive("int64", optional=True)), ("code", cs.primitive("int32", optional=True))
)
V3_QTY_TEXT = envelope(
    ("qty", cs.primitive("string", optional=True)), ("code", cs.primitive("string", optional=True))
)


class Pg:
    """Records of public.items with increasing LSNs, one transaction each."""

    def __init__(self) -> None:
        self.lsn = 10_000_000
        self.tx = 100

    def record(self, schema: Mapping[str, Any], op: str, row: Mapping[str, Any]) -> dict[str, Any]:
        prev, self.lsn, self.tx = self.lsn, self.lsn + 1_000, self.tx + 1
        source = {
            "version": "2.5.0.Final",
            "connector": "postgresql",
            "name": SERVER,
            "ts_ms": 1_700_000_000_000 + self.tx,
            "snapshot": "false",
            "db": "shop",
            "sequence": orjson.dumps([str(prev), str(self.lsn)]).decode(),
            "schema": "public",
            "table": "items",
            "txId": self.tx,
            "lsn": self.lsn,
            "xmin": None,
        }
        return {
            "topic": TOPIC,
            "key": {"schema": KEY_SCHEMA, "payload": {"id": row["id"]}},
            "value": {
                "schema": schema,
                "payload": {"before": None, "after": dict(row), "source": source, "op": op},
            },
            "headers": {},
        }


def land(path: Path, lake: Path, records: Iterable[Mapping[str, Any]]) -> None:
    with path.open("ab") as f:
        for record in records:
            f.write(orjson.dumps(record) + b"\n")
    LandingAgent(
        DebeziumJsonSource("shop", path, line_format="kafka_json"),
        BronzeWriter(BronzeTables.under(lake)),
    ).run()


def job(spark: Any, lake: Path, policy: SchemaEvolutionPolicy) -> SilverJob:
    return SilverJob(
        spark, lake, table_options=lambda _s, _c: TableOptions(schema_evolution=policy)
    )


def table(spark: Any, lake: Path) -> Any:
    return spark.read.format("delta").load(
        str(lake / "silver" / silver_table_name("shop", "public.items"))
    )


def live(spark: Any, lake: Path, *columns: str) -> dict[int, tuple[Any, ...]]:
    return {
        r["id"]: tuple(r[c] for c in columns)
        for r in table(spark, lake).where(f"NOT {DELETED}").collect()
    }


def types(spark: Any, lake: Path) -> dict[str, str]:
    return {f.name: f.dataType.simpleString() for f in table(spark, lake).schema.fields}


def reports(spark: Any, lake: Path) -> list[tuple[str, str | None, str, str, str]]:
    df = spark.read.format("delta").load(str(lake / "silver" / "_schema_changes"))
    return sorted(
        (r["column"], r["old_type"], r["new_type"], r["kind"], r["action"]) for r in df.collect()
    )


def quarantine(spark: Any, lake: Path) -> list[str]:
    df = spark.read.format("delta").load(str(lake / "silver" / "_quarantine"))
    return sorted(r["reason"] for r in df.collect())


def test_added_columns_and_widenings_apply_in_place(spark: Any, tmp_path: Path) -> None:
    pg, path, lake = Pg(), tmp_path / "in.jsonl", tmp_path / "lake"
    land(path, lake, [pg.record(V1, "c", {"id": 1, "qty": 5, "code": "a"})])
    job(spark, lake, SchemaEvolutionPolicy.FAIL).run_once()
    assert types(spark, lake)["qty"] == "int"
    late_v1 = pg.record(V1, "u", {"id": 1, "qty": 6, "code": "a"})
    land(
        path,
        lake,
        [
            pg.record(V2, "c", {"id": 2, "qty": 2**40, "code": "b", "note": "wide"}),
            late_v1,  # written with the old schema, after the change: cast up, losslessly
        ],
    )
    # Widening and adding are always allowed, even under "fail".
    job(spark, lake, SchemaEvolutionPolicy.FAIL).run_once()
    assert types(spark, lake)["qty"] == "bigint" and types(spark, lake)["note"] == "string"
    assert live(spark, lake, "qty", "code", "note") == {
        1: (6, "a", None),
        2: (2**40, "b", "wide"),
    }
    assert reports(spark, lake) == [
        ("note", None, "string", "added", "added"),
        ("qty", "int", "bigint", "widened", "widened"),
    ]
    history = table(spark, lake).sparkSession.sql(
        f"DESCRIBE HISTORY delta.`{lake / 'silver' / silver_table_name('shop', 'public.items')}`"
    )
    operations = [r["operation"] for r in history.collect()]
    # Widened in place: the one WRITE is the table's creation, no rewrite followed.
    assert "CHANGE COLUMN" in operations and operations.count("WRITE") == 1


def test_incompatible_change_under_quarantine_policy(spark: Any, tmp_path: Path) -> None:
    pg, path, lake = Pg(), tmp_path / "in.jsonl", tmp_path / "lake"
    land(
        path,
        lake,
        [
            pg.record(V2, "c", {"id": 1, "qty": 1, "code": "x", "note": None}),
            pg.record(V3_CODE_INT, "c", {"id": 2, "qty": 2, "code": 7}),
            pg.record(V2, "c", {"id": 3, "qty": 3, "code": "z", "note": "n"}),
        ],
    )
    result = job(spark, lake, SchemaEvolutionPolicy.QUARANTINE).run_once()
    assert result.quarantined == 1
    assert live(spark, lake, "code") == {1: ("x",), 3: ("z",)}
    assert types(spark, lake)["code"] == "string"
    [reason] = quarantine(spark, lake)
    assert "code: string -> int (incompatible)" in reason and "quarantine" in reason
    assert reports(spark, lake) == [("code", "string", "int", "incompatible", "quarantined")]


def test_fail_policy_stops_then_evolve_rewrites(spark: Any, tmp_path: Path) -> None:
    pg, path, lake = Pg(), tmp_path / "in.jsonl", tmp_path / "lake"
    land(path, lake, [pg.record(V2, "c", {"id": 1, "qty": 10, "code": "a", "note": None})])
    job(spark, lake, SchemaEvolutionPolicy.FAIL).run_once()
    land(path, lake, [pg.record(V3_QTY_TEXT, "c", {"id": 2, "qty": "about 20", "code": "b"})])
    with pytest.raises(SchemaEvolutionError) as failed:
        job(spark, lake, SchemaEvolutionPolicy.FAIL).run_once()
    assert "qty: bigint -> string (incompatible)" in str(failed.value)
    assert live(spark, lake, "qty") == {1: (10,)}  # nothing of the failed batch applied
    # Same bronze rows, now under "evolve": every stored bigint converts to text, so the column
    # is rewritten and the new event applies.
    job(spark, lake, SchemaEvolutionPolicy.EVOLVE).run_once()
    assert types(spark, lake)["qty"] == "string"
    assert live(spark, lake, "qty") == {1: ("10",), 2: ("about 20",)}
    assert reports(spark, lake) == [("qty", "bigint", "string", "incompatible", "rewritten")]
    # A late event written with the old schema (before the change in source order) is cast to
    # the new column type; it does not turn the column back.
    pg.lsn = 10_000_500  # its commit sorts between id 1's create and the ALTERed schema's event
    land(path, lake, [pg.record(V2, "u", {"id": 1, "qty": 11, "code": "a", "note": None})])
    job(spark, lake, SchemaEvolutionPolicy.EVOLVE).run_once()
    assert types(spark, lake)["qty"] == "string"
    assert live(spark, lake, "qty") == {1: ("11",), 2: ("about 20",)}
    assert len(reports(spark, lake)) == 1


def test_evolve_refuses_a_rewrite_that_would_lose_stored_values(spark: Any, tmp_path: Path) -> None:
    pg, path, lake = Pg(), tmp_path / "in.jsonl", tmp_path / "lake"
    land(
        path,
        lake,
        [
            pg.record(V2, "c", {"id": 1, "qty": 1, "code": "12", "note": None}),
            pg.record(V2, "c", {"id": 2, "qty": 2, "code": "abc", "note": None}),
        ],
    )
    job(spark, lake, SchemaEvolutionPolicy.EVOLVE).run_once()
    land(path, lake, [pg.record(V3_CODE_INT, "u", {"id": 1, "qty": 1, "code": 13})])
    result = job(spark, lake, SchemaEvolutionPolicy.EVOLVE).run_once()
    assert result.quarantined == 1
    assert types(spark, lake)["code"] == "string"  # 'abc' is no int: the column stays text
    assert live(spark, lake, "code") == {1: ("12",), 2: ("abc",)}
    [reason] = quarantine(spark, lake)
    assert "1 stored values do not convert without loss" in reason
