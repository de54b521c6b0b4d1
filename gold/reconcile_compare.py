"""Value-by-value comparison of an independent source read with silver (as gold shows it).

The source side is :mod:`gold.source_read`: the database's own canonical text per value,
staged as JSON lines. This module turns each silver value into the same canonical text with
Spark expressions (no Python UDF), chosen per canonical form and silver type
(:func:`silver_text`), and compares the two sides in Spark:

* **keyed tables**: a full outer join on the key's canonical texts (hash-partitioned by Spark),
  one aggregate for every count, and only the examples (``examples`` per kind and column) are
  collected;
* **keyless tables**: multisets of rows (their canonical texts as JSON), counted per distinct
  row on both sides.

A column is *compared*, or *not comparable* with the reason (lossy by config, no independent
normalisation for its type, a silver type without an exact normalisation, absent in silver). A
value silver left NULL because the agent quarantined it (``silver/_quarantine`` rows of kind
``value``) is counted as *value quarantined*, never as equal. A row the reconciler cannot read
is counted as *unreadable*, never as equal.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from bronze.storage import lake_path
from gold.reconcile_lossy import lossy_by_config
from gold.source_read import Canon, SourceColumn, SourceTable
from pipeline.errors import InternalError
from pipeline.sql import quote_identifier

__all__ = [
    "COMPARED",
    "NOT_COMPARABLE",
    "ColumnFinding",
    "TableValues",
    "ValueExample",
    "compare_values",
    "silver_text",
]

logger = logging.getLogger(__name__)

COMPARED = "compared"
NOT_COMPARABLE = "not comparable"

_PG_POS_INFINITY = 9223372036825200000
_PG_NEG_INFINITY = -9223372036832400000
_DATE_MAX, _DATE_MIN = 2147483647, -2147483648
_ISO_INTERVAL = r"^P(-?\d+)Y(-?\d+)M(-?\d+)DT(-?\d+)H(-?\d+)M(-?[0-9.]+)S$"
_UNREADABLE_SILVER = "<silver value has no canonical text>"


@dataclass(frozen=True, slots=True)
class ValueExample:
    """One differing value: the row's key (JSON of canonical key texts) and both texts."""

    key: str
    source: str | None
    silver: str | None

    def describe(self) -> str:
        """``{"id":27}: source '34.00', silver '34.01'``."""
        return f"{self.key}: source {_show(self.source)}, silver {_show(self.silver)}"


def _show(text: str | None) -> str:
    return "NULL" if text is None else repr(text)


@dataclass(frozen=True, slots=True)
class ColumnFinding:
    """What the comparison found for one source column.

    Attributes:
        column: The column name.
        status: ``compared`` or ``not comparable``.
        reason: Why not comparable (``lossy by config interval.handling.mode=numeric``).
        differing: Rows whose values differ (rows in both sides, read).
        quarantined: Rows whose silver value is NULL because the agent quarantined the value.
        examples: Up to ``examples`` differing values.
    """

    column: str
    status: str
    reason: str = ""
    differing: int = 0
    quarantined: int = 0
    examples: tuple[ValueExample, ...] = ()

    def describe(self) -> str:
        """``amount: 1 differing ({"id":"27"}: source '34.00', silver '34.01')``."""
        if self.status == NOT_COMPARABLE:
            return f"{self.column}: not comparable: {self.reason}"
        parts = []
        if self.differing:
            shown = "; ".join(e.describe() for e in self.examples[:3])
            parts.append(f"{self.differing} differing ({shown})")
        if self.quarantined:
            parts.append(f"{self.quarantined} value quarantined")
        return f"{self.column}: " + (", ".join(parts) if parts else "equal")


