"""Which bytes of which file bronze has read: file identity, rotation and the loud failures.

A file is identified by its device and inode plus the SHA-256 of its first bytes (up to
:data:`HEAD_BYTES`, never more than bronze has read), not by its name:

* the inode follows a file through a rename, so a rotated file (``current.jsonl`` renamed to
  ``2026-01-01.jsonl``) continues from its offset under its new name, and a new file created
  under an old name is a new file, read from its first byte;
* the head hash tells a file that reuses a freed inode (common on ext4 and tmpfs right after a
  delete) from the file bronze read, and catches a file rewritten in place.

Progress may only grow. A file that shrank below its offset, or whose head changed under the
same name, raises :class:`FileIdentityError` (terminal: a person has to look), naming the file,
the committed offset and what is there now. So does a file that disappeared while bronze knew
it had unread bytes. The committed offset keeps the old readable shape ``files: {name: [byte,
line, identity]}`` (format 2); a format-1 offset (``{name: [byte, line]}``) is migrated by name.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline.errors import CaptureError, Terminal

__all__ = ["HEAD_BYTES", "FileIdentityError", "TrackedFile", "FileTracker"]

logger = logging.getLogger(__name__)

HEAD_BYTES = 4096
"""How many leading bytes (at most) identify a file besides its inode."""


class FileIdentityError(CaptureError, Terminal):
    """A file bronze was reading shrank, was replaced, or vanished with unread bytes."""


@dataclass(slots=True)
class TrackedFile:
    """Progress and identity of one file.

    Attributes:
        name: The file's current name (``path`` itself when the source is one file).
        byte: Bytes consumed (every consumed line ends with its newline).
        line: Lines consumed.
        dev: ``st_dev``; None for an entry migrated from a format-1 offset, until it is seen.
        ino: ``st_ino``; None likewise.
        head_len: How many leading bytes ``head_sha`` covers.
        head_sha: SHA-256 (hex) of the first ``head_len`` bytes.
        size: The file's size when the offset was last taken (unread bytes = size - byte).
    """

    name: str
    byte: int
    line: int
    dev: int | None
    ino: int | None
    head_len: int
    head_sha: str | None
    size: int

    def to_json(self) -> list[Any]:
        """``[byte, line, identity]``: the first two items are format 1's."""
        return [
            self.byte,
            self.line,
            {
                "dev": self.dev,
                "ino": self.ino,
                "head": self.head_len,
                "sha256": self.head_sha,
                "size": self.size,
            },
        ]


def _head_sha(path: Path, length: int) -> str:
    with path.open("rb") as handle:
        return hashlib.sha256(handle.read(length)).hexdigest()


