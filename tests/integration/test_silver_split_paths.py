"""The transaction split decided on the driver (a small micro-batch, :mod:`silver.collected_split`)
and by Spark (:func:`silver.transactions.split_complete`) give the same rows and counts."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest

from silver.collected_split import split_collected
from silver.transactions import RELEASED, split_complete

pytestmark = [pytest.mark.spark, pytest.mark.delta]

T0 = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
SCHEMA = (
    "source string, source_partition string, kind string, collection string, tx_id string, "
    "tx_order long, position binary, ingest_ts timestamp, tx_status string, "
    "tx_event_count long, value_json string"
)


class Rows:
    """Bronze rows of the split's columns, one transaction case after the other."""

    def __init__(self) -> None:
        self.rows: list[tuple[Any, ...]] = []

    def data(
        self,
        tx: str | None,
        position: int,
        table: str | None = "public.a",
        *,
        order: int | None = 1,
        at: float = 0.0,
        kind: str | None = "data",
        source: str = "s",
    ) -> None:
        part = (tx or "none").split("/")[0]  # a serial stream per case unless named alike
        stamp = T0 + dt.timedelta(seconds=at)
        self.rows.append(
            (source, part, kind, table, tx, order, bytes([position]), stamp, None, None, None)
        )

    def _transaction(
        self,
        tx: str | None,
        position: int,
        at: float,
        status: str,
        count: int | None,
        value: str | None,
    ) -> None:
        """A transaction-metadata row (BEGIN or END) of source ``s``."""
        part = (tx or "none").split("/")[0]
        stamp = T0 + dt.timedelta(seconds=at)
        self.rows.append(
            (
                "s",
                part,
                "transaction",
                None,
                tx,
                None,
                bytes([position]),
                stamp,
                status,
                count,
                value,
            )
        )

    def begin(self, tx: str, position: int, *, at: float = 0.0) -> None:
        self._transaction(tx, position, at, "BEGIN", None, None)

    def end(
        self,
        tx: str | None,
        count: int,
        tables: dict[str, int],
        *,
        position: int = 200,
        at: float = 0.0,
    ) -> None:
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
        self._transaction(tx, position, at, "END", count, value)

    def marker(self, tx: str, *, at: float) -> None:
        """A marker ``silver/_pending`` kept for a transaction applied in part."""
        stamp = T0 + dt.timedelta(seconds=at)
        self.rows.append(
            ("s", None, "transaction", None, tx, None, None, stamp, RELEASED, None, None)
        )


def every_case() -> Rows:
    """Complete, incomplete, out-of-order, redelivered, released and superseded transactions,
    at different ages (``at``: seconds after T0 their rows landed)."""
    r = Rows()
    r.data("whole", 1)
    r.data("whole", 2, "public.b")
    r.end("whole", 2, {"public.a": 1, "public.b": 1})
    r.data("b_missing", 3)  # b's event has not landed; a's two make up the total
    r.data("b_missing", 4)
    r.end("b_missing", 2, {"public.a": 1, "public.b": 1})
    r.data("a_short", 5, "public.b", at=30)  # a table short of its own count
    r.data("a_short", 6, "public.b", at=30)
    r.end("a_short", 2, {"public.a": 1, "public.b": 1}, at=30)
    r.data("spelled", 7)  # END spells tables unlike bronze: the total decides
    r.data("spelled", 8)
    r.end("spelled", 2, {"other.spelling": 2})
    r.data("sqlserver", 9)  # db.schema.table
    r.end("sqlserver", 1, {"testDB.public.a": 1})
    r.data("redelivered", 10)
    r.data("redelivered", 10)
    r.data("redelivered", 11)
    r.end("redelivered", 2, {"public.a": 2})
    # Out of order: the END first, its data not landed yet (or later in the micro-batch).
    r.end("no_data", 1, {"public.a": 1}, at=30)
    r.end("late_data", 1, {"public.a": 1}, position=150)
    r.data("late_data", 12)
    r.data("ungated", 13, order=None)  # no total_order: never held
    r.data(None, 14, order=1)  # no transaction id: never held
    r.data("message", 15, None, kind="message")  # a counted logical message
    r.end("message", 1, {})
    # MariaDB's TRUNCATE: no END, the next transaction starts on the same stream.
    r.begin("serial/truncate", 20)
    r.data("serial/truncate", 21)
    r.begin("serial/next", 22)
    r.data("serial/next", 23)
    r.end("serial/next", 1, {"public.a": 1})
    r.begin("open/last", 24, at=30)  # the newest of its stream, no END yet: it waits
    r.data("open/last", 25, at=30)
    # Released before (a marker in _pending): its late rows are applied as they come.
    r.marker("released", at=40)
    r.data("released", 26, at=40)
    r.marker("expired_marker", at=-3600)  # past the timeout: dropped
    # A held transaction with a row of no kind, and an END without a transaction id.
    r.data("odd", 27, at=30)
    r.data("odd", 28, kind=None, at=30)
    r.end("odd", 3, {"public.a": 3}, at=30)
    r.end(None, 1, {"public.a": 1}, at=30)
    # Another source, another partition of the same name.
    r.data("other", 29, source="t", at=30)
    return r


