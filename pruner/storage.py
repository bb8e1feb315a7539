"""The one I/O seam: every byte of a table or an index that pruner reads, lists or writes.

Reading a Parquet footer, a row group, an index file or a hierarchy companion; listing a
table's files or an index folder; stating a file for its identity; writing an index and
publishing it atomically: all of it goes through this module, and nothing else in pruner
calls ``open``, ``os.stat``, ``os.walk`` or ``os.replace`` on table or index files
(``tests/index/test_storage.py`` checks). Two stores sit behind it: the local file system,
and object stores (S3 and what speaks its protocol, GCS, Azure) through obstore, the Python
binding of arrow-rs ``object_store`` (what Lance and DataFusion read stores with). A location
on a store is an :class:`ObjectPath` (``s3://bucket/key``, made by :func:`location`), which
behaves as a ``pathlib.Path`` for what pruner does with paths (``/``, ``name``, ``parent``)
and carries the store's options; every function here takes either. The operations are those
object stores offer:

- :class:`RangeFile`: an open file read by offset (``pread``; a ranged GET), many ranges per
  open; :func:`read_tail`: the end of a file and its :class:`Stat` in one read (a
  suffix-range GET);
- :func:`stat`: size, modification time and inode locally, size, time and ETag on a store;
- :func:`walk_files` / :func:`list_dir` / :func:`list_stats`: what a folder holds (one LIST
  on a store);
- :class:`NewFile` and :func:`publish`: a file written to a local temporary path, then made
  the target in one step: renamed over it locally, one PUT on a store (a reader sees the old
  object or the new one), conditional when the caller says what it expects there
  (create-if-absent, or compare-and-swap on the ETag it read).

Why obstore: it is the one library here that does what a store-aware reader needs in one
request each (FACTS §5: a suffix-range GET with the object's ETag, conditional PUTs, ETags
on LIST and HEAD), with the option names Lance takes (``aws_endpoint``, ``allow_http``...).
pyarrow's S3 file system sends a HEAD before every read and reports no ETag; s3fs sends
``If-Match`` on every read and reads ahead to the end of a file.

Credentials live only in an :class:`ObjectPath`'s options and the clients made from them:
an ObjectPath prints, compares and pickles for a log without them (:meth:`ObjectPath.__str__`),
and errors from a store are re-raised with the location, never the options.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeAlias

import pyarrow as pa

PathLike: TypeAlias = "str | os.PathLike[str] | ObjectPath"
"""Where a file or folder is: a local path (str or os.PathLike) or an ObjectPath."""
Location: TypeAlias = "Path | ObjectPath"
"""A resolved location (what :func:`location` returns)."""

__all__ = [
    "ABSENT",
    "CLIENT_OPTIONS",
    "STORE_SCHEMES",
    "ChangedUnderneath",
    "Listing",
    "Location",
    "NewFile",
    "ObjectPath",
    "PathLike",
    "RangeFile",
    "Requests",
    "Stat",
    "arrow_input",
    "arrow_output",
    "current_listing",
    "dataset_location",
    "exists",
    "gather",
    "input_stat",
    "is_dir",
    "is_file",
    "is_remote",
    "lance_options",
    "list_dir",
    "list_stats",
    "listed",
    "listing",
    "local_copy",
    "location",
    "make_dirs",
    "memory_map",
    "object_reader",
    "publish",
    "read_range",
    "read_tail",
    "remove",
    "remove_empty_dir",
    "remove_tree",
    "requests",
    "scrub",
    "stat",
    "temporary_for",
    "walk_files",
]

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
        return str(self)

    def exists(self) -> bool:
        return exists(self)

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


class Listing:
    """Every object under a folder of a store, from one LIST: while it is :func:`listed`,
    what is asked of a location under the folder (its stat, whether it is a file or a
    folder, what a folder holds) is answered from it instead of a request each.

    Opening a table asks a dozen such questions (is it a Lance dataset, a Delta table, which
    Parquet files, which index files and their sizes): on a store each is a round trip of
    10-100 ms, where the one LIST that says the table's signature answers them all."""

    def __init__(self, root: ObjectPath, objects: Mapping[str, Stat]) -> None:
        self.root = root
        self.objects = dict(objects)  # key relative to root -> Stat

    def relative(self, path: object) -> str | None:
        """``path``'s key relative to the root, when the listing covers it ('' for the
        root itself); None when it does not."""
        if not isinstance(path, ObjectPath) or path.bucket != self.root.bucket:
            return None
        if path.scheme != self.root.scheme or path._options != self.root._options:
            return None
        if path.key == self.root.key:
            return ""
        prefix = self.root.key + "/" if self.root.key else ""
        return path.key[len(prefix) :] if path.key.startswith(prefix) else None

    def under(self, relative: str) -> Iterator[tuple[str, Stat]]:
        """The objects under the folder ``relative`` ('' the root), keys relative to it."""
        prefix = relative + "/" if relative else ""
        for key, found in self.objects.items():
            if key.startswith(prefix):
                yield key[len(prefix) :], found


