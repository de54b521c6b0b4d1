"""LOB values (``lob.enabled``): LogMiner's LOB rows assembled into the change they belong to.

Oracle does not log a CLOB/NCLOB/BLOB value in the DML row itself (seed Oracle document, "Binary
and Character LOB types"; Debezium's ``TransactionCommitConsumer``). An INSERT or UPDATE that
writes a LOB shows ``EMPTY_CLOB()``/``EMPTY_BLOB()`` (or ``NULL``) in ``SQL_REDO``, followed,
in the same transaction and for the same ``ROW_ID``, by:

* ``SEL_LOB_LOCATOR`` (``OPERATION_CODE`` 9): the column selected ``for update``;
* ``LOB_WRITE`` (10): ``dbms_lob.write(loc, amount, offset, buf)``, one row per piece;
* ``LOB_TRIM`` (11) and ``LOB_ERASE`` (29): ``dbms_lob.trim`` / ``dbms_lob.erase``.

An application writing through a locator (``DBMS_LOB.WRITE`` on an existing row) shows the
locator and the LOB rows with no DML row before them: that is an update of the LOB column.

:func:`statements` groups a transaction's changes into statements (a DML row with the LOB rows
that follow it for its ``ROW_ID``); :class:`LobBuilder` applies the LOB rows to the row after
the change. A LOB value the redo does not carry (an unchanged LOB column: LogMiner never logs
LOB columns in a ``where`` list) is :data:`UNAVAILABLE`, which the column's converter writes as
``unavailable.value.placeholder``; silver then keeps the stored value. A write, trim or erase
on a LOB whose content before it is not in the transaction (a locator write to a row written
earlier) cannot be known from the redo: the change is refused with that reason (quarantined),
never landed with a guessed value. Debezium ignores LOB_TRIM and drops the row's change on
LOB_ERASE; this agent applies both exactly when the value is known.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from capture.column_types import ValueConversionError
from capture.oracle.buffer import MinedChange
from capture.oracle.redo import (
    LobErase,
    LobTrim,
    LobWrite,
    parse_lob_locator,
    parse_lob_operation,
)

__all__ = [
    "LOB_CODES",
    "LOB_TYPES",
    "OP_SEL_LOB_LOCATOR",
    "UNAVAILABLE",
    "LobBuilder",
    "Statement",
    "statements",
]

OP_SEL_LOB_LOCATOR, OP_LOB_WRITE, OP_LOB_TRIM, OP_LOB_ERASE = 9, 10, 11, 29
LOB_CODES = frozenset({OP_SEL_LOB_LOCATOR, OP_LOB_WRITE, OP_LOB_TRIM, OP_LOB_ERASE})
"""The operation codes mined only with ``lob.enabled``."""
LOB_TYPES = frozenset({"CLOB", "NCLOB", "BLOB"})


class _Unavailable:
    """The value of a LOB column the redo does not carry."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNAVAILABLE"


UNAVAILABLE: Any = _Unavailable()
"""A LOB column's value that is not in the redo (written as the placeholder)."""


Statement = tuple[MinedChange, list[MinedChange]]
"""A head change and the LOB rows that belong to it."""


def statements(changes: Iterable[MinedChange]) -> Iterator[Statement]:
    """A transaction's changes as statements: each head (a DML row, or a locator with no DML
    row of its ``ROW_ID`` before it) with the LOB rows that follow it for the same row."""
    head: MinedChange | None = None
    rows: list[MinedChange] = []
    for change in changes:
        if (
            change.code in LOB_CODES
            and head is not None
            and change.row_id == head.row_id
            and (change.owner, change.table) == (head.owner, head.table)
        ):
            rows.append(change)
            continue
        if head is not None:
            yield head, rows
        head, rows = change, []
    if head is not None:
        yield head, rows


class LobBuilder:
    """Applies a statement's LOB rows to the row after its change.

    Args:
        collection: ``schema.table``, for messages.
        index: Column name -> position in the row.
        binary: Names of the BLOB columns.
    """

    def __init__(self, collection: str, index: dict[str, int], binary: frozenset[str]) -> None:
        self.collection = collection
        self.index = index
        self.binary = binary

    def apply(self, after: list[Any], rows: Iterable[MinedChange]) -> None:
        """Apply ``rows`` (locators and LOB operations, in redo order) to ``after``.

        Raises:
            ValueConversionError: A LOB row without a locator before it, a locator for a column
                the table does not have, or an operation on a LOB whose content before it is
                not in the transaction.
        """
        column: str | None = None
        for row in rows:
            if row.code == OP_SEL_LOB_LOCATOR:
                column = parse_lob_locator(row.sql).column
                if column not in self.index:
                    raise ValueConversionError(
                        f"{self.collection}: SEL_LOB_LOCATOR names column {column}, which is "
                        "not a captured column of the table"
                    )
                continue
            if column is None:
                raise ValueConversionError(
                    f"{self.collection}: a LOB operation (OPERATION_CODE {row.code}) at SCN "
                    f"{row.scn} without a SEL_LOB_LOCATOR before it"
                )
            i = self.index[column]
            after[i] = self._operate(column, after[i], parse_lob_operation(row.sql), row.scn)

    def _operate(
        self, column: str, value: Any, op: LobWrite | LobTrim | LobErase, scn: int
    ) -> str | bytes:
        if value is UNAVAILABLE or value is None:
            what = "not in the transaction" if value is UNAVAILABLE else "NULL"
            raise ValueConversionError(
                f"{self.collection}.{column}: {type(op).__name__} at SCN {scn} changes a LOB "
                f"whose content before it is {what} (written by an earlier transaction): the "
                "new value cannot be known from the redo"
            )
        binary = column in self.binary
        current: Any = bytes(value) if binary else str(value)
        fill: Any = b"\0" if binary else " "
        if isinstance(op, LobTrim):
            return current[: op.length]
        if isinstance(op, LobErase):
            end = min(len(current), op.offset + op.amount)
            erased = fill * max(0, end - op.offset)
            return current[: op.offset] + erased + current[end:]
        data = op.data[: op.amount]
        if isinstance(data, bytes) != binary:
            raise ValueConversionError(
                f"{self.collection}.{column}: LOB_WRITE of {'text' if binary else 'bytes'} "
                f"into a {'BLOB' if binary else 'CLOB'} at SCN {scn}"
            )
        padded = current + fill * max(0, op.offset - len(current))
        return padded[: op.offset] + data + padded[op.offset + len(data) :]
