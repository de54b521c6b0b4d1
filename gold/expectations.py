"""Great Expectations suites built from source metadata, plus the user's expectations.

For every table of a cut, :func:`table_metadata` finds the Connect schemas of the table's newest
change at or before the cut in ``bronze/events`` (``key_schema_id``, ``value_schema_id``) and
reads them from ``bronze/schemas``:

* the **key schema**'s fields are the primary key (without a key schema: the fields of the
  record key JSON);
* the ``after`` struct's fields with ``optional: false`` are the NOT NULL columns;
* the ``after`` struct mapped by :func:`silver.types.row_schema` gives the declared Spark types.

:func:`validate_table` turns that into one GX suite per table (``primary_key``: unique and not
null; ``not_null``), appends the user's expectations from ``quality.expectations`` and runs
**one** validation of the gold DataFrame at the cut. Each user expectation becomes a check named
``expectation:<type>`` with its own severity. :func:`types_outcome` compares the gold columns'
Spark types with the declared ones exactly (``decimal(10,2)`` is not ``decimal(38,0)``), which
GX's ``expect_column_values_to_be_of_type`` cannot do on Spark (it compares type classes only),
so that check runs without GX.

GX is imported lazily, inside :func:`gx_context`: importing it costs about a second and emits
deprecation warnings that a caller's ``-W error`` must not see.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from bronze.storage import LakePath, lake_path, open_delta
from gold.cuts import Cut
from gold.outcome import CheckOutcome
from pipeline.config import ExpectationConfig, Severity

__all__ = [
    "ENGINE",
    "PRIMARY_KEY",
    "NOT_NULL",
    "TYPES",
    "EXPECTATION_PREFIX",
    "TableMetadata",
    "table_metadata",
    "gx_context",
    "validate_table",
    "types_outcome",
]

logger = logging.getLogger(__name__)

ENGINE = "great_expectations"
PRIMARY_KEY = "primary_key"
NOT_NULL = "not_null"
TYPES = "types"
EXPECTATION_PREFIX = "expectation:"
"""User expectations are checks named ``expectation:<type>``."""

SAMPLE_SIZE = 5
"""Offending values or keys shown per check."""
_META_CHECK = "medallion_check"
_META_INDEX = "medallion_index"


@dataclass(frozen=True, slots=True)
class TableMetadata:
    """What the source declares about one table.

    Attributes:
        collection: The source table (``<schema>.<table>``).
        key_columns: Primary key columns, in key order (empty when the table has no key).
        not_null: Columns declared NOT NULL (``optional: false``), key columns included.
        declared: Column -> declared Spark type (``simpleString``), in field order; empty when
            no Connect schema was registered (``schemas.enable=false``).
        key_schema_id: The key schema used, if any.
        value_schema_id: The value schema used, if any.
    """

    collection: str
    key_columns: tuple[str, ...] = ()
    not_null: tuple[str, ...] = ()
    declared: Mapping[str, str] = field(default_factory=dict)
    key_schema_id: str | None = None
    value_schema_id: str | None = None


def _row_struct(envelope: Mapping[str, Any]) -> Mapping[str, Any] | None:
    # The same rule as the silver job: the after (or before) struct of the envelope.
    for f in envelope.get("fields", []):
        if f.get("field") in ("after", "before") and f.get("type") == "struct":
            return dict(f)
    return None


def _schemas(lake_root: LakePath, ids: set[str]) -> dict[str, Any]:
    """Connect schemas by id from ``bronze/schemas`` (small, written by deltalake)."""
    from deltalake.exceptions import TableNotFoundError

    if not ids:
        return {}
    try:
        table = open_delta(lake_path(lake_root) / "bronze" / "schemas")
    except TableNotFoundError:
        return {}
    rows = table.to_pyarrow_table(columns=["schema_id", "schema_json"]).to_pylist()
    return {r["schema_id"]: orjson.loads(r["schema_json"]) for r in rows if r["schema_id"] in ids}


def metadata_from_schemas(
    collection: str,
    key_schema: Mapping[str, Any] | None,
    value_schema: Mapping[str, Any] | None,
    key_json: str | None,
    *,
    key_schema_id: str | None = None,
    value_schema_id: str | None = None,
) -> TableMetadata:
    """Build a table's metadata from its Connect key and envelope schemas.

    Args:
        collection: The source table.
        key_schema: The key's Connect struct schema, or None.
        value_schema: The envelope's Connect schema, or None.
        key_json: A record key as JSON, used for the key's field names when there is no schema.
        key_schema_id: Registry id of ``key_schema``.
        value_schema_id: Registry id of ``value_schema``.

    Returns:
        The metadata.

    Example:
        >>> key = {"type": "struct", "fields": [{"field": "id", "type": "int32"}]}
        >>> row = {"type": "struct", "field": "after", "fields": [
        ...     {"field": "id", "type": "int32", "optional": False},
        ...     {"field": "note", "type": "string", "optional": True}]}
        >>> m = metadata_from_schemas("public.t", key, {"fields": [row]}, None)
        >>> m.key_columns, m.not_null, dict(m.declared)
        (('id',), ('id',), {'id': 'int', 'note': 'string'})
    """
    from silver import types as T

    keys: tuple[str, ...] = ()
    if key_schema is not None:
        keys = tuple(str(f["field"]) for f in key_schema.get("fields", []))
    elif key_json:
        parsed = orjson.loads(key_json)
        if isinstance(parsed, dict) and isinstance(parsed.get("payload"), dict):
            parsed = parsed["payload"]  # a {schema, payload} wrapper, as silver unwraps it
        if isinstance(parsed, dict):
            keys = tuple(str(k) for k in parsed)
    row = _row_struct(value_schema) if value_schema is not None else None
    declared: dict[str, str] = {}
    not_null = list(keys)
    if row is not None:
        for f in row.get("fields", []):
            name = str(f["field"])
            declared[name] = T.spark_type(f).simpleString()
            if f.get("optional") is False and name not in not_null:
                not_null.append(name)
    return TableMetadata(
        collection=collection,
        key_columns=keys,
        not_null=tuple(not_null),
        declared=declared,
        key_schema_id=key_schema_id,
        value_schema_id=value_schema_id,
    )


def table_metadata(
    lake_root: LakePath, cut: Cut, latest: Sequence[Mapping[str, Any]]
) -> dict[str, TableMetadata]:
    """Metadata of every table of a cut.

    Args:
        lake_root: The lake root.
        cut: The cut.
        latest: Per collection, the newest data event at or before the cut: rows with
            ``collection``, ``key_schema_id``, ``value_schema_id``, ``key_json``
            (:func:`gold.checks.source_events` computes them).

    Returns:
        Collection -> metadata, for every collection of the cut (tables without any event get
        empty metadata).
    """
    by_collection = {str(r["collection"]): r for r in latest}
    ids = {
        str(r[c])
        for r in latest
        for c in ("key_schema_id", "value_schema_id")
        if r.get(c) is not None
    }
    schemas = _schemas(lake_root, ids)
    out: dict[str, TableMetadata] = {}
    for table in cut.tables.values():
        r = by_collection.get(table.collection)
        if r is None:
            out[table.collection] = TableMetadata(table.collection)
            continue
        key_id, value_id = r.get("key_schema_id"), r.get("value_schema_id")
        out[table.collection] = metadata_from_schemas(
            table.collection,
            schemas.get(key_id) if key_id else None,
            schemas.get(value_id) if value_id else None,
            r.get("key_json"),
            key_schema_id=key_id,
            value_schema_id=value_id,
        )
    return out


# --- GX --------------------------------------------------------------------------------------
@contextlib.contextmanager
def quiet_gx() -> Iterator[None]:
    """Silence what GX (and the pandas it drives) warns about while it runs.

    GX 1.24 imports ``sre_constants`` and calls deprecated pandas/pyspark APIs; under the test
    suite's ``filterwarnings = error`` those warnings would fail a run that is otherwise fine.
    Only deprecation-style warnings are ignored, and only inside this block.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        yield


