"""The gate's verdicts from the Delta log (:mod:`gold.gate_log`): passes decided from the files
added since the last passing version, anything doubtful left to the Spark check."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from gold import expectations as X
from gold.cuts import TableAtCut
from gold.gate_log import TableFiles, gold_schema, verdicts_from_log

NAME = "shop__public__stock"
META = X.TableMetadata("public.stock", key_columns=("id",), not_null=("id", "qty"))
BOTH = (X.PRIMARY_KEY, X.NOT_NULL)


def _append(lake: Path, rows: list[tuple[Any, Any, bool]]) -> int:
    path = lake / "silver" / NAME
    table = pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "qty": pa.array([r[1] for r in rows], pa.int64()),
            "_cdc_deleted": pa.array([r[2] for r in rows], pa.bool_()),
        }
    )
    write_deltalake(str(path), table, mode="append")
    from deltalake import DeltaTable

    return int(DeltaTable(str(path)).version())


def _check(lake: Path, version: int, passed: TableFiles | None, checks: Any = BOTH) -> Any:
    table = TableAtCut(NAME, "public.stock", version)
    return verdicts_from_log(lake, "shop", table, META, checks, passed)


def test_a_version_passes_from_its_added_files_and_its_kept_files_statistics(
    tmp_path: Path,
) -> None:
    first = _check(tmp_path, _append(tmp_path, [(1, 5, False), (2, 7, False), (3, 1, False)]), None)
    assert first.outcomes is not None and first.files is not None
    assert [(o.check, o.success, o.unexpected_count, o.engine) for o in first.outcomes] == [
        (X.PRIMARY_KEY, True, 0, "medallion"),
        (X.NOT_NULL, True, 0, "medallion"),
    ]
    # New keys beyond the kept file's range, and a dead row whose key and qty would offend.
    version = _append(tmp_path, [(4, 1, False), (5, 2, False), (2, None, True)])
    second = _check(tmp_path, version, first.files)
    assert second.outcomes is not None and all(o.success for o in second.outcomes), second.why
    assert second.files is not None and len(second.files.paths) == 2
    # gold's columns and types come from the log too
    assert [f.name for f in gold_schema(tmp_path, TableAtCut(NAME, "x", version)).fields] == [
        "id",
        "qty",
    ]


@pytest.mark.parametrize(
    ("rows", "why"),
    [
        ([(2, 9, False)], "a kept file may hold an added key"),  # a duplicate of a kept key
        ([(8, 1, False), (8, 2, False)], "an added key occurs twice"),
        ([(9, None, False)], "qty has nulls"),
        ([(None, 1, False)], "id has nulls"),
    ],
)
def test_anything_that_may_offend_is_left_to_the_spark_check(
    tmp_path: Path, rows: list[tuple[Any, Any, bool]], why: str
) -> None:
    first = _check(tmp_path, _append(tmp_path, [(1, 5, False), (2, 7, False), (3, 1, False)]), None)
    found = _check(tmp_path, _append(tmp_path, rows), first.files)
    assert found.outcomes is None and found.why == why


def test_without_a_passing_version_every_file_is_read(tmp_path: Path) -> None:
    _append(tmp_path, [(1, 5, False), (2, 7, False)])
    version = _append(tmp_path, [(2, 7, False)])  # two files, a duplicate across them
    found = _check(tmp_path, version, None)
    assert found.outcomes is None and found.why == "an added key occurs twice"
    # not_null alone does not read the key, and passes
    only = _check(tmp_path, version, None, (X.NOT_NULL,))
    assert only.outcomes is not None and only.outcomes[0].success


def test_a_passing_version_checked_with_other_columns_carries_nothing_over(
    tmp_path: Path,
) -> None:
    first = _check(tmp_path, _append(tmp_path, [(1, 5, False), (2, 7, False)]), None)
    assert first.files is not None
    other = TableFiles(first.files.version, first.files.paths, ("qty",), (), frozenset(BOTH))
    found = _check(tmp_path, _append(tmp_path, [(2, 9, False)]), other)
    assert found.why == "an added key occurs twice"  # every file read again


def test_a_missing_column_is_left_to_the_spark_check(tmp_path: Path) -> None:
    version = _append(tmp_path, [(1, 5, False)])
    meta = X.TableMetadata("public.stock", key_columns=("id",), not_null=("id", "gone"))
    found = verdicts_from_log(tmp_path, "shop", TableAtCut(NAME, "x", version), meta, BOTH, None)
    assert found.outcomes is None and found.why == "a checked column is missing from gold"


def test_the_files_with_deletion_vectors_are_replayed_from_the_log(tmp_path: Path) -> None:
    """A checkpoint, then commits: a vector added, updated (remove + add of the same file in
    one commit, in either order) and a file removed."""
    import orjson
    import pyarrow.parquet as pq

    from gold.gate_log import files_with_vectors

    log = tmp_path / "_delta_log"
    log.mkdir()
    vector = {"storageType": "u", "pathOrInlineDv": "x", "sizeInBytes": 1, "cardinality": 1}
    add_type = pa.struct(
        [
            ("path", pa.string()),
            (
                "deletionVector",
                pa.struct([("storageType", pa.string()), ("cardinality", pa.int64())]),
            ),
        ]
    )
    adds = pa.array(
        [
            {"path": "a.parquet", "deletionVector": None},
            {"path": "b.parquet", "deletionVector": {"storageType": "u", "cardinality": 2}},
            None,  # a row of another action
        ],
        add_type,
    )
    pq.write_table(pa.table({"add": adds}), log / f"{10:020d}.checkpoint.parquet")

    def commit(version: int, *actions: dict[str, Any]) -> None:
        (log / f"{version:020d}.json").write_bytes(b"\n".join(orjson.dumps(a) for a in actions))

    commit(9, {"add": {"path": "old.parquet", "deletionVector": vector}})  # before the checkpoint
    commit(10, {"add": {"path": "ignored.parquet", "deletionVector": vector}})  # in it
    commit(
        11,
        {"add": {"path": "a.parquet", "deletionVector": vector}},
        {"remove": {"path": "a.parquet"}},
        {"add": {"path": "c%20d.parquet"}},
    )
    commit(12, {"remove": {"path": "b.parquet", "deletionVector": vector}})
    assert files_with_vectors(tmp_path, 10) == {"b.parquet"}
    assert files_with_vectors(tmp_path, 11) == {"a.parquet", "b.parquet"}
    assert files_with_vectors(tmp_path, 12) == {"a.parquet"}
    (log / f"{12:020d}.checkpoint.0f3c.json").write_text("{}")  # a V2 checkpoint: unknown
    with pytest.raises(ValueError, match="checkpoint format"):
        files_with_vectors(tmp_path, 12)