def listing(root: ObjectPath) -> Listing:
    """Every object under the folder ``root``, from one LIST (a page per 1,000 objects)."""
    return Listing(root, dict(_walk_objects(root, ())))


_listed = threading.local()


@contextlib.contextmanager
def listed(found: Listing | None) -> Iterator[None]:
    """Answer questions about locations under ``found.root`` from ``found`` in this thread
    while the block runs (nothing changes when ``found`` is None)."""
    stack = _listed.__dict__.setdefault("stack", [])
    if found is not None:
        stack.append(found)
    try:
        yield
    finally:
        if found is not None:
            stack.pop()


def current_listing(path: object) -> Listing | None:
    """The :func:`listed` listing of exactly the folder ``path`` in this thread, if any."""
    covered = _covering(path)
    return covered[0] if covered is not None and covered[1] == "" else None


def _covering(path: object) -> tuple[Listing, str] | None:
    for found in reversed(getattr(_listed, "stack", ())):
        relative = found.relative(path)
        if relative is not None:
            return found, relative
    return None


def stat(path: PathLike) -> Stat:
    """The file's :class:`Stat` (one HEAD on a store, unless a :func:`listed` listing
    covers it).

    Raises:
        OSError: the file cannot be stated (FileNotFoundError when it is gone).
    """
    if isinstance(path, ObjectPath):
        import obstore

        covered = _covering(path)
        if covered is not None and covered[1]:
            found = covered[0].objects.get(covered[1])
            if found is None:
                raise FileNotFoundError(f"{path} does not exist on its store")
            return found
        requests.add(1, 0)
        return Stat.of_object(_call(path, obstore.head, path.key))
    return Stat.of(os.stat(path))


def exists(path: PathLike) -> bool:
    if isinstance(path, ObjectPath):
        return is_file(path) or is_dir(path)
    return os.path.exists(path)


def is_dir(path: PathLike) -> bool:
    """Locally a folder; on a store, a prefix some object's key starts with (``key/``)."""
    if isinstance(path, ObjectPath):
        import obstore

        covered = _covering(path)
        if covered is not None:
            return any(True for _ in covered[0].under(covered[1]))
        requests.add(1, 0)
        prefix = path.key + "/" if path.key else ""
        stream = _call(path, obstore.list, prefix, chunk_size=1)
        try:
            return any(True for chunk in stream for _ in chunk)
        except Exception as err:
            raise _object_error(path, err) from None
    return os.path.isdir(path)


def is_file(path: PathLike) -> bool:
    if isinstance(path, ObjectPath):
        try:
            stat(path)
        except FileNotFoundError:
            return False
        return True
    return os.path.isfile(path)


def list_dir(path: PathLike) -> list[str]:
    """The names in the folder ``path`` (files and folders, unsorted; one LIST on a store).

    Raises:
        OSError: not a folder, or unreadable.
    """
    if isinstance(path, ObjectPath):
        import obstore

        covered = _covering(path)
        if covered is not None:
            names = list({key.split("/", 1)[0] for key, _ in covered[0].under(covered[1])})
        else:
            requests.add(1, 0)
            prefix = path.key + "/" if path.key else ""
            found = _call(path, obstore.list_with_delimiter, prefix or None)
            names = [p.rstrip("/").rsplit("/", 1)[-1] for p in found["common_prefixes"]]
            names += [o["path"].rsplit("/", 1)[-1] for o in found["objects"]]
        if not names:
            raise FileNotFoundError(f"{path} holds nothing on its store")
        return names
    return os.listdir(path)


