"""The object store DataFusion reads a table's files from: pruner gives a SessionContext
one ``AmazonS3`` store per bucket, made from the table's Lance-style storage options or the
standard ``AWS_*`` environment variables (DataFusion reads the files a frame reads whole
itself, and ``register_object_store`` is how its users reach a store)."""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING

from pruner import storage
from pruner.errors import EngineError

if TYPE_CHECKING:  # the adapter imports DataFusion, naming the extra when it is missing
    import datafusion

__all__ = ["register_store"]


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
