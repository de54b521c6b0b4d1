"""Typed, frozen configuration of a medallion pipeline, loaded once from ``conf/pipeline.yaml``.

:func:`load_config` reads the YAML file, layers environment variables and explicit overrides on
top, validates everything into frozen pydantic models and returns a :class:`PipelineConfig`. Later
code never sees raw dicts, and a broken config fails here, before any work starts, with a
:class:`~pipeline.errors.ConfigError` that names the file, the key path and the reason::

    conf/pipeline.yaml, key 'sources[0].tabel.include.list': unknown key 'tabel.include.list'
    in sources[0] (connector postgresql); did you mean 'table.include.list'?

This module holds the pipeline-wide sections (``lake``, ``spark``, ``bronze``, ``silver``,
``gold``, ``quality``, ``logging``), the layering and the loading. Each ``sources[]`` entry is
validated by its connector's own model (``capture/<connector>/config.py``, on the shared bases of
:mod:`capture.source_config`), found through the one table of connectors,
:data:`capture.registry.CONNECTORS`. The key and secret rules every model follows are in
:mod:`pipeline.config_model`. Nothing here imports a database driver.

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
        connector: postgresql             # picks the model: see capture.registry
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

import logging
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeAlias, Union

import yaml
from pydantic import (
    AfterValidator,
    BeforeValidator,
    Field,
    PlainValidator,
    PrivateAttr,
    SecretStr,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticUndefined

from bronze.storage import (
    LakePath,
    ObjectPath,
    ObjectStoreOptions,
    is_object_uri,
    parse_object_uri,
    remember_bucket,
)
from bronze.writer_format import DEFAULT_COMPRESSION, ParquetCompression
from capture.registry import SOURCE_CONFIG_MODELS
from capture.source_config import CONNECTOR, NAME, SourceConfigBase
from pipeline.catalog import CatalogKind, HiveMetastore
from pipeline.config_model import (
    CTX_BASE_DIR,
    CTX_CONFIG_FILE,
    CTX_REJECT_LITERAL_SECRETS,
    ConfigModel,
    Defaulted,
    FrozenDict,
    NonNegativeInt,
    OptionalConfigPath,
    PositiveInt,
    Sourced,
    StrMap,
    _resolve_path,
    config_key,
    did_you_mean,
    env_form,
    key_index,
    keyed_error,
)
from pipeline.errors import ConfigError

__all__ = [
    "load_config",
    "PipelineConfig",
    "LakeConfig",
    "SparkConfig",
    "BronzeConfig",
    "SilverConfig",
    "SilverTableConfig",
    "SchemaEvolutionPolicy",
    "TableOptions",
    "GoldConfig",
    "GoldTableConfig",
    "QualityConfig",
    "ExpectationConfig",
    "Severity",
    "LoggingConfig",
    "SourceConfig",
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
MAX_REPORTED_PROBLEMS = 20
"""At most this many validation problems are spelled out in one ConfigError."""

# --- top-level sections ---------------------------------------------------------------------
LAKE = "lake"
SPARK = "spark"
BRONZE = "bronze"
SILVER = "silver"
GOLD = "gold"
QUALITY = "quality"
LOGGING = "logging"
METRICS = "metrics"
SOURCES = "sources"

# --- lake -----------------------------------------------------------------------------------
LAKE_ROOT = "root"
LAKE_ROOT_DEFAULT = Path("lake")
LAKE_S3_ENDPOINT = "s3.endpoint"
LAKE_S3_REGION = "s3.region"
LAKE_S3_ALLOW_HTTP = "s3.allow.http"
LAKE_S3_ACCESS_KEY_ID = "s3.access.key.id"
LAKE_S3_SECRET_ACCESS_KEY = "s3.secret.access.key"

# --- spark ----------------------------------------------------------------------------------
SPARK_MASTER = "master"
SPARK_MASTER_DEFAULT = "local[*]"
SPARK_APP_NAME = "app.name"
SPARK_APP_NAME_DEFAULT = "medallion"
SPARK_JARS_DIR = "jars.dir"
SPARK_JARS_DIR_DEFAULT = None
SPARK_CONF = "conf"
SPARK_CATALOG = "catalog"
SPARK_CATALOG_DEFAULT = CatalogKind.IN_MEMORY
SPARK_METASTORE_URL = "metastore.url"
SPARK_METASTORE_USER = "metastore.user"
SPARK_METASTORE_PASSWORD = "metastore.password"

# --- bronze ---------------------------------------------------------------------------------
BRONZE_MAX_BATCH_SIZE = "max.batch.size"
BRONZE_MAX_BATCH_SIZE_DEFAULT = 20_000
BRONZE_MAX_TRANSACTION_SIZE = "max.transaction.size"
BRONZE_MAX_TRANSACTION_SIZE_DEFAULT = 100_000
BRONZE_PARQUET_COMPRESSION = "parquet.compression"

# --- silver ---------------------------------------------------------------------------------
SILVER_TOMBSTONE_RETENTION_HOURS = "tombstone.retention.hours"
SILVER_TOMBSTONE_RETENTION_HOURS_DEFAULT = 168.0
SILVER_TRANSACTION_TIMEOUT_SECONDS = "transaction.timeout.seconds"
SILVER_TRANSACTION_TIMEOUT_SECONDS_DEFAULT = 300.0
SILVER_SCHEMA_EVOLUTION = "schema.evolution"
SILVER_APPLY_PARALLELISM = "apply.parallelism"
SILVER_APPLY_PARALLELISM_DEFAULT = 4
SILVER_MERGE_DRIVER = "merge.driver"
SILVER_COMPACT_INTERVAL_SECONDS = "compact.interval.seconds"
SILVER_COMPACT_INTERVAL_SECONDS_DEFAULT = 3600.0
SILVER_COMPACT_MIN_FILES = "compact.min.files"
SILVER_COMPACT_MIN_FILES_DEFAULT = 64
SILVER_COMPACT_ZORDER = "compact.zorder"
SILVER_COMPACT_ZORDER_DEFAULT = True
SILVER_COMPACT_FILE_BYTES = "compact.file.bytes"
SILVER_COMPACT_FILE_BYTES_DEFAULT = 16 * 1024**2
SILVER_TABLES = "tables"
SILVER_TABLE_HISTORY = "history"
SILVER_TABLE_HISTORY_DEFAULT = False

# --- gold -----------------------------------------------------------------------------------
GOLD_TABLES = "tables"
GOLD_TABLE_SQL = "sql"
GOLD_TABLE_PYTHON = "python"
GOLD_TABLE_DESCRIPTION = "description"
GOLD_MATERIALIZE = "materialize"
GOLD_MATERIALIZE_DEFAULT = False

# --- quality --------------------------------------------------------------------------------
QUALITY_ENABLED = "enabled"
QUALITY_FRESHNESS_SLO_SECONDS = "freshness.slo.seconds"
QUALITY_FRESHNESS_SLO_SECONDS_DEFAULT = 3600.0
QUALITY_QUARANTINE_MAX = "quarantine.max"
QUALITY_RECONCILE_INTERVAL_SECONDS = "reconcile.interval.seconds"
QUALITY_RECONCILE_INTERVAL_SECONDS_DEFAULT = 3600.0
QUALITY_RECONCILE_REPAIR = "reconcile.repair"
QUALITY_INTERVAL_SECONDS = "interval.seconds"
QUALITY_INTERVAL_SECONDS_DEFAULT = 300.0
QUALITY_REPORT_DIR = "report.dir"
QUALITY_REPORT_HISTORY_RUNS = "report.history.runs"
QUALITY_REPORT_HISTORY_RUNS_DEFAULT = 30
QUALITY_SEVERITY = "severity"
QUALITY_EXPECTATIONS = "expectations"
QUALITY_EXPECTATION_TYPE = "type"
QUALITY_EXPECTATION_KWARGS = "kwargs"
QUALITY_EXPECTATION_SEVERITY = "severity"

# --- logging --------------------------------------------------------------------------------
LOG_LEVEL = "level"
LOG_LEVEL_DEFAULT = "INFO"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]

# --- metrics --------------------------------------------------------------------------------
METRICS_ADDRESS = "address"
METRICS_ADDRESS_DEFAULT = None


def _upper(value: Any) -> Any:
    return value.upper() if isinstance(value, str) else value


# --- sections -------------------------------------------------------------------------------
def _lake_root(value: Any, info: ValidationInfo) -> LakePath:
    """An ``s3://`` URI stays a URI (:class:`ObjectPath`); anything else is a config path."""
    if isinstance(value, ObjectPath):
        return value
    if is_object_uri(value):
        try:
            return parse_object_uri(str(value))
        except ValueError as exc:
            raise keyed_error(LAKE_ROOT, str(exc)) from exc
    if isinstance(value, str | os.PathLike):
        return _resolve_path(Path(value), info)
    raise keyed_error(LAKE_ROOT, f"expected a directory or an s3:// URI, got {value!r}")


