"""A YugabyteDB YSQL server on the PostgreSQL wire protocol: real PostgreSQL plus the model.

The YugabyteDB agent connects to :class:`YbPeer` with its own psycopg, unmodified. What the peer
does with a connection (PostgreSQL Frontend/Backend Protocol, "Streaming Replication Protocol";
YugabyteDB's differences as seed 004 and the digest B1-B4 quote them):

* **A normal connection** is proxied byte for byte to the session's real PostgreSQL, which holds
  the same tables and rows as the model (YSQL is PostgreSQL's query layer: the catalog, the
  publication and the snapshot's ``SELECT``\\ s behave alike), except what YugabyteDB answers
  differently, which the peer answers from the model:

  - ``SELECT current_setting('server_version_num'), version()``: YugabyteDB 2024.1 reports
    PostgreSQL 11.2 with a ``-YB-`` version.
  - ``SELECT ... FROM pg_replication_slots WHERE slot_name = $1``: the model's slots, with
    ``yb_restart_commit_ht``; any other query of that view is refused (nothing answers it
    silently from the real server's unrelated slots).
  - ``SET LOCAL yb_read_time TO '<ht> ht'``: PostgreSQL cannot read at a hybrid time, so the
    peer exported a real snapshot (``pg_export_snapshot``) when it created the slot, under the
    lock that orders the model's commits, and holds it open; the ``SET`` becomes
    ``SET TRANSACTION SNAPSHOT`` of that export, which reads exactly the database at the slot's
    consistent point. Other hybrid times are refused.
  - Functions YugabyteDB does not support (``pg_current_wal_lsn`` and kin, ``pg_wal_lsn_diff``,
    ``pg_logical_emit_message``, slot peeks): an ``ErrorResponse`` (0A000).

* **A** ``replication=database`` **connection** is served entirely by the model:
  ``IDENTIFY_SYSTEM``, ``CREATE_REPLICATION_SLOT s LOGICAL <yboutput|pgoutput>
  [SEQUENCE|HYBRID_TIME]``, ``START_REPLICATION SLOT s LOGICAL <lsn> (proto_version '1',
  publication_names ...)`` (COPY BOTH: XLogData from the slot's confirmed flush, at least once,
  keepalives when asked and every few seconds; standby status updates confirm the flush LSN),
  the ``wal_sender_timeout`` setting; anything else gets an ``ErrorResponse``.

:meth:`YbPeer.restart` breaks every connection and keeps the model (its slots and data), as a
server restart does.
"""

from __future__ import annotations

import contextlib
import logging
import re
import select
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psycopg

from capture.postgresql.position import format_pg_lsn
from capture.postgresql.slot import parse_lsn
from tests.ybmodel.vwal import ModelError, YbModel, keepalive, xlog_data

__all__ = ["YB_VERSION", "YB_VERSION_NUM", "YbPeer"]

logger = logging.getLogger(__name__)

YB_VERSION_NUM = "110002"
YB_VERSION = (
    "PostgreSQL 11.2-YB-2024.1.3.0-b0 on x86_64-pc-linux-gnu, compiled by clang version "
    "17.0.6, 64-bit"
)
SSL_REQUEST, GSSENC_REQUEST, CANCEL_REQUEST = 80877103, 80877104, 80877102
KEEPALIVE_EVERY_S = 5.0
"""A walsender sends a keepalive at least this often (half of ``wal_sender_timeout`` is
PostgreSQL's rule; the model's is shorter, so idle clients see it)."""
WAL_SENDER_TIMEOUT_MS = 60_000
BOOL_OID, TEXT_OID, INT4_OID, VOID_OID = 16, 25, 23, 2278

