"""Where a file is: a local path, or an :class:`ObjectPath` on an object store with the
options of its store; and the one obstore client per store and options."""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Any, TypeAlias

PathLike: TypeAlias = "str | os.PathLike[str] | ObjectPath"
"""Where a file or folder is: a local path (str or os.PathLike) or an ObjectPath."""
Location: TypeAlias = "Path | ObjectPath"


STORE_SCHEMES = ("s3", "s3a", "gs", "az", "abfs", "abfss")
"""The URI schemes of object stores pruner reads (``s3a://`` is Spark's name for ``s3://``
and reads the same store); ``file://`` is a local path."""

CLIENT_OPTIONS = frozenset(
    {
        "allow_http",
        "allow_invalid_certificates",
        "connect_timeout",
        "default_content_type",
        "http1_only",
        "http2_only",
        "pool_idle_timeout",
        "pool_max_idle_per_host",
        "proxy_url",
        "timeout",
        "user_agent",
    }
)
"""Options of the HTTP client rather than the store (object_store's ``ClientConfigKey``):
Lance takes both kinds in one ``storage_options``, obstore in two arguments."""


class ObjectPath:
    """A location on an object store: ``scheme://bucket/key``, with the options (endpoint,
    credentials) of the store it is on.

    It stands where a ``pathlib.Path`` stands for a local file (``/``, ``name``, ``parent``,
    ``suffix``, ``absolute()``), and is not ``os.PathLike``: a local file function handed one
    fails instead of reading a local path of the same name. Two ObjectPaths are equal when
    their URIs are; the options are never part of what it prints, compares or hashes.

    >>> path = ObjectPath("s3://bucket/lake/t") / "part-0.parquet"
    >>> str(path), path.name, path.suffix, str(path.parent)
    ('s3://bucket/lake/t/part-0.parquet', 'part-0.parquet', '.parquet', 's3://bucket/lake/t')
    """

    __slots__ = ("_options", "bucket", "key", "scheme")

    def __init__(self, uri: str, options: Mapping[str, str] | None = None) -> None:
        scheme, _, rest = uri.partition("://")
        bucket, _, key = rest.partition("/")
        if scheme not in STORE_SCHEMES or not bucket:
            raise ValueError(f"{uri!r} is not an object store URI (scheme://bucket/key)")
        self.scheme = "s3" if scheme == "s3a" else scheme
        self.bucket = bucket
        self.key = "/".join(part for part in key.split("/") if part not in ("", "."))
        self._options: tuple[tuple[str, str], ...] = tuple(
            sorted((str(k).lower(), str(v)) for k, v in (options or {}).items())
        )

    def _with_key(self, key: str) -> ObjectPath:
        other = ObjectPath.__new__(ObjectPath)
        other.scheme, other.bucket, other._options = self.scheme, self.bucket, self._options
        other.key = key
        return other

    @property
    def options(self) -> dict[str, str]:
        """The store's options as given (credentials among them: never log this)."""
        return dict(self._options)

    def __truediv__(self, name: str | os.PathLike[str]) -> ObjectPath:
        parts = [p for p in str(name).split("/") if p not in ("", ".")]
        return self._with_key("/".join([self.key, *parts] if self.key else parts))

    @property
    def name(self) -> str:
        return self.key.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        name = self.name
        dot = name.rfind(".")
        return name[dot:] if 0 < dot < len(name) - 1 else ""

    @property
    def stem(self) -> str:
        suffix = self.suffix
        return self.name[: -len(suffix)] if suffix else self.name

    @property
    def parent(self) -> ObjectPath:
        return self._with_key(self.key.rsplit("/", 1)[0] if "/" in self.key else "")

    @property
    def parents(self) -> list[ObjectPath]:
        found = []
        path = self
        while path.key:
            path = path.parent
            found.append(path)
        return found

    @property
    def parts(self) -> tuple[str, ...]:
        root = f"{self.scheme}://{self.bucket}"
        return (root, *self.key.split("/")) if self.key else (root,)

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def absolute(self) -> ObjectPath:
        return self

    resolve = absolute

    def relative_to(self, other: ObjectPath) -> PurePosixPath:
        prefix = other.key + "/" if other.key else ""
        if other.bucket != self.bucket or not self.key.startswith(prefix):
            raise ValueError(f"{self} is not under {other}")
        return PurePosixPath(self.key[len(prefix) :])

    def as_posix(self) -> str:
        return str(self)

    def as_uri(self) -> str:
        """The object as a URL, its key percent-encoded: a reader that decodes a URL's path
        (DataFusion's object store) finds the key itself, ``%``, spaces and all (a Delta
        partition folder ``ts=2024-01-01%2000%3A00%3A00`` is such a key; read undecoded,
        DataFusion listed no file and answered no row).

        >>> ObjectPath("s3://b/t/d=a%20b:1/x.parquet").as_uri()
        's3://b/t/d%3Da%2520b%3A1/x.parquet'
        """
        from urllib.parse import quote

        if not self.key:
            return str(self)
        return f"{self.scheme}://{self.bucket}/{quote(self.key, safe='/')}"

    def __str__(self) -> str:
        return (
            f"{self.scheme}://{self.bucket}/{self.key}"
            if self.key
            else (f"{self.scheme}://{self.bucket}")
        )

    def __repr__(self) -> str:
        return f"ObjectPath({str(self)!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectPath) and str(self) == str(other)

    def __lt__(self, other: ObjectPath) -> bool:
        return str(self) < str(other)

    def __hash__(self) -> int:
        return hash(str(self))

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled with its options: a Spark task reads the store as the driver does.
        return (ObjectPath, (str(self), dict(self._options)))

    @property
    def _store(self) -> Any:
        return _store_of(self.scheme, self.bucket, self._options)


