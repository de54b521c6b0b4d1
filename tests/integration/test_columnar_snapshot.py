"""The columnar snapshot writes what the per-row snapshot writes, byte for byte (issue 26).

Per connector (PostgreSQL, MariaDB), one snapshot of the type-fidelity table (every type and edge
value the suite covers,
an all-NULL row, C1 values), a table of awkward strings under column masks, hashes, truncation
and a column filter, and a keyless table, read twice from the same snapshot progress: by the
per-row loop, and by the columnar loop (``COPY`` chunks converted column by column). The two
runs share the snapshot point and start time (the second resumes the first's initial offset),
so every bronze column must be equal, except the times each run took itself (``ts_ms`` of the
envelope, ``event_ts_ms``, ``capture_ts``). Small chunks and batches make batches end inside
chunks, chunks with a C1 value go the per-row way, and the rest the columnar way (counted, so
the comparison cannot pass with the columnar path unused).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pymysql
import pytest
from psycopg import sql

from bronze import schema as S
from capture.base import SourceBatch
from capture.columnar_snapshot import ColumnarSnapshot
from capture.postgresql.snapshot import copy_chunks
from capture.postgresql.source import PostgresSource
from capture.registry import create_source
from tests.fidelity import mariadb, postgresql
from tests.integration.test_mysql_capture import My, corner
from tests.integration.test_pg_capture import Pg, pg_corner

_INGEST = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
_OWN_TIMES = (S.CAPTURE_TS, S.EVENT_TS_MS, S.INGEST_TS, S.INGEST_DATE)
_ENVELOPE_TS = re.compile(r',"ts_ms":\d+}$')

_STRINGS = (
    "",
    "plain",
    'quote " and backslash \\ and both \\"',
    "tab\there, newline\nthere, cr\r, bell\x07, unit\x1f, esc\x1b, del\x7f",
    "form\ffeed and backspace\b",
    "unicode é ü 中文 😀 \u2028",
    "NULL",
    '"quoted"',
    ",comma,",
)
"""Text values JSON must escape (or not), inserted as parameters."""


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    yield from corner(mariadb_conn)


def _setup(pg: Pg) -> None:
    s = pg.schema
    cases = postgresql.TYPE_TABLE.cases
    columns = ", ".join(f"{c.column} {c.sql_type}" for c in cases)
    pg.sql(
        *(statement.replace("{s}", s) for statement in postgresql.SETUP),
        f"CREATE TABLE {s}.fidelity (id int PRIMARY KEY, {columns})".replace("{s}", s),
    )
    names = ", ".join(["id", *(c.column for c in cases)])
    for row in range(1, postgresql.TYPE_TABLE.depth + 2):
        literals = postgresql.TYPE_TABLE.literals(row).values()
        values = ", ".join([str(row), *literals]).replace("{s}", s)
        pg.sql(f"INSERT INTO {s}.fidelity ({names}) VALUES ({values})")
    pg.sql(
        f"CREATE TABLE {s}.strings (k text, n int, s text, masked text, hashed text, cut text, "
        "dropped text, flag boolean, PRIMARY KEY (n, k))",
        f"CREATE TABLE {s}.keyless (s text, n bigint)",
    )
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        for n, text in enumerate(_STRINGS):
            conn.execute(
                f"INSERT INTO {s}.strings VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (text, n, text, text, text, text, text, bool(n % 2)),
            )
            conn.execute(f"INSERT INTO {s}.keyless VALUES (%s, %s)", (text, n))
    pg.sql(
        f"INSERT INTO {s}.strings (k, n) VALUES ('nulls', 100)",
        f"INSERT INTO {s}.keyless VALUES (NULL, NULL)",
    )


def normalized(batch: SourceBatch, batch_seq: int) -> tuple[Any, ...]:
    """``(events, quarantine, schemas, offset)`` of a batch as rows, without the times the run
    took itself (``ts_ms`` of the envelope, ``event_ts_ms``, ``capture_ts``, the ingest time)."""
    builder = batch.builder
    events = builder.events_table(
        agent_id="a", batch_seq=batch_seq, ingest_ts=_INGEST, offset=batch.offset
    )
    rows = events.drop_columns(list(_OWN_TIMES)).to_pylist()
    for row in rows:
        if row[S.VALUE_JSON] is not None:
            row[S.VALUE_JSON] = _ENVELOPE_TS.sub(",ts_ms}", row[S.VALUE_JSON])
    quarantine = (
        builder.quarantine_table(agent_id="a", batch_seq=batch_seq, ingest_ts=_INGEST)
        .drop_columns([S.CAPTURE_TS])
        .to_pylist()
    )
    schemas = builder.schemas_table(known=set(), first_seen=_INGEST).to_pylist()
    return rows, quarantine, schemas, batch.offset


def _snapshot(source: Any, offset: dict[str, Any] | None) -> list[tuple[Any, ...]]:
    """Every batch of the snapshot: (events, quarantine, schemas, offset), normalized."""
    source.settings = dataclasses.replace(source.settings, snapshot_fetch_size=3)
    source.open(offset)
    out = []
    try:
        for batch_seq in range(1000):
            batch = source.read_batch(max_events=5, max_transaction_events=100_000)
            out.append(normalized(batch, batch_seq))
            if batch.offset["phase"] != "snapshot":
                return out
        raise AssertionError("the snapshot did not end in 1000 batches")
    finally:
        source.release()


def assert_same_bytes(
    config: Any, monkeypatch: pytest.MonkeyPatch, rows: int, lake: Path
) -> list[str]:
    """Snapshot ``config``'s tables per row, then columnar from the same first offset; every
    batch must be equal. Returns the columnar run's VALUE_JSON texts."""
    per_row = create_source(config)
    per_row.bind_lake(lake)
    assert isinstance(per_row, ColumnarSnapshot)
    monkeypatch.setattr(per_row, "COLUMNAR_SNAPSHOT", False)
    per_row.open(None)
    start = per_row._offset_now()  # the snapshot's first offset: the columnar run resumes it
    per_row.release()
    expected = _snapshot(per_row, start)

    columnar = create_source(config)
    assert isinstance(columnar, ColumnarSnapshot)
    columnar.bind_lake(lake)
    chunked = 0
    land = ColumnarSnapshot._add_chunk

    def counting(self: Any, builder: Any, table: Any, fragments: Any, n: int, *args: Any) -> None:
        nonlocal chunked
        chunked += n
        land(self, builder, table, fragments, n, *args)

    monkeypatch.setattr(ColumnarSnapshot, "_add_chunk", counting)
    got = _snapshot(columnar, start)

    assert sum(len(events) for events, *_ in expected) == rows
    assert chunked >= 2 * (len(_STRINGS) + 1)  # the strings and keyless tables at least
    assert len(got) == len(expected)
    for (events, quarantine, schemas, offset), (want_events, want_q, want_s, want_o) in zip(
        got, expected, strict=True
    ):
        assert events == want_events
        assert quarantine == want_q
        assert schemas == want_s
        assert offset == want_o
    encoders = {topic.rsplit(".", 1)[1]: e for topic, e in (columnar._encoders or {}).items()}
    assert all(e is not None for e in encoders["strings"][:3])  # k, n, s: vectorized
    values = [r[S.VALUE_JSON] for events, *_ in got for r in events]
    assert any('"masked":"*****"' in v for v in values)  # the masks were applied (both ways)
    assert any("\\u001f" in v for v in values)  # the control characters were escaped
    return values


