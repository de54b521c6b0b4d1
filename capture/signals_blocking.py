"""Blocking snapshots: ``execute-snapshot`` with ``"type": "blocking"``.

As the seed documents describe it: the agent stops streaming where it read the signal, snapshots
the listed tables the way an initial snapshot does (every row as ``op r``, ``source.snapshot``
``true``, the very last row ``last``), then resumes streaming right after the signal.

Here the pause is literal: the signal is acted upon while its batch is being read, the tables
are read whole (in key order, ``incremental.snapshot.chunk.size`` rows per query, under the
``additional-conditions`` filter) before the next log record is, and the rows join the same
batch at the signal's place in the log (the positions an incremental chunk takes at its high
watermark). So:

* the batch commits the rows together with the offset past the signal: after a crash before the
  commit, the signal is read again and the snapshot taken again; after the commit, never;
* a row read here holds the table's state when it was read, which may be newer than the signal;
  the changes between the signal and the read come after it in the log and are applied after it
  in silver (positions), ending at the same state: what Debezium's documents warn as "events
  that duplicate records captured by the snapshot";
* the rows are held in the batch until it is committed: for a large table, use an incremental
  snapshot, which holds one chunk at a time.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import TYPE_CHECKING, Any

from bronze.batch import BatchBuilder
from bronze.envelope import Op
from capture.change_records import data_record
from capture.column_types import ValueConversionError
from capture.signals import SignalError, SnapshotRequest
from pipeline.errors import PipelineError

if TYPE_CHECKING:
    from capture.captured_table import CapturedTable
    from capture.incremental_snapshot import IncrementalSnapshots

__all__ = ["read_blocking"]

logger = logging.getLogger(__name__)

_OP_READ = Op.READ.value


def read_blocking(
    agent: IncrementalSnapshots,
    builder: BatchBuilder,
    request: SnapshotRequest,
    at: Any,
    now: dt.datetime,
) -> int:
    """Read ``request``'s tables whole into ``builder`` at the signal's place ``at``.

    Returns:
        The rows emitted.

    Raises:
        SignalError: A table is no longer captured.
    """
    rows: list[tuple[CapturedTable, dict[str, Any], Any]] = []
    bad: list[tuple[CapturedTable, bytes, Exception]] = []
    for collection in request.collections:
        table = agent._incremental_table(collection)
        if table is None:
            raise SignalError(f"blocking snapshot: table {collection} is not captured")
        condition = request.conditions.get(collection)
        until = agent._incremental_bound(table, condition)
        after: list[Any] | None = None
        while until is not None:
            chunk = agent._incremental_read(
                table, after, until, condition, agent.signals.chunk_size
            )
            if not chunk:
                break
            for raw_row in chunk:
                decoded = agent._snapshot_decode(table, raw_row)
                after = decoded.key
                try:
                    image, key = table.row_and_key(decoded.values())
                except (ValueConversionError, PipelineError) as exc:
                    bad.append((table, decoded.raw(), exc))
                    continue
                rows.append((table, image, key))
        logger.info(
            "source %s: blocking snapshot of %s: %d rows",
            agent.name,
            collection,
            sum(1 for t, _, _ in rows if t.collection == collection),
        )
    positions = agent._incremental_positions(at, len(rows))
    for n, ((table, image, key), position) in enumerate(zip(rows, positions, strict=True)):
        source = {
            **agent._incremental_source(table, at),
            "snapshot": "last" if n == len(rows) - 1 else "true",
        }
        record = data_record(_OP_READ, source, None, image, key, None, table)
        agent._add(builder, record, position, table.snapshot_origin, now, None, table)
    for table, raw, error in bad:
        agent._quarantine(builder, raw, table.snapshot_origin, error, now, table)
    return len(rows)
