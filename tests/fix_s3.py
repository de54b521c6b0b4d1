"""A local S3-compatible server for the tests of a lake on object storage.

moto's server mode (``moto[server]`` from PyPI), installed by ``make bootstrap`` into a virtualenv
of its own, ``.cache/moto`` (``scripts/fetch_moto.sh``: moto's botocore pins an older
python-dateutil than the project's lock). It speaks the S3 REST API over HTTP, including the
conditional writes (``If-None-Match``) that delta-rs commits with.

``s3_server`` starts one server per test module on a free loopback port; a missing server
binary fails the test (never skips) and names ``make bootstrap``.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from bronze.storage import ObjectPath, ObjectStoreOptions

__all__ = ["MOTO_DIR_ENV", "S3Server", "s3_server"]

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
