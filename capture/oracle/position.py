"""Oracle source positions: ``v | commit_scn u64 | phase | scn u64 | rs_id | ssn u64 | seq u32``.

Persisted in bronze: the encoding must never change.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, NamedTuple, Self

from bronze.position_base import (
    FORMAT_VERSION,
    U32_MAX,
    Phase,
    Position,
    check_version,
    install_layout,
    is_incremental,
    missing_field,
    parse_uint,
    phase_from_byte,
    phase_of,
    range_error,
    slot_setters,
)
from bronze.source_block import SCHEMA_TABLE, SourceBlock, SourceField
from pipeline.errors import PositionError

__all__ = ["OraclePosition", "RsId"]

_SNAPSHOT = Phase.SNAPSHOT
_STREAM = Phase.STREAM


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
        if 0 <= log_sequence <= U32_MAX and 0 <= block <= U32_MAX and 0 <= offset <= 0xFFFF:
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
    SOURCE_BLOCK: ClassVar[SourceBlock] = SourceBlock(
        "io.debezium.connector.oracle.Source",
        (
            *SCHEMA_TABLE,
            SourceField("txId", "string", optional=True),
            SourceField("scn", "string", optional=True),
            SourceField("commit_scn", "string", optional=True),
            SourceField("lcr_position", "string", optional=True),
            SourceField("rs_id", "string", optional=True),
            SourceField("ssn", "int32", optional=True),
            SourceField("redo_thread", "int32", optional=True),
            SourceField("user_name", "string", optional=True),
        ),
    )
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("commit_scn", "snapshot", "scn", "rs_id", "ssn")

    commit_scn: int
    phase: Phase
    scn: int
    rs_id: RsId | str | None
    """Parsed RS_ID, the stripped text if it does not parse, or None."""
    ssn: int
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def _check_components(self) -> None:
        rs_id = self.rs_id
        if not (rs_id is None or isinstance(rs_id, RsId | str)):
            raise PositionError(f"{self.CONNECTOR} rs_id must be RsId, str or None: {self!r}")

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
            raise range_error(cls.CONNECTOR, exc, components) from None
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
        check_version(data, c)
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
        return cls._new(commit_scn, phase_from_byte(phase, c), scn, rs_id, ssn, seq)

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium Oracle ``source`` block (see :meth:`Position.from_source`)."""
        c = cls.CONNECTOR
        phase = phase_of(source, origin)
        scn = parse_uint(source.get("scn"), c, "scn", origin)
        raw_commit = source.get("commit_scn")
        if raw_commit is not None:
            commit_scn = parse_uint(raw_commit, c, "commit_scn", origin)
        elif phase is _SNAPSHOT or is_incremental(source):
            commit_scn = scn
        else:
            raise missing_field(
                c, "commit_scn", origin, "streamed records are ordered by their commit SCN"
            )
        rs_id = source.get("rs_id")
        ssn = source.get("ssn")
        return cls._new(
            commit_scn,
            phase,
            scn,
            None if rs_id is None else _parse_rs_id(str(rs_id)),
            0 if ssn is None else parse_uint(ssn, c, "ssn", origin),
            seq,
        )


_ORACLE_SETTERS = slot_setters(
    OraclePosition, "commit_scn", "phase", "scn", "rs_id", "ssn", "seq", "_encoded"
)


def _json_rs_id(value: object, connector: str, name: str, origin: str | None) -> RsId | str | None:
    return None if value is None else _parse_rs_id(str(value))


def _format_rs_id(value: RsId | str | None) -> str | None:
    return None if value is None else str(value)


install_layout(
    OraclePosition,
    None,
    ("commit_scn", "phase", "scn", "rs_id", "ssn", "seq"),
    {"commit_scn": str, "scn": str, "rs_id": _format_rs_id},
    parsers={"rs_id": _json_rs_id},
    optional=("rs_id",),
)
