"""The Debezium Embedded runner of the tests (tests/debezium, tests/fix_debezium.py) against the
private PostgreSQL and MariaDB: snapshot, stream, stop with SIGTERM, resume from the stored
offsets without a second snapshot and without losing what changed while it was stopped, the
kafka_json line shape, and no credential in its files.
"""

from __future__ import annotations

import socket
import stat
from collections import Counter
from typing import Any

import pytest

from tests.fix_debezium import (
    MARKER_TABLE,
    DebeziumCorner,
    DebeziumError,
    DebeziumRunner,
    MariaDbDebezium,
    PgDebezium,
    payload,
)

pytestmark = [pytest.mark.postgres, pytest.mark.mysql]


def changes(runner: DebeziumRunner, corner: DebeziumCorner, table: str) -> list[tuple[Any, ...]]:
    """(op, id before, id after) of the table's change events, tombstones as ('tombstone', id)."""
    out: list[tuple[Any, ...]] = []
    for record in runner.records():
        if record["topic"] != corner.topic(table):
            continue
        value = payload(record["value"])
        if value is None:
            out.append(("tombstone", payload(record["key"])["id"]))
            continue
        before, after = value.get("before"), value.get("after")
        out.append((value["op"], before and before["id"], after and after["id"]))
    return out


def resume_scenario(corner: DebeziumCorner, create: str) -> DebeziumRunner:
    """Snapshot 3 rows, stream, SIGTERM, change while stopped, start again, stream, SIGTERM."""
    ns = corner.namespace
    corner.execute(create.format(t=f"{ns}.items"))
    corner.execute(f"INSERT INTO {ns}.items VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    runner = corner.runner()
    runner.start()
    corner.sync(runner)
    corner.execute(
        f"INSERT INTO {ns}.items VALUES (4, 'd')",
        f"UPDATE {ns}.items SET v = 'a2' WHERE id = 1",
        f"DELETE FROM {ns}.items WHERE id = 2",
    )
    corner.sync(runner)
    runner.stop()
    corner.execute(  # while the runner is stopped
        f"UPDATE {ns}.items SET id = 30 WHERE id = 3",
        f"INSERT INTO {ns}.items VALUES (5, 'e')",
    )
    runner.start()
    corner.sync(runner)
    runner.stop()
    return runner


EXPECTED = [
    ("r", None, 1),
    ("r", None, 2),
    ("r", None, 3),
    ("c", None, 4),
    ("u", 1, 1),
    ("d", 2, None),
    ("tombstone", 2),
    ("d", 3, None),  # the key change: delete of the old key, tombstone, create of the new one
    ("tombstone", 3),
    ("c", None, 30),
    ("c", None, 5),
]


def assert_runner_files(runner: DebeziumRunner, corner: DebeziumCorner) -> None:
    assert runner.starts == 2
    # every line is the kafka_json wrapper; keys and values carry JsonConverter's schema
    for record in runner.records():
        assert set(record) == {"topic", "key", "value", "headers"}, record
        assert all(set(h) == {"key", "value"} for h in record["headers"])
        if record["value"] is not None:
            assert set(record["value"]) == {"schema", "payload"}
    markers = [op for op, *_ in changes(runner, corner, MARKER_TABLE)]
    # three syncs, each written once; the first one's row may be read by the snapshot
    assert markers in (["c", "c", "c"], ["r", "c", "c"]), markers
    assert stat.S_IMODE(runner.properties_file.stat().st_mode) == 0o600
    password = runner.properties["database.password"]
    assert password and password in runner.properties_file.read_text()
    for path in (runner.log, runner.output):
        assert password not in path.read_text(errors="replace"), f"password in {path}"
    assert "start #2" in runner.log.read_text()


def test_postgres_runner_resumes_from_its_offsets(dbz_pg: PgDebezium) -> None:
    runner = resume_scenario(dbz_pg, "CREATE TABLE {t} (id int PRIMARY KEY, v text)")
    # REPLICA IDENTITY DEFAULT: an update of non-key columns carries no old row
    expected = [("u", None, 1) if e == ("u", 1, 1) else e for e in EXPECTED]
    assert changes(runner, dbz_pg, "items") == expected
    assert_runner_files(runner, dbz_pg)
    ops = Counter(payload(r["value"]).get("status") for r in runner.records() if r["value"])
    assert ops["BEGIN"] == ops["END"] > 0  # provide.transaction.metadata=true


def test_mariadb_runner_resumes_from_its_offsets(dbz_mariadb: MariaDbDebezium) -> None:
    runner = resume_scenario(dbz_mariadb, "CREATE TABLE {t} (id int PRIMARY KEY, v varchar(10))")
    assert changes(runner, dbz_mariadb, "items") == EXPECTED
    assert_runner_files(runner, dbz_mariadb)
    # include.schema.changes=true: the CREATE TABLE of the snapshot is on the server's topic
    ddl = [payload(r["value"]).get("ddl", "") for r in runner.records() if r["topic"] == "dbz"]
    assert any("CREATE TABLE `items`" in d for d in ddl), ddl


def test_a_failing_connector_fails_the_sync_with_the_log_tail(dbz_pg: PgDebezium) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    runner = dbz_pg.runner(database_port=str(port))
    runner.start()
    with pytest.raises(DebeziumError) as failed:
        dbz_pg.sync(runner, timeout=60)
    message = str(failed.value)
    assert "is not running (exit code 1)" in message, message
    assert f"last 40 lines of {runner.log}" in message
    assert "--- errors in the runner's log:" in message
    assert "Caused by: java.net.ConnectException: Connection refused" in message, message
    assert runner.properties["database.password"] not in message
