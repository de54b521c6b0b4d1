"""The MySQL stream's columnar road writes what the per-event road writes, byte for byte (issue 26).

One binlog range on MariaDB: the type-fidelity table (every type and edge value the suite
covers, an all-NULL row, C1 values) inserted and then updated in one multi-row event, a table of
awkward strings under column masks, a hash, truncation and a column filter (with unsigned,
BIGINT and DATETIME(6) columns), and a keyless table, changed in transactions that interleave
the tables, with a key move, deletes and a transaction larger than ``max.transaction.size``.
The range is read twice from the same offset: every row event by the per-event road
(``STREAM_COLUMNS`` off), then with the columnar road; every batch (events, quarantine,
schemas, offset) must be equal, except the times each run took itself. Small batches make the
held rows land at batch ends and cuts, C1 values and the key move make their tables' events
replay through the per-event road in their place, and the rest goes column by column (counted,
so the comparison cannot pass with either road unused).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest

from bronze import schema as S
from capture.mysql.source import MySqlSource
from capture.mysql.stream import StreamReader
from capture.mysql.stream_columns import HeldRows
from capture.registry import create_source
from tests.fidelity import mariadb
from tests.integration.test_columnar_snapshot import _STRINGS, normalized
from tests.integration.test_mysql_capture import My, corner

pytestmark = [pytest.mark.mysql, pytest.mark.delta]


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    yield from corner(mariadb_conn)


def _stream(config: Any, lake: Path, start: dict[str, Any], limits: tuple[int, int]) -> list[Any]:
    """Every batch of the stream from ``start`` until the binlog is read, normalized."""
    source = create_source(config)
    assert isinstance(source, MySqlSource)
    source.bind_lake(lake)
    source.open(start)
    out = []
    try:
        for batch_seq in range(2000):
            batch = source.read_batch(max_events=limits[0], max_transaction_events=limits[1])
            out.append(normalized(batch, batch_seq))
            if batch.exhausted:
                return out
        raise AssertionError("the stream did not end in 2000 batches")
    finally:
        source.release()


def _workload(my: My) -> None:
    d = my.database
    cases = mariadb.TYPE_TABLE.cases
    names = ", ".join(["id", *(c.column for c in cases)])
    statements = []
    for row in range(1, mariadb.TYPE_TABLE.depth + 2):
        values = ", ".join([str(row), *mariadb.TYPE_TABLE.literals(row).values()])
        statements.append(f"INSERT INTO {d}.fidelity ({names}) VALUES ({values})")
    # one update event of every row: before and after images of every type
    statements.append(f"UPDATE {d}.fidelity SET note = 'updated'")
    with pymysql.connect(**my.conn, autocommit=True) as db, db.cursor() as cur:
        for statement in (*mariadb.SESSION, *statements):
            cur.execute(statement)
        insert = f"INSERT INTO {d}.strings VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
        for n, text in enumerate(_STRINGS):
            cur.execute("START TRANSACTION")
            at = f"20{n:02d}-0{n % 9 + 1}-1{n % 9} 0{n % 9}:3{n % 9}:00.{n:06d}"
            cur.execute(insert, (text, n, text, text, text, text, text, n % 2, n, -n, at))
            cur.execute(f"INSERT INTO {d}.keyless VALUES (%s, %s)", (text, n))
            cur.execute(f"UPDATE {d}.fidelity SET note = %s WHERE id = 1", (text[:20],))
            cur.execute("COMMIT")
        cur.execute(f"INSERT INTO {d}.strings (k, n) VALUES ('nulls', 100)")
        cur.execute(f"INSERT INTO {d}.keyless VALUES (NULL, NULL)")
        cur.execute(  # one multi-row insert larger than the batch and the transaction limit
            f"INSERT INTO {d}.strings (k, n, s, u, big, at) VALUES "
            + ", ".join(
                f"('bulk', {200 + i}, 's{i}', {4294967295 - i}, {2**63 - 1 - i}, "
                f"'2026-11-29 14:00:{i % 60:02d}.{i:06d}')"
                for i in range(30)
            )
        )
        cur.execute(f"UPDATE {d}.strings SET s = CONCAT(s, '!') WHERE n >= 200")
        cur.execute(f"UPDATE {d}.keyless SET n = n + 1000")
        cur.execute(f"UPDATE {d}.strings SET n = 150 WHERE n = 1")  # a key move
        cur.execute(f"DELETE FROM {d}.strings WHERE n = 2")
        cur.execute(f"UPDATE {d}.strings SET s = 'after the delete' WHERE n = 3")


@pytest.mark.parametrize("limits", [(7, 4), (10_000, 100_000)], ids=["small", "one-batch"])
def test_columnar_stream_writes_the_per_event_bytes(
    my: My, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, limits: tuple[int, int]
) -> None:
    d = my.database
    cases = mariadb.TYPE_TABLE.cases
    columns = ", ".join(f"{c.column} {c.sql_type}" for c in cases)
    my.sql(
        f"CREATE TABLE {d}.fidelity (id int PRIMARY KEY, {columns}, note varchar(20)) "
        "DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE {d}.strings (k varchar(64), n int, s text, masked text, hashed text, "
        "cut text, dropped text, flag tinyint, u int unsigned, big bigint, at datetime(6), "
        "PRIMARY KEY (n, k)) DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE {d}.keyless (s text, n bigint) DEFAULT CHARSET=utf8mb4",
    )
    config = my.config(
        **{
            "column.mask.with.5.chars": f"{d}\\.strings\\.masked",
            "column.mask.hash.SHA-256.with.salt.pepper": f"{d}\\.strings\\.hashed",
            "column.truncate.to.3.chars": f"{d}\\.strings\\.cut",
            "column.exclude.list": f"{d}\\.strings\\.dropped",
            "include.schema.changes": False,
            "snapshot.mode": "schema_only",
        }
    )
    lake = tmp_path / "lake"
    first = create_source(config)
    assert isinstance(first, MySqlSource)
    first.bind_lake(lake)
    first.open(None)
    start = first.read_batch(max_events=100, max_transaction_events=100).offset
    first.release()
    assert start["phase"] == "stream"
    _workload(my)

    monkeypatch.setattr(StreamReader, "STREAM_COLUMNS", False)
    expected = _stream(config, lake, start, limits)
    monkeypatch.setattr(StreamReader, "STREAM_COLUMNS", True)
    landed = replayed = 0
    land = HeldRows.land

    def counting(self: HeldRows, *args: Any) -> Any:
        nonlocal landed, replayed
        before = (self.landed, self.replayed)
        out = land(self, *args)
        landed += self.landed - before[0]
        replayed += self.replayed - before[1]
        return out

    monkeypatch.setattr(HeldRows, "land", counting)
    got = _stream(config, lake, start, limits)

    assert got == expected  # per batch: events, quarantine, schemas, offset
    # events (not rows) on each road: both used
    assert landed - replayed >= 20 and replayed >= 2, (landed, replayed)
    values = [r[S.VALUE_JSON] for events, *_ in got for r in events if r[S.VALUE_JSON]]
    assert any('"masked":"*****"' in v for v in values)  # the masks were applied (both ways)
    assert any("\\u001f" in v for v in values)  # the control characters were escaped
    cut = any(r[S.TX_PARTIAL] for events, *_ in got for r in events)
    assert cut == (limits[1] < 30)  # the 30-row insert was cut where the limit is below it
