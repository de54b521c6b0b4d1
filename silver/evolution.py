"""Schema evolution of silver tables: what changed, what is safe, what the table's policy says.

Each micro-batch may carry events written with several schemas of one source table (an ``ALTER
TABLE`` in the middle of the stream, or late events written before it). Silver compares each
schema, in source order, with the table and classifies every column difference:

* ``added``: a column the table lacks. Always applied (``ADD COLUMNS``).
* ``widened``: a type that holds every value of the old one (:func:`is_widening`). Always
  applied, in place, through Delta's type widening (no rewrite).
* ``narrower``: the event's type fits in the table's (events written before a widening). Nothing
  changes; each value is cast up, losslessly.
* ``incompatible``: anything else. The table's :class:`~pipeline.config.SchemaEvolutionPolicy`
  decides: ``fail`` stops the job, ``quarantine`` sends the events to quarantine, ``evolve``
  rewrites the column when every stored value converts without loss (and quarantines otherwise).

Columns an event lacks are left alone (NULL for rows it inserts): older events predate added
columns, and Debezium sends a dropped column as absent, never as a signal. Every change applied
or refused is recorded in ``silver/_schema_changes`` with the old and new type.

Values are never cast silently: :func:`conform` casts a batch to the table's types and rejects a
row whose non-NULL value would become NULL or change on the way.

    >>> from pyspark.sql.types import IntegerType, LongType, StringType
    >>> is_widening(IntegerType(), LongType()), is_widening(LongType(), IntegerType())
    (True, False)
    >>> classify(LongType(), IntegerType()), classify(IntegerType(), StringType())
    ('narrower', 'incompatible')
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StructType,
    TimestampNTZType,
)

from pipeline.sql import quote_identifier

__all__ = [
    "ADDED",
    "WIDENED",
    "NARROWER",
    "INCOMPATIBLE",
    "ColumnChange",
    "classify",
    "compare",
    "is_widening",
    "conform",
    "widen_and_add",
]

logger = logging.getLogger(__name__)

ADDED: Final = "added"
WIDENED: Final = "widened"
NARROWER: Final = "narrower"
INCOMPATIBLE: Final = "incompatible"

_INTEGRAL: Final = (ByteType, ShortType, IntegerType, LongType)
_INTEGRAL_DIGITS: Final = {ByteType: 3, ShortType: 5, IntegerType: 10, LongType: 19}


@dataclass(frozen=True, slots=True)
class ColumnChange:
    """One column that differs between a silver table and an incoming schema.

    Attributes:
        column: The column name.
        old: The table's type (``simpleString``), None for an added column.
        new: The incoming type.
        kind: ``added``, ``widened``, ``narrower`` or ``incompatible``.
    """

    column: str
    old: str | None
    new: str
    kind: str

    def describe(self) -> str:
        """``amount: int -> string (incompatible)``."""
        return f"{self.column}: {self.old or '(none)'} -> {self.new} ({self.kind})"


def _rank(t: DataType) -> int:
    return next(i for i, cls in enumerate(_INTEGRAL) if isinstance(t, cls))


def is_widening(old: DataType, new: DataType) -> bool:
    """Whether every value of ``old`` is a value of ``new`` and Delta widens it in place.

    These are the widenings Delta's type-widening feature applies without rewriting data:
    integral to a wider integral, to ``double`` (up to ``int``) or to a decimal with enough
    integer digits; ``float`` to ``double``; a decimal to one with no fewer integer and fraction
    digits; ``date`` to ``timestamp_ntz``.
    """
    if old == new:
        return False
    if isinstance(old, _INTEGRAL):
        if isinstance(new, _INTEGRAL):
            return _rank(new) > _rank(old)
        if isinstance(new, DoubleType):
            return not isinstance(old, LongType)
        if isinstance(new, DecimalType):
            digits = next(d for cls, d in _INTEGRAL_DIGITS.items() if isinstance(old, cls))
            return new.precision - new.scale >= digits
        return False
    if isinstance(old, FloatType):
        return isinstance(new, DoubleType)
    if isinstance(old, DecimalType) and isinstance(new, DecimalType):
        return new.scale >= old.scale and new.precision - new.scale >= old.precision - old.scale
    if isinstance(old, DateType):
        return isinstance(new, TimestampNTZType)
    return False


def classify(table_type: DataType, incoming: DataType) -> str | None:
    """How an incoming column type relates to the table's: None when they are the same."""
    if table_type == incoming:
        return None
    if is_widening(table_type, incoming):
        return WIDENED
    if is_widening(incoming, table_type):
        return NARROWER
    return INCOMPATIBLE


