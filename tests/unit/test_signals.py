"""Signal parsing, the signal file channel, the command line's signal data, the progress kept in
the offset and the filters ``reconcile --repair`` sends (no database needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from capture.incremental_snapshot import IncrementalProgress
from capture.signals import (
    EXECUTE_SNAPSHOT,
    FileSignals,
    Signal,
    SignalError,
    parse_signal,
)
from capture.signals_send import signal_data
from pipeline.errors import ConfigError


def test_an_execute_snapshot_signal_parses_with_its_conditions() -> None:
    signal = parse_signal(
        "s1",
        EXECUTE_SNAPSHOT,
        '{"data-collections": ["public.a", "public.b"], "type": "INCREMENTAL", '
        '"additional-conditions": [{"data-collection": "public.a", "filter": "id > 3"}]}',
    )
    request = signal.snapshot_request()
    assert request.collections == ("public.a", "public.b")
    assert request.kind == "incremental"
    assert request.conditions == {"public.a": "id > 3"}


@pytest.mark.parametrize(
    ("signal_type", "data", "reason"),
    [
        ("frobnicate", "{}", "unknown type 'frobnicate'"),
        (EXECUTE_SNAPSHOT, "not json", "data is not JSON"),
        (EXECUTE_SNAPSHOT, "[1]", "must be a JSON object"),
        (EXECUTE_SNAPSHOT, "{}", "'data-collections' must be a non-empty list"),
        (EXECUTE_SNAPSHOT, '{"data-collections": ["a.b"], "type": "full"}', "'type' must be"),
        (
            EXECUTE_SNAPSHOT,
            '{"data-collections": ["a.b"], "additional-conditions": '
            '[{"data-collection": "a.c", "filter": "x"}]}',
            "not in data-collections",
        ),
        ("log", "{}", "needs a 'message'"),
    ],
)
def test_a_bad_signal_is_refused_with_its_reason(signal_type: str, data: str, reason: str) -> None:
    with pytest.raises(SignalError, match=reason):
        parse_signal("s1", signal_type, data)
    with pytest.raises(SignalError, match="no id"):
        parse_signal("", "log", '{"message": "x"}')


def test_the_signal_file_is_read_past_its_complete_lines(tmp_path: Path) -> None:
    channel = FileSignals(tmp_path / "signals.jsonl")
    assert channel.read_after(0) == []
    channel.append(Signal("a", "log", {"message": "one"}))
    with channel.path.open("ab") as out:
        out.write(b"{not json\n")
        out.write(b'{"id": "c", "type": "log"')  # still being written: no newline yet
    read = channel.read_after(0)
    assert [n for n, _, _ in read] == [1, 2]
    first, second = read[0][2], read[1][2]
    assert isinstance(first, Signal) and first.data == {"message": "one"}
    assert isinstance(second, SignalError) and "line 2: not JSON" in str(second)
    assert channel.read_after(2) == []


def test_command_line_options_become_signal_data() -> None:
    data = signal_data(EXECUTE_SNAPSHOT, ["s.t"], condition="id < 10")
    assert data == {
        "data-collections": ["s.t"],
        "type": "incremental",
        "additional-conditions": [{"data-collection": "s.t", "filter": "id < 10"}],
    }
    assert signal_data("log", [], message="hi") == {"message": "hi"}
    assert signal_data("stop-snapshot", []) == {}
    with pytest.raises(ConfigError, match="at least one --table"):
        signal_data(EXECUTE_SNAPSHOT, [])
    with pytest.raises(ConfigError, match="exactly one --table"):
        signal_data(EXECUTE_SNAPSHOT, ["a.b", "a.c"], condition="x")


def test_incremental_progress_round_trips_through_the_offset() -> None:
    progress = IncrementalProgress("id", ["s.a", "s.b"], {"s.a": "x > 1"}, ["4"], ["90"], 2, 80)
    assert IncrementalProgress.from_json(progress.to_json()) == progress
    progress.next_table()
    assert (progress.tables, progress.after, progress.until) == (["s.b"], None, None)


def test_repair_filters_quote_names_and_values_per_engine() -> None:
    from pydantic import TypeAdapter

    from capture.registry import create_source
    from pipeline.config import SourceConfig

    def agent(connector: str, **extra: str) -> Any:
        raw = {"name": "x", "connector": connector, "database.hostname": "h"}
        return create_source(
            TypeAdapter(SourceConfig).validate_python({**raw, "database.user": "u", **extra})
        )

    keys = [{"id": 7, "name": "o'neil\\x"}, {"id": 12, "name": None}]
    assert agent("postgresql", **{"database.dbname": "d"}).key_condition(keys) == (
        '("id" = 7 AND "name" = \'o\'\'neil\\x\') OR ("id" = 12 AND "name" IS NULL)'
    )
    assert agent("mysql").key_condition(keys[:1]) == "(`id` = 7 AND `name` = 'o''neil\\\\x')"


def test_medallion_signal_appends_to_the_signal_file_of_a_source_without_a_table(
    tmp_path: Path,
) -> None:
    import orjson
    from click.testing import CliRunner

    from pipeline.cli import cli

    signals = tmp_path / "pg.signals"
    config = tmp_path / "pipeline.yaml"
    config.write_text(
        f"lake:\n  root: {tmp_path / 'lake'}\nsources:\n  - name: pg\n    connector: postgresql\n"
        "    database.hostname: localhost\n    database.user: u\n    database.dbname: d\n"
        f"    signal.file: {signals}\n"
    )
    args = ["--config", str(config), "signal", "pg", "execute-snapshot", "-t", "public.a"]
    result = CliRunner().invoke(cli, [*args, "--condition", "id > 5"])
    assert result.exit_code == 0, result.output
    assert f"through the signal file {signals}" in result.output
    line = orjson.loads(signals.read_bytes())
    assert line["type"] == "execute-snapshot"
    assert line["data"]["additional-conditions"] == [
        {"data-collection": "public.a", "filter": "id > 5"}
    ]
    bad = CliRunner().invoke(
        cli, ["--config", str(config), "signal", "pgg", "log", "--message", "x"]
    )
    assert bad.exit_code != 0 and "unknown source 'pgg'; did you mean 'pg'?" in bad.output
