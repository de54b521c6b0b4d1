"""Real Debezium through medallion (issue 12, item 7): on the private PostgreSQL and MariaDB a
seeded random shop workload runs (inserts, multi-row statements and transactions, updates,
deletes, primary-key changes, a TRUNCATE, an added column with a default, more changes) while
two agents capture the same history into one lake:

* **Debezium Embedded** (the ``tests/debezium`` runner, JsonConverter with schemas), whose output
  is landed by a ``debezium_json`` source (``format: kafka_json``) named ``debezium``;
* **medallion's own agent** (``capture/postgresql/source.py`` / ``capture/mysql/source.py``) named
  ``medallion``.

``SilverJob.run_once()`` applies bronze. Then (a) every live silver row of the Debezium source
equals the source table, row by row and column by column, read independently with psycopg /
PyMySQL and converted explicitly here; and (b) it equals the silver row of medallion's own agent
(same columns, same Spark types, same values). All differences are gathered and reported
together. The workload seed is printed and can be fixed with ``MEDALLION_TEST_SEED``.
"""

from __future__ import annotations

import math
import os
import random
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from bronze.writer import BronzeTables, BronzeWriter
from capture.registry import create_source
from pipeline.config import PipelineConfig
from pipeline.landing import LandingAgent, LandingResult
from silver.job import SilverJob, SilverRunResult, silver_table_name
from silver.merge import DELETED
from tests.fix_debezium import DebeziumCorner, DebeziumRunner, MariaDbDebezium, PgDebezium

pytestmark = [pytest.mark.postgres, pytest.mark.mysql, pytest.mark.spark, pytest.mark.delta]

DEBEZIUM = "debezium"
"""Source name of Debezium's output in the lake."""
AGENT = "medallion"
"""Source name of medallion's own capture agent in the lake."""


_GIVEN_SEED = os.environ.get("MEDALLION_TEST_SEED")
"""Read at import: the suite's session fixture removes MEDALLION_* variables before tests run."""


def workload_seed() -> int:
    return int(_GIVEN_SEED) if _GIVEN_SEED else random.SystemRandom().randrange(1 << 31)


# --- the workload ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Dialect:
    """How the shop is spelled on one database.

    Attributes:
        begin: Statement that opens a transaction.
        double: Type of ``customers.score``.
        timestamp: Type of ``customers.updated_at`` and ``orders.placed_at`` (no time zone).
        extra: Name and type of the database-specific column of ``orders``.
        extra_value: A random literal for ``extra``.
        nan: Whether ``score`` may hold NaN (MariaDB has no NaN).
    """

    begin: str
    double: str
    timestamp: str
    extra: tuple[str, str]
    extra_value: Callable[[random.Random], str]
    nan: bool


def _pg_tags(rng: random.Random) -> str:
    tags = rng.sample(["red", "blue", "gift", "a,b", 'say "hi"', ""], rng.randint(0, 3))
    if not tags:
        return "'{}'::text[]"
    quoted = ", ".join("'" + t.replace("'", "''") + "'" for t in tags)
    return f"ARRAY[{quoted}]::text[]"


def _mariadb_sku(rng: random.Random) -> str:
    # around and above 2^63: exact only as Decimal(20,0) (bigint.unsigned.handling.mode=precise)
    return str(rng.choice([rng.randint(0, 10**6), rng.randint(2**63 - 5, 2**64 - 1)]))


PG_SHOP = Dialect("BEGIN", "double precision", "timestamp(6)", ("tags", "text[]"), _pg_tags, True)
MARIADB_SHOP = Dialect(
    "START TRANSACTION", "DOUBLE", "DATETIME(6)", ("sku", "BIGINT UNSIGNED"), _mariadb_sku, False
)


def shop_ddl(d: Dialect) -> list[str]:
    return [
        "CREATE TABLE customers (id integer PRIMARY KEY, name varchar(40) NOT NULL, "
        f"email varchar(80), balance numeric(12,2), score {d.double}, updated_at {d.timestamp})",
        "CREATE TABLE orders (id integer PRIMARY KEY, customer_id integer NOT NULL, "
        f"status varchar(10) NOT NULL, amount numeric(10,2) NOT NULL, "
        f"placed_at {d.timestamp} NOT NULL, {d.extra[0]} {d.extra[1]})",
        "CREATE TABLE order_lines (order_id integer NOT NULL, line_no integer NOT NULL, "
        "qty integer NOT NULL, price numeric(10,2) NOT NULL, PRIMARY KEY (order_id, line_no))",
    ]


