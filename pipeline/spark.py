"""The one place that builds medallion's SparkSession.

Every job, test and notebook gets its session from :func:`build_spark_session`, so Delta Lake,
the time zone and the table catalog are set up the same way everywhere.

Delta's jars come from a local directory (``make bootstrap`` fetches them once from Maven
Central into ``.cache/jars``) and are put on ``spark.jars``. ``spark.jars.packages`` is never
used: it would make every Spark start resolve artifacts over the network.

Tables are addressable by name. The session uses Spark's in-memory catalog, which starts empty, so
:func:`build_spark_session` re-registers every Delta table of the lake at each start
(:func:`register_lake_tables`): ``bronze.events``, ``silver.<source>__<schema>__<table>`` and
``gold.<name>``. The Delta log stays the only source of truth; there is no metastore database that
a notebook and a running job would fight over (an embedded Derby metastore admits one process at a
time). Spark's session catalog only accepts table names of letters, digits and ``_``; a table
directory named otherwise is readable by path only (``delta.`<path>```).

With ``catalog=`` a :class:`~pipeline.catalog.HiveMetastore`, the names live in a Hive metastore
instead (``spark.catalog: hive``, :mod:`pipeline.catalog`): they outlive the session, and another
application with the same metastore sees them without registering anything.

On a cluster (any master but ``local``), the executors run the driver's Python
(``PYSPARK_PYTHON``, this interpreter unless set) and get medallion's own packages, zipped from
the ones this process imported, through ``addPyFile``: the executors then run exactly the
driver's code, whatever version of medallion (if any) their Python has installed. Delta's jars
go to them through ``spark.jars``, which the driver serves.

Under ``spark-submit``, a ``pyspark`` shell or a notebook that already holds a session, the
session is reused and only checked: the submitter supplies Delta (``--packages``/``--jars`` plus
``--conf spark.sql.extensions=... --conf spark.sql.catalog.spark_catalog=...``) and the master.
"""

from __future__ import annotations

import atexit
import importlib
import logging
import os
import re
import shutil
import sys
import tempfile
import time
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import LiteralString

from py4j.protocol import Py4JJavaError
from pyspark import SparkContext
from pyspark.errors import PySparkException
from pyspark.sql import SparkSession

from bronze.storage import LakePath, lake_path
from pipeline.catalog import HiveMetastore, hive_settings
from pipeline.errors import ConfigError, NotInstalledError
from pipeline.spark_storage import with_object_store
from pipeline.sql import qualified, quote_identifier, quote_string_literal

__all__ = [
    "CODE_PACKAGES",
    "DELTA_CATALOG",
    "DELTA_EXTENSION",
    "JARS_DIR_ENV",
    "LOG4J_CONFIG",
    "LAKE_LAYERS",
    "WAREHOUSE_DIR_NAME",
    "build_spark_session",
    "default_jars_dir",
    "register_lake_tables",
    "stop_spark_session",
]

logger = logging.getLogger(__name__)

DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
"""Spark SQL extension class that adds Delta's SQL syntax and analysis rules."""

DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
"""Session catalog implementation that makes ``USING delta`` tables work by name."""

JARS_DIR_ENV = "MEDALLION_JARS_DIR"
"""Environment variable naming the directory with Delta's jars (``scripts/fetch_jars.sh`` too)."""

LAKE_LAYERS: tuple[str, ...] = ("bronze", "silver", "gold")
"""Layer directories under the lake root; each becomes a schema of the same name."""

WAREHOUSE_DIR_NAME = "_warehouse"
"""Directory under the lake root for ``spark.sql.warehouse.dir`` (managed tables, schema dirs).

Lake tables are registered as external tables and never live here; keeping it inside the lake root
stops Spark from creating ``spark-warehouse/`` in whatever directory a job happens to start in.
"""

SESSION_TIME_ZONE = "UTC"
"""Every session computes in UTC, whatever the machine's zone."""

