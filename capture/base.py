"""The interface every capture source implements.

A source reads change records from one database (or from files of Debezium JSON), classifies
them, gives each an order-preserving position and hands batches to the landing agent. It never
writes to bronze itself and never acknowledges anything to its database on its own: the agent
calls :meth:`CaptureSource.acknowledge` only after bronze has committed the batch.
"""

from __future__ import annotations

import contextlib
import gc
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from bronze.batch import BatchBuilder
from bronze.storage import LakePath

__all__ = ["CaptureSource", "SourceBatch", "gc_paused"]


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """One batch read from a source.

    Attributes:
        builder: The events and quarantined records of the batch.
        offset: The source offset reached after the batch (the resume point).
        exhausted: True when the source had nothing more to read right now.
    """

    builder: BatchBuilder
    offset: dict[str, Any]
    exhausted: bool


class CaptureSource(ABC):
    """A capture source; subclasses set the class flags and implement the three methods.

    The landing agent calls every method from one thread, one call at a time, so a source may
    keep a connection that only one thread may use. It reads ahead: :meth:`read_batch` for the
    next batch runs while the previous batch is committed to bronze, before that batch is
    acknowledged. A source therefore reads on from where its last read ended, never from what
    was last acknowledged, and an offset it returned must not change afterwards.
    """

    KIND: ClassVar[str]
    """Registry name of the source kind (the ``connector`` value in the config)."""

    ACKNOWLEDGES: ClassVar[bool] = False
    """True when the database must be told what is durable (PG slot flush, MySQL saved position)."""

    REPLAYABLE: ClassVar[bool] = True
    """True when re-reading from an offset returns the same records in the same order, which
    exactly-once landing relies on (files, WAL from a slot, binlog from a position)."""

    REPORTS_LOG: ClassVar[bool] = False
    """True when :meth:`log_status` reports the database log behind the source (PG slot, binlog)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.follow = False
        """Set by the agent when it keeps polling: the source may wait for data still being
        written (an unterminated line, an open transaction) instead of taking what is there."""

    def bind_lake(self, bronze_root: LakePath) -> None:
        """Tell the source where bronze lives; called by the landing agent before :meth:`open`.

        Sources that keep side tables beside bronze (the MySQL schema history) override it.

        Args:
            bronze_root: The directory holding ``bronze/events`` and its sibling tables.
        """
        return None  # most sources keep nothing beside bronze

    @abstractmethod
    def open(self, offset: Mapping[str, Any] | None) -> None:
        """Prepare to read from ``offset`` (None: from the beginning, per ``snapshot.mode``).

        Args:
            offset: The offset of the last batch committed in bronze, or None.

        Raises:
            SourceUnavailable: The source cannot be reached now (retryable).
            CaptureError: The offset is not valid for this source.
        """

    @abstractmethod
    def read_batch(
        self,
        *,
        max_events: int,
        max_transaction_events: int,
        until: Mapping[str, Any] | None = None,
    ) -> SourceBatch:
        """Read the next batch.

        A batch ends on a source transaction boundary once it holds ``max_events`` events; a
        transaction larger than ``max_transaction_events`` is cut and its rows in the batch are
        marked partial so silver waits for its end.

        Args:
            max_events: Soft limit on events per batch.
            max_transaction_events: Hard limit on one transaction's events in one batch.
            until: When set, read exactly up to this offset (it ends a batch that was half
                landed before a crash), ignoring the limits.

        Returns:
            The batch; an empty batch with ``exhausted`` set when nothing is available.
        """

    def acknowledge(self, offset: Mapping[str, Any]) -> None:
        """Tell the source that everything up to ``offset`` is durable in bronze.

        Args:
            offset: An offset previously returned in a :class:`SourceBatch` and committed.
        """
        return None  # sources that need no acknowledgement (files) keep this default

    @property
    def log_name(self) -> str | None:
        """What :meth:`log_status` reports on (a slot name), known without connecting."""
        return None

    def log_status(self, offset: Mapping[str, Any] | None) -> dict[str, Any]:
        """The database log behind this source, for ``medallion status`` (``REPORTS_LOG``).

        Args:
            offset: Bronze's committed offset for the source, or None.

        Returns:
            Any of ``slot``, ``slot_active``, ``slot_lag_bytes`` (log written after what bronze
            holds), ``retained_wal_bytes`` (log the server keeps for the source),
            ``retention_headroom_bytes`` and ``slot_error``.

        Raises:
            SourceUnavailable: The server cannot be reached.
        """
        raise NotImplementedError(f"{type(self).__name__} does not report a log")

    def close(self) -> None:
        """Release connections and files."""
        return None  # nothing to release by default


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a batch is read.

    A batch holds tens of thousands of row objects; generational GC would rescan them again and
    again (15-20% of the read time) although nothing there forms a cycle, so reference counting
    frees everything. The collector runs again as soon as the batch is read.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
