"""The suite's Spark JVMs run with the test JVM options (tests/fix_spark.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.fix_spark import TEST_JVM_OPTIONS

pytestmark = pytest.mark.spark


def test_the_shared_session_runs_with_the_test_jvm_options(spark: Any) -> None:
    runtime = spark.sparkContext._jvm.java.lang.management.ManagementFactory.getRuntimeMXBean()
    arguments = list(runtime.getInputArguments())
    assert set(TEST_JVM_OPTIONS.split()) <= set(arguments), arguments
