"""``COPY ... TO STDOUT`` in text format, received and split into Arrow string columns.

The snapshot reads each chunk with one ``COPY``. psycopg hands its data over one ``CopyData``
message (one row) per call, a Python ``bytes`` each, which cost more than everything else the
snapshot did per row. Here the whole ``COPY`` is received in C (:mod:`capture.postgresql._pgcopy`)
through the libpq psycopg itself loaded, with the GIL released, and each message is split as it
comes into the three buffers of an Arrow string array per column (validity, offsets, UTF-8 data):
no Python object per row or per value. The values are the text each type's output function
writes (what pgoutput sends), NULL as null, so the per-column encoders of the snapshot take them
unchanged.

:func:`split_text_copy` is the Python reference of the C splitter (the tests compare the two, and
with psycopg's own row parser). When the libpq psycopg uses cannot be bound (psycopg's pure-Python
build, or no single ``libpq`` mapped in the process), the rows are received through psycopg one
by one and split by the same C code; that is logged once, at WARNING.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Final

import psycopg
import pyarrow as pa
from psycopg import sql

from capture.postgresql import _pgcopy
from capture.postgresql._pgcopy import CopyDataError, CopyReceiveError, TextCopySplitter
from pipeline.errors import CaptureError

__all__ = ["CopyDataError", "libpq_bound", "receive_text_copy", "split_text_copy"]

logger = logging.getLogger(__name__)

_NAMES_CACHE: dict[int, list[str]] = {}
_BIND_LOCK = threading.Lock()
_bound: bool | None = None


def libpq_bound() -> bool:
    """Whether ``COPY`` data is received in C through psycopg's libpq (bound on first use)."""
    global _bound
    with _BIND_LOCK:
        if _bound is None:
            _bound = _bind()
        return _bound


def _bind() -> bool:
    path, why = _libpq_path()
    if path is not None:
        try:
            version = _pgcopy.bind_libpq(path)
        except OSError as exc:
            why = str(exc)
        else:
            if version == psycopg.pq.version():
                logger.info("COPY received in C through %s (libpq %d)", path, version)
                return True
            why = f"{path} is libpq {version}, psycopg reports {psycopg.pq.version()}"
    logger.warning(
        "COPY received row by row through psycopg (slower): the libpq psycopg uses cannot be "
        "bound (%s)",
        why,
    )
    return False


def _libpq_path() -> tuple[str | None, str]:
    """The one libpq mapped in this process (psycopg's: the binary wheel ships its own), or
    None and why not."""
    if psycopg.pq.__impl__ == "python":
        return None, "psycopg's pure-Python build"
    paths: set[str] = set()
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                fields = line.split(None, 5)
                if len(fields) == 6:
                    base = os.path.basename(fields[5].strip())
                    if base.startswith(("libpq.so", "libpq-")) and ".so" in base:
                        paths.add(fields[5].strip())
    except OSError as exc:
        return None, f"/proc/self/maps unreadable: {exc}"
    if len(paths) != 1:
        return None, f"{len(paths)} libpq libraries mapped: {sorted(paths)}"
    return paths.pop(), ""


def receive_text_copy(
    cur: psycopg.Cursor[Any], query: sql.Composable, width: int, *, table: str
) -> pa.Table:
    """The rows of ``query`` (``width`` columns) through ``COPY (query) TO STDOUT``: string
    columns ``c0``... of the text each type's output function writes, NULL as null.

    Args:
        cur: A cursor of a UTF-8 connection (the values are taken as UTF-8).
        query: The ``SELECT``.
        width: Its number of columns.
        table: What is read, for errors (``schema.table``).

    Raises:
        CaptureError: The data is not well-formed text ``COPY`` (names the table, the row of
            the chunk and the column).
        psycopg.Error: The ``COPY`` failed (the server's error class, by SQLSTATE).
    """
    splitter = TextCopySplitter(width)
    statement = sql.SQL("COPY ({}) TO STDOUT").format(query)
    try:
        with cur.copy(statement) as copy:
            # Documented on psycopg's PGconn implementations, absent from its typing protocol.
            pgconn = getattr(cur.connection.pgconn, "pgconn_ptr", None)
            if pgconn is not None and libpq_bound():
                splitter.drain(pgconn)
            else:
                for block in copy:
                    splitter.feed(block)
        buffers = splitter.finish()
    except CopyReceiveError as exc:
        message, sqlstate = exc.args
        raise _psycopg_error(str(message).strip(), sqlstate) from None
    except CopyDataError as exc:
        reason, row, column = exc.args
        where = "at its end" if column is None else f"column {column}"
        raise CaptureError(
            f"COPY of {table}: malformed text COPY data in row {row + 1} of the chunk, "
            f"{where}: {reason}"
        ) from exc
    rows = splitter.rows
    arrays = [
        pa.Array.from_buffers(
            pa.string(), rows, [pa.py_buffer(valid), pa.py_buffer(offsets), pa.py_buffer(data)]
        )
        for valid, offsets, data in buffers
    ]
    return pa.Table.from_arrays(arrays, names=_names(width))


