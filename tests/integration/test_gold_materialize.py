"""``gold.materialize``: gold as plain Delta tables read outside Spark (real PostgreSQL, Spark,
Delta; the materialized tables read back with ``deltalake`` into pandas)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd  # type: ignore[import-untyped]
import pytest
from deltalake import DeltaTable

from gold.materialize import MATERIALIZED_DIR, materialized_path
from gold.refresh import refresh_gold
from silver.job import SilverJob
from tests.integration import test_pg_capture
from tests.integration.test_gold_views import config_for
from tests.integration.test_pg_capture import Pg, land

pg = test_pg_capture.pg  # the fixture: one private schema, slot and publication per test

pytestmark = [pytest.mark.postgres, pytest.mark.spark]


def _frame_of_view(spark: Any, name: str) -> pd.DataFrame:
    rows = [r.asDict() for r in spark.sql(f"SELECT * FROM gold.{name}").collect()]
    frame = pd.DataFrame(rows)
    # Spark hands timestamps to Python as naive datetimes in the session's zone (UTC here);
    # deltalake reads the same instants as UTC-aware ones.
    for column in frame.columns:
        if pd.api.types.is_datetime64_dtype(frame[column]):
            frame[column] = frame[column].dt.tz_localize("UTC")
    return _sorted(frame)


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    for column in frame.columns:  # one unit for timestamps (deltalake reads us, Spark gives ns)
        if isinstance(frame[column].dtype, pd.DatetimeTZDtype):
            frame[column] = frame[column].astype("datetime64[ns, UTC]")
    return frame.sort_values("id").reset_index(drop=True)


def test_materialized_gold_equals_the_view_and_catches_up_after_a_crash(
    spark: Any, pg: Pg, tmp_path: Path
) -> None:
    lake = tmp_path / "lake"
    s = pg.schema
    pg.sql(
        f"CREATE TABLE {s}.items (id int PRIMARY KEY, label text, price numeric(10,2), "
        "seen timestamptz)",
        f"INSERT INTO {s}.items VALUES (1, 'a', 1.50, '2026-01-02 03:04:05+00'), "
        "(2, 'b', 2.25, NULL), (3, 'c', 0.10, '2026-05-06 07:08:09+02')",
        f"UPDATE {s}.items SET label = 'z' WHERE id = 2",
        f"DELETE FROM {s}.items WHERE id = 3",
    )
    land(pg.config(), lake)
    SilverJob(spark, lake).run_once()
    name = f"pg__{s}__items"
    target = materialized_path(lake, name)
    assert target == lake.absolute() / "gold" / MATERIALIZED_DIR / name

    # A crash between publishing a cut and materializing it; here, a refresh that published
    # with the option off. The next refresh has nothing new to publish and still catches up.
    published = refresh_gold(spark, config_for(tmp_path, lake), lake)
    assert set(published.published) == {"pg"}
    assert not target.exists(), "materialized with the option off"
    on = config_for(tmp_path, lake, gold={"materialize": True})
    caught_up = refresh_gold(spark, on, lake)
    assert not caught_up.published

    table = DeltaTable(str(target))
    protocol = table.protocol()
    assert (protocol.min_reader_version, protocol.reader_features) == (1, None)
    read = _sorted(table.to_pandas())
    pd.testing.assert_frame_equal(read, _frame_of_view(spark, name), check_dtype=False)
    assert list(zip(read["id"], read["label"], strict=True)) == [(1, "a"), (2, "z")]
    (meta,) = [h.get("userMetadata") for h in table.history(1)]
    assert f'"silver_batch":{published.current["pg"].silver_batch}' in str(meta)
    version = table.version()

    # A replay of the same cut writes nothing.
    refresh_gold(spark, on, lake)
    assert DeltaTable(str(target)).version() == version
