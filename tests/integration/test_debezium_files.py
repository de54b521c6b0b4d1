"""Files are read exactly once whatever happens to them; bad records never stop the landing.

Real files, the real LandingAgent and BronzeWriter, real Delta tables (deltalake, no JVM).
"""

from __future__ import annotations

import datetime as dt
import os
from collections import Counter
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter, agent_app_id
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.errors import StageFailed
from pipeline.landing import LandingAgent, LandingResult
from tests.pgmodel.streams import postgres_stream

pytestmark = pytest.mark.delta

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"


def land(
    path: Path,
    lake: Path,
    *,
    name: str = "f",
    max_batches: int | None = None,
    max_events: int = 1000,
    **kw: Any,
) -> LandingResult:
    source = DebeziumJsonSource(name, path, **kw)
    agent = LandingAgent(source, BronzeWriter(BronzeTables.under(lake)), max_events=max_events)
    return agent.run(max_batches=max_batches)


def events(lake: Path) -> pa.Table:
    return DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()


def quarantine(lake: Path) -> list[dict[str, Any]]:
    return DeltaTable(str(lake / "bronze" / "quarantine")).to_pyarrow_table().to_pylist()


def stream_lines(n_tx: int, seed: int) -> list[bytes]:
    return list(
        postgres_stream(snapshot_rows=2, transactions=n_tx, seed=seed).lines(
            "kafka_json", schemas=False
        )
    )


def write(path: Path, lines: list[bytes], mode: str = "wb") -> None:
    with path.open(mode) as f:
        f.write(b"".join(line + b"\n" for line in lines))


def identity_error(exc: pytest.ExceptionInfo[StageFailed]) -> str:
    cause = exc.value.__cause__
    assert cause is not None and type(cause).__name__ == "FileIdentityError", repr(cause)
    return str(cause)


def test_rotation_by_rename_continues_and_a_new_file_under_the_old_name_is_new(
    tmp_path: Path,
) -> None:
    lines = stream_lines(30, seed=1)
    inbox, lake = tmp_path / "inbox", tmp_path / "lake"
    inbox.mkdir()
    current = inbox / "z-current.jsonl"
    write(current, lines[:20])
    assert land(inbox, lake, max_events=5, max_batches=2).landed < 20  # stopped mid-file
    write(current, lines[20:30], "ab")
    current.rename(inbox / "a-rotated.jsonl")  # same inode: continues from its offset
    write(current, lines[30:])  # a new file under the old name: read from its first byte
    land(inbox, lake)
    ev = events(lake).to_pylist()
    values = Counter(r[S.VALUE_JSON] for r in ev if r[S.VALUE_JSON] is not None)
    expected = Counter(
        orjson.dumps(orjson.loads(x)["value"]).decode()
        for x in lines
        if orjson.loads(x)["value"] is not None
    )
    assert values == expected and len(ev) == len(lines), "every record exactly once"
    rotated = sorted(int(r[S.ORIGIN].rsplit(":", 1)[1]) for r in ev if "a-rotated" in r[S.ORIGIN])
    assert rotated and rotated[0] > 1 and rotated[-1] == 30, "the rotated file continued"
    assert land(inbox, lake).read == 0


def test_a_shrunk_file_fails_loudly_naming_offset_and_size(tmp_path: Path) -> None:
    lines = stream_lines(10, seed=2)
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    write(path, lines)
    land(path, lake)
    committed = path.stat().st_size
    write(path, lines[:3])  # truncated and partly rewritten, same inode
    with pytest.raises(StageFailed) as info:
        land(path, lake)
    message = identity_error(info)
    assert str(path) in message and f"byte {committed}" in message
    assert f"{path.stat().st_size} bytes" in message and "new file" in message
    assert events(lake).num_rows == len(lines)


def test_a_file_rewritten_in_place_fails_loudly(tmp_path: Path) -> None:
    lines = stream_lines(10, seed=3)
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    write(path, lines)
    land(path, lake)
    other = stream_lines(14, seed=4)
    with path.open("r+b") as f:  # same inode, longer, different first bytes
        f.write(b"".join(line + b"\n" for line in other))
    assert path.stat().st_size > sum(len(x) + 1 for x in lines)
    with pytest.raises(StageFailed) as info:
        land(path, lake)
    assert "first 4096 bytes changed" in identity_error(info)


def test_a_file_that_vanishes_unread_fails_and_a_finished_one_is_forgotten(tmp_path: Path) -> None:
    lines = stream_lines(20, seed=5)
    inbox, lake = tmp_path / "inbox", tmp_path / "lake"
    inbox.mkdir()
    write(inbox / "a.jsonl", lines[:10])
    write(inbox / "b.jsonl", lines[10:])
    land(inbox, lake)
    (inbox / "a.jsonl").unlink()  # read to its end: forgotten
    assert land(inbox, lake).read == 0
    more = stream_lines(20, seed=55)[:40]  # other records: c.jsonl may get a.jsonl's inode
    write(inbox / "c.jsonl", more)
    land(inbox, lake, max_events=5, max_batches=1)
    (inbox / "c.jsonl").rename(tmp_path / "elsewhere.jsonl")
    with pytest.raises(StageFailed) as info:
        land(inbox, lake)
    message = identity_error(info)
    assert "c.jsonl disappeared" in message and "bytes bronze has not read" in message
    (tmp_path / "elsewhere.jsonl").rename(inbox / "d.jsonl")  # put back under another name
    land(inbox, lake)
    assert events(lake).num_rows == len(lines) + 40


