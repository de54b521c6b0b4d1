"""The Oracle agent's pure parts: the ``SQL_REDO`` parser, value conversions, the transaction
buffer.

The parser corpus is the statement forms of Oracle's LogMiner documentation (Database
Utilities, "Using LogMiner to Analyze Redo Log Files", examples of ``SQL_REDO``) and of the seed
Oracle document; the property test renders random rows the way the Oracle model prints them
(``tests/oraclemodel``) and checks that parsing gives the same Debezium values as the driver's
Python values do.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import replace
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter, ValidationError

from capture.oracle.buffer import MinedChange, TxBuffer
from capture.oracle.ddl import DdlChange, apply_ddl, parse_ddl
from capture.oracle.redo import (
    LobErase,
    LobTrim,
    LobWrite,
    RedoFunction,
    RedoParseError,
    parse_lob_locator,
    parse_lob_operation,
    parse_redo,
)
from capture.oracle.settings import OracleSettings
from capture.oracle.types import OracleColumn, OracleHandling, column_type, redo_python
from pipeline.config import SourceConfig
from tests.oraclemodel.database import Column, render

pytestmark = pytest.mark.unit


def test_the_documented_statement_forms() -> None:
    # Oracle Database Utilities, LogMiner examples (with NO_ROWID_IN_STMT off: a ROWID term)
    insert = parse_redo(
        'insert into "HR"."JOBS"("JOB_ID","JOB_TITLE","MIN_SALARY","MAX_SALARY") '
        "values ('IT_WT','Technical Writer','4000','11000');"
    )
    assert (insert.op, insert.owner, insert.table) == ("insert", "HR", "JOBS")
    assert insert.after() == {
        "JOB_ID": "IT_WT",
        "JOB_TITLE": "Technical Writer",
        "MIN_SALARY": "4000",
        "MAX_SALARY": "11000",
    }
    update = parse_redo(
        'update "HR"."JOBS" set "MIN_SALARY" = \'5000\' where "JOB_ID" = \'IT_WT\' and '
        "\"MIN_SALARY\" = '4000' and ROWID = 'AAAHSeAABAAAY+CAAX';"
    )
    assert update.old == {"JOB_ID": "IT_WT", "MIN_SALARY": "4000"}  # ROWID is not a column
    assert update.after() == {"JOB_ID": "IT_WT", "MIN_SALARY": "5000"}
    delete = parse_redo(
        'delete from "OE"."ORDERS" where "ORDER_ID" = \'2413\' and "ORDER_MODE" = \'direct\' '
        'and "CUSTOMER_ID" = \'101\' and "SALES_REP_ID" IS NULL;'
    )
    assert delete.op == "delete" and delete.old["SALES_REP_ID"] is None


def test_quoting_functions_and_placeholders() -> None:
    statement = parse_redo(
        'insert into "Mixed ""Case"""."t"("a","b","c","d","e","f","g") values '
        "('it''s','a;b'')',NULL,TO_DATE('2003-07-25 14:10:00', 'YYYY-MM-DD HH24:MI:SS'),"
        "HEXTORAW('0aff'),EMPTY_CLOB(),UNISTR('caf\\00e9'));"
    )
    assert (statement.owner, statement.table) == ('Mixed "Case"', "t")
    values = {k: redo_python(v) for k, v in statement.new.items()}
    assert values == {
        "a": "it's",
        "b": "a;b')",
        "c": None,
        "d": dt.datetime(2003, 7, 25, 14, 10),
        "e": b"\x0a\xff",
        "f": "",
        "g": "café",
    }
    stamp = parse_redo(
        'update "S"."T" set "X" = TO_TIMESTAMP(\'2020-02-01 00:00:00.\') where "I" = \'1\';'
    )
    assert redo_python(stamp.new["X"]) == dt.datetime(2020, 2, 1)
    assert stamp.new["X"] == RedoFunction("TO_TIMESTAMP", ("2020-02-01 00:00:00.",))


@pytest.mark.parametrize(
    ("sql", "wanted"),
    [
        ("Unsupported", "insert, update or delete"),
        ('insert into "S"."T"("A","B") values (\'1\');', "names 2 columns and 1 values"),
        ('insert into "S"."T"("A") values (\'1);', "closing '"),
        ('delete from "S"."T" where "A" = \'1\' or "B" = \'2\';', "end of the statement"),
    ],
)
def test_what_is_not_a_logminer_statement_is_an_error_naming_where(sql: str, wanted: str) -> None:
    with pytest.raises(RedoParseError, match=wanted):
        parse_redo(sql)


def _type(data_type: str, precision: int | None = None, scale: int | None = None) -> Any:
    converted = column_type(OracleColumn("C", data_type, precision, scale, True), OracleHandling())
    assert converted is not None
    return converted


