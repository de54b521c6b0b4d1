"""Transactions waiting in ``silver/_pending``: released on time on a quiet source, shown by
``status``, applied exactly once across replays and crashes."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from gold.cuts import latest_cut
from pipeline.config import load_config
from pipeline.landing import LandingAgent
from pipeline.status import pipeline_status
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from silver.transactions import RELEASED, waiting_by_source
from tests.pgmodel.streams import SyntheticStream, postgres_stream, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.delta]

TIMEOUT = 1.0
"""Short, so the test waits a second at most; nothing asserts on wall time."""
LONG = 3600.0
"""The first run's timeout: on a loaded machine a run can take longer than ``TIMEOUT``, so the
transaction is held with this one and released by a later run configured with ``TIMEOUT``."""
COLUMNS = {
    "customers": ["id", "name", "email", "notes"],
    "orders": ["id", "customer_id", "amount_cents", "status"],
}


def land(path: Path, lake: Path) -> None:
    LandingAgent(
        DebeziumJsonSource("shop", path), BronzeWriter(BronzeTables.under(lake)), max_events=40
    ).run()


def _open_transaction(lines: list[bytes]) -> tuple[int, str, int]:
    """Index of the last multi-event transaction's END record, its id and data-event count.

    The stream is cut just before that END: its data events are in bronze, the END never
    comes (Debezium writes END only when the next transaction starts), the source is quiet.
    """
    found: tuple[int, str, int] | None = None
    for i, line in enumerate(lines):
        value = orjson.loads(line)["value"]
        if isinstance(value, dict) and "payload" in value:  # schemas.enable=true wraps BEGIN/END
            value = value["payload"]
        if isinstance(value, dict) and value.get("status") == "END" and value["event_count"] > 2:
            found = (i, str(value["id"]), int(value["event_count"]))
    assert found is not None, "no multi-event transaction"
    return found


@dataclass(frozen=True)
class OpenTransaction:
    """A lake whose bronze ends inside a transaction (its END has not come)."""

    stream: SyntheticStream
    lines: list[bytes]
    end: int
    """Index of the END line not landed yet."""
    tx_id: str
    count: int
    """Data events of the transaction."""
    inbox: Path
    lake: Path


def land_open_transaction(tmp_path: Path, *, seed: int, transactions: int) -> OpenTransaction:
    """Land a synthetic stream cut just before its last multi-event transaction's END."""
    stream = postgres_stream(snapshot_rows=3, transactions=transactions, seed=seed)
    lines = list(stream.lines("kafka_json", schemas=True))
    end, tx_id, count = _open_transaction(lines)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_lines(inbox / "a.jsonl", iter(lines[:end]))
    lake = tmp_path / "lake"
    land(inbox, lake)
    return OpenTransaction(stream, lines, end, tx_id, count, inbox, lake)


def _live(spark: Any, lake: Path, table: str) -> dict[int, dict[str, Any]]:
    path = lake / "silver" / silver_table_name("shop", f"public.{table}")
    df = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
    return {r["id"]: {c: r[c] for c in COLUMNS[table]} for r in df.collect()}


def _wait_past_timeout(lake: Path) -> None:
    """Sleep until the oldest waiting row is older than the timeout (a few seconds at most)."""
    oldest = waiting_by_source(lake / "silver" / "_pending")["shop"].oldest
    assert oldest is not None
    left = TIMEOUT + 0.2 - (dt.datetime.now(dt.UTC) - oldest).total_seconds()
    if left > 0:
        time.sleep(left)


def _config(tmp_path: Path, inbox: Path) -> Any:
    path = tmp_path / "pipeline.yaml"
    path.write_text(
        f"lake: {{root: {tmp_path / 'lake'}}}\n"
        f"silver: {{transaction.timeout.seconds: {TIMEOUT}}}\n"
        "sources:\n"
        "  - name: shop\n"
        "    connector: debezium_json\n"
        f"    path: {inbox}\n"
    )
    return load_config(path)


def _history_rows(spark: Any, lake: Path) -> int:
    path = lake / "silver" / (silver_table_name("shop", "public.orders") + "__history")
    return int(spark.read.format("delta").load(str(path)).count())


