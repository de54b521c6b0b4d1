"""How the bronze writer lays out its Parquet files: the codec, and per column whether the
writer tries a dictionary and keeps statistics.

Bronze files are dominated by two columns, ``key_json`` and ``value_json``: JSON text, hundreds
of bytes a row, nearly every value distinct. Parquet's defaults suit them badly:

* a **dictionary** is attempted for every column and abandoned once it outgrows its page
  limit, after the values were hashed: pure cost for unique values;
* **statistics** (min/max per page and row group, and the min/max delta-rs copies into the
  Delta log's ``add.stats``) are compared value by value and stored in full: useful only for a
  reader that prunes files or row groups by that column, and no reader of bronze does by these
  (silver reads every new row; ``medallion status``, reconciliation, gold and
  :meth:`bronze.writer.BronzeWriter.last_committed` filter by ``source``, ``kind``,
  ``agent_id``, ``batch_seq``, ``position`` and whether ``batch_offset`` is null).

So the JSON columns (and the quarantine's raw bytes and reason, and the registry's schema
text) are written without dictionary and statistics; ``position`` without a dictionary (every
value is distinct) but with its statistics (gold prunes by position); every other column keeps
Parquet's defaults, so the columns readers filter on keep their statistics. The codec is
``lz4_raw`` by default: measured on pgbench snapshot batches it costs the least CPU of the
codecs Spark (parquet-mr, since 3.4), delta-rs and pyarrow all read (docs/benchmarks.md,
"PostgreSQL capture agent", 2026-11-29 bronze write). A table written before keeps its older
files: readers take files of any codec and any dictionary/statistics choice side by side.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias

from bronze import schema as S

if TYPE_CHECKING:
    from deltalake import WriterProperties

__all__ = [
    "DEFAULT_COMPRESSION",
    "ParquetCompression",
    "events_properties",
    "quarantine_properties",
    "schemas_properties",
]


ParquetCompression: TypeAlias = Literal["lz4_raw", "zstd", "snappy", "gzip", "uncompressed"]
"""The Parquet codecs bronze may write (``bronze.parquet.compression``), spelled as Spark's
``spark.sql.parquet.compression.codec`` spells them. Every one is read by Spark, delta-rs and
pyarrow; Hadoop's framed ``lz4`` is left out (readers disagree about its framing). ``zstd`` is
written at level 1, its fastest."""

DEFAULT_COMPRESSION: Final[ParquetCompression] = "lz4_raw"
"""The codec of new bronze files unless the config names another."""

_ZSTD_LEVEL: Final = 1
"""zstd's fastest level: the landing path is CPU-bound, compaction may recompress later."""

_DELTA_RS_CODECS: Final[dict[ParquetCompression, Any]] = {
    "lz4_raw": "LZ4_RAW",
    "zstd": "ZSTD",
    "snappy": "SNAPPY",
    "gzip": "GZIP",
    "uncompressed": "UNCOMPRESSED",
}

_UNPRUNED_TEXT: Final = (S.KEY_JSON, S.VALUE_JSON)
"""Large, nearly unique text no reader filters by: no dictionary, no statistics."""
_UNIQUE_FILTERED: Final = (S.POSITION,)
"""Unique per row but filtered on: no dictionary, statistics kept."""


def events_properties(compression: ParquetCompression = DEFAULT_COMPRESSION) -> WriterProperties:
    """The Parquet writer properties of ``bronze/events`` files.

    Args:
        compression: The codec.

    Returns:
        delta-rs writer properties.
    """
    return _properties(compression, plain=_UNPRUNED_TEXT, no_dictionary=_UNIQUE_FILTERED)


def quarantine_properties(
    compression: ParquetCompression = DEFAULT_COMPRESSION,
) -> WriterProperties:
    """The Parquet writer properties of ``bronze/quarantine`` files (raw bytes and reasons are
    never filtered on)."""
    return _properties(compression, plain=(S.RAW, S.REASON), no_dictionary=())


def schemas_properties(compression: ParquetCompression = DEFAULT_COMPRESSION) -> WriterProperties:
    """The Parquet writer properties of ``bronze/schemas`` files (registry lookups filter by
    ``schema_id``, never by the schema's text)."""
    return _properties(compression, plain=(S.SCHEMA_JSON,), no_dictionary=())


def _properties(
    compression: ParquetCompression, *, plain: Iterable[str], no_dictionary: Iterable[str]
) -> WriterProperties:
    from deltalake import ColumnProperties, WriterProperties

    columns = {
        name: ColumnProperties(dictionary_enabled=False, statistics_enabled="NONE")
        for name in plain
    }
    columns.update({name: ColumnProperties(dictionary_enabled=False) for name in no_dictionary})
    return WriterProperties(
        compression=_DELTA_RS_CODECS[compression],
        compression_level=_ZSTD_LEVEL if compression == "zstd" else None,
        column_properties=columns,
    )
