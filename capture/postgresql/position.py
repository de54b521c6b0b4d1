"""PostgreSQL source positions: ``v | commit_lsn u64 | phase | lsn u64 | seq u32``.

The layout, its parsing of Debezium's PostgreSQL ``source`` block and the commit-order
derivation :class:`bronze.positions.PositionResolver` uses for Debezium versions that do not
write the commit LSN. Persisted in bronze: the encoding must never change.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from bronze.position_base import (
    U32_MAX,
    U64_MAX,
    Phase,
    Position,
    bad_field,
    install_layout,
    missing_field,
    parse_uint,
    phase_of,
)
from bronze.source_block import SCHEMA_TABLE, SourceBlock, SourceField
from pipeline.errors import PositionError

__all__ = ["DERIVED_TXN_MEMORY", "PgCommitOrder", "PostgresPosition", "format_pg_lsn"]

DERIVED_TXN_MEMORY = 4096
"""How many recent transactions a :class:`PgCommitOrder` remembers with their derived
commit-order key, so a redelivered transaction gets its original key back."""

_SNAPSHOT = Phase.SNAPSHOT
_STREAM = Phase.STREAM


def format_pg_lsn(value: int) -> str:
    """Format a 64-bit LSN the way PostgreSQL prints ``pg_lsn`` (``"0/16B3748"``)."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def _pg_lsn(value: object, connector: str, name: str, origin: str | None) -> int:
    """Parse an LSN given as an int, a decimal string or PostgreSQL's ``"X/Y"`` text."""
    if type(value) is int:
        if 0 <= value <= U64_MAX:
            return value
    elif isinstance(value, str):
        hi, slash, lo = value.partition("/")
        try:
            if slash:
                high, low = int(hi, 16), int(lo, 16)
                if 0 <= high <= U32_MAX and 0 <= low <= U32_MAX:
                    return (high << 32) | low
            elif value.strip().isdigit():
                # Debezium's offsets and JSON write LSNs as decimal int64, sometimes quoted.
                number = int(value)
                if number <= U64_MAX:
                    return number
        except ValueError:
            pass
    elif value is None:
        raise missing_field(connector, name, origin)
    elif isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= U64_MAX:
        return int(value)
    raise bad_field(connector, name, value, origin, "an LSN (unsigned int64 or 'X/Y' text)")


_SEQUENCE_ITEM_NAMES = ("sequence[0]", "sequence[1]")


def _pg_sequence(value: object, index: int, connector: str, origin: str | None) -> int | None:
    """Item ``index`` of ``source.sequence``, the JSON text ``'["<lastCommitLsn>","<lsn>"]'``.

    Items may be null (None is returned). Hand-parsed: ``json.loads`` would cost about a
    microsecond per record on the landing path.
    """
    item: object
    if isinstance(value, str):
        text = value.strip()
        parts = text[1:-1].split(",")
        if text[:1] != "[" or text[-1:] != "]" or len(parts) != 2:
            raise bad_field(connector, "sequence", value, origin, 'a JSON array ["<lsn>","<lsn>"]')
        item = parts[index].strip()
        if item == "null":
            return None
        if len(item) > 1 and item[0] == '"' and item[-1] == '"':
            item = item[1:-1]
    elif isinstance(value, list | tuple) and len(value) == 2:
        item = value[index]
        if item is None:
            return None
    else:
        raise bad_field(connector, "sequence", value, origin, 'a two-item array ["<lsn>","<lsn>"]')
    return _pg_lsn(item, connector, _SEQUENCE_ITEM_NAMES[index], origin)


_PG = struct.Struct(">BQBQI")


