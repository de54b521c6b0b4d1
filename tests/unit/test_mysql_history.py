"""The MySQL schema history table: append, deduplicate, replay below a resume point."""

from __future__ import annotations

from pathlib import Path

import pytest
from deltalake import DeltaTable

from bronze.position_base import Phase
from capture.mysql.history import HistoryEntry, SchemaHistory
from capture.mysql.position import MySqlPosition
from capture.mysql.server import merge_gtid

pytestmark = pytest.mark.unit


def at(pos: int, phase: Phase = Phase.STREAM, file_number: int = 1) -> MySqlPosition:
    return MySqlPosition(file_number, pos, phase, 0, 0, f"binlog.{file_number:06d}", None)


def test_entries_are_replayed_below_the_resume_point_and_written_once(tmp_path: Path) -> None:
    path = tmp_path / "schema_history"
    history = SchemaHistory(path, "my")
    snapshot = [
        HistoryEntry(at(100, Phase.SNAPSHOT), "reset", None, None),
        HistoryEntry(at(100, Phase.SNAPSHOT), "snapshot", "d", "CREATE TABLE t (id INT)"),
    ]
    assert history.append(snapshot) == 2
    alter = HistoryEntry(at(300), "ddl", "d", "ALTER TABLE t ADD c INT", "0-1-5", 1000)
    assert history.append([alter]) == 1
    # a run that crashed before its bronze commit wrote the ALTER; the re-read writes it again
    again = SchemaHistory(path, "my")
    assert again.append([alter]) == 0
    assert len(again.load()) == 3
    # the snapshot's entries sort below a stream resume at the snapshot point; the ALTER only
    # below a resume point after it (an event at the resume point is read again)
    at_snapshot = again.before(at(100))
    assert [e.kind for e in at_snapshot] == ["reset", "snapshot"]
    assert [e.kind for e in again.before(at(300))] == ["reset", "snapshot"]
    assert [e.ddl for e in again.before(at(301))][-1] == "ALTER TABLE t ADD c INT"
    assert [e.kind for e in again.before(at(4, file_number=2))] == ["reset", "snapshot", "ddl"]
    # other sources share the table and never see each other's entries
    assert SchemaHistory(path, "other").load() == []
    SchemaHistory(path, "other").append([HistoryEntry(at(5), "ddl", "x", "DROP TABLE y")])
    rows = DeltaTable(str(path)).to_pyarrow_table().to_pylist()
    assert sorted((r["source"], r["seq"]) for r in rows) == [
        ("my", 0),
        ("my", 1),
        ("my", 2),
        ("other", 0),
    ]
    assert SchemaHistory(path, "my").load()[2].gtid == "0-1-5"


def test_gtid_positions_merge_per_domain_and_per_source_uuid() -> None:
    assert merge_gtid(None, "0-1-1", mariadb=True) == "0-1-1"
    assert merge_gtid("0-1-7,1-2-3", "1-2-4", mariadb=True) == "0-1-7,1-2-4"
    assert merge_gtid("0-1-7", "0-1-8", mariadb=True) == "0-1-8"  # one domain: replaced
    assert merge_gtid("1-1-7", "0-1-8", mariadb=True) == "0-1-8,1-1-7"
    assert merge_gtid("10-1-7", "1-1-8", mariadb=True) == "1-1-8,10-1-7"
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    other = "4f22fa47-71ca-11e1-9e33-c80aa9429562"
    assert merge_gtid(None, f"{uuid}:1", mariadb=False) == f"{uuid}:1"
    assert merge_gtid(f"{uuid}:1-5", f"{uuid}:6", mariadb=False) == f"{uuid}:1-6"
    assert merge_gtid(f"{uuid}:1-5", f"{uuid}:9", mariadb=False) == f"{uuid}:1-5:9"
    assert (
        merge_gtid(f"{other}:1-3,{uuid}:1-5:7-9", f"{uuid.upper()}:6", mariadb=False)
        == f"{uuid}:1-9,{other}:1-3"
    )