if TYPE_CHECKING:
    LakeRoot: TypeAlias = LakePath
else:
    LakeRoot = Annotated[Any, PlainValidator(_lake_root)]


class LakeConfig(ConfigModel):
    """Where the Delta tables live: ``<root>/bronze``, ``<root>/silver``, ``<root>/gold``.

    The root is a directory, or an ``s3://bucket/prefix`` URI (see ``bronze/storage.py`` and
    docs/deploy.md); the ``s3.*`` keys say how to reach that bucket.
    """

    root: LakeRoot = config_key(LAKE_ROOT_DEFAULT, LAKE_ROOT, validate_default=True)
    """Root directory of the lake (relative to the config file's directory), or ``s3://...``."""
    s3_endpoint: str | None = config_key(None, LAKE_S3_ENDPOINT)
    """Endpoint URL of an S3-compatible server; unset for AWS S3."""
    s3_region: str | None = config_key(None, LAKE_S3_REGION)
    """The bucket's region; unset: ``AWS_REGION`` from the environment, else ``us-east-1``."""
    s3_allow_http: bool = config_key(False, LAKE_S3_ALLOW_HTTP)
    """Allow a plain-HTTP endpoint (a local test server); never for a real store."""
    s3_access_key_id: SecretStr | None = config_key(None, LAKE_S3_ACCESS_KEY_ID)
    """Access key (``s3.access.key.id.file``/``${VAR}``); unset: ``AWS_ACCESS_KEY_ID``."""
    s3_secret_access_key: SecretStr | None = config_key(None, LAKE_S3_SECRET_ACCESS_KEY)
    """Secret key (``s3.secret.access.key.file``/``${VAR}``); unset: ``AWS_SECRET_ACCESS_KEY``."""

    @model_validator(mode="after")
    def _object_store(self) -> LakeConfig:
        given = [
            key
            for key, value in (
                (LAKE_S3_ENDPOINT, self.s3_endpoint),
                (LAKE_S3_REGION, self.s3_region),
                (LAKE_S3_ACCESS_KEY_ID, self.s3_access_key_id),
                (LAKE_S3_SECRET_ACCESS_KEY, self.s3_secret_access_key),
            )
            if value is not None
        ] + ([LAKE_S3_ALLOW_HTTP] if self.s3_allow_http else [])
        if not isinstance(self.root, ObjectPath):
            if given:
                raise ValueError(
                    f"{', '.join(given)} set but lake.root {self.root} is a local directory; "
                    "an object-store root is written s3://bucket/prefix"
                )
            return self
        if (self.s3_access_key_id is None) != (self.s3_secret_access_key is None):
            raise ValueError(
                f"set both {LAKE_S3_ACCESS_KEY_ID} and {LAKE_S3_SECRET_ACCESS_KEY}, or neither "
                "(then the AWS_* environment variables are used)"
            )
        if self.s3_endpoint and self.s3_endpoint.startswith("http://") and not self.s3_allow_http:
            raise ValueError(
                f"{LAKE_S3_ENDPOINT} {self.s3_endpoint} is plain HTTP; set {LAKE_S3_ALLOW_HTTP}: "
                "true if that is meant (a local test server)"
            )
        options = ObjectStoreOptions(
            endpoint=self.s3_endpoint,
            region=self.s3_region,
            allow_http=self.s3_allow_http,
            access_key_id=self.s3_access_key_id,
            secret_access_key=self.s3_secret_access_key,
        )
        # The model is frozen: the root is rebuilt once here, with the options it travels with.
        root = ObjectPath(self.root.bucket, self.root.key, options)
        object.__setattr__(self, "root", root)
        remember_bucket(root)
        return self

    @property
    def bronze_path(self) -> LakePath:
        """The bronze ``events`` table: every record of every source."""
        return self.root / "bronze" / "events"

    @property
    def quarantine_path(self) -> LakePath:
        """The bronze ``quarantine`` table: records that could not be landed, with the reason."""
        return self.root / "bronze" / "quarantine"

    @property
    def schemas_path(self) -> LakePath:
        """The bronze ``schemas`` table: Connect schemas by fingerprint."""
        return self.root / "bronze" / "schemas"

    @property
    def silver_path(self) -> LakePath:
        """Directory of the silver tables (one per captured table)."""
        return self.root / "silver"

    @property
    def gold_path(self) -> LakePath:
        """Directory of the gold tables."""
        return self.root / "gold"


