"""Db2 source positions: ``v | commit_lsn 16B | phase | change_lsn 16B | seq u32``.

Persisted in bronze: the encoding must never change.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from bronze import position_base as pb
from bronze.source_block import SCHEMA_TABLE, SourceBlock, SourceField
from pipeline.errors import PositionError

__all__ = ["Db2Position"]

_SNAPSHOT = pb.Phase.SNAPSHOT
_STREAM = pb.Phase.STREAM


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
    raise pb.bad_field("db2", name, value, origin, "a Db2 LSN of at most 16 bytes in hex")


def _format_db2_lsn(lsn: bytes) -> str:
    # Debezium's Db2 Lsn.toString: colons after bytes 4 and 8.
    digits = lsn.hex()
    return f"{digits[:8]}:{digits[8:16]}:{digits[16:]}"


_DB2 = struct.Struct(">B16sB16sI")


@dataclass(frozen=True, slots=True)
class Db2Position(pb.Position):
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
    SOURCE_BLOCK: ClassVar[SourceBlock] = SourceBlock(
        "io.debezium.connector.db2.Source",
        (
            *SCHEMA_TABLE,
            SourceField("change_lsn", "string", optional=True),
            SourceField("commit_lsn", "string", optional=True),
        ),
    )
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("commit_lsn", "snapshot", "change_lsn")

    commit_lsn: bytes
    """16-byte commit LSN."""
    phase: pb.Phase
    change_lsn: bytes
    """16-byte change LSN."""
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    def _check_components(self) -> None:
        if not (
            type(self.commit_lsn) is bytes
            and len(self.commit_lsn) == 16
            and type(self.change_lsn) is bytes
            and len(self.change_lsn) == 16
        ):
            raise PositionError(f"{self.CONNECTOR} LSNs must be 16 bytes: {self!r}")

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        pb.check_json_connector(data, c)
        commit = _db2_lsn(pb.json_field(data, c, "commit_lsn"), "commit_lsn", None)
        change = _db2_lsn(pb.json_field(data, c, "change_lsn"), "change_lsn", None)
        if commit is None or change is None:
            raise PositionError(f"{c} position JSON needs both commit_lsn and change_lsn")
        return cls(
            commit,
            pb.json_phase(data, c),
            change,
            pb.parse_uint(pb.json_field(data, c, "seq"), c, "seq", None, pb.U32_MAX),
        )

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium Db2 ``source`` block (see :meth:`Position.from_source`)."""
        phase = pb.phase_of(source, origin)
        change = _db2_lsn(source.get("change_lsn"), "change_lsn", origin)
        commit = _db2_lsn(source.get("commit_lsn"), "commit_lsn", origin)
        if change is None:
            if commit is None:
                raise pb.missing_field(
                    cls.CONNECTOR, "change_lsn", origin, "and commit_lsn is null too"
                )
            # Schema-change records carry the commit LSN and a null change LSN (as SQL Server's
            # do): they sort before the changes of that commit.
            change = _DB2_ZERO_LSN
        if commit is None:
            if phase is not _SNAPSHOT and not pb.is_incremental(source):
                raise pb.missing_field(
                    cls.CONNECTOR, "commit_lsn", origin, "required on streamed records"
                )
            commit = change
        return cls._new(commit, phase, change, seq)


_DB2_ZERO_LSN = bytes(16)

pb.install_layout(
    Db2Position,
    _DB2,
    ("commit_lsn", "phase", "change_lsn", "seq"),
    {"commit_lsn": _format_db2_lsn, "change_lsn": _format_db2_lsn},
)
