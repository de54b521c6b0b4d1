"""The YugabyteDB connector: the PostgreSQL agent over YugabyteDB's logical replication.

Modules: :mod:`.config` (its Debezium properties), :mod:`.position` (its bronze position
layout), :mod:`.settings`, :mod:`.yboutput` (``{"value", "set"}`` columns, the ``before`` rule),
:mod:`.slot` (the slot SQL that differs from PostgreSQL's) and :mod:`.source` (the agent, see
``docs/capture-yugabytedb.md``). Importing the package, its config or its position imports no
driver; :mod:`.source` and :mod:`.slot` import psycopg.
"""