CODE_PACKAGES: tuple[str, ...] = ("pipeline", "capture", "bronze", "silver", "gold")
"""medallion's top-level packages: what a cluster's executors get (Python UDFs and
``mapInPandas`` functions are pickled by reference to their module)."""

_REPO_ROOT = Path(__file__).resolve().parents[1]
_DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
_DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
_CATALOG_IMPLEMENTATION = "spark.sql.catalogImplementation"

LOG4J_CONFIG = Path(__file__).resolve().with_name("log4j2.properties")
"""The log4j2 configuration of a driver this process starts: Spark's lines below ERROR are
dropped (WARN with ``--log-level debug``), so the console holds the pipeline's own lines."""
_DELTA_JAR = re.compile(r"^delta-spark_\d+\.\d+_2\.13-.+\.jar$")
_LOCAL_MASTER = re.compile(r"^local(?:\[(?P<threads>\*|\d+)(?:,\s*\d+)?\])?$")
_FILE_URI = re.compile(r"^file:(?://)?(?P<path>/.*)$")
# Spark's session catalog (in-memory or Hive) refuses other table names, even when quoted.
_CATALOG_NAME = re.compile(r"^[A-Za-z0-9_]+$")
_COMMIT_FILE = re.compile(r"^\d{20}\.(?:json|checkpoint(?:\..+)?\.parquet)$")

_CREATE_SCHEMA: LiteralString = "CREATE SCHEMA IF NOT EXISTS {schema}"
_CREATE_TABLE: LiteralString = "CREATE TABLE IF NOT EXISTS {table} USING delta LOCATION {location}"
_SHOW_TABLES: LiteralString = "SHOW TABLE EXTENDED IN {schema} LIKE '*'"
_DROP_TABLE: LiteralString = "DROP TABLE IF EXISTS {table}"


def default_jars_dir() -> Path:
    """Return where Delta's jars are expected when no directory is passed.

    Returns:
        ``$MEDALLION_JARS_DIR`` if set, else ``<repo>/.cache/jars`` (filled by ``make bootstrap``).
    """
    configured = os.environ.get(JARS_DIR_ENV)
    return Path(configured) if configured else _REPO_ROOT / ".cache" / "jars"


