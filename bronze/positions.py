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

Layouts (``v`` = version byte, ``ph`` = phase):

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
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import IntEnum
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple, Self

from pipeline.errors import PositionError

__all__ = [
    "FORMAT_VERSION",
    "Phase",
    "Position",
    "PostgresPosition",
    "YugabyteDBPosition",
    "MySqlPosition",
    "SqlServerPosition",
    "Db2Position",
    "RsId",
    "OraclePosition",
    "MongoDbPosition",
    "ArrivalPosition",
    "ARRIVAL_FORMAT_VERSION",
    "POSITION_TYPES",
    "position_type",
    "decode_position",
    "PositionResolver",
    "format_pg_lsn",
]

FORMAT_VERSION = 1
"""Leading byte of every encoding written by this module."""

DERIVED_TXN_MEMORY = 4096
"""How many recent transactions a :class:`PositionResolver` remembers with their derived
PostgreSQL commit-order key, so a redelivered transaction gets its original key back."""

_U64_MAX = (1 << 64) - 1
_U32_MAX = (1 << 32) - 1
_SEQ = struct.Struct(">I")
_SEQ_WIDTH = _SEQ.size


class Phase(IntEnum):
    """Whether a record was read by an initial/blocking snapshot or streamed from the log."""

    SNAPSHOT = 0
    """An initial or blocking snapshot row (``source.snapshot`` true/first/last/...)."""
    STREAM = 1
    """A streamed change, or an incremental-snapshot read (interleaved with the stream)."""


# Debezium writes ``source.snapshot`` as a boolean (1.x docs), as the enum strings of
# SnapshotRecord (true/first/last/false, with the *_in_data_collection variants since 2.x), or
# leaves it out when false. "incremental" reads are emitted inside the stream at the stream's
# position, so they order like streamed records.
_PHASE_BY_MARKER: dict[object, Phase] = {
    None: Phase.STREAM,
    False: Phase.STREAM,
    "false": Phase.STREAM,
    "incremental": Phase.STREAM,
    True: Phase.SNAPSHOT,
    "true": Phase.SNAPSHOT,
    "first": Phase.SNAPSHOT,
    "last": Phase.SNAPSHOT,
    "first_in_data_collection": Phase.SNAPSHOT,
    "last_in_data_collection": Phase.SNAPSHOT,
}
_PHASE_NAMES = {Phase.SNAPSHOT: "snapshot", Phase.STREAM: "stream"}
_PHASE_BY_NAME = {name: phase for phase, name in _PHASE_NAMES.items()}


def _phase_of(source: Mapping[str, Any], origin: str | None) -> Phase:
    marker = source.get("snapshot")
    try:
        return _PHASE_BY_MARKER[marker]
    except (KeyError, TypeError):
        if isinstance(marker, str) and marker.strip().lower() in _PHASE_BY_MARKER:
            return _PHASE_BY_MARKER[marker.strip().lower()]
        raise PositionError(
            f"source.snapshot has unknown value {marker!r}; expected a boolean, null or one of "
            "true/first/last/false/incremental/first_in_data_collection/last_in_data_collection",
            origin=origin,
        ) from None


def _is_incremental(source: Mapping[str, Any]) -> bool:
    return source.get("snapshot") == "incremental"


def _missing(connector: str, name: str, origin: str | None, why: str = "") -> PositionError:
    detail = f" ({why})" if why else ""
    return PositionError(f"{connector} source.{name} is missing or null{detail}", origin=origin)


def _bad(connector: str, name: str, value: object, origin: str | None, want: str) -> PositionError:
    return PositionError(f"{connector} source.{name} = {value!r} is not {want}", origin=origin)


def _uint(
    value: object, connector: str, name: str, origin: str | None, limit: int = _U64_MAX
) -> int:
    """An unsigned integer field; Debezium writes some int64 fields as JSON strings."""
    if type(value) is int:
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = int(value)
    elif value is None:
        raise _missing(connector, name, origin)
    else:
        raise _bad(connector, name, value, origin, "an unsigned integer")
    if not 0 <= number <= limit:
        raise _bad(connector, name, value, origin, f"an unsigned integer <= {limit}")
    return number


def _json_field(data: Mapping[str, Any], connector: str, name: str) -> Any:
    try:
        value = data[name]
    except KeyError:
        raise PositionError(f"{connector} position JSON has no '{name}'") from None
    return value


def _json_phase(data: Mapping[str, Any], connector: str) -> Phase:
    name = _json_field(data, connector, "phase")
    try:
        return _PHASE_BY_NAME[name]
    except (KeyError, TypeError):
        raise PositionError(
            f"{connector} position JSON has phase {name!r}; expected 'snapshot' or 'stream'"
        ) from None


def _check_json_connector(data: Mapping[str, Any], expected: str) -> None:
    named = data.get("connector")
    if named is not None and position_type(str(named)).CONNECTOR != expected:
        raise PositionError(f"position JSON is for connector '{named}', not '{expected}'")


def _range_error(connector: str, exc: Exception, components: tuple[Any, ...]) -> PositionError:
    return PositionError(f"{connector} position component out of range ({exc}): {components!r}")


def _phase_byte(value: int, connector: str) -> Phase:
    try:
        return _PHASE_BY_VALUE[value]
    except IndexError:
        raise PositionError(f"{connector} position bytes have unknown phase {value}") from None


_PHASE_BY_VALUE = (Phase.SNAPSHOT, Phase.STREAM)
_SNAPSHOT = Phase.SNAPSHOT
_STREAM = Phase.STREAM

_Setter = Callable[[Any, Any], None]


def _slot_setters(cls: type, *names: str) -> tuple[_Setter, ...]:
    """Member-descriptor setters of a slotted class's fields.

    The internal ``_new`` constructors set fields through these instead of the frozen dataclass
    ``__init__`` (``object.__setattr__`` per field), which halves construction time on the
    landing path. They are used only with components that were already parsed and range-checked.
    Each class unrolls its own ``_new`` on purpose: one generic constructor looping over the
    setters measured 2.98 us instead of 2.18 us per resolved PostgreSQL position.
    """
    return tuple(cls.__dict__[name].__set__ for name in names)


