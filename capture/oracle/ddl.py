"""DDL rows of ``V$LOGMNR_CONTENTS`` (``OPERATION_CODE`` 5) parsed into table changes.

LogMiner gives a DDL statement's text as it was issued in ``SQL_REDO`` (and ``INFO`` ``USER
DDL``; ``INTERNAL DDL`` rows are not mined), with the table in ``SEG_OWNER``/``TABLE_NAME``. The
agent follows the statements that change a captured table's columns, as Debezium's DDL parser
does, so the column list used to parse ``SQL_REDO`` after the DDL is the table's then:

* ``CREATE TABLE t (col type [DEFAULT ...] [NOT NULL] [PRIMARY KEY], ..., [CONSTRAINT c]
  PRIMARY KEY (...))``;
* ``ALTER TABLE t ADD col type`` / ``ADD (col type, ...)``, ``DROP COLUMN col`` /
  ``DROP (col, ...)``, ``MODIFY col type`` / ``MODIFY (col type, ...)``,
  ``RENAME COLUMN a TO b``;
* ``DROP TABLE t``.

Types are read as ``ALL_TAB_COLUMNS`` shows them (``NUMBER(p,s)``, ``VARCHAR2(n)``,
``TIMESTAMP(6) WITH TIME ZONE``, ``INTERVAL DAY(2) TO SECOND(6)``...). Any other statement on a
captured table (an index, a grant, a comment, a constraint) does not change the columns:
:func:`parse_ddl` returns None for it. Imports no driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from capture.oracle.redo import RedoParseError
from capture.oracle.types import OracleColumn

__all__ = ["DdlChange", "apply_ddl", "column_ddl", "parse_ddl"]

_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:[^"]|"")*")|(?P<word>[A-Za-z_$#][\w$#]*)|(?P<number>\d+)'
    r"|(?P<string>'(?:[^']|'')*')|(?P<punct>[(),.;*\-+]))"
)


@dataclass
class DdlChange:
    """One parsed DDL statement on a table.

    Attributes:
        kind: ``CREATE``, ``ALTER`` or ``DROP`` (Debezium's ``tableChanges[].type``).
        owner: The table's schema.
        table: The table name.
        columns: ``CREATE``: the columns, in order.
        key: ``CREATE``: the primary key's columns.
        add: ``ALTER ... ADD``: new columns.
        drop: ``ALTER ... DROP``: dropped column names.
        modify: ``ALTER ... MODIFY``: columns with a new type (or nullability).
        rename: ``ALTER ... RENAME COLUMN``: ``(old, new)``.
    """

    kind: Literal["CREATE", "ALTER", "DROP"]
    owner: str
    table: str
    columns: list[OracleColumn] = field(default_factory=list)
    key: list[str] = field(default_factory=list)
    add: list[OracleColumn] = field(default_factory=list)
    drop: list[str] = field(default_factory=list)
    modify: list[OracleColumn] = field(default_factory=list)
    rename: list[tuple[str, str]] = field(default_factory=list)


class _Tokens:
    def __init__(self, sql: str) -> None:
        self.sql = sql
        self.items: list[tuple[str, str]] = []
        i = 0
        text = sql.rstrip().rstrip(";")
        while i < len(text):
            match = _TOKEN.match(text, i)
            if match is None or match.end() == i:
                if text[i:].strip() == "":
                    break
                raise RedoParseError(f"DDL: unexpected {text[i : i + 20]!r} at offset {i}")
            kind = match.lastgroup or ""
            self.items.append((kind, match.group(kind)))
            i = match.end()
        self.i = 0

    def peek(self, *words: str) -> bool:
        if self.i + len(words) > len(self.items):
            return False
        return all(
            self.items[self.i + n][0] in ("word", "punct")
            and self.items[self.i + n][1].upper() == w
            for n, w in enumerate(words)
        )

    def take(self, *words: str) -> bool:
        if self.peek(*words):
            self.i += len(words)
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.take(word):
            raise self.fail(repr(word))

    def fail(self, wanted: str) -> RedoParseError:
        near = " ".join(v for _, v in self.items[self.i : self.i + 4])
        return RedoParseError(f"DDL: expected {wanted} (near {near!r}) in {self.sql[:80]!r}")

    def done(self) -> bool:
        return self.i >= len(self.items)

    def name(self) -> str:
        """An identifier: quoted (case kept) or bare (upper-cased)."""
        if self.done():
            raise self.fail("a name")
        kind, value = self.items[self.i]
        if kind == "quoted":
            self.i += 1
            return value[1:-1].replace('""', '"')
        if kind == "word":
            self.i += 1
            return value.upper()
        raise self.fail("a name")

    def number(self) -> int:
        if self.done() or self.items[self.i][0] != "number":
            raise self.fail("a number")
        self.i += 1
        return int(self.items[self.i - 1][1])

    def default_expression(self) -> str:
        """The text of a ``DEFAULT`` expression at the cursor, consumed: a signed number, a
        string, or a word with its call's arguments (``SYSDATE``, ``TO_DATE(...)``)."""
        start = self.i
        if self.peek("-") or self.peek("+"):
            self.i += 1
        self.i += 1  # the number, string or word
        if self.i - 1 < len(self.items) and self.items[self.i - 1][0] == "number":
            if self.peek(".") and self.i + 1 < len(self.items):
                self.i += 2  # 9.5 is three tokens
        elif self.peek("("):
            self.skip_parenthesised()
        return "".join(value for _, value in self.items[start : self.i])

    def skip_parenthesised(self) -> None:
        """Skip a ``( ... )`` group at the cursor, nested groups included."""
        depth = 0
        while not self.done():
            if self.peek("("):
                depth += 1
            elif self.peek(")"):
                depth -= 1
                if depth == 0:
                    self.i += 1
                    return
            self.i += 1

    def skip_group(self) -> None:
        """Skip tokens up to the next ``,`` or ``)`` at this depth (a DEFAULT expression, a
        constraint's clauses)."""
        depth = 0
        while not self.done():
            if self.peek("("):
                depth += 1
            elif self.peek(")"):
                if depth == 0:
                    return
                depth -= 1
            elif self.peek(",") and depth == 0:
                return
            self.i += 1


def _type(t: _Tokens, name: str) -> tuple[OracleColumn, bool]:
    """A column definition: its type as ``ALL_TAB_COLUMNS`` shows it (``data_type`` empty when
    only the nullability is given, in a MODIFY), and whether it is the primary key."""
    base = "" if t.peek("NOT") or t.peek("NULL") or t.peek("DEFAULT") else t.name()
    precision: int | None = None
    scale: int | None = None
    length: int | None = None
    data_type = base
    if base in ("INTEGER", "INT", "SMALLINT"):
        data_type, precision, scale = "NUMBER", 38, 0
    elif base in ("NUMBER", "DECIMAL", "NUMERIC", "FLOAT"):
        data_type = "FLOAT" if base == "FLOAT" else "NUMBER"
        if t.take("("):
            precision = None if t.take("*") else t.number()
            if t.take(","):
                scale = -t.number() if t.take("-") else t.number()
            elif data_type == "NUMBER":
                scale = 0
            t.expect(")")
        elif base == "FLOAT":
            precision = 126
    elif base == "TIMESTAMP":
        digits = 6
        if t.take("("):
            digits = t.number()
            t.expect(")")
        data_type = f"TIMESTAMP({digits})"
        if t.take("WITH", "LOCAL", "TIME", "ZONE"):
            data_type += " WITH LOCAL TIME ZONE"
        elif t.take("WITH", "TIME", "ZONE"):
            data_type += " WITH TIME ZONE"
    elif base == "INTERVAL":
        if t.take("DAY"):
            days = seconds = None
            if t.take("("):
                days = t.number()
                t.expect(")")
            t.expect("TO")
            t.expect("SECOND")
            if t.take("("):
                seconds = t.number()
                t.expect(")")
            data_type = f"INTERVAL DAY({days or 2}) TO SECOND({6 if seconds is None else seconds})"
        else:
            t.expect("YEAR")
            years = None
            if t.take("("):
                years = t.number()
                t.expect(")")
            t.expect("TO")
            t.expect("MONTH")
            data_type = f"INTERVAL YEAR({years or 2}) TO MONTH"
    elif t.take("("):
        length = t.number()
        t.take("BYTE") or t.take("CHAR")
        t.expect(")")
    nullable = True
    key = False
    default: str | None = None
    while not t.done() and not t.peek(",") and not t.peek(")"):
        if t.take("NOT", "NULL"):
            nullable = False
        elif t.take("NULL"):
            nullable = True
        elif t.take("PRIMARY", "KEY"):
            key, nullable = True, False
        elif t.take("CONSTRAINT"):
            t.name()
        elif t.take("DEFAULT"):
            default = t.default_expression()
        else:
            t.i += 1  # ENABLE, VISIBLE, CHECK ..., and what else Oracle prints
            if t.peek("("):
                t.skip_parenthesised()
    column = OracleColumn(name, data_type, precision, scale, nullable, length, default)
    return column, key


def _columns(t: _Tokens) -> list[OracleColumn]:
    """``col type ...`` or ``(col type ..., ...)``."""
    if not t.take("("):
        return [_type(t, t.name())[0]]
    out = [_type(t, t.name())[0]]
    while t.take(","):
        out.append(_type(t, t.name())[0])
    t.expect(")")
    return out


def _qualified(t: _Tokens, owner: str) -> tuple[str, str]:
    name = t.name()
    if t.take("."):
        return name, t.name()
    return owner, name


def parse_ddl(sql: str, owner: str) -> DdlChange | None:
    """Parse a DDL row's ``SQL_REDO``; None for a statement that does not change columns.

    Args:
        sql: The DDL text.
        owner: ``SEG_OWNER`` (the schema of an unqualified table name).

    Raises:
        RedoParseError: A CREATE/ALTER/DROP TABLE the parser does not understand.
    """
    t = _Tokens(sql)
    if t.take("CREATE", "TABLE") or t.take("CREATE", "GLOBAL", "TEMPORARY", "TABLE"):
        schema, table = _qualified(t, owner)
        t.expect("(")
        change = DdlChange("CREATE", schema, table)
        while True:
            if t.take("CONSTRAINT"):
                t.name()
            if t.take("PRIMARY", "KEY"):
                t.expect("(")
                change.key = [t.name()]
                while t.take(","):
                    change.key.append(t.name())
                t.expect(")")
                t.skip_group()
            elif t.peek("UNIQUE") or t.peek("FOREIGN") or t.peek("CHECK") or t.peek("SUPPLEMENTAL"):
                t.skip_group()
            else:
                column, in_key = _type(t, t.name())
                change.columns.append(column)
                if in_key:
                    change.key.append(column.name)
            if not t.take(","):
                break
        t.expect(")")
        return change
    if t.take("DROP", "TABLE"):
        schema, table = _qualified(t, owner)
        return DdlChange("DROP", schema, table)
    if not t.take("ALTER", "TABLE"):
        return None
    schema, table = _qualified(t, owner)
    change = DdlChange("ALTER", schema, table)
    if t.take("ADD"):
        if t.peek("CONSTRAINT") or t.peek("PRIMARY") or t.peek("SUPPLEMENTAL"):
            return None
        change.add = _columns(t)
    elif t.take("DROP", "COLUMN"):
        change.drop = [t.name()]
    elif t.take("DROP", "("):
        change.drop = [t.name()]
        while t.take(","):
            change.drop.append(t.name())
        t.expect(")")
    elif t.take("MODIFY"):
        if t.peek("CONSTRAINT") or t.peek("PRIMARY"):
            return None
        change.modify = _columns(t)
    elif t.take("RENAME", "COLUMN"):
        old = t.name()
        t.expect("TO")
        change.rename = [(old, t.name())]
    else:
        return None
    return change


def apply_ddl(
    columns: list[OracleColumn], key: list[str], change: DdlChange
) -> tuple[list[OracleColumn], list[str]]:
    """The table's columns and key after ``change`` (an ALTER; CREATE gives its own)."""
    if change.kind == "CREATE":
        return list(change.columns), list(change.key)
    out = [c for c in columns if c.name not in change.drop]
    names = [c.name for c in out]
    for added in change.add:
        if added.name in names:  # described from a catalog that has it already
            out[names.index(added.name)] = added
        else:
            out.append(added)
            names.append(added.name)
    for modified in change.modify:
        if modified.name in names:
            at = names.index(modified.name)
            # MODIFY c NOT NULL (or DEFAULT v) changes the nullability (the default) only
            kept = modified.default if modified.default is not None else out[at].default
            out[at] = (
                replace(modified, default=kept)
                if modified.data_type
                else replace(out[at], nullable=modified.nullable, default=kept)
            )
    renamed = dict(change.rename)
    out = [replace(c, name=renamed.get(c.name, c.name)) for c in out]
    new_key = [renamed.get(k, k) for k in key if k not in change.drop]
    return out, new_key


def column_ddl(column: OracleColumn) -> str:
    """A column's type as DDL text (the inverse of the parser's type reading)."""
    kind = column.data_type
    if kind in ("NUMBER", "FLOAT") and column.precision is not None:
        kind += f"({column.precision}" + (
            f",{column.scale})" if column.scale is not None and kind == "NUMBER" else ")"
        )
    elif column.length is not None:
        kind += f"({column.length})"
    return kind + ("" if column.nullable else " NOT NULL")
