"""Column masks applied to row images before they reach bronze.

Debezium rewrites sensitive columns inside the connector, so masked values never leave the
source. We do the same: every capture agent, and the Debezium-JSON reader, passes each ``before``
and ``after`` row image through :meth:`ColumnMasker.apply` before the record is landed::

    masker = ColumnMasker.from_source(config.source("inventory"))
    before = masker.apply(collection, before)
    after = masker.apply(collection, after)

The rules come from a source's pattern keys (parsed into
:attr:`capture.source_config.RelationalFilters.column_rules`):

* ``column.truncate.to.<N>.chars``: strings (and bytes) longer than N are cut to N.
* ``column.mask.with.<N>.chars``: strings become N ``*`` characters (N = 0: empty string).
* ``column.mask.hash.<ALG>.with.salt.<salt>``: strings become the lower-case hex digest, by the
  Java algorithm ALG (SHA-256, SHA-512, MD5, SHA-1, ...), of the salt's UTF-8 bytes followed by
  the value's **Java serialization** (Debezium's ``HashingByteArrayStrategy.V1``, still its
  default: ``ObjectOutputStream.writeObject(value)``, i.e. ``AC ED 00 05 74 <u2 length>
  <modified UTF-8>`` for a string).
* ``column.mask.hash.v2.<ALG>.with.salt.<salt>``: the same digest over the value's UTF-8 bytes
  (``V2``: ``value.toString().getBytes()``), which other systems can reproduce easily.

Both hash forms give byte-for-byte the digests Debezium gives for the same salt and string
(checked against a JVM), so records masked by Debezium and by our agents still join. The same
input always gives the same output, which keeps referential integrity; it is pseudonymization,
not anonymization (short or guessable values can be found by brute force).

Matching follows Debezium: a rule's value is a comma-separated list of regular expressions (``\\,``
for a literal comma) matched case-insensitively against the *whole* fully-qualified column name
``<collection>.<column>``, where the collection is ``<db>.<table>`` (MySQL) or
``<schema>.<table>`` (PostgreSQL, SQL Server, Oracle, Db2). So ``inventory.orders.customerName``
does not match ``inventory.orders.customerNameX``. When several rules match a column the first
wins, in Debezium's order: truncations, then character masks, then hashes, then v2 hashes.

Differences from Debezium, because nothing masked may reach bronze in clear:

* Debezium masks and hashes only character columns (CHAR, VARCHAR, TEXT, CLOB, ...) and leaves
  a rule on any other column without effect. Here a rule rewrites **every** value of a matched
  column: a value that is not a string (a number, a date as epoch days, a JSON document, a
  boolean) is rewritten from its canonical text (:func:`canonical_text`), so ``id = 42`` hashes
  like the string ``"42"``. The capture agents declare such a column as a plain Connect
  ``string`` in the record schemas (:class:`capture.captured_table.CapturedTable`), so schema
  and value agree.
* Key columns are masked like any other (the same rule, the same digest, so a hashed key still
  identifies its row in silver); a character mask or a truncation on a key column would merge
  distinct keys and is refused when the table is built (:meth:`ColumnMasker.check_key`).
* Debezium shortens a hash to the column's declared length; the length is unknown here, so the
  full digest is kept (declare hashed columns wide enough in silver).
* Truncation counts Python characters (code points); Java counts UTF-16 units, which differs only
  for characters outside the Basic Multilingual Plane.
* The regexes are compiled by Python's :mod:`re`; Java-only syntax is rejected when the config
  is loaded.

A masker is cheap to call: it remembers per collection whether any rule can match it at all (then
:meth:`~ColumnMasker.apply` returns the row itself), and per column which rule applies.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import orjson

from capture.source_config import ColumnRule, ColumnRuleKind, SourceConfigBase
from pipeline.errors import ConfigError

__all__ = ["ColumnMasker", "canonical_text", "java_serialized_string", "MASK_CHAR"]

logger = logging.getLogger(__name__)

MASK_CHAR = "*"
"""Character used by ``column.mask.with.<N>.chars``."""

_JAVA_STREAM_HEADER = b"\xac\xed\x00\x05"  # STREAM_MAGIC, STREAM_VERSION
_TC_STRING = b"\x74"
_TC_LONGSTRING = b"\x7c"


def _utf16_units(text: str) -> Iterator[int]:
    for char in text:
        point = ord(char)
        if point > 0xFFFF:
            point -= 0x10000
            yield 0xD800 | (point >> 10)
            yield 0xDC00 | (point & 0x3FF)
        else:
            yield point


def _modified_utf8(text: str) -> bytes:
    """Java's "modified UTF-8" (``DataOutput.writeUTF``): NUL as two bytes, surrogates apart."""
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    out = bytearray()
    for unit in _utf16_units(text):
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | (unit >> 6), 0x80 | (unit & 0x3F)))
        else:
            out += bytes((0xE0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3F), 0x80 | (unit & 0x3F)))
    return bytes(out)


