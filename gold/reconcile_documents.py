"""Reconciliation of a MongoDB source: every document of the source against silver at the cut.

``medallion reconcile <source>`` and the scheduled ``reconcile`` quality check call
:func:`gold.reconcile.reconcile_source`, which hands a ``mongodb`` source to
:func:`reconcile_documents` (see ``docs/reconcile.md`` and ``docs/capture-mongodb.md``).

1. **Read the source independently.** :mod:`gold.source_read.mongodb` reads every captured
   collection with pymongo in one snapshot session (one cluster time for all) and writes each
   document as pymongo's canonical Extended JSON; no capture-agent code is involved.
2. **Normal form.** Both sides (the source's text, silver's ``document`` column at the cut)
   are parsed into :mod:`gold.documents_canon`'s normal form, which keeps every BSON type
   distinction and the field order, and staged as JSON lines.
3. **Compare per ``_id``** in Spark (a full outer join on the ``_id``'s normal text): documents
   missing in silver, extra in silver, and differing; for each differing document, which
   fields differ (dotted paths, with examples), reported as the value comparison's per-column
   findings so the report reads like a relational table's.
4. **Changed after the cut.** The source is live; silver is at a cut. A change stream opened at
   the cut's cluster time and read up to the snapshot's cluster time names the documents that
   changed in between: they are counted as *changed after the cut* and not as differences
   (``source_ahead`` True). When the stream's history no longer reaches the cut
   (``ChangeStreamHistoryLost``), this cannot be told: every difference is reported, and
   ``source_ahead`` is None.

Fields the configuration changes on purpose (``field.exclude.list``, ``field.renames``,
``column.mask.*``/``column.truncate.*`` on top-level fields) are taken out of both sides and
listed as *not comparable* (a warning, never a pass).
"""

from __future__ import annotations

import logging
import re
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bronze.storage import LakePath
from gold.cuts import Cut, TableAtCut
from gold.documents_canon import Node, differences, normal_text, parse, render, without_path
from gold.reconcile_compare import (
    COMPARED,
    NOT_COMPARABLE,
    ColumnFinding,
    TableValues,
    ValueExample,
)
from gold.source_read.mongodb import (
    Changes,
    StagedCollection,
    changes_after,
    read_collections,
    source_collections,
)
from gold.views import current_state

__all__ = ["DOCUMENT_CONNECTORS", "reconcile_documents"]

logger = logging.getLogger(__name__)

DOCUMENT_CONNECTORS = frozenset({"mongodb"})
"""Connectors whose silver tables hold documents (``_id`` + ``document``), reconciled here."""

_SCHEMA = "k string, i string, h string, d string, u string"
_MISSING, _EXTRA, _DIFFERING, _UNREADABLE = "missing", "extra", "differing", "unreadable"


@dataclass(frozen=True, slots=True)
class _Ignored:
    """Field paths the config changes on purpose: taken out of one side, with the reason."""

    source: tuple[tuple[str, str], ...]
    silver: tuple[tuple[str, str], ...]

    def strip(self, node: Node, side: str) -> Node:
        for path, _ in self.source if side == "source" else self.silver:
            node = without_path(node, path)
        return node

    def findings(self) -> tuple[ColumnFinding, ...]:
        seen: dict[str, str] = {}
        for path, reason in (*self.source, *self.silver):
            seen.setdefault(path, reason)
        return tuple(ColumnFinding(p, NOT_COMPARABLE, reason=r) for p, r in seen.items())


def _ignored(settings: Any, config: Any, staged: StagedCollection) -> _Ignored:
    # config: the source config (its column rules); settings: the parsed MongoDB settings.
    """What ``field.exclude.list``, ``field.renames`` and the column rules change here."""
    db, _, coll = staged.collection.partition(".")
    source: list[tuple[str, str]] = []
    silver: list[tuple[str, str]] = []
    for path in settings.field_exclusions.paths(db, coll):
        source.append((path, "excluded by field.exclude.list"))
    renames = getattr(settings, "field_renames", None)
    for old, new in () if renames is None else renames.pairs(db, coll):
        source.append((old, f"renamed to {new} by field.renames"))
        silver.append((new, f"renamed from {old} by field.renames"))
    patterns = [
        str(getattr(p, "pattern", p))
        for rule in getattr(config, "column_rules", ())
        for p in rule.columns
    ]
    for name in sorted(staged.fields):
        qualified = f"{staged.collection}.{name}"
        if any(re.fullmatch(p, qualified, re.IGNORECASE) for p in patterns):
            why = "changed by a column.mask/column.truncate rule"
            source.append((name, why))
            silver.append((name, why))
    return _Ignored(tuple(source), tuple(silver))


