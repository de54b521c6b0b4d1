"""MongoDB source positions: ``v | seconds u32 | ord u32 | phase | txnNumber u64 | seq u32``.

Persisted in bronze: the encoding must never change.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from bronze.position_base import (
    U32_MAX,
    Phase,
    Position,
    install_layout,
    missing_field,
    parse_u32,
    parse_uint,
    phase_of,
)
from bronze.source_block import SourceBlock, SourceField

__all__ = ["MongoDbPosition"]

_SNAPSHOT = Phase.SNAPSHOT
_STREAM = Phase.STREAM


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
    # The schema name says "mongo", not "mongodb", in every Debezium version.
    SOURCE_BLOCK: ClassVar[SourceBlock] = SourceBlock(
        "io.debezium.connector.mongo.Source",
        (
            SourceField("rs", "string"),
            SourceField("collection", "string"),
            SourceField("ord", "int32"),
            SourceField("h", "int64", optional=True),
            SourceField("tord", "int64", optional=True),
            SourceField("stxnid", "string", optional=True),
        ),
        emits_schema_changes=False,
    )
    ORDER_FIELDS: ClassVar[tuple[str, ...]] = ("sec|ts_ms", "ord", "snapshot", "txnNumber|stxnid")

    seconds: int
    ord: int
    phase: Phase
    txn_number: int = 0
    seq: int = 0
    _encoded: bytes = field(init=False, repr=False, compare=False)

    @classmethod
    def from_source(
        cls, source: Mapping[str, Any], *, seq: int = 0, origin: str | None = None
    ) -> Self:
        """Build from a Debezium MongoDB ``source`` block (see :meth:`Position.from_source`)."""
        c = cls.CONNECTOR
        sec = source.get("sec")
        if sec is not None:
            seconds = parse_uint(sec, c, "sec", origin, U32_MAX)
        else:
            ts_ms = source.get("ts_ms")
            if ts_ms is None:
                raise missing_field(c, "ts_ms", origin, "and source.sec is absent too")
            seconds = parse_uint(ts_ms, c, "ts_ms", origin) // 1000
        txn = source.get("txnNumber")
        if txn is not None:
            txn_number = parse_uint(txn, c, "txnNumber", origin)
        else:
            session = source.get("stxnid")
            if session is None:
                txn_number = 0
            else:
                # "<lsid>:<txnNumber>"; the lsid part may itself contain colons.
                txn_number = parse_uint(str(session).rpartition(":")[2], c, "stxnid", origin)
        return cls._new(
            seconds,
            parse_uint(source.get("ord"), c, "ord", origin, U32_MAX),
            phase_of(source, origin),
            txn_number,
            seq,
        )


install_layout(
    MongoDbPosition,
    _MONGO,
    ("seconds", "ord", "phase", "txn_number", "seq"),
    attributes={"sec": "seconds"},
    json_keys=("sec", "ord", "phase", "txn_number", "seq"),
    parsers={"sec": parse_u32, "ord": parse_u32},
)