class SparkConfig(ConfigModel):
    """How the SparkSession is built."""

    master: str = config_key(SPARK_MASTER_DEFAULT, SPARK_MASTER)
    """Spark master URL: ``local[*]``, ``local[2]``, ``spark://host:7077``."""
    app_name: str = config_key(SPARK_APP_NAME_DEFAULT, SPARK_APP_NAME)
    """Spark application name (shown in the Spark UI)."""
    jars_dir: OptionalConfigPath = config_key(SPARK_JARS_DIR_DEFAULT, SPARK_JARS_DIR)
    """Directory of the Spark jars (Delta); null or empty: ``pipeline.spark``'s default
    (``$MEDALLION_JARS_DIR``, else the repository's ``.cache/jars``)."""
    conf: StrMap = config_key(
        PydanticUndefined, SPARK_CONF, default_factory=dict, validate_default=True
    )
    """Extra ``spark.*`` settings passed to the session builder verbatim (values as strings)."""
    catalog: CatalogKind = config_key(SPARK_CATALOG_DEFAULT, SPARK_CATALOG)
    """Where table names live: ``in-memory`` (registered again by every session) or ``hive``
    (a Hive metastore in PostgreSQL, ``metastore.*``; see :mod:`pipeline.catalog`)."""
    metastore_url: str | None = config_key(None, SPARK_METASTORE_URL)
    """With ``catalog: hive``: the metastore's database, ``jdbc:postgresql://host:port/db``."""
    metastore_user: str | None = config_key(None, SPARK_METASTORE_USER)
    """With ``catalog: hive``: the database user."""
    metastore_password: SecretStr | None = config_key(None, SPARK_METASTORE_PASSWORD)
    """With ``catalog: hive``: the user's password, if the server asks for one."""

    @model_validator(mode="after")
    def _metastore_matches_catalog(self) -> SparkConfig:
        given = self.metastore_url is not None or self.metastore_user is not None
        if self.catalog is CatalogKind.IN_MEMORY and given:
            raise ValueError("metastore.* is set but catalog is in-memory; set catalog: hive")
        if self.catalog is CatalogKind.HIVE:
            if self.metastore_url is None or self.metastore_user is None:
                raise ValueError(
                    "catalog: hive needs metastore.url (jdbc:postgresql://host:port/db) and "
                    "metastore.user; Hive's own default, an embedded Derby, is never used"
                )
            try:
                self.metastore()
            except ConfigError as exc:
                raise ValueError(exc.reason) from None
        return self

    def metastore(self) -> HiveMetastore | None:
        """The Hive metastore of ``catalog: hive``; None for the in-memory catalog."""
        if self.catalog is not CatalogKind.HIVE or self.metastore_url is None:
            return None
        return HiveMetastore(
            url=self.metastore_url,
            user=self.metastore_user or "",
            password=self.metastore_password,
        )


