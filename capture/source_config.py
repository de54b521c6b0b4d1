"""What the config models of every connector share: the source base, filters, column rules.

A connector's own model (``capture/<connector>/config.py``) derives from these classes and adds
its Debezium property names, defaults and validation; :mod:`capture.registry` lists the models
and :mod:`pipeline.config` composes them into ``sources[]``. Keys are Debezium's property names,
each a named constant beside its default.

This module imports no driver.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, Self, get_args

from pydantic import BeforeValidator, Field, SecretStr, field_validator, model_validator
from pydantic_core import PydanticCustomError

from pipeline.config_model import (
    ConfigModel,
    KeyIndex,
    NonNegativeInt,
    Port,
    PositiveInt,
    RegexList,
    comma_items,
    compile_regexes,
    config_key,
    keyed_error,
    regex_items,
    split_commas,
)

__all__ = [
    "SourceType",
    "SourceConfigBase",
    "CaptureSourceConfig",
    "RelationalSourceConfig",
    "ColumnRules",
    "RelationalFilters",
    "SchemaFilters",
    "DatabaseFilters",
    "ColumnRule",
    "ColumnRuleKind",
    "HASH_ALGORITHMS",
]

# --- keys of every source -------------------------------------------------------------------
NAME = "name"
CONNECTOR = "connector"
SKIPPED_OPERATIONS = "skipped.operations"
SKIPPED_OPERATIONS_DEFAULT: tuple[Operation, ...] = ("t",)

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
MAX_BATCH_SIZE_DEFAULT = None  # bronze.max.batch.size (Debezium's 2048 would mean 10x the commits)
POLL_INTERVAL_MS = "poll.interval.ms"
POLL_INTERVAL_MS_DEFAULT = 500
ERRORS_MAX_RETRIES = "errors.max.retries"
ERRORS_MAX_RETRIES_DEFAULT = 5
ERRORS_RETRY_DELAY_INITIAL_MS = "errors.retry.delay.initial.ms"
ERRORS_RETRY_DELAY_INITIAL_MS_DEFAULT = 300
ERRORS_RETRY_DELAY_MAX_MS = "errors.retry.delay.max.ms"
ERRORS_RETRY_DELAY_MAX_MS_DEFAULT = 10_000
MAX_QUEUE_SIZE = "max.queue.size"  # rejected: see CaptureSourceConfig.UNSUPPORTED_KEYS
EVENT_PROCESSING_FAILURE_HANDLING_MODE = "event.processing.failure.handling.mode"  # rejected

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
SNAPSHOT_ISOLATION_MODE = "snapshot.isolation.mode"
SNAPSHOT_ISOLATION_MODE_DEFAULT = "repeatable_read"

# --- enumerated values ----------------------------------------------------------------------
Operation = Literal["c", "u", "d", "t"]
"""Debezium op codes ``skipped.operations`` may name (``none`` means an empty list)."""
TimePrecisionMode = Literal["adaptive", "adaptive_time_microseconds", "connect"]
DecimalHandlingMode = Literal["precise", "double", "string"]
BinaryHandlingMode = Literal["bytes", "base64", "base64-url-safe", "hex"]


class SourceType(StrEnum):
    """The kinds of source, one per connector; the value is the YAML ``connector``."""

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
    KAFKA = "kafka"
    """Debezium change events read from Kafka topics."""


def _skipped_operations(value: Any) -> Any:
    items = comma_items(value)
    if isinstance(items, tuple) and any(isinstance(i, str) and i.lower() == "none" for i in items):
        if len(items) > 1:
            raise ValueError("'none' cannot be combined with other operations")
        return ()
    return items


OperationList = Annotated[tuple[Operation, ...], BeforeValidator(_skipped_operations)]
SourceName = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]


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
        columns = regex_items(value)
        if not isinstance(columns, tuple) or not all(isinstance(c, str) for c in columns):
            raise keyed_error(key, "expected a comma-separated list of column regexes")
        if not columns:
            raise keyed_error(key, "no column regexes given")
        try:
            compile_regexes(columns)
            rule: dict[str, Any] = {"key": key, "kind": kind, "columns": columns}
            if kind in (ColumnRuleKind.HASH, ColumnRuleKind.HASH_V2):
                _hashlib_name(match["alg"])
                rule.update(algorithm=match["alg"], salt=match["salt"])
            else:
                rule["length"] = int(match["n"])
                if kind is ColumnRuleKind.TRUNCATE and rule["length"] == 0:
                    raise ValueError("truncation length must be positive")
        except ValueError as exc:
            raise keyed_error(key, str(exc)) from exc
        return rule
    raise keyed_error(key, "not a column rule key")  # pragma: no cover - guarded by caller


def _is_column_rule_key(key: str) -> bool:
    return any(p.fullmatch(key) for _, p in _COLUMN_RULE_PATTERNS)


def _check_message_key_columns(value: str | None) -> str | None:
    if value is None:
        return None
    for entry in value.split(";"):
        table, sep, columns = entry.strip().rpartition(":")
        if not entry.strip():
            continue
        if not sep or not table.strip() or not split_commas(columns):
            raise ValueError(
                f"expected '<table regex>:<column>,...;...' (e.g. 'inventory.orders:pk1,pk2'), "
                f"got {entry.strip()!r}"
            )
        compile_regexes((table.strip(),))
    return value


# --- sources --------------------------------------------------------------------------------
class SourceConfigBase(ConfigModel):
    """What every source has: a name and a connector kind."""

    KIND: ClassVar[SourceType]
    """The source kind this model configures."""

    name: SourceName = config_key(..., NAME)
    """Unique name of the source, ``[a-z][a-z0-9_]*``; bronze's ``source`` partition value."""
    connector: str = config_key(..., CONNECTOR)
    """The connector kind; each source model narrows it to its own value(s)."""

    @property
    def kind(self) -> SourceType:
        """The kind of source (and of capture agent)."""
        return self.KIND

    @classmethod
    def connector_tags(cls) -> tuple[str, ...]:
        """The ``connector`` values that select this model (its ``Literal``, e.g. ``mysql`` and
        ``mariadb``), so the tags are declared once, on the model."""
        return tuple(str(tag) for tag in get_args(cls.model_fields["connector"].annotation))

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
    def _hint_for(cls, key: str, index: KeyIndex) -> str:
        # A mistyped rule key is closer to the four patterns than to any single key.
        if key.startswith(("column.mask", "column.truncate")):
            return (
                f"expected {COLUMN_MASK_HASH}, {COLUMN_MASK_HASH_V2}, {COLUMN_MASK_WITH_CHARS} "
                f"or {COLUMN_TRUNCATE_TO_CHARS}"
            )
        return super()._hint_for(key, index)

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

    table_include_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, TABLE_INCLUDE_LIST, TABLE_WHITELIST
    )
    """Regexes of fully-qualified tables to capture (``schema.table`` or ``db.table``)."""
    table_exclude_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, TABLE_EXCLUDE_LIST, TABLE_BLACKLIST
    )
    """Regexes of fully-qualified tables not to capture."""
    column_include_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, COLUMN_INCLUDE_LIST, COLUMN_WHITELIST
    )
    """Regexes of fully-qualified columns to keep in row images (key columns always stay)."""
    column_exclude_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, COLUMN_EXCLUDE_LIST, COLUMN_BLACKLIST
    )
    """Regexes of fully-qualified columns to drop from row images."""
    message_key_columns: str | None = config_key(MESSAGE_KEY_COLUMNS_DEFAULT, MESSAGE_KEY_COLUMNS)
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

    schema_include_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, SCHEMA_INCLUDE_LIST, SCHEMA_WHITELIST
    )
    """Regexes of schemas to capture (default: all non-system schemas)."""
    schema_exclude_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, SCHEMA_EXCLUDE_LIST, SCHEMA_BLACKLIST
    )
    """Regexes of schemas not to capture."""


