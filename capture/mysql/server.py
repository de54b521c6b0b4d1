"""The MySQL / MariaDB server as the capture agent sees it: what it is, whether its binlog can
be captured, and where the binlog stands.

Engine differences (MariaDB vs MySQL, 8.4's ``SHOW BINARY LOG STATUS``, GTID flavours) are the
flags of :class:`ServerDialect`, read once per connection; nothing else in the agent asks which
server it talks to.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from capture.server_errors import SourceRefused
from pipeline.errors import CaptureError

__all__ = [
    "BinlogPoint",
    "ServerDialect",
    "binlog_files",
    "check_server",
    "current_point",
    "merge_gtid",
    "snapshot_point",
]


@dataclass(frozen=True, slots=True)
class ServerDialect:
    """What differs between the servers the agent speaks to, read once per connection.

    Attributes:
        version: ``@@version``.
        mariadb: MariaDB (GTIDs ``domain-server-seq``, ``@@gtid_binlog_pos``,
            ``binlog_snapshot_*`` status after a consistent snapshot, ``MariadbGtidEvent``).
        status_sql: The statement that reports the current binlog file and position:
            ``SHOW BINARY LOG STATUS`` on MySQL 8.2+ (8.4 removed ``SHOW MASTER STATUS``),
            ``SHOW MASTER STATUS`` elsewhere.
        row_metadata: The server has ``binlog_row_metadata`` (MariaDB 10.5+, MySQL 8.0.1+).
        server_id: ``@@server_id`` of the server (binlog coordinates are per server).
        gtid_mode: GTIDs are on (always on MariaDB; ``@@gtid_mode=ON`` on MySQL).
    """

    version: str
    mariadb: bool
    status_sql: str
    row_metadata: bool
    server_id: int
    gtid_mode: bool

    @classmethod
    def read(cls, conn: Any) -> ServerDialect:
        """Ask the server."""
        with conn.cursor() as cur:
            cur.execute("SELECT @@version, @@server_id")
            version, server_id = cur.fetchone()
            mariadb = "mariadb" in str(version).lower()
            numbers = [int(n) for n in re.findall(r"\d+", str(version))[:3]] + [0, 0, 0]
            major, minor = numbers[0], numbers[1]
            new_status = not mariadb and (major, minor) >= (8, 2)
            row_metadata = (mariadb and (major, minor) >= (10, 5)) or (not mariadb and major >= 8)
            gtid_mode = mariadb
            if not mariadb:
                cur.execute("SELECT @@gtid_mode")
                gtid_mode = str(cur.fetchone()[0]).upper() == "ON"
        return cls(
            str(version),
            mariadb,
            "SHOW BINARY LOG STATUS" if new_status else "SHOW MASTER STATUS",
            row_metadata,
            int(server_id),
            gtid_mode,
        )


def _variables(conn: Any, names: Sequence[str]) -> dict[str, str]:
    with conn.cursor() as cur:
        marks = ", ".join(["%s"] * len(names))
        cur.execute(f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({marks})", list(names))
        return {str(k).lower(): str(v) for k, v in cur.fetchall()}


def check_server(conn: Any, dialect: ServerDialect, source: str) -> None:
    """Refuse a server whose binlog cannot feed the agent, saying exactly what to change.

    Raises:
        SourceRefused: A setting is wrong (terminal; one message listing every wrong setting).
    """
    wanted = {
        "log_bin": "ON",
        "binlog_format": "ROW",
        "binlog_row_image": "FULL",
    }
    if dialect.row_metadata:
        wanted["binlog_row_metadata"] = "FULL"
    found = _variables(conn, [*wanted, "binlog_row_value_options", "log_bin_compress"])
    problems = []
    for name, value in wanted.items():
        have = found.get(name, "").upper()
        if have != value:
            option = name.replace("_", "-")
            online = "" if name == "log_bin" else f"; online: SET GLOBAL {name}='{value}'"
            problems.append(
                f"{name} is {have or 'unset'}, needs {value} (server option --{option}={value} "
                f"or [mysqld] {name}={value}{online})"
            )
    if "PARTIAL_JSON" in found.get("binlog_row_value_options", "").upper():
        problems.append(
            "binlog_row_value_options is PARTIAL_JSON; partial JSON updates cannot be decoded: "
            "SET GLOBAL binlog_row_value_options=''"
        )
    if found.get("log_bin_compress", "OFF").upper() == "ON":
        problems.append("log_bin_compress is ON; compressed events are not read: set it OFF")
    if problems:
        raise SourceRefused(
            source,
            "server settings",
            "the server cannot be captured: " + "; ".join(problems),
            "change the settings named above and start the agent again",
        )


@dataclass(frozen=True, slots=True)
class BinlogPoint:
    """A binlog coordinate: file name, byte position, and the GTID set reached there."""

    file: str
    pos: int
    gtids: str | None = None

    @property
    def file_number(self) -> int:
        """The numeric extension of the file name (what orders files)."""
        return int(self.file.rsplit(".", 1)[-1])

    def key(self) -> tuple[int, int]:
        """Comparable coordinate."""
        return (self.file_number, self.pos)


def current_point(conn: Any, dialect: ServerDialect) -> BinlogPoint:
    """Where the binlog ends now, with the server's GTID set."""
    with conn.cursor() as cur:
        cur.execute(dialect.status_sql)
        row = cur.fetchone()
        if row is None:
            raise CaptureError("the server reports no binlog position: is log_bin on?")
        gtids: str | None
        if dialect.mariadb:
            cur.execute("SELECT @@gtid_binlog_pos")
            gtids = str(cur.fetchone()[0]) or None
        else:
            gtids = str(row[4]) if len(row) > 4 and row[4] else None
    return BinlogPoint(str(row[0]), int(row[1]), gtids)


