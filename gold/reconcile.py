"""Reconciliation: every captured source table compared with its gold view, drilled down to keys.

``medallion reconcile <source>`` (and the scheduled quality check ``reconcile``) asks: does gold,
at the cut it shows, hold exactly the rows the source database holds? See ``docs/reconcile.md``.

1. **Read the source** in one consistent ``REPEATABLE READ`` transaction through the capture agent's
   own conversion (:meth:`capture.current_state.CurrentStateReader.read_current`, which the
   PostgreSQL and MySQL agents implement), so type handling modes, column filters, masks and
   hashes come out exactly as they were landed. Rows stream in key order and are staged as
   JSON lines in a work directory, one file per table; Python holds one fetch at a time.
2. **Decode** the staged rows with silver's decoder (:func:`silver.types.decode_row`, the same
   Connect schema the agent would register) and cast them to the gold view's column types.
3. **Hash** both sides with one Spark expression: ``xxhash64`` over the source's columns in
   order, each preceded by its NULL flag (so ``(NULL, 1)`` and ``(1, NULL)`` differ).
4. **Ranges.** Keyed tables are split into ``ranges`` primary-key ranges whose lower bounds are
   the keys at evenly spaced ordinals of the source's key order; a row's range is the number of
   bounds at or below its key, compared in Spark on both sides (so a database collation that
   orders text differently from Spark only makes ranges uneven, never inconsistent). Per range:
   the row count and the sum of row hashes as ``decimal(38,0)`` (order-independent, and unlike
   XOR a duplicated row does not cancel out). Keyless tables use ``pmod(hash, ranges)`` buckets
   and compare as multisets of row hashes.
5. **Drill down** only in ranges whose count or hash sum differ: a full outer join on the key
   (keyless: on the row hash with multiplicities) gives the keys missing in gold, extra in gold,
   and with differing values.
6. **Lag or corruption?** The source is live while gold is at a cut. ``source_ahead`` says
   whether the source had committed changes to captured tables beyond the cut when it was read:
   True when bronze holds data events of the source after the cut's position, or when the
   source's log holds a change of a captured table after the cut and before the
   reconciliation's snapshot (PostgreSQL: a temporary copy of the agent's replication slot,
   peeked; MySQL/MariaDB: the binlog, read from the cut's file to the snapshot's point); False
   when neither; None when it cannot be told (no slot, a purged binlog file, no permission).
   Differences with ``source_ahead`` True may be lag; with False they are not.

7. **Every value, independently.** The hash comparison sees the source through the agent, so
   it cannot see what the agent gets wrong. :mod:`gold.source_read` reads the source again with
   a connection and conversions of its own (the database's canonical text per value) and
   :func:`gold.reconcile_compare.compare_values` compares every value with silver at the cut,
   per column, with examples; columns the config makes lossy are "not comparable", never equal.
   Its findings are :attr:`TableReconciliation.values`, and they fail the table too.

What differs per connector (the text of the log point, how the log after the cut is read) is
the agent's side of :class:`capture.current_state.CurrentStateReader`; gold uses nothing else of
the agent, and everything here is shared.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from bronze.storage import LakePath, lake_path, open_delta, storage_options
from capture.current_state import READS_CURRENT_STATE, CurrentStateReader
from gold.cuts import Cut, TableAtCut, latest_cut
from gold.outcome import CheckOutcome
from gold.publish import published_cuts
from gold.reconcile_compare import TableValues, compare_values
from gold.reconcile_documents import DOCUMENT_CONNECTORS, reconcile_documents
from gold.source_read import reader_for
from gold.views import current_state
from pipeline.errors import InternalError, ReconcileError

__all__ = [
    "CHECK",
    "NOT_COMPARABLE_CHECK",
    "RECONCILIATIONS",
    "can_reconcile",
    "reconcilable",
    "last_reconciled",
    "reconciliation_history",
    "RangeDifference",
    "ReconcileError",
    "ReconcileResult",
    "TableReconciliation",
    "reconcile_source",
]

logger = logging.getLogger(__name__)

CHECK = "reconcile"
"""The check name of reconciliation outcomes (``quality.severity.reconcile``)."""

NOT_COMPARABLE_CHECK = "reconcile_not_comparable"
"""The check name of the outcome listing a table's columns that are not comparable with the
source (lossy by config, no exact normalisation): a warning, never a pass or a block."""

RECONCILIATIONS = "_reconciliations"
"""``gold/_reconciliations``: one row per reconciliation run (when, which cut, the outcome)."""

_N = "__medallion_n"
_H = "__medallion_h"
_R = "__medallion_range"
_K = "__medallion_k"
_BOUNDS = "__medallion_bounds"
_MISSING, _EXTRA, _DIFFERING = "missing", "extra", "differing"


@dataclass(frozen=True, slots=True)
class RangeDifference:
    """One primary-key range (keyless tables: one hash bucket) whose count or hash differs.

    Attributes:
        index: The range's number, 0-based, in key order.
        lower_key: The range's first key as JSON (None: from the smallest key); for keyless
            tables ``"hash bucket <i>"``.
        source_rows: Rows of the range in the source.
        gold_rows: Rows of the range in gold.
    """

    index: int
    lower_key: str | None
    source_rows: int
    gold_rows: int

    def describe(self) -> str:
        """``range 3 (from {"id":120}): source 10 rows, gold 9``."""
        start = "start" if self.lower_key is None else self.lower_key
        return (
            f"range {self.index} (from {start}): source {self.source_rows} rows, "
            f"gold {self.gold_rows}"
        )


@dataclass(frozen=True, slots=True)
class TableReconciliation:
    """One source table compared with its gold view.

    Attributes:
        collection: The source table (``<schema>.<table>``).
        silver_table: The silver table behind the gold view (None when gold has none).
        source_rows: Rows in the source.
        gold_rows: Live rows in gold at the cut.
        ranges: How many key ranges (hash buckets for keyless tables) were compared.
        differing_ranges: The ranges whose count or hash sum differ.
        missing_in_gold: Keys (JSON) in the source, not in gold; at most ``max_keys``.
        extra_in_gold: Keys in gold, not in the source; at most ``max_keys``.
        differing: Keys in both with different values; at most ``max_keys``.
        missing_count: How many keys are missing in gold (all of them, not just those listed).
        extra_count: How many keys are extra in gold.
        differing_count: How many keys differ.
        keyed: False for a table without a key: rows are compared as a multiset, keys are the
            rows rendered as JSON (with ``xN`` when N copies differ), nothing is ``differing``.
        notes: Schema differences and other remarks.
        values: The value-by-value comparison of an independent source read with silver
            (:mod:`gold.reconcile_compare`); None when the connector has no independent reader.
    """

    collection: str
    silver_table: str | None
    source_rows: int
    gold_rows: int
    ranges: int
    differing_ranges: tuple[RangeDifference, ...] = ()
    missing_in_gold: tuple[str, ...] = ()
    extra_in_gold: tuple[str, ...] = ()
    differing: tuple[str, ...] = ()
    missing_count: int = 0
    extra_count: int = 0
    differing_count: int = 0
    keyed: bool = True
    notes: tuple[str, ...] = ()
    values: TableValues | None = None

    @property
    def success(self) -> bool:
        """Gold holds exactly the source's rows, and every comparable value equals the
        source's own (not-comparable columns are warnings, see :attr:`not_comparable`)."""
        return (
            not self.differing_ranges
            and self.source_rows == self.gold_rows
            and self.missing_count == self.extra_count == self.differing_count == 0
            and (self.values is None or self.values.clean)
        )

    @property
    def unexpected_count(self) -> int:
        """Keys (rows, for keyless tables) that are missing, extra or different."""
        by_hash = self.missing_count + self.extra_count + self.differing_count
        return max(by_hash, 0 if self.values is None else self.values.unexpected_count)

    @property
    def not_comparable(self) -> tuple[str, ...]:
        """``<column>: <reason>`` of each column that could not be compared value by value."""
        if self.values is None:
            return ()
        return tuple(f"{c.column}: {c.reason}" for c in self.values.not_comparable)


