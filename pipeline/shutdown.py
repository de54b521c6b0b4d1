"""Clean, logged shutdown on SIGTERM and SIGINT.

A scheduler stops a capture agent or a job with SIGTERM; a person with Ctrl-C (SIGINT). Python's
default SIGTERM ends the process without a word, and nothing says whether the batch in flight
landed. :class:`Shutdown`, installed by the CLI, makes both signals behave alike:

* the **first** signal, while a command runs that can stop between batches (``capture
  --follow``), sets :attr:`Shutdown.stop`: the agent finishes and commits the batch in flight,
  closes its source (a PostgreSQL stream confirms what bronze holds) and returns; the command
  logs where it stopped and exits 0;
* a signal when no command is listening, or a **second** one, abandons the work in flight by
  raising :class:`ShutdownRequested` in the main thread. Nothing is lost: bronze commits are
  atomic and the source is acknowledged only after a commit, so the abandoned batch is read
  again on the next start (the same guarantee as under ``kill -9``, which the contract suite
  tests). The CLI exits ``128 + signal number``, as a shell reports a signal.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

__all__ = ["DropRequestedShutdown", "Shutdown", "ShutdownRequested"]

logger = logging.getLogger(__name__)


class ShutdownRequested(KeyboardInterrupt):
    """A signal asked to stop now; a KeyboardInterrupt so ``except Exception`` lets it pass.

    Attributes:
        signal_name: ``SIGTERM`` or ``SIGINT``.
        exit_code: ``128 + signal number``.
    """

    def __init__(self, signum: int) -> None:
        self.signal_name = signal.Signals(signum).name
        self.exit_code = 128 + signum
        super().__init__(self.signal_name)


class Shutdown:
    """The process's signal handling (see the module docstring)."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.stop = threading.Event()
        """Set by the first signal while :attr:`cooperative`; pass it to agents as ``stop``."""
        self.cooperative = False
        """True while the running command stops between batches when :attr:`stop` is set."""
        self.received: str | None = None
        """Name of the first signal received, if any."""

    def install(self) -> None:
        """Handle SIGTERM and SIGINT (main thread only; elsewhere a no-op)."""
        if threading.current_thread() is not threading.main_thread():
            return
        self.stop.clear()
        self.received = None
        for signum in self.SIGNALS:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, _frame: FrameType | None) -> None:
        name = signal.Signals(signum).name
        if self.cooperative and not self.stop.is_set():
            self.received = name
            logger.warning(
                "received %s: stopping after the batch in flight is committed "
                "(send it again to abandon that batch; it is then read again on the next start)",
                name,
            )
            self.stop.set()
            return
        self.received = self.received or name
        logger.warning(
            "received %s: stopping now; work in flight is abandoned and redone on the next "
            "start (bronze commits are atomic, so nothing is lost or landed twice)",
            name,
        )
        raise ShutdownRequested(signum)


class DropRequestedShutdown(logging.Filter):
    """Drops log records whose exception is (or was raised while handling) a
    :class:`ShutdownRequested`: libraries interrupted by it, such as py4j in the middle of a
    call into the JVM, log it as an error with a traceback, for a stop that was asked for and
    is logged once by the CLI."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        seen: set[int] = set()
        while exc is not None and id(exc) not in seen:
            if isinstance(exc, ShutdownRequested):
                return False
            seen.add(id(exc))
            exc = exc.__cause__ or exc.__context__
        return True
