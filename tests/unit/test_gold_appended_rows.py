"""gold/appended_rows.py on real Delta tables written with deltalake: each data file read once,
the table's current rows whatever happened to it (appends, an overwrite, a table written again
at the same place, a column added later)."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from gold.appended_rows import appended_rows

pytestmark = pytest.mark.unit


def _write(
    path: Path,
    values: list[int],
    mode: Literal["append", "overwrite"] = "append",
    **extra: list[str],
) -> None:
    columns = {"n": pa.array(values, pa.int64()), **{k: pa.array(v) for k, v in extra.items()}}
    write_deltalake(str(path), pa.table(columns), mode=mode, schema_mode="merge")


def _values(path: Path, *columns: str) -> list[tuple[object, ...]]:
    wanted = columns or ("n",)
    return sorted(tuple(r[c] for c in wanted) for r in appended_rows(path, wanted))


def test_only_new_files_are_read_and_removed_files_leave(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import gold.appended_rows as A

    path = tmp_path / "t"
    assert appended_rows(path, ("n",)) == []  # no table yet
    _write(path, [1, 2])
    assert _values(path) == [(1,), (2,)]
    read: list[str] = []
    original = A._read_file

    def counted(file: str, columns: Sequence[str]) -> list[dict[str, object]]:
        read.append(file)
        return original(file, columns)

    monkeypatch.setattr(A, "_read_file", counted)
    _write(path, [3])
    assert _values(path) == [(1,), (2,), (3,)]
    assert len(read) == 1  # the new file only
    assert _values(path) == [(1,), (2,), (3,)] and len(read) == 1  # nothing new: nothing read
    _write(path, [7], mode="overwrite")
    assert _values(path) == [(7,)]
    # A column added later reads None in the files written before it.
    _write(path, [8], note=["x"])
    assert _values(path, "n", "note") == [(7, None), (8, "x")]
    # The same place, a new table (a test's lake, a log rolled back): read anew.
    shutil.rmtree(path)
    _write(path, [5])
    assert _values(path) == [(5,)]
