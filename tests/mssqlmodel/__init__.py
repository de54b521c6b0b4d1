"""A model of SQL Server change data capture, behind a DB-API stand-in for pyodbc.

No SQL Server runs on the test machines. The model keeps what a server would: the ground-truth
tables of each database, and the CDC objects Microsoft documents for them (``sys.sp_cdc_enable_db``
/ ``sp_cdc_enable_table``): per capture instance the change table ``cdc.<ci>_CT`` with
``__$start_lsn`` (the commit LSN), ``__$seqval`` (the change's order inside its transaction),
``__$operation`` (1 delete, 2 insert, 3 update before, 4 update after), ``__$update_mask`` and
``__$command_id``; ``cdc.lsn_time_mapping``, ``cdc.change_tables`` and ``cdc.captured_columns``;
LSNs as ``binary(10)`` compared bytewise. The capture job (SQL Server Agent) moves committed
transactions from the log into the change tables; with the Agent stopped they wait in the log and
``sys.fn_cdc_get_max_lsn()`` does not move.

:mod:`.server` holds the state (one SQLite file per database, so the agent in a child process
and the test writing changes share it, with SQLite's own snapshot reads standing in for
``SNAPSHOT`` isolation); :mod:`.dbapi` is the ``connect()`` the agent calls instead of
``pyodbc.connect`` (selected by ``MEDALLION_SQLSERVER_DBAPI``). It interprets exactly the T-SQL
statements the agent sends, each checked against the documented signature (a statement it does
not know is an error, never a guess).
"""
