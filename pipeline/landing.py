"""The landing agent: read a source, commit batches to bronze exactly once, acknowledge.

One agent per source. Its loop is the whole exactly-once argument:

1. resume from the offset of the last batch committed in bronze (never from a local file);
2. re-send the acknowledgement of that batch (a crash may have come between commit and ack);
3. if a batch was half landed (quarantine committed, events not), re-read exactly its range;
4. read a batch, commit it in one Delta commit with its offset, then acknowledge the source.

A crash anywhere repeats at most the read of the uncommitted batches; nothing is landed twice
(the commit carries the Delta app transaction ``(agent_id, batch_seq)``) and nothing is lost
(the source is acknowledged only after the commit).

**Read-ahead.** Batch N is committed by a second thread while this one reads batch N+1, so the
read (database I/O, decoding) overlaps the Delta commit (Parquet encoding and file writes,
which run outside the GIL). The argument above is unchanged:

* every call on the source (``read_batch``, ``acknowledge``, ``close``) stays on the agent's
  thread, so a source's connection (a psycopg replication stream, a PyMySQL socket) is never
  used by two threads;
* at most one batch is read ahead: batch N+2 is not read before batch N's commit has finished
  and N has been acknowledged, and one commit thread commits the batches in ``batch_seq``
  order;
* ``acknowledge(N)`` runs only after batch N's commit returned, on the agent's thread;
* the read-ahead batch is in memory only; a crash loses it and the next start reads it again
  from bronze's committed offset, as it would any uncommitted batch; the run ends (normally or
  by an error) only after the commit in flight has finished, so no commit outlives the agent.
"""

from __future__ import annotations

import copy
import logging
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from bronze.writer import BronzeWriter, CommitResult, agent_app_id
from capture.base import CaptureSource, SourceBatch
from pipeline import metrics
from pipeline.errors import StageFailed
from pipeline.faults import FaultInjector

