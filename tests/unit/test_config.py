"""Loading, layering and validating ``conf/*.yaml`` (pipeline/config.py)."""

from __future__ import annotations

import json
import logging
import os
import pickle
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, SecretStr, ValidationError

from capture.debezium_json.config import DebeziumJsonSourceConfig
from capture.mongodb.config import MongoDbSourceConfig
from capture.mysql.config import MySqlSourceConfig
from capture.postgresql.config import PostgresSourceConfig
from capture.registry import SOURCE_CONFIG_MODELS
from capture.source_config import ColumnRuleKind, SourceType
from pipeline.config import (
    BronzeConfig,
    LakeConfig,
    LoggingConfig,
    PipelineConfig,
    SparkConfig,
    load_config,
)
from pipeline.config_model import reveal
from pipeline.errors import ConfigError, Terminal

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parents[2]
DEFAULT_CONFIG = REPO / "conf" / "pipeline.yaml"
EXAMPLE_CONFIG = REPO / "conf" / "examples" / "all-sources.yaml"
EXAMPLE_ENV = {
    "PG_PASSWORD": "pg-secret",
    "MYSQL_PASSWORD": "mysql-secret",
    "MSSQL_PASSWORD": "mssql-secret",
    "ORACLE_PASSWORD": "oracle-secret",
    "DB2_PASSWORD": "db2-secret",
    "YB_PASSWORD": "yb-secret",
    "MONGODB_URI": "mongodb://dbz:mongo-secret@mongo.internal:27017/?replicaSet=rs0",
}

PG_SOURCE = """
  - name: pg
    connector: postgresql
    database.hostname: localhost
    database.user: debezium
    database.password: ${PG_PASSWORD}
    database.dbname: inventory
"""


def pg(extra: str = "") -> str:
    """A config with the PostgreSQL source above plus ``extra`` lines (indented 4)."""
    return "sources:" + PG_SOURCE + extra


def write(tmp_path: Path, text: str, name: str = "pipeline.yaml") -> Path:
    path = tmp_path / "conf" / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def load(
    tmp_path: Path,
    text: str,
    env: dict[str, str] | None = None,
    overrides: dict[str, Any] | None = None,
) -> PipelineConfig:
    return load_config(write(tmp_path, text), env=env or {}, overrides=overrides)


def load_error(tmp_path: Path, text: str, **kwargs: Any) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text, **kwargs)
    return info.value


# --- the shipped files ----------------------------------------------------------------------
def test_default_config_loads() -> None:
    config = load_config(DEFAULT_CONFIG, env={})
    assert config.config_path == DEFAULT_CONFIG
    assert config.lake.root == REPO / "lake"
    assert config.lake.bronze_path == REPO / "lake" / "bronze" / "events"
    assert config.lake.quarantine_path == REPO / "lake" / "bronze" / "quarantine"
    assert config.lake.schemas_path == REPO / "lake" / "bronze" / "schemas"
    assert config.lake.silver_path == REPO / "lake" / "silver"
    assert config.lake.gold_path == REPO / "lake" / "gold"
    assert config.spark.master == "local[*]"
    assert config.spark.conf == {"spark.sql.shuffle.partitions": "4"}
    assert config.bronze.max_transaction_size == 100_000
    source = config.source("inventory")
    assert isinstance(source, DebeziumJsonSourceConfig)
    assert source.kind is SourceType.DEBEZIUM_JSON
    assert source.path == REPO / "tests" / "fixtures" / "debezium_jsonl"
    assert source.format == "auto"
    assert source.connector_hint == "postgresql"


def test_default_path_comes_from_medallion_config(tmp_path: Path) -> None:
    path = write(tmp_path, "logging: {level: debug}\n")
    config = load_config(env={"MEDALLION_CONFIG": str(path)})
    assert config.logging.level == "DEBUG"
    assert config.config_path == path


