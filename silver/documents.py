"""Silver for MongoDB: one Delta table per collection, one row per ``_id``, holding the document.

Relational silver decodes each event's row image with its Connect schema; a MongoDB event
carries a document as Extended JSON text, and an update carries only the change (Debezium 1.x
``patch``, 2.x+ ``updateDescription``), which needs the document silver already holds. So
:func:`apply_documents` (called by :class:`silver.job.SilverJob` for collections of the
``mongodb`` connector):

1. names each event's document (:func:`silver.documents_apply.document_id`, a pandas UDF); an
   event that names none, or two, is quarantined;
2. reads the rows silver holds for those documents and folds each document's events in
   position order onto its row (:func:`silver.documents_apply.fold`, grouped by document with
   ``applyInPandas``), giving the full document after each event;
3. quarantines the refused events (kind ``event``, reason), then applies the documents with
   :func:`silver.merge.apply_changes` exactly like relational row images: position guard,
   tombstones, purge horizon, Delta app transactions (and SCD2 history when configured).

Table columns: the ``_cdc_*`` metadata of every silver table (``_cdc_key`` is
``{"id":"<identity of the _id>"}``), plus ``_id`` and ``document`` (canonical Extended JSON v2 of
the ``_id`` and of the whole document; see docs/silver-mongodb.md for why), and
``document_stale`` (null while the document is complete; else since which event and why not).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Final

import orjson
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bronze import schema as B
from bronze.storage import LakePath
from silver import merge as M
from silver import quarantine as Q
from silver import scd2 as S

if TYPE_CHECKING:
    from silver.job import SilverJob

__all__ = [
    "DATA_COLUMNS",
    "DOCUMENT",
    "DOCUMENT_CONNECTORS",
    "ID",
    "STALE",
    "apply_documents",
    "is_document_collection",
]

logger = logging.getLogger(__name__)

DOCUMENT_CONNECTORS: Final = frozenset({"mongodb"})
"""Connectors whose events carry documents (applied here, not by row decoding)."""
ID: Final = "_id"
"""Canonical Extended JSON of the document's ``_id``."""
DOCUMENT: Final = "document"
"""Canonical Extended JSON of the whole document."""
STALE: Final = "document_stale"
"""Null while silver's document is complete; else since which event and why it is not."""
DATA_COLUMNS: Final = (ID, DOCUMENT, STALE)

_REASON = "__reason"
_KIND = "__kind"
_EVENT_ID = "__id"
_KEY_ERROR = "__key_error"
_STORED = "stored"
_EVENT = "event"
_IMAGE = "image"
_REFUSAL = "refusal"
_TRUNCATE = (
    "op 't' (truncate) in a MongoDB collection: MongoDB connectors write none, silver has no "
    "meaning for it"
)

_FOLD_OUTPUT = (
    f"{_KIND} string, {M.KEY} string, {M.POSITION} binary, {M.OP} string, {ID} string, "
    f"{DOCUMENT} string, {STALE} string, {M.SOURCE_TS} bigint, {M.TX_ID} string, "
    f"{M.BRONZE_BATCH} string, {M.ORIGIN} string, {_REASON} string"
)
_OUTPUT_COLUMNS = [c.split(" ")[0] for c in _FOLD_OUTPUT.split(", ")]


def is_document_collection(events: DataFrame) -> bool:
    """Whether these bronze rows (one collection) come from a document connector."""
    return bool(events.where(F.col(B.CONNECTOR).isin(*DOCUMENT_CONNECTORS)).limit(1).count())


# --- Python side (runs in Spark's Python workers) ---------------------------------------------


def _name_documents(batches: Iterator[Any]) -> Iterator[Any]:
    """mapInPandas: each event's silver key and ``_id``, or why it names no document."""
    import pandas as pd  # type: ignore[import-untyped]

    from silver.documents_apply import document_id
    from silver.documents_ejson import EjsonError, dumps

    for frame in batches:
        keys: list[str | None] = []
        ids: list[str | None] = []
        errors: list[str | None] = []
        for key_json, value_json in zip(frame[B.KEY_JSON], frame[B.VALUE_JSON], strict=True):
            try:
                payload = orjson.loads(value_json) if value_json is not None else {}
                key, id_value = document_id(key_json, payload if isinstance(payload, dict) else {})
            except (EjsonError, orjson.JSONDecodeError) as exc:
                keys.append(None)
                ids.append(None)
                errors.append(str(exc))
                continue
            keys.append(key)
            ids.append(dumps(id_value))
            errors.append(None)
        yield frame.assign(
            **{M.KEY: pd.Series(keys, dtype=object, index=frame.index)},
            **{_EVENT_ID: pd.Series(ids, dtype=object, index=frame.index)},
            **{_KEY_ERROR: pd.Series(errors, dtype=object, index=frame.index)},
        )


