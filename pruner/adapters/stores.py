"""How an engine reads a table's files on an object store itself.

- DataFusion (:func:`register_store`): pruner gives a SessionContext one store per bucket
  or container (``AmazonS3``, ``MicrosoftAzure``), made from the table's Lance-style
  storage options or the standard ``AWS_*`` / ``AZURE_*`` environment variables (DataFusion
  reads the files a frame reads whole itself, and ``register_object_store`` is how its
  users reach a store).
- DuckDB (:func:`read_store`): an fsspec file system of pruner's own per scheme, reading
  through :mod:`pruner.storage`.
"""

from __future__ import annotations

import datetime
import weakref
from typing import TYPE_CHECKING, Any

from fsspec import AbstractFileSystem

from pruner import storage
from pruner.errors import EngineError
from pruner.table import Table

if TYPE_CHECKING:  # the adapter imports DataFusion, naming the extra when it is missing
    import datafusion
    import duckdb

__all__ = ["read_store", "register_store"]


_S3_OPTIONS = {
    "endpoint": (
        "aws_endpoint",
        "endpoint",
        "aws_endpoint_url",
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT",
    ),
    "access_key_id": ("aws_access_key_id", "access_key_id", "AWS_ACCESS_KEY_ID"),
    "secret_access_key": ("aws_secret_access_key", "secret_access_key", "AWS_SECRET_ACCESS_KEY"),
    "session_token": ("aws_session_token", "session_token", "token", "AWS_SESSION_TOKEN"),
    "region": ("aws_region", "region", "AWS_REGION", "AWS_DEFAULT_REGION"),
    "allow_http": ("allow_http", "aws_allow_http", "AWS_ALLOW_HTTP"),
}
"""DataFusion's ``AmazonS3`` arguments, and where each is found: the table's Lance-style
storage options first, then the standard environment variables (as obstore and Lance look)."""

_AZURE_OPTIONS = {
    "account": ("azure_storage_account_name", "account_name", "AZURE_STORAGE_ACCOUNT_NAME"),
    "access_key": (
        "azure_storage_account_key",
        "account_key",
        "access_key",
        "AZURE_STORAGE_ACCOUNT_KEY",
        "AZURE_STORAGE_ACCESS_KEY",
    ),
    "bearer_token": ("azure_storage_token", "bearer_token", "token", "AZURE_STORAGE_TOKEN"),
    "client_id": ("azure_client_id", "client_id", "AZURE_CLIENT_ID"),
    "client_secret": ("azure_client_secret", "client_secret", "AZURE_CLIENT_SECRET"),
    "tenant_id": ("azure_tenant_id", "tenant_id", "AZURE_TENANT_ID"),
    "use_emulator": ("azure_storage_use_emulator", "use_emulator", "AZURE_STORAGE_USE_EMULATOR"),
    "allow_http": ("allow_http", "azure_allow_http", "AZURE_ALLOW_HTTP"),
}
"""DataFusion's ``MicrosoftAzure`` arguments, found as :data:`_S3_OPTIONS` are (object_store's
names for them; an emulator's address comes from ``AZURITE_BLOB_STORAGE_URL``, as there)."""

_FLAGS = ("allow_http", "use_emulator")


def _arguments(path: storage.ObjectPath, names: dict[str, tuple[str, ...]]) -> dict[str, Any]:
    """The store's constructor arguments: each from the table's options, else from the
    environment; flags as booleans."""
    import os

    options = path.options
    found: dict[str, Any] = {}
    for argument, candidates in names.items():
        for name in candidates:
            value = options.get(name) if name.islower() else os.environ.get(name)
            if value is not None:
                found[argument] = value
                break
    for flag in _FLAGS:
        if flag in found:
            found[flag] = str(found[flag]).lower() in ("true", "1", "yes")
    return found


def register_store(context: datafusion.SessionContext, path: storage.ObjectPath) -> None:
    """Give ``context`` an object store for ``path``'s bucket (DataFusion reads the files
    a frame reads whole itself, and ``register_object_store`` is how its users reach one),
    made from the table's options. Once per context and bucket.

    Raises:
        EngineError: a store DataFusion cannot be given here (S3 and Azure are wired).
    """
    from datafusion.object_store import AmazonS3, MicrosoftAzure

    registered = _stores.setdefault(context, set())
    if (path.scheme, path.bucket) in registered:
        return
    store: Any
    if path.scheme == "s3":
        found = _arguments(path, _S3_OPTIONS)
        store = AmazonS3(bucket_name=path.bucket, **{"allow_http": False, **found})
    elif path.scheme == "az":
        _endpoint_from_environment(path)
        store = MicrosoftAzure(path.bucket, **_arguments(path, _AZURE_OPTIONS))
    else:
        raise EngineError(
            f"pruner gives DataFusion S3 and Azure (az://) stores only, not {path.scheme}:// "
            f"({path}); query it with engine='duckdb'"
        )
    context.register_object_store(f"{path.scheme}://", store, path.bucket)
    registered.add((path.scheme, path.bucket))