class BronzeConfig(ConfigModel):
    """How capture agents land records in bronze."""

    max_batch_size: PositiveInt = config_key(BRONZE_MAX_BATCH_SIZE_DEFAULT, BRONZE_MAX_BATCH_SIZE)
    """Records per bronze commit, at most; a batch ends early on a transaction boundary."""
    max_transaction_size: PositiveInt = config_key(
        BRONZE_MAX_TRANSACTION_SIZE_DEFAULT, BRONZE_MAX_TRANSACTION_SIZE
    )
    """A transaction larger than this is committed in parts, flagged ``tx_partial``."""
    parquet_compression: ParquetCompression = config_key(
        DEFAULT_COMPRESSION, BRONZE_PARQUET_COMPRESSION
    )
    """Codec of the Parquet files the agents write (``lz4_raw``, ``zstd``, ``snappy``, ``gzip``,
    ``uncompressed``); files written before with another codec stay readable beside them."""


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

    schema_evolution: SchemaEvolutionPolicy | None = config_key(None, SILVER_SCHEMA_EVOLUTION)
    """Overrides ``silver.schema.evolution`` for this table."""
    history: bool = config_key(SILVER_TABLE_HISTORY_DEFAULT, SILVER_TABLE_HISTORY)
    """Also keep an SCD type 2 history table ``<table>__history``: one row per version with
    valid-from/valid-to by source commit time and position, linked across primary-key moves."""


