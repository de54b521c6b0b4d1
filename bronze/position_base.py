"""The shared machinery of source positions: the :class:`Position` ABC and its field parsers.

Each connector's position class lives in its own package (``capture/<connector>/position.py``)
and builds on this module; :mod:`bronze.positions` keeps the table of those classes, the arrival
order and the :class:`~bronze.positions.PositionResolver`. The encoding rules every layout
follows are described there.
"""

from __future__ import annotations

import struct
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Any, ClassVar, Protocol, Self

from bronze.source_block import SourceBlock
from pipeline.errors import PositionError

__all__ = [
    "FORMAT_VERSION",
    "SEQ_WIDTH",
    "U32_MAX",
    "U64_MAX",
    "PHASE_NAMES",
    "CommitOrder",
    "Phase",
    "Parser",
    "Position",
    "Setter",
    "bad_field",
    "check_json_connector",
    "check_version",
    "install_layout",
    "is_incremental",
    "json_field",
    "json_phase",
    "missing_field",
    "parse_u32",
    "parse_uint",
    "phase_from_byte",
    "phase_of",
    "range_error",
    "slot_setters",
]

FORMAT_VERSION = 1
"""Leading byte of every connector position encoding written by this version."""

U64_MAX = (1 << 64) - 1
"""Largest u64 component."""
U32_MAX = (1 << 32) - 1
"""Largest u32 component (also the largest ``seq``)."""
SEQ_WIDTH = struct.calcsize(">I")
"""Bytes of the ``seq`` (u32) that ends every encoding."""


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
PHASE_NAMES = {Phase.SNAPSHOT: "snapshot", Phase.STREAM: "stream"}
"""The JSON form of each phase."""
_PHASE_BY_NAME = {name: phase for phase, name in PHASE_NAMES.items()}


def phase_of(source: Mapping[str, Any], origin: str | None) -> Phase:
    """The phase of a record from its ``source.snapshot`` marker.

    Raises:
        PositionError: The marker has a value Debezium does not write.
    """
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


def is_incremental(source: Mapping[str, Any]) -> bool:
    """Whether the record is an incremental-snapshot read."""
    return source.get("snapshot") == "incremental"


def missing_field(connector: str, name: str, origin: str | None, why: str = "") -> PositionError:
    """The error for a missing or null ``source`` field (``why`` adds a reason)."""
    detail = f" ({why})" if why else ""
    return PositionError(f"{connector} source.{name} is missing or null{detail}", origin=origin)


def bad_field(
    connector: str, name: str, value: object, origin: str | None, want: str
) -> PositionError:
    """The error for a ``source`` field that is not ``want``."""
    return PositionError(f"{connector} source.{name} = {value!r} is not {want}", origin=origin)


