"""A model of Db2 LUW SQL replication (ASN capture), behind a DB-API stand-in for pyodbc.

No Db2 runs on the test machines. The model keeps what a server would: the ground-truth tables
of a database, its catalog (``SYSCAT.TABLES``, ``SYSCAT.COLUMNS``) and the ASN objects IBM's
SQL replication documents and Debezium's setup scripts (``asncdctables.sql``,
``asncdcaddremove.sql``) create: ``ASNCDC.IBMSNAP_REGISTER`` (one row per registered source
table, plus the global row), one change-data (CD) table ``ASNCDC."CDC_<schema>_<table>"`` per
registration with ``IBMSNAP_COMMITSEQ``, ``IBMSNAP_INTENTSEQ``, ``IBMSNAP_OPERATION`` and the
table's columns, and ``ASNCDC.IBMSNAP_UOW`` (one row per captured unit of work: its commit
sequence and ``IBMSNAP_LOGMARKER`` commit time).

:mod:`.server` holds the state (one SQLite file per database, shared by the agent in a child
process and the test); :mod:`.dbapi` is the ``connect()`` the agent calls instead of
``pyodbc.connect`` (selected by ``MEDALLION_DB2_DBAPI``). It accepts exactly the statements the
agent sends, each matched against its documented form; anything else is an error (SQL0104N),
never a guess.
"""