@dataclass(frozen=True, slots=True)
class TableValues:
    """One table compared value by value.

    Attributes:
        collection: ``<schema>.<table>``.
        source_rows: Rows read from the source.
        silver_rows: Live rows in silver at the cut.
        keyed: Whether rows were matched by key (else compared as a multiset).
        missing: Rows in the source, not in silver.
        extra: Rows in silver, not in the source.
        differing_rows: Rows in both with at least one differing compared value.
        unreadable: Source rows the reconciler could not read (not counted equal).
        columns: One finding per source column.
        missing_keys: Examples of missing rows (keys, or rows for keyless tables).
        extra_keys: Examples of extra rows.
        unreadable_keys: Examples of unreadable rows, with the reason.
        notes: Other remarks (silver columns the source lacks, ...).
    """

    collection: str
    source_rows: int
    silver_rows: int
    keyed: bool
    missing: int = 0
    extra: int = 0
    differing_rows: int = 0
    unreadable: int = 0
    columns: tuple[ColumnFinding, ...] = ()
    missing_keys: tuple[str, ...] = ()
    extra_keys: tuple[str, ...] = ()
    unreadable_keys: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def clean(self) -> bool:
        """No missing, extra, differing, quarantined or unreadable row."""
        return (
            self.missing == self.extra == self.differing_rows == self.unreadable == 0
            and not any(c.quarantined for c in self.columns)
        )

    @property
    def unexpected_count(self) -> int:
        """Rows missing, extra, differing or unreadable."""
        return self.missing + self.extra + self.differing_rows + self.unreadable

    @property
    def not_comparable(self) -> tuple[ColumnFinding, ...]:
        """The columns that could not be compared."""
        return tuple(c for c in self.columns if c.status == NOT_COMPARABLE)

    def differences(self) -> list[str]:
        """One line per kind of difference (missing, extra, unreadable, each column that
        differs or has quarantined values), for people."""
        return [line for line in self.findings() if not line.startswith("note: ")
                and ": not comparable: " not in line]  # fmt: skip

    def findings(self) -> list[str]:
        """One line per finding (differences, not-comparable columns, notes), for people."""
        lines = []
        if self.missing:
            lines.append(f"{self.missing} rows missing in silver: " + ", ".join(self.missing_keys))
        if self.extra:
            lines.append(f"{self.extra} rows extra in silver: " + ", ".join(self.extra_keys))
        if self.unreadable:
            lines.append(
                f"{self.unreadable} source rows the reconciler cannot read: "
                + ", ".join(self.unreadable_keys)
            )
        lines += [c.describe() for c in self.columns if c.status != COMPARED or c.differing]
        lines += [c.describe() for c in self.columns if c.status == COMPARED and c.quarantined
                  and not c.differing]  # fmt: skip
        return lines + [f"note: {n}" for n in self.notes]

    def to_json(self) -> dict[str, Any]:
        """A JSON-serialisable form."""
        return {
            "collection": self.collection,
            "source_rows": self.source_rows,
            "silver_rows": self.silver_rows,
            "keyed": self.keyed,
            "missing": self.missing,
            "extra": self.extra,
            "differing_rows": self.differing_rows,
            "unreadable": self.unreadable,
            "missing_keys": list(self.missing_keys),
            "extra_keys": list(self.extra_keys),
            "unreadable_keys": list(self.unreadable_keys),
            "columns": [
                {
                    "column": c.column,
                    "status": c.status,
                    "reason": c.reason,
                    "differing": c.differing,
                    "quarantined": c.quarantined,
                    "examples": [
                        {"key": e.key, "source": e.source, "silver": e.silver} for e in c.examples
                    ],
                }
                for c in self.columns
            ],
            "notes": list(self.notes),
        }


# --- silver values as canonical text --------------------------------------------------------


def _is(data_type: Any, *names: str) -> bool:
    return type(data_type).__name__ in names


_INTEGRAL = ("ByteType", "ShortType", "IntegerType", "LongType")


def _bits_of_binary(c: Any, length: int | None) -> Any:
    """Big-endian bytes -> their bits as ``0``/``1`` text, the rightmost ``length`` of them."""
    from pyspark.sql import functions as F

    nibbles = F.transform(F.split(F.hex(c), ""), lambda h: F.lpad(F.conv(h, 16, 2), 4, "0"))
    bits = F.array_join(nibbles, "")
    if length is None:
        return F.when(c.isNotNull(), bits)
    return F.when(c.isNotNull(), F.substring(bits, -int(length), int(length)))


