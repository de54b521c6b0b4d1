"""A model of one MongoDB collection: documents as ground truth, and each change as MongoDB
describes it in its oplog and its change streams.

Operations follow the MongoDB manual:

* ``insertOne`` (``_id`` first), ``replaceOne`` (the new document, ``_id`` kept first),
  ``deleteOne``, and a re-insert of a deleted ``_id``;
* ``updateOne`` with ``$set`` (dotted paths; missing embedded documents are created, a numeric
  component under a missing field creates a document field such as ``"0"``, an array index past
  the end pads with nulls), ``$unset`` (a field is removed, an array element becomes null),
  ``$inc`` (Int32 + Int32 stays Int32 unless it overflows into Int64; Int64 wins over Int32;
  Double wins over both; a missing field is created), ``$push`` (appends; creates the array)
  and ``$pop`` (``1`` removes the last element, ``-1`` the first).

Each update is described from the document before and after it, in every encoding MongoDB
uses for the same change (chosen at random per change, so silver meets all of them):

* the change stream's ``updateDescription``: ``updatedFields`` either as whole values or as
  dotted paths into embedded documents and array elements (appended elements as ``arr.<i>``,
  with or without the null padding), ``removedFields``, and arrays that shrank as
  ``truncatedArrays`` (MongoDB 5.0+) or as the whole new array (earlier versions);
* the oplog's idempotent update (Debezium 1.x ``patch``): ``{"$v": 1, "$set": {...}, "$unset":
  {...}}`` with the same choices (a shrunk array is always set whole: the v1 format has no
  truncation), ``$v`` present or not, an array element set to null written as ``$unset``.
"""

from __future__ import annotations

import copy
import random
import string
from dataclasses import dataclass, field
from typing import Any, Literal

from tests.mongomodel.bson import (
    Binary,
    Date,
    Decimal128,
    Double,
    Int32,
    Int64,
    MaxKey,
    MinKey,
    ObjectId,
    Regex,
    Timestamp,
    freeze,
    same,
)

__all__ = ["Change", "MongoCollection", "UpdateOp", "random_document", "random_value"]

INT32_MAX = 2**31 - 1

UpdateOp = tuple[str, str, Any]
"""``(operator, path, argument)``, e.g. ``("$set", "items.1.qty", Int32(3))``."""


@dataclass
class Change:
    """One write, as the model applied it and as MongoDB would describe it."""

    kind: Literal["insert", "update", "replace", "delete"]
    id: Any
    before: dict[str, Any] | None
    after: dict[str, Any] | None
    updated: list[tuple[str, Any]] = field(default_factory=list)
    """``updateDescription.updatedFields`` as (path, value), in order."""
    removed: list[str] = field(default_factory=list)
    truncated: list[tuple[str, int]] = field(default_factory=list)
    patch: dict[str, Any] | None = None
    """The oplog's ``o`` for an update (Debezium 1.x ``patch``)."""


# --- values ------------------------------------------------------------------------------------

COUNTER = "count"
ITEMS = "lines"
FIELD_NAMES = ("name", "qty", "price", "tags", "items", "meta", "a", "b", "ünï", "n-1")
STRINGS = ("", "Anne", 'quote " and \\ backslash', "line\nbreak", "é café", "😀 smile", "tab\t")


def random_scalar(rng: random.Random, int64: bool = True) -> Any:
    """One scalar of any BSON type the model covers (no Int64 unless ``int64``)."""
    kind = rng.randrange(16)
    if kind == 2 and not int64:
        kind = 1
    if kind == 0:
        return Int32(rng.randint(-(2**31), INT32_MAX))
    if kind == 1:
        return Int32(rng.randint(-5, 5))
    if kind == 2:
        return Int64(rng.choice([rng.randint(-5, 5), rng.randint(-(2**63), 2**63 - 1)]))
    if kind == 3:
        return Double(rng.choice([0.5, -0.0, 5.0, 1e20, 1e-5, 12.34, rng.uniform(-1e6, 1e6)]))
    if kind == 4:
        return Double(rng.choice([float("nan"), float("inf"), float("-inf"), 1e7, 0.001]))
    if kind == 5:
        return Decimal128(rng.choice(["1.50", "-0", "1E+3", "12345678901234567890.123", "0.1"]))
    if kind in (6, 7):
        return rng.choice(STRINGS)
    if kind == 8:
        return rng.choice([True, False])
    if kind == 9:
        return None
    if kind == 10:
        return ObjectId("".join(rng.choice("0123456789abcdef") for _ in range(24)))
    if kind == 11:
        # Before 1970, ordinary, with milliseconds, and after year 9999 (relaxed falls back).
        return Date(rng.choice([-86_400_001, 0, 1_700_000_000_123, 253_402_300_800_000]))
    if kind == 12:
        data = bytes(rng.randrange(256) for _ in range(rng.randrange(5)))
        return Binary(data, rng.choice([0, 4, 0x80]))
    if kind == 13:
        return Timestamp(rng.randrange(2**32), rng.randrange(2**32))
    if kind == 14:
        return Regex(rng.choice(["^a.*", "x\\d+"]), rng.choice(["", "i", "imx"]))
    return rng.choice([MinKey(), MaxKey()])


