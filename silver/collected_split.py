"""The transaction split of a small micro-batch, decided on the driver from its collected rows.

:func:`silver.transactions.split_complete` answers "which rows can be applied now" with joins
and aggregates over the micro-batch and ``silver/_pending``: about twenty Spark jobs (each scan
of the bronze rows lists its files with a job of its own), whatever the micro-batch holds. A
continuous pipeline's micro-batch is a few hundred rows, so the silver job collects it to the
driver in one job (:mod:`silver.job`) and :func:`split_collected` decides the same split in
Python: the same rules, the same results (``tests/integration/test_silver_split_paths.py`` runs
both on the same rows), no Spark job. The rules are those of :mod:`silver.transactions`; each
step below names the part of ``split_complete`` it mirrors, with its SQL null semantics
(a comparison with null is unknown, ``coalesce(..., false)`` makes it false).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from bronze import schema as B
from silver.transactions import RELEASED

__all__ = ["CollectedSplit", "split_collected"]

_NEEDED = (
    B.SOURCE,
    B.SOURCE_PARTITION,
    B.COLLECTION,
    B.KIND,
    B.POSITION,
    B.TX_ID,
    B.TX_ORDER,
    B.TX_STATUS,
    B.TX_EVENT_COUNT,
    B.INGEST_TS,
)

Key = tuple[Any, Any]
"""A transaction: ``(source, tx_id)``."""


@dataclass(frozen=True, slots=True)
class CollectedSplit:
    """Collected bronze rows split by transaction completeness (see
    :class:`silver.transactions.TransactionSplit`, whose fields these are, as Arrow tables)."""

    ready: pa.Table
    waiting: pa.Table
    timed_out: int
    held: int = 0
    held_rows: int = 0


@dataclass(slots=True)
class _Seen:
    """``seen`` of ``split_complete``: one transaction's counted events and markers."""

    positions: set[bytes] = field(default_factory=set)
    first: dt.datetime | None = None
    partition: str | None = None
    released: dt.datetime | None = None


@dataclass(slots=True)
class _End:
    """``ends`` of ``split_complete``: one transaction's END records."""

    expected: int | None = None
    first: dt.datetime | None = None


