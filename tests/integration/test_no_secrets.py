"""No password in any log line, error, repr or command output (real servers, real CLI).

A capture user with a random password (``pg_password_user`` / ``mariadb_password_user``) is
configured through an environment variable. The ``medallion`` command then runs as a child
process at DEBUG level, once with a wrong password (terminal: exit 1, not the retryable 75, with
the server's code) and once with the right one (the password is really used: exit 0). Both
passwords are searched for in everything it printed; the in-process test also searches the
log records, the error's message, repr and formatted traceback, and the reprs of the config
and the source.
"""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import traceback
import uuid
from pathlib import Path
from typing import Any

import pytest

from capture.registry import create_source
from capture.server_errors import SourceRefused
from pipeline.cli import EXIT_ERROR
from pipeline.config import load_config
from tests.fix_servers import REPO_ROOT, PasswordUser

pytestmark = pytest.mark.delta

SECRET_ENV = "MEDALLION_TEST_SECRET_PASSWORD"


def _pg_source(pg_dsn: str, user: PasswordUser) -> str:
    from psycopg.conninfo import conninfo_to_dict

    info = conninfo_to_dict(pg_dsn)
    tag = uuid.uuid4().hex[:8]
    return (
        "  - name: pg\n"
        "    connector: postgresql\n"
        f"    database.hostname: {info.get('host', '127.0.0.1')}\n"
        f"    database.port: {info.get('port', 5432)}\n"
        f"    database.user: {user.user}\n"
        "    database.password: ${" + SECRET_ENV + "}\n"
        f"    database.dbname: {info.get('dbname', 'postgres')}\n"
        "    topic.prefix: srv\n"
        f"    slot.name: secret_{tag}\n"
        f"    publication.name: secret_pub_{tag}\n"
        f"    schema.include.list: secret_{tag}\n"
        "    slot.drop.on.stop: true\n"
    )


def _mysql_source(conn: dict[str, Any], user: PasswordUser) -> str:
    return (
        "  - name: my\n"
        "    connector: mysql\n"
        f"    database.hostname: {conn['host']}\n"
        f"    database.port: {conn['port']}\n"
        f"    database.user: {user.user}\n"
        "    database.password: ${" + SECRET_ENV + "}\n"
        f"    database.include.list: secret_{uuid.uuid4().hex[:8]}\n"
        "    topic.prefix: srv\n"
    )


def _config(tmp_path: Path, source: str) -> Path:
    config = tmp_path / "pipeline.yaml"
    config.write_text("lake: {root: lake}\nsources:\n" + source, encoding="utf-8")
    return config


def _medallion(config: Path, password: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, SECRET_ENV: password, "PYTHONPATH": str(REPO_ROOT)}
    command = [sys.executable, "-m", "pipeline.cli", "--config", str(config)]
    return subprocess.run(
        [*command, "--log-level", "DEBUG", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        check=False,
    )


def _assert_clean(text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, "a password was printed"


def _run_both(config: Path, user: PasswordUser, source: str, code: str) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    failed = _medallion(config, wrong, "capture", "-s", source)
    output = failed.stdout + failed.stderr
    _assert_clean(output, wrong, user.password)
    assert failed.returncode == EXIT_ERROR, output  # terminal: a scheduler must not retry
    assert code in output and "Fix:" in output, output
    good = _medallion(config, user.password, "capture", "-s", source, "--max-batches", "1")
    output = good.stdout + good.stderr
    _assert_clean(output, user.password)
    assert good.returncode == 0, output


@pytest.mark.postgres
def test_postgres_cli_output_never_shows_the_password(
    pg_dsn: str, pg_password_user: PasswordUser, tmp_path: Path
) -> None:
    import psycopg
    from psycopg import sql

    text = _pg_source(pg_dsn, pg_password_user)
    config = _config(tmp_path, text)
    schema = text.split("schema.include.list: ")[1].split("\n")[0]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    try:
        _run_both(config, pg_password_user, "pg", "28P01")
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
                "WHERE slot_name = %s AND NOT active",
                [f"secret_{schema.removeprefix('secret_')}"],
            )


@pytest.mark.mysql
def test_mysql_cli_output_never_shows_the_password(
    mariadb_conn: dict[str, Any], mariadb_password_user: PasswordUser, tmp_path: Path
) -> None:
    config = _config(tmp_path, _mysql_source(mariadb_conn, mariadb_password_user))
    _run_both(config, mariadb_password_user, "my", "1045")


@pytest.mark.postgres
def test_logs_errors_and_reprs_of_a_failed_connection_hold_no_password(
    pg_dsn: str,
    pg_password_user: PasswordUser,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wrong = f"wrong-{uuid.uuid4().hex}"
    monkeypatch.setenv(SECRET_ENV, wrong)
    config = load_config(_config(tmp_path, _pg_source(pg_dsn, pg_password_user)))
    source_config = config.source("pg")
    source = create_source(source_config)
    with caplog.at_level(logging.DEBUG), pytest.raises(SourceRefused) as caught:
        source.open(None)
    assert caught.value.code == "28P01"
    texts = [
        str(caught.value),
        repr(caught.value),
        "".join(traceback.format_exception(caught.value)),
        caplog.text,
        *(r.getMessage() for r in caplog.records),
        repr(config),
        str(config),
        repr(source_config),
        repr(source),
        repr(getattr(source, "settings", None)),
        capsys.readouterr().out,
    ]
    for text in texts:
        _assert_clean(text, wrong, pg_password_user.password)
    # The wrong password did reach the server: it is in the config, only never printed.
    secret = getattr(source_config, "database_password", None)
    assert secret is not None and secret.get_secret_value() == wrong
