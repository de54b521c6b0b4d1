"""Query plans for small inputs: no adaptive execution, one shuffle partition per core.

Adaptive query execution (AQE) runs each shuffle stage of a query as a Spark job of its own and
re-plans between them. On a continuous pipeline's micro-batch (a few hundred rows per table)
there is nothing to coalesce or split, and that per-job fixed cost (driver, scheduler, py4j:
50-150 ms each on a small machine) is most of the work. :func:`small_input_plans` turns AQE off
for the block and sets as many shuffle partitions as the application has cores (never more than
configured), so an aggregate or a join over few rows is one job with a task per core. Plans
change, results do not: the test suite runs without AQE throughout.

The settings are the session's, set for the block and restored after it; a table worker's
session is its own (:mod:`silver.job`), the driver's session is shared with the background
quality run, which then plans a query or two the same way meanwhile (same results).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = ["SMALL_INPUT_ROWS", "plans_without_adaptive", "small_input_plans"]

SMALL_INPUT_ROWS = 100_000
"""Rows up to which an input is planned by :func:`small_input_plans` (a snapshot share, larger,
keeps the session's settings)."""

_ADAPTIVE = "spark.sql.adaptive.enabled"
_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"


@contextlib.contextmanager
def small_input_plans(spark: Any, rows: int) -> Iterator[None]:
    """Plan the block's queries for ``rows`` input rows (see the module docstring).

    Args:
        spark: The session whose settings are changed for the block.
        rows: How many rows the block's queries read at most; above :data:`SMALL_INPUT_ROWS`
            nothing changes.
    """
    if rows > SMALL_INPUT_ROWS:
        yield
        return
    with plans_without_adaptive(spark):
        yield


@contextlib.contextmanager
def plans_without_adaptive(spark: Any) -> Iterator[None]:
    """AQE off and one shuffle partition per core (at most as configured) for the block.

    For small inputs (:func:`small_input_plans`), and for an aggregate over any input whose
    groups are the output (the gate's key checks): with a partition per core there is
    nothing for AQE to coalesce, and an aggregate has no join for it to re-plan.

    Args:
        spark: The session whose settings are changed for the block.
    """
    conf = spark.conf
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    configured = int(conf.get(_SHUFFLE_PARTITIONS) or cores)
    wanted = {_ADAPTIVE: "false", _SHUFFLE_PARTITIONS: str(min(configured, cores))}
    before = {key: conf.get(key, None) for key in wanted}
    for key, value in wanted.items():
        conf.set(key, value)
    try:
        yield
    finally:
        for key, old in before.items():
            if old is None:
                conf.unset(key)
            else:
                conf.set(key, old)