def _restage_source(
    staged: StagedCollection, ignored: _Ignored, path: Path, changed: set[str], seen: set[str]
) -> int:
    """The staged source lines with the ignored paths taken out of ``h``; how many of them
    are documents changed after the cut (their keys added to ``seen``)."""
    hits = 0
    with staged.path.open("rb") as inp, path.open("wb") as out:  # type: ignore[union-attr]
        for line in inp:
            record = orjson.loads(line)
            if record["k"] in changed:
                hits += 1
                seen.add(record["k"])
            if "h" in record:
                node = ignored.strip(_tuples(orjson.loads(record["h"])), "source")
                record["h"] = normal_text(node)
            out.write(orjson.dumps(record) + b"\n")
    return hits


def _tuples(value: Any) -> Any:
    """A normal form read back from JSON (arrays) as tuples again."""
    if isinstance(value, list):
        return tuple(_tuples(v) for v in value)
    return value


def _stage_silver(
    frame: Any, ignored: _Ignored, path: Path, changed: set[str], seen: set[str]
) -> tuple[int, int, int]:
    """Silver's live documents in normal form as JSON lines; (documents, stale documents,
    documents changed after the cut in the source, their keys added to ``seen``)."""
    count = stale = hits = 0
    columns = set(frame.columns)
    picked = frame.select(
        "_id", "document", *(["document_stale"] if "document_stale" in columns else [])
    )
    with path.open("wb") as out:
        for row in picked.toLocalIterator():
            record: dict[str, str] = {"i": str(row["_id"])}
            try:
                record["k"] = normal_text(parse(row["_id"]))
            except ValueError:
                record["k"] = orjson.dumps(["unparsable", row["_id"]]).decode()
            try:
                record["h"] = normal_text(ignored.strip(parse(row["document"]), "silver"))
                record["d"] = row["document"]
            except (ValueError, TypeError) as exc:
                record["h"] = orjson.dumps(["unparsable", str(exc)]).decode()
                record["d"] = str(row["document"])
            if "document_stale" in columns and row["document_stale"] is not None:
                stale += 1
            if record["k"] in changed:
                hits += 1
                seen.add(record["k"])
            out.write(orjson.dumps(record) + b"\n")
            count += 1
    return count, stale, hits


