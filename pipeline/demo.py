"""``medallion demo``: the main job end to end on the embedded default.

Today that is: land the configured sources (the Debezium JSON fixtures of a small shop
database) into bronze exactly once, read bronze back through Spark SQL by table name, then apply
bronze to silver (one Delta table per source table) and show it. Running it twice lands and
applies nothing new the second time.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from pipeline.orchestration import bronze_tables, land_sources, spark_for
from pipeline.sql import qualified

__all__ = ["run_demo"]

logger = logging.getLogger(__name__)


def run_demo(config: Any, output: Any, *, lake_root: Path | None = None) -> None:
    """Land the demo sources and query bronze with Spark SQL.

    Args:
        config: The pipeline config (``conf/pipeline.yaml`` by default).
        output: A CLI :class:`~pipeline.cli.Output`.
        lake_root: Use another lake root than the config's.
    """
    root = Path(lake_root) if lake_root else Path(config.lake.root)
    results = land_sources(config, lake_root=root)
    output.result(
        "1. landed into bronze (read = landed + quarantined)",
        [
            {
                "source": r.source,
                "batches": r.batches,
                "read": r.read,
                "landed": r.landed,
                "quarantined": r.quarantined,
                "reconciles": r.read == r.landed + r.quarantined,
            }
            for r in results
        ],
    )
    from pipeline.spark import register_lake_tables

    spark = spark_for(config, root)
    names = register_lake_tables(spark, root)
    output.message(f"2. Spark SQL sees: {', '.join(sorted(names))}")
    queries = (
        (
            "3. bronze.events by source, kind and op",
            "SELECT source, kind, op, count(*) AS events FROM bronze.events "
            "GROUP BY source, kind, op ORDER BY source, kind, op",
        ),
        (
            "4. the first streamed transaction, in source commit order (ORDER BY position)",
            "SELECT collection, op, tx_id, tx_order, "
            "medallion_position(connector, position) AS pos, headers FROM bronze.events "
            "WHERE tx_id = (SELECT min_by(tx_id, position) FROM bronze.events "
            "               WHERE kind = 'data' AND snapshot = 'false') "
            "ORDER BY position",
        ),
        (
            "5. bronze.quarantine (nothing is dropped silently)",
            "SELECT origin, error_class, reason FROM bronze.quarantine ORDER BY origin",
        ),
    )
    for title, sql in queries:
        rows = [r.asDict() for r in spark.sql(sql).collect()]
        output.result(title, rows)
    total = spark.sql("SELECT count(*) AS n FROM bronze.events").collect()[0]["n"]
    tables = bronze_tables(config, root)
    output.message(f"bronze.events holds {total} rows at {tables.events}")

    from silver.job import SilverJob

    job = SilverJob(
        spark,
        root,
        tombstone_retention_hours=config.silver.tombstone_retention_hours,
        transaction_timeout_seconds=config.silver.transaction_timeout_seconds,
        table_options=config.silver.table,
    )
    result = job.run_once()
    output.result(
        "6. silver: bronze applied in source order (MERGE per table, idempotent)",
        [
            {
                "table": name,
                "events": sum(r.events for r in merged),
                "inserted": sum(r.inserted for r in merged),
                "updated": sum(r.updated for r in merged),
            }
            for name, merged in result.merged.items()
        ],
    )
    silver_names = sorted(n for n in register_lake_tables(spark, root) if n.startswith("silver."))
    output.result(
        "7. silver tables: live rows and retained tombstones",
        [
            {
                "table": name,
                **spark.sql(
                    "SELECT count_if(NOT _cdc_deleted) AS live, count_if(_cdc_deleted) AS deleted "
                    f"FROM {qualified(*name.split('.'))}"
                )
                .collect()[0]
                .asDict(),
            }
            for name in silver_names
            if not name.split(".", 1)[1].startswith("_")
        ],
    )
    customers = next((n for n in silver_names if n.endswith("__customers")), None)
    if customers is not None:
        current = spark.sql(
            f"SELECT id, name, email, _cdc_op, _cdc_tx_id FROM {qualified(*customers.split('.'))} "
            "WHERE NOT _cdc_deleted ORDER BY id LIMIT 5"
        ).collect()
        output.result(f"8. {customers} (current state)", [r.asDict() for r in current])
