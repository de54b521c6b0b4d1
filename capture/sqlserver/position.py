"""SQL Server source positions.

Layout: ``v | commit_lsn 10B | phase | change_lsn 10B | event_serial_no u64 | seq u32``.

Persisted in bronze: the encoding must never change.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from bronze.position_base import (
    Phase,
    Position,
    bad_field,
    install_layout,
    is_incremental,
    missing_field,
    parse_uint,
    phase_of,
)
from bronze.source_block import SCHEMA_TABLE, SourceBlock, SourceField
from pipeline.errors import PositionError

__all__ = ["SqlServerPosition"]

_SNAPSHOT = Phase.SNAPSHOT
_STREAM = Phase.STREAM


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
        raise missing_field("sqlserver", name, origin)
    raise bad_field("sqlserver", name, value, origin, "an LSN like '00000027:00000758:0003'")


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
    SOURCE_BLOCK: ClassVar[SourceBlock] = SourceBlock(
        "io.debezium.connector.sqlserver.Source",
        (
            *SCHEMA_TABLE,
            SourceField("change_lsn", "string", optional=True),
            SourceField("commit_lsn", "string", optional=True),
            SourceField("event_serial_no", "int64", optional=True),
        ),
    )
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

    def _check_components(self) -> None:
        if not (
            type(self.commit_lsn) is bytes
            and len(self.commit_lsn) == 10
            and type(self.change_lsn) is bytes
            and len(self.change_lsn) == 10
        ):
            # struct's "10s" would silently pad or cut a wrong-sized value.
            raise PositionError(f"{self.CONNECTOR} LSNs must be 10 bytes: {self!r}")

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium SQL Server ``source`` block (see :meth:`Position.from_source`)."""
        phase = phase_of(source, origin)
        change = source.get("change_lsn")
        change_lsn = _MSSQL_ZERO_LSN if change is None else _mssql_lsn(change, "change_lsn", origin)
        commit = source.get("commit_lsn")
        if commit is not None:
            commit_lsn = _mssql_lsn(commit, "commit_lsn", origin)
        elif change is not None and (phase is _SNAPSHOT or is_incremental(source)):
            commit_lsn = change_lsn
        else:
            raise missing_field(cls.CONNECTOR, "commit_lsn", origin)
        serial = source.get("event_serial_no")
        return cls._new(
            commit_lsn,
            phase,
            change_lsn,
            0 if serial is None else parse_uint(serial, cls.CONNECTOR, "event_serial_no", origin),
            seq,
        )


def _json_lsn(value: object, connector: str, name: str, origin: str | None) -> bytes:
    return _mssql_lsn(value, name, origin)


def _json_change_lsn(value: object, connector: str, name: str, origin: str | None) -> bytes:
    return _MSSQL_ZERO_LSN if value is None else _mssql_lsn(value, name, origin)


def _format_change_lsn(value: bytes) -> str | None:
    return None if value == _MSSQL_ZERO_LSN else _format_mssql_lsn(value)


install_layout(
    SqlServerPosition,
    _MSSQL,
    ("commit_lsn", "phase", "change_lsn", "event_serial_no", "seq"),
    {"commit_lsn": _format_mssql_lsn, "change_lsn": _format_change_lsn},
    parsers={"commit_lsn": _json_lsn, "change_lsn": _json_change_lsn},
    optional=("change_lsn",),
)
