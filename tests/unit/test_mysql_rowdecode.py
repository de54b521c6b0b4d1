"""The C row-image decoder (capture.mysql._rowdecode) against the Python readers of binlog.py.

Row event bodies are generated for random tables of every column type the C decoder reads
(and some it hands to mysql-replication's readers: YEAR, DECIMAL, ENUM), full and MINIMAL
images, NULLs, updates, the unused high bits of the bitmaps set, zero and invalid dates, random
bytes where values go; then truncated and corrupted. Whatever the Python decoder returns the C
decoder must return (same values, same None reasons); where the Python decoder fails, the C
decoder must fail too, with a Python exception (never a crash), the agent's ``CaptureError``
naming the table for bytes that do not frame.
"""

from __future__ import annotations

import datetime as dt
import math
import struct
import sysconfig
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pymysqlreplication.column import Column
from pymysqlreplication.constants import FIELD_TYPE

from capture.mysql import _rowdecode
from capture.mysql.binlog import _null, _plan, _python_images
from pipeline.errors import CaptureError

pytestmark = pytest.mark.unit

_INTEGER_SIZES = {
    FIELD_TYPE.TINY: 1,
    FIELD_TYPE.SHORT: 2,
    FIELD_TYPE.INT24: 3,
    FIELD_TYPE.LONG: 4,
    FIELD_TYPE.LONGLONG: 8,
}
_FSP_BYTES = (0, 1, 1, 2, 2, 3, 3)


def _column(kind: int, index: int, **attrs: Any) -> Any:
    column = Column.__new__(Column)
    column.type = kind
    column.name = f"c{index}"
    column.unsigned = False
    column.character_set_name = None
    column.enum_values = None
    column.set_values = None
    for key, value in attrs.items():
        setattr(column, key, value)
    return column


@st.composite
def _columns(draw: st.DrawFn) -> list[Any]:
    count = draw(st.integers(1, 12))
    columns = []
    for index in range(count):
        which = draw(st.sampled_from(_KINDS))
        if which in _INTEGER_SIZES:
            columns.append(_column(which, index, unsigned=draw(st.booleans())))
        elif which in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING):
            columns.append(
                _column(
                    which,
                    index,
                    max_length=draw(st.sampled_from((10, 255, 256, 1000))),
                    character_set_name=draw(_CHARSETS),
                )
            )
        elif which == FIELD_TYPE.BLOB:
            columns.append(
                _column(
                    which,
                    index,
                    length_size=draw(st.integers(1, 4)),
                    character_set_name=draw(_CHARSETS),
                )
            )
        elif which in (FIELD_TYPE.DATETIME2, FIELD_TYPE.TIMESTAMP2):
            columns.append(_column(which, index, fsp=draw(st.integers(0, 6))))
        elif which == FIELD_TYPE.NEWDECIMAL:
            precision = draw(st.integers(1, 20))
            columns.append(
                _column(which, index, precision=precision, decimals=draw(st.integers(0, precision)))
            )
        elif which == FIELD_TYPE.ENUM:
            values = draw(st.sampled_from((None, ["a", "b", "c"])))
            columns.append(_column(which, index, size=1, enum_values=values))
        else:
            columns.append(_column(which, index))
    return columns


_KINDS = (
    *_INTEGER_SIZES,
    FIELD_TYPE.FLOAT,
    FIELD_TYPE.DOUBLE,
    FIELD_TYPE.VARCHAR,
    FIELD_TYPE.STRING,
    FIELD_TYPE.BLOB,
    FIELD_TYPE.DATETIME2,
    FIELD_TYPE.TIMESTAMP2,
    FIELD_TYPE.DATE,
    FIELD_TYPE.YEAR,
    FIELD_TYPE.NEWDECIMAL,
    FIELD_TYPE.ENUM,
)
_CHARSETS = st.sampled_from((None, "utf8mb4", "latin1", "binary", "ucs2", "ascii"))


def _datetime2(when: dt.datetime, fsp: int) -> bytes:
    year_month = when.year * 13 + when.month
    packed = (
        (1 << 39)
        | year_month << 22
        | when.day << 17
        | when.hour << 12
        | when.minute << 6
        | when.second
    )
    return packed.to_bytes(5, "big") + _fraction(when.microsecond, fsp)


def _fraction(micros: int, fsp: int) -> bytes:
    size = _FSP_BYTES[fsp]
    if not size:
        return b""
    value = micros // 10 ** (6 - fsp)
    if fsp % 2:
        value *= 10
    return value.to_bytes(size, "big", signed=True)


