"""The base of every config model, and the one implementation of the key and secret rules.

Every section of ``conf/pipeline.yaml`` and every connector's ``sources[]`` model derives from
:class:`ConfigModel`: frozen, validated once, unknown keys rejected with "did you mean", two
spellings of one option refused, ``<secret>.file`` keys read, literal secrets refused and
enumerated values matched case-insensitively. The connector packages declare their models with
:func:`config_key` and the types below (``capture/<connector>/config.py``); the pipeline-wide
sections, the layering and the loading are in :mod:`pipeline.config`.

This module imports no connector and no driver, so a connector's config model can be imported
(and a config validated) on a machine without psycopg or PyMySQL.
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Annotated, Any, ClassVar, Literal, NoReturn, Self, Union, get_args, get_origin

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    SecretStr,
    ValidationError,
    ValidationInfo,
    model_validator,
)
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

__all__ = [
    "CTX_BASE_DIR",
    "CTX_CONFIG_FILE",
    "CTX_REJECT_LITERAL_SECRETS",
    "SECRET_FILE_SUFFIX",
    "ConfigModel",
    "ConfigPath",
    "Defaulted",
    "FrozenDict",
    "KeyIndex",
    "NameList",
    "NonNegativeInt",
    "OptionalConfigPath",
    "Port",
    "PositiveInt",
    "RegexList",
    "Sourced",
    "StrMap",
    "comma_items",
    "compile_regexes",
    "config_key",
    "did_you_mean",
    "env_form",
    "key_index",
    "keyed_error",
    "regex_items",
    "reveal",
    "split_commas",
    "split_regex_list",
]

SECRET_FILE_SUFFIX = ".file"
"""``<secret key>.file: /path`` reads the secret from that file."""

CTX_BASE_DIR = "base_dir"
"""Validation context key: the directory relative paths are resolved against."""
CTX_CONFIG_FILE = "config_file"
"""Validation context key: the config file being loaded."""
CTX_REJECT_LITERAL_SECRETS = "reject_literal_secrets"
"""Validation context key: refuse secrets written literally (set when loading a file)."""


# --- small value types ----------------------------------------------------------------------
class FrozenDict(dict[str, str]):
    """A read-only, hashable ``dict``, so that frozen configs stay immutable and hashable."""

    __slots__ = ()

    def _read_only(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise TypeError("configuration mappings are read-only")

    def __setitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def __delitem__(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def __ior__(self, *args: Any, **kwargs: Any) -> NoReturn:  # type: ignore[misc]
        self._read_only()

    def clear(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def pop(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def popitem(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def setdefault(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def update(self, *args: Any, **kwargs: Any) -> NoReturn:
        self._read_only()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(frozenset(self.items()))

    def __reduce__(self) -> tuple[Any, ...]:
        # dict subclasses unpickle through __setitem__, which is disabled here.
        return (FrozenDict, (dict(self),))


class Sourced(str):
    """A string that did not come literally from the YAML file, with where it came from.

    Interpolated values, environment layers, secret files and explicit overrides are wrapped in
    this type while the raw tree is assembled, so validation can tell a literal secret from an
    indirect one and errors can name the environment variable a bad value came from.
    """

    origin: str

    def __new__(cls, value: str, origin: str) -> Sourced:
        self = super().__new__(cls, value)
        self.origin = origin
        return self


class Defaulted(Sourced):
    """An interpolated string that used a ``${VAR:-default}`` default written in the file."""


def reveal(secret: SecretStr | None) -> str | None:
    """Return the clear text of a secret field. Call this only where a driver connects.

    Args:
        secret: A secret config value, e.g. ``source.database_password``.

    Returns:
        The secret's value, or None when the secret is not set.
    """
    return None if secret is None else secret.get_secret_value()


def split_regex_list(value: str) -> tuple[str, ...]:
    """Split a Debezium comma-separated regex list.

    Like Debezium's ``RegExSplitterByComma``: ``\\,`` is a literal comma inside an expression,
    items are trimmed and empty items dropped.

    >>> split_regex_list(r"inventory\\.orders, inventory\\.a{1\\,3} ,")
    ('inventory\\\\.orders', 'inventory\\\\.a{1,3}')
    """
    parts: list[str] = []
    current: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char == "\\" and i + 1 < len(value) and value[i + 1] == ",":
            current.append(",")
            i += 2
            continue
        if char == ",":
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
        i += 1
    parts.append("".join(current))
    return tuple(p.strip() for p in parts if p.strip())


def _as_items(value: Any, split: Callable[[str], tuple[str, ...]]) -> Any:
    if value is None:
        return ()
    if isinstance(value, str):
        return split(value)
    if isinstance(value, Sequence):
        return tuple(str(v).strip() if isinstance(v, str) else v for v in value)
    return value


def split_commas(value: str) -> tuple[str, ...]:
    """Split a plain comma-separated list, trimming items and dropping empty ones."""
    return tuple(p.strip() for p in value.split(",") if p.strip())


def regex_items(value: Any) -> Any:
    """A regex list given as a Debezium comma-separated string or a YAML list, as a tuple."""
    return _as_items(value, split_regex_list)


def comma_items(value: Any) -> Any:
    """A name list given as a comma-separated string or a YAML list, as a tuple."""
    return _as_items(value, split_commas)


def compile_regexes(patterns: tuple[str, ...]) -> tuple[str, ...]:
    """Check that every pattern compiles (case-insensitively, as the filters use them).

    Raises:
        ValueError: A pattern is not a valid regular expression.
    """
    for pattern in patterns:
        try:
            re.compile(pattern, re.IGNORECASE)
        except re.error as exc:
            raise ValueError(f"invalid regular expression {pattern!r}: {exc}") from exc
    return patterns


def _stringify_map(value: Any) -> Any:
    if not isinstance(value, Mapping):
        return value
    out: dict[Any, Any] = {}
    for key, item in value.items():
        if isinstance(item, bool):
            out[key] = "true" if item else "false"
        elif isinstance(item, int | float):
            out[key] = str(item)
        else:
            out[key] = item
    return out


def _resolve_path(value: Path, info: ValidationInfo) -> Path:
    """Make ``value`` absolute against the config file's directory (cwd without a file)."""
    value = value.expanduser()
    if value.is_absolute():
        return value
    context = info.context if isinstance(info.context, Mapping) else {}
    base = context.get(CTX_BASE_DIR)
    base_dir = Path(base) if base is not None else Path.cwd()
    return Path(os.path.abspath(base_dir / value))


