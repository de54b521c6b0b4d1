"""Totally ordered source positions: one order-preserving byte encoding per connector.

Bronze orders change events by *source commit order*, never by ``ts_ms`` (JVM or second-resolution
time) and never by PostgreSQL's per-row ``lsn`` alone (it is not monotonic across interleaved
transactions; see landscape §4.1). Every connector gets a :class:`Position` subclass whose
:meth:`~Position.encode` output sorts, as plain bytes (``memcmp``, Python ``bytes`` comparison,
Spark ``BINARY`` ordering), exactly like the source's commit order, followed by an intra-position
sequence ``seq`` that separates records sharing one source position (multi-row binlog events,
primary-key-change triples, snapshot rows, tombstones, transaction markers).

Encoding rules, shared by every connector:

* Byte 0 is :data:`FORMAT_VERSION`, so the layout can evolve; all positions written by this
  version start with the same byte and so still compare by their components.
* Numbers are fixed-width big-endian unsigned integers: memcmp order equals numeric order.
* ``phase`` (one byte, :class:`Phase`) follows the *main commit coordinate*: initial/blocking
  snapshot rows taken at snapshot point P sort before anything streamed at or after P.
  Incremental-snapshot reads are ``STREAM``: they are interleaved with the stream at their
  stream position.
* Free text (an unparsable Oracle ``rs_id``) uses a FoundationDB-tuple style escaped string:
  ``0x00`` becomes ``0x00 0xFF`` and the string ends with ``0x00 0x00``, which preserves order and
  cannot be confused with the fixed-width bytes that follow.
* ``seq`` is a ``u32`` and always the last component, so :meth:`Position.base` is the encoding
  without its last four bytes.

Layouts (``v`` = version byte, ``ph`` = phase), each defined by its connector's package in
``capture/<connector>/position.py`` on the shared machinery of :mod:`bronze.position_base`:

============  ==========================================================================
postgresql    ``v | commit_lsn u64 | ph | lsn u64 | seq u32``
yugabytedb    same as postgresql (LSNs are per replication slot)
mysql         ``v | binlog file number u32 | pos u64 | ph | row u32 | seq u32``
sqlserver     ``v | commit_lsn 10B | ph | change_lsn 10B | event_serial_no u64 | seq u32``
db2           ``v | commit_lsn 16B | ph | change_lsn 16B | seq u32``
oracle        ``v | commit_scn u64 | ph | scn u64 | rs_id | ssn u64 | seq u32``
mongodb       ``v | seconds u32 | ord u32 | ph | txnNumber u64 | seq u32``
============  ==========================================================================

Positions compare only within one source stream (one Debezium source partition: a logical
server, a MongoDB replica set, a YugabyteDB slot). Use :class:`PositionResolver` to turn a stream of
records into positions: it assigns ``seq``, gives records without a ``source`` block (tombstones,
transaction BEGIN/END) the position they belong to, and derives PostgreSQL's commit order for
Debezium 1.2 records that do not carry it.

Example:
    >>> pos = position_type("MySQL").from_source(
    ...     {"file": "mysql-bin.000003", "pos": 154, "row": 0, "snapshot": False}
    ... )
    >>> pos.encode().hex()
    '0100000003000000000000009a010000000000000000'
    >>> decode_position("mysql", pos.encode()) == pos
    True
"""

from __future__ import annotations

import difflib
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from bronze.position_base import (
    FORMAT_VERSION,
    U32_MAX,
    CommitOrder,
    Phase,
    Position,
    json_field,
    parse_uint,
    range_error,
    slot_setters,
)
from capture.db2.position import Db2Position
from capture.mongodb.position import MongoDbPosition
from capture.mysql.position import MySqlPosition
from capture.oracle.position import OraclePosition
from capture.postgresql.position import PostgresPosition
from capture.sqlserver.position import SqlServerPosition
from capture.yugabytedb.position import YugabyteDBPosition
from pipeline.errors import PositionError

