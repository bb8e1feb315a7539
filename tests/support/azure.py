"""A real Azure Blob Storage server for the tests: Azurite, Microsoft's emulator (from the
npm registry, run by the machine's Node.js; ``make install`` puts it in
tests/support/azurite/), in memory on a free port of 127.0.0.1, started once per test run,
a fresh container per test. It stands to ``az://`` as moto's server (tests/support/s3.py)
stands to ``s3://``, with the same methods.

Clients reach it as users reach an Azure account: object_store's options (what
:attr:`AzuriteServer.options` gives: account, key, endpoint), or the standard ``AZURE_*``
environment variables (:meth:`AzuriteServer.environment`).
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

ACCOUNT = "devstoreaccount1"
# Azurite's one account and its published key (the emulator's documented default, not a secret)
KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
PROGRAM = Path(__file__).parent / "azurite" / "node_modules" / ".bin" / "azurite-blob"
_LISTENING = re.compile(r"listens on (http://127\.0\.0\.1:\d+)")


class AzuriteServer:
    """Azurite's blob service on a free port of 127.0.0.1, its data in memory."""

    scheme = "az"

    def __init__(self) -> None:
        if not PROGRAM.exists():
            raise RuntimeError(f"{PROGRAM} is missing: run `make install` (npm ci installs it)")
        self._log = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 (closed by stop())
        self._process = subprocess.Popen(
            [
                str(PROGRAM),
                "--inMemoryPersistence",
                "--extentMemoryLimit",
                "4096",
                "--blobHost",
                "127.0.0.1",
                "--blobPort",
                "0",
                "--skipApiVersionCheck",
                "--disableTelemetry",
            ],
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + 60
        while True:
            self._log.seek(0)
            said = self._log.read()
            found = _LISTENING.search(said)
            if found:
                self.url = found.group(1)
                break
            if self._process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"Azurite did not start listening:\n{said}")
            time.sleep(0.05)
        self.endpoint = f"{self.url}/{ACCOUNT}"
        self._names = itertools.count()

    @property
    def options(self) -> dict[str, str]:
        """object_store's (and Lance's) storage options for this server."""
        return {
            "account_name": ACCOUNT,
            "account_key": KEY,
            "endpoint": self.endpoint,
            "allow_http": "true",
        }

    def environment(self) -> dict[str, str]:
        """The ``AZURE_*`` variables that point a client at this server."""
        return {
            "AZURE_STORAGE_ACCOUNT_NAME": ACCOUNT,
            "AZURE_STORAGE_ACCOUNT_KEY": KEY,
            "AZURE_STORAGE_ENDPOINT": self.endpoint,
            "AZURE_ALLOW_HTTP": "true",
        }

    def client(self) -> Any:
        """An azure-storage-blob service client of the server (to make containers and
        inspect blobs)."""
        from azure.storage.blob import BlobServiceClient

        return BlobServiceClient.from_connection_string(
            f"DefaultEndpointsProtocol=http;AccountName={ACCOUNT};AccountKey={KEY};"
            f"BlobEndpoint={self.endpoint};"
        )

    def new_bucket(self) -> str:
        """A new container (Azure's bucket: 3 to 63 lowercase letters, digits and dashes)."""
        name = f"c{os.getpid()}-{next(self._names)}"
        self.client().create_container(name)
        return name

    def upload(self, local: Path, uri: str) -> None:
        """Copy the file or folder ``local`` to ``uri`` (``az://container/key``)."""
        container, _, key = uri.removeprefix("az://").partition("/")
        client = self.client().get_container_client(container)
        files = [local] if local.is_file() else sorted(p for p in local.rglob("*") if p.is_file())
        for file in files:
            name = key if local.is_file() else f"{key}/{file.relative_to(local).as_posix()}"
            with file.open("rb") as data:
                client.upload_blob(name, data, overwrite=True)

    def keys(self, uri: str) -> list[str]:
        """Every blob name under ``uri`` (relative to it), sorted."""
        container, _, key = uri.removeprefix("az://").partition("/")
        prefix = key.rstrip("/") + "/" if key else ""
        client = self.client().get_container_client(container)
        return sorted(b.name[len(prefix) :] for b in client.list_blobs(name_starts_with=prefix))

    def stop(self) -> None:
        with contextlib.suppress(Exception):
            self._process.terminate()
            self._process.wait(10)
        self._log.close()
