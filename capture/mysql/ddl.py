"""MySQL/MariaDB DDL parsing and the in-memory schema state the binlog agent keeps.

Like Debezium, the agent never asks the live catalog what a table looks like while streaming: a
row must be decoded with the definition current when it was written, and the catalog only knows
the newest one. Instead it parses every DDL statement the binlog carries (``QueryEvent`` text)
and, at snapshot time, the ``SHOW CREATE TABLE`` output, and keeps the resulting
:class:`~capture.mysql.schema.TableDef` of every table in a :class:`SchemaState`.

The parser is a hand-written recursive-descent parser over a small tokenizer. It understands the
statements that change a table's columns or keys (``CREATE``/``ALTER``/``DROP``/``RENAME``/
``TRUNCATE TABLE``, ``CREATE``/``DROP INDEX``, ``DROP DATABASE``) in the dialects of MySQL 5.7/8
and MariaDB 10.x, skips the clauses that do not matter to row decoding (defaults, comments,
partitioning, engine options, ...) and ignores every other statement. Where the server applies
implicit rules that change what ``SHOW CREATE TABLE`` shows (``SERIAL``, ``CHARACTER SET binary``,
names of unnamed keys, the order of unique keys), the state follows the server, so a state built
from a DDL history equals one built from ``SHOW CREATE TABLE`` of the same tables.

A ``CREATE`` or ``ALTER TABLE`` that cannot be understood raises :class:`DdlParseError` instead of
producing a definition that may be wrong.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from capture.mysql.schema import ColumnDef, TableDef
from pipeline.errors import CaptureError, Terminal

__all__ = [
    "DdlParseError",
    "SchemaChange",
    "SchemaState",
    "Token",
    "split_statements",
    "statement_kind",
    "tokenize",
]


class DdlParseError(CaptureError, Terminal):
    """A DDL statement could not be parsed or does not fit the known schema.

    Attributes:
        statement: The statement (whole text).
        reason: What was expected where.
    """

    def __init__(self, statement: str, reason: str) -> None:
        self.statement = statement
        self.reason = reason
        snippet = " ".join(statement.split())
        if len(snippet) > 200:
            snippet = snippet[:200] + "..."
        super().__init__(f"cannot apply DDL statement {snippet!r}: {reason}")


# --------------------------------------------------------------------------------------------
# Tokenizer
# --------------------------------------------------------------------------------------------


class Token(NamedTuple):
    """One lexical token.

    Attributes:
        kind: ``w`` bare word, ``q`` backtick identifier, ``s``/``d`` single-/double-quoted
            string, ``n`` number, ``x`` hex or bit literal, ``o`` punctuation or operator.
        text: The text; identifiers and strings unquoted and unescaped.
        pos: Offset of the token in the SQL text.
        upper: ``text.upper()`` for bare words (keyword matching), else ``""``.
    """

    kind: str
    text: str
    pos: int
    upper: str


_TOKEN_RE = re.compile(
    r"""
      (?P<ws>\s+)
    | (?P<xopen>/\*M?!\d{0,6})
    | (?P<comment>/\*.*?(?:\*/|\Z)|--(?=\s|\Z)[^\n]*|\#[^\n]*)
    | (?P<q>`(?:[^`]|``)*`)
    | (?P<s>'(?:[^'\\]|\\.|'')*')
    | (?P<d>"(?:[^"\\]|\\.|"")*")
    | (?P<x>[xX]'[0-9a-fA-F]*'|[bB]'[01]*'|0x[0-9a-fA-F]+(?![\w$])|0b[01]+(?![\w$]))
    | (?P<n>(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?(?![\w$]))
    | (?P<w>[\w$\u0080-\uffff]+)
    | (?P<o>\*/|<=>|<=|>=|<>|!=|:=|\|\||&&|<<|>>|->>|->|@@|.)
    """,
    re.S | re.X,
)
_ESCAPES = {"0": "\0", "n": "\n", "r": "\r", "t": "\t", "b": "\b", "Z": "\x1a"}
_ESCAPE_RE = {"'": re.compile(r"\\(.)|''", re.S), '"': re.compile(r'\\(.)|""', re.S)}


def _unescape_match(m: re.Match[str]) -> str:
    char = m.group(1)
    if char is None:
        return m.group(0)[0]  # a doubled quote
    if char in "%_":
        return "\\" + char  # LIKE wildcards keep their backslash, as in MySQL
    return _ESCAPES.get(char, char)


def _unescape(body: str, quote: str) -> str:
    if "\\" not in body and quote not in body:
        return body
    return _ESCAPE_RE[quote].sub(_unescape_match, body)


def tokenize(sql: str) -> Iterator[Token]:
    """Yield the tokens of ``sql``; comments dropped, executable comments' content kept.

    ``/*! ... */``, ``/*!50001 ... */``, ``/*M! ... */`` and ``/*M!100100 ... */`` are run by the
    server (versions are not compared: the server that wrote the binlog ran them), so their
    content is tokenized as part of the statement and only their markers are dropped.
    """
    in_executable = False
    for m in _TOKEN_RE.finditer(sql):
        kind = m.lastgroup
        if kind == "ws" or kind == "comment":
            continue
        text = m.group()
        if kind == "xopen":
            in_executable = True
            continue
        if kind == "o":
            if text == "*/" and in_executable:
                in_executable = False
                continue
            yield Token("o", text, m.start(), "")
        elif kind == "w":
            yield Token("w", text, m.start(), text.upper())
        elif kind == "q":
            yield Token("q", text[1:-1].replace("``", "`"), m.start(), "")
        elif kind == "s" or kind == "d":
            yield Token(kind, _unescape(text[1:-1], text[0]), m.start(), "")
        else:
            yield Token(str(kind), text, m.start(), "")


# Statements whose body may hold ';' (stored programs): the rest of the text is their body.
_COMPOUND_OBJECTS = frozenset({"PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"})


def _is_compound(tokens: list[Token]) -> bool:
    head = [t.upper for t in tokens[:16]]
    if head[:2] == ["BEGIN", "NOT"]:
        return True  # MariaDB's anonymous block BEGIN NOT ATOMIC ... END
    return head[:1] == ["CREATE"] and _object_word(head[1:]) in _COMPOUND_OBJECTS


def split_statements(sql: str) -> list[list[Token]]:
    """Tokenize ``sql`` and split it into statements at ``;`` (empty statements dropped).

    A stored-program definition (``CREATE PROCEDURE`` / ``FUNCTION`` / ``TRIGGER`` / ``EVENT``,
    ``BEGIN NOT ATOMIC``) takes the rest of the text: the ``;`` in its body do not end it, and
    the statements in the body must not be applied as if they had run.
    """
    statements: list[list[Token]] = []
    current: list[Token] = []
    for token in tokenize(sql):
        if token.kind == "o" and token.text == ";" and not (current and _is_compound(current)):
            if current:
                statements.append(current)
            current = []
        else:
            current.append(token)
    if current:
        statements.append(current)
    return statements


# --------------------------------------------------------------------------------------------
# Statement kinds
# --------------------------------------------------------------------------------------------

_DDL_OBJECTS = frozenset(
    {
        "TABLE",
        "TABLES",
        "DATABASE",
        "SCHEMA",
        "INDEX",
        "VIEW",
        "TRIGGER",
        "PROCEDURE",
        "FUNCTION",
        "EVENT",
        "SEQUENCE",
        "PACKAGE",
        "TABLESPACE",
        "LOGFILE",
        "SERVER",
        "SPATIAL",  # CREATE SPATIAL REFERENCE SYSTEM (MySQL 8)
    }
)
_NON_DDL_OBJECTS = frozenset({"USER", "ROLE", "RESOURCE"})
_DML = frozenset({"INSERT", "UPDATE", "DELETE", "REPLACE", "LOAD"})


def _object_word(words: list[str]) -> str:
    """What a CREATE/ALTER/DROP/RENAME is about: its first object keyword, else ``""``.

    The words before it are modifiers (``OR REPLACE``, ``TEMPORARY``, ``UNIQUE``,
    ``DEFINER = user``, ``ALGORITHM = x``, ``SQL SECURITY x``, ...), never object keywords.
    """
    for word in words:
        if word in _DDL_OBJECTS or word in _NON_DDL_OBJECTS:
            return word
    return ""


def statement_kind(sql: str) -> str:
    """Classify a binlog ``QueryEvent`` text.

    Args:
        sql: The statement text (comments and executable comments allowed).

    Returns:
        ``begin``, ``commit``, ``rollback``, ``savepoint`` (``SAVEPOINT``, ``ROLLBACK TO``,
        ``RELEASE SAVEPOINT``), ``ddl`` (``CREATE``/``ALTER``/``DROP``/``RENAME`` of tables,
        databases, indexes, views, stored programs; ``TRUNCATE``), ``dml`` (``INSERT``,
        ``UPDATE``, ``DELETE``, ``REPLACE``, ``LOAD``: statement-format binlogs only) or
        ``other`` (users, grants, ``SET``, ``FLUSH``, ``ANALYZE``, anything else).
    """
    # Only the first words matter: never tokenize a whole statement-format INSERT.
    words = [t.upper for t in itertools.islice(tokenize(sql), 24)]
    if not words:
        return "other"
    first = words[0]
    second = words[1] if len(words) > 1 else ""
    if first == "BEGIN":
        return "other" if second == "NOT" else "begin"
    if first == "START":
        return "begin" if second == "TRANSACTION" else "other"
    if first == "COMMIT":
        return "commit"
    if first == "ROLLBACK":
        rest = words[2:] if second == "WORK" else words[1:]
        return "savepoint" if rest[:1] == ["TO"] else "rollback"
    if first == "SAVEPOINT" or (first == "RELEASE" and second == "SAVEPOINT"):
        return "savepoint"
    if first == "XA":
        return {"START": "begin", "BEGIN": "begin", "COMMIT": "commit", "ROLLBACK": "rollback"}.get(
            second, "other"
        )
    if first in _DML:
        return "dml"
    if first == "TRUNCATE":
        return "ddl"
    if first in ("CREATE", "ALTER", "DROP", "RENAME"):
        return "ddl" if _object_word(words[1:]) in _DDL_OBJECTS else "other"
    return "other"