def test_number_widths_follow_the_document() -> None:
    # NUMBER(P,S<=0): INT8 (P-S<3), INT16 (<5), INT32 (<10), INT64 (<19), else Decimal
    cases = [
        (2, 0, "int8"),
        (4, 0, "int16"),
        (9, 0, "int32"),
        (18, 0, "int64"),
        (3, -1, "int16"),
        (3, -2, "int32"),
    ]
    for precision, scale, kind in cases:
        assert _type("NUMBER", precision, scale).schema["type"] == kind
    assert _type("NUMBER", 19, 0).schema["name"] == "org.apache.kafka.connect.data.Decimal"
    assert _type("NUMBER", 10, 2).convert("12.5") == "BOI="  # 1250 at scale 2
    assert _type("NUMBER").schema["name"] == "io.debezium.data.VariableScaleDecimal"
    assert _type("NUMBER").convert("1.25") == {"scale": 2, "value": "fQ=="}
    # INTEGER as ALL_TAB_COLUMNS shows it: NUMBER, no precision, scale 0 (Decimal(38,0) in Debezium)
    integer = _type("NUMBER", None, 0)
    assert integer.schema["name"] == "org.apache.kafka.connect.data.Decimal"
    assert integer.schema["parameters"]["scale"] == "0"
    assert integer.convert("-12") == _type("NUMBER", 38, 0).convert("-12")
    assert _type("DATE").convert(dt.datetime(2021, 1, 2)) == 18629 * 86_400_000
    assert _type("TIMESTAMP(9)").schema["name"] == "io.debezium.time.NanoTimestamp"
    assert column_type(OracleColumn("C", "BFILE", None, None, True), OracleHandling()) is None
    ym = _type("INTERVAL YEAR(2) TO MONTH")
    assert ym.schema["name"] == "io.debezium.time.MicroDuration"
    assert ym.convert(redo_python(RedoFunction("TO_YMINTERVAL", ("+01-02",)))) == round(
        14 * 86_400_000_000 * 365.25 / 12
    )
    ds = redo_python(RedoFunction("TO_DSINTERVAL", ("-01 02:03:04.5",)))
    assert _type("INTERVAL DAY(2) TO SECOND(6)").convert(ds) == -(93_784_500_000)


@pytest.mark.parametrize(
    ("data_type", "redo", "text"),
    [
        ("INTERVAL YEAR(2) TO MONTH", ("TO_YMINTERVAL", "+01-02"), "P1Y2M0DT0H0M0S"),
        ("INTERVAL YEAR(2) TO MONTH", ("TO_YMINTERVAL", "-01-02"), "P-1Y-2M0DT0H0M0S"),
        ("INTERVAL YEAR(2) TO MONTH", ("TO_YMINTERVAL", "+00-00"), "P0Y0M0DT0H0M0S"),
        ("INTERVAL DAY(2) TO SECOND(6)", ("TO_DSINTERVAL", "+01 02:03:04.5"), "P0Y0M1DT2H3M4.5S"),
        (
            "INTERVAL DAY(2) TO SECOND(6)",
            ("TO_DSINTERVAL", "-01 02:03:04.5"),
            "P0Y0M-1DT-2H-3M-4.5S",
        ),
        (
            "INTERVAL DAY(2) TO SECOND(6)",
            ("TO_DSINTERVAL", "+00 00:00:00.000001"),
            "P0Y0M0DT0H0M0.000001S",
        ),
    ],
)
def test_interval_handling_mode_string_is_exact_iso_text(
    data_type: str, redo: tuple[str, str], text: str
) -> None:
    """``interval.handling.mode=string`` (seed 002): ``io.debezium.time.Interval``, months and
    days kept apart (MicroDuration counts a month as 365.25 / 12 days)."""
    column = OracleColumn("C", data_type, None, None, True)
    converted = column_type(column, OracleHandling(interval="string"))
    assert converted is not None
    assert converted.schema["name"] == "io.debezium.time.Interval"
    assert converted.schema["type"] == "string"
    assert converted.convert(redo_python(RedoFunction(redo[0], (redo[1],)))) == text


def test_interval_handling_mode_is_a_config_key() -> None:
    raw = {"name": "ora", "connector": "oracle", "topic.prefix": "p", "database.user": "u"}
    raw |= {"database.password": "x", "database.dbname": "ORCLCDB", "database.hostname": "h"}
    for extra, mode in (({}, "numeric"), ({"interval.handling.mode": "string"}, "string")):
        config = TypeAdapter(SourceConfig).validate_python({**raw, **extra})
        assert OracleSettings.from_config(config).handling.interval == mode
    with pytest.raises(ValidationError, match="interval.handling.mode"):
        TypeAdapter(SourceConfig).validate_python({**raw, "interval.handling.mode": "iso"})


