"""The ``postgresql`` source's config model: its Debezium properties, defaults and checks.

:class:`LogicalReplicationConfig` (slot and publication) is shared with YugabyteDB, whose
logical replication is PostgreSQL's. Importing this module imports no driver.
"""

from __future__ import annotations

from typing import Literal

from pydantic import field_validator

from capture.signals_config import SignalingKeys
from capture.source_config import (
    CONNECTOR,
    DATABASE_DBNAME,
    DATABASE_PORT,
    SNAPSHOT_MODE,
    SNAPSHOT_MODE_DEFAULT,
    RelationalSourceConfig,
    SchemaFilters,
    SourceType,
)
from pipeline.config_model import Port, config_key

__all__ = ["LogicalReplicationConfig", "PostgresSourceConfig"]

PG_PORT_DEFAULT = 5432
PLUGIN_NAME = "plugin.name"
PG_PLUGIN_NAME_DEFAULT = "pgoutput"
SLOT_NAME = "slot.name"
SLOT_NAME_DEFAULT = "debezium"
SLOT_DROP_ON_STOP = "slot.drop.on.stop"
SLOT_DROP_ON_STOP_DEFAULT = False
PUBLICATION_NAME = "publication.name"
PUBLICATION_NAME_DEFAULT = "dbz_publication"
PUBLICATION_AUTOCREATE_MODE = "publication.autocreate.mode"
PUBLICATION_AUTOCREATE_MODE_DEFAULT = "all_tables"
HSTORE_HANDLING_MODE = "hstore.handling.mode"
HSTORE_HANDLING_MODE_DEFAULT = "json"
INTERVAL_HANDLING_MODE = "interval.handling.mode"
INTERVAL_HANDLING_MODE_DEFAULT = "string"  # exact; Debezium's default numeric is lossy
TOASTED_VALUE_PLACEHOLDER = "toasted.value.placeholder"
TOASTED_VALUE_PLACEHOLDER_DEFAULT = "__debezium_unavailable_value"

PgPluginName = Literal["pgoutput"]
"""The agent decodes pgoutput only; Debezium's other plugins are rejected by name."""
OTHER_PLUGINS = (
    "decoderbufs",
    "wal2json",
    "wal2json_streaming",
    "wal2json_rds",
    "wal2json_rds_streaming",
)
"""Debezium's other ``plugin.name`` values, which this agent does not decode."""
PublicationAutocreateMode = Literal["all_tables", "disabled", "filtered"]
PgSnapshotMode = Literal["initial", "always", "never", "initial_only", "exported", "when_needed"]
HstoreHandlingMode = Literal["json", "map"]
IntervalHandlingMode = Literal["numeric", "string"]


class LogicalReplicationConfig(SchemaFilters, RelationalSourceConfig):
    """Slot and publication settings shared by PostgreSQL and YugabyteDB."""

    database_dbname: str = config_key(..., DATABASE_DBNAME)
    """Database to capture (slots and publications are per database)."""
    slot_name: str = config_key(SLOT_NAME_DEFAULT, SLOT_NAME, pattern=r"^[a-z0-9_]{1,63}$")
    """Logical replication slot; one consumer per slot. Never drop it on the primary."""
    slot_drop_on_stop: bool = config_key(SLOT_DROP_ON_STOP_DEFAULT, SLOT_DROP_ON_STOP)
    """Drop the slot on a clean stop (development only: changes are lost while stopped)."""
    publication_name: str = config_key(PUBLICATION_NAME_DEFAULT, PUBLICATION_NAME)
    """Publication the slot streams (pgoutput/yboutput)."""
    publication_autocreate_mode: PublicationAutocreateMode = config_key(
        PUBLICATION_AUTOCREATE_MODE_DEFAULT, PUBLICATION_AUTOCREATE_MODE
    )
    """``all_tables`` (create ``FOR ALL TABLES``), ``disabled`` (must exist) or ``filtered``
    (``FOR TABLE`` from the include/exclude lists)."""
    hstore_handling_mode: HstoreHandlingMode = config_key(
        HSTORE_HANDLING_MODE_DEFAULT, HSTORE_HANDLING_MODE
    )
    """HSTORE (both seeds map it) as a JSON string (``json``) or a map (``map``)."""
    interval_handling_mode: IntervalHandlingMode = config_key(
        INTERVAL_HANDLING_MODE_DEFAULT, INTERVAL_HANDLING_MODE
    )
    """INTERVAL as ISO-8601 text (``string``, the default: exact) or approximate microseconds
    (``numeric``, Debezium's default: a month counts 30.4375 days, lossy)."""


class PostgresSourceConfig(SignalingKeys, LogicalReplicationConfig):
    """PostgreSQL logical decoding (10+)."""

    KIND = SourceType.POSTGRESQL

    connector: Literal["postgresql"] = config_key(..., CONNECTOR)
    """Discriminator: ``postgresql``."""
    database_port: Port = config_key(PG_PORT_DEFAULT, DATABASE_PORT)
    """PostgreSQL port."""
    plugin_name: PgPluginName = config_key(PG_PLUGIN_NAME_DEFAULT, PLUGIN_NAME)
    """Logical decoding output plugin: only ``pgoutput`` (built into PostgreSQL 10+), which the
    agent decodes itself."""
    snapshot_mode: PgSnapshotMode = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``always``, ``never``, ``initial_only``, ``exported`` (lock-free) or
    ``when_needed`` (snapshot again when the slot was dropped or invalidated)."""
    toasted_value_placeholder: str = config_key(
        TOASTED_VALUE_PLACEHOLDER_DEFAULT, TOASTED_VALUE_PLACEHOLDER
    )
    """Stands in for unchanged TOAST values missing from the WAL."""

    @field_validator("plugin_name", mode="before")
    @classmethod
    def _only_pgoutput(cls, value: object) -> object:
        # Debezium accepts these; without this check they would fail as "not one of pgoutput",
        # which reads like a typo rather than a missing feature.
        if isinstance(value, str) and value.lower() in OTHER_PLUGINS:
            raise ValueError(
                f"'{value}' is not supported: only pgoutput is supported (the agent decodes "
                "pgoutput itself; decoderbufs and wal2json are not implemented)"
            )
        return value