def test_example_with_every_connector_loads() -> None:
    config = load_config(EXAMPLE_CONFIG, env=EXAMPLE_ENV)
    assert {s.kind for s in config.sources} == set(SourceType)
    assert set(SOURCE_CONFIG_MODELS) == set(SourceType)
    for source in config.sources:
        assert isinstance(source, SOURCE_CONFIG_MODELS[source.kind])

    pg = config.source("pg")
    assert isinstance(pg, PostgresSourceConfig)
    assert (pg.slot_name, pg.publication_name, pg.plugin_name) == (
        "medallion_pg",
        "medallion_pub",
        "pgoutput",
    )
    assert pg.publication_autocreate_mode == "filtered"
    assert pg.snapshot_mode == "exported"
    assert reveal(pg.database_password) == "pg-secret"
    assert [r.kind for r in pg.column_rules] == [
        ColumnRuleKind.TRUNCATE,
        ColumnRuleKind.HASH,
        ColumnRuleKind.HASH_V2,
    ]
    hash_rule = pg.column_rules[1]
    assert (hash_rule.algorithm, hash_rule.salt) == ("SHA-256", "CzQMA0cB5K")
    assert hash_rule.columns == (r"inventory\.orders\.customerName",)

    maria = config.source("maria")
    assert isinstance(maria, MySqlSourceConfig)
    assert maria.kind is SourceType.MYSQL and maria.connector == "mariadb"
    assert maria.database_port == 3306
    assert maria.logical_name == "mysqlserver1"  # from database.server.name
    assert maria.database_include_list == ("inventory",)  # from database.whitelist
    assert maria.table_include_list == (r"inventory\.orders", r"inventory\.customers")

    mongo = config.source("mongo")
    assert isinstance(mongo, MongoDbSourceConfig)
    assert "mongo-secret" not in repr(mongo)


_WITHOUT_DRIVERS = """
import json, sys

class Refuse:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {"psycopg", "pymysql", "pymysqlreplication"}:
            raise ImportError(f"refused {name}")
        return None

sys.meta_path.insert(0, Refuse())
from pipeline.config import load_config

config = load_config(sys.argv[1], env=json.loads(sys.argv[2]))
print(len(config.sources))
"""


def test_every_connector_config_validates_without_any_database_driver() -> None:
    # The config models live next to the agents; importing them must not import a driver.
    done = subprocess.run(
        [sys.executable, "-c", _WITHOUT_DRIVERS, str(EXAMPLE_CONFIG), json.dumps(EXAMPLE_ENV)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) == len(SourceType)


def test_every_field_is_documented() -> None:
    models: list[type[BaseModel]] = [
        PipelineConfig,
        LakeConfig,
        SparkConfig,
        BronzeConfig,
        LoggingConfig,
        *SOURCE_CONFIG_MODELS.values(),
    ]
    for model in models:
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name} has no attribute docstring"


# --- immutability ---------------------------------------------------------------------------
def test_config_is_frozen_hashable_and_picklable() -> None:
    config = load_config(EXAMPLE_CONFIG, env=EXAMPLE_ENV)
    with pytest.raises(ValidationError):
        config.spark.master = "local[1]"
    with pytest.raises(ValidationError):
        config.sources[0].name = "other"
    with pytest.raises(TypeError):
        config.spark.conf["spark.x"] = "y"
    assert isinstance(config.sources, tuple)
    assert hash(config) == hash(load_config(EXAMPLE_CONFIG, env=EXAMPLE_ENV))
    assert pickle.loads(pickle.dumps(config)) == config


# --- unknown keys, wrong types --------------------------------------------------------------
def test_unknown_key_suggests_the_closest_key(tmp_path: Path) -> None:
    files = "\n  - {name: files, connector: debezium_json, path: data}"
    error = load_error(
        tmp_path,
        "sources:" + files + PG_SOURCE + "    tabel.include.list: public.orders\n",
        env={"PG_PASSWORD": "x"},
    )
    assert isinstance(error, Terminal)
    assert error.file is not None and error.file.endswith("pipeline.yaml")
    assert error.key_path == "sources[1].tabel.include.list"
    assert error.reason == (
        "unknown key 'tabel.include.list' in sources[1] (connector postgresql); "
        "did you mean 'table.include.list'?"
    )
    assert str(error).startswith(f"{error.file}, key 'sources[1].tabel.include.list': ")


def test_unknown_top_level_and_section_keys(tmp_path: Path) -> None:
    error = load_error(tmp_path, "lkae: {root: x}\nspark: {mastr: local}\n")
    assert "did you mean 'lake'?" in error.reason
    assert "spark.mastr: unknown key 'mastr' in spark; did you mean 'master'?" in error.reason


def test_misspelled_pattern_key_gets_the_pattern_forms(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        pg("    column.mask.with.8.char: public.t.c\n"),
        env={"PG_PASSWORD": "x"},
    )
    assert error.key_path == "sources[0].column.mask.with.8.char"
    assert "column.mask.with.<N>.chars" in error.reason


