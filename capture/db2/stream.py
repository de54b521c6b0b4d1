"""The Db2 agent's change-data-table stream: :class:`StreamReader`.

The guide's loop (section 6.2.2), with ``IBMSNAP_UOW`` for the commit order and time: read the
maximum LSN (``IBMSNAP_REGISTER``: everything at or below it is in the CD tables); take the
next units of work up to it from ``IBMSNAP_UOW`` (their commit sequence and
``IBMSNAP_LOGMARKER``, the commit time), a window at a time; read each started registration's
CD table between the window's first and last commit sequence with Debezium's query; order by
commit sequence, then intent sequence (the change LSN).

* ``OPCODE`` 3 and 4 (a ``D`` then an ``I`` of one unit of work, how a registration with
  ``CHG_UPD_TO_DEL_INS = 'Y'`` records an update) become one ``u``, or, when the key changed,
  Debezium's delete, tombstone and create; 1 is a ``d``, 2 a ``c``.
* Positions are ``(commit sequence, stream, intent sequence, record number in the unit of
  work)``; BEGIN has the zero change LSN, END all ones.
* A registration started after the offset (``ADDTABLE``, then ``reinit``) gets a ``CREATE``
  schema-change record at its start LSN (``include.schema.changes``); its changes stream from
  there (rows it held before are not snapshotted, as in Debezium 1.2).
* BEGIN/END records (``provide.transaction.metadata``) use the commit sequence's text as the
  id and ``IBMSNAP_LOGMARKER`` as the commit time (the server's local time read as UTC).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

import orjson

from bronze.batch import BatchBuilder
from bronze.envelope import ConnectRecord, schema_change
from bronze.position_base import Phase
from capture.change_records import delete_records, insert_records, update_records
from capture.column_types import ValueConversionError
from capture.database_source import BatchLimits
from capture.db2 import connection as q
from capture.db2.agent import ZERO_LSN, Db2Agent, Db2Tx, Registration, format_lsn, lsn, parse_lsn
from capture.db2.position import Db2Position
from pipeline.errors import CaptureError, PipelineError

__all__ = ["MAX_UNITS_OF_WORK", "StreamReader"]

logger = logging.getLogger(__name__)

MAX_UNITS_OF_WORK = 500
"""Units of work per streaming window."""
_LAST = b"\xff" * 16
"""Change LSN of END records and heartbeats: after every change of their commit."""
_position = Db2Position._new


class Change(NamedTuple):
    """One row change read from a CD table."""

    commit: bytes
    intent: bytes
    op: int
    """1 delete, 2 insert, 3 update (``row`` before, ``after`` after)."""
    reg: Registration
    row: list[Any]
    after: list[Any] | None


class StreamReader(Db2Agent):
    """The stream side of the agent."""

    _tx: Db2Tx | None = None
    _regs: list[Registration]

    def _read_stream(self, builder: BatchBuilder, limits: BatchLimits, now: dt.datetime) -> bool:
        """Add streamed records; True when read to the maximum LSN (or to ``limits.until``)."""
        target = limits.until
        self._regs = self._registrations()
        session = self._conn()
        if not self._snapshot_tables(builder, limits, target, now):
            return False
        while True:
            if target is not None and self._reached(target):
                return True
            high = self._max_lsn()
            if high is None or high <= self._lsn:
                if target is None:
                    self._maybe_heartbeat(builder, now)
                return True
            window = session.all(
                q.UNITS_OF_WORK.format(limit=MAX_UNITS_OF_WORK),
                (self._wire(self._lsn), self._wire(high)),
            )
            upto = self._read_lsn(window[-1][0]) if window else high
            units = {self._read_lsn(commit_seq): marker for commit_seq, marker in window}
            changes: dict[bytes, list[Change]] = {}
            for change in self._changes(upto):
                changes.setdefault(change.commit, []).append(change)
            if unlisted := sorted(set(changes) - set(units)):
                # Never dropped: landed in commit order, with the time they are read.
                logger.warning(
                    "source %s: IBMSNAP_UOW has no row for the unit(s) of work committed at %s; "
                    "their commit time is taken as now",
                    self.name,
                    ", ".join(self._text(c) for c in unlisted),
                )
            for commit in sorted({*units, *changes}):
                if not self._new_tables(commit, builder, limits, target, now):
                    return False
                marker = units.get(commit)
                if not self._unit(
                    commit, marker, changes.get(commit, []), builder, limits, target, now
                ):
                    return False
            session.end()
            if not window:
                if not self._new_tables(high, builder, limits, target, now, inclusive=True):
                    return False
                self._lsn, self._cut = high, None  # nothing captured up to the maximum

    def _changes(self, upto: bytes) -> list[Change]:
        """Every change after the offset up to ``upto`` (inclusive), in Debezium's order."""
        low = (int.from_bytes(self._lsn, "big") + 1).to_bytes(16, "big")
        session = self._conn()
        out: list[Change] = []
        for reg in self._regs:
            if reg.start >= upto:
                continue
            rows = session.all(
                q.changes_query(reg.cd_owner, reg.cd_table), (self._wire(low), self._wire(upto))
            )
            i = 0
            while i < len(rows):
                opcode, commit, intent = int(rows[i][0]), lsn(rows[i][1]), lsn(rows[i][2])
                if opcode == 3 and i + 1 < len(rows):
                    intent = lsn(rows[i + 1][2])  # Debezium's change LSN: the after image's
                values = list(rows[i][4:])
                after = None
                if opcode == 3:
                    if i + 1 >= len(rows) or int(rows[i + 1][0]) != 4:
                        raise CaptureError(
                            f"source {self.name}: {reg.cd_owner}.{reg.cd_table}: an update's "
                            f"before image at {format_lsn(intent)} without its after image"
                        )
                    after = list(rows[i + 1][4:])
                    i += 1
                elif opcode == 4:
                    raise CaptureError(
                        f"source {self.name}: {reg.cd_owner}.{reg.cd_table}: an update's after "
                        f"image at {format_lsn(intent)} without its before image"
                    )
                out.append(Change(commit, intent, opcode, reg, values, after))
                i += 1
        out.sort(key=lambda c: (c.commit, c.intent, self._regs.index(c.reg)))
        return out

    def _unit(
        self,
        commit: bytes,
        marker: Any,
        changes: list[Change],
        builder: BatchBuilder,
        limits: BatchLimits,
        target: Mapping[str, Any] | None,
        now: dt.datetime,
    ) -> bool:
        """Land one unit of work; False when the batch ended before it or inside it."""
        if not changes:
            self._lsn, self._cut = commit, None
            return True
        tx = Db2Tx(self._text(commit), _epoch_ms(marker), commit=commit)
        if self._cut is not None and self._cut[0] == commit:
            tx.skip = self._cut[1]
        self._tx = tx
        metadata = self.settings.rules.provide_transaction_metadata
        if metadata:
            if self._ends(builder, tx, limits, target):
                return False
            self._emit_begin(
                builder, tx, _position(commit, Phase.STREAM, ZERO_LSN, tx.emitted), now
            )
        for change in changes:
            if self._ends(builder, tx, limits, target):
                return False
            self._change(builder, tx, change, now)
        if metadata:
            if self._ends(builder, tx, limits, target):
                return False
            self._emit_end(builder, tx, _position(commit, Phase.STREAM, _LAST, tx.emitted), now)
        self._tx = None
        self._lsn, self._cut = commit, None
        return not self._ends(builder, None, limits, target)

    def _snapshot_tables(
        self,
        builder: BatchBuilder,
        limits: BatchLimits,
        target: Mapping[str, Any] | None,
        now: dt.datetime,
    ) -> bool:
        """The schema-change record of each table captured since before the stream's start
        (the snapshot's tables: the guide's example, ``snapshot`` true and the snapshot's LSN
        as ``commit_lsn``), once; False when the batch ended first."""
        for reg in self._regs:
            collection = reg.table.collection
            if collection in self._known or reg.start > self._lsn:
                continue
            if self.settings.include_schema_changes:
                if self._ends(builder, None, limits, target):
                    return False
                # after the snapshot's rows, before any change committed after its LSN
                position = _position(self._lsn, Phase.STREAM, ZERO_LSN, len(self._known))
                origin = f"{self.ORIGIN}:schema:{collection}@{self._text(self._lsn)}"
                record = self._schema_record(reg, "CREATE", self._lsn, "true")
                self._add(builder, record, position, origin, now, None, None)
                self._last_position = position
            self._known = {**self._known, collection: format_lsn(reg.start)}
        return True

    def _new_tables(
        self,
        upto: bytes,
        builder: BatchBuilder,
        limits: BatchLimits,
        target: Mapping[str, Any] | None,
        now: dt.datetime,
        *,
        inclusive: bool = False,
    ) -> bool:
        """A schema-change record for each registration started after the offset and before
        ``upto``; False when the batch ended first."""
        for reg in self._regs:
            collection, start = reg.table.collection, format_lsn(reg.start)
            if self._known.get(collection) == start or not (
                self._lsn < reg.start < upto or (inclusive and reg.start == upto)
            ):
                continue
            if self.settings.include_schema_changes:
                if self._ends(builder, None, limits, target):
                    return False
                position = _position(reg.start, Phase.STREAM, ZERO_LSN, 0)
                origin = f"{self.ORIGIN}:schema:{collection}@{self._text(reg.start)}"
                kind = "ALTER" if collection in self._known else "CREATE"
                record = self._schema_record(reg, kind, reg.start, "false")
                self._add(builder, record, position, origin, now, None, None)
                self._last_position = position
            self._known = {**self._known, collection: start}
            self._lsn, self._cut = reg.start, None
        return True

    def _schema_record(
        self, reg: Registration, kind: str, at: bytes, snapshot: str
    ) -> ConnectRecord:
        """The guide's schema-change message for a table put into capture mode (``CREATE``)
        or registered again with a new schema (``ALTER``)."""
        table = reg.table
        ts_ms = int(time.time() * 1000)
        source = self._source(table, ts_ms, snapshot, self._text(at), None)
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
            "id": f"{q.quote(table.schema)}.{q.quote(table.table)}",
            "table": {
                "defaultCharsetName": None,
                "primaryKeyColumnNames": [table.names[i] for i in table.key_idx],
                "columns": columns,
            },
        }
        return schema_change(
            self.settings.database.upper(),
            source,
            schema_name=table.schema,
            table_changes=[change],
            ts_ms=ts_ms,
            topic=self.settings.server_name,
        )

    def _ends(
        self,
        builder: BatchBuilder,
        tx: Db2Tx | None,
        limits: BatchLimits,
        target: Mapping[str, Any] | None,
    ) -> bool:
        reached = target is not None and self._reached(target)
        return self._batch_ends(builder, tx, limits, reached=reached)

    def _reached(self, target: Mapping[str, Any]) -> bool:
        """A re-read has come to where the half-landed batch ended."""
        cut = target.get("cut")
        if cut is None:
            known = len(target.get("registrations") or {})
            return (
                self._tx is None
                and self._lsn >= parse_lsn(target["lsn"])
                and len(self._known) >= known
            )
        commit = parse_lsn(cut[0])
        if self._tx is not None and self._tx.commit == commit:
            return self._tx.emitted >= int(cut[1])
        return self._lsn >= commit

    def _cut_inside(self, builder: BatchBuilder, tx: Db2Tx) -> None:
        """End the batch inside ``tx``: bronze marks it partial, the offset resumes inside it."""
        builder.mark_partial(tx.id)
        self._cut = (tx.commit, tx.emitted)
        self._tx = None

    def _change(self, builder: BatchBuilder, tx: Db2Tx, change: Change, now: dt.datetime) -> None:
        table = change.reg.table
        commit, intent = self._text(change.commit), self._text(change.intent)
        origin = f"{self.ORIGIN}:{commit}:{intent}:{table.collection}"
        source = self._source(table, tx.ts_ms, "false", commit, intent)
        try:
            records = self._records(tx, change, source)
        except (ValueConversionError, PipelineError) as exc:
            if tx.count():
                raw = orjson.dumps({"row": change.row, "after": change.after}, default=str)
                self._quarantine(builder, raw, origin, exc, now, table)
            return
        for record in records:
            position = _position(change.commit, Phase.STREAM, change.intent, tx.emitted)
            if tx.count():
                self._add(builder, record, position, origin, now, tx, table)
                if record.value is not None:
                    tx.note_data(table.collection)
            self._last_position = position

    def _records(self, tx: Db2Tx, change: Change, source: dict[str, Any]) -> list[ConnectRecord]:
        table, rules = change.reg.table, self.settings.rules
        if change.op == 2:
            after, key = table.row_and_key(change.row)
            return insert_records(source, after, key, table, tx, rules)
        if change.op == 1:
            before, key = table.row_and_key(change.row)
            return delete_records(source, before, key, table, tx, rules)
        before, old_key = table.row_and_key(change.row)
        after, new_key = table.row_and_key(change.after or [])
        return update_records(source, (before, after), (old_key, new_key), table, tx, rules)

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        """A heartbeat after the last unit of work read (``heartbeat.interval.ms``): it moves
        bronze's offset while the captured tables are quiet."""
        rules = self.settings.rules
        if not self._heartbeat_due(rules.heartbeat_interval_ms, rules.heartbeat_action_query):
            return
        position = _position(self._lsn, Phase.STREAM, _LAST, 0xFFFFFFFF)
        if self._last_position is None or self._last_position.encode() < position.encode():
            self._last_heartbeat = time.monotonic()
            self._snapshot_marker(builder, position, f"db2:heartbeat@{self._text(self._lsn)}", now)
            self._last_position = position

    def _run_action_query(self, sql: str) -> None:
        session = self._conn()
        session.execute(sql)
        session.conn.commit()


def _epoch_ms(value: Any) -> int:
    """``IBMSNAP_LOGMARKER`` (the server's local time, read as UTC) in ms since the epoch."""
    if isinstance(value, dt.datetime):
        return int(value.replace(tzinfo=dt.UTC).timestamp() * 1000)
    return int(time.time() * 1000)
