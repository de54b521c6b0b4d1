"""SQL Server column types -> Debezium values, per seed 003's mapping tables (no driver)."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pytest

from capture.sqlserver.types import ColumnFacts, SqlServerHandling, column_type

ADAPTIVE = SqlServerHandling()


def facts(kind: str, fraction: int | None, scale: int | None) -> ColumnFacts:
    return ColumnFacts("c", kind, scale=scale, fraction=fraction)


def convert(
    kind: str,
    value: object,
    handling: SqlServerHandling = ADAPTIVE,
    *,
    fraction: int | None = None,
    scale: int | None = None,
) -> object:
    converted = column_type(facts(kind, fraction, scale), handling)
    assert converted is not None
    return converted.convert(value)


def schema_name(
    kind: str, handling: SqlServerHandling = ADAPTIVE, *, fraction: int | None = None
) -> object:
    converted = column_type(facts(kind, fraction, None), handling)
    assert converted is not None
    return converted.schema.get("name")


def test_datetimeoffset_is_a_utc_zoned_timestamp() -> None:
    assert schema_name("datetimeoffset") == "io.debezium.time.ZonedTimestamp"
    assert convert("datetimeoffset", "2018-06-20 15:13:16.9451040 +02:00") == (
        "2018-06-20T13:13:16.945104Z"
    )
    # the agent's output converter hands nine digits: the 100 ns are kept
    assert convert("datetimeoffset", "2018-06-20 15:13:16.945104100 -03:30") == (
        "2018-06-20T18:43:16.945104100Z"
    )
    aware = dt.datetime(2018, 6, 20, 15, 13, 16, tzinfo=dt.timezone(dt.timedelta(hours=-5)))
    assert convert("datetimeoffset", aware) == "2018-06-20T20:13:16Z"


@pytest.mark.parametrize(
    ("kind", "fraction", "name", "value"),
    [
        ("time", 3, "io.debezium.time.Time", 54796945),
        ("time", 6, "io.debezium.time.MicroTime", 54796945104),
        ("time", 7, "io.debezium.time.NanoTime", 54796945104000),
        ("datetime2", 3, "io.debezium.time.Timestamp", 1529507596945),
        ("datetime2", 6, "io.debezium.time.MicroTimestamp", 1529507596945104),
        ("datetime2", 7, "io.debezium.time.NanoTimestamp", 1529507596945104000),
    ],
)
def test_adaptive_precision(kind: str, fraction: int, name: str, value: int) -> None:
    stamp = dt.datetime(2018, 6, 20, 15, 13, 16, 945104)
    given = stamp.time() if kind == "time" else stamp
    assert schema_name(kind, fraction=fraction) == name
    assert convert(kind, given, fraction=fraction) == value


def test_connect_mode_is_milliseconds() -> None:
    connect = SqlServerHandling(time_precision="connect")
    stamp = dt.datetime(2018, 6, 20, 15, 13, 16, 945104)
    assert (
        schema_name("datetime2", connect, fraction=7) == "org.apache.kafka.connect.data.Timestamp"
    )
    assert convert("datetime2", stamp, connect, fraction=7) == 1529507596945


def test_decimal_and_binary_modes() -> None:
    assert convert("money", Decimal("1.5"), SqlServerHandling(decimal="double")) == 1.5
    assert convert("decimal", Decimal("1.50"), SqlServerHandling(decimal="string"), scale=2) == (
        "1.50"
    )
    assert convert("varbinary", b"\x01\xff", SqlServerHandling(binary="hex")) == "01ff"


def test_strings_xml_and_unknown_types() -> None:
    assert convert("uniqueidentifier", "6f9619ff-8b86-d011-b42d-00c04fc964ff") == (
        "6F9619FF-8B86-D011-B42D-00C04FC964FF"
    )
    assert schema_name("xml") == "io.debezium.data.Xml"
    # the CLR types as their serialized bytes (pyodbc's -151, through the agent's converter)
    clr = column_type(ColumnFacts("c", "hierarchyid"), ADAPTIVE)
    assert clr is not None and clr.known is False and clr.convert(b"\x5a\xc0") == "WsA="
    assert column_type(ColumnFacts("c", "sql_variant"), ADAPTIVE) is None  # left out


def test_a_temporal_text_that_does_not_parse_raises() -> None:
    with pytest.raises(ValueError):
        convert("time", "25:61:00", fraction=3)
