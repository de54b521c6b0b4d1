"""The YugabyteDB agent on the model: through the wire peer, or its stream without a socket.

:func:`model_source` is the real, unmodified :class:`~capture.yugabytedb.source.YugabyteDbSource`
connected to a :class:`~tests.ybmodel.wire.YbPeer` serving a model (its SQL side proxied to the
session's real PostgreSQL, where the test keeps the same tables and rows). :class:`ModelStream`
is what the peer cannot give a unit test: the real
:class:`~capture.yugabytedb.source.YbReplicationStream` (its keepalive-based catch-up and
pending messages) with the socket replaced, so the read-ahead is tested message by message
without a connection or timing.
"""

from __future__ import annotations

import collections
import re
import time
import weakref
from typing import Any

import psycopg

from capture.registry import create_source
from capture.yugabytedb.config import YugabyteDbSourceConfig
from capture.yugabytedb.source import YbReplicationStream, YugabyteDbSource
from pipeline.errors import SourceUnavailable
from tests.ybmodel.vwal import YbModel, keepalive, xlog_data
from tests.ybmodel.wire import YbPeer

__all__ = ["ModelStream", "close_peers", "model_source", "read_times"]


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


_PEERS: weakref.WeakKeyDictionary[YbModel, YbPeer] = weakref.WeakKeyDictionary()
_READ_TIME = re.compile(r"SET LOCAL yb_read_time TO '(\d+) ht'")


def model_source(config: YugabyteDbSourceConfig, model: YbModel) -> YugabyteDbSource:
    """The real agent of a validated ``yugabytedb`` config whose host is the real PostgreSQL,
    pointed at a wire peer (:class:`tests.ybmodel.wire.YbPeer`, one per model, proxying to
    that PostgreSQL) serving ``model``."""
    peer = _PEERS.get(model)
    if peer is None:
        upstream = psycopg.conninfo.make_conninfo(
            host=str(config.database_hostname),
            port=str(config.database_port),
            user=str(config.database_user),
            dbname=str(config.database_dbname),
        )
        peer = _PEERS[model] = YbPeer(model, upstream).start()
    moved = config.model_copy(update={"database_hostname": "127.0.0.1", "database_port": peer.port})
    source = create_source(moved)
    assert isinstance(source, YugabyteDbSource)
    return source


def read_times(model: YbModel) -> list[str]:
    """The hybrid times the agents of ``model`` set ``yb_read_time`` to, in order."""
    peer = _PEERS[model]
    return [m[1] for q in peer.queries if (m := _READ_TIME.search(q))]


def close_peers() -> None:
    """Close every peer :func:`model_source` started (their exported snapshots too)."""
    while _PEERS:
        _, peer = _PEERS.popitem()
        peer.close()
