"""How an engine reads a table's files on an object store itself.

- DataFusion (:func:`register_store`): pruner gives a SessionContext one ``AmazonS3`` store
  per bucket, made from the table's Lance-style storage options or the standard ``AWS_*``
  environment variables (DataFusion reads the files a frame reads whole itself, and
  ``register_object_store`` is how its users reach a store).
- DuckDB (:func:`read_store`): an fsspec file system of pruner's own, reading through
  :mod:`pruner.storage`.
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


def register_store(context: datafusion.SessionContext, path: storage.ObjectPath) -> None:
    """Give ``context`` an object store for ``path``'s bucket (DataFusion reads the files
    a frame reads whole itself, and ``register_object_store`` is how its users reach one),
    made from the table's options. Once per context and bucket.

    Raises:
        EngineError: a store DataFusion cannot be given here (only S3 is wired).
    """
    import os

    from datafusion.object_store import AmazonS3

    registered = _stores.setdefault(context, set())
    if path.bucket in registered:
        return
    if path.scheme != "s3":
        raise EngineError(
            f"pruner gives DataFusion S3 stores only, not {path.scheme}:// ({path}); query it "
            "with engine='duckdb'"
        )
    options = path.options
    found: dict[str, str] = {}
    for argument, names in _S3_OPTIONS.items():
        for name in names:
            value = options.get(name) if name.islower() else os.environ.get(name)
            if value is not None:
                found[argument] = value
                break
    allow_http = str(found.pop("allow_http", "false")).lower() in ("true", "1", "yes")
    store = AmazonS3(bucket_name=path.bucket, allow_http=allow_http, **found)
    context.register_object_store("s3://", store, path.bucket)
    registered.add(path.bucket)


_stores: weakref.WeakKeyDictionary[datafusion.SessionContext, set[str]] = (
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
    if table.path.scheme != "s3":
        raise EngineError(
            f"pruner gives DuckDB S3 stores only, not {table.path.scheme}:// ({table.path}); "
            "query it with engine='datafusion' (S3 too) or copy it to S3"
        )
    for file in (table.files or {}).values():
        assert isinstance(file.path, storage.ObjectPath)
        _STORE_FILES.known[str(file.path)] = (file.path, file.as_opened())
    if _STORE_FILES.protocol not in connection.list_filesystems():
        connection.register_filesystem(_STORE_FILES)


class _StoreFiles(AbstractFileSystem):
    """The files of tables on S3 that pruner bound, as an fsspec file system for DuckDB
    (:func:`read_store`)."""

    protocol = "s3"

    def __init__(self) -> None:
        super().__init__()
        self.known: dict[str, tuple[storage.ObjectPath, storage.Stat]] = {}

    def _file(self, path: str) -> tuple[storage.ObjectPath, storage.Stat]:
        uri = "s3://" + str(path).removeprefix("s3://")
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


_STORE_FILES = _StoreFiles()