def _gx() -> Any:
    # GX reads this when a context is made; an explicit choice by the operator wins.
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "False")
    gx_logger = logging.getLogger("great_expectations")
    if gx_logger.level == logging.NOTSET:
        # GX logs dozens of INFO lines per import and context (docs registration, datasource
        # loading) that drown the pipeline's own log at the CLI's INFO level.
        gx_logger.setLevel(logging.WARNING)
    with quiet_gx():
        return importlib.import_module("great_expectations")


def gx_context() -> Any:
    """One ephemeral GX context (in memory, no analytics, no progress bars) with a Spark
    datasource named ``medallion``.

    Returns:
        The context; make one per quality run and validate every table with it.
    """
    gx = _gx()
    with quiet_gx():
        base = importlib.import_module("great_expectations.data_context.types.base")
        config = base.DataContextConfig(
            store_backend_defaults=base.InMemoryStoreBackendDefaults(),
            analytics_enabled=False,
            progress_bars=base.ProgressBarsConfig(globally=False, metric_calculations=False),
        )
        context = gx.get_context(mode="ephemeral", project_config=config)
        context.data_sources.add_spark(name="medallion")
    return context


def _expectation(kind: str, kwargs: Mapping[str, Any], meta: Mapping[str, Any]) -> Any:
    """A GX expectation from its snake_case type, as ``quality.expectations`` names it."""
    module = importlib.import_module("great_expectations.expectations.expectation_configuration")
    configuration = module.ExpectationConfiguration(type=kind, kwargs=dict(kwargs), meta=dict(meta))
    return configuration.to_domain_obj()