COLUMNS = [
    Column("N", "NUMBER", 18, 0),
    Column("D", "NUMBER", 12, 3),
    Column("V", "VARCHAR2"),
    Column("NV", "NVARCHAR2"),
    Column("DT", "DATE"),
    Column("TS", "TIMESTAMP(6)"),
    Column("R", "RAW"),
    Column("DS", "INTERVAL DAY(9) TO SECOND(6)"),
    Column("YM", "INTERVAL YEAR(9) TO MONTH"),
]
VALUES = {
    "N": st.integers(-(10**17), 10**17),
    "D": st.decimals(-(10**8), 10**8, places=3, allow_nan=False, allow_infinity=False),
    "V": st.text(st.characters(exclude_categories=["Cs"]), max_size=30),
    "NV": st.text(st.characters(exclude_categories=["Cs"]), max_size=12),
    "DT": st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)).map(
        lambda d: d.replace(microsecond=0)
    ),
    "TS": st.datetimes(dt.datetime(1, 1, 1), dt.datetime(9999, 12, 31)),
    "R": st.binary(max_size=16),
    "DS": st.timedeltas(dt.timedelta(days=-99_999), dt.timedelta(days=99_999)),
    "YM": st.tuples(st.integers(0, 9999), st.integers(0, 11)).flatmap(
        lambda ym: st.sampled_from([ym, (-ym[0], -ym[1])])
    ),
}


@settings(max_examples=80, deadline=None)
@given(st.fixed_dictionaries({k: st.none() | v for k, v in VALUES.items()}))
def test_rendered_rows_parse_back_to_the_same_values(row: dict[str, Any]) -> None:
    names = ",".join(f'"{c.name}"' for c in COLUMNS)
    values = ",".join(render(c, row[c.name]) for c in COLUMNS)
    statement = parse_redo(f'insert into "S"."T"({names}) values ({values});')
    for column in COLUMNS:
        converted = _type(column.data_type, column.precision, column.scale)
        parsed = redo_python(statement.new[column.name])
        expected = row[column.name]
        if expected is None:
            assert parsed is None
            continue
        if isinstance(expected, Decimal):
            expected = expected.quantize(Decimal("0.001"))
        assert converted.convert(parsed) == converted.convert(expected), column.name


def _change(index: int, row_id: str) -> MinedChange:
    return MinedChange(index, None, 0, 1, "S", "T", f"sql {index}", row_id, 0, 1, None)


def test_a_large_transaction_spills_and_undoes_by_row_id() -> None:
    buffer = TxBuffer("0A00", 10, spill_events=4)
    for index in range(10):
        buffer.add(_change(index, f"r{index % 3}"))
    assert buffer.spilled
    assert buffer.undo("r0")  # the latest r0 change (index 9), in memory
    assert buffer.undo("r1")  # index 7: in memory after the second spill
    assert buffer.undo("r1")  # index 4: on disk
    assert not buffer.undo("nope")
    assert [c.scn for c in buffer.changes()] == [0, 1, 2, 3, 5, 6, 8]
    assert len(buffer) == 7
    buffer.close()


def test_the_connect_string() -> None:
    from capture.oracle.settings import OracleSettings

    easy = OracleSettings("db.example", 1522, "u", "ORCLCDB")
    assert easy.dsn == "db.example:1522/ORCLCDB"
    rac = (
        "(DESCRIPTION=(ADDRESS_LIST=(ADDRESS=(PROTOCOL=TCP)(HOST=n1)(PORT=1521)))"
        "(CONNECT_DATA=(SERVICE_NAME=S)))"
    )
    jdbc = OracleSettings("", 1521, "u", "ORCLCDB", url=f"jdbc:oracle:thin:@{rac}")
    assert jdbc.dsn == rac


LOB_BLOCK = (
    "DECLARE \n loc_c CLOB; \n buf_c VARCHAR2(6426); \n loc_b BLOB; \n buf_b RAW(6426); \n"
    " loc_nc NCLOB; \n buf_nc NVARCHAR2(6426); \nBEGIN\n"
)


