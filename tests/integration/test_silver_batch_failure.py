"""A micro-batch that fails reports its own error, however long, and a stop stays a stop."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from silver.job import SilverJob
from tests.integration.test_silver_job import land
from tests.pgmodel.streams import postgres_stream, write_lines

pytestmark = [pytest.mark.spark, pytest.mark.delta]


class _JvmFailure(Exception):
    """Stands for a Py4JJavaError: its text is a JVM stack trace thousands of lines long."""


def _bronze(tmp_path: Path) -> Path:
    path, lake = tmp_path / "in.jsonl", tmp_path / "lake"
    write_lines(path, postgres_stream(snapshot_rows=2, transactions=2, seed=3).lines("kafka_json"))
    land(path, lake)
    return lake


def test_a_failed_micro_batch_raises_its_own_error_however_long(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = _bronze(tmp_path)
    trace = "".join(f"\n\tat org.apache.spark.Frame{i}.call(Frame.scala:{i})" for i in range(4000))
    failure = _JvmFailure(
        "An error occurred while calling o1.sql.\n: py4j.protocol.Py4JJavaError: An error "
        f"occurred while calling o2.merge.\n: org.apache.spark.SparkException: boom{trace}"
    )

    def fail(self: SilverJob, micro_batch: Any, batch: Any, **_: Any) -> None:
        raise failure

    monkeypatch.setattr(SilverJob, "_process_silver_batch", fail)
    with pytest.raises(_JvmFailure) as raised:
        SilverJob(spark, lake).run_once()
    assert raised.value is failure


def test_a_micro_batch_interrupted_by_a_stop_ends_the_run_cleanly(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``query.stop()`` interrupts the micro-batch's JVM call (the stream's thread runs it):
    Spark must still recognize the stop, so the run ends without an error."""
    import threading

    lake = _bronze(tmp_path)
    interrupted: list[BaseException] = []

    def stop_soon() -> None:
        for query in spark.streams.active:
            query.stop()

    def slow(self: SilverJob, micro_batch: Any, batch: Any, **_: Any) -> None:
        threading.Timer(1.0, stop_soon).start()
        try:
            spark._jvm.java.lang.Thread.sleep(30_000)
        except Exception as exc:
            interrupted.append(exc)
            raise

    monkeypatch.setattr(SilverJob, "_process_silver_batch", slow)
    result = SilverJob(spark, lake).run_once()
    assert len(interrupted) == 1 and "InterruptedException" in str(interrupted[0])
    assert result.batches == 0