@dataclass
class ShopWorkload:
    """A seeded random workload; tracks which keys exist so every statement changes rows."""

    dialect: Dialect
    rng: random.Random
    customers: set[int] = field(default_factory=set)
    orders: set[int] = field(default_factory=set)
    lines: set[tuple[int, int]] = field(default_factory=set)
    next_id: int = 1
    channel: bool = False  # orders has the added column

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id

    def _ts(self) -> str:
        r = self.rng
        micros = r.choice([0, r.randint(0, 999_999)])
        day = f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}"
        clock = f"{r.randint(0, 23):02d}:{r.randint(0, 59):02d}:{r.randint(0, 59):02d}"
        return f"'{day} {clock}.{micros:06d}'"

    def _money(self, high: int) -> str:
        return str(Decimal(self.rng.randint(-high * 100, high * 100)) / 100)

    def _score(self) -> str:
        if self.dialect.nan and self.rng.random() < 0.1:
            return "'NaN'"
        return repr(self.rng.choice([0.0, -1.5, self.rng.uniform(-1e6, 1e6), 1e-300]))

    def insert_customer(self) -> str:
        i = self.new_id()
        self.customers.add(i)
        email = self.rng.choice(["NULL", f"'c{i}@example.com'"])
        return (
            f"INSERT INTO customers VALUES ({i}, 'customer {i}', {email}, "
            f"{self._money(10_000)}, {self._score()}, {self._ts()})"
        )

    def insert_orders(self) -> str:
        rows = []
        for _ in range(self.rng.randint(1, 3)):  # a multi-row INSERT: one statement, n events
            i = self.new_id()
            self.orders.add(i)
            customer = self.rng.choice(sorted(self.customers)) if self.customers else 0
            values = (
                f"({i}, {customer}, 'new', {self._money(1000).lstrip('-')}, {self._ts()}, "
                f"{self.dialect.extra_value(self.rng)}"
            )
            if self.channel:
                values += ", " + self.rng.choice(["'shop'", "'phone'", "NULL"])
            rows.append(values + ")")
        columns = "id, customer_id, status, amount, placed_at, " + self.dialect.extra[0]
        columns += ", channel" if self.channel else ""
        return f"INSERT INTO orders ({columns}) VALUES {', '.join(rows)}"

    def insert_lines(self) -> str | None:
        if not self.orders:
            return None
        order = self.rng.choice(sorted(self.orders))
        taken = {line for o, line in self.lines if o == order}
        new = [n for n in range(1, 9) if n not in taken][: self.rng.randint(1, 3)]
        if not new:
            return None
        self.lines.update((order, n) for n in new)
        values = ", ".join(
            f"({order}, {n}, {self.rng.randint(1, 9)}, {self._money(100).lstrip('-')})" for n in new
        )
        return f"INSERT INTO order_lines VALUES {values}"

    def update(self) -> str | None:
        r = self.rng
        kind = r.choice(["customer", "order", "lines"])
        if kind == "customer" and self.customers:
            c = r.choice(sorted(self.customers))
            return (
                f"UPDATE customers SET balance = balance + {self._money(100)}, "
                f"score = {self._score()}, updated_at = {self._ts()} WHERE id = {c}"
            )
        if kind == "order" and self.orders:
            o = r.choice(sorted(self.orders))
            status = r.choice(["paid", "shipped", "returned"])
            sets = f"status = '{status}', {self.dialect.extra[0]} = {self.dialect.extra_value(r)}"
            if self.channel and r.random() < 0.5:
                sets += ", channel = " + r.choice(["'shop'", "'web'", "NULL"])
            return f"UPDATE orders SET {sets} WHERE id = {o}"
        if self.lines:
            o = r.choice(sorted({o for o, _ in self.lines}))
            return f"UPDATE order_lines SET qty = qty + 1 WHERE order_id = {o}"  # multi-row
        return None

    def move_key(self) -> str | None:
        r = self.rng
        if r.random() < 0.5 and self.customers:
            old, new = r.choice(sorted(self.customers)), self.new_id()
            self.customers.remove(old)
            self.customers.add(new)
            return f"UPDATE customers SET id = {new} WHERE id = {old}"
        if self.lines:
            order, old = r.choice(sorted(self.lines))
            free = [n for n in range(10, 40) if (order, n) not in self.lines]
            new = r.choice(free)
            self.lines.remove((order, old))
            self.lines.add((order, new))
            return (
                f"UPDATE order_lines SET line_no = {new} "
                f"WHERE order_id = {order} AND line_no = {old}"
            )
        return None

    def delete(self) -> str | None:
        r = self.rng
        if r.random() < 0.4 and self.orders:
            o = r.choice(sorted(self.orders))
            self.orders.remove(o)
            return f"DELETE FROM orders WHERE id = {o}"
        if r.random() < 0.5 and self.customers:
            c = r.choice(sorted(self.customers))
            self.customers.remove(c)
            return f"DELETE FROM customers WHERE id = {c}"
        if self.lines:
            line = r.choice(sorted(self.lines))
            self.lines.remove(line)
            return f"DELETE FROM order_lines WHERE order_id = {line[0]} AND line_no = {line[1]}"
        return None

    def statement(self) -> str | None:
        action = self.rng.choices(
            [
                self.insert_customer,
                self.insert_orders,
                self.insert_lines,
                self.update,
                self.move_key,
                self.delete,
            ],
            weights=[2, 3, 3, 5, 2, 2],
        )[0]
        return action()

    def transactions(self, count: int) -> list[str]:
        """``count`` transactions of 1-4 statements (single statements run in autocommit)."""
        out: list[str] = []
        for _ in range(count):
            statements = [s for s in (self.statement() for _ in range(self.rng.randint(1, 4))) if s]
            if len(statements) > 1:
                out += [self.dialect.begin, *statements, "COMMIT"]
            else:
                out += statements
        return out

    def snapshot_rows(self) -> list[str]:
        out = [self.insert_customer() for _ in range(5)]
        out += [self.insert_orders() for _ in range(3)]
        out += [s for s in (self.insert_lines() for _ in range(4)) if s]
        return out

    def truncate_and_alter(self) -> list[str]:
        self.lines.clear()
        out = ["TRUNCATE order_lines", *[s for s in (self.insert_lines() for _ in range(2)) if s]]
        # rows that exist now show 'web' in the source without a change event
        out.append("ALTER TABLE orders ADD COLUMN channel varchar(10) DEFAULT 'web'")
        self.channel = True
        return out


