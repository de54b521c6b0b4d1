"""Killed agents forked from a process that imported them once (``tests.contract.agent --serve``).

Each killed agent of the contract suite (``run_child``: about a hundred a run) used to start a
Python interpreter that imported the agent, bronze, deltalake, pydantic and its connector: about
0.9 CPU s before its first read, most of a child's cost. The server imports them once per
pytest process and forks the children; each is still a process of its own, with the caller's
environment, killed by ``SIGKILL`` at its fault point and ending as ``python -m`` does otherwise
(:mod:`tests.contract.agent`).
"""

from __future__ import annotations

import atexit
import os
import select
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import orjson

__all__ = ["ChildRun", "run_forked"]

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class ChildRun:
    """How a forked agent ended.

    Attributes:
        returncode: Its exit status (``-SIGKILL`` when a fault point killed it).
        output: What it wrote to stdout and stderr.
    """

    returncode: int
    output: str


_server: subprocess.Popen[bytes] | None = None


def _started() -> subprocess.Popen[bytes]:
    global _server
    if _server is None or _server.poll() is not None:
        env = {k: v for k, v in os.environ.items() if k != "MEDALLION_FAULTS"}
        env["PYTHONPATH"] = str(ROOT)
        _server = subprocess.Popen(
            [sys.executable, "-m", "tests.contract.agent", "--serve"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            # Unbuffered: a buffered read could take both answer lines at once, and the select
            # for the second would then wait on a pipe that has nothing more to say.
            bufsize=0,
            env=env,
        )
        atexit.register(_stop, _server)
    return _server


def _stop(server: subprocess.Popen[bytes]) -> None:
    if server.stdin is not None:
        server.stdin.close()
    try:
        server.wait(timeout=30)
    except subprocess.TimeoutExpired:
        server.kill()


def _answer(stream: IO[bytes], timeout: float) -> int | None:
    """The server's next line as an int; None when none came within ``timeout`` seconds."""
    ready, _, _ = select.select([stream], [], [], timeout)
    if not ready:
        return None
    line = stream.readline()
    if not line:
        raise RuntimeError("the agent fork server ended")
    return int(line)


def run_forked(argv: list[str], env: dict[str, str], timeout: float) -> ChildRun:
    """Run ``tests.contract.agent``'s ``main(argv)`` in a forked child with environment ``env``.

    Raises:
        TimeoutError: The child ran longer than ``timeout`` seconds (it is killed).
    """
    server = _started()
    assert server.stdin is not None and server.stdout is not None
    with tempfile.NamedTemporaryFile(prefix="contract-agent-", suffix=".log") as log:
        request = {"argv": argv, "env": env, "log": log.name}
        data = memoryview(orjson.dumps(request) + b"\n")
        while data:
            data = data[server.stdin.write(data) or 0 :]
        pid = _answer(server.stdout, 60)
        if pid is None:
            raise TimeoutError("the agent fork server did not fork within 60 s")
        returncode = _answer(server.stdout, timeout)
        if returncode is None:
            os.kill(pid, signal.SIGKILL)
            _answer(server.stdout, 60)
            raise TimeoutError(f"the agent ran over {timeout} s: {Path(log.name).read_text()}")
        return ChildRun(returncode, Path(log.name).read_text(errors="replace"))