def _check_version(data: bytes | bytearray, connector: str, size: int | None = None) -> None:
    if not data or data[0] != FORMAT_VERSION:
        head = data[:1].hex() or "empty"
        raise PositionError(
            f"{connector} position bytes start with {head}, not format version {FORMAT_VERSION}"
        )
    if size is not None and len(data) != size:
        raise PositionError(
            f"{connector} position bytes have length {len(data)}, expected {size} "
            "(wrong connector or corrupt value?)"
        )


# --- the ABC ----------------------------------------------------------------------------------


class Position(ABC):
    """A point in one source's commit order plus an intra-position sequence.

    Subclasses are frozen, slotted dataclasses, one per Debezium connector. They are created from
    a Debezium ``source`` block (:meth:`from_source`), from their bytes (:meth:`decode`) or from
    their JSON form (:meth:`from_json`); they validate their components on construction and cache
    their encoding, so :meth:`encode` and :meth:`base` are free.

    To add a connector: subclass as ``@dataclass(frozen=True, slots=True)``, set the class flags,
    declare the components as fields in encoding order ending with ``seq: int = 0`` (plus the
    ``_encoded`` field of the existing classes), write a ``_new`` classmethod that packs them with
    a precompiled :class:`struct.Struct` and sets the slots (the landing path uses it instead of
    the slower frozen ``__init__``), let ``__post_init__`` validate and reuse it, implement the
    abstract methods, and register the class in :data:`POSITION_TYPES`.
    """

    __slots__ = ()

    CONNECTOR: ClassVar[str]
    """Registry key: Debezium's ``source.connector`` value, lower-cased."""

    SUPPORTS_SNAPSHOT_PHASE: ClassVar[bool] = True
    """The layout has a ``phase`` byte after the main commit coordinate, so initial-snapshot rows
    taken at snapshot point P sort before everything streamed at or after P."""

    DERIVES_COMMIT_ORDER: ClassVar[bool] = False
    """Some Debezium versions of this connector do not put the transaction's commit order into
    each record (PostgreSQL 1.2: only ``lsn`` and ``txId``). :class:`PositionResolver` then derives
    it from the stream, and :meth:`from_source` alone cannot build every position."""

    ORDER_FIELDS: ClassVar[tuple[str, ...]]
    """The ``source`` fields that decide the order, most significant first (documentation and
    error messages; the class docstring says why each one is used)."""

    phase: Phase
    seq: int
    _encoded: bytes

    def encode(self) -> bytes:
        """Return the order-preserving encoding (format version first, ``seq`` last).

        Returns:
            Bytes whose memcmp order equals the source commit order of the positions.
        """
        return self._encoded

    def base(self) -> bytes:
        """Return the encoding without ``seq``.

        Two records with equal ``base()`` share one source position; :class:`PositionResolver`
        numbers them with ``seq``.
        """
        return self._encoded[:-_SEQ_WIDTH]

    @classmethod
    @abstractmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        """Rebuild a position from :meth:`encode` output (exact inverse).

        Args:
            data: Bytes written by :meth:`encode` of this class.

        Returns:
            The equal position.

        Raises:
            PositionError: The bytes are not a valid encoding of this connector's positions.
        """

    @abstractmethod
    def with_seq(self, seq: int) -> Self:
        """Return the same source position with another intra-position sequence.

        Args:
            seq: The new sequence, ``0 <= seq < 2**32``.

        Raises:
            PositionError: ``seq`` is out of range.
        """

    @abstractmethod
    def to_json(self) -> dict[str, Any]:
        """Return a human-readable, JSON-serialisable form (LSNs as Debezium prints them).

        :meth:`from_json` is its exact inverse.
        """

    @classmethod
    @abstractmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild a position from :meth:`to_json` output.

        Args:
            data: A mapping as produced by :meth:`to_json`.

        Raises:
            PositionError: A field is missing or malformed, or the JSON names another connector.
        """

    @classmethod
    @abstractmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build the position of one record from its Debezium ``source`` block.

        Args:
            source: The ``source`` struct of a Debezium change event of this connector.
            seq: The intra-position sequence to give it.
            origin: Where the record came from, for error messages.

        Returns:
            The record's position.

        Raises:
            PositionError: A field needed for ordering is missing or malformed (the message names
                it), or the connector version does not carry enough to order this record alone
                (use :class:`PositionResolver`).
        """

    def _check_phase(self) -> None:
        if self.phase is not _SNAPSHOT and self.phase is not _STREAM:
            raise PositionError(f"{self.CONNECTOR} phase must be a Phase, not {self.phase!r}")


# --- PostgreSQL and YugabyteDB --------------------------------------------------------------


