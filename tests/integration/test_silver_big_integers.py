"""Integers beyond int64 in schema-less Debezium JSON: exact, or refused with a reason, never a
float or a NULL.

orjson reads such literals as floats; bronze kept ``1e+40`` for a ``10^40`` key, schema
inference made the column a double for that batch, and the chaos run's hostile line landed in
silver with a NULL ``id`` (``benchmarks/chaos.py``, ``huge-int``). The lines here have that shape:
``kafka_json`` records whose key and value are JSON (bronze writes them again), written with
the stdlib so the literals are exact.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from bronze import schema as B
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED, POSITION
from tests.integration.test_quarantine import SRC

pytestmark = [pytest.mark.spark, pytest.mark.delta]

HUGE = 10**40
"""The chaos run's hostile key: 41 digits, beyond int64 and beyond decimal(38,0)."""
WIDE = 2**64 + 1
"""Beyond int64 (orjson reads it as a float), within decimal(38,0)."""


def line(table: str, n: int, ident: int) -> bytes:
    """A create of ``table`` with key and after ``{"id": ident}``, as the chaos driver writes
    its hostile ``huge-int`` line (``json.dumps``: the literal as written)."""
    source = {**SRC, "table": table, "lsn": 1000 + n, "sequence": f'["900","{1000 + n}"]'}
    value = {"before": None, "after": {"id": ident}, "op": "c", "ts_ms": 1, "source": source}
    return json.dumps({"key": {"id": ident}, "value": value}).encode()


def deliver(spark: Any, path: Path, lake: Path, lines: list[bytes]) -> None:
    with path.open("ab") as f:
        f.write(b"".join(x + b"\n" for x in lines))
    LandingAgent(DebeziumJsonSource("h", path), BronzeWriter(BronzeTables.under(lake))).run()
    SilverJob(spark, lake).run_once()


def test_integers_beyond_int64_are_exact_or_quarantined_never_null(
    spark: Any, tmp_path: Path
) -> None:
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    # public.t: small ids and the hostile one (too wide for any type: the column stays bigint,
    # as when the silver table exists already); public.u: one beyond int64 that fits 38 digits.
    lines = [line("t", 1, 1), line("t", 2, 2), line("t", 3, HUGE), line("t", 4, 3)]
    deliver(spark, path, lake, [*lines, line("u", 5, WIDE), line("u", 6, HUGE)])

    landed = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    huge = [r for r in landed if str(HUGE) in r[B.KEY_JSON]]
    # Bronze wrote the key and value again (they were JSON in the line), the literal exact.
    assert len(huge) == 2
    assert all(f'"id":{HUGE}' in r[B.VALUE_JSON] for r in huge)

    def live(table: str) -> list[Any]:
        frame = spark.read.format("delta").load(
            str(lake / "silver" / silver_table_name("h", f"public.{table}"))
        )
        return [
            (r["id"], frame.schema["id"].dataType.simpleString())
            for r in frame.where(f"NOT {DELETED}").orderBy(POSITION).collect()
        ]

    assert live("t") == [(1, "bigint"), (2, "bigint"), (3, "bigint")]
    # A schema-less column of integers beyond int64 is decimal(38,0): exact.
    assert [(int(v), t) for v, t in live("u")] == [(WIDE, "decimal(38,0)")]

    quarantine = {
        (r["collection"], bytes(r["position"]).hex()): r["reason"]
        for r in spark.read.format("delta").load(str(lake / "silver" / "_quarantine")).collect()
    }
    positions = {
        (r[B.COLLECTION], r[B.VALUE_JSON]): bytes(r[B.POSITION]).hex()
        for r in landed
        if r[B.KIND] == "data"
    }
    refused = {
        (collection, position)
        for (collection, value), position in positions.items()
        if f'"id":{HUGE}' in value
    }
    assert set(quarantine) == refused  # nothing else refused; both hostile lines are
    for (collection, _position), reason in quarantine.items():
        expected = "bigint" if collection == "public.t" else "decimal(38,0)"
        assert f"column id: {str(HUGE)[:100]}" in reason, reason
        assert reason.endswith(f"does not decode as {expected}"), reason
