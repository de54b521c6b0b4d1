"""MySQL/MariaDB table definitions as the schema history keeps them.

These are the facts the agent needs to turn a binlog row (or a snapshot row) into Debezium's
key and ``before``/``after`` payloads: column names in table order, each column's declared type
with its parameters, nullability, and the key columns. They are produced by parsing DDL
(:mod:`capture.mysql.ddl`), never read from the live catalog while streaming: a row written
before an ``ALTER TABLE`` must be decoded with the definition it was written under.

Both classes are frozen and round-trip through plain JSON (:meth:`TableDef.to_json` /
:meth:`TableDef.from_json`), which is how the schema history table stores them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

__all__ = ["ColumnDef", "TableDef"]


@dataclass(frozen=True, slots=True)
class ColumnDef:
    """One column of a table definition.

    Attributes:
        name: Column name as written (MySQL compares column names case-insensitively).
        type_name: Lower-case base type after MySQL's own synonym rules: ``integer`` is
            ``int``, ``bool``/``boolean`` are ``tinyint`` with length 1, ``dec``/``numeric``/
            ``fixed`` are ``decimal``, ``real`` and ``double precision`` are ``double``,
            ``character`` is ``char``, ``national varchar``/``nvarchar`` are ``varchar``,
            ``long varchar`` is ``mediumtext``, ``serial`` is ``bigint`` unsigned not null
            auto-increment. A MariaDB ``longtext`` column with ``CHECK (json_valid(col))`` (how
            MariaDB shows a ``JSON`` column) is ``json``.
        length: The first type parameter: display width of integers, length of strings and
            ``bit``, fractional-second precision of ``time``/``datetime``/``timestamp``,
            precision of ``decimal`` and ``float(p)``/``float(m,d)``; None when not written.
        scale: The second parameter (``decimal(p,s)``, ``float(m,d)``, ``double(m,d)``).
        values: ``enum``/``set`` members in definition order, unquoted.
        unsigned: ``UNSIGNED`` (or ``ZEROFILL``, which implies it).
        charset: ``CHARACTER SET``/``CHARSET`` of the column when written (``binary`` for the
            ``BINARY`` attribute of a text type), else None (the table's default applies).
        nullable: False for ``NOT NULL`` (and for primary-key columns).
        auto_increment: ``AUTO_INCREMENT``.
        generated: A generated (virtual or stored) column.
        default: The ``DEFAULT`` expression as written (``'web'``, ``5``, ``NULL``,
            ``current_timestamp()``, ``(1 + 1)``); None without a ``DEFAULT`` clause.
        added_ms: For a column ``ALTER TABLE ... ADD`` added to an existing table: the
            statement's binlog time (ms), when existing rows got their value (contract C4).
            None for a column the table was created with (or that a snapshot found).
        renamed_from: For a column renamed by ``CHANGE``/``RENAME COLUMN``: its old name.

    ``default``, ``added_ms`` and ``renamed_from`` describe the column's history, not its
    definition: they do not take part in equality (a definition built from the binlog's DDL
    equals one built from ``SHOW CREATE TABLE``, which prints defaults normalised).
    """

    name: str
    type_name: str
    length: int | None = None
    scale: int | None = None
    values: tuple[str, ...] = ()
    unsigned: bool = False
    charset: str | None = None
    nullable: bool = True
    auto_increment: bool = False
    generated: bool = False
    default: str | None = field(default=None, compare=False)
    added_ms: int | None = field(default=None, compare=False)
    renamed_from: str | None = field(default=None, compare=False)

    def renamed(self, name: str) -> ColumnDef:
        """The same column under another name (remembering the first old name)."""
        return replace(self, name=name, renamed_from=self.renamed_from or self.name)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON (defaults left out)."""
        out: dict[str, Any] = {"name": self.name, "type": self.type_name}
        if self.length is not None:
            out["length"] = self.length
        if self.scale is not None:
            out["scale"] = self.scale
        if self.values:
            out["values"] = list(self.values)
        if self.unsigned:
            out["unsigned"] = True
        if self.charset is not None:
            out["charset"] = self.charset
        if not self.nullable:
            out["nullable"] = False
        if self.auto_increment:
            out["auto_increment"] = True
        if self.generated:
            out["generated"] = True
        if self.default is not None:
            out["default"] = self.default
        if self.added_ms is not None:
            out["added_ms"] = self.added_ms
        if self.renamed_from is not None:
            out["renamed_from"] = self.renamed_from
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ColumnDef:
        """Inverse of :meth:`to_json`."""
        return cls(
            name=str(data["name"]),
            type_name=str(data["type"]),
            length=data.get("length"),
            scale=data.get("scale"),
            values=tuple(data.get("values", ())),
            unsigned=bool(data.get("unsigned", False)),
            charset=data.get("charset"),
            nullable=bool(data.get("nullable", True)),
            auto_increment=bool(data.get("auto_increment", False)),
            generated=bool(data.get("generated", False)),
            default=data.get("default"),
            added_ms=data.get("added_ms"),
            renamed_from=data.get("renamed_from"),
        )


@dataclass(frozen=True, slots=True)
class TableDef:
    """One table's definition at some binlog position.

    Attributes:
        database: The database (MySQL's schema) the table is in.
        name: The table name, case as written.
        columns: Columns in table order (the order binlog rows carry them in).
        primary_key: Names of the primary-key columns in key order; empty when none.
        unique_keys: ``(index name, column names)`` of each ``UNIQUE`` key, in definition order
            (Debezium keys a table without a primary key by its first unique key whose columns
            are all NOT NULL).
        charset: The table's default character set, when written.
    """

    database: str
    name: str
    columns: tuple[ColumnDef, ...]
    primary_key: tuple[str, ...] = ()
    unique_keys: tuple[tuple[str, tuple[str, ...]], ...] = field(default_factory=tuple)
    charset: str | None = None

    @property
    def collection(self) -> str:
        """``database.table``."""
        return f"{self.database}.{self.name}"

    def column_index(self, name: str) -> int | None:
        """Position of the column called ``name`` (any case), or None."""
        lowered = name.lower()
        for i, column in enumerate(self.columns):
            if column.name.lower() == lowered:
                return i
        return None

    def key_columns(self) -> tuple[str, ...]:
        """Debezium's key: the primary key, else the first unique key of NOT NULL columns."""
        if self.primary_key:
            return self.primary_key
        for _name, key in self.unique_keys:
            indexes = [self.column_index(n) for n in key]
            if all(i is not None and not self.columns[i].nullable for i in indexes):
                return key
        return ()

    def to_json(self) -> dict[str, Any]:
        """Plain JSON."""
        return {
            "database": self.database,
            "name": self.name,
            "columns": [c.to_json() for c in self.columns],
            "primary_key": list(self.primary_key),
            "unique_keys": [[name, list(cols)] for name, cols in self.unique_keys],
            "charset": self.charset,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TableDef:
        """Inverse of :meth:`to_json`."""
        return cls(
            database=str(data["database"]),
            name=str(data["name"]),
            columns=tuple(ColumnDef.from_json(c) for c in data["columns"]),
            primary_key=tuple(data.get("primary_key", ())),
            unique_keys=tuple(
                (str(name), tuple(cols)) for name, cols in data.get("unique_keys", ())
            ),
            charset=data.get("charset"),
        )
