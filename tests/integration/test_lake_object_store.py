"""The lake on S3-compatible object storage (moto's S3 server, tests/fix_s3.py): bronze written by
the capture agent with delta-rs, silver and gold by Spark through s3a, gold materialized and
read back with ``deltalake``; compared with the real PostgreSQL source.

``medallion run`` runs in this process on the suite's shared session, which carries the S3A
jars on its class path (``tests/fix_spark.py``) and gets the bucket's settings as
:func:`pipeline.spark_storage.object_store_settings` writes them (:func:`tests.fix_s3.s3a_bucket`).
What a new session of an ``s3://`` lake is given (the jars on the class path, the settings as
``spark.hadoop.*``) is ``tests/unit/test_lake_storage.py``'s.
"""

from __future__ import annotations

import logging
import threading
import uuid
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

from bronze.storage import ObjectPath, is_delta_table, open_delta, storage_options
from gold.materialize import materialized_path
from pipeline.cli import cli
from pipeline.config import load_config
from pipeline.orchestration import land_sources
from tests.fix_s3 import S3Server, s3_server, s3a_bucket
from tests.fix_spark import TEST_MASTER
from tests.integration import test_pg_capture
from tests.integration.test_pg_capture import Pg

pg = test_pg_capture.pg  # the fixture: one private schema, slot and publication per test
s3 = s3_server  # one moto server for the module

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


def test_concurrent_delta_rs_writers_never_overwrite_a_commit(s3: S3Server) -> None:
    # Two writers from the same snapshot race for one version: the store's conditional put
    # refuses the second, which retries at the next version. Both appends survive.
    table = s3.bucket("race-bucket") / "t"
    write_deltalake(str(table), pa.table({"a": [0]}), storage_options=storage_options(table))
    first, second = open_delta(table), open_delta(table)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def append(snapshot: DeltaTable, value: int) -> None:
        barrier.wait()
        try:
            write_deltalake(snapshot, pa.table({"a": [value]}), mode="append")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=append, args=(t, v)) for t, v in ((first, 1), (second, 2))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    final = open_delta(table)
    assert final.version() == 2
    assert sorted(final.to_pyarrow_table().column("a").to_pylist()) == [0, 1, 2]


def _config_file(tmp_path: Path, s3: S3Server, root: ObjectPath, pg: Pg) -> Path:
    source = pg.config().model_dump(mode="json", by_alias=True, exclude_unset=True)
    raw = {
        "lake": {
            "root": str(root),
            "s3.endpoint": s3.endpoint,
            "s3.region": "us-east-1",
            "s3.allow.http": True,
            "s3.access.key.id": "${TEST_S3_KEY}",
            "s3.secret.access.key": "${TEST_S3_SECRET}",
        },
        "spark": {"master": TEST_MASTER},
        "gold": {"materialize": True},
        "quality": {"enabled": False},
        "sources": [source],
    }
    path = tmp_path / "pipeline.yaml"
    path.write_text(yaml.safe_dump(raw))
    return path


def test_postgres_to_gold_on_object_storage_equals_the_source(
    pg: Pg,
    s3: S3Server,
    spark: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.accounts (id int PRIMARY KEY, owner text, balance numeric(12,2))",
        f"INSERT INTO {s}.accounts VALUES (1, 'ann', 10.00), (2, 'bob', 20.50), (3, 'cy', 0)",
        f"UPDATE {s}.accounts SET balance = 99.99 WHERE id = 2",
        f"DELETE FROM {s}.accounts WHERE id = 3",
        f"INSERT INTO {s}.accounts VALUES (4, 'dee', -1.25)",
    )
    # A bucket of this run's own: the shared JVM keeps one S3A file system per bucket.
    root = s3.bucket(f"medallion-lake-{uuid.uuid4().hex[:8]}") / "lake"
    monkeypatch.setenv("TEST_S3_KEY", s3.access_key)
    monkeypatch.setenv("TEST_S3_SECRET", s3.secret_key)
    config_path = _config_file(tmp_path, s3, root, pg)
    config = load_config(config_path)
    assert config.lake.root == root

    # Bronze: the agent writes to the bucket with delta-rs; nothing lands on the local disk.
    (landed,) = land_sources(config, ["pg"])
    assert landed.landed > 0
    events = config.lake.bronze_path
    assert is_delta_table(events)
    bronze_version = open_delta(events).version()
    assert not [p for p in tmp_path.rglob("*") if "_delta_log" in p.parts]
    (again,) = land_sources(config, ["pg"])  # a replay lands nothing twice
    assert again.landed == 0 and open_delta(events).version() == bronze_version

    # Silver and gold: `medallion run`, Spark through s3a.
    caplog.set_level(logging.INFO)
    with s3a_bucket(spark, root) as dropped:
        run = CliRunner().invoke(cli, ["--config", str(config_path), "run"])
    assert run.exit_code == 0, (run.output[-5000:], run.exception)
    assert "silver" in run.output
    assert s3.secret_key not in run.output + caplog.text
    assert not [p for p in tmp_path.rglob("*") if "_delta_log" in p.parts]

    name = f"pg__{s}__accounts"
    # The names the run defined on s3:// (bronze's tables, gold's view) left the shared session
    # with the bucket's settings.
    assert {"bronze.events", f"gold.{name}"} <= set(dropped), dropped
    assert is_delta_table(root / "silver" / name)
    gold = open_delta(materialized_path(root, name))
    assert gold.protocol().min_reader_version == 1
    read = sorted((r["id"], r["owner"], r["balance"]) for r in gold.to_pyarrow_table().to_pylist())
    source = sorted(pg.query(f"SELECT id, owner, balance FROM {s}.accounts"))
    assert source == [
        (1, "ann", Decimal("10.00")),
        (2, "bob", Decimal("99.99")),
        (4, "dee", Decimal("-1.25")),
    ]
    assert read == source