def test_wrong_type_names_file_and_key_path(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        pg("    database.port: not-a-port\n"),
        env={"PG_PASSWORD": "x"},
    )
    assert error.file == str(tmp_path / "conf" / "pipeline.yaml")
    assert error.key_path == "sources[0].database.port"
    assert "valid integer" in error.reason


def test_all_problems_are_collected_and_capped(tmp_path: Path) -> None:
    keys = "".join(f"  bogus{i}: 1\n" for i in range(25))
    error = load_error(tmp_path, f"bronze:\n  max.batch.size: -1\nlogging:\n{keys}")
    assert error.reason.startswith("26 problems:")
    assert "bronze.max.batch.size: Input should be greater than 0" in error.reason
    assert "... and 6 more" in error.reason


def test_unknown_connector_and_enum_value_suggest(tmp_path: Path) -> None:
    error = load_error(tmp_path, "sources:\n  - {name: a, connector: postgres}\n")
    assert error.key_path == "sources[0].connector"
    assert "unknown connector 'postgres'; did you mean 'postgresql'?" in error.reason

    error = load_error(
        tmp_path,
        pg("    snapshot.mode: inital\n"),
        env={"PG_PASSWORD": "x"},
    )
    assert error.key_path == "sources[0].snapshot.mode"
    assert "did you mean 'initial'?" in error.reason


def test_enumerated_values_are_case_insensitive(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        pg("    snapshot.mode: NEVER\n    plugin.name: PgOutput\n"),
        env={"PG_PASSWORD": "x"},
    )
    source = config.source("pg")
    assert isinstance(source, PostgresSourceConfig)
    assert (source.snapshot_mode, source.plugin_name) == ("never", "pgoutput")


def test_missing_required_key(tmp_path: Path) -> None:
    error = load_error(
        tmp_path, "sources:\n  - {name: pg, connector: postgresql, database.user: u}\n"
    )
    assert error.key_path == "sources[0].database.dbname"
    assert error.reason == "missing required key"
    no_host = pg().replace("database.hostname: localhost", "database.port: 1")
    error = load_error(tmp_path, no_host, env={"PG_PASSWORD": "x"})
    assert error.key_path == "sources[0].database.hostname"


@pytest.mark.parametrize(
    ("line", "key", "reason"),
    [
        ("plugin.name: wal2json", "plugin.name", "only pgoutput is supported"),
        ("plugin.name: DecoderBufs", "plugin.name", "only pgoutput is supported"),
        ("max.queue.size: 8192", "max.queue.size", "no queue between them"),
        ("event.processing.failure.handling.mode: warn", "event.processing", "quarantined"),
    ],
)
def test_debezium_keys_the_agent_does_not_honour_are_rejected(
    tmp_path: Path, line: str, key: str, reason: str
) -> None:
    error = load_error(tmp_path, pg(f"    {line}\n"), env={"PG_PASSWORD": "x"})
    assert error.key_path is not None and error.key_path.startswith(f"sources[0].{key}")
    assert reason in error.reason and "did you mean" not in error.reason


def test_unsupported_keys_are_rejected_from_every_layer(tmp_path: Path) -> None:
    env = {"PG_PASSWORD": "x", "MEDALLION__SOURCES__PG__MAX_QUEUE_SIZE": "10"}
    error = load_error(tmp_path, pg(), env=env)
    assert error.key_path == "sources[0].max.queue.size"
    assert "MAX_QUEUE_SIZE: 'max.queue.size' is not supported: the agent reads" in error.reason
    error = load_error(
        tmp_path,
        pg(),
        env={"PG_PASSWORD": "x"},
        overrides={"sources.pg.event.processing.failure.handling.mode": "skip"},
    )
    assert error.key_path == "sources[0].event.processing.failure.handling.mode"
    assert "is not supported: an event that cannot be processed" in error.reason


@pytest.mark.parametrize("key", ["gtid.source.includes", "gtid.source.excludes"])
def test_mysql_keys_the_agent_does_not_honour_are_rejected(tmp_path: Path, key: str) -> None:
    text = (
        "sources:\n  - {name: my, connector: mysql, database.hostname: h, database.user: u, "
        f"{key}: x}}\n"
    )
    error = load_error(tmp_path, text)
    assert error.key_path == f"sources[0].{key}"
    assert error.reason.startswith("not supported: the agent captures the transactions of every")
    error = load_error(tmp_path, text.replace(f"{key}: x", "binlog.buffer.size: 0"))
    assert "no look-ahead buffer" in error.reason