@pytest.mark.postgres
def test_columnar_snapshot_writes_the_per_row_bytes(
    pg: Pg, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _setup(pg)
    s = pg.schema
    config = pg.config(
        **{
            "column.mask.with.5.chars": f"{s}\\.strings\\.masked",
            "column.mask.hash.SHA-256.with.salt.pepper": f"{s}\\.strings\\.hashed",
            "column.truncate.to.3.chars": f"{s}\\.strings\\.cut",
            "column.exclude.list": f"{s}\\.strings\\.dropped",
        }
    )
    rows = postgresql.TYPE_TABLE.depth + 1 + 2 * (len(_STRINGS) + 1)
    assert_same_bytes(config, monkeypatch, rows, tmp_path / "lake")


@pytest.mark.mysql
def test_columnar_mariadb_snapshot_writes_the_per_row_bytes(
    my: My, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    d = my.database
    cases = mariadb.TYPE_TABLE.cases
    columns = ", ".join(f"{c.column} {c.sql_type}" for c in cases)
    statements = [
        f"CREATE TABLE {d}.fidelity (id int PRIMARY KEY, {columns}) DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE {d}.strings (k varchar(64), n int, s text, masked text, hashed text, "
        "cut text, dropped text, flag tinyint, PRIMARY KEY (n, k)) DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE {d}.keyless (s text, n bigint) DEFAULT CHARSET=utf8mb4",
    ]
    names = ", ".join(["id", *(c.column for c in cases)])
    for row in range(1, mariadb.TYPE_TABLE.depth + 2):
        values = ", ".join([str(row), *mariadb.TYPE_TABLE.literals(row).values()])
        statements.append(f"INSERT INTO {d}.fidelity ({names}) VALUES ({values})")
    statements += [
        f"INSERT INTO {d}.strings (k, n) VALUES ('nulls', 100)",
        f"INSERT INTO {d}.keyless VALUES (NULL, NULL)",
    ]
    with pymysql.connect(**my.conn, autocommit=True) as db, db.cursor() as cur:
        for statement in (*mariadb.SESSION, *statements):
            cur.execute(statement)
        for n, text in enumerate(_STRINGS):
            cur.execute(
                f"INSERT INTO {d}.strings VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                (text, n, text, text, text, text, text, n % 2),
            )
            cur.execute(f"INSERT INTO {d}.keyless VALUES (%s, %s)", (text, n))
    config = my.config(
        **{
            "column.mask.with.5.chars": f"{d}\\.strings\\.masked",
            "column.mask.hash.SHA-256.with.salt.pepper": f"{d}\\.strings\\.hashed",
            "column.truncate.to.3.chars": f"{d}\\.strings\\.cut",
            "column.exclude.list": f"{d}\\.strings\\.dropped",
            "include.schema.changes": False,
        }
    )
    rows = mariadb.TYPE_TABLE.depth + 1 + 2 * (len(_STRINGS) + 1)
    assert_same_bytes(config, monkeypatch, rows, tmp_path / "lake")


@pytest.mark.postgres
def test_copy_chunks_resume_after_a_key_with_quotes(pg: Pg) -> None:
    """The resume key of a ``COPY`` chunk is a literal: a key with quotes and backslashes seeks
    exactly (bound parameters did that before)."""
    s = pg.schema
    pg.sql(f'CREATE TABLE {s}.k (k text COLLATE "C" PRIMARY KEY)')
    keys = ["a", "b'c", "b\\'d", 'e"f', "g\\", "h"]
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        for key in keys:
            conn.execute(
                sql.SQL("INSERT INTO {} VALUES (%s)").format(sql.Identifier(s, "k")), [key]
            )
    source = create_source(pg.config())
    assert isinstance(source, PostgresSource)
    with psycopg.connect(pg.dsn, autocommit=True) as conn:
        ts = source._table_schema(conn, s, "k", track=False)
        assert ts is not None
        got = [
            v
            for chunk in copy_chunks(conn, ts, 2, after=["b'c"])
            for v in chunk.column(0).to_pylist()
        ]
    assert got == sorted(k for k in keys if k > "b'c")