def _days(c: Any) -> Any:
    from pyspark.sql import functions as F

    days = F.unix_date(c)
    return (
        F.when(days == _DATE_MAX, F.lit("infinity"))
        .when(days == _DATE_MIN, F.lit("-infinity"))
        .otherwise(days.cast("string"))
    )


def _micros(c: Any, ntz: bool) -> Any:
    from pyspark.sql import functions as F

    # The session runs in UTC (pipeline.spark), so a wall-clock timestamp_ntz casts to the
    # instant with the same fields.
    micros = F.unix_micros(c.cast("timestamp") if ntz else c)
    return (
        F.when(micros == F.lit(_PG_POS_INFINITY), F.lit("infinity"))
        .when(micros == F.lit(_PG_NEG_INFINITY), F.lit("-infinity"))
        .otherwise(micros.cast("string"))
    )


def _interval(c: Any) -> Any:
    """Debezium's ``P<y>Y<m>M<d>DT<h>H<m>M<s>S`` -> ``<months> <days> <microseconds>``."""
    from pyspark.sql import functions as F

    def part(i: int, kind: str = "decimal(38,0)") -> Any:
        return F.regexp_extract(c, _ISO_INTERVAL, i).try_cast(kind)

    months = part(1) * 12 + part(2)
    micros = (part(4) * 3600 + part(5) * 60) * 1_000_000 + part(6, "decimal(38,6)") * 1_000_000
    text = F.concat_ws(
        " ",
        months.cast("decimal(38,0)").cast("string"),
        part(3).cast("string"),
        micros.cast("decimal(38,0)").cast("string"),
    )
    return F.when(c.rlike(_ISO_INTERVAL), text)


def _pg_array_element(e: Any, data_type: Any, element: Canon) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    if isinstance(data_type, ArrayType):
        inner = F.transform(e, lambda x: _pg_array_element(x, data_type.elementType, element))
        return F.when(e.isNull(), F.lit("NULL")).otherwise(
            F.concat(F.lit("{"), F.array_join(inner, ","), F.lit("}"))
        )
    if element is Canon.BOOLEAN:
        text = F.when(e, F.lit("t")).otherwise(F.lit("f"))
    elif element is Canon.TEXT:
        # PostgreSQL quotes an element that is empty, reads as NULL, or holds a delimiter,
        # brace, quote, backslash or white space; inside quotes " and \ are escaped.
        quoted = F.concat(F.lit('"'), F.regexp_replace(e, r'(["\\])', r"\\$1"), F.lit('"'))
        needs = (e == F.lit("")) | e.rlike(r'[{},"\\\s]') | (F.lower(e) == F.lit("null"))
        text = F.when(needs, quoted).otherwise(e)
    else:
        text = e.cast("string")
    return F.when(e.isNull(), F.lit("NULL")).otherwise(text)