def test_quality_severity_names_a_known_check(tmp_path: Path) -> None:
    config = load(tmp_path, "quality: {severity: {freshness: block}}\n")
    assert config.quality.severity == {"freshness": "block"}
    error = load_error(tmp_path, "quality: {severity: {freshnes: block}}\n")
    assert error.key_path == "quality.severity.freshnes"
    assert error.reason == "unknown check 'freshnes'; did you mean 'freshness'?"


def test_cross_field_rules(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        pg("    table.include.list: a\\.b\n    table.exclude.list: c\n"),
        env={"PG_PASSWORD": "x"},
    )
    assert error.key_path == "sources[0].table.exclude.list"
    assert "mutually exclusive" in error.reason

    error = load_error(tmp_path, "sources:\n  - {name: m, connector: mongodb}\n")
    assert error.key_path == "sources[0].mongodb.connection.string"


def test_bad_column_rules_name_their_key(tmp_path: Path) -> None:
    for key, value, reason in [
        ("column.mask.hash.SHA-999.with.salt.x", "a.b.c", "unknown hash algorithm 'SHA-999'"),
        ("column.truncate.to.0.chars", "a.b.c", "truncation length must be positive"),
        ("column.mask.with.3.chars", "a.b.(c", "invalid regular expression"),
    ]:
        error = load_error(tmp_path, pg(f"    {key}: '{value}'\n"), env={"PG_PASSWORD": "x"})
        assert error.key_path == f"sources[0].{key}"
        assert reason in error.reason


# --- YAML and file problems -----------------------------------------------------------------
def test_missing_file_invalid_yaml_and_duplicate_keys(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "nope.yaml", env={})
    assert "invalid YAML" in load_error(tmp_path, "spark: [unclosed\n").reason
    error = load_error(tmp_path, "spark:\n  master: a\n  master: b\n")
    assert "duplicate key 'master'" in error.reason
    assert "expected a mapping" in load_error(tmp_path, "- a\n- b\n").reason


def test_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        """
        lake: {root: ../lake}
        spark: {jars.dir: jars}
        sources: [{name: f, connector: debezium_json, path: data/in.jsonl}]
        """,
    )
    assert config.lake.root == tmp_path / "lake"
    assert config.spark.jars_dir == tmp_path / "conf" / "jars"
    source = config.source("f")
    assert isinstance(source, DebeziumJsonSourceConfig)
    assert source.path == tmp_path / "conf" / "data" / "in.jsonl"
    # the default root is relative to the config file too
    assert load(tmp_path, "{}").lake.root == tmp_path / "conf" / "lake"


# --- interpolation and secrets --------------------------------------------------------------
def test_missing_environment_variable(tmp_path: Path) -> None:
    error = load_error(tmp_path, pg())
    assert error.key_path == "sources[0].database.password"
    assert "environment variable 'PG_PASSWORD' is not set" in error.reason


def test_interpolation_defaults_and_escapes(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        """
        spark:
          master: ${SPARK_MASTER:-local[3]}
          app.name: app-${USER_NAME}-$${literal}
        bronze: {max.batch.size: "${BATCH}"}
        """,
        env={"USER_NAME": "ann", "BATCH": "77"},
    )
    assert config.spark.master == "local[3]"
    assert config.spark.app_name == "app-ann-${literal}"
    assert config.bronze.max_batch_size == 77
    assert "malformed reference" in load_error(tmp_path, "spark: {master: '${1x}'}\n").reason


def test_secret_from_file(tmp_path: Path) -> None:
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "pg.secret").write_text("s3cr3t\n", encoding="utf-8")
    text = PG_SOURCE.replace("password: ${PG_PASSWORD}", "password.file: pg.secret")
    config = load(tmp_path, "sources:" + text)
    source = config.source("pg")
    assert isinstance(source, PostgresSourceConfig)
    assert reveal(source.database_password) == "s3cr3t"

    missing = text.replace("pg.secret", "missing.secret")
    error = load_error(tmp_path, "sources:" + missing)
    assert error.key_path == "sources[0].database.password.file"
    assert "cannot read secret file" in error.reason


