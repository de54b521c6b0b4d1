"""What a connector declares instead of being special-cased elsewhere (issue 13 item 4).

Each connector's position class and source block live in its package; reconciliation uses only
the declared :class:`capture.current_state.CurrentStateReader`; engine-neutral types are shared,
so one agent's package never imports another's.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bronze import connect_schema as cs
from bronze.positions import POSITION_TYPES
from capture.current_state import READS_CURRENT_STATE, CurrentStateReader

pytestmark = pytest.mark.unit

CAPTURE = Path(__file__).resolve().parents[2] / "capture"


@pytest.mark.parametrize("connector", sorted(POSITION_TYPES))
def test_each_connector_declares_its_position_and_source_block_in_its_package(
    connector: str,
) -> None:
    cls = POSITION_TYPES[connector]
    assert cls.__module__ == f"capture.{connector}.position"
    schema = cs.source_schema(connector)
    assert schema["name"] == cls.SOURCE_BLOCK.schema_name
    own = [f["field"] for f in schema["fields"]][-len(cls.SOURCE_BLOCK.fields) :]
    assert own == [f.name for f in cls.SOURCE_BLOCK.fields]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize(
    "package", sorted(p.name for p in CAPTURE.iterdir() if (p / "__init__.py").exists())
)
def test_no_connector_package_imports_another(package: str) -> None:
    others = {
        f"capture.{p.name}"
        for p in CAPTURE.iterdir()
        if (p / "__init__.py").exists() and p.name != package
    }
    # On purpose: YugabyteDB is a PostgreSQL fork (its position layout is PostgreSQL's), and
    # Kafka carries Debezium's output (its records are the debezium_json source's envelopes).
    allowed = {"yugabytedb": {"capture.postgresql"}, "kafka": {"capture.debezium_json"}}.get(
        package, set()
    )
    for module in (CAPTURE / package).glob("*.py"):
        crossing = {
            name
            for name in _imports(module)
            for other in others - allowed
            if name == other or name.startswith(other + ".")
        }
        assert not crossing, f"{module.name} imports {sorted(crossing)}"


def test_the_agents_reconciliation_reads_are_declared() -> None:
    from capture.db2.source import Db2Source
    from capture.mysql.source import MySqlSource
    from capture.oracle.source import OracleSource
    from capture.postgresql.source import PostgresSource
    from capture.sqlserver.source import SqlServerSource
    from capture.yugabytedb.source import YugabyteDbSource

    assert {
        "postgresql", "mysql", "mariadb", "sqlserver", "oracle", "db2", "yugabytedb"
    } == READS_CURRENT_STATE  # fmt: skip
    agents = (
        PostgresSource, MySqlSource, SqlServerSource, OracleSource, Db2Source, YugabyteDbSource
    )  # fmt: skip
    for agent in agents:
        for member in ("read_current", "point_text", "changes_after"):
            assert callable(getattr(agent, member, None)), (agent.__name__, member)
    reconcile = (CAPTURE.parent / "gold" / "reconcile.py").read_text(encoding="utf-8")
    for private in ("._connect(", ".settings", "_Connector("):
        assert private not in reconcile, private
    assert CurrentStateReader.__name__ in reconcile
