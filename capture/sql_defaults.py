"""Column defaults (contract C4) from the ``DEFAULT`` text a catalog keeps: SQL Server, Oracle, Db2.

Each of these catalogs keeps a column's default as the text of its ``DEFAULT`` clause
(SQL Server ``INFORMATION_SCHEMA.COLUMNS.COLUMN_DEFAULT``, the ``definition`` of
``sys.default_constraints``; Oracle ``ALL_TAB_COLUMNS.DATA_DEFAULT``; Db2
``SYSCAT.COLUMNS.DEFAULT``). Debezium propagates a constant default to the field schema's
``default``, converted as a value of the column would be (seed 002, "Default Values"; seeds 000
and 003: "a column's default value is propagated to the corresponding field's Kafka Connect
schema"). The agents here do the same for constants (a number, a quoted string, ``NULL``), with
:class:`DefaultRules` saying how the engine prints them and what its ``ADD COLUMN`` writes into the
rows that already exist, which is what silver fills an added column with:

* SQL Server prints the clause in parentheses (``((0))``, ``('abc')``, ``(N'abc')``,
  ``(getdate())``). ``ALTER TABLE ... ADD c ... NOT NULL DEFAULT v`` fills existing rows with
  ``v``; a nullable column gets ``v`` there only ``WITH VALUES`` and NULL otherwise, which the
  catalog does not record: the value is given, and ``medallion.default.unreproducible`` says the
  older rows cannot be known.
* Oracle (11g+ for NOT NULL, 12c+ for nullable columns) and Db2 put the default into every
  existing row.

A default that is not a constant (a function, ``SYSDATE``, ``CURRENT TIMESTAMP``, a sequence) has
no ``default``: its value in older rows is the time or the value of the ``ALTER``, which the agent
does not see, so the field carries ``medallion.default.unreproducible`` with the reason (silver
then records the table as needing a re-snapshot when it adds the column, never a guess).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from capture.captured_table import ColumnDefault
from capture.column_types import ColumnType, Unrepresentable

__all__ = [
    "DefaultRules",
    "SQLSERVER_DEFAULTS",
    "ORACLE_DEFAULTS",
    "DB2_DEFAULTS",
    "column_default",
    "literal",
]


@dataclass(frozen=True, slots=True)
class DefaultRules:
    """How one engine's catalog prints a default, and what its ``ADD COLUMN`` does.

    Attributes:
        engine: The engine's name, for reasons.
        parenthesized: The catalog wraps the clause in parentheses (SQL Server: ``((0))``).
        national_prefix: String literals may carry ``N`` (``N'abc'``: SQL Server, Oracle).
        fills_nullable: ``ADD COLUMN`` of a nullable column with a default writes the default
            into the existing rows (Oracle 12c+, Db2); False: only on request, which the
            catalog does not keep (SQL Server's ``WITH VALUES``).
    """

    engine: str
    parenthesized: bool
    national_prefix: bool
    fills_nullable: bool


SQLSERVER_DEFAULTS: Final = DefaultRules("SQL Server", True, True, False)
ORACLE_DEFAULTS: Final = DefaultRules("Oracle", False, True, True)
DB2_DEFAULTS: Final = DefaultRules("Db2", False, False, True)

_DECIMAL: Final = "org.apache.kafka.connect.data.Decimal"
_DB2_TIMESTAMP: Final = re.compile(r"^(\d{4}-\d\d-\d\d)-(\d\d)\.(\d\d)\.(\d\d)")
_DB2_TIME: Final = re.compile(r"^(\d\d)\.(\d\d)\.(\d\d)$")
_TEMPORAL: Final[dict[str, Callable[[str], Any]]] = {
    **dict.fromkeys(
        ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date"), dt.date.fromisoformat
    ),
    **dict.fromkeys(
        (
            "io.debezium.time.Time",
            "io.debezium.time.MicroTime",
            "io.debezium.time.NanoTime",
            "org.apache.kafka.connect.data.Time",
        ),
        dt.time.fromisoformat,
    ),
    **dict.fromkeys(
        (
            "io.debezium.time.Timestamp",
            "io.debezium.time.MicroTimestamp",
            "io.debezium.time.NanoTimestamp",
            "org.apache.kafka.connect.data.Timestamp",
        ),
        dt.datetime.fromisoformat,
    ),
}
"""Logical types whose literal is parsed to the driver's date, time or datetime."""
_NUMBER: Final = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_STRING: Final = re.compile(r"(N?)'((?:[^']|'')*)'", re.DOTALL)


@dataclass(frozen=True, slots=True)
class _Literal:
    text: str
    quoted: bool


def _constant(clause: str, rules: DefaultRules) -> _Literal | None:
    """The constant ``clause`` is, or None for any other expression; ``NULL`` is the empty
    literal with ``quoted`` False and text ``""``."""
    text = clause.strip()
    while rules.parenthesized and text.startswith("(") and text.endswith(")"):
        text = text[1:-1].strip()
    if text.upper() == "NULL":
        return _Literal("", False)
    if _NUMBER.fullmatch(text):
        return _Literal(text, False)
    match = _STRING.fullmatch(text)
    if match is not None and (rules.national_prefix or not match.group(1)):
        return _Literal(match.group(2).replace("''", "'"), True)
    return None


def literal(clause: str, rules: DefaultRules) -> str | None:
    """The value of a constant ``DEFAULT`` clause as text (a string's content, a number's
    digits), or None when the clause is not a constant (or is ``NULL``).

    >>> literal("(N'it''s')", SQLSERVER_DEFAULTS), literal("((-1.5))", SQLSERVER_DEFAULTS)
    ("it's", '-1.5')
    >>> literal("SYSDATE", ORACLE_DEFAULTS) is None
    True
    """
    found = _constant(clause, rules)
    return None if found is None or (not found.quoted and found.text == "") else found.text


def _driver_value(text: str, schema: dict[str, Any]) -> Any:
    """What the driver hands over for a value whose text is ``text``, by the Connect type
    the column converts it to (the converters take the driver's Python types; temporal ones
    also the server's text, as drivers hand it over in some modes)."""
    kind = schema.get("type")
    if schema.get("name") == _DECIMAL:
        return Decimal(text)
    temporal = _TEMPORAL.get(str(schema.get("name")))
    if temporal is not None:
        # Db2 prints ISO with dots (2021-01-02-10.30.00.000000, 10.30.00)
        text = _DB2_TIMESTAMP.sub(r"\1 \2:\3:\4", text.strip())
        text = _DB2_TIME.sub(r"\1:\2:\3", text)
        return temporal(text)
    if schema.get("name"):
        return text  # other logical types (UUID, XML, zoned timestamps...): their text
    if kind in ("int8", "int16", "int32", "int64"):
        number = Decimal(text)
        if number != number.to_integral_value():
            raise ValueError(f"{text} is not an integer")
        return int(number)
    if kind in ("float32", "float64"):
        return float(text)
    if kind == "boolean":
        return Decimal(text) != 0
    return text


def column_default(
    clause: str | None, column: ColumnType, *, nullable: bool, rules: DefaultRules
) -> ColumnDefault | None:
    """The C4 default of one column (see the module docstring).

    Args:
        clause: The catalog's text of the column's ``DEFAULT``; None without one.
        column: The column's converted type (its converter gives the field's JSON form).
        nullable: The column accepts NULL.
        rules: The engine's :class:`DefaultRules`.

    Returns:
        The default, or None when the column has none (or ``DEFAULT NULL``).
    """
    if clause is None or not clause.strip():
        return None
    found = _constant(clause, rules)
    if found is None:
        return ColumnDefault(
            None,
            f"the column's default {clause.strip()} is not a constant: rows that existed when "
            f"the column was added show its value at that time ({rules.engine})",
        )
    if not found.quoted and found.text == "":
        return None  # DEFAULT NULL: older rows show NULL, as without a default
    try:
        value = column.convert(_driver_value(found.text, column.schema))
    except (Unrepresentable, ValueError, TypeError, ArithmeticError, InvalidOperation):
        return ColumnDefault(
            None,
            f"the column's default {clause.strip()} does not convert to its type "
            f"{column.type_name}",
        )
    if nullable and not rules.fills_nullable:
        return ColumnDefault(
            value,
            f"{rules.engine} writes the default of a nullable column added by ALTER TABLE into "
            "the rows that existed only WITH VALUES (NULL otherwise), which the catalog does "
            "not keep",
        )
    return ColumnDefault(value)
