"""A real S3-compatible server for the tests: moto's server mode on 127.0.0.1 (no mock of
any client), started once per test run, a fresh bucket per test.

Clients reach it the way users reach a store: Lance-style ``storage_options`` (what
:attr:`S3Server.options` gives), or the standard ``AWS_*`` environment variables
(:meth:`S3Server.environment`).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

KEY_ID = "testing"
SECRET = "testing"
REGION = "us-east-1"


class S3Server:
    """moto's S3 server on a free port of 127.0.0.1."""

    scheme = "s3"

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request else
        self._server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
        self._server.start()
        host, port = self._server.get_host_and_port()
        self.endpoint = f"http://{host}:{port}"
        self._names = itertools.count()

    @property
    def options(self) -> dict[str, str]:
        """Lance-style storage options for this server."""
        return {
            "aws_endpoint": self.endpoint,
            "aws_access_key_id": KEY_ID,
            "aws_secret_access_key": SECRET,
            "aws_region": REGION,
            "allow_http": "true",
        }

    def environment(self) -> dict[str, str]:
        """The ``AWS_*`` variables that point a client at this server."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": KEY_ID,
            "AWS_SECRET_ACCESS_KEY": SECRET,
            "AWS_REGION": REGION,
            "AWS_ALLOW_HTTP": "true",
        }

    def client(self) -> Any:
        """A boto3 client of the server (to make buckets and inspect objects)."""
        import boto3

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint,
            aws_access_key_id=KEY_ID,
            aws_secret_access_key=SECRET,
            region_name=REGION,
        )

    def new_bucket(self) -> str:
        name = f"bucket-{os.getpid()}-{next(self._names)}"
        self.client().create_bucket(Bucket=name)
        return name

    def upload(self, local: Path, uri: str) -> None:
        """Copy the file or folder ``local`` to ``uri`` (``s3://bucket/key``)."""
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        client = self.client()
        files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
        for file in files:
            name = key if local.is_file() else f"{key}/{file.relative_to(local).as_posix()}"
            client.upload_file(str(file), bucket, name)

    def keys(self, uri: str) -> list[str]:
        """Every key under ``uri`` (relative to it), sorted."""
        bucket, _, key = uri.removeprefix("s3://").partition("/")
        prefix = key.rstrip("/") + "/" if key else ""
        found = []
        for page in (
            self.client().get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
        ):
            found += [item["Key"][len(prefix) :] for item in page.get("Contents", [])]
        return sorted(found)

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._server.stop()


@contextlib.contextmanager
def environment(variables: dict[str, str]) -> Iterator[None]:
    """``os.environ`` with ``variables`` set, restored after."""
    before = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def duckdb_over_store(options: dict[str, str], uris: list[str], sql: str) -> Any:
    """``sql`` run by DuckDB alone over the view ``t`` of the Parquet objects ``uris`` (on S3,
    or on Azure with :class:`tests.support.azure.AzuriteServer`'s options), read
    through obstore's fsspec file system (as a DuckDB user without httpfs reads a store),
    as an Arrow table.

    That file system now and then hands DuckDB no bytes for a read ("only 0 bytes
    returned"; why pruner gives DuckDB its own): the judge then asks again, at most twice,
    on a new connection and file system. Any other error is raised."""
    import duckdb
    from obstore.fsspec import FsspecStore

    config = {k: v for k, v in options.items() if k != "allow_http"}
    named = ", ".join(f"'{uri}'" for uri in uris)
    scheme = uris[0].partition("://")[0] if uris else "s3"
    for attempt in range(3):
        con = duckdb.connect()
        make: Any = FsspecStore
        con.register_filesystem(make(scheme, config=config, client_options={"allow_http": True}))
        con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{named}])")
        try:
            return con.sql(sql).to_arrow_table()
        except duckdb.IOException as err:
            if "bytes returned" not in str(err) or attempt == 2:
                raise
    raise AssertionError("unreachable")