@st.composite
def _value(draw: st.DrawFn, column: Any) -> bytes:
    """One non-NULL value's bytes: a well-formed encoding, or (for some types) random bytes."""
    kind = column.type
    if kind in _INTEGER_SIZES:
        return draw(st.binary(min_size=_INTEGER_SIZES[kind], max_size=_INTEGER_SIZES[kind]))
    if kind == FIELD_TYPE.FLOAT:
        return draw(st.binary(min_size=4, max_size=4))
    if kind == FIELD_TYPE.DOUBLE:
        return draw(st.binary(min_size=8, max_size=8))
    if kind in (FIELD_TYPE.VARCHAR, FIELD_TYPE.STRING, FIELD_TYPE.BLOB):
        if kind == FIELD_TYPE.BLOB:
            size = column.length_size
        else:
            size = 2 if column.max_length > 255 else 1
        if draw(st.booleans()):
            raw = draw(st.text(max_size=20)).encode("utf-8")
        else:
            raw = draw(st.binary(max_size=20))
        return len(raw).to_bytes(size, "little") + raw
    if kind == FIELD_TYPE.DATETIME2:
        if draw(st.booleans()):
            return _datetime2(draw(st.datetimes()), column.fsp)
        return draw(
            st.binary(min_size=5 + _FSP_BYTES[column.fsp], max_size=5 + _FSP_BYTES[column.fsp])
        )
    if kind == FIELD_TYPE.TIMESTAMP2:
        seconds = draw(st.integers(-(2**31), 2**31 - 1))
        micros = draw(st.integers(0, 999_999))
        return seconds.to_bytes(4, "big", signed=True) + _fraction(micros, column.fsp)
    if kind == FIELD_TYPE.DATE:
        if draw(st.booleans()):
            day = draw(st.dates())
            return (day.year << 9 | day.month << 5 | day.day).to_bytes(3, "little")
        return draw(st.binary(min_size=3, max_size=3))
    if kind == FIELD_TYPE.YEAR:
        return draw(st.binary(min_size=1, max_size=1))
    if kind == FIELD_TYPE.ENUM:
        return bytes([draw(st.integers(0, 3))])
    if kind == FIELD_TYPE.NEWDECIMAL:
        # The library's decimal layout is long; random bytes of its likely size exercise the
        # handing over (its value or its error is the library's in both decoders).
        return draw(st.binary(min_size=1, max_size=10))
    raise AssertionError(kind)


def _bitmap(bits: list[bool], stray: bool) -> bytes:
    width = (len(bits) + 7) >> 3
    value = sum(1 << i for i, b in enumerate(bits) if b)
    if stray:
        value |= ((1 << (8 * width)) - 1) ^ ((1 << len(bits)) - 1)
    return value.to_bytes(width, "little")


@st.composite
def _image(draw: st.DrawFn, columns: list[Any], present: list[bool], stray: bool) -> bytes:
    shown = [c for c, p in zip(columns, present, strict=True) if p]
    nulls = [draw(st.integers(0, 4)) == 0 for _ in shown]
    body = _bitmap(nulls, stray) if shown else b""
    for column, null in zip(shown, nulls, strict=True):
        if not null:
            body += draw(_value(column))
    return body


@st.composite
def _event(draw: st.DrawFn) -> tuple[Any, bytes, int, int, bool]:
    """A table, a row event's bytes, the offset of its column count, its rows' end, paired."""
    columns = draw(_columns())
    n = len(columns)
    paired = draw(st.booleans())
    full = [True] * n
    present = full if draw(st.booleans()) else [draw(st.booleans()) for _ in range(n)]
    after = full if draw(st.booleans()) else [draw(st.booleans()) for _ in range(n)]
    stray = draw(st.booleans())
    body = bytes([n]) + _bitmap(present, stray and draw(st.booleans()))
    if paired:
        body += _bitmap(after, stray and draw(st.booleans()))
    for _ in range(draw(st.integers(1, 4))):
        body += draw(_image(columns, present, stray))
        if paired:
            body += draw(_image(columns, after, stray))
    prefix = draw(st.binary(max_size=3))
    checksum = draw(st.binary(min_size=4, max_size=4))
    data = prefix + body + checksum
    table = SimpleNamespace(
        schema="db", table="t", table_id=draw(st.integers(1, 2**40)), columns=columns
    )
    return table, data, len(prefix), len(prefix) + len(body), paired