def snapshot_point(conn: Any, dialect: ServerDialect) -> BinlogPoint:
    """The binlog point of the connection's consistent snapshot (call it right after
    ``START TRANSACTION WITH CONSISTENT SNAPSHOT``).

    MariaDB reports the exact point of the snapshot (``binlog_snapshot_file`` / ``_position``),
    with or without a lock; MySQL has no such status, so the binlog end read just after the
    snapshot started stands in: exact under the global read lock, and otherwise a change
    committed in between is counted as after the point (re-applied, never lost).
    """
    point = current_point(conn, dialect)
    if dialect.mariadb:
        with conn.cursor() as cur:
            cur.execute("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'")
            status = {str(k).lower(): str(v) for k, v in cur.fetchall()}
        if status.get("binlog_snapshot_file"):
            point = BinlogPoint(
                status["binlog_snapshot_file"], int(status["binlog_snapshot_position"]), point.gtids
            )
    return point


def binlog_files(conn: Any) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: (file, size) still on the server, oldest first."""
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [(str(r[0]), int(r[1])) for r in cur.fetchall()]


def merge_gtid(current: str | None, gtid: str, *, mariadb: bool) -> str:
    """The GTID position after the transaction ``gtid`` was read.

    MariaDB (``domain-server-seq``): one entry per replication domain, the last transaction's,
    as ``@@gtid_binlog_pos`` writes it. MySQL (``uuid:n``): the executed set, ``uuid:a-b[:c-d]``
    per source UUID, intervals merged (implemented, not exercised here: no MySQL server runs on
    these machines).

    >>> merge_gtid("0-1-7,1-2-3", "0-1-8", mariadb=True)
    '0-1-8,1-2-3'
    >>> merge_gtid("0-1-7", "0-1-8", mariadb=True)
    '0-1-8'
    >>> merge_gtid("3e11fa47-71ca-11e1-9e33-c80aa9429562:1-5:7-9",
    ...            "3e11fa47-71ca-11e1-9e33-c80aa9429562:6", mariadb=False)
    '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-9'
    """
    if mariadb:
        domain = gtid.split("-", 1)[0]
        if not current or ("," not in current and current.split("-", 1)[0] == domain):
            return gtid  # one domain (every transaction of an OLTP stream): its entry replaced
        parts = [p for p in (current or "").split(",") if p and p.split("-", 1)[0] != domain]
        return ",".join(sorted([*parts, gtid]))
    uuid, _, number = gtid.rpartition(":")
    sets: dict[str, list[tuple[int, int]]] = {}
    for part in filter(None, (p.strip() for p in (current or "").split(","))):
        source, *ranges = part.split(":")
        intervals = sets.setdefault(source.lower(), [])
        for span in ranges:
            first, _, last = span.partition("-")
            intervals.append((int(first), int(last or first)))
    n = int(number)
    sets.setdefault(uuid.lower(), []).append((n, n))
    out = []
    for source in sorted(sets):
        merged: list[tuple[int, int]] = []
        for low, high in sorted(sets[source]):
            if merged and low <= merged[-1][1] + 1:
                merged[-1] = (merged[-1][0], max(merged[-1][1], high))
            else:
                merged.append((low, high))
        text = ":".join(f"{a}-{b}" if a != b else str(a) for a, b in merged)
        out.append(f"{source}:{text}")
    return ",".join(out)
