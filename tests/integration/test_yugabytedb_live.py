"""The YugabyteDB agent against a real cluster: runs when ``MEDALLION_TEST_YUGABYTE_DSN`` is set.

No YugabyteDB runs on the project's machines, so everything else about the agent is verified
with the model (``tests/integration/test_yugabytedb_capture.py``). Point this test at a
YugabyteDB v2024.1.1+ (``yugabyted start`` is enough; the user must be a superuser, since the
snapshot sets ``yb_read_time``, and the database UTF-8) to check the same paths on a server::

    MEDALLION_TEST_YUGABYTE_DSN='host=127.0.0.1 port=5433 user=yugabyte dbname=yugabyte' \\
        pytest -n 0 tests/integration/test_yugabytedb_live.py

What runs, for each plugin and LSN type: a table per replica identity (CHANGE, DEFAULT, FULL)
with rows before the slot exists (the snapshot at the slot's hybrid time), then the seed's
insert, update and delete (the landed ``before``/``after`` must be seed 004's), a transaction
over many rows (several tablets), a second run (acknowledged transactions are not landed again),
and silver-free checks of bronze: unique positions, one commit LSN per transaction under
``HYBRID_TIME``. The test writes only to a schema of its own and drops it, with its slots and
publications, afterwards.

When the variable is set and the server cannot be reached, the test **fails**. When it is not
set, ``tests/conftest.py`` does not collect the module: nothing is skipped or counted.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql

from bronze import schema as S
from bronze.writer import BronzeTables, BronzeWriter
from capture.registry import create_source
from capture.yugabytedb.config import YugabyteDbSourceConfig
from pipeline.landing import LandingAgent
from tests.integration.test_yugabytedb_capture import events

DSN = os.environ.get("MEDALLION_TEST_YUGABYTE_DSN")

if not DSN:  # tests/conftest.py does not collect this module then; run directly, it fails
    raise RuntimeError("MEDALLION_TEST_YUGABYTE_DSN is not set (see docs/capture-yugabytedb.md)")

pytestmark = [pytest.mark.delta]

IDENTITIES = {"c": "CHANGE", "d": "DEFAULT", "f": "FULL"}


def run(*statements: str | sql.Composable) -> None:
    assert DSN is not None
    with psycopg.connect(DSN, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


@pytest.fixture
def corner() -> Iterator[str]:
    """A schema of one's own; its slots and publications are dropped afterwards."""
    tag = secrets.token_hex(4)
    schema = f"medallion_live_{tag}"
    run(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    yield tag
    with psycopg.connect(DSN or "", autocommit=True) as conn:
        for (slot,) in conn.execute(
            "SELECT slot_name FROM pg_replication_slots WHERE slot_name LIKE %s", (f"%{tag}%",)
        ).fetchall():
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))
        for (pub,) in conn.execute(
            "SELECT pubname FROM pg_publication WHERE pubname LIKE %s", (f"%{tag}%",)
        ).fetchall():
            conn.execute(sql.SQL("DROP PUBLICATION {}").format(sql.Identifier(pub)))
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))


def config(tag: str, plugin: str, lsn_type: str) -> YugabyteDbSourceConfig:
    info = psycopg.conninfo.conninfo_to_dict(DSN or "")
    raw: dict[str, Any] = {
        "name": "yb",
        "connector": "yugabytedb",
        "database.hostname": info.get("host", "127.0.0.1"),
        "database.port": int(info.get("port", 5433)),  # type: ignore[arg-type]
        "database.user": info.get("user", "yugabyte"),
        "database.dbname": info.get("dbname", "yugabyte"),
        "topic.prefix": "dbserver",
        "slot.name": f"s_{plugin}_{lsn_type.lower()}_{tag}",
        "publication.name": f"p_{plugin}_{lsn_type.lower()}_{tag}",
        "publication.autocreate.mode": "filtered",
        "schema.include.list": f"medallion_live_{tag}",
        "plugin.name": plugin,
        "slot.lsn.type": lsn_type,
    }
    if "password" in info:
        raw["database.password"] = info["password"]
    return YugabyteDbSourceConfig.model_validate(raw)


def land(cfg: YugabyteDbSourceConfig, lake: Path) -> None:
    LandingAgent(create_source(cfg), BronzeWriter(BronzeTables.under(lake))).run()