def silver_text(column: SourceColumn, data_type: Any, c: Any) -> Any | None:
    """A Spark expression giving silver's value of ``column`` in the column's canonical text.

    Args:
        column: The source column (its canonical form).
        data_type: The silver column's Spark type.
        c: The silver column.

    Returns:
        The expression, or None when this silver type has no exact normalisation for it.
    """
    from pyspark.sql import functions as F

    canon = column.canon
    string = _is(data_type, "StringType", "VarcharType", "CharType")
    if canon is Canon.TEXT:
        return c if string else None
    if canon in (Canon.INTEGER, Canon.DECIMAL):
        if string or _is(data_type, *_INTEGRAL, "DecimalType"):
            return c.cast("string")
        if _is(data_type, "BooleanType"):
            return F.when(c, F.lit("1")).when(~c, F.lit("0"))
        if _is(data_type, "BinaryType"):
            return F.when(F.length(c) == 0, F.lit("0")).otherwise(F.conv(F.hex(c), 16, 10))
        return None
    if canon in (Canon.FLOAT32, Canon.FLOAT64):
        return c.cast("string") if _is(data_type, "FloatType", "DoubleType") else None
    if canon is Canon.BOOLEAN:
        return c.cast("string") if _is(data_type, "BooleanType") else None
    if canon is Canon.BITS:
        if _is(data_type, "BooleanType"):
            return F.when(c, F.lit("1")).when(~c, F.lit("0"))
        if _is(data_type, "BinaryType"):
            return _bits_of_binary(c, column.length)
        return c if string else None
    if canon is Canon.DAYS:
        return _days(c) if _is(data_type, "DateType") else None
    if canon is Canon.MICROS:
        if _is(data_type, "TimestampType", "TimestampNTZType"):
            return _micros(c, ntz=_is(data_type, "TimestampNTZType"))
        return None
    if canon is Canon.INTERVAL:
        return _interval(c) if string else None
    if canon is Canon.HEX:
        return F.lower(F.hex(c)) if _is(data_type, "BinaryType") else None
    if canon is Canon.ARRAY and column.element is not None:
        if _is(data_type, "ArrayType"):
            # NULL inside an array prints as NULL; a NULL array stays NULL.
            return F.when(c.isNotNull(), _pg_array_element(c, data_type, column.element))
        return None
    return None


def source_compare_text(column: SourceColumn, data_type: Any, s: Any) -> Any:
    """The source's canonical text as compared: floats parsed to silver's float type and printed
    by Spark (so ``3.4028235e+38`` and ``3.4028235E38`` compare as the same float)."""
    if column.canon is Canon.FLOAT32:
        return s.try_cast("float").cast(data_type).cast("string")
    if column.canon is Canon.FLOAT64:
        return s.try_cast("double").cast(data_type).cast("string")
    return s


# --- the comparison -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Plan:
    """Which source column is compared with which silver expression (or why not)."""

    index: int
    column: SourceColumn
    source: Any = None
    silver: Any = None
    reason: str = ""


def _plan(
    config: Any, source: SourceTable, silver_types: dict[str, Any]
) -> tuple[list[_Plan], list[str]]:
    from pyspark.sql import functions as F

    plans, notes = [], []
    for i, column in enumerate(source.columns):
        lossy = lossy_by_config(config, source.collection, column)
        if lossy is not None:
            plans.append(_Plan(i, column, reason=lossy))
            continue
        if column.canon is Canon.NONE:
            plans.append(_Plan(i, column, reason=column.why_not))
            continue
        data_type = silver_types.get(column.name)
        if data_type is None:
            plans.append(_Plan(i, column, reason="not in silver (excluded, or not captured yet)"))
            continue
        silver = silver_text(column, data_type, F.col(quote_identifier(column.name)))
        if silver is None:
            plans.append(
                _Plan(
                    i,
                    column,
                    reason=(
                        f"silver type {data_type.simpleString()} has no exact normalisation "
                        f"for {column.type_text}"
                    ),
                )
            )
            continue
        source_text = source_compare_text(column, data_type, F.col(f"c{i}"))
        plans.append(_Plan(i, column, source_text, silver))
    names = {c.name for c in source.columns}
    notes += [f"silver column {n} is not in the source: not compared" for n in silver_types
              if n not in names]  # fmt: skip
    return plans, notes


def _source_frame(spark: Any, source: SourceTable) -> Any:
    from pyspark.sql.types import StringType, StructField, StructType

    schema = StructType(
        [StructField(f"c{i}", StringType()) for i in range(len(source.columns))]
        + [StructField("u", StringType())]
    )
    return spark.read.schema(schema).json(str(source.path))


