"""Typed, frozen configuration of a medallion pipeline, loaded once from ``conf/pipeline.yaml``.

:func:`load_config` reads the YAML file, layers environment variables and explicit overrides on
top, validates everything into frozen pydantic models and returns a :class:`PipelineConfig`. Later
code never sees raw dicts, and a broken config fails here, before any work starts, with a
:class:`~pipeline.errors.ConfigError` that names the file, the key path and the reason::

    conf/pipeline.yaml, key 'sources[0].tabel.include.list': unknown key 'tabel.include.list'
    in sources[0] (connector postgresql); did you mean 'table.include.list'?

The file
--------
.. code-block:: yaml

    lake:    {root: ../lake}              # bronze/, silver/, gold/ live under it
    spark:   {master: "local[*]", app.name: medallion, jars.dir: null,
              conf: {spark.sql.shuffle.partitions: "4"}}
    bronze:  {max.batch.size: 20000, max.transaction.size: 100000}
    logging: {level: INFO}
    sources:
      - name: inventory                   # [a-z][a-z0-9_]*, unique
        connector: postgresql             # picks the model: see SOURCE_CONFIG_MODELS
        database.hostname: db.internal
        database.user: debezium
        database.password: ${PG_PASSWORD} # secrets only from the environment or a file
        database.dbname: inventory
        table.include.list: public.orders,public.customers
        column.mask.hash.SHA-256.with.salt.CzQMA0cB5K: public.customers.email

Keys inside ``sources`` are Debezium's property names (``table.include.list``,
``snapshot.mode``, ``column.mask.with.<N>.chars``, ...). Debezium 1.2's spellings are accepted as
aliases: ``*.whitelist``/``*.blacklist`` for ``*.include.list``/``*.exclude.list`` and
``database.server.name`` for ``topic.prefix``. Giving both spellings of one option is an error.
Enumerated values are matched case-insensitively, like Debezium does. Relative paths
(``lake.root``, ``spark.jars.dir``, ``sources[].path``, secret files) are resolved against the
directory of the config file, not the working directory.

Secrets
-------
Secret fields (``database.password``, ``mongodb.password``, ``mongodb.connection.string``) are
:class:`pydantic.SecretStr`: ``repr``, ``str``, ``model_dump_json`` and log records show
``**********``. Call :func:`reveal` (or ``get_secret_value()``) only where a driver connects. A
secret can come from:

* ``${ENV_VAR}`` or ``${ENV_VAR:-default}``, which work in *any* string value of the file
  (``$${`` writes a literal ``${``). A missing variable without a default is a ConfigError naming
  the variable and the key path.
* ``<key>.file: /path`` (e.g. ``database.password.file``): the file's content, trailing newline
  stripped.
* the environment layer or an explicit override (below).

A literal secret written in the YAML file is rejected. (A ``mongodb.connection.string`` without a
password in it may be written literally.)

Layering
--------
Three layers, later ones win: the YAML file, then environment variables, then the ``overrides``
passed to :func:`load_config`.

Environment variables are named ``MEDALLION__<SECTION>__<KEY>``. ``<SECTION>`` is ``LAKE``,
``SPARK``, ``BRONZE``, ``SILVER``, ``GOLD``, ``QUALITY``, ``LOGGING`` or
``SOURCES__<SOURCE NAME>``. ``<KEY>`` is a key of that section upper-cased, with ``.`` and
``-`` written as ``_``; the variable is matched against the section's known keys, so the
mapping is unambiguous::

    MEDALLION__SPARK__MASTER=spark://x:7077              -> spark.master
    MEDALLION__SPARK__APP_NAME=nightly                   -> spark.app.name
    MEDALLION__BRONZE__MAX_BATCH_SIZE=5000               -> bronze.max.batch.size
    MEDALLION__SOURCES__INVENTORY__DATABASE_PORT=5433    -> sources[name=inventory].database.port
    MEDALLION__SOURCES__INVENTORY__DATABASE_PASSWORD_FILE=/run/secrets/pg
                                                         -> ....database.password.file

``spark.conf`` entries take one more level,
``MEDALLION__SPARK__CONF__SPARK_SQL_SHUFFLE_PARTITIONS``; the name is matched case-insensitively
against the keys already in ``spark.conf``, otherwise it is lower-cased with ``_`` read as ``.``
(so camelCase Spark keys must be set in YAML or overrides).
Setting a key through the environment replaces every spelling of it in the file (``table.whitelist``
as well as ``table.include.list``; ``database.password`` as well as ``database.password.file``).
Pattern keys (``column.mask.*``) cannot be set this way. Values are strings and are converted like
YAML strings (``"5000"`` becomes 5000, ``"a,b"`` becomes a list where a list is expected). An
unknown section, source or key is a ConfigError with a suggestion.

Overrides are a mapping of dotted paths: ``{"spark.master": "local[2]"}``,
``{"bronze.max.batch.size": 10}``, ``{"spark.conf.spark.sql.shuffle.partitions": "8"}``,
``{"sources.inventory.database.port": 5433}`` or ``{"sources[0].snapshot.mode": "never"}``. A
whole section given as a mapping (``{"spark": {...}}``) is merged into the file's section, and
``{"sources": [...]}`` replaces the list.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, NoReturn, Self, Union, get_args, get_origin
from urllib.parse import urlsplit

import yaml
from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError, PydanticUndefined

from pipeline.errors import ConfigError

__all__ = [
    "load_config",
    "reveal",
    "PipelineConfig",
    "LakeConfig",
    "SparkConfig",
    "BronzeConfig",
    "SilverConfig",
    "SilverTableConfig",
    "SchemaEvolutionPolicy",
    "TableOptions",
    "LoggingConfig",
    "SourceType",
    "SourceConfig",
    "SourceConfigBase",
    "CaptureSourceConfig",
    "RelationalSourceConfig",
    "DebeziumJsonSourceConfig",
    "PostgresSourceConfig",
    "MySqlSourceConfig",
    "MongoDbSourceConfig",
    "SqlServerSourceConfig",
    "OracleSourceConfig",
    "Db2SourceConfig",
    "YugabyteDbSourceConfig",
    "SOURCE_CONFIG_MODELS",
    "ColumnRule",
    "ColumnRuleKind",
    "ConfigModel",
    "FrozenDict",
    "split_regex_list",
]

logger = logging.getLogger(__name__)

# --- locating and layering ------------------------------------------------------------------
CONFIG_ENV_VAR = "MEDALLION_CONFIG"
"""Environment variable naming the config file when :func:`load_config` gets no path."""
DEFAULT_CONFIG_PATH = Path("conf") / "pipeline.yaml"
"""Config file used when neither a path nor ``$MEDALLION_CONFIG`` is given (relative to cwd)."""
ENV_PREFIX = "MEDALLION__"
"""Prefix of the environment variables layered over the file."""
ENV_SEPARATOR = "__"
"""Separator between section, source name and key in those variables."""
SECRET_FILE_SUFFIX = ".file"
"""``<secret key>.file: /path`` reads the secret from that file."""
MAX_REPORTED_PROBLEMS = 20
"""At most this many validation problems are spelled out in one ConfigError."""

_CTX_BASE_DIR = "base_dir"
_CTX_CONFIG_FILE = "config_file"
_CTX_REJECT_LITERAL_SECRETS = "reject_literal_secrets"

# --- top-level sections ---------------------------------------------------------------------
LAKE = "lake"
SPARK = "spark"
BRONZE = "bronze"
SILVER = "silver"
GOLD = "gold"
QUALITY = "quality"
LOGGING = "logging"
SOURCES = "sources"

# --- lake -----------------------------------------------------------------------------------
LAKE_ROOT = "root"
LAKE_ROOT_DEFAULT = Path("lake")

# --- spark ----------------------------------------------------------------------------------
SPARK_MASTER = "master"
SPARK_MASTER_DEFAULT = "local[*]"
SPARK_APP_NAME = "app.name"
SPARK_APP_NAME_DEFAULT = "medallion"
SPARK_JARS_DIR = "jars.dir"
SPARK_JARS_DIR_DEFAULT = None
SPARK_CONF = "conf"

# --- bronze ---------------------------------------------------------------------------------
BRONZE_MAX_BATCH_SIZE = "max.batch.size"
BRONZE_MAX_BATCH_SIZE_DEFAULT = 20_000
BRONZE_MAX_TRANSACTION_SIZE = "max.transaction.size"
BRONZE_MAX_TRANSACTION_SIZE_DEFAULT = 100_000

# --- silver ---------------------------------------------------------------------------------
SILVER_TOMBSTONE_RETENTION_HOURS = "tombstone.retention.hours"
SILVER_TOMBSTONE_RETENTION_HOURS_DEFAULT = 168.0
SILVER_TRANSACTION_TIMEOUT_SECONDS = "transaction.timeout.seconds"
SILVER_TRANSACTION_TIMEOUT_SECONDS_DEFAULT = 300.0
SILVER_SCHEMA_EVOLUTION = "schema.evolution"
SILVER_TABLES = "tables"
SILVER_TABLE_HISTORY = "history"
SILVER_TABLE_HISTORY_DEFAULT = False

# --- gold -----------------------------------------------------------------------------------
GOLD_TABLES = "tables"
GOLD_TABLE_SQL = "sql"
GOLD_TABLE_PYTHON = "python"
GOLD_TABLE_DESCRIPTION = "description"

# --- quality --------------------------------------------------------------------------------
QUALITY_ENABLED = "enabled"
QUALITY_FRESHNESS_SLO_SECONDS = "freshness.slo.seconds"
QUALITY_FRESHNESS_SLO_SECONDS_DEFAULT = 3600.0
QUALITY_QUARANTINE_MAX = "quarantine.max"
QUALITY_RECONCILE_INTERVAL_SECONDS = "reconcile.interval.seconds"
QUALITY_RECONCILE_INTERVAL_SECONDS_DEFAULT = 3600.0
QUALITY_REPORT_DIR = "report.dir"
QUALITY_SEVERITY = "severity"
QUALITY_EXPECTATIONS = "expectations"
QUALITY_EXPECTATION_TYPE = "type"
QUALITY_EXPECTATION_KWARGS = "kwargs"
QUALITY_EXPECTATION_SEVERITY = "severity"

# --- logging --------------------------------------------------------------------------------
LOG_LEVEL = "level"
LOG_LEVEL_DEFAULT = "INFO"

# --- keys of every source -------------------------------------------------------------------
NAME = "name"
CONNECTOR = "connector"
SKIPPED_OPERATIONS = "skipped.operations"
SKIPPED_OPERATIONS_DEFAULT: tuple[Operation, ...] = ("t",)

# --- debezium_json --------------------------------------------------------------------------
JSON_PATH = "path"
JSON_FILE_PATTERN = "file.pattern"
JSON_FILE_PATTERN_DEFAULT = "*.jsonl"
JSON_FORMAT = "format"
JSON_FORMAT_DEFAULT = "auto"
JSON_CONNECTOR_HINT = "connector.hint"
JSON_CONNECTOR_HINT_DEFAULT = None
JSON_ORDER_BY = "order.by"
JSON_ORDER_BY_DEFAULT = "source"

# --- Debezium engine properties of capture sources ------------------------------------------
TOPIC_PREFIX = "topic.prefix"
DATABASE_SERVER_NAME = "database.server.name"  # 1.2 name of topic.prefix
TOPIC_PREFIX_DEFAULT = None
SNAPSHOT_MODE = "snapshot.mode"
SNAPSHOT_MODE_DEFAULT = "initial"
TOMBSTONES_ON_DELETE = "tombstones.on.delete"
TOMBSTONES_ON_DELETE_DEFAULT = True
PROVIDE_TRANSACTION_METADATA = "provide.transaction.metadata"
PROVIDE_TRANSACTION_METADATA_DEFAULT = False
HEARTBEAT_INTERVAL_MS = "heartbeat.interval.ms"
HEARTBEAT_INTERVAL_MS_DEFAULT = 0
HEARTBEAT_ACTION_QUERY = "heartbeat.action.query"
HEARTBEAT_ACTION_QUERY_DEFAULT = None
MAX_BATCH_SIZE = "max.batch.size"
MAX_BATCH_SIZE_DEFAULT = 2048
MAX_QUEUE_SIZE = "max.queue.size"
MAX_QUEUE_SIZE_DEFAULT = 8192
POLL_INTERVAL_MS = "poll.interval.ms"
POLL_INTERVAL_MS_DEFAULT = 500
EVENT_PROCESSING_FAILURE_HANDLING_MODE = "event.processing.failure.handling.mode"
EVENT_PROCESSING_FAILURE_HANDLING_MODE_DEFAULT = "fail"

# --- relational filters and column rules ----------------------------------------------------
TABLE_INCLUDE_LIST = "table.include.list"
TABLE_WHITELIST = "table.whitelist"
TABLE_EXCLUDE_LIST = "table.exclude.list"
TABLE_BLACKLIST = "table.blacklist"
COLUMN_INCLUDE_LIST = "column.include.list"
COLUMN_WHITELIST = "column.whitelist"
COLUMN_EXCLUDE_LIST = "column.exclude.list"
COLUMN_BLACKLIST = "column.blacklist"
SCHEMA_INCLUDE_LIST = "schema.include.list"
SCHEMA_WHITELIST = "schema.whitelist"
SCHEMA_EXCLUDE_LIST = "schema.exclude.list"
SCHEMA_BLACKLIST = "schema.blacklist"
DATABASE_INCLUDE_LIST = "database.include.list"
DATABASE_WHITELIST = "database.whitelist"
DATABASE_EXCLUDE_LIST = "database.exclude.list"
DATABASE_BLACKLIST = "database.blacklist"
FILTER_LIST_DEFAULT: tuple[str, ...] = ()
MESSAGE_KEY_COLUMNS = "message.key.columns"
MESSAGE_KEY_COLUMNS_DEFAULT = None
COLUMN_MASK_HASH = "column.mask.hash.<ALG>.with.salt.<salt>"
COLUMN_MASK_HASH_V2 = "column.mask.hash.v2.<ALG>.with.salt.<salt>"
COLUMN_MASK_WITH_CHARS = "column.mask.with.<N>.chars"
COLUMN_TRUNCATE_TO_CHARS = "column.truncate.to.<N>.chars"

# --- relational connection and value handling -----------------------------------------------
DATABASE_HOSTNAME = "database.hostname"
DATABASE_PORT = "database.port"
DATABASE_USER = "database.user"
DATABASE_PASSWORD = "database.password"
DATABASE_DBNAME = "database.dbname"
TIME_PRECISION_MODE = "time.precision.mode"
TIME_PRECISION_MODE_DEFAULT = "adaptive"
DECIMAL_HANDLING_MODE = "decimal.handling.mode"
DECIMAL_HANDLING_MODE_DEFAULT = "precise"
BINARY_HANDLING_MODE = "binary.handling.mode"
BINARY_HANDLING_MODE_DEFAULT = "bytes"
INCLUDE_SCHEMA_CHANGES = "include.schema.changes"
INCLUDE_SCHEMA_CHANGES_DEFAULT = True

# --- PostgreSQL and YugabyteDB --------------------------------------------------------------
PG_PORT_DEFAULT = 5432
YB_PORT_DEFAULT = 5433
PLUGIN_NAME = "plugin.name"
PG_PLUGIN_NAME_DEFAULT = "pgoutput"
YB_PLUGIN_NAME_DEFAULT = "yboutput"
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
SLOT_LSN_TYPE = "slot.lsn.type"
SLOT_LSN_TYPE_DEFAULT = "SEQUENCE"

# --- MySQL / MariaDB ------------------------------------------------------------------------
MYSQL_PORT_DEFAULT = 3306
MYSQL_TIME_PRECISION_MODE_DEFAULT = "adaptive_time_microseconds"
DATABASE_SERVER_ID = "database.server.id"
DATABASE_SERVER_ID_DEFAULT = None
SNAPSHOT_LOCKING_MODE = "snapshot.locking.mode"
SNAPSHOT_LOCKING_MODE_DEFAULT = "minimal"
GTID_SOURCE_INCLUDES = "gtid.source.includes"
GTID_SOURCE_EXCLUDES = "gtid.source.excludes"
INCLUDE_QUERY = "include.query"
INCLUDE_QUERY_DEFAULT = False
BIGINT_UNSIGNED_HANDLING_MODE = "bigint.unsigned.handling.mode"
BIGINT_UNSIGNED_HANDLING_MODE_DEFAULT = "precise"  # exact; Debezium's long wraps >= 2^63
BINLOG_BUFFER_SIZE = "binlog.buffer.size"
BINLOG_BUFFER_SIZE_DEFAULT = 0
CONNECT_TIMEOUT_MS = "connect.timeout.ms"
CONNECT_TIMEOUT_MS_DEFAULT = 30_000

# --- MongoDB --------------------------------------------------------------------------------
MONGODB_CONNECTION_STRING = "mongodb.connection.string"
MONGODB_HOSTS = "mongodb.hosts"
MONGODB_USER = "mongodb.user"
MONGODB_PASSWORD = "mongodb.password"
COLLECTION_INCLUDE_LIST = "collection.include.list"
COLLECTION_WHITELIST = "collection.whitelist"
COLLECTION_EXCLUDE_LIST = "collection.exclude.list"
COLLECTION_BLACKLIST = "collection.blacklist"
FIELD_EXCLUDE_LIST = "field.exclude.list"
FIELD_BLACKLIST = "field.blacklist"
CAPTURE_MODE = "capture.mode"
CAPTURE_MODE_DEFAULT = "change_streams_update_full"

# --- SQL Server -----------------------------------------------------------------------------
SQLSERVER_PORT_DEFAULT = 1433
DATABASE_NAMES = "database.names"
SNAPSHOT_ISOLATION_MODE = "snapshot.isolation.mode"
SNAPSHOT_ISOLATION_MODE_DEFAULT = "repeatable_read"
SOURCE_TIMESTAMP_MODE = "source.timestamp.mode"
SOURCE_TIMESTAMP_MODE_DEFAULT = "commit"

# --- Oracle ---------------------------------------------------------------------------------
ORACLE_PORT_DEFAULT = 1521
DATABASE_PDB_NAME = "database.pdb.name"
DATABASE_URL = "database.url"
DATABASE_CONNECTION_ADAPTER = "database.connection.adapter"
DATABASE_CONNECTION_ADAPTER_DEFAULT = "logminer"
LOG_MINING_STRATEGY = "log.mining.strategy"
LOG_MINING_STRATEGY_DEFAULT = "redo_log_catalog"
LOG_MINING_QUERY_FILTER_MODE = "log.mining.query.filter.mode"
LOG_MINING_QUERY_FILTER_MODE_DEFAULT = "none"
LOB_ENABLED = "lob.enabled"
LOB_ENABLED_DEFAULT = False

# --- Db2 ------------------------------------------------------------------------------------
DB2_PORT_DEFAULT = 50000

# --- enumerated values ----------------------------------------------------------------------
Operation = Literal["c", "u", "d", "t"]
"""Debezium op codes ``skipped.operations`` may name (``none`` means an empty list)."""
LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
JsonFormat = Literal["auto", "envelope", "kafka_json", "key_tab_value", "console", "cloudevents"]
"""Line formats of ``debezium_json`` files; see :attr:`DebeziumJsonSourceConfig.format`."""
JsonOrderBy = Literal["source", "arrival"]
"""How ``debezium_json`` orders records; see :attr:`DebeziumJsonSourceConfig.order_by`."""
FailureHandlingMode = Literal["fail", "warn", "skip"]
TimePrecisionMode = Literal["adaptive", "adaptive_time_microseconds", "connect"]
DecimalHandlingMode = Literal["precise", "double", "string"]
BinaryHandlingMode = Literal["bytes", "base64", "base64-url-safe", "hex"]
PgPluginName = Literal[
    "pgoutput",
    "decoderbufs",
    "wal2json",
    "wal2json_streaming",
    "wal2json_rds",
    "wal2json_rds_streaming",
]
YbPluginName = Literal["yboutput", "pgoutput"]
PublicationAutocreateMode = Literal["all_tables", "disabled", "filtered"]
PgSnapshotMode = Literal["initial", "always", "never", "initial_only", "exported", "when_needed"]
YbSnapshotMode = Literal["initial", "never", "initial_only"]
HstoreHandlingMode = Literal["json", "map"]
IntervalHandlingMode = Literal["numeric", "string"]
SlotLsnType = Literal["SEQUENCE", "HYBRID_TIME"]
MySqlSnapshotMode = Literal[
    "initial", "when_needed", "never", "schema_only", "schema_only_recovery"
]
SnapshotLockingMode = Literal["minimal", "extended", "none"]
BigintUnsignedHandlingMode = Literal["long", "precise"]
MongoSnapshotMode = Literal["initial", "never"]
MongoCaptureMode = Literal[
    "change_streams",
    "change_streams_update_full",
    "change_streams_update_full_with_pre_image",
    "change_streams_with_pre_image",
    "oplog",
]
SqlServerSnapshotMode = Literal["initial", "initial_only", "schema_only"]
SqlServerIsolationMode = Literal[
    "read_uncommitted", "read_committed", "repeatable_read", "snapshot", "exclusive"
]
SourceTimestampMode = Literal["commit", "processing"]
OracleSnapshotMode = Literal[
    "always", "initial", "initial_only", "schema_only", "schema_only_recovery"
]
OracleAdapter = Literal["logminer", "xstream", "olr"]
LogMiningStrategy = Literal["redo_log_catalog", "online_catalog", "hybrid"]
LogMiningQueryFilterMode = Literal["none", "in", "regex"]
Db2SnapshotMode = Literal["initial", "schema_only"]
Db2IsolationMode = Literal["read_uncommitted", "read_committed", "repeatable_read", "exclusive"]
ConnectorHint = Literal[
    "postgresql", "mysql", "mariadb", "mongodb", "sqlserver", "oracle", "db2", "yugabytedb"
]


class SourceType(StrEnum):
    """The kinds of source, one per capture agent; the value is the YAML ``connector``."""

    DEBEZIUM_JSON = "debezium_json"
    """Debezium change events already written to JSON-lines files."""
    POSTGRESQL = "postgresql"
    MYSQL = "mysql"
    """MySQL, and MariaDB (``connector: mariadb`` is accepted as a spelling of it)."""
    MONGODB = "mongodb"
    SQLSERVER = "sqlserver"
    ORACLE = "oracle"
    DB2 = "db2"
    YUGABYTEDB = "yugabytedb"


# --- small value types ----------------------------------------------------------------------
class FrozenDict(dict[str, str]):
    """A read-only, hashable ``dict``, so that frozen configs stay immutable and hashable."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("configuration mappings are read-only")

    def __setitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def __delitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def __ior__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        self._read_only()

    def clear(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def popitem(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        # dict subclasses unpickle through __setitem__, which is disabled here.
        return (FrozenDict, (dict(self),))


class _Sourced(str):
    """A string that did not come literally from the YAML file, with where it came from.

    Interpolated values, environment layers, secret files and explicit overrides are wrapped in
    this type while the raw tree is assembled, so validation can tell a literal secret from an
    indirect one and errors can name the environment variable a bad value came from.
    """

    origin: str

    def __new__(cls, value: str, origin: str) -> _Sourced:
        self = super().__new__(cls, value)
        self.origin = origin
        return self


class _Defaulted(_Sourced):
    """An interpolated string that used a ``${VAR:-default}`` default written in the file."""


def reveal(secret: SecretStr | None) -> str | None:
    """Return the clear text of a secret field. Call this only where a driver connects.

    Args:
        secret: A secret config value, e.g. ``source.database_password``.

    Returns:
        The secret's value, or None when the secret is not set.
    """
    return None if secret is None else secret.get_secret_value()


def split_regex_list(value: str) -> tuple[str, ...]:
    """Split a Debezium comma-separated regex list.

    Like Debezium's ``RegExSplitterByComma``: ``\\,`` is a literal comma inside an expression,
    items are trimmed and empty items dropped.

    >>> split_regex_list(r"inventory\\.orders, inventory\\.a{1\\,3} ,")
    ('inventory\\\\.orders', 'inventory\\\\.a{1,3}')
    """
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char == "\\" and i + 1 < len(value) and value[i + 1] == ",":
            current.append(",")
            i += 2
            continue
        if char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return tuple(p.strip() for p in parts if p.strip())


def _as_items(value: Any, split: Callable[[str], tuple[str, ...]]) -> Any:
    if value is None:
        return ()
    if isinstance(value, str):
        return split(value)
    if isinstance(value, Sequence):
        return tuple(str(v).strip() if isinstance(v, str) else v for v in value)
    return value


def _split_commas(value: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in value.split(",") if p.strip())


def _regex_items(value: Any) -> Any:
    return _as_items(value, split_regex_list)


def _comma_items(value: Any) -> Any:
    return _as_items(value, _split_commas)


def _compile_all(patterns: tuple[str, ...]) -> tuple[str, ...]:
    for pattern in patterns:
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
    return patterns


def _skipped_operations(value: Any) -> Any:
    items = _comma_items(value)
    if isinstance(items, tuple) and any(isinstance(i, str) and i.lower() == "none" for i in items):
        if len(items) > 1:
            raise ValueError("'none' cannot be combined with other operations")
        return ()
    return items


def _stringify_map(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, int | float):
            out[key] = str(item)
        else:
            out[key] = item
    return out


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    """Make ``value`` absolute against the config file's directory (cwd without a file)."""
    value = value.expanduser()
    if value.is_absolute():
        return value
    context = info.context if isinstance(info.context, Mapping) else {}
    base = context.get(_CTX_BASE_DIR)
    base_dir = Path(base) if base is not None else Path.cwd()
    return Path(os.path.abspath(base_dir / value))


ConfigPath = Annotated[Path, AfterValidator(_resolve_path)]
"""A path; relative values are resolved against the config file's directory."""
OptionalConfigPath = Annotated[
    ConfigPath | None,
    BeforeValidator(lambda v: None if isinstance(v, str) and not v.strip() else v),
]
"""An optional path; an empty string (e.g. from ``${VAR:-}``) means not set."""
RegexList = Annotated[tuple[str, ...], BeforeValidator(_regex_items), AfterValidator(_compile_all)]
"""Debezium regex list: a comma-separated string or a YAML list; each item anchored."""
NameList = Annotated[tuple[str, ...], BeforeValidator(_comma_items)]
"""A comma-separated string or a YAML list of plain names."""
OperationList = Annotated[tuple[Operation, ...], BeforeValidator(_skipped_operations)]
StrMap = Annotated[dict[str, str], BeforeValidator(_stringify_map), AfterValidator(FrozenDict)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Port = Annotated[int, Field(gt=0, lt=65536)]
SourceName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]


def _key(default: Any, key: str, *older: str, **kwargs: Any) -> Any:
    """A field read from the YAML key ``key``; ``older`` spellings are accepted as aliases."""
    if older:
        return Field(default, alias=key, validation_alias=AliasChoices(key, *older), **kwargs)
    return Field(default, alias=key, **kwargs)


def _keyed_error(key: str, reason: str) -> PydanticCustomError:
    """An error about ``key`` of the model being validated (the key path gets ``key`` appended)."""
    return PydanticCustomError("config_key", "{key}: {reason}", {"key": key, "reason": reason})


# --- the base model -------------------------------------------------------------------------
@dataclass(frozen=True)
class _KeyIndex:
    """Every accepted spelling of every field of one model, computed once per class."""

    spellings: dict[str, str]
    """Accepted key -> field name (aliases, old aliases, field names, ``<secret>.file``)."""
    primary: dict[str, str]
    """Field name -> the key written in YAML (the field's alias, else its name)."""
    secrets: frozenset[str]
    """Fields holding a SecretStr."""
    secret_files: frozenset[str]
    """The ``<secret key>.file`` spellings."""
    mappings: frozenset[str]
    """Fields holding a free-form mapping (``spark.conf``)."""
    literals: dict[str, dict[str, str]]
    """Field name -> lower-cased allowed value -> allowed value, for enumerated fields."""
    suggestions: tuple[str, ...]
    """Keys offered in "did you mean" hints."""
    by_env: dict[str, str]
    """``MEDALLION__`` key form (upper case, ``_`` for ``.`` and ``-``) -> accepted key."""


_KEY_INDEXES: dict[type[BaseModel], _KeyIndex] = {}


def _env_form(key: str) -> str:
    return key.upper().replace(".", "_").replace("-", "_")


def _mentions(annotation: Any, target: type) -> bool:
    if annotation is target:
        return True
    return any(_mentions(arg, target) for arg in get_args(annotation))


def _literal_values(annotation: Any) -> tuple[str, ...]:
    if get_origin(annotation) is Literal:
        return tuple(v for v in get_args(annotation) if isinstance(v, str))
    if get_origin(annotation) in (Union, UnionType):
        return tuple(v for arg in get_args(annotation) for v in _literal_values(arg))
    return ()


def _key_index(cls: type[BaseModel]) -> _KeyIndex:
    index = _KEY_INDEXES.get(cls)
    if index is not None:
        return index
    spellings: dict[str, str] = {}
    primary: dict[str, str] = {}
    secrets: set[str] = set()
    secret_files: set[str] = set()
    mappings: set[str] = set()
    literals: dict[str, dict[str, str]] = {}
    suggestions: list[str] = []
    for name, info in cls.model_fields.items():
        keys = [info.alias or name]
        if isinstance(info.validation_alias, AliasChoices):
            keys += [c for c in info.validation_alias.choices if isinstance(c, str)]
        elif isinstance(info.validation_alias, str):
            keys.append(info.validation_alias)
        keys = list(dict.fromkeys(keys))
        primary[name] = keys[0]
        if _mentions(info.annotation, SecretStr):
            secrets.add(name)
            files = [k + SECRET_FILE_SUFFIX for k in keys]
            secret_files.update(files)
            keys += files
        if get_origin(info.annotation) in (dict, Mapping):
            mappings.add(name)
        values = _literal_values(info.annotation)
        if values:
            literals[name] = {v.lower(): v for v in values}
        suggestions += keys
        for key in [*keys, name]:
            spellings.setdefault(key, name)
    by_env: dict[str, str] = {}
    for key in suggestions + list(spellings):
        by_env.setdefault(_env_form(key), key)
    index = _KeyIndex(
        spellings=spellings,
        primary=primary,
        secrets=frozenset(secrets),
        secret_files=frozenset(secret_files),
        mappings=frozenset(mappings),
        literals=literals,
        suggestions=tuple(suggestions),
        by_env=by_env,
    )
    _KEY_INDEXES[cls] = index
    return index


def _did_you_mean(word: str, candidates: Sequence[str], quote: str = "'") -> str:
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"did you mean {quote}{match[0]}{quote}?" if match else ""


class ConfigModel(BaseModel):
    """Base of every config model: frozen, strict about keys, validated once.

    One ``wrap`` validator, inherited by every section and source model, does what pydantic's
    ``extra="forbid"`` cannot: it rejects unknown keys with the closest valid key as a hint, refuses
    two spellings of one option, reads ``<secret>.file`` keys, rejects literal secrets (when loaded
    from a file) and matches enumerated values case-insensitively; the offending keys are dropped
    and validation goes on, so one run reports every problem. One ``after`` validator checks that
    mutually exclusive include/exclude lists are not both set.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
    )

    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Pairs of field names of which at most one may be set (Debezium include XOR exclude)."""
    LITERAL_SECRET_OK: ClassVar[Mapping[str, Callable[[str], bool]]] = {}
    """Secret field name -> predicate: a literal value it accepts is not really a secret."""

    @classmethod
    def _is_pattern_key(cls, key: str) -> bool:
        """Whether ``key`` is a pattern key (``column.mask.with.8.chars``) this model accepts."""
        return False

    @classmethod
    def _rewrite_input(
        cls, data: dict[str, Any], context: Mapping[str, Any], problems: list[PydanticCustomError]
    ) -> dict[str, Any]:
        """Hook: turn accepted pattern keys into fields; append errors to ``problems``."""
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _check_keys(
        cls, data: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo
    ) -> Any:
        # A wrap validator, so that a bad key does not hide the other problems of the model:
        # offending keys are reported and dropped, and validation goes on without them.
        if not isinstance(data, Mapping):
            return handler(data)
        context: Mapping[str, Any] = info.context if isinstance(info.context, Mapping) else {}
        problems: list[PydanticCustomError] = []
        data = cls._prepare_input({str(k): v for k, v in data.items()}, context, problems)
        if not problems:
            return handler(data)
        details: list[InitErrorDetails] = [{"type": p, "loc": (), "input": data} for p in problems]
        try:
            handler(data)
        except ValidationError as exc:
            details += [_as_error_details(e) for e in exc.errors()]
        raise ValidationError.from_exception_data(cls.__name__, details)

    @classmethod
    def _prepare_input(
        cls, data: dict[str, Any], context: Mapping[str, Any], problems: list[PydanticCustomError]
    ) -> dict[str, Any]:
        index = _key_index(cls)
        for key in [k for k in data if k not in index.spellings and not cls._is_pattern_key(k)]:
            hint = cls._hint_for(key, index)
            note = f"; {hint}" if hint else ""
            problems.append(
                PydanticCustomError(
                    "unknown_key",
                    "unknown key '{key}'{note}",
                    {"key": key, "hint": hint, "note": note},
                )
            )
            del data[key]

        given: dict[str, str] = {}
        for key in list(data):
            name = index.spellings.get(key)
            if name is None:  # a pattern key
                continue
            if name in given:
                problems.append(
                    _keyed_error(
                        key, f"'{given[name]}' and '{key}' set the same option; keep one of them"
                    )
                )
                del data[key]
                continue
            given[name] = key

        for secret_field in index.secrets:
            secret_key = given.get(secret_field)
            if secret_key is None:
                continue
            key = secret_key
            if key in index.secret_files:
                try:
                    secret = _read_secret_file(key, data.pop(key), context)
                except PydanticCustomError as err:
                    problems.append(err)
                    continue
                data[key[: -len(SECRET_FILE_SUFFIX)]] = secret
                continue
            value = data[key]
            literal = value is not None and (
                not isinstance(value, _Sourced | SecretStr) or isinstance(value, _Defaulted)
            )
            allowed = cls.LITERAL_SECRET_OK.get(secret_field)
            if isinstance(value, str) and (value == "" or (allowed and allowed(value))):
                literal = False
            if literal and context.get(_CTX_REJECT_LITERAL_SECRETS):
                problems.append(
                    _keyed_error(
                        key,
                        "a literal secret is not allowed in the config file; write "
                        f"'{key}: ${{ENV_VAR}}' or '{key}{SECRET_FILE_SUFFIX}: /path/to/secret'",
                    )
                )
                del data[key]

        for key, value in list(data.items()):
            field = index.spellings.get(key)
            if field is not None and field in index.literals and isinstance(value, str):
                data[key] = index.literals[field].get(value.lower(), value)
        return cls._rewrite_input(data, context, problems)

    @classmethod
    def _hint_for(cls, key: str, index: _KeyIndex) -> str:
        if key.startswith(("column.mask", "column.truncate")) and cls._is_pattern_key(
            "column.mask.with.1.chars"
        ):
            return (
                f"expected {COLUMN_MASK_HASH}, {COLUMN_MASK_HASH_V2}, {COLUMN_MASK_WITH_CHARS} "
                f"or {COLUMN_TRUNCATE_TO_CHARS}"
            )
        return _did_you_mean(key, index.suggestions)

    @model_validator(mode="after")
    def _check_exclusive(self) -> Self:
        index = _key_index(type(self))
        pairs = [p for c in type(self).__mro__ for p in vars(c).get("EXCLUSIVE_KEYS", ())]
        for first, second in pairs:
            if getattr(self, first) and getattr(self, second):
                raise _keyed_error(
                    index.primary[second],
                    f"'{index.primary[first]}' and '{index.primary[second]}' are mutually "
                    "exclusive; set only one of them",
                )
        return self


def _as_error_details(error: ErrorDetails) -> InitErrorDetails:
    """Carry an error of an inner validation over into a combined ValidationError."""
    custom = PydanticCustomError(error["type"], error["msg"], error.get("ctx"))
    return {"type": custom, "loc": tuple(error["loc"]), "input": error["input"]}


def _read_secret_file(key: str, value: Any, context: Mapping[str, Any]) -> _Sourced:
    if not isinstance(value, str) or not value:
        raise _keyed_error(key, "expected the path of a file holding the secret")
    path = Path(value).expanduser()
    if not path.is_absolute():
        base = context.get(_CTX_BASE_DIR)
        path = (Path(base) if base is not None else Path.cwd()) / path
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise _keyed_error(key, f"cannot read secret file '{path}': {exc.strerror or exc}") from exc
    return _Sourced(text.rstrip("\r\n"), f"secret file {path}")


# --- sections -------------------------------------------------------------------------------
class LakeConfig(ConfigModel):
    """Where the Delta tables live: ``<root>/bronze``, ``<root>/silver``, ``<root>/gold``."""

    root: ConfigPath = _key(LAKE_ROOT_DEFAULT, LAKE_ROOT, validate_default=True)
    """Root directory of the lake; relative to the config file's directory."""

    @property
    def bronze_path(self) -> Path:
        """The bronze ``events`` table: every record of every source."""
        return self.root / "bronze" / "events"

    @property
    def quarantine_path(self) -> Path:
        """The bronze ``quarantine`` table: records that could not be landed, with the reason."""
        return self.root / "bronze" / "quarantine"

    @property
    def schemas_path(self) -> Path:
        """The bronze ``schemas`` table: Connect schemas by fingerprint."""
        return self.root / "bronze" / "schemas"

    @property
    def silver_path(self) -> Path:
        """Directory of the silver tables (one per captured table)."""
        return self.root / "silver"

    @property
    def gold_path(self) -> Path:
        """Directory of the gold tables."""
        return self.root / "gold"


class SparkConfig(ConfigModel):
    """How the SparkSession is built."""

    master: str = _key(SPARK_MASTER_DEFAULT, SPARK_MASTER)
    """Spark master URL: ``local[*]``, ``local[2]``, ``spark://host:7077``."""
    app_name: str = _key(SPARK_APP_NAME_DEFAULT, SPARK_APP_NAME)
    """Spark application name (shown in the Spark UI)."""
    jars_dir: OptionalConfigPath = _key(SPARK_JARS_DIR_DEFAULT, SPARK_JARS_DIR)
    """Directory of the Spark jars (Delta); null or empty: ``pipeline.spark``'s default
    (``$MEDALLION_JARS_DIR``, else the repository's ``.cache/jars``)."""
    conf: StrMap = _key(PydanticUndefined, SPARK_CONF, default_factory=dict, validate_default=True)
    """Extra ``spark.*`` settings passed to the session builder verbatim (values as strings)."""


class BronzeConfig(ConfigModel):
    """How capture agents land records in bronze."""

    max_batch_size: PositiveInt = _key(BRONZE_MAX_BATCH_SIZE_DEFAULT, BRONZE_MAX_BATCH_SIZE)
    """Records per bronze commit, at most; a batch ends early on a transaction boundary."""
    max_transaction_size: PositiveInt = _key(
        BRONZE_MAX_TRANSACTION_SIZE_DEFAULT, BRONZE_MAX_TRANSACTION_SIZE
    )
    """A transaction larger than this is committed in parts, flagged ``tx_partial``."""


class SchemaEvolutionPolicy(StrEnum):
    """What silver does with a schema change that is neither a new column nor a safe widening.

    New columns and safe widenings (int8 -> int16 -> int32 -> int64, float -> double, a
    decimal with more digits, date -> timestamp) are always applied; the policy covers the rest
    (a column changing to an incompatible type, e.g. int -> string or string -> int).
    """

    EVOLVE = "evolve"
    """Rewrite the column to the new type when every stored value converts without loss; when
    one does not, the events are quarantined instead (never a lossy cast)."""
    QUARANTINE = "quarantine"
    """Leave the table as it is; the events written with the new schema go to quarantine."""
    FAIL = "fail"
    """Stop the job with an error naming the table, column and types; nothing is applied and
    the run resumes from the same bronze rows once the policy or the table is changed."""


def _frozen_tables(tables: Mapping[str, Any]) -> Mapping[str, Any]:
    return FrozenDict(tables)


class SilverTableConfig(ConfigModel):
    """Options of one silver table (``silver.tables.<source>.<schema>.<table>``)."""

    schema_evolution: SchemaEvolutionPolicy | None = _key(None, SILVER_SCHEMA_EVOLUTION)
    """Overrides ``silver.schema.evolution`` for this table."""
    history: bool = _key(SILVER_TABLE_HISTORY_DEFAULT, SILVER_TABLE_HISTORY)
    """Also keep an SCD type 2 history table ``<table>__history``: one row per version with
    valid-from/valid-to by source commit time and position, linked across primary-key moves."""


@dataclass(frozen=True, slots=True)
class TableOptions:
    """The resolved options of one silver table."""

    schema_evolution: SchemaEvolutionPolicy = SchemaEvolutionPolicy.EVOLVE
    history: bool = False


class SilverConfig(ConfigModel):
    """How silver applies bronze."""

    tombstone_retention_hours: Annotated[float, Field(ge=0)] = _key(
        SILVER_TOMBSTONE_RETENTION_HOURS_DEFAULT, SILVER_TOMBSTONE_RETENTION_HOURS
    )
    """Deleted rows stay as tombstone rows this long, so a late older event cannot resurrect
    them; after the purge, such an event is reported ("would have resurrected"), never applied.
    Set it above the longest delay you expect between a change and its arrival in bronze."""
    transaction_timeout_seconds: Annotated[float, Field(ge=0)] = _key(
        SILVER_TRANSACTION_TIMEOUT_SECONDS_DEFAULT, SILVER_TRANSACTION_TIMEOUT_SECONDS
    )
    """A source transaction waits this long for its END record (Debezium emits it only when the
    next transaction starts) before it is applied as far as it arrived."""
    schema_evolution: SchemaEvolutionPolicy = _key(
        SchemaEvolutionPolicy.EVOLVE, SILVER_SCHEMA_EVOLUTION
    )
    """Policy for schema changes that are not additive or safe widenings (per table below)."""
    tables: Annotated[Mapping[str, SilverTableConfig], AfterValidator(_frozen_tables)] = _key(
        FrozenDict(), SILVER_TABLES
    )
    """Per-table options, keyed ``<source>.<schema>.<table>`` (or ``<schema>.<table>`` for that
    table in every source)."""

    def table(self, source: str, collection: str) -> TableOptions:
        """The options of the silver table of ``collection`` captured by ``source``.

        Args:
            source: The source name.
            collection: The source table (``<schema>.<table>``, or ``<db>.<table>``).

        Returns:
            The table's entry merged over the section defaults.
        """
        entry = self.tables.get(f"{source}.{collection}") or self.tables.get(collection)
        policy = entry.schema_evolution if entry and entry.schema_evolution else None
        return TableOptions(
            schema_evolution=policy or self.schema_evolution,
            history=bool(entry and entry.history),
        )


class GoldTableConfig(ConfigModel):
    """A gold table derived from the gold views (``gold.tables.<name>``): exactly one of ``sql``
    and ``python``. It is rebuilt at every published cut by ``medallion run``."""

    sql: str | None = _key(None, GOLD_TABLE_SQL)
    """A Spark SQL query over the gold views (``gold.<source>__<schema>__<table>``)."""
    python: str | None = _key(None, GOLD_TABLE_PYTHON, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")
    """``package.module:function``, called as ``function(spark, tables)`` where ``tables`` maps
    ``<source>.<schema>.<table>`` to the gold DataFrame at the cut; returns a DataFrame."""
    description: str = _key("", GOLD_TABLE_DESCRIPTION)
    """Shown in reports and in the table's Delta description."""

    @model_validator(mode="after")
    def _one_definition(self) -> GoldTableConfig:
        if (self.sql is None) == (self.python is None):
            raise ValueError("give exactly one of 'sql' and 'python'")
        return self


class GoldConfig(ConfigModel):
    """Gold: current-state views of every silver table at one consistent cut, and derived
    tables declared here."""

    tables: Annotated[Mapping[str, GoldTableConfig], AfterValidator(_frozen_tables)] = _key(
        FrozenDict(), GOLD_TABLES
    )
    """Derived gold tables by name (``[a-z][a-z0-9_]*``), written to ``<lake>/gold/<name>``."""

    @field_validator("tables")
    @classmethod
    def _table_names(cls, tables: Mapping[str, GoldTableConfig]) -> Mapping[str, GoldTableConfig]:
        for name in tables:
            if not re.fullmatch(r"[a-z][a-z0-9_]*", name) or name.startswith("_"):
                raise ValueError(f"gold table name '{name}' must match [a-z][a-z0-9_]*")
        return tables


class Severity(StrEnum):
    """What a failed quality check does."""

    WARN = "warn"
    """Reported; gold moves to the new cut anyway."""
    BLOCK = "block"
    """Reported; gold stays at the last cut whose blocking checks passed."""


class ExpectationConfig(ConfigModel):
    """One user expectation: a great-expectations 1.x expectation type and its arguments."""

    type: str = _key(PydanticUndefined, QUALITY_EXPECTATION_TYPE, pattern=r"^expect_[a-z0-9_]+$")
    """The expectation's snake_case name, e.g. ``expect_column_values_to_be_between``."""
    kwargs: Mapping[str, Any] = _key(
        PydanticUndefined, QUALITY_EXPECTATION_KWARGS, default_factory=dict
    )
    """Its arguments (``column``, ``min_value``, ``regex`` ...), as GX names them."""
    severity: Severity = _key(Severity.WARN, QUALITY_EXPECTATION_SEVERITY)
    """``warn`` or ``block``."""


class QualityConfig(ConfigModel):
    """Data-quality checks on gold (``medallion quality``, and after each ``medallion run``)."""

    enabled: bool = _key(True, QUALITY_ENABLED)
    """Run the checks after each ``medallion run`` (before gold moves to the new cut)."""
    freshness_slo_seconds: Annotated[float, Field(gt=0)] = _key(
        QUALITY_FRESHNESS_SLO_SECONDS_DEFAULT, QUALITY_FRESHNESS_SLO_SECONDS
    )
    """The freshness check fails when gold is further behind the source than this."""
    quarantine_max: NonNegativeInt = _key(0, QUALITY_QUARANTINE_MAX)
    """The quarantine check fails when a table has more quarantined events than this."""
    reconcile_interval_seconds: Annotated[float, Field(ge=0)] | None = _key(
        QUALITY_RECONCILE_INTERVAL_SECONDS_DEFAULT, QUALITY_RECONCILE_INTERVAL_SECONDS
    )
    """``medallion run`` also reconciles gold with each database source at most this often
    (0: every run; null: never; ``medallion reconcile`` runs it on demand)."""
    report_dir: OptionalConfigPath = _key(None, QUALITY_REPORT_DIR)
    """Directory of the HTML report (``index.html``, one file per run); null:
    ``<lake>/reports/quality``."""
    severity: Annotated[Mapping[str, Severity], AfterValidator(_frozen_tables)] = _key(
        FrozenDict(), QUALITY_SEVERITY
    )
    """Severity per built-in check name (see ``gold.quality.CHECKS``), overriding its default."""
    expectations: Annotated[
        Mapping[str, tuple[ExpectationConfig, ...]], AfterValidator(_frozen_tables)
    ] = _key(FrozenDict(), QUALITY_EXPECTATIONS)
    """User expectations per table, keyed ``<source>.<schema>.<table>`` (or
    ``<schema>.<table>`` for that table in every source)."""

    def expectations_for(self, source: str, collection: str) -> tuple[ExpectationConfig, ...]:
        """The user expectations of one table (source-qualified entry first, then unqualified)."""
        return tuple(self.expectations.get(f"{source}.{collection}", ())) + tuple(
            self.expectations.get(collection, ())
        )


class LoggingConfig(ConfigModel):
    """Logging level; only the CLI installs handlers."""

    level: Annotated[LogLevel, BeforeValidator(_upper)] = _key(LOG_LEVEL_DEFAULT, LOG_LEVEL)
    """Root log level: DEBUG, INFO, WARNING, ERROR or CRITICAL."""


# --- column rules ---------------------------------------------------------------------------
class ColumnRuleKind(StrEnum):
    """What a column rule does to matching values (Debezium's column mappers)."""

    TRUNCATE = "truncate"
    """``column.truncate.to.<N>.chars``: cut strings (and bytes) longer than N."""
    MASK = "mask"
    """``column.mask.with.<N>.chars``: replace strings with N ``*``."""
    HASH = "hash"
    """``column.mask.hash.<ALG>.with.salt.<salt>``: Debezium's V1 hashing (Java-serialized)."""
    HASH_V2 = "hash_v2"
    """``column.mask.hash.v2.<ALG>.with.salt.<salt>``: V2 hashing (the value's UTF-8 text)."""


_COLUMN_RULE_PATTERNS: tuple[tuple[ColumnRuleKind, re.Pattern[str]], ...] = (
    (
        ColumnRuleKind.HASH_V2,
        re.compile(r"column\.mask\.hash\.v2\.(?P<alg>[^.]+)\.with\.salt\.(?P<salt>.+)"),
    ),
    (
        ColumnRuleKind.HASH,
        re.compile(r"column\.mask\.hash\.(?P<alg>[^.]+)\.with\.salt\.(?P<salt>.+)"),
    ),
    (ColumnRuleKind.MASK, re.compile(r"column\.mask\.with\.(?P<n>\d+)\.chars")),
    (ColumnRuleKind.TRUNCATE, re.compile(r"column\.truncate\.to\.(?P<n>\d+)\.chars")),
)
# Debezium registers truncation first, then masks, then hashes, and the first matching rule wins.
_COLUMN_RULE_ORDER = {
    ColumnRuleKind.TRUNCATE: 0,
    ColumnRuleKind.MASK: 1,
    ColumnRuleKind.HASH: 2,
    ColumnRuleKind.HASH_V2: 3,
}

HASH_ALGORITHMS: Mapping[str, str] = {
    "MD2": "md2",
    "MD5": "md5",
    "SHA": "sha1",
    "SHA1": "sha1",
    "SHA-1": "sha1",
    "SHA-224": "sha224",
    "SHA-256": "sha256",
    "SHA-384": "sha384",
    "SHA-512": "sha512",
    "SHA-512/224": "sha512_224",
    "SHA-512/256": "sha512_256",
    "SHA3-224": "sha3_224",
    "SHA3-256": "sha3_256",
    "SHA3-384": "sha3_384",
    "SHA3-512": "sha3_512",
}
"""Java ``MessageDigest`` names (case-insensitive) -> :mod:`hashlib` names."""


def _hashlib_name(algorithm: str) -> str:
    name = HASH_ALGORITHMS.get(algorithm.upper())
    if name is None or name not in hashlib.algorithms_available:
        known = ", ".join(
            a for a in HASH_ALGORITHMS if HASH_ALGORITHMS[a] in hashlib.algorithms_available
        )
        raise ValueError(f"unknown hash algorithm '{algorithm}'; use one of {known}")
    return name


class ColumnRule(ConfigModel):
    """One Debezium column mapper, parsed from a pattern key of a relational source.

    ``column.mask.hash.SHA-256.with.salt.CzQMA0cB5K: inventory.orders.customerName`` becomes
    ``ColumnRule(key=..., kind=HASH, columns=("inventory.orders.customerName",),
    algorithm="SHA-256", salt="CzQMA0cB5K")``. Applied by :class:`capture.masking.ColumnMasker`.
    """

    key: str
    """The property as written in YAML."""
    kind: ColumnRuleKind
    """What the rule does."""
    columns: RegexList
    """Anchored, case-insensitive regexes over fully-qualified column names."""
    algorithm: str | None = None
    """Java digest name for hash rules (SHA-256, SHA-512, MD5, SHA-1, ...)."""
    salt: str | None = None
    """Salt for hash rules (the key names it, so it is not secret)."""
    length: NonNegativeInt | None = None
    """N for mask (0 = empty string) and truncate (N > 0) rules."""

    @property
    def hashlib_algorithm(self) -> str:
        """The :mod:`hashlib` name of :attr:`algorithm` (hash rules only)."""
        if self.algorithm is None:
            raise ValueError(f"{self.key} is not a hash rule")
        return _hashlib_name(self.algorithm)

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.kind in (ColumnRuleKind.HASH, ColumnRuleKind.HASH_V2):
            if self.algorithm is None or self.salt is None:
                raise ValueError("hash rules need an algorithm and a salt")
            _hashlib_name(self.algorithm)
        elif self.length is None:
            raise ValueError(f"{self.kind} rules need a length")
        elif self.kind is ColumnRuleKind.TRUNCATE and self.length == 0:
            raise ValueError("truncation length must be positive")
        if not self.columns:
            raise ValueError("no column regexes given")
        return self


def _parse_column_rule(key: str, value: Any) -> dict[str, Any]:
    for kind, pattern in _COLUMN_RULE_PATTERNS:
        match = pattern.fullmatch(key)
        if match is None:
            continue
        columns = _regex_items(value)
        if not isinstance(columns, tuple) or not all(isinstance(c, str) for c in columns):
            raise _keyed_error(key, "expected a comma-separated list of column regexes")
        if not columns:
            raise _keyed_error(key, "no column regexes given")
        try:
            _compile_all(columns)
            rule: dict[str, Any] = {"key": key, "kind": kind, "columns": columns}
            if kind in (ColumnRuleKind.HASH, ColumnRuleKind.HASH_V2):
                _hashlib_name(match["alg"])
                rule.update(algorithm=match["alg"], salt=match["salt"])
            else:
                rule["length"] = int(match["n"])
                if kind is ColumnRuleKind.TRUNCATE and rule["length"] == 0:
                    raise ValueError("truncation length must be positive")
        except ValueError as exc:
            raise _keyed_error(key, str(exc)) from exc
        return rule
    raise _keyed_error(key, "not a column rule key")  # pragma: no cover - guarded by caller


def _is_column_rule_key(key: str) -> bool:
    return any(p.fullmatch(key) for _, p in _COLUMN_RULE_PATTERNS)


def _check_message_key_columns(value: str | None) -> str | None:
    if value is None:
        return None
    for entry in value.split(";"):
        table, sep, columns = entry.strip().rpartition(":")
        if not entry.strip():
            continue
        if not sep or not table.strip() or not _split_commas(columns):
            raise ValueError(
                f"expected '<table regex>:<column>,...;...' (e.g. 'inventory.orders:pk1,pk2'), "
                f"got {entry.strip()!r}"
            )
        _compile_all((table.strip(),))
    return value


# --- sources --------------------------------------------------------------------------------
class SourceConfigBase(ConfigModel):
    """What every source has: a name and a connector kind."""

    KIND: ClassVar[SourceType]
    """The source kind this model configures."""

    name: SourceName = _key(..., NAME)
    """Unique name of the source, ``[a-z][a-z0-9_]*``; bronze's ``source`` partition value."""
    connector: str = _key(..., CONNECTOR)
    """The connector kind; each source model narrows it to its own value(s)."""

    @property
    def kind(self) -> SourceType:
        """The kind of source (and of capture agent)."""
        return self.KIND

    @property
    def logical_name(self) -> str:
        """Debezium's logical server name: ``topic.prefix`` when set, else the source name."""
        return self.name


class ColumnRules(ConfigModel):
    """Column rules (masks, hashes, truncation) applied to row images before bronze."""

    column_rules: tuple[ColumnRule, ...] = ()
    """Parsed ``column.truncate.to.<N>.chars``, ``column.mask.with.<N>.chars``,
    ``column.mask.hash[.v2].<ALG>.with.salt.<salt>`` keys, in Debezium's precedence order."""

    @classmethod
    def _is_pattern_key(cls, key: str) -> bool:
        return _is_column_rule_key(key)

    @classmethod
    def _rewrite_input(
        cls, data: dict[str, Any], context: Mapping[str, Any], problems: list[PydanticCustomError]
    ) -> dict[str, Any]:
        parsed: list[dict[str, Any]] = []
        for key, value in data.items():
            if key != "column_rules" and _is_column_rule_key(key):
                try:
                    parsed.append(_parse_column_rule(key, value))
                except PydanticCustomError as err:
                    problems.append(err)
        if not parsed:
            return {k: v for k, v in data.items() if not _is_column_rule_key(k)}
        parsed.sort(key=lambda rule: _COLUMN_RULE_ORDER[rule["kind"]])
        existing = data.get("column_rules") or ()
        data = {k: v for k, v in data.items() if not _is_column_rule_key(k)}
        data["column_rules"] = (*existing, *parsed)
        return data


class RelationalFilters(ColumnRules):
    """Table and column selection, key overrides and the column rules."""

    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("table_include_list", "table_exclude_list"),
        ("column_include_list", "column_exclude_list"),
    )

    table_include_list: RegexList = _key(FILTER_LIST_DEFAULT, TABLE_INCLUDE_LIST, TABLE_WHITELIST)
    """Regexes of fully-qualified tables to capture (``schema.table`` or ``db.table``)."""
    table_exclude_list: RegexList = _key(FILTER_LIST_DEFAULT, TABLE_EXCLUDE_LIST, TABLE_BLACKLIST)
    """Regexes of fully-qualified tables not to capture."""
    column_include_list: RegexList = _key(
        FILTER_LIST_DEFAULT, COLUMN_INCLUDE_LIST, COLUMN_WHITELIST
    )
    """Regexes of fully-qualified columns to keep in row images (key columns always stay)."""
    column_exclude_list: RegexList = _key(
        FILTER_LIST_DEFAULT, COLUMN_EXCLUDE_LIST, COLUMN_BLACKLIST
    )
    """Regexes of fully-qualified columns to drop from row images."""
    message_key_columns: str | None = _key(MESSAGE_KEY_COLUMNS_DEFAULT, MESSAGE_KEY_COLUMNS)
    """Key columns for tables without a usable primary key: ``<table>:<col>,...;...``."""

    @field_validator("message_key_columns")
    @classmethod
    def _message_key_columns(cls, value: str | None) -> str | None:
        return _check_message_key_columns(value)


class SchemaFilters(ConfigModel):
    """Schema selection (PostgreSQL, YugabyteDB, SQL Server, Oracle, Db2)."""

    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("schema_include_list", "schema_exclude_list"),
    )

    schema_include_list: RegexList = _key(
        FILTER_LIST_DEFAULT, SCHEMA_INCLUDE_LIST, SCHEMA_WHITELIST
    )
    """Regexes of schemas to capture (default: all non-system schemas)."""
    schema_exclude_list: RegexList = _key(
        FILTER_LIST_DEFAULT, SCHEMA_EXCLUDE_LIST, SCHEMA_BLACKLIST
    )
    """Regexes of schemas not to capture."""


class DatabaseFilters(ConfigModel):
    """Database selection (MySQL/MariaDB, MongoDB)."""

    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("database_include_list", "database_exclude_list"),
    )

    database_include_list: RegexList = _key(
        FILTER_LIST_DEFAULT, DATABASE_INCLUDE_LIST, DATABASE_WHITELIST
    )
    """Regexes of databases to capture (default: all)."""
    database_exclude_list: RegexList = _key(
        FILTER_LIST_DEFAULT, DATABASE_EXCLUDE_LIST, DATABASE_BLACKLIST
    )
    """Regexes of databases not to capture."""