# --------------------------------------------------------------------------------------------
# Parsed pieces
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SchemaChange:
    """What one DDL statement did to one table.

    Attributes:
        kind: ``CREATE``, ``ALTER``, ``DROP`` or ``TRUNCATE``.
        database: Database of the table (after the change, for a rename).
        table: Table name (after the change, for a rename).
        previous: ``(database, table)`` before a rename (Debezium's ``"old,new"`` id), else None.
        definition: The table after the change; None for ``DROP``/``TRUNCATE`` and when the table
            was not known (it existed before the history began).
    """

    kind: str
    database: str
    table: str
    previous: tuple[str, str] | None = None
    definition: TableDef | None = None


@dataclass(frozen=True, slots=True)
class _Index:
    """An index as the state tracks it (TableDef only keeps the unique ones)."""

    name: str
    columns: tuple[str, ...]
    unique: bool
    prefix: bool = False  # some key part is a prefix (col(10)): the server sorts those later
    functional: bool = False  # some key part is an expression: not usable as a row key

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "columns": list(self.columns),
            "unique": self.unique,
            "prefix": self.prefix,
            "functional": self.functional,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> _Index:
        return cls(
            str(data["name"]),
            tuple(data["columns"]),
            bool(data["unique"]),
            bool(data.get("prefix", False)),
            bool(data.get("functional", False)),
        )


@dataclass(slots=True)
class _ColumnSpec:
    """A parsed column definition plus its inline key attributes."""

    column: ColumnDef
    primary: bool = False
    unique: bool = False
    versioning: str | None = None  # "row" for AS ROW START|END, "with" for WITH SYSTEM VERSIONING


@dataclass(slots=True)
class _KeySpec:
    """A parsed PRIMARY KEY / UNIQUE / KEY definition (name None: server picks one)."""

    kind: str  # "primary", "unique" or "index"
    name: str | None
    parts: tuple[str | None, ...]  # None for an expression key part
    prefix: bool
    if_not_exists: bool = False


# --------------------------------------------------------------------------------------------
# Type rules
# --------------------------------------------------------------------------------------------

_INTEGER_TYPES = {
    "TINYINT": "tinyint",
    "INT1": "tinyint",
    "SMALLINT": "smallint",
    "INT2": "smallint",
    "MEDIUMINT": "mediumint",
    "MIDDLEINT": "mediumint",
    "INT3": "mediumint",
    "INT": "int",
    "INTEGER": "int",
    "INT4": "int",
    "BIGINT": "bigint",
    "INT8": "bigint",
}
_DECIMAL_TYPES = frozenset({"DECIMAL", "DEC", "NUMERIC", "FIXED"})
_FLOAT_TYPES = {"FLOAT": "float", "FLOAT4": "float", "DOUBLE": "double", "FLOAT8": "double"}
_TEMPORAL_FSP = frozenset({"TIME", "DATETIME", "TIMESTAMP"})
_PLAIN_TYPES = {
    "DATE": "date",
    "TINYTEXT": "tinytext",
    "MEDIUMTEXT": "mediumtext",
    "LONGTEXT": "longtext",
    "TINYBLOB": "tinyblob",
    "MEDIUMBLOB": "mediumblob",
    "LONGBLOB": "longblob",
    "GEOMETRY": "geometry",
    "POINT": "point",
    "LINESTRING": "linestring",
    "POLYGON": "polygon",
    "MULTIPOINT": "multipoint",
    "MULTILINESTRING": "multilinestring",
    "MULTIPOLYGON": "multipolygon",
    "GEOMETRYCOLLECTION": "geometrycollection",
    "GEOMCOLLECTION": "geometrycollection",
    "INET6": "inet6",
    "INET4": "inet4",
    "UUID": "uuid",
}
_LENGTH_TYPES = {
    "BIT": "bit",
    "CHAR": "char",
    "CHARACTER": "char",
    "VARCHAR": "varchar",
    "VARCHARACTER": "varchar",
    "NCHAR": "char",
    "NVARCHAR": "varchar",
    "BINARY": "binary",
    "VARBINARY": "varbinary",
    "TEXT": "text",
    "BLOB": "blob",
    "YEAR": "year",
    "VECTOR": "vector",  # MariaDB 11.7 / MySQL 9
}
_TEXT_TYPES = frozenset(
    {"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set"}
)
# CHARACTER SET binary turns a character type into the binary type (MySQL's own rule).
_BINARY_EQUIVALENT = {
    "char": "binary",
    "varchar": "varbinary",
    "tinytext": "tinyblob",
    "text": "blob",
    "mediumtext": "mediumblob",
    "longtext": "longblob",
}
_NATIONAL_CHARSET = "utf8mb3"
_IMPLICIT_SYSTEM_COLUMNS = [
    ColumnDef("row_start", "timestamp", length=6, nullable=False, generated=True),
    ColumnDef("row_end", "timestamp", length=6, nullable=False, generated=True),
]
# Largest size in bytes of each text type, smallest first.
_TEXT_SIZES = (
    ("tinytext", 255),
    ("text", 65_535),
    ("mediumtext", 16_777_215),
    ("longtext", 4_294_967_295),
)
# Most bytes per character of multi-byte charsets (and the single-byte ones below): what
# CONVERT TO needs to pick a text type. Charsets in neither set leave text types unchanged.
_MAX_BYTES_PER_CHAR = {
    "utf8mb4": 4,
    "utf8mb3": 3,
    "utf16": 4,
    "utf16le": 4,
    "utf32": 4,
    "ucs2": 2,
    "gb18030": 4,
    "ujis": 3,
    "eucjpms": 3,
    "big5": 2,
    "gbk": 2,
    "gb2312": 2,
    "sjis": 2,
    "cp932": 2,
    "euckr": 2,
}
_SINGLE_BYTE = frozenset(
    {
        "latin1",
        "latin2",
        "latin5",
        "latin7",
        "ascii",
        "binary",
        "cp1250",
        "cp1251",
        "cp1256",
        "cp1257",
        "cp850",
        "cp852",
        "cp866",
        "koi8r",
        "koi8u",
        "greek",
        "hebrew",
        "tis620",
        "armscii8",
        "dec8",
        "hp8",
        "swe7",
        "keybcs2",
        "macce",
        "macroman",
        "geostd8",
    }  # fmt: skip
)


def _bytes_per_char(charset: str | None) -> int | None:
    if charset is None:
        return None
    if charset in _SINGLE_BYTE:
        return 1
    return _MAX_BYTES_PER_CHAR.get(charset)


def _converted_text_type(type_name: str, old: str | None, new: str) -> str:
    """The text type a column of ``type_name`` in charset ``old`` has after conversion."""
    sizes = dict(_TEXT_SIZES)
    old_width, new_width = _bytes_per_char(old), _bytes_per_char(new)
    if type_name not in sizes or old_width is None or new_width is None:
        return type_name
    needed = sizes[type_name] // old_width * new_width
    for name, size in _TEXT_SIZES:
        if size >= needed:
            return name
    return "longtext"


def _charset_name(name: str) -> str:
    """Canonical charset name (``utf8`` is ``utf8mb3`` on MariaDB 10.6+ and MySQL 8)."""
    lowered = name.lower()
    return "utf8mb3" if lowered == "utf8" else lowered


def _collation_charset(collation: str) -> str:
    """The charset a collation belongs to (its name's first part)."""
    lowered = collation.lower()
    return "binary" if lowered == "binary" else _charset_name(lowered.split("_", 1)[0])


# --------------------------------------------------------------------------------------------
# Parser
# --------------------------------------------------------------------------------------------

_END = Token("o", "", -1, "")
_KEY_WORDS = frozenset({"PRIMARY", "UNIQUE", "KEY", "INDEX", "FULLTEXT", "SPATIAL", "FOREIGN"})
_CONSTRAINT_HEADS = frozenset({"PRIMARY", "UNIQUE", "FOREIGN", "CHECK"})
_BINARY_OPERATORS = frozenset(
    {
        "+",
        "-",
        "*",
        "/",
        "%",
        "||",
        "&&",
        "|",
        "&",
        "^",
        "<<",
        ">>",
        "=",
        "<",
        ">",
        "<=",
        ">=",
        "<>",
        "!=",
        "<=>",
        "->",
        "->>",
    }  # fmt: skip
)
_BINARY_OPERATOR_WORDS = frozenset({"DIV", "MOD", "AND", "OR", "XOR", "IS", "LIKE", "IN"})


