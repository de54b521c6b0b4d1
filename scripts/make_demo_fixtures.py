"""Regenerate tests/fixtures/debezium_jsonl/ (the demo's and tests' Debezium JSON input).

Usage: .venv/bin/python scripts/make_demo_fixtures.py
The output is deterministic and committed; rerunning must produce no diff.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# The generator is test support (tests/pgmodel), which no install ships: import it from the
# checkout, as the benchmarks do.
sys.path.insert(0, str(ROOT))

from tests.pgmodel.streams import postgres_stream, write_lines  # noqa: E402

OUT = ROOT / "tests" / "fixtures" / "debezium_jsonl"

MALFORMED = [
    b'{"topic": "shop.public.customers", "key": {"id": 9',
    b'{"topic": "shop.public.customers", "key": {"id": 1}, "value": {"op": "x", "before": null,'
    b' "after": {"id": 1}, "source": {"connector": "postgresql", "name": "shop", "lsn": 1}}}',
    b'{"topic": "shop.public.orders", "key": {"id": 2}, "value": [1, 2, 3]}',
]


def main() -> None:
    """Write the fixture files."""
    OUT.mkdir(parents=True, exist_ok=True)
    stream = postgres_stream(snapshot_rows=5, transactions=30, seed=7)
    cut = int(len(stream.records) * 0.6)
    first, second = stream.records[:cut], stream.records[cut:]
    head = type(stream)(records=first)
    tail = type(stream)(records=second)
    n1 = write_lines(OUT / "shop-000001.jsonl", head.lines("kafka_json", schemas=True))
    lines = list(tail.lines("key_tab_value", schemas=False))
    lines[len(lines) // 2 : len(lines) // 2] = MALFORMED
    n2 = write_lines(OUT / "shop-000002.jsonl", iter(lines))
    print(f"wrote {n1} + {n2} lines ({len(MALFORMED)} malformed) to {OUT}")


if __name__ == "__main__":
    main()
