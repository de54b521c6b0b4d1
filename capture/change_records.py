"""The records of one decoded row change, as Debezium writes them.

Every database agent decodes its log into ``before``/``after`` images and keys; these functions
turn them into records alike: an insert (``c``), a delete (``d``) and its tombstone, an update
(``u``), or an update that moved the primary key (a delete and a create carrying each other's
key in headers), honouring ``skipped.operations``, ``tombstones.on.delete`` and
``provide.transaction.metadata`` (:class:`~capture.captured_table.AgentRules`).
"""

from __future__ import annotations

import datetime as dt
import time
from typing import TYPE_CHECKING, Any

import orjson

from bronze.envelope import (
    HEADER_NEW_KEY,
    HEADER_OLD_KEY,
    ConnectRecord,
    Op,
    RecordKind,
    TransactionInfo,
    built_data_event,
    fast_record,
    tombstone_for,
)
from capture.captured_table import HEADER_UNREPRESENTABLE, AgentRules, CapturedTable, Image

if TYPE_CHECKING:
    from bronze.batch import BatchBuilder
    from bronze.positions import Position
    from capture.database_source import OpenTransaction

__all__ = [
    "RowAppender",
    "data_record",
    "delete_records",
    "insert_records",
    "key_move_records",
    "update_records",
]


def data_record(
    op: str,
    source: dict[str, Any],
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    key: Any,
    transaction: TransactionInfo | None,
    table: CapturedTable,
    headers: tuple[tuple[str, str | None], ...] = (),
) -> ConnectRecord:
    """What :func:`bronze.envelope.data_record` builds, without its check: ``_add`` classifies
    (and so checks) every record once, and checking twice costs a sixth of the snapshot time.

    A ``before``/``after`` :class:`capture.captured_table.Image` (a value without a
    representation, written as null) adds the ``__medallion.unrepresentable`` header (C1)."""
    if (before is not None and before.__class__ is not dict) or (
        after is not None and after.__class__ is not dict
    ):
        before, after, headers = _unrepresentable(before, after, headers)
    value: dict[str, Any] = {
        "before": before,
        "after": after,
        "source": source,
        "op": op,
        "ts_ms": time.time_ns() // 1_000_000,
    }
    if transaction is not None:
        value["transaction"] = {
            "id": transaction.id,
            "total_order": transaction.total_order,
            "data_collection_order": transaction.data_collection_order,
        }
    return fast_record(key, value, table.key_schema, table.envelope_schema, headers, table.topic)


def _unrepresentable(
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    headers: tuple[tuple[str, str | None], ...],
) -> tuple[dict[str, Any] | None, dict[str, Any] | None, tuple[tuple[str, str | None], ...]]:
    """Plain-dict images and the C1 header naming their unrepresentable values."""
    issues: dict[str, Any] = {}
    if isinstance(before, Image):
        issues["before"] = before.issues
        before = dict(before)
    if isinstance(after, Image):
        issues["after"] = after.issues
        after = dict(after)
    if not issues:
        return before, after, headers
    return before, after, (*headers, (HEADER_UNREPRESENTABLE, orjson.dumps(issues).decode()))


def insert_records(
    source: dict[str, Any],
    after: dict[str, Any] | None,
    key: Any,
    table: CapturedTable,
    tx: OpenTransaction,
    rules: AgentRules,
) -> list[ConnectRecord]:
    """An insert (op ``c``); nothing when ``skipped.operations`` has ``c``."""
    if "c" in rules.skipped_operations:
        return []
    block = tx.block(table.collection, rules.provide_transaction_metadata)
    return [data_record(_OP_CREATE, source, None, after, key, block, table)]


def delete_records(
    source: dict[str, Any],
    before: dict[str, Any] | None,
    key: Any,
    table: CapturedTable,
    tx: OpenTransaction,
    rules: AgentRules,
) -> list[ConnectRecord]:
    """A delete (op ``d``) and, with ``tombstones.on.delete`` and a key, its tombstone; nothing
    when ``skipped.operations`` has ``d``."""
    if "d" in rules.skipped_operations:
        return []
    block = tx.block(table.collection, rules.provide_transaction_metadata)
    delete = data_record(_OP_DELETE, source, before, None, key, block, table)
    if rules.tombstones_on_delete and key is not None:
        return [delete, tombstone_for(delete)]
    return [delete]


def update_records(
    source: dict[str, Any],
    images: tuple[dict[str, Any] | None, dict[str, Any] | None],
    keys: tuple[Any, Any],
    table: CapturedTable,
    tx: OpenTransaction,
    rules: AgentRules,
) -> list[ConnectRecord]:
    """An update (op ``u``) from its ``(before, after)`` images and ``(old, new)`` keys, or,
    when it changed the primary key, :func:`key_move_records`."""
    old_key, new_key = keys
    if old_key != new_key and old_key is not None and new_key is not None:
        return key_move_records(source, images, keys, table, tx, rules)
    if "u" in rules.skipped_operations:
        return []
    block = tx.block(table.collection, rules.provide_transaction_metadata)
    return [data_record(_OP_UPDATE, source, *images, new_key, block, table)]


