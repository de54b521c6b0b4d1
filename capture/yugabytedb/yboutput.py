"""YugabyteDB's row images: ``yboutput``'s ``{"value", "set"}`` columns, and no update ``before``.

YugabyteDB speaks pgoutput's protocol with both plugins (``yboutput`` is a fork of pgoutput), so
the messages decode with :mod:`capture.postgresql.pgoutput`. What differs is what the connector
makes of a row (seed 004, "Message formats for replica identities"; spec B3):

* ``yboutput`` wraps every column of ``before``/``after`` (snapshot rows too) as
  ``{"value": v, "set": true}``; a column the server did not send (pgoutput's ``u`` marker:
  under ``REPLICA IDENTITY CHANGE`` every column that did not change and is not in the primary
  key) is ``null``, never a ``{"value": null}``: silver keeps its stored value for it (see
  ``silver/types.py``, ``unwrap_set``). An explicit NULL is ``{"value": null, "set": true}``.
* ``pgoutput`` writes plain values, as PostgreSQL's connector does.
* Under ``CHANGE`` and ``DEFAULT`` an update has ``before: null`` (the PostgreSQL agent writes the
  key there); a delete's ``before`` holds the primary key only. ``FULL`` logs the whole old row.

Imports no driver.
"""

from __future__ import annotations

from typing import Any, ClassVar

from bronze import connect_schema as cs
from capture.captured_table import Image
from capture.postgresql.pgoutput import UNCHANGED_TOAST, Value
from capture.postgresql.schema import TableSchema

__all__ = ["NOT_SENT", "YbTableSchema", "YbWrappedTableSchema", "wrap_field"]

NOT_SENT: Any = object()
"""A column the server did not send (``u``), before wrapping turns it into ``null``."""


def wrap_field(field: dict[str, Any]) -> dict[str, Any]:
    """One column's Connect field as ``yboutput`` writes it: an optional struct of the value
    (optional, the column's schema and default) and a required boolean ``set``."""
    name = field["field"]
    value = {**field, "field": "value", "optional": True}
    return {
        "type": "struct",
        "optional": True,
        "field": name,
        "fields": [value, {"type": "boolean", "optional": False, "field": "set"}],
    }


class YbTableSchema(TableSchema):
    """A captured table of a ``pgoutput`` YugabyteDB slot: PostgreSQL's rows, YugabyteDB's
    ``before`` rule (no update ``before`` under ``CHANGE`` or ``DEFAULT``)."""

    def key_only_row(self, key: dict[str, Any] | None) -> dict[str, Any] | None:
        """YugabyteDB sends no before-image for an update under ``CHANGE`` or ``DEFAULT``: the
        ``before`` is null (seed 004), where PostgreSQL's agent writes the key."""
        return None


class YbWrappedTableSchema(YbTableSchema):
    """A captured table of a ``yboutput`` slot: every row column wrapped as ``{value, set}``.

    The key stays plain (seed 004's key example). Masks apply to the values before wrapping.
    """

    WRAPS: ClassVar[bool] = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        row = cs.struct(
            [wrap_field(f) for f in self.row_schema["fields"]], name=self.row_schema.get("name")
        )
        self.row_schema = row
        self.envelope_schema = cs.envelope_schema(
            self.topic,
            row,
            cs.source_schema("yugabytedb"),
            with_transaction=bool(kwargs["with_transaction"]),
        )
        self.envelope_schema_id = cs.schema_id(self.envelope_schema)
        self._row_names = tuple(self.names[i] for i in self.value_idx)

    def _convert(self, i: int, value: Value | Any) -> Any:
        if value is UNCHANGED_TOAST:
            return NOT_SENT
        return super()._convert(i, value)

    def _wrap(self, row: dict[str, Any]) -> dict[str, Any]:
        wrapped = {
            name: None
            if name not in row or row[name] is NOT_SENT
            else {"value": row[name], "set": True}
            for name in self._row_names
        }
        if isinstance(row, Image):
            image = Image(wrapped)
            image.issues = row.issues
            return image
        return wrapped

    def row(self, values: Any) -> dict[str, Any]:
        """The wrapped ``before``/``after`` payload of a row (columns not sent: ``null``)."""
        return self._wrap(super().row(values))

    def row_and_key(self, values: Any) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """The wrapped row and the plain key."""
        return self.row(values), self.key(values)

    def _masked_row(self, row: dict[str, Any]) -> dict[str, Any]:
        # A column not sent has no value to mask: it stays out of the masker and is put back.
        unsent = [name for name, value in row.items() if value is NOT_SENT]
        if not unsent:
            return super()._masked_row(row)
        sent = {k: v for k, v in row.items() if v is not NOT_SENT}
        if isinstance(row, Image):
            sent = Image(sent)
            sent.issues = row.issues
        masked = super()._masked_row(sent)
        for name in unsent:
            masked[name] = NOT_SENT
        return masked

    def identity_row(self, values: Any) -> dict[str, Any]:
        """A ``K`` old tuple: the primary key wrapped, every other column ``null``."""
        return self._wrap(super().identity_row(values))
