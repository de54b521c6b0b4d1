"""The short form of the chaos run (``benchmarks/chaos.py``), on PostgreSQL and on MariaDB:
kill -9s of the capture agents, dropped and stalled connections, a server restart and every kind
of hostile input; then bronze must equal the source with nothing lost or doubled, and every
hostile line be accounted for.

On PostgreSQL the run ends with the undisturbed silver run, the gold reconciliation against the
server (an independent read of the source), one row per key in silver, and each hostile line
that bronze landed applied or quarantined by silver, on the suite's shared SparkSession in this
process. The silver job is not killed here (``--silver-kills 0 --final-gold``): each kill costs a
JVM start and the job's planning, minutes of the suite; silver under kill -9 is the contract
suite's (``tests/contract/test_silver.py``) and the long form's. MariaDB runs the bronze form only.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from types import ModuleType
from typing import Any

import pytest

from tests.fix_servers import REPO_ROOT

pytestmark = [pytest.mark.postgres, pytest.mark.mysql, pytest.mark.delta, pytest.mark.slow]

SCRIPT = REPO_ROOT / "benchmarks" / "chaos.py"
# No silver kills here: each costs a JVM start and the job's planning (~150 s of the suite's
# 30 minutes). Silver under kill -9 is the contract suite's (tests/contract/test_silver.py) and
# the long form's (docs/benchmarks.md, "Chaos run"); this run keeps the end: the undisturbed
# silver run, the gold reconcile against the server, keys once, hostile lines accounted for.
SILVER = ["--silver-kills", "0", "--final-gold", "--no-results"]
SHORT = ["--kills", "2", "--restarts", "1", "--seed", "11", "--max-wait", "0.8"]


def _chaos() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chaos_benchmark", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def _counts(report: str) -> dict[str, int]:
    names = ("kills survived", "proxy drops", "stalls", "server restarts", "hostile inputs")
    return {
        name: int(re.search(rf"{name}: (\d+)", report).group(1))  # type: ignore[union-attr]
        for name in names
    }


def _check_bronze_form(report: str) -> None:
    assert "rows lost: 0, duplicated: 0, extra: 0" in report
    assert "0 silent" in report
    counts = _counts(report)
    assert counts["kills survived"] >= 3 and counts["server restarts"] == 1, report
    assert counts["proxy drops"] >= 1 and counts["stalls"] >= 1, report
    assert counts["hostile inputs"] >= 50, report


def test_short_chaos_run_on_mariadb_loses_and_doubles_nothing() -> None:
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--engine", "mariadb", *SHORT, "--pace", "0.1"]
        + ["--silver-kills", "0", "--no-results"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = result.stdout
    assert result.returncode == 0, report + result.stderr
    _check_bronze_form(report)


def test_short_chaos_run_on_postgresql_ends_with_gold_reconciled(spark: Any) -> None:
    chaos = _chaos()
    args = chaos.parse_args(["--engine", "postgresql", *SHORT, "--pace", "0.3"] + SILVER)
    result = chaos.run(args, spark=spark)
    report = chaos.format_report(result)

    assert result.ok, report
    _check_bronze_form(report)
    assert result.silver_crashes == 0, report
    assert result.final_run_ok and result.reconcile_clean, report
    assert {t["table"] for t in result.reconcile_tables} == {
        "chaos.accounts",
        "chaos.orders",
        'chaos.we"ird ü',
    }, report
    assert result.silver_keys_twice == 0, report
    landed_in_silver = (
        result.hostile_applied + result.hostile_silver_quarantined + result.hostile_ignored
    )
    assert landed_in_silver == result.hostile_landed > 0, report
