"""MariaDB → MySQL capture agent → bronze → silver: silver's live rows equal the source.

The workload runs on a private MariaDB (``own_mariadb``) so the test can restart it under the
agent. It mixes inserts (single and multi-row), updates, deletes, primary-key moves and DDL
(add, rename and widen a column) while agents are started and killed with SIGKILL at random
moments, and once while the server restarts. Then one undisturbed run lands the rest, silver
applies bronze, and every live silver row is compared with ``SELECT`` from MariaDB, column by
column; bronze must hold no position twice.
"""

from __future__ import annotations

import datetime as dt
import random
import signal
import threading
import time
from collections import Counter
from decimal import Decimal
from pathlib import Path
from typing import Any

import pymysql
import pytest

from bronze import schema as S
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED
from tests.fix_servers import OwnMariaDb
from tests.integration.test_mysql_capture import (
    My,
    assert_positions_unique_and_ordered,
    data,
    start_agent,
)
from tests.integration.test_pg_to_silver import agent_output

pytestmark = [pytest.mark.mysql, pytest.mark.spark, pytest.mark.delta]

COLUMNS = ("name", "qty", "price", "updated", "remark")
"""The compared columns as the source has them at the end (``note`` was renamed ``remark``)."""


def _change(rng: random.Random, cur: Any, db: str, alive: set[int], next_id: int) -> int:
    action = rng.random()
    some = rng.choice(sorted(alive)) if alive else None
    if action < 0.3 or some is None:
        count = rng.choice([1, 1, 3])
        values = []
        for _ in range(count):
            next_id += 1
            alive.add(next_id)
            values.append(
                (next_id, f"n{next_id}", rng.randint(0, 99), Decimal(rng.randint(0, 99999)) / 100)
            )
        cur.executemany(  # one multi-row event when count > 1
            f"INSERT INTO {db}.items (id, name, qty, price, updated) "
            "VALUES (%s, %s, %s, %s, NOW(3))",
            values,
        )
        return next_id
    if action < 0.7:
        cur.execute(f"UPDATE {db}.items SET qty = qty + 1, updated = NOW(3) WHERE id = %s", (some,))
    elif action < 0.85:
        alive.discard(some)
        next_id += 1
        alive.add(next_id)
        cur.execute(f"UPDATE {db}.items SET id = %s WHERE id = %s", (next_id, some))
    else:
        alive.discard(some)
        cur.execute(f"DELETE FROM {db}.items WHERE id = %s", (some,))
    return next_id


DDL_AT = {
    40: "ALTER TABLE {db}.items ADD COLUMN IF NOT EXISTS note VARCHAR(20) AFTER price",
    80: "ALTER TABLE {db}.items MODIFY qty BIGINT",
    120: "ALTER TABLE {db}.items CHANGE COLUMN IF EXISTS note remark VARCHAR(20)",
}
"""DDL run before the transaction of that number; written to be repeatable, since a restart
can cut the connection after the server applied a statement but before it said so."""


_SERVER_GONE = (2003, 2006, 2013, 1053)
"""Can't connect, server gone away, lost connection, server shutdown in progress."""


def workload(
    conn: dict[str, Any], db: str, transactions: int, stop: threading.Event, failed: list[str]
) -> None:
    try:
        _workload(conn, db, transactions, stop)
    except Exception as exc:  # reported by the test's assertion
        failed.append(repr(exc))


def _workload(conn: dict[str, Any], db: str, transactions: int, stop: threading.Event) -> None:
    """Random transactions with DDL at fixed points; survives the server restart (the final
    comparison is with the source's final state, so a transaction the restart cut is harmless)."""
    rng = random.Random(7)
    alive = set(range(1, 151))
    next_id = 1000
    done = 0
    while done < transactions and not stop.is_set():
        try:
            with pymysql.connect(**conn, autocommit=True) as db_conn, db_conn.cursor() as cur:
                while done < transactions and not stop.is_set():
                    ddl = DDL_AT.get(done)
                    if ddl is not None:
                        cur.execute(ddl.format(db=db))
                    cur.execute("START TRANSACTION")
                    for _ in range(rng.randint(1, 5)):
                        next_id = _change(rng, cur, db, alive, next_id)
                    if done >= 40:
                        column = "remark" if done >= 120 else "note"
                        cur.execute(
                            f"UPDATE {db}.items SET {column} = %s WHERE id = %s",
                            (f"r{done}", rng.choice(sorted(alive))),
                        )
                    cur.execute("COMMIT")
                    done += 1
                    time.sleep(0.01)
        except pymysql.err.OperationalError as exc:
            if exc.args[0] not in _SERVER_GONE:
                raise
            time.sleep(0.3)  # the server is restarting


