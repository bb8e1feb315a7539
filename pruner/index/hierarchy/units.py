"""The companion's sections read by offset a unit at a time, each unit checked against its
stored checksum before use, and kept for later probes within one budget for the process
(:mod:`pruner.index.hierarchy`; :class:`~pruner.index.hierarchy.read.Hierarchy` opens the
companion and probes it on top of this)."""

from __future__ import annotations

import threading

import numpy as np

from pruner import storage
from pruner.buffers import distinct, sparse_zeros
from pruner.errors import PrunerError
from pruner.index.hierarchy.layout import Section, _row_checksums
from pruner.index.hierarchy.store import _GAP, SHARED, read_whole

_SMALL_READ = 64 * 1024
"""A many-value probe reads a level's section whole when the units it uses (dataset chunks,
fragment block rows, a fragment's zones in a block row), each a read of its own, number
more than the section's bytes over this: one more small read costs about what copying this
many bytes from the page cache does (1,980 reads of 0.2-6 KiB took 0.12 s where one read of
a 52 MB section takes about 10 ms)."""
_KEEP_BYTES = 512 << 20
"""Bytes of checked companion units the open companions of a process keep in memory
together (:class:`Section`): a probe reads and checks a unit once, later probes of the same
open index use it as it was checked. A companion whose kept units would pass this drops
them all and reads again, as on its first probe."""


class HierarchyUnusable(PrunerError):
    """The companion cannot be used (missing, stale or damaged): read the index file."""


_kept_bytes = 0
_kept_lock = threading.Lock()