@dataclass(frozen=True, slots=True)
class ReconcileResult:
    """The reconciliation of one source at one cut.

    Attributes:
        source: The source name.
        cut: The cut gold was compared at.
        tables: One entry per table, by collection.
        source_ahead: Whether the source had committed changes to captured tables beyond the
            cut when it was read (differences may then be lag); None when unknown.
        source_lsn: The source's log position when it was read (PostgreSQL: the WAL LSN
            ``X/Y``; MySQL/MariaDB: the binlog point ``<file>:<pos>``).
        notes: How ``source_ahead`` was decided, and other remarks.
    """

    source: str
    cut: Cut
    tables: tuple[TableReconciliation, ...]
    source_ahead: bool | None
    source_lsn: str | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def success(self) -> bool:
        """Every table equals its gold view."""
        return all(t.success for t in self.tables)

    def _lag_text(self) -> str:
        if self.source_ahead is True:
            return (
                "the source has committed changes beyond the cut, so differences may be "
                "replication lag: run capture and silver, then reconcile again"
            )
        if self.source_ahead is False:
            return "the source has no change beyond the cut: differences are not lag"
        return "whether the source is ahead of the cut could not be told"

    def outcomes(self) -> list[CheckOutcome]:
        """One ``reconcile`` outcome per table, for the quality run."""
        out = []
        for t in self.tables:
            observed = (
                f"source {t.source_rows} rows, gold {t.gold_rows}; "
                f"{len(t.differing_ranges)} of {t.ranges} key ranges differ"
            )
            if not t.success:
                observed += (
                    f"; {t.missing_count} missing in gold, {t.extra_count} extra in gold, "
                    f"{t.differing_count} differing"
                )
                if t.values is not None and not t.values.clean:
                    v = t.values
                    observed += (
                        f"; values: {v.missing} missing in silver, {v.extra} extra, "
                        f"{v.differing_rows} rows differing, {v.unreadable} unreadable"
                    )
                if self.source_ahead:
                    observed += " (source ahead of the cut: possibly lag)"
            differences = (
                () if t.values is None or t.values.clean else tuple(t.values.differences())
            )
            sample = (
                tuple(f"missing {k}" for k in t.missing_in_gold)
                + tuple(f"extra {k}" for k in t.extra_in_gold)
                + tuple(f"differing {k}" for k in t.differing)
            )[:20] or differences[:20]
            details = "; ".join(
                [
                    f"cut at silver batch {self.cut.silver_batch}",
                    *(r.describe() for r in t.differing_ranges[:10]),
                    *(f"values: {d}" for d in differences[:20]),
                    *t.notes,
                    self._lag_text(),
                ]
            )
            if t.not_comparable:
                # Before the table's verdict: a warning of its own (quality.severity
                # reconcile_not_comparable, default warn), never folded into a pass.
                out.append(
                    CheckOutcome(
                        check=NOT_COMPARABLE_CHECK,
                        source=self.source,
                        table=t.collection,
                        success=False,
                        observed=f"{len(t.not_comparable)} columns not comparable with the source",
                        unexpected_count=len(t.not_comparable),
                        sample=t.not_comparable[:20],
                        details=(
                            "these columns were not compared value by value (lossy by "
                            "configuration, or no exact normalisation): they are not proven "
                            "equal; see docs/reconcile.md"
                        ),
                    )
                )
            out.append(
                CheckOutcome(
                    check=CHECK,
                    source=self.source,
                    table=t.collection,
                    success=t.success,
                    observed=observed,
                    unexpected_count=t.unexpected_count,
                    sample=sample,
                    details=details,
                )
            )
        return out

    def value_rows(self) -> list[dict[str, Any]]:
        """One row per table and finding of the value comparison (CLI output): rows missing or
        extra in silver, unreadable rows, each column that differs, has quarantined values or
        is not comparable (``detail``: examples, or the reason)."""
        out: list[dict[str, Any]] = []
        for t in self.tables:
            v = t.values
            if v is None:
                continue
            for kind, count, keys in (
                ("missing in silver", v.missing, v.missing_keys),
                ("extra in silver", v.extra, v.extra_keys),
                ("unreadable", v.unreadable, v.unreadable_keys),
            ):
                if count:
                    out.append(_value_row(t, "", kind, count, "; ".join(keys)))
            for c in v.columns:
                if c.status != "compared":
                    out.append(_value_row(t, c.column, "not comparable", 0, c.reason))
                    continue
                if c.differing:
                    shown = "; ".join(e.describe() for e in c.examples)
                    out.append(_value_row(t, c.column, "differing", c.differing, shown))
                if c.quarantined:
                    out.append(_value_row(t, c.column, "value quarantined", c.quarantined, ""))
            if v.clean:
                compared = sum(1 for c in v.columns if c.status == "compared")
                detail = f"{compared} columns compared in {v.source_rows} rows"
                out.append(_value_row(t, "", "every compared value equal", 0, detail))
        return out

    def rows(self) -> list[dict[str, Any]]:
        """One summary dict per table (CLI table and JSON output)."""
        return [
            {
                "source": self.source,
                "table": t.collection,
                "source_rows": t.source_rows,
                "gold_rows": t.gold_rows,
                "ranges": t.ranges,
                "differing_ranges": len(t.differing_ranges),
                "missing_in_gold": t.missing_count,
                "extra_in_gold": t.extra_count,
                "differing": t.differing_count,
                "success": t.success,
                "source_ahead": self.source_ahead,
                "silver_batch": self.cut.silver_batch,
                "keys": _keys_text(t),
            }
            for t in self.tables
        ]

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable form: :meth:`rows` plus every listed key, ranges and notes."""
        return {
            "source": self.source,
            "success": self.success,
            "source_ahead": self.source_ahead,
            "source_lsn": self.source_lsn,
            "cut": self.cut.to_json(),
            "notes": list(self.notes),
            "tables": [
                {
                    **row,
                    "missing_keys": list(t.missing_in_gold),
                    "extra_keys": list(t.extra_in_gold),
                    "differing_keys": list(t.differing),
                    "ranges_detail": [r.describe() for r in t.differing_ranges],
                    "notes": list(t.notes),
                    "values": None if t.values is None else t.values.to_json(),
                }
                for row, t in zip(self.rows(), self.tables, strict=True)
            ],
        }


def _value_row(
    table: TableReconciliation, column: str, finding: str, count: int, detail: str
) -> dict[str, Any]:
    return {
        "table": table.collection,
        "column": column,
        "finding": finding,
        "rows": count,
        "detail": detail,
    }


def _keys_text(table: TableReconciliation, limit: int = 5) -> str:
    """The first differing keys, for a table cell: ``missing {"id":4}; differing {"id":9} ...``."""
    keys = (
        [f"missing {k}" for k in table.missing_in_gold]
        + [f"extra {k}" for k in table.extra_in_gold]
        + [f"differing {k}" for k in table.differing]
    )
    text = "; ".join(keys[:limit])
    return text + (" ..." if table.unexpected_count > limit else "")


# --- staging the source ---------------------------------------------------------------------


@dataclass(slots=True)
class _Staged:
    """One source table's rows, staged as JSON lines."""

    collection: str
    path: Path
    row_schema: dict[str, Any]
    keys: list[str]
    placeholder: str
    rows: int = 0
    unconvertible: int = 0