class DatabaseFilters(ConfigModel):
    """Database selection (MySQL/MariaDB, MongoDB)."""

    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("database_include_list", "database_exclude_list"),
    )

    database_include_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, DATABASE_INCLUDE_LIST, DATABASE_WHITELIST
    )
    """Regexes of databases to capture (default: all)."""
    database_exclude_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, DATABASE_EXCLUDE_LIST, DATABASE_BLACKLIST
    )
    """Regexes of databases not to capture."""


class CaptureSourceConfig(SourceConfigBase):
    """Debezium engine properties shared by the database connectors."""

    UNSUPPORTED_KEYS: ClassVar[Mapping[str, str]] = {
        MAX_QUEUE_SIZE: (
            "the agent reads and commits in one thread, with no queue between them; bound a "
            f"batch with '{MAX_BATCH_SIZE}'"
        ),
        EVENT_PROCESSING_FAILURE_HANDLING_MODE: (
            "an event that cannot be processed is always logged and quarantined with its reason "
            "and position (bronze/quarantine); the agent neither stops nor drops it"
        ),
    }

    skipped_operations: OperationList = config_key(SKIPPED_OPERATIONS_DEFAULT, SKIPPED_OPERATIONS)
    """Op codes not landed (``c``, ``u``, ``d``, ``t``; ``none`` for none). Default ``t``."""

    topic_prefix: Annotated[str, Field(pattern=r"^[A-Za-z0-9._-]+$")] | None = config_key(
        TOPIC_PREFIX_DEFAULT, TOPIC_PREFIX, DATABASE_SERVER_NAME
    )
    """Debezium logical server name (``source.name``, topic prefix); default: the source name.
    Never change it once data was captured. 1.2 name: ``database.server.name``."""
    snapshot_mode: str = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """When to snapshot; the allowed values depend on the connector."""
    tombstones_on_delete: bool = config_key(TOMBSTONES_ON_DELETE_DEFAULT, TOMBSTONES_ON_DELETE)
    """Emit a tombstone (same key, null value) after each delete."""
    provide_transaction_metadata: bool = config_key(
        PROVIDE_TRANSACTION_METADATA_DEFAULT, PROVIDE_TRANSACTION_METADATA
    )
    """Emit BEGIN/END transaction records and the ``transaction`` block on data events."""
    heartbeat_interval_ms: NonNegativeInt = config_key(
        HEARTBEAT_INTERVAL_MS_DEFAULT, HEARTBEAT_INTERVAL_MS
    )
    """Heartbeat period (0 = off); heartbeats move the stored position while tables are idle."""
    heartbeat_action_query: str | None = config_key(
        HEARTBEAT_ACTION_QUERY_DEFAULT, HEARTBEAT_ACTION_QUERY
    )
    """DML run on each heartbeat so quiet databases still produce log (keeps WAL from growing)."""
    max_batch_size: PositiveInt | None = config_key(MAX_BATCH_SIZE_DEFAULT, MAX_BATCH_SIZE)
    """Records per bronze commit for this source, at most (a batch still ends early on a
    transaction boundary); unset: ``bronze.max.batch.size``."""
    poll_interval_ms: PositiveInt = config_key(POLL_INTERVAL_MS_DEFAULT, POLL_INTERVAL_MS)
    """Wait between reads when a following agent (``medallion capture --follow``) found
    nothing new."""
    errors_max_retries: Annotated[int, Field(ge=-1)] = config_key(
        ERRORS_MAX_RETRIES_DEFAULT, ERRORS_MAX_RETRIES
    )
    """Retries of a retryable error (lost connection, server restarting) before the agent
    gives up with a retryable exit: -1 = no limit, 0 = none. A terminal error (wrong password,
    missing database or privilege) is never retried. Debezium's key; its default is -1."""
    errors_retry_delay_initial_ms: PositiveInt = config_key(
        ERRORS_RETRY_DELAY_INITIAL_MS_DEFAULT, ERRORS_RETRY_DELAY_INITIAL_MS
    )
    """First wait before a retry; doubled per retry up to ``errors.retry.delay.max.ms``, each
    wait jittered (50-100 %) so agents that lost one server do not return in lockstep."""
    errors_retry_delay_max_ms: PositiveInt = config_key(
        ERRORS_RETRY_DELAY_MAX_MS_DEFAULT, ERRORS_RETRY_DELAY_MAX_MS
    )
    """Longest wait between two retries."""

    @property
    def logical_name(self) -> str:
        """Debezium's logical server name: ``topic.prefix`` when set, else the source name."""
        return self.topic_prefix or self.name


class RelationalSourceConfig(RelationalFilters, CaptureSourceConfig):
    """Connection and value handling shared by the relational connectors."""

    database_hostname: str | None = config_key(None, DATABASE_HOSTNAME)
    """Database host name or IP address (required)."""
    database_port: Port = config_key(..., DATABASE_PORT)
    """Database port; each connector has its own default."""
    database_user: str = config_key(..., DATABASE_USER)
    """User the connector logs in as."""
    database_password: SecretStr | None = config_key(None, DATABASE_PASSWORD)
    """Password: ``${ENV_VAR}`` or ``database.password.file``; never a literal."""
    time_precision_mode: TimePrecisionMode = config_key(
        TIME_PRECISION_MODE_DEFAULT, TIME_PRECISION_MODE
    )
    """How temporal values are encoded (``connect`` loses sub-millisecond precision)."""
    decimal_handling_mode: DecimalHandlingMode = config_key(
        DECIMAL_HANDLING_MODE_DEFAULT, DECIMAL_HANDLING_MODE
    )
    """DECIMAL/NUMERIC as ``precise`` (Connect Decimal), ``double`` or ``string``."""
    binary_handling_mode: BinaryHandlingMode = config_key(
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
            raise keyed_error(*problem)
        return self
