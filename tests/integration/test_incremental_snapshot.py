"""Signals and incremental snapshots on the real PostgreSQL and MariaDB servers.

Each test owns a corner of the server (``pg`` / ``my`` from the capture tests), a signaling
table ``sig`` in it and a temp lake. The agent snapshots no rows (``snapshot.mode`` never or
schema_only), so the rows a table had come from the incremental snapshot only. Bronze is compared
with the source row by row, and, in the repair tests, silver and gold (the project's jobs on the
shared SparkSession) through reconciliation.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.registry import create_source
from capture.signals import EXECUTE_SNAPSHOT, Signal, new_signal_id
from pipeline.config import SourceConfig
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.integration.test_mysql_capture import My, my
from tests.integration.test_pg_capture import Pg, pg, raw_config, rows

pytestmark = [pytest.mark.spark, pytest.mark.delta]

__all__ = ["my", "pg"]  # the fixtures, re-used from the capture tests


@dataclass
class Corner:
    """One engine's corner: SQL in it, its source config, and what a table is called."""

    name: str
    """The source name."""
    schema: str
    sql: Callable[..., None]
    query: Callable[[str], list[tuple[Any, ...]]]
    raw: Callable[..., SourceConfig]
    raw_dict: Callable[..., dict[str, Any]]
    """The source config as YAML gives it (for child processes)."""
    create: str
    """``CREATE TABLE {t} (...)`` for a keyed table (id, v, note)."""
    signal_table: str
    no_data_snapshot: str
    """The ``snapshot.mode`` that snapshots no rows: PostgreSQL ``never``; MySQL
    ``schema_only`` (the schema history then knows only the captured tables, so a table added
    later is learnt when a snapshot names it)."""

    def collection(self, table: str) -> str:
        return f"{self.schema}.{table}"

    def config(self, **extra: Any) -> SourceConfig:
        return self.raw(
            **{
                "snapshot.mode": self.no_data_snapshot,
                "signal.data.collection": self.collection("sig"),
                "incremental.snapshot.chunk.size": 40,
                **extra,
            }
        )


def pg_corner(pg: Pg) -> Corner:
    pg.sql(
        f"CREATE TABLE {pg.schema}.sig (id varchar(64) PRIMARY KEY, type varchar(32) NOT NULL, "
        "data text)"
    )
    return Corner(
        "pg",
        pg.schema,
        lambda *s: pg.sql(*s),
        lambda q: pg.query(q),
        pg.config,
        lambda **extra: raw_config(pg, **extra),
        "CREATE TABLE {t} (id int PRIMARY KEY, v int NOT NULL, note text)",
        f"{pg.schema}.sig",
        "never",
    )


def my_corner(my: My) -> Corner:
    my.sql(
        f"CREATE TABLE {my.database}.sig (id VARCHAR(64) PRIMARY KEY, type VARCHAR(32) NOT NULL, "
        "data TEXT)"
    )
    return Corner(
        "my",
        my.database,
        lambda *s: my.sql(*s),
        lambda q: my.query(q),
        my.config,
        my.raw,
        "CREATE TABLE {t} (id INT PRIMARY KEY, v INT NOT NULL, note TEXT)",
        f"{my.database}.sig",
        "schema_only",
    )


@pytest.fixture(params=["postgresql", "mariadb"])
def corner(request: pytest.FixtureRequest) -> Iterator[Corner]:
    if request.param == "postgresql":
        request.applymarker(pytest.mark.postgres)
        yield pg_corner(request.getfixturevalue("pg"))
    else:
        request.applymarker(pytest.mark.mysql)
        yield my_corner(request.getfixturevalue("my"))


def fill(c: Corner, table: str, count: int) -> None:
    c.sql(c.create.format(t=c.collection(table)))
    values = ", ".join(f"({i}, {i * 7 % 101}, 'row {i}')" for i in range(1, count + 1))
    c.sql(f"INSERT INTO {c.collection(table)} VALUES {values}")


def land_once(config: SourceConfig, lake: Path, **kw: Any) -> Any:
    """Land until the source is exhausted (or ``max_batches``)."""
    agent = LandingAgent(
        create_source(config),
        BronzeWriter(BronzeTables.under(lake)),
        max_events=kw.pop("max_events", 1000),
        max_transaction_events=100_000,
    )
    return agent.run(**kw)


def snapshot_running(lake: Path, name: str) -> bool:
    committed = BronzeWriter(BronzeTables.under(lake)).last_committed(agent_app_id(name))
    assert committed is not None
    signals = committed.offset.get("signals") or {}
    return signals.get("snapshot") is not None


