"""The type-fidelity suite's data: one *type table* per connector (issue 24, item 4).

A type table (:class:`tests.fidelity.model.TypeTable`) lists, per source column type, the edge
values tried and what silver must hold for each, written here by hand from the source's and
Debezium's documentation, never computed by the code under test. Each column also says how the
test reads the value back from the database itself (:class:`tests.fidelity.model.Reading`: a
SQL expression run with the plain driver, and a Python mapping to the expected value), and how
it reads silver's value (a Spark SQL expression, and a mapping), so that three independent
sources meet: the table, the database, silver.

``tests/integration/test_type_fidelity.py`` runs every table: the rows are inserted once before
the agent starts (snapshot path) and once while it streams, updated and deleted (before
images), landed in bronze, applied with the real :class:`silver.job.SilverJob`, and compared
value by value. Another connector plugs in by adding a module with its ``TYPE_TABLE`` and a
:class:`tests.fidelity.model.Connector` adapter (create the table, insert rows, land them with
its agent, read rows with its driver), then listing it in the test module.

Modules: :mod:`tests.fidelity.model` (the types and comparisons), :mod:`tests.fidelity.postgresql`
and :mod:`tests.fidelity.mariadb` (the tables).
"""
