"""The Db2 connector: the ASN capture (SQL replication) change-data tables, read over pyodbc.

Modules: :mod:`.config` (its Debezium properties), :mod:`.position` (its bronze position layout),
:mod:`.settings` (what the agent reads of the config), :mod:`.source` (the agent: a composition
of :mod:`.agent`, :mod:`.snapshot`, :mod:`.stream` and :mod:`.current`), :mod:`.connection` (the
SQL statements and the driver's errors) and :mod:`.types` (the type mapping). Importing the
package, its config or its position imports no driver; pyodbc is imported when connecting.
See ``docs/capture-db2.md``.
"""
