"""The schema ids of each table's newest bronze event, kept up to date from new bronze files only.

The blocking checks need, per table of a cut, the key and value schema ids (and a record key)
of its newest data event at or before the cut (:func:`gold.checks.latest_schemas` over
:func:`gold.checks.source_events`): an aggregate over the source's whole bronze history, which
grows with every micro-batch. Bronze ``events`` is append-only, so the answer for a later cut
follows from the answer for an earlier one and the rows of the files added since.
:class:`LatestSchemas` keeps, per source, the newest value of each column per table with its
position, and the bronze files it has fully read; each call reads only the files it has not
(with deltalake and pyarrow: no Spark job).

A file holding rows beyond the cut is read up to the cut and read again next time; merging a
row twice changes nothing (the newest position wins). A cut older than one already served
(gold never moves back, but a caller could ask) is answered from scratch.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from deltalake.exceptions import TableNotFoundError

from bronze import schema as B
from bronze.storage import LakePath, lake_path, open_delta
from gold.cuts import Cut

__all__ = ["LatestSchemas", "COLUMNS"]

logger = logging.getLogger(__name__)

COLUMNS = (B.KEY_SCHEMA_ID, B.VALUE_SCHEMA_ID, B.KEY_JSON)
"""What :func:`gold.checks.latest_schemas` returns per collection (besides its name)."""


@dataclass
class _SourceState:
    """What one source's bronze files read so far say, up to ``position``."""

    position: bytes
    files: set[str] = field(default_factory=set)
    newest: dict[str | None, dict[str, tuple[bytes, Any]]] = field(default_factory=dict)
    """Collection -> column -> (position, value) of its newest non-null value."""


@dataclass
class LatestSchemas:
    """Per source, each table's newest schema ids and record key, read incrementally.

    Attributes:
        files_read: Bronze files read, over the object's life (for the logs and tests).
    """

    files_read: int = 0
    _states: dict[tuple[str, str], _SourceState] = field(default_factory=dict)
    _logs: dict[str, Any] = field(default_factory=dict, repr=False)
    """Bronze's open log per lake, brought up to date by each call (not replayed)."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def latest(self, lake_root: LakePath, cut: Cut) -> list[dict[str, Any]]:
        """What :func:`gold.checks.latest_schemas` returns for the source's events at ``cut``.

        Args:
            lake_root: The lake root.
            cut: The cut (its source and position).

        Returns:
            One dict per collection with data events at or before the cut: ``collection`` and
            :data:`COLUMNS` (None where no event of the table carries one).
        """
        key = (str(lake_path(lake_root).absolute()), cut.source)
        with self._lock:
            state = self._states.get(key)
            if state is None or cut.position < state.position:
                state = _SourceState(cut.position)
            self._read_new_files(lake_path(lake_root), cut, state)
            state.position = cut.position
            self._states[key] = state
            return [
                {"collection": collection, **{c: columns.get(c, (b"", None))[1] for c in COLUMNS}}
                for collection, columns in state.newest.items()
            ]

    def _read_new_files(self, lake_root: LakePath, cut: Cut, state: _SourceState) -> None:
        path = lake_root / "bronze" / "events"
        log = self._logs.get(str(path))
        try:
            if log is None:
                log = open_delta(path)
            else:
                log.update_incremental()
        except TableNotFoundError:
            self._logs.pop(str(path), None)
            return
        self._logs[str(path)] = log
        if self._read_local_files(log, cut, state):
            return
        # A dataset over every bronze file (its construction alone grows with bronze's age):
        # for a lake on object storage, or a log with reader features.
        dataset = log.to_pyarrow_dataset()
        wanted = [B.COLLECTION, B.POSITION, *COLUMNS]
        # The source is a partition column: it prunes the files, and (filled in from each
        # file's partition values) it filters the rows too, should a file not be pruned.
        mine = pc.field(B.SOURCE) == cut.source
        rows_filter = mine & (pc.field(B.KIND) == "data") & (pc.field(B.POSITION) <= cut.position)
        for fragment in dataset.get_fragments(filter=mine):
            if fragment.path in state.files:
                continue
            table = fragment.to_table(
                schema=dataset.schema, columns=[*wanted, B.KIND, B.SOURCE], filter=mine
            )
            self.files_read += 1
            top = pc.max(table.column(B.POSITION)).as_py() if table.num_rows else None
            if top is None or bytes(top) <= cut.position:
                state.files.add(fragment.path)  # nothing in it can change for a later cut
            _merge(state, ds.dataset(table).to_table(columns=wanted, filter=rows_filter))

    def _read_local_files(self, log: Any, cut: Cut, state: _SourceState) -> bool:
        """Read the source's new bronze files straight from a local disk (False: the lake is
        not local, or its files are not plain Parquet of the table's rows).

        The log lists the source's files by its partition values, with no statistics parsed
        and no dataset built over every file of bronze: a refresh costs what bronze added.
        """
        import pyarrow.parquet as pq

        if log.protocol().min_reader_version != 1:
            return False  # deletion vectors or column mapping: a file is not its rows
        uris = log.file_uris(file_pruning_predicate=[(B.SOURCE, "=", cut.source)])
        local = [_local_file(u) for u in uris if u not in state.files]
        if any(f is None or not os.path.exists(f) for f in local):
            return False  # not on this disk, or a path spelled otherwise than it is stored
        wanted = [B.COLLECTION, B.POSITION, *COLUMNS]
        for uri in uris:
            if uri in state.files:
                continue
            file = _local_file(uri) or uri
            present = set(pq.read_schema(file).names)
            table = pq.read_table(file, columns=[c for c in [*wanted, B.KIND] if c in present])
            for column in [*wanted, B.KIND]:
                if column not in present:  # a file older than the column
                    table = table.append_column(column, pa.nulls(table.num_rows, pa.string()))
            self.files_read += 1
            top = pc.max(table.column(B.POSITION)).as_py() if table.num_rows else None
            if top is None or bytes(top) <= cut.position:
                state.files.add(uri)  # nothing in it can change for a later cut
            keep = pc.and_(
                pc.fill_null(pc.equal(table.column(B.KIND), "data"), False),
                pc.fill_null(pc.less_equal(table.column(B.POSITION), cut.position), False),
            )
            _merge(state, table.filter(keep).select(wanted))
        return True

    def forget(self, lake_root: LakePath) -> None:
        """Drop what is known of a lake's sources (a lake rebuilt under the same path)."""
        root = str(lake_path(lake_root).absolute())
        with self._lock:
            for key in [k for k in self._states if k[0] == root]:
                del self._states[key]
            self._logs.clear()


def _local_file(uri: str) -> str | None:
    if uri.startswith("/"):
        return uri
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else None


def _merge(state: _SourceState, rows: pa.Table) -> None:
    """Fold ``rows`` (collection, position, :data:`COLUMNS`) into the newest values."""
    if rows.num_rows == 0:
        return
    data: Mapping[str, list[Any]] = rows.to_pydict()
    positions = data[B.POSITION]
    for i, collection in enumerate(data[B.COLLECTION]):
        columns = state.newest.setdefault(collection, {})
        position = positions[i]
        if position is None:
            continue  # Spark's max_by ignores rows without an ordering value, so do we
        position = bytes(position)
        for column in COLUMNS:
            value = data[column][i]
            if value is None:
                continue
            held = columns.get(column)
            if held is None or position > held[0]:
                columns[column] = (position, value)
