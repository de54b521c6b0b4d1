"""The agent's binlog reader (capture.mysql.binlog) against mysql-replication on one real binlog.

One binlog range on the private MariaDB holds every column type of the live type test (its
rows and UPDATE, zero dates under ``sql_mode=''``), multi-row events, deletes, updates under a
MINIMAL row image (columns left out of the image), NULLs, random values and many repeated
table maps. Both readers read it from the same position; every event they return must be the
same: class, table, header fields and rows (values and ``none_sources``), in the same order.
"""

from __future__ import annotations

import gc
import random
from collections.abc import Iterator
from typing import Any

import pymysql
import pytest
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from capture.mysql.binlog import BinlogReader
from capture.mysql.stream import _EVENTS  # what the agent reads
from tests.integration.test_mysql_types_live import COLUMNS, INSERTS, UPDATE, insert_sql

pytestmark = pytest.mark.mysql

DB = "binlog_reader"


def _workload(cur: Any, rng: random.Random) -> None:
    ddl = ", ".join(d for d, _ in COLUMNS)
    cur.execute(f"CREATE TABLE t ({ddl}) DEFAULT CHARSET=utf8mb4")
    cur.execute(
        "CREATE TABLE oltp (id BIGINT PRIMARY KEY, a INT, b INT UNSIGNED, m MEDIUMINT, "
        "s SMALLINT UNSIGNED, y TINYINT, f FLOAT, d DOUBLE, c CHAR(84), v VARCHAR(300), "
        "l TEXT CHARACTER SET latin1, bl BLOB, t DATETIME(6), t0 DATETIME, t3 DATETIME(3), "
        "ts TIMESTAMP(6) NULL, ts0 TIMESTAMP NULL, dd DATE, n DECIMAL(12,3), "
        "e ENUM('x','y'), j JSON) DEFAULT CHARSET=utf8mb4"
    )
    cur.execute("SET SESSION time_zone = '+05:30', SESSION sql_mode = ''")
    for row in INSERTS:
        cur.execute(insert_sql(row))
    cur.execute(UPDATE)
    values = []
    for i in range(1, 301):
        null = rng.random() < 0.2
        fields = [
            i,
            "NULL" if null else rng.randint(-(2**31), 2**31 - 1),
            rng.randint(0, 2**32 - 1),
            rng.randint(-(2**23), 2**23 - 1),
            rng.randint(0, 65535),
            rng.randint(-128, 127),
            rng.uniform(-1e6, 1e6),
            rng.uniform(-1e300, 1e300),
            f"'c{i}é'",
            "NULL" if null else f"'{'v€' * rng.randint(0, 140)}'",
            "'latin ÿé'",
            f"x'{rng.randbytes(rng.randint(0, 20)).hex()}'",
            f"'2026-11-{rng.randint(1, 28):02d} 12:{rng.randint(0, 59):02d}:07.{i:06d}'",
            "'0000-00-00 00:00:00'" if i % 50 == 0 else "'1999-12-31 23:59:59'",
            f"'2001-02-03 04:05:06.{i % 1000:03d}'",
            "NULL" if null else f"FROM_UNIXTIME({rng.randint(1, 2**31 - 2)}.{i:06d})",
            "'1970-01-01 00:00:00'" if i % 60 == 0 else "'2020-01-01 00:00:01'",
            "'0000-00-00'" if i % 40 == 0 else f"'20{i % 100:02d}-0{i % 9 + 1}-1{i % 9}'",
            f"{rng.randint(-(10**8), 10**8)}.{rng.randint(0, 999):03d}",
            "'y'" if i % 2 else "'x'",
            "NULL" if null else f"JSON_OBJECT('k', {i}, 'l', JSON_ARRAY(1, 'two', NULL))",
        ]
        values.append("(" + ", ".join(str(f) for f in fields) + ")")
    # single-row events (one table map each) and multi-row events
    for value in values[:150]:
        cur.execute(f"INSERT INTO oltp VALUES {value}")
    cur.execute(f"INSERT INTO oltp VALUES {', '.join(values[150:])}")
    for i in range(1, 60):
        cur.execute(f"UPDATE oltp SET a = a + 1, v = 'u{i}', t = NOW(6) WHERE id = {i}")
    cur.execute("UPDATE oltp SET b = b DIV 2 WHERE id > 200")
    cur.execute("SET SESSION binlog_row_image = 'MINIMAL'")
    cur.execute("UPDATE oltp SET c = 'minimal' WHERE id BETWEEN 60 AND 90")
    cur.execute("DELETE FROM oltp WHERE id BETWEEN 91 AND 95")
    cur.execute("SET SESSION binlog_row_image = 'FULL'")
    cur.execute("DELETE FROM oltp WHERE id > 280")
    cur.execute("BEGIN")
    for i in range(100, 120):
        cur.execute(f"UPDATE oltp SET n = -n, e = NULL WHERE id = {i}")
    cur.execute("COMMIT")


@pytest.fixture(scope="module")
def position(mariadb_conn: dict[str, Any]) -> Iterator[tuple[str, int]]:
    """Run the workload; the binlog position before it."""
    with pymysql.connect(**dict(mariadb_conn), autocommit=True) as admin, admin.cursor() as cur:
        cur.execute(f"CREATE DATABASE {DB}")
        try:
            cur.execute(f"USE {DB}")
            cur.execute("SHOW MASTER STATUS")
            start = cur.fetchone()[:2]
            _workload(cur, random.Random(20261127))
            yield str(start[0]), int(start[1])
        finally:
            cur.execute(f"DROP DATABASE {DB}")


