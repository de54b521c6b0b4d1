"""What the MongoDB agent reads off its config: connection, filters, exclusions, refusals."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from pydantic import TypeAdapter, ValidationError

from capture.mongodb.records import CollectionRecords, without_paths
from capture.mongodb.settings import FieldExclusions, MongoSettings
from pipeline.config import SourceConfig

pytestmark = pytest.mark.unit


def settings(**raw: Any) -> MongoSettings:
    config = TypeAdapter(SourceConfig).validate_python({"name": "m", "connector": "mongodb", **raw})
    return MongoSettings.from_config(config)


def test_hosts_user_and_password_make_a_uri() -> None:
    # load_config resolves ${ENV} before the model: the model gets the value
    made = settings(
        **{
            "mongodb.hosts": "rs0/h1:27017,h2:27018",
            "mongodb.user": "cdc",
            "mongodb.password": "p@ss:/word",
        }
    )
    assert (
        made.connection_string()
        == "mongodb://cdc:p%40ss%3A%2Fword@h1:27017,h2:27018/?replicaSet=rs0"
    )
    assert "p@ss" not in repr(made)


def test_capture_modes_choose_the_stream_options() -> None:
    uri = {"mongodb.connection.string": "mongodb://h/?replicaSet=rs0"}
    wanted = {
        "change_streams": ("default", "off"),
        "change_streams_update_full": ("updateLookup", "off"),
        "change_streams_with_pre_image": ("default", "whenAvailable"),
        "change_streams_update_full_with_pre_image": ("updateLookup", "whenAvailable"),
    }
    for mode, options in wanted.items():
        made = settings(**uri, **{"capture.mode": mode})
        assert (made.full_document, made.before_change) == options, mode


def test_filters_never_capture_the_system_databases() -> None:
    made = settings(
        **{"mongodb.connection.string": "mongodb://h/", "collection.exclude.list": r"shop\.audit.*"}
    )
    assert made.collections.table("shop", "orders")
    assert not made.collections.table("shop", "audit_2026")
    assert not made.collections.table("admin", "users") and not made.collections.table("local", "x")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"capture.mode": "oplog"}, "'oplog' is not supported"),
        ({"heartbeat.action.query": "x"}, "not supported for MongoDB"),
        ({"snapshot.mode": "always"}, "snapshot.mode"),
    ],
)
def test_what_the_agent_does_not_do_is_refused(raw: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as refused:
        settings(**{"mongodb.connection.string": "mongodb://h/", **raw})
    assert message in str(refused.value)


def test_field_exclusions() -> None:
    rules = FieldExclusions.parse(("shop.*.card.no", "*.orders.secret", "other.c.x"))
    assert rules.paths("shop", "orders") == ("card.no", "secret")
    document = {"_id": 1, "card": {"no": "4111", "exp": "12/30"}, "secret": "s", "keep": [1]}
    assert without_paths(document, rules.paths("shop", "orders")) == {
        "_id": 1,
        "card": {"exp": "12/30"},
        "keep": [1],
    }
    assert document["secret"] == "s"  # the input is not changed
    assert without_paths(document, ("missing.path",)) is document
    # Through arrays of documents, as Debezium's FieldSelector (arrays of arrays: not).
    listed: dict[str, Any] = {
        "items": [{"sku": "a", "n": 1}, 2, [{"sku": "x"}]],
        "o": {"l": [{"sku": "b"}]},
    }
    assert without_paths(listed, ("items.sku", "o.l.sku")) == {
        "items": [{"n": 1}, 2, [{"sku": "x"}]],
        "o": {"l": [{}]},
    }
    assert listed["items"][0] == {"sku": "a", "n": 1}
    with pytest.raises(ValueError, match="db.collection.field"):
        FieldExclusions.parse(("shop.orders",))


def test_excluded_paths_in_update_descriptions() -> None:
    made = settings(
        **{
            "mongodb.connection.string": "mongodb://h/",
            "field.exclude.list": "shop.orders.items.sku",
        }
    )
    records = CollectionRecords(made, "shop", "orders", "rs0")
    described = records.update_description(
        {
            "updatedFields": {"items.0.sku": "s", "items.1": {"sku": "t", "n": 2}, "x": 1},
            "removedFields": ["items.2.sku", "items.3.n"],
            "truncatedArrays": [],
        }
    )
    assert orjson.loads(described["updatedFields"]) == {
        "items.1": {"n": {"$numberInt": "2"}},
        "x": {"$numberInt": "1"},
    }
    assert described["removedFields"] == ["items.3.n"]
