"""Writing files: a new file is written locally, then :func:`publish` makes it its target in
one step (a rename locally, one PUT on a store, conditional when the writer says what it
expects there); where a writer's temporary files go, and removing them when their writer was
killed; and removing files and folders."""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from pruner.storage.calls import ABSENT, ChangedUnderneath, Stat, _call, _object_error, requests
from pruner.storage.listing import _walk_objects, is_dir, list_dir
from pruner.storage.paths import Location, ObjectPath, PathLike, is_remote


def arrow_output(path: PathLike) -> pa.NativeFile:
    """A new local file at ``path`` for pyarrow's writers (``pq.write_table``); close it
    when done, then :func:`publish` it (to a store, if its target is there)."""
    return pa.OSFile(str(_local(path)), "wb")


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


_PUBLISHERS = ThreadPoolExecutor(2, thread_name_prefix="pruner-publish")


def publish_soon(
    temporary: PathLike,
    target: PathLike,
    expected: Stat | None = None,
    then: Callable[[], None] | None = None,
) -> Future[None]:
    """:func:`publish`, under way in the background on a store (where its PUT is the slow
    part of writing: what the writer computes next overlaps it), done before it returns
    locally; ``then`` runs after it, whatever happened. Wait on the future (its result
    raises what the publish raised) before anything that needs the file in place: a commit
    naming it, or a file derived from it published beside it."""

    def run() -> None:
        try:
            publish(temporary, target, expected)
        finally:
            if then is not None:
                then()

    if isinstance(target, ObjectPath):
        return _PUBLISHERS.submit(run)
    done: Future[None] = Future()
    try:
        run()
        done.set_result(None)
    except Exception as err:
        done.set_exception(err)
    return done


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


def temporary_path(target: Location) -> Path:
    """Where a file (or a staging folder) bound for ``target`` is written first: beside it
    (for a target on a store, in the local temporary folder: :func:`temporary_for`),
    named after it, this host and this process (``.<name>.<host>.<pid>.<random>.tmp``), so
    that a later run can tell a leftover of a killed writer from the file of one still
    writing (:func:`remove_leftovers`)."""
    host = socket.gethostname().replace("/", "_")
    name = f".{target.name}.{host}.{os.getpid()}.{uuid.uuid4().hex}.tmp"
    return temporary_for(target, name)


def remove_leftovers(target: Location) -> list[Location]:
    """Remove the temporary files and staging folders of ``target`` left by writers on this
    host that are no longer running (killed mid-write); return what was removed. A writer
    elsewhere, or one still running, keeps its own. (A writer to a store leaves nothing
    there: its temporary files are local, and the store holds only complete PUTs.)"""
    prefix, host = f".{target.name}.", socket.gethostname().replace("/", "_")
    removed: list[Location] = []
    if is_remote(target):
        return removed
    try:
        names = list_dir(target.parent)
    except OSError:
        return removed
    for name in names:
        if not (name.startswith(prefix) and name.endswith(".tmp")):
            continue
        parts = name[len(prefix) : -len(".tmp")].rsplit(".", 2)
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
            continue
        if _running(int(parts[1])):
            continue
        leftover = target.parent / name
        if is_dir(leftover):
            remove_tree(leftover)
        else:
            remove(leftover)
        removed.append(leftover)
    return removed


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's
    return True
