"""The contract drivers, one per connector that can run here, by registry name."""

from __future__ import annotations

from tests.contract.drivers.base import Capability, ContractDriver
from tests.contract.drivers.db2 import Db2Driver
from tests.contract.drivers.debezium_json import DebeziumJsonDriver
from tests.contract.drivers.mongodb import MongoDbDriver
from tests.contract.drivers.mysql import MySqlDriver
from tests.contract.drivers.oracle import OracleDriver
from tests.contract.drivers.postgresql import PostgresDriver
from tests.contract.drivers.sqlserver import SqlServerDriver
from tests.contract.drivers.yugabytedb import YugabyteDbDriver

__all__ = ["DRIVERS", "Capability", "ContractDriver"]

DRIVERS: dict[str, type[ContractDriver]] = {
    driver.CONNECTOR: driver
    for driver in (
        PostgresDriver,
        MySqlDriver,
        DebeziumJsonDriver,
        SqlServerDriver,
        OracleDriver,
        MongoDbDriver,
        Db2Driver,
        YugabyteDbDriver,
    )
}
"""Every connector the suite runs, by its ``connector`` name."""