class _Cursor:
    """Position in one statement's tokens, with the helpers the grammar functions use."""

    __slots__ = ("tokens", "i", "sql", "explicit_defaults_for_timestamp", "ts_ms")

    def __init__(
        self,
        tokens: list[Token],
        sql: str,
        *,
        explicit_defaults_for_timestamp: bool = True,
        ts_ms: int | None = None,
    ) -> None:
        self.tokens = tokens
        self.i = 0
        self.sql = sql
        self.explicit_defaults_for_timestamp = explicit_defaults_for_timestamp
        self.ts_ms = ts_ms

    def peek(self, ahead: int = 0) -> Token:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else _END

    def word(self, ahead: int = 0) -> str:
        """Upper-cased bare word at ``ahead`` (empty for anything else)."""
        return self.peek(ahead).upper

    def at_end(self) -> bool:
        return self.i >= len(self.tokens)

    def at_op(self, op: str, ahead: int = 0) -> bool:
        token = self.peek(ahead)
        return token.kind == "o" and token.text == op

    def next(self) -> Token:
        token = self.peek()
        self.i += 1
        return token

    def accept(self, *words: str) -> bool:
        """Consume the words if they come next, in order."""
        for k, word in enumerate(words):
            if self.word(k) != word:
                return False
        self.i += len(words)
        return True

    def accept_op(self, op: str) -> bool:
        if self.at_op(op):
            self.i += 1
            return True
        return False

    def expect(self, *words: str) -> None:
        if not self.accept(*words):
            raise self.error(" ".join(words))

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.error(f"'{op}'")

    def error(self, expected: str) -> DdlParseError:
        token = self.peek()
        if token is _END:
            where = "the end of the statement"
        else:
            shown = token.text if token.kind in ("w", "o", "n", "x") else repr(token.text)
            where = f"{shown!s} (offset {token.pos})"
        return DdlParseError(self.sql, f"expected {expected} at {where}")

    def identifier(self, what: str = "an identifier") -> str:
        token = self.peek()
        # Double-quoted strings are identifiers under ANSI_QUOTES; nowhere else can they stand
        # where an identifier is expected, so accepting them there is safe.
        if token.kind in ("w", "q", "d") and token.text:
            self.i += 1
            return token.text
        raise self.error(what)

    def at_identifier(self) -> bool:
        return self.peek().kind in ("w", "q", "d")

    def qualified(self, default_database: str | None) -> tuple[str, str]:
        """``[db.]name``; the session database for an unqualified name."""
        first = self.identifier("a table name")
        if self.at_op(".") and self.peek(1).kind in ("w", "q", "d"):
            self.i += 1
            return first, self.identifier("a table name")
        if default_database is None:
            raise DdlParseError(
                self.sql, f"table {first} is not qualified and no database is in use"
            )
        return default_database, first

    def skip_balanced(self) -> None:
        """Skip a parenthesised group starting at the current '('."""
        depth = 0
        while not self.at_end():
            token = self.next()
            if token.kind == "o":
                if token.text == "(":
                    depth += 1
                elif token.text == ")":
                    depth -= 1
                    if depth <= 0:
                        return
        if depth > 0:
            raise self.error("')'")

    def skip_to_separator(self) -> None:
        """Skip to the next ',' or closing ')' at depth 0 (not consumed)."""
        while not self.at_end():
            if self.at_op(",") or self.at_op(")"):
                return
            if self.at_op("("):
                self.skip_balanced()
            else:
                self.i += 1

    def literal(self) -> str:
        """A name or value: word, identifier, string or number."""
        token = self.peek()
        if token.kind in ("w", "q", "s", "d", "n", "x"):
            self.i += 1
            return token.text
        raise self.error("a value")

    def integer(self) -> int:
        token = self.peek()
        if token.kind == "n" and token.text.isdigit():
            self.i += 1
            return int(token.text)
        raise self.error("an integer")

    def expression_text(self) -> str:
        """Skip a scalar expression and return its text as written (a DEFAULT value)."""
        start = self.peek().pos
        self.skip_expression()
        end = self.peek().pos if not self.at_end() else len(self.sql)
        return self.sql[start:end].strip()

    def skip_expression(self) -> None:
        """Skip a scalar expression (a DEFAULT or ON UPDATE value)."""
        while True:
            self._skip_operand()
            token = self.peek()
            if (token.kind == "o" and token.text in _BINARY_OPERATORS) or (
                token.upper in _BINARY_OPERATOR_WORDS
            ):
                self.i += 1
                self.accept("NOT")  # IS NOT, NOT LIKE, ...
                continue
            return

    def _skip_operand(self) -> None:
        while self.at_op("-") or self.at_op("+") or self.at_op("~") or self.at_op("!"):
            self.i += 1
        token = self.peek()
        if token.kind == "o" and token.text == "(":
            self.skip_balanced()
            return
        if token.kind in ("s", "d"):
            while self.peek().kind in ("s", "d"):  # adjacent literals concatenate
                self.i += 1
            return
        if token.kind in ("n", "x", "q"):
            self.i += 1
            return
        if token.kind == "w":
            if self.accept("NEXT", "VALUE", "FOR") or self.accept("PREVIOUS", "VALUE", "FOR"):
                self.identifier("a sequence name")  # MariaDB sequences
                if self.accept_op("."):
                    self.identifier("a sequence name")
                return
            self.i += 1
            if self.at_op("("):
                self.skip_balanced()
            elif self.peek().kind in ("s", "d"):  # _utf8mb4'x', DATE '2020-01-01', N'x'
                self.i += 1
            return
        raise self.error("an expression")


def _parse_type(cur: _Cursor) -> tuple[dict[str, Any], bool]:
    """Parse a data type; returns ColumnDef fields and whether it was ``SERIAL``."""
    word = cur.word()
    if not word:
        raise cur.error("a data type")
    cur.i += 1
    fields: dict[str, Any] = {}
    serial = False
    if word in _INTEGER_TYPES:
        fields["type_name"] = _INTEGER_TYPES[word]
        fields["length"] = _optional_length(cur)
    elif word in ("BOOL", "BOOLEAN"):
        fields["type_name"] = "tinyint"
        fields["length"] = 1
    elif word == "SERIAL":
        fields.update(type_name="bigint", unsigned=True)
        serial = True
    elif word in _DECIMAL_TYPES:
        fields["type_name"] = "decimal"
        fields["length"], fields["scale"] = _optional_precision(cur)
    elif word in _FLOAT_TYPES or word == "REAL":
        if word == "DOUBLE":
            cur.accept("PRECISION")
        fields["type_name"] = _FLOAT_TYPES.get(word, "double")
        fields["length"], fields["scale"] = _optional_precision(cur)
    elif word in _TEMPORAL_FSP:
        fields["type_name"] = word.lower()
        fields["length"] = _optional_length(cur)
    elif word == "NATIONAL":
        inner = cur.word()
        if inner not in ("CHAR", "CHARACTER", "VARCHAR", "VARCHARACTER"):
            raise cur.error("CHAR or VARCHAR after NATIONAL")
        cur.i += 1
        varying = inner.startswith("VARCHAR") or cur.accept("VARYING")
        fields.update(type_name="varchar" if varying else "char", charset=_NATIONAL_CHARSET)
        fields["length"] = _optional_length(cur)
    elif word == "LONG":
        if cur.accept("VARBINARY"):
            fields["type_name"] = "mediumblob"
        else:
            cur.accept("VARCHAR") or cur.accept("VARCHARACTER")
            fields["type_name"] = "mediumtext"
    elif word in ("ENUM", "SET"):
        fields["type_name"] = word.lower()
        fields["values"] = _value_list(cur)
    elif word == "JSON":
        # JSON text is utf8mb4 on both servers (MariaDB's JSON is LONGTEXT CHARACTER SET
        # utf8mb4 COLLATE utf8mb4_bin, which SHOW CREATE TABLE then shows explicitly).
        fields.update(type_name="json", charset="utf8mb4")
    elif word in _PLAIN_TYPES:
        fields["type_name"] = _PLAIN_TYPES[word]
    elif word in _LENGTH_TYPES:
        name = _LENGTH_TYPES[word]
        if word in ("CHAR", "CHARACTER", "NCHAR") and cur.accept("VARYING"):
            name = "varchar"
        elif word == "NCHAR" and (cur.accept("VARCHAR") or cur.accept("VARCHARACTER")):
            name = "varchar"
        if word in ("NCHAR", "NVARCHAR"):
            fields["charset"] = _NATIONAL_CHARSET
        fields["type_name"] = name
        fields["length"] = _optional_length(cur)
        if name == "char" and cur.accept("BYTE"):
            fields["type_name"] = "binary"
    else:
        cur.i -= 1
        raise cur.error("a data type")
    _numeric_attributes(cur, fields)
    return fields, serial


def _optional_length(cur: _Cursor) -> int | None:
    if not cur.accept_op("("):
        return None
    length = cur.integer()
    cur.expect_op(")")
    return length


def _optional_precision(cur: _Cursor) -> tuple[int | None, int | None]:
    if not cur.accept_op("("):
        return None, None
    length = cur.integer()
    scale = cur.integer() if cur.accept_op(",") else None
    cur.expect_op(")")
    return length, scale


def _value_list(cur: _Cursor) -> tuple[str, ...]:
    cur.expect_op("(")
    values: list[str] = []
    while True:
        token = cur.peek()
        if token.kind not in ("s", "d", "x"):
            raise cur.error("a quoted ENUM/SET value")
        cur.i += 1
        text = token.text
        while cur.peek().kind in ("s", "d"):  # adjacent strings concatenate
            text += cur.next().text
        values.append(text)
        if not cur.accept_op(","):
            break
    cur.expect_op(")")
    return tuple(values)


def _numeric_attributes(cur: _Cursor, fields: dict[str, Any]) -> None:
    while True:
        if cur.accept("UNSIGNED") or cur.accept("ZEROFILL"):
            fields["unsigned"] = True
        elif not cur.accept("SIGNED"):
            return


def _is_json_check(cur: _Cursor, column: str) -> bool:
    """Whether the '(' group at the cursor is ``(json_valid(<column>))``."""
    t = cur.tokens[cur.i : cur.i + 6]
    return (
        len(t) == 6
        and t[0].text == "("
        and t[1].upper == "JSON_VALID"
        and t[2].text == "("
        and t[3].kind in ("w", "q")
        and t[3].text.lower() == column.lower()
        and t[4].text == ")"
        and t[5].text == ")"
    )