def format_pg_lsn(value: int) -> str:
    """Format a 64-bit LSN the way PostgreSQL prints ``pg_lsn`` (``"0/16B3748"``)."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def _pg_lsn(value: object, connector: str, name: str, origin: str | None) -> int:
    """Parse an LSN given as an int, a decimal string or PostgreSQL's ``"X/Y"`` text."""
    if type(value) is int:
        if 0 <= value <= _U64_MAX:
            return value
    elif isinstance(value, str):
        hi, slash, lo = value.partition("/")
        try:
            if slash:
                high, low = int(hi, 16), int(lo, 16)
                if 0 <= high <= _U32_MAX and 0 <= low <= _U32_MAX:
                    return (high << 32) | low
            elif value.strip().isdigit():
                # Debezium's offsets and JSON write LSNs as decimal int64, sometimes quoted.
                number = int(value)
                if number <= _U64_MAX:
                    return number
        except ValueError:
            pass
    elif value is None:
        raise _missing(connector, name, origin)
    elif isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _U64_MAX:
        return int(value)
    raise _bad(connector, name, value, origin, "an LSN (unsigned int64 or 'X/Y' text)")


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
            raise _bad(connector, "sequence", value, origin, 'a JSON array ["<lsn>","<lsn>"]')
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
        raise _bad(connector, "sequence", value, origin, 'a two-item array ["<lsn>","<lsn>"]')
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
    DERIVES_COMMIT_ORDER: ClassVar[bool] = True
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("commit_lsn|sequence[0]", "snapshot", "lsn")

    commit_lsn: int
    """Commit-order key of the record's transaction (see the class docstring)."""
    phase: Phase
    lsn: int
    """The change's own LSN."""
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_phase()
        _PG_SETTERS[-1](self, self._new(self.commit_lsn, self.phase, self.lsn, self.seq)._encoded)

    @classmethod
    def _new(cls, commit_lsn: int, phase: Phase, lsn: int, seq: int) -> Self:
        try:
            encoded = _PG.pack(FORMAT_VERSION, commit_lsn, phase, lsn, seq)
        except struct.error as exc:
            raise _range_error(cls.CONNECTOR, exc, (commit_lsn, phase, lsn, seq)) from None
        self = object.__new__(cls)
        set_commit_lsn, set_phase, set_lsn, set_seq, set_encoded = _PG_SETTERS
        set_commit_lsn(self, commit_lsn)
        set_phase(self, phase)
        set_lsn(self, lsn)
        set_seq(self, seq)
        set_encoded(self, encoded)
        return self

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        _check_version(data, cls.CONNECTOR, _PG.size)
        _, commit_lsn, phase, lsn, seq = _PG.unpack(data)
        return cls._new(commit_lsn, _phase_byte(phase, cls.CONNECTOR), lsn, seq)

    def with_seq(self, seq: int) -> Self:
        return self._new(self.commit_lsn, self.phase, self.lsn, seq)

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.CONNECTOR,
            "commit_lsn": format_pg_lsn(self.commit_lsn),
            "phase": _PHASE_NAMES[self.phase],
            "lsn": format_pg_lsn(self.lsn),
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        _check_json_connector(data, c)
        return cls(
            _pg_lsn(_json_field(data, c, "commit_lsn"), c, "commit_lsn", None),
            _json_phase(data, c),
            _pg_lsn(_json_field(data, c, "lsn"), c, "lsn", None),
            _uint(_json_field(data, c, "seq"), c, "seq", None, _U32_MAX),
        )

    @classmethod
    def _lsn_of(cls, source: Mapping[str, Any], origin: str | None) -> int:
        lsn = source.get("lsn")
        if lsn is None:
            sequence = source.get("sequence")
            if sequence is not None:
                current = _pg_sequence(sequence, 1, cls.CONNECTOR, origin)
                if current is not None:
                    return current
            raise _missing(cls.CONNECTOR, "lsn", origin)
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
        phase = _phase_of(source, origin)
        lsn = cls._lsn_of(source, origin)
        if phase is _SNAPSHOT:
            return cls._new(lsn, phase, lsn, seq)
        commit = source.get("commit_lsn")
        if commit is not None:
            return cls._new(_pg_lsn(commit, c, "commit_lsn", origin), phase, lsn, seq)
        sequence = source.get("sequence")
        if sequence is None:
            raise _missing(
                c,
                "commit_lsn",
                origin,
                "and source.sequence is absent too: Debezium 1.2 records carry only lsn and txId, "
                "whose commit order only PositionResolver can derive from the stream",
            )
        last_commit = _pg_sequence(sequence, 0, c, origin)
        if last_commit is None:
            raise _missing(
                c,
                "sequence[0]",
                origin,
                "Debezium had not seen a commit yet; PositionResolver derives the order",
            )
        return cls._new(last_commit, phase, lsn, seq)


_PG_SETTERS = _slot_setters(PostgresPosition, "commit_lsn", "phase", "lsn", "seq", "_encoded")


@dataclass(frozen=True, slots=True)
class YugabyteDBPosition(PostgresPosition):
    """YugabyteDB position: the PostgreSQL layout ``(commit_lsn, phase, lsn, seq)``.

    YugabyteDB's logical replication assigns LSNs per replication slot in commit-time order, and
    writes the same ``source`` fields as PostgreSQL (``lsn``, ``txId``, ``sequence``), so the
    PostgreSQL rules apply unchanged. With the ``HYBRID_TIME`` LSN type every record of a
    transaction carries the commit LSN as ``lsn``; such records share one base position and are
    ordered by ``seq`` (arrival order). LSNs of different slots must never be compared: keep one
    stream, and one :class:`PositionResolver`, per slot.
    """

    CONNECTOR: ClassVar[str] = "yugabytedb"


# --- MySQL -----------------------------------------------------------------------------------


@lru_cache(maxsize=1024)
def _binlog_number(name: str) -> int:
    # Cached: a binlog file holds many events, and rotations are rare.
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or not (extension.isascii() and extension.isdigit()):
        raise ValueError(name)
    number = int(extension)
    if number > _U32_MAX:
        raise ValueError(name)
    return number


_MYSQL = struct.Struct(">BIQBII")


