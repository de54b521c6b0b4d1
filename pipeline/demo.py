"""``medallion demo``: the whole pipeline end to end, with no configuration.

It starts a private PostgreSQL (:mod:`pipeline.embedded_pg`), creates a small shop (customers,
products, orders, order lines), snapshots it into bronze, runs a workload of inserts, updates,
deletes, primary-key changes, a truncate and an added column, captures it, runs silver and gold
with the quality checks and a reconciliation against the database, and prints a summary. The
demo's lake (``demo-lake/`` beside the configured lake, or ``--lake``) is recreated on each
run; its config is written to ``<lake>/pipeline.yaml``, so ``medallion --config
<lake>/pipeline.yaml status`` and the notebooks work on it afterwards (the database is gone by
then; everything else stays).
"""

from __future__ import annotations

import functools
import logging
import random
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pipeline.errors import PipelineError

__all__ = ["run_demo", "demo_lake", "SHOP_TABLES", "STEPS"]

logger = logging.getLogger(__name__)

SOURCE = "shop"
SHOP_TABLES = ("customers", "products", "orders", "order_lines")
_REPO = Path(__file__).resolve().parents[1]

_SCHEMA = (
    "CREATE TABLE customers (id int PRIMARY KEY, name text NOT NULL, email text NOT NULL,"
    " created_at timestamptz NOT NULL DEFAULT now())",
    "CREATE TABLE products (id int PRIMARY KEY, sku text NOT NULL UNIQUE, name text NOT NULL,"
    " price numeric(10,2) NOT NULL)",
    "CREATE TABLE orders (id int PRIMARY KEY, customer_id int NOT NULL, status text NOT NULL,"
    " ordered_at timestamptz NOT NULL DEFAULT now(), total numeric(12,2) NOT NULL DEFAULT 0)",
    "CREATE TABLE order_lines (order_id int NOT NULL, line_no int NOT NULL,"
    " product_id int NOT NULL, qty int NOT NULL, price numeric(10,2) NOT NULL,"
    " PRIMARY KEY (order_id, line_no))",
)

_CONFIG = """\
# Written by `medallion demo`: its private PostgreSQL is gone once the demo ends, the lake stays.
lake:
  root: {lake}
spark:
  master: "local[*]"
silver:
  tables:
    shop.public.customers:
      history: true
gold:
  tables:
    customer_revenue:
      description: revenue per customer at the gold cut (orders x order lines)
      sql: >
        SELECT c.id AS customer_id, c.name, count(DISTINCT o.id) AS orders,
               coalesce(sum(l.qty * l.price), 0) AS revenue
        FROM gold.shop__public__customers c
        LEFT JOIN gold.shop__public__orders o ON o.customer_id = c.id
        LEFT JOIN gold.shop__public__order_lines l ON l.order_id = o.id
        GROUP BY c.id, c.name
quality:
  freshness.slo.seconds: 600
  reconcile.interval.seconds: 0
  expectations:
    public.order_lines:
      - type: expect_column_values_to_be_between
        kwargs: {{column: qty, min_value: 1}}
        severity: block
    public.customers:
      - type: expect_column_values_to_match_regex
        kwargs: {{column: email, regex: "^[^@]+@[^@]+$"}}
sources:
  - name: {source}
    connector: postgresql
    database.hostname: 127.0.0.1
    database.port: {port}
    database.user: postgres
    database.dbname: shop
    topic.prefix: shop
    slot.name: medallion_demo
    publication.name: medallion_demo
    publication.autocreate.mode: filtered
    schema.include.list: public
    snapshot.mode: initial
    skipped.operations: none          # Debezium skips truncates by default ("t")
"""


def demo_lake(config: Any) -> Path:
    """The demo's lake: ``demo-lake/`` beside the configured lake root."""
    return Path(config.lake.root).absolute().parent / "demo-lake"


@dataclass
class _Demo:
    """What the steps share."""

    output: Any
    lake: Path
    dsn: str = ""
    config: Any = None
    spark: Any = None
    rng: random.Random = field(default_factory=lambda: random.Random(7))
    landed: int = 0
    gold: Any = None
    next_order: int = 1


def _progress(iterable: Any, desc: str, *, unit: str = "tx") -> Any:
    from tqdm import tqdm

    # On stderr, so that --output json stays machine-readable on stdout.
    return tqdm(iterable, desc=desc, file=sys.stderr, leave=False, unit=unit)


def _sql(demo: _Demo, statements: list[tuple[str, tuple[Any, ...]]]) -> None:
    import psycopg

    with psycopg.connect(demo.dsn) as conn, conn.transaction():
        for statement, params in statements:
            conn.execute(statement, params)


