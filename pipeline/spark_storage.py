"""Spark's side of a lake on S3-compatible object storage: the s3a connector and its settings.

When the lake root is an ``s3://bucket/prefix`` location (:class:`bronze.storage.ObjectPath`),
:func:`with_object_store` adds to a new session's settings:

* Hadoop's S3A connector: ``hadoop-aws`` of the exact Hadoop version PySpark ships and its AWS SDK
  bundle, from ``.cache/s3a-jars`` (``scripts/fetch_s3a_jars.sh``, run by ``make bootstrap``).
  They go on the driver's and executors' class path only for such a lake: a local lake never
  loads the SDK.
* ``s3://`` served by S3A (``fs.s3.impl``), so delta-rs (which writes bronze) and Spark (silver,
  gold) name every table by the same URI.
* The bucket's endpoint, region, plain HTTP and path-style access as per-bucket S3A settings
  (``fs.s3a.bucket.<bucket>.*``), and the access keys only when the config read them from secret
  files; otherwise S3A's default credential chain reads ``AWS_ACCESS_KEY_ID``/
  ``AWS_SECRET_ACCESS_KEY`` (or an instance profile) itself. Spark redacts settings named like
  ``secret`` or ``access.key`` in its UI and logs (``spark.redaction.regex``).

Delta on Spark commits to ``s3``/``s3a`` paths through its default S3 LogStore,
``S3SingleDriverLogStore``: it makes concurrent commits to one table safe only within one Spark
driver (it serialises them in that JVM and relies on S3's read-after-write consistency). That fits
medallion, where one silver job per lake writes silver and gold; two Spark applications writing the
same silver table at once are not supported on S3 (use ``S3DynamoDBLogStore`` from
``delta-storage-s3-dynamodb`` for that). Bronze is written only by delta-rs (conditional puts, see
``bronze/storage.py``); Spark only reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from bronze.storage import LakePath, ObjectPath
from pipeline.errors import NotInstalledError

__all__ = ["S3A_JARS_DIR_ENV", "default_s3a_jars_dir", "object_store_settings", "with_object_store"]

S3A_JARS_DIR_ENV = "MEDALLION_S3A_JARS_DIR"
"""Environment variable naming the directory of the S3A jars (``scripts/fetch_s3a_jars.sh``)."""

_REPO_ROOT = Path(__file__).resolve().parents[1]
_S3A = "org.apache.hadoop.fs.s3a.S3AFileSystem"
_S3A_ABSTRACT = "org.apache.hadoop.fs.s3a.S3A"
_HADOOP = "spark.hadoop."
_DRIVER_CLASS_PATH = "spark.driver.extraClassPath"
_EXECUTOR_CLASS_PATH = "spark.executor.extraClassPath"


def default_s3a_jars_dir() -> Path:
    """Where the S3A jars are: ``$MEDALLION_S3A_JARS_DIR``, else ``<repo>/.cache/s3a-jars``."""
    configured = os.environ.get(S3A_JARS_DIR_ENV)
    return Path(configured) if configured else _REPO_ROOT / ".cache" / "s3a-jars"


def _s3a_jars(directory: Path) -> list[Path]:
    jars = sorted(directory.glob("*.jar")) if directory.is_dir() else []
    if not any(jar.name.startswith("hadoop-aws-") for jar in jars):
        raise NotInstalledError(
            f"the S3A connector (hadoop-aws) is not in {directory}, and the lake is on object "
            f"storage: run make bootstrap (or point ${S3A_JARS_DIR_ENV} at hadoop-aws and its "
            "AWS SDK bundle)"
        )
    return jars


def object_store_settings(lake_root: LakePath) -> dict[str, str]:
    """The Hadoop settings (``spark.hadoop.*``) that let Spark read and write ``lake_root``.

    Args:
        lake_root: The lake root.

    Returns:
        Nothing for a local lake; for an ``s3://`` lake, S3A for ``s3://`` and the bucket's
        endpoint, region, HTTP and credential settings.
    """
    if not isinstance(lake_root, ObjectPath):
        return {}
    options = lake_root.options
    bucket = f"{_HADOOP}fs.s3a.bucket.{lake_root.bucket}."
    settings = {
        f"{_HADOOP}fs.s3.impl": _S3A,
        f"{_HADOOP}fs.s3a.impl": _S3A,
        # Streaming checkpoints go through FileContext, which needs the AbstractFileSystem too.
        f"{_HADOOP}fs.AbstractFileSystem.s3.impl": _S3A_ABSTRACT,
        f"{_HADOOP}fs.AbstractFileSystem.s3a.impl": _S3A_ABSTRACT,
    }
    if options.endpoint:
        settings[f"{bucket}endpoint"] = options.endpoint
        # S3-compatible servers address buckets by path; virtual hosts need DNS per bucket.
        settings[f"{bucket}path.style.access"] = "true"
        if options.endpoint.startswith("http://"):
            settings[f"{bucket}connection.ssl.enabled"] = "false"
    if options.region:
        settings[f"{bucket}endpoint.region"] = options.region
    elif options.endpoint:
        # Without a region S3A probes AWS to find the bucket's; a private endpoint has none.
        settings[f"{bucket}endpoint.region"] = os.environ.get("AWS_REGION", "us-east-1")
    if options.access_key_id is not None and options.secret_access_key is not None:
        settings[f"{bucket}access.key"] = options.access_key_id.get_secret_value()
        settings[f"{bucket}secret.key"] = options.secret_access_key.get_secret_value()
    return settings


def with_object_store(
    settings: Mapping[str, str], lake_root: LakePath, jars_dir: Path | None = None
) -> dict[str, str]:
    """``settings`` of a new session plus what an object-store lake needs (unchanged otherwise).

    Args:
        settings: The session's settings so far (``spark.jars`` comma-separated).
        lake_root: The lake root.
        jars_dir: Directory of the S3A jars; default :func:`default_s3a_jars_dir`.

    Returns:
        A new mapping: the S3A jars appended to the driver's and executors' class path
        (``spark.{driver,executor}.extraClassPath``) and :func:`object_store_settings`.

    Raises:
        NotInstalledError: The lake is on object storage and the S3A jars are missing.
    """
    merged = dict(settings)
    if not isinstance(lake_root, ObjectPath):
        return merged
    jars = [
        str(jar) for jar in _s3a_jars(jars_dir if jars_dir is not None else default_s3a_jars_dir())
    ]
    # On the class path, not spark.jars: a jar on spark.jars is copied to every executor (in
    # local mode too, into the executor's directory), and the SDK bundle is over 600 MB. The
    # executors of a cluster need the same files at the same path.
    for key in (_DRIVER_CLASS_PATH, _EXECUTOR_CLASS_PATH):
        listed = [j for j in merged.get(key, "").split(os.pathsep) if j]
        merged[key] = os.pathsep.join(listed + jars)
    merged.update(object_store_settings(lake_root))
    return merged
