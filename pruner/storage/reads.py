"""Reading files by ranges: :class:`RangeFile` (positioned reads; on a store ranged GETs,
coalesced and sent side by side, each conditional on the ETag first read), a file's tail with
its stat in one request, pyarrow inputs, and local copies for libraries that read only local
files."""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from collections import OrderedDict
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pyarrow as pa

from pruner.storage.calls import ChangedUnderneath, Stat, _call, _object_error, requests
from pruner.storage.listing import _covering, head, stat
from pruner.storage.paths import ObjectPath, PathLike


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

    def read_ranges(self, ranges: list[tuple[int, int]], gap: int | None = None) -> list[bytes]:
        """The bytes of each ``(offset, length)``: on a store in one call, which coalesces
        ranges less than ``gap`` apart (default :data:`_COALESCE_GAP`) and sends the rest in
        parallel (ranges :func:`read_ahead` holds of the object as stated come from memory)."""
        if not isinstance(self.path, ObjectPath):
            return [os.pread(self._fd, length, offset) for offset, length in ranges]
        known = self.file_stat()
        found: list[bytes | None] = [None] * len(ranges)
        if known.etag:
            for i, (offset, length) in enumerate(ranges):
                found[i] = _KEPT.get((self.path, known.etag), offset, offset + length, known)
        missing = [i for i, data in enumerate(found) if data is None]
        if missing:
            fetched = self._fetch([ranges[i] for i in missing], gap)
            for i, data in zip(missing, fetched, strict=True):
                found[i] = data
        return [data or b"" for data in found]

    def _fetch(self, ranges: list[tuple[int, int]], gap: int | None = None) -> list[bytes]:
        """:meth:`read_ranges` from the store: each GET conditional on the ETag as stated."""
        import obstore

        assert isinstance(self.path, ObjectPath)
        known = self.file_stat()
        clamped = [(min(o, known.size), min(o + n, known.size)) for o, n in ranges]
        merged = _coalesced([(s, e) for s, e in clamped if e > s], gap)
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