def random_value(rng: random.Random, depth: int = 0, int64: bool = True) -> Any:
    """A scalar, or (less often deeper down) an embedded document or an array."""
    roll = rng.random()
    if depth < 3 and roll < 0.15:
        return random_document(rng, depth + 1, int64)
    if depth < 3 and roll < 0.3:
        return [random_value(rng, depth + 1, int64) for _ in range(rng.randrange(4))]
    return random_scalar(rng, int64)


def random_document(rng: random.Random, depth: int = 0, int64: bool = True) -> dict[str, Any]:
    """A document of one to four fields; without ``int64``, a top-level document gets an Int64
    ``count`` instead (the only Int64 its updates touch, and only with ``$inc``)."""
    names = rng.sample(FIELD_NAMES, rng.randrange(1, 5))
    document = {n: random_value(rng, depth, int64) for n in names}
    if depth == 0 and rng.random() < 0.6:  # arrays of documents: where array paths live
        document[ITEMS] = [
            random_document(rng, 2, int64) if rng.random() < 0.6 else random_scalar(rng, int64)
            for _ in range(rng.randrange(5))
        ]
    if not int64 and depth == 0:
        document[COUNTER] = Int64(rng.randint(-5, 5))
    return document


# --- MongoDB's update operators -----------------------------------------------------------------


def _is_index(part: str) -> bool:
    return part.isdigit()


def _container_for_write(node: Any, part: str) -> Any:
    if isinstance(node, list):
        index = int(part)
        while len(node) <= index:
            node.append(None)
        if node[index] is None:
            node[index] = {}
        return node[index]
    if part not in node:
        node[part] = {}
    return node[part]


def _set(document: dict[str, Any], path: str, value: Any) -> None:
    *parents, last = path.split(".")
    node: Any = document
    for part in parents:
        node = _container_for_write(node, part)
    if isinstance(node, list):
        index = int(last)
        while len(node) < index:
            node.append(None)
        if index == len(node):
            node.append(value)
        else:
            node[index] = value
    else:
        node[last] = value


def _get(document: dict[str, Any], path: str) -> Any:
    node: Any = document
    for part in path.split("."):
        if isinstance(node, list):
            node = node[int(part)] if _is_index(part) and int(part) < len(node) else None
        elif isinstance(node, dict):
            node = node.get(part)
        else:
            return None
    return node


def _unset(document: dict[str, Any], path: str) -> None:
    *parents, last = path.split(".")
    node: Any = document
    for part in parents:
        node = node[int(part)] if isinstance(node, list) else node[part]
    if isinstance(node, list):
        node[int(last)] = None
    else:
        del node[last]


def _add(old: Any, by: Any) -> Any:
    if old is None:
        return by
    if isinstance(old, Double) or isinstance(by, Double):
        return Double(float(old.value) + float(by.value))
    total = old.value + by.value
    if isinstance(old, Int64) or isinstance(by, Int64) or not -(2**31) <= total <= INT32_MAX:
        return Int64(total)
    return Int32(total)


def apply_update(document: dict[str, Any], ops: list[UpdateOp]) -> dict[str, Any]:
    """A copy of ``document`` after one ``updateOne`` (its operators' paths do not conflict)."""
    out = copy.deepcopy(document)
    # MongoDB 5.0+ processes a document's fields in lexicographic order of their names.
    for operator, path, argument in sorted(ops, key=lambda op: op[1]):
        if operator == "$set":
            _set(out, path, copy.deepcopy(argument))
        elif operator == "$unset":
            _unset(out, path)
        elif operator == "$inc":
            _set(out, path, _add(_get(out, path), argument))
        elif operator == "$push":
            target = _get(out, path)
            if target is None:
                _set(out, path, [copy.deepcopy(argument)])
            else:
                target.append(copy.deepcopy(argument))
        elif operator == "$pop":
            target = _get(out, path)
            del target[-1 if argument == 1 else 0]
        else:
            raise ValueError(operator)
    return out


# --- descriptions of a change ------------------------------------------------------------------


def _leaf_paths(prefix: str, document: dict[str, Any]) -> list[tuple[str, Any]]:
    """A new embedded document as dotted paths to its fields (setting them in order rebuilds
    it, creating the documents on the way)."""
    out: list[tuple[str, Any]] = []
    for k, v in document.items():
        if isinstance(v, dict) and v:
            out += _leaf_paths(f"{prefix}.{k}", v)
        else:
            out.append((f"{prefix}.{k}", v))
    return out


