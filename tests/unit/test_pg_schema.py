"""TableSchema, filters and key overrides of the PostgreSQL agent (no server)."""

from __future__ import annotations

import base64
from typing import Any

import orjson
import pytest

from bronze.envelope import ConnectRecord
from capture.captured_table import HEADER_UNREPRESENTABLE, UNREPRODUCIBLE_PARAMETER
from capture.change_records import data_record
from capture.column_types import ValueConversionError
from capture.masking import ColumnMasker
from capture.postgresql.config import PostgresSourceConfig
from capture.postgresql.pgoutput import UNCHANGED_TOAST, BinaryDatum
from capture.postgresql.schema import CatalogColumn, KeyOverrides, TableFilter, TableSchema
from capture.postgresql.types import PgType, ValueHandling

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


def masker(**rules: str) -> ColumnMasker:
    """The masker of a PostgreSQL source with these column rules (``key: columns``)."""
    base = {
        "name": "pg",
        "connector": "postgresql",
        "database.hostname": "h",
        "database.user": "u",
        "database.dbname": "d",
    }
    return ColumnMasker.from_source(PostgresSourceConfig.model_validate({**base, **rules}))


def test_masks_apply_to_row_images() -> None:
    ts = table(
        masker=masker(
            **{
                "column.mask.with.4.chars": r"public\.t\.email",
                "column.truncate.to.2.chars": r"public\.t\.body",
            }
        )
    )
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


# --- contract C1: a value without a representation is a null field plus a header ---------------

NUMERIC_10_2 = ((10 << 16) | 2) + 4


def numeric_table(masker: ColumnMasker | None = None) -> TableSchema:
    return table(
        columns=(
            CatalogColumn("id", 1700, NUMERIC_10_2, not_null=True, in_primary_key=True),
            CatalogColumn("price", 1700, NUMERIC_10_2, not_null=True),
            CatalogColumn("note", 25, -1),
            CatalogColumn("tags", 1231, NUMERIC_10_2, dims=1),
        ),
        masker=masker,
    )


def header(record: ConnectRecord) -> dict[str, Any] | None:
    text = record.header(HEADER_UNREPRESENTABLE)
    return None if text is None else orjson.loads(text)


def test_unrepresentable_values_are_null_with_a_header() -> None:
    ts = numeric_table()
    after, key = ts.row_and_key(("1.00", "NaN", "x", "{1,Infinity}"))
    one = base64.b64encode(b"\x64").decode()  # 1.00: unscaled 100
    assert dict(after) == {"id": one, "price": None, "note": "x", "tags": None}
    assert key == {"id": one}
    record = data_record("c", {}, None, after, key, None, ts)
    assert record.value is not None and record.value["after"].__class__ is dict
    assert header(record) == {
        "after": {
            "price": {
                "reason": "numeric NaN has no representation in a Connect Decimal "
                "(decimal.handling.mode=precise; the modes double and string carry it)",
                "text": "NaN",
            },
            "tags": {
                "reason": "numeric[] element Infinity: numeric Infinity has no "
                "representation in a Connect Decimal (decimal.handling.mode=precise; the modes "
                "double and string carry it)",
                "text": "{1,Infinity}",
            },
        }
    }
    # both images of an update are named; a representable row carries no header
    before = ts.row(("1.00", "-Infinity", None, None))
    update = data_record("u", {}, before, ts.row(("1.00", "2.50", None, None)), key, None, ts)
    assert list(header(update) or {}) == ["before"]
    plain = data_record("c", {}, None, ts.row(("1.00", "2.50", None, None)), key, None, ts)
    assert plain.header(HEADER_UNREPRESENTABLE) is None


def test_a_masked_column_keeps_its_reason_but_not_its_text() -> None:
    rules = {
        "column.mask.hash.SHA-256.with.salt.s": r"public\.t\.price",
        "column.truncate.to.1.chars": r"public\.t\.note",
    }
    ts = numeric_table(masker(**rules))
    after = ts.row(("1.00", "NaN", "long", "{NaN}"))
    record = data_record("r", {}, None, after, None, None, ts)
    issues = (header(record) or {})["after"]
    assert issues["price"] == {"reason": issues["price"]["reason"]}  # no text
    assert issues["tags"]["text"] == "{NaN}"
    assert record.value is not None and record.value["after"]["note"] == "l"


