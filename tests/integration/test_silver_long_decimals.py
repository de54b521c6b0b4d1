"""Decimals with more digits than a double holds, in schema-less Debezium JSON: exact into
silver, or refused with a reason, never rounded.

``JsonConverter`` with ``decimal.format=NUMERIC`` and ``schemas.enable=false`` writes a
``NUMERIC(38,10)`` value with every digit (``12345678901234567890.1234567890``); orjson reads it
as a double (``1.2345678901234567e+19``). The lines are ``kafka_json`` records whose key and value
are JSON, so bronze writes them again: the literals are written here by hand, as Jackson does.
"""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from deltalake import DeltaTable

from bronze import schema as B
from silver.job import silver_table_name
from silver.merge import DELETED, POSITION
from tests.integration.test_quarantine import SRC
from tests.integration.test_silver_big_integers import deliver

pytestmark = [pytest.mark.spark, pytest.mark.delta]

LONG = "12345678901234567890.123456789"
"""29 significant digits: a double keeps 17."""
TINY = "1.234567890123456789012345678901234567890E-30"
"""40 significant digits at 10^-30: no decimal(38, s) holds it."""
NINE = "0.000000001"


def line(table: str, n: int, ident: int, literal: str) -> bytes:
    """A create of ``table`` whose ``after.n`` is the JSON number ``literal``, as written."""
    source = {**SRC, "table": table, "lsn": 1000 + n, "sequence": f'["900","{1000 + n}"]'}
    value = {"before": None, "after": {"id": ident, "n": "@"}, "op": "c", "ts_ms": 1}
    text = json.dumps({"key": {"id": ident}, "value": {**value, "source": source}})
    return text.replace('"@"', literal).encode()


def live(spark: Any, lake: Path, table: str) -> tuple[str, list[tuple[int, Any]]]:
    frame = spark.read.format("delta").load(
        str(lake / "silver" / silver_table_name("h", f"public.{table}"))
    )
    rows = frame.where(f"NOT {DELETED}").orderBy(POSITION).collect()
    return frame.schema["n"].dataType.simpleString(), [(r["id"], r["n"]) for r in rows]


def test_decimals_beyond_double_precision_land_exact_or_are_refused(
    spark: Any, tmp_path: Path
) -> None:
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    deliver(
        spark,
        path,
        lake,
        [line("d", 1, 1, LONG), line("d", 2, 2, "1.5"), line("d", 3, 3, NINE)]
        + [line("e", 4, 1, TINY), line("e", 5, 2, "-2.5")],
    )
    landed = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    values = [r[B.VALUE_JSON] for r in landed if r[B.KIND] == "data"]
    # Bronze wrote each value again (it was JSON in the line): every literal no double holds
    # as it was (NINE is a double's: written as the double's shortest text, 1e-09).
    for literal in (LONG, TINY):
        assert sum(f'"n":{literal}' in v for v in values) == 1, (literal, values)

    # Decimal(38, 9): the most fraction digits of the samples, every value exact.
    assert live(spark, lake, "d") == (
        "decimal(38,9)",
        [(1, Decimal(LONG)), (2, Decimal("1.5")), (3, Decimal(NINE))],
    )
    # No decimal(38, s) holds 10^-30 with 40 digits beside -2.5: the column keeps the integer
    # digit and the rest is scale; the value it cannot hold is refused (text would not do:
    # Spark reads a fraction's text through a double, 1.2345678901234568E-30).
    assert live(spark, lake, "e") == ("decimal(38,37)", [(2, Decimal("-2.5"))])

    quarantine = [
        r["reason"]
        for r in spark.read.format("delta").load(str(lake / "silver" / "_quarantine")).collect()
    ]
    # The reason quotes the text Spark gives (through a double).
    assert len(quarantine) == 1, quarantine
    assert "column n: 1.2345678901234568E-30" in quarantine[0], quarantine
    assert quarantine[0].endswith("does not decode as decimal(38,37)"), quarantine
