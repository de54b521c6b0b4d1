"""Two pipelines (two configs, two lakes) reading one MariaDB never stream with one server id
(real MariaDB; capture/mysql/client_id.py).

Agent A streams and stays in the middle of the binlog, so its dump thread is registered (it
sends ``COM_REGISTER_SLAVE``: ``SHOW SLAVE HOSTS`` lists it). Agent B of another config then
starts with A's id: set explicitly, it is refused with a terminal error naming the id, A and
the fix (A's own label, a restart of A on its lake, keeps the id); drawn by default, B streams
under the next free id, says so in a warning, and both dump threads stay up side by side (one
id would have made the server kill A's).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pymysql
import pytest
from pydantic import TypeAdapter

from capture.database_source import DatabaseSource
from capture.mysql.client_id import binlog_client, report_host
from capture.mysql.config import default_server_id
from capture.registry import create_source
from capture.server_errors import SourceRefused
from pipeline.cli import is_retryable
from pipeline.config import SourceConfig
from tests.integration.test_mysql_capture import My, corner

pytestmark = pytest.mark.mysql


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    yield from corner(mariadb_conn)


def _hosts(my: My) -> dict[str, int]:
    """``SHOW SLAVE HOSTS``: reported host -> server id."""
    return {str(r[1]): int(r[0]) for r in my.query("SHOW SLAVE HOSTS")}


def _label(name: str, lake: Path) -> str:
    """The label the agent of source ``name`` landing in ``lake`` registers under."""
    return report_host(name, lake / "bronze" / "schema_history")


def _opened(my: My, lake: Path, name: str, **extra: Any) -> DatabaseSource:
    """A source of its own config and lake, opened: the stream starts at the binlog's end."""
    raw = {**my.raw(**extra), "name": name, "snapshot.mode": "schema_only"}
    if "database.server.id" not in extra:
        del raw["database.server.id"]
    source = create_source(TypeAdapter(SourceConfig).validate_python(raw))
    assert isinstance(source, DatabaseSource)
    source.bind_lake(lake / "bronze")
    source.open(None)
    return source


def _backlog(my: My, rows: range) -> None:
    """One transaction of 1 MB rows: more binlog than the socket buffers hold, so a reader that
    takes one row at a time keeps its dump thread on the server (non-blocking dumps end at the
    binlog's end)."""
    my.sql(
        f"INSERT INTO {my.database}.t SELECT seq, REPEAT('x', 1000000) "
        f"FROM {my.database}.seq_{rows.start}_to_{rows.stop - 1}"
    )


def _read_until_listed(my: My, source: DatabaseSource, label: str) -> None:
    """Read one record at a time until the server lists the source's dump thread."""
    for _ in range(20):
        source.read_batch(max_events=1, max_transaction_events=1, until=None)
        if label in _hosts(my):
            return
    raise AssertionError(f"{label} never streamed: {_hosts(my)}")


@pytest.fixture
def agent_a(my: My, tmp_path: Path) -> Iterator[tuple[DatabaseSource, int]]:
    my.sql(f"CREATE TABLE {my.database}.t (id INT PRIMARY KEY, v LONGTEXT)")
    taken = default_server_id("b")  # the id agent b draws by default
    a = _opened(my, tmp_path / "lake-a", "a", **{"database.server.id": taken})
    _backlog(my, range(1, 17))
    _read_until_listed(my, a, _label("a", tmp_path / "lake-a"))
    assert _hosts(my)[_label("a", tmp_path / "lake-a")] == taken
    yield a, taken
    a.close()


def test_an_explicit_server_id_another_pipeline_streams_with_is_refused_not_its_own(
    my: My, tmp_path: Path, agent_a: tuple[DatabaseSource, int]
) -> None:
    a, taken = agent_a
    b = _opened(my, tmp_path / "lake-b", "b", **{"database.server.id": taken})
    with pytest.raises(SourceRefused) as refused:
        _read_until_listed(my, b, _label("b", tmp_path / "lake-b"))
    b.close()
    err = refused.value
    assert err.code == "database.server.id" and not is_retryable(err)
    message = str(err)
    assert f"database.server.id {taken} is already used" in message, message
    assert "medallion:a:" in message and "Fix: give every source" in message, message
    # A's own label (a restart of the same source on the same lake while the server still lists
    # its old dump thread, which it replaces): the configured id is kept
    with pymysql.connect(**my.conn) as conn:
        lake_a = tmp_path / "lake-a" / "bronze" / "schema_history"
        again = binlog_client(conn, None, a.settings, "a", lake_a)  # type: ignore[attr-defined]
    assert again.server_id == taken and _hosts(my)[again.report_host] == taken


def test_a_default_server_id_in_use_moves_to_the_next_free_one(
    my: My, tmp_path: Path, agent_a: tuple[DatabaseSource, int], caplog: pytest.LogCaptureFixture
) -> None:
    a, taken = agent_a
    with caplog.at_level(logging.WARNING, logger="capture.mysql.client_id"):
        b = _opened(my, tmp_path / "lake-b", "b")
        _backlog(my, range(17, 33))
        _read_until_listed(my, b, _label("b", tmp_path / "lake-b"))
    try:
        hosts = _hosts(my)
        b_id = hosts[_label("b", tmp_path / "lake-b")]
        # both dump threads are up, under two ids: the server killed neither
        assert hosts[_label("a", tmp_path / "lake-a")] == taken and b_id != taken, hosts
        (warning,) = [r.getMessage() for r in caplog.records]
        assert f"default server id {taken} is used" in warning, warning
        assert "medallion:a:" in warning and f"as server id {b_id} instead" in warning, warning
        # A's stream was not cut: it reads on, under its id
        a.read_batch(max_events=1, max_transaction_events=1, until=None)
        assert _hosts(my)[_label("a", tmp_path / "lake-a")] == taken
    finally:
        b.close()