def _new_order(demo: _Demo, customer: int) -> list[tuple[str, tuple[Any, ...]]]:
    order = demo.next_order
    demo.next_order += 1
    lines = []
    total = 0.0
    for line in range(1, demo.rng.randint(1, 4) + 1):
        qty, price = demo.rng.randint(1, 5), demo.rng.randint(100, 9999) / 100
        total += qty * price
        lines.append(
            (
                "INSERT INTO order_lines VALUES (%s, %s, %s, %s, %s)",
                (order, line, demo.rng.randint(1, 40), qty, price),
            )
        )
    return [
        (
            "INSERT INTO orders (id, customer_id, status, total) VALUES (%s, %s, 'new', %s)",
            (order, customer, round(total, 2)),
        ),
        *lines,
    ]


def _create_shop(demo: _Demo) -> None:
    statements: list[tuple[str, tuple[Any, ...]]] = [(s, ()) for s in _SCHEMA]
    for i in range(1, 201):
        statements.append(
            (
                "INSERT INTO customers (id, name, email) VALUES (%s, %s, %s)",
                (i, f"Customer {i}", f"customer{i}@example.com"),
            )
        )
    for i in range(1, 41):
        statements.append(
            (
                "INSERT INTO products VALUES (%s, %s, %s, %s)",
                (i, f"SKU-{i:04d}", f"Product {i}", demo.rng.randint(100, 9999) / 100),
            )
        )
    for _ in range(300):
        statements += _new_order(demo, demo.rng.randint(1, 200))
    _sql(demo, statements)
    demo.output.message("2. shop schema created: 200 customers, 40 products, 300 orders")


def _capture(demo: _Demo, title: str) -> None:
    from pipeline.orchestration import land_sources

    results = land_sources(demo.config, [SOURCE], lake_root=demo.lake)
    landed = sum(r.landed for r in results)
    demo.landed += landed
    demo.output.message(f"{title}: {landed} change events landed in bronze")


def _snapshot(demo: _Demo) -> None:
    _capture(demo, "3. initial snapshot")


def _delete_order(order: int) -> list[tuple[str, tuple[Any, ...]]]:
    return [
        ("DELETE FROM order_lines WHERE order_id = %s", (order,)),
        ("DELETE FROM orders WHERE id = %s", (order,)),
    ]


def _renumber(customer: int) -> list[tuple[str, tuple[Any, ...]]]:
    # A primary-key change; the customer's orders follow in the same transaction.
    return [
        ("UPDATE customers SET id = %s WHERE id = %s", (customer + 10_000, customer)),
        (
            "UPDATE orders SET customer_id = %s WHERE customer_id = %s",
            (customer + 10_000, customer),
        ),
    ]


def _workload(demo: _Demo) -> None:
    rng = demo.rng
    transactions: list[Callable[[], list[tuple[str, tuple[Any, ...]]]]] = []
    transactions += [lambda: _new_order(demo, rng.randint(1, 200)) for _ in range(60)]
    transactions += [
        lambda: [
            (
                "UPDATE orders SET status = %s WHERE id = %s",
                (rng.choice(["paid", "shipped", "delivered"]), rng.randint(1, 300)),
            ),
            (
                "UPDATE customers SET email = %s WHERE id = %s",
                (f"c{rng.randint(1, 10**6)}@example.org", rng.randint(1, 200)),
            ),
        ]
        for _ in range(80)
    ]
    transactions += [functools.partial(_delete_order, oid) for oid in rng.sample(range(1, 300), 20)]
    transactions += [functools.partial(_renumber, cid) for cid in rng.sample(range(1, 201), 5)]
    rng.shuffle(transactions)
    transactions += [
        lambda: [
            ("ALTER TABLE products ADD COLUMN category text", ()),
            (
                "UPDATE products SET category ="
                " CASE WHEN id %% 2 = 0 THEN 'books' ELSE 'games' END",
                (),
            ),
        ],
        # A truncate: the lines are rebuilt from scratch in the same transaction.
        lambda: [
            ("CREATE TEMP TABLE keep AS SELECT * FROM order_lines", ()),
            ("TRUNCATE order_lines", ()),
            ("INSERT INTO order_lines SELECT * FROM keep WHERE order_id %% 7 <> 0", ()),
        ],
    ]
    for make in _progress(transactions, "5. workload"):
        _sql(demo, make())
    demo.output.message(
        f"5. workload: {len(transactions)} transactions (inserts, updates, deletes, 5 primary-key"
        " changes, ADD COLUMN, TRUNCATE)"
    )
    _capture(demo, "6. streamed")