__all__ = ["LandingAgent", "LandingResult"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class LandingResult:
    """What one :meth:`LandingAgent.run` landed.

    Attributes:
        source: The source name.
        batches: Batches committed by this run.
        read: Records read; always ``landed + quarantined``.
        landed: Records appended to ``bronze/events``.
        quarantined: Records appended to ``bronze/quarantine``.
        last_batch_seq: The agent's last committed batch, or None if it never committed.
        offset: The committed offset the agent stopped at.
    """

    source: str
    batches: int
    read: int
    landed: int
    quarantined: int
    last_batch_seq: int | None
    offset: dict[str, Any] | None


@dataclass(frozen=True, slots=True)
class _InFlight:
    """A batch handed to the commit thread, with the offset it reaches (a private copy)."""

    seq: int
    batch: SourceBatch
    offset: dict[str, Any]
    commit: Future[CommitResult]


@dataclass(slots=True)
class _Tally:
    batches: int = 0
    read: int = 0
    landed: int = 0
    quarantined: int = 0


class LandingAgent:
    """Moves one source's records into bronze.

    Args:
        source: The capture source (not yet opened).
        writer: The bronze writer.
        max_events: ``max.batch.size``: soft limit of events per batch.
        max_transaction_events: ``max.transaction.size``: cut a larger transaction.
        poll_interval_s: ``poll.interval.ms``: wait between reads when following an idle
            source.
        faults: Crash points for tests; defaults to ``$MEDALLION_FAULTS``.
        read_ahead: Read the next batch while the previous one commits (see the module
            docstring); False reads and commits strictly in turn.
    """

    def __init__(
        self,
        source: CaptureSource,
        writer: BronzeWriter,
        *,
        max_events: int = 20_000,
        max_transaction_events: int = 100_000,
        poll_interval_s: float = 1.0,
        faults: FaultInjector | None = None,
        read_ahead: bool = True,
    ) -> None:
        self.source = source
        self.writer = writer
        self.agent_id = agent_app_id(source.name)
        self.max_events = max_events
        self.max_transaction_events = max_transaction_events
        self.poll_interval_s = poll_interval_s
        self.faults = faults or FaultInjector.from_env()
        self.read_ahead = read_ahead

    def run(
        self,
        *,
        follow: bool = False,
        max_batches: int | None = None,
        poll_interval_s: float | None = None,
        stop: threading.Event | None = None,
    ) -> LandingResult:
        """Land until the source is exhausted (or forever with ``follow``).

        Args:
            follow: Keep polling for new records instead of stopping when none are left.
            max_batches: Stop after this many committed batches.
            poll_interval_s: Sleep between polls when following an idle source (default: the
                agent's ``poll_interval_s``).
            stop: Set it to stop a following agent after its current batch (a batch already
                read ahead is committed too).

        Returns:
            Counts of this run.

        Raises:
            StageFailed: Wraps any failure, naming the stage and batch.
        """
        writer, source, agent = self.writer, self.source, self.agent_id
        source.follow = follow
        try:
            writer.ensure_tables()
            committed = writer.last_committed(agent)
            offset = committed.offset if committed is not None else None
            source.bind_lake(writer.tables.events.parent)
            source.open(offset)
            metrics.on_capture_opened(source, self.max_events)
            if committed is not None:
                source.acknowledge(committed.offset)
            until = writer.pending_batch_end(agent)
        except Exception as exc:
            raise StageFailed("bronze.resume", exc, batch_id=agent) from exc
        next_seq = 0 if committed is None else committed.batch_seq + 1
        tally = _Tally()
        stop = stop or threading.Event()
        wait_s = self.poll_interval_s if poll_interval_s is None else poll_interval_s
        committer = ThreadPoolExecutor(1, thread_name_prefix=f"medallion-commit-{source.name}")
        pending: _InFlight | None = None
        submitted = 0
        last_read = False
        at = next_seq
        try:
            while True:
                batch = None
                if not (last_read or stop.is_set()):
                    at = next_seq
                    batch = source.read_batch(
                        max_events=self.max_events,
                        max_transaction_events=self.max_transaction_events,
                        until=until,
                    )
                    until = None
                if pending is not None:
                    at = pending.seq
                    offset = self._finish(pending, tally)
                    pending = None
                if batch is None:
                    break
                if batch.builder.counts.read == 0:
                    if not follow:
                        break
                    stop.wait(wait_s)
                    continue
                at = next_seq
                self.faults.hit("after_read", next_seq)
                pending = self._submit(committer, next_seq, batch)
                next_seq += 1
                submitted += 1
                last_read = (max_batches is not None and submitted >= max_batches) or (
                    batch.exhausted and not follow
                )
                if not self.read_ahead:
                    offset = self._finish(pending, tally)
                    pending = None
        except Exception as exc:
            if pending is not None and pending.seq != at:
                self._abandon(pending)
            raise StageFailed("bronze.landing", exc, batch_id=f"{agent}#{at}") from exc
        finally:
            # No commit outlives the run: the source closes only once the last one has ended
            # (a batch committed but not acknowledged here is acknowledged at the next start).
            committer.shutdown(wait=True)
            source.close()
            metrics.on_capture_closed(source)
        logger.info(
            "source %s: %s batches, %s read = %s landed + %s quarantined",
            source.name,
            tally.batches,
            tally.read,
            tally.landed,
            tally.quarantined,
        )
        last = next_seq - 1 if next_seq > 0 else None
        return LandingResult(
            source.name, tally.batches, tally.read, tally.landed, tally.quarantined, last, offset
        )

    def _submit(self, committer: ThreadPoolExecutor, seq: int, batch: SourceBatch) -> _InFlight:
        """Hand ``batch`` to the commit thread; its offset is copied, so that reading the next
        batch cannot change what this one commits and acknowledges."""
        offset = copy.deepcopy(batch.offset)
        metrics.on_batch_queued(self.source, batch)
        return _InFlight(seq, batch, offset, committer.submit(self._commit, seq, batch, offset))

    def _commit(self, seq: int, batch: SourceBatch, offset: dict[str, Any]) -> CommitResult:
        """On the commit thread: commit one batch (never touches the source)."""
        result = self.writer.commit(
            agent_id=self.agent_id,
            batch_seq=seq,
            batch=batch.builder,
            offset=offset,
            on_step=lambda step: self.faults.hit(step, seq),
        )
        self.faults.hit("after_commit", seq)
        return result

    def _finish(self, flight: _InFlight, tally: _Tally) -> dict[str, Any]:
        """Wait for ``flight``'s commit, then acknowledge it; returns its committed offset.

        Raises:
            Exception: The commit's own error (the batch is not acknowledged).
        """
        result = flight.commit.result()
        self.source.acknowledge(flight.offset)
        self.faults.hit("after_ack", flight.seq)
        counts = flight.batch.builder.counts
        tally.batches += 1
        tally.read += counts.read
        tally.landed += result.events
        tally.quarantined += result.quarantined
        metrics.on_batch_committed(self.source, flight.batch, flight.offset, result)
        return flight.offset

    def _abandon(self, flight: _InFlight) -> None:
        """Wait for the commit in flight when the read ahead of it failed, and say how it
        ended: committed (acknowledged at the next start) or not (read again then)."""
        error = flight.commit.exception()
        if error is None:
            logger.info(
                "source %s: batch %s committed; its acknowledgement waits for the next start",
                self.source.name,
                flight.seq,
            )
        else:
            logger.error(
                "source %s: batch %s was not committed either (it is read again at the next "
                "start): %s",
                self.source.name,
                flight.seq,
                error,
            )
