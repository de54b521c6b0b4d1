"""``plain_change``, the stream's columnar road's message parser (the Python reference and the
C extension the agent runs), against ``decode_message``: it takes exactly the Inserts and
old-tuple-less Updates of text and NULL values, gives their values as the full decoder does,
and gives None (never raises) for anything else, malformed bytes included, which then go to
the full decoder. The C parser and the Python one agree on any bytes at any offset."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from capture.postgresql import _pgdecode, pgoutput
from capture.postgresql.pgoutput import (
    UNCHANGED_TOAST,
    BinaryDatum,
    Insert,
    ProtocolError,
    Update,
    decode_message,
)
from tests.property_profiles import examples
from tests.unit.test_pgoutput import tuple_data

pytestmark = pytest.mark.unit

PARSERS = [
    pytest.param(pgoutput.plain_change, id="python"),
    pytest.param(_pgdecode.plain_change, id="c"),
]

_VALUES = st.one_of(
    st.none(),
    st.text(max_size=12),
    st.just(UNCHANGED_TOAST),
    st.binary(max_size=6),
)


def _message(
    tag: bytes, relid: int, old: tuple[bytes, tuple[object, ...]] | None, new: tuple[object, ...]
) -> bytes:
    body = tag + struct.pack("!I", relid)
    if old is not None:
        body += old[0] + tuple_data(*old[1])
    return body + b"N" + tuple_data(*new)


@pytest.mark.parametrize("plain_change", PARSERS)
@settings(max_examples=examples(40, 2000))
@given(
    tag=st.sampled_from([b"I", b"U"]),
    relid=st.integers(0, 2**32 - 1),
    old_kind=st.sampled_from([None, b"K", b"O"]),
    new=st.lists(_VALUES, max_size=8).map(tuple),
    head=st.binary(max_size=30),
)
def test_plain_changes_decode_as_the_full_decoder_does(
    plain_change: Any,
    tag: bytes,
    relid: int,
    old_kind: bytes | None,
    new: tuple[object, ...],
    head: bytes,
) -> None:
    old = None if old_kind is None or tag == b"I" else (old_kind, new)
    message = _message(tag, relid, old, new)
    got = plain_change(head + message, len(head))
    decoded = decode_message(message)
    assert isinstance(decoded, (Insert, Update))
    plain = old is None and all(v is None or isinstance(v, str) for v in new)
    if not plain:
        assert got is None
        return
    assert got == ("c" if tag == b"I" else "u", relid, decoded.new)
    assert not any(isinstance(v, BinaryDatum) for v in decoded.new)


@pytest.mark.parametrize("plain_change", PARSERS)
@settings(max_examples=examples(30, 1000))
@given(
    new=st.lists(st.one_of(st.none(), st.text(max_size=8)), min_size=1, max_size=6).map(tuple),
    cut=st.integers(1, 200),
    noise=st.binary(max_size=4),
)
@example(new=("1",), cut=1, noise=b"")
def test_malformed_bytes_give_none_and_the_full_decoder_names_them(
    plain_change: Any, new: tuple[str | None, ...], cut: int, noise: bytes
) -> None:
    whole = _message(b"I", 7, None, new)
    for broken in (whole[: max(len(whole) - cut, 0)], whole + noise if noise else whole[:-1]):
        if plain_change(broken, 0) is None:
            with pytest.raises((ProtocolError, UnicodeDecodeError)):
                decode_message(broken)
        else:
            assert decode_message(broken) == Insert(7, new)


@pytest.mark.parametrize(
    "raw",
    [
        b"B" + struct.pack("!QqI", 1, 2, 3),  # not a change
        b"D" + struct.pack("!I", 5) + b"K" + tuple_data("1"),  # a delete
        b"I" + struct.pack("!I", 5) + b"N" + struct.pack("!h", 1) + b"t" + struct.pack("!i", -1),
        b"I"
        + struct.pack("!I", 5)
        + b"N"
        + struct.pack("!h", 1)
        + b"t"
        + struct.pack("!i", 1)
        + b"\xff",
        b"I" + struct.pack("!I", 5) + b"N" + struct.pack("!h", 1) + b"z",
    ],
)
@pytest.mark.parametrize("plain_change", PARSERS)
def test_what_is_not_a_plain_change_is_left_to_the_full_decoder(
    plain_change: Any, raw: bytes
) -> None:
    assert plain_change(raw, 0) is None


@settings(max_examples=examples(100, 5000))
@given(
    data=st.one_of(
        st.binary(max_size=64),
        st.builds(
            lambda tag, body: tag + body,
            st.sampled_from([b"I", b"U", b"D"]),
            st.binary(min_size=5, max_size=60),
        ),
    ),
    off=st.integers(-3, 70),
)
@example(data=b"I\x00\x00\x00\x01N\xff\xff", off=0)  # a negative column count
@example(data=b"I\x00\x00\x00\x01N\x00\x01t\x7f\xff\xff\xff", off=0)  # a huge length
def test_the_c_parser_agrees_with_the_python_one_on_any_bytes(data: bytes, off: int) -> None:
    want = pgoutput.plain_change(data, off) if off >= 0 else None
    assert _pgdecode.plain_change(data, off) == want


def test_the_c_parser_refuses_what_is_not_bytes() -> None:
    with pytest.raises(TypeError, match="must be bytes"):
        _pgdecode.plain_change(bytearray(b"I"), 0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="2 arguments"):
        _pgdecode.plain_change(b"I")  # type: ignore[call-arg]


@settings(max_examples=examples(40, 1000))
@given(
    tag=st.sampled_from([b"B", b"C", b"I", b"O"]),
    body=st.binary(min_size=0, max_size=30),
    head=st.binary(max_size=30),
)
@example(tag=b"B", body=struct.pack("!QqI", 2**64 - 1, -5, 2**32 - 1), head=b"w")
@example(tag=b"C", body=struct.pack("!BQQq", 1, 7, 9, 11), head=b"")
def test_transaction_boundaries_decode_as_the_full_decoder_does(
    tag: bytes, body: bytes, head: bytes
) -> None:
    got = pgoutput.transaction_boundary(head + tag + body, len(head))
    try:
        want = decode_message(tag + body)
    except (ProtocolError, UnicodeDecodeError):
        assert got is None
        return
    assert got == (want if tag in (b"B", b"C") else None)
