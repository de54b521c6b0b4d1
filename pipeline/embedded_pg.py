"""A private, throwaway PostgreSQL 15 for ``medallion demo`` (Debian's server binaries).

The recipe is the test suite's (``scripts/pg_test_cluster.sh``, ``shared/spec/test-servers.md``
§1): ``initdb`` into a temporary directory, ``wal_level = logical``, a free port on 127.0.0.1,
trust authentication for local connections only, ``pg_ctl start``; everything is stopped and
removed on exit. ``initdb`` refuses to run as root, so as root the server runs as the
``postgres`` system user (which Debian's package creates).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

from pipeline.errors import NotInstalledError, PipelineError

__all__ = ["PG_BIN", "embedded_postgres"]

PG_BIN = Path(os.environ.get("PGBIN", "/usr/lib/postgresql/15/bin"))
_CONF = """
listen_addresses = '127.0.0.1'
port = {port}
unix_socket_directories = '{dir}'
wal_level = logical
max_replication_slots = 10
max_wal_senders = 10
fsync = off
full_page_writes = off
shared_buffers = 64MB
"""


def _as_postgres(command: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *command] if os.geteuid() == 0 else command


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _run(command: list[str], what: str, log: Path | None = None) -> None:
    done = subprocess.run(_as_postgres(command), capture_output=True, text=True, check=False)
    if done.returncode != 0:
        detail = log.read_text()[-2000:] if log and log.exists() else done.stderr[-2000:]
        raise PipelineError(f"embedded PostgreSQL: {what} failed: {detail.strip()}")


@contextlib.contextmanager
def embedded_postgres(dbname: str = "shop") -> Iterator[str]:
    """Start a private PostgreSQL with logical decoding; yield its libpq DSN; stop and remove it.

    Args:
        dbname: A database to create in it.

    Yields:
        ``host=127.0.0.1 port=N user=postgres dbname=<dbname>``.

    Raises:
        NotInstalledError: Debian's ``postgresql-15`` is not installed (``make bootstrap``).
        PipelineError: The server did not start (the message quotes its log).
    """
    if not (PG_BIN / "initdb").exists():
        raise NotInstalledError(
            f"{PG_BIN / 'initdb'} is missing: run 'make bootstrap' (Debian's postgresql-15)"
        )
    # Under /tmp so that the postgres user can reach it when we are root.
    base = Path(tempfile.mkdtemp(prefix="medallion-demo-pg-", dir="/tmp"))
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
    data = base / "data"
    started = False
    try:
        _run(
            [
                str(PG_BIN / "initdb"),
                "-D",
                str(data),
                "-U",
                "postgres",
                "-A",
                "trust",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
                "--no-sync",
            ],
            "initdb",
        )
        port = _free_port()
        with (data / "postgresql.conf").open("a") as conf:
            conf.write(_CONF.format(port=port, dir=base))
        log = base / "server.log"
        _run(
            [str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(log), "-w", "-t", "30", "start"],
            "pg_ctl start",
            log,
        )
        started = True
        dsn = f"host=127.0.0.1 port={port} user=postgres dbname=postgres"
        import psycopg
        from psycopg import sql

        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(dbname)))
        yield f"host=127.0.0.1 port={port} user=postgres dbname={dbname}"
    finally:
        if started:
            with contextlib.suppress(PipelineError):
                _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], "stop")
        shutil.rmtree(base, ignore_errors=True)