def execute_snapshot(config: SourceConfig, *tables: str, condition: str | None = None) -> None:
    """Send ``execute-snapshot`` the way ``medallion signal`` does: through the agent."""
    data: dict[str, Any] = {"data-collections": list(tables), "type": "incremental"}
    if condition is not None:
        data["additional-conditions"] = [{"data-collection": tables[0], "filter": condition}]
    source = create_source(config)
    source.send_signal(Signal(new_signal_id(), EXECUTE_SNAPSHOT, data))  # type: ignore[attr-defined]


def silver_rows(spark: Any, lake: Path, c: Corner, table: str) -> dict[int, tuple[Any, ...]]:
    path = lake / "silver" / silver_table_name(c.name, c.collection(table))
    frame = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
    return {r["id"]: (r["v"], r["note"]) for r in frame.select("id", "v", "note").collect()}


def bronze_rows(lake: Path, collection: str) -> dict[int, tuple[Any, ...]]:
    """``collection``'s rows as its bronze data events leave them, applied in position order
    (the newest position of a key wins, a delete removes it)."""
    state: dict[int, tuple[Any, ...]] = {}
    for r in rows(lake):
        value = r["value"]
        if r["collection"] != collection or value is None or "op" not in value:
            continue
        if value["op"] == "d":
            state.pop(int(value["before"]["id"]), None)
        else:
            state[int(value["after"]["id"])] = (value["after"]["v"], value["after"]["note"])
    return state


def source_rows(c: Corner, table: str) -> dict[int, tuple[Any, ...]]:
    return {r[0]: (r[1], r[2]) for r in c.query(f"SELECT id, v, note FROM {c.collection(table)}")}


def test_a_table_added_mid_stream_is_captured_fully(corner: Corner, tmp_path: Path) -> None:
    """A table joins the include list of a running source and is snapshotted in two parts
    through ``additional-conditions`` (a row deleted between them); one silver run: silver
    equals the source. (Chunks under concurrent changes and a kill -9 mid-snapshot:
    test_incremental_kill.py and the contract suite's test_signal_snapshots.py.)"""
    c, lake = corner, tmp_path / "lake"
    fill(c, "items", 5)
    fill(c, "b", 90)
    c.sql(f"UPDATE {c.collection('b')} SET v = 0 WHERE id <= 10")  # before capture starts
    config = c.config(**{"table.include.list": rf"{c.schema}\.(items|sig)"})
    land_once(config, lake)  # streaming from now; b's rows come from the snapshots only
    c.sql(f"UPDATE {c.collection('items')} SET v = 1 WHERE id = 1")
    land_once(config, lake)

    config = c.config(**{"table.include.list": rf"{c.schema}\.(items|b|sig)"})
    execute_snapshot(config, c.collection("b"), condition="id > 3")
    land_once(config, lake)
    c.sql(f"DELETE FROM {c.collection('b')} WHERE id = 50")
    land_once(config, lake)
    assert not snapshot_running(lake, c.name)
    landed = rows(lake)
    assert not [r for r in landed if str(r["collection"]).endswith(".sig")]  # never data
    b_reads = {
        r["value"]["after"]["id"]
        for r in landed
        if str(r["collection"]).endswith(".b") and r["value"] and r["value"].get("op") == "r"
    }
    assert b_reads == set(range(4, 91)) - {50} or b_reads == set(range(4, 91))
    execute_snapshot(config, c.collection("b"), condition="id <= 3")
    land_once(config, lake)
    reads = [r for r in rows(lake) if r["value"] is not None and r["value"].get("op") == "r"]
    assert reads and all(r["value"]["source"]["snapshot"] == "incremental" for r in reads)
    # Bronze applied in position order, as silver applies it (silver itself is compared with
    # the source after incremental snapshots in test_incremental_kill.py).
    assert bronze_rows(lake, c.collection("b")) == source_rows(c, "b")


