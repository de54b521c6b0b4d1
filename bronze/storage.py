"""Where the lake lives: a local directory or an S3-compatible bucket, behind one path type.

The lake root is either a local path or an ``s3://bucket/prefix`` URI (``s3a://`` is accepted and
read as ``s3://``). Code that builds table locations calls :func:`lake_path` on the root and joins
with ``/`` as it would with :class:`pathlib.Path`:

* a local root stays a real :class:`~pathlib.Path`, so the local lake behaves exactly as before;
* an object-store root becomes an :class:`ObjectPath`, which offers the few ``Path`` operations the
  lake uses (``/``, ``name``, ``parent``, ``absolute``, ``is_dir``, ``exists``, ``iterdir``,
  ``mkdir``) over the bucket, and whose ``str`` is the ``s3://`` URI that delta-rs and Spark read.

``Path("s3://b/p")`` would silently become the local path ``s3:/b/p``; that is why the root is
never wrapped in ``Path`` directly.

Each :class:`ObjectPath` carries its :class:`ObjectStoreOptions` (endpoint, region, plain HTTP,
credentials from secret files), so a table path derived from the root is enough to open the table:
delta-rs calls pass ``storage_options=storage_options(path)`` (None for a local path). Credentials
in the standard ``AWS_ACCESS_KEY_ID``/``AWS_SECRET_ACCESS_KEY``/``AWS_SESSION_TOKEN`` variables
are not copied anywhere: delta-rs, pyarrow and Spark's s3a each read them from the environment.

Concurrent commits: delta-rs (1.x) commits a Delta version on S3 with a conditional put
(``If-None-Match: *``): of two writers racing for one version, the store refuses the second, which
re-reads the log and retries at the next version. AWS S3 has honoured this since August 2024;
an S3-compatible store must support conditional writes too, or two agents writing one bronze
table could overwrite each other's commit. No DynamoDB lock is needed (delta-rs 1.x dropped it).
"""

from __future__ import annotations

import functools
import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

from pydantic import SecretStr

if TYPE_CHECKING:
    import pyarrow as pa
    import pyarrow.fs as pafs
    from deltalake import DeltaTable

__all__ = [
    "OBJECT_SCHEMES",
    "LakePath",
    "ObjectPath",
    "ObjectStoreOptions",
    "is_delta_table",
    "is_object_uri",
    "lake_path",
    "open_delta",
    "parse_object_uri",
    "read_delta",
    "remember_bucket",
    "storage_options",
]

OBJECT_SCHEMES: tuple[str, ...] = ("s3", "s3a")
"""URI schemes of an object-store lake root; both mean S3 (Spark reads them through s3a)."""

_URI = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<bucket>[^/]*)(?:/(?P<key>.*))?$")
# S3 bucket names: 3-63 characters of lower-case letters, digits, dots and hyphens.
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True, slots=True)
class ObjectStoreOptions:
    """How to reach the bucket of an object-store lake.

    Attributes:
        endpoint: Endpoint URL of an S3-compatible server (``http://127.0.0.1:9000``); None for
            AWS S3 itself.
        region: The bucket's region; None lets the clients find it (AWS) or use ``us-east-1``.
        allow_http: Accept a plain-HTTP endpoint (a local server); refused otherwise.
        access_key_id: Access key from the config's secret file; None: the environment's.
        secret_access_key: Secret key from the config's secret file; None: the environment's.
    """

    endpoint: str | None = None
    region: str | None = None
    allow_http: bool = False
    access_key_id: SecretStr | None = field(default=None, repr=False)
    secret_access_key: SecretStr | None = field(default=None, repr=False)

    def delta_rs(self) -> dict[str, str]:
        """The ``storage_options`` of delta-rs (object_store's ``AWS_*`` keys)."""
        options: dict[str, str] = {}
        if self.endpoint:
            options["AWS_ENDPOINT_URL"] = self.endpoint
        if self.region:
            options["AWS_REGION"] = self.region
        if self.allow_http:
            options["AWS_ALLOW_HTTP"] = "true"
        if self.access_key_id is not None and self.secret_access_key is not None:
            options["AWS_ACCESS_KEY_ID"] = self.access_key_id.get_secret_value()
            options["AWS_SECRET_ACCESS_KEY"] = self.secret_access_key.get_secret_value()
        return options

    def arrow_filesystem(self) -> pafs.S3FileSystem:
        """A pyarrow S3 filesystem for listings (credentials: these, else the environment's);
        one per set of options, reused."""
        return _arrow_filesystem(self)