def build_spark_session(
    *,
    master: str = "local[*]",
    app_name: str = "medallion",
    lake_root: LakePath,
    conf: Mapping[str, str] | None = None,
    jars_dir: Path | None = None,
    catalog: HiveMetastore | None = None,
) -> SparkSession:
    """Build (or adopt) the SparkSession with Delta Lake and register the lake's tables.

    In a plain Python process this starts Spark with ``master``, Delta's jars from ``jars_dir``
    on ``spark.jars``, Delta's SQL extension and catalog, the in-memory catalog (or the Hive
    metastore ``catalog``), session time zone UTC and the Spark UI off. Python workers use this
    interpreter unless ``PYSPARK_PYTHON`` says otherwise. For ``local`` masters the shuffle and
    Delta snapshot partitions are cut to the number of local threads and the driver binds to
    127.0.0.1. ``conf`` entries override these defaults. For any other master medallion's
    packages are shipped to the executors (see the module docstring).

    If a SparkContext is already running in this process (a notebook, a second call) or the JVM
    was started by ``spark-submit``/``pyspark`` (``PYSPARK_GATEWAY_PORT`` is set), nothing static
    is configured: the existing or submitted configuration wins, including the master, and the
    session is only checked for Delta's extension and catalog. Runtime settings from ``conf``
    and the UTC time zone are still applied.

    Either way the schemas ``bronze``, ``silver`` and ``gold`` are created and every Delta table
    under ``lake_root`` is registered (see :func:`register_lake_tables`).

    Args:
        master: Spark master URL, e.g. ``local[2]``, ``spark://host:7077``, ``yarn``. Ignored
            when the session or JVM already exists.
        app_name: Application name shown by the cluster manager. Ignored like ``master``.
        lake_root: Root of the lake, holding ``bronze/``, ``silver/`` and ``gold/``.
        conf: Extra Spark settings; they override medallion's defaults. ``spark.jars`` entries
            are added to Delta's jars. ``spark.jars.packages`` is refused.
        jars_dir: Directory with Delta's jars. Defaults to :func:`default_jars_dir`.
        catalog: Keep the names in this Hive metastore; None: the in-memory catalog.

    Returns:
        The active SparkSession.

    Raises:
        NotInstalledError: Delta's jars (or, with ``catalog``, the metastore's JDBC driver) are
            missing (run ``make bootstrap``).
        ConfigError: ``conf`` sets ``spark.jars.packages``, or a reused session lacks Delta's
            extension or catalog, or runs another catalog than ``catalog`` asks for.
    """
    extra = dict(conf or {})
    if "spark.jars.packages" in extra:
        raise ConfigError(
            "spark.jars.packages would download jars at every start; put jar files on "
            "spark.jars, or pass --packages to spark-submit",
            key_path="spark.jars.packages",
        )
    lake_root = lake_path(lake_root).absolute()

    if SparkContext._active_spark_context is not None:
        logger.info("reusing the SparkSession already running in this process")
        spark = _adopt(SparkSession.builder.getOrCreate(), extra, catalog)
    elif "PYSPARK_GATEWAY_PORT" in os.environ:
        # spark-submit or the pyspark shell started the JVM with its own --master, --jars and
        # --conf; anything static set here would silently override the submitter's choice.
        logger.info("JVM started by spark-submit/pyspark; using the submitted configuration")
        spark = _adopt(_create(SparkSession.builder, {}), extra, catalog)
    else:
        settings = _local_process_settings(master, lake_root, _delta_jars(jars_dir))
        settings = with_object_store(settings, lake_root)  # s3a for an s3:// lake
        if catalog is not None:
            hive = hive_settings(catalog)
            # One class path for both (the s3a jars may be on it already): joined, not replaced.
            joined = [settings.get(_DRIVER_CLASS_PATH, ""), hive.pop(_DRIVER_CLASS_PATH, "")]
            settings.update(hive)
            settings[_DRIVER_CLASS_PATH] = os.pathsep.join(p for p in joined if p)
        jars = [settings["spark.jars"], extra.pop("spark.jars", "")]
        # The user's JVM options come last: for a repeated -D the JVM keeps the last one.
        java = [settings[_DRIVER_JAVA_OPTIONS], extra.pop(_DRIVER_JAVA_OPTIONS, "")]
        classpath = [settings.pop(_DRIVER_CLASS_PATH, ""), extra.pop(_DRIVER_CLASS_PATH, "")]
        settings.update(extra)
        settings["spark.jars"] = ",".join(j for j in jars if j)
        settings[_DRIVER_JAVA_OPTIONS] = " ".join(j for j in java if j)
        if any(classpath):
            settings[_DRIVER_CLASS_PATH] = os.pathsep.join(c for c in classpath if c)
        # Python workers (the executors' too) default to whatever `python3` is on PATH, not
        # this virtualenv; pyspark reads only the environment variable, not spark.pyspark.python.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        if _LOCAL_MASTER.match(master):
            # Stay on loopback instead of probing the machine's interfaces (and warning).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.master(master).appName(app_name)
        spark = _create(builder, settings)

    if not _LOCAL_MASTER.match(spark.sparkContext.master or "local"):
        _ship_code(spark)

    register_lake_tables(spark, lake_root)
    return spark


