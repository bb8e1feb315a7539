"""One request to a store: the count of requests and bytes (explain reports them), its
errors (scrubbed of anything that could carry a credential), and what it says of an object
(:class:`Stat`)."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pruner.storage.paths import ObjectPath


class Requests:
    """Requests made to object stores, and the bytes they read, in this process (explain
    reports the difference over a query)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0
        self.bytes_read = 0

    def add(self, count: int, bytes_read: int) -> None:
        with self._lock:
            self.count += count
            self.bytes_read += bytes_read

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.count, self.bytes_read


requests = Requests()


def _object_error(path: ObjectPath, err: Exception) -> OSError:
    """A store's error as an OSError naming the object and what the store said, scrubbed:
    obstore's message carries the server's reply body, which on AWS can echo the access key
    id (``InvalidAccessKeyId``), so only its status line is kept, any option value is
    masked, and the error is raised without obstore's as its cause."""
    if isinstance(err, FileNotFoundError):
        return FileNotFoundError(f"{path} does not exist on its store")
    return OSError(f"{path}: the object store refused: {scrub(str(err), path)}")


def scrub(text: str, path: ObjectPath | None = None) -> str:
    """``text`` (a store's error) without what could carry a credential: its first line up
    to any reply body, with the values of ``path``'s options masked."""
    line = text.split("\n", 1)[0]
    line = re.split(r":\s*<\?xml|:\s*<Error>|:\s*\{", line, maxsplit=1)[0]
    for _, value in path._options if path is not None else ():
        if len(value) >= 6:
            line = line.replace(value, "***")
    return line[:300]


def _call(path: ObjectPath, operation: Any, *args: Any, **kwargs: Any) -> Any:
    try:
        return operation(path._store, *args, **kwargs)
    except (FileNotFoundError, OSError) as err:
        raise _object_error(path, err) from None
    except Exception as err:  # obstore's GenericError and friends
        if type(err).__module__.startswith("obstore"):
            raise _object_error(path, err) from None
        raise


@dataclass(frozen=True, slots=True)
class Stat:
    """What the store says of a file without reading it: locally its size, times and inode;
    on an object store its size, last-modified time and ETag (and version, where the store
    keeps versions)."""

    size: int
    mtime_ns: int
    inode: int = 0
    device: int = 0
    ctime_ns: int = 0
    etag: str = ""
    version: str = ""

    @classmethod
    def of(cls, result: os.stat_result) -> Stat:
        return cls(
            result.st_size, result.st_mtime_ns, result.st_ino, result.st_dev, result.st_ctime_ns
        )

    @classmethod
    def of_object(cls, meta: Mapping[str, Any]) -> Stat:
        modified = meta.get("last_modified")
        mtime = int(modified.timestamp() * 1e9) if modified is not None else 0
        return cls(
            int(meta["size"]),
            mtime,
            etag=meta.get("e_tag") or "",
            version=meta.get("version") or "",
        )


class ChangedUnderneath(OSError):
    """A conditional :func:`publish` found the target not as the writer expected: another
    writer created or replaced it first."""


ABSENT = Stat(-1, -1)
"""``expected`` for :func:`publish`: the target must not exist (create-if-absent)."""
