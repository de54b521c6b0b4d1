"""The short form of the chaos run (``benchmarks/chaos.py``), on PostgreSQL and on MariaDB:
kill -9s of the capture agents,
dropped and stalled connections, a server restart and every kind of hostile input, then bronze
must equal the source with nothing lost or doubled, and every hostile line be accounted for.

The script starts its own PostgreSQL (it restarts it) and reports; this test runs it with a
fixed seed and checks its exit status and report.
"""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.fix_servers import REPO_ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.mysql, pytest.mark.delta, pytest.mark.slow]


@pytest.mark.parametrize("engine", ["postgresql", "mariadb"])
def test_short_chaos_run_loses_and_doubles_nothing(engine: str) -> None:
    script = REPO_ROOT / "benchmarks" / "chaos.py"
    args = ["--engine", engine, "--kills", "2", "--restarts", "1", "--seed", "11"]
    args += ["--max-wait", "0.8", "--pace", "0.1"]
    result = subprocess.run(
        [sys.executable, str(script), *args, "--no-results"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = result.stdout
    assert result.returncode == 0, report + result.stderr
    assert "rows lost: 0, duplicated: 0, extra: 0" in report
    assert "0 silent" in report
    counts = {
        name: int(re.search(rf"{name}: (\d+)", report).group(1))  # type: ignore[union-attr]
        for name in ("kills survived", "proxy drops", "stalls", "server restarts", "hostile inputs")
    }
    assert counts["kills survived"] >= 3 and counts["server restarts"] == 1, report
    assert counts["proxy drops"] >= 1 and counts["stalls"] >= 1, report
    assert counts["hostile inputs"] >= 50, report
