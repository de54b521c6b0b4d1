"""``medallion reconcile`` for an Oracle source, against the Oracle LogMiner model: the
independent reader (``gold/source_read/oracle.py``) reads the model's tables through the DB-API
stand-in with its own conversion of each Oracle type, and compares every value with silver.
A clean history compares clean; a damaged silver row is found with its column."""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from gold.cuts import latest_cut
from gold.reconcile import reconcile_source
from gold.source_read.oracle import read_tables
from pipeline.config import PipelineConfig, SourceConfig
from silver.job import SilverJob
from tests.integration.test_oracle_capture import LIVE_DSN, Corner, live_raw
from tests.integration.test_reconcile_values import corrupt, differing, values_of
from tests.oraclemodel.database import Column, OracleModel

pytestmark = [pytest.mark.spark, pytest.mark.delta]

EDGES = [
    Column("ID", "NUMBER", 9, 0, nullable=False),
    Column("AMOUNT", "NUMBER", 10, 2),
    Column("N", "NUMBER"),
    Column("F", "BINARY_FLOAT"),
    Column("DBL", "BINARY_DOUBLE"),
    Column("DT", "DATE"),
    Column("TS", "TIMESTAMP(6)"),
    Column("TZ", "TIMESTAMP(6) WITH TIME ZONE"),
    Column("R", "RAW"),
    Column("C", "CHAR"),
    Column("V", "VARCHAR2"),
    Column("BODY", "CLOB"),
    Column("IV", "INTERVAL DAY(2) TO SECOND(6)"),
]
PLUS2 = dt.timezone(dt.timedelta(hours=2))
ROWS: list[dict[str, Any]] = [
    {
        "ID": 1,
        "AMOUNT": Decimal("12.50"),
        "N": Decimal("1E+40"),
        "F": 0.1,
        "DBL": -2.5e-300,
        "DT": dt.datetime(2024, 2, 29, 23, 59, 59),
        "TS": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
        "TZ": dt.datetime(2024, 1, 1, 1, 30, tzinfo=PLUS2),
        "R": b"\xde\xad\xbe\xef",
        "C": "ab   ",  # CHAR(5): blank-padded, as Oracle stores it
        "V": "it's",
        "BODY": "a CLOB " * 20,
        "IV": dt.timedelta(days=-1, seconds=3, microseconds=5),
    },
    {"ID": 2, "AMOUNT": Decimal("-0.01"), "N": Decimal("0.000001"), "V": "x y", "BODY": ""},
    {"ID": 3},
]


@pytest.fixture
def edges(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Corner]:
    from capture.oracle.agent import DBAPI_ENV

    monkeypatch.setenv(DBAPI_ENV, "tests.oraclemodel.dbapi")
    model = OracleModel(threads=2, redo_chunk=64)
    model.create_table("DEBEZIUM", "EDGES", EDGES, ["ID"])
    xid = model.begin()
    for row in ROWS[:2]:
        model.insert(xid, "DEBEZIUM", "EDGES", row)
    model.commit(xid)
    model.save(tmp_path / "db.model")
    yield Corner(tmp_path / "db.model", tmp_path / "lake")


def test_oracle_reconcile_is_clean_and_finds_a_damaged_silver_row(
    spark: Any, edges: Corner
) -> None:
    raw = edges.raw(**{"lob.enabled": True})
    edges.land(edges.source(**{"lob.enabled": True}))  # the snapshot: rows 1 and 2
    with edges.edit() as model:  # streamed: an insert and updates of every kind of value
        xid = model.begin(thread=2)
        model.insert(xid, "DEBEZIUM", "EDGES", ROWS[2])
        model.update(
            xid,
            "DEBEZIUM",
            "EDGES",
            {"ID": 2},
            {
                "TZ": dt.datetime(2000, 1, 1, tzinfo=PLUS2),
                "TS": dt.datetime(2000, 1, 1, 0, 0, 0, 1),
                "F": -3.5,
                "R": b"",
                "BODY": "streamed",
                "IV": dt.timedelta(microseconds=1),
            },
        )
        model.update(xid, "DEBEZIUM", "EDGES", {"ID": 1}, {"AMOUNT": Decimal("99999999.99")})
        model.commit(xid)
    edges.land(edges.source(**{"lob.enabled": True}))
    lake = edges.lake
    config = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
    SilverJob(spark, lake).run_once()
    cut = latest_cut(lake, "ora")
    assert cut is not None

    result = reconcile_source(spark, config, lake, "ora", cut=cut, record=False)
    table, values = values_of(result, "DEBEZIUM.EDGES")
    assert values.clean, values.findings()
    assert (values.source_rows, values.silver_rows) == (3, 3)
    assert {c.column: c.status for c in values.columns} == {c.name: "compared" for c in EDGES}
    assert table.success and result.success

    damaged = corrupt(
        spark,
        lake,
        cut,
        "DEBEZIUM.EDGES",
        "UPDATE {t} SET AMOUNT = AMOUNT - 0.01 WHERE ID = 1",  # a decimal off by one cent
        "UPDATE {t} SET BODY = 'x' WHERE ID = 2",  # a CLOB that is not the source's
    )
    result = reconcile_source(spark, config, lake, "ora", cut=damaged, record=False)
    _, values = values_of(result, "DEBEZIUM.EDGES")
    assert not values.clean
    assert differing(values) == {"AMOUNT": (1, ('{"ID":1}',)), "BODY": (1, ('{"ID":2}',))}


if LIVE_DSN:  # defined only when a server is named: it fails, never skips, if unreachable

    def test_the_independent_reader_on_a_live_oracle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        """The reader on the server :func:`live_raw` names stages every row of
        ``MEDALLION_TEST_ORACLE_TABLE`` (``SCHEMA.TABLE``, default ``DEBEZIUM.CUSTOMERS``), none
        unreadable."""
        from capture.oracle.agent import DBAPI_ENV

        monkeypatch.delenv(DBAPI_ENV, raising=False)
        config = TypeAdapter(SourceConfig).validate_python(live_raw())
        collection = os.environ.get("MEDALLION_TEST_ORACLE_TABLE", "DEBEZIUM.CUSTOMERS")
        (table,) = read_tables(config, [collection], tmp_path).values()
        assert table.path is not None, table.notes
        assert table.unreadable == 0 and table.columns