def script(statements: Sequence[str]) -> str:
    return "".join(f"{s};\n" for s in statements)


# --- capture -----------------------------------------------------------------------------------


class Stopwatch:
    """Seconds per phase, printed with the test's output (no assertion on them)."""

    def __init__(self) -> None:
        self.last = time.monotonic()
        self.laps: list[tuple[str, float]] = []

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.laps.append((name, now - self.last))
        self.last = now

    def __str__(self) -> str:
        return ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.laps)


def land(config: PipelineConfig, name: str, lake: Path) -> LandingResult:
    source_config = next(s for s in config.sources if s.name == name)
    agent = LandingAgent(create_source(source_config), BronzeWriter(BronzeTables.under(lake)))
    return agent.run()


def run_silver(spark: Any, lake: Path, context: str) -> SilverRunResult:
    try:
        return SilverJob(spark, lake).run_once()
    except Exception as exc:
        text = str(exc)
        causes = re.findall(r"^(\w+(?:Error|Exception): .*)$", text, re.M)
        pytest.fail(
            f"{context}: SilverJob.run_once() failed: {type(exc).__name__}: "
            f"{causes[-1] if causes else text[:600]}",
            pytrace=False,
        )


def capture_both(
    spark: Any,
    corner: DebeziumCorner,
    agent_source: dict[str, Any],
    dialect: Dialect,
    lake: Path,
    seed: int,
) -> tuple[SilverRunResult, DebeziumRunner, str]:
    """Snapshot, random workload, truncate + added column, more workload; both agents capture;
    silver applies bronze. Returns silver's result, the runner, and the workload's SQL."""
    work = ShopWorkload(dialect, random.Random(seed))
    setup = shop_ddl(dialect) + work.snapshot_rows()
    # the agent lands between the parts (split at transaction boundaries)
    parts = [
        work.transactions(7),
        work.transactions(7) + work.truncate_and_alter() + work.transactions(10),
    ]
    sql = f"-- seed {seed}\n{script(setup)}" + "".join(
        f"-- streamed, part {n}\n{script(part)}" for n, part in enumerate(parts, 1)
    )
    (lake.parent / "workload.sql").write_text(sql)
    config = PipelineConfig.model_validate(
        {
            "lake": {"root": str(lake)},
            "sources": [
                agent_source,
                {
                    "name": DEBEZIUM,
                    "connector": "debezium_json",
                    "path": str(lake.parent / "debezium"),
                    "file.pattern": "*.jsonl",
                    "format": "kafka_json",
                },
            ],
        }
    )
    watch = Stopwatch()
    corner.run_script(None, script(setup))
    runner = corner.runner()
    runner.start()
    corner.sync(runner)
    watch.lap("debezium start+snapshot")
    land(config, AGENT, lake)  # the agent's snapshot
    watch.lap("agent snapshot")
    corner.run_script(None, script(parts[0]))
    land(config, AGENT, lake)  # part of the stream, mid-way
    corner.run_script(None, script(parts[1]))
    corner.sync(runner)
    watch.lap("workload")
    runner.stop()
    watch.lap("debezium stop")
    land(config, AGENT, lake)
    (lake.parent / "debezium").mkdir()
    (lake.parent / "debezium" / "output.jsonl").write_bytes(runner.output.read_bytes())
    landed = land(config, DEBEZIUM, lake)
    assert landed.quarantined == 0, f"bronze quarantined Debezium records: {landed}"
    watch.lap("landing")
    result = None
    try:
        result = run_silver(spark, lake, f"workload seed {seed}")
        return result, runner, sql
    finally:
        watch.lap("silver")
        summary = result and (
            f"silver read {result.events} events, quarantined {result.quarantined}, "
            f"{result.tx_timed_out} transactions timed out"
        )
        print(f"seed {seed}: {len(runner.records())} Debezium records; {watch}; {summary}")


