"""The one I/O seam: every byte of a table or an index that pruner reads, lists or writes.

Reading a Parquet footer, a row group, an index file or a hierarchy companion; listing a
table's files or an index folder; stating a file for its identity; writing an index and
publishing it atomically: all of it goes through this module, and nothing else in pruner
calls ``open``, ``os.stat``, ``os.walk`` or ``os.replace`` on table or index files
(``tests/index/test_storage.py`` checks). Today the one store is the local file system; an
object store plugs in here, behind the same few operations the object stores themselves
offer (arrow-rs ``object_store``: ranged reads, head, list, conditional put):

- :class:`RangeFile`: an open file read by offset (``pread``), many ranges per open;
- :func:`stat`: size, modification time and inode (a store's ETag goes beside them);
- :func:`walk_files` / :func:`list_dir`: what a folder holds;
- :class:`NewFile` and :func:`publish`: a file written beside its target, then renamed
  over it in one step (a store's create-if-absent / compare-and-swap PUT).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

__all__ = [
    "NewFile",
    "RangeFile",
    "Stat",
    "arrow_input",
    "arrow_output",
    "exists",
    "input_stat",
    "is_dir",
    "is_file",
    "list_dir",
    "make_dirs",
    "memory_map",
    "publish",
    "read_range",
    "remove",
    "remove_empty_dir",
    "remove_tree",
    "stat",
    "walk_files",
]

PathLike = str | os.PathLike[str]


@dataclass(frozen=True, slots=True)
class Stat:
    """What the store says of a file without reading it."""

    size: int
    mtime_ns: int
    inode: int = 0
    device: int = 0
    ctime_ns: int = 0

    @classmethod
    def of(cls, result: os.stat_result) -> Stat:
        return cls(
            result.st_size, result.st_mtime_ns, result.st_ino, result.st_dev, result.st_ctime_ns
        )


def stat(path: PathLike) -> Stat:
    """The file's :class:`Stat`.

    Raises:
        OSError: the file cannot be stated (FileNotFoundError when it is gone).
    """
    return Stat.of(os.stat(path))


def exists(path: PathLike) -> bool:
    return os.path.exists(path)


def is_dir(path: PathLike) -> bool:
    return os.path.isdir(path)


def is_file(path: PathLike) -> bool:
    return os.path.isfile(path)


def list_dir(path: PathLike) -> list[str]:
    """The names in the folder ``path`` (files and folders, unsorted).

    Raises:
        OSError: not a folder, or unreadable.
    """
    return os.listdir(path)


def walk_files(directory: PathLike, hidden: tuple[str, ...] = ("_", ".")) -> list[str]:
    """Paths (``/``-separated, relative, sorted) of the files under ``directory`` outside
    folders whose names start with ``hidden`` and not named so themselves."""
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
    position, so threads may read one RangeFile at once).

    Raises:
        OSError: the file cannot be opened.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self._fd = os.open(path, os.O_RDONLY)

    def file_stat(self) -> Stat:
        """The open file's :class:`Stat` (the file read, even if renamed or replaced since)."""
        return Stat.of(os.fstat(self._fd))

    def read(self, offset: int, length: int) -> bytes:
        """Up to ``length`` bytes from ``offset`` (fewer only at the end of the file)."""
        return os.pread(self._fd, length, offset)

    def read_into(self, buffer: Any, offset: int) -> int:
        """Fill the writable ``buffer`` from ``offset``; the bytes read."""
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


def read_range(path: PathLike, offset: int, length: int) -> bytes:
    """``length`` bytes of the file at ``path`` from ``offset`` (fewer at its end)."""
    with RangeFile(path) as handle:
        return handle.read(offset, length)


def arrow_input(path: PathLike) -> pa.NativeFile:
    """The file as a pyarrow input (for ``pq.ParquetReader.open``); close it when done."""
    return pa.OSFile(str(path))


def input_stat(handle: pa.NativeFile) -> Stat:
    """The :class:`Stat` of the file an :func:`arrow_input` reads."""
    return Stat.of(os.fstat(handle.fileno()))


def arrow_output(path: PathLike) -> pa.NativeFile:
    """A new file at ``path`` for pyarrow's writers (``pq.write_table``); close it when done,
    then :func:`publish` it."""
    return pa.OSFile(str(path), "wb")


def memory_map(path: PathLike) -> pa.NativeFile:
    """The file mapped for pyarrow's readers (an IPC or Parquet file read whole)."""
    return pa.memory_map(str(path))


class NewFile:
    """A file created for writing by offset (it must not exist), to be :func:`publish`-ed
    over its target once complete.

    Raises:
        OSError: it exists already, or cannot be created.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = Path(path)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)

    def write_at(self, data: Any, offset: int) -> int:
        """Write (part of) ``data`` at ``offset``; the bytes written."""
        return os.pwrite(self._fd, data, offset)

    def close(self) -> None:
        fd, self._fd = self._fd, -1
        if fd >= 0:
            os.close(fd)


def publish(temporary: PathLike, target: PathLike) -> None:
    """Make the complete file ``temporary`` the file at ``target`` in one step: a reader
    sees the old file or the new one, never a part."""
    os.replace(temporary, target)


def make_dirs(path: PathLike, exist_ok: bool = True) -> None:
    """The folder ``path`` and its parents, where missing.

    Raises:
        FileExistsError: ``path`` exists and ``exist_ok`` is False.
    """
    Path(path).mkdir(parents=True, exist_ok=exist_ok)


def remove(path: PathLike) -> None:
    """Remove the file at ``path``, if there is one."""
    Path(path).unlink(missing_ok=True)


def remove_tree(path: PathLike) -> None:
    """Remove the folder ``path`` and all it holds, as far as possible."""
    shutil.rmtree(path, ignore_errors=True)


def remove_empty_dir(path: PathLike) -> None:
    """Remove the folder ``path`` if it is empty (else leave it)."""
    with contextlib.suppress(OSError):
        os.rmdir(path)
