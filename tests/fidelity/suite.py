"""Runs a type table through a connector: rows in, bronze envelopes, silver, the database.

The plan (:class:`Plan`) is the same for every connector:

* rows ``1..depth`` hold edge ``k`` of every column (NULL past a column's last edge) and row
  ``depth + 1`` holds only NULLs; they are inserted **before** the agent starts (snapshot path);
* the same rows are inserted again as ``STREAM + k`` while the agent streams;
* then row ``1`` (a snapshot row) and row ``STREAM + 1`` are updated to row 2's values, and
  row ``STREAM + 3`` is deleted, so before images carry edge values too.

Each ``check_*`` function returns a list of problems (empty: all good), so one run reports every
failing value instead of stopping at the first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
from deltalake import DeltaTable

from bronze import schema as S
from capture.captured_table import HEADER_UNREPRESENTABLE
from tests.fidelity.model import Connector, Edge, TypeCase, TypeTable, same

__all__ = [
    "STREAM",
    "Plan",
    "bronze_records",
    "check_database",
    "check_envelopes",
    "check_silver",
    "load_rows",
]

STREAM = 100
"""Offset of the ids of the rows inserted while the agent streams."""


@dataclass(frozen=True)
class Plan:
    """Which row holds which edges at the end, and which images the envelopes must repeat."""

    table: TypeTable

    @property
    def rows(self) -> range:
        """Row numbers ``1..depth+1`` (the last one all NULL)."""
        return range(1, self.table.depth + 2)

    @property
    def updated(self) -> tuple[int, ...]:
        """Rows set to row 2's values by an UPDATE: a snapshot row and a streamed row."""
        return (1, STREAM + 1)

    @property
    def deleted(self) -> int:
        """The streamed row deleted at the end."""
        return STREAM + 3

    def final(self) -> dict[int, int]:
        """Live row id -> the row number whose edges it holds at the end."""
        out = {}
        for k in self.rows:
            for row_id in (k, STREAM + k):
                out[row_id] = 2 if row_id in self.updated else k
        del out[self.deleted]
        return out


def load_rows(connector: Connector, plan: Plan, *, stream: bool) -> None:
    """Insert the plan's rows: ids ``k`` (snapshot) or ``STREAM + k`` (stream)."""
    for k in plan.rows:
        connector.insert(STREAM + k if stream else k, plan.table.literals(k))


def update_and_delete(connector: Connector, plan: Plan, assign: Callable[[int, int], str]) -> None:
    """Run the plan's UPDATEs (``assign(target, source)`` is the connector's statement copying
    row ``source``'s columns into row ``target``) and its DELETE."""
    for target in plan.updated:
        connector.execute(assign(target, STREAM + 2))
    connector.execute(f"DELETE FROM {connector.collection} WHERE id = {plan.deleted}")


# --- bronze -------------------------------------------------------------------------------------


def bronze_records(lake: Path) -> list[dict[str, Any]]:
    """Data events of bronze in position order: ``op``, ``before``, ``after`` and the C1 header."""
    table = DeltaTable(str(lake / "bronze" / "events")).to_pyarrow_table().to_pylist()
    out = []
    for row in sorted(table, key=lambda r: r[S.POSITION]):
        if row[S.KIND] != "data" or row[S.VALUE_JSON] is None:
            continue
        value = orjson.loads(row[S.VALUE_JSON])
        headers = {h["key"]: h["value"] for h in row[S.HEADERS] or ()}
        issues = headers.get(HEADER_UNREPRESENTABLE)
        out.append(
            {
                "op": value["op"],
                "before": value["before"],
                "after": value["after"],
                "issues": orjson.loads(issues) if issues is not None else {},
            }
        )
    return out


def _without_id(image: dict[str, Any] | None) -> dict[str, Any] | None:
    return None if image is None else {k: v for k, v in image.items() if k != "id"}


