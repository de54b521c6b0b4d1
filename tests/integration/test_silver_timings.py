"""silver/timings: the Spark jobs of a micro-batch counted per stage."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from silver.timings import BatchTimings, job_stage, spark_jobs_started

pytestmark = [pytest.mark.spark]


def _started(spark: Any) -> int:
    n = spark_jobs_started(spark)
    assert n is not None
    return n


def test_each_stage_counts_its_own_jobs_and_the_group_is_restored(
    spark: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="silver.timings")
    context = spark.sparkContext
    context.setLocalProperty("spark.jobGroup.id", "outer-group")
    timings = BatchTimings(7, spark=spark)
    expected: dict[str, int] = {}
    timings.activate()
    try:
        before = _started(spark)
        with timings.stage("one"):
            spark.range(10).collect()
        expected["one"] = _started(spark) - before
        with timings.stage("two"):
            before = _started(spark)
            with timings.jobs_of("inner", "t"):
                spark.range(5).collect()
                spark.range(6).collect()
            expected["inner"] = _started(spark) - before
            before = _started(spark)
            spark.range(3).collect()
            expected["two"] = _started(spark) - before
        before = _started(spark)
        with job_stage("gold"):  # the active micro-batch's, as gold.refresh counts its stages
            spark.range(4).collect()
        expected["gold"] = _started(spark) - before
    finally:
        timings.deactivate()
    with job_stage("gold"):  # no micro-batch active: counted nowhere
        spark.range(4).collect()
    assert context.getLocalProperty("spark.jobGroup.id") == "outer-group"
    context.setLocalProperty("spark.jobGroup.id", None)
    assert all(n >= 1 for n in expected.values()), expected
    assert timings.stage_jobs == expected  # a nested block's jobs are its own, not the outer's
    timings.jobs = sum(expected.values()) + 2
    line = timings.describe(events=0)
    assert "Spark jobs per stage: " in line
    assert f"inner {expected['inner']}" in line and "other 2" in line
    # At DEBUG each block names its jobs by their stages' call sites.
    named = [r.getMessage() for r in caplog.records if r.name == "silver.timings"]
    assert any(m.startswith("medallion-7-one-") and "job " in m for m in named), named
