"""The ``yugabytedb`` source's config model (the agent: :mod:`capture.yugabytedb.source`).

YugabyteDB's logical replication is PostgreSQL's, so the model extends
:class:`capture.postgresql.config.LogicalReplicationConfig`. Imports no driver.
"""

from __future__ import annotations

from typing import Literal

from capture.postgresql.config import PLUGIN_NAME, LogicalReplicationConfig
from capture.source_config import (
    CONNECTOR,
    DATABASE_PORT,
    SNAPSHOT_MODE,
    SNAPSHOT_MODE_DEFAULT,
    SourceType,
)
from pipeline.config_model import Port, config_key

__all__ = ["YugabyteDbSourceConfig"]

YB_PORT_DEFAULT = 5433
YB_PLUGIN_NAME_DEFAULT = "yboutput"
SLOT_LSN_TYPE = "slot.lsn.type"
SLOT_LSN_TYPE_DEFAULT = "SEQUENCE"

YbPluginName = Literal["yboutput", "pgoutput"]
YbSnapshotMode = Literal["initial", "never", "initial_only"]
SlotLsnType = Literal["SEQUENCE", "HYBRID_TIME"]


class YugabyteDbSourceConfig(LogicalReplicationConfig):
    """YugabyteDB through its PostgreSQL-compatible logical replication (v2024.1.1+)."""

    KIND = SourceType.YUGABYTEDB

    connector: Literal["yugabytedb"] = config_key(..., CONNECTOR)
    """Discriminator: ``yugabytedb``."""
    database_port: Port = config_key(YB_PORT_DEFAULT, DATABASE_PORT)
    """YSQL port."""
    plugin_name: YbPluginName = config_key(YB_PLUGIN_NAME_DEFAULT, PLUGIN_NAME)
    """``yboutput`` (native) or ``pgoutput``; Debezium's documented default (decoderbufs) does
    not work with YugabyteDB, so ours is ``yboutput``."""
    snapshot_mode: YbSnapshotMode = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``never`` or ``initial_only``."""
    slot_lsn_type: SlotLsnType = config_key(SLOT_LSN_TYPE_DEFAULT, SLOT_LSN_TYPE)
    """``SEQUENCE`` (monotonic per slot) or ``HYBRID_TIME`` (the commit hybrid time)."""
