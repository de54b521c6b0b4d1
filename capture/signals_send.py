"""``medallion signal``: build a signal from the command line and send it to a source's agent."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from capture.signals import (
    EXECUTE_SNAPSHOT,
    LOG,
    STOP_SNAPSHOT,
    Signal,
    SignalError,
    new_signal_id,
    parse_signal,
)
from pipeline.config_model import did_you_mean
from pipeline.errors import ConfigError

__all__ = ["send", "signal_data"]


def signal_data(
    action: str,
    tables: Sequence[str],
    kind: str = "incremental",
    condition: str | None = None,
    message: str | None = None,
) -> dict[str, Any]:
    """The ``data`` of a signal given as command-line options.

    Raises:
        ConfigError: An option the action needs is missing, or one it cannot take is given.
    """
    if condition is not None and (action != EXECUTE_SNAPSHOT or len(tables) != 1):
        raise ConfigError("--condition takes execute-snapshot with exactly one --table")
    if action == EXECUTE_SNAPSHOT:
        if not tables:
            raise ConfigError("execute-snapshot needs at least one --table")
        data: dict[str, Any] = {"data-collections": list(tables), "type": kind}
        if condition is not None:
            data["additional-conditions"] = [{"data-collection": tables[0], "filter": condition}]
        return data
    if action == STOP_SNAPSHOT:
        return {"data-collections": list(tables), "type": kind} if tables else {}
    if action == LOG:
        if message is None:
            raise ConfigError("a log signal needs --message")
        return {"message": message}
    return {}


def send(
    config: Any,
    source: str,
    action: str,
    tables: Sequence[str],
    kind: str = "incremental",
    condition: str | None = None,
    message: str | None = None,
) -> str:
    """Send one signal to ``source``'s agent; returns the channel it went through.

    Raises:
        ConfigError: Unknown source, or options the action cannot take.
        CaptureError: The source has no signal channel, or its agent takes no signals.
    """
    from capture.incremental_snapshot import IncrementalSnapshots
    from capture.registry import create_source

    names = [s.name for s in config.sources]
    source_config = next((s for s in config.sources if s.name == source), None)
    if source_config is None:
        hint = did_you_mean(source, names)
        raise ConfigError(f"unknown source {source!r}" + (f"; {hint}" if hint else ""))
    try:
        signal = parse_signal(
            new_signal_id(), action, signal_data(action, tables, kind, condition, message)
        )
    except SignalError as exc:
        raise ConfigError(str(exc)) from exc
    agent = create_source(source_config)
    if not isinstance(agent, IncrementalSnapshots):
        raise ConfigError(f"source {source}: its connector's agent reads no signals")
    return agent.send_signal(Signal(signal.id, signal.type, signal.data))
