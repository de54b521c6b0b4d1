"""The SparkSession from pipeline/spark.py: Delta, offline jars, tables by path and by name."""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlparse

import pytest

from pipeline.spark import (
    DELTA_CATALOG,
    DELTA_EXTENSION,
    build_spark_session,
    register_lake_tables,
)
from pipeline.sql import qualified, quote_identifier, quote_string_literal
from tests.fix_spark import TEST_SPARK_CONF

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

pytestmark = pytest.mark.spark

REPO_ROOT = Path(__file__).resolve().parents[2]


def _log_files(table: Path) -> list[str]:
    return sorted(p.name for p in (table / "_delta_log").iterdir())


def _write(spark: SparkSession, path: Path, rows: list[tuple[int, str]]) -> None:
    df = spark.createDataFrame(rows, "id INT, name STRING")
    df.write.format("delta").mode("overwrite").save(str(path))


def test_session_is_configured_for_delta(spark: SparkSession) -> None:
    extensions = [e.strip() for e in (spark.conf.get("spark.sql.extensions") or "").split(",")]
    assert DELTA_EXTENSION in extensions
    assert spark.conf.get("spark.sql.catalog.spark_catalog") == DELTA_CATALOG
    assert spark.conf.get("spark.sql.catalogImplementation") == "in-memory"
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert (
        spark.conf.get("spark.sql.shuffle.partitions")
        == TEST_SPARK_CONF["spark.sql.shuffle.partitions"]
    )
    assert spark.sparkContext.master == "local[2]"
    assert (
        spark.sparkContext.getConf().get("spark.driver.memory")
        == TEST_SPARK_CONF["spark.driver.memory"]
    )
    assert spark.sparkContext.uiWebUrl is None  # spark.ui.enabled=false


def test_jars_are_local_files_and_no_packages(spark: SparkSession) -> None:
    conf = spark.sparkContext.getConf()
    assert conf.get("spark.jars.packages") in (None, "")
    assert not spark.conf.get("spark.jars.packages", "")
    jars = [j for j in (conf.get("spark.jars") or "").split(",") if j]
    assert any(Path(urlparse(j).path).name.startswith("delta-spark_") for j in jars), jars
    assert any(Path(urlparse(j).path).name.startswith("delta-storage-") for j in jars), jars
    for jar in jars:
        url = urlparse(jar)
        assert url.scheme in ("", "file"), f"{jar} is not a local file"
        assert Path(url.path).is_file(), f"{jar} does not exist"


