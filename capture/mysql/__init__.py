"""The MySQL / MariaDB capture agent: ROW binlog with a consistent initial snapshot.

Modules: :mod:`.source` (the agent, composed of :mod:`.agent`, :mod:`.tables`, :mod:`.snapshot`,
:mod:`.stream`, :mod:`.current` and :mod:`.status`), :mod:`.settings` (what it reads of the
config), :mod:`.ddl` (DDL parser and schema state), :mod:`.history` (the schema history table),
:mod:`.server` (server check, dialect flags, binlog coordinates), :mod:`.schema` (table and
column definitions), :mod:`.types` (type mapping) and :mod:`.position` (the bronze position
layout).

Importing this package imports no driver: PyMySQL and mysql-replication are loaded by
:mod:`.source`, which the registry imports only when a ``mysql`` source is used.
"""