def register_lake_tables(spark: SparkSession, lake_root: LakePath) -> list[str]:
    """Create the layer schemas and register every Delta table of the lake by name.

    For each layer in :data:`LAKE_LAYERS` this creates the schema ``<layer>`` if needed and, for
    every ``<lake_root>/<layer>/<name>/_delta_log`` that holds at least one commit, runs
    ``CREATE TABLE IF NOT EXISTS <layer>.<name> USING delta LOCATION '<path>'``.

    * The tables are external: dropping one removes only the name, never data.
    * Registration reads the catalog and the Delta log only; it writes no commit, so it is safe
      next to a running writer.
    * A name already registered at another location (an earlier lake root in the same session)
      is re-pointed; names without a directory under ``lake_root`` are left alone.
    * Spark's session catalog accepts only letters, digits and ``_`` in table names (it rejects
      others even when quoted), so a directory named otherwise is skipped with a warning and
      stays readable by path only. A table that fails to register is logged and skipped, so one
      broken table does not stop a session.

    Args:
        spark: The session whose catalog receives the tables.
        lake_root: Root of the lake, holding ``bronze/``, ``silver/`` and ``gold/``.

    Returns:
        The tables that are now registered, as ``<layer>.<name>`` (unquoted), sorted by layer
        then name.

    Raises:
        ConfigError: The session parses SQL strings without escapes
            (``spark.sql.parser.escapedStringLiterals``) and a table path needs escaping.
    """
    lake_root = lake_path(lake_root).absolute()
    escapes_off = spark.conf.get("spark.sql.parser.escapedStringLiterals", "false") == "true"
    registered: list[str] = []
    started = time.monotonic()
    for layer in LAKE_LAYERS:
        # Checking first avoids Spark's "Namespace ... was created concurrently" warning.
        if not spark.catalog.databaseExists(layer):
            spark.sql(_CREATE_SCHEMA.format(schema=quote_identifier(layer)))
        layer_dir = lake_root / layer
        if not layer_dir.is_dir():
            continue
        known = _catalog_locations(spark, layer)
        for table_dir in sorted((p for p in layer_dir.iterdir() if p.is_dir()), key=str):
            if not _has_delta_commit(table_dir / "_delta_log"):
                logger.debug("skipping %s: no Delta commit yet", table_dir)
                continue
            if not _CATALOG_NAME.match(table_dir.name):
                logger.warning(
                    "not registering %s by name: Spark's catalog allows only letters, digits "
                    "and _ in table names; read it by path",
                    table_dir,
                )
                continue
            path = str(table_dir)
            if escapes_off and ("'" in path or "\\" in path):
                raise ConfigError(
                    f"cannot quote the path {path!r} while escapes are off",
                    key_path="spark.sql.parser.escapedStringLiterals",
                )
            name = qualified(layer, table_dir.name)
            key = table_dir.name.lower()  # the catalog is case-insensitive and stores lower case
            try:
                if key in known:
                    if known[key] == table_dir:
                        registered.append(f"{layer}.{table_dir.name}")
                        continue
                    logger.info("re-pointing %s from %s to %s", name, known[key], table_dir)
                    spark.sql(_DROP_TABLE.format(table=name))
                spark.sql(_CREATE_TABLE.format(table=name, location=quote_string_literal(path)))
            except (PySparkException, Py4JJavaError) as exc:
                logger.warning("could not register %s at %s: %s", name, table_dir, exc)
                continue
            registered.append(f"{layer}.{table_dir.name}")
    logger.info(
        "registered %d lake tables from %s in %.2f s",
        len(registered),
        lake_root,
        time.monotonic() - started,
    )
    return registered


def stop_spark_session() -> None:
    """Stop the SparkSession of this process, if one is running.

    Safe to call when no session exists. The JVM stays up (py4j keeps it); a later
    :func:`build_spark_session` starts a new SparkContext in it.
    """
    if SparkContext._active_spark_context is None:
        return
    SparkSession.builder.getOrCreate().stop()
    logger.info("stopped the SparkSession")


def _delta_jars(jars_dir: Path | None) -> list[Path]:
    directory = Path(jars_dir) if jars_dir is not None else default_jars_dir()
    jars = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    if not any(_DELTA_JAR.match(jar.name) for jar in jars):
        raise NotInstalledError(
            f"Delta Lake's jars are not in {directory}: run make bootstrap "
            f"(or point ${JARS_DIR_ENV} at a directory holding delta-spark_*.jar)"
        )
    return jars


