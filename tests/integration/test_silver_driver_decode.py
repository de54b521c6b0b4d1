"""The driver decoder against the Spark decoder, cell by cell, on the shared SparkSession.

:mod:`silver.driver_decode` claims to give, for bronze rows of one value schema, exactly the
Arrow table ``silver.job._Decoder(envelope).decode(df).toArrow()`` gives: column names and
order, Arrow types and field metadata, every value (NaN and -0.0 by their bits, timestamps and
dates by their integers, so PostgreSQL's ±infinity sentinels compare too), the metadata columns
and the ``__reason`` of refused events. Each test decodes the same bronze rows both ways:

* Hypothesis envelopes and values for every type the driver decoder claims (bounds of each
  integer type, floats and their NaN/Infinity spellings, 38-digit and wider decimals, negative
  scales, dates and timestamps far before 1970 and after 9999, nanoseconds, offsets, empty
  strings, NUL and emoji, placeholders, keys in every form, old/new key headers) and values
  Spark refuses (a string in a number, an integer out of range, a decimal wider than its type,
  a missing or non-object image); the decoder must decode every such batch itself;
* odder input it may leave to Spark (fractions and objects where text is wanted, base64 that
  is not canonical, timestamp texts other than ISO-8601, duplicate keys, unquoted NaN):
  whenever it does decode, the result must still be Spark's;
* every change event of the seed documents (``tests/fixtures/debezium``) and the real Debezium
  output in ``tests/fixtures/debezium_real`` (PostgreSQL and MariaDB edge values), each
  schema reduced to the fields the decoder claims when it holds others (arrays), and the
  decoder must decline the full schema exactly then.
"""

from __future__ import annotations

import base64
import json
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from bronze import connect_schema as cs
from bronze import schema as B
from bronze.envelope import HEADER_NEW_KEY, HEADER_OLD_KEY
from silver import driver_decode as DD
from silver.job import _Decoder
from silver.types import UNAVAILABLE_VALUE_PLACEHOLDER
from tests.property_profiles import examples

pytestmark = pytest.mark.spark

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
PLACEHOLDER_B64 = base64.b64encode(UNAVAILABLE_VALUE_PLACEHOLDER.encode()).decode()
INT32 = (-(2**31), 2**31 - 1)
INT64 = (-(2**63), 2**63 - 1)

COLUMNS: dict[str, dict[str, Any]] = {
    "i8": cs.primitive("int8", optional=True),
    "i16": cs.primitive("int16", optional=True),
    "i32": cs.primitive("int32", optional=True),
    "i64": cs.primitive("int64", optional=True),
    "f32": {"type": "float", "optional": True},
    "f64": {"type": "double", "optional": True},
    "flag": cs.primitive("boolean", optional=True),
    "s": cs.primitive("string", optional=True),
    "raw": cs.primitive("bytes", optional=True),
    "dec": cs.decimal(2, precision=10, optional=True),
    "dec38": cs.decimal(5, optional=True),
    "decneg": cs.decimal(-2, precision=5, optional=True),
    "decwide": cs.decimal(3, precision=50, optional=True),
    "vsd": cs.variable_scale_decimal(optional=True),
    "d": cs.date(optional=True),
    "cd": cs.connect_date(optional=True),
    "t": cs.time_millis(optional=True),
    "ct": cs.connect_time(optional=True),
    "mt": cs.micro_time(optional=True),
    "nt": cs.nano_time(optional=True),
    "ts": cs.timestamp_millis(optional=True),
    "cts": cs.connect_timestamp(optional=True),
    "mts": cs.micro_timestamp(optional=True),
    "nts": cs.nano_timestamp(optional=True),
    "zts": cs.zoned_timestamp(optional=True),
    "zt": cs.zoned_time(optional=True),
    "js": cs.json(optional=True),
    "uu": cs.uuid(optional=True),
    "en": cs.enum(["a", "b"], optional=True),
    "es": cs.enum_set(["a", "b"], optional=True),
    "yr": cs.year(optional=True),
    "md": cs.micro_duration(optional=True),
    "iv": cs.interval(optional=True),
    "other": {"type": "int64", "optional": True, "name": "com.example.SomeLogicalName"},
}


