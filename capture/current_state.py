"""What reconciliation needs from a database agent, declared: :class:`CurrentStateReader`.

:mod:`gold.reconcile` compares gold with the source database. It reads the source through the
agent's own conversion (so type handling modes, column filters, masks and hashes come out as
they were landed) and asks the agent whether the database's log holds captured changes after
the cut. An agent that can do both implements this protocol; gold uses nothing else of it.

The independent value read (:mod:`gold.source_read`) deliberately does not go through the
agents: it is evidence of its own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, runtime_checkable

from capture.captured_table import CapturedTable
from capture.column_types import ValueConversionError
from pipeline.errors import PipelineError

__all__ = [
    "READS_CURRENT_STATE",
    "CurrentRows",
    "CurrentStateReader",
    "LogCheck",
    "current_payload",
]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LogCheck:
    """Whether the source's log holds a captured change after a cut.

    Attributes:
        ahead: True when it does, False when it does not, None when it cannot be told (no
            slot, a purged binlog file, no permission).
        reason: Why, for the reconciliation's notes.
    """

    ahead: bool | None
    reason: str


CurrentRows = tuple[Any, CapturedTable, list[dict[str, Any] | None]]
"""One item of :meth:`CurrentStateReader.read_current`: ``(point, table, rows)``."""


@runtime_checkable
class CurrentStateReader(Protocol):
    """An agent that can read its database's current rows at a consistent point.

    The point is the connector's own log coordinate (a WAL LSN, a binlog point); gold passes
    it back unchanged to :meth:`point_text` and :meth:`changes_after`.
    """

    name: str

    def read_current(self, *, fetch_size: int | None = None) -> Iterator[CurrentRows]:
        """Every captured table's current rows, converted exactly as the snapshot converts them.

        One consistent read (one ``REPEATABLE READ`` transaction) on a connection of the
        reader's own; nothing of the capture (slot, binlog reader, schema history) is touched.

        Args:
            fetch_size: Rows per fetch (default the source's ``snapshot.fetch.size``).

        Yields:
            ``(point, table, rows)``: ``point`` is the log point of the read (the same in every
            item); each table is announced by an item with no rows, then its rows follow in
            key order, in chunks. A row the agent could not convert (it would have been
            quarantined) is None.

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        ...

    def point_text(self, point: Any) -> str:
        """The text of a point :meth:`read_current` yielded, as the database prints it."""
        ...

    def changes_after(self, position: bytes, point: Any) -> LogCheck:
        """Whether the log holds a captured change after ``position`` and up to ``point``.

        Args:
            position: The cut's encoded bronze position (this connector's layout).
            point: A point :meth:`read_current` yielded.

        Returns:
            The answer and why; errors reading the log become ``ahead`` None.
        """
        ...


READS_CURRENT_STATE: Final = frozenset(
    {"postgresql", "mysql", "mariadb", "sqlserver", "oracle", "db2", "yugabytedb"}
)
"""Connector kinds whose agent is a :class:`CurrentStateReader`. Known without importing the
agents (and so their drivers); :func:`gold.reconcile.reconcile_source` checks the agent it gets."""


def current_payload(
    source: str, table: CapturedTable, values: Sequence[Any]
) -> dict[str, Any] | None:
    """One current row as the ``after`` payload the agent would land (its conversion, filters,
    masks); None, with a warning, for a row the agent would quarantine."""
    try:
        return table.row_and_key(values)[0]
    except (ValueConversionError, PipelineError) as exc:
        logger.warning(
            "source %s: %s: a row the agent would quarantine: %s", source, table.collection, exc
        )
        return None