_CODEGEN_CACHE = "spark.sql.codegen.cache.maxEntries"
CODEGEN_CACHE_ENTRIES = "2000"
"""Compiled classes the JVM keeps (Spark's default is 100)."""


def _log4j_options() -> str:
    """JVM options that give the driver :data:`LOG4J_CONFIG`, at ERROR unless this process logs
    at DEBUG (then WARN, Spark's own default), decided when the session starts."""
    level = "WARN" if logging.getLogger().isEnabledFor(logging.DEBUG) else "ERROR"
    return f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()} -Dmedallion.spark.log.level={level}"


def _local_threads(master: str) -> int | None:
    match = _LOCAL_MASTER.match(master)
    if match is None:
        return None
    threads = match.group("threads")
    if threads is None:
        return 1
    if threads == "*":
        return os.cpu_count() or 1
    return max(1, int(threads))


def _local_process_settings(master: str, lake_root: LakePath, jars: list[Path]) -> dict[str, str]:
    settings = {
        "spark.jars": ",".join(str(jar) for jar in jars),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        _CATALOG_IMPLEMENTATION: "in-memory",
        "spark.sql.warehouse.dir": str(lake_root / WAREHOUSE_DIR_NAME),
        "spark.sql.session.timeZone": SESSION_TIME_ZONE,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        # Bronze rows are wide; the default (25) makes Delta's plans log a truncation warning.
        "spark.sql.debug.maxToStringFields": "200",
        # Spark keeps 100 compiled classes by default; a pipeline's many tables generate more
        # distinct classes per micro-batch than that (projections, predicates, whole-stage code
        # per table schema), so each micro-batch compiled them again with Janino. Static: only
        # a JVM this process starts gets it (the test suite measured 2,383 -> 421 compilations).
        _CODEGEN_CACHE: CODEGEN_CACHE_ENTRIES,
        _DRIVER_JAVA_OPTIONS: _log4j_options(),
    }
    threads = _local_threads(master)
    if threads is not None:
        # The defaults (200 shuffle partitions, 50 for Delta's snapshot state) are sized for
        # clusters; on one machine they only add scheduling overhead.
        settings["spark.sql.shuffle.partitions"] = str(threads)
        settings["spark.default.parallelism"] = str(threads)
        settings["spark.databricks.delta.snapshotPartitions"] = str(threads)
        settings["spark.driver.bindAddress"] = "127.0.0.1"
        settings["spark.driver.host"] = "127.0.0.1"
    return settings


def _create(builder: SparkSession.Builder, settings: Mapping[str, str]) -> SparkSession:
    for key, value in settings.items():
        builder = builder.config(key, value)
    started = time.monotonic()
    spark = builder.getOrCreate()
    atexit.unregister(_stop_at_exit)  # once per process, however many sessions it started
    atexit.register(_stop_at_exit)
    logger.info(
        "started Spark %s, master %s, in %.1f s",
        spark.version,
        spark.sparkContext.master,
        time.monotonic() - started,
    )
    return spark


def _stop_at_exit() -> None:
    """Stop this process's streaming queries, then its SparkContext, before the interpreter
    goes: a JVM left to die with its pipe while a micro-batch runs logs a burst of ERRORs
    (rejected tasks, a null DAGScheduler) over a shutdown that was asked for. Work in flight is
    redone by the next run, as after any stop (Delta's app transactions keep it exactly once)."""
    context = SparkContext._active_spark_context
    if context is None:
        return
    try:
        spark = SparkSession.builder.getOrCreate()
        for query in spark.streams.active:
            query.stop()
        context.stop()
    except Exception as exc:  # the JVM may already be gone; exiting anyway
        logger.debug("stopping Spark at exit: %s", exc)


