"""``field.renames``: fields of captured documents renamed before bronze, as Debezium does.

Each entry is ``<database>.<collection>.<field path>:<new name>`` (comma-separated, or a YAML
list); ``*`` in the database or collection part matches any name (case-insensitive, Debezium's
``FieldSelector``). The new name replaces the **last** node of the path: ``shop.orders.a.b:c``
turns ``{"a": {"b": 1}}`` into ``{"a": {"c": 1}}``. Applied to:

* full documents (snapshot ``after``, change stream ``fullDocument`` and
  ``fullDocumentBeforeChange``): the path is walked through documents and through arrays of
  documents (every element that is a document; arrays of arrays are not looked into, as in
  Debezium); the renamed field moves to the end of its document (Debezium puts it back into the
  same ordered map after removing the old name);
* ``updateDescription.updatedFields`` (dot notation, array indexes ignored when matching:
  ``a.0.b`` is renamed by a rule for ``a.b`` to ``a.0.c``; a key inside the renamed field,
  ``a.b.x``, becomes ``a.c.x``; a key above it whose value is a document, ``a``, has the field
  renamed inside that value);
* ``removedFields`` and ``truncatedArrays`` paths, by the same matching.

Where this deviates from Debezium, and why: Debezium renames a ``removedFields`` entry only
when it names the field itself, so removing ``a.b.x`` under a rename of ``a.b`` would name a path
no record ever wrote (silver would keep the stale ``a.c.x``); here every path at or under the
renamed field is renamed. A rename whose new name already exists next to the field is
Debezium's ``IllegalArgumentException`` ("Document already contains field"), which stops its
task; here it fails that one event (:class:`RenameConflict`, a capture error): the event is
quarantined with the reason and the rest goes on. ``_id`` cannot be renamed (the key would be
lost); the config refuses it. The 1.x oplog's ``patch``/``filter`` are not produced by this agent
(change streams only), so they need no renaming.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.errors import CaptureError

__all__ = ["FieldRename", "FieldRenames", "RenameConflict", "parse_entry"]


class RenameConflict(CaptureError):
    """A ``field.renames`` rule would overwrite a field that already exists."""


def parse_entry(entry: str) -> tuple[str, str, tuple[str, ...], str]:
    """``db.coll.a.b:c`` -> ``("db", "coll", ("a", "b"), "c")``.

    Raises:
        ValueError: Not ``<database>.<collection>.<field path>:<new name>``.
    """
    text = entry.strip()
    parts = text.split(":")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise ValueError(f"field.renames entry {entry!r} is not <db>.<collection>.<field>:<name>")
    nodes = parts[0].strip().split(".")
    new = parts[1].strip()
    if len(nodes) < 3 or not all(nodes):
        raise ValueError(f"field.renames entry {entry!r} is not <db>.<collection>.<field>:<name>")
    if "." in new or new.startswith("$"):
        raise ValueError(
            f"field.renames entry {entry!r}: the new name {new!r} must be one field name "
            "(no dots, not starting with $)"
        )
    if nodes[2] == "_id":
        raise ValueError(f"field.renames entry {entry!r}: _id cannot be renamed (it is the key)")
    return nodes[0], nodes[1], tuple(nodes[2:]), new


def _namespace(db: str, coll: str) -> re.Pattern[str]:
    def part(name: str) -> str:
        return ".*".join(re.escape(p) for p in name.split("*"))

    return re.compile(part(db) + r"\." + part(coll), re.IGNORECASE)


def _is_index(node: str) -> bool:
    return node.isdigit()


def _named(nodes: list[str]) -> list[str]:
    """The path's nodes without array indexes (consecutive indexes, an array of arrays, keep
    them all: such a path is not matched, as in Debezium)."""
    out: list[str] = []
    previous = False
    for node in nodes:
        if _is_index(node):
            if previous:
                return nodes
            previous = True
            continue
        previous = False
        out.append(node)
    return out


@dataclass(frozen=True, slots=True)
class FieldRename:
    """One rule: in the collections ``namespace`` matches, ``nodes`` is renamed to ``new``."""

    entry: str
    namespace: re.Pattern[str]
    nodes: tuple[str, ...]
    new: str

    @property
    def path(self) -> str:
        """The old field's dotted path."""
        return ".".join(self.nodes)

    @property
    def new_path(self) -> str:
        """The renamed field's dotted path."""
        return ".".join((*self.nodes[:-1], self.new))

    def _conflict(self, where: str) -> RenameConflict:
        return RenameConflict(
            f"field.renames {self.entry!r}: the document already has a field {where!r}, which "
            "the rename would overwrite"
        )

    # --- full documents -------------------------------------------------------------------------
    def document(self, document: dict[str, Any], i: int = 0) -> None:
        """Rename in ``document`` (in place) from node ``i`` on."""
        node = self.nodes[i]
        if i == len(self.nodes) - 1:
            if node not in document:
                return
            if self.new in document:
                raise self._conflict(self.new)
            document[self.new] = document.pop(node)
            return
        inner = document.get(node)
        if isinstance(inner, dict):
            self.document(inner, i + 1)
        elif isinstance(inner, list):
            for item in inner:
                if isinstance(item, dict):
                    self.document(item, i + 1)

    # --- dotted paths ---------------------------------------------------------------------------
    def path_of(self, path: str) -> str:
        """A dotted path (array indexes allowed) renamed when it is at or under the field."""
        nodes = path.split(".")
        named = _named(nodes)
        if named is nodes or tuple(named[: len(self.nodes)]) != self.nodes:
            return path
        out, seen = [], 0
        for node in nodes:
            if _is_index(node):
                out.append(node)
                continue
            out.append(self.new if seen == len(self.nodes) - 1 else node)
            seen += 1
        return ".".join(out)

    def updated(self, updated: dict[str, Any]) -> dict[str, Any]:
        """``updatedFields`` with the rule applied (a new dict; renamed keys move to the end)."""
        out: dict[str, Any] = {}
        moved: list[tuple[str, Any]] = []
        for key, value in updated.items():
            renamed = self.path_of(key)
            if renamed != key:
                moved.append((renamed, value))
                continue
            named = _named(key.split("."))
            depth = len(named)
            if depth < len(self.nodes) and tuple(named) == self.nodes[:depth]:
                if isinstance(value, dict):
                    self.document(value, depth)
                elif isinstance(value, list):
                    for item in value:
                        if isinstance(item, dict):
                            self.document(item, depth)
            out[key] = value
        for key, value in moved:
            if key in out:
                raise self._conflict(key)
            out[key] = value
        return out