@functools.cache
def _arrow_filesystem(options: ObjectStoreOptions) -> pafs.S3FileSystem:
    import pyarrow.fs as pafs

    kwargs: dict[str, Any] = {}
    if options.endpoint:
        scheme, _, host = options.endpoint.partition("://")
        kwargs["endpoint_override"] = host or scheme
        kwargs["scheme"] = scheme if host else "https"
    kwargs["region"] = options.region or os.environ.get("AWS_REGION") or "us-east-1"
    if options.access_key_id is not None and options.secret_access_key is not None:
        kwargs["access_key"] = options.access_key_id.get_secret_value()
        kwargs["secret_key"] = options.secret_access_key.get_secret_value()
    return pafs.S3FileSystem(**kwargs)


@dataclass(frozen=True, slots=True)
class ObjectPath:
    """A location in an S3 bucket that joins and lists like the ``Path`` of a local lake.

    ``str()`` gives ``s3://bucket/key``; ``repr()`` never shows credentials. Object stores have
    no directories: a "directory" exists when some object's key starts with it, and
    :meth:`mkdir` does nothing (the first object written creates it).

    Attributes:
        bucket: The bucket.
        key: The key prefix inside the bucket, without leading or trailing ``/``.
        options: How to reach the bucket.
    """

    bucket: str
    key: str = ""
    options: ObjectStoreOptions = field(default_factory=ObjectStoreOptions, compare=False)

    def __str__(self) -> str:
        return f"s3://{self.bucket}/{self.key}" if self.key else f"s3://{self.bucket}"

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __truediv__(self, part: str | os.PathLike[str]) -> ObjectPath:
        joined = posixpath.normpath(posixpath.join(self.key, os.fspath(part)))
        if joined.startswith("..") or posixpath.isabs(joined):
            raise ValueError(f"{part!r} leaves {self}")
        return ObjectPath(self.bucket, "" if joined == "." else joined, self.options)

    @property
    def name(self) -> str:
        """The last key segment (the bucket for the bucket's root)."""
        return posixpath.basename(self.key) if self.key else self.bucket

    @property
    def parent(self) -> ObjectPath:
        """The location one segment up (the bucket's root stays itself)."""
        return ObjectPath(self.bucket, posixpath.dirname(self.key), self.options)

    def absolute(self) -> ObjectPath:
        """Itself: a URI is always absolute."""
        return self

    def mkdir(self, *, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: an object store creates prefixes with the objects under them."""

    def is_dir(self) -> bool:
        """Whether any object lies under this prefix."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._arrow_path(), allow_not_found=True, recursive=False)
        return bool(self.options.arrow_filesystem().get_file_info(selector))

    def exists(self) -> bool:
        """Whether an object has this key or lies under it."""
        import pyarrow.fs as pafs

        info = self.options.arrow_filesystem().get_file_info(self._arrow_path())
        return info.type != pafs.FileType.NotFound or self.is_dir()

    def iterdir(self) -> Iterator[ObjectPath]:
        """The objects and prefixes one level below this one (none if it does not exist)."""
        import pyarrow.fs as pafs

        selector = pafs.FileSelector(self._arrow_path(), allow_not_found=True, recursive=False)
        for info in self.options.arrow_filesystem().get_file_info(selector):
            yield self / posixpath.basename(info.path)

    def read_bytes(self) -> bytes:
        """The object's bytes (``FileNotFoundError`` when there is none)."""
        with self.options.arrow_filesystem().open_input_stream(self._arrow_path()) as stream:
            data: bytes = stream.read()
        return data

    def write_bytes(self, data: bytes) -> int:
        """Write the object whole (an S3 PUT is atomic: readers see the old object or the new)."""
        with self.options.arrow_filesystem().open_output_stream(self._arrow_path()) as stream:
            stream.write(data)
        return len(data)

    def _arrow_path(self) -> str:
        return f"{self.bucket}/{self.key}" if self.key else self.bucket


LakePath: TypeAlias = Path | ObjectPath
"""A location in the lake: a local path, or a location in a bucket."""


def replace_bytes(path: LakePath, data: bytes) -> None:
    """Write ``path`` whole, so that a reader (another process too) never sees half of it: a
    local file is written beside it and renamed over it; an object store's PUT is atomic."""
    if isinstance(path, ObjectPath):
        path.write_bytes(data)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.partial")
    partial.write_bytes(data)
    os.replace(partial, path)


def is_object_uri(value: object) -> bool:
    """Whether ``value`` is a string naming an object-store location (``s3://``, ``s3a://``)."""
    if not isinstance(value, str):
        return False
    match = _URI.match(value)
    return match is not None and match.group("scheme").lower() in OBJECT_SCHEMES


def parse_object_uri(uri: str, options: ObjectStoreOptions | None = None) -> ObjectPath:
    """Parse ``s3://bucket/prefix`` (or ``s3a://``) into an :class:`ObjectPath`.

    Raises:
        ValueError: Not an S3 URI, or the bucket name is not a valid S3 bucket name.
    """
    match = _URI.match(uri)
    if match is None or match.group("scheme").lower() not in OBJECT_SCHEMES:
        schemes = ", ".join(f"{s}://" for s in OBJECT_SCHEMES)
        raise ValueError(f"{uri!r} is not an object-store URI ({schemes})")
    bucket = match.group("bucket")
    if not _BUCKET.match(bucket):
        raise ValueError(
            f"{uri!r}: {bucket!r} is not an S3 bucket name (3-63 lower-case letters, digits, "
            "dots and hyphens)"
        )
    key = posixpath.normpath(match.group("key") or ".").strip("/")
    if options is None:
        options = _BUCKET_OPTIONS.get(bucket, ObjectStoreOptions())
    return ObjectPath(bucket, "" if key == "." else key, options)


_BUCKET_OPTIONS: dict[str, ObjectStoreOptions] = {}
"""Options of the buckets whose lake root this process configured (:func:`remember_bucket`)."""


def remember_bucket(root: ObjectPath) -> None:
    """Let a bare ``s3://`` URI of ``root``'s bucket find ``root``'s options.

    Spark code passes table locations as strings (``str(path)``); a delta-rs call on such a
    string still needs the endpoint and credentials of the configured lake. The config calls this
    once per validated lake root; the last configuration of a bucket wins.
    """
    _BUCKET_OPTIONS[root.bucket] = root.options


def lake_path(value: str | os.PathLike[str] | ObjectPath) -> LakePath:
    """The lake location ``value`` names: an :class:`ObjectPath` for an S3 URI, else a ``Path``.

    An :class:`ObjectPath` is returned as is (it keeps its options); a URI string gets default
    options (credentials and region from the environment).
    """
    if isinstance(value, ObjectPath | Path):
        return value
    text = os.fspath(value)
    return parse_object_uri(text) if is_object_uri(text) else Path(text)


def storage_options(path: LakePath | str) -> dict[str, str] | None:
    """The delta-rs ``storage_options`` for ``path``: None for a local path."""
    where = lake_path(path)
    return where.options.delta_rs() if isinstance(where, ObjectPath) else None


def open_delta(path: LakePath | str, **kwargs: Any) -> DeltaTable:
    """Open the Delta table at ``path`` with delta-rs (its storage options included).

    Raises:
        deltalake.exceptions.TableNotFoundError: No Delta table there.
    """
    from deltalake import DeltaTable

    return DeltaTable(str(path), storage_options=storage_options(path), **kwargs)


def read_delta(table: DeltaTable, columns: list[str]) -> pa.Table:
    """``columns`` of every row of a small Delta table, read by delta-rs's own query engine.

    Not ``to_pyarrow_dataset``: that imports ``pyarrow.dataset`` and, through it, pandas
    (~0.25 CPU-s), which a capture agent would pay on its own thread at its start, before its
    first read. (pyarrow still imports pandas on the first Arrow C-stream export, which every
    ``write_deltalake`` does: that cost moves to the first commit, on the commit thread.)
    """
    import pyarrow as pa
    from deltalake import QueryBuilder

    reader = QueryBuilder().register("t", table).execute("SELECT * FROM t")
    return pa.RecordBatchReader.from_stream(reader).read_all().select(columns)


def is_delta_table(path: LakePath | str) -> bool:
    """Whether a Delta table (a ``_delta_log`` with a commit) is at ``path``."""
    from deltalake import DeltaTable

    return bool(DeltaTable.is_deltatable(str(path), storage_options=storage_options(path)))
