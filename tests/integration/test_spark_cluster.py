"""``medallion run`` on a real Spark standalone cluster with a Hive metastore in PostgreSQL.

One pipeline, two lakes with the same bronze (captured once from the tests' real PostgreSQL):

* the **cluster** lake: ``medallion run`` in a child process with ``spark.master`` the
  :func:`~tests.fix_cluster.spark_cluster` (master + two workers, executors on both) and
  ``spark.catalog: hive``, the metastore a fresh database of the same PostgreSQL;
* the **local** lake: :func:`pipeline.orchestration.run_pipeline` in this process, on the shared
  ``local[2]`` session and its in-memory catalog.

Then a NEW Spark application (a second child process, ``local[1]``, the same metastore, an
empty lake root so it registers nothing itself) reads ``silver.*`` and ``gold.*`` by name. The
tests check that silver and gold are the same in both lakes, that gold equals the source table
read with psycopg, that executors ran on both workers, and that the names, the views' cut
properties and the rows are in the metastore.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import Any

import psycopg
import pytest
import yaml
from psycopg import sql

from pipeline.config import load_config
from pipeline.orchestration import land_sources, run_pipeline
from tests.fix_cluster import CLUSTER_APP_CONF, SHORT_LIVED_JVM, SparkCluster
from tests.fix_spark import TEST_SPARK_CONF
from tests.integration.test_cli import titled
from tests.integration.test_pg_capture import Pg, pg_corner, raw_config

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.delta, pytest.mark.slow]

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLES = ("customers", "orders")
APPLIED_AT = "_cdc_updated_at"
_CHILD_TIMEOUT = 420  # below pytest-timeout's 600 s, so a hang shows the child's logs


@dataclass
class Runs:
    """What the module's two pipeline runs and the reader left behind."""

    pg: Pg
    cluster_lake: Path
    local_lake: Path
    cluster_gold: list[dict[str, Any]]
    reader: dict[str, Any]


def _child_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH")) if p)
    return env