def parse_uint(
    value: object, connector: str, name: str, origin: str | None, limit: int = U64_MAX
) -> int:
    """An unsigned integer field; Debezium writes some int64 fields as JSON strings."""
    if type(value) is int:
        number = value
    elif isinstance(value, str) and value.strip().isdigit():
        number = int(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        number = int(value)
    elif value is None:
        raise missing_field(connector, name, origin)
    else:
        raise bad_field(connector, name, value, origin, "an unsigned integer")
    if not 0 <= number <= limit:
        raise bad_field(connector, name, value, origin, f"an unsigned integer <= {limit}")
    return number


def json_field(data: Mapping[str, Any], connector: str, name: str) -> Any:
    """Field ``name`` of a position's JSON form.

    Raises:
        PositionError: The field is absent.
    """
    try:
        value = data[name]
    except KeyError:
        raise PositionError(f"{connector} position JSON has no '{name}'") from None
    return value


def json_phase(data: Mapping[str, Any], connector: str) -> Phase:
    """The phase of a position's JSON form.

    Raises:
        PositionError: It is absent or not ``snapshot``/``stream``.
    """
    name = json_field(data, connector, "phase")
    try:
        return _PHASE_BY_NAME[name]
    except (KeyError, TypeError):
        raise PositionError(
            f"{connector} position JSON has phase {name!r}; expected 'snapshot' or 'stream'"
        ) from None


def check_json_connector(data: Mapping[str, Any], expected: str) -> None:
    """Check that a position's JSON form, when it names its connector, names ``expected``.

    Raises:
        PositionError: It names another (or an unknown) connector.
    """
    # Imported here: the table of connectors imports the connectors' modules, which import
    # this one. Names are resolved through it so aliases (mariadb) count as their connector.
    from bronze.positions import position_type

    named = data.get("connector")
    if named is not None and position_type(str(named)).CONNECTOR != expected:
        raise PositionError(f"position JSON is for connector '{named}', not '{expected}'")


def range_error(connector: str, exc: Exception, components: tuple[Any, ...]) -> PositionError:
    """The error for components that do not fit their fixed-width fields."""
    return PositionError(f"{connector} position component out of range ({exc}): {components!r}")


def phase_from_byte(value: int, connector: str) -> Phase:
    """The phase of an encoding's phase byte.

    Raises:
        PositionError: The byte is not a known phase.
    """
    try:
        return _PHASE_BY_VALUE[value]
    except IndexError:
        raise PositionError(f"{connector} position bytes have unknown phase {value}") from None


_PHASE_BY_VALUE = (Phase.SNAPSHOT, Phase.STREAM)
_SNAPSHOT = Phase.SNAPSHOT
_STREAM = Phase.STREAM

Setter = Callable[[Any, Any], None]
"""Sets one slot of an instance (see :func:`slot_setters`)."""

Parser = Callable[[Any, str, str, str | None], Any]
"""Parses one field: ``(value, connector, name, origin) -> component`` (see :func:`parse_uint`)."""


def parse_u32(value: object, connector: str, name: str, origin: str | None) -> int:
    """A u32 field (:func:`parse_uint` with the u32 limit)."""
    return parse_uint(value, connector, name, origin, U32_MAX)


def slot_setters(cls: type, *names: str) -> tuple[Setter, ...]:
    """Member-descriptor setters of a slotted class's fields.

    The internal ``_new`` constructors set fields through these instead of the frozen dataclass
    ``__init__`` (``object.__setattr__`` per field), which halves construction time on the
    landing path. They are used only with components that were already parsed and range-checked.
    """
    return tuple(cls.__dict__[name].__set__ for name in names)


def install_layout(
    cls: type[Position],
    layout: struct.Struct | None,
    components: tuple[str, ...],
    formats: Mapping[str, Callable[[Any], Any]] | None = None,
    *,
    informational: tuple[str, ...] = (),
    json_keys: tuple[str, ...] | None = None,
    attributes: Mapping[str, str] | None = None,
    parsers: Mapping[str, Parser] | None = None,
    optional: tuple[str, ...] = (),
) -> None:
    """Give a position class its ``_new``, ``decode``, ``with_seq`` and ``to_json``.

    The methods are generated as source text for the class's own fields, as ``dataclasses``
    generates ``__init__``: one generic constructor looping over the setters measured 2.98 us
    instead of 2.18 us per resolved PostgreSQL position, and the landing path builds one position
    per record.

    Args:
        cls: The slotted dataclass, called once right after its definition.
        layout: The struct packing ``FORMAT_VERSION`` and ``components``; None for a variable
            layout whose class writes its own ``_new`` and ``decode`` (then only ``with_seq`` and
            ``to_json`` are generated).
        components: The encoded fields in encoding order (``phase`` among them, ``seq`` last).
        formats: The formatter of each key whose value is not the attribute as is (``phase``
            is always printed by name).
        informational: Fields kept beside the encoding (not packed, None after ``decode``);
            ``_new`` takes them after the components.
        json_keys: The keys of :meth:`Position.to_json` after ``connector``, in order, when
            they are not the fields.
        attributes: The attribute of each key that names it differently.
        parsers: The parser of each JSON key that is not a u64 (``seq`` is a u32, ``phase`` a
            name); without it the class writes its own ``from_json``.
        optional: JSON keys that may be absent (their parser then gets None).
    """
    names = (*components, *informational)
    args = ", ".join(names)
    env: dict[str, Any] = {
        "phase_from_byte": phase_from_byte,
        "check_version": check_version,
        "check_json_connector": check_json_connector,
        "json_field": json_field,
        "json_phase": json_phase,
        "range_error": range_error,
        "struct_error": struct.error,
        "new_object": object.__new__,
        "FORMAT_VERSION": FORMAT_VERSION,
    }
    lines: list[str] = []
    if layout is not None:
        env["layout"] = layout
        env.update(
            zip(
                [f"set_{n}" for n in (*names, "_encoded")],
                slot_setters(cls, *names, "_encoded"),
                strict=True,
            )
        )
        packed = ", ".join(components)
        decoded = [
            *("phase_from_byte(phase, cls.CONNECTOR)" if n == "phase" else n for n in components),
            *("None" for _ in informational),
        ]
        lines += [
            f"def _new(cls, {args}):",
            "    try:",
            f"        encoded = layout.pack(FORMAT_VERSION, {packed})",
            "    except struct_error as exc:",
            f"        raise range_error(cls.CONNECTOR, exc, ({packed},)) from None",
            "    self = new_object(cls)",
            *(f"    set_{n}(self, {n})" for n in names),
            "    set__encoded(self, encoded)",
            "    return self",
            "def decode(cls, data):",
            "    check_version(data, cls.CONNECTOR, layout.size)",
            f"    _, {packed} = layout.unpack(data)",
            f"    return cls._new({', '.join(decoded)})",
        ]
    fields = ", ".join("seq" if n == "seq" else f"self.{n}" for n in names)
    lines += ["def with_seq(self, seq):", f"    return self._new({fields})"]
    formats = {"phase": PHASE_NAMES.__getitem__, **(formats or {})}
    items = []
    for index, key in enumerate(json_keys or names):
        value = f"self.{(attributes or {}).get(key, key)}"
        if key in formats:
            env[f"format_{index}"] = formats[key]
            value = f"format_{index}({value})"
        items.append(f"{key!r}: {value}")
    lines += [
        "def to_json(self):",
        f"    return {{'connector': self.CONNECTOR, {', '.join(items)}}}",
    ]
    if parsers is not None:
        parsers = {"seq": parse_u32, **parsers}
        by_attribute = {(attributes or {}).get(key, key): key for key in json_keys or names}
        values = []
        for name in names:
            key = by_attribute[name]
            if key == "phase":
                values.append("json_phase(data, c)")
                continue
            env[f"parse_{name}"] = parsers.get(key, parse_uint)
            read = f"data.get({key!r})" if key in optional else f"json_field(data, c, {key!r})"
            values.append(f"parse_{name}({read}, c, {key!r}, None)")
        lines += [
            "def from_json(cls, data):",
            "    c = cls.CONNECTOR",
            "    check_json_connector(data, c)",
            f"    return cls({', '.join(values)})",
        ]
    exec("\n".join(lines), env)  # noqa: S102 - our own text, built from the class's field names
    if layout is not None:
        cls._new = classmethod(env["_new"])  # type: ignore[method-assign, assignment]
        cls.decode = classmethod(env["decode"])  # type: ignore[method-assign, assignment]
    cls.with_seq = env["with_seq"]  # type: ignore[method-assign]
    cls.to_json = env["to_json"]  # type: ignore[method-assign]
    if parsers is not None:
        cls.from_json = classmethod(env["from_json"])  # type: ignore[method-assign, assignment]


def check_version(data: bytes | bytearray, connector: str, size: int | None = None) -> None:
    """Check an encoding's version byte and, when given, its length.

    Raises:
        PositionError: Another version, or the wrong length (another connector's bytes).
    """
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


class CommitOrder(Protocol):
    """Positions of one stream whose records do not each carry their commit order.

    A connector whose class sets ``DERIVES_COMMIT_ORDER`` returns one from
    :meth:`Position.commit_order`; :class:`bronze.positions.PositionResolver` asks it for every
    data record's position (``seq`` 0) and saves its state with the committed offset.
    """

    def position(self, source: Mapping[str, Any], origin: str | None) -> Position:
        """The position of a data record (``seq`` 0), updating the derivation's state."""
        ...

    def state(self) -> dict[str, Any]:
        """The JSON-serialisable state to pass back to :meth:`Position.commit_order`."""
        ...


# --- the ABC ----------------------------------------------------------------------------------


class Position(ABC):
    """A point in one source's commit order plus an intra-position sequence.

    Subclasses are frozen, slotted dataclasses, one per Debezium connector. They are created from
    a Debezium ``source`` block (:meth:`from_source`), from their bytes (:meth:`decode`) or from
    their JSON form (:meth:`from_json`); they validate their components on construction and cache
    their encoding, so :meth:`encode` and :meth:`base` are free.

    To add a connector: subclass as ``@dataclass(frozen=True, slots=True)``, set the class flags,
    declare the components as fields in encoding order ending with ``seq: int = 0`` (plus the
    ``_encoded`` field of the existing classes), call :func:`install_layout` after the class with
    its precompiled :class:`struct.Struct`, fields and JSON keys (it generates ``_new``, which the
    landing path uses instead of the slower frozen ``__init__``, ``decode``, ``with_seq`` and
    ``to_json``; the shared ``__post_init__`` encodes through them), override
    ``_check_components`` for checks the struct does not make, implement the other methods,
    put the module in the connector's package (``capture/<connector>/position.py``, importing
    no driver) and register the class in
    :data:`bronze.positions.POSITION_TYPES`.
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

    ALIASES: ClassVar[tuple[str, ...]] = ()
    """Other ``source.connector`` values whose records carry this connector's ``source`` block."""

    SOURCE_BLOCK: ClassVar[SourceBlock]
    """The connector's own fields of its ``source`` block (after the common ones), from which
    :func:`bronze.connect_schema.source_schema` builds the block's Connect schema."""

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
        return self._encoded[:-SEQ_WIDTH]

    @classmethod
    def _new(cls, *components: Any, **informational: Any) -> Self:
        """Build from components already parsed and range-checked (see :func:`install_layout`)."""
        raise NotImplementedError(f"{cls.__name__} has no layout (see install_layout)")

    @classmethod
    def decode(cls, data: bytes | bytearray) -> Self:
        """Rebuild a position from :meth:`encode` output (exact inverse).

        Args:
            data: Bytes written by :meth:`encode` of this class.

        Returns:
            The equal position.

        Raises:
            PositionError: The bytes are not a valid encoding of this connector's positions.
        """
        raise NotImplementedError(f"{cls.__name__} has no layout (see install_layout)")

    def with_seq(self, seq: int) -> Self:
        """Return the same source position with another intra-position sequence.

        Args:
            seq: The new sequence, ``0 <= seq < 2**32``.

        Raises:
            PositionError: ``seq`` is out of range.
        """
        raise NotImplementedError(f"{type(self).__name__} has no layout (see install_layout)")

    def to_json(self) -> dict[str, Any]:
        """Return a human-readable, JSON-serialisable form (LSNs as Debezium prints them).

        :meth:`from_json` is its exact inverse.
        """
        raise NotImplementedError(f"{type(self).__name__} has no layout (see install_layout)")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        """Rebuild a position from :meth:`to_json` output.

        Args:
            data: A mapping as produced by :meth:`to_json`.

        Raises:
            PositionError: A field is missing or malformed, or the JSON names another connector.
        """
        raise NotImplementedError(f"{cls.__name__} has no layout (see install_layout)")

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

    @classmethod
    def commit_order(cls, state: Mapping[str, Any] | None) -> CommitOrder:
        """Return the stream-side commit-order derivation of a ``DERIVES_COMMIT_ORDER`` class.

        Args:
            state: What a previous derivation's :meth:`CommitOrder.state` returned, or None.

        Raises:
            PositionError: ``state`` is corrupt.
            TypeError: The class does not derive its commit order.
        """
        raise TypeError(f"{cls.__name__} does not derive its commit order")

    def __post_init__(self) -> None:
        # The dataclass ``__init__`` path (from_json, tests): validate, then encode like ``_new``.
        if self.phase is not _SNAPSHOT and self.phase is not _STREAM:
            raise PositionError(f"{self.CONNECTOR} phase must be a Phase, not {self.phase!r}")
        self._check_components()
        object.__setattr__(self, "_encoded", self.with_seq(self.seq)._encoded)

    def _check_components(self) -> None:
        """Check what the struct would not (a class with such components overrides this).

        Raises:
            PositionError: A component has the wrong type or size.
        """
        return None
