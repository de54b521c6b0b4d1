"""silver/collected_screen.py: the screen of a collected micro-batch answers what the Spark
aggregate of silver/job.py (`_screen_in_spark`) answers, case by case: unknown and null ops, C1
headers on row events only, truncates, keyless row events, document connectors, positions of
row events and of known events, per value schema (null included) and per table."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pytest

from bronze import schema as B
from silver.collected_screen import screen_collected

pytestmark = pytest.mark.unit

C1 = "__medallion.unrepresentable"


def _row(position: int | None, op: str | None, **values: Any) -> dict[str, Any]:
    return {
        B.SOURCE: "s",
        B.COLLECTION: "public.t",
        B.KIND: "data",
        B.VALUE_SCHEMA_ID: "v1",
        B.CONNECTOR: "postgresql",
        B.KEY_JSON: '{"id":1}',
        B.POSITION: None if position is None else bytes([position]),
        B.OP: op,
        B.SOURCE_TS_MS: 1000 + (position or 0),
        **values,
    }


def test_the_screen_per_schema_and_table() -> None:
    rows = [
        _row(5, "u", headers=[{"key": C1, "value": "{}"}, {"key": "other", "value": None}]),
        _row(3, "c", key_json=None),  # a row event without a key
        _row(9, "t", key_json=None, headers=[{"key": C1, "value": "{}"}]),  # not a row op
        _row(1, "x"),  # unknown op: in no position, no count but "unknown"
        _row(2, None),  # a null op is unknown too
        _row(None, "d"),  # a row event without a position: counted, no position
        _row(7, "r", value_schema_id=None),  # another schema: the null one
        _row(8, "u", collection="public.u", connector="mongodb"),  # another table, documents
        _row(4, "u", source="other"),  # another source
    ]
    screens = screen_collected(
        pa.Table.from_pylist(rows, schema=B.EVENTS_SCHEMA),
        known_ops=("c", "u", "d", "r", "t"),
        document_connectors=frozenset({"mongodb"}),
        unrepresentable_header=C1,
    )
    assert set(screens) == {("s", "public.t"), ("s", "public.u"), ("other", "public.t")}
    by_schema = {r[B.VALUE_SCHEMA_ID]: r for r in screens[("s", "public.t")]}
    assert by_schema["v1"] == {
        B.VALUE_SCHEMA_ID: "v1",
        "unknown": 2,
        "known": 4,
        "unrepresentable": 1,
        "truncates": [(bytes([9]), 1009)],
        "keyless": 1,
        "documents": 0,
        "first": bytes([3]),
        "oldest": bytes([3]),
        "top": bytes([9]),
    }
    assert by_schema[None]["known"] == 1 and by_schema[None]["first"] == bytes([7])
    (documents,) = screens[("s", "public.u")]
    assert documents["documents"] == 1 and documents["top"] == bytes([8])
    (other,) = screens[("other", "public.t")]
    assert other["known"] == 1 and other["oldest"] == other["top"] == bytes([4])