__all__ = [
    "FORMAT_VERSION",
    "Phase",
    "Position",
    "ArrivalPosition",
    "ARRIVAL_FORMAT_VERSION",
    "POSITION_TYPES",
    "position_type",
    "decode_position",
    "PositionResolver",
]


# --- arrival order (sources configured with ``order.by: arrival``) -------------------------

ARRIVAL_FORMAT_VERSION = 0x41
"""Leading byte of arrival positions (``A``). Distinct from :data:`FORMAT_VERSION`, so the bytes
say by themselves that they are not a connector position (see :func:`decode_position`)."""

_ARRIVAL = struct.Struct(">BQI")


@dataclass(frozen=True, slots=True)
class ArrivalPosition(Position):
    """Arrival order: ``(arrival, seq)``, for a source configured with ``order.by: arrival``.

    ``arrival`` numbers the records of one source in the order the reader took them (files in
    name order, lines in file order), continued across restarts through the committed offset.
    It is weaker than a source position: a record Debezium redelivers gets a new, later number
    (no duplicate detection), and nothing orders records across files but the reading order
    (docs/bronze.md, "Records without a source block").
    """

    CONNECTOR: ClassVar[str] = "arrival"
    SUPPORTS_SNAPSHOT_PHASE: ClassVar[bool] = False
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ()

    arrival: int
    """The record's arrival number within its source."""
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        twin = self._new(self.arrival, self.seq)
        _ARRIVAL_SETTERS[-1](self, twin._encoded)

    @classmethod
    def _new(cls, arrival: int, seq: int) -> Self:
        try:
            encoded = _ARRIVAL.pack(ARRIVAL_FORMAT_VERSION, arrival, seq)
        except struct.error as exc:
            raise range_error(cls.CONNECTOR, exc, (arrival, seq)) from None
        self = object.__new__(cls)
        set_arrival, set_seq, set_encoded = _ARRIVAL_SETTERS
        set_arrival(self, arrival)
        set_seq(self, seq)
        set_encoded(self, encoded)
        return self

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        if len(data) != _ARRIVAL.size or data[0] != ARRIVAL_FORMAT_VERSION:
            raise PositionError(
                f"arrival position bytes {bytes(data[:1]).hex() or 'empty'}... (length "
                f"{len(data)}) are not an arrival position"
            )
        _, arrival, seq = _ARRIVAL.unpack(data)
        return cls._new(arrival, seq)

    def with_seq(self, seq: int) -> Self:
        return self._new(self.arrival, seq)

    def to_json(self) -> dict[str, Any]:
        return {"connector": self.CONNECTOR, "arrival": self.arrival, "seq": self.seq}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        if data.get("connector") not in (None, c):
            raise PositionError(f"position JSON is for connector '{data['connector']}', not '{c}'")
        return cls(
            parse_uint(json_field(data, c, "arrival"), c, "arrival", None),
            parse_uint(json_field(data, c, "seq"), c, "seq", None, U32_MAX),
        )

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Not available: an arrival position comes from the reader, never from a record."""
        raise PositionError(
            "an arrival position is assigned by the reader in arrival order; it cannot be "
            "derived from a source block",
            origin=origin,
        )


_ARRIVAL_SETTERS = slot_setters(ArrivalPosition, "arrival", "seq", "_encoded")


# --- registry --------------------------------------------------------------------------------


POSITION_TYPES: dict[str, type[Position]] = {
    "postgresql": PostgresPosition,
    "mysql": MySqlPosition,
    "sqlserver": SqlServerPosition,
    "oracle": OraclePosition,
    "mongodb": MongoDbPosition,
    "db2": Db2Position,
    "yugabytedb": YugabyteDBPosition,
}
"""Position class per connector, keyed by Debezium's ``source.connector`` lower-cased. Each
class lives in its connector's package (``capture/<connector>/position.py``)."""