ConfigPath = Annotated[Path, AfterValidator(_resolve_path)]
"""A path; relative values are resolved against the config file's directory."""
OptionalConfigPath = Annotated[
    ConfigPath | None,
    BeforeValidator(lambda v: None if isinstance(v, str) and not v.strip() else v),
]
"""An optional path; an empty string (e.g. from ``${VAR:-}``) means not set."""
RegexList = Annotated[
    tuple[str, ...], BeforeValidator(regex_items), AfterValidator(compile_regexes)
]
"""Debezium regex list: a comma-separated string or a YAML list; each item anchored."""
NameList = Annotated[tuple[str, ...], BeforeValidator(comma_items)]
"""A comma-separated string or a YAML list of plain names."""
StrMap = Annotated[dict[str, str], BeforeValidator(_stringify_map), AfterValidator(FrozenDict)]
PositiveInt = Annotated[int, Field(gt=0)]
NonNegativeInt = Annotated[int, Field(ge=0)]
Port = Annotated[int, Field(gt=0, lt=65536)]


def config_key(default: Any, key: str, *older: str, **kwargs: Any) -> Any:
    """A field read from the YAML key ``key``; ``older`` spellings are accepted as aliases."""
    if older:
        return Field(default, alias=key, validation_alias=AliasChoices(key, *older), **kwargs)
    return Field(default, alias=key, **kwargs)


