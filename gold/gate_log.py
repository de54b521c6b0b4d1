"""The gate's ``primary_key``, ``not_null`` and ``types`` from the Delta log, without Spark.

Between full quality runs, ``run --continuous`` decides the blocking checks of every table a
micro-batch changed (:class:`gold.quality.Gate`). With Spark that is four jobs per table: the
snapshot state of the version, its file listing, and the key aggregate of
:mod:`gold.key_checks`. This module decides the same verdicts from the Delta log (deltalake)
and the few data files added since the table's last passing version (pyarrow), or says it
cannot (None), and the caller runs the Spark check:

* ``types``: the gold columns' types are the table schema's at the version (the Delta schema
  is Spark's ``StructType`` JSON); no data is read.
* ``not_null`` and the key's nulls: the live rows of the files added since the passing version
  are read (only the columns whose ``nullCount`` statistics in that file are not zero); the
  files it kept hold no null there (it passed). Without a passing version, every file is
  "added": the statistics decide when every file has them and they say zero, else its rows
  are read.
* ``primary_key`` (duplicates): **incremental**. Let version P have passed (no two live rows
  share a key) and V be the version checked. A data file of a Delta table is never changed
  once written, and a file with no deletion vector has exactly the rows it was written with,
  ``_cdc_deleted`` included; so a file present in both P and V, with no deletion vector in
  either (required of every file P records, and of every kept file at V: otherwise the check
  falls back), has the same live rows at V as at P. Two live rows of V with the same key are
  therefore never both in kept files: at least one is in a file added since P. So V has no
  duplicate exactly when (1) the keys of the added files' live rows are distinct among
  themselves and (2) no kept file holds one of those keys. (2) is decided from the kept
  files' min/max statistics of the key columns (a file can only hold a key inside its ranges;
  Delta's statistics cover every row of the file, dead ones too, so they are conservative):
  when some kept file's ranges may hold an added key, or a key column's type or statistics
  cannot be compared exactly (anything but integers, dates and strings shorter than Delta's
  32-character truncation), the check falls back to Spark.

Only passes are decided here: whenever something offends (a null, a duplicate, a column
missing from gold), the caller's Spark check runs and reports the exact counts and samples,
as it always did. Lakes on object storage, tables whose added files exceed
:data:`READ_BYTES`, and added files with deletion vectors fall back too.
"""

from __future__ import annotations

import bisect
import datetime as dt
import logging
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
import pyarrow as pa
import pyarrow.compute as pc

from bronze.delta_checksum import version_checksum
from bronze.storage import LakePath, lake_path, open_delta
from gold import expectations as X
from gold.cuts import TableAtCut
from gold.outcome import CheckOutcome
from gold.views import CDC_PREFIX, view_columns

__all__ = ["READ_BYTES", "LogVerdicts", "TableFiles", "files_with_vectors", "verdicts_from_log"]

logger = logging.getLogger(__name__)

READ_BYTES: Final = 16 * 1024**2
"""Bytes of added files up to which their rows are read on the driver (else: Spark)."""
_DELETED: Final = f"{CDC_PREFIX}deleted"
_STRING_STATS: Final = 32
"""Delta truncates string statistics to this many characters (the maximum raised)."""
_ENGINE: Final = "medallion"


@dataclass(frozen=True, slots=True)
class TableFiles:
    """A table version's data files, as a later check needs them (see the module docstring).

    Attributes:
        version: The Delta version.
        paths: Its data files (paths relative to the table), none with a deletion vector.
        keys: The key columns it was checked with.
        not_null: The NOT NULL columns it was checked with.
        checks: The checks it passed.
    """

    version: int
    paths: frozenset[str]
    keys: tuple[str, ...]
    not_null: tuple[str, ...]
    checks: frozenset[str]


@dataclass(frozen=True, slots=True)
class LogVerdicts:
    """What :func:`verdicts_from_log` found.

    Attributes:
        outcomes: The passing outcomes, one per check asked; None when they could not be
            decided here (the caller runs the Spark check).
        files: The version's files (None when some has a deletion vector): what the gate
            remembers when the version passes.
        why: Why the log could not decide (for the debug log).
    """

    outcomes: list[CheckOutcome] | None
    files: TableFiles | None
    why: str = ""


def _undecided(why: str, files: TableFiles | None = None) -> LogVerdicts:
    return LogVerdicts(None, files, why)


def _comparable(value: Any) -> bool:
    """Statistics the range test compares exactly (see the module docstring)."""
    if isinstance(value, bool):
        return False
    if isinstance(value, int):
        return True
    if isinstance(value, str):
        return len(value) < _STRING_STATS
    return isinstance(value, dt.date) and not isinstance(value, dt.datetime)


