"""Checksum files for delta-rs commits, as Spark's Delta reads them: a view over a version that
has one is defined without a Spark job (one without runs the log replay's job), and Delta's own
validation of the file against the table's state passes (bronze/delta_checksum.py; its
accounting on hand-made logs is in ``tests/unit/test_delta_checksum.py``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from bronze.delta_checksum import version_checksum
from pipeline.sql import quote_identifier
from silver.timings import spark_jobs_started

pytestmark = [pytest.mark.spark]


def _jobs_of(spark: Any, sql: str) -> int:
    before = spark_jobs_started(spark)
    spark.sql(sql)
    after = spark_jobs_started(spark)
    assert before is not None and after is not None
    return after - before


def _validated(spark: Any, path: Path, version: int) -> bool:
    """Delta's own check of a version's checksum file against the state it replays (raises on
    a mismatch: ``checksum.mismatch.fatal`` is on by default)."""
    jvm = spark._jvm
    none = jvm.scala.Option.empty()
    log = jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path))
    snapshot = log.getSnapshotAt(version, none, none, False)
    assert snapshot.checksumOpt().isDefined(), f"Delta found no checksum of version {version}"
    empty = jvm.org.apache.spark.api.python.PythonUtils.toScalaMap(jvm.java.util.HashMap())
    return bool(snapshot.validateChecksum(empty))


def test_a_view_over_a_version_with_its_checksum_runs_no_job(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t"
    spark.range(6).selectExpr("id", "cast(id AS string) AS s").write.format("delta").save(
        str(path)
    )  # version 0, Spark's own checksum
    write_deltalake(str(path), pa.table({"id": [6, 7], "s": ["6", "7"]}), mode="append")
    DeltaTable(str(path)).delete("id = 1")  # version 2: a remove and a rewritten file
    write_deltalake(str(path), pa.table({"id": [8], "s": ["8"]}), mode="append")  # version 3
    table = quote_identifier(str(path))

    checksum = version_checksum(path, 3)
    assert checksum is not None and checksum.columns == ["id", "s"]
    with_checksum = _jobs_of(
        spark,
        f"CREATE OR REPLACE TEMPORARY VIEW checksummed AS SELECT * FROM delta.{table} "
        "VERSION AS OF 3",
    )
    # The same definition over a version without one: the measure can see a job.
    without = _jobs_of(
        spark,
        f"CREATE OR REPLACE TEMPORARY VIEW unchecksummed AS SELECT * FROM delta.{table} "
        "VERSION AS OF 2",
    )
    assert with_checksum == 0 and without > 0
    assert sorted(r.id for r in spark.table("checksummed").collect()) == [0, 2, 3, 4, 5, 6, 7, 8]
    # What Spark's next commit derives its own checksum from is right: Delta's check of it
    # against the replayed state.
    assert _validated(spark, path, 3)
