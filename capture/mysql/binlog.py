"""A faster binlog reader: :class:`BinlogReader`, mysql-replication with hot paths of its own.

mysql-replication parses every ``TABLE_MAP`` event in full (with ``binlog_row_metadata=FULL``:
every column's name, charset, ENUM/SET values), and the server writes one before every row
event, so an OLTP stream pays that parse once per row event; it then decodes each row value
through a long chain of type tests and small reads. Measured on the TPC-B-like workload of
``benchmarks/mysql_capture.py`` that was ~60 % of the agent's CPU.

:class:`BinlogReader` keeps the library for everything it reads (connection, positions,
rotation, DDL, rare events) and takes over three kinds of packets before the library sees
them:

* ``TABLE_MAP``: a body (everything after the common header, without the checksum) that is
  byte-for-byte one already parsed maps to that parse's ``Table``; only new bodies reach the
  library. Equal bytes give an equal parse, so this is a cache, not a second parser. The
  packets already buffered are framed in C (:func:`capture.mysql._rowdecode.scan`), which
  applies such known table maps on the way to the next other event.
* MariaDB's GTID and the XID (commit) event, one of each per transaction: their few fixed
  fields are read here.
* Row events (``WRITE/UPDATE/DELETE_ROWS`` v1 and v2) of a mapped table: decoded in C
  (:mod:`capture.mysql._rowdecode`, one ``Decoder`` per table map, every read bounds-checked)
  into what one precompiled Python reader per column (:func:`_column_reader`) reads, a full
  image by the shape of its NULL bitmap (:class:`_Plan`, the Python reference the C decoder is
  tested against). Integer, float, string, blob and the temporal types the workload uses most
  are read in C, exactly as the library reads them (including the zero-date text of
  :func:`capture.mysql.types.install_binlog_date_readers`, left to the Python reader); every
  other type is handed to the library's own per-column reader, so its result is the library's
  by construction. The events
  subclass the library's (``WriteRowsEvent`` ...): their images are value lists in column
  order (``images``, what the agent reads), and the library's ``rows`` (``values``/
  ``none_sources`` dicts) are built from them when read.

The stream connection reads the socket in large chunks and serves PyMySQL's packet reads from
that buffer (:class:`_Connection`).

``tests/integration/test_mysql_binlog_reader.py`` decodes one binlog with both readers and
compares every event.
"""

from __future__ import annotations

import codecs
import datetime as dt
import errno
import functools
import logging
import struct
from collections.abc import Callable
from types import MappingProxyType
from typing import Any, Final

import pymysql
from pymysql.constants import CR
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.constants import FIELD_TYPE, NONE_SOURCE
from pymysqlreplication.event import MariadbGtidEvent, XidEvent
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (
    DeleteRowsEvent,
    RowsEvent,
    UpdateRowsEvent,
    WriteRowsEvent,
)

from capture.mysql.tls import SharedTlsConnection
from capture.mysql.types import binlog_date, binlog_datetime2
from pipeline.errors import CaptureError

try:
    import capture.mysql._rowdecode as _rowdecode
except ImportError as _missing:  # pragma: no cover - the bootstrap builds it
    # Not optional: without it the agent would not run slower, it would not run.
    raise ImportError(
        "capture.mysql._rowdecode (the C row-image decoder) is not built: run "
        "`make bootstrap` or `python setup.py build_ext --inplace` in the repository"
    ) from _missing

__all__ = ["BinlogReader"]

logger = logging.getLogger(__name__)

_TABLE_MAP: Final = 19
_ROWS_EVENTS: Final[dict[int, tuple[type[RowsEvent], int]]] = {
    # event type -> (the library's class, post-header length)
    23: (WriteRowsEvent, 8),
    24: (UpdateRowsEvent, 8),
    25: (DeleteRowsEvent, 8),
    30: (WriteRowsEvent, 10),
    31: (UpdateRowsEvent, 10),
    32: (DeleteRowsEvent, 10),
}
_EXPECTED_ERRORS: Final = (2013, 2006)
"""Lost connection: the library reconnects from its last position (as its own loop does)."""
_NOT_ON_THE_FAST_PATH: Final = ("end_log_pos", "skip_to_timestamp", "verify_checksum")
"""Library options the hot paths do not apply (table and schema filters do apply: a filtered
table's map never reaches ``table_map``, so its rows go the library's way and are dropped)."""
_HEADER: Final = struct.Struct("<xIBIII")
"""OK byte, then the common header: timestamp, type, server id, event size, next position."""
_EPOCH: Final = dt.datetime(1970, 1, 1)
_MAP_CACHE_LIMIT: Final = 4096
_READ_SIZE: Final = 256 * 1024
"""Bytes asked of the socket per read while the binlog streams."""
_MAX_PACKET_LEN: Final = pymysql.connections.MAX_PACKET_LEN
"""A packet this long is continued in the next one (the protocol's 16 MiB split)."""