class MergeDriver(StrEnum):
    """Where silver may MERGE a small micro-batch into a table (``silver.merge.driver``)."""

    AUTO = "auto"
    """On the driver with deltalake (delta-rs) when the batch and the table allow it, else with
    Spark (docs/silver.md, "Small batches: the MERGE on the driver")."""
    OFF = "off"
    """Always with Spark."""


@dataclass(frozen=True, slots=True)
class TableOptions:
    """The resolved options of one silver table."""

    schema_evolution: SchemaEvolutionPolicy = SchemaEvolutionPolicy.EVOLVE
    history: bool = False
    merge_driver: bool = True
    """Whether a small batch may be merged on the driver (``silver.merge.driver: auto``)."""


class SilverConfig(ConfigModel):
    """How silver applies bronze."""

    tombstone_retention_hours: Annotated[float, Field(ge=0)] = config_key(
        SILVER_TOMBSTONE_RETENTION_HOURS_DEFAULT, SILVER_TOMBSTONE_RETENTION_HOURS
    )
    """Deleted rows stay as tombstone rows this long, so a late older event cannot resurrect
    them; after the purge, such an event is reported ("would have resurrected"), never applied.
    Set it above the longest delay you expect between a change and its arrival in bronze."""
    transaction_timeout_seconds: Annotated[float, Field(ge=0)] = config_key(
        SILVER_TRANSACTION_TIMEOUT_SECONDS_DEFAULT, SILVER_TRANSACTION_TIMEOUT_SECONDS
    )
    """A source transaction waits this long for its END record (Debezium emits it only when the
    next transaction starts) before it is applied as far as it arrived."""
    schema_evolution: SchemaEvolutionPolicy = config_key(
        SchemaEvolutionPolicy.EVOLVE, SILVER_SCHEMA_EVOLUTION
    )
    """Policy for schema changes that are not additive or safe widenings (per table below)."""
    apply_parallelism: Annotated[int, Field(ge=1, le=64)] = config_key(
        SILVER_APPLY_PARALLELISM_DEFAULT, SILVER_APPLY_PARALLELISM
    )
    """Tables of one micro-batch applied at the same time (Spark runs their jobs concurrently;
    most of a small table's time is driver work: planning, Delta log reads, commits). 1
    applies them one after the other."""
    merge_driver: MergeDriver = config_key(MergeDriver.AUTO, SILVER_MERGE_DRIVER)
    """``auto``: a small micro-batch of a table is merged on the driver by deltalake, without
    Spark jobs, when nothing in it needs Spark (docs/silver.md); ``off``: always by Spark."""
    compact_interval_seconds: Annotated[float, Field(gt=0)] | None = config_key(
        SILVER_COMPACT_INTERVAL_SECONDS_DEFAULT, SILVER_COMPACT_INTERVAL_SECONDS
    )
    """``run --continuous`` compacts a silver table's small files at most this often, between
    micro-batches (never beside a MERGE of it); null: never (docs/silver.md)."""
    compact_min_files: Annotated[int, Field(ge=2)] = config_key(
        SILVER_COMPACT_MIN_FILES_DEFAULT, SILVER_COMPACT_MIN_FILES
    )
    """A table is compacted once it has at least this many files below half of
    ``compact.file.bytes``."""
    compact_zorder: bool = config_key(SILVER_COMPACT_ZORDER_DEFAULT, SILVER_COMPACT_ZORDER)
    """Compact with ``ZORDER BY (_cdc_key_order)`` (files with narrow key ranges, which a MERGE
    skips; rewrites the whole table) instead of bin-packing the small files only."""
    compact_file_bytes: Annotated[int, Field(ge=1024**2)] = config_key(
        SILVER_COMPACT_FILE_BYTES_DEFAULT, SILVER_COMPACT_FILE_BYTES
    )
    """Size of the files a compaction writes. The default is the driver MERGE's bound on the
    files a batch touches, so a batch of recent keys still merges on the driver after a
    compaction; Delta's own default (1 GiB) would make a table under a gibibyte one file that
    every MERGE reads whole."""
    tables: Annotated[Mapping[str, SilverTableConfig], AfterValidator(_frozen_tables)] = config_key(
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
            merge_driver=self.merge_driver is MergeDriver.AUTO,
        )