def test_an_unrepresentable_key_quarantines_the_row() -> None:
    ts = numeric_table()
    with pytest.raises(ValueConversionError, match=r"public\.t\.id: key column value 'NaN'"):
        ts.row_and_key(("NaN", "1", None, None))


# --- contract C4: column defaults ---------------------------------------------------------------


def defaults_of(ts: TableSchema) -> dict[str, tuple[Any, Any]]:
    return {
        f["field"]: (f.get("default"), (f.get("parameters") or {}).get(UNREPRODUCIBLE_PARAMETER))
        for f in ts.row_schema["fields"]
    }


def test_constant_defaults_and_missing_values_go_into_the_schema() -> None:
    columns = (
        CatalogColumn("id", 23, -1, not_null=True, in_primary_key=True),
        CatalogColumn("channel", 25, -1, default_expression="'web'::text", missing_value="{web}"),
        CatalogColumn("n", 1700, NUMERIC_10_2, default_expression="'-1.5'::numeric"),
        CatalogColumn("flag", 16, -1, default_expression="true"),
        CatalogColumn("q", 25, -1, default_expression="'it''s'::text"),
        CatalogColumn(  # now(): non-volatile, evaluated once at the ALTER
            "at", 1184, -1, default_expression="now()", missing_value='{"2026-01-02 03:04:05+00"}'
        ),
        CatalogColumn("seq", 20, -1, default_expression="nextval('t_seq_seq'::regclass)"),
        CatalogColumn("tags", 1007, -1, dims=1, missing_value='{"{7,8}"}'),
        CatalogColumn("nan", 1700, -1, missing_value="{NaN}"),
    )
    ts = table(columns=columns)
    got = defaults_of(ts)
    assert got["channel"] == ("web", None)
    assert got["n"] == (base64.b64encode(b"\xff\x6a").decode(), None)  # -150 at scale 2
    assert got["flag"] == (True, None) and got["q"] == ("it's", None)
    assert got["at"] == ("2026-01-02T03:04:05Z", None)
    assert got["seq"] == (None, None) and got["id"] == (None, None)  # not constants
    assert got["tags"] == ([7, 8], None)
    assert got["nan"][0] is None and "NaN" in got["nan"][1]
    # JsonConverter's key order: ... parameters, default, field
    n_field = next(f for f in ts.row_schema["fields"] if f["field"] == "n")
    assert list(n_field) == [
        "type",
        "optional",
        "name",
        "version",
        "parameters",
        "default",
        "field",
    ]


def test_an_added_column_whose_old_rows_are_unknown_is_flagged() -> None:
    columns = (
        CatalogColumn("id", 23, -1, not_null=True, in_primary_key=True),
        CatalogColumn("r", 701, -1, default_expression="random()"),
        CatalogColumn("c", 25, -1, default_expression="'x'::text"),
        CatalogColumn("plain", 25, -1),
        CatalogColumn("kept", 25, -1, default_expression="'k'::text", missing_value="{k}"),
    )
    ts = TableSchema(
        "srv",
        "public",
        "t",
        columns,
        "d",
        handling=ValueHandling(),
        lookup=None,
        column_filter=TableFilter(),
        key_overrides=KeyOverrides(),
        masker=None,
        placeholder="x",
        with_transaction=False,
        added=frozenset({"r", "c", "plain", "kept"}),
    )
    got = defaults_of(ts)
    assert got["r"][0] is None and "random()" in got["r"][1] and "rewrote" in got["r"][1]
    assert got["c"][0] == "x" and "no attmissingval" in got["c"][1]
    assert got["plain"] == (None, None)  # added without a default: the old rows are NULL
    assert got["kept"] == ("k", None)
    # the same columns, not seen being added: Debezium's constant defaults only
    assert defaults_of(table(columns=columns))["r"] == (None, None)
    assert defaults_of(table(columns=columns))["c"] == ("x", None)