def _reader(
    cls: type[BinLogStreamReader], conn: dict[str, Any], server_id: int, start: tuple[str, int]
) -> Any:
    return cls(
        connection_settings=dict(conn),
        server_id=server_id,
        blocking=False,
        resume_stream=True,
        log_file=start[0],
        log_pos=start[1],
        only_events=_EVENTS,
        enable_logging=False,
    )


def _events(
    cls: type[BinLogStreamReader], conn: dict[str, Any], server_id: int, start: tuple[str, int]
) -> tuple[list[tuple[Any, ...]], int]:
    """Every event as a comparable tuple; how many row events did not come from the library's
    parser (their ``packet`` is not its wrapper)."""
    reader = _reader(cls, conn, server_id, start)
    out: list[tuple[Any, ...]] = []
    own = 0
    try:
        for event in reader:
            header: tuple[Any, ...] = (
                _library_class(event),
                event.timestamp,
                event.packet.log_pos,
                event.packet.event_size,
                event.packet.server_id,
                event.event_size,
                getattr(event, "gtid", None),
                getattr(event, "xid", None),
            )
            if isinstance(event, (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)):
                header += (event.schema, event.table, event.rows)
                own += not isinstance(event.packet, BinLogPacketWrapper)
            out.append(header)
    finally:
        reader.close()
    return out, own


def _library_class(event: Any) -> str:
    """The library's class of ``event`` (the reader's row events subclass it: their images
    are value lists, the library's ``rows`` dicts are built from them)."""
    return next(c.__name__ for c in type(event).__mro__ if c.__module__.startswith("pymysqlrep"))


def test_same_events_as_the_library(
    mariadb_conn: dict[str, Any], position: tuple[str, int]
) -> None:
    want, _ = _events(BinLogStreamReader, mariadb_conn, 4301, position)
    got, own = _events(BinlogReader, mariadb_conn, 4302, position)
    rows = [e for e in want if e[0].endswith("RowsEvent") and e[8] == DB]
    assert sum(len(e[-1]) for e in rows) > 500  # the workload is in the range read
    assert {e[0] for e in rows} == {"WriteRowsEvent", "UpdateRowsEvent", "DeleteRowsEvent"}
    assert any("cols bitmap" in r["after_none_sources"].values() for e in rows for r in e[-1]
               if e[0] == "UpdateRowsEvent")  # fmt: skip
    assert len(got) == len(want)
    assert {e[0] for e in want} >= {"MariadbGtidEvent", "XidEvent", "QueryEvent"}
    assert own >= len(rows) - 2  # all but the first event of each table map (t, oltp)
    for index, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g == w, f"event {index} {w[:5]}: {_diff(g, w)}"


def _diff(got: tuple[Any, ...], want: tuple[Any, ...]) -> Any:
    """Where two events differ: header fields, else (row, image, column, got, library's)."""
    if len(want) < 11 or got[:-1] != want[:-1] or len(got[-1]) != len(want[-1]):
        return got[:10], want[:10]
    out = []
    for index, (g, w) in enumerate(zip(got[-1], want[-1], strict=True)):
        for image in w:
            for name in set(g[image]) | set(w[image]):
                a, b = g[image].get(name, "<absent>"), w[image].get(name, "<absent>")
                if a != b or type(a) is not type(b):
                    out.append((index, image, name, a, b))
    return out


def test_table_maps_parsed_once(mariadb_conn: dict[str, Any], position: tuple[str, int]) -> None:
    """Repeated table maps are mapped from the cache: the library parses each body once."""
    reader = _reader(BinlogReader, mariadb_conn, 4303, position)
    try:
        events = sum(1 for _ in reader)
        assert events > 0
        # A table map describes the table, not the row image: t and oltp, one body each (the
        # range may hold a few more tables' maps).
        assert 2 <= len(reader._maps) <= 6
    finally:
        reader.close()


@pytest.mark.parametrize("option", ["end_log_pos", "skip_to_timestamp", "verify_checksum"])
def test_options_the_fast_paths_skip_are_refused(option: str) -> None:
    with pytest.raises(TypeError, match=option):
        BinlogReader(connection_settings={}, server_id=1, **{option: 5})


def _garbage(cls: type[BinLogStreamReader], conn: dict[str, Any], start: tuple[str, int]) -> int:
    """Objects only the cyclic collector frees after reading the range with ``cls``."""
    reader = _reader(cls, conn, 4304, start)
    gc.collect()
    gc.disable()
    try:
        count = sum(1 for _ in reader)
        assert count > 0
        reader.close()
        del reader
        return gc.collect()
    finally:
        gc.enable()


def test_events_hold_no_reference_cycles(
    mariadb_conn: dict[str, Any], position: tuple[str, int]
) -> None:
    """The agent pauses the cyclic collector during a batch (MySqlSource.PAUSE_GC): what it
    reads must be freed by reference counting, unlike the library's events."""
    library = _garbage(BinLogStreamReader, mariadb_conn, position)
    ours = _garbage(BinlogReader, mariadb_conn, position)
    assert library > 2_000  # every library event is a cycle with its packet wrapper
    assert ours < library / 10, (ours, library)  # here ~600 against ~13,000
