"""The signaling and incremental-snapshot keys of a source config (:class:`SignalingKeys`).

A mixin of the config models of the connectors whose agents read signals and take incremental
snapshots (``DatabaseSource.INCREMENTAL_SNAPSHOTS``): PostgreSQL and MySQL/MariaDB. Debezium's
property names and defaults; imports no driver.
"""

from __future__ import annotations

from pydantic import field_validator

from pipeline.config_model import ConfigModel, OptionalConfigPath, PositiveInt, config_key

__all__ = [
    "INCREMENTAL_SNAPSHOT_CHUNK_SIZE",
    "INCREMENTAL_SNAPSHOT_CHUNK_SIZE_DEFAULT",
    "SIGNAL_DATA_COLLECTION",
    "SIGNAL_FILE",
    "SignalingKeys",
]

SIGNAL_DATA_COLLECTION = "signal.data.collection"
SIGNAL_FILE = "signal.file"
INCREMENTAL_SNAPSHOT_CHUNK_SIZE = "incremental.snapshot.chunk.size"
INCREMENTAL_SNAPSHOT_CHUNK_SIZE_DEFAULT = 1024


class SignalingKeys(ConfigModel):
    """Where the agent reads signals, and how large an incremental snapshot's chunks are."""

    signal_data_collection: str | None = config_key(None, SIGNAL_DATA_COLLECTION)
    """The signaling table, ``schema.table`` (PostgreSQL) or ``database.table`` (MySQL), with
    columns ``id`` (varchar), ``type`` (varchar) and ``data`` (text). Its inserts are read from
    the change stream as signals, never landed as data; the incremental snapshot writes its
    watermarks there. Unset: no signaling table (signals come from ``signal.file`` only)."""
    signal_file: OptionalConfigPath = config_key(None, SIGNAL_FILE)
    """A file of signals, one JSON object (``id``, ``type``, ``data``) per line; the agent reads
    the lines added since its offset. ``medallion signal`` appends here when the source has no
    signaling table."""
    incremental_snapshot_chunk_size: PositiveInt = config_key(
        INCREMENTAL_SNAPSHOT_CHUNK_SIZE_DEFAULT, INCREMENTAL_SNAPSHOT_CHUNK_SIZE
    )
    """Rows per incremental-snapshot chunk (read between one low and one high watermark and
    held in memory until the high watermark is read)."""

    @field_validator("signal_data_collection")
    @classmethod
    def _two_parts(cls, value: str | None) -> str | None:
        if value is not None and (value.count(".") != 1 or "" in value.split(".")):
            raise ValueError(f"{value!r} must name one table as '<schema or database>.<table>'")
        return value
