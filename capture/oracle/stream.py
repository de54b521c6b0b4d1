"""The LogMiner read loop: :class:`StreamReader`.

Each mining window (seed Oracle document; spec digest §A1):

1. **Logs.** When the set of current logs changed (a log switch) or none is registered, the
   LogMiner session is ended and the online logs not yet archived plus the archives ending after
   the window's start are added (``DBMS_LOGMNR.ADD_LOGFILE``, per redo thread, by sequence).
   ``redo_log_catalog`` first writes the dictionary to the redo (``DBMS_LOGMNR_D.BUILD``).
2. **Window.** ``end = min(CURRENT_SCN, start + window)``; the window starts at
   ``log.mining.batch.size.default`` and moves by ``...min`` within ``[min, max]``: it grows
   while the agent is further behind than the default, and shrinks when it has caught up.
3. **Session.** ``DBMS_LOGMNR.START_LOGMNR(STARTSCN, ENDSCN, OPTIONS)`` then one query of
   ``V$LOGMNR_CONTENTS`` for ``SCN > start AND SCN <= end`` (and ``SRC_CON_NAME`` = the PDB).
4. **Rows** go to the transaction buffer (:mod:`.buffer`): START opens, DML appends (``CSF``
   continuation rows joined; ``ROLLBACK = 1`` undoes by ``ROW_ID``), ROLLBACK drops, COMMIT
   moves the transaction to the ready queue unless bronze already has it (commit SCN below the
   offset's ``commit_scn``, or equal and its XID recorded).
5. **Offset.** ``scn`` is the low watermark: one below the oldest start SCN of every
   transaction not yet in bronze (open or ready), else the end of the mined range. Restarting
   there re-mines every unfinished transaction whole; ``commit_scn``/``commit_xids`` skip the
   finished ones.

``ORA-01291`` (a log the range needs is not registered) re-registers once; if the logs really
do not reach back to the offset (``MIN(FIRST_CHANGE#)``), it is a terminal error that asks for a
new snapshot. ``ORA-00310`` (an online log reused while it was being read) re-registers from
the archives and mines the window again.
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from collections import deque
from collections.abc import Iterator, Mapping
from typing import Any

from bronze.batch import BatchBuilder
from bronze.envelope import ConnectRecord, heartbeat, schema_change
from bronze.position_base import Phase
from bronze.storage import LakePath, lake_path
from capture.captured_table import CapturedTable
from capture.change_records import delete_records, insert_records, update_records
from capture.column_types import ValueConversionError
from capture.database_source import VERSION, BatchLimits
from capture.oracle.agent import CONNECTOR, OracleAgent, OracleTable, OracleTx, ora_code, quote
from capture.oracle.buffer import MinedChange, TxBuffer
from capture.oracle.ddl import apply_ddl, parse_ddl
from capture.oracle.history import Definition, OracleSchemaHistory
from capture.oracle.lob import (
    LOB_CODES,
    OP_SEL_LOB_LOCATOR,
    UNAVAILABLE,
    LobBuilder,
    Statement,
    statements,
)
from capture.oracle.pacing import Pace
from capture.oracle.position import OraclePosition, _parse_rs_id
from capture.oracle.redo import RedoParseError, RedoStatement, parse_lob_locator, parse_redo
from capture.oracle.types import jdbc_type, redo_python
from pipeline.errors import CaptureError, InternalError, PipelineError

__all__ = ["CONTENTS_SQL", "Ready", "StreamReader", "contents_sql", "xid_text"]

logger = logging.getLogger(__name__)

OP_INSERT, OP_DELETE, OP_UPDATE, OP_START, OP_COMMIT, OP_ROLLBACK = 1, 2, 3, 6, 7, 36
OP_DDL, OP_MISSING_SCN, OP_UNSUPPORTED = 5, 34, 255
DML = frozenset({OP_INSERT, OP_DELETE, OP_UPDATE, OP_UNSUPPORTED})

CONTENTS_COLUMNS = (
    "SCN, SQL_REDO, OPERATION_CODE, TIMESTAMP, XID, CSF, TABLE_NAME, SEG_OWNER, OPERATION, "
    "USERNAME, ROW_ID, ROLLBACK, RS_ID, SSN, THREAD#, INFO"
)
CODES = "1, 2, 3, 6, 7, 34, 36, 255"
LOB_CODES_SQL = ", 9, 10, 11, 29"
"""SEL_LOB_LOCATOR, LOB_WRITE, LOB_TRIM, LOB_ERASE: mined with ``lob.enabled`` only."""


def contents_sql(*, pdb: bool, lobs: bool) -> str:
    """The ``V$LOGMNR_CONTENTS`` query of a window (``:1`` < SCN <= ``:2``, ``:3`` the PDB)."""
    codes = CODES + (LOB_CODES_SQL if lobs else "")
    container = " AND SRC_CON_NAME = :3" if pdb else ""
    return (
        f"SELECT {CONTENTS_COLUMNS} FROM V$LOGMNR_CONTENTS WHERE SCN > :1 AND SCN <= :2"
        f"{container} AND ((OPERATION_CODE IN ({codes}))"
        " OR (OPERATION_CODE = 5 AND INFO NOT LIKE 'INTERNAL DDL%'))"
    )


CONTENTS_SQL = contents_sql(pdb=True, lobs=False)
LOGS_SQL = (
    "SELECT F.MEMBER AS FILE_NAME, L.FIRST_CHANGE#, L.NEXT_CHANGE#, L.SEQUENCE#, L.THREAD# "
    "FROM V$LOG L JOIN V$LOGFILE F ON F.GROUP# = L.GROUP# WHERE L.STATUS <> 'UNUSED' "
    "AND L.ARCHIVED = 'NO' "
    "UNION ALL SELECT A.NAME, A.FIRST_CHANGE#, A.NEXT_CHANGE#, A.SEQUENCE#, A.THREAD# "
    "FROM V$ARCHIVED_LOG A WHERE A.NAME IS NOT NULL AND A.ARCHIVED = 'YES' AND A.STATUS = 'A' "
    "AND A.NEXT_CHANGE# > :1 AND A.DEST_ID IN (SELECT DEST_ID FROM V$ARCHIVE_DEST_STATUS "
    "WHERE STATUS = 'VALID' AND TYPE = 'LOCAL' AND ROWNUM = 1) ORDER BY 5, 4"
)
OLDEST_SQL = (
    "SELECT MIN(FIRST_CHANGE#) FROM (SELECT FIRST_CHANGE# FROM V$LOG UNION ALL "
    "SELECT FIRST_CHANGE# FROM V$ARCHIVED_LOG WHERE STATUS = 'A')"
)
CURRENT_LOGS_SQL = "SELECT THREAD#, SEQUENCE# FROM V$LOG WHERE STATUS = 'CURRENT'"
ADD_FIRST = (
    "BEGIN SYS.DBMS_LOGMNR.ADD_LOGFILE(LOGFILENAME => :1, OPTIONS => SYS.DBMS_LOGMNR.NEW); END;"
)
ADD_NEXT = (
    "BEGIN SYS.DBMS_LOGMNR.ADD_LOGFILE(LOGFILENAME => :1, OPTIONS => SYS.DBMS_LOGMNR.ADDFILE); END;"
)
BUILD_DICTIONARY = (
    "BEGIN SYS.DBMS_LOGMNR_D.BUILD(OPTIONS => SYS.DBMS_LOGMNR_D.STORE_IN_REDO_LOGS); END;"
)
START_OPTIONS = {
    "online_catalog": "SYS.DBMS_LOGMNR.DICT_FROM_ONLINE_CATALOG + SYS.DBMS_LOGMNR.NO_ROWID_IN_STMT",
    "redo_log_catalog": "SYS.DBMS_LOGMNR.DICT_FROM_REDO_LOGS + SYS.DBMS_LOGMNR.DDL_DICT_TRACKING"
    " + SYS.DBMS_LOGMNR.NO_ROWID_IN_STMT",
    "hybrid": "SYS.DBMS_LOGMNR.DICT_FROM_ONLINE_CATALOG + SYS.DBMS_LOGMNR.NO_ROWID_IN_STMT",
}
START_SQL = "BEGIN SYS.DBMS_LOGMNR.START_LOGMNR(STARTSCN => :1, ENDSCN => :2, OPTIONS => {}); END;"
END_SQL = "BEGIN SYS.DBMS_LOGMNR.END_LOGMNR; END;"

_ALL = "*"
"""``commit_xids`` entry meaning every transaction committed at ``commit_scn`` is in bronze
(the snapshot's SCN: everything committed up to it is in the snapshot)."""


class Ready:
    """A committed transaction waiting to be emitted, in commit order."""

    __slots__ = ("buffer", "commit_rs_id", "commit_scn", "ddl", "thread", "ts_ms")

    def __init__(
        self,
        buffer: TxBuffer,
        commit_scn: int,
        rs_id: str | None,
        ts_ms: int,
        thread: int,
        *,
        ddl: bool = False,
    ) -> None:
        self.buffer = buffer
        self.commit_scn = commit_scn
        self.commit_rs_id = rs_id
        self.ts_ms = ts_ms
        self.thread = thread
        self.ddl = ddl
        """A DDL statement, emitted at its SCN as a transaction of its own (no BEGIN/END)."""


def xid_text(value: Any) -> str:
    """``XID`` (``RAW(8)``: python-oracledb returns bytes) as upper-case hex, the form
    ``RAWTOHEX(XID)`` gives in ``V$TRANSACTION`` and Debezium's ``txId`` shows."""
    return value.hex().upper() if isinstance(value, bytes | bytearray) else str(value)


def _ts_ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        return int(value.timestamp() * 1000)
    return 0


class StreamReader(OracleAgent):
    """The LogMiner side of the agent."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._mined_to = 0
        self._buffer: dict[str, TxBuffer] = {}
        self._ready: deque[Ready] = deque()
        self._done_scn = 0
        self._done_xids: set[str] = set()
        self._cut: tuple[str, int, int] | None = None
        self._emitting: tuple[Ready, OracleTx, Iterator[Statement]] | None = None
        """The transaction being emitted: its changes are read lazily (a spilled transaction
        stays on disk)."""
        self._registered: set[tuple[int, int]] | None = None
        s = self.settings
        self._pace = Pace(
            s.batch_min,
            s.batch_max,
            s.batch_default,
            s.sleep_min_ms,
            s.sleep_max_ms,
            s.sleep_increment_ms,
            window=s.batch_default,
            sleep_ms=s.sleep_default_ms,
        )
        self._sleep = time.sleep
        """Sleeps between mining rounds (a test replaces it to see the requested pauses)."""
        self._rounds = 0
        self._flush_ready = False
        """The flush table is known to exist with its one row (this session)."""
        self._db_ms = 0
        """Database time (``TIMESTAMP``) of the newest row mined: transaction ages."""
        self._abandoned: set[str] = set()
        """XIDs dropped by ``log.mining.transaction.retention.ms``: their later rows and their
        COMMIT are ignored (never a partial transaction)."""
        self._last_position: OraclePosition | None = None
        self._history: OracleSchemaHistory | None = None
        """Where table definitions are kept (:meth:`bind_lake`; None: the catalog only)."""
        self._known: dict[tuple[str, str], Definition] = {}
        """The history's definitions in force at the resume point."""

    @property
    def _window(self) -> int:
        """SCNs of the next mining round."""
        return self._pace.window

    def bind_lake(self, bronze_root: LakePath) -> None:
        """Keep the schema history in ``<bronze_root>/oracle_schema_history``."""
        self._history = OracleSchemaHistory(
            lake_path(bronze_root) / "oracle_schema_history", self.name
        )

    def _describe(self, owner: str, table: str) -> OracleTable:
        """The table as the history has it at the resume point, else (and when described again,
        :meth:`_refresh`) as the catalog has it."""
        known = self._known.get((owner, table))
        if known is not None and known.columns is not None and (owner, table) not in self._tables:
            return self._build(owner, table, list(known.columns), list(known.key))
        return super()._describe(owner, table)

    def _remember(self, scn: int, tables: list[tuple[str, str, OracleTable | None]]) -> None:
        """Write the definitions ``tables`` leave from ``scn`` on to the history."""
        if self._history is None:
            return
        self._history.append(
            [
                Definition(
                    scn,
                    owner,
                    name,
                    None if table is None else table.every,
                    () if table is None else table.key,
                )
                for owner, name, table in tables
            ]
        )

    # --- state ----------------------------------------------------------------------------------
    def _reset_stream(
        self, low: int, done_scn: int, done_xids: set[str], cut: tuple[str, int, int] | None
    ) -> None:
        self._drop_buffers()
        self._mined_to, self._done_scn, self._done_xids, self._cut = low, done_scn, done_xids, cut
        self._registered = None

    def _drop_buffers(self) -> None:
        """Forget every buffered transaction and delete their spill files."""
        buffers = [*self._buffer.values(), *(ready.buffer for ready in self._ready)]
        if self._emitting is not None:
            buffers.append(self._emitting[0].buffer)
        for buffered in buffers:
            buffered.close()
        self._buffer, self._ready, self._emitting = {}, deque(), None

    def _low_watermark(self) -> int:
        starts = [b.start_scn for b in self._buffer.values()]
        starts += [r.buffer.start_scn for r in self._ready]
        if self._emitting is not None:
            starts.append(self._emitting[0].buffer.start_scn)
        return min(starts) - 1 if starts else self._mined_to

    def _finished(self, scn: int, xid: str) -> bool:
        """Whether bronze already has the transaction committed at ``scn``."""
        if scn != self._done_scn:
            return scn < self._done_scn
        return _ALL in self._done_xids or xid in self._done_xids

    # --- mining -------------------------------------------------------------------------------
    def _register_logs(self) -> None:
        miner = self._miner()
        if self._registered is not None:
            miner.cursor().execute(END_SQL)
        if self.settings.strategy == "redo_log_catalog":
            miner.cursor().execute(BUILD_DICTIONARY)
        logs = self._query(miner, LOGS_SQL, self._mined_to)
        added = 0
        for name, _first, next_change, _seq, _thread in logs:
            if int(next_change) <= self._mined_to:
                continue
            miner.cursor().execute(ADD_FIRST if added == 0 else ADD_NEXT, [name])
            added += 1
        self._registered = {(int(t), int(s)) for t, s in self._query(miner, CURRENT_LOGS_SQL)}

    def _logs_switched(self) -> bool:
        current = {(int(t), int(s)) for t, s in self._query(self._miner(), CURRENT_LOGS_SQL)}
        return current != self._registered

    def _check_coverage(self) -> None:
        oldest = self._query(self._miner(), OLDEST_SQL)[0][0]
        if oldest is not None and int(oldest) > self._mined_to + 1:
            raise CaptureError(
                f"source {self.name}: online redo logs or archive logs do not contain the offset "
                f"SCN {self._mined_to} (the oldest log starts at SCN {oldest}); the changes in "
                "between are gone. Please perform a new snapshot (delete bronze's offset for "
                "this source, snapshot.mode=initial)"
            )

    def _mine_window(self) -> bool:
        """Mine the next window into the buffer; False when it reached the current SCN read
        before the round (the flush commit of each round moves the SCN on: a caught-up agent
        must not mine that forever)."""
        current = self._current_scn()
        if current <= self._mined_to:
            return False
        if self._rounds and self._pace.sleep_ms > 0:
            self._sleep(self._pace.sleep_ms / 1000)
            current = self._current_scn()
        self._rounds += 1
        end = min(current, self._mined_to + self._window)
        self._flush_log_writer(current)
        for attempt in range(3):
            try:
                if self._registered is None or self._logs_switched():
                    self._register_logs()
                rows = self._mine(self._mined_to, end)
                break
            except self.driver.DatabaseError as exc:
                code = ora_code(exc)
                lost = (self.driver.OperationalError, self.driver.InterfaceError)
                if isinstance(exc, lost) or code not in (1291, 310) or attempt == 2:
                    if code == 1291:
                        self._check_coverage()
                    raise
                if code == 1291:
                    self._check_coverage()
                logger.info(
                    "source %s: %s; registering the logs again", self.name, str(exc).strip()
                )
                self._registered = set()
        self._apply(rows)
        self._mined_to = end
        self._abandon_old()
        self._pace.adapt(current - end)
        return end < current

    def _flush_log_writer(self, current: int) -> None:
        """``UPDATE <flush table> SET LAST_SCN = current`` and COMMIT in the PDB: the commit
        makes LGWR write the log buffer, so the redo of the round's range is in the logs (an
        open transaction's rows since the last commit would otherwise be missed for good). The
        table (``log.mining.flush.table.name``) is created with its one row when missing."""
        conn = self._side()
        table = quote(self.settings.flush_table)
        if not self._flush_ready:
            count = self._query(
                conn,
                "SELECT COUNT(*) FROM USER_TABLES WHERE TABLE_NAME = :1",
                self.settings.flush_table,
            )[0][0]
            if not int(count):
                conn.cursor().execute(f"CREATE TABLE {table} (LAST_SCN NUMBER(19,0))")
            rows = int(self._query(conn, f"SELECT COUNT(*) FROM {table}")[0][0])
            if rows != 1:  # Debezium's DBZ-4118: exactly one row
                conn.cursor().execute(f"DELETE FROM {table}")
                conn.cursor().execute(f"INSERT INTO {table} VALUES (0)")
                conn.commit()
            self._flush_ready = True
        conn.cursor().execute(f"UPDATE {table} SET LAST_SCN = :1", [current])
        conn.commit()

    def _abandon_old(self) -> None:
        """``log.mining.transaction.retention.ms``: drop the open transactions that started
        longer ago than that (database time), with a warning; they are never emitted."""
        retention = self.settings.retention_ms
        if retention <= 0:
            return
        for xid, tx in list(self._buffer.items()):
            age = self._db_ms - tx.start_ms
            if tx.start_ms and age > retention:
                logger.warning(
                    "source %s: transaction %s (started at SCN %s, %s changes) is open for "
                    "%s ms, longer than log.mining.transaction.retention.ms %s: abandoned, its "
                    "changes will not be emitted",
                    self.name,
                    xid,
                    tx.start_scn,
                    len(tx),
                    age,
                    retention,
                )
                self._buffer.pop(xid).close()
                self._abandoned.add(xid)

    def _mine(self, start: int, end: int) -> list[tuple[Any, ...]]:
        miner = self._miner()
        options = START_OPTIONS[self.settings.strategy]
        miner.cursor().execute(START_SQL.format(options), [start + 1, end])
        s = self.settings
        sql = contents_sql(pdb=bool(s.pdb), lobs=s.lob_enabled)
        if s.pdb:
            return self._query(miner, sql, start, end, s.pdb.upper())
        return self._query(miner, sql, start, end)

    def _apply(self, rows: list[tuple[Any, ...]]) -> None:
        pending: list[str] = []
        for row in rows:
            (
                scn,
                sql,
                code,
                ts,
                xid,
                csf,
                table,
                owner,
                _op,
                user,
                row_id,
                rollback,
                rs_id,
                ssn,
                thread,
                _info,
            ) = row
            if csf:
                pending.append(sql or "")
                continue
            if pending:
                sql, pending = "".join(pending) + (sql or ""), []
            scn, code, xid = int(scn), int(code), xid_text(xid)
            self._db_ms = max(self._db_ms, _ts_ms(ts))
            if xid in self._abandoned:
                if code in (OP_COMMIT, OP_ROLLBACK):
                    self._abandoned.discard(xid)
                continue
            if code == OP_START:
                self._open_tx(xid, scn, _ts_ms(ts))
            elif code == OP_COMMIT:
                self._commit(xid, scn, rs_id, _ts_ms(ts), int(thread or 1))
            elif code == OP_ROLLBACK:
                dropped = self._buffer.pop(xid, None)
                if dropped is not None:
                    dropped.close()
            elif code == OP_MISSING_SCN:
                logger.warning("source %s: LogMiner reports a missing SCN at %s", self.name, scn)
            elif (
                (code in DML or code in LOB_CODES or code == OP_DDL)
                and owner is not None
                and self._captured(str(owner), str(table))
            ):
                tx = None if code == OP_DDL else self._open_tx(xid, scn, _ts_ms(ts))
                if rollback and tx is not None:
                    tx.undo(row_id)
                    continue
                change = MinedChange(
                    scn,
                    rs_id,
                    int(ssn or 0),
                    code,
                    str(owner),
                    str(table),
                    str(sql or ""),
                    row_id,
                    _ts_ms(ts),
                    int(thread or 1),
                    user,
                )
                if tx is None:
                    self._ddl(change, xid)
                else:
                    tx.add(change)

    def _open_tx(self, xid: str, scn: int, ts_ms: int = 0) -> TxBuffer:
        tx = self._buffer.get(xid)
        if tx is None:
            tx = self._buffer[xid] = TxBuffer(xid, scn, self.settings.spill_events)
            tx.start_ms = ts_ms
        return tx

    def _ddl(self, change: MinedChange, xid: str) -> None:
        """Queue a DDL statement at its SCN among the commits: Oracle commits before and after
        a DDL, and a table's DDL waits for every transaction holding its rows, so the
        transactions that changed the table before it are queued already."""
        if self._finished(change.scn, xid):
            return
        buffered = TxBuffer(xid, change.scn, self.settings.spill_events)
        buffered.add(change)
        self._ready.append(
            Ready(buffered, change.scn, change.rs_id, change.ts_ms, change.thread, ddl=True)
        )

    def _commit(self, xid: str, scn: int, rs_id: str | None, ts_ms: int, thread: int) -> None:
        tx = self._buffer.pop(xid, None)
        if tx is None:
            return
        if self._finished(scn, xid) or len(tx) == 0:
            tx.close()
            return
        self._ready.append(Ready(tx, scn, rs_id, ts_ms, thread))

    # --- emission ------------------------------------------------------------------------------
    def _read_stream(self, builder: BatchBuilder, limits: BatchLimits, now: dt.datetime) -> bool:
        until = limits.until
        target = None if until is None else self._emission_point(until)
        while True:
            if until is not None and self._emission_state() == target:
                tx = None if self._emitting is None else self._emitting[1]
                self._batch_ends(builder, tx, limits, reached=True)
                self._restore_stream(until)
                return True
            if self._emitting is None:
                if not self._ready:
                    more = self._mine_window()
                    if not self._ready and not more:
                        self._maybe_heartbeat(builder, now)
                        return True
                    continue
                self._begin_emitting(builder, now)
                continue
            if self._batch_ends(builder, self._emitting[1], limits, reached=False):
                return False
            if not self._emit_next(builder, now):
                self._finish_tx(builder, now)
                if until is None and len(builder) >= limits.max_events:
                    return False

    def _emission_state(self) -> tuple[Any, ...]:
        cut = self._cut
        if self._emitting is not None:
            ready, tx = self._emitting[0], self._emitting[1]
            cut = (ready.buffer.xid, ready.commit_scn, tx.emitted)
        return (self._done_scn, frozenset(self._done_xids), cut)

    @staticmethod
    def _emission_point(offset: Mapping[str, Any]) -> tuple[Any, ...]:
        cut = offset.get("tx")
        return (
            int(offset["commit_scn"]),
            frozenset(offset.get("commit_xids") or ()),
            None if cut is None else (cut["xid"], int(cut["commit_scn"]), int(cut["emitted"])),
        )

    def _restore_stream(self, offset: Mapping[str, Any]) -> None:
        """Adopt ``offset`` (bronze's, or a half-landed batch's end reached again)."""
        point = self._emission_point(offset)
        self._reset_stream(int(offset["scn"]), point[0], set(point[1]), point[2])
        self._abandoned = {str(x) for x in offset.get("abandoned") or ()}
        position = offset.get("position")
        self._last_position = None if position is None else OraclePosition.from_json(position)

    def _begin_emitting(self, builder: BatchBuilder, now: dt.datetime) -> None:
        ready = self._ready.popleft()
        xid = ready.buffer.xid
        tx = OracleTx(
            xid, ready.ts_ms, commit_scn=ready.commit_scn, start_scn=ready.buffer.start_scn
        )
        tx.commit_rs_id = ready.commit_rs_id
        if self._cut is not None and self._cut[:2] == (xid, ready.commit_scn):
            tx.skip = self._cut[2]
        self._cut = None
        self._emitting = (ready, tx, statements(ready.buffer.changes()))
        if self.settings.rules.provide_transaction_metadata and not ready.ddl:
            position = OraclePosition._new(ready.commit_scn, Phase.STREAM, 0, None, 0, 0)
            self._emit_begin(builder, tx, position, now)
            self._last_position = position

    def _emit_next(self, builder: BatchBuilder, now: dt.datetime) -> bool:
        if self._emitting is None:
            raise InternalError("capture.oracle.stream: expected self._emitting is not None")
        ready, tx, changes = self._emitting
        statement = next(changes, None)
        if statement is None:
            return False
        change, lob_rows = statement
        origin = f"oracle:{change.rs_id or ''}:{change.scn}:{tx.id}"
        try:
            records, table = self._records(change, lob_rows, tx)
        except (RedoParseError, ValueConversionError, PipelineError) as exc:
            if tx.count():
                raw = f"{change.owner}.{change.table} scn={change.scn}: {change.sql}".encode()
                self._quarantine(builder, raw, origin, exc, now)
            return True
        for record in records:
            tx.seq += 1
            if not tx.count():
                continue
            position = OraclePosition._new(
                ready.commit_scn,
                Phase.STREAM,
                change.scn,
                _parse_rs_id(change.rs_id or ""),
                change.ssn,
                tx.seq,
            )
            self._add(builder, record, position, origin, now, tx, table)
            self._last_position = position
            if record.value is not None and table is not None:
                tx.note_data(table.collection)
        return True

    def _records(
        self, change: MinedChange, lob_rows: list[MinedChange], tx: OracleTx
    ) -> tuple[list[ConnectRecord], Any]:
        if change.code == OP_DDL:
            return self._schema_change(change, tx), None
        table = self._table(change.owner, change.table)
        if table is None:
            return [], None
        captured = table.captured
        if change.code == OP_UNSUPPORTED:
            raise CaptureError(
                f"{captured.collection}: LogMiner could not reconstruct the change "
                f"(OPERATION_CODE 255 UNSUPPORTED, SQL_REDO {change.sql[:60]!r})"
            )
        if change.code in LOB_CODES:
            # a locator with no DML row before it: an update of the LOB column alone
            if change.code != OP_SEL_LOB_LOCATOR:
                raise ValueConversionError(
                    f"{captured.collection}: a LOB operation (OPERATION_CODE {change.code}) at "
                    f"SCN {change.scn} without a SEL_LOB_LOCATOR before it"
                )
            locator = parse_lob_locator(change.sql)
            statement = RedoStatement("update", locator.owner, locator.table, {}, locator.where)
            lob_rows = [change, *lob_rows]
        else:
            statement = parse_redo(change.sql)
        table = self._refresh(table, [*statement.new, *statement.old])
        captured = table.captured
        source = self._stream_source(captured, change, tx)
        rules = self.settings.rules
        if statement.op == "insert":
            values = self._values(table, statement.new)
            if lob_rows:
                self._lob_builder(table).apply(values, lob_rows)
            after, key = captured.row_and_key(values)
            return insert_records(source, after, key, captured, tx, rules), captured
        before, old_key = captured.row_and_key(self._values(table, statement.old))
        if statement.op == "delete":
            return delete_records(source, before, old_key, captured, tx, rules), captured
        values = self._values(table, statement.after())
        if lob_rows:
            self._lob_builder(table).apply(values, lob_rows)
        after, new_key = captured.row_and_key(values)
        records = update_records(source, (before, after), (old_key, new_key), captured, tx, rules)
        return records, captured

    def _stream_source(
        self, captured: CapturedTable, change: MinedChange, tx: OracleTx
    ) -> dict[str, Any]:
        """The ``source`` block of a mined change of ``tx``."""
        return {
            "version": VERSION,
            "connector": CONNECTOR,
            "name": self.settings.server_name,
            "ts_ms": change.ts_ms,
            "snapshot": "false",
            **self._source_fields(
                captured,
                scn=change.scn,
                commit_scn=tx.commit_scn,
                xid=tx.id,
                rs_id=(change.rs_id or "").strip() or None,
                ssn=change.ssn,
                thread=change.thread,
                user=change.username,
            ),
        }

    def _schema_change(self, change: MinedChange, tx: OracleTx) -> list[ConnectRecord]:
        """Apply a DDL row to the table's columns (and the schema history); its schema-change
        record (``include.schema.changes``).

        Raises:
            RedoParseError: A table DDL the parser does not understand: the record is
                quarantined and the table described again from the catalog when next needed.
        """
        try:
            ddl = parse_ddl(change.sql, change.owner)
        except RedoParseError:
            self._tables.pop((change.owner, change.table), None)
            raise
        if ddl is None:
            return []
        key = (ddl.owner, ddl.table)
        table: OracleTable | None
        if ddl.kind == "DROP":
            table = self._tables.pop(key, None)
            self._remember(change.scn, [(ddl.owner, ddl.table, None)])
        else:
            if ddl.kind == "CREATE":
                every, primary = ddl.columns, ddl.key
            else:
                # a table not described yet is described from the catalog, which may have the
                # change already: apply_ddl takes an ADD of a known column as its new type
                old = self._tables.get(key) or self._table(*key)
                if old is None:
                    return []
                every, primary = apply_ddl(list(old.every), list(old.key), ddl)
            table = self._tables[key] = self._build(ddl.owner, ddl.table, every, primary)
            self._remember(change.scn, [(ddl.owner, ddl.table, table)])
        if not self.settings.include_schema_changes or table is None:
            return []
        return [self._schema_record(change, tx, ddl.kind, table)]

    def _schema_record(
        self, change: MinedChange, tx: OracleTx, kind: str, table: OracleTable
    ) -> ConnectRecord:
        """The seed document's schema-change value: ``ddl`` and one ``tableChanges`` entry."""
        captured = table.captured
        s = self.settings
        db = s.pdb or s.dbname
        source = self._stream_source(captured, change, tx)
        columns = [
            {
                "name": c.name,
                "jdbcType": jdbc_type(c.data_type),
                "nativeType": None,
                "typeName": c.data_type,
                "typeExpression": c.data_type,
                "charsetName": None,
                "length": c.length if c.length is not None else c.precision,
                "scale": c.scale,
                "position": n + 1,
                "optional": c.nullable,
                "autoIncremented": False,
                "generated": False,
            }
            for n, c in enumerate(table.every)
        ]
        table_change = {
            "type": kind,
            "id": f'"{db}"."{captured.schema}"."{captured.table}"',
            "table": {
                "defaultCharsetName": None,
                "primaryKeyColumnNames": list(table.key),
                "columns": columns,
                "attributes": [],
            },
        }
        return schema_change(
            db,
            source,
            ddl=change.sql,
            schema_name=captured.schema,
            table_changes=[table_change],
            ts_ms=change.ts_ms,
            topic=s.server_name,
        )

    @staticmethod
    def _lob_builder(table: OracleTable) -> LobBuilder:
        binary = frozenset(c.name for c in table.columns if c.data_type == "BLOB")
        return LobBuilder(table.captured.collection, table.index, binary)

    def _values(self, table: OracleTable, values: Mapping[str, Any]) -> list[Any]:
        out: list[Any] = [None] * len(table.columns)
        for name in table.lobs:
            # LogMiner never logs a LOB column it did not write: its value is not in the redo
            out[table.index[name]] = UNAVAILABLE
        for name, value in values.items():
            index = table.index.get(name)
            if index is not None:
                try:
                    out[index] = redo_python(value)
                except (ValueError, TypeError) as exc:
                    raise ValueConversionError(
                        f"{table.captured.collection}.{name}: {exc}"
                    ) from None
        return out

    def _finish_tx(self, builder: BatchBuilder, now: dt.datetime) -> None:
        if self._emitting is None:
            raise InternalError("capture.oracle.stream: expected self._emitting is not None")
        ready, tx, _changes = self._emitting
        if self.settings.rules.provide_transaction_metadata and not ready.ddl:
            tx.seq += 1
            position = OraclePosition._new(
                ready.commit_scn,
                Phase.STREAM,
                ready.commit_scn,
                _parse_rs_id(ready.commit_rs_id or ""),
                0,
                tx.seq,
            )
            self._emit_end(builder, tx, position, now)
            self._last_position = position
        ready.buffer.close()
        self._emitting = None
        if ready.commit_scn != self._done_scn:
            self._done_scn, self._done_xids = ready.commit_scn, set()
        self._done_xids.add(ready.buffer.xid)

    def _cut_inside(self, builder: BatchBuilder, tx: Any) -> None:
        """End the batch inside ``tx``: bronze marks it partial; the offset's ``tx`` (from
        :meth:`_emission_state`) resumes inside it."""
        builder.mark_partial(str(tx.id))

    def _maybe_heartbeat(self, builder: BatchBuilder, now: dt.datetime) -> None:
        s = self.settings
        rules = s.rules
        if not self._heartbeat_due(rules.heartbeat_interval_ms, rules.heartbeat_action_query):
            return
        self._last_heartbeat = time.monotonic()
        # Every commit up to the mined SCN is in bronze or before it, and later commits come
        # after it: the heartbeat sits there.
        low = self._low_watermark()
        position = OraclePosition._new(self._mined_to, Phase.STREAM, self._mined_to, None, 0, 0)
        if self._last_position is not None and position.encode() <= self._last_position.encode():
            return
        record = heartbeat(s.server_name, int(time.time() * 1000))
        self._add(builder, record, position, f"oracle:heartbeat:{low}", now, None, None)
        self._last_position = position

    def _run_action_query(self, sql: str) -> None:
        conn = self._side()
        conn.cursor().execute(sql)
        conn.commit()