def _fold_document(frame: Any) -> Any:
    """applyInPandas: one document's stored row and events -> images and refusals."""
    import pandas as pd

    from silver.documents_apply import Event, Stored, fold
    from silver.documents_ejson import parse

    stored: Stored | None = None
    events: list[Event] = []
    rows = frame.to_dict("records")
    if rows[0][M.KEY] is None:  # events that name no document (or a truncate): refused
        return pd.DataFrame(
            [{**_emitted(row), _KIND: _REFUSAL, _REASON: _unnamed_reason(row)} for row in rows],
            columns=_OUTPUT_COLUMNS,
        )
    for i, row in enumerate(rows):
        if row[_KIND] == _STORED:
            stored = Stored(bytes(row[M.POSITION]), bool(row[M.DELETED]), row[DOCUMENT], row[STALE])
        else:
            payload = orjson.loads(row[B.VALUE_JSON])
            position = bytes(row[M.POSITION])
            events.append(Event(position, row[M.OP], payload, parse(row[_EVENT_ID]), i))
    images, refusals = fold(stored, events)

    out = [
        {**_emitted(rows[i.event.ref]), _KIND: _IMAGE, DOCUMENT: i.document, STALE: i.stale}
        for i in images
    ] + [{**_emitted(rows[r.event.ref]), _KIND: _REFUSAL, _REASON: r.reason} for r in refusals]
    return pd.DataFrame(out, columns=_OUTPUT_COLUMNS)


def _emitted(row: dict[str, Any]) -> dict[str, Any]:
    """The output columns an event carries through the fold."""
    ts = row[M.SOURCE_TS]
    return {
        **{c: row[c] for c in (M.KEY, M.POSITION, M.OP, M.TX_ID, M.BRONZE_BATCH, M.ORIGIN)},
        # pandas holds a bigint column with nulls as floats (NaN for null).
        M.SOURCE_TS: None if ts is None or ts != ts else int(ts),
        ID: row[_EVENT_ID],
        DOCUMENT: None,
        STALE: None,
        _REASON: None,
    }


def _unnamed_reason(row: dict[str, Any]) -> str:
    return _TRUNCATE if row[M.OP] == "t" else str(row[_KEY_ERROR])


# --- Spark side --------------------------------------------------------------------------------


def _events(events: DataFrame) -> DataFrame:
    """The bronze rows as fold input, named (``_cdc_key``, ``__id``) or with ``__key_error``."""
    named = events.select(
        B.KEY_JSON,
        B.VALUE_JSON,
        F.col(B.POSITION).alias(M.POSITION),
        F.col(B.OP).alias(M.OP),
        F.col(B.SOURCE_TS_MS).alias(M.SOURCE_TS),
        F.col(B.TX_ID).alias(M.TX_ID),
        F.concat_ws("#", B.AGENT_ID, F.col(B.BATCH_SEQ).cast("string")).alias(M.BRONZE_BATCH),
        F.col(B.ORIGIN).alias(M.ORIGIN),
    )
    schema = (
        f"{B.KEY_JSON} string, {B.VALUE_JSON} string, {M.POSITION} binary, {M.OP} string, "
        f"{M.SOURCE_TS} bigint, {M.TX_ID} string, {M.BRONZE_BATCH} string, {M.ORIGIN} string, "
        f"{M.KEY} string, {_EVENT_ID} string, {_KEY_ERROR} string"
    )
    return named.mapInPandas(_name_documents, schema)


def _quarantine(
    spark: SparkSession,
    silver_root: LakePath,
    refused: DataFrame,
    *,
    source: str,
    collection: str,
    name: str,
    batch_id: int,
    version: int,
) -> None:
    """Append refused events (``__reason``) to ``silver/_quarantine`` as kind ``event`` rows,
    exactly once per (table, ``version``) (:func:`silver.quarantine.write`)."""
    Q.write(
        spark,
        silver_root,
        refused,
        source=source,
        collection=collection,
        app_id=f"medallion-silver:_quarantine:{name}",
        version=version,
        batch_id=batch_id,
    )


