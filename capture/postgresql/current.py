"""What reconciliation reads of a PostgreSQL source (its ``CurrentStateReader`` side).

:func:`slot_changes_after` answers "changes after the cut" from a peeked copy of the agent's
replication slot.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import psycopg

from bronze.positions import decode_position
from capture.current_state import LogCheck
from capture.postgresql.pgoutput import (
    Begin,
    Delete,
    Insert,
    Relation,
    Truncate,
    Update,
    decode_message,
)
from capture.postgresql.position import format_pg_lsn
from pipeline.errors import PipelineError

if TYPE_CHECKING:
    from capture.postgresql.source import PgSourceSettings

__all__ = ["slot_changes_after"]

logger = logging.getLogger(__name__)


def slot_changes_after(
    name: str,
    settings: PgSourceSettings,
    connect: Callable[[], psycopg.Connection[Any]],
    position: bytes,
    lsn: int,
) -> LogCheck:
    """Decode a temporary copy of the agent's slot up to ``lsn``: a captured change after the cut?

    The copy starts where the agent's slot is confirmed, so it sees exactly what the agent has
    not acknowledged yet; peeking it consumes nothing, and the copy dies with the session.

    Args:
        name: The source's name (for messages).
        settings: The agent's settings (slot, publication, table filter).
        connect: Opens a connection with the agent's own settings (host, credentials, session).
        position: The cut's encoded bronze position.
        lsn: The WAL LSN of the current-state read.

    Returns:
        Whether a captured change committed after the cut, and why; None when it cannot be told.
    """
    try:
        at_cut: Any = decode_position("postgresql", position)
        cut_commit = int(at_cut.commit_lsn)
    except (PipelineError, AttributeError) as exc:
        return LogCheck(None, f"the cut's position is not a PostgreSQL position ({exc})")
    copy = f"medallion_reconcile_{uuid.uuid4().hex[:16]}"
    conn = connect()
    try:
        found = conn.execute(
            "SELECT 1 FROM pg_replication_slots WHERE slot_name = %s AND slot_type = 'logical'",
            (settings.slot_name,),
        ).fetchone()
        if found is None:
            return LogCheck(None, f"slot {settings.slot_name} does not exist")
        conn.execute(
            "SELECT pg_copy_logical_replication_slot(%s, %s, true)", (settings.slot_name, copy)
        )
        # Only Begin (commit LSN), Relation (names) and the change messages are needed.
        messages = conn.execute(
            "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL,"
            " 'proto_version', '1', 'publication_names', %s)"
            " WHERE get_byte(data, 0) IN (66, 82, 73, 85, 68, 84)",
            (copy, format_pg_lsn(lsn), settings.publication_name),
        )
        captured: dict[int, bool] = {}
        commit = 0
        for (data,) in messages:
            message = decode_message(bytes(data))
            if isinstance(message, Begin):
                commit = message.final_lsn
            elif isinstance(message, Relation):
                captured[message.relation_id] = settings.table_filter.table(
                    message.namespace or "pg_catalog", message.name
                )
            elif isinstance(message, (Insert, Update, Delete)):
                if commit > cut_commit and captured.get(message.relation_id, True):
                    return LogCheck(True, f"a captured change committed at {format_pg_lsn(commit)}")
            elif isinstance(message, Truncate):
                if commit > cut_commit and any(captured.get(r, True) for r in message.relation_ids):
                    return LogCheck(
                        True, f"a captured truncate committed at {format_pg_lsn(commit)}"
                    )
        return LogCheck(False, "no captured change after the cut in the slot")
    except psycopg.Error as exc:
        logger.warning("reconcile %s: cannot peek the slot: %s", name, exc)
        return LogCheck(None, f"cannot peek slot {settings.slot_name}: {str(exc).strip()}")
    finally:
        conn.close()