def _text(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k}={v!r}" for k, v in value.items())
    return repr(value) if not isinstance(value, str) else value


@dataclass(slots=True)
class _Planned:
    """One check of the suite and the GX expectations that decide it."""

    check: str
    severity: Severity | None
    description: str
    indices: list[int] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def primary_key_description(keys: Sequence[str]) -> str:
    """What the ``primary_key`` check of a table checks, in words."""
    return f"primary key ({', '.join(keys) or 'none declared'}) unique and not null"


def not_null_description(columns: Sequence[str]) -> str:
    """What the ``not_null`` check of a table checks, in words."""
    return f"NOT NULL columns ({', '.join(columns) or 'none declared'}) have no nulls"


def _planned_checks(
    meta: TableMetadata,
    columns: Sequence[str],
    user: Sequence[ExpectationConfig],
    builtin: bool = True,
) -> tuple[list[_Planned], list[Any]]:
    """The checks of one table and the expectations of its suite (indices link them);
    without ``builtin``, the user's only."""
    plans: list[_Planned] = []
    expectations: list[Any] = []

    def add(plan: _Planned, kind: str, kwargs: Mapping[str, Any]) -> None:
        index = len(expectations)
        try:
            expectations.append(
                _expectation(kind, kwargs, {_META_CHECK: plan.check, _META_INDEX: index})
            )
        except Exception as exc:  # noqa: BLE001 - a bad user expectation is a failed check
            plan.problems.append(f"invalid expectation {kind}: {exc}")
            return
        plan.indices.append(index)

    if builtin:
        present = set(columns)
        keys = list(meta.key_columns)
        pk = _Planned(PRIMARY_KEY, None, primary_key_description(keys))
        missing = [k for k in keys if k not in present]
        if missing:
            pk.problems.append(f"key column(s) missing from gold: {', '.join(missing)}")
        elif len(keys) == 1:
            add(pk, "expect_column_values_to_be_unique", {"column": keys[0]})
        elif keys:
            add(pk, "expect_compound_columns_to_be_unique", {"column_list": keys})
        for k in keys:
            if k in present:
                add(pk, "expect_column_values_to_not_be_null", {"column": k})
        plans.append(pk)

        others = [c for c in meta.not_null if c not in keys]
        nn = _Planned(NOT_NULL, None, not_null_description(others))
        for c in others:
            if c in present:
                add(nn, "expect_column_values_to_not_be_null", {"column": c})
            else:
                nn.problems.append(f"NOT NULL column missing from gold: {c}")
        plans.append(nn)

    for e in user:
        plan = _Planned(
            f"{EXPECTATION_PREFIX}{e.type}",
            e.severity,
            f"{e.type}({', '.join(f'{k}={v!r}' for k, v in e.kwargs.items())})",
        )
        add(plan, e.type, e.kwargs)
        plans.append(plan)
    return plans, expectations


