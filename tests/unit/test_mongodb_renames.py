"""``field.renames`` (``capture/mongodb/renames.py``): Debezium's FieldSelector semantics for
documents, dot-notation update descriptions and removed/truncated paths; conflicts and bad
entries are clear errors."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from capture.mongodb.renames import FieldRenames, RenameConflict
from capture.mongodb.settings import MongoSettings
from pipeline.config import SourceConfig

pytestmark = pytest.mark.unit


def rules(*entries: str) -> Any:
    return FieldRenames.parse(entries).for_collection("shop", "orders")


def test_documents_nested_and_through_arrays_of_documents() -> None:
    renames = rules("shop.orders.a.b:c", "*.ord*.items.sku:id", "other.orders.name:x")
    document = {"_id": 1, "name": "n", "a": {"b": 1, "z": 2}, "items": [{"sku": "s"}, 3, [4]]}
    out = renames.document(document)
    assert out == {"_id": 1, "name": "n", "a": {"z": 2, "c": 1}, "items": [{"id": "s"}, 3, [4]]}
    assert list(out["a"]) == ["z", "c"]  # Debezium re-puts the renamed field at the end
    assert document["a"] == {"b": 1, "z": 2}  # the input is not changed
    assert rules("SHOP.ORDERS.a:b").document({"a": 1}) == {"b": 1}  # namespaces ignore case
    assert rules("shop.orders.missing:x").document({"a": 1}) == {"a": 1}


def test_update_descriptions_in_dot_notation() -> None:
    renames = rules("shop.orders.a.b:c")
    assert renames.updated({"a.b": 1, "x": 2}) == {"x": 2, "a.c": 1}
    assert renames.updated({"a.b.d": 1}) == {"a.c.d": 1}  # under the renamed field
    assert renames.updated({"a.0.b": 1}) == {"a.0.c": 1}  # array indexes are not names
    assert renames.updated({"a": {"b": 1}}) == {"a": {"c": 1}}  # above it: inside the value
    assert renames.updated({"a": [{"b": 1}, 2]}) == {"a": [{"c": 1}, 2]}
    assert renames.updated({"a.1.1.b": 1}) == {"a.1.1.b": 1}  # arrays of arrays: not looked into
    assert renames.path("a.b") == "a.c"
    assert renames.path("a.3.b.e") == "a.3.c.e"
    assert renames.path("a") == "a" and renames.path("ab.b") == "ab.b"


def test_a_new_name_that_exists_is_a_conflict() -> None:
    renames = rules("shop.orders.a.b:c")
    with pytest.raises(RenameConflict, match="already has a field 'c'"):
        renames.document({"a": {"b": 1, "c": 2}})
    with pytest.raises(RenameConflict, match="already has a field 'a.c'"):
        renames.updated({"a.c": 0, "a.b": 1})


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("shop.orders.a", "is not <db>.<collection>.<field>:<name>"),
        ("shop.a:b", "is not <db>.<collection>.<field>:<name>"),
        ("shop.orders.a:b.c", "must be one field name"),
        ("shop.orders._id:key", "_id cannot be renamed"),
    ],
)
def test_bad_entries_are_refused_with_the_config(entry: str, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TypeAdapter(SourceConfig).validate_python(
            {"name": "m", "connector": "mongodb", "mongodb.connection.string": "mongodb://h/",
             "field.renames": entry}
        )  # fmt: skip


def test_the_settings_carry_the_rules() -> None:
    config = TypeAdapter(SourceConfig).validate_python(
        {"name": "m", "connector": "mongodb", "mongodb.connection.string": "mongodb://h/",
         "field.renames": "shop.orders.a.b:c, shop.*.d:e"}
    )  # fmt: skip
    made = MongoSettings.from_config(config)
    assert made.field_renames.pairs("shop", "orders") == (("a.b", "a.c"), ("d", "e"))
    assert made.field_renames.pairs("shop2", "orders") == ()
