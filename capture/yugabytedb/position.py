"""YugabyteDB source positions: the PostgreSQL layout, LSNs per replication slot.

Persisted in bronze: the encoding must never change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from capture.postgresql.position import PostgresPosition

__all__ = ["YugabyteDBPosition"]


@dataclass(frozen=True, slots=True)
class YugabyteDBPosition(PostgresPosition):
    """YugabyteDB position: the PostgreSQL layout ``(commit_lsn, phase, lsn, seq)``.

    YugabyteDB's logical replication assigns LSNs per replication slot in commit-time order, and
    writes the same ``source`` fields as PostgreSQL (``lsn``, ``txId``, ``sequence``), so the
    PostgreSQL rules apply unchanged. With the ``HYBRID_TIME`` LSN type every record of a
    transaction carries the commit LSN as ``lsn``; such records share one base position and are
    ordered by ``seq`` (arrival order). LSNs of different slots must never be compared: keep one
    stream, and one :class:`PositionResolver`, per slot.
    """

    # SOURCE_BLOCK is PostgreSQL's: the connector is a PostgreSQL fork and keeps the PostgreSQL
    # source schema name and fields.
    CONNECTOR: ClassVar[str] = "yugabytedb"