class CheckedUnits:
    """A companion file whose sections (:class:`Section`) are read by unit and checked.

    ``bytes_read`` counts every byte read from it (header and metadata included).

    Raises:
        HierarchyUnusable: the file is missing.
    """

    def __init__(self, path: storage.Location) -> None:
        self.path = path
        self.bytes_read = 0
        try:
            self._file = storage.RangeFile(self.path)
            self._file.file_stat()  # on a store, the HEAD (or listing) that finds it
        except OSError as err:
            raise HierarchyUnusable(
                "no hierarchy companion (pruner index build writes one)"
            ) from err
        self._lock = threading.Lock()
        self._kept = 0
        self._shared: tuple[storage.Location, str] | None = None  # held in SHARED
        self._head = b""  # the companion's first bytes, read with its header
        self._sections: dict[str, Section] = {}  # set by the subclass's opening

    def _read(self, offset: int, length: int) -> bytes:
        head = self._head
        if offset + length <= len(head):  # read with the header (on a store)
            return head[offset : offset + length]
        data = self._file.read(offset, length)
        self.bytes_read += len(data)
        if len(data) != length:
            raise HierarchyUnusable(f"hierarchy companion {self.path} is truncated")
        return data

    def __del__(self) -> None:
        handle = getattr(self, "_file", None)
        if handle is not None:
            handle.close()
        self._release()

    def _release(self) -> None:
        """Drop every kept unit (their bytes no longer count against :data:`_KEEP_BYTES`)
        and the shared images this companion held."""
        global _kept_bytes
        kept, self._kept = getattr(self, "_kept", 0), 0
        for section in getattr(self, "_sections", {}).values():
            section.drop()
        shared, self._shared = getattr(self, "_shared", None), None
        if shared is not None:
            kept += SHARED.drop(shared)
        with _kept_lock:
            _kept_bytes -= kept

    def _units(self, name: str, units: np.ndarray) -> np.ndarray:
        """The image of section ``name`` in which ``units`` (distinct unit numbers, see
        :class:`Section`) hold the companion's bytes, each checked against its stored
        checksum (other units' bytes are not to be used): :meth:`_units_of` of one section."""
        return self._units_of({name: units})[name]

    def _units_of(self, wanted: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The images of the sections named in ``wanted``, each holding its wanted units
        checked (see :meth:`_units`).

        Units already checked by an earlier probe of this companion are not read again.
        The others are read one by one, or with the section whole when many are wanted
        (:data:`_SMALL_READ`), and checked; on a store, the units of every section are read
        in one batch of requests sent side by side (one round trip). The images are kept
        for later probes while the process's open companions keep at most
        :data:`_KEEP_BYTES` together.

        Raises:
            HierarchyUnusable: a unit read is truncated or fails its checksum.
        """
        with self._lock:
            images: dict[str, np.ndarray] = {}
            reads: list[tuple[str, Section, np.ndarray]] = []
            for name, units in wanted.items():
                section = self._sections[name]
                if section.image is None:
                    section.image = sparse_zeros(section.rows, section.width)
                    section.checked = np.zeros(section.rows * section.parts, bool)
                images[name] = section.image
                need = units[~section.checked[units]]
                if len(need):
                    reads.append((name, section, need))
            if not reads:
                return images
            remote = storage.is_remote(self.path)
            batched = [remote and not self._whole(section, need) for _, section, need in reads]
            if any(batched):
                self._read_batch([read for read, b in zip(reads, batched, strict=True) if b])
            for read, b in zip(reads, batched, strict=True):
                if not b:
                    self._read_units(*read)
            for _, section, need in reads:
                section.checked[need] = True
            self._keep()
            return images

    @staticmethod
    def _whole(section: Section, need: np.ndarray) -> bool:
        """Whether ``need`` is read with its section whole (:data:`_SMALL_READ`)."""
        return len(need) * _SMALL_READ > section.rows * section.width

    def _read_units(self, name: str, section: Section, need: np.ndarray) -> None:
        """Read the units ``need`` (none of them checked yet) into the section's image and
        check them."""
        image = section.image
        assert image is not None
        row, part = np.divmod(need, section.parts)
        lo, hi = section.edges[part], section.edges[part + 1]
        total = section.rows * section.width
        if self._whole(section, need):
            stored = np.frombuffer(self._read(section.sums, 8 * len(section.checked)), "<u8")
            stored = stored[need]
            if not section.checked.any():  # nothing checked to keep: straight into the image
                target = memoryview(image.reshape(-1))  # type: ignore[arg-type]
                got = self._file.read_into(target, section.offset)
                self.bytes_read += got
                if got != total:
                    raise HierarchyUnusable(f"hierarchy companion {self.path} is truncated")
            else:
                whole = np.frombuffer(self._read(section.offset, total), np.uint8)
                whole = whole.reshape(section.rows, section.width)
                if section.parts == 1:
                    image[row] = whole[row]
                else:
                    for r, a, b in zip(row.tolist(), lo.tolist(), hi.tolist(), strict=True):
                        image[r, a:b] = whole[r, a:b]
            section.written = total  # every page of the image written
        else:
            stored = np.empty(len(need), np.uint64)
            for i, (r, a, b, unit) in enumerate(
                zip(row.tolist(), lo.tolist(), hi.tolist(), need.tolist(), strict=True)
            ):
                target = memoryview(image[r, a:b])  # type: ignore[arg-type]
                got = self._file.read_into(target, section.offset + r * section.width + a)
                self.bytes_read += got
                if got != b - a:
                    raise HierarchyUnusable(f"hierarchy companion {self.path} is truncated")
                stored[i] = int.from_bytes(self._read(section.sums + 8 * unit, 8), "little")
                section.written = min(total, section.written + got)
        self._check(name, section, need, stored)

    def _read_batch(self, reads: list[tuple[str, Section, np.ndarray]]) -> None:
        """On a store: the units ``need`` of each ``(name, section, need)`` (none checked yet)
        and their checksums, all in one batch of requests sent side by side (one round
        trip, not two requests a unit one after another), into the sections' images, and
        checked."""
        ranges: list[tuple[int, int]] = []
        spans = []
        for _, section, need in reads:
            row, part = np.divmod(need, section.parts)
            lo, hi = section.edges[part], section.edges[part + 1]
            units = list(zip(row.tolist(), lo.tolist(), hi.tolist(), strict=True))
            spans.append((len(ranges), units))
            ranges += [(section.offset + r * section.width + a, b - a) for r, a, b in units]
            ranges += [(section.sums + 8 * unit, 8) for unit in need.tolist()]
        found = self._file.read_ranges(ranges, gap=_GAP)
        self.bytes_read += sum(map(len, found))
        for (name, section, need), (first, units) in zip(reads, spans, strict=True):
            image = section.image
            assert image is not None
            total = section.rows * section.width
            stored = np.empty(len(need), np.uint64)
            for i, (r, a, b) in enumerate(units):
                data, checksum = found[first + i], found[first + len(units) + i]
                if len(data) != b - a or len(checksum) != 8:
                    raise HierarchyUnusable(f"hierarchy companion {self.path} is truncated")
                image[r, a:b] = np.frombuffer(data, np.uint8)
                stored[i] = int.from_bytes(checksum, "little")
                section.written = min(total, section.written + len(data))
            self._check(name, section, need, stored)

    def _check(self, name: str, section: Section, need: np.ndarray, stored: np.ndarray) -> None:
        """The units ``need`` of the section's image against their ``stored`` checksums, a
        part at a time (its units are one width)."""
        image = section.image
        assert image is not None
        row, part = np.divmod(need, section.parts)
        for p in distinct(part).tolist():
            these = part == p
            a, b = int(section.edges[p]), int(section.edges[p + 1])
            if not np.array_equal(_row_checksums(image[row[these], a:b]), stored[these]):
                raise HierarchyUnusable(f"{self.path}: a {name} block fails its checksum")

    def _keep(self) -> None:
        """Count what the images now hold against :data:`_KEEP_BYTES`; past it, drop them
        (this probe still uses what it read)."""
        global _kept_bytes
        written = sum(section.written for section in self._sections.values())
        with _kept_lock:
            _kept_bytes += written - self._kept
            self._kept = written
            over = _kept_bytes > _KEEP_BYTES
        if over:
            self._release()

    def _warm(self) -> None:
        """Read every section whole and, once all of it passed its checksums, use it for
        every later probe (run in the background: see :data:`_WARM_BYTES`); or use the
        images another companion of this object (its path and ETag) read so
        (:data:`SHARED`), whose bytes count once. A failure changes nothing: the probes read
        their units as before, and meet it themselves."""
        etag = self._file.file_stat().etag
        key = (self.path, etag) if etag else None
        sections = list(self._sections.values())
        images = SHARED.take(key) if key is not None else None
        came = 0
        if images is None:
            read = read_whole(self._file, sections)
            if read is None:  # the probes read their units themselves, and meet the error
                return
            images, count = read
            with self._lock:
                self.bytes_read += count
            if key is not None:
                images, came = SHARED.share(key, images)
        global _kept_bytes
        with self._lock:
            self._shared = key
            for section, image in zip(sections, images, strict=True):
                section.image = image
                section.checked = np.ones(section.rows * section.parts, bool)
                section.written = 0 if key is not None else image.nbytes
            with _kept_lock:
                _kept_bytes += came
            self._keep()
