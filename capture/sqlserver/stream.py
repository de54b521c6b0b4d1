"""The SQL Server agent's change-table stream: :class:`StreamReader`.

Debezium's loop (seed 003, "How the SQL Server connector works"), per database: read
``sys.fn_cdc_get_max_lsn()``; take the next commit LSNs up to it from ``cdc.lsn_time_mapping``
(a window of ``max.iteration.transactions``, with each transaction's commit time); read every
capture instance's changes in the window with ``cdc.fn_cdc_get_all_changes_<ci>(from, to,
N'all update old')``; sort by commit LSN, change LSN (``__$seqval``) and ``__$operation``.

* Operations 3 and 4 (update before/after, one ``__$seqval``) become one ``u`` with
  ``event_serial_no`` 2; a delete and an insert with one ``__$seqval`` (SQL Server's log of a
  primary-key update) become ``d`` (serial 1), its tombstone, and ``c`` (serial 2).
* Positions are ``(commit LSN, stream, change LSN, serial, record number in the transaction)``.
* A table with two capture instances (schema evolution, seed 003 "Database schema evolution")
  is read from the old instance up to the new one's ``start_lsn`` and from the new one after it,
  so the switch loses and doubles nothing; the new instance's columns take over there.
* BEGIN/END records (``provide.transaction.metadata``) use the commit LSN as the id, and
  the commit time of ``cdc.lsn_time_mapping``.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

import orjson

from bronze.batch import BatchBuilder
from bronze.envelope import ConnectRecord, schema_change
from bronze.position_base import Phase
from capture.captured_table import CapturedTable
from capture.change_records import (
    delete_records,
    insert_records,
    key_move_records,
    update_records,
)
from capture.column_types import ValueConversionError
from capture.database_source import BatchLimits
from capture.sqlserver import connection as q
from capture.sqlserver.agent import (
    ZERO_LSN,
    DbState,
    Instance,
    MssqlTx,
    SqlServerAgent,
    format_lsn,
    parse_lsn,
)
from capture.sqlserver.position import SqlServerPosition
from pipeline.errors import CaptureError, InternalError, PipelineError

__all__ = ["StreamReader"]

_position = SqlServerPosition._new
_LAST = b"\xff" * 10
"""Change LSN of END records: after every change of the transaction."""

Change = tuple[bytes, bytes, int, Instance, list[Any], list[Any] | None]
"""``(commit LSN, __$seqval, first __$operation, instance, row, paired row)``: a paired row is
the after-image of an update (3 + 4) or the insert of a key move (1 + 2)."""


class StreamReader(SqlServerAgent):
    """The stream side of the agent: windows of commit LSNs, one database after another."""

    _tx: MssqlTx | None = None
    _streaming = ""
    """The database being read (whose offset a cut transaction goes in)."""

    def _read_stream(self, builder: BatchBuilder, limits: BatchLimits, now: dt.datetime) -> bool:
        """Add streamed records to ``builder``; True when every database is read to its max LSN."""
        until = limits.until
        for db in self.settings.databases:
            target = None if until is None else (until.get("databases") or {}).get(db)
            if not self._stream_db(db, builder, limits, target, now):
                return False
        if until is None:
            self._maybe_heartbeat(builder, now)
        return True

    def _stream_db(
        self,
        db: str,
        builder: BatchBuilder,
        limits: BatchLimits,
        target: Mapping[str, Any] | None,
        now: dt.datetime,
    ) -> bool:
        """Read ``db`` up to its max LSN (or to ``target``); False when the batch ended first."""
        rereading = limits.until is not None
        state = self._db[db]
        self._streaming = db
        session = self._session(db)
        state.instances = self._instances(db)
        state.known = frozenset(i.name for i in state.instances)
        while True:
            if rereading and self._reached(state, target):
                return True
            max_lsn = self._max_lsn(db)
            if max_lsn is None or max_lsn <= state.lsn:
                return True
            window = session.rows(
                q.TRANSACTIONS, (self.settings.max_iteration_transactions, state.lsn, max_lsn)
            )
            if not window:
                if not self._schema_changes(db, state, max_lsn, builder, limits, target, now):
                    return False
                state.lsn = max_lsn  # nothing captured up to the max LSN
                return True
            changes = self._changes(db, state, window[-1][0])
            by_commit: dict[bytes, list[Change]] = {}
            for change in changes:
                by_commit.setdefault(change[0], []).append(change)
            for commit, ended in window:
                at = (bytes(commit), ended)
                if not self._schema_changes(db, state, at[0], builder, limits, target, now):
                    return False
                if not self._transaction(
                    db, state, at, by_commit.get(at[0], []), builder, limits, target, now
                ):
                    return False
            session.commit()

    def _changes(self, db: str, state: DbState, to_lsn: bytes) -> list[Change]:
        """Every change of the window ``(state.lsn, to_lsn]``, in Debezium's order."""
        session = self._session(db)
        from_lsn = bytes(session.scalar(q.INCREMENT_LSN, (state.lsn,)))
        rows: list[tuple[bytes, bytes, int, int, Instance, list[Any]]] = []
        instances = state.instances
        for n, inst in enumerate(instances):
            later = [
                i.start_lsn
                for i in instances[n + 1 :]
                if i.table.collection == inst.table.collection
            ]
            until = min(later, default=None)
            start = max(from_lsn, bytes(session.scalar(q.MIN_LSN, (inst.name,))))
            if start > to_lsn or (until is not None and until < start):
                continue
            for row in session.rows(q.all_changes(inst.name, inst.table.names), (start, to_lsn)):
                commit = bytes(row[0])
                if until is not None and commit > until:
                    continue  # the newer instance has it, with the newer columns
                rows.append((commit, bytes(row[1]), int(row[2]), n, inst, list(row[4:])))
        rows.sort(key=lambda r: (r[0], r[1], r[2], r[3]))
        return _paired(rows)

    def _transaction(
        self,
        db: str,
        state: DbState,
        commit_at: tuple[bytes, Any],
        changes: list[Change],
        builder: BatchBuilder,
        limits: BatchLimits,
        target: Mapping[str, Any] | None,
        now: dt.datetime,
    ) -> bool:
        """Land one transaction (its commit LSN and ``tran_end_time``); False when the batch
        ended (before it, or cut inside it)."""
        commit, ended = commit_at
        s = self.settings
        if not changes:
            state.lsn = commit
            return True
        ts_ms = int(time.time() * 1000) if s.processing_time else _epoch_ms(ended)
        tx = MssqlTx(format_lsn(commit), ts_ms, commit_lsn=commit)
        if state.cut is not None and state.cut[0] == commit:
            tx.skip = state.cut[1]
        self._tx = tx
        metadata = s.rules.provide_transaction_metadata
        if metadata:
            if self._ends(builder, tx, limits, state, target):
                return False
            self._emit_begin(
                builder, tx, _position(commit, Phase.STREAM, ZERO_LSN, 0, tx.emitted), now
            )
        for change in changes:
            if self._ends(builder, tx, limits, state, target):
                return False
            self._change(db, builder, tx, change, now)
        if metadata:
            if self._ends(builder, tx, limits, state, target):
                return False
            self._emit_end(builder, tx, _position(commit, Phase.STREAM, _LAST, 0, tx.emitted), now)
        self._tx = None
        state.lsn, state.cut = commit, None
        return not self._ends(builder, None, limits, state, target)

    def _schema_changes(
        self,
        db: str,
        state: DbState,
        upto: bytes,
        builder: BatchBuilder,
        limits: BatchLimits,
        target: Mapping[str, Any] | None,
        now: dt.datetime,
    ) -> bool:
        """A schema-change record (``include.schema.changes``) for each capture instance
        created after the offset and up to ``upto``: ``CREATE`` for a table's first, ``ALTER``
        for a second one (the columns the stream switches to there). False when the batch
        ended first."""
        if not self.settings.include_schema_changes:
            return True
        for inst in state.instances:
            if not state.lsn < inst.start_lsn <= upto:
                continue
            if self._ends(builder, None, limits, state, target):
                return False
            older = any(
                i.table.collection == inst.table.collection and i.start_lsn < inst.start_lsn
                for i in state.instances
            )
            record = self._schema_record(db, inst, "ALTER" if older else "CREATE")
            position = _position(inst.start_lsn, Phase.STREAM, ZERO_LSN, 0, 0)
            origin = f"{self.ORIGIN}:schema:{inst.name}@{format_lsn(inst.start_lsn)}"
            self._add(builder, record, position, origin, now, None, None)
            self._last_position = position
            state.lsn = inst.start_lsn
        return True

    def _schema_record(self, db: str, inst: Instance, kind: str) -> ConnectRecord:
        table = inst.table
        source = self._source(
            db, inst, int(time.time() * 1000), commit_lsn=format_lsn(inst.start_lsn)
        )
        columns = [
            {
                "name": name,
                "typeName": table.types[n].type_name,
                "position": n + 1,
                "optional": not table.columns[n].not_null,
            }
            for n, name in enumerate(table.names)
        ]
        change = {
            "type": kind,
            "id": f'"{db}"."{table.schema}"."{table.table}"',
            "table": {
                "defaultCharsetName": None,
                "primaryKeyColumnNames": [table.names[i] for i in table.key_idx],
                "columns": columns,
                "attributes": [{"name": "captureInstance", "value": inst.name}],
            },
        }
        return schema_change(
            db,
            source,
            schema_name=table.schema,
            table_changes=[change],
            ts_ms=int(time.time() * 1000),
            topic=self.settings.server_name,
        )

    def _ends(
        self,
        builder: BatchBuilder,
        tx: MssqlTx | None,
        limits: BatchLimits,
        state: DbState,
        target: Mapping[str, Any] | None,
    ) -> bool:
        reached = limits.until is not None and self._reached(state, target)
        return self._batch_ends(builder, tx, limits, reached=reached)

    def _reached(self, state: DbState, target: Mapping[str, Any] | None) -> bool:
        """A re-read has come to where the half-landed batch ended for this database."""
        if target is None:
            return True
        cut = target.get("cut")
        if cut is None:
            return self._tx is None and state.lsn >= parse_lsn(target["lsn"])
        commit = parse_lsn(cut[0])
        tx = self._tx
        if tx is not None and tx.commit_lsn == commit:
            return tx.emitted >= int(cut[1])
        return state.lsn >= commit

    def _cut_inside(self, builder: BatchBuilder, tx: MssqlTx) -> None:
        """End the batch inside ``tx``: bronze marks it partial, the offset resumes inside it."""
        builder.mark_partial(tx.id)
        self._db[self._streaming].cut = (tx.commit_lsn, tx.emitted)
        self._tx = None

    def _change(
        self, db: str, builder: BatchBuilder, tx: MssqlTx, change: Change, now: dt.datetime
    ) -> None:
        commit, seqval, op, inst, row, paired = change
        table = inst.table
        origin = f"{self.ORIGIN}:{format_lsn(commit)}:{format_lsn(seqval)}:{table.collection}"
        serial = 2 if op == 3 else 1
        source = self._source(
            db,
            inst,
            tx.ts_ms,
            commit_lsn=format_lsn(commit),
            change_lsn=format_lsn(seqval),
            event_serial_no=serial,
        )
        try:
            records = self._records(tx, op, table, row, paired, source)
        except (ValueConversionError, PipelineError) as exc:
            if tx.count():
                raw = orjson.dumps({"row": row, "paired": paired}, default=str)
                self._quarantine(builder, raw, origin, exc, now)
            return
        for record in records:
            number = serial
            if op == 1 and paired is not None and record.value is not None:
                # A key move: the delete (and its tombstone) is serial 1, the create serial 2.
                number = 2 if record.value.get("op") == "c" else 1
                record.value["source"] = {**source, "event_serial_no": number}
            position = _position(commit, Phase.STREAM, seqval, number, tx.emitted)
            if tx.count():
                self._add(builder, record, position, origin, now, tx, table)
                if record.value is not None:
                    tx.note_data(table.collection)
            self._last_position = position

    def _records(
        self,
        tx: MssqlTx,
        op: int,
        table: CapturedTable,
        row: list[Any],
        paired: list[Any] | None,
        source: dict[str, Any],
    ) -> list[ConnectRecord]:
        rules = self.settings.rules
        if op == 2:
            after, key = table.row_and_key(row)
            return insert_records(source, after, key, table, tx, rules)
        if op == 1 and paired is None:
            before, key = table.row_and_key(row)
            return delete_records(source, before, key, table, tx, rules)
        if paired is None:
            raise CaptureError(f"{table.collection}: an update before-image without its after")
        before, old_key = table.row_and_key(row)
        after, new_key = table.row_and_key(paired)
        mover = key_move_records if op == 1 else update_records
        return mover(source, (before, after), (old_key, new_key), table, tx, rules)

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        """A heartbeat after the last transaction read (``heartbeat.interval.ms``): it moves
        bronze's offset while the captured tables are quiet."""
        s = self.settings
        if not self._heartbeat_due(s.rules.heartbeat_interval_ms, s.rules.heartbeat_action_query):
            return
        newest = max(state.lsn for state in self._db.values())
        position = _position(newest, Phase.STREAM, _LAST, 0, 0)
        if self._last_position is None or self._last_position.encode() < position.encode():
            self._last_heartbeat = time.monotonic()
            # the same heartbeat record that closes an empty snapshot
            self._snapshot_marker(builder, position, f"mssql:heartbeat@{format_lsn(newest)}", now)
            self._last_position = position

    def _run_action_query(self, sql: str) -> None:
        session = self._session(self.settings.databases[0])
        session.run(sql)
        session.commit()


def _paired(rows: list[tuple[bytes, bytes, int, int, Instance, list[Any]]]) -> list[Change]:
    """Pair operation 3 with its 4, and 1 with a 2 of the same ``__$seqval`` and table."""
    out: list[Change] = []
    i = 0
    while i < len(rows):
        commit, seqval, op, n, inst, row = rows[i]
        nxt = rows[i + 1] if i + 1 < len(rows) else None
        pairs = (
            nxt is not None
            and nxt[1] == seqval
            and nxt[3] == n
            and (op, nxt[2]) in ((3, 4), (1, 2))
        )
        if pairs:
            if nxt is None:
                raise InternalError("capture.sqlserver.stream: expected nxt is not None")
            out.append((commit, seqval, op, inst, row, nxt[5]))
            i += 2
        else:
            out.append((commit, seqval, op, inst, row, None))
            i += 1
    return out


def _epoch_ms(value: Any) -> int:
    """Commit time (``tran_end_time``, the server's clock read as UTC) in ms since the epoch."""
    if isinstance(value, dt.datetime):
        return int(value.replace(tzinfo=dt.UTC).timestamp() * 1000)
    return int(time.time() * 1000)
