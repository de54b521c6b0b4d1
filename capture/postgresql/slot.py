"""Publication and replication-slot administration for the PostgreSQL agent, all idempotent.

Everything here runs SQL on an ordinary (autocommit) connection, except slot creation, which
needs a replication connection because only ``CREATE_REPLICATION_SLOT`` can export the snapshot
the initial snapshot reads. Identifiers are composed with ``psycopg.sql``, never formatted in.

Slot ownership: right after creating a slot the agent writes a non-transactional logical message
(:data:`SLOT_MARKER_PREFIX`, content ``<slot>:<source>``), so it is the first thing the slot
decodes until the agent confirms anything. :func:`slot_is_ours` peeks for it; only a slot that
passes may be dropped and recreated by the agent. Dropping another consumer's slot would lose
its changes ("Never drop a replication slot on the primary", the guide says).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from capture.postgresql.pgoutput import LogicalMessage, ProtocolError, decode_message
from capture.postgresql.replication import publication_option
from capture.postgresql.schema import TableFilter
from capture.server_errors import SourceRefused
from pipeline.errors import CaptureError, InternalError

__all__ = [
    "SLOT_MARKER_PREFIX",
    "emit_marker",
    "SlotState",
    "parse_lsn",
    "check_server",
    "captured_tables",
    "ensure_publication",
    "slot_state",
    "create_slot",
    "is_marker",
    "slot_is_ours",
    "drop_slot",
    "slot_lag",
]

logger = logging.getLogger(__name__)

SLOT_MARKER_PREFIX = "medallion.slot"
"""Prefix of the logical message the agent writes right after creating its slot."""


def parse_lsn(text: str | int) -> int:
    """Parse ``"X/Y"`` (or an int) into a 64-bit LSN.

    >>> parse_lsn("1/2A")
    4294967338
    """
    if isinstance(text, int):
        return text
    hi, _, lo = text.partition("/")
    return (int(hi, 16) << 32) | int(lo, 16)


@dataclass(frozen=True, slots=True)
class SlotState:
    """What ``pg_replication_slots`` says about the agent's slot.

    Attributes:
        confirmed_flush: ``confirmed_flush_lsn`` (0 when null).
        wal_status: ``reserved``, ``extended``, ``unreserved`` or ``lost`` (PostgreSQL 13+;
            None before).
        active: A walsender is attached.
    """

    confirmed_flush: int
    wal_status: str | None
    active: bool

    @property
    def lost(self) -> bool:
        """The server removed WAL the slot still needed (``max_slot_wal_keep_size``)."""
        return self.wal_status == "lost"


def check_server(conn: psycopg.Connection[Any], source: str) -> int:
    """Check that the server can decode logically; return ``server_version_num``.

    Raises:
        SourceRefused: ``wal_level`` is not ``logical`` (terminal, SQLSTATE 55000).
        CaptureError: The server predates pgoutput.
    """
    row = conn.execute(
        "SELECT current_setting('wal_level'), current_setting('server_version_num')"
    ).fetchone()
    if row is None:
        raise InternalError(f"source {source}: current_setting() returned no row")
    if row[0] != "logical":
        # 55000 is what the server itself answers when a slot is created below wal_level=logical.
        raise SourceRefused(
            source,
            "55000",
            f"wal_level is {row[0]!r} (SQLSTATE 55000: logical decoding needs wal_level=logical)",
            "set wal_level=logical in postgresql.conf and restart the server",
        )
    version = int(row[1])
    if version < 100000:
        raise CaptureError(f"source {source}: pgoutput needs PostgreSQL 10 or later")
    return version


def captured_tables(
    conn: psycopg.Connection[Any], table_filter: TableFilter
) -> list[tuple[str, str]]:
    """``(schema, table)`` of every table the filters capture, in name order."""
    rows = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_class c"
        " JOIN pg_namespace n ON n.oid = c.relnamespace"
        # Partitions, not their parents: pgoutput names a partition's changes after the
        # partition (one topic per partition, as Debezium documents), so the snapshot must too.
        " WHERE c.relkind = 'r'"
        " AND n.nspname NOT IN ('pg_catalog', 'information_schema', 'pg_toast')"
        " AND n.nspname NOT LIKE 'pg_temp%%' ORDER BY 1, 2"
    ).fetchall()
    return [(s, t) for s, t in rows if table_filter.table(s, t)]


def ensure_publication(
    conn: psycopg.Connection[Any],
    source: str,
    publication: str,
    mode: str,
    table_filter: TableFilter,
) -> None:
    """Create (or check) the publication per ``publication.autocreate.mode``.

    Args:
        conn: An autocommit connection.
        source: The source name, for messages.
        publication: The publication name.
        mode: ``all_tables`` (``FOR ALL TABLES``; needs superuser), ``filtered`` (``FOR TABLE``
            the captured tables, reset to them at every start) or ``disabled`` (must exist).
        table_filter: The source's filters (``filtered`` mode).

    Raises:
        CaptureError: ``disabled`` and it does not exist, or ``filtered`` matches no table.
    """
    exists = conn.execute(
        "SELECT puballtables FROM pg_publication WHERE pubname = %s", (publication,)
    ).fetchone()
    pub = sql.Identifier(publication)
    if mode == "disabled":
        if exists is None:
            raise CaptureError(
                f"source {source}: publication {publication!r} does not exist and "
                "publication.autocreate.mode is 'disabled'; create it (CREATE PUBLICATION ...)"
            )
        return
    if mode == "all_tables":
        if exists is None:
            conn.execute(sql.SQL("CREATE PUBLICATION {} FOR ALL TABLES").format(pub))
            logger.info("source %s: created publication %s FOR ALL TABLES", source, publication)
        else:
            logger.info("source %s: publication %s already exists", source, publication)
        return
    tables = captured_tables(conn, table_filter)
    if not tables:
        raise CaptureError(
            f"source {source}: publication.autocreate.mode is 'filtered' but no table matches "
            "the include/exclude lists"
        )
    names = sql.SQL(", ").join(sql.Identifier(sch, tbl) for sch, tbl in tables)
    if exists is None:
        conn.execute(sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(pub, names))
        logger.info(
            "source %s: created publication %s for %d table(s)", source, publication, len(tables)
        )
    else:
        # Keep the publication in step with the filters, as Debezium's 'filtered' mode does.
        conn.execute(sql.SQL("ALTER PUBLICATION {} SET TABLE {}").format(pub, names))
        logger.info(
            "source %s: publication %s already exists; set to %d table(s)",
            source,
            publication,
            len(tables),
        )


def slot_state(
    conn: psycopg.Connection[Any], source: str, slot: str, dbname: str
) -> SlotState | None:
    """The slot's state, or None if it does not exist.

    Raises:
        CaptureError: The slot exists for another plugin or database.
    """
    row = conn.execute(
        "SELECT confirmed_flush_lsn::text, plugin, database, active,"
        " CASE WHEN current_setting('server_version_num')::int >= 130000"
        " THEN (to_jsonb(s) ->> 'wal_status') END"
        " FROM pg_replication_slots s WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return None
    if row[1] != "pgoutput" or row[2] != dbname:
        raise CaptureError(
            f"source {source}: slot {slot!r} exists for plugin {row[1]!r} in database "
            f"{row[2]!r}, not pgoutput in {dbname!r}; choose another slot.name"
        )
    return SlotState(0 if row[0] is None else parse_lsn(row[0]), row[4], bool(row[3]))


def _marker(slot: str, source: str) -> bytes:
    return f"{slot}:{source}".encode()


def create_slot(
    repl: psycopg.Connection[Any],
    conn: psycopg.Connection[Any],
    source: str,
    slot: str,
    *,
    export: bool,
) -> tuple[int, str | None]:
    """``CREATE_REPLICATION_SLOT slot LOGICAL pgoutput``, then write the ownership marker.

    Args:
        repl: A replication connection. With ``export``, the snapshot it exports lives until
            this connection runs another command, so it must stay idle until imported.
        conn: An ordinary connection, for the marker.
        source: The source name (part of the marker).
        slot: The slot name.
        export: ``EXPORT_SNAPSHOT`` (for a consistent initial snapshot) or not.

    Returns:
        The slot's consistent point and the exported snapshot's name (None without export).
    """
    command = sql.SQL("CREATE_REPLICATION_SLOT {} LOGICAL pgoutput {}").format(
        sql.Identifier(slot), sql.SQL("EXPORT_SNAPSHOT" if export else "NOEXPORT_SNAPSHOT")
    )
    row = repl.execute(command).fetchone()
    if row is None:
        raise InternalError(f"source {source}: CREATE_REPLICATION_SLOT returned no row")
    logger.info("source %s: created slot %s at %s", source, slot, row[1])
    conn.execute(
        "SELECT pg_logical_emit_message(false, %s, %s)",
        (SLOT_MARKER_PREFIX, _marker(slot, source).decode()),
    )
    return parse_lsn(row[1]), row[2]


def emit_marker(conn: psycopg.Connection[Any], source: str, slot: str) -> None:
    """Write a slot marker into the WAL (a non-transactional logical message the agent reads
    and skips): on an idle database it gives a heartbeat a new position to confirm."""
    conn.execute(
        "SELECT pg_logical_emit_message(false, %s, %s)",
        (SLOT_MARKER_PREFIX, _marker(slot, source).decode()),
    )


def is_marker(message: LogicalMessage) -> bool:
    """Whether a decoded message is an agent's slot marker (never landed as a change)."""
    return not message.transactional and message.prefix == SLOT_MARKER_PREFIX