_ALIASES: dict[str, str] = {
    alias: cls.CONNECTOR for cls in POSITION_TYPES.values() for alias in cls.ALIASES
}


def position_type(connector: str) -> type[Position]:
    """Return the position class of a connector.

    Args:
        connector: Debezium's ``source.connector`` value (``"postgresql"``, ``"mysql"``,
            ``"sqlserver"``, ``"oracle"``, ``"mongodb"``, ``"db2"``, ``"YugabyteDB"``), any case.

    Returns:
        The :class:`Position` subclass registered in :data:`POSITION_TYPES`.

    Raises:
        PositionError: The connector is unknown; the message suggests the closest known name.
    """
    name = connector.strip().lower()
    try:
        return POSITION_TYPES[_ALIASES.get(name, name)]
    except KeyError:
        known = sorted([*POSITION_TYPES, *_ALIASES])
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"'{close[0]}'" if close else "one of " + ", ".join(known)
        raise PositionError(
            f"unknown connector '{connector}' for source positions; did you mean {hint}?"
        ) from None


def decode_position(connector: str, data: bytes | bytearray) -> Position:
    """Decode position bytes of a connector (see :func:`position_type`).

    Arrival positions (leading byte :data:`ARRIVAL_FORMAT_VERSION`) decode as
    :class:`ArrivalPosition` whatever the connector: a source ordered by arrival keeps the real
    connector name in its rows.

    Raises:
        PositionError: Unknown connector, or the bytes are not a valid encoding for it.
    """
    if data[:1] == _ARRIVAL_LEAD:
        return ArrivalPosition.decode(data)
    return position_type(connector).decode(data)


_ARRIVAL_LEAD = bytes([ARRIVAL_FORMAT_VERSION])


# --- resolver --------------------------------------------------------------------------------

_STATE_FORMAT = 1