# --- comparing ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Table:
    """A compared table: key columns and the other columns, with explicit conversions.

    Attributes:
        name: Table name.
        key: Key columns.
        columns: Compared non-key columns.
        source_sql: SELECT expression per column where the source needs one (default: the column).
        silver_sql: Spark SQL expression per column where silver needs one.
        convert_source: Applied to the source's non-NULL value.
        convert_silver: Applied to silver's non-NULL value.
    """

    name: str
    key: tuple[str, ...]
    columns: tuple[str, ...]
    source_sql: dict[str, str] = field(default_factory=dict)
    silver_sql: dict[str, str] = field(default_factory=dict)
    convert_source: dict[str, Callable[[Any], Any]] = field(default_factory=dict)
    convert_silver: dict[str, Callable[[Any], Any]] = field(default_factory=dict)


def _float(value: Any) -> Any:
    """NaN equals NaN for the comparison (both are the source's NaN)."""
    return "NaN" if isinstance(value, float) and math.isnan(value) else value


def shop_tables(d: Dialect) -> list[Table]:
    extra = d.extra[0]
    extra_convert: dict[str, Callable[[Any], Any]] = {}
    if extra == "sku":  # BIGINT UNSIGNED: PyMySQL int, silver decimal(20,0)
        extra_convert = {"sku": lambda v: int(Decimal(v))}
    return [
        Table(
            "customers",
            ("id",),
            ("name", "email", "balance", "score", "updated_at"),
            convert_source={"score": _float},
            convert_silver={"score": _float},
        ),
        Table(
            "orders",
            ("id",),
            ("customer_id", "status", "amount", "placed_at", extra, "channel"),
            convert_silver=extra_convert,
        ),
        Table("order_lines", ("order_id", "line_no"), ("qty", "price")),
    ]


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 100 else text[:97] + "..."