def test_a_reused_inode_under_a_new_name_is_a_new_file(tmp_path: Path) -> None:
    lines = stream_lines(20, seed=6)
    inbox, lake = tmp_path / "inbox", tmp_path / "lake"
    inbox.mkdir()
    write(inbox / "a.jsonl", lines[:10])
    land(inbox, lake)
    # What a delete + create that reuses the freed inode looks like: same inode, other content,
    # other name. Done deterministically by rewriting the inode and renaming it.
    write(inbox / "a.jsonl", lines[10:])
    os.rename(inbox / "a.jsonl", inbox / "b.jsonl")
    land(inbox, lake)
    assert events(lake).num_rows == len(lines)


def test_unterminated_last_line_is_never_consumed_without_follow(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    lines = stream_lines(6, seed=7)
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    write(path, lines[:-1])
    with path.open("ab") as f:
        f.write(lines[-1][:30])  # the producer is mid-line (or never ends its last line)
    result = land(path, lake)
    assert (result.landed, result.quarantined) == (len(lines) - 1, 0)
    assert "without a newline" in caplog.text
    with path.open("ab") as f:
        f.write(lines[-1][30:] + b"\n")
    assert land(path, lake).landed == 1
    assert events(lake).num_rows == len(lines)


def test_format_1_offsets_are_migrated_by_name(tmp_path: Path) -> None:
    lines = stream_lines(10, seed=8)
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    write(inbox / "a.jsonl", lines)
    done = sum(len(x) + 1 for x in lines[:12])
    source = DebeziumJsonSource("f", inbox)
    source.open(
        {"format": 1, "files": {"a.jsonl": [done, 12]}, "last_partition": None, "positions": {}}
    )
    batch = source.read_batch(max_events=10_000, max_transaction_events=10_000)
    origins = [
        r[S.ORIGIN]
        for r in batch.builder.events_table(
            agent_id="a", batch_seq=0, ingest_ts=dt.datetime.now(dt.UTC), offset={}
        ).to_pylist()
    ]
    assert (
        origins[0] == "a.jsonl:13" and len(origins) + batch.builder.quarantined <= len(lines) - 12
    )
    entry = batch.offset["files"]["a.jsonl"]
    assert entry[:2] == [(inbox / "a.jsonl").stat().st_size, len(lines)]
    assert entry[2]["ino"] == (inbox / "a.jsonl").stat().st_ino
    shrunk = DebeziumJsonSource("f", inbox)
    shrunk.open({"format": 1, "files": {"a.jsonl": [10**9, 1]}})
    with pytest.raises(Exception, match="shrank below"):
        shrunk.read_batch(max_events=10, max_transaction_events=10)


# --- poison pills ------------------------------------------------------------------------------


def _oracle_23() -> bytes:
    value = orjson.loads((FIXTURES / "oracle_create.json").read_bytes())["value"]
    value = value.get("payload", value)
    return orjson.dumps(
        {"key": None, "value": {**value, "source": {**value["source"], "connector": "oracle"}}}
    )


def _pg(**source: Any) -> dict[str, Any]:
    return {
        "connector": "postgresql",
        "name": "shop",
        "db": "shop",
        "schema": "public",
        "table": "customers",
        "ts_ms": 1,
        "snapshot": "false",
        "txId": 1,
        "lsn": 5,
        **source,
    }


def _rec(value: Any, **extra: Any) -> bytes:
    return orjson.dumps({"key": {"id": 1}, "value": value, **extra})


# Every class of bad record, with a fragment its quarantine reason must contain.
POISON: list[tuple[str, bytes, str]] = [
    ("truncated JSON", b'{"key": {"id": 1}, "value": {"op": "c"', "not valid JSON"),
    ("not an object", _rec([1, 2]), "list"),
    ("unknown op", _rec({"op": "x", "after": {"id": 1}, "source": _pg()}), "unknown op 'x'"),
    ("create without after", _rec({"op": "c", "after": None, "source": _pg()}), "'after'"),
    ("no source block", _rec({"op": "c", "after": {"id": 1}}), "order.by: arrival"),
    ("no table (Oracle 2.3)", _oracle_23(), "'source.table' is missing"),
    (
        "no connector",
        _rec({"op": "c", "after": {"id": 1}, "source": {"name": "x"}}),
        "connector.hint",
    ),
    ("bad LSN", _rec({"op": "c", "after": {"id": 1}, "source": _pg(lsn="zz/yy")}), "lsn"),
    ("bad headers", _rec({"op": "c", "after": {"id": 1}, "source": _pg()}, headers=7), "headers"),
    (
        "int64 overflow",
        _rec(
            {
                "op": "c",
                "after": {"id": 1},
                "source": _pg(),
                "transaction": {
                    "id": "1",
                    "total_order": "99999999999999999999",
                    "data_collection_order": 1,
                },
            }
        ),
        "int64",
    ),
    ("Connect toString", b"Struct{after=Struct{id=1},op=c}", "StringConverter"),
    (
        "CloudEvent with Avro data",
        orjson.dumps({"specversion": "1.0", "id": "1", "iodebeziumop": "c", "data": "AAAA"}),
        "data.serializer.type=json",
    ),
    (
        "END without event_count",
        _rec({"status": "END", "id": "1", "data_collections": []}),
        "event_count",
    ),
    (
        "schema not an object",
        b'{"schema": 1, "payload": {"op": "c"}}',
        "'schema' must be a JSON object",
    ),
]


def test_each_poison_pill_mid_stream_is_quarantined_and_everything_else_lands(
    tmp_path: Path,
) -> None:
    lake = tmp_path / "lake"
    expected: dict[str, tuple[int, dict[str, str]]] = {}
    for s, seed in (("shop_a", 11), ("shop_b", 12)):
        inbox = tmp_path / s
        inbox.mkdir()
        good = stream_lines(40, seed=seed)
        bad_at: dict[str, str] = {}
        third = len(good) // 3
        chunks = [good[:third], good[third : 2 * third], good[2 * third :]]  # three files
        for f, chunk in enumerate(chunks):
            lines: list[bytes] = []
            for i, line in enumerate(chunk):
                lines.append(line)
                pill = POISON[(i + f * 5) % len(POISON)] if i % 4 == 1 else None
                if pill is not None:
                    lines.append(pill[1])
                    bad_at[f"{f}.jsonl:{len(lines)}"] = pill[2]
            write(inbox / f"{f}.jsonl", lines)
        expected[s] = (len(good), bad_at)
    for s, (n_good, bad_at) in expected.items():
        result = land(tmp_path / s, lake, name=s, max_events=7)
        assert result.read == result.landed + result.quarantined == n_good + len(bad_at)
        assert result.quarantined == len(bad_at)
    ev = events(lake).to_pylist()
    q = quarantine(lake)
    for s, (n_good, bad_at) in expected.items():
        landed = [r for r in ev if r[S.SOURCE] == s]
        assert len(landed) == n_good and len({r[S.ORIGIN] for r in landed}) == n_good
        assert len({r[S.POSITION] for r in landed}) == n_good
        assert all(r[S.COLLECTION] for r in landed if r[S.KIND] == "data")
        mine = {r[S.ORIGIN]: r for r in q if r[S.SOURCE] == s}
        assert set(mine) == set(bad_at)
        for origin, fragment in bad_at.items():
            assert fragment in mine[origin][S.REASON], (origin, mine[origin][S.REASON])
    kinds = {frag for _, (_, bad) in expected.items() for frag in bad.values()}
    assert kinds == {p[2] for p in POISON}, "every class of bad record was injected"
    agent = BronzeWriter(BronzeTables.under(lake)).last_committed(agent_app_id("shop_a"))
    assert agent is not None


REAL = Path(__file__).resolve().parent.parent / "fixtures" / "debezium_real"


@pytest.mark.parametrize("name", ["pg_shop", "pg_shop.noschema", "pg_edge", "mariadb_shop"])
def test_recorded_real_debezium_output_lands_whole(tmp_path: Path, name: str) -> None:
    """Debezium 3.6.1 (PostgreSQL) and 3.4.0 (MariaDB) output as recorded: all lands, and the
    BEGIN, END and data events of a transaction share one tx_id (C3: PostgreSQL's ids are
    ``txId:LSN`` with a different LSN on every record)."""
    path = REAL / f"{name}.jsonl"
    result = land(path, tmp_path / "lake", max_events=10)
    assert result.quarantined == 0 and result.landed == len(path.read_bytes().splitlines())
    rows = events(tmp_path / "lake").to_pylist()
    assert all(r[S.COLLECTION] for r in rows if r[S.KIND] == "data")
    parts: dict[str, set[str]] = {}
    for r in rows:
        if r[S.TX_ID] is not None and (r[S.KIND] == "transaction" or r[S.TX_ORDER] is not None):
            parts.setdefault(r[S.TX_ID], set()).add(r[S.TX_STATUS] or "data")
    ended = [tx for tx, seen in parts.items() if "END" in seen]
    assert ended and all(parts[tx] == {"BEGIN", "data", "END"} for tx in ended)
    if name.startswith("pg"):
        assert all(":" not in tx for tx in parts)
        assert all(seen == {"BEGIN", "data", "END"} for seen in parts.values())