def _may_hold(
    lows: Sequence[Any], highs: Sequence[Any], added: list[tuple[Any, ...]], firsts: list[Any]
) -> bool | None:
    """Whether a file with these per-column ranges may hold one of the ``added`` keys (sorted,
    ``firsts`` their first columns); None when the statistics cannot be compared."""
    if any(v is None or not _comparable(v) for v in (*lows, *highs)):
        return None
    try:
        start = bisect.bisect_left(firsts, lows[0])
        stop = bisect.bisect_right(firsts, highs[0])
        for key in added[start:stop]:
            if all(lo <= v <= hi for v, lo, hi in zip(key, lows, highs, strict=True)):
                return True
    except TypeError:  # a statistic of another type than the column's values
        return None
    return False


_CHECKPOINT = re.compile(r"^(\d{20})\.checkpoint(?:\.\d{10}\.\d{10})?\.parquet$")
_COMMIT = re.compile(r"^(\d{20})\.json$")


def files_with_vectors(table: Path, version: int) -> set[str]:
    """The data files of ``version`` that have a deletion vector (their file names), replayed
    from the local Delta log: the newest classic checkpoint at or below the version, then the
    JSON commits after it (each commit's removes before its adds: a vector's update removes
    the file with its old vector and adds it with the new one).

    deltalake does not expose the vectors of a table with the type-widening feature, which
    silver tables have; anything this replay does not know (a V2 checkpoint) raises, and the
    caller falls back to Spark.
    """
    log = table / "_delta_log"
    names = [p.name for p in log.iterdir()]
    if any(".checkpoint." in n and not _CHECKPOINT.match(n) for n in names):
        raise ValueError(f"{log}: a checkpoint format this replay does not read")
    parts: dict[int, list[str]] = {}
    for n in names:
        found = _CHECKPOINT.match(n)
        if found and int(found.group(1)) <= version:
            parts.setdefault(int(found.group(1)), []).append(n)
    state: dict[str, bool] = {}
    start = 0
    if parts:
        start = max(parts)
        import pyarrow.parquet as pq

        for n in parts[start]:
            adds = pq.read_table(log / n, columns=["add"]).column("add").combine_chunks()
            has_vector = "deletionVector" in [f.name for f in adds.type]
            paths = adds.field("path").to_pylist()
            vectors = adds.field("deletionVector").is_valid().to_pylist() if has_vector else None
            for i, path in enumerate(paths):
                if path is not None:
                    state[path] = bool(vectors[i]) if vectors is not None else False
        start += 1
    commits = sorted(
        int(m.group(1)) for n in names if (m := _COMMIT.match(n)) and start <= int(m.group(1))
    )
    for commit in (c for c in commits if c <= version):
        actions = [
            orjson.loads(line)
            for line in (log / f"{commit:020d}.json").read_bytes().splitlines()
            if line.strip()
        ]
        for action in actions:
            if "remove" in action:
                state.pop(action["remove"]["path"], None)
        for action in actions:
            if "add" in action:
                state[action["add"]["path"]] = action["add"].get("deletionVector") is not None
    return {urllib.parse.unquote(p).rsplit("/", 1)[-1] for p, vector in state.items() if vector}


def _local_file(root: Path, path: str) -> Path | None:
    parsed = urllib.parse.urlparse(path)
    if parsed.scheme == "file":
        return Path(urllib.parse.unquote(parsed.path))
    if parsed.scheme:
        return None
    return root / urllib.parse.unquote(path)


def _passing(
    checks: Iterable[str], source: str, meta: X.TableMetadata, keys: list[str], others: list[str]
) -> list[CheckOutcome]:
    """The outcomes :func:`gold.key_checks.key_outcomes` gives a table with nothing wrong."""
    out = []
    for check in checks:
        if check == X.PRIMARY_KEY:
            details = X.primary_key_description(meta.key_columns)
            counted = 0 if keys else None
        else:
            declared = [c for c in meta.not_null if c not in meta.key_columns]
            details = X.not_null_description(declared)
            counted = 0 if others else None
        out.append(
            CheckOutcome(
                check=check,
                source=source,
                table=meta.collection,
                success=True,
                observed="ok",
                unexpected_count=counted,
                details=details,
                engine=_ENGINE,
            )
        )
    return out