def check_envelopes(plan: Plan, records: Sequence[dict[str, Any]]) -> list[str]:
    """The agent's side: snapshot and stream give identical images and C1 headers for the same
    values, before images repeat the images the rows were written with, and every C1 edge is a
    null field named in the header with its reason and text."""
    problems: list[str] = []
    first: dict[int, dict[str, Any]] = {}
    for record in records:
        image = record["after"] if record["op"] in ("r", "c") else None
        if image is not None and image["id"] not in first:
            first[image["id"]] = record
    for k in plan.rows:
        snap, streamed = first.get(k), first.get(STREAM + k)
        if snap is None or streamed is None or snap["op"] != "r" or streamed["op"] != "c":
            problems.append(f"row {k}: expected a snapshot read and a streamed create")
            continue
        if _without_id(snap["after"]) != _without_id(streamed["after"]):
            problems.append(f"row {k}: snapshot and stream images differ: {_diff(snap, streamed)}")
        if snap["issues"] != streamed["issues"]:
            problems.append(
                f"row {k}: snapshot and stream C1 headers differ: {snap['issues']} != "
                f"{streamed['issues']}"
            )
        problems += _c1_named(plan.table, k, snap)
    changes = [r for r in records if r["op"] in ("u", "d")]
    for row_id in (*plan.updated, plan.deleted):
        change = next((r for r in changes if (r["before"] or {}).get("id") == row_id), None)
        written = first.get(row_id)
        if change is None or written is None:
            problems.append(f"row {row_id}: no update/delete with a before image")
            continue
        if change["before"] != written["after"]:
            problems.append(f"row {row_id}: the before image differs from the image written")
        if change["issues"].get("before") != written["issues"].get("after"):
            problems.append(f"row {row_id}: the before image's C1 header differs from the after's")
    return problems


