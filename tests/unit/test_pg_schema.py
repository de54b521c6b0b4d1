"""TableSchema, filters and key overrides of the PostgreSQL agent (no server)."""

from __future__ import annotations

import base64

import pytest

from capture.masking import ColumnMasker
from capture.pg_schema import CatalogColumn, KeyOverrides, TableFilter, TableSchema
from capture.pg_types import PgType, ValueConversionError, ValueHandling
from capture.pgoutput import UNCHANGED_TOAST, BinaryDatum
from pipeline.config import PostgresSourceConfig

pytestmark = pytest.mark.unit

COLUMNS = (
    CatalogColumn("id", 23, -1, not_null=True, in_primary_key=True, in_identity=True),
    CatalogColumn("email", 25, -1),
    CatalogColumn("body", 25, -1),
    CatalogColumn("blob", 17, -1),
    CatalogColumn("qty", 23, -1, not_null=True),
)


def table(
    *,
    columns: tuple[CatalogColumn, ...] = COLUMNS,
    identity: str = "d",
    column_filter: TableFilter | None = None,
    overrides: KeyOverrides | None = None,
    masker: ColumnMasker | None = None,
) -> TableSchema:
    return TableSchema(
        "srv",
        "public",
        "t",
        columns,
        identity,
        handling=ValueHandling(),
        lookup=None,
        column_filter=column_filter or TableFilter(),
        key_overrides=overrides or KeyOverrides(),
        masker=masker,
        placeholder="__debezium_unavailable_value",
        with_transaction=False,
    )


def test_rows_keys_and_schemas() -> None:
    ts = table()
    values = ("7", "a@x", None, "\\x01", "3")
    assert ts.row(values) == {"id": 7, "email": "a@x", "body": None, "blob": "AQ==", "qty": 3}
    assert ts.key(values) == {"id": 7}
    assert ts.key_schema == {
        "type": "struct",
        "fields": [{"type": "int32", "optional": False, "field": "id"}],
        "optional": False,
        "name": "srv.public.t.Key",
    }
    fields = {f["field"]: f["optional"] for f in ts.row_schema["fields"]}
    assert fields == {"id": False, "email": True, "body": True, "blob": True, "qty": False}
    assert ts.envelope_schema["name"] == "srv.public.t.Envelope"
    assert ts.topic == "srv.public.t" and ts.collection == "public.t"


def test_unchanged_toast_becomes_the_placeholder() -> None:
    ts = table()
    row = ts.row(("7", "a@x", UNCHANGED_TOAST, UNCHANGED_TOAST, "3"))
    assert row["body"] == "__debezium_unavailable_value"
    assert base64.b64decode(row["blob"]) == b"__debezium_unavailable_value"


def test_identity_and_key_only_images() -> None:
    ts = table()
    assert ts.identity_row(("7", None, None, None, None)) == {"id": 7}
    assert ts.key_only_row({"id": 7}) == {"id": 7}
    assert ts.key_only_row(None) is None


def test_conversion_errors_name_the_column() -> None:
    ts = table()
    with pytest.raises(ValueConversionError, match=r"public\.t\.qty \(int4\)"):
        ts.row(("7", None, None, None, "not a number"))
    with pytest.raises(ValueConversionError, match="binary-format"):
        ts.row((BinaryDatum(b"\x00"), None, None, None, "1"))


def test_column_filters_keep_key_columns() -> None:
    ts = table(column_filter=TableFilter(column_exclude=(r"public\.t\.(id|email)",)))
    assert ts.row(("7", "a@x", None, None, "3")) == {"id": 7, "body": None, "blob": None, "qty": 3}
    ts = table(column_filter=TableFilter(column_include=(r"public\.t\.qty",)))
    assert ts.row(("7", "a@x", None, None, "3")) == {"id": 7, "qty": 3}


def test_key_sources() -> None:
    keyless = tuple(
        CatalogColumn(c.name, c.type_oid, c.type_modifier, c.not_null, False, False)
        for c in COLUMNS
    )
    assert table(columns=keyless).key(("7", "a", None, None, "3")) is None
    assert table(columns=keyless).key_schema is None
    by_index = tuple(
        CatalogColumn(c.name, c.type_oid, c.type_modifier, c.not_null, False, c.name == "email")
        for c in COLUMNS
    )
    assert table(columns=by_index, identity="i").key(("7", "a", None, None, "3")) == {"email": "a"}
    overrides = KeyOverrides.parse(r"public\.t:email,qty;other\.x:y")
    ts = table(columns=keyless, overrides=overrides)
    assert ts.key(("7", "a", None, None, "3")) == {"email": "a", "qty": 3}
    assert overrides.columns_for("other.x") == ("y",) and overrides.columns_for("no.pe") is None


def test_table_filter() -> None:
    f = TableFilter(schema_include=("app",), table_exclude=(r"app\.audit_.*",))
    assert f.table("app", "orders") and not f.table("app", "audit_log")
    assert not f.table("other", "orders") and not f.table("pg_catalog", "pg_class")
    assert TableFilter().table("public", "t") and not TableFilter().table("information_schema", "x")
    assert TableFilter(table_include=(r"PUBLIC\.T",)).table("public", "t")  # any case


def test_masks_apply_to_row_images() -> None:
    config = PostgresSourceConfig.model_validate(
        {
            "name": "pg",
            "connector": "postgresql",
            "database.hostname": "h",
            "database.user": "u",
            "database.dbname": "d",
            "column.mask.with.4.chars": r"public\.t\.email",
            "column.truncate.to.2.chars": r"public\.t\.body",
        }
    )
    ts = table(masker=ColumnMasker.from_source(config))
    row = ts.row(("7", "a@x.org", "long text", None, "3"))
    assert row["email"] == "****" and row["body"] == "lo"


def test_enum_type_through_lookup() -> None:
    mood = PgType(90100, "mood", "public", typtype="e", enum_labels=("a", "b"))
    ts = TableSchema(
        "srv",
        "public",
        "m",
        (CatalogColumn("m", 90100, -1),),
        "f",
        handling=ValueHandling(),
        lookup={90100: mood}.get,
        column_filter=TableFilter(),
        key_overrides=KeyOverrides(),
        masker=None,
        placeholder="x",
        with_transaction=True,
    )
    assert ts.row(("b",)) == {"m": "b"}
    assert any(f["field"] == "transaction" for f in ts.envelope_schema["fields"])
