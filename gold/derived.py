"""Derived gold tables declared in ``gold.tables`` (SQL or a Python function), rebuilt at each
published cut.

Each table is computed from the gold views at the published cuts and written to
``<lake>/gold/<name>`` as a full overwrite carrying the Delta app transaction
``(medallion-gold:<name>, n)``, where ``n`` counts the publications it has been built for, so a
rerun after a crash does not write it twice. The cuts it was built from go into the commit's
user metadata (``DESCRIBE HISTORY``), so a reader knows which source commit the table shows;
Delta time travel on the table goes back through earlier cuts.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from bronze.storage import LakePath, lake_path, open_delta
from gold.cuts import Cut
from gold.views import gold_frames
from pipeline.errors import GoldError
from silver.bookkeeping import already_written

__all__ = ["DerivedResult", "build_derived_tables"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class DerivedResult:
    """One derived table rebuilt.

    Attributes:
        name: The gold table name.
        rows: Rows written.
        version: Its Delta version afterwards.
    """

    name: str
    rows: int
    version: int


def _function(spec: str, name: str) -> Callable[..., Any]:
    module_name, _, attr = spec.partition(":")
    try:
        module = importlib.import_module(module_name)
        func = getattr(module, attr)
    except (ImportError, AttributeError) as exc:
        raise GoldError(
            f"gold table '{name}': cannot import python '{spec}': {exc}",
            key_path=f"gold.tables.{name}.python",
        ) from exc
    if not callable(func):
        raise GoldError(f"gold table '{name}': '{spec}' is not callable")
    return func


def _frame(spark: Any, name: str, table: Any, frames: Mapping[str, Any]) -> Any:
    if table.sql is not None:
        try:
            return spark.sql(table.sql)
        except Exception as exc:  # Spark's AnalysisException and parse errors alike
            raise GoldError(
                f"gold table '{name}': its SQL failed: {str(exc).splitlines()[0]}",
                key_path=f"gold.tables.{name}.sql",
            ) from exc
    result = _function(table.python, name)(spark, dict(frames))
    if not hasattr(result, "write"):
        raise GoldError(
            f"gold table '{name}': {table.python} returned {type(result).__name__}, "
            "not a DataFrame",
            key_path=f"gold.tables.{name}.python",
        )
    return result


USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
"""Delta's session setting for the user metadata of commits made by SQL commands."""


def _describe(spark: Any, path: str, description: str, cut_text: str) -> None:
    """Set the table's Delta description (``gold.tables.<name>.description``).

    A DataFrame write cannot set it, so it is one more commit, made only when the description
    changed; it carries the cuts like the write does, so every commit of the table names them.
    """
    from pipeline.sql import quote_identifier, quote_string_literal

    spark.conf.set(USER_METADATA_CONF, cut_text)
    try:
        spark.sql(
            f"ALTER TABLE delta.{quote_identifier(path)} SET TBLPROPERTIES "
            f"('comment' = {quote_string_literal(description)})"
        )
    finally:
        spark.conf.unset(USER_METADATA_CONF)


def build_derived_tables(
    spark: Any,
    lake_root: LakePath,
    tables: Mapping[str, Any],
    cuts: Mapping[str, Cut],
    publication: int,
) -> list[DerivedResult]:
    """Rebuild every declared gold table at the published cuts.

    Args:
        spark: The session; the gold views must be registered at ``cuts``
            (:func:`gold.views.register_views`), since SQL tables query them by name.
        lake_root: The lake root.
        tables: ``config.gold.tables``.
        cuts: The published cut per source.
        publication: A number that grows with each publication (the app transaction version).

    Returns:
        One result per table rebuilt (tables already built for ``publication`` are skipped).

    Raises:
        GoldError: A definition does not import, parse or run; names the table and the key.
    """

    frames = gold_frames(spark, lake_root, cuts.values())
    cut_text = orjson.dumps({s: c.to_json() for s, c in sorted(cuts.items())}).decode()
    results = []
    for name, table in sorted(tables.items()):
        path = str(lake_path(lake_root).absolute() / "gold" / name)
        app_id = f"medallion-gold:{name}"
        # The Delta log answers it without a Spark job (no table yet: not written).
        if already_written(path, app_id, publication):
            continue
        frame = _frame(spark, name, table, frames)
        (
            frame.write.format("delta")
            .mode("overwrite")
            .option("overwriteSchema", "true")
            .option("txnAppId", app_id)
            .option("txnVersion", publication)
            .option("userMetadata", cut_text)
            .save(path)
        )

        log = open_delta(path)
        version = log.version()
        rows = 0
        for entry in log.history(1):
            metrics = entry.get("operationMetrics") or {}
            rows = int(metrics.get("numOutputRows", 0))
        if (log.metadata().description or "") != table.description:
            _describe(spark, path, table.description, cut_text)
        results.append(DerivedResult(name, rows, version))
        logger.info("gold: %s rebuilt (%s rows, version %s)", name, rows, version)
    return results