def _diff(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    x, y = a["after"], b["after"]
    return {
        k: (x.get(k), y.get(k)) for k in x.keys() | y.keys() if k != "id" and x.get(k) != y.get(k)
    }


def _c1_named(table: TypeTable, k: int, record: dict[str, Any]) -> list[str]:
    problems = []
    named = record["issues"].get("after", {})
    for case in table.cases:
        edge = table.edge(case, k)
        if edge is None or edge.c1 is None:
            if case.column in named:
                problems.append(f"row {k} {case.column}: unexpected C1 entry {named[case.column]}")
            continue
        issue = named.get(case.column)
        if record["after"].get(case.column) is not None or issue is None:
            problems.append(
                f"row {k} {case.column}: {edge.literal} is not a null field with a C1 entry"
            )
        elif edge.c1 not in issue.get("reason", "") or issue.get("text") != edge.text:
            problems.append(f"row {k} {case.column}: C1 entry {issue} does not match {edge}")
    return problems


# --- silver -------------------------------------------------------------------------------------


def check_silver(spark: Any, table_path: Path, quarantine_path: Path, plan: Plan) -> list[str]:
    """Silver's side: the column types, every live row's values in canonical form, the deleted
    row gone, and a ``kind = 'value'`` quarantine row with the text for every C1 edge."""
    from pyspark.sql import functions as F

    problems: list[str] = []
    if not table_path.exists():
        return [f"no silver table at {table_path}"]
    frame = spark.read.format("delta").load(str(table_path))
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    for case in plan.table.cases:
        if types.get(case.column) != case.silver_type:
            problems.append(
                f"{case.column} ({case.sql_type}): silver type {types.get(case.column)}, "
                f"expected {case.silver_type}"
            )
    present = [c for c in plan.table.cases if c.column in types]
    live = frame.where("NOT _cdc_deleted").select(
        "id",
        *[
            F.expr(c.reading.silver_sql.replace("{c}", f"`{c.column}`")).alias(c.column)
            for c in present
        ],
    )
    got = {row["id"]: row for row in live.collect()}
    final = plan.final()
    for row_id in sorted(final.keys() - got.keys()):
        problems.append(f"row {row_id}: missing in silver")
    for row_id in sorted(got.keys() - final.keys()):
        problems.append(f"row {row_id}: in silver but deleted (or never written) in the source")
    quarantined = _value_quarantine(spark, quarantine_path)
    for row_id, k in sorted(final.items()):
        row = got.get(row_id)
        if row is None:
            continue
        for case in present:
            edge = plan.table.edge(case, k)
            have = row[case.column]
            have = None if have is None else case.reading.silver_map(have)
            problems += _compare_silver(case, edge, row_id, have, quarantined)
    return problems


def _compare_silver(
    case: TypeCase,
    edge: Edge | None,
    row_id: int,
    have: Any,
    quarantined: dict[tuple[int, str], str | None] | str,
) -> list[str]:
    where = f"row {row_id} {case.column} ({case.sql_type})"
    if edge is None:
        return [] if have is None else [f"{where}: NULL in the source, {have!r} in silver"]
    if edge.c1 is None:
        if same(have, edge.expected):
            return []
        return [f"{where} = {edge.literal}: silver {have!r}, expected {edge.expected!r}"]
    problems = [] if have is None else [f"{where} = {edge.literal}: C1 value, silver {have!r}"]
    if isinstance(quarantined, str):
        problems.append(f"{where} = {edge.literal}: {quarantined}")
    elif (row_id, case.column) not in quarantined:
        problems.append(f"{where} = {edge.literal}: no kind='value' quarantine row")
    elif quarantined[(row_id, case.column)] != edge.text:
        problems.append(
            f"{where}: quarantine value_text {quarantined[(row_id, case.column)]!r}, "
            f"expected {edge.text!r}"
        )
    return problems


def _value_quarantine(spark: Any, path: Path) -> dict[tuple[int, str], str | None] | str:
    """``(id, column) -> value_text`` of silver's ``kind = 'value'`` quarantine rows (contract
    C1), or why they cannot be read."""
    if not path.exists():
        return "silver/_quarantine does not exist"
    frame = spark.read.format("delta").load(str(path))
    if not {"kind", "column", "value_text"} <= set(frame.columns):
        return "silver/_quarantine has no kind/column/value_text columns (contract C1)"
    out: dict[tuple[int, str], str | None] = {}
    for row in frame.where("kind = 'value'").select("key", "column", "value_text").collect():
        key = _key_id(row["key"])
        if key is not None:
            out[(key, row["column"])] = row["value_text"]
    return out


def _key_id(key: Any) -> int | None:
    try:
        parsed = json.loads(key) if isinstance(key, str) else key
    except ValueError:
        return None
    if isinstance(parsed, dict) and isinstance(parsed.get("id"), int):
        return int(parsed["id"])
    return None


# --- the database -------------------------------------------------------------------------------


def check_database(connector: Connector, plan: Plan) -> list[str]:
    """The table's expectations against the database itself, read with the plain driver and
    each column's own mapping: the type table is right about what the source holds."""
    table = plan.table
    expressions: list[str] = []
    for case in table.cases:
        expressions.append(case.reading.db_sql.replace("{c}", case.column))
        expressions.append(table.text_sql.replace("{c}", case.column))
    read = connector.select(expressions)
    problems: list[str] = []
    for row_id, k in sorted(plan.final().items()):
        values = read.get(row_id)
        if values is None:
            problems.append(f"row {row_id}: not in the source")
            continue
        for i, case in enumerate(table.cases):
            edge = table.edge(case, k)
            value, text = values[2 * i], values[2 * i + 1]
            problems += _compare_source(case, edge, row_id, value, text)
    return problems


def _compare_source(
    case: TypeCase, edge: Edge | None, row_id: int, value: Any, text: Any
) -> list[str]:
    where = f"source row {row_id} {case.column} ({case.sql_type})"
    if edge is None:
        return [] if text is None else [f"{where}: expected NULL, the database has {text!r}"]
    if edge.c1 is not None:
        return [] if text == edge.text else [f"{where}: text {text!r}, expected {edge.text!r}"]
    mapped = None if value is None else case.reading.db_map(value)
    if same(mapped, edge.expected):
        return []
    return [
        f"{where} = {edge.literal}: the database gives {mapped!r}, the table says {edge.expected!r}"
    ]


def report(title: str, problems: Iterable[str]) -> str:
    """An assertion message listing every problem."""
    listed = list(problems)
    return f"{title}: {len(listed)} problems\n" + "\n".join(listed)
