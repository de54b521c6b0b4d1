"""Every change-event example printed in the seed documents, landed and applied.

The corpus is ``tests/fixtures/debezium`` (see its README): one file per example, each with the
outcome a user reading the documents expects, written by hand. This test writes every example
as a ``kafka_json`` line (topic, key, value, headers), one file and one source per group (a
connector chapter of one document), lands each group with the real :class:`LandingAgent` and
:class:`DebeziumJsonSource`, applies everything with one :class:`SilverJob` run, and then checks
per example:

* where it ended up (exactly one of: landed and applied, landed as a control record,
  quarantined in bronze, quarantined in silver) against its ``outcome.result``, found by the
  bronze origin (``<file>:<line>``) of its line;
* the words its quarantine reason must contain;
* the final live rows of every silver table the corpus touches (the ``after`` of each applied
  example no later example of its key supersedes; nothing else live), the tombstone row a
  delete leaves, and that nothing waits in ``silver/_pending``.

Every mismatch is collected and reported at once, with the example, the expectation and what
happened, so one run tells the bronze and silver engineers everything the corpus still fails.
Nothing expected is computed by the code under test: outcomes are literals in the fixtures.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import orjson
import pytest
from deltalake import DeltaTable

from bronze.writer import BronzeTables, BronzeWriter
from capture.debezium_json.source import DebeziumJsonSource
from pipeline.landing import LandingAgent
from silver.job import SilverJob, silver_table_name

pytestmark = [pytest.mark.spark, pytest.mark.delta]

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "debezium"

APPLIED, CONTROL = "applied", "control"
BRONZE_Q, SILVER_Q = "bronze_quarantine", "silver_quarantine"
PENDING, LOST = "waiting in silver/_pending", "lost (in neither bronze table)"
UNAPPLIED = "landed, not applied (the silver job crashed)"

KEY_COL, DELETED_COL = "_cdc_key", "_cdc_deleted"


def load_corpus() -> dict[str, dict[str, Any]]:
    """Every fixture by name (file stem)."""
    return {p.stem: orjson.loads(p.read_bytes()) for p in sorted(FIXTURE_DIR.glob("*.json"))}


def kafka_json_line(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The ``kafka_json`` line that lands an example.

    ``kafka_json`` reads a string key or value as JSON *text* (kcat's layout), so a record whose
    key or value is a JSON string is written as the text of that string; printed text that is
    not JSON at all (``value_text``) is written as is, and bronze must refuse it.
    """
    key = doc["landed_key"] if "landed_key" in doc else doc["key"]
    if "value_text" in doc:
        value: Any = doc["value_text"]
    else:
        value = doc["value"]
        if isinstance(value, str):
            value = orjson.dumps(value).decode()
    if isinstance(key, str):
        key = orjson.dumps(key).decode()
    return {"topic": doc["topic"], "key": key, "value": value, "headers": doc.get("headers", {})}


def groups_of(corpus: Mapping[str, Mapping[str, Any]]) -> dict[str, list[str]]:
    """Example names per group, in landing order (the order the document prints them)."""
    groups: dict[str, list[str]] = defaultdict(list)
    for name, doc in corpus.items():
        groups[doc["group"]].append(name)
    return {g: sorted(names, key=lambda n: corpus[n]["order"]) for g, names in groups.items()}


def reason_matches(reason: str, words: Iterable[str]) -> bool:
    """Each entry of ``words`` (alternatives separated by ``|``) occurs, case-insensitively."""
    text = reason.lower()
    return all(any(alt in text for alt in entry.split("|")) for entry in words)


# --- reading the lake --------------------------------------------------------------------------


def _delta_rows(path: Path, columns: list[str]) -> list[dict[str, Any]]:
    if not (path / "_delta_log").is_dir():
        return []
    table = DeltaTable(str(path)).to_pyarrow_table(columns=columns)
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def _silver_rows(spark: Any, path: Path) -> list[dict[str, Any]] | None:
    """All rows of a silver table (live and tombstone), or None when it does not exist."""
    if not (path / "_delta_log").is_dir():
        return None
    df = spark.read.format("delta").load(str(path))
    return [r.asDict(recursive=True) for r in df.collect()]


def _data(row: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in row.items() if not k.startswith("_cdc_")}


