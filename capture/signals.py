"""Signals: what a running agent can be asked to do, read from the change stream or a file.

Debezium's signaling, as the seed documents describe it: a row inserted into the signaling table
(``signal.data.collection``, columns ``id``, ``type``, ``data``) is read by the agent from the
change stream, in log order with the changes around it, and acted upon; it is never landed as
data. A file (``signal.file``, one JSON object per line) is the second channel, for a source
that cannot be written to. The types:

* ``execute-snapshot``: ``{"data-collections": [...], "type": "incremental",
  "additional-conditions": [{"data-collection": ..., "filter": ...}]}`` starts an incremental
  snapshot of those tables (:mod:`capture.incremental_snapshot`); with ``"type": "blocking"``
  the stream pauses at the signal while the tables are read whole
  (:mod:`capture.signals_blocking`);
* ``stop-snapshot``: ``{"data-collections": [...]}`` (optional: all) drops tables from it;
* ``pause-snapshot`` / ``resume-snapshot``: no more chunks are read until resumed;
* ``log``: ``{"message": ...}`` is written to the agent's log;
* ``snapshot-window-open`` / ``snapshot-window-close``: the watermarks the agent writes itself.

A signal that does not parse or cannot be acted upon is a :class:`SignalError`: the agent logs
it and quarantines the signal row with the reason; the stream goes on.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import orjson

from pipeline.errors import CaptureError

__all__ = [
    "BLOCKING",
    "EXECUTE_SNAPSHOT",
    "INCREMENTAL",
    "LOG",
    "PAUSE_SNAPSHOT",
    "RESUME_SNAPSHOT",
    "SIGNAL_TYPES",
    "STOP_SNAPSHOT",
    "WINDOW_CLOSE",
    "WINDOW_OPEN",
    "FileSignals",
    "Signal",
    "SignalError",
    "SignalSettings",
    "SnapshotRequest",
    "new_signal_id",
    "parse_signal",
]

EXECUTE_SNAPSHOT: Final = "execute-snapshot"
STOP_SNAPSHOT: Final = "stop-snapshot"
PAUSE_SNAPSHOT: Final = "pause-snapshot"
RESUME_SNAPSHOT: Final = "resume-snapshot"
LOG: Final = "log"
WINDOW_OPEN: Final = "snapshot-window-open"
WINDOW_CLOSE: Final = "snapshot-window-close"
SIGNAL_TYPES: Final = (EXECUTE_SNAPSHOT, STOP_SNAPSHOT, PAUSE_SNAPSHOT, RESUME_SNAPSHOT, LOG)
"""The signal types a user sends (the watermarks are the agent's own)."""
INCREMENTAL: Final = "incremental"
BLOCKING: Final = "blocking"
SNAPSHOT_TYPES: Final = (INCREMENTAL, BLOCKING)


class SignalError(CaptureError):
    """A signal that cannot be parsed or acted upon (quarantined, the stream goes on)."""

    @property
    def reason(self) -> str:
        """The quarantine's reason."""
        return str(self)


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """An ``execute-snapshot`` or ``stop-snapshot`` signal's data.

    Attributes:
        collections: The tables, as the source names them (``schema.table``).
        kind: ``incremental`` or ``blocking``.
        conditions: Table -> the SQL filter of ``additional-conditions``.
    """

    collections: tuple[str, ...]
    kind: str = "incremental"
    conditions: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Signal:
    """One parsed signal.

    Attributes:
        id: The signal's id (a watermark's id names its chunk).
        type: One of :data:`SIGNAL_TYPES` or a watermark type.
        data: The parsed ``data`` object (empty when the signal has none).
    """

    id: str
    type: str
    data: Mapping[str, Any]

    def snapshot_request(self) -> SnapshotRequest:
        """The tables and conditions of an ``execute-snapshot``/``stop-snapshot`` signal."""
        return _snapshot_request(self)

    def to_json(self) -> dict[str, Any]:
        """The signal as a ``signal.file`` line writes it."""
        return {"id": self.id, "type": self.type, "data": dict(self.data)}


@dataclass(frozen=True, slots=True)
class SignalSettings:
    """What an agent reads off its config about signals (see :mod:`capture.signals_config`).

    Attributes:
        collection: The signaling table (``schema.table``), or None.
        file: The signal file, or None.
        chunk_size: ``incremental.snapshot.chunk.size``.
    """

    collection: str | None = None
    file: Path | None = None
    chunk_size: int = 1024

    @classmethod
    def from_config(cls, config: Any) -> SignalSettings:
        """Read a config model with :class:`~capture.signals_config.SignalingKeys`."""
        file = config.signal_file
        return cls(
            config.signal_data_collection,
            None if file is None else Path(file),
            int(config.incremental_snapshot_chunk_size),
        )

    @property
    def table(self) -> tuple[str, str] | None:
        """The signaling table as ``(schema, table)``."""
        if self.collection is None:
            return None
        schema, _, table = self.collection.partition(".")
        return schema, table


def new_signal_id() -> str:
    """A fresh signal (or chunk) id."""
    return uuid.uuid4().hex


def parse_signal(signal_id: Any, signal_type: Any, data: Any) -> Signal:
    """A signal from its three columns, checked.

    Raises:
        SignalError: A missing id, an unknown type, data that is not a JSON object, or an
            ``execute-snapshot``/``stop-snapshot`` whose data does not say what to snapshot.
    """
    if not isinstance(signal_id, str) or not signal_id.strip():
        raise SignalError(f"signal has no id (got {signal_id!r})")
    if not isinstance(signal_type, str) or signal_type not in (
        *SIGNAL_TYPES,
        WINDOW_OPEN,
        WINDOW_CLOSE,
    ):
        raise SignalError(
            f"signal {signal_id}: unknown type {signal_type!r}; expected one of "
            + ", ".join(SIGNAL_TYPES)
        )
    parsed: Any = data
    if isinstance(data, str | bytes):
        text = data.strip() if isinstance(data, str) else data.decode("utf-8", "replace").strip()
        try:
            parsed = orjson.loads(text) if text else {}
        except orjson.JSONDecodeError as exc:
            raise SignalError(
                f"signal {signal_id} ({signal_type}): data is not JSON: {exc}"
            ) from exc
    elif data is None:
        parsed = {}
    if not isinstance(parsed, dict):
        raise SignalError(
            f"signal {signal_id} ({signal_type}): data must be a JSON object, got {parsed!r}"
        )
    signal = Signal(signal_id, signal_type, parsed)
    if signal_type in (EXECUTE_SNAPSHOT, STOP_SNAPSHOT):
        _snapshot_request(signal)
    elif signal_type == LOG and not isinstance(parsed.get("message"), str):
        raise SignalError(f"signal {signal_id} (log): data needs a 'message' string")
    return signal


def _snapshot_request(signal: Signal) -> SnapshotRequest:
    where = f"signal {signal.id} ({signal.type})"
    data = signal.data
    raw = data.get("data-collections")
    if raw is None and signal.type == STOP_SNAPSHOT:
        raw = []
    if (
        not isinstance(raw, list)
        or not all(isinstance(c, str) and c.strip() for c in raw)
        or (signal.type == EXECUTE_SNAPSHOT and not raw)
    ):
        raise SignalError(f"{where}: 'data-collections' must be a non-empty list of table names")
    kind = data.get("type", "incremental")
    if not isinstance(kind, str) or kind.lower() not in SNAPSHOT_TYPES:
        raise SignalError(f"{where}: 'type' must be one of {', '.join(SNAPSHOT_TYPES)}")
    conditions: dict[str, str] = {}
    extra = data.get("additional-conditions", [])
    if not isinstance(extra, list):
        raise SignalError(f"{where}: 'additional-conditions' must be a list")
    for item in extra:
        table = item.get("data-collection") if isinstance(item, dict) else None
        condition = item.get("filter") if isinstance(item, dict) else None
        if not isinstance(table, str) or not isinstance(condition, str) or not condition.strip():
            raise SignalError(
                f"{where}: each 'additional-conditions' item needs 'data-collection' and "
                f"'filter' strings, got {item!r}"
            )
        if table not in raw:
            raise SignalError(f"{where}: condition for {table!r}, which is not in data-collections")
        conditions[table] = condition
    return SnapshotRequest(tuple(c.strip() for c in raw), kind.lower(), conditions)


class FileSignals:
    """The ``signal.file`` channel: one JSON object per line, read past a line count.

    Args:
        path: The file (absent until the first signal is written).
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def read_after(self, consumed: int) -> list[tuple[int, bytes, Signal | SignalError]]:
        """Complete lines after the first ``consumed``: ``(line number, raw, signal or error)``.

        A line still being written (no newline yet) is left for the next read.
        """
        try:
            text = self.path.read_bytes()
        except FileNotFoundError:
            return []
        lines = text.split(b"\n")[:-1]  # the last item is the unterminated rest
        out: list[tuple[int, bytes, Signal | SignalError]] = []
        for number, raw in enumerate(lines[consumed:], start=consumed + 1):
            out.append((number, raw, _parse_line(raw, number)))
        return out

    def append(self, signal: Signal) -> None:
        """Write ``signal`` as the file's next line."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("ab") as out:
            out.write(orjson.dumps(signal.to_json()) + b"\n")


def _parse_line(raw: bytes, number: int) -> Signal | SignalError:
    try:
        item = orjson.loads(raw) if raw.strip() else None
    except orjson.JSONDecodeError as exc:
        return SignalError(f"signal file line {number}: not JSON: {exc}")
    if not isinstance(item, dict):
        return SignalError(f"signal file line {number}: not a JSON object with id, type, data")
    try:
        return parse_signal(item.get("id"), item.get("type"), item.get("data"))
    except SignalError as exc:
        return exc