@dataclass(frozen=True, slots=True)
class FieldRenames:
    """Every ``field.renames`` rule of a source, in the order written."""

    rules: tuple[FieldRename, ...] = ()

    @classmethod
    def parse(cls, entries: tuple[str, ...]) -> FieldRenames:
        """Read the entries (see :func:`parse_entry`).

        Raises:
            ValueError: An entry that is not ``<db>.<collection>.<field>:<new name>``.
        """
        rules = []
        for entry in entries:
            db, coll, nodes, new = parse_entry(entry)
            rules.append(FieldRename(entry.strip(), _namespace(db, coll), nodes, new))
        return cls(tuple(rules))

    def __bool__(self) -> bool:
        return bool(self.rules)

    def for_collection(self, db: str, coll: str) -> CollectionRenames:
        """The rules that apply to ``db.coll``."""
        name = f"{db}.{coll}"
        return CollectionRenames(tuple(r for r in self.rules if r.namespace.fullmatch(name)))

    def pairs(self, db: str, coll: str) -> tuple[tuple[str, str], ...]:
        """``(old path, new path)`` of each rule for ``db.coll`` (for reconciliation)."""
        return tuple((r.path, r.new_path) for r in self.for_collection(db, coll).rules)


@dataclass(frozen=True, slots=True)
class CollectionRenames:
    """The rules of one collection, applied in order."""

    rules: tuple[FieldRename, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.rules)

    def document(self, document: dict[str, Any]) -> dict[str, Any]:
        """A renamed copy of a full document (``document`` itself when nothing applies).

        Raises:
            RenameConflict: A new name already exists next to the field.
        """
        if not self.rules:
            return document
        import copy

        out = copy.deepcopy(document)
        for rule in self.rules:
            rule.document(out)
        return out

    def updated(self, updated: Mapping[str, Any]) -> dict[str, Any]:
        """``updatedFields`` renamed (values copied where a rule renames inside them)."""
        import copy

        out = dict(updated)
        for rule in self.rules:
            out = rule.updated(copy.deepcopy(out) if rule is self.rules[0] else out)
        return out

    def path(self, path: str) -> str:
        """A ``removedFields`` or ``truncatedArrays`` path renamed."""
        for rule in self.rules:
            path = rule.path_of(path)
        return path