def test_quiet_source_releases_after_the_timeout_and_status_shows_what_waits(
    spark: Any, tmp_path: Path
) -> None:
    opened = land_open_transaction(tmp_path, seed=41, transactions=12)
    tx_id, count, lake = opened.tx_id, opened.count, opened.lake
    config = _config(tmp_path, opened.inbox)

    first = SilverJob(spark, lake, transaction_timeout_seconds=LONG).run_once()
    assert first.tx_timed_out == 0
    waiting = waiting_by_source(lake / "silver" / "_pending")["shop"]
    assert (waiting.events, waiting.transactions) == (count, 1)
    sources, _ = pipeline_status(config, lake)
    assert sources[0]["waiting_events"] == count
    assert sources[0]["waiting_transactions"] == 1
    assert sources[0]["waiting_oldest_s"] is not None

    held_cut = latest_cut(lake, "shop")
    _wait_past_timeout(lake)
    # No new bronze row: Spark runs no micro-batch, the clock alone releases the transaction.
    second = SilverJob(spark, lake, transaction_timeout_seconds=TIMEOUT).run_once()
    assert (second.batches, second.tx_timed_out) == (1, 1)
    assert waiting_by_source(lake / "silver" / "_pending") == {}
    applied = {
        r[0]
        for table in COLUMNS
        for r in spark.read.format("delta")
        .load(str(lake / "silver" / silver_table_name("shop", f"public.{table}")))
        .select("_cdc_tx_id")
        .collect()
    }
    assert tx_id in applied
    sources, _ = pipeline_status(config, lake)
    assert (sources[0]["waiting_events"], sources[0]["waiting_oldest_s"]) == (0, None)
    # gold can move: the release recorded a consistent cut that holds the released rows
    cut = latest_cut(lake, "shop")
    assert cut is not None
    assert held_cut is None or cut.silver_batch > held_cut.silver_batch

    third = SilverJob(spark, lake, transaction_timeout_seconds=TIMEOUT).run_once()
    assert (third.batches, third.events) == (0, 0)

    # The END arrives late, with the rest of the stream: nothing is applied twice.
    with (opened.inbox / "a.jsonl").open("ab") as f:
        for line in opened.lines[opened.end :]:
            f.write(line + b"\n")
    land(opened.inbox, lake)
    SilverJob(spark, lake, transaction_timeout_seconds=TIMEOUT).run_once()
    for table in COLUMNS:
        expected = {
            i: {c: row[c] for c in COLUMNS[table]}
            for i, row in opened.stream.final_state[table].items()
        }
        assert _live(spark, lake, table) == expected, table


