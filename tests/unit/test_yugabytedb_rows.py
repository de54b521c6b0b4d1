"""YugabyteDB's row images and read-ahead stream, without a server."""

from __future__ import annotations

from typing import Any

import pytest

from capture.captured_table import CatalogColumn, KeyOverrides, TableFilter
from capture.postgresql.pgoutput import UNCHANGED_TOAST
from capture.postgresql.types import ValueHandling
from capture.yugabytedb.yboutput import YbTableSchema, YbWrappedTableSchema
from silver.types import unwrap_set
from tests.unit.test_masking import hash_rule
from tests.ybmodel.agent import ModelStream
from tests.ybmodel.vwal import INT4_OID, TEXT_OID, Table, YbModel

pytestmark = pytest.mark.unit

COLUMNS = [
    CatalogColumn("id", INT4_OID, -1, not_null=True, in_primary_key=True, in_identity=True),
    CatalogColumn("name", TEXT_OID, -1),
    CatalogColumn("email", TEXT_OID, -1),
]


def table(cls: type[YbTableSchema], masker: Any = None) -> YbTableSchema:
    return cls(
        "dbserver",
        "public",
        "t",
        COLUMNS,
        "c",
        handling=ValueHandling(),
        lookup=None,
        column_filter=TableFilter(),
        key_overrides=KeyOverrides(),
        masker=masker,
        placeholder="__debezium_unavailable_value",
        with_transaction=True,
    )


def test_yboutput_rows_are_wrapped_and_unsent_columns_are_null() -> None:
    t = table(YbWrappedTableSchema)
    after, key = t.row_and_key(["1", None, UNCHANGED_TOAST])
    assert key == {"id": 1}
    assert after == {
        "id": {"value": 1, "set": True},
        "name": {"value": None, "set": True},
        "email": None,
    }
    assert t.identity_row(["1", None, None]) == {
        "id": {"value": 1, "set": True},
        "name": None,
        "email": None,
    }
    assert t.key_only_row({"id": 1}) is None  # an update has no before under CHANGE/DEFAULT
    fields = {f["field"]: f for f in t.row_schema["fields"]}
    assert unwrap_set(fields["name"]) == {"type": "string", "optional": True, "field": "name"}
    envelope = {f["field"]: f for f in t.envelope_schema["fields"]}
    assert "transaction" in envelope and envelope["after"]["fields"] == t.row_schema["fields"]


def test_masks_apply_to_sent_values_only() -> None:
    from capture.masking import ColumnMasker

    t = table(YbWrappedTableSchema, ColumnMasker([hash_rule(r"public\.t\.email")]))
    after = t.row(["1", "n", UNCHANGED_TOAST])
    assert after["email"] is None
    masked = t.row(["1", "n", "ann@example.com"])["email"]
    assert masked["set"] is True and masked["value"] != "ann@example.com"


def test_pgoutput_rows_are_plain() -> None:
    t = table(YbTableSchema)
    assert t.row(["1", "n", "e"]) == {"id": 1, "name": "n", "email": "e"}
    assert t.key_only_row({"id": 1}) is None


class _Conn:
    closed = False

    def close(self) -> None:
        self.closed = True


def test_read_ahead_finds_the_end_and_keeps_what_it_read() -> None:
    model = YbModel(tablets=2)
    model.create_table(Table("public", "t", 1, (("id", INT4_OID), ("a", INT4_OID)), ("id",), "d"))
    model.create_slot("s", "yboutput", "SEQUENCE")
    for i in range(3):
        model.commit([("insert", "t", {"id": i, "a": i}), ("insert", "t", {"id": 10 + i, "a": 0})])

    class Bound(ModelStream):
        pass

    Bound.model = model
    stream = Bound(_Conn(), "yb")
    stream.start("s", 0, "p", messages=False)
    end = stream.wal_end(1)
    assert end == 13  # 3 transactions of BEGIN, 2 changes, COMMIT: LSNs 2..13 after the slot's 1
    pending = len(stream._pending)
    assert stream.wal_end(1) == end and len(stream._pending) == pending  # nothing read twice
    kinds = []
    while (data := stream.read(0.01)) is not None:
        kinds.append(data[:1])
    assert kinds[-1] == b"k" and kinds.count(b"w") == 3 * 4 + 1  # + one Relation message


def test_tservers_of_different_ports_are_refused() -> None:
    from capture.yugabytedb.settings import tservers
    from pipeline.errors import CaptureError

    assert tservers("a:5433, b", 5433) == ("a,b", 5433)
    assert tservers("::1", 5433) == ("::1", 5433)
    assert tservers("[::1]:5434", 5433) == ("::1", 5434)
    with pytest.raises(CaptureError, match="different ports"):
        tservers("a:5433,b:5434", 5433)
