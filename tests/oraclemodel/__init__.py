"""A model of an Oracle database as LogMiner shows it, for the Oracle agent's tests.

No Oracle server can run on the test machines. :mod:`.database` keeps ground-truth tables and
turns every change into redo the way Oracle's documentation describes it (Oracle Database
Utilities, "Using LogMiner to Analyze Redo Log Files"; Reference, ``V$LOGMNR_CONTENTS``,
``V$LOG``, ``V$ARCHIVED_LOG``): per-thread redo logs with sequences and SCN ranges, online groups
that are reused after archiving, ``SQL_REDO`` text with Oracle's quoting and functions split into
``CSF`` continuation rows, START/COMMIT/ROLLBACK rows, statement rollbacks (``ROLLBACK = 1`` rows
that undo by ``ROW_ID``), and flashback (``AS OF SCN``) reads bounded by undo retention.
:mod:`.dbapi` is a DB-API 2.0 stand-in for python-oracledb that interprets the statements the
agent sends (``DBMS_LOGMNR.ADD_LOGFILE/START_LOGMNR/END_LOGMNR``, the ``V$`` queries, flashback
SELECTs) against a model saved in a file, so agents in child processes see the same database,
and raises ``ORA-01291``, ``ORA-00310``, ``ORA-01555`` and ``ORA-03113`` where Oracle would.
"""
