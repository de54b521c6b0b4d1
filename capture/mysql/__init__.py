"""The MySQL / MariaDB capture agent: ROW binlog with a consistent initial snapshot.

Modules: :mod:`.source` (the agent), :mod:`.ddl` (DDL parser and schema state), :mod:`.history`
(the schema history table), :mod:`.server` (server check, dialect flags, binlog coordinates),
:mod:`.schema` (table and column definitions), :mod:`.types` (type mapping) and :mod:`.current`
(current rows for reconciliation).

Importing this package imports no driver: PyMySQL and mysql-replication are loaded by
:mod:`.source`, which the registry imports only when a ``mysql`` source is used.
"""
