"""LogMiner's ``SQL_REDO`` text parsed into column values.

LogMiner prints each row change as one SQL statement (Oracle Database Utilities, "Using
LogMiner to Analyze Redo Log Files"); with ``NO_ROWID_IN_STMT`` and supplemental logging of all
columns the forms are::

    insert into "HR"."JOBS"("JOB_ID","JOB_TITLE","MIN_SALARY") values ('IT_WT','Writer','4000');
    update "HR"."JOBS" set "MIN_SALARY" = '5000' where "JOB_ID" = 'IT_WT' and "MIN_SALARY" = '4000';
    delete from "HR"."JOBS" where "JOB_ID" = 'IT_WT' and "JOB_TITLE" IS NULL;

Every value, numbers included, is a quoted literal (``''`` escapes a quote), ``NULL`` (``IS NULL``
in a predicate), or a function call: ``TO_DATE('2003-07-25 14:10:00', 'YYYY-MM-DD HH24:MI:SS')``,
``TO_TIMESTAMP('...')``, ``TO_TIMESTAMP_TZ('...')``, ``HEXTORAW('0a0b')``, ``UNISTR('\\00e9')``,
``EMPTY_CLOB()``/``EMPTY_BLOB()``. An UPDATE's ``set`` list holds only the changed columns; its
``where`` list is the row before the change (all columns with supplemental logging), so the row
after is the ``where`` row overlaid with the ``set`` list. Statements longer than one
``V$LOGMNR_CONTENTS`` row arrive split over rows with ``CSF = 1``; the caller joins them first.

:func:`parse_redo` returns a :class:`RedoStatement` of :data:`RedoValue` s; what they mean for a
column is the column type's business (:mod:`capture.oracle.types`). Imports no driver.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from pipeline.errors import CaptureError

__all__ = [
    "LobErase",
    "LobLocator",
    "LobTrim",
    "LobWrite",
    "RedoFunction",
    "RedoParseError",
    "RedoStatement",
    "RedoValue",
    "parse_lob_locator",
    "parse_lob_operation",
    "parse_redo",
]


class RedoParseError(CaptureError):
    """``SQL_REDO`` text that is not one of the statement forms LogMiner prints."""


@dataclass(frozen=True, slots=True)
class RedoFunction:
    """A function call in ``SQL_REDO`` (``TO_DATE``, ``HEXTORAW``, ``EMPTY_CLOB`` ...).

    Attributes:
        name: The function name, upper case.
        args: Its arguments (literal texts, NULLs or nested calls).
    """

    name: str
    args: tuple[RedoValue, ...]


RedoValue = str | None | RedoFunction
"""A quoted literal's text, ``None`` for NULL, or a :class:`RedoFunction`."""


@dataclass(frozen=True, slots=True)
class RedoStatement:
    """One parsed ``SQL_REDO`` statement.

    Attributes:
        op: ``insert``, ``update`` or ``delete``.
        owner: The table's schema.
        table: The table name.
        new: Inserted values, or an update's ``set`` list (column -> value).
        old: The ``where`` list: the row before an update or delete (column -> value).
    """

    op: Literal["insert", "update", "delete"]
    owner: str
    table: str
    new: dict[str, RedoValue]
    old: dict[str, RedoValue]

    def after(self) -> dict[str, RedoValue]:
        """The row after the change: an insert's values, or ``old`` overlaid with ``set``."""
        if self.op == "insert":
            return dict(self.new)
        return {**self.old, **self.new}