Reader = Callable[[bytes, int], tuple[Any, int]]
"""Decodes one non-NULL value at an offset: (value, offset after it)."""


class _Connection(SharedTlsConnection):
    """A PyMySQL connection that can hand one packet back to the next ``_read_packet``."""

    pushed: Any = None
    # PyMySQL sets these in its methods; declared so the checker knows their types.
    _next_seq_id: int
    _current_timeout: float | None

    def _read_packet(self, packet_type: Any = pymysql.connections.MysqlPacket) -> Any:
        packet = self.pushed
        if packet is not None:
            self.pushed = None
            return packet
        return super()._read_packet(packet_type)

    _buffer: bytes = b""
    _at: int = 0
    """Bytes read from the socket ahead of the packets (``_buffer[_at:]`` not yet taken)."""

    def _read_bytes(self, num_bytes: int) -> bytes:
        """PyMySQL's ``_read_bytes`` (every packet read goes through it), served from a buffer
        filled up to :data:`_READ_SIZE` bytes a socket read: the binlog's small packets then
        cost a slice each, not a buffered-reader call."""
        buffer, at = self._buffer, self._at
        end = at + num_bytes
        if end <= len(buffer):
            self._at = end
            return buffer[at:end]
        return self._refill(num_bytes)

    def _refill(self, num_bytes: int) -> bytes:
        """Read until ``num_bytes`` are buffered; PyMySQL's errors for a failed or closed
        socket."""
        rest = self._buffer[self._at :]
        parts, have = [rest], len(rest)
        while have < num_bytes:
            try:
                # read1 hands over what the reader buffered first (from before the dump), then
                # makes at most one socket read.
                chunk = self._rfile.read1(max(num_bytes - have, _READ_SIZE))
            except OSError as error:
                if error.errno == errno.EINTR:
                    continue
                self._force_close()
                raise pymysql.err.OperationalError(
                    CR.CR_SERVER_LOST, f"Lost connection to MySQL server during query ({error})"
                ) from error
            except BaseException:
                self._force_close()
                raise
            if not chunk:
                self._force_close()
                raise pymysql.err.OperationalError(
                    CR.CR_SERVER_LOST, "Lost connection to MySQL server during query"
                )
            parts.append(chunk)
            have += len(chunk)
        data = b"".join(parts)
        self._buffer, self._at = data, num_bytes
        return data[:num_bytes]

    def read_payload(self) -> bytes:
        """The next packet's payload, read as PyMySQL's ``_read_packet`` reads it (sequence
        check, 16 MiB continuation packets, a server error raised) without building the
        ``MysqlPacket`` the hot path would only take ``_data`` from (~1.5 µs a packet, three
        packets a row event)."""
        pushed = self.pushed
        if pushed is not None:
            self.pushed = None
            return bytes(pushed._data)
        buffer, at = self._buffer, self._at
        if at + 4 <= len(buffer) and self._current_timeout == self._read_timeout:
            # The common case: a whole packet already buffered, in sequence, not continued.
            length = buffer[at] | buffer[at + 1] << 8 | buffer[at + 2] << 16
            end = at + 4 + length
            if (
                end <= len(buffer)
                and length < _MAX_PACKET_LEN
                and buffer[at + 3] == self._next_seq_id
                and length
                and buffer[at + 4] != 0xFF
            ):
                self._next_seq_id = (self._next_seq_id + 1) % 256
                self._at = end
                return buffer[at + 4 : end]
        if self._current_timeout != self._read_timeout:
            self._sock.settimeout(self._read_timeout)
            self._current_timeout = self._read_timeout
        read = self._read_bytes
        chunks: list[bytes] = []
        while True:
            header = read(4)
            length = header[0] | header[1] << 8 | header[2] << 16
            number = header[3]
            if number != self._next_seq_id:
                # PyMySQL's own handling of a lost sequence, word for word.
                self._force_close()
                if number == 0:
                    raise pymysql.err.OperationalError(
                        CR.CR_SERVER_LOST, "Lost connection to MySQL server during query"
                    )
                raise pymysql.err.InternalError(
                    f"Packet sequence number wrong - got {number} expected {self._next_seq_id}"
                )
            self._next_seq_id = (number + 1) % 256
            data = read(length)
            if length < _MAX_PACKET_LEN and not chunks:
                break
            chunks.append(data)
            if length < _MAX_PACKET_LEN:
                data = b"".join(chunks)
                break
        if data[:1] == b"\xff":
            packet = pymysql.connections.MysqlPacket(data, self.encoding)
            if self._result is not None and self._result.unbuffered_active is True:
                self._result.unbuffered_active = False
            packet.raise_for_error()
        return bytes(data)