class DebeziumJsonSourceConfig(ColumnRules, SourceConfigBase):
    """Debezium change events already serialized as JSON lines (files or a directory of them).

    Every record is landed: table filters and ``skipped.operations`` were Debezium's to apply
    when it wrote the files. Column rules still apply, so data can be masked before bronze.
    """

    KIND = SourceType.DEBEZIUM_JSON

    connector: Literal["debezium_json"] = _key(..., CONNECTOR)
    """Discriminator: ``debezium_json``."""
    path: ConfigPath = _key(..., JSON_PATH)
    """A JSON-lines file, or a directory whose ``file.pattern`` files are read in name order."""
    file_pattern: str = _key(JSON_FILE_PATTERN_DEFAULT, JSON_FILE_PATTERN)
    """Glob of the files to read when ``path`` is a directory."""
    format: JsonFormat = _key(JSON_FORMAT_DEFAULT, JSON_FORMAT)
    """Line format (see :mod:`capture.debezium_json.source`).

    * ``envelope``: one Debezium value per line as Kafka Connect's JsonConverter writes it, with
      schemas (``{"schema": ..., "payload": {...}}``) or without; no key.
    * ``kafka_json``: one Kafka record per line, a JSON object with ``key`` and ``value`` (or
      kcat's ``payload``; ``null`` for a tombstone) and optional ``headers`` and ``topic``, as
      ``kcat -J`` and similar topic dumps write it.
    * ``key_tab_value`` / ``console``: ``kafka-console-consumer`` output with its default
      separators: ``[CreateTime:<ms>\\t][Partition:<n>\\t][Offset:<n>\\t][<headers>\\t]
      [<key>\\t]<value>`` (``print.timestamp``, ``print.partition``, ``print.offset``,
      ``print.headers``, ``print.key``).
    * ``cloudevents``: Debezium's CloudEventsConverter, structured JSON mode, JSON data.
    * ``auto``: detect the format per line.
    """
    connector_hint: ConnectorHint | None = _key(JSON_CONNECTOR_HINT_DEFAULT, JSON_CONNECTOR_HINT)
    """Connector to assume for records whose ``source`` block is missing or has no ``connector``."""
    order_by: JsonOrderBy = _key(JSON_ORDER_BY_DEFAULT, JSON_ORDER_BY)
    """``source`` (default): order by each record's source position; a data record without a
    ``source`` block is quarantined. ``arrival``: order every record of this source by when it
    was read (file, line) and accept records without ``source`` (their table comes from the
    topic, their connector from ``connector.hint``). Weaker: no deduplication of records
    Debezium redelivers, no order across files but the reading order (docs/bronze.md)."""


