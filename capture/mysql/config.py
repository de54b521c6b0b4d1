"""The ``mysql`` (and ``mariadb``) source's config model: Debezium properties, defaults, checks.

Importing this module imports no driver.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from typing import Annotated, ClassVar, Literal

from pydantic import Field

from capture.signals_config import SignalingKeys
from capture.source_config import (
    CONNECTOR,
    DATABASE_PORT,
    INCLUDE_SCHEMA_CHANGES,
    INCLUDE_SCHEMA_CHANGES_DEFAULT,
    SNAPSHOT_MODE,
    SNAPSHOT_MODE_DEFAULT,
    TIME_PRECISION_MODE,
    DatabaseFilters,
    RelationalSourceConfig,
    SourceType,
    TimePrecisionMode,
)
from pipeline.config_model import Port, PositiveInt, config_key

__all__ = ["MySqlSourceConfig", "default_server_id"]

MYSQL_PORT_DEFAULT = 3306
MYSQL_TIME_PRECISION_MODE_DEFAULT = "adaptive_time_microseconds"
DATABASE_SERVER_ID = "database.server.id"
DATABASE_SERVER_ID_DEFAULT = None
SNAPSHOT_LOCKING_MODE = "snapshot.locking.mode"
SNAPSHOT_LOCKING_MODE_DEFAULT = "minimal"
GTID_SOURCE_INCLUDES = "gtid.source.includes"  # rejected: see MySqlSourceConfig.UNSUPPORTED_KEYS
GTID_SOURCE_EXCLUDES = "gtid.source.excludes"  # rejected
INCLUDE_QUERY = "include.query"
INCLUDE_QUERY_DEFAULT = False
BIGINT_UNSIGNED_HANDLING_MODE = "bigint.unsigned.handling.mode"
BIGINT_UNSIGNED_HANDLING_MODE_DEFAULT = "precise"  # exact; Debezium's long wraps >= 2^63
BINLOG_BUFFER_SIZE = "binlog.buffer.size"  # rejected
CONNECT_TIMEOUT_MS = "connect.timeout.ms"
CONNECT_TIMEOUT_MS_DEFAULT = 30_000

MySqlSnapshotMode = Literal[
    "initial", "when_needed", "never", "schema_only", "schema_only_recovery"
]
SnapshotLockingMode = Literal["minimal", "extended", "none"]
BigintUnsignedHandlingMode = Literal["long", "precise"]

_EVERY_GTID_SOURCE = (
    "the agent captures the transactions of every GTID source; select what to capture with "
    "the database and table lists"
)


class MySqlSourceConfig(SignalingKeys, DatabaseFilters, RelationalSourceConfig):
    """MySQL or MariaDB binlog (ROW format) capture."""

    KIND = SourceType.MYSQL
    UNSUPPORTED_KEYS: ClassVar[Mapping[str, str]] = {
        GTID_SOURCE_INCLUDES: _EVERY_GTID_SOURCE,
        GTID_SOURCE_EXCLUDES: _EVERY_GTID_SOURCE,
        BINLOG_BUFFER_SIZE: (
            "the agent keeps no look-ahead buffer: it lands each binlog transaction group whole "
            "when the group ends (XID or COMMIT; a group the binlog ends with ROLLBACK holds "
            "non-transactional changes that did happen)"
        ),
    }

    connector: Literal["mysql", "mariadb"] = config_key(..., CONNECTOR)
    """Discriminator: ``mysql`` (``mariadb`` selects the same connector)."""
    database_port: Port = config_key(MYSQL_PORT_DEFAULT, DATABASE_PORT)
    """MySQL port."""
    database_server_id: Annotated[int, Field(gt=0, lt=2**32)] | None = config_key(
        DATABASE_SERVER_ID_DEFAULT, DATABASE_SERVER_ID
    )
    """Replica server id, unique in the replication topology. None: the agent picks one in
    5400-6400 like Debezium; set it explicitly in production."""
    snapshot_mode: MySqlSnapshotMode = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``when_needed``, ``never``, ``schema_only`` or ``schema_only_recovery``."""
    snapshot_locking_mode: SnapshotLockingMode = config_key(
        SNAPSHOT_LOCKING_MODE_DEFAULT, SNAPSHOT_LOCKING_MODE
    )
    """``minimal`` (global read lock while reading schemas), ``extended`` or ``none``."""
    include_schema_changes: bool = config_key(
        INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES
    )
    """Land DDL as schema-change records."""
    include_query: bool = config_key(INCLUDE_QUERY_DEFAULT, INCLUDE_QUERY)
    """Add the SQL statement to ``source.query`` (can expose excluded or masked data)."""
    bigint_unsigned_handling_mode: BigintUnsignedHandlingMode = config_key(
        BIGINT_UNSIGNED_HANDLING_MODE_DEFAULT, BIGINT_UNSIGNED_HANDLING_MODE
    )
    """BIGINT UNSIGNED as ``precise`` (Decimal scale 0, the default: exact) or ``long``
    (Debezium's default: values >= 2^63 wrap to negative, lossy)."""
    connect_timeout_ms: PositiveInt = config_key(CONNECT_TIMEOUT_MS_DEFAULT, CONNECT_TIMEOUT_MS)
    """Connection timeout."""
    time_precision_mode: TimePrecisionMode = config_key(
        MYSQL_TIME_PRECISION_MODE_DEFAULT, TIME_PRECISION_MODE
    )
    """``adaptive_time_microseconds`` (MySQL's default) or ``connect``."""


def default_server_id(name: str) -> int:
    """A replica server id in Debezium's 5400-6400 range, stable for a source name.

    Debezium picks a random one when ``database.server.id`` is unset; a stable one means two
    runs of the same source never hold two ids. Two sources of one pipeline config that read
    one server with the same id are refused when the config loads (``pipeline/config.py``);
    set it explicitly in production, unique among all the server's replicas.
    """
    return 5400 + zlib.crc32(name.encode("utf-8")) % 1001