def _v(value: Any, plugin: str) -> Any:
    return {"value": value, "set": True} if plugin == "yboutput" else value


@pytest.mark.parametrize(
    ("plugin", "lsn_type"),
    [("yboutput", "SEQUENCE"), ("yboutput", "HYBRID_TIME"), ("pgoutput", "SEQUENCE")],
)
def test_snapshot_stream_and_seed_examples(
    corner: str, tmp_path: Path, plugin: str, lsn_type: str
) -> None:
    schema = f"medallion_live_{corner}"
    identities = {k: v for k, v in IDENTITIES.items() if k != "c" or plugin == "yboutput"}
    for code, name in identities.items():
        table = sql.Identifier(schema, f"employee_{code}")
        run(
            sql.SQL(
                "CREATE TABLE {} (employee_id INT PRIMARY KEY, employee_name VARCHAR, "
                "employee_dept TEXT)"
            ).format(table),
            sql.SQL("ALTER TABLE {} REPLICA IDENTITY {}").format(table, sql.SQL(name)),
            sql.SQL("INSERT INTO {} VALUES (1, 'Snap', 'Shot')").format(table),
        )
    cfg = config(corner, plugin, lsn_type)
    land(cfg, tmp_path)  # slot, then the snapshot at its hybrid time
    snap = [e for e in events(tmp_path) if e["value"]["op"] == "r"]
    assert len(snap) == len(identities)
    assert all(e["value"]["after"]["employee_name"] == _v("Snap", plugin) for e in snap)

    for code in identities:
        table = sql.Identifier(schema, f"employee_{code}")
        run(
            sql.SQL("INSERT INTO {} VALUES (1001, 'Alice', 'Packaging')").format(table),
            sql.SQL("UPDATE {} SET employee_name = 'Bob' WHERE employee_id = 1001").format(table),
            sql.SQL("DELETE FROM {} WHERE employee_id = 1001").format(table),
        )
    many = sql.Identifier(schema, "employee_d")
    run(
        sql.SQL("INSERT INTO {} SELECT g, 'n' || g, 'd' FROM generate_series(2000, 2199) g").format(
            many
        )
    )
    for _ in range(5):  # a batch ends when the server goes quiet
        land(cfg, tmp_path)
        streamed = [e for e in events(tmp_path) if e["value"]["op"] != "r"]
        if len(streamed) >= 3 * len(identities) + 200:
            break
    land(cfg, tmp_path)  # a new agent: nothing acknowledged lands again
    rows = events(tmp_path)
    positions = [e[S.POSITION] for e in rows]
    assert len(set(positions)) == len(positions)
    streamed = [e for e in rows if e["value"]["op"] != "r"]
    assert len(streamed) == 3 * len(identities) + 200
    assert {e["value"]["source"]["connector"] for e in rows} == {"YugabyteDB"}

    alice = {"employee_id": 1001, "employee_name": "Alice", "employee_dept": "Packaging"}
    bob = {**alice, "employee_name": "Bob"}
    w = {k: _v(v, plugin) for k, v in alice.items()}
    wb = {k: _v(v, plugin) for k, v in bob.items()}
    key_only = (
        {"employee_id": _v(1001, plugin), "employee_name": None, "employee_dept": None}
        if plugin == "yboutput"
        else {"employee_id": 1001}
    )
    expected = {
        "c": [(None, w), (None, {**wb, "employee_dept": None}), (key_only, None)],
        "d": [(None, w), (None, wb), (key_only, None)],
        "f": [(None, w), (w, wb), (wb, None)],
    }
    for code in identities:
        got = [
            (e["value"]["before"], e["value"]["after"])
            for e in streamed
            if e["value"]["source"]["table"] == f"employee_{code}"
            and e["value"]["after"] != {}
            and (e["value"]["after"] or e["value"]["before"] or {}).get("employee_id")
            in (1001, _v(1001, plugin))
        ]
        assert got == expected[code], code
    if lsn_type == "HYBRID_TIME":
        by_tx: dict[Any, set[int]] = {}
        for e in streamed:
            by_tx.setdefault(e["value"]["source"]["txId"], set()).add(e["value"]["source"]["lsn"])
        assert all(len(lsns) == 1 for lsns in by_tx.values())
