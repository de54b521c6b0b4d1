"""The Oracle LogMiner model and its DB-API stand-in behave as Oracle's documentation says.

The Oracle agent is verified against this model, so the model is checked on its own: LogMiner's
session rules and errors (Database Utilities, "Using LogMiner"; error messages ORA-01284,
ORA-01291, ORA-01292, ORA-01306), ``V$LOGMNR_CONTENTS`` rows (``CSF`` continuations, ``RS_ID``,
START/COMMIT/ROLLBACK rows, ``ROLLBACK = 1`` undo rows on the same ``ROW_ID``), online log groups
reused after a switch, and flashback reads (ORA-08181, ORA-01555).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from tests.oraclemodel import dbapi
from tests.oraclemodel.database import Column, OracleModel

pytestmark = pytest.mark.unit

CONTENTS = (
    "SELECT SCN, SQL_REDO, OPERATION_CODE, XID, CSF, ROW_ID, ROLLBACK, RS_ID FROM "
    "V$LOGMNR_CONTENTS WHERE SCN > :1 AND SCN <= :2 AND (OPERATION_CODE IN (1, 2, 3, 6, 7, 36))"
)
ADD = (
    "BEGIN SYS.DBMS_LOGMNR.ADD_LOGFILE(LOGFILENAME => :1, OPTIONS => SYS.DBMS_LOGMNR.ADDFILE); END;"
)
START = (
    "BEGIN SYS.DBMS_LOGMNR.START_LOGMNR(STARTSCN => :1, ENDSCN => :2, OPTIONS => "
    "SYS.DBMS_LOGMNR.DICT_FROM_ONLINE_CATALOG); END;"
)


def _model(tmp_path: Path, **options: Any) -> tuple[Path, OracleModel]:
    model = OracleModel(**options)
    model.create_table("S", "T", [Column("ID", "NUMBER", 9, 0), Column("V", "VARCHAR2")], ["ID"])
    path = tmp_path / "m.model"
    model.save(path)
    return path, model


def _run(cursor: Any, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    cursor.execute(sql, list(params))
    rows: list[tuple[Any, ...]] = cursor.fetchall()
    return rows


def test_logminer_session_rules_and_errors(tmp_path: Path) -> None:
    path, _ = _model(tmp_path, log_rows=4)
    with OracleModel.edit(path) as model:
        for n in range(6):
            xid = model.begin()
            model.insert(xid, "S", "T", {"ID": n, "V": "x"})
            model.commit(xid)
        end = model.scn
        first = model.logs[0]
    cursor = dbapi.connect(user="u", dsn=str(path)).cursor()
    with pytest.raises(dbapi.DatabaseError, match="ORA-01306"):
        _run(cursor, CONTENTS, 0, end)
    with pytest.raises(dbapi.DatabaseError, match="ORA-01292"):
        _run(cursor, START, 0, end)
    with pytest.raises(dbapi.DatabaseError, match="ORA-01284: file /nope cannot be opened"):
        _run(cursor, ADD, "/nope")
    _run(cursor, ADD, first.archive_name)  # only the first log
    with pytest.raises(dbapi.DatabaseError, match="ORA-01291: missing logfile"):
        _run(cursor, START, first.first_change, end)
    _run(cursor, START, first.first_change, first.next_change - 1)
    rows = _run(cursor, CONTENTS, 0, first.next_change)
    assert rows and all(r[0] < first.next_change for r in rows)
    with pytest.raises(dbapi.DatabaseError, match="ORA-00900"):
        _run(cursor, "SELECT * FROM DUAL")


def test_contents_rows_as_logminer_prints_them(tmp_path: Path) -> None:
    path, _ = _model(tmp_path, redo_chunk=20)
    with OracleModel.edit(path) as model:
        start = model.scn
        xid = model.begin()
        model.insert(xid, "S", "T", {"ID": 1, "V": "it's a long value"})
        model.insert(xid, "S", "T", {"ID": 2, "V": "b"})
        model.rollback_statement(xid)
        model.commit(xid)
        other = model.begin()
        model.insert(other, "S", "T", {"ID": 3, "V": "c"})
        model.rollback(other)
        end = model.scn
        name = model.current_log(1).member
    cursor = dbapi.connect(user="u", dsn=str(path)).cursor()
    _run(cursor, ADD, name)
    _run(cursor, START, start + 1, end)
    rows = _run(cursor, CONTENTS, start, end)
    codes = [(r[2], r[6]) for r in rows if not r[4]]  # one per statement (CSF rows joined)
    assert codes == [(6, 0), (1, 0), (1, 0), (2, 1), (7, 0), (6, 0), (1, 0), (2, 1), (36, 0)]
    scn = next(r[0] for r in rows if r[1].startswith("insert"))
    first = "".join(r[1] for r in rows if r[0] == scn)
    assert first == 'insert into "S"."T"("ID","V") values (\'1\',\'it\'\'s a long value\');'
    assert [r[4] for r in rows if r[0] == scn] == [1] * (len(first) // 20) + [0]
    undo = next(r for r in rows if r[6] == 1)
    insert_2 = next(r for r in rows if r[0] == undo[0] - 1)  # the statement it undoes
    assert undo[5] == insert_2[5]  # the undo row names the ROW_ID it undoes
    undo_sql = "".join(r[1] for r in rows if r[0] == undo[0])
    assert undo_sql == 'delete from "S"."T" where "ID" = \'2\' and "V" = \'b\';'
    assert all(re.fullmatch(r" 0x[0-9a-f]{6}\.[0-9a-f]{8}\.[0-9a-f]{4} ", r[7]) for r in rows)
    assert {len(r[3]) for r in rows} == {8}  # XID is RAW(8)


def test_online_groups_are_reused_and_flashback_reads_committed_rows(tmp_path: Path) -> None:
    path, _ = _model(tmp_path, online_groups=2)
    with OracleModel.edit(path) as model:
        xid = model.begin()
        model.insert(xid, "S", "T", {"ID": 1, "V": "a"})
        at_insert = model.commit(xid)
        xid = model.begin()
        model.update(xid, "S", "T", {"ID": 1}, {"V": "b"})
        model.commit(xid)
        for _ in range(2):
            model.switch_log(1)
        first = model.logs[0]
        assert not first.online and first.archived  # its group now holds sequence 3
        assert model.logs[2].group == first.group
        model.undo_low_scn = at_insert
    cursor = dbapi.connect(user="u", dsn=str(path)).cursor()
    cursor.execute("ALTER SESSION SET CONTAINER = ORCLPDB1")
    flashback = 'SELECT "ID", "V" FROM "S"."T" AS OF SCN :1 ORDER BY "ID"'
    assert _run(cursor, flashback, at_insert) == [(1, "a")]
    with pytest.raises(dbapi.DatabaseError, match="ORA-01555: snapshot too old"):
        _run(cursor, flashback, at_insert - 1)
    with pytest.raises(dbapi.DatabaseError, match="ORA-08181"):
        _run(cursor, flashback, 10**12)


def test_the_dictionary_shows_integer_as_oracle_stores_it(tmp_path: Path) -> None:
    """``ALL_TAB_COLUMNS`` shows ``INTEGER`` as ``NUMBER`` with no precision and scale 0 (Oracle
    keeps it as ``NUMBER(*,0)``), which the agent maps to Debezium's ``Decimal(38,0)``."""
    from capture.oracle.types import OracleColumn, OracleHandling, column_type

    model = OracleModel()
    model.create_table("S", "N", [Column("ID", "INTEGER"), Column("X", "NUMBER")], ["ID"])
    path = tmp_path / "n.model"
    model.save(path)
    cursor = dbapi.connect(user="u", dsn=str(path)).cursor()
    _run(cursor, f"ALTER SESSION SET CONTAINER = {model.pdb}")
    rows = _run(
        cursor,
        "SELECT COLUMN_NAME, DATA_TYPE, DATA_PRECISION, DATA_SCALE, NULLABLE FROM ALL_TAB_COLUMNS "
        "WHERE OWNER = :1 AND TABLE_NAME = :2",
        "S",
        "N",
    )
    assert [row[:4] for row in rows] == [("ID", "NUMBER", None, 0), ("X", "NUMBER", None, None)]
    kinds = [
        column_type(OracleColumn(name, kind, precision, scale, True), OracleHandling())
        for name, kind, precision, scale, _nullable in rows
    ]
    assert [k.schema["name"] for k in kinds if k is not None] == [
        "org.apache.kafka.connect.data.Decimal",
        "io.debezium.data.VariableScaleDecimal",
    ]