def java_serialized_string(text: str) -> bytes:
    """The bytes ``new ObjectOutputStream(out).writeObject(text)`` writes for a Java String.

    >>> java_serialized_string("abc").hex()
    'aced0005740003616263'
    """
    utf = _modified_utf8(text)
    if len(utf) <= 0xFFFF:
        return _JAVA_STREAM_HEADER + _TC_STRING + len(utf).to_bytes(2, "big") + utf
    return _JAVA_STREAM_HEADER + _TC_LONGSTRING + len(utf).to_bytes(8, "big") + utf


def canonical_text(value: Any) -> str:
    """The text a mask, hash or truncation of a non-string value works on.

    Booleans as JSON (``true``), numbers as Python prints them (``42``, ``1.5``), bytes as lower
    hex, lists and objects as compact JSON with sorted keys; anything else through ``str()``.

    >>> canonical_text(42), canonical_text(True), canonical_text({"b": 1, "a": [1.5]})
    ('42', 'true', '{"a":[1.5],"b":1}')
    """
    if value.__class__ is str:
        return str(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float | Decimal):
        return str(value)
    if isinstance(value, bytes | bytearray):
        return bytes(value).hex()
    if isinstance(value, dict | list | tuple):
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
        except TypeError:  # an integer beyond 64 bits, or a value orjson does not know
            return str(value)
    return str(value)


def _hasher(rule: ColumnRule) -> Callable[[str], str]:
    if rule.salt is None:
        raise ConfigError(f"{rule.key}: a hash rule needs a salt", key_path=rule.key)
    salted = hashlib.new(rule.hashlib_algorithm)
    salted.update(rule.salt.encode("utf-8"))
    if rule.kind is ColumnRuleKind.HASH:

        def to_bytes(value: str) -> bytes:
            return java_serialized_string(value)

    else:

        def to_bytes(value: str) -> bytes:
            # Java's getBytes() replaces unpaired surrogates with '?', as "replace" does.
            return value.encode("utf-8", "replace")

    def digest(value: str) -> str:
        hasher = salted.copy()
        hasher.update(to_bytes(value))
        return hasher.hexdigest()

    return digest


def _literal_prefix(pattern: str) -> tuple[str | None, ...]:
    """Characters every match of ``pattern`` starts with; None stands for "any character".

    Conservative: it stops at the first construct it does not understand, and is empty when the
    pattern has an alternation anywhere. Used only to rule collections out cheaply.
    """
    if "|" in pattern or pattern.startswith("(?"):
        return ()
    tokens: list[str | None] = []
    i = 1 if pattern.startswith("^") else 0
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            if i + 1 >= len(pattern) or pattern[i + 1].isalnum() or not pattern[i + 1].isascii():
                break
            token: str | None = pattern[i + 1]
            step = 2
        elif char == ".":
            token, step = None, 1
        elif char in "[](){}*+?^$" or not char.isascii():
            break
        else:
            token, step = char, 1
        if i + step < len(pattern) and pattern[i + step] in "*+?{":
            break
        tokens.append(token.lower() if token is not None else None)
        i += step
    return tuple(tokens)


@dataclass(frozen=True)
class _CompiledRule:
    """A column rule ready to apply."""

    rule: ColumnRule
    patterns: tuple[re.Pattern[str], ...]
    prefixes: tuple[tuple[str | None, ...], ...]
    transform: Callable[[Any], Any]
    accepts: tuple[type, ...]

    @classmethod
    def build(cls, rule: ColumnRule) -> _CompiledRule:
        patterns = tuple(re.compile(p, re.IGNORECASE) for p in rule.columns)
        prefixes = tuple(_literal_prefix(p) for p in rule.columns)
        transform: Callable[[Any], Any]
        accepts: tuple[type, ...] = (str,)
        if rule.kind in (ColumnRuleKind.TRUNCATE, ColumnRuleKind.MASK) and rule.length is None:
            raise ConfigError(f"{rule.key}: the rule needs a length", key_path=rule.key)
        if rule.kind is ColumnRuleKind.TRUNCATE:
            limit = rule.length or 0
            accepts = (str, bytes, bytearray)

            def transform(value: Any) -> Any:
                return value[:limit] if len(value) > limit else value

        elif rule.kind is ColumnRuleKind.MASK:
            mask = MASK_CHAR * (rule.length or 0)

            def transform(value: Any) -> Any:
                return mask

        else:
            transform = _hasher(rule)
        return cls(rule, patterns, prefixes, transform, accepts)

    def may_match(self, collection: str) -> bool:
        """False only when no column of ``collection`` can match (decided from prefixes)."""
        name = collection.lower() + "."
        return any(_prefix_fits(prefix, name) for prefix in self.prefixes)

    def matches(self, qualified_column: str) -> bool:
        return any(p.fullmatch(qualified_column) for p in self.patterns)


