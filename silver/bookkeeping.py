"""Silver's bookkeeping tables (``_cuts``, ``_progress``, ``_pending``) written without Spark.

Each micro-batch ends with a few small writes: one ``_cuts`` row per table, one ``_progress`` row
per source, and the rewrite of ``_pending`` (the rows still waiting for their transaction). As
Spark Delta writes they cost 5-10 Spark jobs each (the write, its statistics, the snapshot
reconstructions before and after the commit), a fixed cost of every micro-batch however few
rows it holds. Written by deltalake from Arrow they are one small Parquet file and one commit,
in the driver, with no Spark job.

Exactly once is kept the way Spark's ``txnAppId``/``txnVersion`` options kept it: the commit
carries a Delta app transaction ``(app_id, version)`` (the silver batch id), and a write whose
version the table already holds is skipped. Spark skips such a write itself; deltalake records
the transaction but does not look, so :func:`write_once` looks first. One process writes a lake's
silver (the silver job holds its lock across a micro-batch), so nothing commits between the look
and the write.

The tables stay ordinary Delta tables (protocol 1/2, no table features), read by Spark, by
deltalake (:mod:`gold.cuts`, :mod:`pipeline.status`) and by any reader; a table created by
Spark in an older lake takes these appends as it is.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import Any

import pyarrow as pa

from bronze.storage import LakePath, open_delta, storage_options

__all__ = ["already_written", "append_rows", "write_once"]

logger = logging.getLogger(__name__)


def already_written(path: LakePath | str, app_id: str, version: int) -> bool:
    """Whether the table holds app transaction ``app_id`` at ``version`` or later.

    Args:
        path: The Delta table.
        app_id: The writer's Delta app id.
        version: The version of the write about to be made.

    Returns:
        True when that write (or a later one) is committed; False without the table.
    """
    from deltalake.exceptions import TableNotFoundError

    try:
        latest = open_delta(path).transaction_version(app_id)
    except TableNotFoundError:
        return False
    return latest is not None and latest >= version


def write_once(
    path: LakePath | str,
    rows: pa.Table,
    *,
    mode: str,
    app_id: str,
    version: int,
) -> bool:
    """Append or overwrite ``rows`` as Delta app transaction ``(app_id, version)``, once.

    Args:
        path: The Delta table (created by the first write).
        rows: The rows, with the table's columns.
        mode: ``append`` or ``overwrite``.
        app_id: The writer's Delta app id.
        version: The silver batch id: a replayed micro-batch writes nothing twice.

    Returns:
        Whether a commit was made (False: this version was committed already).
    """
    from deltalake import CommitProperties, Transaction, write_deltalake

    if already_written(path, app_id, version):
        logger.info("silver %s: %s v%s already written", path, app_id, version)
        return False
    write_deltalake(
        str(path),
        rows,
        mode="overwrite" if mode == "overwrite" else "append",
        storage_options=storage_options(path),
        commit_properties=CommitProperties(
            app_transactions=[Transaction(app_id=app_id, version=version)]
        ),
    )
    return True


def append_rows(
    path: LakePath | str,
    schema: pa.Schema,
    rows: Sequence[tuple[Any, ...]],
    *,
    app_id: str,
    version: int,
) -> bool:
    """Append ``rows`` with :func:`write_once`, stamped with the time they were recorded.

    Args:
        path: The Delta table (created by the first write).
        schema: Its columns; the last is the recording time, which the rows leave out.
        rows: The values of every other column, in schema order.
        app_id: The writer's Delta app id.
        version: The silver batch id.

    Returns:
        Whether a commit was made.
    """
    now = dt.datetime.now(dt.UTC)
    table = pa.Table.from_pylist(
        [dict(zip(schema.names, (*row, now), strict=True)) for row in rows], schema=schema
    )
    return write_once(path, table, mode="append", app_id=app_id, version=version)