def compare(table: StructType | None, incoming: StructType) -> tuple[ColumnChange, ...]:
    """Every column of ``incoming`` that is new to, or typed differently from, ``table``.

    Args:
        table: The silver table's data columns (None: the table does not exist yet).
        incoming: The data columns an event schema decodes to.

    Returns:
        The differences, in ``incoming``'s column order.
    """
    existing = {f.name: f.dataType for f in table.fields} if table is not None else {}
    changes: list[ColumnChange] = []
    for f in incoming.fields:
        if f.name not in existing:
            if table is not None:
                changes.append(ColumnChange(f.name, None, f.dataType.simpleString(), ADDED))
            continue
        kind = classify(existing[f.name], f.dataType)
        if kind is not None:
            changes.append(
                ColumnChange(
                    f.name, existing[f.name].simpleString(), f.dataType.simpleString(), kind
                )
            )
    return tuple(changes)


def _has_map(t: DataType) -> bool:
    return "map<" in t.simpleString()


def conform(
    frame: DataFrame,
    table: StructType,
    columns: Sequence[str],
    *,
    reason_column: str,
) -> DataFrame:
    """Cast ``columns`` of ``frame`` to the table's types, flagging rows a cast would damage.

    A value is damaged when its cast is NULL but it was not, or when casting it back does not
    give it again (``1.5`` into ``int``). Such a row gets a reason in ``reason_column`` (rows
    already carrying a reason keep theirs) and NULL in the column, since it will be quarantined,
    not applied; the other rows are cast.

    Args:
        frame: Decoded changes.
        table: The silver table's schema (the target types).
        columns: Data columns of ``frame`` to conform (those the table has).
        reason_column: Name of the string column to write the reason to (added if missing).

    Returns:
        ``frame`` with the columns cast and ``reason_column`` set for damaged rows.
    """
    targets = {f.name: f.dataType for f in table.fields}
    types = {f.name: f.dataType for f in frame.schema.fields}
    reason: Column = (
        F.col(reason_column) if reason_column in frame.columns else F.lit(None).cast("string")
    )
    casts: dict[str, Column] = {}
    for name in columns:
        target, current = targets.get(name), types.get(name)
        if target is None or current is None or target == current:
            continue
        value = F.col(quote_identifier(name))
        # try_cast: under ANSI mode a failing cast raises; here failing means "refuse the row".
        cast = value.try_cast(target)
        back = cast.try_cast(current)
        # Maps have no equality in Spark; for them a cast that yields a value is the check.
        same = back.isNotNull() if _has_map(current) else back == value
        intact = value.isNull() | (cast.isNotNull() & same)
        reason = F.coalesce(
            reason,
            F.when(
                ~intact,
                F.lit(
                    f"value of column {name} ({current.simpleString()}) does not convert to "
                    f"the silver column's {target.simpleString()} without loss"
                ),
            ),
        )
        casts[name] = cast
    if not casts and reason_column in frame.columns:
        return frame
    flagged = frame.withColumn(reason_column, reason)
    return flagged.select(
        *[
            F.when(F.col(reason_column).isNull(), casts[c]).alias(c)
            if c in casts
            else F.col(quote_identifier(c))
            for c in flagged.columns
        ]
    )


def widen_and_add(
    spark: SparkSession, path: str, have: Mapping[str, DataType], wanted: Mapping[str, DataType]
) -> None:
    """Widen the table's columns in place (Delta type widening) and add the ones it lacks.

    Args:
        spark: The session.
        path: The Delta table.
        have: The table's columns and types now.
        wanted: Columns and types it should have; only widenings and additions are applied.
    """
    table = f"delta.{quote_identifier(path)}"
    widen = [(n, t) for n, t in wanted.items() if n in have and classify(have[n], t) == WIDENED]
    if widen:
        spark.sql(f"ALTER TABLE {table} SET TBLPROPERTIES ('delta.enableTypeWidening' = 'true')")
        for column, type_ in widen:
            spark.sql(
                f"ALTER TABLE {table} ALTER COLUMN {quote_identifier(column)} "
                f"TYPE {type_.simpleString()}"
            )
        logger.info("%s: widened %s", path, [c for c, _ in widen])
    added = [(n, t) for n, t in wanted.items() if n not in have]
    if added:
        columns = ", ".join(f"{quote_identifier(n)} {t.simpleString()}" for n, t in added)
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({columns})")
        logger.info("%s: added columns %s", path, [n for n, _ in added])