_AZURE_ENDPOINTS = ("azure_storage_endpoint", "azure_endpoint", "endpoint")
_AZURE_ENDPOINT_VARIABLES = ("AZURE_STORAGE_ENDPOINT", "AZURE_ENDPOINT")


def _endpoint_from_environment(path: storage.ObjectPath) -> None:
    """DataFusion's ``MicrosoftAzure`` takes no endpoint argument: it reads
    ``AZURE_STORAGE_ENDPOINT`` from the environment. A table whose options name another
    endpoint would be read from the wrong place, so it is refused.

    Raises:
        EngineError: the options' endpoint is not the environment's."""
    import os

    options = path.options
    given = next((options[name] for name in _AZURE_ENDPOINTS if name in options), None)
    if given is None:
        return
    environment = next((os.environ[n] for n in _AZURE_ENDPOINT_VARIABLES if n in os.environ), None)
    if environment is None or environment.rstrip("/") != given.rstrip("/"):
        raise EngineError(
            f"DataFusion reaches an Azure endpoint of its own only through the environment: "
            f"set AZURE_STORAGE_ENDPOINT to the endpoint in the storage options of {path} "
            "(and keep it there), or query it with engine='duckdb'"
        )


_stores: weakref.WeakKeyDictionary[datafusion.SessionContext, set[tuple[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def read_store(connection: duckdb.DuckDBPyConnection, table: Table) -> None:
    """Let DuckDB read ``table``'s files on its store itself (for the files a view reads).

    DuckDB 2.0's ``httpfs`` cannot be installed offline, so pruner registers an fsspec file
    system of its own (:class:`_StoreFiles`) that reads through :mod:`pruner.storage`:
    each file's size and time come from the table as opened (no request), and every read is
    a ranged GET conditional on the ETag the table was opened with, so a file replaced
    since fails the query instead of mixing into it. (obstore's own fsspec file system,
    registered the same way, made DuckDB fail with "Failed to read N bytes from Python file
    at offset 0: only 0 bytes returned" after some dozens of files, measured here.)"""
    if not isinstance(table.path, storage.ObjectPath):
        return
    scheme = table.path.scheme
    files = _STORE_FILES.get(scheme) or _STORE_FILES.setdefault(scheme, _StoreFiles(scheme))
    for file in (table.files or {}).values():
        assert isinstance(file.path, storage.ObjectPath)
        files.known[str(file.path)] = (file.path, file.as_opened())
    if files.protocol not in connection.list_filesystems():
        connection.register_filesystem(files)


class _StoreFiles(AbstractFileSystem):
    """The files on one kind of store (``s3``, ``az``, ...) of tables pruner bound, as an
    fsspec file system for DuckDB (:func:`read_store`)."""

    def __init__(self, scheme: str) -> None:
        super().__init__()
        self.protocol = scheme
        self.known: dict[str, tuple[storage.ObjectPath, storage.Stat]] = {}

    def _file(self, path: str) -> tuple[storage.ObjectPath, storage.Stat]:
        prefix = f"{self.protocol}://"
        uri = prefix + str(path).removeprefix(prefix)
        found = self.known.get(uri)
        if found is None:
            raise FileNotFoundError(f"{uri} is not a file of a table pruner bound")
        return found

    def _open(self, path: str, mode: str = "rb", **kwargs: Any) -> Any:
        location, known = self._file(path)
        return storage.object_reader(location, known)

    def info(self, path: str, **kwargs: Any) -> dict[str, Any]:
        _, known = self._file(path)
        return {"name": path, "size": known.size, "type": "file"}

    def modified(self, path: str) -> datetime.datetime:
        _, known = self._file(path)
        return datetime.datetime.fromtimestamp(known.mtime_ns / 1e9, datetime.UTC)


_STORE_FILES: dict[str, _StoreFiles] = {}