@dataclass(frozen=True, slots=True)
class PostgresPosition(Position):
    """PostgreSQL position: ``(commit_lsn, phase, lsn, seq)``.

    Fields used:

    * ``commit_lsn``: the transaction's commit order. Taken from ``source.commit_lsn`` when
      Debezium writes it (debezium#7764); else from ``source.sequence[0]``, the commit LSN of the
      last transaction Debezium completed before this one. That value is constant within a
      transaction and strictly increases per emitted transaction, and Debezium emits transactions
      in commit order, so it orders transactions correctly even though it is the *previous*
      commit. It can be null, or older than the snapshot point, for the first transaction after
      a connector start; :class:`PositionResolver` then derives that transaction's key. Debezium
      1.2 records carry neither field (only ``lsn`` and ``txId``); the resolver derives all keys.
    * ``lsn``: the change's own WAL position, which orders records inside a transaction. It is
      never the primary key: the per-row LSN is not monotonic across interleaved transactions.
    * ``snapshot``: snapshot rows all carry the snapshot point P as ``lsn``; they get
      ``commit_lsn = lsn = P`` and ``phase = SNAPSHOT``, so they sort before every streamed
      transaction (all of which commit at or after P).

    LSNs are accepted as integers, decimal strings or ``"X/Y"`` text and printed as ``"X/Y"``.
    """

    CONNECTOR: ClassVar[str] = "postgresql"
    SOURCE_BLOCK: ClassVar[SourceBlock] = SourceBlock(
        "io.debezium.connector.postgresql.Source",
        (
            *SCHEMA_TABLE,
            SourceField("txId", "int64", optional=True),
            SourceField("lsn", "int64", optional=True),
            SourceField("xmin", "int64", optional=True),
            # Not in Debezium's schema: medallion's agent and some Debezium builds send the
            # transaction's commit LSN, the ordering key (docs/bronze.md).
            SourceField("commit_lsn", "int64", optional=True),
        ),
        emits_schema_changes=False,
    )
    DERIVES_COMMIT_ORDER: ClassVar[bool] = True
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("commit_lsn|sequence[0]", "snapshot", "lsn")

    commit_lsn: int
    """Commit-order key of the record's transaction (see the class docstring)."""
    phase: Phase
    lsn: int
    """The change's own LSN."""
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    @classmethod
    def commit_order(cls, state: Mapping[str, Any] | None) -> PgCommitOrder:
        """Return the commit-order derivation of a stream of this connector.

        Args:
            state: A previous :meth:`PgCommitOrder.state`, or None for a new stream.

        Raises:
            PositionError: ``state`` is corrupt.
        """
        return PgCommitOrder(cls, state)

    @classmethod
    def _lsn_of(cls, source: Mapping[str, Any], origin: str | None) -> int:
        lsn = source.get("lsn")
        if lsn is None:
            sequence = source.get("sequence")
            if sequence is not None:
                current = _pg_sequence(sequence, 1, cls.CONNECTOR, origin)
                if current is not None:
                    return current
            raise missing_field(cls.CONNECTOR, "lsn", origin)
        return _pg_lsn(lsn, cls.CONNECTOR, "lsn", origin)

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium PostgreSQL ``source`` block (see :meth:`Position.from_source`).

        Raises:
            PositionError: Also when a streamed record has neither ``commit_lsn`` nor a
                ``sequence`` with a non-null first item (Debezium 1.2): its commit order cannot be
                known from one record, use :class:`PositionResolver`.
        """
        c = cls.CONNECTOR
        phase = phase_of(source, origin)
        lsn = cls._lsn_of(source, origin)
        if phase is _SNAPSHOT:
            return cls._new(lsn, phase, lsn, seq)
        commit = source.get("commit_lsn")
        if commit is not None:
            return cls._new(_pg_lsn(commit, c, "commit_lsn", origin), phase, lsn, seq)
        sequence = source.get("sequence")
        if sequence is None:
            raise missing_field(
                c,
                "commit_lsn",
                origin,
                "and source.sequence is absent too: Debezium 1.2 records carry only lsn and txId, "
                "whose commit order only PositionResolver can derive from the stream",
            )
        last_commit = _pg_sequence(sequence, 0, c, origin)
        if last_commit is None:
            raise missing_field(
                c,
                "sequence[0]",
                origin,
                "Debezium had not seen a commit yet; PositionResolver derives the order",
            )
        return cls._new(last_commit, phase, lsn, seq)


install_layout(
    PostgresPosition,
    _PG,
    ("commit_lsn", "phase", "lsn", "seq"),
    {"commit_lsn": format_pg_lsn, "lsn": format_pg_lsn},
    parsers={"commit_lsn": _pg_lsn, "lsn": _pg_lsn},
)


class PgCommitOrder:
    """Commit-order keys for a PostgreSQL-family stream (a ``CommitOrder``).

    Three schemes, one per Debezium generation; a stream must not switch between them:

    * ``commit_lsn``: ``source.commit_lsn``, the real commit LSN. Used as is.
    * ``sequence``: ``source.sequence[0]``, the previous transaction's commit LSN. Used as is,
      unless it is null or below the latest snapshot point seen (the first transaction after a
      connector start or a snapshot); that transaction gets a derived key instead, so it cannot
      sort before the snapshot rows it follows.
    * ``txid`` (Debezium 1.2): no commit order in the record; every key is derived.

    A derived key is assigned when ``txId`` changes: ``max(previous key + 1, highest LSN seen,
    this record's LSN)``. Debezium emits transactions in commit order, so a strictly increasing
    counter in emission order is a commit order; bumping it to the LSNs seen keeps it at or after
    the snapshot point and near real LSN values. Each of a transaction's records ends below its
    commit LSN, so derived keys also stay below the next transaction's ``sequence[0]``.
    """

    def __init__(self, cls: type[PostgresPosition], state: Mapping[str, Any] | None) -> None:
        self.cls = cls
        state = state or {}
        c = cls.CONNECTOR
        try:
            self.scheme: str | None = state.get("scheme")
            if self.scheme is not None and self.scheme not in _SCHEME_DOC:
                raise ValueError(f"unknown scheme {self.scheme!r}")
            self.max_key = _pg_lsn(state.get("max_key", 0), c, "state.max_key", None)
            self.max_lsn = _pg_lsn(state.get("max_lsn", 0), c, "state.max_lsn", None)
            self.snapshot_lsn = _pg_lsn(state.get("snapshot_lsn", 0), c, "state.snapshot_lsn", None)
            txn = state.get("txn")
            self.txn_id: int | None = None if txn is None else parse_uint(txn[0], c, "txId", None)
            self.txn_key = 0 if txn is None else _pg_lsn(txn[1], c, "state.txn", None)
            # Insertion-ordered: the oldest derived transaction is evicted first.
            self.recent: dict[int, int] = {
                parse_uint(txid, c, "txId", None): _pg_lsn(key, c, "state.recent", None)
                for txid, key in state.get("recent", [])
            }
        except (PositionError, TypeError, ValueError, IndexError) as exc:
            raise PositionError(f"{c} position resolver state is corrupt: {exc}") from None

    def state(self) -> dict[str, Any]:
        """The derivation's state, LSNs as ``X/Y`` text."""
        return {
            "scheme": self.scheme,
            "max_key": format_pg_lsn(self.max_key),
            "max_lsn": format_pg_lsn(self.max_lsn),
            "snapshot_lsn": format_pg_lsn(self.snapshot_lsn),
            "txn": None if self.txn_id is None else [self.txn_id, format_pg_lsn(self.txn_key)],
            "recent": [[txid, format_pg_lsn(key)] for txid, key in self.recent.items()],
        }

    def position(self, source: Mapping[str, Any], origin: str | None) -> PostgresPosition:
        """The position of a data record (``seq`` 0), updating the state.

        Raises:
            PositionError: A field is missing or malformed, or the stream switched schemes.
        """
        cls = self.cls
        c = cls.CONNECTOR
        phase = phase_of(source, origin)
        lsn = cls._lsn_of(source, origin)
        if phase is _SNAPSHOT:
            self.snapshot_lsn = max(self.snapshot_lsn, lsn)
            self.max_lsn = max(self.max_lsn, lsn)
            self.max_key = max(self.max_key, lsn)
            return cls._new(lsn, phase, lsn, 0)
        key: int | None
        raw_commit = source.get("commit_lsn")
        if raw_commit is not None:
            scheme, key = "commit_lsn", _pg_lsn(raw_commit, c, "commit_lsn", origin)
        else:
            sequence = source.get("sequence")
            if sequence is not None:
                scheme, key = "sequence", _pg_sequence(sequence, 0, c, origin)
                if key is not None and key < self.snapshot_lsn:
                    key = None
            else:
                scheme, key = "txid", None
        if scheme != self.scheme and self.scheme is not None:
            raise PositionError(
                f"{c} stream switched its commit-order scheme from {self.scheme} to {scheme} "
                f"({_SCHEME_DOC[self.scheme]} -> {_SCHEME_DOC[scheme]}); positions of the "
                "two schemes do not compare, so this stream needs a new source partition "
                "or a re-snapshot",
                origin=origin,
            )
        if key is None:
            key = self._derived_key(source, lsn, origin)
        # Only now: a record rejected above (and quarantined) must not change the state.
        self.scheme = scheme
        if lsn > self.max_lsn:
            self.max_lsn = lsn
        if key > self.max_key:
            self.max_key = key
        return cls._new(key, phase, lsn, 0)

    def _derived_key(self, source: Mapping[str, Any], lsn: int, origin: str | None) -> int:
        raw_txid = source.get("txId")
        if raw_txid is None:
            raise missing_field(
                self.cls.CONNECTOR,
                "txId",
                origin,
                "needed to derive the commit order when commit_lsn and sequence[0] are absent",
            )
        txid = parse_uint(raw_txid, self.cls.CONNECTOR, "txId", origin)
        if txid == self.txn_id:
            return self.txn_key
        key = self.recent.get(txid)
        if key is None:
            key = max(self.max_key + 1, self.max_lsn, lsn)
            if key > U64_MAX:
                raise PositionError(
                    f"{self.cls.CONNECTOR} derived commit key overflowed", origin=origin
                )
            self.recent[txid] = key
            if len(self.recent) > DERIVED_TXN_MEMORY:
                del self.recent[next(iter(self.recent))]
        self.txn_id, self.txn_key = txid, key
        return key


_SCHEME_DOC = {
    "commit_lsn": "source.commit_lsn",
    "sequence": "source.sequence[0]",
    "txid": "derived from txId, Debezium 1.2",
}
