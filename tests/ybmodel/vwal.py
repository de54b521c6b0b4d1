"""The YugabyteDB replication model: tablets, the Virtual WAL, a slot and its frames.

What it follows (seed 004 and the digest ``oracle-and-yugabytedb.md`` B1-B3):

* **Tablets.** A table's rows are hash-sharded over ``tablets`` tablets; each tablet keeps its
  own log of ``(commit hybrid time, transaction, statement index, change)``. A transaction
  touching rows of several tablets writes to each of them.
* **Virtual WAL.** A slot's stream merges every tablet of the publication, assembles each
  transaction across tablets and ships committed transactions in commit-time order, each as
  BEGIN, its changes in statement order, COMMIT (pgoutput protocol 1 messages, what both
  ``yboutput`` and ``pgoutput`` write).
* **LSNs**, valid only within the slot: ``SEQUENCE`` numbers BEGIN, every change and COMMIT
  monotonically (``end_lsn`` = commit + 1); ``HYBRID_TIME`` gives every record of a
  transaction its commit hybrid time (``end_lsn`` = commit).
* **Replica identity**, per table, fixed when the slot is created: ``CHANGE`` (``c``,
  ``yboutput`` only) sends an update's changed columns and the primary key, the others as ``u``
  (not sent), and a delete's key; ``DEFAULT`` (``d``) the whole new row and a delete's key;
  ``FULL`` (``f``) the old row too; ``NOTHING`` (``n``): updates and deletes of the table fail on
  the publisher. A primary-key change sends the old key as a ``K`` tuple and, being a delete
  and an insert in DocDB, the whole new row even under ``CHANGE`` (an assumption: the seed does
  not say).
* **Restart**: the slot resends from its confirmed flush LSN, at least once: the last
  confirmed transaction may come again (per-slot order, no gaps).

The ground truth is :attr:`YbModel.rows`; :meth:`YbModel.frames` is what a walsender sends.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Change", "ModelError", "Slot", "Table", "YbModel", "xlog_data", "keepalive"]

TEXT_OID, INT4_OID, INT8_OID = 25, 23, 20
HT_LOGICAL_BITS = 12
"""A hybrid time is physical microseconds shifted left by 12 logical bits."""
PG_EPOCH_SHIFT_US = 946_684_800_000_000
"""Microseconds from 1970-01-01 to 2000-01-01 (pgoutput timestamps count from 2000)."""


class ModelError(Exception):
    """What the server would answer with an error."""


@dataclass(frozen=True)
class Table:
    """A table: ``columns`` as ``(name, type oid)``, the primary key, the replica identity."""

    schema: str
    name: str
    relid: int
    columns: tuple[tuple[str, int], ...]
    key: tuple[str, ...]
    identity: str = "c"


@dataclass(frozen=True)
class Change:
    """One statement's effect on one row (``old``/``new`` are whole rows; None: absent)."""

    op: str
    table: str
    old: Mapping[str, Any] | None
    new: Mapping[str, Any] | None


@dataclass
class _Tx:
    xid: int
    commit_ht: int
    changes: list[Change]


@dataclass
class Slot:
    """A replication slot: plugin, LSN type, the identities it fixed, what was confirmed."""

    name: str
    plugin: str
    lsn_type: str
    consistent_ht: int
    identities: dict[str, str]
    first_tx: int
    """Index of the first transaction after the consistent point."""
    confirmed_flush: int = 0
    acks: list[int] = field(default_factory=list)
    database: str = ""
    """The database of the replication connection that created it (the wire peer sets it)."""