@dataclass(frozen=True, slots=True)
class MySqlPosition(Position):
    """MySQL position: ``(binlog file number, pos, phase, row, seq)``.

    Fields used:

    * ``file``: only the numeric extension (``mysql-bin.000003`` -> 3) orders; file names are
      never compared as strings (apache/hudi#9475: ``000009`` vs ``000010`` is fine as text, but
      ``999999`` vs ``1000000`` is not). The name itself is kept for humans in :meth:`to_json`.
    * ``pos``: the byte position of the binlog event inside the file (events are written in
      commit order, so this is commit order).
    * ``row``: the row index inside a multi-row binlog event.
    * ``snapshot``: snapshot rows carry the binlog position read under the snapshot lock;
      streaming starts exactly there, so ``phase`` after ``pos`` puts them first.
    * ``gtid``: kept in :meth:`to_json` for resuming and failover, but not used for ordering (GTID
      sets are not totally ordered across servers). Like ``file``, it is not in the bytes, and it
      takes no part in equality.
    """

    CONNECTOR: ClassVar[str] = "mysql"
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("file", "pos", "snapshot", "row")

    file_number: int
    """The binlog file's sequence number (its numeric extension)."""
    pos: int
    phase: Phase
    row: int
    seq: int = 0
    file: str | None = field(default=None, compare=False)
    """The binlog file name, informational (not encoded)."""
    gtid: str | None = field(default=None, compare=False)
    """The event's GTID, informational (not encoded)."""
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_phase()
        twin = self._new(self.file_number, self.pos, self.phase, self.row, self.seq, None, None)
        _MYSQL_SETTERS[-1](self, twin._encoded)

    @classmethod
    def _new(
        cls,
        file_number: int,
        pos: int,
        phase: Phase,
        row: int,
        seq: int,
        file: str | None,
        gtid: str | None,
    ) -> Self:
        try:
            encoded = _MYSQL.pack(FORMAT_VERSION, file_number, pos, phase, row, seq)
        except struct.error as exc:
            raise _range_error(cls.CONNECTOR, exc, (file_number, pos, phase, row, seq)) from None
        self = object.__new__(cls)
        set_number, set_pos, set_phase, set_row, set_seq, set_file, set_gtid, set_encoded = (
            _MYSQL_SETTERS
        )
        set_number(self, file_number)
        set_pos(self, pos)
        set_phase(self, phase)
        set_row(self, row)
        set_seq(self, seq)
        set_file(self, file)
        set_gtid(self, gtid)
        set_encoded(self, encoded)
        return self

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        _check_version(data, cls.CONNECTOR, _MYSQL.size)
        _, file_number, pos, phase, row, seq = _MYSQL.unpack(data)
        return cls._new(file_number, pos, _phase_byte(phase, cls.CONNECTOR), row, seq, None, None)

    def with_seq(self, seq: int) -> Self:
        return self._new(
            self.file_number, self.pos, self.phase, self.row, seq, self.file, self.gtid
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.CONNECTOR,
            "file": self.file,
            "file_number": self.file_number,
            "pos": self.pos,
            "phase": _PHASE_NAMES[self.phase],
            "row": self.row,
            "seq": self.seq,
            "gtid": self.gtid,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        _check_json_connector(data, c)
        name = data.get("file")
        number = data.get("file_number")
        if number is None:
            if name is None:
                raise PositionError(f"{c} position JSON has neither 'file_number' nor 'file'")
            number = cls._file_number(name, None)
        return cls(
            _uint(number, c, "file_number", None, _U32_MAX),
            _uint(_json_field(data, c, "pos"), c, "pos", None),
            _json_phase(data, c),
            _uint(_json_field(data, c, "row"), c, "row", None, _U32_MAX),
            _uint(_json_field(data, c, "seq"), c, "seq", None, _U32_MAX),
            name,
            data.get("gtid"),
        )

    @classmethod
    def _file_number(cls, name: object, origin: str | None) -> int:
        if name is None:
            raise _missing(cls.CONNECTOR, "file", origin)
        try:
            return _binlog_number(name) if isinstance(name, str) else _binlog_number(str(name))
        except ValueError:
            raise _bad(
                cls.CONNECTOR, "file", name, origin, "a binlog file name like 'mysql-bin.000003'"
            ) from None

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium MySQL ``source`` block (see :meth:`Position.from_source`)."""
        c = cls.CONNECTOR
        name = source.get("file")
        gtid = source.get("gtid")
        return cls._new(
            cls._file_number(name, origin),
            _uint(source.get("pos"), c, "pos", origin),
            _phase_of(source, origin),
            _uint(source.get("row"), c, "row", origin, _U32_MAX),
            seq,
            name,
            None if gtid is None else str(gtid),
        )


_MYSQL_SETTERS = _slot_setters(
    MySqlPosition, "file_number", "pos", "phase", "row", "seq", "file", "gtid", "_encoded"
)


# --- SQL Server ------------------------------------------------------------------------------


def _mssql_lsn(value: object, name: str, origin: str | None) -> bytes:
    """Parse ``"00000027:00000758:0003"`` (4:4:2 bytes, hex) into 10 big-endian bytes."""
    if isinstance(value, str):
        digits = value.strip().replace(":", "")
        if digits[:2] in ("0x", "0X"):
            digits = digits[2:]
        if len(digits) == 20:
            try:
                return bytes.fromhex(digits)
            except ValueError:
                pass
    elif isinstance(value, bytes | bytearray) and len(value) == 10:
        return bytes(value)
    elif value is None:
        raise _missing("sqlserver", name, origin)
    raise _bad("sqlserver", name, value, origin, "an LSN like '00000027:00000758:0003'")


def _format_mssql_lsn(lsn: bytes) -> str:
    digits = lsn.hex()
    return f"{digits[:8]}:{digits[8:16]}:{digits[16:]}"


_MSSQL_ZERO_LSN = bytes(10)
_MSSQL = struct.Struct(">B10sB10sQI")


@dataclass(frozen=True, slots=True)
class SqlServerPosition(Position):
    """SQL Server position: ``(commit_lsn, phase, change_lsn, event_serial_no, seq)``.

    Fields used:

    * ``commit_lsn`` (``__$start_lsn``): the transaction's commit LSN; Debezium itself sorts
      change rows by commit LSN, then change LSN. LSNs are 10 bytes (``"00000027:00000758:0003"``
      = 4:4:2 bytes in hex) and compare bytewise, which is what the encoding does.
    * ``change_lsn`` (``__$seqval``): orders changes inside a transaction. Null for snapshot rows,
      encoded as zeros.
    * ``event_serial_no``: separates events with equal LSNs (an update is 2; a primary-key change
      gives delete 1 and create 2). Null means 0.
    * ``snapshot``: snapshot rows carry the max LSN read under the snapshot lock as
      ``commit_lsn``; streaming continues after it.

    If ``commit_lsn`` is null on a snapshot or incremental-snapshot row, ``change_lsn`` is used.
    """

    CONNECTOR: ClassVar[str] = "sqlserver"
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = (
        "commit_lsn",
        "snapshot",
        "change_lsn",
        "event_serial_no",
    )

    commit_lsn: bytes
    """10-byte commit LSN."""
    phase: Phase
    change_lsn: bytes
    """10-byte change LSN; zeros when Debezium wrote null."""
    event_serial_no: int
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_phase()
        if not (
            type(self.commit_lsn) is bytes
            and len(self.commit_lsn) == 10
            and type(self.change_lsn) is bytes
            and len(self.change_lsn) == 10
        ):
            # struct's "10s" would silently pad or cut a wrong-sized value.
            raise PositionError(f"{self.CONNECTOR} LSNs must be 10 bytes: {self!r}")
        twin = self._new(
            self.commit_lsn, self.phase, self.change_lsn, self.event_serial_no, self.seq
        )
        _MSSQL_SETTERS[-1](self, twin._encoded)

    @classmethod
    def _new(
        cls, commit_lsn: bytes, phase: Phase, change_lsn: bytes, event_serial_no: int, seq: int
    ) -> Self:
        try:
            encoded = _MSSQL.pack(
                FORMAT_VERSION, commit_lsn, phase, change_lsn, event_serial_no, seq
            )
        except struct.error as exc:
            components = (commit_lsn, phase, change_lsn, event_serial_no, seq)
            raise _range_error(cls.CONNECTOR, exc, components) from None
        self = object.__new__(cls)
        set_commit, set_phase, set_change, set_serial, set_seq, set_encoded = _MSSQL_SETTERS
        set_commit(self, commit_lsn)
        set_phase(self, phase)
        set_change(self, change_lsn)
        set_serial(self, event_serial_no)
        set_seq(self, seq)
        set_encoded(self, encoded)
        return self

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        _check_version(data, cls.CONNECTOR, _MSSQL.size)
        _, commit_lsn, phase, change_lsn, serial, seq = _MSSQL.unpack(data)
        return cls._new(commit_lsn, _phase_byte(phase, cls.CONNECTOR), change_lsn, serial, seq)

    def with_seq(self, seq: int) -> Self:
        return self._new(self.commit_lsn, self.phase, self.change_lsn, self.event_serial_no, seq)

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.CONNECTOR,
            "commit_lsn": _format_mssql_lsn(self.commit_lsn),
            "phase": _PHASE_NAMES[self.phase],
            "change_lsn": (
                None if self.change_lsn == _MSSQL_ZERO_LSN else _format_mssql_lsn(self.change_lsn)
            ),
            "event_serial_no": self.event_serial_no,
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        _check_json_connector(data, c)
        change = data.get("change_lsn")
        return cls(
            _mssql_lsn(_json_field(data, c, "commit_lsn"), "commit_lsn", None),
            _json_phase(data, c),
            _MSSQL_ZERO_LSN if change is None else _mssql_lsn(change, "change_lsn", None),
            _uint(_json_field(data, c, "event_serial_no"), c, "event_serial_no", None),
            _uint(_json_field(data, c, "seq"), c, "seq", None, _U32_MAX),
        )

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium SQL Server ``source`` block (see :meth:`Position.from_source`)."""
        phase = _phase_of(source, origin)
        change = source.get("change_lsn")
        change_lsn = _MSSQL_ZERO_LSN if change is None else _mssql_lsn(change, "change_lsn", origin)
        commit = source.get("commit_lsn")
        if commit is not None:
            commit_lsn = _mssql_lsn(commit, "commit_lsn", origin)
        elif change is not None and (phase is _SNAPSHOT or _is_incremental(source)):
            commit_lsn = change_lsn
        else:
            raise _missing(cls.CONNECTOR, "commit_lsn", origin)
        serial = source.get("event_serial_no")
        return cls._new(
            commit_lsn,
            phase,
            change_lsn,
            0 if serial is None else _uint(serial, cls.CONNECTOR, "event_serial_no", origin),
            seq,
        )


_MSSQL_SETTERS = _slot_setters(
    SqlServerPosition, "commit_lsn", "phase", "change_lsn", "event_serial_no", "seq", "_encoded"
)


# --- Db2 -------------------------------------------------------------------------------------


def _db2_lsn(value: object, name: str, origin: str | None) -> bytes | None:
    """Parse a Db2 LSN (hex, colons optional, e.g. ``"00000000:0000150f:0000000000048fca"``).

    Returns 16 big-endian bytes, left-padded (shorter LSNs of older Db2 releases compare as the
    same numbers), or None for null/``"NULL"`` (Debezium's text for an unavailable LSN).
    """
    if value is None:
        return None
    if isinstance(value, str):
        digits = value.strip().replace(":", "")
        if digits == "NULL":
            return None
        if digits[:2] in ("0x", "0X"):
            digits = digits[2:]
        try:
            number = int(digits, 16)
        except ValueError:
            number = -1
        # int() also takes "_" separators and signs; an LSN has neither.
        if 0 <= number and number.bit_length() <= 128 and "_" not in digits:
            return number.to_bytes(16, "big")
    elif isinstance(value, bytes | bytearray) and len(value) <= 16:
        return bytes(value).rjust(16, b"\x00")
    raise _bad("db2", name, value, origin, "a Db2 LSN of at most 16 bytes in hex")


def _format_db2_lsn(lsn: bytes) -> str:
    # Debezium's Db2 Lsn.toString: colons after bytes 4 and 8.
    digits = lsn.hex()
    return f"{digits[:8]}:{digits[8:16]}:{digits[16:]}"


_DB2 = struct.Struct(">B16sB16sI")


@dataclass(frozen=True, slots=True)
class Db2Position(Position):
    """Db2 position: ``(commit_lsn, phase, change_lsn, seq)``.

    Fields used:

    * ``commit_lsn``: the transaction's commit LSN; Debezium reads the ASN change-data tables
      ordered by commit LSN, then change LSN, exactly like SQL Server. Db2 LSNs are hex strings
      with optional colons; they are normalised to 16 bytes, left-padded, so they compare as
      numbers.
    * ``change_lsn``: orders changes inside a transaction.
    * ``snapshot``: Debezium omits ``commit_lsn`` on snapshot rows; they all carry the snapshot's
      LSN as ``change_lsn``, which then also serves as the commit coordinate (likewise for
      incremental-snapshot rows without ``commit_lsn``).

    Db2 has no ``event_serial_no``; records sharing both LSNs are ordered by ``seq``.
    """

    CONNECTOR: ClassVar[str] = "db2"
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("commit_lsn", "snapshot", "change_lsn")

    commit_lsn: bytes
    """16-byte commit LSN."""
    phase: Phase
    change_lsn: bytes
    """16-byte change LSN."""
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_phase()
        if not (
            type(self.commit_lsn) is bytes
            and len(self.commit_lsn) == 16
            and type(self.change_lsn) is bytes
            and len(self.change_lsn) == 16
        ):
            raise PositionError(f"{self.CONNECTOR} LSNs must be 16 bytes: {self!r}")
        twin = self._new(self.commit_lsn, self.phase, self.change_lsn, self.seq)
        _DB2_SETTERS[-1](self, twin._encoded)

    @classmethod
    def _new(cls, commit_lsn: bytes, phase: Phase, change_lsn: bytes, seq: int) -> Self:
        try:
            encoded = _DB2.pack(FORMAT_VERSION, commit_lsn, phase, change_lsn, seq)
        except struct.error as exc:
            raise _range_error(cls.CONNECTOR, exc, (commit_lsn, phase, change_lsn, seq)) from None
        self = object.__new__(cls)
        set_commit, set_phase, set_change, set_seq, set_encoded = _DB2_SETTERS
        set_commit(self, commit_lsn)
        set_phase(self, phase)
        set_change(self, change_lsn)
        set_seq(self, seq)
        set_encoded(self, encoded)
        return self

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        _check_version(data, cls.CONNECTOR, _DB2.size)
        _, commit_lsn, phase, change_lsn, seq = _DB2.unpack(data)
        return cls._new(commit_lsn, _phase_byte(phase, cls.CONNECTOR), change_lsn, seq)

    def with_seq(self, seq: int) -> Self:
        return self._new(self.commit_lsn, self.phase, self.change_lsn, seq)

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.CONNECTOR,
            "commit_lsn": _format_db2_lsn(self.commit_lsn),
            "phase": _PHASE_NAMES[self.phase],
            "change_lsn": _format_db2_lsn(self.change_lsn),
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        _check_json_connector(data, c)
        commit = _db2_lsn(_json_field(data, c, "commit_lsn"), "commit_lsn", None)
        change = _db2_lsn(_json_field(data, c, "change_lsn"), "change_lsn", None)
        if commit is None or change is None:
            raise PositionError(f"{c} position JSON needs both commit_lsn and change_lsn")
        return cls(
            commit,
            _json_phase(data, c),
            change,
            _uint(_json_field(data, c, "seq"), c, "seq", None, _U32_MAX),
        )

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium Db2 ``source`` block (see :meth:`Position.from_source`)."""
        phase = _phase_of(source, origin)
        change = _db2_lsn(source.get("change_lsn"), "change_lsn", origin)
        commit = _db2_lsn(source.get("commit_lsn"), "commit_lsn", origin)
        if change is None:
            if commit is None:
                raise _missing(cls.CONNECTOR, "change_lsn", origin, "and commit_lsn is null too")
            # Schema-change records carry the commit LSN and a null change LSN (as SQL Server's
            # do): they sort before the changes of that commit.
            change = _DB2_ZERO_LSN
        if commit is None:
            if phase is not _SNAPSHOT and not _is_incremental(source):
                raise _missing(cls.CONNECTOR, "commit_lsn", origin, "required on streamed records")
            commit = change
        return cls._new(commit, phase, change, seq)


_DB2_ZERO_LSN = bytes(16)

_DB2_SETTERS = _slot_setters(Db2Position, "commit_lsn", "phase", "change_lsn", "seq", "_encoded")


# --- Oracle ----------------------------------------------------------------------------------


class RsId(NamedTuple):
    """A parsed LogMiner ``RS_ID``: the redo record's address ``0x<log seq>.<block>.<offset>``."""

    log_sequence: int
    """Redo log sequence number (hex in the text)."""
    block: int
    """Block number inside the log (hex)."""
    offset: int
    """Byte offset inside the block (hex)."""

    def __str__(self) -> str:
        return f"0x{self.log_sequence:06x}.{self.block:08x}.{self.offset:04x}"


_RSID = struct.Struct(">BIIH")
_RS_NONE, _RS_PARSED, _RS_TEXT = 0, 1, 2
_RS_NONE_BYTES, _RS_TEXT_BYTES = bytes((_RS_NONE,)), bytes((_RS_TEXT,))


@lru_cache(maxsize=4096)
def _parse_rs_id(text: str) -> RsId | str:
    """Parse ``" 0x000123.00004567.0010 "``; unparsable or oversized values stay text."""
    stripped = text.strip()
    digits = stripped[2:] if stripped[:2] in ("0x", "0X") else stripped
    parts = digits.split(".")
    if len(parts) == 3 and all(parts):
        try:
            log_sequence, block, offset = (int(part, 16) for part in parts)
        except ValueError:
            return stripped
        if 0 <= log_sequence <= _U32_MAX and 0 <= block <= _U32_MAX and 0 <= offset <= 0xFFFF:
            return RsId(log_sequence, block, offset)
    return stripped


def _escape(text: str) -> bytes:
    return text.encode("utf-8").replace(b"\x00", b"\x00\xff") + b"\x00\x00"


def _unescape(data: bytes | bytearray, start: int) -> tuple[str, int]:
    """Read an :func:`_escape`-d string at ``start``; return it and the index after it."""
    chunks: list[bytes] = []
    index = start
    while True:
        nul = data.find(b"\x00", index)
        if nul < 0 or nul + 1 >= len(data):
            raise PositionError("oracle position bytes: unterminated rs_id text")
        chunks.append(bytes(data[index:nul]))
        marker = data[nul + 1]
        if marker == 0x00:
            try:
                return b"".join(chunks).decode("utf-8"), nul + 2
            except UnicodeDecodeError:
                raise PositionError("oracle position bytes: rs_id text is not UTF-8") from None
        if marker != 0xFF:
            raise PositionError("oracle position bytes: bad escape in rs_id text")
        chunks.append(b"\x00")
        index = nul + 2


_ORACLE_HEAD = struct.Struct(">BQBQ")
_ORACLE_TAIL = struct.Struct(">QI")


@dataclass(frozen=True, slots=True)
class OraclePosition(Position):
    """Oracle (LogMiner) position: ``(commit_scn, phase, scn, rs_id, ssn, seq)``.

    Fields used:

    * ``commit_scn``: the transaction's commit SCN. Debezium buffers each transaction and emits
      it at COMMIT, so the stream is in commit-SCN order; ``scn`` alone is not (transactions
      interleave in the redo).
    * ``scn``: the change's SCN, ordering changes inside a transaction.
    * ``rs_id`` + ``ssn``: the redo record set and SQL sequence number, which separate changes
      sharing one SCN. ``rs_id`` (``" 0x000123.00004567.0010 "``) is parsed into its three hex
      numbers (log sequence u32, block u32, offset u16) and encoded fixed-width behind a tag
      byte (0 = null, 1 = parsed); a value that does not parse is kept as escaped text (tag 2).
      ``ssn`` null means 0.
    * ``snapshot``: snapshot rows carry the flashback SCN as ``scn`` and no ``commit_scn``; that
      SCN is used as the commit coordinate (also for incremental-snapshot rows lacking it).
      Transactions still open at the snapshot commit after it, so they sort after the snapshot.

    SCNs arrive as decimal strings and are printed that way.
    """

    CONNECTOR: ClassVar[str] = "oracle"
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("commit_scn", "snapshot", "scn", "rs_id", "ssn")

    commit_scn: int
    phase: Phase
    scn: int
    rs_id: RsId | str | None
    """Parsed RS_ID, the stripped text if it does not parse, or None."""
    ssn: int
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_phase()
        rs_id = self.rs_id
        if not (rs_id is None or isinstance(rs_id, RsId | str)):
            raise PositionError(f"{self.CONNECTOR} rs_id must be RsId, str or None: {self!r}")
        twin = self._new(self.commit_scn, self.phase, self.scn, rs_id, self.ssn, self.seq)
        _ORACLE_SETTERS[-1](self, twin._encoded)

    @classmethod
    def _new(
        cls, commit_scn: int, phase: Phase, scn: int, rs_id: RsId | str | None, ssn: int, seq: int
    ) -> Self:
        try:
            head = _ORACLE_HEAD.pack(FORMAT_VERSION, commit_scn, phase, scn)
            if rs_id is None:
                middle = _RS_NONE_BYTES
            elif type(rs_id) is RsId:
                middle = _RSID.pack(_RS_PARSED, *rs_id)
            else:
                middle = _RS_TEXT_BYTES + _escape(str(rs_id))
            tail = _ORACLE_TAIL.pack(ssn, seq)
        except struct.error as exc:
            components = (commit_scn, phase, scn, rs_id, ssn, seq)
            raise _range_error(cls.CONNECTOR, exc, components) from None
        self = object.__new__(cls)
        set_commit, set_phase, set_scn, set_rs_id, set_ssn, set_seq, set_encoded = _ORACLE_SETTERS
        set_commit(self, commit_scn)
        set_phase(self, phase)
        set_scn(self, scn)
        set_rs_id(self, rs_id)
        set_ssn(self, ssn)
        set_seq(self, seq)
        set_encoded(self, head + middle + tail)
        return self

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        c = cls.CONNECTOR
        _check_version(data, c)
        if len(data) < _ORACLE_HEAD.size + 1 + _ORACLE_TAIL.size:
            raise PositionError(f"{c} position bytes are too short ({len(data)} bytes)")
        _, commit_scn, phase, scn = _ORACLE_HEAD.unpack_from(data)
        index = _ORACLE_HEAD.size
        tag = data[index]
        rs_id: RsId | str | None
        if tag == _RS_NONE:
            rs_id, index = None, index + 1
        elif tag == _RS_PARSED:
            if len(data) < index + _RSID.size:
                raise PositionError(f"{c} position bytes are too short for rs_id")
            rs_id = RsId(*_RSID.unpack_from(data, index)[1:])
            index += _RSID.size
        elif tag == _RS_TEXT:
            rs_id, index = _unescape(data, index + 1)
        else:
            raise PositionError(f"{c} position bytes have unknown rs_id tag {tag}")
        if len(data) != index + _ORACLE_TAIL.size:
            raise PositionError(
                f"{c} position bytes have {len(data)} bytes, expected {index + _ORACLE_TAIL.size}"
            )
        ssn, seq = _ORACLE_TAIL.unpack_from(data, index)
        return cls._new(commit_scn, _phase_byte(phase, c), scn, rs_id, ssn, seq)

    def with_seq(self, seq: int) -> Self:
        return self._new(self.commit_scn, self.phase, self.scn, self.rs_id, self.ssn, seq)

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.CONNECTOR,
            "commit_scn": str(self.commit_scn),
            "phase": _PHASE_NAMES[self.phase],
            "scn": str(self.scn),
            "rs_id": None if self.rs_id is None else str(self.rs_id),
            "ssn": self.ssn,
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        _check_json_connector(data, c)
        rs_id = data.get("rs_id")
        return cls(
            _uint(_json_field(data, c, "commit_scn"), c, "commit_scn", None),
            _json_phase(data, c),
            _uint(_json_field(data, c, "scn"), c, "scn", None),
            None if rs_id is None else _parse_rs_id(str(rs_id)),
            _uint(_json_field(data, c, "ssn"), c, "ssn", None),
            _uint(_json_field(data, c, "seq"), c, "seq", None, _U32_MAX),
        )

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium Oracle ``source`` block (see :meth:`Position.from_source`)."""
        c = cls.CONNECTOR
        phase = _phase_of(source, origin)
        scn = _uint(source.get("scn"), c, "scn", origin)
        raw_commit = source.get("commit_scn")
        if raw_commit is not None:
            commit_scn = _uint(raw_commit, c, "commit_scn", origin)
        elif phase is _SNAPSHOT or _is_incremental(source):
            commit_scn = scn
        else:
            raise _missing(
                c, "commit_scn", origin, "streamed records are ordered by their commit SCN"
            )
        rs_id = source.get("rs_id")
        ssn = source.get("ssn")
        return cls._new(
            commit_scn,
            phase,
            scn,
            None if rs_id is None else _parse_rs_id(str(rs_id)),
            0 if ssn is None else _uint(ssn, c, "ssn", origin),
            seq,
        )


_ORACLE_SETTERS = _slot_setters(
    OraclePosition, "commit_scn", "phase", "scn", "rs_id", "ssn", "seq", "_encoded"
)


# --- MongoDB ---------------------------------------------------------------------------------


_MONGO = struct.Struct(">BIIBQI")


@dataclass(frozen=True, slots=True)
class MongoDbPosition(Position):
    """MongoDB position: ``(seconds, ord, phase, txn_number, seq)`` per replica set.

    Fields used:

    * ``sec`` (or ``ts_ms // 1000``, Debezium writes the oplog time as seconds x 1000) and
      ``ord``: the oplog timestamp (cluster time seconds and ordinal within the second), which is
      the replica set's commit order. Positions of different replica sets (shards) never compare.
    * ``snapshot``: snapshot rows carry the oplog position recorded when the snapshot started;
      streaming resumes from there, so ``phase`` after ``ord`` puts the snapshot first.
    * ``txnNumber`` (or the number after the last ``:`` of ``stxnid``, ``"<lsid>:<txnNumber>"``):
      operations of one multi-document transaction share an oplog timestamp; they are
      distinguished by ``seq`` in arrival order, the transaction number is kept as the tie-break
      Debezium exposes. Absent means 0.

    ``h`` (the legacy operation hash) is not ordered and not used.
    """

    CONNECTOR: ClassVar[str] = "mongodb"
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("sec|ts_ms", "ord", "snapshot", "txnNumber|stxnid")

    seconds: int
    ord: int
    phase: Phase
    txn_number: int = 0
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._check_phase()
        twin = self._new(self.seconds, self.ord, self.phase, self.txn_number, self.seq)
        _MONGO_SETTERS[-1](self, twin._encoded)

    @classmethod
    def _new(cls, seconds: int, ordinal: int, phase: Phase, txn_number: int, seq: int) -> Self:
        try:
            encoded = _MONGO.pack(FORMAT_VERSION, seconds, ordinal, phase, txn_number, seq)
        except struct.error as exc:
            components = (seconds, ordinal, phase, txn_number, seq)
            raise _range_error(cls.CONNECTOR, exc, components) from None
        self = object.__new__(cls)
        set_seconds, set_ord, set_phase, set_txn, set_seq, set_encoded = _MONGO_SETTERS
        set_seconds(self, seconds)
        set_ord(self, ordinal)
        set_phase(self, phase)
        set_txn(self, txn_number)
        set_seq(self, seq)
        set_encoded(self, encoded)
        return self

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        _check_version(data, cls.CONNECTOR, _MONGO.size)
        _, seconds, ordinal, phase, txn_number, seq = _MONGO.unpack(data)
        return cls._new(seconds, ordinal, _phase_byte(phase, cls.CONNECTOR), txn_number, seq)

    def with_seq(self, seq: int) -> Self:
        return self._new(self.seconds, self.ord, self.phase, self.txn_number, seq)

    def to_json(self) -> dict[str, Any]:
        return {
            "connector": self.CONNECTOR,
            "sec": self.seconds,
            "ord": self.ord,
            "phase": _PHASE_NAMES[self.phase],
            "txn_number": self.txn_number,
            "seq": self.seq,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        _check_json_connector(data, c)
        return cls(
            _uint(_json_field(data, c, "sec"), c, "sec", None, _U32_MAX),
            _uint(_json_field(data, c, "ord"), c, "ord", None, _U32_MAX),
            _json_phase(data, c),
            _uint(_json_field(data, c, "txn_number"), c, "txn_number", None),
            _uint(_json_field(data, c, "seq"), c, "seq", None, _U32_MAX),
        )

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium MongoDB ``source`` block (see :meth:`Position.from_source`)."""
        c = cls.CONNECTOR
        sec = source.get("sec")
        if sec is not None:
            seconds = _uint(sec, c, "sec", origin, _U32_MAX)
        else:
            ts_ms = source.get("ts_ms")
            if ts_ms is None:
                raise _missing(c, "ts_ms", origin, "and source.sec is absent too")
            seconds = _uint(ts_ms, c, "ts_ms", origin) // 1000
        txn = source.get("txnNumber")
        if txn is not None:
            txn_number = _uint(txn, c, "txnNumber", origin)
        else:
            session = source.get("stxnid")
            if session is None:
                txn_number = 0
            else:
                # "<lsid>:<txnNumber>"; the lsid part may itself contain colons.
                txn_number = _uint(str(session).rpartition(":")[2], c, "stxnid", origin)
        return cls._new(
            seconds,
            _uint(source.get("ord"), c, "ord", origin, _U32_MAX),
            _phase_of(source, origin),
            txn_number,
            seq,
        )


_MONGO_SETTERS = _slot_setters(
    MongoDbPosition, "seconds", "ord", "phase", "txn_number", "seq", "_encoded"
)


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
            raise _range_error(cls.CONNECTOR, exc, (arrival, seq)) from None
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
            _uint(_json_field(data, c, "arrival"), c, "arrival", None),
            _uint(_json_field(data, c, "seq"), c, "seq", None, _U32_MAX),
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


_ARRIVAL_SETTERS = _slot_setters(ArrivalPosition, "arrival", "seq", "_encoded")


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
"""Position class per connector, keyed by Debezium's ``source.connector`` lower-cased."""

_ALIASES: dict[str, str] = {
    # Debezium's MariaDB connector (2.7+) writes the MySQL source block (file/pos/row/gtid).
    "mariadb": "mysql",
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


class _PgCommitOrder:
    """Commit-order keys for a PostgreSQL-family stream (see :class:`PositionResolver`).

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
            self.txn_id: int | None = None if txn is None else _uint(txn[0], c, "txId", None)
            self.txn_key = 0 if txn is None else _pg_lsn(txn[1], c, "state.txn", None)
            # Insertion-ordered: the oldest derived transaction is evicted first.
            self.recent: dict[int, int] = {
                _uint(txid, c, "txId", None): _pg_lsn(key, c, "state.recent", None)
                for txid, key in state.get("recent", [])
            }
        except (PositionError, TypeError, ValueError, IndexError) as exc:
            raise PositionError(f"{c} position resolver state is corrupt: {exc}") from None

    def state(self) -> dict[str, Any]:
        return {
            "scheme": self.scheme,
            "max_key": format_pg_lsn(self.max_key),
            "max_lsn": format_pg_lsn(self.max_lsn),
            "snapshot_lsn": format_pg_lsn(self.snapshot_lsn),
            "txn": None if self.txn_id is None else [self.txn_id, format_pg_lsn(self.txn_key)],
            "recent": [[txid, format_pg_lsn(key)] for txid, key in self.recent.items()],
        }

    def position(self, source: Mapping[str, Any], origin: str | None) -> PostgresPosition:
        cls = self.cls
        c = cls.CONNECTOR
        phase = _phase_of(source, origin)
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
            raise _missing(
                self.cls.CONNECTOR,
                "txId",
                origin,
                "needed to derive the commit order when commit_lsn and sequence[0] are absent",
            )
        txid = _uint(raw_txid, self.cls.CONNECTOR, "txId", origin)
        if txid == self.txn_id:
            return self.txn_key
        key = self.recent.get(txid)
        if key is None:
            key = max(self.max_key + 1, self.max_lsn, lsn)
            if key > _U64_MAX:
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
    :data:`DERIVED_TXN_MEMORY` derived transactions are remembered by ``txId``, so a redelivered
    transaction gets its original key back; one redelivered from further back would get a new,
    higher key (a wrongly *late* position), so keep that window above the redelivery span. A
    stream that switches between the ``commit_lsn``, ``sequence`` and derived schemes raises
    :class:`PositionError` naming both.

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
        self._commit_order: _PgCommitOrder | None = None
        if self._type.DERIVES_COMMIT_ORDER:
            if not issubclass(self._type, PostgresPosition):
                raise TypeError(f"{self._type.__name__} derives commit order but is not PG-like")
            self._commit_order = _PgCommitOrder(self._type, commit_order_state)

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
