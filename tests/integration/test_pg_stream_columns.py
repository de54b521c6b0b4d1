"""The stream's columnar road writes what the per-event road writes, byte for byte (issue 26).

One slot, one stream of changes, read twice from the same offset: with
``StreamReader.COLUMNAR_STREAM`` off (every change the per-event road) and on (inserts and
updates without an old tuple held as columns and landed per table). The stream holds every
type and edge value of the type-fidelity table (C1 values among them, whose tables' changes
are replayed the per-event way), strings to escape under a mask, a hash, a truncation and a
column filter, a keyless table, a REPLICA IDENTITY FULL table, an unchanged TOAST value, a key
move, deletes, a truncate and a logical message between the changes, in transactions that mix
the tables; small batches cut transactions. Every batch's bronze rows, quarantine, schemas and
offset must be equal, except the times each run took itself, and the columnar road must have
landed most of the changes (counted, so the comparison cannot pass with the road unused).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bronze import schema as S
from capture.postgresql.stream import StreamReader
from capture.postgresql.stream_columns import PendingChanges
from capture.registry import create_source
from tests.fidelity import postgresql
from tests.integration.test_columnar_snapshot import _setup, normalized
from tests.integration.test_pg_capture import Pg, pg_corner

_MESSAGE_TS = re.compile(r'^\{"op":"m","ts_ms":\d+')
"""A logical message's envelope carries the time it was read first."""


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


def _changes(pg: Pg) -> None:
    """The stream: every kind of change, tables mixed inside transactions."""
    s = pg.schema
    names = ", ".join(["id", *(c.column for c in postgresql.TYPE_TABLE.cases)])
    pg.sql(
        f"BEGIN; INSERT INTO {s}.fidelity ({names}) SELECT id + 1000, "
        f"{names.split(', ', 1)[1]} FROM {s}.fidelity; "
        f"INSERT INTO {s}.keyless VALUES ('between', 7); "
        f"UPDATE {s}.fidelity SET id = id WHERE id < 1000; COMMIT",
        f"BEGIN; UPDATE {s}.strings SET s = s || 'x', masked = 'm', hashed = 'h', cut = 'cutting',"
        f" dropped = 'd', flag = NOT flag; INSERT INTO {s}.keyless SELECT s, n + 100 "
        f"FROM {s}.keyless; SELECT pg_logical_emit_message(true, 'medallion-test', 'between');"
        f" INSERT INTO {s}.keyless VALUES (NULL, NULL); COMMIT",
        f"UPDATE {s}.strings SET n = n + 1000 WHERE n = 1",  # a key move: the old key is sent
        f"DELETE FROM {s}.strings WHERE n = 2",
        f"UPDATE {s}.full_rows SET n = n + 1",  # REPLICA IDENTITY FULL: the old row is sent
        f"UPDATE {s}.toasted SET n = n + 1",  # the big value is unchanged: sent as 'u'
        f"INSERT INTO {s}.toasted VALUES (2, 'small', 2)",
        f"BEGIN; INSERT INTO {s}.strings (k, n, s) SELECT 'k' || g, g + 5000, 'v' || g "
        f"FROM generate_series(1, 40) g; UPDATE {s}.strings SET s = 'y' WHERE n % 3 = 0; "
        f"INSERT INTO {s}.strings (k, n) VALUES ('late', 6000); TRUNCATE {s}.keyless; "
        f"INSERT INTO {s}.keyless VALUES ('after truncate', 1); COMMIT",
    )


def _stream(source: Any, offset: dict[str, Any]) -> list[tuple[Any, ...]]:
    """Every batch of the stream from ``offset``: (events, quarantine, schemas, offset)."""
    source.open(offset)
    out: list[tuple[Any, ...]] = []
    try:
        for batch_seq in range(1000):
            batch = source.read_batch(max_events=7, max_transaction_events=5)
            builder = batch.builder
            if len(builder) == 0 and builder.quarantined == 0 and batch.exhausted:
                return out
            events, quarantine, schemas, offset = normalized(batch, batch_seq)
            for row in events:
                if row[S.VALUE_JSON] is not None:
                    row[S.VALUE_JSON] = _MESSAGE_TS.sub('{"op":"m","ts_ms"', row[S.VALUE_JSON])
            out.append((events, quarantine, schemas, offset))
        raise AssertionError("the stream did not end in 1000 batches")
    finally:
        source.release()


@pytest.mark.postgres
def test_the_columnar_stream_writes_the_per_event_bytes(
    pg: Pg, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _setup(pg)
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.full_rows (id int PRIMARY KEY, n int)",
        f"ALTER TABLE {s}.full_rows REPLICA IDENTITY FULL",
        f"INSERT INTO {s}.full_rows VALUES (1, 1), (2, 2)",
        f"CREATE TABLE {s}.toasted (id int PRIMARY KEY, big text, n int)",
        f"ALTER TABLE {s}.toasted ALTER COLUMN big SET STORAGE EXTERNAL",
        f"INSERT INTO {s}.toasted SELECT 1, string_agg(md5(g::text), '') , 1 "
        "FROM generate_series(1, 400) g",
    )
    config = pg.config(
        **{
            "snapshot.mode": "never",
            "column.mask.with.5.chars": f"{s}\\.strings\\.masked",
            "column.mask.hash.SHA-256.with.salt.pepper": f"{s}\\.strings\\.hashed",
            "column.truncate.to.3.chars": f"{s}\\.strings\\.cut",
            "column.exclude.list": f"{s}\\.strings\\.dropped",
        }
    )
    lake = tmp_path / "lake"
    per_event = create_source(config)
    assert isinstance(per_event, StreamReader)
    per_event.bind_lake(lake)
    monkeypatch.setattr(per_event, "COLUMNAR_STREAM", False)
    per_event.open(None)
    start = per_event._offset_now()  # where the slot starts: both runs read from here
    per_event.release()
    _changes(pg)
    expected = _stream(per_event, start)

    counts = {"landed": 0, "replayed": 0}
    land = PendingChanges.land

    def counting(self: PendingChanges, *args: Any) -> list[str]:
        landed, replayed = self.landed, self.replayed
        why = land(self, *args)
        counts["landed"] += self.landed - landed
        counts["replayed"] += self.replayed - replayed
        return why

    monkeypatch.setattr(PendingChanges, "land", counting)
    columnar = create_source(config)
    columnar.bind_lake(lake)
    got = _stream(columnar, start)

    rows = [r for events, *_ in expected for r in events]
    assert len(rows) > 3 * postgresql.TYPE_TABLE.depth
    assert {r[S.OP] for r in rows} >= {"c", "u", "d", "t"}
    assert len(got) == len(expected)
    for seq, (batch, want) in enumerate(zip(got, expected, strict=True)):
        assert batch == want, f"batch {seq} differs"
    assert any(r[S.TX_PARTIAL] for r in rows)  # the small batches cut transactions
    assert counts["replayed"] > 0  # the fidelity table's C1 values: replayed per event
    assert counts["landed"] - counts["replayed"] >= 40  # the strings inserted at the end, say
    values = [r[S.VALUE_JSON] for r in rows if r[S.VALUE_JSON] is not None]
    assert any('"masked":"*****"' in v for v in values)
    assert any("\\u001f" in v for v in values)
    assert any("__debezium_unavailable_value" in v for v in values)  # the TOAST placeholder
