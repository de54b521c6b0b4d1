"""A real Spark standalone cluster for the tests (pytest plugin, listed in ``tests/conftest.py``).

``spark_cluster`` (module-scoped) starts a master and two workers from the pyspark package's own
``bin/spark-class`` (``org.apache.spark.deploy.master.Master`` / ``...worker.Worker``): loopback
only, one core and a little memory per worker, the master's REST server off, logs and work
directories under a temp dir. It waits until both workers have registered and stops all three
JVMs at the end of the module. Applications reach it at :attr:`SparkCluster.master_url` with
:data:`CLUSTER_APP_CONF` (an executor per worker, small memory).

Java or ``spark-class`` missing fails the module, naming ``make bootstrap``; it never skips.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

WORKERS = 2
WORKER_MEMORY = "768m"
"""What each worker offers its executors (one executor of :data:`CLUSTER_APP_CONF` fits)."""
DAEMON_MEMORY = "256m"
"""Heap of the master and worker JVMs themselves (they only schedule)."""
SHORT_LIVED_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""Options of the module's JVMs (daemons, executors, the drivers of one run): each lives a few
minutes, and C2 compilation and G1's threads cost more in warm-up than they return (a Spark
JVM's start: -34% CPU with these, docs/benchmarks.md, "The test suite"). The suite's shared
sessions, which live through a whole worker, keep the JDK defaults."""
_STARTUP_SECONDS = 240.0  # a loaded 2-core machine starts a JVM in 5-40 s
_START_ATTEMPTS = 3  # a free port can be taken between choosing it and the master binding it
_MASTER_UP = re.compile(r"I have been elected leader|Starting Spark master at spark://")
_WORKER_UP = re.compile(r"Successfully registered with master")
_FATAL = re.compile(r"Exception in thread \"main\"|Failed to bind|Address already in use")

CLUSTER_APP_CONF: dict[str, str] = {
    # Executors reach the driver on loopback, like the daemons.
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.executor.memory": "512m",
    "spark.executor.cores": "1",
    "spark.driver.memory": "1g",
    # Tiny data: one shuffle partition and one Delta snapshot partition per executor.
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.adaptive.enabled": "false",
    "spark.sql.codegen.wholeStage": "false",
    "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
    "spark.executor.extraJavaOptions": SHORT_LIVED_JVM,
}
"""Settings of an application the tests run on the cluster."""


@dataclass
class SparkCluster:
    """A running standalone cluster.

    Attributes:
        master_url: ``spark://127.0.0.1:<port>``.
        work_dirs: Each worker's work directory (``app-*/<executor>/stderr`` per application).
        logs: The master's and the workers' log files.
    """

    master_url: str
    work_dirs: list[Path]
    logs: list[Path] = field(default_factory=list)

    def applications(self, worker: int) -> list[str]:
        """The applications that ran executors on worker ``worker`` (0-based)."""
        return sorted(p.name for p in self.work_dirs[worker].glob("app-*"))


def _spark_class() -> Path:
    try:
        import pyspark
    except ImportError:
        pytest.fail("pyspark is not installed: run `make bootstrap`", pytrace=False)
    script = Path(pyspark.__file__).parent / "bin" / "spark-class"
    if not script.is_file():
        pytest.fail(f"{script} is missing: run `make bootstrap`", pytrace=False)
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.fail("java is not installed: run `make bootstrap`", pytrace=False)
    return script


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _daemon_env(base: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(
        {
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
            "SPARK_LOG_DIR": str(base),
            # The REST submission server binds a fixed port (6066); nothing here uses it.
            "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
            "SPARK_DAEMON_JAVA_OPTS": SHORT_LIVED_JVM,
        }
    )
    return env


def _start(args: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        # A session of its own, so that stopping it stops the JVM spark-class execs into.
        return subprocess.Popen(
            args,
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )


def _wait_for(
    process: subprocess.Popen[bytes], log: Path, ready: re.Pattern[str], deadline: float
) -> str | None:
    """None once ``ready`` is in the log; else why not (the process ended, or time ran out)."""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace")
        if ready.search(text):
            return None
        if process.poll() is not None or _FATAL.search(text):
            return f"exited with {process.poll()}:\n{text[-3000:]}"
        time.sleep(0.25)
    return f"not ready after {_STARTUP_SECONDS:.0f} s:\n{log.read_text(errors='replace')[-3000:]}"


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)


@pytest.fixture(scope="module")
def spark_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparkCluster]:
    """A master and two workers on loopback, stopped at the end of the module."""
    script = _spark_class()
    base = tmp_path_factory.mktemp("spark-cluster")
    env = _daemon_env(base)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        errors: list[str] = []
        for attempt in range(_START_ATTEMPTS):
            port = _free_port()
            log = base / f"master-{attempt}.log"
            master = _start(
                [
                    str(script),
                    "org.apache.spark.deploy.master.Master",
                    "--host",
                    "127.0.0.1",
                    "--port",
                    str(port),
                    "--webui-port",
                    "0",
                ],
                log,
                env,
            )
            processes.append(master)
            failure = _wait_for(master, log, _MASTER_UP, time.monotonic() + _STARTUP_SECONDS)
            if failure is None:
                break
            _stop(master)
            errors.append(f"master on port {port} {failure}")
        else:
            pytest.fail("the Spark master did not start:\n" + "\n".join(errors), pytrace=False)
        cluster = SparkCluster(f"spark://127.0.0.1:{port}", [], [log])
        workers = []
        for number in range(1, WORKERS + 1):
            work_dir = base / f"worker-{number}"
            work_dir.mkdir()
            log = base / f"worker-{number}.log"
            worker = _start(
                [
                    str(script),
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    "1",
                    "--memory",
                    WORKER_MEMORY,
                    "--webui-port",
                    "0",
                    "--work-dir",
                    str(work_dir),
                    cluster.master_url,
                ],
                log,
                env,
            )
            processes.append(worker)
            workers.append((worker, log))
            cluster.work_dirs.append(work_dir)
            cluster.logs.append(log)
        deadline = time.monotonic() + _STARTUP_SECONDS
        for worker, log in workers:
            failure = _wait_for(worker, log, _WORKER_UP, deadline)
            if failure is not None:
                pytest.fail(f"a Spark worker did not register: {failure}", pytrace=False)
        yield cluster
    finally:
        for process in reversed(processes):  # workers first: the master outlives them
            _stop(process)
