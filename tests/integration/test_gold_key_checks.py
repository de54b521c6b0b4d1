"""The gate's one-aggregate ``primary_key``/``not_null`` (gold/key_checks.py) decides as Great
Expectations does: the same verdicts, unexpected counts and observations, on failing and passing
tables, single and compound keys (shared Spark session, real GX)."""

from __future__ import annotations

from typing import Any

import pytest

from gold import expectations as X
from gold.key_checks import key_outcomes

pytestmark = [pytest.mark.spark]

CHECKS = (X.PRIMARY_KEY, X.NOT_NULL)


def _compare(spark: Any, rows: list[tuple[Any, ...]], schema: str, meta: X.TableMetadata) -> Any:
    frame = spark.createDataFrame(rows, schema).cache()
    try:
        gx = {
            o.check: o
            for o, _ in X.validate_table(X.gx_context(), "t", frame, "src", meta)
            if o.check in CHECKS
        }
        fast = {o.check: o for o in key_outcomes(frame, "src", meta, CHECKS)}
    finally:
        frame.unpersist()
    for check in CHECKS:
        a, b = gx[check], fast[check]
        assert (b.success, b.unexpected_count, b.observed, b.details) == (
            a.success,
            a.unexpected_count,
            a.observed,
            a.details,
        ), check
    return fast


def test_single_key_failing_and_passing(spark: Any) -> None:
    meta = X.TableMetadata("public.t", key_columns=("id",), not_null=("id", "qty"))
    schema = "id int, qty int, note string"
    bad = [(1, 5, "a"), (1, 6, "b"), (2, None, "c"), (None, 1, None), (None, 2, "d"), (3, 3, "e")]
    fast = _compare(spark, bad, schema, meta)
    assert not fast[X.PRIMARY_KEY].success and not fast[X.NOT_NULL].success
    # Two rows share id 1; two have no id (not compared for uniqueness, counted as nulls).
    assert fast[X.PRIMARY_KEY].unexpected_count == 4
    assert fast[X.NOT_NULL].unexpected_count == 1
    good = [(1, 5, None), (2, 6, "b"), (3, 0, "c")]
    fast = _compare(spark, good, schema, meta)
    assert fast[X.PRIMARY_KEY].success and fast[X.NOT_NULL].success


def test_compound_key_and_missing_columns(spark: Any) -> None:
    meta = X.TableMetadata("public.t", key_columns=("a", "b"), not_null=("a", "b", "c", "gone"))
    schema = "a int, b string, c int"
    rows = [
        (1, "x", 1),
        (1, "x", 2),  # the same key twice
        (1, None, 3),
        (1, None, 4),  # a partly null key, twice: compared (nulls group as equal)
        (None, None, 5),
        (None, None, None),  # all-null keys: left out of the uniqueness, counted as nulls
        (2, "x", 6),
    ]
    fast = _compare(spark, rows, schema, meta)
    assert not fast[X.PRIMARY_KEY].success
    assert "gone" in fast[X.NOT_NULL].observed and not fast[X.NOT_NULL].success
    # No key declared: nothing to be unique (GX plans no expectation for it either).
    no_key = X.TableMetadata("public.u", not_null=("c",))
    frame = spark.createDataFrame([(1, "x", 1), (1, "x", 2)], schema)
    pk, nn = key_outcomes(frame, "src", no_key, CHECKS)
    assert pk.success and pk.unexpected_count is None and nn.success and nn.unexpected_count == 0