def list_stats(directory: PathLike, hidden: tuple[str, ...] = ("_", ".")) -> dict[str, Stat]:
    """:func:`walk_files` with each file's :class:`Stat`: on a store one LIST (ETags
    included), not a HEAD per file."""
    if isinstance(directory, ObjectPath):
        return dict(_walk_objects(directory, hidden))
    return {name: stat(Path(directory) / name) for name in walk_files(directory, hidden)}


def _walk_objects(directory: ObjectPath, hidden: tuple[str, ...]) -> Iterator[tuple[str, Stat]]:
    import obstore

    covered = _covering(directory)
    if covered is not None:
        for relative, found in sorted(covered[0].under(covered[1])):
            if not any(part.startswith(hidden) for part in relative.split("/")):
                yield relative, found
        return
    prefix = directory.key + "/" if directory.key else ""
    pages = 0
    try:
        for chunk in _call(directory, obstore.list, prefix or None):
            pages += 1
            for meta in chunk:
                relative = meta["path"][len(prefix) :]
                if any(part.startswith(hidden) for part in relative.split("/")):
                    continue
                yield relative, Stat.of_object(meta)
    except OSError:
        raise
    except Exception as err:
        raise _object_error(directory, err) from None
    finally:
        requests.add(max(1, pages), 0)


def walk_files(directory: PathLike, hidden: tuple[str, ...] = ("_", ".")) -> list[str]:
    """Paths (``/``-separated, relative, sorted) of the files under ``directory`` outside
    folders whose names start with ``hidden`` and not named so themselves."""
    if isinstance(directory, ObjectPath):
        return sorted(name for name, _ in _walk_objects(directory, hidden))
    directory = Path(directory)
    found: list[str] = []
    for folder, folders, files in os.walk(directory):
        folders[:] = [f for f in folders if not f.startswith(hidden)]
        relative = Path(folder).relative_to(directory).as_posix()
        prefix = "" if relative == "." else relative + "/"
        found.extend(prefix + name for name in files if not name.startswith(hidden))
    return sorted(found)


