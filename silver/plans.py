"""Query plans for small inputs: no adaptive execution, one shuffle partition per core.

Adaptive query execution (AQE) runs each shuffle stage of a query as a Spark job of its own and
re-plans between them. On a continuous pipeline's micro-batch (a few hundred rows per table)
there is nothing to coalesce or split, and that per-job fixed cost (driver, scheduler, py4j:
50-150 ms each on a small machine) is most of the work. :func:`small_input_plans` turns AQE off
for the block and sets as many shuffle partitions as the application has cores (never more than
configured), so an aggregate or a join over few rows is one job with a task per core. Plans
change, results do not: the test suite runs without AQE throughout.

A MERGE into small target files has a block of its own (:func:`small_target_merge`: no
deletion vectors, no broadcasts).

The settings are the session's, set for the block and restored after it; a table worker's
session is its own (:mod:`silver.job`), the driver's session is shared with the background
quality run, which then plans a query or two the same way meanwhile (same results).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

__all__ = [
    "COPY_ON_WRITE_BYTES",
    "SMALL_INPUT_ROWS",
    "estimated_bytes",
    "plans_without_adaptive",
    "session_settings",
    "small_input_plans",
    "small_target_merge",
]

SMALL_INPUT_ROWS = 100_000
"""Rows up to which an input is planned by :func:`small_input_plans` (a snapshot share, larger,
keeps the session's settings)."""

COPY_ON_WRITE_BYTES = 16 * 1024**2
"""Bytes of target files a MERGE may touch up to which it rewrites them rather than writing
deletion vectors (:func:`small_target_merge`)."""

_ADAPTIVE = "spark.sql.adaptive.enabled"
_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
_BROADCAST = "spark.sql.autoBroadcastJoinThreshold"
_PERSISTENT_DVS = "spark.databricks.delta.merge.deletionVectors.persistent"


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
    cores = max(1, int(spark.sparkContext.defaultParallelism))
    configured = int(spark.conf.get(_SHUFFLE_PARTITIONS) or cores)
    with session_settings(
        spark, {_ADAPTIVE: "false", _SHUFFLE_PARTITIONS: str(min(configured, cores))}
    ):
        yield


@contextlib.contextmanager
def small_target_merge(spark: Any, touched_bytes: int) -> Iterator[None]:
    """Plan a MERGE whose candidate target files are small as few Spark jobs.

    Up to :data:`COPY_ON_WRITE_BYTES` of files the MERGE may touch: (1) it rewrites the files
    it changes instead of writing deletion vectors for them (Delta's DV write path is seven
    jobs of its own per MERGE, a rewrite of a few small files one); (2) no broadcast joins:
    each broadcast is a job of its own, and a sort-merge join of a few megabytes is one job
    with the rest (with adaptive execution off, :func:`small_input_plans`). Larger targets keep
    deletion vectors (a row changed in a large file costs a small DV, not the file) and
    broadcasts. Results are the same either way; readers see no difference (the table keeps
    the deletion-vector feature, other files keep their vectors).

    Args:
        spark: The session the MERGE runs in (its settings change for the block).
        touched_bytes: Size of the target files the MERGE may touch (by their statistics).
    """
    if touched_bytes > COPY_ON_WRITE_BYTES:
        yield
        return
    with session_settings(spark, {_PERSISTENT_DVS: "false", _BROADCAST: "-1"}):
        yield


def estimated_bytes(frame: Any) -> int | None:
    """The optimizer's size estimate of ``frame``'s input (for a Delta scan, the size of the
    files it reads; no Spark job), None when it cannot tell."""
    try:
        size = frame._jdf.queryExecution().optimizedPlan().stats().sizeInBytes()
        # py4j hands Scala's BigInt over as a Python int.
        return int(size if isinstance(size, int) else size.toLong())
    except Exception:  # noqa: BLE001 - no estimate: the caller takes the general path
        return None


@contextlib.contextmanager
def session_settings(spark: Any, wanted: dict[str, str]) -> Iterator[None]:
    """Set SQL settings of ``spark``'s session for the block, restoring the previous values
    (unset ones unset) after it, whatever happens in it.

    Args:
        spark: The session.
        wanted: Setting -> value.
    """
    conf = spark.conf
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