def _envelope(columns: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    row = cs.struct(
        [cs.field("id", "int32"), *(cs.field(n, dict(s)) for n, s in columns.items())],
        name="srv.db.t.Value",
    )
    return cs.envelope_schema(
        "srv.db.t", row, cs.source_schema("postgresql"), with_transaction=False
    )


ENVELOPE = _envelope(COLUMNS)


def _b64(unscaled: int) -> str:
    """Minimal big-endian two's complement, base64 (Java's ``BigInteger.toByteArray``)."""
    length = (unscaled.bit_length() + 8) // 8
    return base64.b64encode(unscaled.to_bytes(length, "big", signed=True)).decode()


def _bronze(rows: Sequence[Mapping[str, Any]]) -> pa.Table:
    """Bronze ``events`` rows: each given column set, the rest NULL."""
    full = []
    for i, given_row in enumerate(rows):
        row: dict[str, Any] = dict.fromkeys(B.EVENTS_SCHEMA.names)
        row.update(
            source="src",
            collection="db.t",
            kind="data",
            position=i.to_bytes(4, "big"),
            source_ts_ms=1_700_000_000_000 + i,
            tx_id=f"tx{i % 3}",
            origin=f"f.jsonl:{i + 1}",
            agent_id="medallion-agent:src",
            batch_seq=7,
            value_schema_id="sid",
        )
        row.update(given_row)
        full.append(row)
    return pa.Table.from_pylist(full, schema=B.EVENTS_SCHEMA)


def _cells(table: pa.Table) -> list[list[Any]]:
    """Every cell comparably: floats by their bits (NaN as one), dates and timestamps as their
    integers (the ±infinity sentinels are beyond Python's datetime)."""
    out = []
    for column in table.columns:
        type_ = column.type
        if pa.types.is_timestamp(type_):
            column = column.cast(pa.int64())
        elif pa.types.is_date32(type_):
            column = column.cast(pa.int32())
        values = column.to_pylist()
        if pa.types.is_floating(type_):
            values = [
                None if v is None else "nan" if math.isnan(v) else struct.pack("<d", v).hex()
                for v in values
            ]
        out.append(values)
    return out


def _decode_both(
    spark: Any, envelope: Mapping[str, Any], events: pa.Table, *, may_fail: bool = False
) -> tuple[pa.Table | None, pa.Table | None]:
    """Spark's decode (as ``_decoded_on_driver`` gets it) and the driver decoder's.

    ``may_fail``: Spark's job may fail on the input (base64 its MIME decoder refuses), which
    the silver job answers by quarantining the table's events; then Spark's side is None.
    """
    from pyspark.errors import IllegalArgumentException

    frame = _Decoder(envelope).decode(spark.createDataFrame(events))
    decoder = DD.driver_decoder(envelope)
    assert decoder is not None, "the driver decoder declines a schema it claims"
    assert decoder.spark_schema == frame.schema
    try:
        expected = frame.toArrow()
    except IllegalArgumentException:
        if not may_fail:
            raise
        expected = None
    return expected, decoder.decode(events)


def _assert_same(expected: pa.Table | None, got: pa.Table) -> None:
    assert expected is not None, "Spark's decode failed"
    assert got.schema.equals(expected.schema, check_metadata=True), (got.schema, expected.schema)
    mismatches = [
        (name, i, want, have)
        for name, want_col, have_col in zip(
            expected.column_names, _cells(expected), _cells(got), strict=True
        )
        for i, (want, have) in enumerate(zip(want_col, have_col, strict=True))
        if want != have
    ]
    assert not mismatches, mismatches[:10]


# --- strategies ----------------------------------------------------------------------------------


def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.one_of(
        st.integers(low, low + 3), st.integers(high - 3, high), st.integers(-1000, 1000)
    )


_WRONG_KIND = st.one_of(st.text(max_size=5), st.booleans(), st.just(""))
"""Tokens of the wrong kind for a number (refused with their exact text)."""

_FLOAT32_NORMAL = st.floats(width=32, allow_nan=False, allow_infinity=False).filter(
    lambda v: v == 0.0 or abs(v) >= 2.0**-126
)
_NON_NUMBERS = st.sampled_from(["NaN", "Infinity", "+Infinity", "-Infinity", "+INF", "-INF"])


def _decimal_token(limit: int) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.integers(-limit, limit).map(_b64),
        st.sampled_from([PLACEHOLDER_B64, UNAVAILABLE_VALUE_PLACEHOLDER, ""]),
    )