class RangeFile:
    """A file open for reads by offset: each :meth:`read` is one positioned read (no shared
    position, so threads may read one RangeFile at once); on a store, one ranged GET.

    Raises:
        OSError: the file cannot be opened (locally; on a store the first read says so).
    """

    def __init__(self, path: PathLike, known: Stat | None = None) -> None:
        self._fd = -1
        self._stat = known
        if isinstance(path, ObjectPath):
            self.path: Path | ObjectPath = path
            return
        self.path = Path(path)
        self._fd = os.open(path, os.O_RDONLY)

    def file_stat(self) -> Stat:
        """The open file's :class:`Stat` (the file read, even if renamed or replaced since;
        on a store, as it was when first stated)."""
        if isinstance(self.path, ObjectPath):
            if self._stat is None:
                self._stat = stat(self.path)
            return self._stat
        return Stat.of(os.fstat(self._fd))

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset`` (fewer only at the end of the file)."""
        if isinstance(self.path, ObjectPath):
            return self.read_ranges([(offset, length)])[0]
        return os.pread(self._fd, length, offset)

    def read_ranges(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """The bytes of each ``(offset, length)``: on a store in one call, which coalesces
        neighbouring ranges and sends the rest in parallel."""
        if not isinstance(self.path, ObjectPath):
            return [os.pread(self._fd, length, offset) for offset, length in ranges]
        import obstore

        known = self.file_stat()
        clamped = [(min(o, known.size), min(o + n, known.size)) for o, n in ranges]
        merged = _coalesced([(start, end) for start, end in clamped if end > start])
        path = self.path

        def get(span: tuple[int, int]) -> bytes:
            # If-Match: bytes of the object as stated, or an error; never another version's
            options: Any = {"range": (span[0], span[1])}
            if known.etag:
                options["if_match"] = known.etag
            try:
                result = obstore.get(path._store, path.key, options=options)
                data = bytes(result.bytes())
            except Exception as err:
                if type(err).__name__ == "PreconditionError":
                    raise ChangedUnderneath(
                        f"{path} was replaced on its store while pruner read it (its ETag is "
                        "no longer the one read); run again"
                    ) from None
                raise _object_error(path, err) from None
            requests.add(1, len(data))
            return data

        if len(merged) > 1:
            fetched = list(_FETCHERS.map(get, merged))
        else:
            fetched = [get(span) for span in merged]
        found = []
        for start, end in clamped:
            if end <= start:
                found.append(b"")
                continue
            for (span_start, span_end), data in zip(merged, fetched, strict=True):
                if span_start <= start and end <= span_end:
                    found.append(data[start - span_start : end - span_start])
                    break
        return found

    def read_into(self, buffer: Any, offset: int) -> int:
        """Fill the writable ``buffer`` from ``offset``; the bytes read."""
        if isinstance(self.path, ObjectPath):
            view = memoryview(buffer).cast("B")
            data = self.read(offset, len(view))
            view[: len(data)] = data
            return len(data)
        return os.preadv(self._fd, [buffer], offset)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)

    def __enter__(self) -> RangeFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __del__(self) -> None:
        self.close()


_COALESCE_GAP = 1 << 20
"""Ranges of one object less than this apart are read in one request (object_store's
``get_ranges`` joins them the same way): a round trip costs more than the bytes between."""

_FETCHERS = ThreadPoolExecutor(16, thread_name_prefix="pruner-object-get")

_ASKERS = ThreadPoolExecutor(8, thread_name_prefix="pruner-object-ask")


def gather(calls: list[Any]) -> list[Any]:
    """The results of ``calls`` (functions of no argument, each a request or a few to a
    store), run side by side: independent requests cost one round trip together. Any
    exception of a call is raised."""
    if len(calls) <= 1:
        return [call() for call in calls]
    stack = list(getattr(_listed, "stack", ()))  # the caller's listings hold for the calls

    def run(call: Any) -> Any:
        _listed.stack = list(stack)
        try:
            return call()
        finally:
            _listed.stack = []

    return list(_ASKERS.map(run, calls))


"""Sends the requests of one :meth:`RangeFile.read_ranges` side by side (obstore releases
the GIL while it waits): a read of several ranges costs one round trip, not one each."""


def _coalesced(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + _COALESCE_GAP:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def read_range(path: PathLike, offset: int, length: int) -> bytes:
    """``length`` bytes of the file at ``path`` from ``offset`` (fewer at its end)."""
    with RangeFile(path) as handle:
        return handle.read(offset, length)


def read_tail(path: PathLike, length: int) -> tuple[bytes, Stat]:
    """The last ``length`` bytes of the file (all of it when shorter) and its :class:`Stat`,
    from one open and read locally, one suffix-range GET on a store (whose reply carries the
    object's size and ETag).

    Raises:
        OSError: the file cannot be read (FileNotFoundError when it is gone).
    """
    if isinstance(path, ObjectPath):
        import obstore

        result = _call(path, obstore.get, path.key, options={"range": {"suffix": length}})
        try:
            data = bytes(result.bytes())
        except Exception as err:
            raise _object_error(path, err) from None
        requests.add(1, len(data))
        return data, Stat.of_object(result.meta)
    with RangeFile(path) as handle:
        found = handle.file_stat()
        start = max(0, found.size - length)
        return handle.read(start, found.size - start), found


class _ObjectInput:
    """An object read as a file by pyarrow (``pa.PythonFile``): the ranges pyarrow asks for
    come from those fetched ahead in one :meth:`RangeFile.read_ranges` where they can, else
    one ranged GET each."""

    def __init__(self, path: ObjectPath, known: Stat | None) -> None:
        self._file = RangeFile(path, known)
        self.stat = self._file.file_stat()
        self._position = 0
        self._cached: list[tuple[int, bytes]] = []
        self.closed = False

    def prefetch(self, ranges: list[tuple[int, int]]) -> None:
        merged = _coalesced([(o, o + n) for o, n in ranges])
        parts = self._file.read_ranges([(start, end - start) for start, end in merged])
        self._cached = [(start, data) for (start, _), data in zip(merged, parts, strict=True)]

    def seek(self, offset: int, whence: int = 0) -> int:
        base = {0: 0, 1: self._position, 2: self.stat.size}[whence]
        self._position = base + offset
        return self._position

    def tell(self) -> int:
        return self._position

    def size(self) -> int:
        return self.stat.size

    def read(self, length: int = -1) -> bytes:
        if length < 0:
            length = self.stat.size - self._position
        start = self._position
        for cached_start, data in self._cached:
            if cached_start <= start and start + length <= cached_start + len(data):
                self._position += length
                return data[start - cached_start : start - cached_start + length]
        data = self._file.read(start, length)
        self._position += len(data)
        return data

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True


def object_reader(path: ObjectPath, known: Stat | None = None) -> Any:
    """A readable, seekable file object over the object at ``path`` (for a library that
    reads Python files): each read one ranged GET, conditional on the ETag of ``known``
    (its stat as read before: no HEAD then)."""
    return _ObjectInput(path, known)


class _ObjectFile(pa.PythonFile):
    """pyarrow's file over an :class:`_ObjectInput`, knowing the object's :class:`Stat`."""

    pruner_stat: Stat


def arrow_input(
    path: PathLike, prefetch: list[tuple[int, int]] | None = None, known: Stat | None = None
) -> pa.NativeFile:
    """The file as a pyarrow input (for ``pq.ParquetReader.open``); close it when done.

    On a store, ``prefetch`` (``(offset, length)`` ranges: the column chunks a read will
    want) are fetched at once, coalesced and in parallel; ``known`` (the object's stat, as
    a listing or an earlier read gave it) saves the HEAD that finds its size."""
    if isinstance(path, ObjectPath):
        reader = _ObjectInput(path, known)
        if prefetch:
            reader.prefetch(prefetch)
        handle = _ObjectFile(reader, mode="r")
        handle.pruner_stat = reader.stat
        return handle
    return pa.OSFile(str(path))


def input_stat(handle: pa.NativeFile) -> Stat:
    """The :class:`Stat` of the file an :func:`arrow_input` reads."""
    known = getattr(handle, "pruner_stat", None)
    if known is not None:
        return known
    return Stat.of(os.fstat(handle.fileno()))


def arrow_output(path: PathLike) -> pa.NativeFile:
    """A new local file at ``path`` for pyarrow's writers (``pq.write_table``); close it
    when done, then :func:`publish` it (to a store, if its target is there)."""
    return pa.OSFile(str(_local(path)), "wb")


def memory_map(path: PathLike) -> pa.NativeFile:
    """The file mapped for pyarrow's readers (an IPC or Parquet file read whole; on a store,
    read into memory)."""
    if isinstance(path, ObjectPath):
        import obstore

        result = _call(path, obstore.get, path.key)
        data = bytes(result.bytes())
        requests.add(1, len(data))
        return pa.BufferReader(data)
    return pa.memory_map(str(path))


@contextlib.contextmanager
def local_copy(path: PathLike) -> Iterator[Path]:
    """``path`` as a local file for a library that reads only local files (a local path as
    it is; an object downloaded whole, in one GET, to a temporary file removed after).

    pylance's ``LanceFileReader`` over ``s3://`` hung in ``read_global_buffer`` (pylance
    14.0.2 against moto), so pruner's full reads of an index file on a store go through a
    local copy; its probes read the companion by ranges instead.

    Raises:
        OSError: the object cannot be read.
    """
    if not isinstance(path, ObjectPath):
        yield Path(path)
        return
    import obstore

    result = _call(path, obstore.get, path.key)
    try:
        data = bytes(result.bytes())
    except Exception as err:
        raise _object_error(path, err) from None
    requests.add(1, len(data))
    handle, name = tempfile.mkstemp(prefix="pruner-", suffix="-" + path.name)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
        yield Path(name)
    finally:
        Path(name).unlink(missing_ok=True)


def temporary_for(target: PathLike, name: str) -> Path:
    """Where a writer puts the complete new file ``name`` (a name no other writer uses)
    before :func:`publish` makes it ``target``: beside the target locally (a rename is then
    one step), in the local temporary folder for a target on a store (the PUT is the one
    step)."""
    if isinstance(target, ObjectPath):
        return Path(tempfile.gettempdir()) / name
    return Path(target).with_name(name)


def _local(path: PathLike) -> Path:
    if isinstance(path, ObjectPath):
        raise TypeError(f"{path} is on an object store: write a local temporary file")
    return Path(path)


class NewFile:
    """A local file created for writing by offset (it must not exist), to be
    :func:`publish`-ed over its target once complete.

    Raises:
        OSError: it exists already, or cannot be created.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = _local(path)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)

    def write_at(self, data: Any, offset: int) -> int:
        """Write (part of) ``data`` at ``offset``; the bytes written."""
        return os.pwrite(self._fd, data, offset)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


