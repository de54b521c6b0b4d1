"""A masked column, key included, never reaches bronze in clear (real agents, real servers).

Each test lands a table whose key column and a numeric column are hashed, through the real
PostgreSQL or MySQL agent (snapshot, then inserts, a key change, a delete and a row that must be
quarantined), then reads **every file** under the lake: Delta logs, checkpoints, offsets,
schemas, quarantine, headers, with Parquet files decoded (their pages are compressed, so a byte
grep alone would miss a clear value) and searches each for the clear values.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from capture.masking import ColumnMasker
from capture.source_config import ColumnRule, ColumnRuleKind
from tests.integration.test_mysql_capture import My, corner, data, land, quarantined
from tests.integration.test_pg_capture import Pg, pg_corner

pytestmark = pytest.mark.delta

SALT = "medallion-test-salt"
HASH_KEY = f"column.mask.hash.v2.SHA-256.with.salt.{SALT}"


def _digest(value: str) -> str:
    rule = ColumnRule(
        key=HASH_KEY,
        kind=ColumnRuleKind.HASH_V2,
        columns=("x.y.z",),
        algorithm="SHA-256",
        salt=SALT,
    )
    masked = ColumnMasker([rule]).apply("x.y", {"z": value})
    assert masked is not None
    return str(masked["z"])


def lake_text(lake: Path) -> Iterator[tuple[Path, str]]:
    """Every file under ``lake`` as text: Parquet decoded row by row, anything else raw."""
    files = [p for p in lake.rglob("*") if p.is_file()]
    assert files, f"nothing under {lake}"
    for path in files:
        raw = path.read_bytes()
        yield path, raw.decode("utf-8", "replace")
        if path.suffix == ".parquet":
            yield path, repr(pq.read_table(path).to_pylist())


def assert_nowhere(lake: Path, *clear: str) -> None:
    for path, text in lake_text(lake):
        for value in clear:
            assert value not in text, f"clear value {value!r} in {path.relative_to(lake)}"


def assert_somewhere(lake: Path, value: str) -> None:
    assert any(value in text for _path, text in lake_text(lake)), f"{value!r} never landed"


@pytest.fixture
def pg(pg_dsn: str) -> Iterator[Pg]:
    yield from pg_corner(pg_dsn)


@pytest.fixture
def my(mariadb_conn: dict[str, Any]) -> Iterator[My]:
    yield from corner(mariadb_conn)


def _clear() -> tuple[str, str, str, int]:
    tag = uuid.uuid4().hex[:10]
    return (
        f"alice-{tag}@example.org",
        f"bob-{tag}@example.org",
        f"carol-{tag}@x.org",
        7_000_000_000 + int(tag[:6], 16),
    )


@pytest.mark.postgres
def test_postgres_masked_key_and_number_never_land_in_clear(pg: Pg, tmp_path: Path) -> None:
    s = pg.schema
    alice, bob, carol, ssn = _clear()
    pg.sql(
        f"CREATE TABLE {s}.people (email text PRIMARY KEY, ssn bigint, doc jsonb, note text)",
        f"ALTER TABLE {s}.people REPLICA IDENTITY FULL",
        f"INSERT INTO {s}.people VALUES ('{alice}', {ssn}, '{{\"mail\": \"{alice}\"}}', 'n1')",
    )
    config = pg.config(**{HASH_KEY: f"{s}\\.people\\.(email|ssn|doc)"})
    lake = tmp_path / "lake"
    land(config, lake)
    pg.sql(
        f"INSERT INTO {s}.people VALUES ('{carol}', {ssn + 1}, NULL, 'n2')",
        f"UPDATE {s}.people SET email = '{bob}', note = 'moved' WHERE email = '{alice}'",
        f"UPDATE {s}.people SET ssn = {ssn + 2} WHERE email = '{carol}'",
        f"DELETE FROM {s}.people WHERE email = '{carol}'",
    )
    land(config, lake)
    ops = [r["value"]["op"] for r in data(lake)]
    assert ops.count("u") + ops.count("c") + ops.count("d") >= 4, ops
    keys = {r["key"]["email"] for r in data(lake)}
    assert keys == {_digest(alice), _digest(bob), _digest(carol)}
    assert_somewhere(lake, _digest(str(ssn)))
    assert_nowhere(lake, alice, bob, carol, str(ssn), str(ssn + 1), str(ssn + 2))


@pytest.mark.mysql
def test_mysql_masked_key_never_lands_in_clear_even_quarantined(my: My, tmp_path: Path) -> None:
    d = my.database
    alice, bob, carol, ssn = _clear()
    my.sql(
        "SET SESSION sql_mode = ''",
        f"CREATE TABLE {d}.people (email VARCHAR(80), born DATE, ssn BIGINT, note TEXT, "
        "PRIMARY KEY (email, born))",
        f"INSERT INTO {d}.people VALUES ('{alice}', '2000-01-02', {ssn}, 'n1')",
    )
    config = my.config(**{HASH_KEY: f"{d}\\.people\\.(email|ssn)"})
    lake = tmp_path / "lake"
    land(config, lake)
    with_zero_date = (
        f"INSERT INTO {d}.people VALUES ('{carol}', '0000-00-00', {ssn + 1}, 'bad key')"
    )
    my.sql(
        "SET SESSION sql_mode = ''",
        with_zero_date,
        f"UPDATE {d}.people SET email = '{bob}', note = 'moved' WHERE email = '{alice}'",
        f"DELETE FROM {d}.people WHERE email = '{bob}'",
    )
    # A statement-format change carries its values as SQL text: quarantined, never in clear.
    dave = f"dave-{uuid.uuid4().hex[:10]}@example.org"
    my.sql(
        "SET SESSION binlog_format = 'STATEMENT'",
        f"INSERT INTO {d}.people VALUES ('{dave}', '2001-01-01', 1, 'statement')",
    )
    land(config, lake)
    keys = {r["key"]["email"] for r in data(lake)}
    assert keys == {_digest(alice), _digest(bob)}
    assert quarantined(lake), "the zero-date key was expected in the quarantine"
    assert_somewhere(lake, _digest(str(ssn)))
    assert any("statement withheld" in q["reason"] for q in quarantined(lake))
    assert_nowhere(lake, alice, bob, carol, dave, str(ssn), str(ssn + 1))