def test_the_lob_row_forms() -> None:
    # Debezium's SelectLobParserTest (DBZ-2948): the SEL_LOB_LOCATOR block
    locator = parse_lob_locator(
        LOB_BLOCK + ' select "CLOB_COL" into loc_c from "DEBEZIUM"."BIG_TABLE" where '
        '"ID" = \'651900002\' and "NAME" = \'person number 651900002\' and "TD" = '
        "TO_DATE('15-MAY-21', 'DD-MON-RR') and \"FLAG\" IS NULL for update;"
    )
    assert (locator.owner, locator.table, locator.column, locator.binary) == (
        "DEBEZIUM",
        "BIG_TABLE",
        "CLOB_COL",
        False,
    )
    assert locator.where["ID"] == "651900002" and locator.where["FLAG"] is None
    assert locator.where["TD"] == RedoFunction("TO_DATE", ("15-MAY-21", "DD-MON-RR"))
    blob = parse_lob_locator(
        LOB_BLOCK + ' select "B" into loc_b from "S"."T" where "ID" = \'2\' for update;'
    )
    assert blob.binary and blob.column == "B"
    # LOB_WRITE as Debezium's LobWriteParser reads it: 1-based offsets, '' an escaped quote
    write = parse_lob_operation(" buf_c := 'it''s; (x)'; \n  dbms_lob.write(loc_c, 9, 5, buf_c);")
    assert write == LobWrite(4, 9, "it's; (x)")
    raw = parse_lob_operation(" buf_b := HEXTORAW('00ff'); dbms_lob.write(loc_b, 2, 1, buf_b);")
    assert raw == LobWrite(0, 2, b"\x00\xff")
    assert parse_lob_operation(" dbms_lob.trim(loc_c, 20);") == LobTrim(20)
    assert parse_lob_operation("dbms_lob.erase(loc_b, 4, 3);") == LobErase(2, 4)
    with pytest.raises(RedoParseError, match="dbms_lob.write/trim/erase"):
        parse_lob_operation("begin null; end;")
    with pytest.raises(RedoParseError, match="loc_c, loc_b or loc_nc"):
        parse_lob_locator('select "A" into x from "S"."T" for update;')


def test_the_ddl_forms_that_change_columns() -> None:
    # the seed document's CREATE TABLE (schema-change example), as Oracle prints it
    create = parse_ddl(
        'CREATE TABLE "DEBEZIUM"."CUSTOMERS" \n ( "ID" NUMBER(9,0) NOT NULL ENABLE, \n '
        '"FIRST_NAME" VARCHAR2(255), \n "T" TIMESTAMP(3) WITH LOCAL TIME ZONE, "I" INTERVAL '
        'DAY(3) TO SECOND(2), "Y" INTEGER, "D" DATE DEFAULT SYSDATE, \n PRIMARY KEY ("ID") '
        "ENABLE, \n SUPPLEMENTAL LOG DATA (ALL) COLUMNS\n ) SEGMENT CREATION IMMEDIATE \n "
        'PCTFREE 10 TABLESPACE "USERS" ',
        "X",
    )
    assert create is not None and (create.kind, create.owner, create.key) == (
        "CREATE",
        "DEBEZIUM",
        ["ID"],
    )
    assert create.columns == [
        OracleColumn("ID", "NUMBER", 9, 0, False),
        OracleColumn("FIRST_NAME", "VARCHAR2", None, None, True, 255),
        OracleColumn("T", "TIMESTAMP(3) WITH LOCAL TIME ZONE", None, None, True),
        OracleColumn("I", "INTERVAL DAY(3) TO SECOND(2)", None, None, True),
        OracleColumn("Y", "NUMBER", 38, 0, True),
        OracleColumn("D", "DATE", None, None, True, default="SYSDATE"),
    ]
    add = parse_ddl("ALTER TABLE customers ADD (phone varchar2(20 char) default 'x' not null)", "S")
    assert add is not None
    assert add.add == [OracleColumn("PHONE", "VARCHAR2", None, None, False, 20, "'x'")]
    columns = [OracleColumn("ID", "NUMBER", 9, 0, False), *add.add]
    modify = parse_ddl("alter table customers modify phone null", "S")
    assert modify is not None
    assert apply_ddl(columns, ["ID"], modify)[0][1] == replace(add.add[0], nullable=True)
    modify = parse_ddl("alter table customers modify (phone default -1.5)", "S")
    assert modify is not None
    assert apply_ddl(columns, ["ID"], modify)[0][1].default == "-1.5"
    rename = parse_ddl('alter table "S"."CUSTOMERS" rename column phone to "tel"', "S")
    assert rename is not None and apply_ddl(columns, ["ID"], rename)[0][1].name == "tel"
    drop = parse_ddl("alter table customers drop (phone)", "S")
    assert drop is not None and apply_ddl(columns, ["ID"], drop) == (columns[:1], ["ID"])
    assert parse_ddl("drop table customers purge", "S") == DdlChange("DROP", "S", "CUSTOMERS")
    assert parse_ddl("create index i on customers(id)", "S") is None
    assert parse_ddl("alter table t add constraint pk primary key (id)", "S") is None
    with pytest.raises(RedoParseError, match="DDL: expected"):
        parse_ddl("alter table t add (c number(", "S")