def _skip_references(cur: _Cursor) -> None:
    """Skip ``REFERENCES tbl (cols) [MATCH ..] [ON DELETE|UPDATE action]...`` (after the word)."""
    cur.identifier("a table name")
    if cur.accept_op("."):
        cur.identifier("a table name")
    if cur.at_op("("):
        cur.skip_balanced()
    while True:
        if cur.accept("MATCH"):
            cur.i += 1
        elif cur.accept("ON"):
            if not (cur.accept("DELETE") or cur.accept("UPDATE")):
                raise cur.error("DELETE or UPDATE")
            if not (
                cur.accept("RESTRICT")
                or cur.accept("CASCADE")
                or cur.accept("SET", "NULL")
                or cur.accept("SET", "DEFAULT")
                or cur.accept("NO", "ACTION")
            ):
                raise cur.error("a referential action")
        else:
            return


def _parse_column(cur: _Cursor) -> _ColumnSpec:
    """Parse ``name type attributes...`` up to the next ',' or ')' at depth 0."""
    name = cur.identifier("a column name")
    fields, serial = _parse_type(cur)
    # SERIAL is BIGINT UNSIGNED NOT NULL AUTO_INCREMENT UNIQUE.
    not_null = auto_increment = unique = serial
    primary = generated = json_check = explicit_null = False
    versioning: str | None = None
    default: str | None = None
    charset: str | None = fields.get("charset")
    collation_charset: str | None = None
    while not (cur.at_end() or cur.at_op(",") or cur.at_op(")")):
        word = cur.word()
        if word in ("FIRST", "AFTER"):
            break  # ALTER TABLE's column position follows the definition
        if cur.accept("NOT", "NULL"):
            not_null = True
        elif cur.accept("NULL"):
            not_null = False
            explicit_null = True
        elif cur.accept("DEFAULT"):
            default = cur.expression_text()
        elif cur.accept("AUTO_INCREMENT"):
            auto_increment = True
        elif cur.accept("PRIMARY"):
            cur.accept("KEY")
            primary = True
        elif cur.accept("KEY"):
            primary = True  # in a column definition KEY alone means PRIMARY KEY
        elif cur.accept("UNIQUE"):
            cur.accept("KEY") or cur.accept("INDEX")
            unique = True
        elif cur.accept("COMMENT"):
            cur.literal()
        elif cur.accept("COLLATE"):
            cur.accept_op("=")
            collation_charset = _collation_charset(cur.literal())
        elif cur.accept("CHARACTER", "SET") or cur.accept("CHARSET") or cur.accept("CHAR", "SET"):
            cur.accept_op("=")
            charset = _charset_name(cur.literal())
        elif word in ("BINARY", "BYTE"):
            cur.i += 1  # a _bin collation of the column's charset, not the binary charset
        elif cur.accept("ASCII"):
            charset = "latin1"
        elif cur.accept("UNICODE"):
            charset = "ucs2"
        elif word in ("UNSIGNED", "ZEROFILL", "SIGNED"):
            _numeric_attributes(cur, fields)
        elif cur.accept("ON", "UPDATE"):
            cur.skip_expression()
        elif cur.accept("GENERATED", "ALWAYS", "AS") or cur.accept("AS"):
            generated = True
            if cur.accept("ROW"):  # MariaDB system versioning: AS ROW START|END
                cur.i += 1
                versioning = "row"
                not_null = True  # the server keeps them NOT NULL
            elif cur.accept("IDENTITY"):
                pass
            else:
                if not cur.at_op("("):
                    raise cur.error("'(' of a generated column expression")
                cur.skip_balanced()
        elif word in ("VIRTUAL", "STORED", "PERSISTENT", "VISIBLE", "INVISIBLE", "COMPRESSED"):
            cur.i += 1
            if word == "COMPRESSED" and cur.accept_op("="):
                cur.literal()
        elif cur.accept("CONSTRAINT"):
            if cur.word() != "CHECK":
                cur.identifier("a constraint name")
        elif cur.accept("CHECK"):
            if not cur.at_op("("):
                raise cur.error("'(' after CHECK")
            json_check = json_check or _is_json_check(cur, name)
            cur.skip_balanced()
            cur.accept("NOT", "ENFORCED") or cur.accept("ENFORCED")
        elif cur.accept("COLUMN_FORMAT") or cur.accept("STORAGE") or cur.accept("SRID"):
            cur.literal()
        elif word in ("REF_SYSTEM_ID", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE"):
            cur.i += 1
            cur.accept_op("=")
            cur.literal()
        elif cur.accept("REFERENCES"):
            _skip_references(cur)
        elif cur.accept("SERIAL", "DEFAULT", "VALUE"):
            not_null = auto_increment = unique = True
        elif cur.accept("WITH", "SYSTEM", "VERSIONING"):
            versioning = versioning or "with"  # versions the whole table (MariaDB)
        elif cur.accept("WITHOUT", "SYSTEM", "VERSIONING"):
            pass
        else:
            cur.skip_to_separator()  # an attribute this parser does not know: not type-relevant
    type_name: str = fields["type_name"]
    if type_name == "timestamp" and not explicit_null and not cur.explicit_defaults_for_timestamp:
        not_null = True  # explicit_defaults_for_timestamp=OFF: TIMESTAMP is NOT NULL unless NULL
    if charset is None:
        charset = collation_charset
    if charset == "binary" and type_name in _BINARY_EQUIVALENT:
        type_name = _BINARY_EQUIVALENT[type_name]
    if json_check and type_name == "longtext":
        type_name = "json"
    if type_name not in _TEXT_TYPES and type_name != "json":
        charset = None  # binary, numeric and temporal columns have no character set
    column = ColumnDef(
        name=name,
        type_name=type_name,
        length=fields.get("length"),
        scale=fields.get("scale"),
        values=fields.get("values", ()),
        unsigned=bool(fields.get("unsigned", False)),
        charset=charset,
        nullable=not (not_null or primary),
        auto_increment=auto_increment,
        generated=generated,
        default=default,
    )
    return _ColumnSpec(column, primary, unique, versioning)


def _added(spec: _ColumnSpec, cur: _Cursor) -> _ColumnSpec:
    """``spec`` of a column ALTER TABLE ... ADD adds, marked with the statement's time."""
    return replace(spec, column=replace(spec.column, added_ms=cur.ts_ms or 0))


def _parse_key_parts(cur: _Cursor) -> tuple[tuple[str | None, ...], bool]:
    """``(col[(len)] [ASC|DESC], (expr), ...)``: column names (None for expressions), prefix."""
    cur.expect_op("(")
    parts: list[str | None] = []
    prefix = False
    while True:
        if cur.at_op("("):
            cur.skip_balanced()  # a functional key part (MySQL 8)
            parts.append(None)
        else:
            parts.append(cur.identifier("a key column"))
            if cur.at_op("("):
                prefix = True
                cur.skip_balanced()
        cur.accept("ASC") or cur.accept("DESC")
        if not cur.accept_op(","):
            break
    cur.expect_op(")")
    return tuple(parts), prefix


def _parse_key(cur: _Cursor, constraint: str | None) -> _KeySpec | None:
    """A key definition in CREATE TABLE / ALTER ADD; None for ones that are not tracked."""
    if cur.accept("PRIMARY"):
        cur.expect("KEY")
        kind = "primary"
    elif cur.accept("UNIQUE"):
        cur.accept("KEY") or cur.accept("INDEX")
        kind = "unique"
    elif cur.accept("FOREIGN"):
        cur.expect("KEY")
        cur.skip_to_separator()  # FOREIGN KEY [name] (cols) REFERENCES ...: not tracked
        return None
    elif cur.accept("CHECK"):
        cur.skip_to_separator()
        return None
    else:
        if cur.word() in ("FULLTEXT", "SPATIAL"):
            cur.i += 1
            cur.accept("KEY") or cur.accept("INDEX")
        elif not (cur.accept("KEY") or cur.accept("INDEX")):
            raise cur.error("PRIMARY KEY, UNIQUE, KEY or INDEX")
        kind = "index"
    if_not_exists = cur.accept("IF", "NOT", "EXISTS")
    name: str | None = None
    if not cur.at_op("(") and cur.word() not in ("USING", "TYPE"):
        name = cur.identifier("an index name or '('")
    if cur.accept("USING") or cur.accept("TYPE"):
        cur.literal()
    parts, prefix = _parse_key_parts(cur)
    cur.skip_to_separator()  # index options: USING, COMMENT, KEY_BLOCK_SIZE, VISIBLE, ...
    if kind == "primary":
        name = "PRIMARY"
    elif name is None:
        name = constraint
    return _KeySpec(kind, name, parts, prefix, if_not_exists)


def _parse_create_definition(cur: _Cursor) -> _ColumnSpec | _KeySpec | None:
    """One element of a CREATE TABLE body (or ``ALTER ... ADD``)."""
    token = cur.peek()
    if token.kind == "w":
        word = token.upper
        if word == "CONSTRAINT":
            cur.i += 1
            if_not_exists = cur.accept("IF", "NOT", "EXISTS")  # MariaDB
            constraint = None
            if not (cur.word() in _CONSTRAINT_HEADS and cur.peek().kind == "w"):
                constraint = cur.identifier("a constraint name")
            if cur.word() not in _CONSTRAINT_HEADS:
                raise cur.error("PRIMARY KEY, UNIQUE, FOREIGN KEY or CHECK")
            key = _parse_key(cur, constraint)
            if key is not None:
                key.if_not_exists = key.if_not_exists or if_not_exists
            return key
        if word in _KEY_WORDS or word == "CHECK":
            return _parse_key(cur, None)
        if word == "PERIOD" and cur.word(1) == "FOR":
            cur.skip_to_separator()  # MariaDB application-time period: no column of its own
            return None
    return _parse_column(cur)


# --------------------------------------------------------------------------------------------
# Table builder
# --------------------------------------------------------------------------------------------


class _Builder:
    """A mutable copy of one table that statements are applied to.

    For a table that is not known (it existed before the history began) ``known`` is False:
    statements are still parsed, but nothing can be checked and the result is thrown away.
    """

    def __init__(
        self,
        cur: _Cursor,
        database: str,
        name: str,
        *,
        known: bool = True,
        definition: TableDef | None = None,
        indexes: tuple[_Index, ...] = (),
    ) -> None:
        self.cur = cur
        self.database = database
        self.name = name
        self.known = known
        self.columns: list[ColumnDef] = list(definition.columns) if definition else []
        self.primary_key: list[str] = list(definition.primary_key) if definition else []
        self.indexes: list[_Index] = list(indexes)
        self.charset: str | None = definition.charset if definition else None
        self.versioning: str | None = None  # system versioning seen in this statement
        self.add_versioning = False
        self.drop_versioning = False

    # -- MariaDB system versioning ----------------------------------------------------
    #
    # A table made system-versioned without its own AS ROW START/END columns gets invisible
    # row_start and row_end columns. SHOW CREATE TABLE and information_schema hide them, but
    # binlog rows carry them, after every other column (columns added later go before them).

    def _implicit_system_columns(self) -> int:
        """How many implicit row_start/row_end columns end the table (0 or 2)."""
        tail = [c.name.lower() for c in self.columns[-2:] if c.generated]
        return 2 if tail == ["row_start", "row_end"] else 0

    def add_system_versioning(self) -> None:
        if self.versioning == "row" or self._implicit_system_columns():
            return  # explicit period columns, or versioned already
        self.columns += _IMPLICIT_SYSTEM_COLUMNS

    def finish_system_versioning(self) -> None:
        """DROP SYSTEM VERSIONING drops the implicit columns (explicit ones need DROP COLUMN)."""
        if self.drop_versioning and self._implicit_system_columns():
            del self.columns[-2:]

    # -- columns ------------------------------------------------------------------------

    def find(self, name: str) -> int | None:
        lowered = name.lower()
        for i, column in enumerate(self.columns):
            if column.name.lower() == lowered:
                return i
        return None

    def _fail(self, reason: str) -> DdlParseError:
        return DdlParseError(self.cur.sql, f"{reason} in {self.database}.{self.name}")

    def require(self, name: str) -> int | None:
        index = self.find(name)
        if index is None and self.known:
            raise self._fail(f"column {name!r} does not exist")
        return index

    def _position(self, position: str | None) -> int:
        if position is None:
            return len(self.columns) - self._implicit_system_columns()
        if position == "":
            return 0
        index = self.require(position)
        return len(self.columns) if index is None else index + 1

    def add_column(self, spec: _ColumnSpec, position: str | None, if_not_exists: bool) -> None:
        if self.find(spec.column.name) is not None:
            if if_not_exists:
                return
            if self.known:
                raise self._fail(f"column {spec.column.name!r} already exists")
        self.columns.insert(self._position(position), spec.column)
        self._inline_keys(spec)
        self._note_versioning(spec)

    def _note_versioning(self, spec: _ColumnSpec) -> None:
        if spec.versioning == "row" or (spec.versioning == "with" and self.versioning is None):
            self.versioning = spec.versioning

    def change_column(
        self, old: str, spec: _ColumnSpec, position: str | None, if_exists: bool
    ) -> None:
        index = self.find(old)
        if index is None:
            if if_exists or not self.known:
                return
            raise self._fail(f"column {old!r} does not exist")
        current = self.columns[index]
        new_name = spec.column.name
        if new_name.lower() != old.lower() and self.find(new_name) is not None and self.known:
            raise self._fail(f"column {new_name!r} already exists")
        column = spec.column
        if current.added_ms is not None or current.renamed_from is not None:
            # Rows that existed before the column was added (or renamed) keep what they got.
            column = replace(
                column,
                added_ms=current.added_ms,
                renamed_from=current.renamed_from,
                default=current.default if current.added_ms is not None else column.default,
            )
        if new_name != current.name:
            column = replace(column, renamed_from=current.renamed_from or current.name)
        if position is None:
            self.columns[index] = column
        else:
            del self.columns[index]
            self.columns.insert(self._position(position), column)
        if new_name != current.name:
            self._rename_in_keys(current.name, new_name)
        self._inline_keys(spec)
        self._note_versioning(spec)

    def set_default(self, name: str, default: str | None) -> None:
        """``ALTER COLUMN SET/DROP DEFAULT``; a column added by ALTER keeps the default its
        existing rows got (contract C4)."""
        index = self.find(name)
        if index is not None and self.columns[index].added_ms is None:
            self.columns[index] = replace(self.columns[index], default=default)

    def drop_column(self, name: str, if_exists: bool) -> None:
        index = self.find(name)
        if index is None:
            if if_exists or not self.known:
                return
            raise self._fail(f"column {name!r} does not exist")
        lowered = self.columns.pop(index).name.lower()
        # The server takes a dropped column out of every index and drops emptied indexes.
        self.primary_key = [c for c in self.primary_key if c.lower() != lowered]
        kept = []
        for ix in self.indexes:
            columns = tuple(c for c in ix.columns if c.lower() != lowered)
            if columns:
                kept.append(replace(ix, columns=columns))
        self.indexes = kept

    def rename_column(self, old: str, new: str) -> None:
        index = self.require(old)
        if index is None:
            return
        current = self.columns[index]
        self.columns[index] = current.renamed(new)
        self._rename_in_keys(current.name, new)

    def _rename_in_keys(self, old: str, new: str) -> None:
        lowered = old.lower()
        self.primary_key = [new if c.lower() == lowered else c for c in self.primary_key]
        self.indexes = [
            replace(ix, columns=tuple(new if c.lower() == lowered else c for c in ix.columns))
            for ix in self.indexes
        ]

    def _inline_keys(self, spec: _ColumnSpec) -> None:
        name = spec.column.name
        if spec.primary:
            self.add_key(_KeySpec("primary", "PRIMARY", (name,), False))
        if spec.unique:
            self.add_key(_KeySpec("unique", None, (name,), False))

    # -- keys -------------------------------------------------------------------------

    def _key_name(self, base: str) -> str:
        """The server's name for an unnamed key: its first column, then ``_2``, ``_3``..."""
        taken = {ix.name.lower() for ix in self.indexes} | {"primary"}
        if base.lower() not in taken:
            return base
        for n in itertools.count(2):
            candidate = f"{base}_{n}"
            if candidate.lower() not in taken:
                return candidate
        raise AssertionError("unreachable")  # pragma: no cover

    def has_key(self, name: str) -> bool:
        lowered = name.lower()
        if lowered == "primary":
            return bool(self.primary_key)
        return any(ix.name.lower() == lowered for ix in self.indexes)

    def add_key(self, key: _KeySpec) -> None:
        if key.if_not_exists and key.name is not None and self.has_key(key.name):
            return  # MariaDB's ADD INDEX IF NOT EXISTS: a note, no change
        columns: list[str] = []
        for part in key.parts:
            if part is None:
                continue
            index = self.require(part)
            columns.append(part if index is None else self.columns[index].name)
        if key.kind == "primary":
            self.primary_key = columns
            return
        functional = None in key.parts
        if key.name is not None:
            name = key.name
        elif columns:
            name = self._key_name(columns[0])
        else:
            name = self._key_name("functional_index")
        self.indexes.append(
            _Index(name, tuple(columns), key.kind == "unique", key.prefix, functional)
        )

    def drop_key(self, name: str, if_exists: bool) -> None:
        if name.upper() == "PRIMARY":
            self.primary_key = []
            return
        lowered = name.lower()
        kept = [ix for ix in self.indexes if ix.name.lower() != lowered]
        if len(kept) == len(self.indexes) and self.known and not if_exists:
            raise self._fail(f"index {name!r} does not exist")
        self.indexes = kept

    def rename_key(self, old: str, new: str) -> None:
        lowered = old.lower()
        self.indexes = [
            replace(ix, name=new) if ix.name.lower() == lowered else ix for ix in self.indexes
        ]

    # -- charsets ---------------------------------------------------------------------

    def set_charset(self, charset: str) -> None:
        """A new table default: columns that followed the old default keep it explicitly."""
        old = self.charset
        if old is not None and old != charset:
            self.columns = [
                replace(c, charset=old) if c.charset is None and c.type_name in _TEXT_TYPES else c
                for c in self.columns
            ]
        self.charset = charset

    def convert_charset(self, charset: str) -> None:
        """CONVERT TO CHARACTER SET: every character column now uses the table default.

        A text column keeps its length in characters, so one whose bytes no longer fit becomes
        the next larger text type (latin1 ``TEXT`` to utf8mb4 is ``MEDIUMTEXT``), as the server
        does. That needs both charsets' bytes per character; for a charset not in the table the
        type is kept.
        """
        table_charset = self.charset
        self.charset = charset
        columns = []
        for c in self.columns:
            if c.type_name in _TEXT_TYPES:
                old = c.charset or table_charset
                type_name = _converted_text_type(c.type_name, old, charset)
                c = replace(c, type_name=type_name, charset=None)
            columns.append(c)
        self.columns = columns

    # -- result -----------------------------------------------------------------------

    def build(self) -> tuple[TableDef, tuple[_Index, ...]]:
        key = {c.lower() for c in self.primary_key}
        columns = tuple(
            replace(c, nullable=False) if c.nullable and c.name.lower() in key else c
            for c in self.columns
        )
        nullable = {c.name.lower() for c in columns if c.nullable}

        # The server re-sorts keys whenever it writes a table definition: unique before
        # non-unique, unique keys of NOT NULL columns first, then those without prefix parts,
        # otherwise definition order. SHOW CREATE TABLE shows that order, and InnoDB picks the
        # first NOT NULL unique key as the clustered index of a table without a primary key.
        def order(ix: _Index) -> tuple[int, int, int]:
            if not ix.unique:
                return (1, 0, 0)
            has_null = any(c.lower() in nullable for c in ix.columns)
            return (0, int(has_null), int(ix.prefix))

        indexes = tuple(sorted(self.indexes, key=order))
        definition = TableDef(
            database=self.database,
            name=self.name,
            columns=columns,
            primary_key=tuple(self.primary_key),
            unique_keys=tuple(
                (ix.name, ix.columns) for ix in indexes if ix.unique and not ix.functional
            ),
            charset=self.charset,
        )
        return definition, indexes


# --------------------------------------------------------------------------------------------
# Table options
# --------------------------------------------------------------------------------------------

_DATABASE_OPTION_WORDS = frozenset(
    {"DEFAULT", "CHARACTER", "CHARSET", "CHAR", "COLLATE", "COMMENT", "ENCRYPTION", "READ"}
)
_CREATE_OPTIONS_END = frozenset({"PARTITION", "SELECT", "AS", "IGNORE", "REPLACE"})


def _charset_option(cur: _Cursor) -> tuple[str, str] | None:
    """``[DEFAULT] CHARACTER SET|CHARSET|COLLATE [=] x`` at the cursor, consumed if present."""
    start = cur.i
    cur.accept("DEFAULT")
    if cur.accept("CHARACTER", "SET") or cur.accept("CHARSET") or cur.accept("CHAR", "SET"):
        cur.accept_op("=")
        return "charset", _charset_name(cur.literal())
    if cur.accept("COLLATE"):
        cur.accept_op("=")
        return "collate", _collation_charset(cur.literal())
    cur.i = start
    return None


def _table_options(
    cur: _Cursor, stop: frozenset[str], allow_comma: bool
) -> tuple[str | None, bool]:
    """Skip table options up to ``stop`` words (or ',' when not allowed).

    Returns:
        The charset (from CHARSET or COLLATE) and whether WITH SYSTEM VERSIONING was among them.
    """
    charset = collation = None
    versioned = False
    while not cur.at_end():
        if cur.word() in stop or cur.at_op("(") or (cur.at_op(",") and not allow_comma):
            break
        option = _charset_option(cur)
        if option is None:
            if cur.accept("WITH", "SYSTEM", "VERSIONING"):
                versioned = True
            elif cur.at_op("=") and cur.at_op("(", 1):  # UNION=(t1,t2)
                cur.i += 1
                cur.skip_balanced()
            else:
                cur.i += 1
        elif option[0] == "charset":
            charset = option[1]
        else:
            collation = option[1]
    return (charset if charset is not None else collation), versioned


# ALTER TABLE clauses that do not change columns or unique keys, skipped up to the next ','.
_ALTER_IGNORED = frozenset(
    {
        "ALGORITHM",
        "LOCK",
        "FORCE",
        "ENABLE",
        "DISABLE",
        "DISCARD",
        "IMPORT",
        "WITH",
        "WITHOUT",
        "PARTITION",
        "PARTITIONS",
        "ANALYZE",
        "CHECK",
        "OPTIMIZE",
        "REBUILD",
        "REPAIR",
        "COALESCE",
        "REORGANIZE",
        "EXCHANGE",
        "TRUNCATE",
        "REMOVE",
        "UPGRADE",
        "SECONDARY_LOAD",
        "SECONDARY_UNLOAD",
        "VALIDATION",
        "NOWAIT",
        "WAIT",
    }
)
# Table options ALTER TABLE may carry (without '=' too).
_TABLE_OPTIONS = frozenset(
    {
        "ENGINE",
        "TYPE",
        "AUTO_INCREMENT",
        "AVG_ROW_LENGTH",
        "CHECKSUM",
        "TABLE_CHECKSUM",
        "COMMENT",
        "COMPRESSION",
        "CONNECTION",
        "DATA",
        "INDEX",
        "DELAY_KEY_WRITE",
        "ENCRYPTION",
        "ENCRYPTED",
        "ENCRYPTION_KEY_ID",
        "INSERT_METHOD",
        "KEY_BLOCK_SIZE",
        "MAX_ROWS",
        "MIN_ROWS",
        "PACK_KEYS",
        "PASSWORD",
        "ROW_FORMAT",
        "STATS_AUTO_RECALC",
        "STATS_PERSISTENT",
        "STATS_SAMPLE_PAGES",
        "TABLESPACE",
        "STORAGE",
        "UNION",
        "PAGE_CHECKSUM",
        "PAGE_COMPRESSED",
        "PAGE_COMPRESSION_LEVEL",
        "TRANSACTIONAL",
        "IETF_QUOTES",
        "SEQUENCE",
        "ENGINE_ATTRIBUTE",
        "SECONDARY_ENGINE",
        "SECONDARY_ENGINE_ATTRIBUTE",
        "AUTOEXTEND_SIZE",
    }
)
# Words that start an ALTER TABLE clause (they end an ORDER BY column list).
_ALTER_HEADS = frozenset({"ADD", "DROP", "CHANGE", "MODIFY", "RENAME", "ALTER", "CONVERT"})


# --------------------------------------------------------------------------------------------
# Schema state
# --------------------------------------------------------------------------------------------

_TableId = tuple[str, str]


class SchemaState:
    """Table definitions by ``(database, table)``, advanced by applying DDL statements.

    Table names are case-sensitive (``lower_case_table_names=0``, the Linux default); column and
    index names are matched in any case, as the server does.

    Args:
        explicit_defaults_for_timestamp: The server variable of that name (ON by default in
            MySQL 8 and MariaDB 10.10+). When OFF, a ``TIMESTAMP`` column a statement does not
            declare ``NULL`` is ``NOT NULL``. ``SHOW CREATE TABLE`` always writes ``NULL``
            explicitly, so snapshots parse the same either way.
    """

    def __init__(self, *, explicit_defaults_for_timestamp: bool = True) -> None:
        self.explicit_defaults_for_timestamp = explicit_defaults_for_timestamp
        self._tables: dict[_TableId, TableDef] = {}
        self._indexes: dict[_TableId, tuple[_Index, ...]] = {}
        # Default charsets of databases whose CREATE/ALTER DATABASE (or SHOW CREATE DATABASE)
        # was applied: a table created without a charset takes its database's at that moment.
        self._database_charsets: dict[str, str] = {}

    # -- queries ----------------------------------------------------------------------

    def table(self, database: str, name: str) -> TableDef | None:
        """The definition of ``database.name``, or None when not known."""
        return self._tables.get((database, name))

    def tables(self) -> list[TableDef]:
        """Every known table, ordered by database and name."""
        return [self._tables[k] for k in sorted(self._tables)]

    def copy(self) -> SchemaState:
        """An independent copy (definitions are immutable and shared)."""
        other = SchemaState(explicit_defaults_for_timestamp=self.explicit_defaults_for_timestamp)
        other._tables = dict(self._tables)
        other._indexes = dict(self._indexes)
        other._database_charsets = dict(self._database_charsets)
        return other

    def database_charset(self, database: str) -> str | None:
        """Default charset of ``database`` when a CREATE/ALTER DATABASE told it, else None."""
        return self._database_charsets.get(database)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON: every table's :meth:`TableDef.to_json` plus its indexes."""
        out = []
        for key in sorted(self._tables):
            entry = self._tables[key].to_json()
            entry["indexes"] = [ix.to_json() for ix in self._indexes.get(key, ())]
            out.append(entry)
        return {
            "tables": out,
            "database_charsets": dict(sorted(self._database_charsets.items())),
            "explicit_defaults_for_timestamp": self.explicit_defaults_for_timestamp,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SchemaState:
        """Inverse of :meth:`to_json`."""
        state = cls(
            explicit_defaults_for_timestamp=bool(data.get("explicit_defaults_for_timestamp", True))
        )
        state._database_charsets = {
            str(k): str(v) for k, v in data.get("database_charsets", {}).items()
        }
        for entry in data.get("tables", ()):
            definition = TableDef.from_json(entry)
            key = (definition.database, definition.name)
            state._tables[key] = definition
            if "indexes" in entry:
                state._indexes[key] = tuple(_Index.from_json(i) for i in entry["indexes"])
            else:
                state._indexes[key] = tuple(
                    _Index(name, cols, True) for name, cols in definition.unique_keys
                )
        return state

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, SchemaState):
            return NotImplemented
        return self._tables == other._tables

    __hash__ = None  # type: ignore[assignment]

    # -- applying ---------------------------------------------------------------------

    def apply(
        self, sql: str, default_database: str | None, ts_ms: int | None = None
    ) -> list[SchemaChange]:
        """Apply every statement in ``sql`` and return what changed, in order.

        Args:
            sql: One or more statements (a binlog ``QueryEvent`` or ``SHOW CREATE TABLE`` text).
            default_database: The session's current database, for unqualified names.
            ts_ms: The statement's binlog time: columns ``ALTER TABLE ... ADD`` adds remember it
                (``ColumnDef.added_ms``; 0 when unknown), since existing rows got their
                default then (``DEFAULT CURRENT_TIMESTAMP``).

        Returns:
            One :class:`SchemaChange` per table a statement created, altered, renamed, dropped or
            truncated; empty for statements that do not touch table definitions.

        Raises:
            DdlParseError: A ``CREATE``/``ALTER TABLE`` (or index/rename statement) cannot be
                parsed or contradicts the known definition. The state is left as it was before
                the failing statement (earlier statements in ``sql`` stay applied).
        """
        if ";" not in sql and statement_kind(sql) != "ddl":
            return []  # one statement that cannot change a table: skip tokenizing all of it
        changes: list[SchemaChange] = []
        database = default_database
        for tokens in split_statements(sql):
            cur = _Cursor(
                tokens,
                sql,
                explicit_defaults_for_timestamp=self.explicit_defaults_for_timestamp,
                ts_ms=ts_ms,
            )
            if cur.accept("USE"):
                database = cur.identifier("a database name")
                continue
            changes.extend(self._statement(cur, database))
        return changes

    def _statement(self, cur: _Cursor, db: str | None) -> list[SchemaChange]:
        if cur.accept("CREATE"):
            replace_ = cur.accept("OR", "REPLACE")
            if cur.accept("TEMPORARY"):
                return []  # temporary tables are never captured
            if cur.accept("TABLE"):
                return self._create_table(cur, db)
            while cur.word() in ("ONLINE", "OFFLINE"):
                cur.i += 1
            unique = cur.accept("UNIQUE")
            if cur.word() in ("FULLTEXT", "SPATIAL"):
                cur.i += 1
            if cur.accept("INDEX"):
                return self._create_index(cur, db, unique)
            if cur.accept("DATABASE") or cur.accept("SCHEMA"):
                if_not_exists = cur.accept("IF", "NOT", "EXISTS")
                database = cur.identifier("a database name")
                if not (if_not_exists and database in self._database_charsets):
                    self._database_options(cur, database, replace_)
            return []
        if cur.accept("ALTER"):
            while cur.word() in ("ONLINE", "OFFLINE", "IGNORE"):
                cur.i += 1
            if cur.accept("TABLE"):
                return self._alter_table(cur, db)
            if cur.accept("DATABASE") or cur.accept("SCHEMA"):
                altered = db
                if cur.at_identifier() and cur.word() not in _DATABASE_OPTION_WORDS:
                    altered = cur.identifier("a database name")
                if altered is not None:
                    self._database_options(cur, altered, False)
            return []
        if cur.accept("DROP"):
            if cur.accept("TEMPORARY"):
                return []
            if cur.accept("TABLE") or cur.accept("TABLES"):
                return self._drop_tables(cur, db)
            if cur.accept("DATABASE") or cur.accept("SCHEMA"):
                return self._drop_database(cur)
            while cur.word() in ("ONLINE", "OFFLINE"):
                cur.i += 1
            if cur.accept("INDEX"):
                return self._drop_index(cur, db)
            return []
        if cur.accept("RENAME"):
            if cur.accept("TABLE") or cur.accept("TABLES"):
                return self._rename_tables(cur, db)
            return []
        if cur.accept("TRUNCATE"):
            cur.accept("TABLE")
            database, name = cur.qualified(db)
            return [SchemaChange("TRUNCATE", database, name)]
        return []

    def _database_options(self, cur: _Cursor, database: str, reset: bool) -> None:
        charset, _ = _table_options(cur, frozenset(), allow_comma=False)
        if charset is not None:
            self._database_charsets[database] = charset
        elif reset:
            self._database_charsets.pop(database, None)

    def _store(self, builder: _Builder) -> TableDef:
        definition, indexes = builder.build()
        key = (definition.database, definition.name)
        self._tables[key] = definition
        self._indexes[key] = indexes
        return definition

    def _forget(self, key: _TableId) -> TableDef | None:
        self._indexes.pop(key, None)
        return self._tables.pop(key, None)

    def _builder(self, cur: _Cursor, key: _TableId) -> _Builder:
        definition = self._tables.get(key)
        return _Builder(
            cur,
            key[0],
            key[1],
            known=definition is not None,
            definition=definition,
            indexes=self._indexes.get(key, ()),
        )

    # -- CREATE TABLE -----------------------------------------------------------------

    def _create_table(self, cur: _Cursor, db: str | None) -> list[SchemaChange]:
        # CREATE OR REPLACE needs nothing special: a new definition replaces the old one.
        if_not_exists = cur.accept("IF", "NOT", "EXISTS")
        key = cur.qualified(db)
        if if_not_exists and key in self._tables:
            return []  # the server logs the statement but leaves the table alone
        like = cur.accept("LIKE")
        if not like and cur.at_op("(") and cur.word(1) == "LIKE":
            cur.i += 2
            like = True
        if like:
            source = cur.qualified(db)
            original = self._tables.get(source)
            if original is None:
                self._forget(key)
                return [SchemaChange("CREATE", key[0], key[1])]
            builder = self._builder(cur, source)
            builder.database, builder.name = key
            return [SchemaChange("CREATE", key[0], key[1], definition=self._store(builder))]
        builder = _Builder(cur, key[0], key[1])
        has_body = False
        if cur.at_op("(") and cur.word(1) not in ("SELECT", "WITH", "VALUES", "TABLE"):
            cur.i += 1
            has_body = True
            self._create_body(cur, builder)
        charset, versioned = _table_options(cur, _CREATE_OPTIONS_END, allow_comma=True)
        builder.charset = charset or self._database_charsets.get(key[0])
        if versioned or builder.versioning == "with":
            builder.add_system_versioning()
        if not has_body:
            if cur.at_end():
                raise cur.error("'(' with the column definitions, LIKE or AS SELECT")
            raise DdlParseError(
                cur.sql,
                "CREATE TABLE ... SELECT without column definitions: the columns come from the "
                "query and cannot be known from the statement (a ROW-format binlog logs the "
                "full column list instead)",
            )
        # Anything left is PARTITION BY ... or [IGNORE|REPLACE] [AS] SELECT ...: the explicit
        # column definitions are the table's (a ROW binlog logs every column explicitly).
        return [SchemaChange("CREATE", key[0], key[1], definition=self._store(builder))]

    def _create_body(self, cur: _Cursor, builder: _Builder) -> None:
        """Column and key definitions after the '(' up to and including the ')'."""
        while True:
            item = _parse_create_definition(cur)
            if isinstance(item, _ColumnSpec):
                builder.add_column(item, None, if_not_exists=False)
            elif item is not None:
                builder.add_key(item)
            if cur.accept_op(","):
                continue
            if cur.accept_op(")"):
                return
            raise cur.error("',' or ')'")

    # -- ALTER TABLE ------------------------------------------------------------------

    def _alter_table(self, cur: _Cursor, db: str | None) -> list[SchemaChange]:
        cur.accept("IF", "EXISTS")
        key = cur.qualified(db)
        if cur.accept("WAIT"):
            cur.integer()
        cur.accept("NOWAIT")
        builder = self._builder(cur, key)
        # Changes to other tables (CONVERT PARTITION/TABLE) wait until the whole statement
        # parsed, so a statement that fails leaves the state as it was.
        deferred: list[Callable[[], SchemaChange]] = []
        while not cur.at_end():
            self._alter_spec(cur, builder, db, deferred)
            if not cur.accept_op(","):
                if not cur.at_end():
                    raise cur.error("',' or the end of the statement")
                break
        if builder.add_versioning:
            builder.add_system_versioning()
        builder.finish_system_versioning()
        new_key = (builder.database, builder.name)
        previous = key if new_key != key else None
        extra = [action() for action in deferred]
        if not builder.known:
            self._forget(new_key)
            return [SchemaChange("ALTER", new_key[0], new_key[1], previous), *extra]
        self._forget(key)
        definition = self._store(builder)
        return [SchemaChange("ALTER", new_key[0], new_key[1], previous, definition), *extra]

    def _alter_spec(
        self,
        cur: _Cursor,
        b: _Builder,
        db: str | None,
        deferred: list[Callable[[], SchemaChange]],
    ) -> None:
        """One comma-separated ALTER TABLE clause."""
        if cur.accept("ADD"):
            self._alter_add(cur, b)
        elif cur.accept("DROP"):
            self._alter_drop(cur, b)
        elif cur.accept("CHANGE"):
            cur.accept("COLUMN")
            if_exists = cur.accept("IF", "EXISTS")
            old = cur.identifier("a column name")
            spec = _parse_column(cur)
            b.change_column(old, spec, _column_position(cur), if_exists)
        elif cur.accept("MODIFY"):
            cur.accept("COLUMN")
            if_exists = cur.accept("IF", "EXISTS")
            spec = _parse_column(cur)
            b.change_column(spec.column.name, spec, _column_position(cur), if_exists)
        elif cur.accept("RENAME"):
            if cur.accept("COLUMN"):
                if_exists = cur.accept("IF", "EXISTS")
                old = cur.identifier("a column name")
                cur.expect("TO")
                new = cur.identifier("a column name")
                if not (if_exists and b.find(old) is None):
                    b.rename_column(old, new)
            elif cur.accept("INDEX") or cur.accept("KEY"):
                old = cur.identifier("an index name")
                cur.expect("TO")
                b.rename_key(old, cur.identifier("an index name"))
            else:
                cur.accept("TO") or cur.accept("AS")
                b.database, b.name = cur.qualified(db)
        elif cur.accept("ALTER"):
            if cur.word() in ("INDEX", "KEY", "CHECK", "CONSTRAINT"):
                cur.skip_to_separator()  # visibility/enforcement: not part of the definition
            else:
                cur.accept("COLUMN")
                if_exists = cur.accept("IF", "EXISTS")
                name = cur.identifier("a column name")
                if not if_exists:
                    b.require(name)
                if cur.accept("SET", "DEFAULT"):
                    b.set_default(name, cur.expression_text())
                elif cur.accept("DROP", "DEFAULT"):
                    b.set_default(name, None)
                cur.skip_to_separator()  # SET [IN]VISIBLE
        elif cur.accept("CONVERT"):
            if cur.accept("TO"):
                if not (cur.accept("CHARACTER", "SET") or cur.accept("CHARSET")):
                    raise cur.error("CHARACTER SET")
                cur.accept_op("=")
                charset = cur.literal()
                if cur.accept("COLLATE"):
                    cur.accept_op("=")
                    cur.literal()
                if charset.upper() != "DEFAULT":
                    b.convert_charset(_charset_name(charset))
            elif cur.accept("PARTITION"):
                cur.identifier("a partition name")
                cur.expect("TO", "TABLE")
                target = cur.qualified(db)
                cur.skip_to_separator()
                deferred.append(self._copy_table(cur, b, target))
            elif cur.accept("TABLE"):
                source = cur.qualified(db)
                cur.skip_to_separator()
                deferred.append(self._drop_later(source))
            else:
                raise cur.error("TO CHARACTER SET, PARTITION or TABLE")
        elif cur.accept("ORDER", "BY"):
            while True:
                cur.identifier("a column name")
                cur.accept("ASC") or cur.accept("DESC")
                following = cur.word(1)
                if not (
                    cur.at_op(",")
                    and cur.peek(1).kind in ("w", "q")
                    and following not in _ALTER_HEADS
                    and following not in _ALTER_IGNORED
                ):
                    break
                cur.i += 1
        elif cur.word() in _ALTER_IGNORED:
            cur.skip_to_separator()
        else:
            self._alter_options(cur, b)

    def _alter_options(self, cur: _Cursor, b: _Builder) -> None:
        """Table options (``ENGINE=x DEFAULT CHARSET=y ...``) up to the next ','."""
        start = cur.i
        while not (cur.at_end() or cur.at_op(",")):
            option = _charset_option(cur)
            if option is not None:
                b.set_charset(option[1])
                continue
            token = cur.peek()
            if token.kind != "w" or not (token.upper in _TABLE_OPTIONS or cur.at_op("=", 1)):
                raise cur.error("an ALTER TABLE clause" if cur.i == start else "a table option")
            cur.i += 1
            if token.upper in ("DATA", "INDEX"):
                cur.expect("DIRECTORY")
            cur.accept_op("=")
            if cur.at_op("("):
                cur.skip_balanced()
            elif not (cur.at_end() or cur.at_op(",")):
                cur.literal()

    def _alter_add(self, cur: _Cursor, b: _Builder) -> None:
        if cur.accept("SYSTEM", "VERSIONING"):
            b.add_versioning = True  # applied after the statement's own ROW START/END columns
            return
        if cur.word() == "PARTITION" or (cur.word() == "PERIOD" and cur.word(1) == "FOR"):
            cur.skip_to_separator()
            return
        column = cur.accept("COLUMN")
        if_not_exists = cur.accept("IF", "NOT", "EXISTS")
        if cur.accept_op("("):  # ADD [COLUMN] (def, def, ...)
            while True:
                item = _parse_create_definition(cur)
                if isinstance(item, _ColumnSpec):
                    b.add_column(_added(item, cur), None, if_not_exists)
                elif item is not None:
                    b.add_key(item)
                if not cur.accept_op(","):
                    break
            cur.expect_op(")")
            return
        if not column:
            word = cur.word()
            if word == "CONSTRAINT" or word in _KEY_WORDS or word == "CHECK":
                item = _parse_create_definition(cur)
                if isinstance(item, _KeySpec):
                    if (
                        if_not_exists
                        and item.name
                        and any(ix.name.lower() == item.name.lower() for ix in b.indexes)
                    ):
                        return
                    b.add_key(item)
                return
        spec = _parse_column(cur)
        b.add_column(_added(spec, cur), _column_position(cur), if_not_exists)

    def _alter_drop(self, cur: _Cursor, b: _Builder) -> None:
        if cur.accept("PRIMARY", "KEY"):
            b.drop_key("PRIMARY", True)
        elif cur.accept("INDEX") or cur.accept("KEY"):
            if_exists = cur.accept("IF", "EXISTS")
            b.drop_key(cur.identifier("an index name"), if_exists)
        elif cur.accept("CONSTRAINT"):
            if_exists = cur.accept("IF", "EXISTS")
            name = cur.identifier("a constraint name")
            # MySQL 8 and MariaDB drop a UNIQUE key by its constraint name; a check or foreign
            # key constraint has no index here, so a miss is not an error.
            if any(ix.name.lower() == name.lower() and ix.unique for ix in b.indexes):
                b.drop_key(name, if_exists)
        elif cur.accept("SYSTEM", "VERSIONING"):
            b.drop_versioning = True
        elif (
            cur.accept("FOREIGN", "KEY")
            or cur.word() in ("CHECK", "PARTITION")
            or (cur.word() == "PERIOD" and cur.word(1) == "FOR")
        ):
            cur.skip_to_separator()
        else:
            cur.accept("COLUMN")
            if_exists = cur.accept("IF", "EXISTS")
            name = cur.identifier("a column name")
            cur.accept("RESTRICT") or cur.accept("CASCADE")
            b.drop_column(name, if_exists)

    def _copy_table(
        self, cur: _Cursor, b: _Builder, target: _TableId
    ) -> Callable[[], SchemaChange]:
        """A new table with the structure of the one being altered (CONVERT PARTITION)."""
        copy: _Builder | None = None
        if b.known:
            definition, indexes = b.build()
            copy = _Builder(cur, target[0], target[1], definition=definition, indexes=indexes)

        def create() -> SchemaChange:
            if copy is None:
                self._forget(target)
                return SchemaChange("CREATE", target[0], target[1])
            return SchemaChange("CREATE", target[0], target[1], definition=self._store(copy))

        return create

    def _drop_later(self, key: _TableId) -> Callable[[], SchemaChange]:
        def drop() -> SchemaChange:
            self._forget(key)
            return SchemaChange("DROP", key[0], key[1])

        return drop

    # -- other table statements -------------------------------------------------------

    def _drop_tables(self, cur: _Cursor, db: str | None) -> list[SchemaChange]:
        cur.accept("IF", "EXISTS")
        keys = [cur.qualified(db)]
        while cur.accept_op(","):
            keys.append(cur.qualified(db))
        for key in keys:
            self._forget(key)
        return [SchemaChange("DROP", key[0], key[1]) for key in keys]

    def _drop_database(self, cur: _Cursor) -> list[SchemaChange]:
        cur.accept("IF", "EXISTS")
        database = cur.identifier("a database name")
        self._database_charsets.pop(database, None)
        changes = []
        for key in sorted(k for k in self._tables if k[0] == database):
            self._forget(key)
            changes.append(SchemaChange("DROP", key[0], key[1]))
        return changes

    def _rename_tables(self, cur: _Cursor, db: str | None) -> list[SchemaChange]:
        cur.accept("IF", "EXISTS")
        pairs = []
        while True:
            old = cur.qualified(db)
            if cur.accept("WAIT"):
                cur.integer()
            cur.accept("NOWAIT")
            cur.expect("TO")
            pairs.append((old, cur.qualified(db)))
            if not cur.accept_op(","):
                break
        # Parsed completely before anything moves; then in order, so a swap through a
        # temporary name (a TO tmp, b TO a, tmp TO b) works as on the server.
        changes = []
        for old, new in pairs:
            definition = self._tables.get(old)
            indexes = self._indexes.get(old, ())
            self._forget(old)
            if definition is None:
                self._forget(new)
                changes.append(SchemaChange("ALTER", new[0], new[1], old))
            else:
                moved = replace(definition, database=new[0], name=new[1])
                self._tables[new] = moved
                self._indexes[new] = indexes
                changes.append(SchemaChange("ALTER", new[0], new[1], old, moved))
        return changes

    def _create_index(self, cur: _Cursor, db: str | None, unique: bool) -> list[SchemaChange]:
        if_not_exists = cur.accept("IF", "NOT", "EXISTS")
        name = cur.identifier("an index name")
        if cur.accept("USING") or cur.accept("TYPE"):
            cur.literal()
        cur.expect("ON")
        key = cur.qualified(db)
        parts, prefix = _parse_key_parts(cur)
        builder = self._builder(cur, key)
        if if_not_exists and builder.has_key(name):
            return []
        builder.add_key(_KeySpec("unique" if unique else "index", name, parts, prefix))
        if not builder.known:
            return [SchemaChange("ALTER", key[0], key[1])]
        return [SchemaChange("ALTER", key[0], key[1], definition=self._store(builder))]

    def _drop_index(self, cur: _Cursor, db: str | None) -> list[SchemaChange]:
        if_exists = cur.accept("IF", "EXISTS")
        name = cur.identifier("an index name")
        cur.expect("ON")
        key = cur.qualified(db)
        builder = self._builder(cur, key)
        builder.drop_key(name, if_exists)
        if not builder.known:
            return [SchemaChange("ALTER", key[0], key[1])]
        return [SchemaChange("ALTER", key[0], key[1], definition=self._store(builder))]


def _column_position(cur: _Cursor) -> str | None:
    """``FIRST`` (returned as ``""``), ``AFTER col`` (the name) or nothing (None)."""
    if cur.accept("FIRST"):
        return ""
    if cur.accept("AFTER"):
        return cur.identifier("a column name after AFTER")
    return None