def source_rows(corner: DebeziumCorner, table: Table) -> dict[tuple[Any, ...], dict[str, Any]]:
    exprs = [table.source_sql.get(c, c) for c in (*table.key, *table.columns)]
    query = f"SELECT {', '.join(exprs)} FROM {corner.namespace}.{table.name}"
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in corner.query(query):
        key, values = row[: len(table.key)], row[len(table.key) :]
        out[tuple(key)] = {
            c: v if v is None or c not in table.convert_source else table.convert_source[c](v)
            for c, v in zip(table.columns, values, strict=True)
        }
    return out


def silver_frame(spark: Any, lake: Path, source: str, corner: DebeziumCorner, table: str) -> Any:
    path = lake / "silver" / silver_table_name(source, f"{corner.namespace}.{table}")
    if not path.exists():
        return None
    return spark.read.format("delta").load(str(path)).where(f"NOT {DELETED}")


def silver_rows(frame: Any, table: Table) -> dict[tuple[Any, ...], dict[str, Any]]:
    from pyspark.sql import functions as F

    present = set(frame.columns)
    exprs = [
        F.expr(table.silver_sql.get(c, f"`{c}`")).alias(c)
        if c in present
        else F.lit("<no such column in silver>").alias(c)
        for c in (*table.key, *table.columns)
    ]
    out: dict[tuple[Any, ...], dict[str, Any]] = {}
    for row in frame.select(*exprs).collect():
        key = tuple(row[c] for c in table.key)
        assert key not in out, f"{table.name}: two live silver rows for key {key}"
        out[key] = {
            c: row[c]
            if row[c] is None or c not in table.convert_silver
            else table.convert_silver[c](row[c])
            for c in table.columns
        }
    return out


def differences(
    want: dict[tuple[Any, ...], dict[str, Any]],
    have: dict[tuple[Any, ...], dict[str, Any]],
    what: str,
    names: tuple[str, str],
) -> list[str]:
    first, second = names
    problems = [
        f"{what} key {k}: in {first}, missing in {second}"
        for k in sorted(want.keys() - have.keys())
    ]
    problems += [
        f"{what} key {k}: in {second}, not in {first}" for k in sorted(have.keys() - want.keys())
    ]
    for key in sorted(want.keys() & have.keys()):
        for column, value in want[key].items():
            if value != have[key].get(column):
                problems.append(
                    f"{what} key {key} {column}: {first} {_short(value)} != "
                    f"{second} {_short(have[key].get(column))}"
                )
    return problems


def compare(
    spark: Any, lake: Path, corner: DebeziumCorner, tables: list[Table]
) -> tuple[list[str], int]:
    """(a) silver of the Debezium source vs the source, (b) vs silver of the agent."""
    problems: list[str] = []
    compared = 0
    for table in tables:
        source = source_rows(corner, table)
        compared += len(source)
        dbz = silver_frame(spark, lake, DEBEZIUM, corner, table.name)
        agent = silver_frame(spark, lake, AGENT, corner, table.name)
        if dbz is None:
            problems.append(f"(a) {table.name}: no silver table for the Debezium source")
            continue
        dbz_rows = silver_rows(dbz, table)
        problems += differences(source, dbz_rows, f"(a) {table.name}", ("source", "debezium"))
        if agent is None:
            problems.append(f"(b) {table.name}: no silver table for medallion's agent")
            continue
        types = {f.name: f.dataType.simpleString() for f in dbz.schema.fields}
        agent_types = {f.name: f.dataType.simpleString() for f in agent.schema.fields}
        for column in (*table.key, *table.columns):
            if types.get(column) != agent_types.get(column):
                problems.append(
                    f"(b) {table.name}.{column}: silver type {types.get(column)} (debezium) != "
                    f"{agent_types.get(column)} (medallion)"
                )
        problems += differences(
            silver_rows(agent, table), dbz_rows, f"(b) {table.name}", ("medallion", "debezium")
        )
    return problems, compared


