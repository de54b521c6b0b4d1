"""The Oracle connector: a flashback snapshot, then LogMiner over python-oracledb (thin mode).

Modules: :mod:`.config` (its Debezium properties), :mod:`.position` (its bronze position layout),
:mod:`.settings`, :mod:`.redo` (the ``SQL_REDO`` parser), :mod:`.types`, :mod:`.buffer` (the
transaction buffer), and the agent: :mod:`.source` composed of :mod:`.agent`,
:mod:`.snapshot` and :mod:`.stream` (see docs/capture-oracle.md). Importing this package, its
config, position, settings, redo, types or buffer modules imports no driver; the agent does.
"""