def test_literal_secrets_are_rejected(tmp_path: Path) -> None:
    literal = PG_SOURCE.replace("${PG_PASSWORD}", "hunter2")
    error = load_error(tmp_path, "sources:" + literal)
    assert error.key_path == "sources[0].database.password"
    assert "literal secret" in error.reason and "hunter2" not in str(error)
    # a default written in the file is a literal too
    defaulted = PG_SOURCE.replace("${PG_PASSWORD}", "${PG_PASSWORD:-hunter2}")
    assert "literal secret" in load_error(tmp_path, "sources:" + defaulted).reason
    # both spellings of one secret
    both = PG_SOURCE + "    database.password.file: /x\n"
    error = load_error(tmp_path, "sources:" + both, env={"PG_PASSWORD": "x"})
    assert "set the same option" in error.reason
    # a connection string without credentials is not a secret
    mongo = "sources:\n  - {name: m, connector: mongodb, mongodb.connection.string: '%s'}\n"
    load(tmp_path, mongo % "mongodb://localhost:27017/?replicaSet=rs0")
    assert "literal secret" in load_error(tmp_path, mongo % "mongodb://u:pw@h/").reason
    # built in code (no file), a secret may be given directly
    source = PostgresSourceConfig.model_validate(
        {
            "name": "pg",
            "connector": "postgresql",
            "database.hostname": "h",
            "database.user": "u",
            "database.password": "pw",
            "database.dbname": "d",
        }
    )
    assert reveal(source.database_password) == "pw"


def test_secrets_are_masked_everywhere(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    config = load(tmp_path, pg(), env={"PG_PASSWORD": "s3cr3t"})
    source = config.source("pg")
    assert isinstance(source, PostgresSourceConfig)
    assert isinstance(source.database_password, SecretStr)
    for text in (
        repr(config),
        str(config),
        repr(source),
        str(source.database_password),
        config.model_dump_json(),
        config.model_dump_json(by_alias=True),
        repr(config.model_dump()),
    ):
        assert "s3cr3t" not in text
        assert "**********" in text
    with caplog.at_level(logging.INFO, logger="medallion.test"):
        logging.getLogger("medallion.test").info("loaded %r from %s", config, "x")
    assert "s3cr3t" not in caplog.text and "**********" in caplog.text
    assert "s3cr3t" not in caplog.records[0].getMessage()
    assert reveal(source.database_password) == "s3cr3t"
    assert reveal(None) is None


# --- layering -------------------------------------------------------------------------------
LAYERED = """
spark: {master: "local[*]", conf: {spark.sql.shuffle.partitions: "4"}}
bronze: {max.batch.size: 20000}
sources:
  - name: pg
    connector: postgresql
    database.hostname: localhost
    database.user: debezium
    database.dbname: inventory
    table.whitelist: public\\.orders
"""


def test_environment_layer(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        LAYERED,
        env={
            "MEDALLION__SPARK__MASTER": "spark://x:7077",
            "MEDALLION__SPARK__APP_NAME": "nightly",
            "MEDALLION__SPARK__CONF__SPARK_SQL_SHUFFLE_PARTITIONS": "8",
            "MEDALLION__SPARK__CONF__SPARK_EXECUTOR_MEMORY": "2g",
            "MEDALLION__BRONZE__MAX_BATCH_SIZE": "5000",
            "MEDALLION__SOURCES__PG__DATABASE_PORT": "5433",
            "MEDALLION__SOURCES__PG__DATABASE_PASSWORD": "from-env",
            "MEDALLION__SOURCES__PG__TABLE_INCLUDE_LIST": "public\\.a,public\\.b",
        },
    )
    assert config.spark.master == "spark://x:7077"
    assert config.spark.app_name == "nightly"
    assert config.spark.conf == {
        "spark.sql.shuffle.partitions": "8",
        "spark.executor.memory": "2g",
    }
    assert config.bronze.max_batch_size == 5000
    source = config.source("pg")
    assert isinstance(source, PostgresSourceConfig)
    assert source.database_port == 5433
    assert reveal(source.database_password) == "from-env"  # not a literal: from the environment
    assert source.table_include_list == (r"public\.a", r"public\.b")  # replaced table.whitelist


def test_layers_replace_file_values_before_interpolation(tmp_path: Path) -> None:
    # ${PG_PASSWORD} is not set, but the environment layer replaces the key (as a file here)
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "pw").write_text("from-file\n", encoding="utf-8")
    config = load(tmp_path, pg(), env={"MEDALLION__SOURCES__PG__DATABASE_PASSWORD_FILE": "pw"})
    source = config.source("pg")
    assert isinstance(source, PostgresSourceConfig)
    assert reveal(source.database_password) == "from-file"
    # values from layers are taken as they are, never interpolated
    config = load(tmp_path, "{}", overrides={"spark": {"app.name": "$${x}"}})
    assert config.spark.app_name == "$${x}"


