"""What a connector declares about its Debezium ``source`` block, as data.

Every connector's ``source`` block starts with the fields Debezium's ``SchemaFactory`` gives all
connectors (:mod:`bronze.connect_schema` writes those); what follows is the connector's own. Each
connector declares that part as a :class:`SourceBlock` on its position class
(``capture/<connector>/position.py``), and :func:`bronze.connect_schema.source_schema` builds the
Connect schema from it, so bronze holds no per-connector branches.

Plain data on purpose: the position modules import no schema builder (which would import them
back through the table of connectors).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["SCHEMA_TABLE", "SourceBlock", "SourceField"]


@dataclass(frozen=True, slots=True)
class SourceField:
    """One connector-specific field of the ``source`` block.

    Attributes:
        name: The field name as Debezium writes it.
        type: Its Connect primitive type (``"string"``, ``"int64"``, ...).
        optional: True for a nullable field; None keeps the primitive's default (required).
    """

    name: str
    type: str
    optional: bool | None = None


SCHEMA_TABLE: Final[tuple[SourceField, ...]] = (
    SourceField("schema", "string"),
    SourceField("table", "string"),
)
"""The ``schema``/``table`` pair the relational connectors (all but MySQL and MongoDB) put first."""


@dataclass(frozen=True, slots=True)
class SourceBlock:
    """The connector-specific part of a connector's ``source`` block.

    Attributes:
        schema_name: The Connect name of the block's struct (``io.debezium.connector.<x>.Source``).
        fields: The connector's own fields, after the common ones, in Debezium's order.
        emits_schema_changes: The connector writes schema-change records
            (``io.debezium.connector.<connector>.SchemaChangeValue``); logical decoding and the
            oplog carry no DDL, so PostgreSQL, YugabyteDB and MongoDB do not.
    """

    schema_name: str
    fields: tuple[SourceField, ...]
    emits_schema_changes: bool = True