class _Scanner:
    """A cursor over one statement's text; every ``expect_*`` names what it wanted."""

    __slots__ = ("i", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def fail(self, wanted: str) -> RedoParseError:
        near = self.text[self.i : self.i + 40]
        return RedoParseError(f"SQL_REDO: expected {wanted} at offset {self.i} (near {near!r})")

    def skip_space(self) -> None:
        text, i = self.text, self.i
        while i < len(text) and text[i] in " \t\r\n":
            i += 1
        self.i = i

    def peek(self, word: str) -> bool:
        """Whether the next token is ``word`` (a keyword, any case, or punctuation)."""
        self.skip_space()
        end = self.i + len(word)
        if self.text[self.i : end].upper() != word.upper():
            return False
        if word[-1].isalpha() and end < len(self.text) and _is_word(self.text[end]):
            return False
        return True

    def take(self, word: str) -> bool:
        if self.peek(word):
            self.i += len(word)
            return True
        return False

    def expect(self, word: str) -> None:
        if not self.take(word):
            raise self.fail(repr(word))

    def identifier(self) -> str:
        """A double-quoted identifier (``""`` escapes a quote) or a bare word (upper-cased)."""
        self.skip_space()
        text = self.text
        if self.i < len(text) and text[self.i] == '"':
            return self.quoted('"')
        start = self.i
        while self.i < len(text) and _is_word(text[self.i]):
            self.i += 1
        if self.i == start:
            raise self.fail("an identifier")
        return text[start : self.i].upper()

    def qualified(self) -> tuple[str, str]:
        owner = self.identifier()
        self.expect(".")
        return owner, self.identifier()

    def value(self) -> RedoValue:
        self.skip_space()
        text = self.text
        if self.i >= len(text):
            raise self.fail("a value")
        char = text[self.i]
        if char == "'":
            return self.quoted("'")
        if char == "-" or char.isdigit():
            start = self.i
            self.i += 1
            while self.i < len(text) and (text[self.i].isdigit() or text[self.i] in ".eE+-"):
                self.i += 1
            return text[start : self.i]
        name = self.identifier()
        if name == "NULL":
            return None
        self.expect("(")
        args: list[RedoValue] = []
        if not self.take(")"):
            while True:
                args.append(self.value())
                if self.take(")"):
                    break
                self.expect(",")
        return RedoFunction(name, tuple(args))

    def quoted(self, mark: str) -> str:
        """The text between ``mark`` at the cursor and its closing twin; a doubled ``mark``
        stands for itself (``'it''s'``, ``"A""B"``)."""
        text = self.text
        out: list[str] = []
        j = self.i + 1
        while True:
            k = text.find(mark, j)
            if k < 0:
                raise self.fail(f"a closing {mark}")
            out.append(text[j:k])
            if text[k + 1 : k + 2] == mark:
                out.append(mark)
                j = k + 2
                continue
            self.i = k + 1
            return "".join(out)

    def predicates(self) -> dict[str, RedoValue]:
        """``"A" = 'x' and "B" IS NULL ...`` up to the end (a ``ROWID`` term is dropped)."""
        out: dict[str, RedoValue] = {}
        while True:
            name = self.identifier()
            if self.take("IS"):
                self.expect("NULL")
                value: RedoValue = None
            else:
                self.expect("=")
                value = self.value()
            if name != "ROWID":
                out[name] = value
            if not self.take("and"):
                return out

    def end(self) -> None:
        self.take(";")
        self.skip_space()
        if self.i != len(self.text):
            raise self.fail("the end of the statement")


def _is_word(char: str) -> bool:
    return char.isalnum() or char in "_$#"


def parse_redo(sql: str) -> RedoStatement:
    """Parse one complete ``SQL_REDO`` statement (continuation rows already joined).

    Raises:
        RedoParseError: The text is not an INSERT, UPDATE or DELETE as LogMiner prints them
            (this includes ``Unsupported Type`` columns).
    """
    s = _Scanner(sql)
    if s.take("insert"):
        s.expect("into")
        owner, table = s.qualified()
        s.expect("(")
        names = [s.identifier()]
        while s.take(","):
            names.append(s.identifier())
        s.expect(")")
        s.expect("values")
        s.expect("(")
        values = [s.value()]
        while s.take(","):
            values.append(s.value())
        s.expect(")")
        s.end()
        if len(names) != len(values):
            raise RedoParseError(
                f"SQL_REDO: insert into {owner}.{table} names {len(names)} columns and "
                f"{len(values)} values"
            )
        return RedoStatement("insert", owner, table, dict(zip(names, values, strict=True)), {})
    if s.take("update"):
        owner, table = s.qualified()
        s.expect("set")
        new: dict[str, RedoValue] = {}
        while True:
            name = s.identifier()
            s.expect("=")
            new[name] = s.value()
            if not s.take(","):
                break
        old = s.predicates() if s.take("where") else {}
        s.end()
        return RedoStatement("update", owner, table, new, old)
    if s.take("delete"):
        s.expect("from")
        owner, table = s.qualified()
        s.expect("where")
        old = s.predicates()
        s.end()
        return RedoStatement("delete", owner, table, {}, old)
    raise s.fail("insert, update or delete")


# --- LOB rows (lob.enabled) ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LobLocator:
    """A ``SEL_LOB_LOCATOR`` row (``OPERATION_CODE`` 9): the LOB column about to be written.

    LogMiner prints it as an anonymous block whose ``select ... into loc_c|loc_b|loc_nc ...
    for update`` names the column and the row (its non-LOB columns, as a ``where`` list)::

        DECLARE
         loc_c CLOB;
         buf_c VARCHAR2(6174);
         ...
        BEGIN
         select "NOTES" into loc_c from "HR"."DOCS" where "ID" = '1' and "TITLE" = 'a' for update;

    Attributes:
        owner: The table's schema.
        table: The table name.
        column: The LOB column.
        binary: ``loc_b`` (a BLOB) rather than ``loc_c``/``loc_nc``.
        where: The row, column -> value.
    """

    owner: str
    table: str
    column: str
    binary: bool
    where: dict[str, RedoValue]


@dataclass(frozen=True, slots=True)
class LobWrite:
    """A ``LOB_WRITE`` row (code 10): ``buf_c := '...'; dbms_lob.write(loc_c, <amount>,
    <offset>, buf_c);`` (``HEXTORAW('...')`` into ``buf_b`` for a BLOB).

    Attributes:
        offset: Zero-based offset (Oracle's are 1-based) in characters (CLOB) or bytes (BLOB).
        amount: Characters or bytes written.
        data: The text, or the bytes of a ``HEXTORAW``.
    """

    offset: int
    amount: int
    data: str | bytes


@dataclass(frozen=True, slots=True)
class LobTrim:
    """A ``LOB_TRIM`` row (code 11): ``dbms_lob.trim(loc_c, <new length>);``."""

    length: int


@dataclass(frozen=True, slots=True)
class LobErase:
    """A ``LOB_ERASE`` row (code 29): ``dbms_lob.erase(loc_c, <amount>, <offset>);`` (the
    erased part becomes spaces in a CLOB, zero bytes in a BLOB; the length stays)."""

    offset: int
    amount: int


def _after_begin(s: _Scanner) -> None:
    """Move past an anonymous block's ``DECLARE ... BEGIN`` (absent: stay put)."""
    if not s.text.lstrip().upper().startswith("DECLARE"):
        return
    match = _BEGIN.search(s.text)
    if match is not None:
        s.i = match.end()


_BEGIN = re.compile(r"\bBEGIN\b", re.IGNORECASE)
_LOB_CALL = re.compile(
    r"\bdbms_lob\.(?P<call>write|trim|erase)\s*\((?P<args>[^)]*)\)\s*;", re.IGNORECASE
)
_LOB_BUFFER = re.compile(r"\bbuf_(?:c|b|nc)\s*:=\s*", re.IGNORECASE)


def parse_lob_locator(sql: str) -> LobLocator:
    """Parse a ``SEL_LOB_LOCATOR`` row's ``SQL_REDO`` (continuation rows joined).

    Raises:
        RedoParseError: Not the ``select ... into loc_x from ... where ... for update`` form.
    """
    s = _Scanner(sql)
    _after_begin(s)
    s.expect("select")
    column = s.identifier()
    s.expect("into")
    locator = s.identifier()
    if locator not in ("LOC_C", "LOC_B", "LOC_NC"):
        raise s.fail("loc_c, loc_b or loc_nc")
    s.expect("from")
    owner, table = s.qualified()
    where = s.predicates() if s.take("where") else {}
    s.expect("for")
    s.expect("update")
    s.take(";")
    s.take("END")
    s.end()
    return LobLocator(owner, table, column, locator == "LOC_B", where)


def parse_lob_operation(sql: str) -> LobWrite | LobTrim | LobErase:
    """Parse a ``LOB_WRITE``, ``LOB_TRIM`` or ``LOB_ERASE`` row's ``SQL_REDO``.

    Raises:
        RedoParseError: No ``dbms_lob.write/trim/erase`` call, or arguments that are not the
            documented ones.
    """
    calls = list(_LOB_CALL.finditer(sql))
    call = calls[-1] if calls else None
    if call is None:
        raise RedoParseError(
            f"SQL_REDO: expected a dbms_lob.write/trim/erase call (near {sql[:60]!r})"
        )
    args = [a.strip() for a in call["args"].split(",")]
    name = call["call"].lower()
    try:
        if name == "trim" and len(args) == 2:
            return LobTrim(int(args[1]))
        if name == "erase" and len(args) == 3:
            return LobErase(int(args[2]) - 1, int(args[1]))
        if name == "write" and len(args) == 4:
            amount, offset = int(args[1]), int(args[2]) - 1
        else:
            raise ValueError(f"{len(args)} arguments")
    except ValueError as exc:
        raise RedoParseError(f"SQL_REDO: dbms_lob.{name}({call['args']}): {exc}") from None
    buffer = _LOB_BUFFER.search(sql, 0, call.start())
    if buffer is None:
        raise RedoParseError(
            f"SQL_REDO: dbms_lob.write without a buf_x := assignment (near {sql[:60]!r})"
        )
    s = _Scanner(sql)
    s.i = buffer.end()
    value = s.value()
    if isinstance(value, RedoFunction) and value.name == "HEXTORAW" and value.args:
        data: str | bytes = bytes.fromhex(str(value.args[0]))
    elif isinstance(value, str):
        data = value
    else:
        raise s.fail("a quoted text or HEXTORAW('...') for the LOB buffer")
    return LobWrite(offset, amount, data)