class GoldTableConfig(ConfigModel):
    """A gold table derived from the gold views (``gold.tables.<name>``): exactly one of ``sql``
    and ``python``. It is rebuilt at every published cut by ``medallion run``."""

    sql: str | None = config_key(None, GOLD_TABLE_SQL)
    """A Spark SQL query over the gold views (``gold.<source>__<schema>__<table>``)."""
    python: str | None = config_key(
        None, GOLD_TABLE_PYTHON, pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$"
    )
    """``package.module:function``, called as ``function(spark, tables)`` where ``tables`` maps
    ``<source>.<schema>.<table>`` to the gold DataFrame at the cut; returns a DataFrame."""
    description: str = config_key("", GOLD_TABLE_DESCRIPTION)
    """Written as the Delta table's description (``DESCRIBE DETAIL``; set when it changes)."""

    @model_validator(mode="after")
    def _one_definition(self) -> GoldTableConfig:
        if (self.sql is None) == (self.python is None):
            raise ValueError("give exactly one of 'sql' and 'python'")
        return self


class GoldConfig(ConfigModel):
    """Gold: current-state views of every silver table at one consistent cut, and derived
    tables declared here."""

    tables: Annotated[Mapping[str, GoldTableConfig], AfterValidator(_frozen_tables)] = config_key(
        FrozenDict(), GOLD_TABLES
    )
    """Derived gold tables by name (``[a-z][a-z0-9_]*``), written to ``<lake>/gold/<name>``."""
    materialize: bool = config_key(GOLD_MATERIALIZE_DEFAULT, GOLD_MATERIALIZE)
    """At each published cut, also write every gold view as a plain Delta table under
    ``<lake>/gold/_materialized/`` that delta-rs, polars and pandas read (gold/materialize.py)."""

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

    type: str = config_key(
        PydanticUndefined, QUALITY_EXPECTATION_TYPE, pattern=r"^expect_[a-z0-9_]+$"
    )
    """The expectation's snake_case name, e.g. ``expect_column_values_to_be_between``."""
    kwargs: Mapping[str, Any] = config_key(
        PydanticUndefined, QUALITY_EXPECTATION_KWARGS, default_factory=dict
    )
    """Its arguments (``column``, ``min_value``, ``regex`` ...), as GX names them."""
    severity: Severity = config_key(Severity.WARN, QUALITY_EXPECTATION_SEVERITY)
    """``warn`` or ``block``."""


