"""``primary_key`` and ``not_null`` in one Spark aggregate per table: the gate's fast path.

Great Expectations decides these checks with several Spark jobs per table (a metric each:
row count, null counts, duplicate counts, samples). Between full quality runs,
``run --continuous`` only needs their verdicts on the tables a micro-batch changed, so
:func:`key_outcomes` computes the same counts in one job (adaptive execution off for it):
group the gold rows by the key columns, count each group and its nulls, and sum. The full run
(GX) stays the reference, on its own schedule; the two agree on every verdict and unexpected count
(``tests/integration/test_gold_gate_agrees.py``).

What GX counts, and so what is counted here:

* ``expect_column_values_to_be_unique`` (one key column): rows whose non-null value occurs more
  than once; null values are not compared;
* ``expect_compound_columns_to_be_unique`` (several): rows whose combination occurs more than
  once, rows whose key columns are all null left out (``ignore_row_if: all_values_are_missing``);
  Spark groups nulls as equal values, as GX's Spark implementation does;
* ``expect_column_values_to_not_be_null``: rows where the column is null.

The check fails when any of its counts is not zero, or a column it needs is missing from gold.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from gold import expectations as X
from gold.outcome import CheckOutcome
from pipeline.sql import quote_identifier
from silver.plans import plans_without_adaptive

__all__ = ["key_outcomes"]

logger = logging.getLogger(__name__)

_ROWS = "__rows"
_FAST_ENGINE = "medallion"


def key_outcomes(
    frame: Any, source: str, meta: X.TableMetadata, checks: Sequence[str]
) -> list[CheckOutcome]:
    """``primary_key`` and/or ``not_null`` of one gold table, with one Spark job.

    Args:
        frame: The gold DataFrame at the cut (the view's columns).
        source: The source name.
        meta: The table's metadata (key and NOT NULL columns).
        checks: Which of :data:`gold.expectations.PRIMARY_KEY` and
            :data:`gold.expectations.NOT_NULL` to decide.

    Returns:
        One outcome per check asked, in the order asked.
    """
    from pyspark.sql import functions as F

    present = set(frame.columns)
    keys = [k for k in meta.key_columns if k in present]
    others = [c for c in meta.not_null if c not in meta.key_columns and c in present]
    col = {name: F.col(quote_identifier(name)) for name in present}

    # Per key group: its size and, for each NOT NULL column, its nulls. Without a key the
    # groups are single rows' worth of counts over the whole frame.
    null_cols = [f"__null_{i}" for i in range(len(others))]
    counts = [F.count(F.lit(1)).alias(_ROWS)] + [
        F.count_if(col[c].isNull()).alias(n) for c, n in zip(others, null_cols, strict=True)
    ]
    grouped = frame.groupBy(*[col[k] for k in keys]).agg(*counts) if keys else frame.agg(*counts)
    rows = F.col(_ROWS)
    if len(keys) == 1:
        compared = col[keys[0]].isNotNull()
    elif keys:
        compared = F.greatest(*[col[k].isNotNull() for k in keys])
    else:
        compared = F.lit(False)
    duplicate = compared & (rows > 1)
    sample = F.struct(*[col[k] for k in keys]) if keys else F.lit(None)
    totals_frame = grouped.agg(
        F.coalesce(F.sum(rows), F.lit(0)).alias("elements"),
        F.coalesce(F.sum(F.when(duplicate, rows)), F.lit(0)).alias("duplicates"),
        F.slice(F.collect_list(F.when(duplicate, sample)), 1, X.SAMPLE_SIZE).alias("dup_sample"),
        *[
            F.coalesce(F.sum(F.when(col[k].isNull(), rows)), F.lit(0)).alias(f"__key_null_{i}")
            for i, k in enumerate(keys)
        ],
        *[F.coalesce(F.sum(F.col(n)), F.lit(0)).alias(n) for n in null_cols],
        *[
            F.slice(F.collect_list(F.when(F.col(n) > 0, sample)), 1, X.SAMPLE_SIZE).alias(
                f"{n}_sample"
            )
            for n in null_cols
        ],
    )
    # Two aggregates and the Delta snapshot of the version: without AQE one job, not one per
    # shuffle stage (silver.plans); an aggregate has nothing for AQE to re-plan.
    with plans_without_adaptive(frame.sparkSession):
        totals = totals_frame.collect()[0]
    elements = int(totals["elements"])

    def shown(values: Sequence[Any], label: str) -> list[str]:
        return [f"{label}{', '.join(f'{k}={v!r}' for k, v in r.asDict().items())}" for r in values]

    out: list[CheckOutcome] = []
    for check in checks:
        observed: list[str] = []
        found: list[str] = []
        unexpected = 0
        evaluated = False
        if check == X.PRIMARY_KEY:
            missing = [k for k in meta.key_columns if k not in present]
            description = X.primary_key_description(meta.key_columns)
            if missing:
                observed.append(f"key column(s) missing from gold: {', '.join(missing)}")
            evaluated = bool(keys)
            if keys and not missing:  # GX compares no partial key either
                label = f"{keys[0]}: " if len(keys) == 1 else f"{','.join(keys)}: "
                if totals["duplicates"]:
                    unexpected += int(totals["duplicates"])
                    observed.append(f"{label}{totals['duplicates']} unexpected of {elements}")
                    found += shown(totals["dup_sample"], label)
            if keys:
                for i, k in enumerate(keys):
                    nulls = int(totals[f"__key_null_{i}"])
                    if nulls:
                        unexpected += nulls
                        observed.append(f"{k}: {nulls} unexpected of {elements}")
                        found += [f"{k}: null"]
        elif check == X.NOT_NULL:
            declared = [c for c in meta.not_null if c not in meta.key_columns]
            description = X.not_null_description(declared)
            for c in declared:
                if c not in present:
                    observed.append(f"NOT NULL column missing from gold: {c}")
            for c, n in zip(others, null_cols, strict=True):
                evaluated = True
                nulls = int(totals[n])
                if nulls:
                    unexpected += nulls
                    observed.append(f"{c}: {nulls} unexpected of {elements}")
                    found += shown(totals[f"{n}_sample"], f"{c}: ")
        else:
            raise ValueError(f"not a key check: {check}")
        success = not observed
        out.append(
            CheckOutcome(
                check=check,
                source=source,
                table=meta.collection,
                success=success,
                observed="ok" if success else "; ".join(observed),
                unexpected_count=unexpected if evaluated else None,
                sample=tuple(dict.fromkeys(found))[: X.SAMPLE_SIZE],
                details=description,
                engine=_FAST_ENGINE,
            )
        )
    return out
