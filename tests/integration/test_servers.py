"""The private source servers from tests/fix_servers.py have their change capture switched on."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from pipeline.sql import qualified, quote_identifier
from tests.fix_servers import parse_mysql_dsn


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


@pytest.mark.postgres
def test_pg_has_logical_wal_and_decodes_with_pgoutput(pg_dsn: str) -> None:
    import psycopg
    from psycopg import sql

    slot, publication, table = _unique("slot"), _unique("pub"), _unique("t")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        assert conn.execute("SHOW wal_level").fetchone() == ("logical",)
        conn.execute(
            sql.SQL("CREATE TABLE {} (id int PRIMARY KEY, name text)").format(sql.Identifier(table))
        )
        try:
            conn.execute(
                sql.SQL("CREATE PUBLICATION {} FOR TABLE {}").format(
                    sql.Identifier(publication), sql.Identifier(table)
                )
            )
            created = conn.execute(
                "SELECT slot_name FROM pg_create_logical_replication_slot(%s, 'pgoutput')", [slot]
            ).fetchone()
            assert created == (slot,)
            conn.execute(
                sql.SQL("INSERT INTO {} VALUES (1, 'a'), (2, 'b')").format(sql.Identifier(table))
            )
            messages = conn.execute(
                "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
                "'proto_version', '1', 'publication_names', %s)",
                [slot, publication],
            ).fetchall()
            # pgoutput v1: B(egin), R(elation), I(nsert) x2, C(ommit).
            assert [bytes(m[0])[:1] for m in messages] == [b"B", b"R", b"I", b"I", b"C"]
        finally:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s",
                [slot],
            )
            conn.execute(
                sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(publication))
            )
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))


@pytest.mark.postgres
def test_pg_has_wal2json(pg_dsn: str) -> None:
    import psycopg

    slot = _unique("w2j")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'wal2json')", [slot])
        conn.execute("SELECT pg_drop_replication_slot(%s)", [slot])


@pytest.mark.mysql
def test_mariadb_has_a_full_row_binlog(mariadb_conn: dict[str, Any]) -> None:
    import pymysql

    conn = pymysql.connect(**mariadb_conn, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(
                "SELECT @@log_bin, @@binlog_format, @@binlog_row_image, @@binlog_row_metadata"
            )
            assert cur.fetchone() == (1, "ROW", "FULL", "FULL")
    finally:
        conn.close()


@pytest.mark.mysql
# mysql-replication passes PyMySQL the deprecated `db` keyword for its control connection.
@pytest.mark.filterwarnings("ignore:'db' is deprecated:DeprecationWarning")
def test_mariadb_binlog_rows_carry_column_names(mariadb_conn: dict[str, Any]) -> None:
    import pymysql
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import WriteRowsEvent

    database = _unique("db")
    items = qualified(database, "items")
    conn = pymysql.connect(**mariadb_conn, autocommit=True)
    try:
        with conn.cursor() as cur:
            # MariaDB quotes identifiers with backticks exactly like Spark SQL.
            cur.execute("CREATE DATABASE " + quote_identifier(database))
            cur.execute("CREATE TABLE " + items + " (id INT PRIMARY KEY, name TEXT)")
            cur.execute("SHOW MASTER STATUS")
            row = cur.fetchone()
            assert row is not None
            log_file, log_pos = row[0], row[1]
            cur.execute("INSERT INTO " + items + " VALUES (1, 'apple')")
        stream = BinLogStreamReader(
            connection_settings=dict(mariadb_conn),
            server_id=1000 + uuid.uuid4().int % 100_000,
            blocking=False,
            resume_stream=True,
            log_file=log_file,
            log_pos=log_pos,
            only_events=[WriteRowsEvent],
            only_schemas=[database],
        )
        try:
            rows = [r["values"] for event in stream for r in event.rows]
        finally:
            stream.close()
        # With binlog_row_metadata=MINIMAL the keys would be UNKNOWN_COL0, UNKNOWN_COL1.
        assert rows == [{"id": 1, "name": "apple"}]
    finally:
        with conn.cursor() as cur:
            cur.execute("DROP DATABASE IF EXISTS " + quote_identifier(database))
        conn.close()


@pytest.mark.unit
@pytest.mark.parametrize(
    ("dsn", "expected"),
    [
        (
            "mysql://root:@127.0.0.1:53306/",
            {"host": "127.0.0.1", "port": 53306, "user": "root", "password": ""},
        ),
        (
            "mariadb://cdc:p%40ss%3Aword@db.local/shop",
            {
                "host": "db.local",
                "port": 3306,
                "user": "cdc",
                "password": "p@ss:word",
                "database": "shop",
            },
        ),
    ],
)
def test_parse_mysql_dsn(dsn: str, expected: dict[str, Any]) -> None:
    assert parse_mysql_dsn(dsn) == expected


@pytest.mark.unit
def test_parse_mysql_dsn_rejects_other_urls() -> None:
    with pytest.raises(ValueError, match="mysql://"):
        parse_mysql_dsn("postgresql://localhost/x")
