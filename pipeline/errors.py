"""The one error hierarchy of medallion.

Every error raised on purpose by medallion derives from :class:`PipelineError`, so callers can
catch everything with one ``except``. Two marker mixins say what a runner may do about it:

* :class:`Retryable`: the same call may succeed later (a source is down, a Delta commit lost a
  race). Runners retry with back-off.
* :class:`Terminal`: retrying cannot help (broken config, a position that went backwards).
  Runners stop and report.

Exceptions keep their inputs as attributes, build their own message and stay picklable, because
Spark ships exceptions between processes.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "PipelineError",
    "Retryable",
    "Terminal",
    "ConfigError",
    "NotInstalledError",
    "NotBuiltError",
    "CaptureError",
    "SourceUnavailable",
    "CaptureStopped",
    "EnvelopeError",
    "PositionError",
    "BronzeError",
    "BronzeCommitConflict",
    "OffsetError",
    "StageFailed",
    "InternalError",
    "SilverError",
    "SchemaEvolutionError",
    "GoldError",
    "ReconcileError",
]


class PipelineError(Exception):
    """Root of every medallion error; catch this to catch them all."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __reduce__(self) -> tuple[Any, ...]:
        # Subclasses take their own constructor arguments; rebuilding from the final message
        # through the base keeps every subclass picklable without per-class boilerplate.
        return (_rebuild, (type(self), self.message, self.__dict__))

    def __str__(self) -> str:
        return self.message


def _rebuild(cls: type[PipelineError], message: str, state: dict[str, Any]) -> PipelineError:
    err = cls.__new__(cls)
    Exception.__init__(err, message)
    err.__dict__.update(state)
    return err


class Retryable:
    """Marker: the operation may succeed if tried again later."""


class Terminal:
    """Marker: retrying cannot help; a person must act."""


class ConfigError(PipelineError, Terminal):
    """The configuration is invalid; names the file, the key path and the reason."""

    def __init__(
        self, reason: str, *, file: str | None = None, key_path: str | None = None
    ) -> None:
        self.reason = reason
        self.file = file
        self.key_path = key_path
        where = ", ".join(p for p in (file, f"key '{key_path}'" if key_path else None) if p)
        super().__init__(f"{where}: {reason}" if where else reason)


class NotInstalledError(PipelineError, Terminal):
    """An optional driver is missing; the message says what to install."""


class NotBuiltError(PipelineError, Terminal):
    """A command or source exists in the design but is not implemented yet."""


class CaptureError(PipelineError):
    """A capture agent failed while reading its source."""

    code: str | None = None
    """The server's own code (SQLSTATE, errno) when the error came from the server."""


class CaptureStopped(CaptureError, Terminal):
    """Capture cannot go on until a person acts: a DDL statement that does not parse, a
    replication message of unknown layout. Keeps the terminal marker of its cause."""


class SourceUnavailable(CaptureError, Retryable):
    """The source database or input cannot be reached right now."""


class EnvelopeError(PipelineError, Terminal):
    """A record is not a valid Debezium change event.

    Attributes:
        reason: What is wrong, in one sentence.
        origin: Where the record came from (file and line, or a source position).
    """

    def __init__(self, reason: str, *, origin: str | None = None) -> None:
        self.reason = reason
        self.origin = origin
        super().__init__(f"{origin}: {reason}" if origin else reason)


class PositionError(EnvelopeError):
    """A source position is missing, malformed or cannot be ordered."""


class BronzeError(PipelineError):
    """Writing to or reading from the bronze tables failed."""


class BronzeCommitConflict(BronzeError, Retryable):
    """A concurrent writer committed first; the batch can be retried."""


class OffsetError(BronzeError, Terminal):
    """The committed offsets in bronze are inconsistent with the agent's state."""


class SilverError(PipelineError):
    """Applying bronze to silver failed."""


class SchemaEvolutionError(SilverError, Terminal):
    """A schema change the table's policy (``fail``) does not allow; names table and columns."""

    def __init__(self, table: str, schema_id: str | None, changes: tuple[str, ...]) -> None:
        self.table = table
        self.schema_id = schema_id
        self.changes = changes
        super().__init__(
            f"silver table {table}: schema {schema_id or '(inferred)'} changes "
            + "; ".join(changes)
            + " and the table's schema.evolution policy is 'fail'. Nothing was applied; set "
            "silver.tables.<table>.schema.evolution to 'evolve' or 'quarantine' (or fix the "
            "table) and run again: the job resumes from the same bronze rows"
        )


class GoldError(PipelineError, Terminal):
    """A gold table or check cannot be built as declared; names the table and config key."""

    def __init__(self, reason: str, *, key_path: str | None = None) -> None:
        self.key_path = key_path
        super().__init__(reason + (f" (config key '{key_path}')" if key_path else ""))


class ReconcileError(PipelineError, Terminal):
    """A source cannot be reconciled with gold (no database, table missing, ...)."""


class InternalError(PipelineError, Terminal):
    """A medallion invariant does not hold (a bug): raised where a bare ``assert`` would have
    been, because ``python -O`` drops asserts and the code would go on with a wrong value."""


class StageFailed(PipelineError):
    """A pipeline stage failed; wraps the cause and names the stage and batch."""

    def __init__(self, stage: str, cause: BaseException, *, batch_id: str | None = None) -> None:
        self.stage = stage
        self.batch_id = batch_id
        self.cause_repr = repr(cause)
        batch = f" (batch {batch_id})" if batch_id else ""
        super().__init__(f"stage {stage}{batch} failed: {cause}")