class _Header:
    """What the agent reads of ``event.packet`` (the library's packet wrapper) on a row event."""

    __slots__ = ("event_size", "log_pos", "server_id")

    def __init__(self, log_pos: int, event_size: int, server_id: int) -> None:
        self.log_pos = log_pos
        self.event_size = event_size
        self.server_id = server_id


class BinlogReader(BinLogStreamReader):
    """mysql-replication's ``BinLogStreamReader`` with the table-map cache and the row decoder
    of this module (module docstring); same arguments, same events."""

    _BinLogStreamReader__connected_stream: bool
    _BinLogStreamReader__use_checksum: bool

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        unsupported = [k for k in _NOT_ON_THE_FAST_PATH if kwargs.get(k)]
        if unsupported or args:
            # The hot paths skip the library's handling of these; nothing in the agent sets them.
            raise TypeError(
                f"BinlogReader takes keyword arguments only, without {', '.join(unsupported)}"
            )
        kwargs["pymysql_wrapper"] = _Connection
        super().__init__(**kwargs)
        self._maps: dict[bytes, Any] = {}

    def fetchone(self) -> Any:
        """The next event, as the library's ``fetchone`` returns it."""
        while True:
            if not self._BinLogStreamReader__connected_stream:
                return self._library()  # connects, and reads the first event itself
            connection = self._stream_connection
            data = None
            if (
                connection.pushed is None
                and connection._current_timeout == connection._read_timeout
            ):
                # The packets already buffered, known table maps applied on the way, in C.
                at, seq, data, map_pos = _rowdecode.scan(
                    connection._buffer,
                    connection._at,
                    connection._next_seq_id,
                    self._BinLogStreamReader__use_checksum,
                    self._maps,
                    self.table_map,
                )
                connection._at, connection._next_seq_id = at, seq
                if map_pos:
                    self.log_pos = map_pos
            if data is None:
                try:
                    data = connection.read_payload()
                except pymysql.OperationalError as error:
                    if error.args[0] not in _EXPECTED_ERRORS:
                        raise
                    connection.pushed = None
                    connection.close()
                    self._BinLogStreamReader__connected_stream = False
                    continue
            if len(data) < 20 or data[0] != 0:  # EOF, not an event: the library's case
                connection.pushed = _packet(connection, data)
                return self._library()
            timestamp, kind, server_id, size, log_pos = _HEADER.unpack_from(data)
            checksum = 4 if self._BinLogStreamReader__use_checksum else 0
            end = 1 + size - checksum
            if kind == _TABLE_MAP:
                if self._map_table(data, end):
                    if log_pos:
                        self.log_pos = log_pos
                    continue
                return self._by_library(data, end)
            small = _SMALL_EVENTS.get(kind)
            if small is not None and small[0] in self._BinLogStreamReader__allowed_events:
                event = small[1](data)
                event.packet = _Header(log_pos, size, server_id)
                event.event_type = kind
                event.timestamp = timestamp
                event.event_size = size - 19 - checksum  # the library's: the body's size
                if log_pos:
                    self.log_pos = log_pos
                return event
            rows = _ROWS_EVENTS.get(kind)
            if rows is None or not self._post_header_is(kind, rows[1]):
                connection.pushed = _packet(connection, data)
                return self._library()
            table = self.table_map.get(int.from_bytes(data[20:26], "little"))
            if table is None:
                connection.pushed = _packet(connection, data)
                return self._library()
            try:
                event = _rows_event(rows[0], table, data, rows[1], end, kind)
            except CaptureError as error:
                raise CaptureError(
                    f"{error} (the event at {self.log_file}:{log_pos - size})"
                ) from error
            event.packet = _Header(log_pos, size, server_id)
            event.timestamp = timestamp
            event.event_size = size - 19 - checksum
            if log_pos:
                self.log_pos = log_pos
            return event

    def close(self) -> None:
        """Close the connections (the library's ``close``); log at DEBUG how many values the C
        decoder handed to the Python readers."""
        if logger.isEnabledFor(logging.DEBUG):
            plans = {id(p): p for t in self._maps.values() if (p := _cached_plan(t)) is not None}
            handed = sum(p.native.fallbacks for p in plans.values())
            if handed:
                logger.debug("binlog reader: %d values read by the columns' Python readers", handed)
        super().close()

    def _library(self) -> Any:
        """The library's next event, without the reference cycle between it and its packet
        wrapper (``wrapper.event``, not read once the event is returned): the agent pauses the
        cyclic collector while it reads a batch, and reference counting alone then frees it."""
        event = super().fetchone()
        wrapper = getattr(event, "packet", None)
        if isinstance(wrapper, BinLogPacketWrapper):
            wrapper.event = None
        return event

    def _map_table(self, data: bytes, end: int) -> bool:
        """Map a ``TABLE_MAP`` whose body was parsed before; False when it is new."""
        table = self._maps.get(data[20:end])
        if table is None:
            return False
        self.table_map[int.from_bytes(data[20:26], "little")] = table
        return True

    def _by_library(self, data: bytes, end: int) -> Any:
        """Let the library parse a new ``TABLE_MAP`` (and read on), then remember its parse."""
        self._stream_connection.pushed = _packet(self._stream_connection, data)
        body = data[20:end]
        event = self._library()
        table = self.table_map.get(int.from_bytes(body[:6], "little"))
        if table is not None:
            if len(self._maps) >= _MAP_CACHE_LIMIT:
                self._maps.clear()
            self._maps[body] = table
        return event

    def _post_header_is(self, kind: int, length: int) -> bool:
        lengths = self._BinLogStreamReader__post_header_lengths
        if not lengths or kind > len(lengths):
            return True  # the library assumes the known length too
        return bool(lengths[kind - 1] == length)


