"""Arrival-order cases the property test found, reduced, in an explicit delivery order.

Each case is a small source history landed in a staging bronze, whose rows then reach the lake's
bronze in an explicit order, a silver run per batch (the property test's
:func:`~tests.integration.test_silver_properties.reordered_arrival`). Silver's live rows must
equal the history's ground truth.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.integration.test_silver_properties import (
    as_expected,
    reordered_arrival,
    silver_live,
    staged_rows,
)
from tests.pgmodel.history import Delete, Insert, SourceHistory, Transaction, Truncate

pytestmark = [pytest.mark.spark, pytest.mark.delta]

NULLS = {"qty": None, "label": None, "notes": None}

TRUNCATED_IN_PARTS = SourceHistory(
    ("orders",),
    (
        Transaction((Insert("orders", 3, NULLS), Delete("orders", 3))),
        Transaction(
            (Insert("orders", 3, NULLS), Truncate(("orders",)), Insert("orders", 4, NULLS))
        ),
        Transaction((Insert("orders", 0, NULLS),)),
    ),
)
"""Bronze rows, in position order: 0-4 T1 (BEGIN, ``c`` 3, ``d`` 3, its tombstone, END); 5-9
T2 (BEGIN, ``c`` 3, ``t``, ``c`` 4, END); 10-12 T3 (BEGIN, ``c`` 0, END). The source ends with
orders 0 and 4."""


def test_a_transaction_applied_in_parts_around_a_truncate(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Reduced from a case hypothesis drew (snapshot, two tables, a key move, two truncates):
    T3's BEGIN lands with T1's delete of orders 3 and T2's truncate, which silver applies as
    superseded; T2's insert of orders 3 (before its truncate) lands next, its insert of orders 4
    (after the truncate) and END last, alone.

    * The truncate erased the insert of orders 3, though silver held only the delete's
      tombstone for the key, older than the insert (it came back live).
    * The insert of orders 4 is applied when it lands, not held for T2's END count, which the
      rows in ``silver/_pending`` can no longer reach (it waited for the timeout).
    """
    staging, rows = staged_rows(TRUNCATED_IN_PARTS, tmp_path_factory)
    assert [(r["kind"], r["op"]) for r in rows[5:10]] == [
        ("transaction", None),
        ("data", "c"),
        ("data", "t"),
        ("data", "c"),
        ("transaction", None),
    ]
    order = [[10, 2, 7], [0, 1, 3, 4, 5, 6, 11, 12], [8, 9]]
    lake = tmp_path_factory.mktemp("lake")
    reordered_arrival(spark, staging, lake, [[rows[i] for i in batch] for batch in order])
    expected = TRUNCATED_IN_PARTS.final_state()
    assert set(expected["public.orders"]) == {'{"id":0}', '{"id":4}'}
    tables = [TRUNCATED_IN_PARTS.collection(t) for t in TRUNCATED_IN_PARTS.tables]
    assert silver_live(spark, lake, expected, tables) == as_expected(expected)