class _Describer:
    """One random encoding of the difference between two documents."""

    def __init__(self, rng: random.Random, *, truncation: bool) -> None:
        self.rng = rng
        self.truncation = truncation
        self.updated: list[tuple[str, Any]] = []
        self.removed: list[str] = []
        self.truncated: list[tuple[str, int]] = []

    def document(self, prefix: str, before: dict[str, Any], after: dict[str, Any]) -> None:
        for name in before:
            if name not in after:
                self.removed.append(prefix + name)
        for name, value in after.items():
            path = prefix + name
            if name not in before:
                if isinstance(value, dict) and value and self.rng.random() < 0.4:
                    self.updated += _leaf_paths(path, value)
                else:
                    self.updated.append((path, value))
            elif not same(before[name], value):
                self.value(path, before[name], value)

    def value(self, path: str, before: Any, after: Any) -> None:
        deeper = self.rng.random() < 0.7
        if isinstance(before, dict) and isinstance(after, dict) and before and deeper:
            kept = [k for k in before if k in after]
            if list(after)[: len(kept)] != kept:
                # Field by field, kept fields stay where they are and new ones go last: a
                # document whose order that does not give is described whole (as MongoDB's
                # own diff does, so that applying it gives the same field order).
                self.updated.append((path, after))
                return
            self.document(path + ".", before, after)
        elif isinstance(before, list) and isinstance(after, list) and deeper:
            self.array(path, before, after)
        else:
            self.updated.append((path, after))

    def array(self, path: str, before: list[Any], after: list[Any]) -> None:
        if len(after) < len(before) and not self.truncation:
            self.updated.append((path, after))
            return
        if len(after) < len(before):
            self.truncated.append((path, len(after)))
        for i, (old, new) in enumerate(zip(before, after, strict=False)):
            if not same(old, new):
                self.value(f"{path}.{i}", old, new)
        appended = after[len(before) :]
        if len(appended) > 1 and all(v is None for v in appended[:-1]) and self.rng.random() < 0.5:
            # $set of an index past the end: MongoDB pads, the description may name the last.
            self.updated.append((f"{path}.{len(after) - 1}", appended[-1]))
        else:
            self.updated += [(f"{path}.{len(before) + i}", v) for i, v in enumerate(appended)]


def describe(
    before: dict[str, Any], after: dict[str, Any], rng: random.Random
) -> tuple[list[tuple[str, Any]], list[str], list[tuple[str, int]], dict[str, Any]]:
    """``(updatedFields, removedFields, truncatedArrays, oplog patch)`` of one update."""
    stream = _Describer(rng, truncation=rng.random() < 0.7)
    stream.document("", before, after)
    oplog = _Describer(rng, truncation=False)
    oplog.document("", before, after)
    patch: dict[str, Any] = {"$v": Int32(1)} if rng.random() < 0.8 else {}
    sets = dict(oplog.updated)
    unsets = dict.fromkeys(oplog.removed, True)
    for path, value in list(sets.items()):
        last = path.rsplit(".", 1)[-1]
        if value is None and _is_index(last) and _get(before, path) is not None:
            if rng.random() < 0.5:  # an $unset array element: null either way
                del sets[path]
                unsets[path] = True
    if sets:
        patch["$set"] = sets
    if unsets:
        patch["$unset"] = unsets
    return stream.updated, stream.removed, stream.truncated, patch


# --- the collection ----------------------------------------------------------------------------


def identity(value: Any) -> Any:
    """``_id`` identity as MongoDB's ``_id`` index sees it (numbers by value)."""
    if isinstance(value, Int32 | Int64):
        return ("number", value.value)
    if isinstance(value, Double):
        return ("number", value.value)
    return freeze(value)


class MongoCollection:
    """Ground truth of one collection, and the :class:`Change` of every write."""

    def __init__(self, db: str, name: str) -> None:
        self.db = db
        self.name = name
        self.documents: dict[Any, dict[str, Any]] = {}

    def get(self, id_value: Any) -> dict[str, Any] | None:
        return self.documents.get(identity(id_value))

    def insert(self, document: dict[str, Any]) -> Change:
        if "_id" in document:  # _id first, as MongoDB stores it
            document = {"_id": document["_id"], **document}
        key = identity(document["_id"])
        assert key not in self.documents, "duplicate _id"
        self.documents[key] = copy.deepcopy(document)
        return Change("insert", document["_id"], None, copy.deepcopy(document))

    def replace(self, id_value: Any, document: dict[str, Any]) -> Change:
        before = self.documents[identity(id_value)]
        after = {"_id": before["_id"], **{k: v for k, v in document.items() if k != "_id"}}
        self.documents[identity(id_value)] = copy.deepcopy(after)
        return Change("replace", before["_id"], before, copy.deepcopy(after))

    def update(self, id_value: Any, ops: list[UpdateOp], rng: random.Random) -> Change:
        before = self.documents[identity(id_value)]
        after = apply_update(before, ops)
        self.documents[identity(id_value)] = after
        updated, removed, truncated, patch = describe(before, after, rng)
        return Change(
            "update",
            before["_id"],
            before,
            copy.deepcopy(after),
            updated=updated,
            removed=removed,
            truncated=truncated,
            patch=patch,
        )

    def delete(self, id_value: Any) -> Change:
        before = self.documents.pop(identity(id_value))
        return Change("delete", before["_id"], before, None)


