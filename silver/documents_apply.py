"""Apply MongoDB change events to documents: the pure-Python half of silver for MongoDB.

:func:`document_id` names the document an event changes; :func:`fold` applies one document's
events of a micro-batch, in position order, to the document silver holds, and returns the
document after each event (a full image the MERGE can apply) and the events it refused.

Event shapes (``op`` / what the envelope carries -> what is applied):

* ``c``, ``r``, and ``u`` with ``after`` (a change-stream replace, or any update under
  ``capture.mode=change_streams_update_full*``): the ``after`` document replaces silver's.
* ``u`` with ``patch`` (Debezium 1.x, the oplog entry): a document without update operators is a
  replacement; else ``$set`` (dotted paths into documents and arrays, creating missing documents
  and padding arrays with nulls) and ``$unset`` (an array element becomes null), as MongoDB
  applies them; ``$v: 1`` is ignored.
* ``u`` with ``updateDescription`` (Debezium 2.x+): ``truncatedArrays`` (arrays cut to ``size``),
  then ``updatedFields`` (``$set`` semantics), then ``removedFields`` (``$unset`` semantics).
* ``d``: the document is gone; the tombstone row holds the pre-image (``before``) when the
  connector captured one, else ``{"_id": ...}``, like a relational delete's key-only image.

An update needs the document it changes. It is refused (quarantined) when silver holds none
("for a document silver does not hold"), holds a deleted one, or holds one it could not keep
complete: an event whose ``after``/``patch``/``updateDescription`` cannot be applied is refused,
and the document it would have changed is marked stale (``document_stale`` says since which
event and why) until a full document (create, read, replace, ``after``) or a delete arrives.
Silver never holds a partial document as if it were whole.

Events at or below the position silver holds are replays or late older events: no-ops.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import orjson

from silver.documents_ejson import (
    EjsonError,
    PlainInt,
    Scalar,
    dumps,
    id_text,
    is_document,
    parse,
    parse_document,
    type_name,
)

__all__ = [
    "Event",
    "Image",
    "Refusal",
    "Stored",
    "UpdateError",
    "apply_patch",
    "apply_update_description",
    "document_id",
    "fold",
    "set_path",
    "unset_path",
]

_MISSING: Final = object()
NO_DOCUMENT: Final = (
    "MongoDB update for a document silver does not hold (no create, snapshot read or full "
    "document before it)"
)
DELETED_DOCUMENT: Final = "MongoDB update for a document that was deleted before it"
STALE_DOCUMENT: Final = "MongoDB update of a document silver could not keep complete"


class UpdateError(ValueError):
    """An update that cannot be applied to the document (the event is refused)."""


# --- paths -------------------------------------------------------------------------------------


def _parts(path: Any) -> list[str]:
    if not isinstance(path, str) or not path:
        raise UpdateError(f"field path must be a non-empty string, got {json.dumps(path)}")
    parts = path.split(".")
    if "" in parts:
        raise UpdateError(f"field path '{path}' has an empty field name")
    return parts


def _index(part: str) -> int | None:
    return int(part) if part.isascii() and part.isdigit() else None


def _is_container(value: Any) -> bool:
    return is_document(value) or isinstance(value, list)


def _hinted(value: Any, old: Any) -> Any:
    # Relaxed Extended JSON writes Int64 as a plain number: a plain integer replacing an Int64
    # (an $inc of a NumberLong counter, the common case) keeps the Int64 type.
    if isinstance(value, PlainInt) and isinstance(old, Scalar) and "$numberLong" in old:
        return Scalar({"$numberLong": value["$numberInt"]})
    return value


def _array_index(part: str, path: str) -> int:
    index = _index(part)
    if index is None:
        raise UpdateError(f"cannot use the part '{part}' of '{path}' to traverse an array")
    return index


def _descend(node: Any, part: str, path: str) -> Any:
    """The container at ``part`` of ``node``, created (document, padded array) when missing."""
    if isinstance(node, list):
        index = _array_index(part, path)
        if index >= len(node):
            node.extend([None] * (index - len(node)))
            node.append({})
        child = node[index]
    else:
        if part not in node:
            node[part] = {}
        child = node[part]
    if not _is_container(child):
        raise UpdateError(
            f"cannot create a field under '{part}' of '{path}': it holds a {type_name(child)}"
        )
    return child


def set_path(document: dict[str, Any], path: str, value: Any, *, hint: bool = False) -> None:
    """``$set`` one dotted path in place, as MongoDB does.

    Missing documents on the way are created; an array index past the end pads the array with
    nulls; an existing field keeps its place, a new one goes last.

    Args:
        document: The document, changed in place.
        path: Dotted field path (``a.b``, ``items.1.qty``).
        value: The new value (parsed Extended JSON).
        hint: ``value`` was read from relaxed Extended JSON: a plain integer replacing an Int64
            stays an Int64.

    Raises:
        UpdateError: The path crosses a value that is not a document or array, or uses a field
            name to index an array.
    """
    parts = _parts(path)
    node: Any = document
    for part in parts[:-1]:
        node = _descend(node, part, path)
    last = parts[-1]
    if isinstance(node, list):
        index = _array_index(last, path)
        if index < len(node):
            node[index] = _hinted(value, node[index]) if hint else value
        else:
            node.extend([None] * (index - len(node)))
            node.append(value)
    else:
        node[last] = _hinted(value, node.get(last, _MISSING)) if hint else value


def _lookup(document: dict[str, Any], parts: Sequence[str]) -> Any:
    node: Any = document
    for part in parts:
        if isinstance(node, list):
            index = _index(part)
            if index is None or index >= len(node):
                return _MISSING
            node = node[index]
        elif is_document(node):
            node = node.get(part, _MISSING)
            if node is _MISSING:
                return _MISSING
        else:
            return _MISSING
    return node


def unset_path(document: dict[str, Any], path: str) -> None:
    """``$unset`` one dotted path in place: a field is removed, an array element becomes null;
    a path that does not exist changes nothing (as in MongoDB)."""
    parts = _parts(path)
    node = _lookup(document, parts[:-1])
    last = parts[-1]
    if isinstance(node, list):
        index = _index(last)
        if index is not None and index < len(node):
            node[index] = None
    elif is_document(node):
        node.pop(last, None)


def _truncate(document: dict[str, Any], path: str, size: Any) -> None:
    target = _lookup(document, _parts(path))
    if not isinstance(target, list):
        held = "nothing" if target is _MISSING else f"a {type_name(target)}"
        raise UpdateError(f"truncatedArrays names '{path}', where silver holds {held}")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise UpdateError(f"truncatedArrays size of '{path}' must be a count, got {size!r}")
    if size > len(target):
        raise UpdateError(
            f"truncatedArrays cuts '{path}' to {size} elements, silver holds {len(target)}"
        )
    del target[size:]


# --- update shapes -----------------------------------------------------------------------------


def _is_replacement(patch: Mapping[str, Any]) -> bool:
    operators = [k for k in patch if k.startswith("$")]
    if operators and len(operators) != len(patch):
        fields = [k for k in patch if not k.startswith("$")]
        raise UpdateError(f"patch mixes update operators {operators} with fields {fields}")
    return not operators


def apply_patch(document: dict[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """Apply a Debezium 1.x ``patch`` (MongoDB's oplog update) to a copy of ``document``.

    Args:
        document: The document before the update.
        patch: The parsed patch with update operators (a replacement is handled by the caller).

    Returns:
        The updated copy (``document`` is left as it was, also on error).

    Raises:
        UpdateError: An operator the oplog does not write, the oplog's delta format
            (``$v: 2``), or a path that cannot be applied.
    """
    updated = copy.deepcopy(document)
    for operator, argument in patch.items():
        if operator == "$v":
            if argument != {"$numberInt": "1"}:
                raise UpdateError(
                    f"patch in the oplog's update format $v {id_text(argument)} (MongoDB 5.0+ "
                    "delta updates); silver applies $v 1 patches: capture MongoDB 5.0+ with "
                    "change streams"
                )
            continue
        if operator not in ("$set", "$unset"):
            raise UpdateError(f"patch operator {operator} is not one MongoDB's oplog writes")
        if not is_document(argument):
            raise UpdateError(f"patch {operator} must be a document, got {type_name(argument)}")
        for path, value in argument.items():
            if operator == "$set":
                set_path(updated, path, value)
            else:
                unset_path(updated, path)
    return updated


def apply_update_description(
    document: dict[str, Any], description: Mapping[str, Any]
) -> dict[str, Any]:
    """Apply a change stream's ``updateDescription`` (as Debezium writes it) to a copy.

    Args:
        document: The document before the update.
        description: ``{"removedFields": [..] | null, "updatedFields": "<JSON>" | null,
            "truncatedArrays": [{"field", "size"}] | null}``.

    Returns:
        The updated copy (``document`` is left as it was, also on error).

    Raises:
        UpdateError: A malformed part, or one that does not fit the document.
    """
    removed = description.get("removedFields")
    truncated = description.get("truncatedArrays")
    text = description.get("updatedFields")
    if removed is not None and not isinstance(removed, list):
        raise UpdateError(f"removedFields must be an array, got {json.dumps(removed)}")
    if truncated is not None and not isinstance(truncated, list):
        raise UpdateError(f"truncatedArrays must be an array, got {json.dumps(truncated)}")
    try:
        fields = {} if text is None else parse_document(text, "updatedFields")
    except EjsonError as exc:
        raise UpdateError(str(exc)) from None
    updated = copy.deepcopy(document)
    for cut in truncated or ():
        if not isinstance(cut, dict) or set(cut) != {"field", "size"}:
            raise UpdateError(f"truncatedArrays entries are {{field, size}}, got {cut!r}")
        _truncate(updated, cut["field"], cut["size"])
    for path, value in fields.items():
        set_path(updated, path, value, hint=True)
    for path in removed or ():
        unset_path(updated, path)
    return updated


# --- identity ----------------------------------------------------------------------------------


def _record_key_id(key_json: str | None) -> tuple[Any, str | None]:
    """The ``_id`` the record key names, or (missing, why not)."""
    if key_json is None:
        return _MISSING, None
    try:
        key = orjson.loads(key_json)
    except orjson.JSONDecodeError as exc:
        return _MISSING, f"record key is not JSON: {exc}"
    if isinstance(key, dict) and set(key) == {"schema", "payload"}:
        key = key["payload"]
    text = key.get("id") if isinstance(key, dict) else None
    if not isinstance(text, str):
        return _MISSING, f"record key {key_json} has no string 'id'"
    try:
        return parse(text), None
    except EjsonError as exc:
        return _MISSING, f"record key id {text!r} is not Extended JSON: {exc}"


def document_id(key_json: str | None, payload: Mapping[str, Any]) -> tuple[str, Any]:
    """Name the document an event changes.

    The ``_id`` is read from ``after``, ``before`` and ``filter`` (exactly typed) and the record
    key (Debezium writes it in relaxed Extended JSON, which cannot tell Int32 from Int64); all
    that are present must name the same document.

    Args:
        key_json: The record key as bronze holds it (``{"id": "<Extended JSON>"}``), or None.
        payload: The event's value payload.

    Returns:
        The silver key (``{"id":"<identity text>"}``, :func:`~silver.documents_ejson.id_text`)
        and the ``_id`` value, from the most exactly typed source.

    Raises:
        EjsonError: No ``_id`` anywhere, or two that disagree.
    """
    found: list[tuple[str, Any]] = []
    for image in ("after", "before", "filter"):
        text = payload.get(image)
        if isinstance(text, str):
            try:
                document = parse_document(text, image)
            except EjsonError:
                continue  # the fold refuses the event with the reason
            if "_id" in document:
                found.append((f"{image}._id", document["_id"]))
    key_id, why = _record_key_id(key_json)
    if key_id is not _MISSING:
        found.append(("record key", key_id))
    if not found:
        raise EjsonError(
            "MongoDB event names no document: no _id in after, before or filter, and "
            + (why or "no record key")
        )
    names = {id_text(value) for _, value in found}
    if len(names) > 1:
        listed = ", ".join(f"{where} {id_text(value)}" for where, value in found)
        raise EjsonError(f"MongoDB event names two documents: {listed}")
    return "{" + f'"id":{json.dumps(names.pop(), ensure_ascii=False)}' + "}", found[0][1]


# --- the fold ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Event:
    """One change event of a document, as the fold needs it.

    Attributes:
        position: Bronze position (source order).
        op: ``c``, ``u``, ``d`` or ``r``.
        payload: The envelope's value payload (parsed JSON).
        id_value: The document's ``_id`` (:func:`document_id`).
        ref: Anything the caller needs back with the event's results.
    """

    position: bytes
    op: str
    payload: Mapping[str, Any]
    id_value: Any
    ref: Any = None


@dataclass(frozen=True, slots=True)
class Stored:
    """The row silver holds for the document.

    Attributes:
        position: Position of the change that wrote it.
        deleted: A tombstone row.
        document: Canonical Extended JSON of the document (the pre-image or ``{_id}`` of a
            tombstone).
        stale: Why the document is not complete (null when it is).
    """

    position: bytes
    deleted: bool
    document: str | None
    stale: str | None


@dataclass(frozen=True, slots=True)
class Image:
    """The document after one applied event: a full row for the MERGE."""

    event: Event
    document: str
    """Canonical Extended JSON of the document (a tombstone's: its pre-image or ``{_id}``)."""
    deleted: bool
    stale: str | None


@dataclass(frozen=True, slots=True)
class Refusal:
    """An event the fold refused, with the reason (quarantined by the caller)."""

    event: Event
    reason: str


def _full_document(event: Event, image: str) -> dict[str, Any]:
    document = parse_document(event.payload.get(image), image)
    if "_id" not in document:
        document = {"_id": event.id_value, **document}
    return document


def _delete_image(event: Event) -> dict[str, Any]:
    before = event.payload.get("before")
    if before is not None:
        try:
            return _full_document(event, "before")
        except EjsonError:
            pass  # the pre-image is informational: the delete itself is known
    return {"_id": event.id_value}


def _update(event: Event, document: dict[str, Any] | None) -> dict[str, Any] | None:
    """The document after a ``u`` event, or None when it needs a document silver lacks."""
    payload = event.payload
    if payload.get("after") is not None:
        return _full_document(event, "after")
    patch_text = payload.get("patch")
    if patch_text is not None:
        try:
            patch = parse_document(patch_text, "patch")
        except EjsonError as exc:
            raise UpdateError(str(exc)) from None
        if _is_replacement(patch):
            return patch if "_id" in patch else {"_id": event.id_value, **patch}
        return None if document is None else apply_patch(document, patch)
    description = payload.get("updateDescription")
    if description is not None:
        if not isinstance(description, dict):
            raise UpdateError(f"updateDescription must be an object, got {description!r}")
        return None if document is None else apply_update_description(document, description)
    raise UpdateError("MongoDB update carries none of after, patch and updateDescription")


def fold(stored: Stored | None, events: Sequence[Event]) -> tuple[list[Image], list[Refusal]]:
    """Apply one document's events, in position order, to the row silver holds.

    Args:
        stored: Silver's row for the document, or None.
        events: The micro-batch's events of the document, in any order.

    Returns:
        The document after each applied event (the last is the new row), and the refused
        events with their reasons. Events at or below the held position are no-ops.
    """
    held = stored.position if stored is not None else None
    deleted = stored is not None and stored.deleted
    stale = stored.stale if stored is not None else None
    document: dict[str, Any] | None = None
    if stored is not None and not deleted and stored.document is not None:
        document = parse_document(stored.document, "silver's stored document")
    images: list[Image] = []
    refusals: list[Refusal] = []
    for event in sorted(events, key=lambda e: e.position):
        if held is not None and event.position <= held:
            continue  # a replay, or older than what silver holds
        try:
            if event.op in ("c", "r"):
                after: dict[str, Any] | None = _full_document(event, "after")
            elif event.op == "u":
                after = _update(event, None if stale else document)
                if after is None:
                    reason = STALE_DOCUMENT + f" ({stale})" if stale and document else None
                    refusals.append(
                        Refusal(event, reason or (DELETED_DOCUMENT if deleted else NO_DOCUMENT))
                    )
                    continue
            elif event.op == "d":
                held, deleted, stale, document = event.position, True, None, None
                images.append(Image(event, dumps(_delete_image(event)), True, None))
                continue
            else:
                refusals.append(Refusal(event, f"op '{event.op}' is not a MongoDB document change"))
                continue
        except (UpdateError, EjsonError) as exc:
            reason = f"MongoDB {event.op} event cannot be applied: {exc}"
            refusals.append(Refusal(event, reason))
            if document is not None and not stale:
                # The document is no longer known: kept, but marked, until a full image comes.
                stale = f"since position {event.position.hex()}: {reason}"
                held = event.position
                images.append(Image(event, dumps(document), False, stale))
            continue
        held, deleted, stale, document = event.position, False, None, after
        images.append(Image(event, dumps(after), False, None))
    return images, refusals