class ChangedUnderneath(OSError):
    """A conditional :func:`publish` found the target not as the writer expected: another
    writer created or replaced it first."""


ABSENT = Stat(-1, -1)
"""``expected`` for :func:`publish`: the target must not exist (create-if-absent)."""


def publish(temporary: PathLike, target: PathLike, expected: Stat | None = None) -> None:
    """Make the complete local file ``temporary`` the file at ``target`` in one step: a
    reader sees the old file or the new one, never a part. Locally a rename; on a store one
    PUT (multipart for a large file, which the store makes visible only when complete), then
    ``temporary`` is removed.

    ``expected`` makes the PUT conditional on a store: :data:`ABSENT` (create-if-absent), or
    the :class:`Stat` of the object as the writer read it (compare-and-swap on its ETag).

    Raises:
        ChangedUnderneath: the condition failed: another writer got there first.
    """
    source = _local(temporary)
    if not isinstance(target, ObjectPath):
        os.replace(source, target)
        return
    import obstore

    mode: Any = "overwrite"
    if expected is ABSENT:
        mode = "create"
    elif expected is not None and expected.etag:
        mode = {"e_tag": expected.etag}
    try:
        with open(source, "rb") as data:
            obstore.put(target._store, target.key, data, mode=mode)
        requests.add(1, 0)
    except FileExistsError:
        raise ChangedUnderneath(f"{target} was created by another writer first") from None
    except Exception as err:
        if type(err).__name__ in ("PreconditionError", "AlreadyExistsError"):
            raise ChangedUnderneath(f"{target} was changed by another writer first") from None
        if type(err).__module__.startswith("obstore"):
            raise _object_error(target, err) from None
        raise
    finally:
        source.unlink(missing_ok=True)


