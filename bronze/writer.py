"""Exactly-once commits of capture batches into the bronze Delta tables, without a JVM.

How a batch lands (the agent's ``batch_seq`` is the Delta app transaction version):

1. New Connect schemas go to ``bronze/schemas`` first, so every schema id in ``events`` always
   resolves. A crash after this step leaves registry rows nobody references yet: harmless, and
   the retry finds them already there.
2. Quarantined records go to ``bronze/quarantine`` in a commit carrying the app transaction
   ``(agent_id, batch_seq)``; a retry sees the version already there and skips the write.
3. The events go to ``bronze/events`` in ONE commit that carries the app transaction
   ``(agent_id, batch_seq)`` and the source offset the batch reaches, in the commit metadata and
   on the batch's last row. This commit is the point of no return: the batch is either wholly
   in bronze with its offset, or not at all.
4. Only then does the agent acknowledge the source (slot flush, saved binlog position).

On restart, :meth:`BronzeWriter.last_committed` reads the agent's last app transaction version
and its offset back from bronze; the agent resumes from there. A crash between 3 and 4 repeats
no data: the source is re-read from the committed offset, and the acknowledgement is redone.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, TableNotFoundError

from bronze import schema as S
from bronze import storage
from bronze.batch import BatchBuilder
from bronze.storage import LakePath, is_delta_table, lake_path, open_delta, storage_options
from bronze.writer_format import (
    DEFAULT_COMPRESSION,
    ParquetCompression,
    events_properties,
    quarantine_properties,
    schemas_properties,
)
from pipeline.errors import BronzeCommitConflict, BronzeError, OffsetError

__all__ = ["BronzeTables", "BronzeWriter", "CommitResult", "CommittedBatch", "agent_app_id"]

logger = logging.getLogger(__name__)

META_AGENT = "medallion.agent"
META_BATCH_SEQ = "medallion.batch_seq"
META_OFFSET = "medallion.offset"
META_COUNTS = "medallion.counts"
META_SOURCE = "medallion.source"

HISTORY_SCAN_LIMIT = 200
"""Commits read newest-first when looking for an agent's offset before falling back to a scan."""

APPEND_ONLY = {"delta.appendOnly": "true"}


def agent_app_id(source: str) -> str:
    """The Delta app id under which the capture agent of ``source`` commits."""
    return f"medallion-agent:{source}"


@dataclass(frozen=True, slots=True)
class BronzeTables:
    """Locations of the three bronze tables.

    Attributes:
        events: Location of ``bronze/events``.
        quarantine: Location of ``bronze/quarantine``.
        schemas: Location of ``bronze/schemas``.
    """

    events: LakePath
    quarantine: LakePath
    schemas: LakePath

    @classmethod
    def under(cls, lake_root: LakePath | str) -> BronzeTables:
        """The standard layout under a lake root (a directory or an ``s3://`` location)."""
        bronze = lake_path(lake_root) / "bronze"
        return cls(bronze / "events", bronze / "quarantine", bronze / "schemas")


@dataclass(frozen=True, slots=True)
class CommittedBatch:
    """The last batch an agent committed, read back from bronze.

    Attributes:
        agent_id: The agent's app id.
        batch_seq: Its app transaction version.
        offset: The source offset the batch reached.
        table_version: Delta version of the commit, when still in the log.
    """

    agent_id: str
    batch_seq: int
    offset: dict[str, Any]
    table_version: int | None


@dataclass(frozen=True, slots=True)
class CommitResult:
    """What one :meth:`BronzeWriter.commit` did.

    Attributes:
        batch_seq: The batch number.
        events: Rows appended to ``events``.
        quarantined: Rows appended to ``quarantine``.
        schemas_added: New registry rows.
        events_version: Delta version of the events commit (None if it was already there).
        already_committed: True when a previous attempt had committed this batch.
    """

    batch_seq: int
    events: int
    quarantined: int
    schemas_added: int
    events_version: int | None
    already_committed: bool


