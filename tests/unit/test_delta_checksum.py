"""bronze/delta_checksum.py on real Delta tables written with deltalake, and on hand-made logs for
what it must refuse: the totals are the live files' (checked against deltalake's own replay),
the metadata and protocol are the log's actions as written, and whatever it cannot account for
exactly writes no file. Delta's own reading of such a file (protocol and metadata without a
Spark job, its validation against the state) is in
``tests/integration/test_gold_view_checksums.py``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from bronze.delta_checksum import version_checksum
from bronze.storage import parse_object_uri

pytestmark = pytest.mark.unit


def _crc(path: Path, version: int) -> Path:
    return path / "_delta_log" / f"{version:020d}.crc"


def _live(path: Path, version: int) -> tuple[int, int]:
    files = pa.table(DeltaTable(str(path), version=version).get_add_actions(flatten=False))
    return files.num_rows, sum(files.column("size_bytes").to_pylist())


def _logged(path: Path, action: str) -> dict[str, Any]:
    """The newest ``action`` (``metaData``/``protocol``) as the log holds it."""
    found: dict[str, Any] = {}
    for commit in sorted((path / "_delta_log").glob("*.json")):
        for line in commit.read_text().splitlines():
            found.update({k: v for k, v in json.loads(line).items() if k == action})
    return found[action]


def test_totals_metadata_and_protocol_are_the_logs(tmp_path: Path) -> None:
    path = tmp_path / "t"
    write_deltalake(str(path), pa.table({"id": [1, 2, 3], "s": ["a", "b", "c"]}))
    write_deltalake(str(path), pa.table({"id": [4], "s": ["d"]}), mode="append")
    DeltaTable(str(path)).delete("id = 2")  # a remove (with its size) and a rewritten file
    # No checksum anywhere: every commit from version 0 replayed.
    two = version_checksum(path, 2)
    assert two is not None and _crc(path, 2).exists()
    assert (two.num_files, two.table_size_bytes) == _live(path, 2)
    assert two.metadata == _logged(path, "metaData") and two.protocol == _logged(path, "protocol")
    assert two.columns == ["id", "s"]
    written = json.loads(_crc(path, 2).read_bytes())
    assert written["numMetadata"] == written["numProtocol"] == 1
    # What a checksum names it must name whole: app transactions and domains are left to Delta.
    assert "setTransactions" not in written and "domainMetadata" not in written
    # The next versions from the checksum below them (a column added on the way).
    write_deltalake(
        str(path),
        pa.table({"id": [5], "s": ["e"], "n": [1.5]}),
        mode="append",
        schema_mode="merge",
    )
    DeltaTable(str(path)).delete("id = 4")
    four = version_checksum(path, 4)
    assert four is not None and (four.num_files, four.table_size_bytes) == _live(path, 4)
    assert four.columns == ["id", "s", "n"] and four.metadata == _logged(path, "metaData")
    assert not _crc(path, 3).exists()  # only the version asked for is written
    # A written file is read back, never rewritten.
    before = _crc(path, 4).read_bytes()
    assert version_checksum(path, 4) == four and _crc(path, 4).read_bytes() == before
    assert not [p for p in (path / "_delta_log").iterdir() if p.name.endswith(".tmp")]


def _commit(path: Path, version: int, *actions: dict[str, Any]) -> None:
    log = path / "_delta_log"
    log.mkdir(parents=True, exist_ok=True)
    text = "\n".join(json.dumps(a) for a in actions) + "\n"
    (log / f"{version:020d}.json").write_text(text)


_SCHEMA = json.dumps({"type": "struct", "fields": [{"name": "id", "type": "long"}]})


def _metadata(**configuration: str) -> dict[str, Any]:
    return {
        "metaData": {
            "id": "t",
            "format": {"provider": "parquet", "options": {}},
            "schemaString": _SCHEMA,
            "partitionColumns": [],
            "configuration": configuration,
        }
    }


_PROTOCOL = {"protocol": {"minReaderVersion": 1, "minWriterVersion": 2}}


def _add(name: str, size: int) -> dict[str, Any]:
    return {"add": {"path": name, "size": size, "dataChange": True}}


def _remove(name: str, size: int | None) -> dict[str, Any]:
    extended = {"extendedFileMetadata": True, "size": size} if size is not None else {}
    return {"remove": {"path": name, "dataChange": True, **extended}}


def _info(operation: str, **extra: Any) -> dict[str, Any]:
    return {"commitInfo": {"operation": operation, **extra}}


def test_what_cannot_be_accounted_for_writes_nothing(tmp_path: Path) -> None:
    # From version 0, a file added twice (its statistics recomputed) is one file.
    table = tmp_path / "replayed"
    _commit(table, 0, _info("WRITE"), _PROTOCOL, _metadata(), _add("a", 10), _add("b", 5))
    _commit(table, 1, _info("COMPUTE STATS"), _add("a", 10))
    one = version_checksum(table, 1)
    assert one is not None and (one.num_files, one.table_size_bytes) == (2, 15)
    # From a checksum: a re-add that Delta does not count is not counted either.
    _commit(table, 2, _info("COMPUTE STATS"), _add("b", 5))
    assert version_checksum(table, 2) is not None
    assert json.loads(_crc(table, 2).read_bytes())["numFiles"] == 2

    cases: dict[str, list[dict[str, Any]]] = {
        "remove without size": [_info("DELETE"), _remove("a", None)],
        "manual update": [_info("Manual Update"), _add("c", 1)],
        "managed commit": [_info("WRITE", lastManifestCommit={"v": 1}), _add("c", 1)],
        "malformed line": [_info("WRITE"), {"add": {"path": "c"}}],  # no size
    }
    for name, actions in cases.items():
        table = tmp_path / name.replace(" ", "_")
        _commit(table, 0, _info("WRITE"), _PROTOCOL, _metadata(), _add("a", 10))
        assert version_checksum(table, 0) is not None
        _commit(table, 1, *actions)
        assert version_checksum(table, 1) is None, name
        assert not _crc(table, 1).exists(), name

    # Replayed from version 0, files are told apart by path: one outside the table's
    # directory may be one inside under another name (a shallow clone's).
    table = tmp_path / "outside"
    _commit(table, 0, _info("WRITE"), _PROTOCOL, _metadata(), _add("s3://elsewhere/a", 1))
    assert version_checksum(table, 0) is None and not _crc(table, 0).exists()

    # In-commit timestamps: the version's own, or nothing.
    table = tmp_path / "timed"
    on = _metadata(**{"delta.enableInCommitTimestamps": "true"})
    _commit(table, 0, _info("WRITE", inCommitTimestamp=7), _PROTOCOL, on, _add("a", 1))
    _commit(table, 1, _info("WRITE"), _add("b", 1))
    zero = version_checksum(table, 0)
    assert zero is not None and zero.in_commit_timestamp == 7
    assert json.loads(_crc(table, 0).read_bytes())["inCommitTimestampOpt"] == 7
    assert version_checksum(table, 1) is None

    # A log cleaned up below its checkpoint (no version 0, no checksum): nothing to replay.
    table = tmp_path / "cleaned"
    _commit(table, 5, _info("WRITE"), _PROTOCOL, _metadata(), _add("a", 1))
    assert version_checksum(table, 5) is None and not _crc(table, 5).exists()

    # A lake on object storage: nothing written there.
    assert version_checksum(parse_object_uri("s3://bucket/lake/t"), 0) is None


def test_an_existing_checksum_is_kept(tmp_path: Path) -> None:
    """Spark's own file (or a concurrent writer's) wins: the content is not replaced."""
    table = tmp_path / "t"
    _commit(table, 0, _info("WRITE"), _PROTOCOL, _metadata(), _add("a", 10))
    theirs = {
        "tableSizeBytes": 10,
        "numFiles": 1,
        "numMetadata": 1,
        "numProtocol": 1,
        "metadata": _metadata()["metaData"],
        "protocol": _PROTOCOL["protocol"],
        "txnId": "spark",
    }
    _crc(table, 0).write_text(json.dumps(theirs))
    found = version_checksum(table, 0)
    assert found is not None and found.num_files == 1
    assert json.loads(_crc(table, 0).read_text())["txnId"] == "spark"