def _sorted(table: pa.Table) -> list[tuple[Any, ...]]:
    rows = [tuple(sorted(r.items())) for r in table.to_pylist()]  # the join reorders columns
    return sorted(rows, key=repr)


@pytest.mark.parametrize(
    ("case", "now", "timeout"),
    [
        (every_case, 60, 3600.0),  # nothing timed out
        (every_case, 60, 45.0),  # the rows landed at 0 are past the timeout, those at 30 not
    ],
)
def test_the_driver_split_equals_the_spark_split(
    spark: Any, case: Any, now: float, timeout: float
) -> None:
    frame = spark.createDataFrame(case().rows, SCHEMA)
    clock = T0 + dt.timedelta(seconds=now)
    planned = split_complete(frame, now=clock, timeout_seconds=timeout)
    collected = split_collected(frame.toArrow(), now=clock, timeout_seconds=timeout)
    assert _sorted(collected.ready) == _sorted(planned.ready.toArrow())
    assert _sorted(collected.waiting) == _sorted(planned.waiting.toArrow())
    assert (collected.timed_out, collected.held, collected.held_rows) == (
        planned.timed_out,
        planned.held,
        planned.held_rows,
    )
    ready = {r["tx_id"] for r in collected.ready.to_pylist() if r["kind"] == "data"}
    if timeout > 60:
        # the verdicts themselves, not only their agreement
        assert {"whole", "spelled", "sqlserver", "redelivered", "late_data"} <= ready
        assert {"serial/truncate", "serial/next", "released", "ungated"} <= ready
        # a row of a held transaction that has no kind is not lost from both sides
        assert [r["tx_id"] for r in collected.ready.to_pylist() if r["kind"] is None] == ["odd"]
        held = {r["tx_id"] for r in collected.waiting.to_pylist() if r["kind"] == "data"}
        assert held == {"b_missing", "a_short", "open/last", "odd", "other"}
        assert collected.timed_out == 0
    else:
        assert collected.timed_out == 1  # b_missing, landed at 0


def test_a_micro_batch_too_large_to_collect_applies_the_same(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Spark split path (a snapshot-sized micro-batch) and the driver path leave the same
    silver tables, ``_pending`` and counts."""
    import shutil

    from silver import job as J
    from tests.integration.test_silver_transactions import land_open_transaction

    opened = land_open_transaction(tmp_path, seed=53, transactions=10)
    lakes = {"collected": opened.lake, "spark": tmp_path / "copy"}
    shutil.copytree(opened.lake, lakes["spark"])  # the same bronze rows, the same batches
    results = {}
    collected: list[int] = []
    real_split = split_collected

    def counted(*args: Any, **kwargs: Any) -> Any:
        collected.append(1)
        return real_split(*args, **kwargs)

    monkeypatch.setattr(J, "split_collected", counted)
    for label, bound in (("collected", J._COLLECT_BYTES), ("spark", -1)):
        monkeypatch.setattr(J, "_COLLECT_BYTES", bound)
        result = J.SilverJob(spark, lakes[label], transaction_timeout_seconds=3600.0).run_once()
        results[label] = (result.read, result.applied, result.ignored, result.tx_timed_out)
        # the small micro-batch took the driver path, the "too large" one did not
        assert len(collected) == (result.batches if label == "collected" else 1), label

    def contents(lake: Path, name: str) -> list[tuple[Any, ...]]:
        frame = spark.read.format("delta").load(str(lake / "silver" / name))
        drop = [c for c in frame.columns if c in ("recorded_at", "_cdc_updated_at")]
        return sorted((tuple(r) for r in frame.drop(*drop).collect()), key=repr)

    assert results["collected"] == results["spark"]
    names = sorted(
        p.name
        for p in (lakes["spark"] / "silver").iterdir()
        if p.name.startswith("shop__") or p.name == "_pending"
    )
    assert "_pending" in names and len(names) >= 3
    for name in names:
        assert contents(lakes["collected"], name) == contents(lakes["spark"], name), name
