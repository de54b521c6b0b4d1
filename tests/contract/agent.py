"""``python -m tests.contract.agent RAW_CONFIG_JSON LAKE MAX_TX``: land a source once, as
:func:`tests.contract.harness.land` does; run as a child so that a fault point can kill it."""

from __future__ import annotations

import sys
from pathlib import Path

import orjson

from tests.contract.harness import agent


def main() -> None:
    """Land until the source is exhausted; print what was read, landed, quarantined."""
    raw, lake, max_tx = orjson.loads(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    result = agent(raw, lake, max_transaction_events=max_tx).run()
    print(result.read, result.landed, result.quarantined)


if __name__ == "__main__":
    main()
