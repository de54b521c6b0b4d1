"""Gold views of tables whose source names no SQL literal can carry (found by the chaos run).

A Debezium-JSON record may name its table ``a\\u0000b``: bronze lands it, silver gives it a table
of its own, and registering its gold view put the name into a ``TBLPROPERTIES`` literal, where
a NUL raised ``ValueError`` and stopped every ``medallion run`` for every source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from gold.cuts import Cut, TableAtCut
from gold.views import register_views

pytestmark = [pytest.mark.spark, pytest.mark.delta]


def test_a_collection_name_with_a_nul_gets_its_view(spark: Any, tmp_path: Path) -> None:
    lake = tmp_path / "lake"
    name = "hostile__public__a_b_59b271ae1b"
    rows = pa.table({"id": [1, 2], "_cdc_key": ['{"id":"1"}', '{"id":"2"}']})
    rows = rows.append_column("_cdc_deleted", pa.array([False, True]))
    write_deltalake(str(lake / "silver" / name), rows)
    collection = "public.a\x00b"
    cut = Cut(
        source="hostile",
        silver_batch=0,
        position=b"\x01",
        source_ts_ms=1,
        tables={collection: TableAtCut(silver_table=name, collection=collection, version=0)},
    )

    assert register_views(spark, lake, [cut]) == [f"gold.{name}"]

    assert [tuple(r) for r in spark.sql(f"SELECT id FROM gold.{name}").collect()] == [(1,)]
    props = {r[0]: r[1] for r in spark.sql(f"SHOW TBLPROPERTIES gold.{name}").collect()}
    assert props["medallion.collection"] == "public.a\\u0000b"
