"""What every relational capture agent does with one captured table, whatever the engine.

Filters (which tables and columns are captured), key selection (``message.key.columns``,
else the engine's primary key), column masks, and the Debezium key/row/envelope schemas with
the payload builders that turn a row (a sequence of column values in table order) into
Debezium's key and ``before``/``after``. The engine-specific part is only how each column's
value is converted: the agent passes one :class:`capture.column_types.ColumnType` per column.

Key columns stay in the key even when ``column.exclude.list`` drops them from the row.

Two contracts of docs/types.md live here, for every engine:

* **C1, unrepresentable values.** A converter raises
  :class:`capture.column_types.Unrepresentable` for a value its Connect type cannot hold
  (numeric ``NaN`` in a ``Decimal``, a MySQL zero date, a timestamp beyond int64 microseconds...).
  The row image then holds null for that column and is an :class:`Image` carrying the reason and the
  database's text of the value;
  :func:`capture.database_source.data_record` turns that into the record's
  ``__medallion.unrepresentable`` header. The row still lands. ``text`` is left out for a
  column a mask, hash or truncation rule covers. A key column cannot be null: such a row is a
  :class:`ValueConversionError` (the record is quarantined whole, with the reason).
* **C4, column defaults.** Each column's :class:`ColumnDefault` goes into its row field schema
  as ``"default"`` (the value in the field's JSON form) and, when the value rows written
  before the column was added show cannot be known, the schema parameter
  ``medallion.default.unreproducible`` with the reason.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Final

from bronze import connect_schema as cs
from capture.column_types import ColumnType, Unrepresentable, ValueConversionError
from capture.masking import ColumnMasker, canonical_text
from capture.server_errors import RetryPolicy

__all__ = [
    "AgentRules",
    "HEADER_UNREPRESENTABLE",
    "UNREPRODUCIBLE_PARAMETER",
    "CapturedTable",
    "CatalogColumn",
    "ColumnDefault",
    "Image",
    "KeyOverrides",
    "TableFilter",
    "field_with_default",
]

_PLAIN_STRING: Final = {"type": "string"}
"""The Connect schema of a masked column that was not plain text (see :meth:`_masked_types`)."""

HEADER_UNREPRESENTABLE: Final = "__medallion.unrepresentable"
"""Record header naming the values written as null because they have no representation
(contract C1): JSON ``{"<before|after>": {"<column>": {"reason": ..., "text": ...}}}``."""

UNREPRODUCIBLE_PARAMETER: Final = "medallion.default.unreproducible"
"""Field-schema parameter: the value rows written before this column was added show is not
known (contract C4); its value is the reason."""


class Image(dict[str, Any]):
    """A ``before``/``after`` row image with columns written as null because their value has
    no representation (C1). ``issues`` maps each such column to ``{"reason", "text"}``.

    A dict subclass so that the common case (no such column) stays a plain dict with no extra
    cost; :func:`capture.database_source.data_record` turns it back into one.
    """

    __slots__ = ("issues",)
    issues: dict[str, dict[str, str]]


@dataclass(frozen=True, slots=True)
class ColumnDefault:
    """A column's default for its Connect field schema (contract C4).

    Attributes:
        value: The default in the field's JSON form (what the column's converter returns);
            None: no default.
        unreproducible: Why the value rows that existed before the column was added show
            cannot be known (a volatile default with a table rewrite, an expression the agent
            cannot evaluate...); None when it can.
    """

    value: Any = None
    unreproducible: str | None = None


def field_with_default(field: Mapping[str, Any], default: ColumnDefault | None) -> dict[str, Any]:
    """``field`` with ``default`` and the unreproducible parameter, in JsonConverter's key order
    (``... name, version, doc, parameters, default, field``)."""
    out = dict(field)
    if default is None or (default.value is None and default.unreproducible is None):
        return out
    name = out.pop("field", None)
    parameters = out.pop("parameters", None)
    out.pop("default", None)
    if default.unreproducible is not None:
        parameters = {**(parameters or {}), UNREPRODUCIBLE_PARAMETER: default.unreproducible}
    if parameters is not None:
        out["parameters"] = parameters
    if default.value is not None:
        out["default"] = default.value
    if name is not None:
        out["field"] = name
    return out


def _matcher(patterns: Sequence[str]) -> Callable[[str], bool] | None:
    if not patterns:
        return None
    compiled = [re.compile(p, re.IGNORECASE) for p in patterns]
    return lambda name: any(c.fullmatch(name) for c in compiled)


@dataclass(frozen=True, slots=True)
class TableFilter:
    """Schema (or database), table and column include/exclude lists.

    Debezium regexes, full match, any case. ``schema_*`` are the database lists for engines
    whose namespace is a database (MySQL). ``system`` names namespaces never captured whatever
    the lists say: PostgreSQL's by default, other engines pass theirs.
    """

    schema_include: tuple[str, ...] = ()
    schema_exclude: tuple[str, ...] = ()
    table_include: tuple[str, ...] = ()
    table_exclude: tuple[str, ...] = ()
    column_include: tuple[str, ...] = ()
    column_exclude: tuple[str, ...] = ()
    system: frozenset[str] = frozenset({"pg_catalog", "information_schema", "pg_toast"})

    @classmethod
    def from_config(cls, config: Any, system: frozenset[str] | None = None) -> TableFilter:
        """Read the lists off a source config (``database.*`` lists where there are no
        ``schema.*`` lists)."""
        schema_include = getattr(config, "schema_include_list", None)
        schema_exclude = getattr(config, "schema_exclude_list", None)
        if schema_include is None and schema_exclude is None:
            schema_include = getattr(config, "database_include_list", ())
            schema_exclude = getattr(config, "database_exclude_list", ())
        lists = cls(
            tuple(schema_include or ()),
            tuple(schema_exclude or ()),
            tuple(getattr(config, "table_include_list", ())),
            tuple(getattr(config, "table_exclude_list", ())),
            tuple(getattr(config, "column_include_list", ())),
            tuple(getattr(config, "column_exclude_list", ())),
        )
        return lists if system is None else replace(lists, system=system)

    def table(self, schema: str, table: str) -> bool:
        """Whether ``schema.table`` is captured."""
        if schema in self.system:
            return False
        inc, exc = _matcher(self.schema_include), _matcher(self.schema_exclude)
        if (inc is not None and not inc(schema)) or (exc is not None and exc(schema)):
            return False
        name = f"{schema}.{table}"
        inc, exc = _matcher(self.table_include), _matcher(self.table_exclude)
        return not ((inc is not None and not inc(name)) or (exc is not None and exc(name)))

    def column(self, collection: str, column: str) -> bool:
        """Whether ``collection.column`` stays in row images."""
        name = f"{collection}.{column}"
        inc, exc = _matcher(self.column_include), _matcher(self.column_exclude)
        return not ((inc is not None and not inc(name)) or (exc is not None and exc(name)))


@dataclass(frozen=True, slots=True)
class KeyOverrides:
    """``message.key.columns``: ``<table regex>:<col>,<col>;...``."""

    rules: tuple[tuple[str, tuple[str, ...]], ...] = ()

    @classmethod
    def parse(cls, value: str | None) -> KeyOverrides:
        """Parse the property (already validated by the config model)."""
        if not value:
            return cls()
        rules = []
        for entry in value.split(";"):
            table, _, columns = entry.strip().rpartition(":")
            if table.strip():
                cols = tuple(c.strip() for c in columns.split(",") if c.strip())
                rules.append((table.strip(), cols))
        return cls(tuple(rules))

    def columns_for(self, collection: str) -> tuple[str, ...] | None:
        """Key columns configured for ``schema.table``, or None."""
        for pattern, columns in self.rules:
            if re.fullmatch(pattern, collection, re.IGNORECASE):
                return columns
        return None


@dataclass(frozen=True, slots=True)
class CatalogColumn:
    """One column as the agent knows it: name, type, ``NOT NULL``, primary-key membership.

    ``type_oid``/``type_modifier``, ``dims`` and the default facts are PostgreSQL's; other
    engines leave them at their defaults and pass the converted types to
    :class:`CapturedTable` directly.

    Attributes:
        dims: Declared array dimensions (``pg_attribute.attndims``; 0 for non-arrays).
        default_expression: The default as ``pg_get_expr`` prints it; None without one.
        missing_value: ``pg_attribute.attmissingval`` as text (a one-element array) when
            ``atthasmissing``: what rows that existed before the column was added show.
    """

    name: str
    type_oid: int
    type_modifier: int
    not_null: bool = False
    in_primary_key: bool = False
    in_identity: bool = False
    dims: int = 0
    default_expression: str | None = None
    missing_value: str | None = None


class CapturedTable:
    """Debezium schemas and payload builders for one captured table.

    Args:
        server: Logical server name (``topic.prefix``).
        schema: The table's namespace (PostgreSQL schema, MySQL database).
        table: Table name.
        columns: The columns, in the order rows carry them.
        types: One converted type per column.
        connector: Debezium connector name (selects the ``source`` block schema).
        replica_identity: ``d``, ``n``, ``f`` or ``i`` (PostgreSQL; others keep ``d``).
        column_filter: Include/exclude lists (only the column part is used here).
        key_overrides: ``message.key.columns``.
        masker: Column masks applied to ``before`` and ``after``.
        placeholder: Text standing in for a value the log does not carry.
        with_transaction: Add the ``transaction`` block to the envelope schema.
        origin_prefix: Prefix of the ``origin`` of snapshot rows (``pg``, ``mysql``).
        defaults: One :class:`ColumnDefault` (or None) per column, for the row schema (C4).
    """

    TEXT_VALUES: ClassVar[bool] = False
    """True when every column value arrives as text (pgoutput): the fast path then hands
    anything else (unchanged TOAST, binary datums) to :meth:`_convert`. False: values are
    driver objects (ints, Decimals, datetimes...) passed to the converters as they are."""

    def __init__(
        self,
        server: str,
        schema: str,
        table: str,
        columns: Sequence[CatalogColumn],
        types: Sequence[ColumnType],
        *,
        connector: str,
        replica_identity: str = "d",
        column_filter: TableFilter,
        key_overrides: KeyOverrides,
        masker: ColumnMasker | None,
        placeholder: str = "__debezium_unavailable_value",
        with_transaction: bool,
        origin_prefix: str,
        defaults: Sequence[ColumnDefault | None] | None = None,
    ) -> None:
        self.schema = schema
        self.table = table
        self.collection = f"{schema}.{table}"
        self.topic = f"{server}.{schema}.{table}"
        self.snapshot_origin = f"{origin_prefix}:snapshot:{self.collection}"
        self.columns = tuple(columns)
        self.names = tuple(c.name for c in columns)
        self.replica_identity = replica_identity
        self.masker = masker if masker is not None and masker.applies_to(self.collection) else None
        self.types: tuple[ColumnType, ...] = tuple(self._masked_types(types))
        self.converters = tuple(t.convert for t in self.types)
        # Text types convert with str(); skipping that call is most of a text column's cost.
        self._fast_converters = tuple(None if c is str else c for c in self.converters)
        override = key_overrides.columns_for(self.collection)
        if override is not None:
            key_names = [n for n in override if n in self.names]
        elif any(c.in_primary_key for c in columns):
            key_names = [c.name for c in columns if c.in_primary_key]
        elif replica_identity == "i":
            key_names = [c.name for c in columns if c.in_identity]
        else:
            key_names = []
        self.key_idx = tuple(self.names.index(n) for n in key_names)
        self.value_idx = tuple(
            i
            for i, c in enumerate(columns)
            if i in self.key_idx or column_filter.column(self.collection, c.name)
        )
        self._key_in_row = all(i in self.value_idx for i in self.key_idx)
        if self.masker is not None:
            for i in self.key_idx:
                self.masker.check_key(self.collection, self.names[i])
        self.placeholder = placeholder
        placeholder_bytes = (
            bytes.fromhex(placeholder[4:])
            if placeholder.startswith("hex:")
            else placeholder.encode("utf-8")
        )
        self._placeholder_b64 = base64.b64encode(placeholder_bytes).decode("ascii")
        self.key_schema: dict[str, Any] | None = (
            cs.struct(
                [self.types[i].field_schema(self.names[i], False) for i in self.key_idx],
                name=f"{self.topic}.Key",
            )
            if self.key_idx
            else None
        )
        self.defaults: tuple[ColumnDefault | None, ...] = tuple(
            self._masked_defaults(defaults if defaults is not None else (None,) * len(columns))
        )
        row = cs.struct(
            [
                field_with_default(
                    self.types[i].field_schema(
                        self.names[i], not (columns[i].not_null or i in self.key_idx)
                    ),
                    self.defaults[i],
                )
                for i in self.value_idx
            ],
            name=f"{self.topic}.Value",
        )
        self.row_schema = row
        self.envelope_schema = cs.envelope_schema(
            self.topic, row, cs.source_schema(connector), with_transaction=with_transaction
        )
        self.key_schema_id = None if self.key_schema is None else cs.schema_id(self.key_schema)
        self.envelope_schema_id = cs.schema_id(self.envelope_schema)

    def _masked(self, column: str) -> bool:
        return self.masker is not None and self.masker.covers(self.collection, column)

    def _masked_types(self, types: Sequence[ColumnType]) -> Iterator[ColumnType]:
        """``types``, with every masked column that is not plain text made a Connect string
        whose value is the canonical text of the converted value (the mask then rewrites it):
        a mask covers every value type, and the schema says what the value is."""
        for name, column_type in zip(self.names, types, strict=True):
            if not self._masked(name) or column_type.schema == _PLAIN_STRING:
                yield column_type
                continue
            convert = column_type.convert

            def as_text(value: Any, convert: Callable[[Any], Any] = convert) -> Any:
                converted = convert(value)
                return None if converted is None else canonical_text(converted)

            yield ColumnType(dict(_PLAIN_STRING), as_text, column_type.type_name)

    def _masked_defaults(
        self, defaults: Sequence[ColumnDefault | None]
    ) -> Iterator[ColumnDefault | None]:
        """A masked column's default goes into the schema masked, like its values."""
        for name, default in zip(self.names, defaults, strict=True):
            if default is None or default.value is None or self.masker is None:
                yield default
                continue
            masked = self.masker.apply(self.collection, {name: default.value})
            yield replace(default, value=None if masked is None else masked[name])

    @property
    def has_key(self) -> bool:
        """Whether records of this table have a key (a primary key or an override)."""
        return bool(self.key_idx)

    def _convert(self, i: int, value: Any) -> Any:
        """One column's value; :class:`Unrepresentable` passes through to the caller."""
        if value is None:
            return None
        try:
            return self.converters[i](value)
        except Unrepresentable:
            raise
        except (ValueError, ArithmeticError, IndexError, TypeError) as exc:
            # A masked column's value, and the converter's message that may quote it, stay out
            # of the error: it lands in the quarantine table.
            shown = "its value" if self._masked(self.names[i]) else f"{value!r:.80}: {exc}"
            raise ValueConversionError(
                f"{self.collection}.{self.names[i]} ({self.types[i].type_name}): cannot convert "
                f"{shown}"
            ) from exc

    def _fast(self, idx: tuple[int, ...], values: Sequence[Any]) -> dict[str, Any] | None:
        """Convert the columns ``idx`` of a row; None if the row needs care.

        The landing budget is a few microseconds per row, so the common case (a plain value or
        NULL in every column, no conversion error) skips the per-column checks of
        :meth:`_convert`; anything else goes the slow way, which also builds the error message
        and handles unrepresentable values (:class:`Unrepresentable` is a ValueError).
        """
        names, fast = self.names, self._fast_converters
        text_only = self.TEXT_VALUES
        try:
            out: dict[str, Any] = {}
            for i in idx:
                v = values[i]
                if v is None:
                    out[names[i]] = None
                elif v.__class__ is str:
                    c = fast[i]
                    out[names[i]] = v if c is None else c(v)
                elif text_only:
                    return None
                else:
                    out[names[i]] = self.converters[i](v)
            return out
        except (ValueError, ArithmeticError, IndexError, TypeError):
            return None

    def _careful(self, idx: Sequence[int], values: Sequence[Any]) -> dict[str, Any]:
        """Convert the columns ``idx`` one by one: an unrepresentable value becomes null and an
        entry of the returned :class:`Image`'s ``issues``; any other failure raises."""
        names = self.names
        out: dict[str, Any] = {}
        issues: dict[str, dict[str, str]] | None = None
        for i in idx:
            try:
                out[names[i]] = self._convert(i, values[i])
            except Unrepresentable as exc:
                out[names[i]] = None
                if issues is None:
                    issues = {}
                issues[names[i]] = self._issue(i, values[i], exc)
        if issues is None:
            return out
        image = Image(out)
        image.issues = issues
        return image

    def _issue(self, i: int, value: Any, exc: Unrepresentable) -> dict[str, str]:
        text = exc.text if exc.text is not None else value if value.__class__ is str else None
        return {"reason": exc.reason} if text is None else {"reason": exc.reason, "text": text}

    def _masked_row(self, row: dict[str, Any]) -> dict[str, Any]:
        """``row`` through the column masks; an :class:`Image` stays one, and the ``text`` of a
        masked, hashed or truncated column is dropped from its issues (C1)."""
        masker = self.masker
        if masker is None:
            return row
        masked = masker.apply(self.collection, row)
        if not isinstance(row, Image):
            return row if masked is None else masked
        image = Image(row if masked is None else masked)
        image.issues = {
            name: ({"reason": issue["reason"]} if masker.covers(self.collection, name) else issue)
            for name, issue in row.issues.items()
        }
        return image

    def row(self, values: Sequence[Any]) -> dict[str, Any]:
        """The ``before``/``after`` payload of a full row, masked (an :class:`Image` when a
        value has no representation)."""
        row = self._fast(self.value_idx, values)
        if row is None:
            row = self._careful(self.value_idx, values)
        return row if self.masker is None else self._masked_row(row)

    def row_and_key(self, values: Sequence[Any]) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """:meth:`row` and :meth:`key` of one row, converting the key columns once."""
        converted = self._fast(self.value_idx, values)
        if converted is None or not self._key_in_row:
            return self.row(values), self.key(values)
        names = self.names
        key = {names[i]: converted[names[i]] for i in self.key_idx} if self.key_idx else None
        if self.masker is not None:
            return self._masked_row(converted), self._masked_row(key) if key else key
        return converted, key

    def key(self, values: Sequence[Any]) -> dict[str, Any] | None:
        """The key payload of a row (None for a keyless table).

        Raises:
            ValueConversionError: A key value does not convert, or has no representation (a
                key field cannot be null, so the record cannot be keyed).
        """
        if not self.key_idx:
            return None
        key = self._fast(self.key_idx, values)
        if key is None:
            key = self._careful(self.key_idx, values)
            if isinstance(key, Image):
                name, issue = next(iter(key.issues.items()))
                text = "" if self._masked(name) else f" {issue.get('text', '')!r:.80}"
                raise ValueConversionError(
                    f"{self.collection}.{name}: key column value{text} "
                    f"has no representation ({issue['reason']}); a key cannot be null"
                )
        return key if self.masker is None else self._masked_row(key)

    def identity_row(self, values: Sequence[Any]) -> dict[str, Any]:
        """A ``K`` old tuple: only the replica-identity columns the server sent, masked."""
        sent = [
            i
            for i, c in enumerate(self.columns)
            if (c.in_identity or i in self.key_idx)
            and i in self.value_idx
            and values[i] is not None
        ]
        row = self._careful(sent, values)
        return row if self.masker is None else self._masked_row(row)

    def key_only_row(self, key: dict[str, Any] | None) -> dict[str, Any] | None:
        """A ``before`` image holding only the key (REPLICA IDENTITY DEFAULT, key unchanged)."""
        if key is None:
            return None
        if self._key_in_row:
            return dict(key)
        return {k: v for k, v in key.items() if self.names.index(k) in self.value_idx}


