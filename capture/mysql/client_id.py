"""The server id the binlog reader presents to the server, checked against the server's other
binlog clients: :func:`binlog_client`.

A MySQL/MariaDB server lets one binlog client per server id stream: when a second one starts a
binlog dump with an id already streaming, the server kills the first dump thread
(``kill_zombie_dump_threads``). Two pipelines (two configs) reading one server with the same id
therefore keep disconnecting each other; the config check of ``pipeline/config.py`` sees only
the sources of one config.

So the reader registers itself (``COM_REGISTER_SLAVE``, what replicas send: the server lists it
in ``SHOW SLAVE HOSTS`` / ``SHOW REPLICAS`` while it streams) under a label naming the source and
its lake (:func:`report_host`), and before each binlog dump the agent lists the registered
clients:

* the id is free, or held by a client with this source's own label (this pipeline's previous
  connection, e.g. of a run killed with ``kill -9`` whose dump thread the server has not reaped
  yet: the server replaces it) -> the id is used;
* the id is held by another client and was set in the config (``database.server.id``) -> a
  terminal :class:`~capture.server_errors.SourceRefused` naming the id, the other client and
  the fix. Quietly reading under another id than the one configured would surprise whoever
  chose it (monitoring, firewall rules, the other pipeline's config);
* the id is the default drawn from the source name -> the next id in Debezium's 5400-6400 range
  that no registered client (nor the server itself) uses, logged as a warning. Nothing stops,
  and nothing depends on the id: the offset holds the *server's* id, not the reader's.

What is seen, and when: the check runs when the agent opens its binlog stream (at start, and
after each outage it reconnects from); mysql-replication's own reconnects inside one stream (a
non-blocking dump ends at the binlog's end and the next poll dumps again) keep the id chosen.
A registered client is listed only while its dump runs: a replica or a blocking reader always,
another medallion agent while it streams a backlog (its dumps end at the binlog's end, which is
also why two of them collide only then). Clients that never register (other tools' binlog
readers) are not listed and cannot be seen; a user who may not list replicas (``REPLICATION
MASTER ADMIN`` on MariaDB 10.5+, ``REPLICATION SLAVE`` on MySQL) gets a warning and the
configured id.
"""

from __future__ import annotations

import logging
import socket
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pymysql

from bronze.storage import LakePath
from capture.mysql.server import ServerDialect
from capture.server_errors import SourceRefused

__all__ = ["ID_RANGE", "BinlogClient", "Replica", "binlog_client", "replicas", "report_host"]

logger = logging.getLogger(__name__)

ID_RANGE = range(5400, 6401)
"""Debezium's range for a drawn server id (``capture.mysql.config.default_server_id``)."""
_NOT_ALLOWED = frozenset({1227, 1142})
"""Errnos of a user who may not list the replicas (missing privilege)."""


@dataclass(frozen=True, slots=True)
class Replica:
    """One registered binlog client of the server (a row of ``SHOW SLAVE HOSTS``).

    Attributes:
        server_id: Its server id.
        host: The host it reported (a replica's ``report_host``; empty when it set none).
        port: The port it reported (0 when none).
    """

    server_id: int
    host: str
    port: int

    def describe(self) -> str:
        """``host:port`` as reported, or what is known."""
        host = self.host or "a client that reported no host"
        return f"{host}:{self.port}" if self.port else host


@dataclass(frozen=True, slots=True)
class BinlogClient:
    """What the binlog reader presents: its server id and the host label it registers."""

    server_id: int
    report_host: str


def report_host(source: str, lake: LakePath | None) -> str:
    """The label the reader registers under: the source name and a digest of the machine and
    the lake it lands in (so the same source name in two pipelines gets two labels, and a
    restart of one pipeline gets the same one)."""
    place = "" if lake is None else str(lake.resolve() if isinstance(lake, Path) else lake)
    where = f"{socket.gethostname()}:{place}"
    digest = zlib.crc32(where.encode("utf-8"))
    return f"medallion:{source}:{digest:08x}"[:60]


def replicas(conn: Any, dialect: ServerDialect) -> list[Replica] | None:
    """The server's registered binlog clients; None when the user may not list them.

    MySQL 8.0.22+ names the statement ``SHOW REPLICAS`` (8.4 dropped ``SHOW SLAVE HOSTS``);
    MariaDB keeps ``SHOW SLAVE HOSTS``. Columns are read by name (``Server_id``, ``Host``,
    ``Port``), which both spell alike apart from case.
    """
    numbers = [int(n) for n in dialect.version.split("-", 1)[0].split(".")[:3] if n.isdigit()]
    new_name = not dialect.mariadb and tuple(numbers) >= (8, 0, 22)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW REPLICAS" if new_name else "SHOW SLAVE HOSTS")
            names = [str(d[0]).lower() for d in cur.description or ()]
            rows = [dict(zip(names, row, strict=True)) for row in cur.fetchall()]
    except pymysql.err.MySQLError as exc:
        if exc.args and exc.args[0] in _NOT_ALLOWED:
            return None
        raise
    return [
        Replica(int(r["server_id"]), str(r.get("host") or ""), int(r.get("port") or 0))
        for r in rows
    ]


def binlog_client(
    conn: Any, dialect: ServerDialect | None, settings: Any, source: str, lake: LakePath | None
) -> BinlogClient:
    """The server id to stream with, checked against the server's registered clients (see the
    module docstring).

    Args:
        conn: A connection to the server.
        dialect: The server's dialect (None: read it).
        settings: The agent's settings (``server_id``, ``server_id_given``, ``host``, ``port``).
        source: The source name.
        lake: Where the source's schema history lives in the lake (part of the label).

    Raises:
        SourceRefused: A configured ``database.server.id`` is used by another client.
    """
    if dialect is None:
        dialect = ServerDialect.read(conn)
    label = report_host(source, lake)
    wanted = int(settings.server_id)
    listed = replicas(conn, dialect)
    if listed is None:
        logger.warning(
            "source %s: the user may not list the server's replicas (SHOW SLAVE HOSTS), so "
            "server id %d is used unchecked against other binlog readers",
            source,
            wanted,
        )
        return BinlogClient(wanted, label)
    others = {r.server_id: r for r in listed if r.host != label}
    taken = set(others) | {dialect.server_id}
    if wanted not in taken:
        return BinlogClient(wanted, label)
    holder = (
        "the server itself (@@server_id)"
        if wanted == dialect.server_id
        else f"another binlog client ({others[wanted].describe()})"
    )
    if settings.server_id_given:
        raise SourceRefused(
            source,
            "database.server.id",
            f"database.server.id {wanted} is already used on {settings.host}:{settings.port} by "
            f"{holder}; two binlog readers with one id disconnect each other",
            "give every source reading this server its own database.server.id (the server "
            "lists the ids in use: SHOW SLAVE HOSTS)",
        )
    start = ID_RANGE.index(wanted) if wanted in ID_RANGE else 0
    for step in range(1, len(ID_RANGE)):
        candidate = ID_RANGE[(start + step) % len(ID_RANGE)]
        if candidate not in taken:
            logger.warning(
                "source %s: the default server id %d is used on %s:%s by %s; reading the "
                "binlog as server id %d instead (set database.server.id to choose one)",
                source,
                wanted,
                settings.host,
                settings.port,
                holder,
                candidate,
            )
            return BinlogClient(candidate, label)
    raise SourceRefused(
        source,
        "database.server.id",
        f"every server id in {ID_RANGE.start}-{ID_RANGE.stop - 1} is used on {settings.host}:"
        f"{settings.port}",
        "set database.server.id to an id no other binlog client of the server uses",
    )