def _compare(
    spark: Any,
    lake_root: LakePath,
    collection: str,
    staged: StagedCollection | None,
    table: TableAtCut | None,
    ignored: _Ignored,
    changed: set[str],
    work: Path,
    index: int,
    *,
    max_keys: int,
    examples: int,
) -> Any:
    from pyspark.sql import functions as F

    from gold.reconcile import TableReconciliation

    notes: list[str] = []
    seen: set[str] = set()
    changed_source = changed_silver = silver_count = stale = 0
    source_path = work / f"source-{index}.jsonl"
    silver_path = work / f"silver-{index}.jsonl"
    if staged is None or staged.path is None:
        notes.append("not in the source now (dropped, renamed or filtered out)")
        source_path.write_bytes(b"")
    else:
        changed_source = _restage_source(staged, ignored, source_path, changed, seen)
    if table is None:
        notes.append("silver has no table for it (nothing captured into silver yet)")
        silver_path.write_bytes(b"")
    else:
        silver_count, stale, changed_silver = _stage_silver(
            current_state(spark, lake_root, table), ignored, silver_path, changed, seen
        )
    if stale:
        notes.append(f"{stale} silver documents are marked stale (document_stale)")

    def side(path: Path, suffix: str) -> Any:
        frame = spark.read.schema(_SCHEMA).json(str(path))
        return frame.select("k", *(F.col(c).alias(c + suffix) for c in ("i", "h", "d", "u")))

    joined = side(source_path, "s").join(side(silver_path, "g"), on="k", how="full_outer")
    kind = (
        F.when(F.col("us").isNotNull(), F.lit(_UNREADABLE))
        .when(F.col("hg").isNull() & F.col("ig").isNull(), F.lit(_MISSING))
        .when(F.col("hs").isNull() & F.col("is").isNull(), F.lit(_EXTRA))
        .when(F.col("hs") != F.col("hg"), F.lit(_DIFFERING))
    )
    # One Spark job: only the documents that differ come to the driver, in _id order.
    found = (
        joined.select("k", "is", "ig", "hs", "hg", "us", kind.alias("kind"))
        .where(F.col("kind").isNotNull())
        .orderBy("k")
    )
    counts = dict.fromkeys((_MISSING, _EXTRA, _DIFFERING, _UNREADABLE), 0)
    samples: dict[str, list[str]] = {k: [] for k in counts}
    fields: dict[str, list[Any]] = {}
    for r in found.toLocalIterator():
        if r["k"] in changed:
            continue  # changed after the cut: lag, not a difference
        what = r["kind"]
        counts[what] += 1
        shown = r["is"] if r["is"] is not None else r["ig"]
        if len(samples[what]) < max_keys:
            samples[what].append(shown if r["us"] is None else f"{shown}: {r['us']}")
        if what != _DIFFERING:
            continue
        for path, how, source_text, silver_text in _field_differences(r["hs"], r["hg"]):
            entry = fields.setdefault(path, [0, []])
            entry[0] += 1
            if len(entry[1]) < examples:
                entry[1].append(ValueExample(f"{shown} ({how})", source_text, silver_text))
    if seen:
        notes.append(
            f"{len(seen)} documents changed in the source after the cut: not compared "
            f"(lag, not a difference; {changed_source} source and {changed_silver} silver "
            "documents left out of the counts)"
        )
    findings = (
        tuple(
            ColumnFinding(path, COMPARED, differing=n, examples=tuple(shown))
            for path, (n, shown) in sorted(fields.items())
        )
        + ignored.findings()
    )
    # Documents changed after the cut are lag: the counts are of the documents compared.
    source_count = (0 if staged is None else staged.documents) - changed_source
    silver_count -= changed_silver
    values = TableValues(
        collection=collection,
        source_rows=source_count,
        silver_rows=silver_count,
        keyed=True,
        missing=counts[_MISSING],
        extra=counts[_EXTRA],
        differing_rows=counts[_DIFFERING],
        unreadable=counts[_UNREADABLE],
        columns=findings,
        missing_keys=tuple(samples[_MISSING]),
        extra_keys=tuple(samples[_EXTRA]),
        unreadable_keys=tuple(samples[_UNREADABLE]),
        notes=tuple(notes),
    )
    return TableReconciliation(
        collection=collection,
        silver_table=None if table is None else table.silver_table,
        source_rows=source_count,
        gold_rows=silver_count,
        ranges=1,
        missing_in_gold=tuple(samples[_MISSING]),
        extra_in_gold=tuple(samples[_EXTRA]),
        differing=tuple(samples[_DIFFERING]),
        missing_count=counts[_MISSING],
        extra_count=counts[_EXTRA],
        differing_count=counts[_DIFFERING] + counts[_UNREADABLE],
        keyed=True,
        notes=tuple(notes),
        values=values,
    )


def _field_differences(source: str, silver: str) -> list[tuple[str, str, str, str]]:
    """``(path, what, source text, silver text)`` of each differing field."""
    try:
        a = _tuples(orjson.loads(source))
        b = _tuples(orjson.loads(silver))
    except orjson.JSONDecodeError:
        return [("(document)", "unparsable", source, silver)]
    if a and a[0] == "unparsable" or b and b[0] == "unparsable":
        return [("(document)", "silver document is not Extended JSON", source, str(b[1]))]
    return [(d.path, d.what, render(d.source), render(d.silver)) for d in differences(a, b)]


