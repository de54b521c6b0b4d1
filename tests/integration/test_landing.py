"""Landing Debezium JSON into real bronze Delta tables (deltalake, no JVM)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.positions import decode_position
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent, LandingResult
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = pytest.mark.delta

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "debezium_jsonl"


def land(
    path: Path,
    lake: Path,
    *,
    name: str = "shop",
    max_events: int = 50,
    max_tx: int = 10_000,
    line_format: str = "auto",
    max_batches: int | None = None,
) -> LandingResult:
    source = DebeziumJsonSource(name, path, line_format=line_format)
    agent = LandingAgent(
        source,
        BronzeWriter(BronzeTables.under(lake)),
        max_events=max_events,
        max_transaction_events=max_tx,
    )
    return agent.run(max_batches=max_batches)


def events(lake: Path) -> pa.Table:
    return DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()


def quarantine(lake: Path) -> pa.Table:
    return DeltaTable(str(lake / "bronze" / "quarantine")).to_pyarrow_table()


def test_fixtures_land_once_and_reconcile(tmp_path: Path) -> None:
    result = land(FIXTURES, tmp_path)
    total_lines = sum(
        1 for f in FIXTURES.glob("*.jsonl") for line in f.read_bytes().splitlines() if line.strip()
    )
    assert result.read == total_lines
    assert result.read == result.landed + result.quarantined
    assert result.quarantined == 3
    ev = events(tmp_path)
    assert ev.num_rows == result.landed
    q = quarantine(tmp_path).to_pylist()
    assert sorted(r["origin"].split(":")[0] for r in q) == ["shop-000002.jsonl"] * 3
    reasons = " | ".join(r["reason"] for r in q)
    assert "not valid JSON" in reasons and "'x'" in reasons and "list" in reasons
    assert all(r["raw"] and r["error_class"] for r in q)
    # Running again lands nothing: the offset is read back from bronze.
    again = land(FIXTURES, tmp_path)
    assert (again.read, again.batches) == (0, 0)
    assert events(tmp_path).num_rows == result.landed


def test_every_input_record_lands_exactly_once_with_its_origin(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=10, transactions=60, seed=3)
    path = tmp_path / "in.jsonl"
    n = write_lines(path, stream.lines("kafka_json", schemas=True))
    result = land(path, tmp_path / "lake", max_events=37)
    assert result.landed == n and result.quarantined == 0 and result.batches > 5
    origins = Counter(events(tmp_path / "lake").column(S.ORIGIN).to_pylist())
    assert origins == Counter(f"{path}:{i}" for i in range(1, n + 1))


@pytest.mark.parametrize("style", ["sequence", "commit_lsn", "lsn_only"])
def test_position_order_is_source_commit_order(tmp_path: Path, style: str) -> None:
    """Sorting bronze by position gives emission (= commit) order; per-row LSN order does not."""
    stream = postgres_stream(snapshot_rows=4, transactions=40, seed=11, source_style=style)
    path = tmp_path / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=False))
    land(path, tmp_path / "lake", max_events=25)
    rows = events(tmp_path / "lake").to_pylist()
    by_line = sorted(rows, key=lambda r: int(r[S.ORIGIN].rsplit(":", 1)[1]))
    by_position = sorted(rows, key=lambda r: r[S.POSITION])
    assert [r[S.ORIGIN] for r in by_position] == [r[S.ORIGIN] for r in by_line]
    assert len({r[S.POSITION] for r in rows}) == len(rows), "positions must be unique"
    data = [r for r in by_line if r[S.KIND] == "data" and r[S.SNAPSHOT] == "false"]
    lsns = [orjson.loads(r[S.VALUE_JSON])["source"]["lsn"] for r in data]
    assert lsns != sorted(lsns), "the generator must interleave per-row LSNs"
    decoded = decode_position("postgresql", rows[0][S.POSITION])
    assert decoded.encode() == rows[0][S.POSITION]


def test_snapshot_rows_sort_before_streamed_rows(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=6, transactions=10, seed=5)
    path = tmp_path / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=False))
    land(path, tmp_path / "lake")
    rows = sorted(events(tmp_path / "lake").to_pylist(), key=lambda r: r[S.POSITION])
    kinds = [r[S.OP] == "r" for r in rows if r[S.KIND] == "data"]
    assert kinds == sorted(kinds, reverse=True)
    assert sum(kinds) == 12


def test_batches_never_split_a_transaction(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=3, transactions=80, seed=9)
    path = tmp_path / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=False))
    result = land(path, tmp_path / "lake", max_events=5)
    assert result.batches > 20
    rows = events(tmp_path / "lake").to_pylist()
    batches_per_tx: dict[str, set[int]] = {}
    for r in rows:
        if r[S.TX_ID] is not None and r[S.KIND] in ("data", "transaction"):
            batches_per_tx.setdefault(r[S.TX_ID], set()).add(r[S.BATCH_SEQ])
    assert batches_per_tx and all(len(b) == 1 for b in batches_per_tx.values())
    assert not any(r[S.TX_PARTIAL] for r in rows)


def test_oversized_transaction_is_cut_and_marked_partial(tmp_path: Path) -> None:
    src = {
        "version": "2.5.0.Final",
        "connector": "postgresql",
        "name": "big",
        "ts_ms": 1,
        "snapshot": "false",
        "db": "d",
        "schema": "public",
        "table": "t",
        "txId": 900,
    }
    lines = [
        orjson.dumps(
            {
                "key": {"id": "900"},
                "value": {
                    "status": "BEGIN",
                    "id": "900",
                    "event_count": None,
                    "data_collections": None,
                },
            }
        )
    ]
    for i in range(30):
        lines.append(
            orjson.dumps(
                {
                    "key": {"id": i},
                    "value": {
                        "before": None,
                        "after": {"id": i},
                        "op": "c",
                        "ts_ms": 1,
                        "source": {
                            **src,
                            "lsn": 1000 + i,
                            "sequence": f'["500", "{1000 + i}"]',
                        },
                        "transaction": {
                            "id": "900",
                            "total_order": i + 1,
                            "data_collection_order": i + 1,
                        },
                    },
                }
            )
        )
    lines.append(
        orjson.dumps(
            {
                "key": {"id": "900"},
                "value": {
                    "status": "END",
                    "id": "900",
                    "event_count": 30,
                    "data_collections": [{"data_collection": "public.t", "event_count": 30}],
                },
            }
        )
    )
    path = tmp_path / "in.jsonl"
    write_lines(path, iter(lines))
    result = land(path, tmp_path / "lake", max_events=4, max_tx=10)
    assert result.landed == 32 and result.batches == 4
    rows = sorted(events(tmp_path / "lake").to_pylist(), key=lambda r: r[S.POSITION])
    by_batch: dict[int, list[dict[str, Any]]] = {}
    for r in rows:
        by_batch.setdefault(r[S.BATCH_SEQ], []).append(r)
    # Batches 0-2 end inside the transaction: every row of it there is marked partial.
    for seq in (0, 1, 2):
        assert all(r[S.TX_PARTIAL] for r in by_batch[seq] if r[S.TX_ID] == "900")
    assert not any(r[S.TX_PARTIAL] for r in by_batch[3])
    assert rows[0][S.TX_STATUS] == "BEGIN" and rows[-1][S.TX_STATUS] == "END"


def test_primary_key_change_keeps_headers_and_order(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=5, transactions=60, seed=21)
    path = tmp_path / "in.jsonl"
    write_lines(path, stream.lines("kafka_json", schemas=True))
    land(path, tmp_path / "lake")
    rows = sorted(events(tmp_path / "lake").to_pylist(), key=lambda r: r[S.POSITION])
    moves = [
        i
        for i, r in enumerate(rows)
        if r[S.HEADERS] and r[S.HEADERS][0]["key"] == "__debezium.newkey"
    ]
    assert moves, "the stream must contain primary-key changes"
    for i in moves:
        d, tomb, c = rows[i], rows[i + 1], rows[i + 2]
        assert (d[S.OP], tomb[S.KIND], c[S.OP]) == ("d", "tombstone", "c")
        assert tomb[S.KEY_JSON] == d[S.KEY_JSON] and tomb[S.VALUE_JSON] is None
        assert c[S.HEADERS][0]["key"] == "__debezium.oldkey"
        assert orjson.loads(c[S.HEADERS][0]["value"]) == orjson.loads(d[S.KEY_JSON])
        pd, pt, pn = (decode_position("postgresql", r[S.POSITION]) for r in (d, tomb, c))
        assert pd.base() == pt.base() == pn.base()
        assert (pt.seq, pn.seq) == (pd.seq + 1, pd.seq + 2)


def test_schema_registry_resolves_every_schema_id(tmp_path: Path) -> None:
    land(FIXTURES, tmp_path)
    ev = events(tmp_path)
    ids = {
        i for col in (S.KEY_SCHEMA_ID, S.VALUE_SCHEMA_ID) for i in ev.column(col).to_pylist() if i
    }
    registry = DeltaTable(str(tmp_path / "bronze" / "schemas")).to_pyarrow_table().to_pylist()
    assert ids and ids <= {r[S.SCHEMA_ID] for r in registry}
    assert len(registry) == len({r[S.SCHEMA_ID] for r in registry})
    assert all(orjson.loads(r[S.SCHEMA_JSON])["type"] == "struct" for r in registry)


def test_resume_after_partial_run_continues_where_bronze_says(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=5, transactions=50, seed=4)
    path = tmp_path / "in.jsonl"
    n = write_lines(path, stream.lines("key_tab_value", schemas=False))
    lake = tmp_path / "lake"
    first = land(path, lake, max_events=20, max_batches=3)
    assert first.batches == 3
    rest = land(path, lake, max_events=20)
    assert first.landed + rest.landed == n
    writer = BronzeWriter(BronzeTables.under(lake))
    committed = writer.last_committed(agent_app_id("shop"))
    assert committed is not None and committed.batch_seq == first.batches + rest.batches - 1
    st = path.stat()
    byte, line, identity = committed.offset["files"][str(path)]
    assert (byte, line) == (st.st_size, n)
    assert (identity["dev"], identity["ino"], identity["head"]) == (st.st_dev, st.st_ino, 4096)


def test_appended_lines_are_picked_up_next_run(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=2, transactions=20, seed=8)
    lines = list(stream.lines("kafka_json", schemas=False))
    path = tmp_path / "in.jsonl"
    write_lines(path, iter(lines[:30]))
    lake = tmp_path / "lake"
    assert land(path, lake).landed == 30
    with path.open("ab") as f:
        for line in lines[30:]:
            f.write(line + b"\n")
    assert land(path, lake).landed == len(lines) - 30
    assert events(lake).num_rows == len(lines)


def test_new_files_in_a_directory_are_read_once(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=2, transactions=20, seed=12)
    lines = list(stream.lines("kafka_json", schemas=False))
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_lines(inbox / "a.jsonl", iter(lines[:20]))
    lake = tmp_path / "lake"
    assert land(inbox, lake).landed == 20
    write_lines(inbox / "b.jsonl", iter(lines[20:]))
    assert land(inbox, lake).landed == len(lines) - 20
    assert land(inbox, lake).landed == 0
    assert Counter(events(lake).column(S.ORIGIN).to_pylist()).most_common(1)[0][1] == 1


class _Crash(Exception):
    pass


def test_half_landed_batch_is_redone_over_the_same_range(tmp_path: Path) -> None:
    """Quarantine committed, events not, then the file grows: the retry must not lose anything."""
    stream = postgres_stream(snapshot_rows=2, transactions=10, seed=31)
    lines = list(stream.lines("kafka_json", schemas=False))
    path = tmp_path / "in.jsonl"
    write_lines(path, iter([*lines[:20], b"{broken", *lines[20:30]]))
    lake = tmp_path / "lake"
    writer = BronzeWriter(BronzeTables.under(lake))
    source = DebeziumJsonSource("shop", path)
    writer.ensure_tables()
    source.open(None)
    batch = source.read_batch(max_events=1000, max_transaction_events=1000)
    assert batch.exhausted and batch.builder.quarantined == 1

    def crash(step: str) -> None:
        if step == "after_quarantine":
            raise _Crash(step)

    with pytest.raises(_Crash):
        writer.commit(
            agent_id=agent_app_id("shop"),
            batch_seq=0,
            batch=batch.builder,
            offset=batch.offset,
            on_step=crash,
        )
    assert writer.pending_batch_end(agent_app_id("shop")) == batch.offset
    # More input arrives, including another malformed record, before the agent restarts.
    with path.open("ab") as f:
        for line in [*lines[30:], b"[not, a, record]"]:
            f.write(line + b"\n")
    result = land(path, lake, max_events=1000)
    assert result.batches == 2, "the half-landed range must be redone as its own batch"
    assert writer.pending_batch_end(agent_app_id("shop")) is None
    ev = events(lake)
    assert ev.num_rows == len(lines)
    assert Counter(ev.column(S.ORIGIN).to_pylist()).most_common(1)[0][1] == 1
    q = quarantine(lake).to_pylist()
    assert sorted(r[S.RAW] for r in q) == [b"[not, a, record]", b"{broken"]


def test_following_waits_for_an_unterminated_line(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=2, transactions=4, seed=13)
    lines = list(stream.lines("kafka_json", schemas=False))
    path = tmp_path / "in.jsonl"
    write_lines(path, iter(lines[:-1]))
    last = lines[-1]
    with path.open("ab") as f:
        f.write(last[:25])  # a writer is in the middle of the last line
    lake = tmp_path / "lake"
    source = DebeziumJsonSource("shop", path)
    agent = LandingAgent(source, BronzeWriter(BronzeTables.under(lake)), max_events=1000)
    result = agent.run(follow=True, max_batches=1)
    assert (result.landed, result.quarantined) == (len(lines) - 1, 0)
    with path.open("ab") as f:
        f.write(last[25:] + b"\n")
    assert land(path, lake).landed == 1
    assert events(lake).num_rows == len(lines)


def test_leading_control_record_in_its_own_file_lands_once(tmp_path: Path) -> None:
    stream = postgres_stream(snapshot_rows=0, transactions=3, seed=41)
    lines = list(stream.lines("kafka_json", schemas=False))
    assert b'"BEGIN"' in lines[0]
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write_lines(inbox / "a.jsonl", iter(lines[:1]))  # only the first BEGIN
    write_lines(inbox / "b.jsonl", iter(lines[1:]))
    lake = tmp_path / "lake"
    assert land(inbox, lake).landed == len(lines)
    assert land(inbox, lake).landed == 0
    rows = sorted(events(lake).to_pylist(), key=lambda r: r[S.POSITION])
    assert rows[0][S.TX_STATUS] == "BEGIN" and rows[0][S.ORIGIN] == "a.jsonl:1"
    assert Counter(r[S.ORIGIN] for r in rows).most_common(1)[0][1] == 1