def apply_documents(
    job: SilverJob,
    events: DataFrame,
    source: str,
    collection: str,
    batch_id: int,
    steps_per_batch: int,
) -> None:
    """Apply one micro-batch's events of one MongoDB collection to its silver table.

    Args:
        job: The silver job (its session, lake, options and counters are used).
        events: The micro-batch's bronze data rows of the collection.
        source: Source name.
        collection: ``<db>.<collection>``.
        batch_id: Structured Streaming micro-batch id.
        steps_per_batch: App transaction versions per micro-batch and table (the job's).
    """
    from delta.tables import DeltaTable

    from silver.job import silver_table_name

    spark, silver_root, result = job.spark, job.silver, job.result
    options = job.table_options(source, collection)
    name = silver_table_name(source, collection)
    path = str(silver_root / name)
    app_id = f"medallion-silver:{name}"
    version = batch_id * steps_per_batch

    def quarantine(refused: DataFrame, quarantine_version: int, n: int) -> None:
        _quarantine(
            spark,
            silver_root,
            refused,
            source=source,
            collection=collection,
            name=name,
            batch_id=batch_id,
            version=quarantine_version,
        )
        result.quarantined += n
        logger.warning("silver: %s events of %s.%s quarantined", n, source, collection)

    rows = events.where(F.col(B.OP).isin("c", "u", "d", "r", "t"))
    named = _events(rows).localCheckpoint()
    read = named.count()
    fold_input = named.select(
        M.KEY,
        F.lit(_EVENT).alias(_KIND),
        M.POSITION,
        M.OP,
        B.VALUE_JSON,
        _EVENT_ID,
        F.lit(None).cast("boolean").alias(M.DELETED),
        F.lit(None).cast("string").alias(DOCUMENT),
        F.lit(None).cast("string").alias(STALE),
        M.SOURCE_TS,
        M.TX_ID,
        M.BRONZE_BATCH,
        M.ORIGIN,
        _KEY_ERROR,
    )
    if DeltaTable.isDeltaTable(spark, path):
        stored = (
            spark.read.format("delta")
            .load(path)
            .join(named.select(M.KEY).distinct(), M.KEY, "left_semi")
            .select(
                M.KEY,
                F.lit(_STORED).alias(_KIND),
                M.POSITION,
                M.OP,
                F.lit(None).cast("string").alias(B.VALUE_JSON),
                F.col(ID).alias(_EVENT_ID),
                M.DELETED,
                DOCUMENT,
                STALE,
                M.SOURCE_TS,
                M.TX_ID,
                M.BRONZE_BATCH,
                F.lit(None).cast("string").alias(M.ORIGIN),
                F.lit(None).cast("string").alias(_KEY_ERROR),
            )
        )
        fold_input = fold_input.unionByName(stored)
    folded = fold_input.groupBy(M.KEY).applyInPandas(_fold_document, _FOLD_OUTPUT).localCheckpoint()
    kinds = {r[0]: r[1] for r in folded.groupBy(_KIND).count().collect()}
    refused_count = kinds.get(_REFUSAL, 0)
    if refused_count:
        refused = folded.where(F.col(_KIND) == _REFUSAL)
        quarantine(refused, 2 * version, refused_count)
    changes = folded.where(F.col(_KIND) == _IMAGE).select(
        M.KEY,
        M.POSITION,
        M.OP,
        M.SOURCE_TS,
        M.TX_ID,
        M.BRONZE_BATCH,
        F.array().cast("array<string>").alias(M.UNAVAILABLE),
        M.ORIGIN,
        *DATA_COLUMNS,
    )

    def on_rejected(rejected: DataFrame) -> None:
        quarantine(rejected, 2 * version + 1, rejected.count())

    merged = M.apply_changes(
        spark,
        path,
        changes,
        DATA_COLUMNS,
        txn_app_id=app_id,
        txn_version=version,
        on_rejected=on_rejected,
    )
    if options.history:
        S.apply_history(
            spark,
            S.history_path(path),
            changes,
            DATA_COLUMNS,
            txn_app_id=f"{app_id}__history",
            txn_version=version,
        )
    result.events += read - refused_count
    result.merged.setdefault(name, []).append(merged)