def _packet(connection: _Connection, data: bytes) -> Any:
    """The ``MysqlPacket`` PyMySQL's ``_read_packet`` would have returned for ``data``."""
    return pymysql.connections.MysqlPacket(data, connection.encoding)


# --- transaction boundaries ---------------------------------------------------------------------


def _mariadb_gtid(data: bytes) -> Any:
    """MariaDB's GTID event (type 162), as the library reads it: sequence number, domain,
    flags; ``gtid`` is ``domain-server-sequence``."""
    event = object.__new__(MariadbGtidEvent)
    sequence, domain, flags = _MARIADB_GTID.unpack_from(data, 20)
    event.server_id = server_id = _HEADER.unpack_from(data)[2]
    event.gtid_seq_no, event.domain_id, event.flags = sequence, domain, flags
    event.gtid = f"{domain}-{server_id}-{sequence}"
    return event


def _xid(data: bytes) -> Any:
    """The XID (commit) event (type 16): its transaction id."""
    event = object.__new__(XidEvent)
    event.xid = int.from_bytes(data[20:28], "little")
    return event


_MARIADB_GTID: Final = struct.Struct("<QIB")
_SMALL_EVENTS: Final[dict[int, tuple[type, Callable[[bytes], Any]]]] = {
    162: (MariadbGtidEvent, _mariadb_gtid),
    16: (XidEvent, _xid),
}
"""Events read here (one of each per transaction): event type -> (library class, reader)."""


# --- row events ---------------------------------------------------------------------------------


class _Images:
    """A row event decoded here: its row images as value lists in column order
    (:attr:`images`, what the agent reads), the library's ``rows`` dicts built only when read.

    ``images`` holds one ``(values, reasons)`` pair per image (an update's before and after
    images follow each other); ``reasons`` is None when no value is None, else the library's
    ``none_sources`` reason of each None by column index.
    """

    images: list[tuple[list[Any], dict[int, str] | None]]
    names: tuple[str, ...]

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The library's rows: ``values``/``none_sources`` dicts by column name."""
        rows: list[dict[str, Any]] | None = self._RowsEvent__rows  # type: ignore[has-type]
        if rows is None:
            rows = self._RowsEvent__rows = _library_rows(self.images, self.names, self.paired)
        return rows

    paired: bool = False


class _WriteRows(_Images, WriteRowsEvent):
    """An insert decoded here (:class:`_Images`)."""


class _UpdateRows(_Images, UpdateRowsEvent):
    """An update decoded here (:class:`_Images`): before and after images alternate."""

    paired = True


class _DeleteRows(_Images, DeleteRowsEvent):
    """A delete decoded here (:class:`_Images`)."""


_DECODED: Final[dict[type[RowsEvent], type[RowsEvent]]] = {
    WriteRowsEvent: _WriteRows,
    UpdateRowsEvent: _UpdateRows,
    DeleteRowsEvent: _DeleteRows,
}


