"""Benchmark: the MySQL DDL tracker's speed on the two paths the agent takes per binlog query.

Moved here from tests/unit/test_mysql_ddl.py (tests never assert on wall time):

1. **skip**: a 50,000-row statement-format ``INSERT`` (a session with ``binlog_format=STATEMENT``
   writes one) must be recognised as DML and skipped without tokenizing it; target < 50 ms.
2. **alter**: ``ALTER TABLE ... ADD COLUMN`` and its undo on a 40-column table; target < 1 ms
   per statement.

Usage: ``.venv/bin/python benchmarks/ddl_parse.py`` (prints a Markdown table; exit 1 when a
target is missed, so a loaded machine is reported, never silently passed).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capture.mysql.ddl import SchemaState  # noqa: E402
from tests.unit.test_mysql_ddl import (  # noqa: E402 - the statements the unit tests check
    ALTER_ADD as ALTER,
)
from tests.unit.test_mysql_ddl import ALTER_BASE as WIDE  # noqa: E402
from tests.unit.test_mysql_ddl import ALTER_UNDO as UNDO  # noqa: E402
from tests.unit.test_mysql_ddl import BASE, DB  # noqa: E402


def skip_seconds(repeat: int = 5) -> float:
    """Best time to skip a 50,000-row statement-format INSERT."""
    state = SchemaState()
    state.apply(BASE, DB)
    sql = "INSERT INTO t VALUES " + ",".join(["(1, 'CREATE TABLE x (a INT)', 3)"] * 50_000)
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        state.apply(sql, DB)
        best = min(best, time.perf_counter() - started)
    return best


def alter_seconds(rounds: int = 200) -> float:
    """Mean time per ALTER (add, then undo) on a 40-column table."""
    state = SchemaState()
    state.apply(WIDE, DB)
    started = time.perf_counter()
    for _ in range(rounds):
        state.apply(ALTER, DB)
        state.apply(UNDO, DB)
    return (time.perf_counter() - started) / (2 * rounds)


def main() -> int:
    """Run both measurements and print them against their targets."""
    rows = [
        ("skip a 50k-row statement INSERT", skip_seconds(), 0.05),
        ("one ALTER on a 40-column table", alter_seconds(), 0.001),
    ]
    print("| path | measured | target |\n|---|---|---|")
    for name, seconds, target in rows:
        print(f"| {name} | {seconds * 1000:.3f} ms | < {target * 1000:g} ms |")
    return 0 if all(seconds < target for _, seconds, target in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
