"""What the MongoDB agent reads off a ``mongodb`` source config: :class:`MongoSettings`.

Imports no driver (the connection string is built here, pymongo parses it in the agent).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from pydantic import SecretStr

from capture.captured_table import AgentRules, TableFilter
from capture.mongodb.renames import FieldRenames

__all__ = ["SNAPSHOT_FETCH_SIZE", "SYSTEM_DATABASES", "FieldExclusions", "MongoSettings"]

SYSTEM_DATABASES = frozenset({"admin", "local", "config"})
"""Never captured, whatever the include lists say (Debezium excludes them too)."""
SNAPSHOT_FETCH_SIZE = 1000
"""Documents per snapshot ``find`` (a batch asks for fewer when it is nearly full)."""


@dataclass(frozen=True, slots=True)
class FieldExclusions:
    """``field.exclude.list``: ``db.collection.field.nested`` entries, ``*`` for any database or
    collection (Debezium's syntax)."""

    rules: tuple[tuple[str, str, str], ...] = ()

    @classmethod
    def parse(cls, entries: tuple[str, ...]) -> FieldExclusions:
        """Read the entries (each has at least a database, a collection and a field)."""
        rules = []
        for entry in entries:
            parts = entry.strip().split(".", 2)
            if len(parts) != 3 or not all(parts):
                raise ValueError(
                    f"field.exclude.list entry {entry!r} is not db.collection.field[.nested]"
                )
            rules.append((parts[0], parts[1], parts[2]))
        return cls(tuple(rules))

    def paths(self, db: str, coll: str) -> tuple[str, ...]:
        """The dotted field paths excluded in ``db.coll``."""
        return tuple(
            path
            for rule_db, rule_coll, path in self.rules
            if rule_db in ("*", db) and rule_coll in ("*", coll)
        )


@dataclass(frozen=True, slots=True)
class MongoSettings:
    """Everything the agent needs from a ``mongodb`` source config (tests may build it).

    ``uri`` is the config's ``SecretStr`` (or a literal URI without a password) and is revealed
    only when connecting.
    """

    uri: Any
    server_name: str = "mongodb"
    snapshot_mode: str = "initial"
    capture_mode: str = "change_streams_update_full"
    collections: TableFilter = field(default_factory=lambda: TableFilter(system=SYSTEM_DATABASES))
    field_exclusions: FieldExclusions = field(default_factory=FieldExclusions)
    field_renames: FieldRenames = field(default_factory=FieldRenames)
    rules: AgentRules = field(default_factory=AgentRules)
    """Masks, tombstones, transaction metadata, skipped operations, heartbeats (no
    ``message.key.columns``: the key is always the ``_id``)."""
    snapshot_fetch_size: int = SNAPSHOT_FETCH_SIZE
    server_selection_timeout_ms: int = 10_000

    @classmethod
    def from_config(cls, config: Any) -> MongoSettings:
        """Read a validated :class:`capture.mongodb.config.MongoDbSourceConfig`."""
        return cls(
            uri=config.mongodb_connection_string or _hosts_uri(config),
            server_name=str(config.logical_name),
            snapshot_mode=str(config.snapshot_mode),
            capture_mode=str(config.capture_mode),
            collections=TableFilter(
                tuple(config.database_include_list),
                tuple(config.database_exclude_list),
                tuple(config.collection_include_list),
                tuple(config.collection_exclude_list),
                system=SYSTEM_DATABASES,
            ),
            field_exclusions=FieldExclusions.parse(tuple(config.field_exclude_list)),
            field_renames=FieldRenames.parse(tuple(config.field_renames)),
            rules=AgentRules.from_config(_KeyedById(config)),
        )

    def connection_string(self) -> str:
        """The URI, secret revealed (only for the driver)."""
        uri = self.uri
        return uri.get_secret_value() if isinstance(uri, SecretStr) else str(uri)

    @property
    def full_document(self) -> str:
        """The change stream's ``fullDocument`` for ``capture.mode``."""
        return "updateLookup" if "update_full" in self.capture_mode else "default"

    @property
    def before_change(self) -> str:
        """The change stream's ``fullDocumentBeforeChange`` for ``capture.mode``."""
        return "whenAvailable" if self.capture_mode.endswith("pre_image") else "off"


class _KeyedById:
    """A ``mongodb`` config as :meth:`AgentRules.from_config` reads it: the record key is always
    the document's ``_id``, so there is no ``message.key.columns``."""

    message_key_columns = None

    def __init__(self, config: Any) -> None:
        self._config = config

    def __getattr__(self, name: str) -> Any:
        return getattr(self._config, name)


_SEEDS = re.compile(r"^(?:(?P<rs>[^/]+)/)?(?P<hosts>[^/]+)$")


def _hosts_uri(config: Any) -> SecretStr:
    """A URI from the 1.2-style ``mongodb.hosts`` (``rs0/h1:27017,h2:27017``) and user/password."""
    match = _SEEDS.match(str(config.mongodb_hosts).strip())
    if match is None:
        raise ValueError(f"mongodb.hosts {config.mongodb_hosts!r} is not [rs/]host:port,...")
    auth = ""
    if config.mongodb_user:
        auth = quote(str(config.mongodb_user), safe="")
        if config.mongodb_password is not None:
            auth += ":" + quote(config.mongodb_password.get_secret_value(), safe="")
        auth += "@"
    query = f"?replicaSet={quote(match['rs'], safe='')}" if match["rs"] else ""
    return SecretStr(f"mongodb://{auth}{match['hosts']}/{query}")
