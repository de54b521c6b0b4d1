"""Malformed input never stops a batch and never disappears: it is quarantined with a reason."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from deltalake import DeltaTable

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent

pytestmark = pytest.mark.delta

SRC = {
    "version": "2.5.0.Final",
    "connector": "postgresql",
    "name": "q",
    "ts_ms": 1,
    "snapshot": "false",
    "db": "d",
    "schema": "public",
    "table": "t",
    "txId": 5,
    "lsn": 100,
    "sequence": '["50","100"]',
}


def rec(value: object, key: object = None, **extra: object) -> bytes:
    return orjson.dumps({"key": key if key is not None else {"id": 1}, "value": value, **extra})


def good(i: int) -> bytes:
    return rec(
        {
            "before": None,
            "after": {"id": i},
            "op": "c",
            "ts_ms": 1,
            "source": {**SRC, "lsn": 100 + i, "sequence": f'["50","{100 + i}"]'},
        },
        key={"id": i},
    )


# (line, a fragment the quarantine reason must contain)
MALFORMED: list[tuple[bytes, str]] = [
    (b'{"key": {"id": 1}, "value": {"op": "c"', "not valid JSON"),
    (b"not json at all", "not valid JSON"),
    (b'{"id": 1}\t{"op": ', "not valid JSON"),
    (rec([1, 2, 3]), "list"),
    (rec("a string"), "not valid JSON"),
    (rec(42), "int"),
    (rec({"before": None, "after": {"id": 1}, "source": SRC}), "op"),
    (rec({"before": None, "after": {"id": 1}, "op": "x", "source": SRC}), "'x'"),
    (rec({"before": None, "after": {"id": 1}, "op": 3, "source": SRC}), "op"),
    (rec({"before": None, "after": None, "op": "c", "source": SRC}), "after"),
    (rec({"before": None, "op": "c", "source": SRC}), "after"),
    (rec({"before": None, "after": {"id": 1}, "op": "c"}), "source"),
    (rec({"before": None, "after": {"id": 1}, "op": "c", "source": "nope"}), "source"),
    (
        rec(
            {
                "before": None,
                "after": {"id": 1},
                "op": "c",
                "source": {k: v for k, v in SRC.items() if k != "connector"},
            }
        ),
        "connector",
    ),
    (
        rec({"before": None, "after": {"id": 1}, "op": "u", "source": SRC}).replace(
            b'"after":{"id":1},', b""
        ),
        "after",
    ),
    (rec({"status": "END", "id": "5", "data_collections": []}), "event_count"),
    (rec({"status": "MAYBE", "id": "5"}), "status"),
    (
        rec(
            {
                "before": None,
                "after": {"id": 1},
                "op": "c",
                "source": {**SRC, "lsn": "zz/yy", "sequence": None},
            }
        ),
        "lsn",
    ),
    (
        rec(
            {
                "before": None,
                "after": {"id": 1},
                "op": "c",
                "source": {k: v for k, v in SRC.items() if k not in ("lsn", "sequence")},
            }
        ),
        "lsn",
    ),
    (
        rec(
            {"before": None, "after": {"id": 1}, "op": "c", "source": {**SRC, "connector": "cobol"}}
        ),
        "cobol",
    ),
    (rec({"before": None, "after": {"id": 1}, "op": "c", "source": SRC}, headers=7), "headers"),
    (
        rec({"before": None, "after": {"id": 1}, "op": "c", "source": SRC}, headers=[1, "x"]),
        "header",
    ),
    (rec({"something": "else"}), ""),
    (b'{"schema": {"type": "struct"}, "payload": [1]}', "list"),
]


def test_each_malformed_line_is_quarantined_with_a_reason(tmp_path: Path) -> None:
    lines = [good(0)]
    for i, (bad, _) in enumerate(MALFORMED, start=1):
        lines.append(bad)
        lines.append(good(i))
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    source = DebeziumJsonSource("q", path)
    lake = tmp_path / "lake"
    result = LandingAgent(source, BronzeWriter(BronzeTables.under(lake)), max_events=7).run()
    assert result.read == len(lines) == result.landed + result.quarantined
    assert result.quarantined == len(MALFORMED)
    q = sorted(
        DeltaTable(str(lake / "bronze" / "quarantine")).to_pyarrow_table().to_pylist(),
        key=lambda r: int(r[S.ORIGIN].rsplit(":", 1)[1]),
    )
    assert len(q) == len(MALFORMED) >= 20
    for row, (bad, fragment) in zip(q, MALFORMED, strict=True):
        line_no = int(row[S.ORIGIN].rsplit(":", 1)[1])
        assert lines[line_no - 1] == bad == row[S.RAW]
        assert row[S.REASON], f"empty reason for {bad!r}"
        assert fragment.lower() in row[S.REASON].lower(), (bad, row[S.REASON])
        assert row[S.ERROR_CLASS] in ("EnvelopeError", "PositionError")
    landed = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table()
    assert landed.num_rows == len(MALFORMED) + 1
