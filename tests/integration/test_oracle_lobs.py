"""CLOB/NCLOB/BLOB columns (``lob.enabled``) against the Oracle LogMiner model.

The model writes a LOB as LogMiner shows it: ``EMPTY_CLOB()``/``EMPTY_BLOB()`` in the DML row,
then ``SEL_LOB_LOCATOR`` and ``LOB_WRITE`` rows (``LOB_TRIM``/``LOB_ERASE`` for
``DBMS_LOB.TRIM``/``ERASE``), and never a LOB column in a ``where`` list. The agent assembles
the value within the transaction; a LOB it does not see is the unavailable-value placeholder.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bronze import schema as S
from capture.oracle.agent import DBAPI_ENV
from tests.contract.harness import quarantined
from tests.integration.test_oracle_capture import Corner
from tests.oraclemodel.database import Column, OracleModel

pytestmark = pytest.mark.delta

PLACEHOLDER = "__debezium_unavailable_value"
PLACEHOLDER_B64 = base64.b64encode(PLACEHOLDER.encode()).decode()
DOCS = [
    Column("ID", "NUMBER", 9, 0, nullable=False),
    Column("TITLE", "VARCHAR2"),
    Column("BODY", "CLOB"),
    Column("DATA", "BLOB"),
    Column("NOTE", "NCLOB"),
]
LONG_TEXT = "It's a long text, written in pieces; " * 3  # quotes and semicolons included
LONG_BYTES = bytes(range(40))
LOBS: dict[str, Any] = {"lob.enabled": True}


@pytest.fixture
def docs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Corner]:
    monkeypatch.setenv(DBAPI_ENV, "tests.oraclemodel.dbapi")
    # small LOB_WRITE pieces and SQL_REDO rows: values span many LOB_WRITE and CSF rows
    model = OracleModel(threads=2, redo_chunk=50, log_rows=12, lob_chunk=16)
    model.create_table("DEBEZIUM", "DOCS", DOCS, ["ID"])
    model.save(tmp_path / "db.model")
    yield Corner(tmp_path / "db.model", tmp_path / "lake")


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _data(corner: Corner) -> list[tuple[str, Any, Any]]:
    return [(r["op"], r["before"], r["after"]) for r in corner.records()]


def test_lob_values_are_assembled_from_the_lob_rows_of_their_transaction(docs: Corner) -> None:
    with docs.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "DOCS", {"ID": 1, "TITLE": "a", "BODY": "snap"})
        model.commit(xid)
    docs.land(docs.source(**LOBS))  # the snapshot reads LOBs AS OF SCN
    with docs.edit() as model:
        xid = model.begin(thread=2)
        model.insert(
            xid,
            "DEBEZIUM",
            "DOCS",
            {"ID": 2, "TITLE": "b", "BODY": LONG_TEXT, "DATA": LONG_BYTES, "NOTE": "é"},
        )
        model.lob_trim(xid, "DEBEZIUM", "DOCS", {"ID": 2}, "BODY", 20)  # known: applied
        model.lob_erase(xid, "DEBEZIUM", "DOCS", {"ID": 2}, "DATA", (4, 3))
        model.insert(xid, "DEBEZIUM", "DOCS", {"ID": 3, "BODY": "", "DATA": None})
        model.insert(xid, "DEBEZIUM", "DOCS", {"ID": 4, "BODY": "rolled back"})
        model.rollback_statement(xid)  # ROLLBACK = 1 undoes the insert and its LOB rows
        model.commit(xid)
        xid = model.begin()
        model.update(xid, "DEBEZIUM", "DOCS", {"ID": 1}, {"TITLE": "a2"})  # LOBs unchanged
        model.update(xid, "DEBEZIUM", "DOCS", {"ID": 2}, {"BODY": "new body"})
        model.commit(xid)
        xid = model.begin()
        model.delete(xid, "DEBEZIUM", "DOCS", {"ID": 3})
        model.commit(xid)
        truth = {r["ID"]: r for r in model.committed_rows("DEBEZIUM", "DOCS")}
    docs.land(docs.source(**LOBS))
    snapshot, insert2, insert3, title, body, delete = _data(docs)
    assert snapshot == (
        "r",
        None,
        {"ID": 1, "TITLE": "a", "BODY": "snap", "DATA": None, "NOTE": None},
    )
    erased = LONG_BYTES[:2] + b"\0" * 4 + LONG_BYTES[6:]
    assert truth[2]["DATA"] == erased and truth[2]["BODY"] == "new body"
    assert insert2 == (
        "c",
        None,
        {"ID": 2, "TITLE": "b", "BODY": LONG_TEXT[:20], "DATA": _b64(erased), "NOTE": "é"},
    )
    assert insert3 == ("c", None, {"ID": 3, "TITLE": None, "BODY": "", "DATA": None, "NOTE": None})
    # an update that does not write the LOBs: they are not in the redo (seed document)
    unchanged = {"BODY": PLACEHOLDER, "DATA": PLACEHOLDER_B64, "NOTE": PLACEHOLDER}
    assert title == (
        "u",
        {"ID": 1, "TITLE": "a", **unchanged},
        {"ID": 1, "TITLE": "a2", **unchanged},
    )
    # a LOB update: after = the value, before = the placeholder
    assert body[0] == "u" and body[1]["BODY"] == PLACEHOLDER
    assert body[2] == {"ID": 2, "TITLE": "b", **unchanged, "BODY": "new body"}
    assert delete == ("d", {"ID": 3, "TITLE": None, **unchanged}, None)
    assert quarantined(docs.lake) == []


def test_a_locator_write_to_a_lob_of_an_earlier_transaction_is_quarantined(docs: Corner) -> None:
    docs.land(docs.source(**LOBS))
    with docs.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "DOCS", {"ID": 1, "BODY": "0123456789"})
        model.commit(xid)
        xid = model.begin()
        model.lob_write(xid, "DEBEZIUM", "DOCS", {"ID": 1}, "BODY", "AB", 3)  # 01AB456789
        model.insert(xid, "DEBEZIUM", "DOCS", {"ID": 2, "BODY": "after"})
        model.commit(xid)
    docs.land(docs.source(**LOBS))
    assert [(op, after["ID"], after["BODY"]) for op, _, after in _data(docs)] == [
        ("c", 1, "0123456789"),
        ("c", 2, "after"),  # the rest of the transaction is landed
    ]
    (row,) = quarantined(docs.lake)
    assert "DEBEZIUM.DOCS.BODY: LobWrite at SCN" in row[S.REASON]
    assert "content before it is not in the transaction" in row[S.REASON]


def test_without_lob_enabled_the_lob_columns_are_left_out(
    docs: Corner, caplog: pytest.LogCaptureFixture
) -> None:
    docs.land()
    with docs.edit() as model:
        xid = model.begin()
        model.insert(xid, "DEBEZIUM", "DOCS", {"ID": 1, "TITLE": "t", "BODY": LONG_TEXT})
        model.update(xid, "DEBEZIUM", "DOCS", {"ID": 1}, {"BODY": "x", "TITLE": "u"})
        model.commit(xid)
    caplog.set_level("WARNING", "capture.oracle.agent")
    docs.land()
    assert _data(docs) == [
        ("c", None, {"ID": 1, "TITLE": "t"}),
        ("u", {"ID": 1, "TITLE": "t"}, {"ID": 1, "TITLE": "u"}),
    ]
    assert "DEBEZIUM.DOCS.BODY: type CLOB is not captured" in caplog.text
    assert quarantined(docs.lake) == []
