"""The companion on an object store, where a request costs a round trip and bytes little:
what a probe reads ahead of its levels, what opening a table reads ahead of its companions,
and when a held table's companion is read whole, shared by every table held on it
(``read.Hierarchy`` uses these)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from pruner import storage
from pruner.index.fileformat import FINGERPRINT_TAIL, INDEX_FILE_NAME
from pruner.index.hierarchy.layout import COMPANION_NAME, Section, _row_checksums

_AHEAD_VALUES = 64
"""On a store, a probe of at most this many values reads the units of all three levels in
one round trip (``Hierarchy._ahead``), not a round trip a level."""
_AHEAD_BYTES = 256 * 1024
"""... as long as the zone rows read ahead (every fragment's zones in the values' block rows:
32 B a zone a row) come to at most this; past it the zone level is read once the fragment
level has said which fragments it needs."""
_GAP = 16 * 1024
"""Units of a companion on a store less than this apart are read in one request (they are a
few hundred bytes to a few KiB each, and reading what lies between costs bytes, not a round
trip: the others go out side by side)."""

_WARM_BYTES = 256 << 20
"""On a store, a companion of at most this many bytes (half of what open companions keep
together, ``read._KEEP_BYTES``; about 200 MB at 20M rows) probed a second time (its table
is held: each query of a table opened anew opens its companion anew) is read whole in the
background, checked, and used by every later probe, which then asks the store nothing: a
held table's warm lookup waits only for its data, as a held Lance dataset's does once
Lance has its index in memory."""
_WARMERS = ThreadPoolExecutor(1, thread_name_prefix="pruner-companion-warm")
"""Runs the warm-ups (:data:`_WARM_BYTES`), one at a time."""

_HEAD_BYTES = {False: 1024, True: 128 * 1024}
"""How much of a companion its first read takes: locally its header's start; on an object
store, where a request costs a round trip and bytes little, enough for the header and the
zones' table of most indexes (the header takes about 20 B a fragment, the compressed table
6 KB at 13,000 zones: 128 KiB holds both up to about 5,000 fragments), which then cost no
request of their own."""


_AHEAD_COMPANIONS = 4
"""How many companions of a table :func:`read_heads_ahead` reads the heads of (its newest):
one a column indexed, and a Lance dataset's older index folders are not worth reading."""


def read_heads_ahead(found: storage.Listing) -> None:
    """On a store: the heads of the newest companions a table's listing holds and their
    index files' fingerprint tails, read side by side now (:func:`storage.read_ahead`), so
    that a query's first probe finds them in memory instead of waiting a round trip for
    them. Opening a table calls this as soon as it has the listing; the reads go on in the
    background while the opening goes on (Lance reads the dataset's manifest, or pruner the
    Parquet footers)."""
    companions = [
        (key, stat)
        for key, stat in found.objects.items()
        if key.rsplit("/", 1)[-1] == COMPANION_NAME
    ]
    companions.sort(key=lambda item: item[1].mtime_ns, reverse=True)
    for key, stat in companions[:_AHEAD_COMPANIONS]:
        folder = key.rsplit("/", 1)[0] + "/" if "/" in key else ""
        storage.read_ahead(found.root / key, stat, [(0, min(stat.size, _HEAD_BYTES[True]))])
        index = found.objects.get(folder + INDEX_FILE_NAME)
        if index is not None:
            tail = (max(0, index.size - FINGERPRINT_TAIL), FINGERPRINT_TAIL)
            storage.read_ahead(found.root / (folder + INDEX_FILE_NAME), index, [tail])


def read_whole(
    handle: storage.RangeFile, sections: list[Section]
) -> tuple[list[np.ndarray], int] | None:
    """Every section of an open companion (``handle``) read whole, in one batch of requests,
    and checked against its checksums: their images and the bytes read; None on any
    failure."""
    try:
        ranges = []
        for section in sections:
            ranges.append((section.offset, section.rows * section.width))
            ranges.append((section.sums, 8 * section.rows * section.parts))
        found = handle.read_ranges(ranges)
        images: list[np.ndarray] = []
        for i, section in enumerate(sections):
            data, sums = found[2 * i], found[2 * i + 1]
            if len(data) != ranges[2 * i][1] or len(sums) != ranges[2 * i + 1][1]:
                return None
            whole = np.frombuffer(data, np.uint8).reshape(section.rows, section.width)
            stored = np.frombuffer(sums, "<u8").reshape(section.rows, section.parts)
            for part in range(section.parts):
                a, b = int(section.edges[part]), int(section.edges[part + 1])
                if not np.array_equal(_row_checksums(whole[:, a:b]), stored[:, part]):
                    return None
            images.append(whole)  # read-only: every unit is checked, none is written again
    except Exception:
        return None
    return images, sum(len(data) for data in found)


class _Shared:
    """Companions read whole and checked on a store (``Hierarchy._warm``), shared by every
    open companion of the same object, by its path and ETag (an object's bytes under one
    ETag never change): a second table held on the same index uses the first's images
    instead of reading the companion again and keeping a copy of its own. An entry lives
    while a companion holds it; the caller counts its bytes once (:meth:`share` says when
    they came, :meth:`drop` when they went)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[tuple[storage.Location, str], tuple[list[Any], int]] = {}

    def take(self, key: tuple[storage.Location, str]) -> list[Any] | None:
        """The images kept under ``key`` (one more holder), or None."""
        with self._lock:
            found = self._held.get(key)
            if found is None:
                return None
            self._held[key] = (found[0], found[1] + 1)
            return found[0]

    def share(self, key: tuple[storage.Location, str], images: list[Any]) -> tuple[list[Any], int]:
        """Hold ``images`` under ``key`` (or the images another holder put there first);
        the images held and the bytes that came with them (0 when they were there)."""
        with self._lock:
            found = self._held.get(key)
            if found is not None:
                self._held[key] = (found[0], found[1] + 1)
                return found[0], 0
            self._held[key] = (images, 1)
            return images, sum(image.nbytes for image in images)

    def drop(self, key: tuple[storage.Location, str]) -> int:
        """One holder fewer; the bytes that went with the last holder (else 0)."""
        with self._lock:
            images, holders = self._held[key]
            if holders > 1:
                self._held[key] = (images, holders - 1)
                return 0
            del self._held[key]
            return sum(image.nbytes for image in images)


SHARED = _Shared()