def _quarantined(spark: Any, lake_root: Any, source_name: str, collection: str) -> Any | None:
    """``silver/_quarantine`` rows of kind ``value`` for the table: (key JSON, column)."""

    from pyspark.sql import functions as F

    path = lake_path(lake_root) / "silver" / "_quarantine"
    if not (path / "_delta_log").exists():
        return None
    frame = spark.read.format("delta").load(str(path.absolute()))
    if not {"kind", "column", "key", "source", "collection"} <= set(frame.columns):
        return None
    return frame.where(
        (F.col("kind") == "value")
        & (F.col("source") == source_name)
        & (F.col("collection") == collection)
    ).select(F.col("key").cast("string").alias("qkey"), F.col("column").alias("qcol"))


def _key_from_json(qkey: Any, keys: tuple[str, ...]) -> Any:
    from pyspark.sql import functions as F

    def field_of(name: str) -> Any:
        escaped = name.replace("'", "")
        return F.coalesce(
            F.get_json_object(qkey, f"$.payload.{escaped}"), F.get_json_object(qkey, f"$.{escaped}")
        )

    return F.struct(*[field_of(k).alias(k) for k in keys])


def compare_values(
    spark: Any,
    config: Any,
    lake_root: Any,
    source_name: str,
    source: SourceTable,
    silver: Any | None,
    *,
    examples: int = 5,
) -> TableValues:
    """Compare one table's source read with silver, value by value.

    Args:
        spark: The session.
        config: The source's config (for the lossy-by-config rules).
        lake_root: The lake root (for ``silver/_quarantine``).
        source_name: The source's name.
        source: The independent read of the table.
        silver: Silver's live rows at the cut (None: no silver table).
        examples: At most this many examples per kind and column.

    Returns:
        The counts, per-column findings and examples.
    """
    from pyspark.sql.types import StructType

    if source.path is None:
        rows = 0 if silver is None else silver.count()
        return TableValues(source.collection, 0, rows, keyed=False, extra=rows, notes=source.notes)
    silver_types = {} if silver is None else {f.name: f.dataType for f in silver.schema.fields}
    plans, notes = _plan(config, source, silver_types)
    compared = [p for p in plans if p.reason == ""]
    src = _source_frame(spark, source)
    by_name = {p.column.name: p for p in plans}
    keys = source.keys
    if keys and not all(by_name[k].reason == "" for k in keys):
        notes.append("a key column is not comparable: rows compared as a multiset")
        keys = ()
    if silver is None:
        silver = spark.createDataFrame([], StructType([]))
        notes.append("no silver table: every source row is missing")
        compared = []
    if not keys:
        return _compare_multiset(source, src, silver, plans, compared, notes, examples=examples)
    return _compare_keyed(
        spark, lake_root, source_name, source, src, silver, plans, notes, keys, examples=examples
    )  # fmt: skip


def _key_json(k: Any, keys: tuple[str, ...], by_name: dict[str, _Plan]) -> Any:
    """The key struct as JSON for people: integers as numbers (``{"id":27}``), as the hash
    comparison lists keys."""
    from pyspark.sql import functions as F

    def shown(name: str) -> Any:
        integer = by_name[name].column.canon is Canon.INTEGER
        return (k[name].cast("decimal(38,0)") if integer else k[name]).alias(name)

    return F.to_json(F.struct(*[shown(name) for name in keys]))


