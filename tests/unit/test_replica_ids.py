"""Two MySQL sources on one server never share a binlog server_id (pipeline/config.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from capture.mysql.settings import default_server_id
from pipeline.config import load_config
from pipeline.errors import ConfigError

pytestmark = pytest.mark.unit


def _mysql(name: str, host: str = "db", server_id: int | None = None) -> str:
    text = (
        f"  - name: {name}\n    connector: mysql\n    database.hostname: {host}\n"
        "    database.user: u\n"
    )
    return text + (f"    database.server.id: {server_id}\n" if server_id else "")


def _load(tmp_path: Path, *sources: str) -> object:
    path = tmp_path / "pipeline.yaml"
    path.write_text("sources:\n" + "".join(sources), encoding="utf-8")
    return load_config(path, env={})


def test_colliding_default_ids_on_one_server_are_refused(tmp_path: Path) -> None:
    assert default_server_id("shop_0") == default_server_id("shop_20")  # a real collision
    with pytest.raises(ConfigError, match=r"'shop_0' and 'shop_20'.*same server_id 5414"):
        _load(tmp_path, _mysql("shop_0"), _mysql("shop_20"))


def test_explicit_duplicates_are_refused_and_distinct_ids_or_servers_pass(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="database.server.id"):
        _load(tmp_path, _mysql("a", server_id=7), _mysql("b", server_id=7))
    _load(tmp_path, _mysql("a", server_id=7), _mysql("b", server_id=8))
    _load(tmp_path, _mysql("shop_0"), _mysql("shop_20", host="other"))
    _load(tmp_path, _mysql("shop_0"), _mysql("shop_20", server_id=99))