def _pipeline(demo: _Demo, title: str) -> None:
    from pipeline.orchestration import run_pipeline

    rows, demo.gold = run_pipeline(demo.config, lake_root=demo.lake)
    demo.output.result(f"{title}: bronze -> silver (MERGE per table, in source order)", rows)
    cut = demo.gold.current.get(SOURCE) if demo.gold is not None else None
    if cut is not None:
        demo.output.message(
            f"{title}: gold shows {SOURCE} at silver batch {cut.silver_batch} "
            f"(source time {cut.source_time:%H:%M:%S})"
        )


def _first_run(demo: _Demo) -> None:
    _pipeline(demo, "4. pipeline on the snapshot")


def _second_run(demo: _Demo) -> None:
    _pipeline(demo, "7. pipeline on the workload")


def _summary(demo: _Demo) -> None:
    import psycopg
    from psycopg import sql

    from pipeline.orchestration import spark_for
    from pipeline.sql import qualified
    from pipeline.status import pipeline_status

    spark = spark_for(demo.config, demo.lake)
    with psycopg.connect(demo.dsn) as conn:
        source_rows = {
            t: conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(t))
            ).fetchone()[0]  # type: ignore[index]
            for t in SHOP_TABLES
        }
    table_rows = []
    for table in SHOP_TABLES:
        name = f"{SOURCE}__public__{table}"
        silver = spark.sql(
            "SELECT count_if(NOT _cdc_deleted) AS live, count_if(_cdc_deleted) AS tombstones "
            f"FROM {qualified('silver', name)}"
        ).collect()[0]
        gold = spark.sql(f"SELECT count(*) AS n FROM {qualified('gold', name)}").collect()[0]["n"]
        table_rows.append(
            {
                "table": f"public.{table}",
                "source": source_rows[table],
                "silver_live": silver["live"],
                "silver_tombstones": silver["tombstones"],
                "gold": gold,
                "equal": source_rows[table] == silver["live"] == gold,
            }
        )
    demo.output.result(f"8. rows per layer ({demo.landed} events in bronze)", table_rows)
    sources, _tables = pipeline_status(demo.config, demo.lake)
    demo.output.result(
        "9. status",
        [
            {
                k: s[k]
                for k in (
                    "source",
                    "events_per_s",
                    "lag_bronze_silver_s",
                    "lag_silver_gold_s",
                    "silver_quarantined",
                    "slot_lag_bytes",
                )
            }
            for s in sources
        ],
    )
    quality = demo.gold.quality if demo.gold is not None else None
    if quality is not None:
        demo.output.message(
            f"10. quality: {quality.passed} checks passed, {quality.warned} warnings, "
            f"{len(quality.blocking_failures)} blocking failures; report: {quality.report_path}"
        )
    demo.output.message(
        f"11. notebooks: {_REPO / 'notebooks'} (MEDALLION_CONFIG={demo.lake / 'pipeline.yaml'})"
    )
    if not all(r["equal"] for r in table_rows):
        raise PipelineError("demo: the lake does not equal the source (see the table above)")


STEPS: tuple[Callable[[_Demo], None], ...] = (
    _create_shop,
    _snapshot,
    _first_run,
    _workload,
    _second_run,
)
"""The demo, step by step (the summary runs while the database is still up)."""


def run_demo(config: Any, output: Any, *, lake_root: Path | None = None) -> None:
    """Run the demo end to end and print a summary.

    Args:
        config: The pipeline config (only its lake root is used, to place ``demo-lake/``).
        output: A CLI :class:`~pipeline.cli.Output`.
        lake_root: The demo's lake (recreated); default :func:`demo_lake`.

    Raises:
        PipelineError: A step failed, or the lake does not equal the source at the end.
    """
    from pipeline.config import load_config
    from pipeline.embedded_pg import embedded_postgres

    lake = Path(lake_root).absolute() if lake_root else demo_lake(config)
    if lake.exists():
        shutil.rmtree(lake)
    lake.mkdir(parents=True)
    with embedded_postgres("shop") as dsn:
        port = dsn.split("port=")[1].split()[0]
        path = lake / "pipeline.yaml"
        path.write_text(_CONFIG.format(lake=lake, source=SOURCE, port=port))
        output.message(f"1. private PostgreSQL 15 on 127.0.0.1:{port}; lake {lake}")
        demo = _Demo(output, lake, dsn, load_config(path))
        for step in _progress(STEPS, "demo", unit="step"):
            step(demo)
        _summary(demo)