class BronzeWriter:
    """Writes capture batches into bronze with ``deltalake`` (no JVM).

    Args:
        tables: Where the bronze tables live.
        compression: The Parquet codec of the files it writes (``bronze.parquet.compression``;
            the column layout is :mod:`bronze.writer_format`'s).
    """

    def __init__(
        self, tables: BronzeTables, compression: ParquetCompression = DEFAULT_COMPRESSION
    ) -> None:
        self.tables = tables
        self.compression = compression
        self._events_properties = events_properties(compression)
        self._quarantine_properties = quarantine_properties(compression)
        self._schemas_properties = schemas_properties(compression)
        self._known_schema_ids: set[str] | None = None
        self._events: DeltaTable | None = None
        """``events`` as the last commit left it: brought up to date before each commit by
        reading only the log entries written since (loading the whole log and file list per
        commit grew with the table)."""

    # --- set-up ------------------------------------------------------------------------------
    def ensure_tables(self) -> None:
        """Create the three tables if missing (idempotent, safe to race)."""
        for path, schema, parts in (
            (self.tables.events, S.EVENTS_SCHEMA, list(S.PARTITION_COLUMNS)),
            (self.tables.quarantine, S.QUARANTINE_SCHEMA, list(S.PARTITION_COLUMNS)),
            (self.tables.schemas, S.SCHEMAS_SCHEMA, None),
        ):
            if is_delta_table(path):
                continue
            path.mkdir(parents=True, exist_ok=True)
            try:
                DeltaTable.create(
                    str(path),
                    schema,
                    partition_by=parts,
                    mode="ignore",
                    configuration=APPEND_ONLY,
                    storage_options=storage_options(path),
                )
            except CommitFailedError:
                # Another agent created it between our check and our commit; that is fine.
                if not is_delta_table(path):
                    raise
            logger.info("created bronze table %s", path)

    # --- offsets -----------------------------------------------------------------------------
    def last_committed(self, agent_id: str) -> CommittedBatch | None:
        """The last batch ``agent_id`` committed, with the offset it reached.

        Args:
            agent_id: The agent's app id.

        Returns:
            None if the agent never committed.

        Raises:
            OffsetError: The app transaction exists but its offset cannot be found.
        """
        try:
            events = open_delta(self.tables.events)
        except TableNotFoundError:
            return None
        version = events.transaction_version(agent_id)
        if version is None:
            return None
        for commit in events.history(HISTORY_SCAN_LIMIT):
            if commit.get(META_AGENT) == agent_id and commit.get(META_BATCH_SEQ) == version:
                return CommittedBatch(
                    agent_id, version, orjson.loads(commit[META_OFFSET]), commit.get("version")
                )
        # The commit fell out of the log (checkpoint + log cleanup): the offset is also on the
        # batch's last row, so read it from the data.
        offset = self._offset_from_rows(events, agent_id, version)
        if offset is None:
            raise OffsetError(
                f"bronze has app transaction {agent_id} version {version} but no offset for it "
                f"in the commit log or in column {S.BATCH_OFFSET}; bronze was modified by hand?"
            )
        return CommittedBatch(agent_id, version, offset, None)

    def _offset_from_rows(
        self, events: DeltaTable, agent_id: str, batch_seq: int
    ) -> dict[str, Any] | None:
        dataset = events.to_pyarrow_dataset()
        expr = (
            (pc.field(S.AGENT_ID) == agent_id)
            & (pc.field(S.BATCH_SEQ) == batch_seq)
            & pc.field(S.BATCH_OFFSET).is_valid()
        )
        found = dataset.to_table(columns=[S.BATCH_OFFSET], filter=expr)
        if found.num_rows == 0:
            return None
        value: dict[str, Any] = orjson.loads(found.column(0)[0].as_py())
        return value

    def committed_quarantine_version(self, agent_id: str) -> int | None:
        """Last batch of ``agent_id`` whose quarantine rows are committed."""
        try:
            return open_delta(self.tables.quarantine).transaction_version(agent_id)
        except TableNotFoundError:
            return None

    def pending_batch_end(self, agent_id: str) -> dict[str, Any] | None:
        """End offset of a batch whose quarantine rows landed but whose events did not.

        A crash between the quarantine commit and the events commit leaves the batch half
        landed. The retry must re-read exactly the same range, or quarantined records read
        after that range would be skipped with the already-committed quarantine version. The
        agent passes this offset to the source as the batch's upper bound.

        Returns:
            The end offset recorded with the quarantine commit, or None if nothing is pending.
        """
        committed = self._events_txn_version(agent_id)
        quarantined = self.committed_quarantine_version(agent_id)
        if quarantined is None or (committed is not None and quarantined <= committed):
            return None
        for commit in open_delta(self.tables.quarantine).history(HISTORY_SCAN_LIMIT):
            if commit.get(META_AGENT) == agent_id and commit.get(META_BATCH_SEQ) == quarantined:
                value: dict[str, Any] = orjson.loads(commit[META_OFFSET])
                return value
        raise OffsetError(
            f"quarantine has batch {quarantined} of {agent_id} without its end offset in the log"
        )

    def _events_txn_version(self, agent_id: str) -> int | None:
        try:
            return open_delta(self.tables.events).transaction_version(agent_id)
        except TableNotFoundError:
            return None

    # --- commit ------------------------------------------------------------------------------
    def commit(
        self,
        *,
        agent_id: str,
        batch_seq: int,
        batch: BatchBuilder,
        offset: Mapping[str, Any],
        now: dt.datetime | None = None,
        on_step: Callable[[str], None] | None = None,
    ) -> CommitResult:
        """Commit one batch exactly once.

        Args:
            agent_id: The agent's app id.
            batch_seq: The batch number; must be the last committed + 1.
            batch: The events and quarantined records.
            offset: The source offset the batch reaches.
            now: Commit timestamp (UTC); defaults to the current time.
            on_step: Called with ``after_schemas`` and ``after_quarantine`` between the
                commits (crash tests hook in here).

        Returns:
            What was written.

        Raises:
            OffsetError: ``batch_seq`` skips a number or goes backwards.
            BronzeCommitConflict: Another writer committed concurrently; retry.
            BronzeError: Any other Delta failure.
        """
        ingest_ts = now or dt.datetime.now(dt.UTC)
        events = self._current_events()
        committed = events.transaction_version(agent_id)
        expected = 0 if committed is None else committed + 1
        if committed is not None and batch_seq <= committed:
            logger.info("batch %s of %s is already in bronze; skipping", batch_seq, agent_id)
            return CommitResult(batch_seq, 0, 0, 0, None, already_committed=True)
        if batch_seq != expected:
            raise OffsetError(
                f"agent {agent_id} tried to commit batch {batch_seq} but the next batch in bronze "
                f"is {expected}; two agents for one source?"
            )
        counts = batch.counts
        try:
            added = self._commit_schemas(batch, ingest_ts)
            if on_step is not None:
                on_step("after_schemas")
            if counts.quarantined:
                self._commit_quarantine(agent_id, batch_seq, batch, ingest_ts, offset)
                if on_step is not None:
                    on_step("after_quarantine")
            table = batch.events_table(
                agent_id=agent_id, batch_seq=batch_seq, ingest_ts=ingest_ts, offset=offset
            )
            metadata = {
                META_AGENT: agent_id,
                META_SOURCE: batch.source,
                META_BATCH_SEQ: batch_seq,
                META_OFFSET: orjson.dumps(offset).decode(),
                META_COUNTS: orjson.dumps(
                    {
                        "read": counts.read,
                        "landed": counts.landed,
                        "quarantined": counts.quarantined,
                    }
                ).decode(),
            }
            write_deltalake(
                events,
                table,
                mode="append",
                writer_properties=self._events_properties,
                commit_properties=CommitProperties(
                    custom_metadata=metadata,
                    app_transactions=[Transaction(app_id=agent_id, version=batch_seq)],
                ),
                storage_options=storage_options(self.tables.events),
            )
        except CommitFailedError as exc:
            self._events = None  # reloaded whole next time: the conflict may have been anything
            raise BronzeCommitConflict(
                f"bronze commit of {agent_id} batch {batch_seq}: {exc}"
            ) from exc
        except (OSError, pa.ArrowException) as exc:
            self._events = None
            raise BronzeError(
                f"bronze commit of {agent_id} batch {batch_seq} failed: {exc}"
            ) from exc
        version = events.version()  # the write moved ``events`` to its own commit
        logger.info(
            "committed %s events (%s quarantined) of %s as batch %s, bronze version %s",
            counts.landed,
            counts.quarantined,
            agent_id,
            batch_seq,
            version,
        )
        return CommitResult(batch_seq, counts.landed, counts.quarantined, added, version, False)

    def _current_events(self) -> DeltaTable:
        """``events`` at its latest version (opened once, then updated incrementally)."""
        if self._events is None:
            self._events = open_delta(self.tables.events)
        else:
            self._events.update_incremental()
        return self._events

    def _commit_schemas(self, batch: BatchBuilder, now: dt.datetime) -> int:
        ids = set(batch.schema_ids())
        if not ids:
            return 0
        known = self._schema_ids()
        if ids <= known:
            return 0
        table = batch.schemas_table(known=known, first_seen=now)
        write_deltalake(
            str(self.tables.schemas),
            table,
            mode="append",
            writer_properties=self._schemas_properties,
            storage_options=storage_options(self.tables.schemas),
        )
        known.update(table.column(S.SCHEMA_ID).to_pylist())
        return table.num_rows

    def _schema_ids(self) -> set[str]:
        if self._known_schema_ids is None:
            ids = storage.read_delta(open_delta(self.tables.schemas), [S.SCHEMA_ID])
            self._known_schema_ids = set(ids.column(0).to_pylist())
        return self._known_schema_ids

    def _commit_quarantine(
        self,
        agent_id: str,
        batch_seq: int,
        batch: BatchBuilder,
        now: dt.datetime,
        offset: Mapping[str, Any],
    ) -> None:
        done = self.committed_quarantine_version(agent_id)
        if done is not None and done >= batch_seq:
            return
        table = batch.quarantine_table(agent_id=agent_id, batch_seq=batch_seq, ingest_ts=now)
        write_deltalake(
            str(self.tables.quarantine),
            table,
            mode="append",
            writer_properties=self._quarantine_properties,
            commit_properties=CommitProperties(
                custom_metadata={
                    META_AGENT: agent_id,
                    META_BATCH_SEQ: batch_seq,
                    META_OFFSET: orjson.dumps(offset).decode(),
                },
                app_transactions=[Transaction(app_id=agent_id, version=batch_seq)],
            ),
            storage_options=storage_options(self.tables.quarantine),
        )