class CaptureSourceConfig(SourceConfigBase):
    """Debezium engine properties shared by the database connectors."""

    skipped_operations: OperationList = _key(SKIPPED_OPERATIONS_DEFAULT, SKIPPED_OPERATIONS)
    """Op codes not landed (``c``, ``u``, ``d``, ``t``; ``none`` for none). Default ``t``."""

    topic_prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] | None = _key(
        TOPIC_PREFIX_DEFAULT, TOPIC_PREFIX, DATABASE_SERVER_NAME
    )
    """Debezium logical server name (``source.name``, topic prefix); default: the source name.
    Never change it once data was captured. 1.2 name: ``database.server.name``."""
    snapshot_mode: str = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """When to snapshot; the allowed values depend on the connector."""
    tombstones_on_delete: bool = _key(TOMBSTONES_ON_DELETE_DEFAULT, TOMBSTONES_ON_DELETE)
    """Emit a tombstone (same key, null value) after each delete."""
    provide_transaction_metadata: bool = _key(
        PROVIDE_TRANSACTION_METADATA_DEFAULT, PROVIDE_TRANSACTION_METADATA
    )
    """Emit BEGIN/END transaction records and the ``transaction`` block on data events."""
    heartbeat_interval_ms: NonNegativeInt = _key(
        HEARTBEAT_INTERVAL_MS_DEFAULT, HEARTBEAT_INTERVAL_MS
    )
    """Heartbeat period (0 = off); heartbeats move the stored position while tables are idle."""
    heartbeat_action_query: str | None = _key(
        HEARTBEAT_ACTION_QUERY_DEFAULT, HEARTBEAT_ACTION_QUERY
    )
    """DML run on each heartbeat so quiet databases still produce log (keeps WAL from growing)."""
    max_batch_size: PositiveInt = _key(MAX_BATCH_SIZE_DEFAULT, MAX_BATCH_SIZE)
    """Events per batch read from the source, at most."""
    max_queue_size: PositiveInt = _key(MAX_QUEUE_SIZE_DEFAULT, MAX_QUEUE_SIZE)
    """Events buffered between reader and writer; must exceed ``max.batch.size``."""
    poll_interval_ms: PositiveInt = _key(POLL_INTERVAL_MS_DEFAULT, POLL_INTERVAL_MS)
    """Wait between polls when the source had nothing new."""
    event_processing_failure_handling_mode: FailureHandlingMode = _key(
        EVENT_PROCESSING_FAILURE_HANDLING_MODE_DEFAULT, EVENT_PROCESSING_FAILURE_HANDLING_MODE
    )
    """On an event that cannot be processed: ``fail`` (stop), ``warn`` (log, skip), ``skip``."""

    @property
    def logical_name(self) -> str:
        """Debezium's logical server name: ``topic.prefix`` when set, else the source name."""
        return self.topic_prefix or self.name

    @model_validator(mode="after")
    def _queue_exceeds_batch(self) -> Self:
        if self.max_queue_size <= self.max_batch_size:
            raise _keyed_error(
                MAX_QUEUE_SIZE,
                f"must be larger than {MAX_BATCH_SIZE} ({self.max_queue_size} <= "
                f"{self.max_batch_size})",
            )
        return self