def _same(left: Any, right: Any) -> bool:
    if isinstance(left, float) and isinstance(right, float):
        return struct.pack("<d", left) == struct.pack("<d", right) or (
            math.isnan(left) and math.isnan(right)
        )
    if isinstance(left, list | tuple) and isinstance(right, list | tuple):
        return len(left) == len(right) and all(
            _same(a, b) for a, b in zip(left, right, strict=True)
        )
    return type(left) is type(right) and left == right


def _outcome(decode: Any) -> tuple[str, Any]:
    try:
        return "ok", decode()
    except Exception as error:  # the Python decoder's errors are whatever its readers raise
        return "error", error


def _compare(table: Any, data: bytes, pos: int, end: int, paired: bool) -> None:
    plan = _plan(table)
    expected = _outcome(lambda: _python_images(table, data, pos, end, paired))
    got = _outcome(lambda: plan.native.rows(data, pos, end, paired))
    if expected[0] == "ok":
        assert got[0] == "ok", f"the C decoder failed where Python did not: {got[1]!r}"
        assert _same(got[1], expected[1]), (got[1], expected[1])
    else:
        assert got[0] == "error", f"the C decoder read {got[1]!r}; Python: {expected[1]!r}"
        if isinstance(got[1], CaptureError):
            assert "db.t" in str(got[1])


@settings(max_examples=80)
@given(_event())
def test_same_images_as_the_python_decoder(event: tuple[Any, bytes, int, int, bool]) -> None:
    _compare(*event)


@settings(max_examples=40)
@given(_event(), st.data())
def test_truncated_and_corrupted_events(
    event: tuple[Any, bytes, int, int, bool], data: st.DataObject
) -> None:
    table, raw, pos, end, paired = event
    # truncated: the rows end early (a short event), or the column count is wrong
    cut = data.draw(st.integers(pos, end))
    _compare(table, raw, pos, cut, paired)
    # corrupted: bytes flipped anywhere in the rows
    flips = data.draw(
        st.lists(st.tuples(st.integers(pos, end - 1), st.integers(1, 255)), max_size=4)
    )
    mutable = bytearray(raw)
    for at, mask in flips:
        mutable[at] ^= mask
    _compare(table, bytes(mutable), pos, end, paired)


def test_the_module_is_the_compiled_extension() -> None:
    """The decoder is C, built by the bootstrap; not a Python stand-in."""
    assert _rowdecode.__file__ is not None
    assert _rowdecode.__file__.endswith(sysconfig.get_config_var("EXT_SUFFIX"))
    assert type(_rowdecode.Decoder.rows).__name__ == "method_descriptor"


def test_a_decoder_without_its_columns_refuses_to_decode() -> None:
    empty = _rowdecode.Decoder.__new__(_rowdecode.Decoder)
    with pytest.raises(TypeError, match="__init__ was not called"):
        empty.rows(b"\x00", 0, 1, False)
    with pytest.raises(ValueError, match="kind 9 with size 0 is not supported"):
        _rowdecode.Decoder(((9, 0, None, _null, None),), ("c",), "db.t", "null", "x", CaptureError)


def test_malformed_events_name_the_table_and_the_offset() -> None:
    columns = [_column(FIELD_TYPE.LONG, 0), _column(FIELD_TYPE.VARCHAR, 1, max_length=300)]
    table = SimpleNamespace(schema="shop", table="orders", table_id=7, columns=columns)
    decoder = _plan(table).native
    image = b"\x00" + (5).to_bytes(4, "little") + (3).to_bytes(2, "little") + b"abc"
    good = b"\x02\x03" + image
    assert decoder.rows(good, 0, len(good), False) == [([5, "abc"], None)]
    with pytest.raises(
        CaptureError, match=r"shop\.orders: a string running past the rows of column 1 \(c1\)"
    ):
        decoder.rows(good + b"\x00\x00\x00\x00", 0, len(good) - 1, False)
    with pytest.raises(CaptureError, match=r"shop\.orders: 3 columns, its table map has 2"):
        decoder.rows(b"\x03" + good[1:], 0, len(good), False)
    with pytest.raises(CaptureError, match="a malformed column count at byte 0"):
        decoder.rows(b"\xfb" + good[1:], 0, len(good), False)
    with pytest.raises(CaptureError, match="row images of no columns before more bytes"):
        decoder.rows(b"\x02\x00" + image, 0, len(image) + 2, False)
    assert decoder.fallbacks == 0


