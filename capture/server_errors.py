"""Server error codes, mapped to what a runner may do about them.

A database tells why it refused in its own code: a SQLSTATE for PostgreSQL (``28P01``: wrong
password), an errno for MySQL/MariaDB (``1045``: access denied). Those codes, not the driver's
exception class (psycopg and PyMySQL raise ``OperationalError`` for a wrong password and for a
lost connection alike), decide whether an error is:

* **terminal** (:class:`SourceRefused`): authentication, a missing database, a missing privilege,
  a server set up so it cannot be captured. Retrying cannot help; the message carries the code
  and the fix, and the CLI exits with a non-retryable status;
* **retryable** (:class:`~pipeline.errors.SourceUnavailable`): a lost connection, a server
  shutting down, restarting or not accepting connections yet. Runners retry with backoff.

The codes live in tables (:data:`POSTGRES_ERRORS`, :data:`MYSQL_ERRORS`; SQL Server's, Oracle's
and MongoDB's in :mod:`capture.errors_sqlserver`, :mod:`capture.errors_oracle` and
:mod:`capture.errors_mongodb`) looked up by :meth:`ServerErrors.classify`; a new connector adds
its own table, and a second reading where one code does not decide (a SQLSTATE under an unknown
native number, MongoDB's ``errorLabels``). A code no table knows keeps
the driver's old meaning (a connection-level ``OperationalError`` is retryable) and still carries
its code.

libpq reports a refused connection before the session exists, as text without the SQLSTATE
field (psycopg's ``sqlstate`` is None then). For those, the server's primary message (English,
the servers' default ``lc_messages``) is matched to the SQLSTATE the server sent with it
(:data:`POSTGRES_CONNECT_MESSAGES`), and the message says the code was read from the text.

No message built here contains a password: libpq and PyMySQL never echo it, and the connection
settings are named by host, port and database only.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from pipeline.errors import CaptureError, SourceUnavailable, Terminal

__all__ = [
    "MYSQL_ERRORS",
    "POSTGRES_CONNECT_MESSAGES",
    "POSTGRES_ERRORS",
    "RECONNECT",
    "CodeRule",
    "RetryPolicy",
    "ServerErrors",
    "SourceRefused",
    "code_rules",
    "mysql_code",
    "postgres_code",
]


class SourceRefused(CaptureError, Terminal):
    """The source server refused for a reason retrying cannot fix (credentials, a missing
    database or privilege, a server setting); names the code and the fix.

    Attributes:
        source: The source's name.
        code: The server's code (SQLSTATE or errno as text), or the server setting at fault.
        fix: What a person should change.
    """

    def __init__(self, source: str, code: str, text: str, fix: str) -> None:
        self.source = source
        self.code = code
        self.fix = fix
        super().__init__(f"source {source}: {text}. Fix: {fix}")


@dataclass(frozen=True, slots=True)
class CodeRule:
    """What one server code means.

    Attributes:
        code: The code: a SQLSTATE, a SQLSTATE class prefix (``08``) or an errno.
        terminal: True when retrying cannot help.
        meaning: The condition, in a few words.
        fix: What to change (terminal codes) or what happens next (retryable ones).
    """

    code: str
    terminal: bool
    meaning: str
    fix: str


def code_rules(*rules: CodeRule) -> Mapping[str, CodeRule]:
    """A code table: each rule under its code."""
    return {rule.code: rule for rule in rules}


RECONNECT = "the agent reconnects with backoff (errors.max.retries)"
"""What happens after a retryable error (the ``fix`` of retryable rules)."""

POSTGRES_ERRORS: Mapping[str, CodeRule] = code_rules(
    CodeRule(
        "28P01",
        True,
        "password authentication failed",
        "check the source's user and password (database.user, database.password or its "
        "secret file / env var)",
    ),
    CodeRule(
        "28000",
        True,
        "invalid authorization (no such role, or no pg_hba.conf entry)",
        "create the role or add a pg_hba.conf line for this host, user and database "
        "(replication connections need a 'replication' entry)",
    ),
    CodeRule(
        "3D000",
        True,
        "the database does not exist",
        "check database.dbname, or create the database",
    ),
    CodeRule(
        "42501",
        True,
        "insufficient privilege",
        "grant the capture user REPLICATION (ALTER ROLE ... REPLICATION) and SELECT on the "
        "captured tables, or ownership of the publication's tables",
    ),
    CodeRule(
        "55000",
        True,
        "object not in prerequisite state (wal_level below logical, or a slot or publication "
        "in the wrong state)",
        "set wal_level=logical in postgresql.conf and restart the server; check the slot "
        "(pg_replication_slots) and publication",
    ),
    CodeRule(
        "42704",
        True,
        "undefined object (a replication slot or publication that does not exist)",
        "create the slot/publication or let the agent create it (slot.name, publication.name, "
        "publication.autocreate.mode)",
    ),
    CodeRule(
        "53300",
        False,
        "too many connections",
        RECONNECT + "; raise max_connections or max_wal_senders if it persists",
    ),
    CodeRule("55006", False, "the replication slot is in use by another walsender", RECONNECT),
    CodeRule("57P01", False, "the server is shutting down (admin shutdown)", RECONNECT),
    CodeRule("57P02", False, "the server crashed (crash shutdown)", RECONNECT),
    CodeRule("57P03", False, "the server cannot accept connections now", RECONNECT),
    CodeRule("57P05", False, "the connection was idle too long", RECONNECT),
    CodeRule("40001", False, "serialization failure", RECONNECT),
    CodeRule("40P01", False, "deadlock detected", RECONNECT),
    CodeRule("08", False, "connection exception", RECONNECT),
)
"""PostgreSQL SQLSTATEs (Appendix A of the PostgreSQL manual); two-character keys are classes."""

POSTGRES_CONNECT_MESSAGES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), code)
    for pattern, code in (
        (r"password authentication failed for user", "28P01"),
        (r"no password supplied|fe_sendauth: no password", "28P01"),
        (r"role \".*\" does not exist", "28000"),
        (r"no pg_hba\.conf entry", "28000"),
        (r"database \".*\" does not exist", "3D000"),
        (r"must be superuser or replication role|permission denied to start WAL sender", "42501"),
        (r"is not permitted to log in|not allowed to login", "28000"),
        (r"too many connections|remaining connection slots are reserved", "53300"),
        (r"the database system is (starting up|shutting down|in recovery mode)", "57P03"),
        (r"terminating connection due to administrator command", "57P01"),
        (r"server closed the connection unexpectedly", "08006"),
        (r"Connection refused|could not connect|timeout expired|No route to host", "08001"),
        (r"could not translate host name|Name or service not known", "08001"),
        (r"SSL connection has been closed unexpectedly|consuming input failed", "08006"),
    )
)
"""libpq connection-failure texts and the SQLSTATE the server (or libpq) attaches to them."""

MYSQL_ERRORS: Mapping[str, CodeRule] = code_rules(
    CodeRule(
        "1045",
        True,
        "access denied (wrong user or password)",
        "check the source's user and password (database.user, database.password or its "
        "secret file / env var) and the user's host part",
    ),
    CodeRule(
        "1044",
        True,
        "access denied to the database",
        "grant the capture user access to the database, or check database.dbname",
    ),
    CodeRule(
        "1049",
        True,
        "unknown database",
        "check the configured database name, or create the database",
    ),
    CodeRule(
        "1227",
        True,
        "a privilege is missing",
        "GRANT REPLICATION SLAVE, REPLICATION CLIENT (MariaDB: BINLOG MONITOR, REPLICATION "
        "SLAVE ADMIN) and SELECT ON the captured databases TO the capture user",
    ),
    CodeRule(
        "1142",
        True,
        "a table privilege is missing",
        "GRANT SELECT ON the captured tables TO the capture user",
    ),
    CodeRule(
        "1143",
        True,
        "a column privilege is missing",
        "GRANT SELECT ON the captured tables TO the capture user",
    ),
    CodeRule(
        "1236",
        True,
        "the binlog position is gone from the server (purged) or invalid",
        "take a new snapshot (snapshot.mode=when_needed) or restore the purged binlogs",
    ),
    CodeRule(
        "1381",
        True,
        "binary logging is off",
        "start the server with log_bin (and binlog_format=ROW, binlog_row_image=FULL)",
    ),
    CodeRule(
        "1129",
        True,
        "the host is blocked after too many connection errors",
        "run FLUSH HOSTS (mariadb-admin flush-hosts) on the server",
    ),
    CodeRule(
        "1040", False, "too many connections", RECONNECT + "; raise max_connections if it persists"
    ),
    CodeRule("1053", False, "the server is shutting down", RECONNECT),
    CodeRule("1077", False, "the server is shutting down (normal shutdown)", RECONNECT),
    CodeRule("1152", False, "the connection was aborted", RECONNECT),
    CodeRule("1159", False, "a network read timed out", RECONNECT),
    CodeRule("1161", False, "a network write timed out", RECONNECT),
    CodeRule("1205", False, "a lock wait timed out", RECONNECT),
    CodeRule("1213", False, "a deadlock was detected", RECONNECT),
    CodeRule("2002", False, "cannot connect (socket)", RECONNECT),
    CodeRule("2003", False, "cannot connect to the server", RECONNECT),
    CodeRule("2006", False, "the server has gone away", RECONNECT),
    CodeRule("2013", False, "the connection was lost during a query", RECONNECT),
    CodeRule("2014", False, "commands out of sync (a broken connection)", RECONNECT),
    CodeRule("2055", False, "the connection was lost", RECONNECT),
)
"""MySQL/MariaDB errnos (server errors 1000-1999, client errors 2000-2999)."""


def postgres_code(exc: BaseException) -> tuple[str | None, bool]:
    """The SQLSTATE of a psycopg error and whether it was read from the message text.

    Args:
        exc: A psycopg error (any exception is accepted; a non-psycopg one has no code).

    Returns:
        ``(sqlstate, from_text)``; ``(None, False)`` when neither the error nor its text names one.
    """
    state = getattr(exc, "sqlstate", None)
    if isinstance(state, str) and state:
        return state, False
    text = str(exc)
    for pattern, code in POSTGRES_CONNECT_MESSAGES:
        if pattern.search(text):
            return code, True
    return None, False


def mysql_code(exc: BaseException) -> tuple[str | None, bool]:
    """The errno of a PyMySQL error (its first argument), as text; never read from the text."""
    args = getattr(exc, "args", ())
    if args and isinstance(args[0], int) and not isinstance(args[0], bool):
        return str(args[0]), False
    return None, False


@dataclass(frozen=True, slots=True)
class ServerErrors:
    """One engine's code table and how to read a code from its driver's errors.

    Attributes:
        engine: The server's name in messages (``PostgreSQL``, ``MySQL``).
        label: What its codes are called (``SQLSTATE``, ``errno``).
        rules: Code (or code class prefix) -> rule.
        read_code: Driver error -> ``(code, read from the text)``.
        second_reading: Driver error -> ``(label, code, rule)`` or None: what decides when the
            code is missing or no rule knows it (SQL Server's SQLSTATE under an unknown native
            error number; MongoDB's ``errorLabels``; an Oracle error the driver calls
            recoverable). None: no second reading.
        unknown_retryable: What an error neither reading knows means when the caller does not
            say: retryable (True), or a plain :class:`CaptureError` (False, for tables that
            see every driver error, not only connection-level ones).
        describe: Driver error -> the server's message, when ``str(exc)`` is not it (pyodbc's
            is the argument tuple, pymongo's appends the whole reply). None: ``str(exc)``.
    """

    engine: str
    label: str
    rules: Mapping[str, CodeRule]
    read_code: Any
    second_reading: Any = None
    unknown_retryable: bool = True
    describe: Any = None

    def rule(self, code: str | None) -> CodeRule | None:
        """The rule of ``code``: the exact code first, then its two-character class."""
        if code is None:
            return None
        return self.rules.get(code) or self.rules.get(code[:2])

    def classify(
        self, source: str, exc: BaseException, doing: str, *, unknown_retryable: bool | None = None
    ) -> CaptureError:
        """The medallion error for a driver error raised while ``doing`` something.

        Args:
            source: The source's name.
            exc: The driver's error (chain the result ``from exc`` to keep it).
            doing: What failed, e.g. ``connect to PostgreSQL db.example:5432/inventory``.
            unknown_retryable: What a code no table knows means: retryable (a driver's
                connection-level error) or a plain, unmarked :class:`CaptureError`; None:
                the table's :attr:`unknown_retryable`.

        Returns:
            :class:`SourceRefused` (terminal) or :class:`~pipeline.errors.SourceUnavailable`
            (retryable), with the code as the ``code`` attribute and in the message.
        """
        code, from_text = self.read_code(exc)
        rule = self.rule(code)
        label = self.label
        if rule is None and self.second_reading is not None:
            second = self.second_reading(exc)
            if second is not None:
                label, second_code, rule = second
                code, from_text = second_code, False
        detail = " ".join((str(exc) if self.describe is None else self.describe(exc)).split())
        if code is None:
            text = f"cannot {doing}: {detail}"
        else:
            read = ", read from the message" if from_text else ""
            meaning = f": {rule.meaning}" if rule is not None else ""
            text = f"cannot {doing} ({self.engine} {label} {code}{read}{meaning}): {detail}"
        if code is not None and rule is not None and rule.terminal:
            return SourceRefused(source, code, text, rule.fix)
        if unknown_retryable is None:
            unknown_retryable = self.unknown_retryable
        err: CaptureError
        if rule is None and not unknown_retryable:
            err = CaptureError(f"source {source}: {text}")
        else:
            err = SourceUnavailable(f"source {source}: {text}")
        err.code = code
        return err


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How a retryable error is retried: Debezium's ``errors.max.retries``,
    ``errors.retry.delay.initial.ms`` and ``errors.retry.delay.max.ms``.

    Attributes:
        max_retries: Retries before giving up; -1 = no limit, 0 = none.
        initial_s: First wait (seconds); doubled per retry.
        max_s: Longest wait.
    """

    max_retries: int = 5
    initial_s: float = 0.3
    max_s: float = 10.0

    @classmethod
    def from_config(cls, config: Any) -> RetryPolicy:
        """Read the three keys off a database source's config model."""
        return cls(
            int(config.errors_max_retries),
            config.errors_retry_delay_initial_ms / 1000,
            config.errors_retry_delay_max_ms / 1000,
        )

    def delays(self, rng: random.Random | None = None) -> Iterator[float]:
        """The wait before each retry: exponential, capped, each drawn in 50-100 % of its
        value ("equal jitter"), so agents that lost the same server spread their returns.

        >>> [round(d, 1) for d in RetryPolicy(3, 1.0, 3.0).delays(random.Random(1))]
        [0.6, 1.8, 2.6]
        """
        draw = rng or random.Random()
        delay = self.initial_s
        retry = 0
        while self.max_retries < 0 or retry < self.max_retries:
            yield delay * draw.uniform(0.5, 1.0)
            delay = min(delay * 2, self.max_s)
            retry += 1


POSTGRES = ServerErrors("PostgreSQL", "SQLSTATE", POSTGRES_ERRORS, postgres_code)
"""PostgreSQL's table (psycopg errors)."""

MYSQL = ServerErrors("MySQL", "errno", MYSQL_ERRORS, mysql_code)
"""MySQL/MariaDB's table (PyMySQL errors)."""
