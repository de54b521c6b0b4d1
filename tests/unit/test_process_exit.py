"""The ``medallion`` entry point ends the process with the command's exit code, after the exit
handlers and with every line flushed (:mod:`pipeline.process_exit`), in a real child process."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.fix_servers import REPO_ROOT


def _python(code: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=120,
        check=False,
    )


def test_exit_process_runs_exit_handlers_flushes_and_keeps_the_code() -> None:
    done = _python(
        """
        import atexit, logging, sys
        from pipeline.process_exit import exit_process
        logging.basicConfig(stream=sys.stderr, format="%(message)s", level=logging.INFO)
        atexit.register(lambda: print("handler ran", end=""))
        print("unflushed ", end="")
        logging.getLogger("x").info("last log line")
        exit_process(75)
        print("never")
        """
    )
    assert done.returncode == 75, done.stderr
    assert done.stdout == "unflushed handler ran"
    assert "last log line" in done.stderr


def test_the_entry_point_exits_with_the_commands_code(tmp_path: Path) -> None:
    entry = "import sys; from pipeline.cli import run; sys.argv[0] = 'medallion'; run()"
    ok = _python(entry, "--help", cwd=tmp_path)
    assert ok.returncode == 0, ok.stderr
    assert "Usage: medallion" in ok.stdout

    missing = _python(entry, "--config", str(tmp_path / "nope.yaml"), "status", cwd=tmp_path)
    assert missing.returncode == 2, (missing.stdout, missing.stderr)
    assert "configuration error" in missing.stderr

    usage = _python(entry, "no-such-command", cwd=tmp_path)
    assert usage.returncode == 2, usage.stderr
    assert "No such command" in usage.stderr


def test_errors_logged_because_of_a_requested_shutdown_are_dropped() -> None:
    import logging
    import signal

    from pipeline.shutdown import DropRequestedShutdown, ShutdownRequested

    def record(exc: BaseException) -> logging.LogRecord:
        return logging.LogRecord(
            "py4j", logging.ERROR, __file__, 1, "x", (), (type(exc), exc, None)
        )

    requested = ShutdownRequested(signal.SIGTERM)
    during = BrokenPipeError("while shutting down the connection")
    during.__context__ = requested
    keep = DropRequestedShutdown()
    assert not keep.filter(record(requested))
    assert not keep.filter(record(during))  # py4j's second traceback, raised while handling it
    assert keep.filter(record(BrokenPipeError("a real one")))
    assert keep.filter(logging.LogRecord("x", logging.ERROR, __file__, 1, "no exc", (), None))