def reconcile_documents(
    spark: Any,
    source_config: Any,
    lake_root: LakePath,
    source_name: str,
    cut: Cut,
    *,
    max_keys: int = 100,
    work_dir: Path | None = None,
    examples: int = 5,
) -> Any:
    """Compare every captured collection of a MongoDB source with silver at ``cut``.

    Args:
        spark: The session.
        source_config: The ``mongodb`` source's config.
        lake_root: The lake root.
        source_name: The configured source.
        cut: The cut gold shows.
        max_keys: At most this many ``_id`` listed per kind of difference (all are counted).
        work_dir: Where both sides are staged while Spark reads them (a temporary directory by
            default; on a cluster, one every executor can read).
        examples: At most this many examples per differing field.

    Returns:
        A :class:`gold.reconcile.ReconcileResult` (``source_lsn``: the read's cluster time).

    Raises:
        SourceUnavailable: The deployment cannot be reached.
    """
    from bronze.positions import POSITION_TYPES
    from capture.mongodb.settings import MongoSettings
    from gold.reconcile import ReconcileResult

    settings = MongoSettings.from_config(source_config)
    uri = settings.connection_string()
    by_collection = {t.collection: t for t in cut.tables.values()}
    captured = source_collections(uri, settings.collections.table)
    collections = sorted(set(captured) | set(by_collection))
    work = Path(tempfile.mkdtemp(prefix="medallion-reconcile-", dir=work_dir)).absolute()
    try:
        fetch = int(getattr(source_config, "snapshot_fetch_size", None) or 1000)
        read = read_collections(uri, collections, work, fetch=fetch)
        logger.info(
            "reconcile %s: read %d collection(s) at cluster time %s",
            source_name,
            len(read.collections),
            read.point,
        )
        # The cut's cluster time, read with the position layout bronze declares for it.
        position: Any = POSITION_TYPES[_connector(source_config)].decode(cut.position)
        changes: Changes = changes_after(
            uri, (position.seconds, position.ord), read.point, collections
        )
        tables = []
        for i, collection in enumerate(collections):
            staged = read.collections.get(collection)
            ignored = (
                _Ignored((), ()) if staged is None else _ignored(settings, source_config, staged)
            )
            if collection in changes.whole:
                tables.append(_whole_changed(collection, staged, by_collection.get(collection)))
                continue
            tables.append(
                _compare(
                    spark,
                    lake_root,
                    collection,
                    staged,
                    by_collection.get(collection),
                    ignored,
                    changes.ids.get(collection, set()) if changes.known else set(),
                    work,
                    i,
                    max_keys=max_keys,
                    examples=examples,
                )  # fmt: skip
            )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    point = None if read.point is None else f"{read.point[0]}.{read.point[1]}"
    ahead = changes.any if changes.known else None
    result = ReconcileResult(source_name, cut, tuple(tables), ahead, point, (changes.reason,))
    _log(result.tables, source_name)
    return result


def _connector(source_config: Any) -> str:
    return str(getattr(source_config, "kind", None) or source_config.connector)


def _whole_changed(
    collection: str, staged: StagedCollection | None, table: TableAtCut | None
) -> Any:
    from gold.reconcile import TableReconciliation

    return TableReconciliation(
        collection=collection,
        silver_table=None if table is None else table.silver_table,
        source_rows=0 if staged is None else staged.documents,
        gold_rows=0,
        ranges=0,
        notes=(
            "the collection was dropped or renamed in the source after the cut: not compared "
            "(reconcile again once capture and silver have caught up)",
        ),
    )


def _log(tables: Iterable[Any], source: str) -> None:
    for t in tables:
        if t.success:
            logger.info("reconcile %s %s: %d documents equal", source, t.collection, t.source_rows)
        else:
            logger.warning(
                "reconcile %s %s: %d missing in silver, %d extra, %d differing",
                source, t.collection, t.missing_count, t.extra_count, t.differing_count,
            )  # fmt: skip
