"""The lake root as a local directory or an ``s3://`` location: paths, config, Spark settings."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from bronze.storage import (
    ObjectPath,
    ObjectStoreOptions,
    lake_path,
    parse_object_uri,
    storage_options,
)
from bronze.writer import BronzeTables
from pipeline.config import load_config
from pipeline.errors import ConfigError, NotInstalledError
from pipeline.spark_storage import object_store_settings, with_object_store


def test_a_local_root_stays_a_path_and_an_s3_uri_is_never_flattened() -> None:
    assert lake_path("/data/lake") == Path("/data/lake")
    # What Path would do to a URI, and why the root never goes through Path.
    assert str(Path("s3://bucket/lake")) == "s3:/bucket/lake"
    root = lake_path("s3a://my-bucket/a//b/")
    assert isinstance(root, ObjectPath)
    assert str(root) == "s3://my-bucket/a/b"
    events = BronzeTables.under(root).events
    assert str(events) == "s3://my-bucket/a/b/bronze/events"
    assert events.name == "events" and str(events.parent) == "s3://my-bucket/a/b/bronze"
    assert root.absolute() is root
    assert str(lake_path("s3://my-bucket")) == "s3://my-bucket"
    with pytest.raises(ValueError, match="leaves"):
        _ = root / "../../../x"
    with pytest.raises(ValueError, match="not an S3 bucket name"):
        parse_object_uri("s3://Upper_Case/x")
    assert storage_options(Path("/data/lake")) is None


def test_credentials_never_show_and_reach_delta_rs_only_when_given() -> None:
    options = ObjectStoreOptions(
        endpoint="http://127.0.0.1:9000",
        region="eu-west-1",
        allow_http=True,
        access_key_id=SecretStr("AKIDEXAMPLE"),
        secret_access_key=SecretStr("wJalrXUtnFEMI"),
    )
    path = ObjectPath("my-bucket", "lake", options) / "gold"
    assert "wJalrXUtnFEMI" not in repr(path) and "wJalrXUtnFEMI" not in repr(options)
    assert storage_options(path) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "AKIDEXAMPLE",
        "AWS_SECRET_ACCESS_KEY": "wJalrXUtnFEMI",
    }
    # Without keys in the config, delta-rs reads AWS_ACCESS_KEY_ID/... from the environment.
    assert storage_options(ObjectPath("my-bucket")) == {}


def _write(tmp_path: Path, lake: str) -> Path:
    path = tmp_path / "pipeline.yaml"
    path.write_text(lake)
    return path


def test_the_config_reads_an_s3_root_its_options_and_secret_files(tmp_path: Path) -> None:
    secret = tmp_path / "s3-secret"
    secret.write_text("s3cr3t-from-file\n")
    path = _write(
        tmp_path,
        "lake:\n"
        "  root: s3://lake-bucket/prod\n"
        "  s3.endpoint: http://127.0.0.1:9000\n"
        "  s3.allow.http: true\n"
        "  s3.access.key.id: ${KEY_ID}\n"
        f"  s3.secret.access.key.file: {secret}\n",
    )
    config = load_config(path, env={"KEY_ID": "AKIDFROMENV"})
    root = config.lake.root
    assert isinstance(root, ObjectPath) and str(root) == "s3://lake-bucket/prod"
    assert str(config.lake.bronze_path) == "s3://lake-bucket/prod/bronze/events"
    assert storage_options(config.lake.gold_path) == {
        "AWS_ENDPOINT_URL": "http://127.0.0.1:9000",
        "AWS_ALLOW_HTTP": "true",
        "AWS_ACCESS_KEY_ID": "AKIDFROMENV",
        "AWS_SECRET_ACCESS_KEY": "s3cr3t-from-file",
    }
    # A table location handed around as a string (Spark code does) finds the bucket's options.
    assert storage_options("s3://lake-bucket/prod/silver/x") == storage_options(root)
    assert "s3cr3t" not in repr(config) and "s3cr3t" not in config.model_dump_json()


@pytest.mark.parametrize(
    ("lake", "message"),
    [
        ("  root: s3://lake-bucket/x\n  s3.endpoint: http://h:9000\n", "s3.allow.http"),
        ("  root: local-dir\n  s3.region: eu-west-1\n", "is a local directory"),
        ("  root: s3://lake-bucket/x\n  s3.access.key.id: ${K}\n", "set both"),
        ("  root: s3://lake-bucket/x\n  s3.secret.access.key: literal\n", "literal secret"),
        ("  root: s3://lake-bucket/x\n  s3.endpiont: http://h\n", "s3.endpoint"),
    ],
)
def test_the_config_refuses_an_inconsistent_object_store(
    tmp_path: Path, lake: str, message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        load_config(_write(tmp_path, "lake:\n" + lake), env={"K": "x"})


def test_spark_gets_s3a_for_an_s3_lake_and_nothing_for_a_local_one(tmp_path: Path) -> None:
    assert object_store_settings(Path("/data/lake")) == {}
    base = {"spark.jars": "/jars/delta.jar", "spark.ui.enabled": "false"}
    assert with_object_store(base, Path("/data/lake")) == base
    options = ObjectStoreOptions(endpoint="http://127.0.0.1:9000", allow_http=True)
    root = ObjectPath("lake-bucket", "prod", options)
    settings = object_store_settings(root)
    bucket = "spark.hadoop.fs.s3a.bucket.lake-bucket."
    assert settings["spark.hadoop.fs.s3.impl"] == "org.apache.hadoop.fs.s3a.S3AFileSystem"
    assert settings[bucket + "endpoint"] == "http://127.0.0.1:9000"
    assert settings[bucket + "path.style.access"] == "true"
    assert settings[bucket + "connection.ssl.enabled"] == "false"
    assert not [k for k in settings if k.endswith(("access.key", "secret.key"))]

    with pytest.raises(NotInstalledError, match="make bootstrap"):
        with_object_store(base, root, jars_dir=tmp_path)
    (tmp_path / "hadoop-aws-3.5.0.jar").write_bytes(b"")
    (tmp_path / "bundle-2.35.4.jar").write_bytes(b"")
    merged = with_object_store(
        {**base, "spark.driver.extraClassPath": "/opt/extra.jar"}, root, jars_dir=tmp_path
    )
    assert merged["spark.jars"] == "/jars/delta.jar"  # never copied to executors
    assert merged["spark.driver.extraClassPath"].split(":") == [
        "/opt/extra.jar",
        str(tmp_path / "bundle-2.35.4.jar"),
        str(tmp_path / "hadoop-aws-3.5.0.jar"),
    ]
    assert merged["spark.executor.extraClassPath"].split(":") == [
        str(tmp_path / "bundle-2.35.4.jar"),
        str(tmp_path / "hadoop-aws-3.5.0.jar"),
    ]
