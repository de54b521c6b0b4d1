"""Settings a JVM started by this process gets (``pipeline.spark``), read without starting one."""

from __future__ import annotations

from pathlib import Path

from pipeline.spark import _local_process_settings


def test_the_compiled_class_cache_outgrows_sparks_default(tmp_path: Path) -> None:
    # Spark's default (100) is smaller than what one micro-batch over many tables compiles;
    # a cluster master gets it too (the driver compiles there as well).
    for master in ("local[2]", "spark://127.0.0.1:7077"):
        settings = _local_process_settings(master, tmp_path, [])
        assert int(settings["spark.sql.codegen.cache.maxEntries"]) >= 1000, master
