"""Text ``COPY`` received in C through psycopg's libpq (``copy_text.receive_text_copy``) against a
real PostgreSQL: the values are what psycopg's text cursor reads, whether the rows come through
the C receive or psycopg's row-by-row one; a ``COPY`` the server fails midway raises psycopg's
error for its SQLSTATE and leaves the connection usable; malformed data would name the table."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from capture.postgresql import copy_text
from capture.postgresql.copy_text import libpq_bound, receive_text_copy

pytestmark = pytest.mark.postgres

_VALUES = sql.SQL(
    "SELECT * FROM (VALUES "
    "(1, 'plain', NULL::text), "
    "(2, E'tab\\there\\nnew\\rcr\\bbs\\ffeed\\vvt', ''), "
    "(3, E'back\\\\slash \\\\N \\\\. end\\\\', '\\N'), "
    "(4, 'é ü 中文 😀 \u2028', E'\\x01\\x1f\\x7f'), "
    "(5, NULL, NULL)"
    ") AS t(i, a, b) ORDER BY i"
)


def _expected(conn: psycopg.Connection[Any]) -> list[list[Any]]:
    with conn.cursor() as cur:
        cur.execute(sql.SQL("SELECT i::text, a, b FROM ({}) AS q").format(_VALUES))
        rows = cur.fetchall()
    return [[row[i] for row in rows] for i in range(3)]


def test_the_c_receive_is_bound_here() -> None:
    """psycopg's binary build maps one libpq: the snapshot must not fall back silently."""
    assert libpq_bound()


@pytest.mark.parametrize("bound", [True, False], ids=["c-receive", "psycopg-receive"])
def test_values_are_what_psycopg_reads(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, bound: bool
) -> None:
    if bound:
        assert libpq_bound()
    else:
        monkeypatch.setattr(copy_text, "_bound", False)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        with conn.cursor() as cur:
            table = receive_text_copy(cur, _VALUES, 3, table="a VALUES list")
        got = [table.column(i).to_pylist() for i in range(3)]
        assert got == _expected(conn)
        assert got[2][2] == "\\N" and got[2][0] is None and got[1][4] is None


def test_many_rows_in_one_receive(pg_dsn: str) -> None:
    query = sql.SQL(
        "SELECT g, repeat(chr(233) || E'\\t', g % 7), CASE WHEN g % 5 = 0 THEN NULL ELSE '' END"
        " FROM generate_series(1, 30000) AS g ORDER BY g"
    )
    with psycopg.connect(pg_dsn, autocommit=True) as conn, conn.cursor() as cur:
        table = receive_text_copy(cur, query, 3, table="a series")
    assert table.num_rows == 30000
    assert table.column(0).to_pylist()[-1] == "30000"
    assert table.column(1).to_pylist()[:3] == ["é\t", "é\té\t", "é\té\té\t"]
    assert table.column(2).null_count == 6000


def test_a_copy_the_server_fails_midway_raises_its_error(pg_dsn: str) -> None:
    query = sql.SQL("SELECT 10 / (20000 - g) FROM generate_series(1, 30000) AS g")
    with psycopg.connect(pg_dsn) as conn:
        with conn.cursor() as cur, pytest.raises(psycopg.errors.DivisionByZero, match="zero"):
            receive_text_copy(cur, query, 1, table="a series")
        conn.rollback()
        assert conn.execute("SELECT 1").fetchone() == (1,)
