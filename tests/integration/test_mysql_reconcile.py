"""Reconciliation of gold with a MariaDB source (``gold/reconcile.py`` through
``capture/mysql/current.py``), against the shared MariaDB 10.11 (``mariadb_conn``) and the shared
Spark session.

Each test captures its own database (``rec_<uuid8>``) into a temp lake with the MySQL agent,
applies it to silver with ``SilverJob.run_once()`` and reconciles at the newest cut. Source
changes after the cut are made in MariaDB, and must come out by key and as ``source_ahead`` from
the binlog. Corruption of silver found by key and range is the shared path that
``test_gold_reconcile`` covers.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bronze.position_base import Phase
from capture.mysql.config import MySqlSourceConfig
from capture.mysql.position import MySqlPosition
from capture.mysql.source import MySqlSource
from capture.registry import create_source
from gold.reconcile import can_reconcile, reconcile_source
from pipeline.config import PipelineConfig
from tests.integration.test_gold_reconcile import capture_and_apply
from tests.integration.test_mysql_capture import My

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.delta]

ROWS = 30


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    """A database of its own on the shared server, dropped at the end."""
    db = My(dict(mariadb_conn), f"rec_{uuid.uuid4().hex[:8]}")
    db.sql(f"CREATE DATABASE {db.database}")
    yield db
    db.sql(f"DROP DATABASE IF EXISTS {db.database}")


def create_orders(my: My) -> None:
    d = my.database
    my.sql(
        f"CREATE TABLE {d}.orders (id INT PRIMARY KEY, name VARCHAR(30) NOT NULL, "
        "amount DECIMAL(10,2), placed DATETIME(3), status ENUM('new','paid','shipped'))",
        f"INSERT INTO {d}.orders SELECT seq, CONCAT('customer ', seq), seq * 1.25, "
        "TIMESTAMP '2026-01-01 00:00:00' + INTERVAL seq HOUR + INTERVAL seq * 7 MICROSECOND, "
        f"ELT(1 + seq % 3, 'new', 'paid', 'shipped') FROM {d}.seq_1_to_{ROWS}",
        f"UPDATE {d}.orders SET amount = NULL, status = NULL WHERE id = 5",
    )


def test_equal_then_source_ahead_then_equal_again(spark: Any, my: My, tmp_path: Path) -> None:
    d = my.database
    lake = tmp_path / "lake"
    create_orders(my)
    my.sql(f"CREATE TABLE {d}.scratch (id INT PRIMARY KEY)")  # not captured (include list)
    extra = {"table.include.list": rf"{d}\.orders"}
    capture_and_apply(spark, my.config(**extra), lake)
    config = PipelineConfig.model_validate(
        {"lake": {"root": str(lake)}, "sources": [my.raw(**extra)]}
    )
    assert can_reconcile(config.source("my"))

    result = reconcile_source(spark, config, lake, "my", ranges=4)
    (orders,) = result.tables
    assert orders.collection == f"{d}.orders"
    assert orders.success, orders
    assert (orders.source_rows, orders.gold_rows, orders.ranges) == (ROWS, ROWS, 4)
    assert result.source_ahead is False
    assert result.source_lsn is not None and re.fullmatch(r".+\.\d{6}:\d+", result.source_lsn)
    # The cut is the snapshot's: at its binlog point, unless something was written since.
    assert result.notes[0] in (
        "the cut is at or after the snapshot's binlog point: nothing between",
        "no captured row change after the cut in the binlog",
    )

    # Changed in MariaDB after the cut, not captured: the binlog says the source is ahead.
    my.sql(
        f"UPDATE {d}.orders SET status = 'shipped' WHERE id = 12",
        f"DELETE FROM {d}.orders WHERE id = 3",
        f"INSERT INTO {d}.orders VALUES (31, 'late', 9.99, '2026-02-01 10:00:00.5', 'new')",
    )
    result = reconcile_source(spark, config, lake, "my", ranges=4)
    (orders,) = result.tables
    assert orders.differing == ('{"id":12}',)
    assert orders.extra_in_gold == ('{"id":3}',)
    assert orders.missing_in_gold == ('{"id":31}',)
    assert result.source_ahead is True
    assert result.notes[0].startswith("a captured row change at binlog ")
    assert "possibly lag" in result.outcomes()[0].observed

    # Landed and applied: equal again. The cut is now in the stream (the binlog is read from
    # its file's start), and changes of a table the source does not capture do not count.
    capture_and_apply(spark, my.config(**extra), lake)
    my.sql(f"INSERT INTO {d}.scratch VALUES (1), (2)")
    result = reconcile_source(spark, config, lake, "my", ranges=4)
    assert [t.collection for t in result.tables] == [f"{d}.orders"]
    assert result.success and result.source_ahead is False
    assert result.notes == ("no captured row change after the cut in the binlog",)
    assert result.tables[0].source_rows == ROWS

    # (Corruption found by key and range is the shared path; test_gold_reconcile shows it.)

    # A cut in a binlog file the server no longer has: whether the source is ahead is unknown.
    gone = MySqlPosition._new(0, 4, Phase.STREAM, 0, 0, None, None).encode()
    source = create_source(config.source("my"))
    assert isinstance(source, MySqlSource)
    (point,) = {at for at, _table, _rows in source.read_current()}
    check = source.changes_after(gone, point)
    assert check.ahead is None and "no longer on the server" in check.reason

    # The mariadb spelling of the connector is reconciled the same way.
    assert can_reconcile(MySqlSourceConfig.model_validate(my.raw(connector="mariadb")))