def _names(width: int) -> list[str]:
    names = _NAMES_CACHE.get(width)
    if names is None:
        names = _NAMES_CACHE[width] = [f"c{i}" for i in range(width)]
    return names


def _psycopg_error(message: str, sqlstate: str | None) -> psycopg.Error:
    """The exception psycopg raises for a failed command of this SQLSTATE."""
    if sqlstate is None:
        return psycopg.OperationalError(message)
    try:
        cls = psycopg.errors.lookup(sqlstate)
    except KeyError:
        cls = psycopg.DatabaseError
    return cls(message)


_SIMPLE: Final = {
    ord("b"): 0x08,
    ord("f"): 0x0C,
    ord("n"): 0x0A,
    ord("r"): 0x0D,
    ord("t"): 0x09,
    ord("v"): 0x0B,
}
_TAB, _NEWLINE, _BACKSLASH = 0x09, 0x0A, 0x5C
_ENDS_INSIDE = "the data ends inside a row"


def split_text_copy(data: bytes, width: int) -> list[list[str | None]]:
    """Text ``COPY`` data as columns of values: the reference of the C splitter.

    The escapes are read as PostgreSQL's ``COPY FROM`` reads them: ``\\b \\f \\n \\r \\t \\v
    \\\\``, ``\\NNN`` (1 to 3 octal digits, the low byte kept), ``\\xH``/``\\xHH`` (``\\x`` with
    no hex digit is ``x``), any other backslashed byte stands for itself; a field whose raw text
    is exactly ``\\N`` is NULL. Errors where ``COPY FROM`` is lenient (``COPY TO`` never writes
    them): ``\\.`` anywhere, a value that is not UTF-8, a NUL byte made by an escape.

    Args:
        data: Whole rows, each ended by a newline.
        width: Fields per row.

    Raises:
        CopyDataError: ``(reason, row, column)``; column None when the data ends inside a row.
    """
    columns: list[list[str | None]] = [[] for _ in range(width)]
    n, i, row = len(data), 0, 0
    while i < n:
        column = 0
        while True:
            value: str | None
            if data[i : i + 3] in (b"\\N\t", b"\\N\n"):
                value, i = None, i + 2
            else:
                value, i = _field(data, i, row, column)
            if i == n:
                raise CopyDataError(_ENDS_INSIDE, row, None)
            columns[column].append(value)
            if data[i] == _TAB:
                if column + 1 >= width:
                    raise CopyDataError("more fields than columns", row, column)
                column, i = column + 1, i + 1
                continue
            if column + 1 != width:
                raise CopyDataError("fewer fields than columns", row, column)
            i += 1
            row += 1
            break
    return columns


def _field(data: bytes, i: int, row: int, column: int) -> tuple[str, int]:
    """The value of the field at ``data[i]`` and the index of the tab or newline ending it."""
    n, out, numeric = len(data), bytearray(), False
    while True:
        if i == n:
            raise CopyDataError(_ENDS_INSIDE, row, None)
        b = data[i]
        if b in (_TAB, _NEWLINE):
            break
        if b != _BACKSLASH:
            out.append(b)
            i += 1
            continue
        if i + 1 == n:
            raise CopyDataError(_ENDS_INSIDE, row, None)
        e, i = data[i + 1], i + 2
        if e in _SIMPLE:
            out.append(_SIMPLE[e])
        elif e == ord("."):
            raise CopyDataError("the end-of-copy marker \\. inside the data", row, column)
        elif ord("0") <= e <= ord("7"):
            value = e - ord("0")
            for _ in range(2):
                if i == n:
                    raise CopyDataError(_ENDS_INSIDE, row, None)
                if not ord("0") <= data[i] <= ord("7"):
                    break
                value, i = value * 8 + data[i] - ord("0"), i + 1
            out.append(value & 0xFF)
            numeric = True
        elif e == ord("x"):
            byte, i = _hex_escape(data, i, row)
            if byte is None:
                out.append(e)
            else:
                out.append(byte)
                numeric = True
        else:
            out.append(e)
    try:
        text = out.decode("utf-8")
    except UnicodeDecodeError:
        raise CopyDataError("the value is not valid UTF-8", row, column) from None
    if numeric and "\0" in text:
        raise CopyDataError("the value is not valid UTF-8", row, column)
    return text, i


def _hex_escape(data: bytes, i: int, row: int) -> tuple[int | None, int]:
    """The byte of ``\\xH``/``\\xHH`` whose digits start at ``data[i]`` (None: no hex digit)."""
    n = len(data)
    if i == n:
        raise CopyDataError(_ENDS_INSIDE, row, None)
    digit = _hex_digit(data[i])
    if digit is None:
        return None, i
    value, i = digit, i + 1
    if i == n:
        raise CopyDataError(_ENDS_INSIDE, row, None)
    second = _hex_digit(data[i])
    if second is not None:
        value, i = value * 16 + second, i + 1
    return value, i


def _hex_digit(b: int) -> int | None:
    char = chr(b)
    return int(char, 16) if char in "0123456789abcdefABCDEF" else None