def location(
    source: str | os.PathLike[str] | ObjectPath, options: Mapping[str, str] | None = None
) -> Path | ObjectPath:
    """Where ``source`` is: an :class:`ObjectPath` for an object store URI (with
    ``options``, Lance-style ``storage_options``; the standard ``AWS_*`` / ``GOOGLE_*`` /
    ``AZURE_*`` environment variables fill in what they do not say), else a local path
    (``file://`` URIs included).

    >>> location("s3://bucket/t"), location("file:///tmp/t")
    (ObjectPath('s3://bucket/t'), PosixPath('/tmp/t'))
    """
    if isinstance(source, ObjectPath):
        if options and not source._options:
            return ObjectPath(str(source), options)
        return source
    text = os.fspath(source)
    scheme = text.partition("://")[0] if "://" in text else ""
    if scheme in STORE_SCHEMES:
        return ObjectPath(text, options)
    if scheme == "file":
        return Path(text.removeprefix("file://"))
    if scheme:
        raise ValueError(
            f"{text!r}: pruner reads local paths and object stores "
            f"({', '.join(s + '://' for s in STORE_SCHEMES)}), not {scheme}://"
        )
    return Path(text)


def dataset_location(dataset: Any) -> Path | ObjectPath:
    """Where a ``lance.LanceDataset`` is (with the storage options it was opened with)."""
    return location(str(dataset.uri), getattr(dataset, "_storage_options", None))


def is_remote(path: object) -> bool:
    """Whether ``path`` is on an object store."""
    return isinstance(path, ObjectPath)


def lance_options(path: object) -> dict[str, str] | None:
    """The ``storage_options`` Lance needs to open ``path`` (None for a local path)."""
    if isinstance(path, ObjectPath):
        return path.options or None
    return None


_STORES: dict[tuple[Any, ...], Any] = {}
_STORES_LOCK = threading.Lock()


def _store_of(scheme: str, bucket: str, options: tuple[tuple[str, str], ...]) -> Any:
    """One obstore client per store and options, made once per process (clients pool their
    connections)."""
    key = (scheme, bucket, options)
    with _STORES_LOCK:
        found = _STORES.get(key)
        if found is None:
            from obstore.store import from_url

            config = {k: v for k, v in options if k not in CLIENT_OPTIONS}
            client = {k: v for k, v in options if k in CLIENT_OPTIONS}
            # only what was given: an empty argument would override what obstore takes
            # from the environment (AWS_ALLOW_HTTP, say)
            arguments: dict[str, Any] = {"config": config, "client_options": client}
            arguments = {name: value for name, value in arguments.items() if value}
            try:
                found = from_url(f"{scheme}://{bucket}", **arguments)
            except BaseException as err:  # obstore panics on an unknown option name
                if isinstance(err, KeyboardInterrupt | SystemExit):
                    raise
                names = ", ".join(sorted(config)) or "none"
                raise ValueError(
                    f"the storage options for {scheme}://{bucket} are not a store's options "
                    f"(given: {names}); see docs/object-storage.md for their names"
                ) from None
            _STORES[key] = found
    return found