class PositionResolver:
    """Turns one source stream's records, in arrival order, into positions.

    One resolver per Debezium source partition (logical server, MongoDB replica set, YugabyteDB
    slot). Its :meth:`state` is saved with each committed offset and passed back after a restart,
    so sequence numbers and derived keys continue exactly as if the reader had never stopped.

    Sequence numbers: a data record whose :meth:`Position.base` equals the previous record's gets
    the previous ``seq + 1``, any other gets 0. Records without a ``source`` block inherit the
    previous position with ``seq + 1`` (:meth:`for_control`).

    Redelivery (Debezium is at-least-once): a record whose base is *lower* than the previous one
    is not an error. Its ``seq`` restarts at 0, so a redelivered record gets byte-for-byte the
    position it got the first time, provided it was then also the first record at its base or
    follows the redelivered records it followed then. Limitation: if redelivery restarts inside
    the group of records that share the last record's base (a YugabyteDB ``HYBRID_TIME``
    transaction, a MySQL primary-key change resent after it was committed), the resent records
    continue that group's numbering and get new, higher positions. They repeat the same changes in
    the same order, so applying them again is idempotent, but bronze keeps them as extra rows.

    PostgreSQL and YugabyteDB (``DERIVES_COMMIT_ORDER``): the commit-order key comes from
    ``source.commit_lsn``, else ``source.sequence[0]``, else (Debezium 1.2, only ``lsn`` and
    ``txId``) it is derived from the stream. The per-row LSN cannot be used: it is not monotonic
    across interleaved transactions, while Debezium *emits* transactions in commit order. So a new
    key is taken whenever ``txId`` changes, ``max(previous key + 1, highest LSN seen, this
    record's LSN)``, and every record of that transaction uses it. The key is synthetic but
    deterministic for the same stream, and it is carried in :meth:`state`. The last
    :data:`~capture.postgresql.position.DERIVED_TXN_MEMORY` derived transactions are remembered
    by ``txId``, so a redelivered transaction gets its original key back; one redelivered from
    further back would get a new, higher key (a wrongly *late* position), so keep that window
    above the redelivery span. A stream that switches between the ``commit_lsn``, ``sequence``
    and derived schemes raises :class:`PositionError` naming both.

    Args:
        connector: Debezium connector name, any case (see :func:`position_type`).
        state: A previous :meth:`state`, or None for a new stream.

    Raises:
        PositionError: Unknown connector, or a state written for another connector or format.
    """

    __slots__ = ("_type", "_connector_seen", "_last", "_last_base", "_commit_order")

    def __init__(self, connector: str, state: Mapping[str, Any] | None = None) -> None:
        self._type = position_type(connector)
        self._connector_seen: object = None
        self._last: Position | None = None
        self._last_base: bytes | None = None
        commit_order_state: Mapping[str, Any] | None = None
        if state is not None:
            if state.get("format") != _STATE_FORMAT:
                raise PositionError(
                    f"position resolver state has format {state.get('format')!r}, "
                    f"this version reads {_STATE_FORMAT}"
                )
            named = position_type(str(state.get("connector", ""))).CONNECTOR
            if named != self._type.CONNECTOR:
                raise PositionError(
                    f"position resolver state is for connector '{named}', not "
                    f"'{self._type.CONNECTOR}'"
                )
            last = state.get("last")
            if last is not None:
                self._last = self._type.from_json(last)
                self._last_base = self._last.base()
            commit_order_state = state.get("commit_order")
        self._commit_order: CommitOrder | None = None
        if self._type.DERIVES_COMMIT_ORDER:
            self._commit_order = self._type.commit_order(commit_order_state)

    @property
    def connector(self) -> str:
        """The registry key of this stream's connector (``"postgresql"``, ``"mysql"``, ...)."""
        return self._type.CONNECTOR

    @property
    def last(self) -> Position | None:
        """The last position handed out, or None before the first data record."""
        return self._last

    def for_data(self, source: Mapping[str, Any], *, origin: str | None = None) -> Position:
        """Return the position of a change or data event.

        Args:
            source: The event's Debezium ``source`` block.
            origin: Where the record came from, for error messages.

        Returns:
            Its position, with ``seq`` numbered as described in the class docstring.

        Raises:
            PositionError: A field is missing or malformed, the record names another connector,
                or a PostgreSQL stream switched commit-order schemes.
        """
        named = source.get("connector")
        if named is not None and named != self._connector_seen:
            if position_type(str(named)) is not self._type:
                raise PositionError(
                    f"record from connector '{named}' in a {self._type.CONNECTOR} stream",
                    origin=origin,
                )
            self._connector_seen = named
        if self._commit_order is not None:
            position: Position = self._commit_order.position(source, origin)
        else:
            position = self._type.from_source(source, origin=origin)
        base = position.base()
        if base == self._last_base and self._last is not None:
            position = position.with_seq(self._last.seq + 1)
        self._last = position
        self._last_base = base
        return position

    def for_control(self) -> Position:
        """Return the position of a record without a ``source`` block.

        Tombstones, transaction BEGIN/END markers and source-less heartbeats inherit the last
        position with ``seq + 1``: a tombstone sorts right after its delete, END after its
        transaction's events, BEGIN before the next transaction's events.

        Raises:
            PositionError: No data record has been seen yet, so there is nothing to inherit.
        """
        last = self._last
        if last is None:
            raise PositionError(
                f"no position yet in this {self._type.CONNECTOR} stream: a record without a "
                "source block (tombstone, transaction marker, heartbeat) came before any data "
                "record, so there is no position to inherit"
            )
        position = last.with_seq(last.seq + 1)
        self._last = position
        return position

    def state(self) -> dict[str, Any]:
        """Return the JSON-serialisable state to save with the committed offset."""
        state: dict[str, Any] = {
            "format": _STATE_FORMAT,
            "connector": self._type.CONNECTOR,
            "last": None if self._last is None else self._last.to_json(),
        }
        if self._commit_order is not None:
            state["commit_order"] = self._commit_order.state()
        return state
