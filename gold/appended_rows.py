"""The rows of an append-only bookkeeping table, read once per data file.

Every gold refresh asks for the newest consistent cut (``silver/_cuts``, ``silver/_progress``)
and the cut gold shows (``gold/_published``). Each micro-batch appends one small file to each
of these tables, so reading them whole in every refresh grows with the run's age: after an hour
of one-second micro-batches, thousands of files per refresh. :func:`appended_rows` keeps, per
table, its open log (brought up to date with the commits since, not replayed from the last
checkpoint) and the rows of each data file it already read, and reads only the files added
since. A table whose files were removed (rewritten, compacted, overwritten) keeps the rows of
its remaining files only, so what it returns is always the table's current rows.

Only a plain local table is read this way: no partition columns, reader protocol 1 (no
deletion vectors, no column mapping: a data file's rows are the table's rows). Any other table
is read whole by deltalake, as before.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

from deltalake.exceptions import TableNotFoundError

from bronze.storage import LakePath, open_delta

__all__ = ["appended_rows", "forget"]

Row = dict[str, Any]


@dataclass(slots=True)
class _Known:
    """What was read of one table: its open log and the rows of each data file."""

    log: Any
    files: dict[str, list[Row]] = field(default_factory=dict)
    commit: tuple[int, int] | None = None
    """Size and modification time of the newest commit file read: a table deleted and
    written again at the same place (a test's lake, a rolled-back log) is read anew."""


def _commit_stamp(log: Any) -> tuple[int, int] | None:
    import os

    root = _local_file(str(log.table_uri))
    if root is None:
        return None
    try:
        found = os.stat(os.path.join(root, "_delta_log", f"{log.version():020d}.json"))
    except OSError:
        return None  # a checkpointed and cleaned-up log: nothing to compare, read anew
    return (found.st_size, found.st_mtime_ns)


_KNOWN: dict[tuple[str, tuple[str, ...]], _Known] = {}
_LOCK = threading.RLock()
"""One reader at a time (the micro-batch's refresh and the background quality run may both
ask): an open deltalake table is not shared between threads."""


def forget() -> None:
    """Drop every table's cached rows (tests that rewrite a lake under the same path)."""
    with _LOCK:
        _KNOWN.clear()


def _local_file(uri: str) -> str | None:
    if uri.startswith("/"):
        return uri
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def _plain(log: Any) -> bool:
    return bool(log.protocol().min_reader_version == 1 and not log.metadata().partition_columns)


def _read_file(path: str, columns: Sequence[str]) -> list[Row]:
    import pyarrow.parquet as pq

    present = set(pq.read_schema(path).names)
    table = pq.read_table(path, columns=[c for c in columns if c in present])
    rows: list[Row] = table.to_pylist()
    missing = [c for c in columns if c not in present]  # files older than a column
    for r in rows:
        for c in missing:
            r[c] = None
    return rows


def _whole(log: Any, columns: Sequence[str]) -> list[Row]:
    present = set(log.schema().to_arrow().names)
    rows: list[Row] = log.to_pyarrow_table(columns=[c for c in columns if c in present]).to_pylist()
    for r in rows:
        for c in columns:
            r.setdefault(c, None)
    return rows


def appended_rows(path: LakePath | str, columns: Sequence[str]) -> list[Row]:
    """The current rows of the Delta table at ``path``, ``columns`` only (a column the table
    or a file lacks reads None); empty without the table.

    Args:
        path: An append-only bookkeeping table.
        columns: The columns wanted.

    Returns:
        Rows as dicts, in the order of the table's files; shared with later calls, so
        callers read them and never change them.
    """
    key = (str(path), tuple(columns))
    with _LOCK:
        known = _KNOWN.get(key)
        if known is not None and (known.commit is None or _commit_stamp(known.log) != known.commit):
            known = None
        if known is None:
            try:
                log = open_delta(path)
            except TableNotFoundError:
                return []
            known = _Known(log)
        else:
            try:
                known.log.update_incremental()
            except Exception:  # noqa: BLE001 - any doubt about the open log: read it anew
                _KNOWN.pop(key, None)
                return appended_rows(path, columns)
        log = known.log
        uris = log.file_uris()
        files = [_local_file(u) for u in uris]
        new = [f for f in files if f is None or f not in known.files]
        if not _plain(log) or any(f is None or not os.path.exists(f) for f in new):
            _KNOWN.pop(key, None)
            return _whole(log, columns)
        read = {f: known.files.get(f) for f in files if f is not None}
        for f, rows in read.items():
            if rows is None:
                read[f] = _read_file(f, columns)
        known.files = {f: rows for f, rows in read.items() if rows is not None}
        known.commit = _commit_stamp(log)
        _KNOWN[key] = known
        return [r for rows in known.files.values() for r in rows]
