"""Which silver micro-batches are consistent cuts (gold.cuts), on hand-written side tables."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from gold.cuts import Cut, consistent_cuts, cut_at, latest_cut

pytestmark = pytest.mark.delta

_PROGRESS = pa.schema(
    [
        ("silver_batch", pa.int64()),
        ("source", pa.string()),
        ("position", pa.binary()),
        ("source_ts_ms", pa.int64()),
        ("waiting_from", pa.binary()),
        ("open_tx", pa.bool_()),
        ("events", pa.int64()),
        ("recorded_at", pa.timestamp("us", tz="UTC")),
    ]
)
_CUTS = pa.schema(
    [
        ("silver_batch", pa.int64()),
        ("source", pa.string()),
        ("collection", pa.string()),
        ("silver_table", pa.string()),
        ("position", pa.binary()),
        ("waiting_from", pa.binary()),
        ("table_version", pa.int64()),
    ]
)
NOW = dt.datetime(2026, 11, 21, tzinfo=dt.UTC)


def p(n: int) -> bytes:
    return n.to_bytes(4, "big")


def write(lake: Path, progress: list[dict[str, Any]], cuts: list[dict[str, Any]]) -> None:
    for row in progress:
        row.setdefault("waiting_from", None)
        row.setdefault("open_tx", False)
        row.setdefault("events", 1)
        row.setdefault("recorded_at", NOW)
    write_deltalake(str(lake / "silver" / "_progress"), pa.Table.from_pylist(progress, _PROGRESS))
    for row in cuts:
        row.setdefault("position", None)
        row.setdefault("waiting_from", None)
    write_deltalake(str(lake / "silver" / "_cuts"), pa.Table.from_pylist(cuts, _CUTS))


def table(batch: int, source: str, name: str, version: int) -> dict[str, Any]:
    return {
        "silver_batch": batch,
        "source": source,
        "collection": f"public.{name}",
        "silver_table": f"{source}__public__{name}",
        "table_version": version,
    }


def test_waiting_below_the_top_or_an_open_transaction_breaks_a_cut(tmp_path: Path) -> None:
    write(
        tmp_path,
        [
            {"silver_batch": 0, "source": "a", "position": p(10), "source_ts_ms": 1000},
            # A transaction at 15 waits while 20 was applied: not the source at any commit.
            {
                "silver_batch": 1,
                "source": "a",
                "position": p(20),
                "source_ts_ms": 2000,
                "waiting_from": p(15),
            },
            # Waiting above everything applied: the cut ends before it.
            {
                "silver_batch": 2,
                "source": "a",
                "position": p(30),
                "source_ts_ms": 3000,
                "waiting_from": p(40),
            },
            {
                "silver_batch": 3,
                "source": "a",
                "position": p(35),
                "source_ts_ms": 3500,
                "open_tx": True,
            },
            {"silver_batch": 3, "source": "b", "position": p(5), "source_ts_ms": 500},
            # A replayed micro-batch records its progress twice: the first row counts.
            {"silver_batch": 3, "source": "b", "position": p(6), "source_ts_ms": 600},
        ],
        [
            table(0, "a", "orders", 1),
            table(0, "a", "lines", 1),
            table(1, "a", "orders", 2),
            table(2, "a", "lines", 2),
            table(3, "a", "lines", 3),
            table(3, "b", "x", 7),
        ],
    )
    cuts = consistent_cuts(tmp_path)
    assert [c.silver_batch for c in cuts["a"]] == [0, 2]
    second = cuts["a"][1]
    assert second.position == p(30) and second.source_ts_ms == 3000
    assert {n: t.version for n, t in second.tables.items()} == {
        "a__public__orders": 2,
        "a__public__lines": 2,
    }
    assert [(c.silver_batch, c.position) for c in cuts["b"]] == [(3, p(5))]
    assert latest_cut(tmp_path, "a") == second
    assert latest_cut(tmp_path, "nobody") is None
    assert cut_at(tmp_path, "a", position=p(29)) == cuts["a"][0]
    assert cut_at(tmp_path, "a", position=p(9)) is None
    at = dt.datetime.fromtimestamp(2.5, dt.UTC)
    assert cut_at(tmp_path, "a", time=at) == cuts["a"][0]
    with pytest.raises(ValueError, match="exactly one"):
        cut_at(tmp_path, "a")


def test_a_cut_round_trips_through_json(tmp_path: Path) -> None:
    write(
        tmp_path,
        [{"silver_batch": 4, "source": "a", "position": p(3), "source_ts_ms": None}],
        [table(4, "a", "t", 9)],
    )
    (cut,) = consistent_cuts(tmp_path)["a"]
    again = Cut.from_json(cut.to_json())
    assert (again.source, again.silver_batch, again.position, again.tables) == (
        cut.source,
        cut.silver_batch,
        cut.position,
        cut.tables,
    )
    assert cut.source_time is None


def test_no_side_tables_means_no_cut(tmp_path: Path) -> None:
    assert consistent_cuts(tmp_path) == {}
