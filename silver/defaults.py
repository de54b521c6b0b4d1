"""Column defaults: rows written before a column was added show the column's default (C4).

A source ``ALTER TABLE ... ADD COLUMN c ... DEFAULT v`` writes no change event for the rows that
already exist, yet the source shows ``v`` in them (PostgreSQL 11+ keeps it as the column's
"missing value", MySQL rewrites the table). The capture agents, and Debezium 3.x, put that value
in the column's field schema as ``"default"`` (the field's JSON form); silver decodes it with the
field's own codec (:func:`silver.types.decode_value`) and writes it into every live row of the
table whose last change is older than the first event written with the column.

The work is split around ``ADD COLUMNS`` so that a crash anywhere leaves it to be finished,
never done twice nor skipped:

1. :func:`record_added`, before the column is added: one table property per column,
   ``medallion.default.<column>`` = JSON ``{field, position, done}`` (the field schema with its
   default, the position of the first event written with the column).
2. :func:`fill_defaults`, after the micro-batch's MERGE (so rows that events older than the
   column wrote in the same micro-batch are covered too): ``UPDATE ... SET c = default WHERE c
   IS NULL AND _cdc_position < position AND NOT _cdc_deleted``, then ``done``. The UPDATE
   is idempotent (a row it changed no longer matches), so running it again after a crash, or
   for a late event older than the column in a later micro-batch, changes nothing else. In a
   history table (:mod:`silver.scd2`) it changes the versions alive when the column was added
   (current ones, and closed ones whose validity spans the ``ALTER``): the source showed the
   default in them from then on; versions closed before it keep NULL, as the column did not
   exist.

A default the agent cannot know (a volatile default that rewrote the table, an expression, a
renamed column: parameter ``medallion.default.unreproducible``) is never guessed: the column
stays NULL in those rows and the table is recorded in ``silver/_resnapshot``
(:mod:`silver.resnapshot`), which ``medallion status`` and the ``resnapshot`` quality check
report until the table is snapshotted again.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson
from pyspark.sql import Column, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, StructField, StructType

from bronze.storage import open_delta
from pipeline.sql import quote_identifier, quote_string_literal
from silver import merge as M

__all__ = [
    "DEFAULT_PROPERTY_PREFIX",
    "UNREPRODUCIBLE_PARAMETER",
    "AddedColumn",
    "added_columns",
    "record_added",
    "pending_defaults",
    "fill_defaults",
]

logger = logging.getLogger(__name__)

DEFAULT_PROPERTY_PREFIX: Final = "medallion.default."
"""Table property ``medallion.default.<column>``: the added column's default, to fill."""
UNREPRODUCIBLE_PARAMETER: Final = "medallion.default.unreproducible"
"""Field parameter of contract C4: why the default of rows that predate the column is unknown."""


@dataclass(frozen=True, slots=True)
class AddedColumn:
    """A column silver adds to a table, with what the source says about older rows.

    Attributes:
        column: The column name.
        field: Its Connect field schema (``default``, ``parameters``...).
        position: Position of the first event written with it: older rows predate it.
        done: Whether silver has filled (or recorded) it.
    """

    column: str
    field: Mapping[str, Any]
    position: bytes
    done: bool = False

    @property
    def default(self) -> Any:
        """The default in the field's JSON form; None when there is none."""
        return self.field.get("default")

    @property
    def unreproducible(self) -> str | None:
        """Why the value older rows show cannot be known, or None."""
        reason = (self.field.get("parameters") or {}).get(UNREPRODUCIBLE_PARAMETER)
        return None if reason is None else str(reason)

    def to_property(self) -> str:
        """The table property value (JSON)."""
        return orjson.dumps(
            {"field": dict(self.field), "position": self.position.hex(), "done": self.done}
        ).decode()

    @classmethod
    def from_property(cls, column: str, value: str) -> AddedColumn:
        """Read back :meth:`to_property`."""
        data = orjson.loads(value)
        return cls(column, data["field"], bytes.fromhex(data["position"]), bool(data["done"]))


def added_columns(
    have: StructType, wanted: Mapping[str, DataType], parts: Sequence[tuple[bytes, Any]]
) -> list[AddedColumn]:
    """The columns ``wanted`` adds to ``have`` that carry a default or an unreproducible reason.

    Args:
        have: The table's data columns now.
        wanted: The columns it will have.
        parts: ``(first position, Connect row schema or None)`` of the micro-batch's parts, in
            source order; a column's field is taken from the first part that has it.

    Returns:
        One entry per such column; columns without either stay NULL (the source shows NULL).
    """
    out = []
    for column in wanted:
        if column in have.fieldNames():
            continue
        for first, row in parts:
            field = next(
                (f for f in (row or {}).get("fields", []) if f.get("field") == column), None
            )
            if field is None:
                continue
            entry = AddedColumn(column, field, first)
            if entry.default is not None or entry.unreproducible is not None:
                out.append(entry)
            break
    return out


