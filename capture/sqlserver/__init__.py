"""The SQL Server connector: CDC change tables read over pyodbc (FreeTDS's ODBC driver).

Modules: :mod:`.config` (its Debezium properties), :mod:`.position` (its bronze position layout),
:mod:`.settings` (what the agent reads of the config), :mod:`.source` (the agent: a composition
of :mod:`.agent`, :mod:`.snapshot`, :mod:`.stream` and :mod:`.current`), :mod:`.connection` (the
T-SQL statements and the driver's errors) and :mod:`.types` (the type mapping). Importing the
package, its config or its position imports no driver; pyodbc is imported when connecting.
See ``docs/capture-sqlserver.md``.
"""