class RelationalSourceConfig(RelationalFilters, CaptureSourceConfig):
    """Connection and value handling shared by the relational connectors."""

    database_hostname: str | None = _key(None, DATABASE_HOSTNAME)
    """Database host name or IP address (required)."""
    database_port: Port = _key(..., DATABASE_PORT)
    """Database port; each connector has its own default."""
    database_user: str = _key(..., DATABASE_USER)
    """User the connector logs in as."""
    database_password: SecretStr | None = _key(None, DATABASE_PASSWORD)
    """Password: ``${ENV_VAR}`` or ``database.password.file``; never a literal."""
    time_precision_mode: TimePrecisionMode = _key(TIME_PRECISION_MODE_DEFAULT, TIME_PRECISION_MODE)
    """How temporal values are encoded (``connect`` loses sub-millisecond precision)."""
    decimal_handling_mode: DecimalHandlingMode = _key(
        DECIMAL_HANDLING_MODE_DEFAULT, DECIMAL_HANDLING_MODE
    )
    """DECIMAL/NUMERIC as ``precise`` (Connect Decimal), ``double`` or ``string``."""
    binary_handling_mode: BinaryHandlingMode = _key(
        BINARY_HANDLING_MODE_DEFAULT, BINARY_HANDLING_MODE
    )
    """Binary columns as ``bytes`` (base64 in JSON), ``base64``, ``base64-url-safe`` or ``hex``."""

    def _connection_problem(self) -> tuple[str, str] | None:
        if not self.database_hostname:
            return DATABASE_HOSTNAME, "missing required key"
        return None

    @model_validator(mode="after")
    def _connection(self) -> Self:
        problem = self._connection_problem()
        if problem is not None:
            raise _keyed_error(*problem)
        return self