def _marked(
    spark: Any,
    lake_root: Any,
    source_name: str,
    source: SourceTable,
    src: Any,
    silver: Any,
    compared: list[_Plan],
    keys: tuple[str, ...],
) -> Any:
    """Both sides joined on the key, one row per key with its flags: ``missing``, ``extra``,
    ``unreadable``, per compared column ``d<i>`` (differs) and ``q<i>`` (value quarantined),
    plus the texts shown in examples (``raw<i>`` from the source, ``g<i>`` from silver)."""
    from pyspark.sql import functions as F

    by_name = {p.column.name: p for p in compared}

    def key_struct(side: str) -> Any:
        return F.struct(
            *[(by_name[k].source if side == "s" else by_name[k].silver).alias(k) for k in keys]
        )

    def silver_text_or_mark(p: _Plan) -> Any:
        # A silver value without a canonical text is a difference, never a NULL that matches.
        value = F.col(quote_identifier(p.column.name))
        unreadable = value.isNotNull() & p.silver.isNull()
        return F.when(unreadable, F.lit(_UNREADABLE_SILVER)).otherwise(p.silver)

    s = src.select(
        key_struct("s").alias("k"),
        F.col("u"),
        F.lit(True).alias("in_s"),
        *[F.col(f"c{p.index}").alias(f"raw{p.index}") for p in compared],
        *[p.source.alias(f"s{p.index}") for p in compared],
    )
    g = silver.select(
        key_struct("g").alias("k"),
        F.lit(True).alias("in_g"),
        *[silver_text_or_mark(p).alias(f"g{p.index}") for p in compared],
    )
    joined = s.join(g, on="k", how="full_outer")
    quarantine = _quarantined(spark, lake_root, source_name, source.collection)
    if quarantine is not None:
        q = quarantine.select(_key_from_json(F.col("qkey"), keys).alias("k"), "qcol")
        q = q.groupBy("k").agg(F.collect_set("qcol").alias("qcols"))
        joined = joined.join(q, on="k", how="left")
    else:
        joined = joined.withColumn("qcols", F.lit(None).cast("array<string>"))
    both = F.col("in_s").isNotNull() & F.col("in_g").isNotNull()
    read = both & F.col("u").isNull()
    flags = []
    for p in compared:
        listed = F.coalesce(F.array_contains("qcols", p.column.name), F.lit(False))
        quarantined = listed & F.col(f"g{p.index}").isNull()
        differs = ~F.col(f"s{p.index}").eqNullSafe(F.col(f"g{p.index}"))
        flags += [
            (read & differs & ~quarantined).alias(f"d{p.index}"),
            (read & quarantined).alias(f"q{p.index}"),
        ]
    return joined.select(
        "k",
        "u",
        F.col("in_s").isNull().alias("extra"),
        F.col("in_g").isNull().alias("missing"),
        (both & F.col("u").isNotNull()).alias("unreadable"),
        *[F.col(f"raw{p.index}") for p in compared],
        *[F.col(f"g{p.index}") for p in compared],
        *flags,
    )


