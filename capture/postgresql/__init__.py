"""The PostgreSQL capture agent: pgoutput logical decoding with a consistent initial snapshot.

Modules: :mod:`.source` (the agent, composed of :mod:`.agent`, :mod:`.snapshot`, :mod:`.stream`,
:mod:`.current` and :mod:`.status`), :mod:`.settings` (what it reads of the config),
:mod:`.pgoutput` (protocol decoder), :mod:`.types` (type mapping), :mod:`.schema` (per-table
schemas, filters, masks), :mod:`.position` (the bronze position layout), :mod:`.catalog`,
:mod:`.slot` and :mod:`.replication` (catalog reads, the replication slot, the streaming
connection).

Importing this package imports no driver: psycopg is loaded by :mod:`.source`, which the
registry imports only when a ``postgresql`` source is used.
"""