def validate_table(
    context: Any,
    name: str,
    frame: Any,
    source: str,
    meta: TableMetadata,
    user: Sequence[ExpectationConfig] = (),
    *,
    builtin: bool = True,
) -> list[tuple[CheckOutcome, Severity | None]]:
    """Validate one gold table with one GX suite and one validation.

    Args:
        context: From :func:`gx_context`.
        name: A unique name for the table's asset and suite (the silver table name).
        frame: The gold DataFrame at the cut (cache it: GX runs several Spark jobs on it).
        source: The source name.
        meta: The table's metadata.
        user: The user's expectations of this table.
        builtin: Also ``primary_key`` and ``not_null`` (False: the user's expectations only,
            when :func:`gold.key_checks.key_outcomes` decides those).

    Returns:
        One outcome per check (``primary_key``, ``not_null``, ``expectation:<type>`` ...) with
        the severity the user gave (None: the check's configured severity).
    """
    gx = _gx()
    plans, expectations = _planned_checks(meta, frame.columns, user, builtin)
    results: dict[int, Any] = {}
    if expectations:
        keys = [k for k in meta.key_columns if k in frame.columns]
        result_format: dict[str, Any] = {
            "result_format": "SUMMARY",
            "partial_unexpected_count": SAMPLE_SIZE,
        }
        if keys:
            # Offending rows are shown by their primary key, which a person can look up.
            result_format["unexpected_index_column_names"] = keys
        with quiet_gx():
            asset = context.data_sources.get("medallion").add_dataframe_asset(name=name)
            batch = asset.add_batch_definition_whole_dataframe("gold").get_batch(
                batch_parameters={"dataframe": frame}
            )
            suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=expectations))
            validation = batch.validate(suite, result_format=result_format)
        for r in validation.results:
            results[int(r.expectation_config.meta[_META_INDEX])] = r
    return [_outcome(plan, results, source, meta) for plan in plans]


def _outcome(
    plan: _Planned, results: Mapping[int, Any], source: str, meta: TableMetadata
) -> tuple[CheckOutcome, Severity | None]:
    success = not plan.problems
    unexpected = 0
    observed: list[str] = list(plan.problems)
    sample: list[str] = []
    for index in plan.indices:
        r = results.get(index)
        if r is None:
            success = False
            observed.append("expectation not evaluated")
            continue
        config = r.expectation_config
        info = r.exception_info or {}
        if info.get("raised_exception"):
            success = False
            observed.append(f"{config.type} raised: {info.get('exception_message')}")
            continue
        if r.success:
            continue
        success = False
        res = r.result or {}
        count = res.get("unexpected_count")
        if isinstance(count, int):
            unexpected += count
        column = config.kwargs.get("column") or ",".join(config.kwargs.get("column_list") or [])
        label = f"{column}: " if column else ""
        if isinstance(count, int):
            observed.append(f"{label}{count} unexpected of {res.get('element_count')}")
        else:
            observed.append(f"{label}observed {_text(res.get('observed_value'))}")
        shown = res.get("partial_unexpected_index_list") or res.get("partial_unexpected_list") or []
        sample.extend(f"{label}{_text(v)}" for v in shown)
    if success:
        observed = ["ok"]
    outcome = CheckOutcome(
        check=plan.check,
        source=source,
        table=meta.collection,
        success=success,
        observed="; ".join(observed),
        unexpected_count=unexpected if plan.indices else None,
        sample=tuple(dict.fromkeys(sample))[:SAMPLE_SIZE],
        details=plan.description,
        engine=ENGINE,
    )
    return outcome, plan.severity


def types_outcome(frame_schema: Any, source: str, meta: TableMetadata) -> CheckOutcome:
    """Compare the gold columns' Spark types with the declared Connect types.

    Args:
        frame_schema: The gold DataFrame's ``StructType``.
        source: The source name.
        meta: The table's metadata.

    Returns:
        The ``types`` outcome; columns gold has beyond the schema (dropped in the source, kept
        by silver) are not a failure.
    """
    actual = {f.name: f.dataType.simpleString() for f in frame_schema.fields}
    if not meta.declared:
        return CheckOutcome(
            TYPES,
            source,
            meta.collection,
            True,
            "no Connect schema registered; nothing declared to compare",
            engine="medallion",
        )
    wrong = [
        f"{c}: declared {t}, gold {actual.get(c, 'missing')}"
        for c, t in meta.declared.items()
        if actual.get(c) != t
    ]
    return CheckOutcome(
        TYPES,
        source,
        meta.collection,
        not wrong,
        f"{len(wrong)} column(s) differ" if wrong else f"{len(meta.declared)} columns as declared",
        unexpected_count=len(wrong),
        sample=tuple(wrong[:SAMPLE_SIZE]),
        details=f"declared by value schema {meta.value_schema_id} (silver.types mapping)",
        engine="medallion",
    )
