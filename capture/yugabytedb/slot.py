"""Replication-slot SQL of the YugabyteDB agent (spec B1, B2, B4).

YugabyteDB's slots differ from PostgreSQL's where this module is used instead of
:mod:`capture.postgresql.slot`:

* ``CREATE_REPLICATION_SLOT s LOGICAL <yboutput|pgoutput> [HYBRID_TIME]``: the plugin is
  configurable, the LSN type is fixed at creation (``SEQUENCE``, the server default, is not
  written, so the command is also PostgreSQL's); the result's ``snapshot_name`` is the hybrid
  time of the slot's consistent point, read with ``SET LOCAL yb_read_time``.
* No ownership marker: YugabyteDB has no ``pg_logical_emit_message`` slot peek, and a slot must
  never be dropped by the agent (another consumer would lose its changes).
* No ``pg_current_wal_lsn``/``pg_wal_lsn_diff``: the status reports the slot without WAL sizes.

Identifiers are composed with ``psycopg.sql``, never formatted in.
"""

from __future__ import annotations

import logging
from typing import Any

import orjson
import psycopg
from psycopg import sql

from bronze.storage import LakePath, replace_bytes
from capture.postgresql.slot import SlotState, parse_lsn
from pipeline.errors import CaptureError, InternalError

__all__ = [
    "create_slot",
    "read_time_literal",
    "record_slot",
    "recorded_slot",
    "restart_read_time",
    "slot_state",
    "slot_status",
]

logger = logging.getLogger(__name__)


def create_slot(
    repl: psycopg.Connection[Any], source: str, slot: str, plugin: str, lsn_type: str
) -> tuple[int, str | None]:
    """Create the slot; return its consistent point and the snapshot's hybrid time (as text).

    Args:
        repl: A replication connection.
        source: The source name, for messages.
        slot: The slot name.
        plugin: ``yboutput`` or ``pgoutput``.
        lsn_type: ``SEQUENCE`` or ``HYBRID_TIME``.
    """
    command = sql.SQL("CREATE_REPLICATION_SLOT {} LOGICAL {}{}").format(
        sql.Identifier(slot),
        sql.Identifier(plugin),
        sql.SQL(" HYBRID_TIME" if lsn_type == "HYBRID_TIME" else ""),
    )
    row = repl.execute(command).fetchone()
    if row is None:
        raise InternalError(f"source {source}: CREATE_REPLICATION_SLOT returned no row")
    logger.info("source %s: created slot %s (%s, %s) at %s", source, slot, plugin, lsn_type, row[1])
    return parse_lsn(row[1]), None if row[2] is None else str(row[2])


def slot_state(
    conn: psycopg.Connection[Any], source: str, slot: str, dbname: str, plugin: str
) -> SlotState | None:
    """The slot's state, or None if it does not exist.

    Raises:
        CaptureError: The slot exists for another plugin or database.
    """
    row = conn.execute(
        "SELECT confirmed_flush_lsn::text, plugin, database, active"
        " FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return None
    if row[1] != plugin or row[2] != dbname:
        raise CaptureError(
            f"source {source}: slot {slot!r} exists for plugin {row[1]!r} in database "
            f"{row[2]!r}, not {plugin} in {dbname!r}; choose another slot.name"
        )
    return SlotState(0 if row[0] is None else parse_lsn(row[0]), None, bool(row[3]))


def read_time_literal(source: str, hybrid_time: str) -> sql.Composable:
    """``'<hybrid time> ht'``, the value ``yb_read_time`` takes, from a checked number."""
    text = str(hybrid_time).strip()
    if not text.isdigit():
        raise CaptureError(
            f"source {source}: the slot's snapshot point {hybrid_time!r} is not a hybrid time "
            "(is the server YugabyteDB? PostgreSQL exports snapshot names instead)"
        )
    return sql.Literal(f"{text} ht")


def restart_read_time(conn: psycopg.Connection[Any], source: str, slot: str) -> str:
    """The slot's ``yb_restart_commit_ht``: its consistent point until anything is confirmed."""
    try:
        row = conn.execute(
            "SELECT yb_restart_commit_ht::text FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        ).fetchone()
    except psycopg.Error as exc:
        raise CaptureError(
            f"source {source}: cannot read yb_restart_commit_ht of slot {slot!r}: "
            f"{str(exc).strip()}"
        ) from exc
    if row is None or row[0] is None:
        raise CaptureError(f"source {source}: slot {slot!r} has no restart hybrid time")
    return str(row[0])


def slot_status(conn: psycopg.Connection[Any], slot: str) -> dict[str, Any] | None:
    """The slot for ``medallion status`` (None if missing): no WAL sizes, which YugabyteDB
    cannot compute (``pg_wal_lsn_diff`` is unsupported and its LSNs are not byte offsets)."""
    row = conn.execute(
        "SELECT active, restart_lsn::text, confirmed_flush_lsn::text"
        " FROM pg_replication_slots WHERE slot_name = %s",
        (slot,),
    ).fetchone()
    if row is None:
        return None
    return {
        "slot": slot,
        "active": bool(row[0]),
        "restart_lsn": row[1],
        "confirmed_flush_lsn": row[2],
        "wal_status": None,
        "lag_bytes": None,
        "retained_wal_bytes": None,
        "safe_wal_bytes": None,
    }


def record_slot(path: LakePath, slot: str, hybrid_time: str) -> None:
    """Record that the agent created ``slot`` with its consistent point at ``hybrid_time``
    (written whole: a reader never sees half a record)."""
    replace_bytes(path, orjson.dumps({"slot": slot, "consistent_ht": str(hybrid_time)}))


def recorded_slot(path: LakePath, slot: str) -> str | None:
    """The consistent point recorded for ``slot`` by :func:`record_slot` (None: no record of
    that slot, or a record that cannot be read, which proves nothing)."""
    try:
        record = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    if not isinstance(record, dict) or record.get("slot") != slot:
        return None
    found = record.get("consistent_ht")
    return None if found is None else str(found)