def keyed_error(key: str, reason: str) -> PydanticCustomError:
    """An error about ``key`` of the model being validated (the key path gets ``key`` appended)."""
    return PydanticCustomError("config_key", "{key}: {reason}", {"key": key, "reason": reason})


# --- the base model -------------------------------------------------------------------------
@dataclass(frozen=True)
class KeyIndex:
    """Every accepted spelling of every field of one model, computed once per class."""

    spellings: dict[str, str]
    """Accepted key -> field name (aliases, old aliases, field names, ``<secret>.file``)."""
    primary: dict[str, str]
    """Field name -> the key written in YAML (the field's alias, else its name)."""
    secrets: frozenset[str]
    """Fields holding a SecretStr."""
    secret_files: frozenset[str]
    """The ``<secret key>.file`` spellings."""
    mappings: frozenset[str]
    """Fields holding a free-form mapping (``spark.conf``)."""
    literals: dict[str, dict[str, str]]
    """Field name -> lower-cased allowed value -> allowed value, for enumerated fields."""
    suggestions: tuple[str, ...]
    """Keys offered in "did you mean" hints."""
    by_env: dict[str, str]
    """``MEDALLION__`` key form (upper case, ``_`` for ``.`` and ``-``) -> accepted key."""


_KEY_INDEXES: dict[type[BaseModel], KeyIndex] = {}


def env_form(key: str) -> str:
    """The ``MEDALLION__`` spelling of a key: upper case, ``_`` for ``.`` and ``-``."""
    return key.upper().replace(".", "_").replace("-", "_")


def _mentions(annotation: Any, target: type) -> bool:
    if annotation is target:
        return True
    return any(_mentions(arg, target) for arg in get_args(annotation))


def _literal_values(annotation: Any) -> tuple[str, ...]:
    if get_origin(annotation) is Literal:
        return tuple(v for v in get_args(annotation) if isinstance(v, str))
    if get_origin(annotation) in (Union, UnionType):
        return tuple(v for arg in get_args(annotation) for v in _literal_values(arg))
    return ()


def key_index(cls: type[BaseModel]) -> KeyIndex:
    """Every accepted spelling of every field of ``cls`` (computed once per class)."""
    index = _KEY_INDEXES.get(cls)
    if index is not None:
        return index
    spellings: dict[str, str] = {}
    primary: dict[str, str] = {}
    secrets: set[str] = set()
    secret_files: set[str] = set()
    mappings: set[str] = set()
    literals: dict[str, dict[str, str]] = {}
    suggestions: list[str] = []
    for name, info in cls.model_fields.items():
        keys = [info.alias or name]
        if isinstance(info.validation_alias, AliasChoices):
            keys += [c for c in info.validation_alias.choices if isinstance(c, str)]
        elif isinstance(info.validation_alias, str):
            keys.append(info.validation_alias)
        keys = list(dict.fromkeys(keys))
        primary[name] = keys[0]
        if _mentions(info.annotation, SecretStr):
            secrets.add(name)
            files = [k + SECRET_FILE_SUFFIX for k in keys]
            secret_files.update(files)
            keys += files
        if get_origin(info.annotation) in (dict, Mapping):
            mappings.add(name)
        values = _literal_values(info.annotation)
        if values:
            literals[name] = {v.lower(): v for v in values}
        suggestions += keys
        for key in [*keys, name]:
            spellings.setdefault(key, name)
    by_env: dict[str, str] = {}
    for key in suggestions + list(spellings):
        by_env.setdefault(env_form(key), key)
    index = KeyIndex(
        spellings=spellings,
        primary=primary,
        secrets=frozenset(secrets),
        secret_files=frozenset(secret_files),
        mappings=frozenset(mappings),
        literals=literals,
        suggestions=tuple(suggestions),
        by_env=by_env,
    )
    _KEY_INDEXES[cls] = index
    return index