def _zoned_text(moment: Any, nanos: int, offset_minutes: int, digits: int) -> str:
    text = (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}"
        f"T{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}"
    )
    if digits:
        text += "." + str(nanos).rjust(9, "0")[:digits]
    if offset_minutes == 0:
        return text + "Z"
    sign = "-" if offset_minutes < 0 else "+"
    hours, minutes = divmod(abs(offset_minutes), 60)
    return f"{text}{sign}{hours:02d}:{minutes:02d}"


_ZONED = st.one_of(
    st.builds(
        _zoned_text,
        st.datetimes(),
        st.integers(0, 999_999_999),
        st.integers(-18 * 60, 18 * 60),
        st.integers(0, 9),
    ),
    st.sampled_from(["infinity", "-infinity", UNAVAILABLE_VALUE_PLACEHOLDER]),
)

_TEXT = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["", "\x00", "😀 emoji", UNAVAILABLE_VALUE_PLACEHOLDER, "a" * 150]),
)

EXACT_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "i8": st.one_of(st.integers(-130, 260), _WRONG_KIND),
    "i16": st.one_of(_ints(-(2**15) - 2, 2**15 + 1), _WRONG_KIND),
    "i32": st.one_of(_ints(INT32[0] - 2, INT32[1] + 2), _WRONG_KIND),
    "i64": st.one_of(_ints(INT64[0] - 2, INT64[1] + 2), _WRONG_KIND),
    "f32": st.one_of(_FLOAT32_NORMAL, st.integers(-(2**24), 2**24), _NON_NUMBERS, _WRONG_KIND),
    "f64": st.one_of(
        st.floats(allow_nan=False, allow_infinity=False),
        st.integers(-(2**60), 2**60),
        _NON_NUMBERS,
        _WRONG_KIND,
    ),
    "flag": st.one_of(st.booleans(), st.integers(0, 1), st.text(max_size=3)),
    "s": st.one_of(_TEXT, st.integers(-(2**70), 2**70), st.booleans()),
    "raw": st.one_of(
        st.binary(max_size=20).map(lambda b: base64.b64encode(b).decode()),
        st.sampled_from([PLACEHOLDER_B64, UNAVAILABLE_VALUE_PLACEHOLDER]),
    ),
    "dec": _decimal_token(10**11),
    "dec38": _decimal_token(10**39),
    "decneg": _decimal_token(10**8),
    "decwide": _decimal_token(10**60),
    "vsd": st.one_of(
        st.fixed_dictionaries(
            {"scale": st.integers(-5, 45), "value": st.integers(-(10**50), 10**50).map(_b64)}
        ),
        st.text(max_size=4),
        st.integers(),
    ),
    "d": st.one_of(_ints(*INT32), st.integers(-800_000, 3_000_000), _WRONG_KIND),
    "cd": _ints(*INT32),
    "t": st.one_of(st.integers(0, 86_399_999), _ints(*INT32)),
    "ct": st.integers(0, 86_399_999),
    "mt": st.one_of(st.integers(0, 86_400_000_000), _ints(*INT64)),
    "nt": st.one_of(st.integers(-(10**15), 10**15), _ints(*INT64)),
    "ts": st.one_of(
        st.integers(-62_135_596_800_000, 253_402_300_799_999),
        _ints(-(2**63 // 1000), (2**63 - 1) // 1000),  # beyond: Spark's job fails
    ),
    "cts": st.integers(-(10**13), 10**13),
    "mts": st.one_of(
        _ints(*INT64),
        st.sampled_from([9223372036825200000, -9223372036832400000]),
        st.integers(-(10**17), 10**17),
    ),
    "nts": st.one_of(
        _ints(*INT64), st.integers(-(10**19), 10**19).filter(lambda v: abs(v) < 2**63)
    ),
    "zts": _ZONED,
    "zt": st.sampled_from(["10:15:30.123Z", "00:00:00Z", UNAVAILABLE_VALUE_PLACEHOLDER]),
    "js": st.sampled_from(['{"a": [1, 2.5]}', "[]", "null", ""]),
    "uu": st.uuids().map(str),
    "en": st.sampled_from(["a", "b", ""]),
    "es": st.sampled_from(["a,b", "", "b"]),
    "yr": st.one_of(st.integers(1901, 2155), _WRONG_KIND),
    "md": _ints(*INT64),
    "iv": st.sampled_from(["P1Y2M3DT4H5M6.78S", "PT0S", "-P1D"]),
    "other": _ints(*INT64),
}

_KEY_TEXT = st.text(st.characters(min_codepoint=32), max_size=6)
"""Key text the driver claims (a control character's escape in to_json is left to Spark)."""

_KEYS = st.one_of(
    st.integers(-(2**40), 2**40).map(lambda i: json.dumps({"id": i})),
    st.tuples(st.integers(), _KEY_TEXT).map(
        lambda t: json.dumps({"a": t[0], "b": t[1]}, ensure_ascii=False)
    ),
    st.integers(0, 99).map(
        lambda i: json.dumps({"schema": {"type": "struct"}, "payload": {"id": i, "ok": True}})
    ),
    st.sampled_from(['"406c07f3-a"', "17", "null", '{"id":null}', "{}", '{"id":"a\\"b\\\\c"}']),
    st.none(),
)


@st.composite
def _events(draw: st.DrawFn, values: Mapping[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    columns = draw(st.lists(st.sampled_from(sorted(values)), max_size=8, unique=True))
    image: Any = {"id": draw(st.integers(0, 50))}
    for name in columns:
        image[name] = draw(st.one_of(st.none(), values[name]))
    op = draw(st.sampled_from(["c", "u", "d", "r", "c", "u"]))
    image = draw(st.one_of(st.just(image), st.just(image), st.sampled_from([None, "x", 5, []])))
    side = "before" if op == "d" else "after"
    payload = {"before": None, "after": None, "op": op, "ts_ms": 1, side: image}
    headers = draw(
        st.lists(
            st.tuples(
                st.sampled_from([HEADER_OLD_KEY, HEADER_NEW_KEY, "other"]),
                st.one_of(_KEYS, st.none()),
            ),
            max_size=2,
        )
    )
    text = json.dumps(payload, ensure_ascii=draw(st.booleans()))
    return {
        B.OP: op,
        B.KEY_JSON: draw(_KEYS),
        B.VALUE_JSON: draw(st.sampled_from([text, text, None])) if op == "d" else text,
        B.HEADERS: [{"key": k, "value": v} for k, v in headers] or None,
        B.AGENT_ID: draw(st.sampled_from(["medallion-agent:src", None])),
        B.BATCH_SEQ: draw(st.sampled_from([7, None])),
    }


EDGES: list[dict[str, Any]] = [
    {"i8": 255},
    {"i8": 128},
    {"i8": -129},
    {"i16": 32768},
    {"i32": INT32[1] + 1},
    {"i64": INT64[0]},
    {"i64": 2**63},
    {"f64": -0.0},
    {"f64": 1e308},
    {"f64": "1.5"},
    {"f32": 3.4028234663852886e38},
    {"f32": 1.100000023841858},
    {"f32": 0.1},
    {"f32": -0.0},
    {"dec": _b64(9_999_999_999)},
    {"dec": _b64(10_000_000_000)},
    {"dec38": _b64(10**38 - 1)},
    {"dec38": _b64(-(10**38) + 1)},
    {"dec38": _b64(10**38)},
    {"dec38": _b64(2**130)},
    {"decneg": _b64(99_999)},
    {"decneg": _b64(-100_000)},
    {"decwide": _b64(-5)},
    {"decwide": _b64(10**49 + 7)},
    {"dec": ""},
    {"vsd": {"scale": 0, "value": "AA=="}},
    {"vsd": {"scale": -2, "value": _b64(5)}},
    {"vsd": {"scale": 40, "value": _b64(-(10**45))}},
    {"d": INT32[0]},
    {"d": INT32[1]},
    {"d": 11016},  # 2000-02-29
    {"d": -719162},  # 0001-01-01
    {"nt": -1},
    {"nts": -1},
    {"nts": INT64[0]},
    {"ts": -62_135_596_800_000},
    {"mts": 9223372036825200000},
    {"zts": "infinity"},
    {"zts": "-infinity"},
    {"zts": "1969-12-31T23:59:59.999999999Z"},
    {"zts": "2000-02-29T23:59:59.5+01:30"},
    {"zts": "0001-01-01T00:00:00Z"},
    {"zts": "9999-12-31T23:59:59.999999-18:00"},
    {"zts": "-4712-01-01T00:00:00.000000Z"},  # PostgreSQL 4713 BC, as Debezium writes it
    {"zts": "+10000-01-01T00:00:00Z"},
    {"zts": "-0004-02-29T12:00:00+05:00"},  # 5 BC: a leap year
    {"zts": "0000-12-31T23:59:59.9Z"},
    {"f32": 3.4028235e38},  # FLOAT's largest as MariaDB's Debezium writes it
    {"f32": 3.5e38},
    {"f32": 1.17549e-38},
    {"f32": 1e-45},
    {"s": "\x00"},
    {"s": "😀"},
    {"s": ""},
    {"s": 12345678901234567890123},
    {"raw": ""},
    {"raw": PLACEHOLDER_B64},
    {"flag": "true"},
    {"yr": "2024"},
]
"""Hand-picked edges, each on its own row so that a refusal names one value; every batch of
claimed values starts with them."""

EDGE_ROWS = [
    {B.OP: "c", B.KEY_JSON: '{"id":1}', B.VALUE_JSON: json.dumps({"after": {"id": 1, **e}})}
    for e in EDGES
]


# Each example is a Spark plan of the 35-column decode (compiled: seconds on this machine),
# so an example is a large batch, there are few of them, and a failure is reported unshrunk.
_SETTINGS = settings(
    max_examples=examples(1, 100),
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@_SETTINGS
@given(rows=st.lists(_events(EXACT_VALUES), min_size=300, max_size=500))
def test_driver_decode_equals_spark_for_every_claimed_type(
    spark: Any, rows: list[dict[str, Any]]
) -> None:
    expected, got = _decode_both(spark, ENVELOPE, _bronze([*EDGE_ROWS, *rows]))
    assert got is not None, "the driver decoder left a batch of claimed values to Spark"
    _assert_same(expected, got)
    reasons = got.column("__reason").to_pylist()
    assert reasons[EDGES.index({"i8": -129})] == (
        "value does not decode: column i8: -129 does not decode as tinyint"
    )
    assert reasons[EDGES.index({"dec": _b64(10_000_000_000)})] == (
        f"value does not decode: column dec: {_b64(10_000_000_000)} "
        "does not decode as decimal(10,2)"
    )


_ODD = st.one_of(
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(
        [
            "AQ",
            "!!!!",
            "2024-02-30T00:00:00Z",
            "2024-01-01 10:00:00",
            "2024-01-01T10:00:00",
            " 2024-01-01T10:00:00Z",
            "+1000000-01-01T00:00:00Z",
        ]
    ),
    st.just({"nested": 1}),
    st.just([1, "a"]),
)
ODD_VALUES = {name: st.one_of(strategy, _ODD) for name, strategy in EXACT_VALUES.items()}


@_SETTINGS
@given(rows=st.lists(_events(ODD_VALUES), min_size=100, max_size=200), raw=st.booleans())
def test_driver_decode_equals_spark_or_declines_on_odd_values(
    spark: Any, rows: list[dict[str, Any]], raw: bool
) -> None:
    if raw:  # JSON Python and Jackson read differently: Spark must decode it
        rows = [*rows, {B.OP: "c", B.VALUE_JSON: '{"after": {"id": 1, "f64": NaN}, "op": "c"}'}]
    expected, got = _decode_both(spark, ENVELOPE, _bronze(rows), may_fail=True)
    if raw or expected is None:  # Spark's job failed: the driver decoder must not succeed
        assert got is None
    if got is not None:
        assert expected is not None
        _assert_same(expected, got)


# --- real Debezium output ------------------------------------------------------------------------


def _claimed(envelope: Mapping[str, Any]) -> dict[str, Any]:
    """The envelope with only the row fields the driver decoder claims."""

    def reduce(side: Mapping[str, Any]) -> dict[str, Any]:
        if side.get("type") != "struct":
            return dict(side)
        kept = [f for f in side["fields"] if DD.driver_decoder(_envelope({"x": f})) is not None]
        return {**side, "fields": kept}

    return {
        **envelope,
        "fields": [
            reduce(f) if f.get("field") in ("before", "after") else f for f in envelope["fields"]
        ],
    }


def _real_records() -> Iterable[tuple[str, Mapping[str, Any], Mapping[str, Any] | None]]:
    """(origin, value, key) of every change event with a schema in the fixture corpora."""
    for path in sorted((FIXTURES / "debezium").glob("*.json")):
        doc = orjson.loads(path.read_bytes())
        yield path.name, doc.get("value"), doc.get("key")
    for path in sorted((FIXTURES / "debezium_real").glob("*.jsonl")):
        for n, line in enumerate(path.read_text().splitlines(), 1):
            record = orjson.loads(line)
            yield f"{path.name}:{n}", record.get("value"), record.get("key")


def test_driver_decode_equals_spark_on_real_debezium_output(spark: Any) -> None:
    by_schema: dict[bytes, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for origin, value, key in _real_records():
        if not isinstance(value, Mapping) or not isinstance(value.get("schema"), Mapping):
            continue
        payload = value.get("payload")
        if not isinstance(payload, Mapping) or payload.get("op") not in ("c", "u", "d", "r"):
            continue
        envelope = value["schema"]
        sides = [f for f in envelope.get("fields", ()) if f.get("field") in ("before", "after")]
        if len(sides) != 2 or any(f.get("type") != "struct" for f in sides):
            continue  # MongoDB's JSON-text images: silver's documents path, not this decoder
        claimed = _claimed(envelope)
        if claimed != envelope:
            assert DD.driver_decoder(envelope) is None, origin
        entry = by_schema.setdefault(orjson.dumps(claimed), (claimed, []))
        key_payload = key.get("payload") if isinstance(key, Mapping) else key
        entry[1].append(
            {
                B.OP: payload["op"],
                B.VALUE_JSON: orjson.dumps(payload).decode(),
                B.KEY_JSON: None if key_payload is None else orjson.dumps(key_payload).decode(),
                B.ORIGIN: origin,
            }
        )
    assert len(by_schema) >= 8, sorted(by_schema)
    for envelope, rows in by_schema.values():
        expected, got = _decode_both(spark, envelope, _bronze(rows))
        assert got is not None, [r[B.ORIGIN] for r in rows]
        _assert_same(expected, got)


def assert_bronze_decodes_alike(spark: Any, lake: Path) -> None:
    """Every row event in a lake's bronze, per value schema (reduced to the fields the driver
    decoder claims), decoded alike by both decoders; used on the type-fidelity lakes the
    project's PostgreSQL and MariaDB agents land (tests/integration/test_type_fidelity.py)."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    events = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    registry = DeltaTable(str(lake / "bronze" / "schemas")).to_pyarrow_table()
    schemas = dict(
        zip(
            registry.column(B.SCHEMA_ID).to_pylist(),
            registry.column(B.SCHEMA_JSON).to_pylist(),
            strict=True,
        )
    )
    row_ops = pc.fill_null(pc.is_in(events.column(B.OP), pa.array(["c", "u", "d", "r"])), False)
    events = events.filter(row_ops)
    decoded = 0
    for schema_id in sorted(set(events.column(B.VALUE_SCHEMA_ID).to_pylist()) - {None}):
        envelope = _claimed(orjson.loads(schemas[schema_id]))
        rows = events.filter(
            pc.fill_null(pc.equal(events.column(B.VALUE_SCHEMA_ID), schema_id), False)
        )
        expected, got = _decode_both(spark, envelope, rows)
        assert got is not None, f"schema {schema_id}: the driver decoder left it to Spark"
        _assert_same(expected, got)
        decoded += rows.num_rows
    assert decoded, "no row event in bronze"