class _Kept:
    """Ranges of objects read ahead (:func:`read_ahead`), kept by object and ETag for the
    reads of this process that want them: an object's bytes under one ETag never change, so
    they answer any later read of that object as it was stated. A read that wants a range
    still on its way waits for it rather than asking again. At most :data:`_KEPT_BYTES` in
    all; the least recently used go first."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: OrderedDict[tuple[ObjectPath, str], list[tuple[int, bytes]]] = OrderedDict()
        self._coming: dict[tuple[ObjectPath, str], list[tuple[int, int, threading.Event]]] = {}
        self._bytes = 0

    def expect(self, key: tuple[ObjectPath, str], ranges: list[tuple[int, int]]) -> Any:
        """Say ``ranges`` of ``key`` are on their way; call the result when they came (or
        failed: their readers then read them themselves)."""
        arrived = threading.Event()
        spans = [(offset, offset + length, arrived) for offset, length in ranges]
        with self._lock:
            self._coming.setdefault(key, []).extend(spans)

        def done() -> None:
            with self._lock:
                left = [s for s in self._coming.get(key, []) if s[2] is not arrived]
                if left:
                    self._coming[key] = left
                else:
                    self._coming.pop(key, None)
            arrived.set()

        return done

    def put(self, key: tuple[ObjectPath, str], offset: int, data: bytes) -> None:
        if len(data) > _KEPT_BYTES:
            return
        with self._lock:
            self._ranges.setdefault(key, []).append((offset, data))
            self._ranges.move_to_end(key)
            self._bytes += len(data)
            while self._bytes > _KEPT_BYTES:
                _, dropped = self._ranges.popitem(last=False)
                self._bytes -= sum(len(d) for _, d in dropped)

    def get(self, key: tuple[ObjectPath, str], start: int, end: int, known: Stat) -> bytes | None:
        """The bytes ``start`` to ``end`` (clipped to the object's size) of ``key``, if kept
        (after waiting for them if they are on their way); None if not."""
        end = min(end, known.size)
        if end <= start:
            return None
        for _ in range(2):
            with self._lock:
                for offset, data in self._ranges.get(key, ()):
                    if offset <= start and end <= offset + len(data):
                        self._ranges.move_to_end(key)
                        return data[start - offset : end - offset]
                waiting = [e for s, f, e in self._coming.get(key, ()) if s <= start and end <= f]
            if not waiting:
                return None
            waiting[0].wait(_AHEAD_WAIT)
        return None

    def tail(self, key: tuple[ObjectPath, str], size: int) -> bytes | None:
        """The longest kept bytes of ``key`` that end at the object's end (``size``)."""
        with self._lock:
            kept = self._ranges.get(key, ())
            found = [data for offset, data in kept if offset + len(data) == size]
            if found:
                self._ranges.move_to_end(key)
        return max(found, key=len) if found else None

    def clear(self) -> None:
        with self._lock:
            self._ranges.clear()
            self._bytes = 0


_KEPT_BYTES = 16 << 20
_AHEAD_WAIT = 60.0
"""Seconds a read waits for a range read ahead before it reads the range itself."""
_KEPT = _Kept()
_AHEAD = ThreadPoolExecutor(32, thread_name_prefix="pruner-read-ahead")


def read_ahead(path: ObjectPath, known: Stat, ranges: list[tuple[int, int]]) -> None:
    """Start reading the ``(offset, length)`` ranges of the object at ``path`` (whose stat,
    with its ETag, is ``known``) in the background, side by side, and keep them for the
    reads of them in this process (:meth:`RangeFile.read_ranges` serves them from memory
    while the object keeps that ETag, waiting for them if they are still on their way): a
    read a caller will surely want, sent while it waits for something else. A failed read
    ahead is forgotten (the read that wanted it then meets the error)."""
    if not known.etag or not ranges:
        return
    key = (path, known.etag)
    done = _KEPT.expect(key, ranges)

    def run() -> None:
        try:
            with RangeFile(path, known) as handle:
                found = handle._fetch(ranges)
            for (offset, _), data in zip(ranges, found, strict=True):
                _KEPT.put(key, offset, data)
        except Exception:  # the reader that wants it reads it itself, and meets the error
            pass
        finally:
            done()

    _AHEAD.submit(run)


def keep(path: ObjectPath, known: Stat, offset: int, data: bytes) -> None:
    """Keep ``data``, the bytes of the object at ``path`` (as ``known``, with its ETag) from
    ``offset``, for this process's reads of them, as :func:`read_ahead` keeps what it
    reads: bytes a read fetched and will want again (a Parquet footer, for the next opening
    of its table), or bytes another object recorded of this one as it was under that ETag
    (the footers an index build keeps beside the index). Nothing without an ETag."""
    if known.etag and data:
        _KEPT.put((path, known.etag), offset, data)


def kept_tail(path: PathLike) -> tuple[bytes, Stat] | None:
    """On a store, where a :func:`~pruner.storage.listed` listing covers ``path``: the
    longest bytes kept of the object (:func:`keep`, :func:`read_ahead`) that end at its
    end, with the listing's :class:`Stat`, when the object has the ETag they were kept
    under; else None (and locally)."""
    if not isinstance(path, ObjectPath):
        return None
    covered = _covering(path)
    known = covered[0].objects.get(covered[1]) if covered is not None else None
    if known is None or not known.etag:
        return None
    found = _KEPT.tail((path, known.etag), known.size)
    return None if found is None else (found, known)


def forget_read_ahead() -> None:
    """Drop every range :func:`read_ahead` kept (a benchmark's cold case: as a new process)."""
    _KEPT.clear()


_COALESCE_GAP = 1 << 20
"""Ranges of one object less than this apart are read in one request (object_store's
``get_ranges`` joins them the same way): a round trip costs more than the bytes between."""

_FETCHERS = ThreadPoolExecutor(16, thread_name_prefix="pruner-object-get")
"""Sends the requests of one :meth:`RangeFile.read_ranges` side by side (obstore releases
the GIL while it waits): a read of several ranges costs one round trip, not one each."""


def _coalesced(ranges: list[tuple[int, int]], gap: int | None = None) -> list[tuple[int, int]]:
    gap = _COALESCE_GAP if gap is None else gap
    merged: list[tuple[int, int]] = []
    for start, end in sorted(ranges):
        if merged and start <= merged[-1][1] + gap:
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
    object's size and ETag); on Azure, which has no suffix range, a ranged GET from the size
    the listing or a HEAD gives.

    Raises:
        OSError: the file cannot be read (FileNotFoundError when it is gone).
    """
    if isinstance(path, ObjectPath):
        import obstore

        covered = _covering(path)
        known = covered[0].objects.get(covered[1]) if covered is not None else None
        if known is not None and known.etag:  # the listing's stat: read ahead, perhaps
            start = max(0, known.size - length)
            kept = _KEPT.get((path, known.etag), start, known.size, known)
            if kept is not None:
                return kept, known
        if path.scheme in _NO_SUFFIX_RANGE:
            return _read_tail_by_size(path, length, known)
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


_NO_SUFFIX_RANGE = ("az", "abfs", "abfss")
"""Stores that cannot answer a suffix range (``bytes=-N``): Azure Blob Storage."""


def _read_tail_by_size(path: ObjectPath, length: int, known: Stat | None) -> tuple[bytes, Stat]:
    """:func:`read_tail` where the store has no suffix range: the size from the listing
    (``known``) or a HEAD, then a GET of the range, conditional on the ETag as stated (an
    object replaced since the listing is stated again by a HEAD)."""

    def read(stated: Stat) -> tuple[bytes, Stat]:
        start = max(0, stated.size - length)
        with RangeFile(path, stated) as handle:
            return handle.read(start, stated.size - start), stated

    if known is None:
        return read(head(path))
    try:
        return read(known)
    except ChangedUnderneath:
        return read(head(path))


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