def test_delta_table_by_path_and_by_name(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    events = lake / "bronze" / "events"
    orders = lake / "silver" / "pg__public__orders"
    _write(spark, events, [(1, "a"), (2, "b")])
    _write(spark, orders, [(10, "x")])
    (lake / "gold" / "half_written" / "_delta_log").mkdir(parents=True)  # no commit yet
    logs_before = _log_files(events)

    names = register_lake_tables(spark, lake)

    assert names == ["bronze.events", "silver.pg__public__orders"]
    assert {r.namespace for r in spark.sql("SHOW SCHEMAS").collect()} >= {
        "bronze",
        "silver",
        "gold",
    }
    assert sorted(r.id for r in spark.table("bronze.events").collect()) == [1, 2]
    assert spark.table("silver.pg__public__orders").collect()[0].name == "x"
    assert spark.read.format("delta").load(str(events)).count() == 2
    assert spark.sql("SELECT count(*) FROM bronze.events").collect()[0][0] == 2
    # Registration only reads the log: a running writer never sees a conflicting commit.
    assert _log_files(events) == logs_before
    detail = spark.sql("DESCRIBE TABLE EXTENDED bronze.events").collect()
    assert {r.col_name: r.data_type for r in detail}.get("Type") == "EXTERNAL"

    # Writes through the name land in the same Delta table.
    spark.sql("INSERT INTO bronze.events VALUES (3, 'c')")
    assert spark.read.format("delta").load(str(events)).count() == 3

    # Registering again is a no-op; dropping the name never deletes data.
    assert register_lake_tables(spark, lake) == names
    spark.sql("DROP TABLE silver.pg__public__orders")
    assert spark.read.format("delta").load(str(orders)).count() == 1


def test_a_name_follows_the_latest_lake_root(spark: SparkSession, tmp_path: Path) -> None:
    # One SparkSession serves the whole test run, so names must not stick to an old lake.
    first, second = tmp_path / "one", tmp_path / "two"
    _write(spark, first / "gold" / "daily", [(1, "first")])
    _write(spark, second / "gold" / "daily", [(2, "second"), (3, "second")])
    register_lake_tables(spark, first)
    assert spark.table("gold.daily").count() == 1
    register_lake_tables(spark, second)
    assert spark.table("gold.daily").count() == 2
    shutil.rmtree(second)
    _write(spark, first / "gold" / "daily", [(4, "again")])
    register_lake_tables(spark, first)
    assert spark.table("gold.daily").collect()[0].name == "again"


def test_hostile_paths_and_names(
    spark: SparkSession, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lake = tmp_path / "it's a \\ lake; --"
    _write(spark, lake / "silver" / "src__db__orders", [(1, "ok")])
    _write(spark, lake / "silver" / "src__db__we`ird it's.x", [(2, "path only")])
    with caplog.at_level(logging.WARNING, logger="pipeline.spark"):
        assert register_lake_tables(spark, lake) == ["silver.src__db__orders"]
    assert "we`ird it's.x" in caplog.text and "letters, digits and _" in caplog.text
    assert spark.sql("SELECT name FROM " + qualified("silver", "src__db__orders")).collect() == [
        ("ok",)
    ]
    # A table Spark's catalog cannot name is still readable by path, also through SQL.
    odd = lake / "silver" / "src__db__we`ird it's.x"
    assert spark.sql("SELECT name FROM delta." + quote_identifier(str(odd))).collect() == [
        ("path only",)
    ]
    column = "we`ird col.x"
    row = spark.sql("SELECT 1 AS " + quote_identifier(column)).collect()[0]
    assert row.asDict() == {column: 1}
    for value in ("it's", "back\\slash", "\\'", "semi; -- colon"):
        assert spark.sql("SELECT " + quote_string_literal(value)).collect()[0][0] == value


def test_building_again_reuses_the_running_session(spark: SparkSession, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    _write(spark, lake / "bronze" / "offsets", [(1, "a")])
    again = build_spark_session(
        lake_root=lake,
        master="local[8]",
        # the test value again: runtime settings apply to the session every later test shares
        conf={"spark.sql.shuffle.partitions": TEST_SPARK_CONF["spark.sql.shuffle.partitions"]},
    )
    assert again.sparkContext is spark.sparkContext
    assert again.sparkContext.master == "local[2]"  # the running session's master wins
    assert again.table("bronze.offsets").count() == 1


def _offline_prefix() -> list[str]:
    """Command prefix that runs a program in a new network namespace with only loopback up."""
    ip = shutil.which(
        "ip", path=os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
    )
    if shutil.which("unshare") is None or ip is None:
        pytest.fail("unshare (util-linux) and ip (iproute2) are needed: run `make bootstrap`")
    userns = [] if os.geteuid() == 0 else ["--map-root-user"]
    probe = subprocess.run(
        ["unshare", *userns, "--net", "true"], capture_output=True, text=True, check=False
    )
    if probe.returncode != 0:
        pytest.skip(f"this kernel/sandbox refuses network namespaces: {probe.stderr.strip()}")
    return ["unshare", *userns, "--net", "sh", "-c", f'{ip} link set lo up && exec "$@"', "sh"]


_OFFLINE_JOB = """
import json, sys, time
from pathlib import Path
from pipeline.errors import NotInstalledError
from pipeline.spark import build_spark_session, register_lake_tables, stop_spark_session
from pyspark import SparkContext
lake, empty = Path(sys.argv[1]), Path(sys.argv[2])
out = {}
try:
    build_spark_session(master="local[1]", lake_root=lake, jars_dir=empty)
except NotInstalledError as exc:
    out["missing_jars_error"] = str(exc)
started = time.monotonic()
spark = build_spark_session(master="local[1]", lake_root=lake, conf={"spark.driver.memory": "512m"})
out["start_seconds"] = time.monotonic() - started
spark.range(3).write.format("delta").save(str(lake / "gold" / "numbers"))
out["registered"] = register_lake_tables(spark, lake)
out["count_by_name"] = spark.table("gold.numbers").count()
try:  # a failing task: Spark logs it at ERROR, which the console must still show
    spark.range(1).selectExpr("raise_error('task failure for the log test')").collect()
except Exception:
    out["task_failed"] = True
stop_spark_session()
out["stopped"] = SparkContext._active_spark_context is None
print("RESULT " + json.dumps(out))
"""


@pytest.mark.slow
def test_spark_starts_and_writes_delta_with_the_network_blocked(tmp_path: Path) -> None:
    # A fresh JVM in a network namespace with nothing but loopback: any attempt to resolve
    # packages from a repository would fail the start.
    empty = tmp_path / "no-jars"
    empty.mkdir()
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    result = subprocess.run(
        [
            *_offline_prefix(),
            sys.executable,
            "-c",
            _OFFLINE_JOB,
            str(tmp_path / "lake"),
            str(empty),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
        check=False,
    )
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert result.returncode == 0 and lines, result.stderr[-4000:]
    out = json.loads(lines[-1].removeprefix("RESULT "))
    assert "run make bootstrap" in out["missing_jars_error"]
    assert out["registered"] == ["gold.numbers"]
    assert out["count_by_name"] == 3
    assert out["stopped"] is True
    # The console of a driver medallion starts (pipeline/log4j2.properties): Spark's own lines
    # at ERROR and above only. The JVM's own startup line shows the stream is Spark's stderr.
    assert out["task_failed"] is True
    assert "Using incubator modules" in result.stderr, result.stderr[-4000:]
    spark_lines = [line for line in result.stderr.splitlines() if " spark." in line]
    assert [line for line in spark_lines if " ERROR " in line], result.stderr[-4000:]
    assert not [line for line in spark_lines if " WARN " in line or " INFO " in line]
    for noise in ("NativeCodeLoader", "Setting default log level", "default log4j profile"):
        assert noise not in result.stderr, result.stderr[-4000:]


def test_spark_logs_at_warn_only_when_this_process_logs_at_debug() -> None:
    from pipeline.spark import LOG4J_CONFIG, _log4j_options

    root = logging.getLogger()
    before = root.level
    try:
        root.setLevel(logging.INFO)
        assert _log4j_options().endswith("-Dmedallion.spark.log.level=ERROR")
        root.setLevel(logging.DEBUG)
        assert _log4j_options().endswith("-Dmedallion.spark.log.level=WARN")
    finally:
        root.setLevel(before)
    assert f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}" in _log4j_options()
    assert "${sys:medallion.spark.log.level:-ERROR}" in LOG4J_CONFIG.read_text(encoding="utf-8")
