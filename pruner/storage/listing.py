"""What a folder holds and what a file is, without reading it: stat, is-file, is-dir and
listings (one LIST on a store), answered from a :class:`Listing` while one is :func:`listed`;
and :func:`gather`, which asks side by side and carries the caller's listings."""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from pruner.storage.calls import Stat, _call, _object_error, requests
from pruner.storage.paths import ObjectPath, PathLike


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
        covered = _covering(path)
        if covered is not None and covered[1]:
            found = covered[0].objects.get(covered[1])
            if found is None:
                raise FileNotFoundError(f"{path} does not exist on its store")
            return found
        return head(path)
    return Stat.of(os.stat(path))


def head(path: ObjectPath) -> Stat:
    """The object's :class:`Stat` from one HEAD, whatever a listing says."""
    import obstore

    requests.add(1, 0)
    return Stat.of_object(_call(path, obstore.head, path.key))


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
    found: dict[str, Stat] = {}
    _scan_local(str(directory), "", hidden, found)
    return dict(sorted(found.items()))


def _scan_local(folder: str, prefix: str, hidden: tuple[str, ...], found: dict[str, Stat]) -> None:
    """:func:`list_stats` of a local folder, as :func:`walk_files` walks it (a link to a folder
    is not entered, an unreadable folder holds nothing), each file stated by the entry the
    folder's listing gave (a tenth of a ``Path`` and a ``stat`` per file)."""
    try:
        entries = list(os.scandir(folder))
    except OSError:
        return
    for entry in entries:
        if entry.name.startswith(hidden):
            continue
        if entry.is_dir():
            if not entry.is_symlink():
                _scan_local(entry.path, prefix + entry.name + "/", hidden, found)
            continue
        found[prefix + entry.name] = Stat.of(entry.stat())


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


def has_subfolders(directory: PathLike, hidden: tuple[str, ...] = ("_", ".")) -> bool:
    """Whether :func:`walk_files` of ``directory`` enters a folder below it."""
    folder = directory if isinstance(directory, ObjectPath) else Path(directory)
    return any(
        not name.startswith(hidden) and is_dir(folder / name) for name in list_dir(directory)
    )


_ASKERS = ThreadPoolExecutor(32, thread_name_prefix="pruner-object-ask")


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