def _compare_keyed(
    spark: Any,
    lake_root: Any,
    source_name: str,
    source: SourceTable,
    src: Any,
    silver: Any,
    plans: list[_Plan],
    notes: list[str],
    keys: tuple[str, ...],
    *,
    examples: int,
) -> TableValues:
    """Keyed: one aggregate of every flag of :func:`_marked`, then examples where needed."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    compared = [p for p in plans if not p.reason]
    by_name = {p.column.name: p for p in plans}
    marked = _marked(spark, lake_root, source_name, source, src, silver, compared, keys)
    marked = marked.persist(StorageLevel.MEMORY_AND_DISK)
    try:
        any_differs = F.lit(False)
        for p in compared:
            any_differs = any_differs | F.col(f"d{p.index}")

        def n(flag: Any) -> Any:
            return F.sum(flag.cast("int"))

        flags = [f"d{p.index}" for p in compared] + [f"q{p.index}" for p in compared]
        counts = marked.agg(
            F.count(F.lit(1)).alias("n"),
            n(any_differs).alias("differing"),
            *[n(F.col(f)).alias(f) for f in ("missing", "extra", "unreadable", *flags)],
        ).first()
        if counts is None:
            raise InternalError("gold.reconcile_compare: expected counts is not None")

        def count(name: str) -> int:
            return int(counts[name] or 0)

        def key_json() -> Any:
            return _key_json(F.col("k"), keys, by_name)

        def keys_where(flag: str, extra: Any = None) -> tuple[str, ...]:
            if not count(flag):
                return ()
            shown = key_json() if extra is None else F.concat(key_json(), extra)
            picked = marked.where(F.col(flag)).orderBy("k").select(shown.alias("t"))
            return tuple(r["t"] for r in picked.limit(examples).collect())

        def finding(p: _Plan) -> ColumnFinding:
            if p.reason:
                return ColumnFinding(p.column.name, NOT_COMPARABLE, p.reason)
            differing = count(f"d{p.index}")
            picked = (
                marked.where(F.col(f"d{p.index}"))
                .orderBy("k")
                .select(key_json().alias("key"), f"raw{p.index}", f"g{p.index}")
                .limit(examples)
                .collect()
                if differing
                else []
            )
            shown = tuple(ValueExample(r[0], r[1], r[2]) for r in picked)
            return ColumnFinding(
                p.column.name, COMPARED, "", differing, count(f"q{p.index}"), shown
            )

        return TableValues(
            collection=source.collection,
            source_rows=source.rows,
            silver_rows=count("n") - count("missing"),
            keyed=True,
            missing=count("missing"),
            extra=count("extra"),
            differing_rows=count("differing"),
            unreadable=count("unreadable"),
            columns=tuple(finding(p) for p in plans),
            missing_keys=keys_where("missing"),
            extra_keys=keys_where("extra"),
            unreadable_keys=keys_where("unreadable", F.concat(F.lit(" ("), F.col("u"), F.lit(")"))),
            notes=tuple(notes),
        )
    finally:
        marked.unpersist()


def _compare_multiset(
    source: SourceTable,
    src: Any,
    silver: Any,
    plans: list[_Plan],
    compared: list[_Plan],
    notes: list[str],
    *,
    examples: int,
) -> TableValues:
    """Keyless: rows as JSON of their compared texts, counted per distinct row on both sides."""
    from pyspark.sql import functions as F

    def row(side: str) -> Any:
        parts = [
            # Integers as JSON numbers in the listed rows ({"n":1}), the same on both sides.
            (p.source if side == "s" else p.silver)
            .try_cast("decimal(38,0)" if p.column.canon is Canon.INTEGER else "string")
            .alias(p.column.name)
            for p in compared
        ]
        return F.to_json(F.struct(*parts)) if parts else F.lit("{}")

    s = src.where(F.col("u").isNull()).groupBy(row("s").alias("r")).agg(F.count("*").alias("cs"))
    unreadable = src.where(F.col("u").isNotNull()).count()
    if silver.columns:
        g = silver.groupBy(row("g").alias("r")).agg(F.count("*").alias("cg"))
        silver_rows = silver.count()
    else:
        g = s.select("r", F.lit(0).cast("long").alias("cg")).limit(0)
        silver_rows = 0
    diff = F.coalesce(F.col("cs"), F.lit(0)) - F.coalesce(F.col("cg"), F.lit(0))
    rows = s.join(g, on="r", how="full_outer").select("r", diff.alias("d")).where("d != 0")
    totals = rows.agg(
        F.sum(F.when(F.col("d") > 0, F.col("d"))).alias("missing"),
        F.sum(F.when(F.col("d") < 0, -F.col("d"))).alias("extra"),
    ).first()
    missing = int((totals and totals["missing"]) or 0)
    extra = int((totals and totals["extra"]) or 0)

    def shown(positive: bool) -> tuple[str, ...]:
        side = rows.where(F.col("d") > 0 if positive else F.col("d") < 0)
        picked = side.orderBy("r").limit(examples).collect()
        return tuple(r["r"] if abs(r["d"]) == 1 else f"{r['r']} x{abs(r['d'])}" for r in picked)

    findings = tuple(
        ColumnFinding(p.column.name, NOT_COMPARABLE, p.reason)
        if p.reason
        else ColumnFinding(p.column.name, COMPARED)
        for p in plans
    )
    return TableValues(
        collection=source.collection,
        source_rows=source.rows,
        silver_rows=silver_rows,
        keyed=False,
        missing=missing,
        extra=extra,
        unreadable=unreadable,
        columns=findings,
        missing_keys=shown(True) if missing else (),
        extra_keys=shown(False) if extra else (),
        notes=(*notes, "no key: rows compared as a multiset (no per-column counts)"),
    )