_EXTENDED = frozenset({b"P", b"B", b"D", b"E", b"C", b"H", b"S"})
"""Extended-query messages: held until their Sync, then forwarded or answered together."""
_UNSUPPORTED = re.compile(
    r"\b(pg_current_wal_\w*|pg_wal_lsn_diff|pg_logical_emit_message|pg_logical_slot_\w*)\s*\(",
    re.IGNORECASE,
)
_VERSION_QUERY = "SELECT current_setting('server_version_num'), version()"
_SLOTS_QUERY = re.compile(
    r"^\s*SELECT\s+(?P<columns>.+?)\s+FROM\s+pg_replication_slots\s+WHERE\s+slot_name\s*=\s*"
    r"\$1\s*$",
    re.IGNORECASE | re.DOTALL,
)
_DROP_SLOT = re.compile(
    r"^\s*SELECT\s+pg_drop_replication_slot\((?:slot_name\)\s+FROM\s+pg_replication_slots\s+"
    r"WHERE\s+slot_name\s*=\s*\$1|\$1\))\s*$",
    re.IGNORECASE,
)
_READ_TIME = re.compile(r"^\s*SET\s+LOCAL\s+yb_read_time\s+TO\s+'(\d+) ht'\s*$", re.IGNORECASE)
_IDENT = r'(?:"((?:[^"]|"")+)"|(\w+))'
_CREATE_SLOT = re.compile(
    rf"^\s*CREATE_REPLICATION_SLOT\s+{_IDENT}\s+LOGICAL\s+{_IDENT}(?:\s+(SEQUENCE|HYBRID_TIME))?"
    r"\s*;?\s*$",
    re.IGNORECASE,
)
_START = re.compile(
    rf"^\s*START_REPLICATION\s+SLOT\s+{_IDENT}\s+LOGICAL\s+([0-9A-Fa-f]+/[0-9A-Fa-f]+)"
    r"\s*(?:\((?P<options>.*)\))?\s*;?\s*$",
    re.IGNORECASE | re.DOTALL,
)
_OPTION = re.compile(r"\s*(\w+)\s+'((?:[^']|'')*)'\s*(?:,|$)")
_WAL_SENDER_TIMEOUT = re.compile(
    r"^\s*SELECT\s+setting(::bigint)?\s+FROM\s+pg_settings\s+WHERE\s+name\s*=\s*"
    r"'wal_sender_timeout'\s*$",
    re.IGNORECASE,
)


class ProtocolError(Exception):
    """The client broke the protocol, or the connection went."""


class SqlError(Exception):
    """What the server answers with an ``ErrorResponse``."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def _ident(quoted: str | None, bare: str | None) -> str:
    return quoted.replace('""', '"') if quoted is not None else str(bare).lower()


# --- messages -------------------------------------------------------------------------------------


def message(kind: bytes, body: bytes = b"") -> bytes:
    """A backend message: type byte, length, body."""
    return kind + struct.pack("!i", len(body) + 4) + body


def error_response(code: str, text: str) -> bytes:
    """``ErrorResponse`` (severity ERROR, SQLSTATE ``code``)."""
    fields = b"SERROR\0VERROR\0C" + code.encode() + b"\0M" + text.encode() + b"\0\0"
    return message(b"E", fields)


def row_description(columns: list[tuple[str, int]]) -> bytes:
    """``RowDescription`` of text-format columns ``(name, type oid)``."""
    body = struct.pack("!h", len(columns))
    for name, oid in columns:
        body += name.encode() + b"\0" + struct.pack("!ihihih", 0, 0, oid, -1, -1, 0)
    return message(b"T", body)


def data_row(values: list[str | None]) -> bytes:
    """``DataRow`` of text values (None: NULL)."""
    body = struct.pack("!h", len(values))
    for value in values:
        if value is None:
            body += struct.pack("!i", -1)
        else:
            data = value.encode()
            body += struct.pack("!i", len(data)) + data
    return message(b"D", body)


def result(columns: list[tuple[str, int]], rows: list[list[str | None]], tag: str) -> bytes:
    """RowDescription, DataRows and CommandComplete of one simple query's result."""
    out = row_description(columns) + b"".join(data_row(r) for r in rows)
    return out + message(b"C", tag.encode() + b"\0")


def ready(status: bytes = b"I") -> bytes:
    """``ReadyForQuery``."""
    return message(b"Z", status)