class FileTracker:
    """The files of one ``debezium_json`` source and bronze's progress in each.

    Args:
        source: The source name, for messages.
        path: The configured file or directory.
        pattern: Glob of files inside a directory.
    """

    def __init__(self, source: str, path: Path, pattern: str) -> None:
        self.source = source
        self.path = path
        self.pattern = pattern
        self._entries: dict[str, TrackedFile] = {}
        """By current name."""
        self._checked: dict[tuple[int, int], tuple[int, int]] = {}
        """(dev, ino) -> (size, mtime_ns) at the last identity check in this process."""

    # --- offsets -------------------------------------------------------------------------------
    def load(self, files: Mapping[str, Any], fmt: int) -> None:
        """Take the ``files`` member of a committed offset of format ``fmt`` (1 or 2)."""
        entries: dict[str, TrackedFile] = {}
        for name, item in files.items():
            byte, line = int(item[0]), int(item[1])
            ident = item[2] if fmt >= 2 and len(item) > 2 else None
            if ident is None:  # format 1: progress by name; identity adopted when seen
                entries[name] = TrackedFile(name, byte, line, None, None, 0, None, byte)
            else:
                entries[name] = TrackedFile(
                    name,
                    byte,
                    line,
                    ident["dev"],
                    ident["ino"],
                    int(ident["head"]),
                    ident["sha256"],
                    int(ident["size"]),
                )
        self._entries = entries

    def dump(self) -> dict[str, list[Any]]:
        """The ``files`` member of the offset to commit (head hashes brought up to date)."""
        for entry in self._entries.values():
            want = min(HEAD_BYTES, entry.byte)
            if entry.head_len < want and entry.ino is not None:
                path = self._path_of(entry.name)
                try:
                    entry.head_sha = _head_sha(path, want)
                    entry.head_len = want
                except FileNotFoundError:
                    pass  # vanished since it was read: the next scan decides
        return {name: e.to_json() for name, e in self._entries.items()}

    def reached(self, until: Mapping[str, Any]) -> bool:
        """True when every file of ``until`` (an offset's ``files``) is read up to its byte."""
        by_ino = {(e.dev, e.ino): e for e in self._entries.values() if e.ino is not None}
        for name, item in until.items():
            ident = item[2] if len(item) > 2 else None
            entry = by_ino.get((ident["dev"], ident["ino"])) if ident else None
            if entry is None:
                entry = self._entries.get(name)
            if entry is None or entry.byte < int(item[0]):
                return False
        return True

    # --- files ---------------------------------------------------------------------------------
    def _path_of(self, name: str) -> Path:
        return self.path if self.path.is_file() or not self.path.is_dir() else self.path / name

    def _listing(self) -> Iterator[tuple[str, Path, os.stat_result]]:
        if self.path.is_file():
            paths = [self.path]
        else:
            paths = sorted(p for p in self.path.glob(self.pattern) if p.is_file())
        single = self.path.is_file()
        for p in paths:
            try:
                st = p.stat()
            except FileNotFoundError:
                continue
            yield (str(p) if single else p.name), p, st

    def scan(self) -> list[tuple[Path, TrackedFile, int]]:
        """The files to read now, in name order: ``(path, progress, size)``.

        Renamed files keep their progress, new files start at 0, and vanished ones are dropped
        once they were read to the end.

        Raises:
            FileIdentityError: A file shrank below its offset, was rewritten in place, or
                vanished with bytes bronze knows it did not read.
        """
        old = self._entries
        by_ino = {(e.dev, e.ino): e for e in old.values() if e.ino is not None}
        seen: dict[str, TrackedFile] = {}
        used: set[int] = set()
        out: list[tuple[Path, TrackedFile, int]] = []
        for name, path, st in self._listing():
            key = (st.st_dev, st.st_ino)
            entry = by_ino.get(key)
            if entry is not None and not self._same_head(path, st, entry):
                if entry.name == name:
                    raise self._replaced(path, entry, st.st_size)
                entry = None  # a new file that reuses the inode of one bronze read
            if entry is None:
                legacy = old.get(name)
                if legacy is not None and legacy.ino is None:
                    entry = legacy  # format-1 progress for this name: adopt this file
                    entry.dev, entry.ino = key
                    logger.info(
                        "source %s: %s continues at byte %s (offset written by an older "
                        "version, identity adopted by name)",
                        self.source,
                        path,
                        entry.byte,
                    )
                else:
                    entry = TrackedFile(name, 0, 0, st.st_dev, st.st_ino, 0, None, 0)
            if st.st_size < entry.byte:
                raise self._shrunk(path, entry, st.st_size)
            if entry.name != name:
                logger.info(
                    "source %s: %s was renamed to %s; reading continues at byte %s",
                    self.source,
                    entry.name,
                    name,
                    entry.byte,
                )
                entry.name = name
            used.add(id(entry))
            seen[name] = entry
            out.append((path, entry, st.st_size))
        for entry in old.values():
            if id(entry) not in used:
                self._vanished(entry)
        self._entries = seen
        return out

    def mark_size(self, entry: TrackedFile, size: int) -> None:
        """Record the size seen while reading (bytes beyond ``entry.byte`` are known unread)."""
        entry.size = max(size, entry.byte)

    def _same_head(self, path: Path, st: os.stat_result, entry: TrackedFile) -> bool:
        if entry.head_sha is None or entry.head_len == 0:
            return True
        key = (st.st_dev, st.st_ino)
        stamp = (st.st_size, st.st_mtime_ns)
        if self._checked.get(key) == stamp:
            return True
        if st.st_size < entry.head_len:
            return False
        same = _head_sha(path, entry.head_len) == entry.head_sha
        if same:
            self._checked[key] = stamp
        return same

    def _where(self, entry: TrackedFile) -> str:
        return f"committed offset byte {entry.byte} (line {entry.line}), inode {entry.ino}"

    def _shrunk(self, path: Path, entry: TrackedFile, size: int) -> FileIdentityError:
        return FileIdentityError(
            f"source {self.source}: {path} shrank below what bronze has read: {self._where(entry)}"
            f", but the file now has {size} bytes. Files must only grow: it was truncated or "
            "rewritten in place (copytruncate rotation does this), so bronze cannot tell which "
            "lines are new. Restore its content, or move it away and write new records to a new "
            "file (a new file is read from its first byte)."
        )

    def _replaced(self, path: Path, entry: TrackedFile, size: int) -> FileIdentityError:
        return FileIdentityError(
            f"source {self.source}: {path} is not the file bronze was reading: its first "
            f"{entry.head_len} bytes changed ({self._where(entry)}; now {size} bytes). It was "
            "rewritten in place or replaced by a file that reuses its name and inode. Restore "
            "it, or move it away and write the new records to a new file (a new file is read "
            "from its first byte)."
        )

    def _vanished(self, entry: TrackedFile) -> None:
        unread = entry.size - entry.byte
        if unread > 0:
            raise FileIdentityError(
                f"source {self.source}: {entry.name} disappeared from {self.path} with {unread} "
                f"bytes bronze has not read ({self._where(entry)}, {entry.size} bytes when last "
                f"seen). Put it back under any name matching '{self.pattern}' in {self.path} "
                "(rename, do not copy: the inode identifies it) so they are read; rotate files "
                "into names the pattern matches."
            )
        logger.info(
            "source %s: %s is gone after being read to its end (%s bytes); forgotten",
            self.source,
            entry.name,
            entry.byte,
        )
