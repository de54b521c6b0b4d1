"""The landing agent: read a source, commit batches to bronze exactly once, acknowledge.

One agent per source. Its loop is the whole exactly-once argument:

1. resume from the offset of the last batch committed in bronze (never from a local file);
2. re-send the acknowledgement of that batch (a crash may have come between commit and ack);
3. if a batch was half landed (quarantine committed, events not), re-read exactly its range;
4. read a batch, commit it in one Delta commit with its offset, then acknowledge the source.

A crash anywhere repeats at most the read of one uncommitted batch; nothing is landed twice
(the commit carries the Delta app transaction ``(agent_id, batch_seq)``) and nothing is lost
(the source is acknowledged only after the commit).
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any

from bronze.writer import BronzeWriter, agent_app_id
from capture.base import CaptureSource
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
    ) -> None:
        self.source = source
        self.writer = writer
        self.agent_id = agent_app_id(source.name)
        self.max_events = max_events
        self.max_transaction_events = max_transaction_events
        self.poll_interval_s = poll_interval_s
        self.faults = faults or FaultInjector.from_env()

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
            stop: Set it to stop a following agent after its current batch.

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
            if committed is not None:
                source.acknowledge(committed.offset)
            until = writer.pending_batch_end(agent)
        except Exception as exc:
            raise StageFailed("bronze.resume", exc, batch_id=agent) from exc
        next_seq = 0 if committed is None else committed.batch_seq + 1
        batches = read = landed = quarantined = 0
        stop = stop or threading.Event()
        try:
            while not stop.is_set():
                batch = source.read_batch(
                    max_events=self.max_events,
                    max_transaction_events=self.max_transaction_events,
                    until=until,
                )
                until = None
                counts = batch.builder.counts
                if counts.read == 0:
                    if not follow:
                        break
                    stop.wait(self.poll_interval_s if poll_interval_s is None else poll_interval_s)
                    continue
                self.faults.hit("after_read", next_seq)
                seq = next_seq
                result = writer.commit(
                    agent_id=agent,
                    batch_seq=seq,
                    batch=batch.builder,
                    offset=batch.offset,
                    on_step=lambda step, s=seq: self.faults.hit(step, s),  # type: ignore[misc]
                )
                self.faults.hit("after_commit", seq)
                source.acknowledge(batch.offset)
                self.faults.hit("after_ack", seq)
                offset = batch.offset
                next_seq += 1
                batches += 1
                read += counts.read
                landed += result.events
                quarantined += result.quarantined
                if max_batches is not None and batches >= max_batches:
                    break
                if batch.exhausted and not follow:
                    break
        except Exception as exc:
            raise StageFailed("bronze.landing", exc, batch_id=f"{agent}#{next_seq}") from exc
        finally:
            source.close()
        logger.info(
            "source %s: %s batches, %s read = %s landed + %s quarantined",
            source.name,
            batches,
            read,
            landed,
            quarantined,
        )
        last = next_seq - 1 if next_seq > 0 else None
        return LandingResult(source.name, batches, read, landed, quarantined, last, offset)
