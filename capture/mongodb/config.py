"""The ``mongodb`` source's config model. Imports no driver."""

from __future__ import annotations

from typing import ClassVar, Literal, Self
from urllib.parse import urlsplit

from pydantic import SecretStr, field_validator, model_validator

from capture.mongodb.renames import parse_entry
from capture.source_config import (
    CONNECTOR,
    FILTER_LIST_DEFAULT,
    SNAPSHOT_MODE,
    SNAPSHOT_MODE_DEFAULT,
    CaptureSourceConfig,
    ColumnRules,
    DatabaseFilters,
    SourceType,
)
from pipeline.config_model import NameList, RegexList, config_key, keyed_error

__all__ = ["MongoDbSourceConfig"]

MONGODB_CONNECTION_STRING = "mongodb.connection.string"
MONGODB_HOSTS = "mongodb.hosts"
MONGODB_USER = "mongodb.user"
MONGODB_PASSWORD = "mongodb.password"
COLLECTION_INCLUDE_LIST = "collection.include.list"
COLLECTION_WHITELIST = "collection.whitelist"
COLLECTION_EXCLUDE_LIST = "collection.exclude.list"
COLLECTION_BLACKLIST = "collection.blacklist"
FIELD_EXCLUDE_LIST = "field.exclude.list"
FIELD_BLACKLIST = "field.blacklist"
FIELD_RENAMES = "field.renames"
CAPTURE_MODE = "capture.mode"
CAPTURE_MODE_DEFAULT = "change_streams_update_full"

MongoSnapshotMode = Literal["initial", "never", "when_needed"]
MongoCaptureMode = Literal[
    "change_streams",
    "change_streams_update_full",
    "change_streams_update_full_with_pre_image",
    "change_streams_with_pre_image",
    "oplog",
]


def _uri_without_password(value: str) -> bool:
    try:
        return urlsplit(value).password is None
    except ValueError:
        return False


class MongoDbSourceConfig(ColumnRules, DatabaseFilters, CaptureSourceConfig):
    """MongoDB replica set or sharded cluster (change streams)."""

    KIND = SourceType.MONGODB
    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = (
        ("collection_include_list", "collection_exclude_list"),
    )
    LITERAL_SECRET_OK = {"mongodb_connection_string": _uri_without_password}

    connector: Literal["mongodb"] = config_key(..., CONNECTOR)
    """Discriminator: ``mongodb``."""
    mongodb_connection_string: SecretStr | None = config_key(None, MONGODB_CONNECTION_STRING)
    """``mongodb://...`` URI; secret. A URI without a password may be written literally."""
    mongodb_hosts: str | None = config_key(None, MONGODB_HOSTS)
    """1.2-style seeds ``rs0/host1:27017,host2:27017``, instead of a connection string."""
    mongodb_user: str | None = config_key(None, MONGODB_USER)
    """User for ``mongodb.hosts``."""
    mongodb_password: SecretStr | None = config_key(None, MONGODB_PASSWORD)
    """Password for ``mongodb.hosts``: ``${ENV_VAR}`` or ``mongodb.password.file``."""
    collection_include_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, COLLECTION_INCLUDE_LIST, COLLECTION_WHITELIST
    )
    """Regexes of ``db.collection`` names to capture."""
    collection_exclude_list: RegexList = config_key(
        FILTER_LIST_DEFAULT, COLLECTION_EXCLUDE_LIST, COLLECTION_BLACKLIST
    )
    """Regexes of ``db.collection`` names not to capture."""
    field_exclude_list: NameList = config_key(
        FILTER_LIST_DEFAULT, FIELD_EXCLUDE_LIST, FIELD_BLACKLIST
    )
    """Fully-qualified fields to drop, ``db.collection.field.nested``."""
    field_renames: NameList = config_key(FILTER_LIST_DEFAULT, FIELD_RENAMES)
    """Fields to rename, ``db.collection.field.nested:newname`` (``capture/mongodb/renames.py``)."""
    capture_mode: MongoCaptureMode = config_key(CAPTURE_MODE_DEFAULT, CAPTURE_MODE)
    """Change streams (with full documents and/or pre-images) or the 1.2-style ``oplog``."""
    snapshot_mode: MongoSnapshotMode = config_key(SNAPSHOT_MODE_DEFAULT, SNAPSHOT_MODE)
    """``initial``, ``never``, or ``when_needed`` (a new snapshot when the resume point is no
    longer in the oplog, instead of an error)."""

    @field_validator("capture_mode", mode="before")
    @classmethod
    def _change_streams_only(cls, value: object) -> object:
        if isinstance(value, str) and value.strip().lower() == "oplog":
            raise ValueError(
                "'oplog' is not supported: the agent reads change streams (MongoDB 4.0+), which "
                "Debezium also replaced oplog capture with; use 'change_streams' or one of its "
                "variants"
            )
        return value

    @field_validator("field_renames")
    @classmethod
    def _renames_well_formed(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for entry in value:
            parse_entry(entry)
        return value

    @field_validator("heartbeat_action_query", mode="before")
    @classmethod
    def _no_action_query(cls, value: object) -> object:
        if value is not None:
            raise ValueError(
                "not supported for MongoDB: the heartbeat carries the last resume token the "
                "change stream gave, so a quiet database needs no write"
            )
        return value

    @model_validator(mode="after")
    def _one_way_to_connect(self) -> Self:
        if (self.mongodb_connection_string is None) == (self.mongodb_hosts is None):
            raise keyed_error(
                MONGODB_CONNECTION_STRING,
                f"set exactly one of '{MONGODB_CONNECTION_STRING}' and '{MONGODB_HOSTS}'",
            )
        return self