def _plain_mongo(value: Any) -> Any:
    """A MongoDB extended-JSON value as a plain one ({"$numberLong": "1004"} is 1004)."""
    if isinstance(value, dict):
        if value.keys() in ({"$numberLong"}, {"$numberInt"}):
            return int(next(iter(value.values())))
        if value.keys() == {"$numberDouble"}:
            return float(value["$numberDouble"])
        if value.keys() == {"$oid"}:
            return value["$oid"]
        return {k: _plain_mongo(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain_mongo(v) for v in value]
    return value


def _document(row: Mapping[str, Any]) -> Any:
    """The document a MongoDB silver row holds, as plain JSON values.

    The column design is silver's (docs/silver-mongodb.md: ``document``, canonical Extended
    JSON text); without a ``document`` column, the one data column holding a JSON object (text
    or VARIANT) is taken.
    """
    data = _data(row)
    candidates = {"document": data["document"]} if "document" in data else data
    found = []
    for name, value in candidates.items():
        text = value.toJson() if hasattr(value, "toJson") else value
        if isinstance(text, str) and text.lstrip().startswith("{"):
            try:
                found.append((name, orjson.loads(text)))
            except orjson.JSONDecodeError:
                continue
    if len(found) != 1:
        return {"no single document column": sorted(data)}
    return _plain_mongo(found[0][1])


def _key_matches(key: str | None, want: Mapping[str, Any]) -> bool:
    """``cdc_key`` is the exact canonical key; without it, ``cdc_key_contains`` must occur in a
    non-null key (silver's spelling of a scalar record key is its own choice)."""
    if want["cdc_key"] is not None:
        return key == want["cdc_key"]
    return key is not None and want["cdc_key_contains"] in key


def _comparable(row: Mapping[str, Any], expected: Mapping[str, Any]) -> Any:
    return {"document": _document(row)} if "document" in expected else _data(row)


def _brief(exc: BaseException) -> str:
    """The exception's class, first line and root cause (a streaming failure nests the cause
    in pages of plan text)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    causes = [line for line in lines[1:] if re.match(r"^[\w.]*(Error|Exception): ", line)]
    head = lines[0][:300] if lines else ""
    return f"{type(exc).__name__}: {head}" + (
        f" ... caused by {causes[-1][:500]}" if causes else ""
    )


# --- the test ----------------------------------------------------------------------------------


class _Report:
    def __init__(self) -> None:
        self.problems: list[str] = []
        self.failing: dict[str, list[str]] = defaultdict(list)

    def fail(self, name: str, what: str) -> None:
        self.failing[name].append(what)

    def note(self, what: str) -> None:
        self.problems.append(what)

    def text(self, total: int) -> str:
        lines = [f"{len(self.failing)} of {total} seed examples do not meet their expectation:"]
        lines += [f"  {name}: {'; '.join(whats)}" for name, whats in sorted(self.failing.items())]
        lines += [f"  {p}" for p in self.problems]
        return "\n".join(lines)


def test_every_seed_example_lands_and_applies_as_the_documents_say(
    spark: Any, tmp_path: Path
) -> None:
    corpus = load_corpus()
    groups = groups_of(corpus)
    report = _Report()
    lake = tmp_path / "lake"
    origin_of: dict[str, str] = {}
    for group, names in sorted(groups.items()):
        path = tmp_path / f"{group}.jsonl"
        with path.open("wb") as f:
            for number, name in enumerate(names, 1):
                f.write(orjson.dumps(kafka_json_line(corpus[name])) + b"\n")
                origin_of[f"{path}:{number}"] = name
        try:
            LandingAgent(
                DebeziumJsonSource(group, path, line_format="kafka_json"),
                BronzeWriter(BronzeTables.under(lake)),
            ).run()
        except Exception as exc:  # noqa: BLE001 - every group is landed, failures are reported
            report.note(f"landing group {group} crashed: {_brief(exc)}")

    silver_ran = True
    try:
        # The corpus has no END for the transaction of its one gated event (cloudevents_json)
        # and Ends without data: a 0 s timeout releases them in this run, as 300 s would later.
        SilverJob(spark, lake, transaction_timeout_seconds=0.0).run_once()
    except Exception as exc:  # noqa: BLE001 - reported with everything bronze did
        silver_ran = False
        report.note(f"the silver job crashed: {_brief(exc)}")

    # Where did each example go?
    landed = {r["origin"]: r for r in _delta_rows(lake / "bronze" / "events", ["origin", "kind"])}
    refused = {
        r["origin"]: r["reason"]
        for r in _delta_rows(lake / "bronze" / "quarantine", ["origin", "reason"])
    }
    silver_refused = {
        r["origin"]: r["reason"]
        for r in _delta_rows(lake / "silver" / "_quarantine", ["origin", "reason"])
    }
    waiting = {r["origin"] for r in _delta_rows(lake / "silver" / "_pending", ["origin"])}
    extra = (set(landed) | set(refused)) - set(origin_of)
    if extra:
        report.note(f"bronze holds rows no example was written as: {sorted(extra)}")
    for origin in set(landed) & set(refused):
        report.fail(origin_of.get(origin, origin), "both landed and quarantined in bronze")

    actual: dict[str, tuple[str, str | None]] = {}
    for origin, name in origin_of.items():
        if origin in refused:
            actual[name] = (BRONZE_Q, refused[origin])
        elif origin not in landed:
            actual[name] = (LOST, None)
        elif origin in silver_refused:
            actual[name] = (SILVER_Q, silver_refused[origin])
        elif origin in waiting:
            actual[name] = (PENDING, None)
        elif landed[origin]["kind"] == "data":
            actual[name] = (APPLIED, None) if silver_ran else (UNAPPLIED, None)
        else:
            actual[name] = (CONTROL, f"kind {landed[origin]['kind']}")

    for name, doc in corpus.items():
        want = doc["outcome"]
        got, detail = actual[name]
        if got != want["result"] or (
            want["result"] == CONTROL and detail != f"kind {want['kind']}"
        ):
            expected = want["result"] + (f" ({want['kind']})" if "kind" in want else "")
            report.fail(name, f"expected {expected}, got {got}" + (f": {detail}" if detail else ""))
        elif got in (BRONZE_Q, SILVER_Q) and not reason_matches(detail or "", want["reason"]):
            report.fail(name, f"quarantine reason {detail!r} lacks {want['reason']}")

    if silver_ran:
        _check_silver_state(spark, lake, corpus, report)

    counts: dict[str, int] = defaultdict(int)
    for got, _detail in actual.values():
        counts[got] += 1
    assert sum(counts.values()) == len(corpus)  # every example in exactly one place
    assert not report.failing and not report.problems, (
        report.text(len(corpus)) + f"\nwhere the examples went: {dict(counts)}"
    )


def _check_silver_state(
    spark: Any, lake: Path, corpus: Mapping[str, Mapping[str, Any]], report: _Report
) -> None:
    """Final live rows and tombstone rows of every table an applied example names."""
    tables: dict[tuple[str, str], list[str]] = defaultdict(list)
    for name, doc in corpus.items():
        if doc["outcome"]["result"] == APPLIED:
            tables[(doc["group"], doc["outcome"]["table"])].append(name)
    for (group, table), names in sorted(tables.items()):
        rows = _silver_rows(spark, lake / "silver" / silver_table_name(group, table))
        rows = rows or []
        live = [r for r in rows if not r[DELETED_COL]]
        finals = [n for n in names if "superseded_by" not in corpus[n]["outcome"]]
        expected_live = [
            corpus[n]["outcome"] for n in finals if corpus[n]["outcome"].get("after") is not None
        ]
        for want in expected_live:
            match = [r for r in live if _key_matches(r[KEY_COL], want)]
            name = next(n for n in finals if corpus[n]["outcome"] is want)
            got = [_comparable(r, want["after"]) for r in match]
            if got != [want["after"]]:
                report.fail(
                    name, f"silver {group}/{table} live rows {got}, expected [{want['after']}]"
                )
        unexpected = [
            r for r in live if not any(_key_matches(r[KEY_COL], w) for w in expected_live)
        ]
        if unexpected:
            report.note(
                f"silver {group}/{table} has unexpected live rows: "
                f"{[_data(r) | {KEY_COL: r[KEY_COL]} for r in unexpected]}"
            )
        for name in finals:
            want = corpus[name]["outcome"]
            if want.get("after") is not None or want.get("truncate"):
                continue
            gone = [r for r in rows if r[KEY_COL] == want["cdc_key"]]
            if any(not r[DELETED_COL] for r in gone):
                report.fail(
                    name, f"silver {group}/{table} still has a live row for {want['cdc_key']}"
                )
            deleted = want.get("deleted_row")
            if deleted is not None:
                kept = [{k: r.get(k) for k in deleted} for r in gone if r[DELETED_COL]]
                if kept != [deleted]:
                    report.fail(
                        name,
                        f"tombstone row of {want['cdc_key']} holds {kept}, "
                        f"expected the delete's before image {deleted}",
                    )