def _child(args: list[str], cwd: Path, name: str) -> str:
    """Run ``python <args>``; its stdout, failing with the tail of its logs if it fails."""
    out, err = cwd / f"{name}.stdout", cwd / f"{name}.stderr"
    with out.open("w") as stdout, err.open("w") as stderr:
        process = subprocess.Popen(
            [sys.executable, *args],
            cwd=cwd,
            env=_child_env(),
            stdout=stdout,
            stderr=stderr,
            stdin=subprocess.DEVNULL,
        )
        try:
            code = process.wait(timeout=_CHILD_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            code = None
    if code != 0:
        pytest.fail(
            f"{name} {'timed out' if code is None else f'exited with {code}'}:\n"
            f"{out.read_text()[-3000:]}\n{err.read_text()[-6000:]}",
            pytrace=False,
        )
    return out.read_text()


@pytest.fixture(scope="module")
def pg_module(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


@pytest.fixture(scope="module")
def metastore_url(pg_dsn: str) -> Iterator[str]:
    """A fresh database for the metastore, dropped at the end."""
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    name = f"metastore_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    yield f"jdbc:postgresql://{info.get('host', '127.0.0.1')}:{info.get('port', 5432)}/{name}"
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


def _write_config(directory: Path, pg: Pg, spark: dict[str, Any], lake: str = "lake") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "pipeline.yaml"
    path.write_text(
        yaml.safe_dump({"lake": {"root": lake}, "spark": spark, "sources": [raw_config(pg)]})
    )
    return path


def _source_changes(pg: Pg) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.customers (id int PRIMARY KEY, name text NOT NULL, vip boolean)",
        f"CREATE TABLE {s}.orders (id int PRIMARY KEY, customer int, amount numeric(10,2),"
        " note text)",
        f"INSERT INTO {s}.customers VALUES (1, 'Ada', true), (2, 'Grace', false),"
        " (3, 'Edsger', NULL)",
        f"INSERT INTO {s}.orders VALUES (10, 1, 12.50, 'first'), (11, 2, 3.99, NULL),"
        " (12, 3, 100.00, 'big')",
    )


def _streamed_changes(pg: Pg) -> None:
    s = pg.schema
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        with conn.transaction():
            conn.execute(f"UPDATE {s}.customers SET vip = true WHERE id = 2")
            conn.execute(f"INSERT INTO {s}.orders VALUES (13, 2, 7.25, 'second')")
        with conn.transaction():
            conn.execute(f"DELETE FROM {s}.orders WHERE id = 11")
            conn.execute(f"UPDATE {s}.orders SET amount = 99.99, note = 'fixed' WHERE id = 12")
        conn.execute(f"INSERT INTO {s}.customers VALUES (4, 'Barbara', false)")
        conn.execute(f"DELETE FROM {s}.customers WHERE id = 3")


_READER = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    from pipeline.catalog import HiveMetastore
    from pipeline.spark import build_spark_session

    url, user, empty_lake, conf = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
    spark = build_spark_session(
        master="local[1]", app_name="medallion-reader", lake_root=Path(empty_lake), conf=conf,
        catalog=HiveMetastore(url=url, user=user),
    )
    out = {"implementation": spark.conf.get("spark.sql.catalogImplementation"), "tables": {},
           "rows": {}, "properties": {}}
    for schema in ("silver", "gold"):
        out["tables"][schema] = sorted(
            (t.name, t.tableType) for t in spark.catalog.listTables(schema))
        for name, _kind in out["tables"][schema]:
            rows = spark.sql(f"SELECT * FROM {schema}.`{name}`").collect()
            out["rows"][f"{schema}.{name}"] = sorted(
                json.dumps(r.asDict(), sort_keys=True, default=str) for r in rows)
    for name, _kind in out["tables"]["gold"]:
        props = spark.sql(f"SHOW TBLPROPERTIES gold.`{name}`").collect()
        out["properties"][name] = {r["key"]: r["value"] for r in props}
    print("READER " + json.dumps(out))
    """
)


@pytest.fixture(scope="module")
def runs(
    spark: Any,
    spark_cluster: SparkCluster,
    pg_module: Pg,
    metastore_url: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Runs:
    base = tmp_path_factory.mktemp("cluster-runs")
    pg = pg_module
    user = str(psycopg.conninfo.conninfo_to_dict(pg.dsn).get("user", "postgres"))
    _source_changes(pg)
    cluster_config = _write_config(
        base / "cluster",
        pg,
        {
            "master": spark_cluster.master_url,
            "app.name": "medallion-cluster-test",
            "conf": CLUSTER_APP_CONF,
            "catalog": "hive",
            "metastore.url": metastore_url,
            "metastore.user": user,
        },
    )
    config = load_config(cluster_config)
    land_sources(config)  # the snapshot
    _streamed_changes(pg)
    land_sources(config)  # the streamed transactions
    cluster_lake = base / "cluster" / "lake"
    local_lake = base / "local" / "lake"
    shutil.copytree(cluster_lake / "bronze", local_lake / "bronze")

    stdout = _child(
        [
            "-m",
            "pipeline.cli",
            "--config",
            str(cluster_config),
            "--output",
            "json",
            "run",
            "--once",
            "--no-quality",
        ],
        base,
        "cluster-run",
    )
    cluster_gold = titled(stdout, "gold")

    local_config = _write_config(base / "local", pg, {"master": "local[2]"})
    run_pipeline(load_config(local_config), run_checks=False)

    empty_lake = base / "reader-lake"
    empty_lake.mkdir()
    conf = {
        **TEST_SPARK_CONF,
        "spark.driver.memory": "512m",
        "spark.driver.extraJavaOptions": SHORT_LIVED_JVM,
    }
    reader = _child(
        ["-c", _READER, metastore_url, user, str(empty_lake), json.dumps(conf)], base, "reader"
    )
    line = next(x for x in reader.splitlines() if x.startswith("READER "))
    found = json.loads(line.removeprefix("READER "))
    return Runs(pg, cluster_lake, local_lake, cluster_gold, found)


def _silver_name(pg: Pg, table: str) -> str:
    return f"pg__{pg.schema}__{table}"


def _frame_rows(frame: Any) -> list[str]:
    return sorted(json.dumps(r.asDict(), sort_keys=True, default=str) for r in frame.collect())


def _source_rows(pg: Pg, table: str) -> list[dict[str, Any]]:
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        cursor = conn.execute(
            sql.SQL("SELECT * FROM {}.{}").format(sql.Identifier(pg.schema), sql.Identifier(table))
        )
        names = [c.name for c in cursor.description or ()]
        return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _as_json(rows: list[dict[str, Any]]) -> list[str]:
    def plain(value: Any) -> Any:
        return str(value) if isinstance(value, Decimal) else value

    return sorted(
        json.dumps({k: plain(v) for k, v in row.items()}, sort_keys=True, default=str)
        for row in rows
    )


def test_the_cluster_run_equals_the_local_run_and_the_source(spark: Any, runs: Runs) -> None:
    gold = {d["source"]: d for d in runs.cluster_gold}
    assert gold["pg"]["status"] == "moved", runs.cluster_gold
    for table in TABLES:
        name = _silver_name(runs.pg, table)
        cluster = spark.read.format("delta").load(str(runs.cluster_lake / "silver" / name))
        local = spark.read.format("delta").load(str(runs.local_lake / "silver" / name))
        assert sorted(cluster.columns) == sorted(local.columns)
        # When the row was applied is the one column two runs cannot share.
        columns = sorted(c for c in local.columns if c != APPLIED_AT)
        assert _frame_rows(cluster.select(*columns)) == _frame_rows(local.select(*columns)), (
            f"silver {name} differs between the cluster and local mode"
        )
        local_gold = _frame_rows(spark.table(f"gold.{name}"))
        assert runs.reader["rows"][f"gold.{name}"] == local_gold
        assert local_gold == _as_json(_source_rows(runs.pg, table))


def test_executors_ran_on_both_workers(spark_cluster: SparkCluster, runs: Runs) -> None:
    assert runs.cluster_gold  # the run happened
    for worker in range(len(spark_cluster.work_dirs)):
        assert spark_cluster.applications(worker), f"no executor ran on worker {worker + 1}"


def test_a_new_application_sees_silver_and_gold_in_the_metastore(runs: Runs) -> None:
    reader = runs.reader
    assert reader["implementation"] == "hive"
    names = {_silver_name(runs.pg, t) for t in TABLES}
    assert {n for n, _k in reader["tables"]["silver"]} >= names
    assert {k for n, k in reader["tables"]["silver"] if n in names} == {"EXTERNAL"}
    assert {(n, k) for n, k in reader["tables"]["gold"] if n in names} == {
        (n, "VIEW") for n in names
    }
    for name in names:
        silver_rows = [json.loads(r) for r in reader["rows"][f"silver.{name}"]]
        live = [r for r in silver_rows if not r["_cdc_deleted"]]
        assert len(live) == len(reader["rows"][f"gold.{name}"])
        properties = reader["properties"][name]
        assert properties["medallion.source"] == "pg"
        assert int(properties["medallion.silverVersion"]) >= 0