def _set_property(spark: SparkSession, path: str, entry: AddedColumn) -> None:
    spark.sql(
        f"ALTER TABLE delta.{quote_identifier(path)} SET TBLPROPERTIES "
        f"({quote_string_literal(DEFAULT_PROPERTY_PREFIX + entry.column)} = "
        f"{quote_string_literal(entry.to_property())})"
    )


def record_added(spark: SparkSession, path: str, added: Sequence[AddedColumn]) -> None:
    """Record the added columns' defaults as table properties, before ``ADD COLUMNS``.

    Recorded first, so that a crash between this and the ``ADD COLUMNS`` (after which the
    replayed micro-batch no longer sees the column as new) still leaves the fill to do.
    """
    for entry in added:
        _set_property(spark, path, entry)


def pending_defaults(path: str) -> list[AddedColumn]:
    """The added-column defaults recorded on a table (read from the Delta log, no Spark job)."""

    configuration = open_delta(path).metadata().configuration
    return [
        AddedColumn.from_property(key[len(DEFAULT_PROPERTY_PREFIX) :], value)
        for key, value in sorted(configuration.items())
        if key.startswith(DEFAULT_PROPERTY_PREFIX) and value
    ]


def _value_expression(spark: SparkSession, entry: AddedColumn, target: DataType) -> Column:
    """The default as a Spark expression of the column's type, decoded with the field's codec."""
    from silver import types as T

    raw_type = StructType([StructField("v", T.json_type(entry.field))])
    parsed = F.from_json(F.lit(orjson.dumps({"v": entry.default}).decode()), raw_type)["v"]
    decoded = T.decode_value(parsed, entry.field)
    # Evaluated once here: a decoder that needs a Python UDF (wide decimals) must not run
    # inside Delta's UPDATE, and a scalar is then a plain literal.
    value = spark.range(1).select(decoded.cast(target).alias("v")).collect()[0]["v"]
    if value is None:
        raise ValueError(f"default {entry.default!r} of column {entry.column} decodes to NULL")
    if isinstance(value, str | int | float | bool | bytes | bytearray):
        return F.lit(value).cast(target)
    return decoded.cast(target)


def _fill(
    spark: SparkSession, path: str, entry: AddedColumn, *, versions_alive: bool = False
) -> None:
    from delta.tables import DeltaTable

    table = DeltaTable.forPath(spark, path)
    types = {f.name: f.dataType for f in table.toDF().schema.fields}
    if entry.column not in types:
        return  # a history table that has not seen the column yet
    name = quote_identifier(entry.column)
    older = F.col(name).isNull() & (F.col(M.POSITION) < F.lit(entry.position)) & ~F.col(M.DELETED)
    if versions_alive:
        from silver.scd2 import VALID_TO_POSITION

        older = older & (
            F.col(VALID_TO_POSITION).isNull() | (F.col(VALID_TO_POSITION) > F.lit(entry.position))
        )
    table.update(older, {name: _value_expression(spark, entry, types[entry.column])})


def fill_defaults(
    spark: SparkSession,
    path: str,
    *,
    history: str | None = None,
    oldest: bytes | None = None,
    on_unreproducible: Callable[[Sequence[AddedColumn]], object] | None = None,
) -> int:
    """Give rows older than an added column its default; mark the column done.

    Args:
        spark: The session.
        path: The silver table.
        history: Its history table, when it keeps one.
        oldest: The oldest position the micro-batch applied: a column already done is filled
            again only when an event older than it arrived (it wrote NULL there).
        on_unreproducible: Called with the columns whose default cannot be reproduced, before
            they are marked done (``silver/_resnapshot`` records them there).

    Returns:
        Columns filled.
    """
    entries = [
        e
        for e in pending_defaults(path)
        if not e.done or (oldest is not None and oldest < e.position)
    ]
    unknown = [e for e in entries if e.unreproducible is not None and not e.done]
    if unknown and on_unreproducible is not None:
        on_unreproducible(unknown)
    filled = 0
    for entry in entries:
        if entry.unreproducible is None and entry.default is not None:
            _fill(spark, path, entry)
            if history is not None:
                _fill(spark, history, entry, versions_alive=True)
            filled += 1
            logger.info("silver %s: rows older than column %s hold its default", path, entry.column)
        if not entry.done:
            _set_property(spark, path, AddedColumn(entry.column, entry.field, entry.position, True))
    return filled
