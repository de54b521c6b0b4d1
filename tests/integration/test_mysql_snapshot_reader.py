"""The snapshot's result-set reader below PyMySQL (:mod:`capture.mysql.result_set`) against
PyMySQL itself, on the real MariaDB: the same values for every type of the type-fidelity table,
long values (2- and 3-byte lengths), NULLs; the server's error in the middle of the rows raised
as PyMySQL raises it; the connection usable after both."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pymysql
import pytest

from capture.mysql.result_set import read_text_result
from capture.mysql.types import SNAPSHOT_SESSION_SQL, snapshot_connect_kwargs
from tests.fidelity import mariadb
from tests.integration.test_mysql_capture import My, corner

pytestmark = [pytest.mark.mysql]


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    yield from corner(mariadb_conn)


def _connect(my: My) -> Any:
    conn = pymysql.connect(**{**my.conn, "autocommit": True, **snapshot_connect_kwargs()})
    with conn.cursor() as cur:
        for statement in SNAPSHOT_SESSION_SQL:
            cur.execute(statement)
    return conn


def test_the_rows_are_pymysqls_values(my: My) -> None:
    d = my.database
    cases = mariadb.TYPE_TABLE.cases
    columns = ", ".join(f"{c.column} {c.sql_type}" for c in cases)
    names = ", ".join(["id", *(c.column for c in cases)])
    statements = [
        f"CREATE TABLE {d}.fidelity (id int PRIMARY KEY, {columns}) DEFAULT CHARSET=utf8mb4",
        f"CREATE TABLE {d}.wide (id int PRIMARY KEY, b longblob, t mediumtext, n int)",
    ]
    for row in range(1, mariadb.TYPE_TABLE.depth + 2):
        values = ", ".join([str(row), *mariadb.TYPE_TABLE.literals(row).values()])
        statements.append(f"INSERT INTO {d}.fidelity ({names}) VALUES ({values})")
    my.sql(*mariadb.SESSION, *statements)
    my.sql(
        f"INSERT INTO {d}.wide VALUES (1, %s, %s, NULL), (2, NULL, %s, 7), (3, '', '', -1)",
        params=(bytes(range(256)) * 300, "é" * 40_000, "x" * 251),
    )
    conn = _connect(my)
    try:
        for table in ("fidelity", "wide"):
            query = f"SELECT * FROM {d}.{table} ORDER BY id"
            with conn.cursor() as cur:
                cur.execute(query)
                want = [list(row) for row in cur.fetchall()]
            result = read_text_result(conn, query)
            width = len(result.columns)
            got = [list(row) for row in zip(*(result.values(i) for i in range(width)), strict=True)]
            assert got == want, table
            assert result.num_rows == len(want) > 2
        with conn.cursor() as cur:  # the connection is where PyMySQL would leave it
            cur.execute("SELECT 41 + 1")
            assert cur.fetchone() == (42,)
    finally:
        conn.close()


def test_an_error_after_the_first_rows_is_raised_as_pymysql_raises_it(my: My) -> None:
    conn = _connect(my)
    try:
        # The subquery returns one row for seq 1 and two from seq 2: the server fails after it
        # has sent the first row.
        query = f"SELECT seq, (SELECT 1 UNION SELECT seq) FROM {my.database}.seq_1_to_1000"
        with pytest.raises(pymysql.err.MySQLError) as raised:
            read_text_result(conn, query)
        assert raised.value.args[0] == 1242  # ER_SUBQUERY_NO_1_ROW
        with conn.cursor() as cur:
            cur.execute("SELECT 42")
            assert cur.fetchone() == (42,)
    finally:
        conn.close()
