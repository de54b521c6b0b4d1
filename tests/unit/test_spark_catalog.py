"""The ``spark.catalog`` option and its Hive metastore settings (pipeline/catalog.py), no JVM."""

from __future__ import annotations

import stat
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from pydantic import SecretStr

from pipeline.catalog import HIVE_SITE, CatalogKind, HiveMetastore, hive_settings
from pipeline.config import load_config
from pipeline.errors import ConfigError, NotInstalledError

pytestmark = pytest.mark.unit

URL = "jdbc:postgresql://127.0.0.1:5432/metastore"


def _config(tmp_path: Path, spark: str, env: dict[str, str] | None = None) -> object:
    path = tmp_path / "pipeline.yaml"
    path.write_text(f"lake: {{root: lake}}\nspark: {spark}\n")
    return load_config(path, env=env or {})


def test_the_default_catalog_is_in_memory(tmp_path: Path) -> None:
    config = _config(tmp_path, "{}")
    assert config.spark.catalog is CatalogKind.IN_MEMORY  # type: ignore[attr-defined]
    assert config.spark.metastore() is None  # type: ignore[attr-defined]


def test_hive_gives_the_metastore_with_the_password_from_the_environment(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        f"{{catalog: hive, metastore.url: '{URL}', metastore.user: hive}}",
        env={"MEDALLION__SPARK__METASTORE_PASSWORD": "s3cret"},
    )
    metastore = config.spark.metastore()  # type: ignore[attr-defined]
    assert metastore == HiveMetastore(URL, "hive", SecretStr("s3cret"))
    assert "s3cret" not in repr(metastore) and "s3cret" not in repr(config)


@pytest.mark.parametrize(
    ("spark", "reason"),
    [
        ("{catalog: hive}", "needs metastore.url"),
        (
            "{catalog: hive, metastore.url: 'jdbc:derby:;databaseName=ms', metastore.user: a}",
            "Derby",
        ),
        ("{catalog: hive, metastore.url: 'jdbc:mysql://h/ms', metastore.user: a}", "PostgreSQL"),
        (
            f"{{catalog: hive, metastore.url: '{URL}?password=x', metastore.user: a}}",
            "holds a password",
        ),
        (f"{{metastore.url: '{URL}', metastore.user: a}}", "catalog is in-memory"),
        ("{catalog: hiv}", "spark.catalog"),
    ],
)
def test_a_wrong_catalog_setting_fails_at_load(tmp_path: Path, spark: str, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        _config(tmp_path, spark)


def test_the_password_goes_to_a_private_hive_site_not_the_settings(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "postgresql-42.7.11.jar").write_bytes(b"")
    settings = hive_settings(HiveMetastore(URL, "hive", SecretStr("p<&>w")), jars_dir=jars)
    assert settings["spark.sql.catalogImplementation"] == "hive"
    assert settings["spark.hadoop.javax.jdo.option.ConnectionURL"] == URL
    assert settings["spark.hadoop.datanucleus.schema.autoCreateConstraints"] == "false"
    assert not any("p<&>w" in value for value in settings.values())
    jar, private = settings["spark.driver.extraClassPath"].split(":")
    assert jar == str(jars / "postgresql-42.7.11.jar")
    site = Path(private) / HIVE_SITE
    assert stat.S_IMODE(site.stat().st_mode) == 0o600
    assert stat.S_IMODE(Path(private).stat().st_mode) == 0o700
    values = {p.findtext("name"): p.findtext("value") for p in ET.parse(site).getroot()}
    assert values == {"javax.jdo.option.ConnectionPassword": "p<&>w"}


def test_without_a_password_nothing_is_written(tmp_path: Path) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "postgresql-42.7.11.jar").write_bytes(b"")
    settings = hive_settings(HiveMetastore(URL, "hive"), jars_dir=jars)
    assert settings["spark.driver.extraClassPath"] == str(jars / "postgresql-42.7.11.jar")


def test_a_missing_jdbc_driver_names_make_bootstrap(tmp_path: Path) -> None:
    with pytest.raises(NotInstalledError, match="make bootstrap"):
        hive_settings(HiveMetastore(URL, "hive"), jars_dir=tmp_path)
