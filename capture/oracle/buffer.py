"""The transaction buffer: LogMiner rows held per transaction until its COMMIT.

LogMiner returns every transaction's changes as they were written, interleaved, committed or
not. Debezium buffers them per XID and emits a transaction only when its COMMIT row comes, in
commit order; a ROLLBACK row (code 36) drops the transaction, and a DML row with ``ROLLBACK = 1``
(the undo of a failed statement or a rollback to a savepoint) removes the latest change of the
same ``ROW_ID``, the transaction going on. :class:`TxBuffer` holds one transaction's changes; past
``spill_events`` changes it appends them to a temporary file, so a transaction of millions of
rows costs a file, not memory (only each change's ROW_ID stays in memory, for the undo rows).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import IO, Any, NamedTuple

import orjson

__all__ = ["MinedChange", "TxBuffer"]

_LOB_CODES = frozenset({9, 10, 11, 29})
"""SEL_LOB_LOCATOR, LOB_WRITE, LOB_TRIM, LOB_ERASE (:mod:`capture.oracle.lob`): rows that belong
to the statement before them for the same ROW_ID."""


class MinedChange(NamedTuple):
    """One DML of a transaction, as mined (``SQL_REDO`` continuation rows joined)."""

    scn: int
    rs_id: str | None
    ssn: int
    code: int
    owner: str
    table: str
    sql: str
    row_id: str | None
    ts_ms: int
    thread: int
    username: str | None


@dataclass
class TxBuffer:
    """The changes of one open transaction, in redo order.

    Attributes:
        xid: The transaction id (``XID`` as hex).
        start_scn: The SCN of its first row seen (START, or its first change).
        spill_events: Changes kept in memory before spilling to a file.
    """

    xid: str
    start_scn: int
    spill_events: int
    _memory: list[MinedChange | None] = field(default_factory=list)
    _row_ids: list[str | None] = field(default_factory=list)
    _attached: list[bool] = field(default_factory=list)
    """Per change: a LOB row that belongs to the statement before it (same ROW_ID)."""
    _removed: set[int] = field(default_factory=set)
    _file: IO[bytes] | None = None
    _spilled: int = 0
    start_ms: int = 0
    """Database time of its first row seen (``log.mining.transaction.retention.ms``)."""

    def __len__(self) -> int:
        return len(self._row_ids) - len(self._removed)

    @property
    def spilled(self) -> bool:
        """Whether part of the transaction is on disk."""
        return self._file is not None

    def add(self, change: MinedChange) -> None:
        """Append a change; past ``spill_events`` in memory the memory part goes to the file."""
        self._attached.append(
            change.code in _LOB_CODES
            and bool(self._row_ids)
            and self._row_ids[-1] == change.row_id
            and len(self._row_ids) - 1 not in self._removed
        )
        self._row_ids.append(change.row_id)
        self._memory.append(change)
        if len(self._memory) >= self.spill_events:
            self._spill()

    def _spill(self) -> None:
        if self._file is None:
            self._file = tempfile.TemporaryFile(prefix="medallion-oracle-tx-")  # noqa: SIM115
        self._file.seek(0, 2)
        for change in self._memory:
            self._file.write(orjson.dumps(None if change is None else list(change)) + b"\n")
        self._spilled += len(self._memory)
        self._memory = []

    def undo(self, row_id: str | None) -> bool:
        """A ``ROLLBACK = 1`` row: forget the latest statement of ``row_id`` (its change and
        the LOB rows attached to it); False if none."""
        for index in range(len(self._row_ids) - 1, -1, -1):
            if (
                index not in self._removed
                and self._row_ids[index] == row_id
                and not self._attached[index]
            ):
                self._remove(index)
                following = index + 1
                while following < len(self._row_ids) and self._attached[following]:
                    if self._row_ids[following] == row_id:
                        self._remove(following)
                    following += 1
                return True
        return False

    def _remove(self, index: int) -> None:
        self._removed.add(index)
        if index >= self._spilled:
            self._memory[index - self._spilled] = None

    def changes(self) -> Iterator[MinedChange]:
        """The changes that stand, in redo order (read back from the file first)."""
        index = 0
        if self._file is not None:
            self._file.seek(0)
            for line in self._file:
                if index not in self._removed:
                    item: Any = orjson.loads(line)
                    yield MinedChange(*item)
                index += 1
        for change in self._memory:
            if change is not None:
                yield change

    def close(self) -> None:
        """Delete the spill file."""
        if self._file is not None:
            self._file.close()
            self._file = None