def shop_tables_regex(corner: DebeziumCorner) -> str:
    """The agent captures the shop's tables (not the marker table Debezium needs)."""
    return f"{corner.namespace}\\.(customers|orders|order_lines)"


def quarantined(spark: Any, lake: Path) -> list[str]:
    """Silver's quarantine rows, as problems: nothing in this workload is unrepresentable."""
    path = lake / "silver" / "_quarantine"
    if not path.exists():
        return []
    rows = [r.asDict() for r in spark.read.format("delta").load(str(path)).collect()]
    return [
        f"silver quarantined ({r.get('kind') or 'event'}): {r['source']} {r['collection']} "
        f"key {r['key']} column {r.get('column')}: {r['reason']}"
        for r in rows
    ]


def check(
    spark: Any, lake: Path, corner: DebeziumCorner, dialect: Dialect, seed: int, timings: str
) -> None:
    problems, compared = compare(spark, lake, corner, shop_tables(dialect))
    problems += quarantined(spark, lake)
    print(f"seed {seed}: {compared} source rows compared; {timings}")
    report = lake.parent / "differences.txt"
    report.write_text("\n".join(problems) + "\n")
    assert not problems, (
        f"workload seed {seed} (rerun with MEDALLION_TEST_SEED={seed}; SQL in "
        f"{lake.parent / 'workload.sql'}, all differences in {report}): "
        f"{len(problems)} differences\n" + "\n".join(problems[:40])
    )


def test_debezium_postgres_through_silver_equals_source_and_agent(
    spark: Any, dbz_pg: PgDebezium, tmp_path: Path
) -> None:
    seed = workload_seed()
    print(f"workload seed {seed}")
    info = dbz_pg.connector_properties(tmp_path)
    agent = {
        "name": AGENT,
        "connector": "postgresql",
        "database.hostname": info["database.hostname"],
        "database.port": int(info["database.port"]),
        "database.user": info["database.user"],
        "database.dbname": info["database.dbname"],
        "topic.prefix": "srv",
        "slot.name": f"medallion_{dbz_pg.tag}",
        "publication.name": f"medallion_pub_{dbz_pg.tag}",
        "schema.include.list": dbz_pg.schema,
        "table.include.list": shop_tables_regex(dbz_pg),
        "skipped.operations": "none",
        "provide.transaction.metadata": True,
    }
    started = time.monotonic()
    try:
        capture_both(spark, dbz_pg, agent, PG_SHOP, tmp_path / "lake", seed)
        captured = time.monotonic() - started
        check(spark, tmp_path / "lake", dbz_pg, PG_SHOP, seed, f"capture+silver {captured:.1f} s")
    finally:
        dbz_pg.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            f"WHERE slot_name = 'medallion_{dbz_pg.tag}' AND NOT active",
            f"DROP PUBLICATION IF EXISTS medallion_pub_{dbz_pg.tag}",
        )


def test_debezium_mariadb_through_silver_equals_source_and_agent(
    spark: Any, dbz_mariadb: MariaDbDebezium, tmp_path: Path
) -> None:
    seed = workload_seed()
    print(f"workload seed {seed}")
    conn = dbz_mariadb.conn
    agent: dict[str, Any] = {
        "name": AGENT,
        "connector": "mysql",
        "database.hostname": conn["host"],
        "database.port": conn["port"],
        "database.user": conn["user"],
        "database.include.list": dbz_mariadb.database,
        "table.include.list": shop_tables_regex(dbz_mariadb),
        "topic.prefix": "srv",
        "skipped.operations": "none",
        "provide.transaction.metadata": True,
        "database.server.id": dbz_mariadb.server_id + 3000,
    }
    if conn.get("password"):
        os.environ["MEDALLION_TEST_MYSQL_PASSWORD"] = str(conn["password"])
        agent["database.password"] = "${MEDALLION_TEST_MYSQL_PASSWORD}"
    started = time.monotonic()
    capture_both(spark, dbz_mariadb, agent, MARIADB_SHOP, tmp_path / "lake", seed)
    captured = time.monotonic() - started
    check(
        spark,
        tmp_path / "lake",
        dbz_mariadb,
        MARIADB_SHOP,
        seed,
        f"capture+silver {captured:.1f} s",
    )