def key_move_records(
    source: dict[str, Any],
    images: tuple[dict[str, Any] | None, dict[str, Any] | None],
    keys: tuple[Any, Any],
    table: CapturedTable,
    tx: OpenTransaction,
    rules: AgentRules,
) -> list[ConnectRecord]:
    """An update that changed the primary key, as Debezium writes it (spec §1.7): a delete of
    the old key carrying ``__debezium.newkey``, its tombstone, and a create of the new key
    carrying ``__debezium.oldkey``; ``skipped.operations`` ``d``/``c`` drop their halves."""
    (before, after), (old_key, new_key) = images, keys
    skipped, metadata = rules.skipped_operations, rules.provide_transaction_metadata
    out: list[ConnectRecord] = []
    ahead = 0
    if "d" not in skipped:
        delete = data_record(
            _OP_DELETE,
            source,
            before,
            None,
            old_key,
            tx.block(table.collection, metadata),
            table,
            ((HEADER_NEW_KEY, orjson.dumps(new_key).decode()),),
        )
        out.append(delete)
        ahead = 1
        if rules.tombstones_on_delete:
            out.append(tombstone_for(delete))
    if "c" not in skipped:
        out.append(
            data_record(
                _OP_CREATE,
                source,
                None,
                after,
                new_key,
                tx.block(table.collection, metadata, ahead),
                table,
                ((HEADER_OLD_KEY, orjson.dumps(old_key).decode()),),
            )
        )
    return out


_OP_CREATE, _OP_UPDATE, _OP_DELETE = Op.CREATE.value, Op.UPDATE.value, Op.DELETE.value


class RowAppender:
    """Appends an agent's own row changes to a bronze batch without record objects.

    What ``DatabaseSource._add`` lands for a record of :func:`data_record` (through
    :func:`bronze.envelope.built_data_event` and :meth:`bronze.batch.BatchBuilder.add_event`),
    derived straight from the record's parts: the envelope dict is built and serialized, and
    one bronze row appended. What is fixed per table (connector, collection, the normalized
    ``snapshot``) is worked out once, by ``built_data_event`` itself on the table's first
    record (of the table's connector and ``snapshot`` value: an agent's table is one source
    table), so both roads share their helpers; ``tests/unit/test_row_appender.py`` compares
    the rows of the two.

    Only plain-dict images without headers come here (an unrepresentable value's
    :class:`~capture.captured_table.Image`, or a key move, takes :func:`data_record`), with an
    int ``source.ts_ms`` as every agent writes it.

    Args:
        partition: The agent's Debezium source partition (every row's ``source_partition``).
    """

    __slots__ = ("_fixed", "partition")

    def __init__(self, partition: str | None) -> None:
        self.partition = partition
        self._fixed: dict[
            tuple[int, Any, Any], tuple[CapturedTable, str | None, str | None, str | None]
        ] = {}

    def add(
        self,
        builder: BatchBuilder,
        op: str,
        source: dict[str, Any],
        images: tuple[dict[str, Any] | None, dict[str, Any] | None],
        key: Any,
        transaction: TransactionInfo | None,
        table: CapturedTable,
        at: tuple[Position, str, dt.datetime, str | None],
    ) -> None:
        """Append the data event ``op`` of ``table``: ``images`` is ``(before, after)``, ``at``
        the record's ``(position, origin, capture time, transaction id)``."""
        ts_ms = time.time_ns() // 1_000_000
        value: dict[str, Any] = {
            "before": images[0],
            "after": images[1],
            "source": source,
            "op": op,
            "ts_ms": ts_ms,
        }
        total = per_table = None
        if transaction is not None:
            total, per_table = transaction.total_order, transaction.data_collection_order
            value["transaction"] = {
                "id": transaction.id,
                "total_order": total,
                "data_collection_order": per_table,
            }
        fixed = self._fixed.get((id(table), source["connector"], source["snapshot"]))
        if fixed is None or fixed[0] is not table:
            fixed = self._learn(table, key, value)
        position, origin, now, tx_id = at
        builder.append_row(
            (
                fixed[1],
                self.partition,
                fixed[2],
                table.topic,
                _KIND_DATA,
                op,
                position.encode(),
                position.seq,
                tx_id,
                total,
                per_table,
                None,
                None,
                fixed[3],
                None if key is None else orjson.dumps(key).decode(),
                orjson.dumps(value).decode(),
                None if table.key_schema is None else table.key_schema_id,
                None if table.envelope_schema is None else table.envelope_schema_id,
                None,
                source["ts_ms"],
                ts_ms,
                now,
                origin,
            )
        )

    def _learn(
        self, table: CapturedTable, key: Any, value: dict[str, Any]
    ) -> tuple[CapturedTable, str | None, str | None, str | None]:
        """What ``built_data_event`` derives from this table's records alike."""
        event = built_data_event(
            fast_record(key, value, table.key_schema, table.envelope_schema, (), table.topic)
        )
        fixed = (table, event.connector, event.collection, event.snapshot)
        if len(self._fixed) >= 4096:
            self._fixed.clear()
        source = value["source"]
        self._fixed[(id(table), source["connector"], source["snapshot"])] = fixed
        return fixed


_KIND_DATA = RecordKind.DATA.value
