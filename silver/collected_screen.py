"""The per-table screen of a collected micro-batch, on the driver.

Before decoding a table's events, the silver job asks one question of them, per value schema:
how many have an op silver knows, how many carry the C1 header (a value without a
representation), which are truncates, which have no key, which come from a document connector,
and the positions of the first row event, of the oldest and newest known event. For a
micro-batch the job already holds on the driver (:mod:`silver.collected_split`), that aggregate
was still a Spark job per table in every micro-batch; :func:`screen_collected` answers it from
the collected rows for every table at once, with Spark SQL's semantics spelled out (an op that
is null is neither known nor a row op; ``count_if`` of null counts nothing; min/max skip nulls;
binary compares as unsigned bytes, as Python's ``bytes`` do).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from bronze import schema as B

__all__ = ["Screen", "screen_collected"]

Screen = list[dict[str, Any]]
"""One row per value schema id of a table's events, with the fields of the silver job's screen
aggregate: ``value_schema_id``, ``unknown``, ``known``, ``unrepresentable``, ``truncates``
(``(position, source_ts_ms)`` pairs), ``keyless``, ``documents``, ``first``, ``oldest``,
``top``."""

_ROW_OPS = frozenset(("c", "u", "d", "r"))


def _flagged_rows(headers: pa.ChunkedArray, key: str) -> set[int]:
    """Rows whose header list holds a header named ``key``."""
    flat = pa.chunked_array(headers.chunks, type=headers.type).combine_chunks()
    if len(flat) == 0:
        return set()
    parents = pc.list_parent_indices(flat)
    names = pc.struct_field(pc.list_flatten(flat), "key")
    hits = pc.filter(parents, pc.fill_null(pc.equal(names, key), False))
    return set(hits.to_pylist())


def _low(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _high(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def screen_collected(
    data: pa.Table,
    *,
    known_ops: Collection[str],
    document_connectors: Collection[str],
    unrepresentable_header: str,
) -> dict[tuple[Any, Any], Screen]:
    """Screen every table's data rows of a collected micro-batch.

    Args:
        data: The micro-batch's data rows (bronze ``events`` columns).
        known_ops: Ops silver applies (the rest are quarantined as unknown).
        document_connectors: Connectors whose events are documents, not rows.
        unrepresentable_header: The C1 header's name.

    Returns:
        ``(source, collection)`` -> the table's screen, one row per value schema id.
    """
    unrepresentable = _flagged_rows(data.column(B.HEADERS), unrepresentable_header)
    columns = [
        B.SOURCE,
        B.COLLECTION,
        B.VALUE_SCHEMA_ID,
        B.OP,
        B.POSITION,
        B.SOURCE_TS_MS,
        B.CONNECTOR,
    ]
    keyless = pc.is_null(data.column(B.KEY_JSON)).to_pylist()
    groups: dict[tuple[Any, Any], dict[Any, dict[str, Any]]] = {}
    for i, r in enumerate(data.select(columns).to_pylist()):
        op, position = r[B.OP], r[B.POSITION]
        schemas = groups.setdefault((r[B.SOURCE], r[B.COLLECTION]), {})
        g = schemas.get(r[B.VALUE_SCHEMA_ID])
        if g is None:
            g = schemas[r[B.VALUE_SCHEMA_ID]] = {
                B.VALUE_SCHEMA_ID: r[B.VALUE_SCHEMA_ID],
                "unknown": 0,
                "known": 0,
                "unrepresentable": 0,
                "truncates": [],
                "keyless": 0,
                "documents": 0,
                "first": None,
                "oldest": None,
                "top": None,
            }
        known = op in known_ops  # a null op is not known (coalesce(op IN (...), false))
        row_op = op in _ROW_OPS
        if not known:
            g["unknown"] += 1
            continue
        g["known"] += 1
        if r[B.CONNECTOR] in document_connectors:
            g["documents"] += 1
        if op == "t":
            g["truncates"].append((position, r[B.SOURCE_TS_MS]))
        g["oldest"] = _low(g["oldest"], position)
        g["top"] = _high(g["top"], position)
        if row_op:
            g["first"] = _low(g["first"], position)
            g["unrepresentable"] += i in unrepresentable
            g["keyless"] += keyless[i]
    return {table: list(schemas.values()) for table, schemas in groups.items()}
