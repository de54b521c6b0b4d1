"""``medallion reconcile`` for a ``yugabytedb`` source, through the wire peer
(:mod:`tests.ybmodel.wire`): the agent lands a table of edge values (snapshot, then ``yboutput``
updates under replica identity ``CHANGE``, which send only the changed columns), silver applies
them, and the independent reader (``gold/source_read/yugabytedb.py``, its own connection and
PostgreSQL 11-exact conversions) compares every value with silver. A clean history compares
clean; a damaged silver row is found with its column, a microsecond included."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from gold.cuts import latest_cut
from gold.reconcile import reconcile_source
from pipeline.config import PipelineConfig
from silver.job import SilverJob
from tests.contract.harness import land
from tests.integration.test_pg_capture import Pg, pg
from tests.integration.test_reconcile_values import corrupt, differing, values_of
from tests.ybmodel.vwal import Table, YbModel
from tests.ybmodel.wire import YbPeer

pytestmark = [pytest.mark.postgres, pytest.mark.spark, pytest.mark.delta]

__all__ = ["pg"]  # the fixture, re-used from test_pg_capture

COLUMNS = (
    ("id", "int", 23),
    ("amount", "numeric(10,2)", 1700),
    ("f", "float8", 701),
    ("r", "real", 700),
    ("ts", "timestamp", 1114),
    ("tz", "timestamptz", 1184),
    ("d", "date", 1082),
    ("t", "time", 1083),
    ("iv", "interval", 1186),
    ("b", "bool", 16),
    ("raw", "bytea", 17),
    ("body", "text", 25),
)
"""``(name, YSQL type, type oid)``; values are given as the server's text (what pgoutput
sends and what an INSERT takes)."""
ROWS: list[dict[str, Any]] = [
    {
        "id": 1,
        "amount": "12.50",
        "f": "0.1",
        "r": "0.1",
        "ts": "1969-12-31 23:59:59.999999",
        "tz": "2024-01-01 01:30:00+02",
        "d": "2024-02-29",
        "t": "23:59:59.999999",
        "iv": "-1 days +00:00:03.000005",
        "b": "t",
        "raw": "\\xdeadbeef",
        "body": "it's",
    },
    {"id": 2, "amount": "-0.01", "f": "-2.5e-300", "ts": "2262-04-11 23:47:16.854775", "b": "f"},
    {"id": 3},
]


@pytest.fixture
def peer(pg: Pg) -> Iterator[YbPeer]:
    names = ", ".join(f"{name} {kind}" for name, kind, _ in COLUMNS)
    pg.sql(f"CREATE TABLE {pg.schema}.edges ({names}, PRIMARY KEY (id))")
    relid = int(pg.query(f"SELECT '{pg.schema}.edges'::regclass::oid")[0][0])
    model = YbModel(tablets=2)
    columns = tuple((name, oid) for name, _, oid in COLUMNS)
    model.create_table(Table(pg.schema, "edges", relid, columns, ("id",), "c"))
    started = YbPeer(model, pg.dsn).start()
    yield started
    started.close()


def commit(peer: YbPeer, pg: Pg, statements: list[tuple[str, dict[str, Any]]]) -> None:
    """One transaction on the real table and the model, under the peer's lock."""
    with peer.lock, psycopg.connect(pg.dsn) as conn:
        for op, values in statements:
            names = list(values)
            if op == "insert":
                marks = ", ".join(["%s"] * len(names))
                query = f"INSERT INTO {pg.schema}.edges ({', '.join(names)}) VALUES ({marks})"
                conn.execute(query.encode(), tuple(values.values()))
            else:
                settings = ", ".join(f"{n} = %s" for n in names if n != "id")
                query = f"UPDATE {pg.schema}.edges SET {settings} WHERE id = %s"
                params = (*(v for n, v in values.items() if n != "id"), values["id"])
                conn.execute(query.encode(), params)
        conn.commit()
        peer.model.commit([(op, "edges", values) for op, values in statements])


def test_yugabytedb_reconcile_is_clean_and_finds_a_damaged_silver_row(
    spark: Any, pg: Pg, peer: YbPeer, tmp_path: Path
) -> None:
    info = psycopg.conninfo.conninfo_to_dict(pg.dsn)
    raw = {
        "name": "yb",
        "connector": "yugabytedb",
        "database.hostname": f"127.0.0.1:{peer.port}",
        "database.user": info.get("user", "postgres"),
        "database.dbname": info.get("dbname", "postgres"),
        "topic.prefix": "dbserver",
        "slot.name": pg.slot,
        "publication.name": pg.publication,
        "schema.include.list": pg.schema,
    }
    lake = tmp_path / "lake"
    commit(peer, pg, [("insert", ROWS[0]), ("insert", ROWS[1])])
    land(raw, lake)  # the snapshot, at the slot's hybrid time
    commit(
        peer,
        pg,
        [
            ("insert", ROWS[2]),
            # the text the walsender writes: the agent's session has IntervalStyle iso_8601
            ("update", {"id": 2, "tz": "2000-01-01 00:00:00+02", "iv": "PT0.000001S"}),
            ("update", {"id": 1, "amount": "99999999.99", "raw": "\\x"}),
        ],
    )
    assert land(raw, lake).quarantined == 0  # streamed: CHANGE sends changed columns and key
    assert any("yb_read_time" in q for q in peer.queries)
    config = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
    SilverJob(spark, lake).run_once()
    cut = latest_cut(lake, "yb")
    assert cut is not None
    collection = f"{pg.schema}.edges"

    result = reconcile_source(spark, config, lake, "yb", cut=cut, record=False)
    table, values = values_of(result, collection)
    assert values.clean, values.findings()
    assert (values.source_rows, values.silver_rows) == (3, 3)
    assert {c.column: c.status for c in values.columns} == {n: "compared" for n, _, _ in COLUMNS}
    assert table.success and result.success
    assert result.source_ahead is None  # no slot peek on YugabyteDB, and bronze is not ahead

    damaged = corrupt(
        spark,
        lake,
        cut,
        collection,
        "UPDATE {t} SET amount = amount - 0.01 WHERE id = 1",  # a decimal off by one cent
        "UPDATE {t} SET ts = ts + INTERVAL 1 MICROSECOND WHERE id = 2",  # an instant, by 1 us
    )
    result = reconcile_source(spark, config, lake, "yb", cut=damaged, record=False)
    _, values = values_of(result, collection)
    assert not values.clean
    assert differing(values) == {"amount": (1, ('{"id":1}',)), "ts": (1, ('{"id":2}',))}