def test_values_left_to_the_python_readers_are_counted() -> None:
    """A zero date is the Python reader's text; YEAR is mysql-replication's reader."""
    columns = [_column(FIELD_TYPE.DATE, 0), _column(FIELD_TYPE.YEAR, 1)]
    table = SimpleNamespace(schema="db", table="dates", table_id=8, columns=columns)
    decoder = _plan(table).native
    data = b"\x02\x03" + b"\x00" + b"\x00\x00\x00" + b"\x7e"
    assert decoder.rows(data, 0, len(data), False) == [(["0000-00-00", 2026], None)]
    assert decoder.fallbacks == 2


# --- the packet scan --------------------------------------------------------------------------


def _scan_model(
    buffer: bytes,
    at: int,
    seq: int,
    checksum: bool,
    maps: dict[bytes, Any],
    table_map: dict[int, Any],
) -> tuple[int, int, bytes | None, int]:
    """What ``scan`` does, in the words of ``_Connection.read_payload`` and ``_map_table``."""
    log_pos = 0
    while len(buffer) - at >= 4:
        length = int.from_bytes(buffer[at : at + 3], "little")
        payload = buffer[at + 4 : at + 4 + length]
        if (
            not length
            or length >= 0xFFFFFF
            or buffer[at + 3] != seq
            or len(payload) < length
            or length < 20
            or payload[0] != 0
        ):
            break
        end = 1 + int.from_bytes(payload[10:14], "little") - (4 if checksum else 0)
        at, seq = at + 4 + length, (seq + 1) % 256
        if payload[5] == 19 and 26 <= end <= length and payload[20:end] in maps:
            table_map[int.from_bytes(payload[20:26], "little")] = maps[payload[20:end]]
            log_pos = int.from_bytes(payload[14:18], "little") or log_pos
            continue
        return at, seq, payload, log_pos
    return at, seq, None, log_pos


@st.composite
def _packets(draw: st.DrawFn) -> tuple[bytes, int, bool, dict[bytes, Any]]:
    checksum = draw(st.booleans())
    seq = draw(st.integers(0, 255))
    bodies = [draw(st.binary(min_size=6, max_size=12)) for _ in range(3)]
    maps = {body: f"table{i}" for i, body in enumerate(bodies[:2])}  # bodies[2] is unknown
    buffer = b""
    number = seq
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from((19, 19, 30, 16, 162)))
        body = draw(st.sampled_from(bodies)) if kind == 19 else draw(st.binary(max_size=12))
        size = 19 + len(body) + (4 if checksum else 0)
        event = (
            b"\x00"
            + draw(st.binary(min_size=4, max_size=4))
            + bytes([kind])
            + draw(st.binary(min_size=4, max_size=4))
            + size.to_bytes(4, "little")
            + draw(st.integers(0, 2**32 - 1)).to_bytes(4, "little")
            + b"\x00\x00"
            + body
            + (b"\xaa\xbb\xcc\xdd" if checksum else b"")
        )
        if draw(st.integers(0, 9)) == 0:  # a packet that is not an event, or out of sequence
            event = draw(st.sampled_from((b"\xff" + event[1:], b"\xfe\x00\x00", event[:10])))
            number += draw(st.integers(0, 1))
        buffer += len(event).to_bytes(3, "little") + bytes([number % 256]) + event
        number += 1
    cut = draw(st.integers(0, len(buffer)))  # the socket read may end anywhere
    if draw(st.booleans()):
        flips = bytearray(buffer)
        for at in draw(st.lists(st.integers(0, max(0, len(buffer) - 1)), max_size=3)):
            if flips:
                flips[at] ^= draw(st.integers(1, 255))
        buffer = bytes(flips)
    return buffer[:cut] if draw(st.booleans()) else buffer, seq, checksum, maps


@settings(max_examples=80)
@given(_packets())
def test_scan_frames_packets_as_pymysql(packets: tuple[bytes, int, bool, dict[bytes, Any]]) -> None:
    buffer, seq, checksum, maps = packets
    at = 0
    while True:
        want_map: dict[int, Any] = {}
        got_map: dict[int, Any] = {}
        want = _scan_model(buffer, at, seq, checksum, maps, want_map)
        got = _rowdecode.scan(buffer, at, seq, checksum, maps, got_map)
        assert got == want
        assert got_map == want_map
        at, seq, payload, _ = got
        if payload is None:
            break
