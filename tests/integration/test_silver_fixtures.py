"""One column per logical type, through bronze -> silver.

A PostgreSQL-connector table with one column per Debezium logical type of the spec's §2.6 table
gets creates, an update and updates carrying the unavailable-value placeholder; the silver rows
are compared with hand-checked Python values (the ones ``tests/integration/test_silver_types.py``
checks at decode level, where they apply).

The spec's recorded Debezium JSON examples (``tests/fixtures/debezium``), which this file used to
land a few of, are all landed and applied by ``tests/integration/test_seed_corpus.py``.

Nothing expected here is computed by the code under test: every value is a literal with a
comment saying how it was worked out.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest

from bronze import connect_schema as cs
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name
from silver.merge import DELETED, KEY

pytestmark = [pytest.mark.spark, pytest.mark.delta]

UTC = dt.UTC
PLACEHOLDER = "__debezium_unavailable_value"


def _write(path: Path, records: Iterable[Mapping[str, Any]]) -> None:
    """Append ``kafka_json`` lines: ``{"topic", "key", "value", "headers"}`` per record."""
    with path.open("ab") as f:
        for record in records:
            f.write(orjson.dumps(record) + b"\n")


def _land(source: str, path: Path, lake: Path) -> None:
    LandingAgent(
        DebeziumJsonSource(source, path, line_format="kafka_json"),
        BronzeWriter(BronzeTables.under(lake)),
    ).run()


def _live(spark: Any, lake: Path, source: str, collection: str) -> list[dict[str, Any]]:
    """Live rows of one silver table: data columns plus the MERGE key, sorted by the key."""
    path = lake / "silver" / silver_table_name(source, collection)
    df = spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")
    columns = [c for c in df.columns if not c.startswith("_cdc_")]
    dicts = [r.asDict(recursive=True) for r in df.collect()]
    rows = [{KEY: d[KEY], **{c: d[c] for c in columns}} for d in dicts]
    return sorted(rows, key=lambda r: str(r[KEY]))


# --- one column per logical type --------------------------------------------------------------

SERVER = "pgserver1"
TOPIC = f"{SERVER}.public.all_types"
ROW_SCHEMA = cs.struct(
    [
        cs.field("id", "int32"),
        cs.field("dec", cs.decimal(2, precision=10, optional=True)),
        cs.field("vsd", cs.variable_scale_decimal(optional=True)),
        cs.field("d", cs.date(optional=True)),
        cs.field("t", cs.time_millis(optional=True)),
        cs.field("mt", cs.micro_time(optional=True)),
        cs.field("nt", cs.nano_time(optional=True)),
        cs.field("ts", cs.timestamp_millis(optional=True)),
        cs.field("mts", cs.micro_timestamp(optional=True)),
        cs.field("nts", cs.nano_timestamp(optional=True)),
        cs.field("zts", cs.zoned_timestamp(optional=True)),
        cs.field("zt", cs.zoned_time(optional=True)),
        cs.field("yr", cs.year(optional=True)),
        cs.field("dur", cs.micro_duration(optional=True)),
        cs.field("iv", cs.interval(optional=True)),
        cs.field("js", cs.json(optional=True)),
        cs.field("x", cs.xml(optional=True)),
        cs.field("u", cs.uuid(optional=True)),
        cs.field("en", cs.enum(["red", "green"], optional=True)),
        cs.field("es", cs.enum_set(["a", "b", "c"], optional=True)),
        cs.field("b", cs.bits(10, optional=True)),
        cs.field("geo", cs.geometry(optional=True)),
        cs.field("pt", cs.point(optional=True)),
        cs.field("days", cs.array(cs.date(optional=True), optional=True)),
        cs.field(
            "nested",
            cs.struct(
                [
                    cs.field("price", cs.decimal(2, precision=10, optional=True)),
                    cs.field("at", cs.micro_timestamp(optional=True)),
                ],
                name=f"{TOPIC}.nested",
                optional=True,
            ),
        ),
        cs.field("body", cs.primitive("string", optional=True)),
    ],
    name=f"{TOPIC}.Value",
)
KEY_SCHEMA = cs.struct([cs.field("id", "int32")], name=f"{TOPIC}.Key")
ENVELOPE = cs.envelope_schema(
    TOPIC, ROW_SCHEMA, cs.source_schema("postgresql"), with_transaction=False
)

# Raw JSON values (what JsonConverter writes) and, beside each, the decoded value worked out by
# hand; the same inputs and results as test_silver_types.py's decode-level tests.
RAW_A: dict[str, Any] = {
    "dec": "AdQ=",  # 0x01D4 = 468 at scale 2
    "vsd": {"scale": 3, "value": "MDk="},  # 0x3039 = 12345 at scale 3
    "d": 17000,  # days since 1970-01-01
    "t": 49996945,  # ms past midnight: 13:53:16.945
    "mt": 49996945104,  # us past midnight
    "nt": 49996945104789,  # ns past midnight
    "ts": 1529476623000,  # the guide's DATETIME '2018-06-20 06:37:03'
    "mts": 1529507596945104,  # the guide's TIMESTAMP '2018-06-20 15:13:16.945104'
    "nts": 1529507596945104789,
    "zts": "2018-06-20T15:37:03.123456+02:00",
    "zt": "13:37:03.5Z",
    "yr": 2018,
    "dur": 3600000000,
    "iv": "P1Y2M3DT4H5M6.78S",
    "js": '{"a": [1, 2]}',
    "x": "<a>1</a>",
    "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "en": "green",
    "es": "a,c",
    "b": "AQI=",  # BIT(10) b'1000000001': little-endian 01 02
    "geo": {"wkb": "AQEAAAAAAAAAAADwPwAAAAAAAPA/", "srid": 4326},  # POINT(1 1) as WKB
    "pt": {"x": 1.5, "y": -2.25, "wkb": "AQID", "srid": None},
    "days": [0, 17000],
    "nested": {"price": "/iw=", "at": 1529507596945104},  # 0xFE2C = -468
    "body": "long text",
}
DECODED_A: dict[str, Any] = {
    "dec": Decimal("4.68"),
    "vsd": "12.345",
    # 46 years to 2016-01-01 are 16801 days; day 199 (0-based) of leap 2016 is July 18.
    "d": dt.date(2016, 7, 18),
    # Times of day are bigint microseconds past midnight; NanoTime truncates.
    "t": 49996945000,
    "mt": 49996945104,
    "nt": 49996945104,
    "ts": dt.datetime(2018, 6, 20, 6, 37, 3),
    "mts": dt.datetime(2018, 6, 20, 15, 13, 16, 945104),
    "nts": dt.datetime(2018, 6, 20, 15, 13, 16, 945104),
    # ZonedTimestamp is the UTC instant 13:37:03.123456Z; compared as epoch seconds below.
    "zts": dt.datetime(2018, 6, 20, 13, 37, 3, 123456, tzinfo=UTC).timestamp(),
    "zt": "13:37:03.5Z",
    "yr": 2018,
    "dur": 3600000000,
    "iv": "P1Y2M3DT4H5M6.78S",
    "js": '{"a": [1, 2]}',
    "x": "<a>1</a>",
    "u": "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11",
    "en": "green",
    "es": "a,c",
    "b": b"\x02\x01",  # big-endian
    "geo": {"wkb": bytes.fromhex("0101000000000000000000f03f000000000000f03f"), "srid": 4326},
    "pt": {"x": 1.5, "y": -2.25, "wkb": b"\x01\x02\x03", "srid": None},
    "days": [dt.date(1970, 1, 1), dt.date(2016, 7, 18)],
    "nested": {"price": Decimal("-4.68"), "at": dt.datetime(2018, 6, 20, 15, 13, 16, 945104)},
    "body": "long text",
}
# The update of id 1 changes every column to a second hand-checked value.
RAW_B: dict[str, Any] = {
    "dec": "/iw=",  # -468 at scale 2
    "vsd": {"scale": -2, "value": "BQ=="},  # 5 * 10^2
    "d": -1,  # the day before the epoch
    "t": 0,
    "mt": 1,
    "nt": 1999,  # 1.999 us truncates to 1 us
    "ts": 0,
    "mts": -1,  # 1 us before the epoch
    "nts": -1,  # -1 ns truncates toward the past: the last microsecond before the epoch
    "zts": "2018-06-20T13:37:03Z",
    "zt": "00:00:00Z",
    "yr": 1999,
    "dur": -1,
    "iv": "PT0S",
    "js": "[]",
    "x": "<b/>",
    "u": "00000000-0000-0000-0000-000000000000",
    "en": "red",
    "es": "",
    "b": "AQ==",  # PostgreSQL trims BIT(10) value 1 to one byte
    "geo": {"wkb": "AQID", "srid": None},
    "pt": {"x": 0.0, "y": 0.0, "wkb": None, "srid": 4326},
    "days": [],
    "nested": None,
    "body": "short",
}
DECODED_B: dict[str, Any] = {
    "dec": Decimal("-4.68"),
    "vsd": "500",
    "d": dt.date(1969, 12, 31),
    "t": 0,
    "mt": 1,
    "nt": 1,
    "ts": dt.datetime(1970, 1, 1),
    "mts": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    "nts": dt.datetime(1969, 12, 31, 23, 59, 59, 999999),
    "zts": dt.datetime(2018, 6, 20, 13, 37, 3, tzinfo=UTC).timestamp(),
    "zt": "00:00:00Z",
    "yr": 1999,
    "dur": -1,
    "iv": "PT0S",
    "js": "[]",
    "x": "<b/>",
    "u": "00000000-0000-0000-0000-000000000000",
    "en": "red",
    "es": "",
    "b": b"\x00\x01",  # ceil(10/8) = 2 bytes, big-endian
    "geo": {"wkb": b"\x01\x02\x03", "srid": None},
    "pt": {"x": 0.0, "y": 0.0, "wkb": None, "srid": 4326},
    "days": [],
    "nested": None,
    "body": "short",
}


class _Pg:
    """PostgreSQL-connector records of public.all_types with increasing LSNs, one txn each."""

    def __init__(self) -> None:
        self.lsn = 24_000_000
        self.tx = 500

    def record(self, op: str, ident: int, after: Mapping[str, Any]) -> dict[str, Any]:
        prev_commit, self.lsn, self.tx = self.lsn, self.lsn + 1_000, self.tx + 1
        ts_ms = 1_700_000_000_000 + self.tx
        source: dict[str, Any] = {
            "version": "2.5.0.Final",
            "connector": "postgresql",
            "name": SERVER,
            "ts_ms": ts_ms,
            "snapshot": "false",
            "db": "shop",
            "sequence": orjson.dumps([str(prev_commit), str(self.lsn)]).decode(),
            "schema": "public",
            "table": "all_types",
            "txId": self.tx,
            "lsn": self.lsn,
            "xmin": None,
        }
        payload = {
            "before": None,  # REPLICA IDENTITY DEFAULT: updates carry no before image
            "after": {"id": ident, **after},
            "source": source,
            "op": op,
            "ts_ms": ts_ms + 5,
        }
        return {
            "topic": TOPIC,
            "key": {"schema": KEY_SCHEMA, "payload": {"id": ident}},
            "value": {"schema": ENVELOPE, "payload": payload},
            "headers": {},
        }


def _comparable(row: Mapping[str, Any]) -> dict[str, Any]:
    # PySpark hands a TIMESTAMP (with time zone) back as a naive local datetime: .timestamp()
    # undoes that, giving the instant as epoch seconds.
    out = dict(row)
    if out.get("zts") is not None:
        out["zts"] = out["zts"].timestamp()
    return out


def test_one_column_per_logical_type(spark: Any, tmp_path: Path) -> None:
    pg = _Pg()
    path = tmp_path / "pg.jsonl"
    lake = tmp_path / "lake"
    # Run 1: id 1 created (A) and updated (B); id 2 created (A), then an update whose TOASTed
    # ``body`` is unavailable in the same bronze batch (the fold takes it from the create).
    _write(
        path,
        [
            pg.record("c", 1, RAW_A),
            pg.record("u", 1, RAW_B),
            pg.record("c", 2, RAW_A),
            pg.record("u", 2, {**RAW_A, "yr": 2019, "body": PLACEHOLDER}),
        ],
    )
    _land("pg", path, lake)
    first = SilverJob(spark, lake).run_once()
    assert first.quarantined == 0
    rows = {r["id"]: _comparable(r) for r in _live(spark, lake, "pg", "public.all_types")}
    assert rows == {
        1: {KEY: '{"id":"1"}', "id": 1, **DECODED_B},
        2: {KEY: '{"id":"2"}', "id": 2, **DECODED_A, "yr": 2019},
    }
    # Run 2: a later update of id 1 with ``body`` unavailable, in a new bronze batch: the MERGE
    # keeps silver's stored "short" and applies the rest.
    _write(path, [pg.record("u", 1, {**RAW_B, "dec": "AdQ=", "body": PLACEHOLDER})])
    _land("pg", path, lake)
    second = SilverJob(spark, lake).run_once()
    assert second.quarantined == 0 and second.events == 1
    rows = {r["id"]: _comparable(r) for r in _live(spark, lake, "pg", "public.all_types")}
    assert rows[1] == {KEY: '{"id":"1"}', "id": 1, **DECODED_B, "dec": Decimal("4.68")}
    assert rows[1]["body"] == "short"