class _LogicalReplicationConfig(SchemaFilters, RelationalSourceConfig):
    """Slot and publication settings shared by PostgreSQL and YugabyteDB."""

    database_dbname: str = _key(..., DATABASE_DBNAME)
    """Database to capture (slots and publications are per database)."""
    slot_name: str = _key(SLOT_NAME_DEFAULT, SLOT_NAME, pattern=r"^[a-z0-9_]{1,63}$")
    """Logical replication slot; one consumer per slot. Never drop it on the primary."""
    slot_drop_on_stop: bool = _key(SLOT_DROP_ON_STOP_DEFAULT, SLOT_DROP_ON_STOP)
    """Drop the slot on a clean stop (development only: changes are lost while stopped)."""
    publication_name: str = _key(PUBLICATION_NAME_DEFAULT, PUBLICATION_NAME)
    """Publication the slot streams (pgoutput/yboutput)."""
    publication_autocreate_mode: PublicationAutocreateMode = _key(
        PUBLICATION_AUTOCREATE_MODE_DEFAULT, PUBLICATION_AUTOCREATE_MODE
    )
    """``all_tables`` (create ``FOR ALL TABLES``), ``disabled`` (must exist) or ``filtered``
    (``FOR TABLE`` from the include/exclude lists)."""


class PostgresSourceConfig(_LogicalReplicationConfig):
    """PostgreSQL logical decoding (10+)."""

    KIND = SourceType.POSTGRESQL

    connector: Literal["postgresql"] = _key(..., CONNECTOR)
    """Discriminator: ``postgresql``."""
    database_port: Port = _key(PG_PORT_DEFAULT, DATABASE_PORT)
    """PostgreSQL port."""
    plugin_name: PgPluginName = _key(PG_PLUGIN_NAME_DEFAULT, PLUGIN_NAME)
    """Logical decoding output plugin; ``pgoutput`` is built into PostgreSQL 10+."""
    snapshot_mode: PgSnapshotMode = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``always``, ``never``, ``initial_only``, ``exported`` (lock-free) or
    ``when_needed`` (snapshot again when the slot was dropped or invalidated)."""
    hstore_handling_mode: HstoreHandlingMode = _key(
        HSTORE_HANDLING_MODE_DEFAULT, HSTORE_HANDLING_MODE
    )
    """HSTORE as a JSON string (``json``) or a map (``map``)."""
    interval_handling_mode: IntervalHandlingMode = _key(
        INTERVAL_HANDLING_MODE_DEFAULT, INTERVAL_HANDLING_MODE
    )
    """INTERVAL as ISO-8601 text (``string``, the default: exact) or approximate microseconds
    (``numeric``, Debezium's default: a month counts 30.4375 days, lossy)."""
    toasted_value_placeholder: str = _key(
        TOASTED_VALUE_PLACEHOLDER_DEFAULT, TOASTED_VALUE_PLACEHOLDER
    )
    """Stands in for unchanged TOAST values missing from the WAL."""


class YugabyteDbSourceConfig(_LogicalReplicationConfig):
    """YugabyteDB through its PostgreSQL-compatible logical replication (v2024.1.1+)."""

    KIND = SourceType.YUGABYTEDB

    connector: Literal["yugabytedb"] = _key(..., CONNECTOR)
    """Discriminator: ``yugabytedb``."""
    database_port: Port = _key(YB_PORT_DEFAULT, DATABASE_PORT)
    """YSQL port."""
    plugin_name: YbPluginName = _key(YB_PLUGIN_NAME_DEFAULT, PLUGIN_NAME)
    """``yboutput`` (native) or ``pgoutput``; Debezium's documented default (decoderbufs) does
    not work with YugabyteDB, so ours is ``yboutput``."""
    snapshot_mode: YbSnapshotMode = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``never`` or ``initial_only``."""
    slot_lsn_type: SlotLsnType = _key(SLOT_LSN_TYPE_DEFAULT, SLOT_LSN_TYPE)
    """``SEQUENCE`` (monotonic per slot) or ``HYBRID_TIME`` (the commit hybrid time)."""


class MySqlSourceConfig(DatabaseFilters, RelationalSourceConfig):
    """MySQL or MariaDB binlog (ROW format) capture."""

    KIND = SourceType.MYSQL
    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("gtid_source_includes", "gtid_source_excludes"),
    )

    connector: Literal["mysql", "mariadb"] = _key(..., CONNECTOR)
    """Discriminator: ``mysql`` (``mariadb`` selects the same connector)."""
    database_port: Port = _key(MYSQL_PORT_DEFAULT, DATABASE_PORT)
    """MySQL port."""
    database_server_id: Annotated[int, Field(gt=0, lt=2**32)] | None = _key(
        DATABASE_SERVER_ID_DEFAULT, DATABASE_SERVER_ID
    )
    """Replica server id, unique in the replication topology. None: the agent picks one in
    5400-6400 like Debezium; set it explicitly in production."""
    snapshot_mode: MySqlSnapshotMode = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``when_needed``, ``never``, ``schema_only`` or ``schema_only_recovery``."""
    snapshot_locking_mode: SnapshotLockingMode = _key(
        SNAPSHOT_LOCKING_MODE_DEFAULT, SNAPSHOT_LOCKING_MODE
    )
    """``minimal`` (global read lock while reading schemas), ``extended`` or ``none``."""
    gtid_source_includes: RegexList = _key(FILTER_LIST_DEFAULT, GTID_SOURCE_INCLUDES)
    """Regexes of GTID source UUIDs to follow."""
    gtid_source_excludes: RegexList = _key(FILTER_LIST_DEFAULT, GTID_SOURCE_EXCLUDES)
    """Regexes of GTID source UUIDs to ignore."""
    include_schema_changes: bool = _key(INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES)
    """Land DDL as schema-change records."""
    include_query: bool = _key(INCLUDE_QUERY_DEFAULT, INCLUDE_QUERY)
    """Add the SQL statement to ``source.query`` (can expose excluded or masked data)."""
    bigint_unsigned_handling_mode: BigintUnsignedHandlingMode = _key(
        BIGINT_UNSIGNED_HANDLING_MODE_DEFAULT, BIGINT_UNSIGNED_HANDLING_MODE
    )
    """BIGINT UNSIGNED as ``precise`` (Decimal scale 0, the default: exact) or ``long``
    (Debezium's default: values >= 2^63 wrap to negative, lossy)."""
    binlog_buffer_size: NonNegativeInt = _key(BINLOG_BUFFER_SIZE_DEFAULT, BINLOG_BUFFER_SIZE)
    """Look-ahead buffer so rolled-back transactions are not emitted (0 = off)."""
    connect_timeout_ms: PositiveInt = _key(CONNECT_TIMEOUT_MS_DEFAULT, CONNECT_TIMEOUT_MS)
    """Connection timeout."""
    time_precision_mode: TimePrecisionMode = _key(
        MYSQL_TIME_PRECISION_MODE_DEFAULT, TIME_PRECISION_MODE
    )
    """``adaptive_time_microseconds`` (MySQL's default) or ``connect``."""


def _uri_without_password(value: str) -> bool:
    try:
        return urlsplit(value).password is None
    except ValueError:
        return False


class MongoDbSourceConfig(DatabaseFilters, CaptureSourceConfig):
    """MongoDB replica set or sharded cluster (change streams)."""

    KIND = SourceType.MONGODB
    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("collection_include_list", "collection_exclude_list"),
    )
    LITERAL_SECRET_OK = {"mongodb_connection_string": _uri_without_password}

    connector: Literal["mongodb"] = _key(..., CONNECTOR)
    """Discriminator: ``mongodb``."""
    mongodb_connection_string: SecretStr | None = _key(None, MONGODB_CONNECTION_STRING)
    """``mongodb://...`` URI; secret. A URI without a password may be written literally."""
    mongodb_hosts: str | None = _key(None, MONGODB_HOSTS)
    """1.2-style seeds ``rs0/host1:27017,host2:27017``, instead of a connection string."""
    mongodb_user: str | None = _key(None, MONGODB_USER)
    """User for ``mongodb.hosts``."""
    mongodb_password: SecretStr | None = _key(None, MONGODB_PASSWORD)
    """Password for ``mongodb.hosts``: ``${ENV_VAR}`` or ``mongodb.password.file``."""
    collection_include_list: RegexList = _key(
        FILTER_LIST_DEFAULT, COLLECTION_INCLUDE_LIST, COLLECTION_WHITELIST
    )
    """Regexes of ``db.collection`` names to capture."""
    collection_exclude_list: RegexList = _key(
        FILTER_LIST_DEFAULT, COLLECTION_EXCLUDE_LIST, COLLECTION_BLACKLIST
    )
    """Regexes of ``db.collection`` names not to capture."""
    field_exclude_list: NameList = _key(FILTER_LIST_DEFAULT, FIELD_EXCLUDE_LIST, FIELD_BLACKLIST)
    """Fully-qualified fields to drop, ``db.collection.field.nested``."""
    capture_mode: MongoCaptureMode = _key(CAPTURE_MODE_DEFAULT, CAPTURE_MODE)
    """Change streams (with full documents and/or pre-images) or the 1.2-style ``oplog``."""
    snapshot_mode: MongoSnapshotMode = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial`` or ``never``."""

    @model_validator(mode="after")
    def _one_way_to_connect(self) -> Self:
        if (self.mongodb_connection_string is None) == (self.mongodb_hosts is None):
            raise _keyed_error(
                MONGODB_CONNECTION_STRING,
                f"set exactly one of '{MONGODB_CONNECTION_STRING}' and '{MONGODB_HOSTS}'",
            )
        return self


class SqlServerSourceConfig(SchemaFilters, RelationalSourceConfig):
    """SQL Server CDC change tables."""

    KIND = SourceType.SQLSERVER

    connector: Literal["sqlserver"] = _key(..., CONNECTOR)
    """Discriminator: ``sqlserver``."""
    database_port: Port = _key(SQLSERVER_PORT_DEFAULT, DATABASE_PORT)
    """SQL Server port."""
    database_names: NameList = _key(..., DATABASE_NAMES, DATABASE_DBNAME)
    """Databases to capture (1.2: a single ``database.dbname``)."""
    snapshot_mode: SqlServerSnapshotMode = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``initial_only`` or ``schema_only``."""
    snapshot_isolation_mode: SqlServerIsolationMode = _key(
        SNAPSHOT_ISOLATION_MODE_DEFAULT, SNAPSHOT_ISOLATION_MODE
    )
    """Only ``snapshot`` and ``exclusive`` make snapshot plus stream one linear history."""
    source_timestamp_mode: SourceTimestampMode = _key(
        SOURCE_TIMESTAMP_MODE_DEFAULT, SOURCE_TIMESTAMP_MODE
    )
    """``source.ts_ms`` from the ``commit`` time or the ``processing`` time."""
    include_schema_changes: bool = _key(INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES)
    """Land DDL as schema-change records."""

    @field_validator("database_names")
    @classmethod
    def _some_database(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        if not value:
            raise ValueError("at least one database is required")
        return value


class OracleSourceConfig(SchemaFilters, RelationalSourceConfig):
    """Oracle through LogMiner."""

    KIND = SourceType.ORACLE

    connector: Literal["oracle"] = _key(..., CONNECTOR)
    """Discriminator: ``oracle``."""
    database_port: Port = _key(ORACLE_PORT_DEFAULT, DATABASE_PORT)
    """Listener port."""
    database_dbname: str = _key(..., DATABASE_DBNAME)
    """Database (the CDB name in a multitenant database)."""
    database_pdb_name: str | None = _key(None, DATABASE_PDB_NAME)
    """Pluggable database to capture, in a CDB; filters then read ``pdb.schema.table``."""
    database_url: str | None = _key(None, DATABASE_URL)
    """Raw JDBC URL or TNS descriptor (RAC); replaces hostname and port."""
    database_connection_adapter: OracleAdapter = _key(
        DATABASE_CONNECTION_ADAPTER_DEFAULT, DATABASE_CONNECTION_ADAPTER
    )
    """Only ``logminer`` is implemented by our agent."""
    log_mining_strategy: LogMiningStrategy = _key(LOG_MINING_STRATEGY_DEFAULT, LOG_MINING_STRATEGY)
    """``redo_log_catalog`` (follows DDL; rebuilds the dictionary each log switch),
    ``online_catalog`` (faster; cannot follow DDL) or ``hybrid``."""
    log_mining_query_filter_mode: LogMiningQueryFilterMode = _key(
        LOG_MINING_QUERY_FILTER_MODE_DEFAULT, LOG_MINING_QUERY_FILTER_MODE
    )
    """Push filters into the LogMiner query: ``none``, ``in`` (no regexes!) or ``regex``."""
    lob_enabled: bool = _key(LOB_ENABLED_DEFAULT, LOB_ENABLED)
    """Capture CLOB/NCLOB/BLOB values."""
    snapshot_mode: OracleSnapshotMode = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``always``, ``initial``, ``initial_only``, ``schema_only`` or ``schema_only_recovery``."""
    include_schema_changes: bool = _key(INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES)
    """Land DDL as schema-change records."""

    def _connection_problem(self) -> tuple[str, str] | None:
        if not self.database_hostname and not self.database_url:
            return DATABASE_HOSTNAME, f"missing required key (or set '{DATABASE_URL}')"
        return None


class Db2SourceConfig(SchemaFilters, RelationalSourceConfig):
    """Db2 through ASN capture tables."""

    KIND = SourceType.DB2

    connector: Literal["db2"] = _key(..., CONNECTOR)
    """Discriminator: ``db2``."""
    database_port: Port = _key(DB2_PORT_DEFAULT, DATABASE_PORT)
    """Db2 port."""
    database_dbname: str = _key(..., DATABASE_DBNAME)
    """Database to capture."""
    snapshot_mode: Db2SnapshotMode = _key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial`` or ``schema_only``."""
    snapshot_isolation_mode: Db2IsolationMode = _key(
        SNAPSHOT_ISOLATION_MODE_DEFAULT, SNAPSHOT_ISOLATION_MODE
    )
    """Only ``exclusive`` is fully consistent."""
    include_schema_changes: bool = _key(INCLUDE_SCHEMA_CHANGES_DEFAULT, INCLUDE_SCHEMA_CHANGES)
    """Land DDL as schema-change records."""


SOURCE_CONFIG_MODELS: Mapping[SourceType, type[SourceConfigBase]] = {
    SourceType.DEBEZIUM_JSON: DebeziumJsonSourceConfig,
    SourceType.POSTGRESQL: PostgresSourceConfig,
    SourceType.MYSQL: MySqlSourceConfig,
    SourceType.MONGODB: MongoDbSourceConfig,
    SourceType.SQLSERVER: SqlServerSourceConfig,
    SourceType.ORACLE: OracleSourceConfig,
    SourceType.DB2: Db2SourceConfig,
    SourceType.YUGABYTEDB: YugabyteDbSourceConfig,
}
"""The source model of each kind (explicit, no metaclass registration)."""

_CONNECTOR_TAGS: Mapping[str, type[SourceConfigBase]] = {
    **{kind.value: model for kind, model in SOURCE_CONFIG_MODELS.items()},
    "mariadb": MySqlSourceConfig,
}

SourceConfig = Annotated[
    DebeziumJsonSourceConfig
    | PostgresSourceConfig
    | MySqlSourceConfig
    | MongoDbSourceConfig
    | SqlServerSourceConfig
    | OracleSourceConfig
    | Db2SourceConfig
    | YugabyteDbSourceConfig,
    Field(discriminator="connector"),
]
"""One configured source; the ``connector`` key picks the model."""


# --- the whole pipeline ---------------------------------------------------------------------
class PipelineConfig(ConfigModel):
    """The validated configuration of one pipeline: lake, Spark, bronze, logging, sources."""

    # Defaults are validated (not built by a factory) so that they see the validation context:
    # a default lake root is relative to the config file too.
    lake: LakeConfig = Field(default_factory=dict, validate_default=True)
    """Where the lake lives."""
    spark: SparkConfig = Field(default_factory=dict, validate_default=True)
    """How to build the SparkSession."""
    bronze: BronzeConfig = Field(default_factory=dict, validate_default=True)
    """How records are landed in bronze."""
    silver: SilverConfig = Field(default_factory=dict, validate_default=True)
    """How silver applies bronze."""
    gold: GoldConfig = Field(default_factory=dict, validate_default=True)
    """Gold views and derived tables."""
    quality: QualityConfig = Field(default_factory=dict, validate_default=True)
    """Data-quality checks."""
    logging: LoggingConfig = Field(default_factory=dict, validate_default=True)
    """Log level."""
    sources: tuple[SourceConfig, ...] = ()
    """Configured sources, in file order."""

    _config_path: Path | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        if isinstance(context, Mapping) and context.get(_CTX_CONFIG_FILE) is not None:
            self._config_path = Path(context[_CTX_CONFIG_FILE])

    @property
    def config_path(self) -> Path | None:
        """The file this config was loaded from (None when built in code)."""
        return self._config_path

    @field_validator("sources")
    @classmethod
    def _unique_names(cls, sources: tuple[SourceConfigBase, ...]) -> tuple[SourceConfigBase, ...]:
        seen: set[str] = set()
        for source in sources:
            if source.name in seen:
                raise ValueError(f"duplicate source name '{source.name}'; names must be unique")
            seen.add(source.name)
        return sources

    @property
    def source_names(self) -> tuple[str, ...]:
        """Names of the configured sources, in file order."""
        return tuple(s.name for s in self.sources)

    def source(self, name: str) -> SourceConfig:
        """Return the source called ``name``.

        Raises:
            ConfigError: No source has that name; the message suggests the closest one.
        """
        for source in self.sources:
            if source.name == name:
                return source
        hint = _did_you_mean(name, self.source_names)
        known = ", ".join(self.source_names) or "none"
        raise ConfigError(
            f"unknown source '{name}'" + (f"; {hint}" if hint else "") + f" (configured: {known})",
            file=str(self._config_path) if self._config_path else None,
            key_path=SOURCES,
        )


_SECTION_MODELS: Mapping[str, type[ConfigModel]] = {
    LAKE: LakeConfig,
    SPARK: SparkConfig,
    BRONZE: BronzeConfig,
    SILVER: SilverConfig,
    GOLD: GoldConfig,
    QUALITY: QualityConfig,
    LOGGING: LoggingConfig,
}


# --- loading --------------------------------------------------------------------------------
def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    env: Mapping[str, str] | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> PipelineConfig:
    """Load, layer and validate the pipeline configuration.

    Args:
        path: The YAML file. Default: ``$MEDALLION_CONFIG``, else ``./conf/pipeline.yaml``.
        env: Environment for ``${VAR}`` interpolation, ``MEDALLION__*`` layering and
            ``$MEDALLION_CONFIG``. Default: ``os.environ``.
        overrides: Dotted key paths to values, applied last (see the module docstring).

    Returns:
        The frozen, validated configuration.

    Raises:
        ConfigError: The file is missing or not valid YAML, a variable is missing, or a value is
            invalid; the error names the file, the key path and the reason.
    """
    environ: Mapping[str, str] = os.environ if env is None else env
    config_path = (
        Path(path) if path is not None else Path(environ.get(CONFIG_ENV_VAR) or DEFAULT_CONFIG_PATH)
    )
    file = os.fspath(config_path)
    raw = _read_yaml(config_path)
    _apply_environment(raw, environ, file)
    if overrides:
        for dotted, value in overrides.items():
            _apply_override(raw, dotted, value, file)
    # Interpolate last, so a ${VAR} in a key that a later layer replaced need not be set.
    raw = _interpolate(raw, environ, file)
    context = {
        _CTX_BASE_DIR: config_path.resolve().parent,
        _CTX_CONFIG_FILE: config_path,
        _CTX_REJECT_LITERAL_SECRETS: True,
    }
    try:
        config = PipelineConfig.model_validate(raw, context=context)
    except ValidationError as exc:
        raise _config_error(exc, file) from exc
    logger.info("loaded config %s: %d source(s) %s", file, len(config.sources), config.source_names)
    return config


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys instead of silently keeping the last one."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.Node) -> dict[Any, Any]:
    assert isinstance(node, yaml.MappingNode)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue
        key = loader.construct_object(key_node, deep=True)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while constructing a mapping",
                node.start_mark,
                f"found duplicate key {key!r}",
                key_node.start_mark,
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=True)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _read_yaml(path: Path) -> dict[str, Any]:
    file = os.fspath(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(
            f"config file not found (cwd {Path.cwd()}; set ${CONFIG_ENV_VAR} or pass a path)",
            file=file,
        ) from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file: {exc}", file=file) from exc
    try:
        data = yaml.load(text, Loader=_StrictLoader)
    except yaml.YAMLError as exc:
        raise ConfigError(f"invalid YAML: {exc}", file=file) from exc
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(
            f"expected a mapping at the top level, got {type(data).__name__}", file=file
        )
    return data


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


_INTERPOLATION = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_VARIABLE = re.compile(r"(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?::-(?P<default>.*))?", re.DOTALL)


def _interpolate(raw: Any, environ: Mapping[str, str], file: str) -> Any:
    """Replace ``${VAR}`` / ``${VAR:-default}`` in the string values that came from the file."""
    problems: list[tuple[str, str]] = []

    def walk(value: Any, path: str) -> Any:
        if isinstance(value, dict):
            return {k: walk(v, _join(path, str(k))) for k, v in value.items()}
        if isinstance(value, list):
            return [walk(v, _join(path, i)) for i, v in enumerate(value)]
        if isinstance(value, str) and "$" in value and not isinstance(value, _Sourced):
            return substitute(value, path)
        return value

    def substitute(text: str, path: str) -> str:
        names: list[str] = []
        defaulted: list[str] = []

        def replace(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            body = match.group(1)
            var = _VARIABLE.fullmatch(body) if body is not None else None
            if var is None:
                problems.append((path, f"malformed reference '{match.group(0)}' (use ${{NAME}})"))
                return ""
            names.append(var["name"])
            if var["name"] in environ:
                return environ[var["name"]]
            if var["default"] is not None:
                defaulted.append(var["name"])
                return var["default"]
            problems.append((path, f"environment variable '{var['name']}' is not set"))
            return ""

        result = _INTERPOLATION.sub(replace, text)
        if defaulted:
            return _Defaulted(result, "default of ${" + ", ".join(defaulted) + "}")
        if names:
            return _Sourced(result, "environment variable " + ", ".join(names))
        return result

    out = walk(raw, "")
    if problems:
        raise _problems_error(problems, file)
    return out


def _spelling_for(model: type[ConfigModel], env_key: str) -> str | None:
    return _key_index(model).by_env.get(env_key)


def _set_key(target: dict[str, Any], model: type[ConfigModel], key: str, value: Any) -> None:
    """Set ``key`` in a raw section, dropping other spellings of the same field."""
    index = _key_index(model)
    field = index.spellings[key]
    for other in [k for k in target if index.spellings.get(str(k)) == field]:
        del target[other]
    target[key] = value


def _raw_section(raw: dict[str, Any], section: str, origin: str, file: str) -> dict[str, Any]:
    current = raw.setdefault(section, {})
    if current is None:
        current = raw[section] = {}
    if not isinstance(current, dict):
        raise ConfigError(
            f"cannot apply {origin}: '{section}' is not a mapping", file=file, key_path=section
        )
    return current


def _raw_source(
    raw: dict[str, Any], selector: str, origin: str, file: str
) -> tuple[dict[str, Any], type[ConfigModel], str]:
    """Find a source in the raw tree by name (case-insensitive) or ``[index]``."""
    sources = raw.get(SOURCES)
    entries = [s for s in sources if isinstance(s, dict)] if isinstance(sources, list) else []
    entry: dict[str, Any] | None = None
    path = SOURCES
    index_match = re.fullmatch(r"\[(\d+)\]", selector)
    if index_match and isinstance(sources, list) and int(index_match[1]) < len(sources):
        candidate = sources[int(index_match[1])]
        entry = candidate if isinstance(candidate, dict) else None
        path = f"{SOURCES}[{index_match[1]}]"
    else:
        for i, candidate in enumerate(sources if isinstance(sources, list) else []):
            if (
                isinstance(candidate, dict)
                and str(candidate.get(NAME, "")).lower() == selector.lower()
            ):
                entry, path = candidate, f"{SOURCES}[{i}]"
    if entry is None:
        names = [str(s.get(NAME)) for s in entries]
        hint = _did_you_mean(selector.lower(), names)
        raise ConfigError(
            f"{origin} names unknown source '{selector}'"
            + (f"; {hint}" if hint else "")
            + f" (configured: {', '.join(names) or 'none'})",
            file=file,
            key_path=SOURCES,
        )
    model = _CONNECTOR_TAGS.get(str(entry.get(CONNECTOR, "")).lower())
    if model is None:
        raise ConfigError(
            f"cannot apply {origin}: the source has no valid 'connector'",
            file=file,
            key_path=_join(path, CONNECTOR),
        )
    return entry, model, path


def _apply_environment(raw: dict[str, Any], environ: Mapping[str, str], file: str) -> None:
    """Layer ``MEDALLION__<SECTION>__<KEY>`` variables over the raw tree."""
    for var in sorted(v for v in environ if v.startswith(ENV_PREFIX)):
        value = _Sourced(environ[var], f"environment variable {var}")
        parts = var[len(ENV_PREFIX) :].split(ENV_SEPARATOR)
        section = parts[0].lower()
        if section == SOURCES and len(parts) >= 3:
            target, model, path = _raw_source(raw, parts[1], f"environment variable {var}", file)
            rest = parts[2:]
        elif section in _SECTION_MODELS and len(parts) >= 2:
            target = _raw_section(raw, section, f"environment variable {var}", file)
            model, path, rest = _SECTION_MODELS[section], section, parts[1:]
        else:
            sections = [s.upper() for s in (*_SECTION_MODELS, SOURCES)]
            hint = _did_you_mean(parts[0].upper(), sections)
            raise ConfigError(
                f"environment variable {var}: expected {ENV_PREFIX}<SECTION>__<KEY> with SECTION "
                f"one of {', '.join(sections)} (sources: SOURCES__<NAME>__<KEY>)"
                + (f"; {hint}" if hint else ""),
                file=file,
            )
        _set_env_key(target, model, rest, value, var, path, file)


def _set_env_key(
    target: dict[str, Any],
    model: type[ConfigModel],
    parts: list[str],
    value: _Sourced,
    var: str,
    path: str,
    file: str,
) -> None:
    index = _key_index(model)
    key = _spelling_for(model, parts[0].upper())
    field = index.spellings.get(key) if key is not None else None
    if key is None or field is None:
        hint = _did_you_mean(parts[0].upper(), [_env_form(k) for k in index.suggestions])
        raise ConfigError(
            f"environment variable {var} names no key of {path}" + (f"; {hint}" if hint else ""),
            file=file,
            key_path=path,
        )
    if field in index.mappings:
        if len(parts) != 2:
            raise ConfigError(
                f"environment variable {var}: set one entry, {ENV_PREFIX}...__{parts[0]}__<KEY>",
                file=file,
                key_path=_join(path, key),
            )
        mapping = target.get(key)
        if not isinstance(mapping, dict):
            mapping = {}
            _set_key(target, model, key, mapping)
        existing = {_env_form(str(k)): str(k) for k in mapping}
        entry = existing.get(_env_form(parts[1]), parts[1].lower().replace("_", "."))
        mapping[entry] = value
        return
    if len(parts) != 1:
        raise ConfigError(
            f"environment variable {var}: '{key}' has no sub-keys",
            file=file,
            key_path=_join(path, key),
        )
    _set_key(target, model, key, value)


def _merge(base: dict[str, Any], extra: Mapping[str, Any]) -> None:
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = dict(value) if isinstance(value, Mapping) else value


def _mark(value: Any, origin: str) -> Any:
    """Wrap the strings of an override (nested too) so they count as not from the file."""
    if isinstance(value, _Sourced):
        return value
    if isinstance(value, str):
        return _Sourced(value, origin)
    if isinstance(value, Mapping):
        return {k: _mark(v, origin) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mark(v, origin) for v in value]
    return value


def _apply_override(raw: dict[str, Any], dotted: str, value: Any, file: str) -> None:
    """Apply one explicit override (``spark.master``, ``sources.<name>.<key>``, ...)."""
    origin = f"override '{dotted}'"
    value = _mark(value, origin)
    if dotted == SOURCES:
        raw[SOURCES] = value
        return
    if dotted in _SECTION_MODELS and isinstance(value, Mapping):
        _merge(_raw_section(raw, dotted, origin, file), value)
        return
    match = re.fullmatch(r"(?P<section>[a-z_]+)(?P<index>\[\d+\])?\.(?P<rest>.+)", dotted)
    if match and match["section"] == SOURCES:
        if match["index"]:
            selector, rest = match["index"], match["rest"]
        else:
            selector, _, rest = match["rest"].partition(".")
        target, model, path = _raw_source(raw, selector, origin, file)
    elif match and match["section"] in _SECTION_MODELS and not match["index"]:
        target = _raw_section(raw, match["section"], origin, file)
        model, path, rest = _SECTION_MODELS[match["section"]], match["section"], match["rest"]
    else:
        sections = [*_SECTION_MODELS, SOURCES]
        hint = _did_you_mean(dotted.split(".")[0], sections)
        raise ConfigError(
            f"override '{dotted}' names no section (expected one of {', '.join(sections)})"
            + (f"; {hint}" if hint else ""),
            file=file,
            key_path=dotted,
        )
    index = _key_index(model)
    if rest in index.spellings or (
        issubclass(model, RelationalFilters) and _is_column_rule_key(rest)
    ):
        if rest in index.spellings:
            _set_key(target, model, rest, value)
        else:
            target[rest] = value
        return
    for key, field in index.spellings.items():
        if field in index.mappings and rest.startswith(key + "."):
            mapping = target.get(key)
            if not isinstance(mapping, dict):
                mapping = {}
                _set_key(target, model, key, mapping)
            mapping[rest[len(key) + 1 :]] = value
            return
    hint = _did_you_mean(rest, index.suggestions)
    raise ConfigError(
        f"override '{dotted}': unknown key '{rest}' in {path}" + (f"; {hint}" if hint else ""),
        file=file,
        key_path=_join(path, rest),
    )


# --- turning validation errors into one ConfigError -----------------------------------------
def _loc_path(loc: tuple[str | int, ...]) -> tuple[str, str | None]:
    """Key path of a pydantic ``loc`` and the connector tag it passes through (if any)."""
    path = ""
    connector = None
    for i, part in enumerate(loc):
        if (
            isinstance(part, str)
            and i >= 2
            and loc[i - 2] == SOURCES
            and isinstance(loc[i - 1], int)
            and part in _CONNECTOR_TAGS
        ):
            connector = part
            continue
        path = _join(path, part)
    return path, connector


def _origin_note(value: Any) -> str:
    return f" (from {value.origin})" if isinstance(value, _Sourced) else ""


def _problems(exc: ValidationError) -> Iterator[tuple[str, str]]:
    for err in exc.errors(include_url=False):
        path, connector = _loc_path(tuple(err["loc"]))
        kind = err["type"]
        ctx: dict[str, Any] = dict(err.get("ctx") or {})
        value = err.get("input")
        if kind == "unknown_key":
            where = path or "the top level"
            if connector:
                where += f" (connector {connector})"
            key, hint = str(ctx["key"]), str(ctx["hint"])
            yield (
                _join(path, key),
                f"unknown key '{key}' in {where}" + (f"; {hint}" if hint else ""),
            )
        elif kind == "config_key":
            yield _join(path, ctx["key"]), str(ctx["reason"])
        elif kind == "union_tag_invalid":
            tags = ", ".join(sorted(_CONNECTOR_TAGS))
            hint = _did_you_mean(str(ctx.get("tag")), list(_CONNECTOR_TAGS))
            yield (
                _join(path, CONNECTOR),
                (
                    f"unknown connector '{ctx.get('tag')}'"
                    + (f"; {hint}" if hint else "")
                    + f" (expected one of {tags})"
                ),
            )
        elif kind == "union_tag_not_found":
            tags = ", ".join(sorted(_CONNECTOR_TAGS))
            yield _join(path, CONNECTOR), f"missing required key '{CONNECTOR}' (one of {tags})"
        elif kind == "missing":
            yield path, "missing required key"
        elif kind == "literal_error":
            expected = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
            hint = _did_you_mean(str(value), expected) if isinstance(value, str) else ""
            yield (
                path,
                (
                    f"{value!r} is not one of {', '.join(expected)}"
                    + (f"; {hint}" if hint else "")
                    + _origin_note(value)
                ),
            )
        else:
            message = str(err["msg"]).removeprefix("Value error, ")
            yield path, message + _origin_note(value)


def _problems_error(problems: Sequence[tuple[str, str]], file: str) -> ConfigError:
    if len(problems) == 1:
        path, message = problems[0]
        return ConfigError(message, file=file, key_path=path or None)
    shown = problems[:MAX_REPORTED_PROBLEMS]
    lines = [f"  - {path or '<top level>'}: {message}" for path, message in shown]
    if len(problems) > len(shown):
        lines.append(f"  ... and {len(problems) - len(shown)} more")
    return ConfigError(
        f"{len(problems)} problems:\n" + "\n".join(lines),
        file=file,
        key_path=problems[0][0] or None,
    )


def _config_error(exc: ValidationError, file: str) -> ConfigError:
    problems = list(dict.fromkeys(_problems(exc)))
    return _problems_error(problems, file)