# --- random updates ----------------------------------------------------------------------------


def _random_path(rng: random.Random, document: dict[str, Any], top: str) -> tuple[str, Any]:
    """A path under top-level field ``top`` (existing or one level new) and what it holds."""
    path, node = top, document.get(top)
    while rng.random() < 0.6:
        if isinstance(node, dict) and node:
            name = rng.choice([*node, "new"])
            path, node = f"{path}.{name}", node.get(name)
        elif isinstance(node, list) and node:
            index = rng.randrange(len(node) + 2)  # past the end pads with nulls
            path = f"{path}.{index}"
            node = node[index] if index < len(node) else None
        elif node is None and rng.random() < 0.2 and top not in document:
            path, node = f"{path}.0", None  # creates the document field "0"
        else:
            break
    return path, node


def _incrementable(node: Any) -> bool:
    if isinstance(node, Int64):
        return abs(node.value) < 2**62  # MongoDB refuses an $inc that overflows Int64
    return node is None or isinstance(node, Int32 | Double)


def random_update(
    rng: random.Random, document: dict[str, Any], int64: bool = True
) -> list[UpdateOp]:
    """One to three operators on distinct top-level fields of ``document``.

    Without ``int64`` no operator writes an Int64 value, except an ``$inc`` of ``count``.
    """
    names = sorted({n for n in [*document, *FIELD_NAMES] if n not in ("_id", COUNTER)})
    ops: list[UpdateOp] = []
    arrays = [n for n in names if isinstance(document.get(n), list)]
    if arrays and rng.random() < 0.4:  # shrink, grow or edit an array: the hard encodings
        names.remove(top := rng.choice(arrays))
        node = document[top]
        ops.append(("$pop", top, rng.choice([1, -1])) if node and rng.random() < 0.6 else
                   ("$push", top, random_value(rng, 2, int64)))  # fmt: skip
    if COUNTER in document and rng.random() < 0.4:
        ops.append(("$inc", COUNTER, rng.choice([Int32(rng.randint(-3, 3)), Int64(2)])))
    for top in rng.sample(names, min(len(names), rng.randrange(0 if ops else 1, 4))):
        path, node = _random_path(rng, document, top)
        parent = _get(document, path.rsplit(".", 1)[0]) if "." in path else document
        roll = rng.random()
        if isinstance(node, list):
            if roll < 0.35:
                ops.append(("$push", path, random_value(rng, 2, int64)))
            elif roll < 0.7 and node:
                ops.append(("$pop", path, rng.choice([1, -1])))
            elif roll < 0.8:
                ops.append(("$unset", path, ""))
            else:
                ops.append(("$set", path, random_value(rng, 1, int64)))
        elif roll < 0.15 and node is not None:
            ops.append(("$unset", path, ""))
        elif roll < 0.35 and _incrementable(node):
            small = [Int32(rng.randint(-3, 3)), Double(0.5)]
            by = rng.choice([*small, Int64(rng.randint(-3, 3))] if int64 else small)
            if isinstance(node, Int32) and rng.random() < 0.3:
                by = Int32(INT32_MAX)  # overflows into Int64
            ops.append(("$inc", path, by))
        elif roll < 0.45 and node is None and isinstance(parent, dict):
            ops.append(("$push", path, random_value(rng, 2, int64)))
        else:
            ops.append(("$set", path, random_value(rng, 1, int64)))
    return ops


def random_id(rng: random.Random, serial: int) -> Any:
    """A fresh ``_id`` of one of the usual types (unique by ``serial``)."""
    kind = serial % 6
    if kind == 0:
        return Int32(serial)
    if kind == 1:
        return Int64(2**40 + serial)
    if kind == 2:
        return ObjectId(f"{serial:024x}")
    if kind == 3:
        return f"id-{serial}-" + "".join(rng.choice(string.ascii_letters) for _ in range(3))
    if kind == 4:
        return {"region": "eu", "n": Int32(serial)}
    return Double(serial + 0.5)
