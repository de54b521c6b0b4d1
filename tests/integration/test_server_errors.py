"""Server errors are classified by the servers' own codes, against the real servers.

A wrong password or a missing database is terminal (:class:`SourceRefused`, with the SQLSTATE /
errno and a fix in the message); a server that is down, or a connection it kills, is retryable
(:class:`SourceUnavailable`). No message carries the password.
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

import pytest

from capture.server_errors import MYSQL, POSTGRES, SourceRefused
from pipeline.cli import is_retryable
from pipeline.errors import (
    CaptureError,
    CaptureStopped,
    SourceUnavailable,
    StageFailed,
    Terminal,
)
from tests.fix_servers import PasswordUser


def _pg_error(dsn: str) -> BaseException:
    import psycopg

    with pytest.raises(psycopg.Error) as caught:
        psycopg.connect(dsn, connect_timeout=5).close()
    return caught.value


def _pg_at(pg_dsn: str, **override: Any) -> str:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    params: dict[str, Any] = {**conninfo_to_dict(pg_dsn), **override}
    return make_conninfo(**params)


def _classified_pg(pg_dsn: str, **override: Any) -> CaptureError:
    return POSTGRES.classify("inv", _pg_error(_pg_at(pg_dsn, **override)), "connect to PostgreSQL")


def _refused(err: CaptureError, code: str) -> SourceRefused:
    assert isinstance(err, SourceRefused), err
    assert err.code == code
    assert code in str(err) and "Fix:" in str(err)
    assert not is_retryable(err)
    return err


@pytest.mark.postgres
def test_pg_wrong_password_is_terminal_with_its_sqlstate(
    pg_dsn: str, pg_password_user: PasswordUser
) -> None:
    user = pg_password_user
    wrong = user.password[::-1]
    err = _refused(_classified_pg(pg_dsn, user=user.user, password=wrong), "28P01")
    assert "database.password" in err.fix
    assert user.password not in str(err) and wrong not in str(err)
    # The right password passes (the refusal above is the password's, not the role's).
    import psycopg

    psycopg.connect(_pg_at(pg_dsn, user=user.user, password=user.password)).close()


@pytest.mark.postgres
def test_pg_missing_database_and_role_are_terminal(pg_dsn: str) -> None:
    _refused(_classified_pg(pg_dsn, dbname="medallion_no_such_db"), "3D000")
    _refused(_classified_pg(pg_dsn, user="medallion_no_such_role"), "28000")


@pytest.mark.postgres
def test_pg_permission_denied_keeps_the_servers_sqlstate(pg_dsn: str) -> None:
    import psycopg

    with psycopg.connect(pg_dsn, autocommit=True) as admin:
        admin.execute("DROP ROLE IF EXISTS medallion_errors_nopriv")
        admin.execute("CREATE ROLE medallion_errors_nopriv LOGIN")
    try:
        with psycopg.connect(_pg_at(pg_dsn, user="medallion_errors_nopriv")) as conn:
            with pytest.raises(psycopg.Error) as caught:
                conn.execute("SELECT * FROM pg_authid")
        assert caught.value.sqlstate == "42501"
        err = _refused(POSTGRES.classify("inv", caught.value, "read the catalog"), "42501")
        assert "read from the message" not in str(err)  # the real SQLSTATE field
        # Without REPLICATION the walsender is refused: terminal too (read from libpq's text).
        replication = _pg_at(pg_dsn, user="medallion_errors_nopriv", replication="database")
        err = _refused(POSTGRES.classify("inv", _pg_error(replication), "connect"), "42501")
        assert "read from the message" in str(err)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("DROP ROLE IF EXISTS medallion_errors_nopriv")


@pytest.mark.postgres
def test_pg_server_down_and_admin_shutdown_are_retryable(pg_dsn: str) -> None:
    import psycopg

    from tests.fix_servers import _free_port

    down = _classified_pg(pg_dsn, port=str(_free_port()))
    assert type(down) is SourceUnavailable and down.code == "08001"
    assert is_retryable(down)
    with psycopg.connect(pg_dsn, autocommit=True) as victim:
        pid = victim.info.backend_pid
        with psycopg.connect(pg_dsn, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", [pid])
        with pytest.raises(psycopg.Error) as caught:
            victim.execute("SELECT 1")
    err = POSTGRES.classify("inv", caught.value, "read the WAL")
    assert type(err) is SourceUnavailable and err.code == "57P01", err
    assert "57P01" in str(err)


@pytest.mark.mysql
def test_mysql_wrong_password_and_unknown_database_are_terminal(
    mariadb_conn: dict[str, Any], mariadb_password_user: PasswordUser
) -> None:
    import pymysql

    user = mariadb_password_user
    wrong = user.password.upper() + "x"
    settings = {**mariadb_conn, "user": user.user, "password": wrong, "connect_timeout": 5}
    with pytest.raises(pymysql.MySQLError) as caught:
        pymysql.connect(**settings)
    err = _refused(MYSQL.classify("inv", caught.value, "connect to MySQL"), "1045")
    assert user.password not in str(err) and wrong not in str(err)
    settings = {**mariadb_conn, "database": "medallion_no_such_db", "connect_timeout": 5}
    with pytest.raises(pymysql.MySQLError) as caught:
        pymysql.connect(**settings)
    _refused(MYSQL.classify("inv", caught.value, "connect to MySQL"), "1049")


@pytest.mark.mysql
def test_mysql_missing_privilege_is_terminal(mariadb_conn: dict[str, Any]) -> None:
    import pymysql

    admin = pymysql.connect(**mariadb_conn, autocommit=True)
    try:
        with admin.cursor() as cur:
            cur.execute("DROP USER IF EXISTS 'medallion_errors_nopriv'@'%'")
            cur.execute("CREATE USER 'medallion_errors_nopriv'@'%'")
        conn = pymysql.connect(**{**mariadb_conn, "user": "medallion_errors_nopriv"})
        with pytest.raises(pymysql.MySQLError) as caught, conn.cursor() as cur:
            cur.execute("SHOW MASTER STATUS")
        conn.close()
        _refused(MYSQL.classify("inv", caught.value, "read the binlog position"), "1227")
    finally:
        with admin.cursor() as cur:
            cur.execute("DROP USER IF EXISTS 'medallion_errors_nopriv'@'%'")
        admin.close()


@pytest.mark.mysql
def test_mysql_server_down_and_killed_connection_are_retryable(
    mariadb_conn: dict[str, Any],
) -> None:
    import pymysql

    from tests.fix_servers import _free_port

    with pytest.raises(pymysql.MySQLError) as caught:
        pymysql.connect(**{**mariadb_conn, "port": _free_port(), "connect_timeout": 5})
    down = MYSQL.classify("inv", caught.value, "connect to MySQL")
    assert type(down) is SourceUnavailable and down.code == "2003" and is_retryable(down)
    victim = pymysql.connect(**mariadb_conn, autocommit=True)
    admin = pymysql.connect(**mariadb_conn, autocommit=True)
    with admin.cursor() as cur:
        cur.execute("KILL %s", (victim.thread_id(),))
    admin.close()
    with pytest.raises(pymysql.MySQLError) as caught, victim.cursor() as cur:
        cur.execute("SELECT 1")
    lost = MYSQL.classify("inv", caught.value, "read the binlog")
    assert type(lost) is SourceUnavailable and lost.code in {"2013", "2006", "1927"}, lost


def test_classified_errors_pickle_and_decide_the_exit_code_through_a_stage() -> None:
    refused = SourceRefused("inv", "28P01", "cannot connect", "check the password")
    copy = pickle.loads(pickle.dumps(refused))
    assert type(copy) is SourceRefused and copy.code == "28P01" and str(copy) == str(refused)
    # A terminal cause stays terminal under a stage wrapper; a retryable one stays retryable.
    try:
        raise StageFailed("bronze.landing", refused) from refused
    except StageFailed as wrapped:
        assert not is_retryable(wrapped)
    # A DDL that does not parse stops capture for good, under a stage wrapper too.
    from capture.mysql.ddl import DdlParseError

    ddl = DdlParseError("ALTER TABLE t FROB x", "unknown ALTER clause FROB")
    stopped = CaptureStopped("source inv: cannot parse the DDL")
    stopped.__cause__ = ddl
    try:
        raise StageFailed("bronze.landing", stopped) from stopped
    except StageFailed as wrapped:
        assert not is_retryable(wrapped)
        assert wrapped.__cause__ is stopped and stopped.__cause__ is ddl
    assert isinstance(stopped, Terminal) and isinstance(ddl, Terminal)
    lost = SourceUnavailable("source inv: connection lost")
    try:
        raise StageFailed("bronze.landing", lost) from lost
    except StageFailed as wrapped:
        assert is_retryable(wrapped)


def _down_config(tmp_path: Path, connector: str) -> Path:
    from tests.fix_servers import _free_port

    config = tmp_path / "pipeline.yaml"
    extra = (
        "    database.dbname: postgres\n    slot.name: never_created\n"
        if connector == "postgresql"
        else ""
    )
    config.write_text(
        "lake: {root: lake}\n"
        "sources:\n"
        "  - name: down\n"
        f"    connector: {connector}\n"
        "    database.hostname: 127.0.0.1\n"
        f"    database.port: {_free_port()}\n"
        "    database.user: nobody\n"
        "    topic.prefix: down\n"
        "    errors.max.retries: 2\n"
        "    errors.retry.delay.initial.ms: 10\n" + extra,
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize("connector", ["postgresql", "mysql"])
def test_a_server_that_stays_down_is_retried_as_configured_then_exits_75(
    connector: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from click.testing import CliRunner

    from pipeline.cli import EXIT_RETRYABLE, cli

    config = _down_config(tmp_path, connector)
    with caplog.at_level(logging.WARNING, logger="capture.database_source"):
        result = CliRunner().invoke(cli, ["--config", str(config), "capture", "-s", "down"])
    assert result.exit_code == EXIT_RETRYABLE, result.output
    assert "transient" in result.output
    retries = [r.getMessage() for r in caplog.records if "reconnecting in" in r.getMessage()]
    assert len(retries) == 2 and "retry 2 of 2" in retries[-1], retries
    assert any("giving up after 2 retries" in r.getMessage() for r in caplog.records)
    assert ("08001" if connector == "postgresql" else "2003") in result.output
