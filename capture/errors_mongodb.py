"""MongoDB's server error codes and labels, mapped to what a runner may do about them.

pymongo raises ``OperationFailure`` (and its subclasses) for a command the server answered with
``{ok: 0, code, codeName, errmsg, errorLabels}``: its ``code`` is the server's code, and
``has_error_label`` reads the labels. A "not primary" or "shutting down" answer (code 91, 189,
10107, ...) becomes ``NotPrimaryError``, an ``AutoReconnect`` whose ``details`` hold the reply.
Errors without a server reply are classes of ``ConnectionFailure`` (``AutoReconnect``,
``NetworkTimeout``, ``ServerSelectionTimeoutError``, ...), looked up by class name here.

The code decides first (:data:`MONGODB_ERRORS`); for a code no rule knows, the server's labels
(``RetryableError``, ``ResumableChangeStreamError``, ``RetryableWriteError``,
``TransientTransactionError``, ``NetworkError`` -> retried; ``NonResumableChangeStreamError``
-> terminal). An operation failure neither knows is a plain error, not retried: the server
answered, so trying the same command again gives the same answer.

Sources: the MongoDB server's error codes (``src/mongo/base/error_codes.yml``), the drivers'
SDAM and retryable reads/writes specifications (the "not primary", "node is recovering" and
retryable codes pymongo uses) and the change streams specification (resumable errors).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from capture.server_errors import RECONNECT, CodeRule, ServerErrors, code_rules

__all__ = ["MONGODB", "MONGODB_ERRORS", "RETRYABLE_LABELS", "mongodb_code"]

_RECONNECT = RECONNECT + "; the stream resumes from its last token"
_CREDENTIALS = (
    "check the source's user and password (mongodb.user, mongodb.password or the "
    "credentials in mongodb.connection.string) and the authentication database (authSource)"
)
_ROLES = (
    "grant the capture user the read role on the captured databases (the find and "
    "changeStream actions; on MongoDB before 4.2, read on the admin database too) and read "
    "on 'local' for medallion status"
)


MONGODB_ERRORS: Mapping[str, CodeRule] = code_rules(
    CodeRule("18", True, "authentication failed (AuthenticationFailed)", _CREDENTIALS),
    CodeRule("11", True, "the user does not exist (UserNotFound)", _CREDENTIALS),
    CodeRule("13", True, "not authorized (Unauthorized)", _ROLES),
    CodeRule(
        "8000",
        True,
        "MongoDB Atlas refused (AtlasError: a bad user name or password, or an action the "
        "Atlas database user may not run)",
        _CREDENTIALS + "; in Atlas, give the database user the read role on the captured databases",
    ),
    CodeRule(
        "40573",
        True,
        "change streams are only supported on replica sets (Location40573)",
        "run the server as a (one-member) replica set or connect through a mongos",
    ),
    CodeRule(
        "286",
        True,
        "the resume point is no longer in the oplog (ChangeStreamHistoryLost)",
        "take a new snapshot (clear the source's offset), and size the oplog for the longest "
        "pause of the agent",
    ),
    CodeRule(
        "ConfigurationError",
        True,
        "the client configuration is invalid",
        "check mongodb.connection.string / mongodb.hosts and the options in them",
    ),
    CodeRule("6", False, "host unreachable (HostUnreachable)", _RECONNECT),
    CodeRule("7", False, "host not found (HostNotFound)", _RECONNECT),
    CodeRule("43", False, "the cursor is gone (CursorNotFound, e.g. after a restart)", _RECONNECT),
    CodeRule("89", False, "a network timeout (NetworkTimeout)", _RECONNECT),
    CodeRule("91", False, "the server is shutting down (ShutdownInProgress)", _RECONNECT),
    CodeRule("133", False, "no member matches the read preference", _RECONNECT),
    CodeRule("134", False, "read concern majority not available yet", _RECONNECT),
    CodeRule("189", False, "the primary stepped down (PrimarySteppedDown)", _RECONNECT),
    CodeRule("262", False, "the time limit was exceeded (ExceededTimeLimit)", _RECONNECT),
    CodeRule("9001", False, "a socket error (SocketException)", _RECONNECT),
    CodeRule("10107", False, "not the primary (NotWritablePrimary)", _RECONNECT),
    CodeRule("11600", False, "interrupted at shutdown (InterruptedAtShutdown)", _RECONNECT),
    CodeRule("11602", False, "interrupted by a replica set state change", _RECONNECT),
    CodeRule("13435", False, "not primary and secondaryOk not set", _RECONNECT),
    CodeRule("13436", False, "neither primary nor secondary (NotPrimaryOrSecondary)", _RECONNECT),
    CodeRule(
        "ServerSelectionTimeoutError", False, "no server could be selected in time", _RECONNECT
    ),
    CodeRule("NetworkTimeout", False, "a network operation timed out", _RECONNECT),
    CodeRule("WaitQueueTimeoutError", False, "no pooled connection was free in time", _RECONNECT),
    CodeRule("NotPrimaryError", False, "the server is not primary or is recovering", _RECONNECT),
    CodeRule("AutoReconnect", False, "the connection was lost", _RECONNECT),
    CodeRule("ConnectionFailure", False, "the connection failed", _RECONNECT),
)
"""Server codes (as text) and pymongo's connection-level exception classes."""

RETRYABLE_LABELS = (
    "RetryableError",
    "ResumableChangeStreamError",
    "RetryableWriteError",
    "TransientTransactionError",
    "NetworkError",
)
"""``errorLabels`` that say the operation may succeed if tried again."""

_NON_RESUMABLE = CodeRule(
    "NonResumableChangeStreamError",
    True,
    "the change stream cannot resume",
    "read the server's message; a resume point gone from the oplog needs a new snapshot "
    "(clear the source's offset)",
)


def mongodb_code(exc: BaseException) -> tuple[str | None, bool]:
    """The server's code of a pymongo error (``code``, or ``details.code`` of a
    ``NotPrimaryError``), else the name of its pymongo class the table knows."""
    code: Any = getattr(exc, "code", None)
    if code is None:
        details = getattr(exc, "details", None)
        if isinstance(details, Mapping):
            code = details.get("code")
    if isinstance(code, int) and not isinstance(code, bool):
        return str(code), False
    for cls in type(exc).__mro__:
        if cls.__module__.startswith("pymongo") and cls.__name__ in MONGODB_ERRORS:
            return cls.__name__, False
    return None, False


def _by_label(exc: BaseException) -> tuple[str, str, CodeRule] | None:
    has = getattr(exc, "has_error_label", None)
    if has is None:
        return None
    if has(_NON_RESUMABLE.code):
        return "errorLabel", _NON_RESUMABLE.code, _NON_RESUMABLE
    for label in RETRYABLE_LABELS:
        if has(label):
            return "errorLabel", label, CodeRule(label, False, "the server says retry", _RECONNECT)
    return None


def _errmsg(exc: BaseException) -> str:
    """The server's ``errmsg`` (pymongo appends the whole reply to it in ``str``)."""
    details = getattr(exc, "details", None)
    if isinstance(details, Mapping) and isinstance(details.get("errmsg"), str):
        return str(details["errmsg"])
    return str(exc)


MONGODB = ServerErrors(
    "MongoDB",
    "code",
    MONGODB_ERRORS,
    mongodb_code,
    _by_label,
    unknown_retryable=False,
    describe=_errmsg,
)
"""MongoDB's table (pymongo errors)."""