def _recv(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise ProtocolError("connection closed")
        out += chunk
    return bytes(out)


def read_message(sock: socket.socket) -> tuple[bytes, bytes]:
    """One typed message: ``(type, body)``."""
    head = _recv(sock, 5)
    (length,) = struct.unpack("!i", head[1:])
    return head[:1], _recv(sock, length - 4)


def _cstrings(data: bytes) -> list[str]:
    return [part.decode() for part in data.split(b"\0")]


@dataclass
class _Batch:
    """Extended-protocol messages up to a Sync, held back while the peer decides who answers."""

    messages: list[tuple[bytes, bytes]] = field(default_factory=list)
    query: str | None = None
    params: list[str | None] = field(default_factory=list)


class YbPeer:
    """The server: :attr:`port` on 127.0.0.1; :attr:`model` and :attr:`lock` shared with the
    test, which commits on the real PostgreSQL and the model under :attr:`lock`.

    Args:
        model: The YugabyteDB model (slots, Virtual WAL).
        upstream_dsn: The real PostgreSQL normal connections are proxied to.
    """

    def __init__(self, model: YbModel, upstream_dsn: str) -> None:
        self.model = model
        self.upstream = psycopg.conninfo.conninfo_to_dict(upstream_dsn)
        self.upstream_dsn = upstream_dsn
        self.lock = threading.RLock()
        """Orders the model's commits, slot creation (with its exported snapshot) and acks."""
        self.port = 0
        self.queries: list[str] = []
        """Every query the peer answered itself or refused, in order."""
        self._exports: dict[int, tuple[psycopg.Connection[Any], str]] = {}
        self._listener: socket.socket | None = None
        self._sockets: set[socket.socket] = set()
        self._active: dict[str, int] = {}
        self._ids = iter(range(10_000, 1 << 30))

    # --- lifecycle --------------------------------------------------------------------------------

    def start(self) -> YbPeer:
        """Listen (on a free port the first time, on the same port after a restart)."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(32)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                sock, _ = listener.accept()
            except OSError:
                return  # closed by stop()
            with self.lock:
                self._sockets.add(sock)
            threading.Thread(target=self._serve, args=(sock,), daemon=True).start()

    def stop(self) -> None:
        """Stop listening and break every connection."""
        listener, self._listener = self._listener, None
        if listener is not None:
            # shutdown() wakes the thread blocked in accept(); close() alone would leave the
            # port listening until it returns, and a restart could not bind it again.
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                listener.close()
        with self.lock:
            sockets, self._sockets = list(self._sockets), set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def restart(self) -> None:
        """A server restart: every connection broken; slots, data and history kept."""
        self.stop()
        deadline = time.monotonic() + 5
        while self._active and time.monotonic() < deadline:
            time.sleep(0.01)  # the walsenders notice their sockets went
        self.start()

    def close(self) -> None:
        """Stop, and end the transactions holding the exported snapshots."""
        self.stop()
        for conn, _ in self._exports.values():
            conn.close()
        self._exports.clear()

    # --- a connection -----------------------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        try:
            params, startup = self._startup(sock)
            if params is None:
                return
            if params.get("replication") == "database":
                _Walsender(self, sock, params).run()
            else:
                _Proxy(self, sock, startup).run()
        except (ProtocolError, OSError) as exc:
            logger.debug("yb peer: connection ended: %s", exc)
        finally:
            with self.lock:
                self._sockets.discard(sock)
            with contextlib.suppress(OSError):
                sock.close()

    @staticmethod
    def _startup(sock: socket.socket) -> tuple[dict[str, str] | None, bytes]:
        """The startup packet (SSL and GSS encryption declined first), as params and bytes."""
        while True:
            (length,) = struct.unpack("!i", _recv(sock, 4))
            body = _recv(sock, length - 4)
            (code,) = struct.unpack("!i", body[:4])
            if code in (SSL_REQUEST, GSSENC_REQUEST):
                sock.sendall(b"N")
                continue
            if code == CANCEL_REQUEST:
                return None, b""
            items = _cstrings(body[4:])
            params = dict(zip(items[0::2], items[1::2], strict=False))
            return params, struct.pack("!i", length) + body

    def export_snapshot(self, consistent_ht: int) -> None:
        """Hold a real snapshot of now for reads at ``consistent_ht`` (under :attr:`lock`)."""
        # autocommit: the BEGIN below is the transaction's own (psycopg would open one first).
        conn = psycopg.connect(self.upstream_dsn, autocommit=True)
        conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ")
        row = conn.execute("SELECT pg_export_snapshot()").fetchone()
        assert row is not None
        self._exports[consistent_ht] = (conn, str(row[0]))

    def exported(self, consistent_ht: int) -> str:
        """The snapshot exported at a slot's consistent point.

        Raises:
            SqlError: No slot's consistent point is at that hybrid time.
        """
        found = self._exports.get(consistent_ht)
        if found is None:
            raise SqlError(
                "0A000",
                f"the YugabyteDB peer reads only at a slot's consistent point; {consistent_ht} "
                f"is none of {sorted(self._exports)}",
            )
        return found[1]

    def slot_rows(self, columns: list[str], slot_name: str) -> list[list[str | None]]:
        """The model's ``pg_replication_slots`` row of ``slot_name`` (none if missing)."""
        with self.lock:
            slot = self.model.slots.get(slot_name)
            if slot is None:
                return []
            confirmed = format_pg_lsn(slot.confirmed_flush)
            values: dict[str, str | None] = {
                "slot_name": slot.name,
                "plugin": slot.plugin,
                "slot_type": "logical",
                "database": slot.database,
                "active": "t" if slot_name in self._active else "f",
                "restart_lsn": confirmed,
                "confirmed_flush_lsn": confirmed,
                "yb_restart_commit_ht": str(self.model.restart_commit_ht(slot_name)),
            }
        unknown = [c for c in columns if c not in values]
        if unknown:
            raise SqlError(
                "42703", f'column "{unknown[0]}" of pg_replication_slots is not modelled'
            )
        return [[values[c] for c in columns]]

    def drop_slot(self, slot: str, *, missing_ok: bool) -> list[list[str | None]]:
        """``pg_drop_replication_slot``: refused while a walsender streams it."""
        with self.lock:
            if slot in self._active:
                raise SqlError(
                    "55006", f'replication slot "{slot}" is active for PID {self._active[slot]}'
                )
            if slot not in self.model.slots:
                if missing_ok:
                    return []
                raise SqlError("42704", f'replication slot "{slot}" does not exist')
            del self.model.slots[slot]
            return [[""]]

    def activate(self, slot: str) -> None:
        """Mark ``slot`` in use by a walsender, or refuse as PostgreSQL does."""
        with self.lock:
            if slot in self._active:
                raise SqlError(
                    "55006", f'replication slot "{slot}" is active for PID {self._active[slot]}'
                )
            self._active[slot] = next(self._ids)

    def deactivate(self, slot: str) -> None:
        """The walsender of ``slot`` ended."""
        with self.lock:
            self._active.pop(slot, None)


class _Proxy:
    """A normal connection: bytes both ways, YugabyteDB's own answers in between."""

    def __init__(self, peer: YbPeer, client: socket.socket, startup: bytes) -> None:
        self.peer = peer
        self.client = client
        self.startup = startup
        self.status = b"I"
        self.statements: dict[str, str] = {}
        """Named prepared statements the peer answers itself, by name."""
        self.lock = threading.Lock()

    def run(self) -> None:
        host = self.peer.upstream.get("host") or "127.0.0.1"
        port = int(self.peer.upstream.get("port") or 5432)
        if str(host).startswith("/"):
            server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            server.connect(f"{host}/.s.PGSQL.{port}")
        else:
            server = socket.create_connection((str(host), port))
        with self.peer.lock:
            self.peer._sockets.add(server)
        try:
            server.sendall(self.startup)
            threading.Thread(target=self._from_server, args=(server,), daemon=True).start()
            self._from_client(server)
        finally:
            with self.peer.lock:
                self.peer._sockets.discard(server)
            with contextlib.suppress(OSError):
                server.close()

    def _send(self, data: bytes) -> None:
        with self.lock:
            self.client.sendall(data)

    def _from_server(self, server: socket.socket) -> None:
        try:
            while True:
                kind, body = read_message(server)
                if kind == b"Z":
                    self.status = body[:1]
                self._send(message(kind, body))
        except (ProtocolError, OSError):
            with contextlib.suppress(OSError):
                self.client.shutdown(socket.SHUT_RDWR)

    def _from_client(self, server: socket.socket) -> None:
        batch = _Batch()
        while True:
            kind, body = read_message(self.client)
            if kind in _EXTENDED:
                if kind == b"P":
                    body = self._rewrite_parse(body)
                batch.messages.append((kind, body))
                self._note(batch, kind, body)
                if kind == b"S":
                    if batch.query is None:
                        server.sendall(b"".join(message(k, b) for k, b in batch.messages))
                    else:
                        self._send(self._answer_extended(batch))
                    batch = _Batch()
                continue
            if kind == b"Q":
                answer = self._answer_simple(body.rstrip(b"\0").decode())
                if isinstance(answer, bytes):
                    self._send(answer)
                    continue
                if answer is not None:
                    body = answer.encode() + b"\0"
            server.sendall(message(kind, body))
            if kind == b"X":
                return

    def _rewrite_parse(self, body: bytes) -> bytes:
        """A Parse of ``SET LOCAL yb_read_time``: the real server imports the snapshot instead."""
        name, query = _cstrings(body)[:2]
        read_time = _READ_TIME.match(query)
        if not read_time:
            return body
        rest = body[len(name.encode()) + len(query.encode()) + 2 :]
        # An unknown read time leaves the SET to the real server, which refuses the parameter.
        with contextlib.suppress(SqlError):
            query = f"SET TRANSACTION SNAPSHOT '{self.peer.exported(int(read_time[1]))}'"
        return name.encode() + b"\0" + query.encode() + b"\0" + rest

    def _note(self, batch: _Batch, kind: bytes, body: bytes) -> None:
        """Remember the query and parameters of a batch the peer must answer."""
        if kind == b"P":
            name, query = _cstrings(body)[:2]
            if self._ours(query) and not _READ_TIME.match(query):
                batch.query = query
                if name:
                    self.statements[name] = query
        elif kind == b"B":
            portal_end = body.index(b"\0")
            stmt_end = body.index(b"\0", portal_end + 1)
            statement = body[portal_end + 1 : stmt_end].decode()
            if statement in self.statements:
                batch.query = self.statements[statement]
            if batch.query is not None:
                batch.params = _bind_params(body[stmt_end + 1 :])

    @staticmethod
    def _ours(query: str) -> bool:
        return bool(
            _UNSUPPORTED.search(query)
            or "pg_replication_slots" in query
            or "pg_drop_replication_slot" in query
            or "yb_read_time" in query
            or query.strip() == _VERSION_QUERY
        )

    def _answer_simple(self, query: str) -> bytes | str | None:
        """None: the real server answers; str: the real server answers this instead; bytes: the
        peer's answer."""
        if not self._ours(query):
            return None
        self.peer.queries.append(query)
        try:
            read_time = _READ_TIME.match(query)
            if read_time:
                return f"SET TRANSACTION SNAPSHOT '{self.peer.exported(int(read_time[1]))}'"
            columns, rows, tag = self._evaluate(query, [], execute=True)
            return result(columns, rows, tag) + ready(self.status)
        except SqlError as exc:
            return error_response(exc.code, str(exc)) + ready(self._failed())

    def _answer_extended(self, batch: _Batch) -> bytes:
        assert batch.query is not None
        self.peer.queries.append(batch.query)
        out = b""
        try:
            # A Parse (and Describe) without an Execute prepares: columns, no effects.
            execute = any(kind == b"E" for kind, _ in batch.messages)
            columns, rows, tag = self._evaluate(batch.query, batch.params, execute=execute)
            for kind, body in batch.messages:
                if kind == b"P":
                    out += message(b"1")
                elif kind == b"B":
                    out += message(b"2")
                elif kind == b"D" and body[:1] == b"S":
                    count = batch.query.count("$")
                    out += message(b"t", struct.pack("!h", count) + b"\0\0\0\0" * count)
                    out += row_description(columns)
                elif kind == b"D":
                    out += row_description(columns)
                elif kind == b"E":
                    out += b"".join(data_row(r) for r in rows)
                    out += message(b"C", tag.encode() + b"\0")
                elif kind == b"C":
                    out += message(b"3")
            return out + ready(self.status)
        except SqlError as exc:
            return out + error_response(exc.code, str(exc)) + ready(self._failed())

    def _failed(self) -> bytes:
        # An error inside a transaction block aborts it, as on the real server.
        return b"E" if self.status in (b"T", b"E") else b"I"

    def _evaluate(
        self, query: str, params: list[str | None], *, execute: bool
    ) -> tuple[list[tuple[str, int]], list[list[str | None]], str]:
        unsupported = _UNSUPPORTED.search(query)
        if unsupported:
            raise SqlError("0A000", f"{unsupported[1]} is not supported by YugabyteDB")
        if query.strip() == _VERSION_QUERY:
            columns = [("current_setting", TEXT_OID), ("version", TEXT_OID)]
            return columns, [[YB_VERSION_NUM, YB_VERSION]], "SELECT 1"
        slot = params[0] if len(params) == 1 else None
        if _DROP_SLOT.match(query) and (slot is not None or not execute):
            rows: list[list[str | None]] = []
            if execute and slot is not None:
                rows = self.peer.drop_slot(slot, missing_ok="pg_replication_slots" in query)
            return [("pg_drop_replication_slot", VOID_OID)], rows, f"SELECT {len(rows)}"
        slots = _SLOTS_QUERY.match(query)
        if slots and (slot is not None or not execute):
            names = [c.strip() for c in slots["columns"].split(",")]
            plain = [n.removesuffix("::text").strip() for n in names]
            columns = [(n, BOOL_OID if n == "active" else TEXT_OID) for n in plain]
            rows = self.peer.slot_rows(plain, slot) if execute and slot is not None else []
            return columns, rows, f"SELECT {len(rows)}"
        raise SqlError("0A000", f"the YugabyteDB peer does not model this query: {query}")


def _bind_params(rest: bytes) -> list[str | None]:
    """The parameter values of a Bind message after its statement name (text or binary text)."""
    (nformats,) = struct.unpack_from("!h", rest, 0)
    at = 2 + 2 * nformats
    (count,) = struct.unpack_from("!h", rest, at)
    at += 2
    values: list[str | None] = []
    for _ in range(count):
        (length,) = struct.unpack_from("!i", rest, at)
        at += 4
        if length < 0:
            values.append(None)
            continue
        values.append(rest[at : at + length].decode())
        at += length
    return values


class _Walsender:
    """A ``replication=database`` connection, served by the model."""

    def __init__(self, peer: YbPeer, sock: socket.socket, params: dict[str, str]) -> None:
        self.peer = peer
        self.sock = sock
        self.database = params.get("database", params.get("user", ""))

    def run(self) -> None:
        self.sock.sendall(
            message(b"R", struct.pack("!i", 0))
            + b"".join(
                message(b"S", f"{k}\0{v}\0".encode())
                for k, v in (
                    ("server_version", "11.2-YB-2024.1.3.0-b0"),
                    ("server_encoding", "UTF8"),
                    ("client_encoding", "UTF8"),
                    ("DateStyle", "ISO, MDY"),
                    ("integer_datetimes", "on"),
                    ("standard_conforming_strings", "on"),
                    ("TimeZone", "UTC"),
                )
            )
            + message(b"K", struct.pack("!ii", next(self.peer._ids), 0))
            + ready()
        )
        while True:
            kind, body = read_message(self.sock)
            if kind == b"X":
                return
            if kind != b"Q":
                self.sock.sendall(
                    error_response("08P01", f"a walsender takes simple queries, not {kind!r}")
                    + ready()
                )
                continue
            query = body.rstrip(b"\0").decode()
            self.peer.queries.append(query)
            try:
                self._command(query)
            except SqlError as exc:
                self.sock.sendall(error_response(exc.code, str(exc)) + ready())

    def _command(self, query: str) -> None:
        if query.strip().rstrip(";").upper() == "IDENTIFY_SYSTEM":
            columns = [("systemid", TEXT_OID), ("timeline", INT4_OID), ("xlogpos", TEXT_OID)]
            row: list[str | None] = ["7000000000000000001", "1", format_pg_lsn(0)]
            self.sock.sendall(
                result([*columns, ("dbname", TEXT_OID)], [[*row, self.database]], "IDENTIFY_SYSTEM")
                + ready()
            )
            return
        if _WAL_SENDER_TIMEOUT.match(query):
            rows: list[list[str | None]] = [[str(WAL_SENDER_TIMEOUT_MS)]]
            self.sock.sendall(result([("setting", 20)], rows, "SELECT 1") + ready())
            return
        create = _CREATE_SLOT.match(query)
        if create:
            self._create(
                _ident(create[1], create[2]), _ident(create[3], create[4]), create[5] or "SEQUENCE"
            )
            return
        start = _START.match(query)
        if start:
            self._start(_ident(start[1], start[2]), start[3], start["options"] or "")
            return
        raise SqlError("42601", f"the walsender does not understand: {query}")

    def _create(self, slot: str, plugin: str, lsn_type: str) -> None:
        if plugin not in ("yboutput", "pgoutput"):
            raise SqlError("58P01", f'could not access file "{plugin}": No such file or directory')
        with self.peer.lock:
            try:
                point, hybrid_time = self.peer.model.create_slot(slot, plugin, lsn_type.upper())
            except ModelError as exc:
                code = "42710" if "already exists" in str(exc) else "55000"
                raise SqlError(code, str(exc)) from exc
            self.peer.model.slots[slot].database = self.database
            self.peer.export_snapshot(int(hybrid_time))
        columns = [
            ("slot_name", TEXT_OID),
            ("consistent_point", TEXT_OID),
            ("snapshot_name", TEXT_OID),
            ("output_plugin", TEXT_OID),
        ]
        row: list[str | None] = [slot, format_pg_lsn(point), hybrid_time, plugin]
        self.sock.sendall(result(columns, [row], "CREATE_REPLICATION_SLOT") + ready())

    def _start(self, slot: str, lsn: str, options_text: str) -> None:
        options = {m[1].lower(): m[2].replace("''", "'") for m in _OPTION.finditer(options_text)}
        with self.peer.lock:
            if slot not in self.peer.model.slots:
                raise SqlError("42704", f'replication slot "{slot}" does not exist')
        for name in options:
            if name not in ("proto_version", "publication_names"):
                # YugabyteDB's pgoutput is PostgreSQL 11's: no ``messages``, no streaming.
                raise SqlError("22023", f"unrecognized pgoutput option: {name}")
        if options.get("proto_version") != "1":
            raise SqlError("22023", f"proto_version {options.get('proto_version')!r} unsupported")
        parse_lsn(lsn)
        self.peer.activate(slot)
        try:
            self.sock.sendall(message(b"W", struct.pack("!bh", 0, 0)))
            if self._stream(slot):
                self.sock.sendall(message(b"c") + message(b"C", b"START_REPLICATION\0") + ready())
        finally:
            self.peer.deactivate(slot)

    def _stream(self, slot_name: str) -> bool:
        """COPY BOTH until the client's CopyDone (True) or the connection's end."""
        model = self.peer.model
        with self.peer.lock:
            # At least once: the server resends from the confirmed flush, the last confirmed
            # transaction included (YugabyteDB ignores a later start LSN).
            sent_commit = model.slots[slot_name].confirmed_flush - 2
        last_keepalive = time.monotonic()
        reply = False
        while True:
            ready_to_read, _, _ = select.select([self.sock], [], [], 0.05)
            if ready_to_read:
                kind, body = read_message(self.sock)
                if kind == b"c":
                    return True
                if kind == b"X":
                    return False
                if kind == b"d" and body[:1] == b"r":
                    _, flush, _, _, want = struct.unpack("!QQQqB", body[1:])
                    with self.peer.lock:
                        slot = model.slots[slot_name]
                        if flush > slot.confirmed_flush:
                            slot.confirmed_flush = flush
                            slot.acks.append(flush)
                    reply = reply or bool(want)
                continue
            out = b""
            with self.peer.lock:
                for lsn, payload in model.frames(slot_name, after_commit=sent_commit):
                    out += message(b"d", xlog_data(lsn, lsn, payload))
                    if payload[:1] == b"C":
                        sent_commit = lsn
                wal_end = max(sent_commit, model.slots[slot_name].confirmed_flush)
            now = time.monotonic()
            if not out and (reply or now - last_keepalive > KEEPALIVE_EVERY_S):
                out = message(b"d", keepalive(wal_end))
                reply = False
                last_keepalive = now
            if out:
                self.sock.sendall(out)
