"""``python -m tests.contract.agent RAW_CONFIG_JSON LAKE MAX_TX``: land a source once, as
:func:`tests.contract.harness.land` does; run as a child so that a fault point can kill it.

``python -m tests.contract.agent --serve`` is the parent of those children in the suite
(:mod:`tests.contract.agent_forks`): it imports the agent and every connector's capture module
once, then forks one child per line of JSON on its stdin (``argv``, ``env``, ``log``). The child
takes that environment, writes its stdout and stderr to ``log``, runs :func:`main` and leaves
the way ``python -m`` would (threads joined, ``atexit`` run, exit status 1 on an error). The
server answers each request with two lines: the child's pid, then its return code.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
import sys
from collections.abc import Sequence
from pathlib import Path

import orjson

import capture
from tests.contract.harness import agent


def main(argv: Sequence[str] | None = None) -> None:
    """Land until the source is exhausted; print what was read, landed, quarantined."""
    raw_json, lake, max_tx = argv if argv is not None else sys.argv[1:4]
    raw = orjson.loads(raw_json)
    result = agent(raw, Path(lake), max_transaction_events=int(max_tx)).run()
    print(result.read, result.landed, result.quarantined)


def _import_connectors() -> None:
    """Import every connector's capture module (what each child would import first)."""
    for module in pkgutil.iter_modules(capture.__path__):
        if module.ispkg:
            try:
                importlib.import_module(f"capture.{module.name}.source")
            except ImportError:
                pass  # a connector without its driver: its child reports that itself


def serve() -> None:
    """Fork a child per request on stdin until stdin closes (see the module docstring)."""
    _import_connectors()
    answers = sys.stdout.buffer
    for line in sys.stdin.buffer:
        request = orjson.loads(line)
        pid = os.fork()
        if pid == 0:
            _become_child(request)
            main(request["argv"])
            return  # the child ends as a process started with ``python -m`` does
        answers.write(b"%d\n" % pid)
        answers.flush()
        _, status = os.waitpid(pid, 0)
        answers.write(b"%d\n" % os.waitstatus_to_exitcode(status))
        answers.flush()


def _become_child(request: dict[str, object]) -> None:
    env = request["env"]
    assert isinstance(env, dict)
    os.environ.clear()
    os.environ.update(env)
    log = os.open(str(request["log"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    null = os.open(os.devnull, os.O_RDONLY)
    for source, target in ((null, 0), (log, 1), (log, 2)):
        os.dup2(source, target)
    os.close(log)
    os.close(null)


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        main()
