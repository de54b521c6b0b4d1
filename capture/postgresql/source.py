"""The PostgreSQL capture agent: a consistent snapshot, then the pgoutput logical-decoding stream.

:class:`PostgresSource` composes the agent's parts, one module each: :mod:`.agent` (state,
connections, table schemas), :mod:`.snapshot`, :mod:`.stream`, :mod:`.current` (reconciliation
reads) and :mod:`.status` (the slot for ``medallion status``); :mod:`.settings` reads the config.

How it works (spec: ``debezium-guide-1.2.md`` §2.2, ``test-servers.md`` §1b):

1. **Setup, idempotent.** The publication is created per ``publication.autocreate.mode``
   (``all_tables``: ``FOR ALL TABLES``; ``filtered``: ``FOR TABLE`` the captured tables, kept in
   step with the filters; ``disabled``: it must exist). The slot is created if missing.
2. **Snapshot** (modes ``initial``, ``initial_only``, ``exported``, ``when_needed``, ``always``).
   ``CREATE_REPLICATION_SLOT ... EXPORT_SNAPSHOT`` returns the slot's consistent point P and a
   snapshot name; a second session imports it (``SET TRANSACTION SNAPSHOT``) and reads each table
   in key order through a cursor, so rows are exactly the database at P: the stream from P then
   has no gap and no overlap. Rows are ``op r`` with ``source.snapshot`` ``true`` (``last`` on the
   final row) and positions ``(P, snapshot, P, seq)``. The offset records the table and the last
   key read, so a crash resumes after the last committed chunk. The exported snapshot does not
   survive the crash, so the remaining chunks are read from a fresh snapshot; rows changed after
   P may then be read in their newer state, which the stream from P (it always starts at P)
   re-applies in order, so silver still converges, and nothing already committed is read again.
3. **Stream.** ``START_REPLICATION SLOT s LOGICAL <lsn> (proto_version '1', publication_names
   ..., messages 'true')`` on a ``replication=database`` connection, read with psycopg 3's
   low-level copy calls (psycopg 3 has no replication API, psycopg#71). Each transaction's
   records get positions ``(commit LSN, stream, change LSN, seq)``: the commit LSN first, because
   the per-row LSN is not ordered across interleaved transactions.
4. **Acknowledgement.** The slot's flush LSN is sent only from :meth:`acknowledge`, which the
   landing agent calls after the bronze commit, and again after a restart. The offset's ``lsn``
   is the end of the last complete transaction; restarting there skips exactly the transactions
   already in bronze. A transaction cut by ``max.transaction.size`` is resent whole after a
   restart and its first ``emitted`` records are skipped.
5. **Faults.** A lost connection or a server restart is retried with backoff (Debezium's
   ``slot.max.retries``): the interrupted batch is read again from the previous batch's offset.
   A dropped or invalidated slot is an error naming the lost LSN, or a new snapshot under
   ``when_needed``/``always``. A slot that exists while bronze has no offset is dropped and
   recreated only if the agent can prove it created it (the ``medallion.slot`` marker message it
   writes right after creating a slot is still the first thing the slot decodes); any other slot
   is left alone with an error, since dropping another consumer's slot loses its changes.

Snapshot modes: ``initial`` and ``exported`` are the same here (the exported snapshot is already
lock-free); ``always`` snapshots again only when the slot is lost; ``initial_only`` drops its slot
once the snapshot is in bronze, so an unread slot does not retain WAL.

Records follow Debezium: ``source`` = version, connector, name, ts_ms (commit time), snapshot,
db, sequence, schema, table, txId, lsn, xmin, plus ``commit_lsn`` (as medallion's reference
streams write it); ``before`` per REPLICA IDENTITY (DEFAULT and INDEX: the key, FULL: the row,
NOTHING: none); unchanged TOAST columns carry ``toasted.value.placeholder``; a primary-key change
is delete + tombstone + create with ``__debezium.newkey``/``__debezium.oldkey``; TRUNCATE is
``op t`` per table; ``pg_logical_emit_message`` is ``op m``; BEGIN/END with
``provide.transaction.metadata``; heartbeats with ``heartbeat.interval.ms``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, ClassVar

import orjson
from deltalake.exceptions import TableNotFoundError

from bronze import schema as S
from bronze.storage import LakePath, lake_path, open_delta
from capture.postgresql import slot as pg_slot
from capture.postgresql.agent import SnapshotProgress
from capture.postgresql.current import CurrentReader
from capture.postgresql.incremental import IncrementalReader
from capture.postgresql.position import PostgresPosition, format_pg_lsn
from capture.postgresql.settings import PgSourceSettings
from capture.postgresql.slot import parse_lsn
from capture.postgresql.snapshot import SnapshotReader
from capture.postgresql.status import SlotStatus
from capture.server_errors import POSTGRES, ServerErrors
from pipeline.errors import CaptureError, InternalError, NotInstalledError, SourceUnavailable

try:
    import psycopg
except ImportError as exc:  # pragma: no cover - the registry reports it
    raise NotInstalledError(
        "the postgresql capture agent needs psycopg 3: pip install '.[postgres]'"
    ) from exc

__all__ = ["PostgresSource", "PgSourceSettings", "OFFSET_FORMAT", "parse_lsn"]

logger = logging.getLogger(__name__)

OFFSET_FORMAT = 1
"""Version of the offset document this source writes."""


class PostgresSource(SnapshotReader, IncrementalReader, CurrentReader, SlotStatus):
    """Captures one PostgreSQL database through a pgoutput slot.

    A composition: the snapshot (:class:`~capture.postgresql.snapshot.SnapshotReader`), the
    stream (:class:`~capture.postgresql.stream.StreamReader`), the reconciliation reads
    (:class:`~capture.postgresql.current.CurrentReader`) and the slot status
    (:class:`~capture.postgresql.status.SlotStatus`) over one
    :class:`~capture.postgresql.agent.PostgresAgent`; this class opens, restores and writes the
    offset, and runs the batch loop that hands from the snapshot to the stream.

    Args:
        name: The configured source name.
        settings: Connection, slot, filters and value handling.
    """

    KIND: ClassVar[str] = "postgresql"
    SETTINGS: ClassVar[Any] = PgSourceSettings
    ACKNOWLEDGES: ClassVar[bool] = True
    REPORTS_LOG: ClassVar[bool] = True
    OUTAGES: ClassVar[tuple[type[BaseException], ...]] = (
        psycopg.OperationalError,
        psycopg.InterfaceError,
    )
    ORIGIN: ClassVar[str] = "pg"
    SERVER_ERRORS: ClassVar[ServerErrors | None] = POSTGRES

    def bind_lake(self, bronze_root: LakePath) -> None:
        """Learn each table's columns from the last envelope schema this source landed, so an
        ADD COLUMN made while the agent was stopped is still told apart (contract C4)."""
        self._known_columns.update(landed_columns(lake_path(bronze_root) / "schemas", self.name))

    def _open(self, offset: Mapping[str, Any] | None) -> None:
        s = self.settings
        self._close_connections()
        self._relations.clear()
        self._tx = None
        self._check_server()
        pg_slot.ensure_publication(
            self._side(),
            self.name,
            s.publication_name,
            s.publication_autocreate_mode,
            s.table_filter,
        )
        slot = self._slot()
        if offset is None:
            if s.snapshot_mode == "never":
                if slot is None:
                    point, _ = self._create_slot(export=False)
                    self._repl_close()
                else:
                    point = slot.confirmed_flush
                self._phase = "stream"
                self._resume_lsn = point
                self._acked = point
                return
            if slot is not None:
                # A slot without a bronze offset cannot provide the snapshot's consistent point.
                if slot.active or not self._slot_is_ours():
                    raise CaptureError(
                        f"source {self.name}: replication slot {s.slot_name!r} already exists "
                        "but bronze holds no offset for this source, and the slot was not "
                        "created by this agent (or is in use). Choose another slot.name, stream "
                        "from the slot without a snapshot (snapshot.mode=never), or drop it if "
                        f"nothing else needs it: SELECT pg_drop_replication_slot('{s.slot_name}')"
                    )
                logger.warning(
                    "source %s: slot %s was created by an earlier run that stopped before its "
                    "first bronze commit; recreating it for a consistent snapshot",
                    self.name,
                    s.slot_name,
                )
                self._drop_slot()
            self._start_snapshot()
            return
        self._restore(offset)
        if self._phase == "done":
            if slot is not None:
                self._drop_slot_after_initial_only()
            return
        if s.snapshot_mode == "always":
            logger.warning(
                "source %s: snapshot.mode 'always' snapshots again only when the slot is lost; "
                "bronze's offset is intact, so streaming resumes from it",
                self.name,
            )
        lost = slot is None or slot.lost
        if lost:
            why = "does not exist" if slot is None else "was invalidated (wal_status lost)"
            if s.snapshot_mode in ("when_needed", "always"):
                logger.warning(
                    "source %s: slot %s %s; re-snapshotting (snapshot.mode=%s)",
                    self.name,
                    s.slot_name,
                    why,
                    s.snapshot_mode,
                )
                if slot is not None:
                    self._drop_slot()
                self._start_snapshot()
                return
            raise CaptureError(
                f"source {self.name}: replication slot {s.slot_name!r} {why}; changes after LSN "
                f"{format_pg_lsn(self._resume_lsn)} are gone from the server. Set snapshot.mode "
                "to 'when_needed' to take a new snapshot, or restore the slot"
            )
        if slot is None:
            raise InternalError("capture.postgresql.source: expected slot is not None")
        if slot.confirmed_flush > self._resume_lsn and self._phase == "stream":
            raise CaptureError(
                f"source {self.name}: slot {s.slot_name!r} confirmed "
                f"{format_pg_lsn(slot.confirmed_flush)}, "
                f"beyond bronze's offset {format_pg_lsn(self._resume_lsn)}: another consumer "
                "used the slot, and the changes between are lost"
            )
        self._acked = self._resume_lsn
        if self._phase == "snapshot":
            self._resume_snapshot()

    def _restore(self, offset: Mapping[str, Any]) -> None:
        self._check_offset_format(offset, OFFSET_FORMAT)
        if offset.get("slot") != self.settings.slot_name:
            raise CaptureError(
                f"source {self.name}: bronze's offset is for slot {offset.get('slot')!r}, the "
                f"config names {self.settings.slot_name!r}"
            )
        self._phase = str(offset["phase"])
        self._resume_lsn = parse_lsn(offset["lsn"])
        last = offset.get("last_commit")
        self._last_commit = None if last is None else parse_lsn(last)
        cut = offset.get("tx")
        self._cut = None if cut is None else (parse_lsn(cut["commit_lsn"]), int(cut["emitted"]))
        position = offset.get("position")
        self._last_position = None if position is None else PostgresPosition.from_json(position)
        snap = offset.get("snapshot")
        self._snapshot = (
            None if snap is None else SnapshotProgress.from_json(snap, parse_lsn(snap["point"]))
        )
        self._signals_restore(offset.get("signals"))

    def _offset_now(self) -> dict[str, Any]:
        return {
            "format": OFFSET_FORMAT,
            "slot": self.settings.slot_name,
            "phase": self._phase,
            "lsn": format_pg_lsn(self._resume_lsn),
            "last_commit": None if self._last_commit is None else format_pg_lsn(self._last_commit),
            "tx": None
            if self._cut is None
            else {"commit_lsn": format_pg_lsn(self._cut[0]), "emitted": self._cut[1]},
            "position": None if self._last_position is None else self._last_position.to_json(),
            "snapshot": self._snapshot_json(lambda point: {"point": format_pg_lsn(point)}),
            "signals": self._signals_json(),
        }

    def _stops_after_snapshot(self) -> bool:
        return self.settings.snapshot_mode == "initial_only"

    def close(self) -> None:
        """Close the connections (and drop the slot with ``slot.drop.on.stop``)."""
        drop = self.settings.slot_drop_on_stop
        self._stop_streaming()
        self._close_connections()
        if drop:
            try:
                with self._connect() as conn:
                    conn.execute("SELECT pg_drop_replication_slot(%s)", (self.settings.slot_name,))
                logger.warning(
                    "source %s: dropped slot %s (slot.drop.on.stop)",
                    self.name,
                    self.settings.slot_name,
                )
            except (psycopg.Error, SourceUnavailable) as exc:
                logger.warning("source %s: could not drop slot: %s", self.name, exc)


def landed_columns(schemas: LakePath, source: str) -> dict[str, frozenset[str]]:
    """``schema.table`` -> the ``after`` columns of the envelope schema ``source`` registered
    last for it in ``bronze/schemas`` (empty when there is none yet)."""
    try:
        table = open_delta(schemas).to_pyarrow_table(
            columns=[S.SCHEMA_NAME, S.SCHEMA_JSON, S.SOURCE, S.FIRST_SEEN_TS]
        )
    except TableNotFoundError:
        return {}
    latest: dict[str, tuple[Any, str]] = {}
    for row in table.to_pylist():
        name = row[S.SCHEMA_NAME] or ""
        if row[S.SOURCE] != source or not name.endswith(".Envelope"):
            continue
        seen = latest.get(name)
        if seen is None or row[S.FIRST_SEEN_TS] >= seen[0]:
            latest[name] = (row[S.FIRST_SEEN_TS], row[S.SCHEMA_JSON])
    out: dict[str, frozenset[str]] = {}
    for name, (_, text) in latest.items():
        fields = orjson.loads(text).get("fields", [])
        after = next((f for f in fields if f.get("field") == "after"), None)
        # <topic prefix>.<schema>.<table>.Envelope; the prefix may hold dots, names rarely do
        parts = name[: -len(".Envelope")].split(".")
        if after is not None and len(parts) >= 3:
            out[f"{parts[-2]}.{parts[-1]}"] = frozenset(f["field"] for f in after["fields"])
    return out