def _stage(source: CurrentStateReader, work: Path) -> tuple[dict[str, _Staged], Any]:
    """Stream the source's tables into ``work``; return them by collection and the log point
    of the read (the connector's own type: a WAL LSN, a binlog point; None without tables)."""
    staged: dict[str, _Staged] = {}
    point: Any = None
    handle = None
    current: _Staged | None = None
    try:
        for at, ts, chunk in source.read_current():
            point = at
            if current is None or current.collection != ts.collection:
                if handle is not None:
                    handle.close()
                current = _Staged(
                    ts.collection,
                    work / f"{len(staged)}.jsonl",
                    dict(ts.row_schema),
                    [ts.names[i] for i in ts.key_idx],
                    str(ts.placeholder),
                )
                staged[ts.collection] = current
                handle = current.path.open("wb")
            if handle is None:
                raise InternalError("gold.reconcile: expected handle is not None")
            lines = []
            for after in chunk:
                if after is None:
                    current.unconvertible += 1
                    continue
                lines.append(orjson.dumps({"n": current.rows, "after": after}))
                current.rows += 1
            if lines:
                handle.write(b"\n".join(lines) + b"\n")
    finally:
        if handle is not None:
            handle.close()
    return staged, point


def _source_frame(spark: Any, staged: _Staged) -> Any:
    """The staged rows decoded as silver decodes them, plus their ordinal in key order."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, StructField, StructType

    from silver import types as T

    parse = StructType(
        [StructField("n", LongType()), StructField("after", T.json_type(staged.row_schema))]
    )
    raw = spark.read.text(str(staged.path))
    parsed = raw.select(F.from_json("value", parse).alias("__v"))
    return parsed.select(
        F.col("__v.n").alias(_N),
        *T.decode_row(F.col("__v.after"), staged.row_schema, placeholder=staged.placeholder),
    )


# --- hashing and ranges ---------------------------------------------------------------------


def _has_map(data_type: Any) -> bool:
    from pyspark.sql.types import ArrayType, MapType, StructType

    if isinstance(data_type, MapType):
        return True
    if isinstance(data_type, ArrayType):
        return _has_map(data_type.elementType)
    if isinstance(data_type, StructType):
        return any(_has_map(f.dataType) for f in data_type.fields)
    return False


def _row_hash(frame: Any, columns: list[str]) -> Any:
    """xxhash64 over ``columns`` in order, each after its NULL flag (one expression, both sides)."""
    from pyspark.sql import functions as F

    if not columns:
        return F.lit(0).cast("bigint")
    types = {f.name: f.dataType for f in frame.schema.fields}
    parts = []
    for name in columns:
        value = F.col(name)
        if _has_map(types[name]):
            # Spark refuses to hash maps; their JSON keeps the entry order both sides decoded.
            value = F.to_json(value)
        parts += [value.isNull(), value]
    return F.xxhash64(*parts)


def _align(source: Any, gold: Any, columns: list[str]) -> tuple[Any, Any, list[str]]:
    """Both frames with exactly ``columns``, of gold's types; notes on schema differences."""
    from pyspark.sql import functions as F

    notes = []
    gold_types = {f.name: f.dataType for f in gold.schema.fields}
    src_types = {f.name: f.dataType for f in source.schema.fields}
    src_cols, gold_cols = [], []
    for name in columns:
        if name in gold_types:
            wanted = gold_types[name]
            col = F.col(name)
            src_cols.append(col if src_types[name] == wanted else col.try_cast(wanted).alias(name))
            gold_cols.append(F.col(name))
        else:
            notes.append(f"column {name} is in the source, not in gold")
            src_cols.append(F.col(name))
            gold_cols.append(F.lit(None).cast(src_types[name]).alias(name))
    for name in gold_types:
        if name not in columns:
            notes.append(f"gold column {name} is not in the source (dropped there?): not compared")
    passthrough = [F.col(_N)] if _N in source.columns else []
    return source.select(*passthrough, *src_cols), gold.select(*gold_cols), notes


