"""Arrival-order cases :mod:`tests.integration.test_silver_properties` found, replayed exactly.

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
from tests.pgmodel.history import (
    AddColumn,
    Insert,
    MoveKey,
    SourceHistory,
    Transaction,
    Truncate,
    Update,
)

pytestmark = [pytest.mark.spark, pytest.mark.delta]

NULLS = {"qty": None, "label": None, "notes": None}

TRUNCATE_AFTER_DELETE = SourceHistory(
    ("customers", "orders"),
    (
        # T1 commits first, but T2 started first (lower txId, first LSN).
        Transaction(
            (
                Truncate(("customers", "orders")),
                Insert("orders", 3, NULLS),
                MoveKey("orders", 3, 4, {"label": "aba"}),
                Insert("orders", 2, {"qty": 30, "label": "", "notes": "yzxzy"}),
            ),
            interleaved_with_next=True,
        ),
        Transaction(
            (
                Insert("orders", 3, {"label": "b"}),
                Update("orders", 2, {}),
                Truncate(("customers", "orders")),
                AddColumn("customers", "extra1"),
            ),
        ),
        Transaction((Insert("customers", 0, NULLS), Insert("customers", 4, NULLS))),
    ),
    (Insert("customers", 4, NULLS), Insert("customers", 3, NULLS), Insert("orders", 4, NULLS)),
)
"""The history hypothesis drew (2026-11, on ``test_silver_does_not_depend_on_arrival_order``).

Bronze rows, in position order: 0-2 the snapshot; 3 T1's BEGIN, 4-5 its truncates, 6 ``c``
orders 3, 7-9 the key move 3 -> 4 (``d``, tombstone, ``c``), 10 ``c`` orders 2, 11 its END;
12 T2's BEGIN, 13 ``c`` orders 3, 14 ``u`` orders 2, 15-16 its truncates, 17 its END; 18 T3's
BEGIN, 19-20 its inserts, 21 its END.
"""


def test_a_late_insert_older_than_a_truncate_stays_erased_on_a_deleted_key(
    spark: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """T1's delete of orders 3 (the key move) and T2's truncate land first, T2's insert of
    orders 3 (before its truncate) after: the truncate erased that insert, whatever silver held
    for the key when the truncate was applied (here the delete's tombstone, older than it)."""
    staging, rows = staged_rows(TRUNCATE_AFTER_DELETE, tmp_path_factory)
    assert len(rows) == 22
    first = [18, 7, 16]  # T3's BEGIN releases T1 and T2 as superseded
    batches = [[rows[i] for i in first], [r for i, r in enumerate(rows) if i not in first]]
    lake = tmp_path_factory.mktemp("lake")
    reordered_arrival(spark, staging, lake, batches)
    expected = TRUNCATE_AFTER_DELETE.final_state()
    tables = [TRUNCATE_AFTER_DELETE.collection(t) for t in TRUNCATE_AFTER_DELETE.tables]
    assert silver_live(spark, lake, expected, tables) == as_expected(expected)
