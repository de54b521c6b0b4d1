"""The one SparkSession of a test run (pytest plugin, listed in ``tests/conftest.py``).

``spark`` is session-scoped: the JVM starts once (about 5 s) and every test shares it, so tests
must not stop it or change static settings. Tables live under per-test directories
(``tmp_path``); register them by name with :func:`pipeline.spark.register_lake_tables`, which
re-points a name that an earlier test registered elsewhere.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

TEST_MASTER = "local[2]"
TEST_SPARK_CONF: dict[str, str] = {
    # Test data is tiny: one task per shuffle and per Delta snapshot state is enough, and a
    # second one is only scheduling overhead (the two xdist workers already fill both cores).
    "spark.sql.shuffle.partitions": "1",
    "spark.default.parallelism": "1",
    "spark.databricks.delta.snapshotPartitions": "1",
    # Compiling whole-stage code costs more than it saves on a few rows. With the settings
    # above, about 9% less CPU (test_silver_transactions.py: 306 s -> 279 s).
    "spark.sql.codegen.wholeStage": "false",
    # Adaptive execution re-plans each query stage by stage; with one shuffle partition there is
    # nothing to coalesce or split, only the re-planning (8-9% of the JVM's CPU over silver runs,
    # docs/benchmarks.md, "The test suite"). Streaming queries run without it anyway.
    "spark.sql.adaptive.enabled": "false",
    # Without whole-stage codegen Spark still compiles a class per projection, predicate and
    # ordering; its cache of compiled classes (100 by default) is far smaller than what a
    # worker's many small plans generate, so most were compiled again (test_silver_merge.py:
    # 2,383 compilations, 421 with this cache; 258.9 -> 233.8 CPU s). Same classes, same
    # plans: only kept longer (docs/benchmarks.md, "The test suite").
    "spark.sql.codegen.cache.maxEntries": "4000",
    # 1 GiB ran out in one worker's session after ~6,000 stages (Java heap space, in
    # test_silver_transactions.py, 2,457 tests): compiled classes kept (above), the driver's
    # decoders' differential tests and the status store's jobs; 2 workers x 2 GiB fit easily.
    "spark.driver.memory": "2g",
}
"""Small settings for a 2-core machine; static ones only take effect at the first start."""

_START_SECONDS = pytest.StashKey[float]()


@pytest.fixture(scope="session")
def spark_lake_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Lake root of the shared session (``<tmp>/lake``); tests usually make their own lake."""
    return tmp_path_factory.mktemp("lake")


@pytest.fixture(scope="session")
def spark(request: pytest.FixtureRequest, spark_lake_root: Path) -> Iterator[SparkSession]:
    """The shared local SparkSession with Delta Lake, built by ``build_spark_session``.

    Fails (never skips) when Delta's jars or Java are missing, naming ``make bootstrap``.
    """
    # Imported here so tests that never touch Spark do not pay for importing pyspark.
    from pipeline.errors import NotInstalledError
    from pipeline.spark import build_spark_session, stop_spark_session
    from tests.fix_s3 import s3a_class_path

    started = time.monotonic()
    try:
        session = build_spark_session(
            master=TEST_MASTER,
            app_name="medallion-tests",
            lake_root=spark_lake_root,
            # The S3A jars on the class path, so the object-store tests need no JVM of their
            # own (tests/fix_s3.py); nothing loads them until a test reads an s3:// path.
            conf={**TEST_SPARK_CONF, **s3a_class_path()},
        )
    except NotInstalledError as exc:
        pytest.fail(f"cannot start Spark: {exc}", pytrace=False)
    request.config.stash[_START_SECONDS] = time.monotonic() - started
    yield session
    stop_spark_session()


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """Report how long the shared SparkSession took to start, if a test used it."""
    seconds = config.stash.get(_START_SECONDS, None)
    if seconds is not None:
        terminalreporter.write_line(
            f"medallion: SparkSession ({TEST_MASTER}) started in {seconds:.1f} s"
        )
