"""The YugabyteDB agent wired to the model's replication side, with real PostgreSQL for YSQL.

YugabyteDB's query layer is PostgreSQL's: the catalog the agent reads for a Relation message,
the publication and the snapshot's ``SELECT``s run on the session's real PostgreSQL, where the
test keeps the same tables and rows as the model. What no PostgreSQL can do comes from
:class:`~tests.ybmodel.vwal.YbModel`: the slot (``yboutput``, LSN types, ``CHANGE``), the
Virtual WAL's frames and the restart from the confirmed flush. :class:`ModelSource` is the real
:class:`~capture.yugabytedb.source.YugabyteDbSource` with only those seams replaced;
:class:`ModelStream` is the real :class:`~capture.yugabytedb.source.YbReplicationStream` (its
keepalive-based catch-up and pending messages included) with the socket replaced.
"""

from __future__ import annotations

import collections
import time
from typing import Any

import psycopg

from capture.postgresql.replication import ReplicationStream
from capture.postgresql.slot import SlotState
from capture.yugabytedb.source import YbReplicationStream, YugabyteDbSource
from pipeline.errors import CaptureError, SourceUnavailable
from tests.ybmodel.vwal import ModelError, YbModel, keepalive, xlog_data

__all__ = ["ModelSource", "ModelStream", "model_source"]


class ModelStream(YbReplicationStream):
    """A walsender of the model: frames from the slot's confirmed flush, keepalives on request."""

    model: YbModel

    def __init__(self, conn: Any, source: str, *, keepalive_s: float | None = None) -> None:
        super().__init__(conn, source, keepalive_s=0)
        self._queue: collections.deque[bytes] = collections.deque()
        self._slot = ""
        self._sent_commit = -1
        self._reply = False
        self.broken = False

    def start(self, slot: str, lsn: int, publication: str, *, messages: bool) -> None:
        """Stream the slot from its confirmed flush (YugabyteDB ignores a later ``lsn``)."""
        self._slot = slot
        confirmed = self.model.slots[slot].confirmed_flush
        self._sent_commit = confirmed - 2  # at least once: the last confirmed one comes again
        self.streaming = True
        self.last_status = time.monotonic()

    def _pull(self) -> None:
        for lsn, payload in self.model.frames(self._slot, after_commit=self._sent_commit):
            self._queue.append(xlog_data(lsn, lsn, payload))
            if payload[:1] == b"C":
                self._sent_commit = lsn

    def _read(self, timeout: float) -> bytes | None:
        if self.broken:
            raise SourceUnavailable(f"source {self.source}: model connection lost")
        if not self._queue:
            self._pull()
        if self._queue:
            return self._queue.popleft()
        if self._reply:
            self._reply = False
            return keepalive(max(self._sent_commit, self.model.slots[self._slot].confirmed_flush))
        return None

    def _send_status(self, flush_lsn: int, *, reply: bool) -> None:
        if not self.streaming:
            return
        slot = self.model.slots[self._slot]
        if flush_lsn > slot.confirmed_flush:
            slot.confirmed_flush = flush_lsn
            slot.acks.append(flush_lsn)
        self._reply = self._reply or reply
        self.last_status = time.monotonic()

    def _stop(self, flush_lsn: int) -> None:
        self._send_status(flush_lsn, reply=False)
        self.streaming = False

    def close(self) -> None:
        """Forget the stream and close the connection it was given."""
        self.streaming = False
        self.conn.close()


class ModelSource(YugabyteDbSource):
    """The YugabyteDB agent with the model's slot and stream (see the module docstring)."""

    model: YbModel
    read_times: list[str]

    def _stream_class(self) -> type[ReplicationStream]:
        model = self.model

        class Bound(ModelStream):
            pass

        Bound.model = model
        return Bound

    def _connect(self, *, replication: bool = False) -> psycopg.Connection[Any]:
        # The model's stream needs no server connection; the SQL side is the real PostgreSQL.
        return super()._connect(replication=False)

    def _slot(self) -> SlotState | None:
        slot = self.model.slots.get(self.settings.slot_name)
        if slot is None:
            return None
        return SlotState(slot.confirmed_flush, None, False)

    def _create_slot(self, *, export: bool) -> tuple[int, str | None]:
        s = self.settings
        try:
            return self.model.create_slot(s.slot_name, s.plugin_name, s.slot_lsn_type)
        except ModelError as exc:
            # What the server answers to CREATE_REPLICATION_SLOT: terminal, as psycopg's
            # error would be classified.
            raise CaptureError(f"source {self.name}: {exc}") from exc

    def _read_at_point(self, conn: psycopg.Connection[Any], name: str | None) -> None:
        # PostgreSQL cannot read at a hybrid time; the test changes nothing between the slot's
        # creation and the snapshot, so the present is the consistent point.
        self.read_times.append(str(name))

    def _reread_at_point(self, conn: psycopg.Connection[Any]) -> None:
        slot = self.model.slots[self.settings.slot_name]
        self.read_times.append(str(slot.consistent_ht))


def model_source(config: Any, model: YbModel) -> ModelSource:
    """A :class:`ModelSource` for a validated ``yugabytedb`` config, bound to ``model``."""
    source = ModelSource.from_config(config)
    assert isinstance(source, ModelSource)
    source.model = model
    source.read_times = []
    return source