def source_rows(my: My) -> dict[int, dict[str, Any]]:
    cols = ", ".join(COLUMNS)
    return {
        int(r[0]): dict(zip(COLUMNS, r[1:], strict=True))
        for r in my.query(f"SELECT id, {cols} FROM {my.database}.items")
    }


def silver_rows(spark: Any, lake: Path, db: str) -> dict[int, dict[str, Any]]:
    path = lake / "silver" / silver_table_name("my", f"{db}.items")
    frame = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
    out: dict[int, dict[str, Any]] = {}
    for row in frame.select("id", *COLUMNS).collect():
        assert row["id"] not in out, f"two live silver rows for id {row['id']}"
        out[int(row["id"])] = {c: row[c] for c in COLUMNS}
    return out


def test_kill_9_server_restart_and_ddl_then_silver_equals_source(
    spark: Any, own_mariadb: OwnMariaDb, tmp_path: Path
) -> None:
    my = My(dict(own_mariadb.settings), "shop")
    db = my.database
    my.sql(
        f"CREATE DATABASE {db}",
        f"CREATE TABLE {db}.items (id INT PRIMARY KEY, name VARCHAR(40) NOT NULL, qty INT, "
        "price DECIMAL(8,2), updated DATETIME(3))",
        f"INSERT INTO {db}.items SELECT seq, CONCAT('n', seq), seq % 7, seq / 4, "
        f"'2024-01-01 00:00:00.000' + INTERVAL seq SECOND FROM {db}.seq_1_to_150",
    )
    raw = my.raw(**{"provide.transaction.metadata": True})
    lake = tmp_path / "lake"
    rng = random.Random(5)
    kills = restarts = runs = 0
    reconnected = False
    for wait in (0.6, 1.0):  # kill -9 during the snapshot (150 rows, 25 per batch)
        proc = start_agent(raw, lake, max_events=25)
        err = agent_output(proc, timeout=wait)
        kills += proc.returncode == -signal.SIGKILL
        assert proc.returncode in (0, -signal.SIGKILL), err
    proc = start_agent(raw, lake, max_events=25)  # finish the snapshot before the workload
    err = agent_output(proc, timeout=120)
    assert proc.returncode == 0, err
    stop = threading.Event()
    failed: list[str] = []
    writer = threading.Thread(target=workload, args=(my.conn, db, 160, stop, failed))
    writer.start()
    try:
        while (writer.is_alive() or kills < 4 or not restarts) and runs < 60:
            runs += 1
            proc = start_agent(raw, lake, max_events=25)
            if kills >= 3 and not restarts:
                time.sleep(rng.uniform(0.2, 0.5))
                own_mariadb.restart()  # under the running agent: it reconnects with backoff
                restarts += 1
                err = agent_output(proc, timeout=180)
                assert proc.returncode == 0, err
                reconnected = reconnected or "reconnecting" in err
                continue
            err = agent_output(proc, timeout=rng.uniform(0.3, 0.9))
            kills += proc.returncode == -signal.SIGKILL
            assert proc.returncode in (0, -signal.SIGKILL), err
        writer.join()
    finally:
        stop.set()
        writer.join()
    assert not failed, failed
    my.sql(f"UPDATE {db}.items SET qty = qty + 1")  # every row carries the renamed column
    proc = start_agent(raw, lake, max_events=200)  # the last run, undisturbed, lands the rest
    err = agent_output(proc, timeout=300)
    assert proc.returncode == 0, err
    assert restarts == 1 and kills >= 4, (restarts, kills)

    assert_positions_unique_and_ordered(lake)
    records = data(lake, "items")
    streamed = [r for r in records if r[S.SNAPSHOT] == "false"]
    moved = sum(1 for r in streamed if r[S.HEADERS])
    ops = Counter(r["value"]["op"] for r in streamed)
    assert moved > 0 and ops["c"] > 0 and ops["d"] > 0 and len(streamed) > 400, (ops, kills)
    result = SilverJob(spark, lake).run_once()
    assert result.quarantined == 0
    expected, got = source_rows(my), silver_rows(spark, lake, db)
    problems = [f"id {k}: missing in silver" for k in sorted(expected.keys() - got.keys())]
    problems += [f"id {k}: not in the source" for k in sorted(got.keys() - expected.keys())]
    for key in sorted(expected.keys() & got.keys()):
        for column in COLUMNS:
            want, have = expected[key][column], got[key][column]
            if isinstance(want, dt.datetime) and isinstance(have, dt.datetime):
                have = have.replace(tzinfo=None)
            if want != have:
                problems.append(f"id {key} {column}: source {want!r} != silver {have!r}")
    assert not problems, f"{len(problems)} differences\n" + "\n".join(problems[:30])
    assert len(expected) > 100
    print(
        f"kill -9 x{kills}, restart x{restarts} (reconnect seen: {reconnected}), "
        f"{len(streamed)} streamed changes ({moved} key-move halves), {len(expected)} rows equal"
    )
