"""SQL functions medallion registers in every SparkSession it builds."""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["register_functions", "position_json"]


def position_json(connector: str | None, position: bytes | bytearray | None) -> str | None:
    """The readable JSON of a bronze ``position`` (what the bytes encode).

    Args:
        connector: The row's ``connector`` column.
        position: The row's ``position`` column.

    Returns:
        JSON text, or None for null input.
    """
    if connector is None or position is None:
        return None
    from bronze.positions import decode_position

    return orjson.dumps(decode_position(connector, bytes(position)).to_json()).decode()


def register_functions(spark: Any) -> None:
    """Register ``medallion_position(connector, position)`` for Spark SQL and notebooks."""
    spark.udf.register("medallion_position", position_json, "string")
