"""Which offsets of which Kafka partitions bronze holds, and the loud failures around them.

The committed offset of a ``kafka`` source keeps, per topic and partition, the *next* offset to
read: one past the last record landed (or quarantined). It is written inside the bronze Delta
commit of those records, so it is exactly what bronze holds. A partition missing from it was
never read, and is read from its first offset.

Offsets only move forward, and nothing may disappear unread. A partition whose log now starts
after the committed offset (retention deleted records bronze never read), or ends before it (the
topic was deleted and created again), raises :class:`PartitionOffsetError` (terminal: a person
decides whether to re-snapshot), naming the topic, the partition and both offsets.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pipeline.errors import CaptureError, Terminal

__all__ = ["PartitionOffsetError", "PartitionOffsets", "TopicPartitionKey"]

TopicPartitionKey = tuple[str, int]
"""``(topic, partition)``."""


class PartitionOffsetError(CaptureError, Terminal):
    """A partition no longer holds the records after bronze's committed offset."""


class PartitionOffsets:
    """Next offset to read per ``(topic, partition)``.

    Args:
        source: The source name, for messages.
    """

    def __init__(self, source: str) -> None:
        self.source = source
        self._next: dict[TopicPartitionKey, int] = {}

    def load(self, doc: Mapping[str, Mapping[str, Any]]) -> None:
        """Take the ``partitions`` member of a committed offset: ``{topic: {"<p>": next}}``."""
        self._next = {
            (topic, int(part)): int(nxt)
            for topic, parts in doc.items()
            for part, nxt in parts.items()
        }

    def dump(self) -> dict[str, dict[str, int]]:
        """The ``partitions`` member of the offset to commit (sorted, so equal states are equal
        text)."""
        out: dict[str, dict[str, int]] = {}
        for (topic, part), nxt in sorted(self._next.items()):
            out.setdefault(topic, {})[str(part)] = nxt
        return out

    def get(self, tp: TopicPartitionKey) -> int | None:
        """The next offset to read of ``tp``, or None if bronze never read it."""
        return self._next.get(tp)

    def advance(self, tp: TopicPartitionKey, offset: int) -> None:
        """Record that the record at ``offset`` of ``tp`` is landed (or quarantined)."""
        if offset + 1 > self._next.get(tp, -1):
            self._next[tp] = offset + 1

    def known(self) -> Iterable[TopicPartitionKey]:
        """Every partition bronze has read from."""
        return self._next.keys()

    def reached(self, until: Mapping[str, Mapping[str, Any]], tp: TopicPartitionKey) -> bool:
        """True when ``tp`` is read up to its offset in ``until`` (or ``until`` lacks it, so
        the batch that ``until`` ends never read it)."""
        limit = until.get(tp[0], {}).get(str(tp[1]))
        return limit is None or self._next.get(tp, 0) >= int(limit)

    def all_reached(self, until: Mapping[str, Mapping[str, Any]]) -> bool:
        """True when every partition of ``until`` is read up to its offset there."""
        return all(
            self._next.get((topic, int(part)), 0) >= int(limit)
            for topic, parts in until.items()
            for part, limit in parts.items()
        )

    def check_range(self, tp: TopicPartitionKey, low: int, high: int) -> None:
        """Check that ``tp``'s log ``[low, high)`` still holds what bronze has not read.

        Raises:
            PartitionOffsetError: Records after the committed offset were deleted, or the log
                ends before it.
        """
        nxt = self._next.get(tp)
        if nxt is None:
            return
        topic, part = tp
        if nxt < low:
            raise PartitionOffsetError(
                f"source {self.source}: {topic} partition {part} now starts at offset {low}, but "
                f"bronze has read it up to offset {nxt}: records {nxt}..{low - 1} were deleted "
                "(retention.ms / retention.bytes) before bronze read them. Their changes are "
                "missing from bronze: re-snapshot the tables of this topic, then set the offset "
                "past the gap (docs/kafka.md, 'Records deleted before bronze read them')."
            )
        if nxt > high:
            raise PartitionOffsetError(
                f"source {self.source}: {topic} partition {part} ends at offset {high}, but "
                f"bronze has read it up to offset {nxt}: the topic was deleted and created "
                "again (or its records truncated). Bronze cannot tell which records are new "
                "(docs/kafka.md, 'A topic created again')."
            )