def did_you_mean(word: str, candidates: Sequence[str], quote: str = "'") -> str:
    """``did you mean 'x'?`` for the closest candidate, or "" when none is close."""
    match = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return f"did you mean {quote}{match[0]}{quote}?" if match else ""


class ConfigModel(BaseModel):
    """Base of every config model: frozen, strict about keys, validated once.

    One ``wrap`` validator, inherited by every section and source model, does what pydantic's
    ``extra="forbid"`` cannot: it rejects unknown keys with the closest valid key as a hint,
    rejects known keys the model does not honour with the reason (:attr:`UNSUPPORTED_KEYS`),
    refuses two spellings of one option, reads ``<secret>.file`` keys, rejects literal secrets
    (when loaded from a file) and matches enumerated values case-insensitively; the offending
    keys are dropped and validation goes on, so one run reports every problem. One ``after``
    validator checks that mutually exclusive include/exclude lists are not both set.
    """

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        populate_by_name=True,
        use_attribute_docstrings=True,
    )

    EXCLUSIVE_KEYS: ClassVar[tuple[tuple[str, str], ...]] = ()
    """Pairs of field names of which at most one may be set (Debezium include XOR exclude)."""
    LITERAL_SECRET_OK: ClassVar[Mapping[str, Callable[[str], bool]]] = {}
    """Secret field name -> predicate: a literal value it accepts is not really a secret."""
    UNSUPPORTED_KEYS: ClassVar[Mapping[str, str]] = {}
    """Known keys (Debezium's) this model rejects -> why and what to do instead; merged along
    the class hierarchy. A key is either honoured or rejected, never validated and ignored."""

    @classmethod
    def unsupported_keys(cls) -> Mapping[str, str]:
        """Every rejected key of this model with its reason (its own and its bases')."""
        merged: dict[str, str] = {}
        for klass in reversed(cls.__mro__):
            merged.update(vars(klass).get("UNSUPPORTED_KEYS", {}))
        return merged

    @classmethod
    def accepts_key(cls, key: str) -> bool:
        """Whether ``key`` is a key of this model (any spelling) or one of its pattern keys."""
        return key in key_index(cls).spellings or cls._is_pattern_key(key)

    @classmethod
    def _is_pattern_key(cls, key: str) -> bool:
        """Whether ``key`` is a pattern key (``column.mask.with.8.chars``) this model accepts."""
        return False

    @classmethod
    def _rewrite_input(
        cls, data: dict[str, Any], context: Mapping[str, Any], problems: list[PydanticCustomError]
    ) -> dict[str, Any]:
        """Hook: turn accepted pattern keys into fields; append errors to ``problems``."""
        return data

    @model_validator(mode="wrap")
    @classmethod
    def _check_keys(
        cls, data: Any, handler: ModelWrapValidatorHandler[Any], info: ValidationInfo
    ) -> Any:
        # A wrap validator, so that a bad key does not hide the other problems of the model:
        # offending keys are reported and dropped, and validation goes on without them.
        if not isinstance(data, Mapping):
            return handler(data)
        context: Mapping[str, Any] = info.context if isinstance(info.context, Mapping) else {}
        problems: list[PydanticCustomError] = []
        data = cls._prepare_input({str(k): v for k, v in data.items()}, context, problems)
        if not problems:
            return handler(data)
        details: list[InitErrorDetails] = [{"type": p, "loc": (), "input": data} for p in problems]
        try:
            handler(data)
        except ValidationError as exc:
            details += [_as_error_details(e) for e in exc.errors()]
        raise ValidationError.from_exception_data(cls.__name__, details)

    @classmethod
    def _prepare_input(
        cls, data: dict[str, Any], context: Mapping[str, Any], problems: list[PydanticCustomError]
    ) -> dict[str, Any]:
        index = key_index(cls)
        unsupported = cls.unsupported_keys()
        for key in [k for k in data if k in unsupported and k not in index.spellings]:
            problems.append(keyed_error(key, f"not supported: {unsupported[key]}"))
            del data[key]
        for key in [k for k in data if k not in index.spellings and not cls._is_pattern_key(k)]:
            hint = cls._hint_for(key, index)
            note = f"; {hint}" if hint else ""
            problems.append(
                PydanticCustomError(
                    "unknown_key",
                    "unknown key '{key}'{note}",
                    {"key": key, "hint": hint, "note": note},
                )
            )
            del data[key]

        given: dict[str, str] = {}
        for key in list(data):
            name = index.spellings.get(key)
            if name is None:  # a pattern key
                continue
            if name in given:
                problems.append(
                    keyed_error(
                        key, f"'{given[name]}' and '{key}' set the same option; keep one of them"
                    )
                )
                del data[key]
                continue
            given[name] = key

        for secret_field in index.secrets:
            secret_key = given.get(secret_field)
            if secret_key is None:
                continue
            key = secret_key
            if key in index.secret_files:
                try:
                    secret = _read_secret_file(key, data.pop(key), context)
                except PydanticCustomError as err:
                    problems.append(err)
                    continue
                data[key[: -len(SECRET_FILE_SUFFIX)]] = secret
                continue
            value = data[key]
            literal = value is not None and (
                not isinstance(value, Sourced | SecretStr) or isinstance(value, Defaulted)
            )
            allowed = cls.LITERAL_SECRET_OK.get(secret_field)
            if isinstance(value, str) and (value == "" or (allowed and allowed(value))):
                literal = False
            if literal and context.get(CTX_REJECT_LITERAL_SECRETS):
                problems.append(
                    keyed_error(
                        key,
                        "a literal secret is not allowed in the config file; write "
                        f"'{key}: ${{ENV_VAR}}' or '{key}{SECRET_FILE_SUFFIX}: /path/to/secret'",
                    )
                )
                del data[key]

        for key, value in list(data.items()):
            field = index.spellings.get(key)
            if field is not None and field in index.literals and isinstance(value, str):
                data[key] = index.literals[field].get(value.lower(), value)
        return cls._rewrite_input(data, context, problems)

    @classmethod
    def _hint_for(cls, key: str, index: KeyIndex) -> str:
        """Hook: the hint given for an unknown ``key`` (by default the closest valid key)."""
        return did_you_mean(key, index.suggestions)

    @model_validator(mode="after")
    def _check_exclusive(self) -> Self:
        index = key_index(type(self))
        pairs = [p for c in type(self).__mro__ for p in vars(c).get("EXCLUSIVE_KEYS", ())]
        for first, second in pairs:
            if getattr(self, first) and getattr(self, second):
                raise keyed_error(
                    index.primary[second],
                    f"'{index.primary[first]}' and '{index.primary[second]}' are mutually "
                    "exclusive; set only one of them",
                )
        return self


def _as_error_details(error: ErrorDetails) -> InitErrorDetails:
    """Carry an error of an inner validation over into a combined ValidationError."""
    custom = PydanticCustomError(error["type"], error["msg"], error.get("ctx"))
    return {"type": custom, "loc": tuple(error["loc"]), "input": error["input"]}


def _read_secret_file(key: str, value: Any, context: Mapping[str, Any]) -> Sourced:
    if not isinstance(value, str) or not value:
        raise keyed_error(key, "expected the path of a file holding the secret")
    path = Path(value).expanduser()
    if not path.is_absolute():
        base = context.get(CTX_BASE_DIR)
        path = (Path(base) if base is not None else Path.cwd()) / path
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise keyed_error(key, f"cannot read secret file '{path}': {exc.strerror or exc}") from exc
    return Sourced(text.rstrip("\r\n"), f"secret file {path}")