def _ship_code(spark: SparkSession) -> None:
    """Give the executors medallion's packages as this process imported them, once per
    SparkContext: a zip on ``addPyFile``, which also goes first on the executors' ``sys.path``."""
    context = spark.sparkContext
    if getattr(context, "_medallion_code", None) is not None:
        return
    directory = Path(tempfile.mkdtemp(prefix="medallion-code-"))
    atexit.register(shutil.rmtree, directory, True)
    archive = directory / "medallion.zip"
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as out:
        for name in CODE_PACKAGES:
            package = Path(importlib.import_module(name).__file__ or "").parent
            for source in sorted(package.rglob("*.py")):
                out.write(source, Path(name) / source.relative_to(package))
    before = list(sys.path)
    context.addPyFile(str(archive))
    # addPyFile also puts the copy first on the driver's own path ("for tests in local mode");
    # the driver keeps importing from where it started, so module files and data stay found.
    sys.path[:] = before
    context._medallion_code = archive  # type: ignore[attr-defined]
    logger.info("shipped medallion's code to the executors (%s)", archive)


def _adopt(
    spark: SparkSession, runtime_conf: Mapping[str, str], catalog: HiveMetastore | None = None
) -> SparkSession:
    extensions = [e.strip() for e in (spark.conf.get("spark.sql.extensions", "") or "").split(",")]
    session_catalog = spark.conf.get("spark.sql.catalog.spark_catalog", "") or ""
    if DELTA_EXTENSION not in extensions or session_catalog != DELTA_CATALOG:
        raise ConfigError(
            "the running SparkSession is not set up for Delta Lake; start it with "
            f"--conf spark.sql.extensions={DELTA_EXTENSION} "
            f"--conf spark.sql.catalog.spark_catalog={DELTA_CATALOG} "
            "and Delta's jars (--jars with the files of .cache/jars, comma-separated)",
            key_path="spark.sql.extensions",
        )
    implementation = spark.conf.get(_CATALOG_IMPLEMENTATION, "in-memory") or "in-memory"
    if catalog is not None and implementation != "hive":
        raise ConfigError(
            f"spark.catalog is hive but the running SparkSession uses the {implementation} "
            "catalog; start it with the settings of pipeline.catalog.hive_settings "
            f"(--conf {_CATALOG_IMPLEMENTATION}=hive --conf spark.hadoop.javax.jdo.option."
            "ConnectionURL=... and the JDBC driver on --driver-class-path; docs/deploy.md)",
            key_path="spark.catalog",
        )
    spark.conf.set("spark.sql.session.timeZone", SESSION_TIME_ZONE)
    for key, value in runtime_conf.items():
        if spark.conf.isModifiable(key):
            spark.conf.set(key, value)
        else:
            logger.warning("ignoring %s for the running session: it is fixed at start-up", key)
    return spark


def _has_delta_commit(log_dir: LakePath) -> bool:
    if not log_dir.is_dir():
        return False
    return any(_COMMIT_FILE.match(p.name) for p in log_dir.iterdir())


def _catalog_locations(spark: SparkSession, schema: str) -> dict[str, Path | None]:
    """Map each table name of ``schema`` to its local location, from catalog metadata only.

    ``SHOW TABLE EXTENDED`` reads the catalog entries and does not open the Delta tables, so it
    works (and stays cheap) even when a registered directory has been deleted since.
    """
    rows = spark.sql(_SHOW_TABLES.format(schema=quote_identifier(schema))).collect()
    locations: dict[str, Path | None] = {}
    for row in rows:
        if row["isTemporary"]:
            continue
        location = None
        for line in str(row["information"] or "").splitlines():
            if line.startswith("Location: "):
                location = _local_path(line.removeprefix("Location: ").strip())
        locations[str(row["tableName"]).lower()] = location
    return locations


def _local_path(location: str) -> Path | None:
    # Hadoop prints local paths as file:/a/b, unescaped; other schemes never match a local dir.
    if location.startswith("/"):
        return Path(location)
    match = _FILE_URI.match(location)
    return Path(match.group("path")) if match else None