def _prefix_fits(prefix: tuple[str | None, ...], name: str) -> bool:
    for expected, actual in zip(prefix, name, strict=False):
        if expected is not None and expected != actual:
            return False
    return True


@dataclass
class _Plan:
    """What to do with the columns of one collection (filled lazily, one column at a time)."""

    rules: tuple[_CompiledRule, ...]
    columns: dict[str, _CompiledRule | None] = field(default_factory=dict)


class ColumnMasker:
    """Applies a source's column rules to row images (see the module docstring).

    Thread-safe for concurrent :meth:`apply` calls: the caches only grow, and a race merely
    computes the same entry twice.
    """

    def __init__(self, rules: Iterable[ColumnRule] = ()) -> None:
        """Compile ``rules``, in precedence order (the first matching rule wins).

        Args:
            rules: Column rules, e.g. ``source.column_rules``.
        """
        self._rules = tuple(_CompiledRule.build(rule) for rule in rules)
        self._plans: dict[str, _Plan | None] = {}

    @classmethod
    def from_source(cls, source: SourceConfigBase) -> ColumnMasker:
        """The masker of a configured source (a no-op one when it has no column rules)."""
        rules: tuple[ColumnRule, ...] = getattr(source, "column_rules", ())
        return cls(rules)

    @property
    def rules(self) -> tuple[ColumnRule, ...]:
        """The rules, in precedence order."""
        return tuple(r.rule for r in self._rules)

    def __bool__(self) -> bool:
        """True when the masker has any rule at all."""
        return bool(self._rules)

    def __repr__(self) -> str:
        return f"ColumnMasker({[r.rule.key for r in self._rules]!r})"

    def _plan(self, collection: str) -> _Plan | None:
        try:
            return self._plans[collection]
        except KeyError:
            pass
        rules = tuple(r for r in self._rules if r.may_match(collection))
        plan = _Plan(rules) if rules else None
        self._plans[collection] = plan
        return plan

    def applies_to(self, collection: str) -> bool:
        """Whether a rule may match a column of ``collection`` (``db.table`` / ``schema.table``).

        False means :meth:`apply` returns rows of this collection unchanged. True means a rule's
        regex may match some column of it (decided from the regexes alone, without columns).
        """
        return self._plan(collection) is not None

    def apply(self, collection: str, row: dict[str, Any] | None) -> dict[str, Any] | None:
        """Mask one row image of ``collection``.

        Args:
            collection: ``<db>.<table>`` or ``<schema>.<table>``, as in ``source``.
            row: A ``before`` or ``after`` image (column name to value), or None.

        Returns:
            None for None. ``row`` itself when no column of it is rewritten (the input is never
            modified); otherwise a new dict with the rewritten values. Null values stay null.
        """
        if row is None:
            return None
        plan = self._plan(collection)
        if plan is None:
            return row
        out: dict[str, Any] | None = None
        columns = plan.columns
        for column, value in row.items():
            if column in columns:
                rule = columns[column]
            else:
                rule = self._rule_for(plan, collection, column)
            if rule is None or value is None:
                continue
            if not isinstance(value, rule.accepts):
                value = canonical_text(value)
            if out is None:
                out = dict(row)
            out[column] = rule.transform(value)
        return row if out is None else out

    def covers(self, collection: str, column: str) -> bool:
        """Whether a rule matches ``collection.column`` (its values are masked, hashed or
        truncated), whatever the value: such a column's text never leaves the agent."""
        plan = self._plan(collection)
        if plan is None:
            return False
        if column in plan.columns:
            return plan.columns[column] is not None
        return self._rule_for(plan, collection, column) is not None

    def _rule_for(self, plan: _Plan, collection: str, column: str) -> _CompiledRule | None:
        qualified = f"{collection}.{column}"
        rule = next((r for r in plan.rules if r.matches(qualified)), None)
        plan.columns[column] = rule
        return rule

    def check_key(self, collection: str, column: str) -> None:
        """Refuse a rule on key column ``collection.column`` that would merge distinct keys.

        Hashes keep keys apart (the same value gives the same digest, different values
        different digests); a character mask makes every key equal and a truncation merges keys
        that share a prefix, so silver would fold distinct rows into one.

        Raises:
            ConfigError: A ``column.mask.with`` or ``column.truncate.to`` rule matches it.
        """
        plan = self._plan(collection)
        if plan is None:
            return
        if column in plan.columns:
            rule = plan.columns[column]
        else:
            rule = self._rule_for(plan, collection, column)
        if rule is None or rule.rule.kind in (ColumnRuleKind.HASH, ColumnRuleKind.HASH_V2):
            return
        raise ConfigError(
            f"{collection}.{column} is a key column: {rule.rule.key} would make distinct keys "
            "equal and merge their rows in silver; mask it with column.mask.hash.<ALG>.with.salt."
            "<salt> (a hash keeps keys apart) or pick other key columns (message.key.columns)",
            key_path=rule.rule.key,
        )
