"""Per-partition offsets of the ``kafka`` source and the Avro -> Connect schema mapping."""

from __future__ import annotations

import pytest

from capture.kafka.avro import connect_schema, is_avro
from capture.kafka.offsets import PartitionOffsetError, PartitionOffsets
from pipeline.errors import EnvelopeError, Terminal

pytestmark = pytest.mark.unit


def test_offsets_only_move_forward_and_round_trip() -> None:
    offsets = PartitionOffsets("k")
    offsets.advance(("t", 1), 4)
    offsets.advance(("t", 1), 2)  # a held-back record landed later never moves it back
    offsets.advance(("a", 0), 0)
    assert offsets.dump() == {"a": {"0": 1}, "t": {"1": 5}}
    again = PartitionOffsets("k")
    again.load(offsets.dump())
    assert again.dump() == offsets.dump() and again.get(("t", 1)) == 5
    assert again.all_reached({"t": {"1": 5}}) and not again.all_reached({"t": {"1": 6}})
    assert again.reached({"t": {"1": 5}}, ("t", 1))
    assert again.reached({"t": {"1": 5}}, ("b", 0)), "a partition the batch never read"


def test_a_gap_or_a_recreated_topic_is_terminal_and_names_both_offsets() -> None:
    offsets = PartitionOffsets("k")
    offsets.load({"dbz.orders": {"2": 40}})
    offsets.check_range(("dbz.orders", 2), 0, 40)  # caught up: fine
    offsets.check_range(("dbz.new", 0), 10, 20)  # never read: nothing to check
    with pytest.raises(PartitionOffsetError) as gap:
        offsets.check_range(("dbz.orders", 2), 45, 90)
    assert isinstance(gap.value, Terminal)
    assert "dbz.orders partition 2 now starts at offset 45" in str(gap.value)
    assert "records 40..44 were deleted" in str(gap.value)
    with pytest.raises(PartitionOffsetError) as recreated:
        offsets.check_range(("dbz.orders", 2), 0, 7)
    assert "ends at offset 7" in str(recreated.value) and "created" in str(recreated.value)


def test_avro_schemas_map_to_connect_schemas_with_named_references() -> None:
    value = {
        "type": "record",
        "name": "Envelope",
        "namespace": "srv.inv.items",
        "fields": [
            {
                "name": "before",
                "type": [
                    "null",
                    {
                        "type": "record",
                        "name": "Value",
                        "fields": [
                            {"name": "id", "type": {"type": "int", "connect.type": "int16"}},
                            {"name": "born", "type": {"type": "int", "logicalType": "date"}},
                            {"name": "tags", "type": {"type": "array", "items": "string"}},
                        ],
                    },
                ],
                "default": None,
            },
            {"name": "after", "type": ["null", "Value"], "default": None},
            {"name": "op", "type": "string"},
        ],
    }
    schema = connect_schema(value)
    before, after, op = schema["fields"]
    assert schema["name"] == "srv.inv.items.Envelope" and schema["optional"] is False
    assert before["name"] == after["name"] == "srv.inv.items.Value"
    assert (after["field"], after["optional"]) == ("after", True)
    assert [f["type"] for f in after["fields"]] == ["int16", "int32", "array"]
    assert after["fields"][1]["name"] == "org.apache.kafka.connect.data.Date"
    assert op == {"type": "string", "optional": False, "field": "op"}
    with pytest.raises(EnvelopeError, match="more than one non-null branch"):
        connect_schema(["null", "int", "string"])
    assert is_avro(b"\x00\x00\x00\x00\x07\x02") and not is_avro(b'{"a":1}') and not is_avro(None)
