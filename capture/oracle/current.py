"""The Oracle agent's reconciliation side (a ``CurrentStateReader``): :class:`CurrentReader`.

Reconciliation (:mod:`gold.reconcile`) reads every captured table ``AS OF SCN`` one SCN (a
consistent read of the whole PDB, on the side session), converted exactly as the snapshot
converts rows, and asks whether LogMiner holds a captured change committed after bronze's cut
and up to that SCN, on a LogMiner session of its own (the agent's is never touched).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from capture.captured_table import CapturedTable
from capture.current_state import LogCheck, current_payload
from capture.oracle.agent import TABLES_SQL
from capture.oracle.position import OraclePosition
from capture.oracle.snapshot import SnapshotReader
from capture.oracle.stream import DML, OP_COMMIT, OP_START, xid_text

__all__ = ["CurrentReader"]

logger = logging.getLogger(__name__)


class CurrentReader(SnapshotReader):
    """Current rows and the log after a cut, for reconciliation."""

    def read_current(
        self, *, fetch_size: int | None = None
    ) -> Iterator[tuple[int, CapturedTable, list[dict[str, Any] | None]]]:
        """Every captured table's rows ``AS OF SCN`` the current SCN, as ``after`` payloads
        (None for a row the agent would quarantine); see
        :meth:`capture.current_state.CurrentStateReader.read_current`."""
        del fetch_size  # the snapshot's fetch size is used
        scn = self._current_scn()
        for owner, name in self._query(self._side(), TABLES_SQL):
            table = self._table(str(owner), str(name))
            if table is None:
                continue
            captured = table.captured
            yield scn, captured, []
            out = [current_payload(self.name, captured, row) for row in self._flashback(table, scn)]
            if out:
                yield scn, captured, out
        self._close_connections()

    def point_text(self, point: int) -> str:
        """An SCN, as Oracle prints it."""
        return str(point)

    def changes_after(self, position: bytes, point: int) -> LogCheck:
        """Whether a transaction with a captured change committed after the cut's commit SCN
        and at or before ``point``. A transaction that committed in that range but started
        before the cut's commit is not mined back to its start: then the answer is None."""
        cut = OraclePosition.decode(position).commit_scn
        if point <= cut:
            return LogCheck(False, f"SCN {point} is not after the cut's commit SCN {cut}")
        self._reset_stream(cut, cut, set(), None)
        try:
            self._register_logs()
            rows = self._mine(cut, point)
        except self.driver.Error as exc:
            return LogCheck(None, f"cannot mine SCN {cut} to {point}: {str(exc).strip()}")
        finally:
            self._close_connections()
            self._registered = None
        captured_xids: set[str] = set()
        started: set[str] = set()
        unknown = None
        for row in rows:
            scn, code, xid, table, owner = (
                int(row[0]),
                int(row[2]),
                xid_text(row[4]),
                row[6],
                row[7],
            )
            if code == OP_START:
                started.add(xid)
            elif code in DML and owner is not None and self._captured(str(owner), str(table)):
                captured_xids.add(xid)
            elif code == OP_COMMIT and scn <= point:
                if xid in captured_xids:
                    return LogCheck(True, f"a captured change committed at SCN {scn}")
                if xid not in started:  # begun before the cut: its start is not mined
                    unknown = unknown or scn
        if unknown is not None:
            return LogCheck(
                None,
                f"a transaction that started before SCN {cut} committed at SCN {unknown}; "
                "its earlier changes were not mined",
            )
        return LogCheck(False, f"no captured change committed after SCN {cut} up to {point}")