class QualityConfig(ConfigModel):
    """Data-quality checks on gold (``medallion quality``, and after each ``medallion run``)."""

    enabled: bool = config_key(True, QUALITY_ENABLED)
    """Run the checks after each ``medallion run`` (before gold moves to the new cut)."""
    freshness_slo_seconds: Annotated[float, Field(gt=0)] = config_key(
        QUALITY_FRESHNESS_SLO_SECONDS_DEFAULT, QUALITY_FRESHNESS_SLO_SECONDS
    )
    """The freshness check fails when gold is further behind the source than this."""
    quarantine_max: NonNegativeInt = config_key(0, QUALITY_QUARANTINE_MAX)
    """The quarantine check fails when a table has more quarantined events than this."""
    reconcile_interval_seconds: Annotated[float, Field(ge=0)] | None = config_key(
        QUALITY_RECONCILE_INTERVAL_SECONDS_DEFAULT, QUALITY_RECONCILE_INTERVAL_SECONDS
    )
    """``medallion run`` also reconciles gold with each database source at most this often
    (0: every run; null: never; ``medallion reconcile`` runs it on demand)."""
    reconcile_repair: bool = config_key(False, QUALITY_RECONCILE_REPAIR)
    """When the scheduled reconciliation finds keys that differ, send the source's capture agent
    an incremental snapshot of exactly those keys (``reconcile --repair`` without the waiting:
    the running agent lands it, a later reconciliation shows it repaired); see
    docs/signals.md."""
    interval_seconds: Annotated[float, Field(ge=0)] = config_key(
        QUALITY_INTERVAL_SECONDS_DEFAULT, QUALITY_INTERVAL_SECONDS
    )
    """``medallion run --continuous`` runs every check (and writes the report) at most this
    often, on a thread of its own beside the micro-batches (``gold.quality_schedule``); after
    every micro-batch gold moves once the blocking checks pass (the only ones that can hold it
    back). 0: a full run starts again as soon as the previous one ends. ``run --once`` always
    runs every check."""
    report_dir: OptionalConfigPath = config_key(None, QUALITY_REPORT_DIR)
    """Directory of the HTML report (``index.html``, one file per run); null:
    ``<lake>/reports/quality``."""
    report_history_runs: PositiveInt = config_key(
        QUALITY_REPORT_HISTORY_RUNS_DEFAULT, QUALITY_REPORT_HISTORY_RUNS
    )
    """The report's history (run-by-run strips, plots over runs) shows this many full runs,
    the newest last."""
    severity: Annotated[Mapping[str, Severity], AfterValidator(_frozen_tables)] = config_key(
        FrozenDict(), QUALITY_SEVERITY
    )
    """Severity per built-in check name (see ``gold.quality.CHECKS``), overriding its default."""
    expectations: Annotated[
        Mapping[str, tuple[ExpectationConfig, ...]], AfterValidator(_frozen_tables)
    ] = config_key(FrozenDict(), QUALITY_EXPECTATIONS)
    """User expectations per table, keyed ``<source>.<schema>.<table>`` (or
    ``<schema>.<table>`` for that table in every source)."""

    @field_validator("severity")
    @classmethod
    def _known_checks(cls, severity: Mapping[str, Severity]) -> Mapping[str, Severity]:
        if not severity:
            return severity
        # Imported here: gold.quality imports this module. A misspelt check name would
        # otherwise be kept and never looked up.
        from gold.quality import CHECKS

        for name in severity:
            if name not in CHECKS:
                hint = did_you_mean(name, list(CHECKS))
                raise keyed_error(
                    name,
                    f"unknown check '{name}'"
                    + (f"; {hint}" if hint else f" (built-in checks: {', '.join(CHECKS)})"),
                )
        return severity

    def expectations_for(self, source: str, collection: str) -> tuple[ExpectationConfig, ...]:
        """The user expectations of one table (source-qualified entry first, then unqualified)."""
        return tuple(self.expectations.get(f"{source}.{collection}", ())) + tuple(
            self.expectations.get(collection, ())
        )


class LoggingConfig(ConfigModel):
    """Logging level; only the CLI installs handlers."""

    level: Annotated[LogLevel, BeforeValidator(_upper)] = config_key(LOG_LEVEL_DEFAULT, LOG_LEVEL)
    """Root log level: DEBUG, INFO, WARNING, ERROR or CRITICAL."""


def _metrics_address(value: str | None) -> str | None:
    if value is None:
        return None
    from pipeline.metrics_server import parse_address

    parse_address(value)  # raises ValueError naming what is wrong
    return value


class MetricsConfig(ConfigModel):
    """Where ``capture --follow`` and ``run --continuous`` serve Prometheus metrics."""

    address: Annotated[str | None, AfterValidator(_metrics_address)] = config_key(
        METRICS_ADDRESS_DEFAULT, METRICS_ADDRESS
    )
    """``host:port`` of the ``/metrics`` endpoint (``127.0.0.1:9464``, ``[::1]:9464``,
    ``0.0.0.0:9464`` for every interface); None (the default) serves nothing."""


# --- sources: composed from the connector table ------------------------------------------
# Each connector owns its model (capture/<connector>/config.py) and registers it once, in
# capture.registry.CONNECTORS; nothing here names a connector.
_CONNECTOR_TAGS: Mapping[str, type[SourceConfigBase]] = {
    tag: model for model in SOURCE_CONFIG_MODELS.values() for tag in model.connector_tags()
}
"""``connector`` value -> model (``mariadb`` selects the MySQL model)."""

if TYPE_CHECKING:
    # The union below is built at run time from the table, which a type checker cannot follow;
    # code that needs a connector's fields narrows with isinstance.
    SourceConfig: TypeAlias = SourceConfigBase