@dataclass(frozen=True, slots=True)
class AgentRules:
    """What every database agent reads alike off its source config: key overrides, column
    masks, tombstones, transaction metadata, skipped operations and heartbeats.

    Attributes:
        key_overrides: ``message.key.columns``.
        masker: ``column.mask.*`` / ``column.mask.hash.*`` / ``column.truncate.*``, if any.
        tombstones_on_delete: ``tombstones.on.delete``.
        provide_transaction_metadata: ``provide.transaction.metadata``.
        skipped_operations: ``skipped.operations`` (op letters).
        heartbeat_interval_ms: ``heartbeat.interval.ms`` (0: none).
        heartbeat_action_query: ``heartbeat.action.query``.
        retry: ``errors.max.retries`` and the retry delays.
    """

    key_overrides: KeyOverrides = field(default_factory=KeyOverrides)
    masker: ColumnMasker | None = None
    tombstones_on_delete: bool = True
    provide_transaction_metadata: bool = False
    skipped_operations: frozenset[str] = frozenset({"t"})
    heartbeat_interval_ms: int = 0
    heartbeat_action_query: str | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)

    def table_options(
        self, connector: str, column_filter: TableFilter, origin_prefix: str
    ) -> dict[str, Any]:
        """The keyword arguments every agent passes alike to :class:`CapturedTable`."""
        return {
            "connector": connector,
            "column_filter": column_filter,
            "key_overrides": self.key_overrides,
            "masker": self.masker,
            "with_transaction": self.provide_transaction_metadata,
            "origin_prefix": origin_prefix,
        }

    @classmethod
    def from_config(cls, config: Any) -> AgentRules:
        """Read a database source's config model (:mod:`capture.source_config`)."""
        return cls(
            key_overrides=KeyOverrides.parse(config.message_key_columns),
            masker=ColumnMasker.from_source(config),
            tombstones_on_delete=bool(config.tombstones_on_delete),
            provide_transaction_metadata=bool(config.provide_transaction_metadata),
            skipped_operations=frozenset(str(op) for op in config.skipped_operations),
            heartbeat_interval_ms=int(config.heartbeat_interval_ms),
            heartbeat_action_query=config.heartbeat_action_query,
            retry=RetryPolicy.from_config(config),
        )
