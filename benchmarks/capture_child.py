"""One capture agent run, as the capture benchmarks measure it, in a process of its own.

usage: python benchmarks/capture_child.py CONFIG_JSON LAKE MAX_EVENTS [PROFILE]

``CONFIG_JSON`` is a ``sources[]`` entry (``$VAR``s in its strings are expanded, so a password
travels in the environment, never on the command line); the agent lands into the bronze tables
under ``LAKE`` until it has caught up, with batches of ``MAX_EVENTS``. One JSON line on stdout:
rows landed and read, batches, wall and CPU seconds, the commit thread's CPU (what read-ahead
overlaps: ``MEDALLION_BENCH_READ_AHEAD=0`` turns it off) and the peak RSS. ``PROFILE`` 1 prints
a cProfile of the run on stderr (``MEDALLION_PROFILE_SORT``, ``MEDALLION_PROFILE_TOP``).

A process of its own: the interpreter's imports stay out of the figures, and the peak RSS is
the agent's alone.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any


def _config(raw: dict[str, Any]) -> Any:
    from capture.registry import SOURCE_CONFIG_MODELS
    from capture.source_config import SourceType

    expanded = {k: os.path.expandvars(v) if isinstance(v, str) else v for k, v in raw.items()}
    return SOURCE_CONFIG_MODELS[SourceType(expanded["connector"])].model_validate(expanded)


def main(argv: list[str]) -> None:
    """Run the agent once and print its figures (see the module docstring)."""
    from bronze.writer import BronzeTables, BronzeWriter
    from capture.registry import create_source
    from pipeline.landing import LandingAgent

    config = _config(json.loads(argv[0]))
    writer = BronzeWriter(BronzeTables.under(Path(argv[1])))
    commit_cpu = [0.0]
    plain_commit = writer.commit

    def timed_commit(**kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return plain_commit(**kwargs)
        finally:
            commit_cpu[0] += time.thread_time() - started

    writer.commit = timed_commit  # type: ignore[method-assign]
    agent = LandingAgent(
        create_source(config),
        writer,
        max_events=int(argv[2]),
        max_transaction_events=100_000,
        read_ahead=os.environ.get("MEDALLION_BENCH_READ_AHEAD", "1") != "0",
    )
    profiler = None
    if len(argv) > 3 and argv[3] == "1":
        import cProfile

        profiler = cProfile.Profile()
        profiler.enable()
    t0, c0, m0 = time.perf_counter(), time.process_time(), time.thread_time()
    result = agent.run()
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    agent_thread_cpu = time.thread_time() - m0  # the reads; the commits ran beside them
    if profiler is not None:
        import pstats

        profiler.disable()
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats(os.environ.get("MEDALLION_PROFILE_SORT", "cumulative"))
        stats.print_stats(int(os.environ.get("MEDALLION_PROFILE_TOP", "15")))
    with open("/proc/self/status") as status:
        hwm_kib = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    figures = {
        "landed": result.landed,
        "read": result.read,
        "quarantined": result.quarantined,
        "batches": result.batches,
        "seconds": elapsed,
        "cpu_seconds": cpu,
        "commit_cpu_seconds": commit_cpu[0],
        "agent_thread_cpu_seconds": agent_thread_cpu,
        "peak_rss_mib": hwm_kib / 1024,
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main(sys.argv[1:])