def gold_schema(lake_root: LakePath, table: TableAtCut) -> Any:
    """The gold columns' Spark ``StructType`` at the table's version, from the Delta log (the
    version's checksum file when it has one: deltalake replays the log to open the version)."""
    from pyspark.sql.types import StructType

    path = lake_path(lake_root) / "silver" / table.silver_table
    checksum = version_checksum(path, table.version)
    if checksum is not None:
        text = checksum.metadata["schemaString"]
    else:
        text = open_delta(path, version=table.version).schema().to_json()
    schema = StructType.fromJson(orjson.loads(text))
    shown = set(view_columns(schema.names))
    return StructType([f for f in schema.fields if f.name in shown])


def verdicts_from_log(
    lake_root: LakePath,
    source: str,
    table: TableAtCut,
    meta: X.TableMetadata,
    checks: Sequence[str],
    passed: TableFiles | None,
) -> LogVerdicts:
    """``primary_key``/``not_null`` of one table version decided without Spark, when they pass.

    Args:
        lake_root: The lake root.
        source: The source name.
        table: The table and version to check.
        meta: Its metadata (key and NOT NULL columns).
        checks: Which of :data:`gold.expectations.PRIMARY_KEY` and
            :data:`gold.expectations.NOT_NULL` to decide.
        passed: The files of the table's last version that passed these checks, if any.

    Returns:
        The verdicts, or why they could not be decided here.
    """
    root = lake_path(lake_root)
    if not isinstance(root, Path):
        return _undecided("the lake is not on a local file system")
    path = root / "silver" / table.silver_table
    log = open_delta(path, version=table.version)
    names = view_columns(f.name for f in log.schema().fields)
    present = set(names)
    keys = [k for k in meta.key_columns if k in present]
    others = [c for c in meta.not_null if c not in meta.key_columns and c in present]
    if len(keys) < len(meta.key_columns) or len(others) < len(
        [c for c in meta.not_null if c not in meta.key_columns]
    ):
        return _undecided("a checked column is missing from gold")
    actions = pa.table(log.get_add_actions(flatten=True))
    with_vectors = files_with_vectors(path, table.version)
    paths = actions.column("path").to_pylist()
    files = None
    if not with_vectors:
        files = TableFiles(
            table.version, frozenset(paths), tuple(keys), tuple(others), frozenset(checks)
        )
    if passed is not None and (
        (passed.keys, passed.not_null) != (tuple(keys), tuple(others))
        or not passed.checks >= set(checks)
    ):
        passed = None  # checked otherwise: nothing carries over
    kept_paths = passed.paths if passed is not None else frozenset()
    rows = actions.to_pylist()
    added = [r for r in rows if r["path"] not in kept_paths]
    kept = [r for r in rows if r["path"] in kept_paths]
    if any(r["path"].rsplit("/", 1)[-1] in with_vectors for r in rows):
        return _undecided("a file has a deletion vector", files)
    if sum(r["size_bytes"] or 0 for r in added) > READ_BYTES:
        return _undecided("the added files are too large to read on the driver", files)

    want_keys = X.PRIMARY_KEY in checks
    # The key's nulls fail primary_key, the other NOT NULL columns' nulls not_null.
    nullable = [*(keys if want_keys else []), *(others if X.NOT_NULL in checks else [])]
    added_keys: list[tuple[Any, ...]] = []
    for action in added:
        # A column whose statistics say "no null in this file" is not read for its nulls.
        unsure = [c for c in nullable if action.get(f"null_count.{c}") != 0]
        columns = list(dict.fromkeys([*(keys if want_keys else []), *unsure]))
        if not columns:
            continue
        local = _local_file(path, action["path"])
        if local is None:
            return _undecided("a data file is not on the local file system", files)
        import pyarrow.parquet as pq

        data = pq.read_table(local, columns=[*columns, _DELETED])
        live = data.filter(pc.equal(data.column(_DELETED), False))
        for c in unsure:
            if live.column(c).null_count:
                return _undecided(f"{c} has nulls", files)
        if want_keys and keys:
            added_keys += list(zip(*(live.column(k).to_pylist() for k in keys), strict=True))
    if want_keys and keys:
        if any(isinstance(v, float) for key in added_keys for v in key):
            # Spark groups NaN with NaN; Python's equality does not: no verdict here.
            return _undecided("a key column holds floating-point values", files)
        if len(set(added_keys)) < len(added_keys):
            return _undecided("an added key occurs twice", files)
        added_keys.sort(key=lambda k: k)
        firsts = [k[0] for k in added_keys]
        for action in kept if added_keys else []:
            held = _may_hold(
                [action.get(f"min.{k}") for k in keys],
                [action.get(f"max.{k}") for k in keys],
                added_keys,
                firsts,
            )
            if held is None:
                return _undecided("a kept file's key statistics cannot be compared", files)
            if held:
                return _undecided("a kept file may hold an added key", files)
    return LogVerdicts(_passing(checks, source, meta, keys, others), files)