def test_environment_layer_errors(tmp_path: Path) -> None:
    error = load_error(tmp_path, LAYERED, env={"MEDALLION__SPARK__MASTR": "x"})
    assert "MEDALLION__SPARK__MASTR names no key of spark; did you mean 'MASTER'?" in error.reason
    error = load_error(tmp_path, LAYERED, env={"MEDALLION__SPRAK__MASTER": "x"})
    assert "did you mean 'SPARK'?" in error.reason
    error = load_error(tmp_path, LAYERED, env={"MEDALLION__SOURCES__PGG__DATABASE_PORT": "1"})
    assert "unknown source 'PGG'; did you mean 'pg'?" in error.reason
    error = load_error(tmp_path, LAYERED, env={"MEDALLION__BRONZE__MAX_BATCH_SIZE": "lots"})
    assert error.key_path == "bronze.max.batch.size"
    assert "(from environment variable MEDALLION__BRONZE__MAX_BATCH_SIZE)" in error.reason


def test_overrides_win_over_environment_and_file(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        LAYERED,
        env={
            "MEDALLION__SPARK__MASTER": "spark://env:7077",
            "MEDALLION__BRONZE__MAX_TRANSACTION_SIZE": "7",
        },
        overrides={
            "spark.master": "local[2]",
            "spark.conf.spark.sql.shuffle.partitions": "2",
            "bronze": {"max.batch.size": 10},
            "sources.pg.database.port": 6543,
            "sources[0].snapshot.mode": "never",
            "sources.pg.database.password": "from-code",
        },
    )
    assert config.spark.master == "local[2]"
    assert config.spark.conf["spark.sql.shuffle.partitions"] == "2"
    assert config.bronze.max_batch_size == 10
    assert config.bronze.max_transaction_size == 7  # the environment still applies
    source = config.source("pg")
    assert isinstance(source, PostgresSourceConfig)
    assert (source.database_port, source.snapshot_mode) == (6543, "never")
    assert reveal(source.database_password) == "from-code"

    error = load_error(tmp_path, LAYERED, overrides={"spark.mastr": "x"})
    assert error.key_path == "spark.mastr" and "did you mean 'master'?" in error.reason
    error = load_error(tmp_path, LAYERED, overrides={"sprak.master": "x"})
    assert "did you mean 'spark'?" in error.reason


# --- aliases and sources --------------------------------------------------------------------
def test_whitelist_and_server_name_aliases(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        pg(
            "    table.whitelist: public\\.orders, public\\.customers\n"
            "    column.blacklist: public\\.customers\\.ssn\n"
            "    schema.whitelist: [public]\n"
            "    database.server.name: dbserver1\n"
        ),
        env={"PG_PASSWORD": "x"},
    )
    source = config.source("pg")
    assert isinstance(source, PostgresSourceConfig)
    assert source.table_include_list == (r"public\.orders", r"public\.customers")
    assert source.column_exclude_list == (r"public\.customers\.ssn",)
    assert source.schema_include_list == ("public",)
    assert source.topic_prefix == "dbserver1" and source.logical_name == "dbserver1"
    dumped = source.model_dump(by_alias=True)
    assert dumped["table.include.list"] == source.table_include_list
    assert dumped["topic.prefix"] == "dbserver1"

    error = load_error(
        tmp_path,
        pg("    table.whitelist: a\n    table.include.list: b\n"),
        env={"PG_PASSWORD": "x"},
    )
    assert "'table.whitelist' and 'table.include.list' set the same option" in error.reason


def test_duplicate_source_names_are_rejected(tmp_path: Path) -> None:
    error = load_error(
        tmp_path,
        """
        sources:
          - {name: a, connector: debezium_json, path: x}
          - {name: a, connector: debezium_json, path: y}
        """,
    )
    assert error.key_path == "sources"
    assert "duplicate source name 'a'" in error.reason


def test_source_names_are_checked(tmp_path: Path) -> None:
    error = load_error(tmp_path, "sources: [{name: Bad-Name, connector: debezium_json, path: x}]")
    assert error.key_path == "sources[0].name"


def test_unknown_source_name_suggests(tmp_path: Path) -> None:
    config = load_config(DEFAULT_CONFIG, env={})
    with pytest.raises(ConfigError) as info:
        config.source("inventroy")
    assert info.value.key_path == "sources"
    assert "unknown source 'inventroy'; did you mean 'inventory'?" in info.value.reason
    assert info.value.file == str(DEFAULT_CONFIG)