def slot_is_ours(conn: psycopg.Connection[Any], source: str, slot: str, publication: str) -> bool:
    """Whether an existing, inactive slot was created by this agent for this source.

    Peeks (without consuming) the first changes the slot would decode for the marker message
    :func:`create_slot` wrote. A slot in use, or without the marker, is not ours.
    """
    try:
        rows = conn.execute(
            "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, 64,"
            " 'proto_version', '1', 'publication_names', %s, 'messages', 'true')",
            (slot, publication_option(publication, conn)),
        ).fetchall()
    except psycopg.Error as exc:
        logger.info("source %s: cannot peek slot %s: %s", source, slot, str(exc).strip())
        return False
    expected = _marker(slot, source)
    for (data,) in rows:
        try:
            message = decode_message(data)
        except ProtocolError:
            continue
        if isinstance(message, LogicalMessage) and is_marker(message):
            return message.content == expected
    return False


def drop_slot(conn: psycopg.Connection[Any], slot: str) -> None:
    """Drop the slot if it exists."""
    conn.execute(
        "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    )


def slot_lag(conn: psycopg.Connection[Any], slot: str) -> dict[str, Any] | None:
    """The slot's state and the WAL it holds back, for ``medallion status``; None if no slot.

    Args:
        conn: An ordinary connection to the slot's database server.
        slot: The slot name.

    Returns:
        ``slot``, ``active`` (a consumer is connected), ``restart_lsn``, ``confirmed_flush_lsn``,
        ``wal_status`` (``reserved``, ``extended``, ``unreserved`` or ``lost``),
        ``lag_bytes`` (WAL written since the slot's confirmed flush LSN: what the agent has not
        acknowledged yet) and ``retained_wal_bytes`` (WAL since ``restart_lsn``: what the server
        keeps on disk for the slot), ``safe_wal_bytes`` (WAL that can still be written before
        the slot is invalidated by ``max_slot_wal_keep_size``: the retention headroom; None when
        the setting is unlimited). Byte counts are None when the slot has no such LSN.
    """
    row = conn.execute(
        "SELECT active, restart_lsn::text, confirmed_flush_lsn::text, wal_status,"
        " pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint,"
        " pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint, safe_wal_size"
        " FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return None
    active, restart, confirmed, wal_status, lag, retained, safe = row
    return {
        "slot": slot,
        "active": bool(active),
        "restart_lsn": restart,
        "confirmed_flush_lsn": confirmed,
        "wal_status": wal_status,
        "lag_bytes": lag,
        "retained_wal_bytes": retained,
        "safe_wal_bytes": safe,
    }
