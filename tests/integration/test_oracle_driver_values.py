"""The Oracle agent's values as python-oracledb really hands them over, not as a test stored them.

The model's DB-API stand-in (``tests/oraclemodel/dbapi.py``) types fetched values as
python-oracledb does: ``NUMBER`` with a scale (or unconstrained, with a fraction) as a binary
``float`` unless an output type handler asks for ``decimal.Decimal``; ``TIMESTAMP WITH TIME
ZONE`` as a naive ``datetime`` in the value's own wall clock, the offset dropped
(oracle/python-oracledb#274, #373). A row read by the snapshot must land exactly as the same row
read from the redo (``SQL_REDO`` text, exact) and as the values stored; ``NUMBER(P,S<0)`` is
declared as Debezium declares it (``Decimal`` scale S, precision P), which silver holds as
``decimal(P-S, 0)``; Oracle keeps an empty ``VARCHAR2``/``RAW`` as NULL.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import orjson
import pytest
from deltalake import DeltaTable
from pydantic import TypeAdapter
from pyspark.sql.types import DecimalType

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter
from capture.oracle.agent import DBAPI_ENV
from capture.oracle.snapshot import _key_value
from capture.oracle.source import OracleSource
from capture.registry import create_source
from pipeline.config import SourceConfig
from pipeline.landing import LandingAgent
from silver.types import spark_type
from tests.oraclemodel import dbapi
from tests.oraclemodel.database import Column, OracleModel

pytestmark = pytest.mark.delta

PLUS_TWO = dt.timezone(dt.timedelta(hours=2))
COLUMNS = [
    Column("ID", "NUMBER", 9, 0, nullable=False),
    Column("TSTZ", "TIMESTAMP(6) WITH TIME ZONE"),
    Column("WIDE", "NUMBER", 30, 10),
    Column("FREE", "NUMBER"),
    Column("HUNDREDS", "NUMBER", 20, -5),
    Column("NAME", "VARCHAR2"),
    Column("DATA", "RAW", 16),
]
VALUES: dict[str, Any] = {
    "TSTZ": dt.datetime(2024, 1, 1, 1, 30, 0, 250000, tzinfo=PLUS_TWO),
    "WIDE": Decimal("12345678901234567890.0123456789"),
    "FREE": Decimal("0.1234567890123456789"),
    "HUNDREDS": 10**24 + 3 * 10**5,
    "NAME": "",
    "DATA": b"",
}


@pytest.fixture
def model_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(DBAPI_ENV, "tests.oraclemodel.dbapi")
    model = OracleModel()
    model.create_table("APP", "VALS", COLUMNS, ["ID"])
    xid = model.begin()
    model.insert(xid, "APP", "VALS", {"ID": 1, **VALUES})
    model.commit(xid)
    model.save(tmp_path / "db.model")
    yield tmp_path / "db.model"


def _source(path: Path) -> OracleSource:
    raw = {
        "name": "ora",
        "connector": "oracle",
        "topic.prefix": "server1",
        "database.url": str(path),
        "database.user": "c##dbzuser",
        "database.password": "dbz",
        "database.dbname": "ORCLCDB",
        "database.pdb.name": "ORCLPDB1",
        "schema.include.list": "APP",
        "log.mining.sleep.time.default.ms": 0,
        "log.mining.sleep.time.max.ms": 0,
    }
    source = create_source(TypeAdapter(SourceConfig).validate_python(raw))
    assert isinstance(source, OracleSource)
    return source


def _land(path: Path, lake: Path) -> list[dict[str, Any]]:
    LandingAgent(_source(path), BronzeWriter(BronzeTables.under(lake)), max_events=50).run()
    rows = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    return [
        orjson.loads(r[S.VALUE_JSON])
        for r in sorted(rows, key=lambda r: r[S.POSITION])
        if r[S.KIND] == "data"
    ]


def _unscaled(text: str) -> int:
    return int.from_bytes(base64.b64decode(text), "big", signed=True)


def test_the_model_types_fetched_values_as_python_oracledb(model_path: Path) -> None:
    conn = dbapi.connect(user="u", dsn=str(model_path))
    conn.cursor().execute('ALTER SESSION SET CONTAINER = "ORCLPDB1"')
    select = (
        'SELECT "WIDE", "FREE", "ID", "TSTZ", SYS_EXTRACT_UTC("TSTZ"), "NAME", "DATA" '
        'FROM "APP"."VALS" AS OF SCN :1'
    )
    cursor = conn.cursor()
    cursor.execute("SELECT CURRENT_SCN FROM V$DATABASE")
    scn = cursor.fetchall()[0][0]
    cursor.execute(select, [scn])
    wide, free, key, tstz, utc, name, data = cursor.fetchall()[0]
    # no handler: floats (digits lost), an int for scale 0, the zone's wall clock without it
    assert isinstance(wide, float) and Decimal(wide) != VALUES["WIDE"]
    assert isinstance(free, float) and isinstance(key, int)
    assert tstz == dt.datetime(2024, 1, 1, 1, 30, 0, 250000)
    assert utc == dt.datetime(2023, 12, 31, 23, 30, 0, 250000)
    assert (name, data) == (None, None)  # Oracle stores '' as NULL

    def exact(cursor: Any, metadata: Any) -> Any:
        if metadata.type_code is dbapi.DB_TYPE_NUMBER:
            return cursor.var(Decimal, arraysize=cursor.arraysize)
        return None

    conn.outputtypehandler = exact
    cursor.execute(select, [scn])
    wide, free, key, *_ = cursor.fetchall()[0]
    assert (wide, free, key) == (VALUES["WIDE"], VALUES["FREE"], Decimal(1))


def test_snapshot_and_redo_land_the_stored_values(model_path: Path, tmp_path: Path) -> None:
    snapshot = _land(model_path, tmp_path / "lake")
    with OracleModel.edit(model_path) as model:
        xid = model.begin()
        model.insert(xid, "APP", "VALS", {"ID": 2, **VALUES})
        model.commit(xid)
    rows = _land(model_path, tmp_path / "lake")
    assert [r["op"] for r in rows] == ["r", "c"]
    read, streamed = (r["after"] for r in rows)
    assert snapshot[0]["after"] == read
    assert {**read, "ID": 2} == streamed  # the snapshot's driver values = the redo's text
    assert read["TSTZ"] == "2023-12-31T23:30:00.250Z"
    assert _unscaled(read["WIDE"]) == 123456789012345678900123456789
    assert read["FREE"]["scale"] == 19
    assert _unscaled(read["FREE"]["value"]) == 1234567890123456789
    assert _unscaled(read["HUNDREDS"]) * 10**5 == VALUES["HUNDREDS"]
    assert (read["NAME"], read["DATA"]) == (None, None)


def test_negative_scale_numbers_are_declared_as_debezium_and_fit_silver(model_path: Path) -> None:
    source = _source(model_path)
    source.open(None)
    table = source._table("APP", "VALS")
    source.close()
    assert table is not None
    fields = {f["field"]: f for f in table.captured.row_schema["fields"]}
    hundreds = fields["HUNDREDS"]
    assert hundreds["name"] == "org.apache.kafka.connect.data.Decimal"
    assert hundreds["parameters"] == {"scale": "-5", "connect.decimal.precision": "20"}
    # 10^24 needs 25 digits: silver's column holds every value NUMBER(20,-5) can
    assert spark_type(hundreds) == DecimalType(25, 0)


def test_a_decimal_key_is_saved_as_the_int_it_was_before_the_handler() -> None:
    # an unconstrained NUMBER key arrives as Decimal now; offsets saved as ints must still match
    assert _key_value(Decimal("5")) == 5 and _key_value(7) == 7
    assert _key_value(Decimal("12.5")) == "12.5" and _key_value(Decimal("1E+40")) == "1E+40"
    assert _key_value(dt.datetime(2024, 1, 1)) == "2024-01-01 00:00:00"