def test_a_crash_inside_a_release_batch_applies_it_exactly_once(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pipeline.config import TableOptions
    from silver.job import SilverJob as Job

    opened = land_open_transaction(tmp_path, seed=43, transactions=12)
    tx_id, count, lake = opened.tx_id, opened.count, opened.lake

    def history(_source: str, _collection: str) -> TableOptions:
        return TableOptions(history=True)

    Job(spark, lake, transaction_timeout_seconds=LONG, table_options=history).run_once()
    before = _history_rows(spark, lake)
    _wait_past_timeout(lake)

    # Crash after the tables merged, before the release batch rewrote _pending.
    real = Job._record_progress

    def crash(self: Any, *args: Any, **kwargs: Any) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(Job, "_record_progress", crash)
    with pytest.raises(RuntimeError, match="killed"):
        Job(spark, lake, transaction_timeout_seconds=TIMEOUT, table_options=history).run_once()
    assert waiting_by_source(lake / "silver" / "_pending")["shop"].events == count
    monkeypatch.setattr(Job, "_record_progress", real)

    again = Job(spark, lake, transaction_timeout_seconds=TIMEOUT, table_options=history)
    result = again.run_once()
    assert result.batches == 1  # the interrupted release, finished with its own clock
    assert waiting_by_source(lake / "silver" / "_pending") == {}
    after = _history_rows(spark, lake)
    orders = (
        spark.read.format("delta")
        .load(str(lake / "silver" / silver_table_name("shop", "public.orders")))
        .where(f"_cdc_tx_id = '{tx_id}'")
        .collect()
    )
    history_versions = (
        spark.read.format("delta")
        .load(str(lake / "silver" / (silver_table_name("shop", "public.orders") + "__history")))
        .groupBy("_cdc_key", "_cdc_position")
        .count()
        .where("count > 1")
        .count()
    )
    assert history_versions == 0 and after >= before
    assert len({r["_cdc_key"] for r in orders}) == len(orders)
    assert Job(spark, lake, transaction_timeout_seconds=TIMEOUT).run_once().batches == 0


def test_run_continuous_releases_on_its_tick_while_bronze_is_quiet(
    spark: Any, tmp_path: Path
) -> None:
    import threading

    opened = land_open_transaction(tmp_path, seed=47, transactions=6)
    count, lake = opened.count, opened.lake
    SilverJob(spark, lake, transaction_timeout_seconds=LONG).run_once()
    assert waiting_by_source(lake / "silver" / "_pending")["shop"].events == count

    released: list[int] = []
    failures: list[BaseException] = []
    job = SilverJob(spark, lake, transaction_timeout_seconds=TIMEOUT, after_batch=released.append)

    def run() -> None:
        try:
            job.run_continuous(interval_seconds=1.0)
        except BaseException as exc:  # reported by the test thread
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 180
        while waiting_by_source(lake / "silver" / "_pending"):
            assert not failures and time.monotonic() < deadline, failures
            time.sleep(0.5)
    finally:
        for query in spark.streams.active:
            query.stop()
        thread.join(timeout=60)
    assert not failures, failures
    # no bronze row arrived: the release batch ran, gold's hook was called for it
    assert job.result.tx_timed_out == 1 and len(released) == 1


def test_a_transaction_is_complete_when_its_end_and_every_tables_count_landed(
    spark: Any,
) -> None:
    """END's total and per-table ``event_count``, counted by distinct position; END's table
    names as Debezium spells them."""
    from silver.transactions import split_complete

    t0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    rows: list[tuple[Any, ...]] = []

    def data(tx: str, position: int, table: str = "public.a", order: int | None = 1) -> None:
        part = tx.split("/")[0]  # each case its own serial stream, unless it says otherwise
        rows.append(("s", part, "data", table, tx, order, bytes([position]), t0, None, None, None))

    def begin(tx: str, position: int) -> None:
        part = tx.split("/")[0]
        row = ("s", part, "transaction", None, tx, None, bytes([position]), t0, "BEGIN", None, None)
        rows.append(row)

    def end(tx: str, count: int, tables: dict[str, int]) -> None:
        value = orjson.dumps(
            {
                "status": "END",
                "id": tx,
                "event_count": count,
                "data_collections": [
                    {"data_collection": n, "event_count": c} for n, c in tables.items()
                ],
            }
        ).decode()
        part = tx.split("/")[0]
        row = ("s", part, "transaction", None, tx, None, bytes([99]), t0, "END", count, value)
        rows.append(row)

    data("whole", 1)
    data("whole", 2, "public.b")
    end("whole", 2, {"public.a": 1, "public.b": 1})
    # b's event has not landed; a's two events (another position each) make up the total
    data("b_missing", 3)
    data("b_missing", 4)
    end("b_missing", 2, {"public.a": 1, "public.b": 1})
    # a table-count short of its own count
    data("a_short", 5, "public.b")
    data("a_short", 6, "public.b")
    end("a_short", 2, {"public.a": 1, "public.b": 1})
    # END spells the table in a way bronze does not: the total decides
    data("spelled", 7)
    data("spelled", 8)
    end("spelled", 2, {"other.spelling": 2})
    # SQL Server's db.schema.table matches bronze's schema.table
    data("sqlserver", 9)
    end("sqlserver", 1, {"testDB.public.a": 1})
    # a redelivery lands the same event twice
    data("redelivered", 10)
    data("redelivered", 10)
    data("redelivered", 11)
    end("redelivered", 2, {"public.a": 2})
    # END without its data yet, and data without a total_order (never held)
    end("no_data", 1, {"public.a": 1})
    data("ungated", 12, order=None)
    # Debezium 3.4 MariaDB: a TRUNCATE's transaction gets no END, the next one starts
    begin("serial/truncate", 20)
    data("serial/truncate", 21)
    begin("serial/next", 22)
    data("serial/next", 23)
    end("serial/next", 1, {"public.a": 1})
    # the newest transaction of its stream, no END yet: it waits
    begin("open/last", 24)
    data("open/last", 25)
    frame = spark.createDataFrame(
        rows,
        "source string, source_partition string, kind string, collection string, tx_id string, "
        "tx_order long, "
        "position binary, ingest_ts timestamp, tx_status string, tx_event_count long, "
        "value_json string",
    )
    split = split_complete(frame, now=t0 + dt.timedelta(seconds=10), timeout_seconds=LONG)
    ready = {r["tx_id"] for r in split.ready.where("kind = 'data'").collect()}
    held = split.waiting.collect()
    waiting = {r["tx_id"] for r in held if r["tx_status"] != RELEASED}
    # Released as superseded without its END count: its later rows will not wait for one.
    assert {r["tx_id"] for r in held if r["tx_status"] == RELEASED} == {"serial/truncate"}
    assert ready == {
        "whole",
        "spelled",
        "sqlserver",
        "redelivered",
        "ungated",
        "serial/truncate",
        "serial/next",
    }
    assert waiting == {"b_missing", "a_short", "no_data", "open/last"}
    assert split.timed_out == 0
    later = split_complete(frame, now=t0 + dt.timedelta(seconds=10), timeout_seconds=1.0)
    later_held = {(r["tx_id"], r["tx_status"]) for r in later.waiting.collect()}
    assert later_held == {("serial/truncate", RELEASED)}
    assert later.timed_out == 3  # b_missing, a_short, open