class YbModel:
    """One YugabyteDB database with hash-sharded tables and logical replication slots."""

    def __init__(self, *, tablets: int = 3, start_ht: int = 7_000_000_000_000 << 12) -> None:
        self.tablets = tablets
        self.tables: dict[str, Table] = {}
        self.rows: dict[str, dict[tuple[Any, ...], dict[str, Any]]] = {}
        self.tablet_logs: list[list[tuple[int, int, int, Change]]] = [[] for _ in range(tablets)]
        self.slots: dict[str, Slot] = {}
        self._ht = start_ht
        self.next_xid = 700
        """The id the next transaction gets."""
        self._committed: list[tuple[int, int]] = []
        """``(commit hybrid time, xid)`` of every transaction, in commit order."""

    # --- DDL and DML -----------------------------------------------------------------------------

    def create_table(self, table: Table) -> None:
        """Add a table (its rows start empty)."""
        self.tables[table.name] = table
        self.rows[table.name] = {}

    def _tablet(self, table: Table, row: Mapping[str, Any]) -> int:
        key = repr((table.name, tuple(row[k] for k in table.key))).encode()
        return zlib.crc32(key) % self.tablets

    def commit(self, statements: Sequence[tuple[str, str, Mapping[str, Any]]]) -> int:
        """Run one transaction: ``("insert", table, row)``, ``("update", table, {key.., col..})``
        (the key names the row; a ``__new_key`` mapping moves it), ``("delete", table, key)``.

        Returns:
            The commit hybrid time.

        Raises:
            ModelError: As the publisher would: an update or delete of a ``NOTHING`` table in a
                publication, a duplicate key, a missing row. Nothing is applied then.
        """
        staged = {name: dict(rows) for name, rows in self.rows.items()}
        changes: list[Change] = []
        for op, name, values in statements:
            table = self.tables[name]
            rows = staged[name]
            if op != "insert" and self._identity(name) == "n":
                raise ModelError(
                    f'cannot {op} table "{name}" because it does not have a replica identity '
                    "and publishes updates"
                )
            key = tuple(values[k] for k in table.key)
            if op == "insert":
                if key in rows:
                    raise ModelError(f"duplicate key {key} in {name}")
                row = {c: values.get(c) for c, _ in table.columns}
                rows[key] = row
                changes.append(Change("c", name, None, row))
                continue
            if key not in rows:
                raise ModelError(f"no row {key} in {name}")
            old = rows.pop(key)
            if op == "delete":
                changes.append(Change("d", name, old, None))
                continue
            new = {**old, **{c: v for c, v in values.items() if c != "__new_key"}}
            new.update(values.get("__new_key", {}))
            new_key = tuple(new[k] for k in table.key)
            if new_key in rows:
                raise ModelError(f"duplicate key {new_key} in {name}")
            rows[new_key] = new
            changes.append(Change("u", name, old, new))
        self.rows = staged
        self._ht += (1000 << HT_LOGICAL_BITS) + 7
        xid, self.next_xid = self.next_xid, self.next_xid + 1
        for index, change in enumerate(changes):
            image = change.new if change.new is not None else change.old
            assert image is not None
            tablet = self._tablet(self.tables[change.table], image)
            self.tablet_logs[tablet].append((self._ht, xid, index, change))
        self._committed.append((self._ht, xid))
        return self._ht

    def _identity(self, name: str) -> str:
        # A table's identity is fixed by the first slot created after it (the model has one).
        for slot in self.slots.values():
            if name in slot.identities:
                return slot.identities[name]
        return self.tables[name].identity

    def truth(self, name: str) -> list[dict[str, Any]]:
        """The table's rows now, in key order."""
        return [dict(r) for _, r in sorted(self.rows[name].items())]

    # --- slots -----------------------------------------------------------------------------------

    def create_slot(self, name: str, plugin: str, lsn_type: str) -> tuple[int, str]:
        """``CREATE_REPLICATION_SLOT``: the consistent point (LSN 0 of the slot's own numbering,
        1 for ``SEQUENCE``) and the snapshot's hybrid time.

        Raises:
            ModelError: The slot exists, or a ``CHANGE`` table with ``pgoutput``.
        """
        if name in self.slots:
            raise ModelError(f'replication slot "{name}" already exists')
        for table in self.tables.values():
            if table.identity == "c" and plugin != "yboutput":
                raise ModelError(
                    f"table {table.name}: replica identity CHANGE is supported only with yboutput"
                )
        slot = Slot(
            name,
            plugin,
            lsn_type,
            self._ht,
            {t.name: t.identity for t in self.tables.values()},
            len(self._committed),
        )
        slot.confirmed_flush = self._ht if lsn_type == "HYBRID_TIME" else 1
        self.slots[name] = slot
        return slot.confirmed_flush, str(self._ht)

    def _transactions(self, slot: Slot) -> list[_Tx]:
        """The Virtual WAL: every tablet merged, transactions after the slot's consistent point
        in commit order, each one's changes in statement order."""
        by_tx: dict[tuple[int, int], list[tuple[int, Change]]] = {}
        for log in self.tablet_logs:
            for ht, xid, index, change in log:
                if ht > slot.consistent_ht:
                    by_tx.setdefault((ht, xid), []).append((index, change))
        return [
            _Tx(xid, ht, [c for _, c in sorted(by_tx[(ht, xid)], key=lambda p: p[0])])
            for ht, xid in sorted(by_tx)
        ]

    def _numbered(self, slot: Slot) -> Iterator[tuple[_Tx, list[int], int]]:
        """Each transaction with the LSNs of its records (BEGIN, changes, COMMIT) and its end."""
        lsn = 1
        for tx in self._transactions(slot):
            n = 2 + len(tx.changes)
            if slot.lsn_type == "HYBRID_TIME":
                yield tx, [tx.commit_ht] * n, tx.commit_ht
            else:
                yield tx, list(range(lsn + 1, lsn + 1 + n)), lsn + n + 1
                lsn += n

    def restart_commit_ht(self, slot_name: str) -> int:
        """The slot's ``yb_restart_commit_ht``: the commit hybrid time of the last confirmed
        transaction, the consistent point's while nothing is confirmed."""
        slot = self.slots[slot_name]
        found = slot.consistent_ht
        for tx, _, end_lsn in self._numbered(slot):
            if end_lsn > slot.confirmed_flush:
                break
            found = tx.commit_ht
        return found

    def frames(self, slot_name: str, *, after_commit: int = -1) -> Iterator[tuple[int, bytes]]:
        """``(LSN, pgoutput message)`` of every transaction committed after ``after_commit``
        (a commit LSN), with a Relation message before each table's first change."""
        slot = self.slots[slot_name]
        sent: set[str] = set()
        for tx, lsns, end_lsn in self._numbered(slot):
            commit_lsn = lsns[-1]
            if commit_lsn <= after_commit:
                continue
            time_us = (tx.commit_ht >> HT_LOGICAL_BITS) - PG_EPOCH_SHIFT_US
            yield lsns[0], b"B" + struct.pack("!QqI", commit_lsn, time_us, tx.xid)
            for change, at in zip(tx.changes, lsns[1:-1], strict=True):
                table = self.tables[change.table]
                if table.name not in sent:
                    sent.add(table.name)
                    yield at, self._relation(table, slot)
                yield at, self._change(table, slot, change)
            yield commit_lsn, b"C" + struct.pack("!BQQq", 0, commit_lsn, end_lsn, time_us)

    # --- encoding --------------------------------------------------------------------------------

    def _relation(self, table: Table, slot: Slot) -> bytes:
        out = b"R" + struct.pack("!I", table.relid) + _cstr(table.schema) + _cstr(table.name)
        identity = slot.identities[table.name]
        out += identity.encode() + struct.pack("!h", len(table.columns))
        for name, oid in table.columns:
            flag = 1 if name in table.key or identity == "f" else 0
            out += bytes([flag]) + _cstr(name) + struct.pack("!Ii", oid, -1)
        return out

    def _change(self, table: Table, slot: Slot, change: Change) -> bytes:
        identity = slot.identities[table.name]
        head = struct.pack("!I", table.relid)
        names = [c for c, _ in table.columns]
        if change.op == "c":
            assert change.new is not None
            return b"I" + head + b"N" + _tuple([change.new[c] for c in names])
        assert change.old is not None
        old_key = tuple(change.old[k] for k in table.key)
        key_tuple = _tuple([change.old[c] if c in table.key else None for c in names])
        if change.op == "d":
            if identity == "f":
                return b"D" + head + b"O" + _tuple([change.old[c] for c in names])
            return b"D" + head + b"K" + key_tuple
        assert change.new is not None
        new_key = tuple(change.new[k] for k in table.key)
        if identity == "c" and new_key == old_key:
            # A key change is a delete and an insert of the whole row in DocDB: sent whole.
            new = [
                change.new[c] if c in table.key or change.new[c] != change.old[c] else _UNSET
                for c in names
            ]
        else:
            new = [change.new[c] for c in names]
        if identity == "f":
            return b"U" + head + b"O" + _tuple([change.old[c] for c in names]) + b"N" + _tuple(new)
        if new_key != old_key:
            return b"U" + head + b"K" + key_tuple + b"N" + _tuple(new)
        return b"U" + head + b"N" + _tuple(new)


_UNSET: Any = object()


def _cstr(text: str) -> bytes:
    return text.encode() + b"\0"


def _tuple(values: Sequence[Any]) -> bytes:
    out = struct.pack("!h", len(values))
    for value in values:
        if value is _UNSET:
            out += b"u"
        elif value is None:
            out += b"n"
        else:
            data = str(value).encode()
            out += b"t" + struct.pack("!i", len(data)) + data
    return out


def xlog_data(lsn: int, wal_end: int, payload: bytes) -> bytes:
    """A ``w`` CopyData message carrying ``payload`` at ``lsn``."""
    return b"w" + struct.pack("!QQq", lsn, wal_end, 0) + payload


def keepalive(wal_end: int, *, reply: bool = False) -> bytes:
    """A ``k`` CopyData message."""
    return b"k" + struct.pack("!QqB", wal_end, 0, 1 if reply else 0)