def _min(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else min(a, b)


def _max(a: Any, b: Any) -> Any:
    return b if a is None else a if b is None else max(a, b)


def _joinable(key: Key) -> bool:
    """An equi-join never matches a null key column."""
    return key[0] is not None and key[1] is not None


def _counted(r: dict[str, Any]) -> bool:
    return r[B.KIND] in ("data", "message") and r[B.TX_ORDER] is not None and r[B.TX_ID] is not None


def _is_marker(r: dict[str, Any]) -> bool:
    return r[B.KIND] == "transaction" and r[B.TX_STATUS] == RELEASED


def _is_end(r: dict[str, Any]) -> bool:
    return r[B.KIND] == "transaction" and r[B.TX_STATUS] == "END"


def _data_collections(value_json: str | None) -> list[tuple[str | None, int | None]]:
    """``from_json(get_json_object(value_json, '$.data_collections'), array<struct<...>>)``,
    exploded: what END names, as Debezium writes it (a list of objects)."""
    if value_json is None:
        return []
    try:
        value = orjson.loads(value_json)
    except orjson.JSONDecodeError:
        return []
    found = value.get("data_collections") if isinstance(value, dict) else None
    if not isinstance(found, list):
        return []
    out: list[tuple[str | None, int | None]] = []
    for item in found:
        if not isinstance(item, dict):
            out.append((None, None))
            continue
        name, count = item.get("data_collection"), item.get("event_count")
        out.append(
            (
                name if isinstance(name, str) else None,
                count if isinstance(count, int) and not isinstance(count, bool) else None,
            )
        )
    return out


def _matches(name: str | None, collection: str | None) -> bool:
    return (
        name is not None
        and collection is not None
        and (name == collection or name.endswith("." + collection))
    )


def _short(rows: Iterable[dict[str, Any]]) -> set[Key]:
    """``_collections_short``: transactions a table named by END has fewer events than END
    counts for it (or one it names is unseen while every table seen is named)."""
    per_table: dict[Key, dict[str | None, set[bytes]]] = {}
    wanted: dict[Key, dict[str | None, int | None]] = {}
    for r in rows:
        key = (r[B.SOURCE], r[B.TX_ID])
        if _counted(r):
            seen = per_table.setdefault(key, {}).setdefault(r[B.COLLECTION], set())
            if r[B.POSITION] is not None:
                seen.add(r[B.POSITION])
        elif _is_end(r):
            names = wanted.setdefault(key, {})
            for name, count in _data_collections(r[B.VALUE_JSON]):
                names.setdefault(name, count)  # dropDuplicates([txn, name])
    short: set[Key] = set()
    for key, names in wanted.items():
        if not _joinable(key):
            continue
        tables = {c: len(p) for c, p in per_table.get(key, {}).items()}
        fewer: bool | None = None
        unseen = False
        for name, count in names.items():
            matched = [n for c, n in tables.items() if _matches(name, c)]
            if not matched:
                unseen = True
            for n in matched:
                if count is not None:
                    fewer = (n < count) or bool(fewer)
        unnamed = any(not any(_matches(name, c) for name in names) for c in tables)
        if fewer or (unseen and not unnamed):
            short.add(key)
    return short


def split_collected(rows: pa.Table, *, now: dt.datetime, timeout_seconds: float) -> CollectedSplit:
    """Split collected bronze rows as :func:`silver.transactions.split_complete` splits them.

    Args:
        rows: Bronze ``events`` rows (this micro-batch plus the rows of ``silver/_pending``),
            every column the caller wants back; the split reads the transaction columns.
        now: The clock of the silver batch (UTC), for the timeout.
        timeout_seconds: How long a transaction waits for its END.

    Returns:
        The split; ``ready`` and ``waiting`` have ``rows``' schema.
    """
    cutoff = now - dt.timedelta(seconds=timeout_seconds)
    kind = rows.column(B.KIND)
    is_transaction = pc.fill_null(pc.equal(kind, "transaction"), False)
    # Rows without a transaction id are ready whatever happens, unless they are transaction
    # records (an END without an id still counts as a transaction of its own, as in Spark).
    taking_part = rows.filter(pc.or_(pc.is_valid(rows.column(B.TX_ID)), is_transaction))
    is_end = pc.fill_null(
        pc.and_(
            pc.equal(taking_part.column(B.KIND), "transaction"),
            pc.equal(taking_part.column(B.TX_STATUS), "END"),
        ),
        False,
    )
    # Only END's value is read (its data_collections); the events' values stay in Arrow.
    end_values = pc.if_else(is_end, taking_part.column(B.VALUE_JSON), None)
    records = taking_part.select(list(_NEEDED)).append_column(B.VALUE_JSON, end_values).to_pylist()
    seen: dict[Key, _Seen] = {}
    ends: dict[Key, _End] = {}
    newest: dict[tuple[Any, str], tuple[bytes, Any]] = {}
    for r in records:
        key = (r[B.SOURCE], r[B.TX_ID])
        counted, marker = _counted(r), _is_marker(r)
        if counted or marker:
            s = seen.setdefault(key, _Seen())
            if counted:
                if r[B.POSITION] is not None:
                    s.positions.add(r[B.POSITION])
                s.first = _min(s.first, r[B.INGEST_TS])
                s.partition = _max(s.partition, r[B.SOURCE_PARTITION] or "")
            elif r[B.INGEST_TS] is not None and r[B.INGEST_TS] >= cutoff:
                s.released = _max(s.released, r[B.INGEST_TS])
        if _is_end(r):
            e = ends.setdefault(key, _End())
            e.expected = _max(e.expected, r[B.TX_EVENT_COUNT])
            e.first = _min(e.first, r[B.INGEST_TS])
        begins = r[B.KIND] == "transaction" and r[B.TX_STATUS] == "BEGIN"
        # _newest_transaction: max_by(tx_id, position) skips rows without a position.
        if (counted or begins) and r[B.TX_ID] is not None and r[B.POSITION] is not None:
            stream = (r[B.SOURCE], r[B.SOURCE_PARTITION] or "")
            top = newest.get(stream)
            if top is None or r[B.POSITION] > top[0]:
                newest[stream] = (r[B.POSITION], r[B.TX_ID])
    short = _short(records)

    # The full join of ``seen`` and ``ends``: keys with a null column never meet.
    statuses: list[tuple[Key, _Seen | None, _End | None]] = []
    for key, s in seen.items():
        statuses.append((key, s, ends.get(key) if _joinable(key) else None))
    statuses += [(k, None, e) for k, e in ends.items() if not (_joinable(k) and k in seen)]

    timed_out = held = held_rows = 0
    held_keys: set[Key] = set()
    marked: list[tuple[Key, dt.datetime]] = []
    for key, got, end in statuses:
        n_seen = len(got.positions) if got is not None else None
        expected = end.expected if end is not None else None
        is_short = key in short if _joinable(key) else False
        in_full = (
            not is_short and n_seen is not None and expected is not None and n_seen >= expected
        )
        superseded = False
        if got is not None and got.partition is not None and _joinable(key):
            top = newest.get((key[0], got.partition))
            superseded = top is not None and top[1] != key[1]
        released = got.released if got is not None else None
        complete = in_full or superseded or released is not None
        first = got.first if got is not None else None
        if first is None and end is not None:  # coalesce(__first, __end_first)
            first = end.first
        expired = first is not None and first < cutoff
        has_data = bool(n_seen)
        if has_data and not complete and expired:
            timed_out += 1
        if not complete and not expired:
            held += 1
            held_rows += (n_seen or 0) + 1
            held_keys.add(key)
        mark = now if has_data and not in_full and complete else released
        if mark is not None:
            marked.append((key, mark))

    marker_mask = pc.and_(
        is_transaction, pc.fill_null(pc.equal(rows.column(B.TX_STATUS), RELEASED), False)
    )
    rows_in = rows.filter(pc.invert(marker_mask))
    kept = pa.Table.from_pylist(
        [
            {
                B.SOURCE: k[0],
                B.TX_ID: k[1],
                B.KIND: "transaction",
                B.TX_STATUS: RELEASED,
                B.INGEST_TS: at,
            }
            for k, at in marked
        ],
        schema=rows.schema,
    )
    if not held:
        # Nothing waits (the usual case): every row is ready.
        return CollectedSplit(rows_in, kept, timed_out, 0, len(marked))
    holds = [
        (r[B.SOURCE], r[B.TX_ID]) in held_keys
        and (_counted(r) or r[B.KIND] == "transaction")
        and _joinable((r[B.SOURCE], r[B.TX_ID]))
        for r in rows_in.select([B.SOURCE, B.TX_ID, B.KIND, B.TX_ORDER]).to_pylist()
    ]
    mask = pa.array(holds, pa.bool_())
    waiting = pa.concat_tables([rows_in.filter(mask), kept])
    return CollectedSplit(
        rows_in.filter(pc.invert(mask)), waiting, timed_out, held, held_rows + len(marked)
    )