else:
    SourceConfig = Annotated[
        Union[tuple(SOURCE_CONFIG_MODELS.values())],  # noqa: UP007 - a union built from a table
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
    metrics: MetricsConfig = Field(default_factory=dict, validate_default=True)
    """The Prometheus endpoint of the long-running commands."""
    sources: tuple[SourceConfig, ...] = ()
    """Configured sources, in file order."""

    _config_path: Path | None = PrivateAttr(default=None)

    def model_post_init(self, context: Any) -> None:
        if isinstance(context, Mapping) and context.get(CTX_CONFIG_FILE) is not None:
            self._config_path = Path(context[CTX_CONFIG_FILE])

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

    @field_validator("sources")
    @classmethod
    def _distinct_replica_ids(
        cls, sources: tuple[SourceConfigBase, ...]
    ) -> tuple[SourceConfigBase, ...]:
        # Two binlog readers with one server_id on one server disconnect each other over and
        # over (the server keeps one dump thread per id): refuse that here, at start.
        from capture.mysql.config import default_server_id

        readers: dict[tuple[str, int, int], str] = {}
        for source in sources:
            if not hasattr(source, "database_server_id"):
                continue
            host = str(getattr(source, "database_hostname", None) or "localhost").lower()
            port = int(getattr(source, "database_port", None) or 3306)
            explicit = getattr(source, "database_server_id", None)
            server_id = int(explicit) if explicit else default_server_id(source.name)
            other = readers.setdefault((host, port, server_id), source.name)
            if other != source.name:
                raise ValueError(
                    f"sources '{other}' and '{source.name}' read the binlog of {host}:{port} with "
                    f"the same server_id {server_id} (database.server.id, or the default drawn "
                    "from the source name): they would disconnect each other; give each its own "
                    "database.server.id, unique among the server's replicas"
                )
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
        hint = did_you_mean(name, self.source_names)
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
    METRICS: MetricsConfig,
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
        CTX_BASE_DIR: config_path.resolve().parent,
        CTX_CONFIG_FILE: config_path,
        CTX_REJECT_LITERAL_SECRETS: True,
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
    if not isinstance(node, yaml.MappingNode):
        raise yaml.constructor.ConstructorError(
            None, None, f"expected a mapping, found {node.tag}", node.start_mark
        )
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
        if isinstance(value, str) and "$" in value and not isinstance(value, Sourced):
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
            return Defaulted(result, "default of ${" + ", ".join(defaulted) + "}")
        if names:
            return Sourced(result, "environment variable " + ", ".join(names))
        return result

    out = walk(raw, "")
    if problems:
        raise _problems_error(problems, file)
    return out


def _spelling_for(model: type[ConfigModel], env_key: str) -> str | None:
    return key_index(model).by_env.get(env_key)


def _set_key(target: dict[str, Any], model: type[ConfigModel], key: str, value: Any) -> None:
    """Set ``key`` in a raw section, dropping other spellings of the same field."""
    index = key_index(model)
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
        hint = did_you_mean(selector.lower(), names)
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
        value = Sourced(environ[var], f"environment variable {var}")
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
            hint = did_you_mean(parts[0].upper(), sections)
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
    value: Sourced,
    var: str,
    path: str,
    file: str,
) -> None:
    index = key_index(model)
    key = _spelling_for(model, parts[0].upper())
    field = index.spellings.get(key) if key is not None else None
    if key is None or field is None:
        rejected = {env_form(k): k for k in model.unsupported_keys()}.get(parts[0].upper())
        if rejected is not None:
            raise ConfigError(
                f"environment variable {var}: '{rejected}' is not supported: "
                + model.unsupported_keys()[rejected],
                file=file,
                key_path=_join(path, rejected),
            )
        hint = did_you_mean(parts[0].upper(), [env_form(k) for k in index.suggestions])
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
        existing = {env_form(str(k)): str(k) for k in mapping}
        entry = existing.get(env_form(parts[1]), parts[1].lower().replace("_", "."))
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
    if isinstance(value, Sourced):
        return value
    if isinstance(value, str):
        return Sourced(value, origin)
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
        hint = did_you_mean(dotted.split(".")[0], sections)
        raise ConfigError(
            f"override '{dotted}' names no section (expected one of {', '.join(sections)})"
            + (f"; {hint}" if hint else ""),
            file=file,
            key_path=dotted,
        )
    index = key_index(model)
    if model.accepts_key(rest):
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
    reason = model.unsupported_keys().get(rest)
    if reason is not None:
        raise ConfigError(
            f"override '{dotted}': '{rest}' is not supported: {reason}",
            file=file,
            key_path=_join(path, rest),
        )
    hint = did_you_mean(rest, index.suggestions)
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
    return f" (from {value.origin})" if isinstance(value, Sourced) else ""


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
            hint = did_you_mean(str(ctx.get("tag")), list(_CONNECTOR_TAGS))
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
            hint = did_you_mean(str(value), expected) if isinstance(value, str) else ""
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