def _library_rows(
    images: list[tuple[list[Any], dict[int, str] | None]], names: tuple[str, ...], paired: bool
) -> list[dict[str, Any]]:
    """Row images as mysql-replication's ``rows`` (dicts by column name)."""

    def as_dicts(
        values: list[Any], reasons: dict[int, str] | None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        none = {} if reasons is None else {names[i]: r for i, r in reasons.items()}
        return dict(zip(names, values, strict=True)), none

    if not paired:
        out = []
        for values, reasons in images:
            row, none = as_dicts(values, reasons)
            out.append({"values": row, "none_sources": none})
        return out
    rows = []
    for index in range(0, len(images), 2):
        before, before_none = as_dicts(*images[index])
        after, after_none = as_dicts(*images[index + 1])
        rows.append(
            {
                "before_values": before,
                "before_none_sources": before_none,
                "after_values": after,
                "after_none_sources": after_none,
            }
        )
    return rows


def _rows_event(
    cls: type[RowsEvent], table: Any, data: bytes, post_header: int, end: int, kind: int
) -> Any:
    """One of the library's row event classes (as :class:`_Images`), filled without its
    parser: what is the table's is a class attribute (:meth:`_Plan.event_class`)."""
    plan = _plan(table)
    event: Any = object.__new__(plan.event_class(cls, kind, table))
    pos = 20 + post_header
    if post_header == 10:  # v2: extra data, its length counting its own two bytes
        pos += int.from_bytes(data[28:30], "little") - 2
    event.images = plan.native.rows(data, pos, end, cls is UpdateRowsEvent)
    return event


def _python_images(
    table: Any, data: bytes, pos: int, end: int, paired: bool
) -> list[tuple[list[Any], dict[int, str] | None]]:
    """The row images of a row event's body from ``pos`` (its column count) to ``end``, read
    by the Python readers of :class:`_Plan` alone: what :mod:`capture.mysql._rowdecode` does in
    C, kept as the reference its tests compare it with."""
    count, pos = _length_coded(data, pos)
    width = (count + 7) >> 3
    present = int.from_bytes(data[pos : pos + width], "little")
    pos += width
    plan = _plan(table)
    if len(plan.readers) != count:
        raise CaptureError(
            f"binlog row event of {table.schema}.{table.table}: {count} columns, its table map "
            f"has {len(plan.readers)}"
        )
    images: list[tuple[list[Any], dict[int, str] | None]] = []
    image = plan.image
    after = present
    if paired:
        after = int.from_bytes(data[pos : pos + width], "little")
        pos += width
    while pos < end:
        start = pos
        values, none, pos = image(data, pos, present, table)
        images.append((values, none))
        if paired:
            values, none, pos = image(data, pos, after, table)
            images.append((values, none))
        if pos == start:
            # Images of no columns take no bytes: bytes left after them would loop forever.
            raise CaptureError(
                f"binlog row event of {table.schema}.{table.table}: row images of no columns "
                f"before more bytes at byte {pos}, its rows end at byte {end}"
            )
    if pos != end:
        raise CaptureError(
            f"binlog row event of {table.schema}.{table.table}: its rows end at byte {pos}, "
            f"the event at {end}"
        )
    return images


class _Plan:
    """How the row images of one parsed table map are read.

    A full image (every column present, as ``binlog_row_image=FULL`` writes them) is read by
    the shape of its NULL bitmap, worked out once per bitmap: each run of non-NULL fixed-width
    numeric columns with one ``struct`` unpack, every other column with its reader. Any other
    image (columns left out of a MINIMAL image), or a table with more NULL patterns than
    :data:`_SHAPES_LIMIT`, is read column by column.

    The agent reads images with :attr:`native`, the C decoder of the same plan (what it reads
    itself, what it hands to the readers here: :func:`_native_column`); :meth:`image` is the
    Python reference its tests compare it with.
    """

    __slots__ = (
        "all_present",
        "classes",
        "library",
        "names",
        "native",
        "readers",
        "shapes",
        "width",
    )

    def __init__(self, table: Any) -> None:
        columns = table.columns
        self.names = tuple((c.name or f"UNKNOWN_COL{i}") for i, c in enumerate(columns))
        self.readers = [_column_reader(table, c, i) for i, c in enumerate(columns)]
        specs = tuple(
            _native_column(c, read, name)
            for c, read, name in zip(columns, self.readers, self.names, strict=True)
        )
        self.native = _rowdecode.Decoder(
            specs,
            self.names,
            f"{table.schema}.{table.table}",
            str(NONE_SOURCE.NULL),
            str(NONE_SOURCE.COLS_BITMAP),
            CaptureError,
        )
        by_python = [n for n, spec in zip(self.names, specs, strict=True) if spec[0] == _CALL]
        if by_python:
            logger.debug(
                "binlog table %s.%s: columns read by mysql-replication's readers (types the C "
                "decoder does not read): %s",
                table.schema,
                table.table,
                ", ".join(by_python),
            )
        self.all_present = (1 << len(columns)) - 1
        self.width = (len(columns) + 7) >> 3
        self.library = tuple(
            i for i, read in enumerate(self.readers) if isinstance(read, _LibraryReader)
        )
        self.shapes: dict[int, tuple[list[_Run], dict[int, str] | None]] = {}
        self._shape(table, 0)
        self.classes: dict[int, type] = {}

    def event_class(self, cls: type[RowsEvent], kind: int, table: Any) -> type:
        """The class of this table's row events of type ``kind`` (the library's ``cls``): a
        subclass of :class:`_Images` holding what every event of the table has alike (the
        library's attributes, set per event before), so an event only gets its own."""
        made = self.classes.get(kind)
        if made is None:
            base = _DECODED[cls]
            made = type(
                base.__name__,
                (base,),
                {
                    "__module__": __name__,
                    "event_type": kind,
                    "table_id": table.table_id,
                    "schema": table.schema,
                    "table": table.table,
                    "primary_key": table.primary_key,
                    "columns": table.columns,
                    "table_map": MappingProxyType({table.table_id: table}),
                    "complete": True,
                    "_processed": True,
                    "_RowsEvent__rows": None,
                    "names": self.names,
                },
            )
            self.classes[kind] = made
        return made

    def _shape(self, table: Any, nulls: int) -> tuple[list[_Run], dict[int, str] | None] | None:
        """The runs that read a full image with NULL bitmap ``nulls``, and its reasons."""
        if len(self.shapes) >= _SHAPES_LIMIT:
            return None
        runs: list[_Run] = []
        formats = ""
        for index, (column, read) in enumerate(zip(table.columns, self.readers, strict=True)):
            code = None if (nulls >> index) & 1 else _struct_code(column)
            if code is not None:
                formats += code
                continue
            if formats:
                shape = struct.Struct("<" + formats)
                runs.append((shape.unpack_from, shape.size, None))
                formats = ""
            runs.append((None, 0, _null if (nulls >> index) & 1 else read))
        if formats:
            shape = struct.Struct("<" + formats)
            runs.append((shape.unpack_from, shape.size, None))
        reasons = {i: NONE_SOURCE.NULL for i in range(len(self.readers)) if (nulls >> i) & 1}
        self.shapes[nulls] = (runs, reasons or None)
        return self.shapes[nulls]

    def image(
        self, data: bytes, pos: int, present: int, table: Any
    ) -> tuple[list[Any], dict[int, str] | None, int]:
        """One row image: values in column order, the reasons of its Nones (shared between
        images of one shape: read, never changed), the offset after it."""
        everything = self.all_present
        if present == everything:
            width = self.width
            # The server leaves the bitmap's unused high bits set: only the columns' bits count.
            nulls = int.from_bytes(data[pos : pos + width], "little") & everything
            shape = self.shapes.get(nulls) or self._shape(table, nulls)
            if shape is not None:
                runs, reasons = shape
                pos += width
                values: list[Any] = []
                for unpack, size, read in runs:
                    if read is None:
                        values.extend(unpack(data, pos))
                        pos += size
                    else:
                        value, pos = read(data, pos)
                        values.append(value)
                if self.library and None in values:
                    return values, self._reasons(values, reasons), pos
                return values, reasons, pos
        return self._by_column(data, pos, present)

    def _by_column(
        self, data: bytes, pos: int, present: int
    ) -> tuple[list[Any], dict[int, str] | None, int]:
        width = (present.bit_count() + 7) >> 3
        nulls = int.from_bytes(data[pos : pos + width], "little")
        pos += width
        values: list[Any] = []
        reasons: dict[int, str] = {}
        bit = 0
        for index, read in enumerate(self.readers):
            if not (present >> index) & 1:
                values.append(None)
                reasons[index] = NONE_SOURCE.COLS_BITMAP
                continue
            if (nulls >> bit) & 1:
                values.append(None)
                reasons[index] = NONE_SOURCE.NULL
            else:
                value, pos = read(data, pos)
                values.append(value)
                if value is None:
                    reasons[index] = _library_reason(read, self.names[index])
            bit += 1
        return values, reasons or None, pos

    def _reasons(self, values: list[Any], nulls: dict[int, str] | None) -> dict[int, str] | None:
        reasons = dict(nulls or {})
        for i in self.library:
            if values[i] is None and i not in reasons:
                reasons[i] = _library_reason(self.readers[i], self.names[i])
        return reasons or None


_Run = tuple[Any, int, "Reader | None"]
"""One step of a :class:`_Plan` shape: (a struct's ``unpack_from``, its size, None) for a run
of fixed-width columns, (None, 0, reader) for one column."""
_SHAPES_LIMIT: Final = 64
"""NULL patterns read by shape per table map; beyond them, column by column."""


def _null(data: bytes, pos: int) -> tuple[Any, int]:
    """A NULL column of a shape: no bytes in the image."""
    return None, pos


def _cached_plan(table: Any) -> _Plan | None:
    """The table's :class:`_Plan` if one was built."""
    plan: _Plan | None = table.__dict__.get("_medallion_plan")
    return plan


def _plan(table: Any) -> _Plan:
    """The table's :class:`_Plan`, built once per parsed table map."""
    plan: _Plan | None = table.__dict__.get("_medallion_plan")
    if plan is None:
        plan = _Plan(table)
        table.__dict__["_medallion_plan"] = plan  # "_": not part of Table.data
    return plan


def _length_coded(data: bytes, pos: int) -> tuple[int, int]:
    first = data[pos]
    if first < 251:
        return first, pos + 1
    size = {252: 2, 253: 3, 254: 8}[first]
    return int.from_bytes(data[pos + 1 : pos + 1 + size], "little"), pos + 1 + size


# --- column readers -----------------------------------------------------------------------------


def _column_reader(table: Any, column: Any, index: int) -> Reader:
    """How one column's non-NULL value is read: inline for the common types, else the
    library's reader."""
    kind = column.type
    unsigned = bool(column.unsigned)
    if kind in _INTEGERS:
        fmt = _INTEGERS[kind]
        return _fixed(struct.Struct("<" + (fmt.upper() if unsigned else fmt)))
    if kind in _FLOATS:
        return _fixed(struct.Struct("<" + _FLOATS[kind]))
    if kind == FIELD_TYPE.INT24:
        return _int24(not unsigned)
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
        return _text(2 if column.max_length > 255 else 1, _decode(column))
    if kind == FIELD_TYPE.BLOB:
        return _text(int(column.length_size), _decode(column))
    if kind == FIELD_TYPE.DATETIME2:
        return _datetime2(int(column.fsp or 0))
    if kind == FIELD_TYPE.TIMESTAMP2:
        return _timestamp2(int(column.fsp or 0))
    if kind == FIELD_TYPE.DATE:
        return _date
    return _LibraryReader(table, column, index)


_INTEGERS: Final = {
    FIELD_TYPE.TINY: "b",
    FIELD_TYPE.SHORT: "h",
    FIELD_TYPE.LONG: "i",
    FIELD_TYPE.LONGLONG: "q",
}
"""Little-endian integer columns: their struct format (upper case when UNSIGNED)."""
_FLOATS: Final = {FIELD_TYPE.FLOAT: "f", FIELD_TYPE.DOUBLE: "d"}


def _struct_code(column: Any) -> str | None:
    """The ``struct`` code of a fixed-width numeric column (what :func:`_column_reader` reads
    with ``_fixed``), None for every other column."""
    kind = column.type
    if kind in _INTEGERS:
        code = _INTEGERS[kind]
        return code.upper() if column.unsigned else code
    return _FLOATS.get(kind)


_CALL: Final = _rowdecode.CALL
_NATIVE_INTEGERS: Final = {
    FIELD_TYPE.TINY: 1,
    FIELD_TYPE.SHORT: 2,
    FIELD_TYPE.INT24: 3,
    FIELD_TYPE.LONG: 4,
    FIELD_TYPE.LONGLONG: 8,
}
_NATIVE_TEMPORAL: Final = {
    FIELD_TYPE.DATETIME2: _rowdecode.DATETIME2,
    FIELD_TYPE.TIMESTAMP2: _rowdecode.TIMESTAMP2,
}


def _native_column(column: Any, read: Reader, name: str) -> tuple[int, int, Any, Reader, Any]:
    """One column's spec for :class:`capture.mysql._rowdecode.Decoder`: (kind, size, encoding,
    its Python reader, the reason of a None that reader returns). The C decoder reads what
    :func:`_column_reader` reads inline, the same way, and calls ``read`` for everything else
    (and for the values it leaves to the Python reader: zero dates, negative timestamps)."""
    kind = column.type
    if isinstance(read, _LibraryReader):
        return (_CALL, 0, None, read, functools.partial(read.reason, name))
    if kind in _NATIVE_INTEGERS:
        native = _rowdecode.UINT if column.unsigned else _rowdecode.INT
        return (native, _NATIVE_INTEGERS[kind], None, read, None)
    if kind in _FLOATS:
        return (_rowdecode.FLOAT, 4 if kind == FIELD_TYPE.FLOAT else 8, None, read, None)
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        if kind == FIELD_TYPE.BLOB:
            size = int(column.length_size)
        else:
            size = 2 if column.max_length > 255 else 1
        encoding = _encoding(column)
        if encoding is None:
            return (_rowdecode.BYTES, size, None, read, None)
        return (_rowdecode.TEXT, size, encoding, read, None)
    if kind in _NATIVE_TEMPORAL:
        return (_NATIVE_TEMPORAL[kind], int(column.fsp or 0), None, read, None)
    if kind == FIELD_TYPE.DATE:
        return (_rowdecode.DATE, 0, None, read, None)
    return (_CALL, 0, None, read, None)


def _fixed(shape: struct.Struct) -> Reader:
    unpack, size = shape.unpack_from, shape.size

    def read(data: bytes, pos: int) -> tuple[Any, int]:
        return unpack(data, pos)[0], pos + size

    return read


def _int24(signed: bool) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        return int.from_bytes(data[pos : pos + 3], "little", signed=signed), pos + 3

    return read


def _encoding(column: Any) -> str | None:
    """The library's codec for a string column: its charset's, UTF-8 without charset metadata,
    None when Python has no such codec (binary, ucs2: the bytes are kept)."""
    name = column.character_set_name
    if name is None:
        return "utf-8"  # bytes.decode()'s default
    encoding = str(RowsEvent.charset_to_encoding(name))
    try:
        codecs.lookup(encoding)
    except LookupError:
        return None
    return encoding


def _decode(column: Any) -> Callable[[bytes], Any]:
    """The library's string decoding of a column (:func:`_encoding`, strict)."""
    encoding = _encoding(column)
    if encoding is None:
        # CPython decodes b"" to "" without looking the codec up: the library's empty value
        return lambda raw: raw if raw else ""
    return lambda raw: raw.decode(encoding)


def _text(length_size: int, decode: Callable[[bytes], Any]) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        start = pos + length_size
        stop = start + int.from_bytes(data[pos:start], "little")
        return decode(data[start:stop]), stop

    return read


_FSP_BYTES: Final = (0, 1, 1, 2, 2, 3, 3)


def _fraction(data: bytes, pos: int, fsp: int) -> tuple[int, int]:
    """The library's ``__read_fsp``: microseconds from 0-3 signed big-endian bytes."""
    size = _FSP_BYTES[fsp]
    if not size:
        return 0, pos
    value = int.from_bytes(data[pos : pos + size], "big", signed=True)
    if fsp % 2:
        value = int(value / 10)
    return value * 10 ** (6 - fsp), pos + size


def _datetime2(fsp: int) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        packed = int.from_bytes(data[pos : pos + 5], "big")
        micros, pos = _fraction(data, pos + 5, fsp)
        return binlog_datetime2(packed, micros, fsp), pos

    return read


def _timestamp2(fsp: int) -> Reader:
    def read(data: bytes, pos: int) -> tuple[Any, int]:
        seconds = int.from_bytes(data[pos : pos + 4], "big", signed=True)
        micros, pos = _fraction(data, pos + 4, fsp)
        value = _EPOCH + dt.timedelta(seconds=seconds)
        return (value.replace(microsecond=micros) if micros > 0 else value), pos

    return read


def _date(data: bytes, pos: int) -> tuple[Any, int]:
    return binlog_date(int.from_bytes(data[pos : pos + 3], "little")), pos + 3


class _Slice:
    """The byte source under the library's packet wrapper (``read``/``advance`` only)."""

    __slots__ = ("data", "pos")

    def __init__(self) -> None:
        self.data = b""
        self.pos = 0

    def read(self, size: int) -> bytes:
        start = self.pos
        self.pos = start + size
        return self.data[start : self.pos]

    def advance(self, size: int) -> None:
        self.pos += size


class _LibraryReader:
    """The library's own reader of one column (``RowsEvent.__read_values_name``), run on a
    wrapper over the event's bytes; for every type not read inline."""

    def __init__(self, table: Any, column: Any, index: int) -> None:
        self.column = column
        self.index = index
        self.source = _Slice()
        wrapper = BinLogPacketWrapper.__new__(BinLogPacketWrapper)
        wrapper.packet = self.source
        wrapper.read_bytes = 0
        wrapper._BinLogPacketWrapper__data_buffer = b""
        self.wrapper = wrapper
        event = RowsEvent.__new__(RowsEvent)
        event.packet = wrapper
        event.table_map = {table.table_id: table}
        event.table_id = table.table_id
        event.columns = table.columns
        event.event_type = 0
        event._ignore_decode_errors = False
        event._RowsEvent__none_sources = {}
        self.event = event
        self.present = b"\xff" * ((index >> 3) + 1)

    def __call__(self, data: bytes, pos: int) -> tuple[Any, int]:
        source, wrapper = self.source, self.wrapper
        source.data, source.pos = data, pos
        wrapper._BinLogPacketWrapper__data_buffer = b""
        self.event._RowsEvent__none_sources = {}
        value = self.event._RowsEvent__read_values_name(
            self.column, b"\x00", 0, False, self.present, self.column.unsigned, self.index
        )
        if wrapper._BinLogPacketWrapper__data_buffer:
            raise CaptureError(f"binlog column {self.column.name}: bytes left unread")
        return value, source.pos

    def reason(self, name: str) -> str:
        return str(self.event._RowsEvent__none_sources.get(name, NONE_SOURCE.NULL))


def _library_reason(read: Reader, name: str) -> str:
    """Why a reader returned None for a non-NULL value (only the library's readers do)."""
    if isinstance(read, _LibraryReader):
        return read.reason(name)
    return str(NONE_SOURCE.NULL)
