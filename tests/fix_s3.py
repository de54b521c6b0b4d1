"""A local S3-compatible server for the tests of a lake on object storage.

moto's server mode (``moto[server]`` from PyPI), installed by ``make bootstrap`` into a virtualenv
of its own, ``.cache/moto`` (``scripts/fetch_moto.sh``: moto's botocore pins an older
python-dateutil than the project's lock). It speaks the S3 REST API over HTTP, including the
conditional writes (``If-None-Match``) that delta-rs commits with.

``s3_server`` starts one server per test module on a free loopback port; a missing server
binary fails the test (never skips) and names ``make bootstrap``.

Spark reaches the server from the suite's shared session (``tests/fix_spark.py``), not from a JVM
of its own: :func:`s3a_class_path` puts the S3A jars on that session's class path when it starts
(a JVM cannot load them later), and :func:`s3a_bucket` gives it one bucket's settings at run time,
as :func:`pipeline.spark_storage.object_store_settings` writes them. The product's rule that a
local lake never loads the AWS SDK is about medallion's sessions; the suite's session only has
the jars on its class path, and nothing loads them until a test names an ``s3://`` path.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bronze.storage import ObjectPath, ObjectStoreOptions
from pipeline.errors import NotInstalledError
from pipeline.spark_storage import object_store_settings, with_object_store
from pipeline.sql import qualified, quote_identifier

__all__ = ["MOTO_DIR_ENV", "S3Server", "s3_server", "s3a_bucket", "s3a_class_path"]

MOTO_DIR_ENV = "MEDALLION_MOTO_DIR"
"""Directory of moto's virtualenv (``scripts/fetch_moto.sh`` reads it too)."""

_REPO_ROOT = Path(__file__).resolve().parents[1]
_START_TIMEOUT_SECONDS = 90.0
ACCESS_KEY = "medallion-test-key"
SECRET_KEY = "medallion-test-secret"  # moto accepts any pair; never a real credential


@dataclass(frozen=True)
class S3Server:
    """A running moto S3 server.

    Attributes:
        endpoint: Its URL (``http://127.0.0.1:<port>``).
        access_key: The access key the tests use.
        secret_key: The secret key the tests use.
    """

    endpoint: str
    access_key: str = ACCESS_KEY
    secret_key: str = SECRET_KEY

    def options(self) -> ObjectStoreOptions:
        """Options that reach this server (plain HTTP, the test keys)."""
        from pydantic import SecretStr

        return ObjectStoreOptions(
            endpoint=self.endpoint,
            region="us-east-1",
            allow_http=True,
            access_key_id=SecretStr(self.access_key),
            secret_access_key=SecretStr(self.secret_key),
        )

    def bucket(self, name: str) -> ObjectPath:
        """Create the bucket ``name`` (if new) and return its root."""
        import pyarrow.fs as pafs

        options = self.options()
        host = self.endpoint.removeprefix("http://")
        fs = pafs.S3FileSystem(
            endpoint_override=host,
            scheme="http",
            access_key=self.access_key,
            secret_key=self.secret_key,
            region="us-east-1",
            allow_bucket_creation=True,
        )
        fs.create_dir(name)
        return ObjectPath(name, "", options)


_CLASS_PATH = "spark.driver.extraClassPath"
_S3A_CLASS = "org.apache.hadoop.fs.s3a.S3AFileSystem"
_HADOOP = "spark.hadoop."


def s3a_class_path() -> dict[str, str]:
    """The driver class-path setting that carries the S3A jars, as medallion's own sessions get it
    for an ``s3://`` lake (:func:`pipeline.spark_storage.with_object_store`); empty when
    ``make bootstrap`` has not fetched them (the object-store tests then fail, naming it)."""
    try:
        settings = with_object_store({}, ObjectPath("class-path-probe"))
    except NotInstalledError:
        return {}
    return {_CLASS_PATH: settings[_CLASS_PATH]}


@contextlib.contextmanager
def s3a_bucket(spark: Any, root: ObjectPath) -> Iterator[list[str]]:
    """The shared session reaching ``root``'s bucket through S3A, for the ``with`` block.

    The bucket's Hadoop settings are :func:`~pipeline.spark_storage.object_store_settings` of
    ``root``, set on the running context's Hadoop configuration (where the ``spark.hadoop.*``
    settings of a new session end up). Afterwards the names registered at ``s3://`` locations
    are dropped from the session's catalog, so that no later test resolves a table of a server
    that is gone, and the bucket's settings are removed.

    Args:
        spark: The shared SparkSession.
        root: A location in a bucket of the test's S3 server; use a bucket name of its own
            (S3A keeps one file system per bucket for the JVM's life).

    Yields:
        A list that holds, after the block, the ``<schema>.<name>`` entries it dropped.
    """
    try:
        spark.sparkContext._jvm.java.lang.Class.forName(_S3A_CLASS)
    except Exception as exc:
        pytest.fail(
            f"the shared SparkSession cannot load {_S3A_CLASS} ({type(exc).__name__}): the S3A "
            "jars (.cache/s3a-jars) were not on its class path when it started; run make "
            "bootstrap",
            pytrace=False,
        )
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    settings = {k.removeprefix(_HADOOP): v for k, v in object_store_settings(root).items()}
    bucket_keys = [k for k in settings if k.startswith(f"fs.s3a.bucket.{root.bucket}.")]
    for key, value in settings.items():
        hadoop.set(key, value)
    dropped: list[str] = []
    try:
        yield dropped
    finally:
        dropped.extend(_drop_object_store_names(spark))
        for key in bucket_keys:
            hadoop.unset(key)


def _drop_object_store_names(spark: Any) -> list[str]:
    dropped: set[str] = set()
    out: list[str] = []
    for schema in ("bronze", "silver", "gold"):
        if not spark.catalog.databaseExists(schema):
            continue
        listed = spark.sql(f"SHOW TABLE EXTENDED IN {quote_identifier(schema)} LIKE '*'")
        for row in listed.collect():
            name, info = str(row["tableName"]), str(row["information"] or "")
            # Gold's views are named after the silver tables they read.
            if row["isTemporary"] or ("s3://" not in info and name not in dropped):
                continue
            kind = "VIEW" if "Type: VIEW" in info else "TABLE"
            spark.sql(f"DROP {kind} IF EXISTS {qualified(schema, name)}")
            dropped.add(name)
            out.append(f"{schema}.{name}")
    return out


def moto_server_binary() -> Path:
    """The ``moto_server`` script of the virtualenv ``make bootstrap`` built."""
    configured = os.environ.get(MOTO_DIR_ENV)
    base = Path(configured) if configured else _REPO_ROOT / ".cache" / "moto"
    return base / "bin" / "moto_server"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True  # any HTTP answer means the server is up
    except OSError:
        return False


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A moto S3 server on a free loopback port, for one test module."""
    binary = moto_server_binary()
    if not binary.exists():
        pytest.fail(
            f"moto's S3 server is not installed ({binary} is missing): run make bootstrap",
            pytrace=False,
        )
    log_path = tmp_path_factory.mktemp("moto") / "moto.log"
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            [str(binary), "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while not _answers(f"{endpoint}/moto-api/"):
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(
                    f"moto_server did not start on {endpoint}: {log_path.read_text()[-2000:]}",
                    pytrace=False,
                )
            time.sleep(0.2)
        yield S3Server(endpoint)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
