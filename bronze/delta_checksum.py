"""Delta checksum files (``_delta_log/<version>.crc``) for versions that delta-rs committed.

Spark's Delta reads a version's protocol and metadata from the version's checksum file; without
one, every snapshot of that version (a ``VERSION AS OF`` query, each gold view defined over one,
the stream source's newest bronze version) runs a Spark job over the log to find those two
actions. Spark writes a checksum with each of its commits; delta-rs (1.x) writes none, and the
silver tables' MERGE on the driver, the bookkeeping tables and bronze are delta-rs commits.

:func:`version_checksum` writes the file the way Delta's own incremental commit does
(``RecordChecksum.incrementallyDeriveChecksum``): the newest checksum at or below the version,
plus the actions of the commits after it (file count and bytes added and removed, the newest
``metaData`` and ``protocol`` as written in the log, the commit's in-commit timestamp when the
table has them); or, when no checksum precedes it, a replay of every commit from version 0. Only
what the checksum must hold is written: ``setTransactions``, ``domainMetadata``, the histograms
and the file list are left out, so Delta computes them from the log when it needs them (a
checksum that named them would have to name them all, and a wrong app transaction would let a
replayed write through). Anything it cannot account for exactly (a remove without its size, an
operation whose adds or removes Delta's own arithmetic skips, a managed-commit table, a log
cleaned past what it needs, a lake on object storage) writes nothing: Delta then reads the log
with its job, as before. A written file is never changed (a version never changes); it is made
under a temporary name and linked into place, so a reader never sees half of one and a
concurrent writer of the same file (Spark's post-commit hook) keeps its own.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from bronze.storage import LakePath, ObjectPath, lake_path

__all__ = ["VersionChecksum", "version_checksum"]

logger = logging.getLogger(__name__)

_LOG_FILE = re.compile(r"(\d{20})\.(json|crc)")
_MAX_REPLAY = 2_000
"""Commits replayed at most to build one checksum (beyond: Delta's own job is cheaper)."""

_ADDS_NOT_COUNTED = frozenset(
    {"COMPUTE STATS", "ROW TRACKING BACKFILL", "ROW TRACKING UNBACKFILL", "DROP FEATURE"}
)
"""Operations that re-add files already in the table (Delta's
``operationNamesWhereAddFilesIgnoredForIncrementalCrc``)."""
_REMOVES_NOT_COUNTED = frozenset({"Deletion Vector Tombstones"})
"""Operations whose removes name no data file of the table (Delta's
``operationNamesWhereRemoveFilesIgnoredForIncrementalCrc``)."""
_NOT_DERIVED = frozenset({"Manual Update"})
"""Operations Delta never derives a checksum over (their actions may break the protocol's rules)."""


class _Unaccountable(Exception):
    """A commit whose effect on the checksum is not known exactly: no file is written."""


@dataclass(slots=True)
class VersionChecksum:
    """What a Delta checksum file of one version holds (the fields this module writes).

    Attributes:
        version: The table version.
        table_size_bytes: Bytes of the live data files.
        num_files: Live data files.
        metadata: The table's ``metaData`` action, as in the log.
        protocol: The table's ``protocol`` action, as in the log.
        in_commit_timestamp: The version's in-commit timestamp (tables that keep them).
    """

    version: int
    table_size_bytes: int
    num_files: int
    metadata: dict[str, Any]
    protocol: dict[str, Any]
    in_commit_timestamp: int | None = None

    @property
    def columns(self) -> list[str]:
        """The table's column names at this version, in order."""
        return [f["name"] for f in orjson.loads(self.metadata["schemaString"])["fields"]]

    def to_json(self) -> bytes:
        """The checksum file's content (Delta's ``VersionChecksum``; absent fields are None)."""
        body: dict[str, Any] = {
            "tableSizeBytes": self.table_size_bytes,
            "numFiles": self.num_files,
            "numMetadata": 1,
            "numProtocol": 1,
            "metadata": self.metadata,
            "protocol": self.protocol,
        }
        if self.in_commit_timestamp is not None:
            body["inCommitTimestampOpt"] = self.in_commit_timestamp
        return orjson.dumps(body)


@dataclass(slots=True)
class _Replay:
    """The state of a table while commits are applied to it."""

    size: int = 0
    count: int = 0
    files: dict[str, int] | None = None
    """Live files by path when replaying from version 0 (exact whatever the operation)."""
    metadata: dict[str, Any] | None = None
    protocol: dict[str, Any] | None = None
    in_commit_timestamp: int | None = None

    def apply(self, version: int, text: bytes) -> None:
        actions = [orjson.loads(line) for line in text.splitlines() if line.strip()]
        info: dict[str, Any] = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        operation = info.get("operation")
        if operation in _NOT_DERIVED or info.get("lastManifestCommit") is not None:
            raise _Unaccountable(f"version {version}: {operation or 'a managed commit'}")
        self.in_commit_timestamp = info.get("inCommitTimestamp")
        for action in actions:
            if "add" in action:
                self._add(action["add"], operation)
            elif "remove" in action:
                self._remove(version, action["remove"], operation)
            elif "metaData" in action:
                self.metadata = action["metaData"]
            elif "protocol" in action:
                self.protocol = action["protocol"]

    def _add(self, add: dict[str, Any], operation: str | None) -> None:
        if self.files is not None:
            self.files[_relative(add["path"])] = int(add["size"])
        elif operation not in _ADDS_NOT_COUNTED:
            self.size += int(add["size"])
            self.count += 1

    def _remove(self, version: int, remove: dict[str, Any], operation: str | None) -> None:
        if self.files is not None:
            self.files.pop(_relative(remove["path"]), None)
        elif operation not in _REMOVES_NOT_COUNTED:
            # Delta counts a remove only with its size (``extendedFileMetadata``).
            if remove.get("extendedFileMetadata") is not True or remove.get("size") is None:
                raise _Unaccountable(f"version {version}: a remove without its size")
            self.size -= int(remove["size"])
            self.count -= 1

    def result(self, version: int) -> VersionChecksum:
        if self.files is not None:
            self.size, self.count = sum(self.files.values()), len(self.files)
        if self.metadata is None or self.protocol is None:
            raise _Unaccountable("no metaData or protocol action")
        if self.size < 0 or self.count < 0:
            raise _Unaccountable(f"negative totals ({self.count} files, {self.size} bytes)")
        features = [
            *(self.protocol.get("readerFeatures") or ()),
            *(self.protocol.get("writerFeatures") or ()),
        ]
        if any("catalog" in f.lower() or "coordinatedcommits" in f.lower() for f in features):
            raise _Unaccountable("a table whose commits a catalog or coordinator owns")
        config = self.metadata.get("configuration") or {}
        timed = str(config.get("delta.enableInCommitTimestamps", "")).lower() == "true"
        if timed and self.in_commit_timestamp is None:
            raise _Unaccountable("in-commit timestamps on, none in the version's commit")
        return VersionChecksum(
            version,
            self.size,
            self.count,
            self.metadata,
            self.protocol,
            self.in_commit_timestamp if timed else None,
        )


def _relative(path: str) -> str:
    if ":" in path or path.startswith("/"):
        # An absolute or URI path may name the same file as a relative one (shallow clones).
        raise _Unaccountable(f"a file outside the table's directory ({path})")
    return path


def _name(version: int, kind: str) -> str:
    return f"{version:020d}.{kind}"


def _read_checksum(path: Path, version: int) -> VersionChecksum | None:
    body = orjson.loads(path.read_bytes())
    metadata, protocol = body.get("metadata"), body.get("protocol")
    if not isinstance(metadata, dict) or not isinstance(protocol, dict):
        return None  # an old checksum without them: Delta does not read them from it either
    return VersionChecksum(
        version,
        int(body["tableSizeBytes"]),
        int(body["numFiles"]),
        metadata,
        protocol,
        body.get("inCommitTimestampOpt"),
    )


def _derive(log: Path, version: int) -> VersionChecksum | None:
    """The checksum of ``version`` from the newest checksum below it and the commits after
    it, or from a replay of every commit; None when neither is possible."""
    base = None
    previous = log / _name(version - 1, "crc")
    if version > 0 and previous.exists():
        base = _read_checksum(previous, version - 1)
        commits = [version]
    if base is None:
        listed = [m for m in map(_LOG_FILE.fullmatch, os.listdir(log)) if m]
        written = {int(m[1]) for m in listed if m[2] == "json"}
        start = max(
            (int(m[1]) for m in listed if m[2] == "crc" and int(m[1]) < version), default=-1
        )
        if version - start > _MAX_REPLAY:
            return None
        commits = list(range(start + 1, version + 1))
        if not written.issuperset(commits):
            return None  # a commit cleaned up (a log that starts at a checkpoint)
        if start >= 0:
            base = _read_checksum(log / _name(start, "crc"), start)
            if base is None:
                return None
    replay = (
        _Replay(base.table_size_bytes, base.num_files, None, base.metadata, base.protocol)
        if base is not None
        else _Replay(files={})
    )
    for v in commits:
        replay.apply(v, (log / _name(v, "json")).read_bytes())
    return replay.result(version)


def _write_new(target: Path, content: bytes) -> None:
    """``target`` with ``content`` unless it exists, never half-written (a hidden temporary
    name, which Delta's and delta-rs's log listings skip, linked into place)."""
    temporary = target.with_name(f".{target.name}.{uuid.uuid4().hex}.tmp")
    temporary.write_bytes(content)
    try:
        os.link(temporary, target)
    except FileExistsError:
        pass  # Spark (or another process) wrote it first: a version's checksum is one content
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()


def version_checksum(table: LakePath | str, version: int) -> VersionChecksum | None:
    """The checksum of a Delta table version, its file written first if the log lacks it.

    Args:
        table: The table's directory.
        version: A committed version of it.

    Returns:
        The checksum (read back from the file when one exists), or None when none could be
        derived exactly (see the module docstring): Delta then reads the log itself.
    """
    where = lake_path(table)
    if isinstance(where, ObjectPath):
        return None  # a put-if-absent there is the store's business, not a link
    log = Path(where) / "_delta_log"
    target = log / _name(version, "crc")
    try:
        if target.exists():
            return _read_checksum(target, version)
        derived = _derive(log, version)
        if derived is not None:
            _write_new(target, derived.to_json())
        return derived
    except (_Unaccountable, OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        # A malformed log (orjson.JSONDecodeError is a ValueError; a null action an
        # AttributeError) is Delta's to report when it reads it, not a checksum's.
        logger.debug("no checksum for %s v%s: %s", where, version, exc)
        return None