def test_bad_signals_are_quarantined_and_the_stream_goes_on(corner: Corner, tmp_path: Path) -> None:
    c, lake = corner, tmp_path / "lake"
    fill(c, "a", 3)
    config = c.config()
    land_once(config, lake)
    sig = c.signal_table
    c.sql(
        f"INSERT INTO {sig} VALUES ('s1', 'frobnicate', '{{}}')",
        f"INSERT INTO {sig} VALUES ('s2', 'execute-snapshot', 'not json')",
        f"INSERT INTO {sig} VALUES ('s3', 'execute-snapshot', "
        f'\'{{"data-collections": ["{c.schema}.nowhere"]}}\')',
        f"INSERT INTO {sig} VALUES ('s4', 'log', '{{\"message\": \"hello\"}}')",
        f"INSERT INTO {c.collection('a')} VALUES (4, 4, 'after the bad signals')",
    )
    result = land_once(config, lake)
    assert result.quarantined == 3
    from tests.integration.test_mysql_capture import quarantined

    reasons = sorted(orjson.dumps(q["reason"]).decode() for q in quarantined(lake))
    assert any("unknown type 'frobnicate'" in r for r in reasons), reasons
    assert any("data is not JSON" in r for r in reasons), reasons
    assert any("nowhere is not captured" in r for r in reasons), reasons
    inserted = [r for r in rows(lake) if r["value"] is not None and r["value"].get("op") == "c"]
    assert inserted[-1]["value"]["after"]["id"] == 4  # the stream went on after them


@pytest.mark.parametrize(
    ("corner", "agent"), [("postgresql", "stopped"), ("mariadb", "running")], indirect=["corner"]
)
def test_reconcile_repair_snapshots_the_damaged_keys_again(
    spark: Any, corner: Corner, tmp_path: Path, agent: str
) -> None:
    """Silver damaged behind the pipeline's back (an UPDATE and a DELETE on the Delta table) is
    found by reconcile; ``--repair`` snapshots exactly those keys again and reconcile is clean.
    ``stopped`` (PostgreSQL): no capture agent runs, the repair lands the source itself;
    ``running`` (MariaDB): ``medallion capture --follow`` runs in a child process and lands the
    repair's snapshot. (One engine per path: each variant costs a Spark pipeline run twice.)"""
    from gold.reconcile_repair import repair_now
    from pipeline.config import PipelineConfig
    from pipeline.orchestration import land_sources
    from pipeline.sql import quote_identifier
    from tests.integration.test_incremental_kill import committed, follow, stop, wait_for

    c, lake = corner, tmp_path / "lake"
    fill(c, "items", 30)
    extra = {
        "signal.data.collection": c.collection("sig"),
        "table.include.list": rf"{c.schema}\.(items|sig)",
        "poll.interval.ms": 100,
    }
    raw = c.raw_dict(**extra)
    config = PipelineConfig.model_validate({"lake": {"root": str(lake)}, "sources": [raw]})
    land_sources(config, [c.name])
    SilverJob(spark, lake).run_once()
    path = lake / "silver" / silver_table_name(c.name, c.collection("items"))
    table = f"delta.{quote_identifier(str(path.absolute()))}"
    spark.sql(f"UPDATE {table} SET v = 999 WHERE id = 7")
    spark.sql(f"DELETE FROM {table} WHERE id = 12")
    c.sql(f"INSERT INTO {c.collection('items')} VALUES (31, 1, 'later')")
    child = None
    if agent == "running":
        config_path = tmp_path / "pipeline.yaml"
        config_path.write_text(
            orjson.dumps({"lake": {"root": str(lake)}, "sources": [raw]}).decode()
        )
        seq = committed(lake, c.name)
        assert seq is not None
        child = follow(config_path, c.name)
        wait_for(
            "the agent to land row 31",
            lambda: (b := committed(lake, c.name)) and b.batch_seq > seq.batch_seq,
            child,
        )
    else:
        land_sources(config, [c.name])
    try:
        SilverJob(spark, lake).run_once()  # the cut moves past the damage
        repaired = repair_now(config, c.name, agent_wait_s=60.0 if agent == "running" else 1.0)
    finally:
        if child is not None:
            stop(child)
    assert repaired.landed_by == ("running agent" if agent == "running" else "this command")
    found = [t for t in repaired.before.tables if not t.success]  # the damage, found
    assert [t.collection for t in found] == [c.collection("items")]
    assert (found[0].differing, found[0].missing_in_gold) == (('{"id":7}',), ('{"id":12}',))
    assert [r["table"] for r in repaired.rows()] == [c.collection("items")]
    assert repaired.tables[0].keys == 2 and repaired.tables[0].repaired, repaired.rows()
    assert repaired.after is not None and repaired.after.success  # reconciled again: clean
    reads = [r for r in rows(lake) if r["value"] is not None and r["value"].get("op") == "r"]
    assert sorted(
        r["value"]["after"]["id"]
        for r in reads
        if r["value"]["source"]["snapshot"] == "incremental"
    ) == [7, 12]
