"""Leave the process with the command's exit code, and nothing after it can change that code.

A ``medallion`` command that finished its work used to die, about once in ten runs, in the
interpreter's own teardown: ``terminate called without an active exception`` and SIGABRT (exit
134), after a successful run. That message is ``std::terminate`` from the destructor of a C++
``std::thread`` still joinable at process exit: Arrow's thread pools (pyarrow, used by deltalake
and pandas) are static objects torn down while a worker may still be alive (apache/arrow#34314,
delta-io/delta-rs#2184). A scheduler then marks a good run as failed and retries it.

So the entry point does the part of the exit that matters, in order, and skips the rest:

1. the ``atexit`` handlers (pyspark's and py4j's, ``weakref.finalize`` finalizers such as
   temporary directories), as a normal exit would run them;
2. logging's handlers and the standard streams are flushed, so no line is lost;
3. ``os._exit(code)``: the kernel reclaims the rest; no C++ static destructor runs.

Nothing durable depends on step 3 being skipped: every Delta commit and offset is complete
before a command returns (that is the exactly-once argument), and file handles are closed by
the kernel.
"""

from __future__ import annotations

import atexit
import logging
import os
import sys

__all__ = ["exit_code_of", "exit_process"]


def exit_code_of(exc: SystemExit) -> int:
    """The process exit code a ``SystemExit`` stands for, as the interpreter would compute it.

    ``None`` is 0, an integer is itself (masked to a byte by the kernel), anything else is
    printed to stderr and is 1.

    >>> exit_code_of(SystemExit(None)), exit_code_of(SystemExit(75)), exit_code_of(SystemExit(0))
    (0, 75, 0)
    """
    code = exc.code
    if code is None:
        return 0
    if isinstance(code, int) and not isinstance(code, bool):
        return code
    print(code, file=sys.stderr)
    return 1


def exit_process(code: int) -> None:
    """Run the exit handlers, flush everything, and end the process with ``code`` (never returns).

    Args:
        code: The process exit code.
    """
    try:
        atexit._run_exitfuncs()
    finally:
        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass  # a closed pipe: the reader is gone, nothing left to lose
        os._exit(code)
