"""MySQL / MariaDB source positions.

Layout: ``v | binlog file number u32 | pos u64 | phase | row u32 | seq u32``.

Persisted in bronze: the encoding must never change.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, ClassVar, Self

from bronze.position_base import (
    U32_MAX,
    Phase,
    Position,
    bad_field,
    check_json_connector,
    install_layout,
    json_field,
    json_phase,
    missing_field,
    parse_uint,
    phase_of,
)
from bronze.source_block import SourceBlock, SourceField
from pipeline.errors import PositionError

__all__ = ["MySqlPosition"]

_SNAPSHOT = Phase.SNAPSHOT
_STREAM = Phase.STREAM


@lru_cache(maxsize=1024)
def _binlog_number(name: str) -> int:
    # Cached: a binlog file holds many events, and rotations are rare.
    stem, dot, extension = name.rpartition(".")
    if not dot or not stem or not (extension.isascii() and extension.isdigit()):
        raise ValueError(name)
    number = int(extension)
    if number > U32_MAX:
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
    SOURCE_BLOCK: ClassVar[SourceBlock] = SourceBlock(
        "io.debezium.connector.mysql.Source",
        (
            SourceField("table", "string", optional=True),
            SourceField("server_id", "int64"),
            SourceField("gtid", "string", optional=True),
            SourceField("file", "string"),
            SourceField("pos", "int64"),
            SourceField("row", "int32"),
            SourceField("thread", "int64", optional=True),
            SourceField("query", "string", optional=True),
        ),
    )
    # Debezium's MariaDB connector (2.7+) writes the MySQL source block (file/pos/row/gtid).
    ALIASES: ClassVar[tuple[str, ...]] = ("mariadb",)
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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        c = cls.CONNECTOR
        check_json_connector(data, c)
        name = data.get("file")
        number = data.get("file_number")
        if number is None:
            if name is None:
                raise PositionError(f"{c} position JSON has neither 'file_number' nor 'file'")
            number = cls._file_number(name, None)
        return cls(
            parse_uint(number, c, "file_number", None, U32_MAX),
            parse_uint(json_field(data, c, "pos"), c, "pos", None),
            json_phase(data, c),
            parse_uint(json_field(data, c, "row"), c, "row", None, U32_MAX),
            parse_uint(json_field(data, c, "seq"), c, "seq", None, U32_MAX),
            name,
            data.get("gtid"),
        )

    @classmethod
    def _file_number(cls, name: object, origin: str | None) -> int:
        if name is None:
            raise missing_field(cls.CONNECTOR, "file", origin)
        try:
            return _binlog_number(name) if isinstance(name, str) else _binlog_number(str(name))
        except ValueError:
            raise bad_field(
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
            parse_uint(source.get("pos"), c, "pos", origin),
            phase_of(source, origin),
            parse_uint(source.get("row"), c, "row", origin, U32_MAX),
            seq,
            name,
            None if gtid is None else str(gtid),
        )


install_layout(
    MySqlPosition,
    _MYSQL,
    ("file_number", "pos", "phase", "row", "seq"),
    informational=("file", "gtid"),
    json_keys=("file", "file_number", "pos", "phase", "row", "seq", "gtid"),
)
