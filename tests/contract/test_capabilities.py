"""Which guarantees apply to which connector: the table the rest of the suite is generated from.

A connector that loses a capability (say the PostgreSQL driver stops declaring ``RESTART``)
would silently lose its reconnect test; this table makes that a failure to look at instead.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import TypeAdapter

from capture.registry import create_source
from pipeline.config import SourceConfig
from tests.contract.drivers import DRIVERS, Capability

EXPECTED = {
    "postgresql": {"snapshot", "restart", "acknowledges", "reports_log", "incremental_snapshot"},
    "mysql": {"snapshot", "restart", "reports_log", "incremental_snapshot"},
    # Files: no agent snapshot to hand over from, no server to restart, nothing to acknowledge
    # (bronze's offset is the only record of what was read) and no database log to report.
    "debezium_json": set(),
    # A CDC model stands in for the server; its change tables are read, never consumed, so
    # there is nothing to acknowledge, and no log measured in bytes to report.
    "sqlserver": {"snapshot", "restart"},
    # The Oracle LogMiner model (tests/oraclemodel): no acknowledgement (bronze's offset is
    # the only record), restart = every session of the model dropped.
    "oracle": {"snapshot", "restart", "reports_log"},
    # A wire-level peer (tests/mongomodel/wire.py) that restarts; a change stream keeps nothing
    # a consumer acknowledges; status reports the oplog.
    "mongodb": {"snapshot", "restart", "reports_log"},
    # The ASN model (tests/db2model): CD tables are read, never consumed; no snapshot
    # isolation, so no handover test with writers during the snapshot (Db2Driver's docstring).
    "db2": {"restart"},
    # A wire peer (tests/ybmodel/wire.py) over the Virtual WAL model and the real PostgreSQL:
    # restart = every connection broken; the slot is confirmed per transaction; status reports
    # the slot (without WAL sizes); no signals (seed 004 documents none).
    "yugabytedb": {"snapshot", "restart", "acknowledges", "reports_log"},
}
"""Per connector, the guarantees beyond those every connector keeps (commit order, exactly
once at every fault point, resume, quarantine, status, silver equals the source)."""


def test_the_capability_table() -> None:
    assert {name: {str(c) for c in d.CAPABILITIES} for name, d in DRIVERS.items()} == EXPECTED


MINIMAL = {
    "postgresql": {"database.hostname": "localhost", "database.user": "u", "database.dbname": "d"},
    "mysql": {"database.hostname": "localhost", "database.user": "u"},
    "debezium_json": {"path": "inbox"},
    "sqlserver": {"database.hostname": "localhost", "database.user": "u", "database.names": "d"},
    "oracle": {"database.hostname": "localhost", "database.user": "u", "database.dbname": "d"},
    "mongodb": {"mongodb.connection.string": "mongodb://localhost/?replicaSet=rs0"},
    "db2": {"database.hostname": "localhost", "database.user": "u", "database.dbname": "d"},
    "yugabytedb": {"database.hostname": "localhost", "database.user": "u", "database.dbname": "d"},
}
"""Just enough config to build each source (building one connects to nothing)."""


def test_acknowledgement_and_log_are_the_connectors_own_flags(tmp_path: Path) -> None:
    # The drivers do not decide these capabilities: each source class declares them.
    for name, driver in DRIVERS.items():
        raw = {"name": "flags", "connector": name, "topic.prefix": "p", **MINIMAL[name]}
        if name == "debezium_json":
            del raw["topic.prefix"]
            raw["path"] = str(tmp_path)
        source = create_source(TypeAdapter(SourceConfig).validate_python(raw))
        declared = {
            Capability.ACKNOWLEDGES: source.ACKNOWLEDGES,
            Capability.REPORTS_LOG: source.REPORTS_LOG,
            Capability.INCREMENTAL_SNAPSHOT: getattr(source, "INCREMENTAL_SNAPSHOTS", False),
        }
        assert declared == {c: c in driver.CAPABILITIES for c in declared}, name