def _with_ranges(
    spark: Any, source: Any, gold: Any, keys: list[str], rows: int, ranges: int
) -> tuple[Any, Any, list[str | None]]:
    """Add the range column to both frames; return the ranges' lower keys (JSON)."""
    from pyspark.sql import functions as F

    if not keys:
        bucket = F.pmod(F.col(_H), F.lit(ranges)).cast("int")
        return (
            source.withColumn(_R, bucket),
            gold.withColumn(_R, bucket),
            [f"hash bucket {i}" for i in range(ranges)],
        )
    key = F.struct(*[F.col(k) for k in keys])
    picks = sorted({(i * rows) // ranges for i in range(1, ranges)} - {0}) if rows else []
    if not picks:
        return source.withColumn(_R, F.lit(0)), gold.withColumn(_R, F.lit(0)), [None]
    bounds = source.where(F.col(_N).isin(picks)).agg(
        F.array_sort(F.collect_list(key)).alias(_BOUNDS)
    )
    lower = [None, *bounds.select(F.transform(_BOUNDS, lambda b: F.to_json(b))).first()[0]]

    def ranged(frame: Any) -> Any:
        # A one-row broadcast: each row's range = how many lower bounds are at or below its key.
        joined = frame.crossJoin(F.broadcast(bounds))
        return joined.withColumn(_R, F.size(F.filter(_BOUNDS, lambda b: b <= key))).drop(_BOUNDS)

    return ranged(source), ranged(gold), lower


def _summaries(
    source: Any, gold: Any
) -> tuple[dict[int, tuple[int, Any]], dict[int, tuple[int, Any]]]:
    """Per range and side: (row count, sum of row hashes), both sides in one Spark job."""
    from pyspark.sql import functions as F

    side = "__medallion_side"
    both = source.select(F.lit(0).alias(side), _R, _H).unionByName(
        gold.select(F.lit(1).alias(side), _R, _H)
    )
    rows = (
        both.groupBy(side, _R)
        .agg(
            F.count(F.lit(1)).alias("c"),
            # decimal(38,0): 2^63 per row leaves room for ~10^19 rows, and no wrap-around.
            F.sum(F.col(_H).cast("decimal(38,0)")).alias("s"),
        )
        .collect()
    )
    out: tuple[dict[int, tuple[int, Any]], dict[int, tuple[int, Any]]] = ({}, {})
    for r in rows:
        out[int(r[side])][int(r[_R])] = (int(r["c"]), r["s"])
    return out


def _keyed_differences(
    source: Any, gold: Any, keys: list[str], differing: list[int], max_keys: int
) -> dict[str, tuple[int, list[str]]]:
    """Full outer join on the key inside the differing ranges: kind -> (count, sample keys)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    key = F.struct(*[F.col(k) for k in keys])
    s = source.where(F.col(_R).isin(differing)).select(key.alias(_K), F.col(_H).alias("hs"))
    g = gold.where(F.col(_R).isin(differing)).select(key.alias(_K), F.col(_H).alias("hg"))
    joined = s.join(g, on=_K, how="full_outer")
    kind = (
        F.when(F.col("hg").isNull(), F.lit(_MISSING))
        .when(F.col("hs").isNull(), F.lit(_EXTRA))
        .when(F.col("hs") != F.col("hg"), F.lit(_DIFFERING))
    )
    classified = joined.select(_K, kind.alias("kind")).where(F.col("kind").isNotNull())
    by_kind = Window.partitionBy("kind")
    rows = (
        classified.select(
            "kind",
            F.to_json(_K).alias("key"),
            F.row_number().over(by_kind.orderBy(_K)).alias("rn"),
            F.count(F.lit(1)).over(by_kind).alias("total"),
        )
        .where(F.col("rn") <= max_keys)
        .orderBy("kind", "rn")
        .collect()
    )
    out: dict[str, tuple[int, list[str]]] = {}
    for r in rows:
        total, sample = out.get(r["kind"], (int(r["total"]), []))
        sample.append(r["key"])
        out[r["kind"]] = (total, sample)
    return out


def _keyless_differences(
    source: Any, gold: Any, columns: list[str], differing: list[int], max_keys: int
) -> dict[str, tuple[int, list[str]]]:
    """Multiset difference of row hashes inside the differing buckets."""
    from pyspark.sql import functions as F

    def counted(frame: Any, suffix: str) -> Any:
        row = F.to_json(F.struct(*[F.col(c) for c in columns])) if columns else F.lit("{}")
        return (
            frame.where(F.col(_R).isin(differing))
            .groupBy(_H)
            .agg(F.count(F.lit(1)).alias(f"c{suffix}"), F.first(row).alias(f"row{suffix}"))
        )

    joined = counted(source, "s").join(counted(gold, "g"), on=_H, how="full_outer")
    diff = F.coalesce(F.col("cs"), F.lit(0)) - F.coalesce(F.col("cg"), F.lit(0))
    rows = (
        joined.select(diff.alias("d"), F.coalesce("rows", "rowg").alias("row"))
        .where(F.col("d") != 0)
        .orderBy("row")
        .collect()
    )
    out: dict[str, tuple[int, list[str]]] = {}
    for r in rows:
        kind = _MISSING if r["d"] > 0 else _EXTRA
        copies = abs(int(r["d"]))
        total, sample = out.get(kind, (0, []))
        if len(sample) < max_keys:
            sample.append(r["row"] if copies == 1 else f"{r['row']} x{copies}")
        out[kind] = (total + copies, sample)
    return out


def _compare(
    spark: Any,
    lake_root: LakePath,
    collection: str,
    staged: _Staged | None,
    table: TableAtCut | None,
    *,
    ranges: int,
    max_keys: int,
) -> TableReconciliation:
    """Compare one table (either side may be absent)."""
    from pyspark.sql.types import StructType

    from silver import types as T

    notes: list[str] = []
    if staged is not None:
        source = _source_frame(spark, staged)
        columns = [f["field"] for f in staged.row_schema.get("fields", [])]
        keys = staged.keys
        if staged.unconvertible:
            notes.append(
                f"{staged.unconvertible} source rows the agent cannot convert (it quarantines "
                "them) were left out"
            )
    if table is not None:
        gold = current_state(spark, lake_root, table)
        if staged is None:
            notes.append("not captured from the source now (dropped or filtered out)")
            columns = list(gold.columns)
            keys = []
            source = spark.createDataFrame([], gold.schema)
    else:
        if staged is None:
            raise InternalError("gold.reconcile: expected staged is not None")
        notes.append("gold has no table for it (nothing captured into silver yet)")
        gold = spark.createDataFrame([], StructType(list(T.row_schema(staged.row_schema).fields)))
    source, gold, schema_notes = _align(source, gold, columns)
    notes += schema_notes
    source = source.withColumn(_H, _row_hash(source, columns))
    gold = gold.withColumn(_H, _row_hash(gold, columns))
    rows = staged.rows if staged is not None else 0
    if keys and _N not in source.columns:
        keys = []
    source, gold, lower = _with_ranges(spark, source, gold, keys, rows, ranges)
    src_sum, gold_sum = _summaries(source, gold)
    differing_ranges = []
    for index in sorted(set(src_sum) | set(gold_sum)):
        a, b = src_sum.get(index, (0, None)), gold_sum.get(index, (0, None))
        if a != b:
            differing_ranges.append(
                RangeDifference(index, lower[index] if index < len(lower) else None, a[0], b[0])
            )
    found: dict[str, tuple[int, list[str]]] = {}
    if differing_ranges:
        indices = [r.index for r in differing_ranges]
        found = (
            _keyed_differences(source, gold, keys, indices, max_keys)
            if keys
            else _keyless_differences(source, gold, columns, indices, max_keys)
        )
    missing, extra, differing = (found.get(k, (0, [])) for k in (_MISSING, _EXTRA, _DIFFERING))
    return TableReconciliation(
        collection=collection,
        silver_table=None if table is None else table.silver_table,
        source_rows=rows,
        gold_rows=sum(c for c, _ in gold_sum.values()),
        ranges=len(lower),
        differing_ranges=tuple(differing_ranges),
        missing_in_gold=tuple(missing[1]),
        extra_in_gold=tuple(extra[1]),
        differing=tuple(differing[1]),
        missing_count=missing[0],
        extra_count=extra[0],
        differing_count=differing[0],
        keyed=bool(keys),
        notes=tuple(notes),
    )


# --- is the source ahead of the cut? --------------------------------------------------------


def _bronze_beyond(spark: Any, lake_root: LakePath, cut: Cut) -> bool | None:
    """Whether bronze holds data events of the source after the cut (landed, not yet in gold)."""
    from pyspark.sql import functions as F

    from bronze import schema as S
    from bronze.envelope import RecordKind
    from bronze.writer import BronzeTables

    path = BronzeTables.under(lake_root).events
    if not (path / "_delta_log").exists():
        return None
    events = spark.read.format("delta").load(str(path.absolute()))
    later = events.where(
        (F.col(S.SOURCE) == F.lit(cut.source))
        & (F.col(S.POSITION) > F.lit(cut.position))
        & (F.col(S.KIND) == F.lit(RecordKind.DATA.value))
    )
    return bool(later.limit(1).count())


RECONCILABLE_CONNECTORS = READS_CURRENT_STATE | DOCUMENT_CONNECTORS
"""Connectors whose agent can read the database's current rows (a ``CurrentStateReader``), and
document stores reconciled by :mod:`gold.reconcile_documents`."""


def _connector_of(source_config: Any) -> str:
    """The source's connector kind (``mariadb`` stays ``mariadb``: the same entry as mysql)."""
    return str(getattr(source_config, "kind", None) or source_config.connector)


# --- the record of runs ---------------------------------------------------------------------


def _history_path(lake_root: LakePath) -> LakePath:
    return lake_path(lake_root) / "gold" / RECONCILIATIONS


def _record(lake_root: LakePath, result: ReconcileResult) -> None:
    """Append the run to ``gold/_reconciliations`` (deltalake, one commit)."""
    import pyarrow as pa
    from deltalake import write_deltalake

    schema = pa.schema(
        [
            ("source", pa.string()),
            ("silver_batch", pa.int64()),
            ("position", pa.binary()),
            ("success", pa.bool_()),
            ("source_ahead", pa.bool_()),
            ("unexpected", pa.int64()),
            ("result_json", pa.string()),
            ("reconciled_at", pa.timestamp("us", tz="UTC")),
        ]
    )
    row = {
        "source": result.source,
        "silver_batch": result.cut.silver_batch,
        "position": result.cut.position,
        "success": result.success,
        "source_ahead": result.source_ahead,
        "unexpected": sum(t.unexpected_count for t in result.tables),
        "result_json": orjson.dumps(result.to_json()).decode(),
        "reconciled_at": dt.datetime.now(dt.UTC),
    }
    write_deltalake(
        str(_history_path(lake_root)),
        pa.Table.from_pylist([row], schema=schema),
        mode="append",
        storage_options=storage_options(_history_path(lake_root)),
    )


def reconciliation_history(lake_root: LakePath) -> list[dict[str, Any]]:
    """Every recorded reconciliation, oldest first (``result_json`` holds the full result)."""
    from deltalake.exceptions import TableNotFoundError

    try:
        table = open_delta(_history_path(lake_root))
    except TableNotFoundError:
        return []
    rows: list[dict[str, Any]] = table.to_pyarrow_table().to_pylist()
    rows.sort(key=lambda r: r["reconciled_at"])
    return rows


def last_reconciled(lake_root: LakePath) -> dict[str, float]:
    """When each source was last reconciled, as Unix seconds (sources never reconciled absent)."""
    return {r["source"]: r["reconciled_at"].timestamp() for r in reconciliation_history(lake_root)}


def can_reconcile(source_config: Any) -> bool:
    """Whether a source has a database :func:`reconcile_source` can read (not ``debezium_json``,
    not a connector whose agent is not built)."""
    return _connector_of(source_config) in RECONCILABLE_CONNECTORS


def reconcilable(config: Any, source_name: str) -> Any:
    """The config of a source :func:`reconcile_source` can compare (checked before any work).

    Raises:
        ConfigError: Unknown source name (with the closest name).
        ReconcileError: The source has no database, or no agent that can read current rows.
    """
    source_config = config.source(source_name)
    kind = _connector_of(source_config)
    if kind == "debezium_json":
        raise ReconcileError(
            f"source {source_name} (debezium_json) has no database to reconcile with; "
            "reconcile the database that produced the files as a postgresql or mysql source"
        )
    if not can_reconcile(source_config):
        raise ReconcileError(
            f"source {source_name} ({kind}): reconciliation reads the database through its "
            "capture agent, and only the "
            + ", ".join(sorted(RECONCILABLE_CONNECTORS))
            + " agents can read current rows yet"
        )
    return source_config


# --- the entry point ------------------------------------------------------------------------


def _cut_for(lake_root: LakePath, source_name: str) -> Cut:
    cut = published_cuts(lake_root).get(source_name) or latest_cut(lake_root, source_name)
    if cut is None:
        raise ReconcileError(
            f"source {source_name} has no consistent cut in silver yet, so gold shows nothing "
            "to reconcile: run `medallion capture` and `medallion run --once` first"
        )
    return cut


def reconcile_source(
    spark: Any,
    config: Any,
    lake_root: LakePath,
    source_name: str,
    *,
    cut: Cut | None = None,
    ranges: int = 16,
    max_keys: int = 100,
    work_dir: Path | None = None,
    record: bool = True,
    values: bool = True,
    examples: int = 5,
) -> ReconcileResult:
    """Compare every captured table of a source database with its gold view.

    Args:
        spark: The session.
        config: The :class:`pipeline.config.PipelineConfig`.
        lake_root: The lake root.
        source_name: The configured source.
        cut: The cut to compare with; default the cut gold shows (``gold/_published``), else
            the newest consistent cut.
        ranges: Key ranges (hash buckets for keyless tables) per table.
        max_keys: At most this many keys listed per kind of difference (all are counted).
        work_dir: Where the source's rows are staged while Spark reads them (a temporary
            directory by default; on a cluster, give one every executor can read).
        record: Append the run to ``gold/_reconciliations`` (what :func:`last_reconciled`
            reads for the scheduled check).
        values: Also read the source independently of the agent and compare every value with
            silver (:mod:`gold.reconcile_compare`), per column.
        examples: At most this many examples per kind of value difference and column.

    Returns:
        The per-table comparison and whether the source was ahead of the cut.

    Raises:
        ConfigError: Unknown source name (with the closest name).
        ReconcileError: The source has no database (``debezium_json``), no reconciliation for
            its connector, or no cut yet.
        SourceUnavailable: The database cannot be reached.
    """
    from capture.registry import create_source

    if ranges < 1:
        raise ValueError("ranges must be at least 1")
    source_config = reconcilable(config, source_name)
    if _connector_of(source_config) in DOCUMENT_CONNECTORS:
        # Documents, not rows: no agent-side read, no key ranges (gold/reconcile_documents.py).
        result = reconcile_documents(
            spark, source_config, lake_root, source_name,
            cut if cut is not None else _cut_for(lake_root, source_name),
            max_keys=max_keys, work_dir=work_dir, examples=examples,
        )  # fmt: skip
        if record:
            _record(lake_root, result)
        return result
    capture = create_source(source_config)
    if not isinstance(capture, CurrentStateReader):
        raise ReconcileError(
            f"source {source_name}: its agent cannot read the database's current rows"
        )
    cut = cut if cut is not None else _cut_for(lake_root, source_name)
    work = Path(tempfile.mkdtemp(prefix="medallion-reconcile-", dir=work_dir)).absolute()
    try:
        staged, point = _stage(capture, work)
        point_text = None if point is None else capture.point_text(point)
        logger.info(
            "reconcile %s: read %d table(s) from the source at %s",
            source_name,
            len(staged),
            point_text,
        )
        by_collection = {t.collection: t for t in cut.tables.values()}
        collections = sorted(set(staged) | set(by_collection))
        tables = tuple(
            _compare(
                spark,
                lake_root,
                collection,
                staged.get(collection),
                by_collection.get(collection),
                ranges=ranges,
                max_keys=max_keys,
            )
            for collection in collections
        )
        if values:
            found = _values(
                spark, source_config, lake_root, source_name, collections, by_collection, work,
                examples=examples,
            )  # fmt: skip
            tables = tuple(dataclasses.replace(t, values=found.get(t.collection)) for t in tables)
        notes: list[str] = []
        ahead: bool | None = None
        if _bronze_beyond(spark, lake_root, cut):
            ahead = True
            notes.append("bronze holds changes of the source after the cut")
        elif point is not None:
            check = capture.changes_after(cut.position, point)
            ahead = check.ahead
            notes.append(check.reason)
    finally:
        # Not capture.close(): under slot.drop.on.stop it would drop the agent's slot.
        # read_current and changes_after close the connections they open.
        shutil.rmtree(work, ignore_errors=True)
    result = ReconcileResult(source_name, cut, tables, ahead, point_text, tuple(notes))
    _log(result.tables, source_name)
    if record:
        _record(lake_root, result)
    return result


def _values(
    spark: Any,
    source_config: Any,
    lake_root: LakePath,
    source_name: str,
    collections: list[str],
    tables_at: dict[str, TableAtCut],
    work: Path,
    *,
    examples: int,
) -> dict[str, TableValues]:
    """Read the source independently of its agent and compare every value with silver."""
    reader = reader_for(_connector_of(source_config))
    if reader is None:
        return {}
    staged = work / "values"
    staged.mkdir()
    fetch = int(getattr(source_config, "snapshot_fetch_size", None) or 10_000)
    read = reader(source_config, collections, staged, fetch=fetch)
    out = {}
    for collection in collections:
        table = tables_at.get(collection)
        silver = None if table is None else current_state(spark, lake_root, table)
        out[collection] = compare_values(
            spark, source_config, lake_root, source_name, read[collection], silver,
            examples=examples,
        )  # fmt: skip
    return out


def _log(tables: Iterable[TableReconciliation], source: str) -> None:
    for t in tables:
        for finding in () if t.values is None else t.values.findings():
            logger.warning("reconcile %s %s: %s", source, t.collection, finding)
        if t.success:
            logger.info("reconcile %s %s: %d rows equal", source, t.collection, t.source_rows)
        else:
            logger.warning(
                "reconcile %s %s: %d missing in gold, %d extra, %d differing",
                source,
                t.collection,
                t.missing_count,
                t.extra_count,
                t.differing_count,
            )