def make_dirs(path: PathLike, exist_ok: bool = True) -> None:
    """The folder ``path`` and its parents, where missing (nothing on a store: a key's
    prefix exists while an object has it).

    Raises:
        FileExistsError: ``path`` exists and ``exist_ok`` is False.
    """
    if isinstance(path, ObjectPath):
        return
    Path(path).mkdir(parents=True, exist_ok=exist_ok)


def remove(path: PathLike) -> None:
    """Remove the file at ``path``, if there is one."""
    if isinstance(path, ObjectPath):
        import obstore

        requests.add(1, 0)
        with contextlib.suppress(FileNotFoundError):
            _call(path, obstore.delete, path.key)
        return
    Path(path).unlink(missing_ok=True)


def remove_tree(path: PathLike) -> None:
    """Remove the folder ``path`` and all it holds, as far as possible."""
    if isinstance(path, ObjectPath):
        with contextlib.suppress(OSError):
            for name, _ in list(_walk_objects(path, ())):
                remove(path / name)
        return
    shutil.rmtree(path, ignore_errors=True)


def remove_empty_dir(path: PathLike) -> None:
    """Remove the folder ``path`` if it is empty (else leave it; nothing to do on a
    store)."""
    if isinstance(path, ObjectPath):
        return
    with contextlib.suppress(OSError):
        os.rmdir(path)
