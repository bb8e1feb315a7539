"""The hierarchy companion of a zone bloom index: cold point probes that read kilobytes.

``bloomfilter.lance`` holds one SBBF per zone, zone after zone: a probe must load all of it
(650 zones x 32 KiB = 20 MiB at 5M rows). Beside it, ``bloomfilter.hierarchy`` holds the same
zones again, arranged for reading by offset, plus two coarser filters (the hierarchy of
``shared/seeds/parquedb_bloom_filter_design.md``):

- a **dataset filter** over every value of the column, sized from the sum of the fragments'
  distinct counts (an upper bound of the dataset's) at the index's probability;
- a **fragment filter** per fragment over its values, all of one size (sized from the
  largest fragment's distinct count), so they are stored block-major like the zones
  (distinct counts are estimated from a filter's fill, :class:`FragmentCoarse`);
- the **zone filters**, block-major: every zone filter has the same size, so a value's block
  number is the same in every zone; block ``b`` of every zone is stored contiguously, a
  fragment's zones next to each other.

A probe goes dataset -> fragments -> zones, reading with ``pread``: one 32-byte block of the
dataset filter (an absent value stops there), one row of fragment blocks, and for each
fragment that may hold the value, its zones' blocks of one row. Every piece read carries a
checksum (:func:`_row_checksums`) that is checked before use; an open companion keeps the
pieces it checked (:data:`_KEEP_BYTES`), and later probes use them as they were checked.

The companion is derived data. It records the size and the xxHash64 of the last bytes of the
index file it was made from, and is used only while they match; anything wrong with it
(missing, stale, truncated, a checksum that fails) raises :class:`HierarchyUnusable`, and the
caller reads ``bloomfilter.lance`` instead. It never changes what a probe selects: the zone
filters are the index's own bytes, and the coarser filters only skip zones whose filters
would say "absent" too (every value of a zone is in its fragment's and the dataset's filter).

Layout (all integers little-endian)::

    b"PRUNERH1" | u32 header length | u64 xxHash64 of the header | header (JSON) | sections
    at the header's offsets

The header is checksummed like every other piece: a digit changed in it (a filter's size
or an offset, still plausible) would make every later read look in the wrong place. It
also records each fragment's distinct count (``fragment_distinct``): an update
(:mod:`pruner.index.update`) sizes the coarse filters from it and carries the kept
fragments' filters over (:meth:`Hierarchy.coarse`); a companion without it is used for
probes but not carried over.

    zones      u64 fragment_id[Z] | u64 zone_start[Z] | u64 zone_length[Z] | u8 has_null[Z]
    dataset    the dataset filter                          checksums: one per KiB
    fragments  row r = block r of every fragment filter    checksums: one per row
    zone rows  row r = block r of every zone filter        checksums: one per (row, fragment)
"""

from __future__ import annotations

import functools
import json
import os
import threading
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import xxhash

from pruner import sbbf
from pruner.buffers import distinct, sparse_zeros
from pruner.errors import PrunerError
from pruner.index.fileformat import (
    arrow_type_from_text,
    decode_files,
    encode_files,
    read_index_file,
    remove_leftovers,
    temporary_path,
)
from pruner.index.model import FragmentFile, ZoneIndex

__all__ = [
    "COMPANION_NAME",
    "Coarse",
    "FragmentCoarse",
    "Hierarchy",
    "HierarchyUnusable",
    "Probe",
    "companion_path",
    "open_index",
    "write_hierarchy",
    "write_hierarchy_of",
]

COMPANION_NAME = "bloomfilter.hierarchy"
MAGIC = b"PRUNERH1"
VERSION = 5
_TAIL_BYTES = 4096
"""The index file's fingerprint is its size and the xxHash64 of its last bytes (Lance's
footer: the offsets of every column page and global buffer, which move with the content)."""

_PREFIX = len(MAGIC) + 4 + 8  # magic, header length, header checksum
_BLOCK = sbbf.BLOCK_BYTES
_BULK_PAIRS = 1 << 20
"""(value, fragment) pairs checked at once by a probe."""
_DATASET_CHUNK = 1024
"""The dataset filter is checksummed (and read) in chunks of this many bytes: a checksum
per 32-byte block cost the build more than the rest of the companion."""
_SMALL_READ = 64 * 1024
"""A many-value probe reads a level's section whole when the units it uses (dataset chunks,
fragment block rows, a fragment's zones in a block row), each a read of its own, number
more than the section's bytes over this: one more small read costs about what copying this
many bytes from the page cache does (1,980 reads of 0.2-6 KiB took 0.12 s where one read of
a 52 MB section takes about 10 ms)."""
_KEEP_BYTES = 512 << 20
"""Bytes of checked companion units the open companions of a process keep in memory
together (:class:`_Section`): a probe reads and checks a unit once, later probes of the same
open index use it as it was checked. A companion whose kept units would pass this drops
them all and reads again, as on its first probe."""


class HierarchyUnusable(PrunerError):
    """The companion cannot be used (missing, stale or damaged): read the index file."""


def companion_path(index_file: str | os.PathLike[str]) -> Path:
    return Path(index_file).with_name(COMPANION_NAME)


def _fingerprint(index_file: Path) -> tuple[int, str]:
    with open(index_file, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        tail = os.pread(handle.fileno(), _TAIL_BYTES, max(0, size - _TAIL_BYTES))
    return size, xxhash.xxh64_hexdigest(tail)


_SUM_START = np.uint64(0x2545F4914F6CDD1D)


@functools.lru_cache(maxsize=32)
def _weights(words: int) -> np.ndarray:
    """Odd, well-mixed 64-bit weights of the word positions 0 .. ``words - 1`` of a piece
    (SplitMix64's finaliser of 1, 2, ..., with the lowest bit set)."""
    z = np.arange(1, words + 1, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    weights = (z ^ (z >> np.uint64(31))) | np.uint64(1)
    weights.flags.writeable = False
    return weights


def _row_checksums(rows: np.ndarray) -> np.ndarray:
    """The checksum of each row of a 2-D uint8 array of rows a multiple of 8 bytes long:
    modulo 2^64, a constant plus the sum of the row's little-endian 64-bit words, each times
    an odd weight of its position (:func:`_weights`).

    A change of any one word changes it (an odd number is invertible modulo 2^64); a row
    zeroed with its checksum fails (the constant); other damage passes with a chance of
    about 2^-64. NumPy sums all rows in one pass: xxHash64 row by row cost a Python call per
    row (tens of thousands per build and per many-value probe).
    """
    words = np.ascontiguousarray(rows).view("<u8")
    return np.einsum("ij,j->i", words, _weights(words.shape[1])) + _SUM_START


def _block_major(filters: np.ndarray) -> np.ndarray:
    """(n, B*32) filters -> (B, n*32): row b holds block b of every filter, in order."""
    count, num_bytes = filters.shape
    blocks = num_bytes // _BLOCK
    return np.ascontiguousarray(
        filters.reshape(count, blocks, _BLOCK).transpose(1, 0, 2).reshape(blocks, count * _BLOCK)
    )


_REGION_BYTES = 1 << 20
"""The dataset filter is filled a region of this many bytes at a time: one core's L2 cache
here (lscpu: 2 MiB in 2 instances)."""
_ORDER_BITS = 8
"""A fragment's hashes are ordered by this many top bits, the top bits of a value's block
number in a filter of any size: a filter of up to 2^8 regions is then filled region by
region, as if sorted, at the cost of a counting sort of 8-bit keys (16-bit keys cost
0.3 ms more per 100,000 values, for filters past 256 MiB)."""


@dataclass(frozen=True)
class FragmentCoarse:
    """What a freshly indexed fragment gives its companion's coarse filters (local builds
    make it in the thread that indexes the fragment): the hashes of its non-null values in
    the order of their top bits (:data:`_ORDER_BITS`), a filter of them sized as if every
    value were distinct, and the distinct count that filter's fill estimates
    (:func:`pruner.sbbf.count_from_fill`; an exact count took a sort of every fragment's
    hashes, the largest cost of a build's hierarchy). All three come from one compiled
    pass (:func:`pruner.sbbf.ordered_insert`: 0.6 ms per 100,000 values, where NumPy's
    argsort, gather, insert and popcount took 2.1 ms)."""

    hashes: np.ndarray  # uint64
    filter: np.ndarray  # (bytes,) uint8, a power of two in size
    count: int

    @classmethod
    def of(cls, hashes: np.ndarray, probability: float) -> FragmentCoarse:
        """The coarse share of a fragment whose non-null values hash to ``hashes``."""
        # Sized for the next power of two of values: a few sizes, each computed once.
        size = sbbf.optimal_num_bytes(1 << max(len(hashes) - 1, 0).bit_length(), probability)
        ordered, bits, ones = sbbf.ordered_insert(hashes, size, _ORDER_BITS)
        return cls(ordered, bits, sbbf.count_from_fill(size * 8, ones, len(ordered)))


@dataclass(frozen=True)
class Coarse:
    """A companion's coarse filters, by fragment id, and the distinct counts they were
    sized from: what an update carries over for the fragments whose zones it keeps."""

    counts: dict[int, int]
    fragment_filters: dict[int, np.ndarray]  # (fragment_bytes,) uint8 each
    dataset_filter: np.ndarray  # (dataset bytes,) uint8
    fragment_bytes: int

    @classmethod
    def merged(cls, parts: list[Coarse]) -> Coarse:
        """The coarse filters of several segments (of disjoint fragments) as one: each
        fragment's as it is, the dataset filters ORed at the largest one's size (resizing
        keeps every value, :func:`pruner.sbbf.resize`)."""
        if len(parts) == 1:
            return parts[0]
        size = max(len(part.dataset_filter) for part in parts)
        dataset_filter = np.zeros(size, np.uint8)
        for part in parts:
            dataset_filter |= sbbf.resize(part.dataset_filter[None, :], size)[0]
        return cls(
            counts={f: c for part in parts for f, c in part.counts.items()},
            fragment_filters={f: b for part in parts for f, b in part.fragment_filters.items()},
            dataset_filter=dataset_filter,
            fragment_bytes=max(part.fragment_bytes for part in parts),
        )


def _coarse_counts(
    fragments: np.ndarray,
    fresh: Mapping[int, FragmentCoarse],
    previous: Coarse | None,
    kept: Mapping[int, int],
) -> list[int] | str:
    """Each fragment's distinct count, which sizes a companion's coarse filters, or why
    there can be none.

    A fragment's share comes from ``fresh`` (just indexed) or, for a fragment whose zones
    an update kept (``kept``: new id -> old id), from ``previous``."""
    ids = [int(f) for f in fragments]
    carried = [f for f in ids if f not in fresh]
    if any(f not in kept for f in carried):
        return "fragments were indexed without their values' hashes (a Spark build)"
    if carried and (previous is None or any(kept[f] not in previous.counts for f in carried)):
        return "the index it updated had no usable hierarchy companion"
    assert previous is not None or not carried
    return [
        fresh[f].count if f in fresh else previous.counts[kept[f]]  # type: ignore[union-attr]
        for f in ids
    ]


def _coarse_filters(
    fragments: np.ndarray,
    fresh: Mapping[int, FragmentCoarse],
    previous: Coarse | None,
    kept: Mapping[int, int],
    fragment_bytes: int,
    dataset_bytes: int,
) -> tuple[np.ndarray, np.ndarray]:
    """The fragment filters (one row per fragment) and the dataset filter of a companion,
    of the sizes :func:`_coarse_counts`' counts give: the fragment filters' from the
    largest, the dataset filter's from their sum.

    Each fragment's filter is its share's (``fresh``) or, for a fragment an update kept,
    ``previous``'s; the dataset filter is then the old one with the new values added.
    Every filter is resized to its size (:func:`pruner.sbbf.resize`: halving ORs pairs of
    blocks, which is inserting at that size; doubling keeps the filter's own rate); the
    dataset filter gets every fresh value. When the sizes are unchanged and no fragment was
    dropped or re-indexed, the result is a full build's, bit for bit; else a superset of it
    (values of dropped fragments stay in the dataset filter).
    """
    ids = [int(f) for f in fragments]
    fragment_filters = np.empty((len(ids), fragment_bytes), np.uint8)
    for position, f in enumerate(ids):
        if f in fresh:
            own = fresh[f].filter
        else:
            assert previous is not None
            own = previous.fragment_filters[kept[f]]
        fragment_filters[position] = sbbf.resize(own[None, :], fragment_bytes)[0]
    dataset_filter = _dataset_filter([fresh[f].hashes for f in ids if f in fresh], dataset_bytes)
    if previous is not None and any(f not in fresh for f in ids):
        dataset_filter |= sbbf.resize(previous.dataset_filter[None, :], dataset_bytes)[0]
    return fragment_filters, dataset_filter


def _dataset_filter(runs: list[np.ndarray], num_bytes: int) -> np.ndarray:
    """A filter of ``num_bytes`` holding every hash of ``runs`` (each in the order of its
    top bits, :class:`FragmentCoarse`), filled a region of :data:`_REGION_BYTES` at a time:
    the hashes of one region, from every run, go in together while it is in cache, the
    first half of the regions and the second side by side in two threads (their blocks
    are disjoint). Filled run after run, each run swept the whole filter: 5M values into
    16 MiB took 0.12-0.14 s."""
    log2_regions = min(max(num_bytes // _REGION_BYTES, 1).bit_length() - 1, _ORDER_BITS)
    regions = 1 << log2_regions
    cuts = np.arange(regions + 1, dtype=np.uint64)
    edges = [
        np.searchsorted(run >> np.uint64(64 - log2_regions), cuts)
        if log2_regions
        else np.array([0, len(run)])
        for run in runs
    ]
    halves = [range(0, regions // 2 or 1), range(regions // 2 or 1, regions)]
    parts = [
        [run[e[r] : e[r + 1]] for r in half for run, e in zip(runs, edges, strict=True)]
        for half in halves
    ]
    words = np.zeros((1, num_bytes // 4), "<u4")

    def fill(pieces: list[np.ndarray]) -> None:
        if pieces:
            sbbf.insert_into(words, np.concatenate(pieces))

    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(fill, parts))
    return words.view(np.uint8)[0]


def write_hierarchy(
    index_file: str | os.PathLike[str],
    *,
    column: str,
    items: int,
    probability: float,
    fragment_id: np.ndarray,
    zone_start: np.ndarray,
    zone_length: np.ndarray,
    has_null: np.ndarray,
    filters: np.ndarray,
    fresh: Mapping[int, FragmentCoarse],
    files: list[FragmentFile] | None = None,
    previous: Coarse | None = None,
    kept: Mapping[int, int] | None = None,
    value_type: pa.DataType | None = None,
) -> Path | str:
    """Write the companion of ``index_file`` (already written) atomically beside it; or
    say why it can have none.

    Args:
        filters: (zones, bytes) uint8, every zone's filter, one size, in file order.
        value_type: the index's ``ZoneIndex.value_type`` (what its values were hashed as).
        fresh: per fragment id just indexed, its share of the coarse filters.
        previous, kept: an update's old companion's coarse filters, and which fragments
            (new id -> old id) take theirs from it: the ones missing from ``fresh``.
    """
    target = companion_path(index_file)
    fragment_id = np.asarray(fragment_id, np.uint64)
    first_zone = np.flatnonzero(np.r_[True, fragment_id[1:] != fragment_id[:-1]])
    first_zone = first_zone[first_zone < len(fragment_id)]
    fragments = fragment_id[first_zone]
    if len(np.unique(fragments)) != len(fragments):
        raise ValueError("a fragment's zones must be next to each other")
    counts = _coarse_counts(fragments, fresh, previous, kept or {})
    if isinstance(counts, str):
        return counts
    fragment_bytes = sbbf.optimal_num_bytes(max(counts, default=1) or 1, probability)
    dataset_bytes = sbbf.optimal_num_bytes(sum(counts) or 1, probability)
    zone_bytes = int(filters.shape[1]) if filters.ndim == 2 else 0
    chunk = min(dataset_bytes, _DATASET_CHUNK)
    meta = np.concatenate(
        [
            fragment_id.astype("<u8").view(np.uint8),
            np.asarray(zone_start, "<u8").view(np.uint8),
            np.asarray(zone_length, "<u8").view(np.uint8),
            np.asarray(has_null, np.uint8),
        ]
    )
    # Each section's size, in file order, is known before any of it is made.
    sizes = {
        "zones": meta.nbytes,
        "dataset": dataset_bytes,
        "dataset_sums": dataset_bytes // chunk * 8,
        "fragments": fragment_bytes * len(fragments),
        "fragment_sums": fragment_bytes // _BLOCK * 8,
        "zone_rows": zone_bytes * len(fragment_id),
        "zone_sums": zone_bytes // _BLOCK * len(fragments) * 8,
    }
    size, tail = _fingerprint(Path(index_file))
    header: dict[str, object] = {
        "version": VERSION,
        "column": column,
        "items": items,
        "probability": probability,
        "index_file_size": size,
        "index_file_tail": tail,
        "zones": len(fragment_id),
        "fragments": [int(f) for f in fragments],
        "fragment_first_zone": [int(z) for z in first_zone],
        "zone_bytes": zone_bytes,
        "fragment_bytes": fragment_bytes,
        "dataset_bytes": dataset_bytes,
        "fragment_distinct": counts,
        "zones_checksum": xxhash.xxh64_intdigest(meta.tobytes()),
        "files": None if files is None else encode_files(files),
        "value_type": None if value_type is None else str(value_type),
    }
    # Offsets depend on the header's length, which depends on the offsets' digits: lay out
    # with a header padded to a fixed width.
    offsets: dict[str, int] = {}
    header["offsets"] = offsets
    padding = 64
    while True:
        position = _PREFIX + len(json.dumps(header)) + padding
        for name, nbytes in sizes.items():
            offsets[name] = position
            position += nbytes
        text = json.dumps(header).encode()
        if _PREFIX + len(text) <= offsets["zones"]:
            break
        padding *= 2
    text = text.ljust(offsets["zones"] - _PREFIX, b" ")
    checksum = xxhash.xxh64_intdigest(text).to_bytes(8, "little")
    remove_leftovers(target)
    temporary = temporary_path(target)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        # A section is written (by offset, in a thread) as soon as it is made, while the
        # next is made: writing a 207 MB companion to this disk took as long as making it.
        with ThreadPoolExecutor(max_workers=1) as writer:
            written = []

            def put(name: str, data: np.ndarray) -> None:
                flat = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
                if flat.nbytes != sizes[name]:
                    raise AssertionError(f"companion section {name}: {flat.nbytes} B")
                written.append(writer.submit(_write_at, fd, flat, offsets[name]))

            put("zones", meta)
            zone_rows = _block_major(filters)
            put("zone_rows", zone_rows)
            # One checksum per (zone row, fragment): a probe reads one fragment's zones of
            # a row.
            zone_sums = np.empty((len(zone_rows), len(fragments)), np.uint64)
            edges = [*first_zone.tolist(), len(fragment_id)]
            for f in range(len(fragments)):
                piece = zone_rows[:, edges[f] * _BLOCK : edges[f + 1] * _BLOCK]
                zone_sums[:, f] = _row_checksums(piece)
            put("zone_sums", zone_sums.astype("<u8"))
            fragment_filters, dataset_filter = _coarse_filters(
                fragments, fresh, previous, kept or {}, fragment_bytes, dataset_bytes
            )
            dataset_blocks = dataset_filter.reshape(-1, chunk)
            put("dataset", dataset_blocks)
            put("dataset_sums", _row_checksums(dataset_blocks).astype("<u8"))
            fragment_rows = _block_major(fragment_filters)
            put("fragments", fragment_rows)
            put("fragment_sums", _row_checksums(fragment_rows).astype("<u8"))
            prefix = MAGIC + len(text).to_bytes(4, "little") + checksum + text
            put_header = writer.submit(_write_at, fd, np.frombuffer(prefix, np.uint8), 0)
            for done in [*written, put_header]:
                done.result()
        os.close(fd)
        fd = -1
        os.replace(temporary, target)
    finally:
        if fd >= 0:
            os.close(fd)
        temporary.unlink(missing_ok=True)
    return target


def _write_at(fd: int, data: np.ndarray, offset: int) -> None:
    """All of ``data`` (uint8) at ``offset`` of the open file ``fd``."""
    view = memoryview(data.data)
    while view.nbytes:
        count = os.pwrite(fd, view, offset)
        view, offset = view[count:], offset + count


@dataclass(frozen=True)
class Probe:
    """What one hierarchical probe selected and which level decided it."""

    mask: np.ndarray  # (zones,) bool
    decided: str


class _Section:
    """One section of an open companion as probes read it: an image of its ``rows`` x
    ``edges[-1]`` bytes, zeroed until read (pages never written are never allocated), in
    which a unit (``row * parts + part``; part ``p`` of a row is its bytes ``edges[p]`` to
    ``edges[p + 1]``; the unit's checksum is the section's ``unit``-th) is used only once
    it passed its checksum, and is never written again after that."""

    def __init__(self, offset: int, sums: int, rows: int, edges: list[int]) -> None:
        self.offset = offset
        self.sums = sums
        self.rows = rows
        self.edges = np.array(edges, np.int64)
        self.parts = len(edges) - 1
        self.width = int(edges[-1])
        self.image: np.ndarray | None = None
        self.checked = np.zeros(0, bool)
        self.written = 0  # bytes read into the image, what keeping it costs

    def drop(self) -> None:
        self.image, self.checked, self.written = None, np.zeros(0, bool), 0


_kept_bytes = 0
_kept_lock = threading.Lock()


class Hierarchy:
    """An open companion: its zones' metadata in memory, its filters read by offset.

    ``bytes_read`` counts every byte read from the companion (header and metadata included).

    Raises:
        HierarchyUnusable: missing, stale (its index file changed) or damaged.
    """

    def __init__(self, index_file: str | os.PathLike[str]) -> None:
        self.index_file = Path(index_file)
        self.path = companion_path(index_file)
        self.bytes_read = 0
        try:
            self._fd = os.open(self.path, os.O_RDONLY)
        except OSError as err:
            raise HierarchyUnusable(
                "no hierarchy companion (pruner index build writes one)"
            ) from err
        self._lock = threading.Lock()
        self._kept = 0
        try:
            self._open()
        except BaseException:
            fd, self._fd = self._fd, -1
            os.close(fd)
            raise

    @property
    def index_files(self) -> list[Path]:
        """The index file this companion derives from (a list, as for several segments)."""
        return [self.index_file]

    def _read(self, offset: int, length: int) -> bytes:
        data = os.pread(self._fd, length, offset)
        self.bytes_read += len(data)
        if len(data) != length:
            raise HierarchyUnusable(f"hierarchy companion {self.path} is truncated")
        return data

    def _open(self) -> None:
        size = os.fstat(self._fd).st_size
        first = os.pread(self._fd, min(size, 1024), 0)
        self.bytes_read += len(first)
        if first[: len(MAGIC)] != MAGIC or len(first) < _PREFIX:
            raise HierarchyUnusable(f"{self.path} is not a pruner hierarchy companion")
        length = int.from_bytes(first[len(MAGIC) : len(MAGIC) + 4], "little")
        stored = int.from_bytes(first[len(MAGIC) + 4 : _PREFIX], "little")
        text = first[_PREFIX : _PREFIX + length]
        if len(text) < length:
            text += self._read(len(first), length - len(text))
        if xxhash.xxh64_intdigest(text) != stored:
            raise HierarchyUnusable(
                f"{self.path}: its header fails its checksum (damaged, or written by an older "
                "pruner: pruner index build rewrites it)"
            )
        try:
            header = json.loads(text)
            if header.get("version") != VERSION:
                raise HierarchyUnusable(
                    f"{self.path}: version {header.get('version')!r}, not {VERSION} (written by "
                    "another pruner: pruner index build rewrites it)"
                )
            offsets = {str(k): int(v) for k, v in header["offsets"].items()}
            zones = int(header["zones"])
            self.fragments = np.array(header["fragments"], np.uint64)
            self._first_zone = [int(z) for z in header["fragment_first_zone"]]
            self.zone_bytes = int(header["zone_bytes"])
            self.fragment_bytes = int(header["fragment_bytes"])
            self.dataset_bytes = int(header["dataset_bytes"])
            fingerprint = (int(header["index_file_size"]), str(header["index_file_tail"]))
            zones_checksum = int(header["zones_checksum"])
            files_text = header.get("files")
            counts = header.get("fragment_distinct")
            self._counts = None if counts is None else [int(c) for c in counts]
            self.column = str(header["column"])
            self.items = int(header["items"])
            self.probability = float(header["probability"])
            value_text = header.get("value_type")
            self.value_type = None if value_text is None else arrow_type_from_text(value_text)
        except HierarchyUnusable:
            raise
        except (ValueError, TypeError, KeyError, AttributeError) as err:
            raise HierarchyUnusable(f"{self.path}: damaged header ({err})") from err
        for num_bytes in (self.zone_bytes, self.fragment_bytes, self.dataset_bytes):
            if num_bytes < _BLOCK or num_bytes % _BLOCK or num_bytes > sbbf.MAX_BYTES:
                raise HierarchyUnusable(f"{self.path}: damaged header (filter of {num_bytes} B)")
        try:
            now = _fingerprint(self.index_file)
        except OSError as err:
            raise HierarchyUnusable(f"its index file is unreadable ({err.strerror})") from err
        if now != fingerprint:
            raise HierarchyUnusable("stale: the index file changed since it was written")
        meta = self._read(offsets["zones"], 25 * zones)
        if xxhash.xxh64_intdigest(meta) != zones_checksum:
            raise HierarchyUnusable(f"{self.path}: its zones fail their checksum")
        view = np.frombuffer(meta, np.uint8)
        self.fragment_id = view[: 8 * zones].view("<u8").astype(np.uint64)
        self.zone_start = view[8 * zones : 16 * zones].view("<u8").astype(np.uint64)
        self.zone_length = view[16 * zones : 24 * zones].view("<u8").astype(np.uint64)
        self.has_null = view[24 * zones :].astype(bool)
        self.files = None if files_text is None else decode_files(files_text, str(self.path))
        self.num_zones = zones
        self._offsets = offsets
        if len(self._first_zone) != len(self.fragments) or (
            zones and (self._first_zone[0] != 0 or self._first_zone != sorted(self._first_zone))
        ):
            raise HierarchyUnusable(f"{self.path}: damaged header (fragment zones)")
        if size < offsets["zone_sums"] + 8 * len(self.fragments) * (self.zone_bytes // _BLOCK):
            raise HierarchyUnusable(f"hierarchy companion {self.path} is truncated")
        chunk = min(self.dataset_bytes, _DATASET_CHUNK)
        count = len(self.fragments)
        self._sections = {
            "dataset": _Section(
                offsets["dataset"], offsets["dataset_sums"], self.dataset_bytes // chunk, [0, chunk]
            ),
            "fragments": _Section(
                offsets["fragments"],
                offsets["fragment_sums"],
                self.fragment_bytes // _BLOCK,
                [0, count * _BLOCK],
            ),
            "zones": _Section(
                offsets["zone_rows"],
                offsets["zone_sums"],
                self.zone_bytes // _BLOCK,
                [z * _BLOCK for z in [*self._first_zone, zones]],
            ),
        }

    def coarse(self, fragments: Iterable[int] | None = None) -> Coarse:
        """The coarse filters, checked, with the counts they were sized from: the dataset
        filter and the filters of ``fragments`` (default: all of them).

        Raises:
            HierarchyUnusable: written before companions recorded the counts, or a piece
                is truncated or fails its checksum.
        """
        count = len(self.fragments)
        if self._counts is None or len(self._counts) != count:
            raise HierarchyUnusable(f"{self.path} records no distinct counts (an older pruner)")
        rows = self.fragment_bytes // _BLOCK
        chunk = min(self.dataset_bytes, _DATASET_CHUNK)
        pieces = {
            "fragment": (
                self._offsets["fragments"],
                self._offsets["fragment_sums"],
                rows,
                count * _BLOCK,
            ),
            "dataset": (
                self._offsets["dataset"],
                self._offsets["dataset_sums"],
                self.dataset_bytes // chunk,
                chunk,
            ),
        }
        read = {}
        for what, (offset, sums, number, width) in pieces.items():
            data = np.frombuffer(self._read(offset, number * width), np.uint8).reshape(
                number, width
            )
            stored = np.frombuffer(self._read(sums, 8 * number), "<u8")
            if not np.array_equal(_row_checksums(data), stored):
                raise HierarchyUnusable(f"{self.path}: a {what} block fails its checksum")
            read[what] = data
        ids = [int(f) for f in self.fragments]
        position = {f: i for i, f in enumerate(ids)}
        wanted = [f for f in (ids if fragments is None else fragments) if f in position]
        blocks = read["fragment"].reshape(rows, count, _BLOCK)
        picked = blocks[:, [position[f] for f in wanted], :]  # only these are copied
        by_fragment = picked.transpose(1, 0, 2).reshape(len(wanted), rows * _BLOCK)
        return Coarse(
            fragment_bytes=self.fragment_bytes,
            counts=dict(zip(ids, self._counts, strict=True)),
            fragment_filters={f: by_fragment[i] for i, f in enumerate(wanted)},
            dataset_filter=read["dataset"].reshape(-1),
        )

    def __del__(self) -> None:
        fd, self._fd = getattr(self, "_fd", -1), -1
        if fd >= 0:
            os.close(fd)
        self._release()

    def _release(self) -> None:
        """Drop every kept unit (their bytes no longer count against :data:`_KEEP_BYTES`)."""
        global _kept_bytes
        kept, self._kept = getattr(self, "_kept", 0), 0
        for section in getattr(self, "_sections", {}).values():
            section.drop()
        with _kept_lock:
            _kept_bytes -= kept

    def probe(self, hashes: np.ndarray) -> Probe:
        """Zones that may hold any of the hashed values, read level by level.

        Raises:
            HierarchyUnusable: a piece read is truncated or fails its checksum.
        """
        hashes = distinct(np.asarray(hashes, np.uint64))
        mask = np.zeros(self.num_zones, bool)
        _, zones, touched = self._pairs(hashes)
        mask[zones] = True
        if touched is None:
            return Probe(mask, "dataset filter: absent")
        return Probe(
            mask,
            f"fragment filters: {touched} of {len(self.fragments)} fragments; "
            f"zone filters: {int(mask.sum())} zones",
        )

    def probe_each(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per hashed value, the zones that may hold it: ``(positions, zones)``, two int64
        arrays of the (position in ``hashes``, zone) pairs, read level by level as
        :meth:`probe` reads (an absent value costs one block of the dataset filter).

        Raises:
            HierarchyUnusable: a piece read is truncated or fails its checksum.
        """
        distinct, back = np.unique(np.asarray(hashes, np.uint64), return_inverse=True)
        value, zone, _ = self._pairs(distinct)
        if not len(value):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        # Back from distinct hashes to every position holding one.
        order = np.argsort(back, kind="stable")
        first = np.searchsorted(back[order], np.arange(len(distinct)))
        count = np.bincount(back, minlength=len(distinct))
        repeat = count[value]
        pair = np.repeat(np.arange(len(value)), repeat)
        step = np.arange(len(pair)) - np.repeat(np.cumsum(repeat) - repeat, repeat)
        positions = order[first[value[pair]] + step]
        return positions.astype(np.int64), zone[pair].astype(np.int64)

    def _units(self, name: str, units: np.ndarray) -> np.ndarray:
        """The image of section ``name`` in which ``units`` (distinct unit numbers, see
        :class:`_Section`) hold the companion's bytes, each checked against its stored
        checksum (other units' bytes are not to be used).

        Units already checked by an earlier probe of this companion are not read again.
        The others are read one by one, or with the section whole when many are wanted
        (:data:`_SMALL_READ`), and checked. The image is kept for later probes while the
        process's open companions keep at most :data:`_KEEP_BYTES` together.

        Raises:
            HierarchyUnusable: a unit read is truncated or fails its checksum.
        """
        with self._lock:
            section = self._sections[name]
            if section.image is None:
                section.image = sparse_zeros(section.rows, section.width)
                section.checked = np.zeros(section.rows * section.parts, bool)
            image = section.image
            need = units[~section.checked[units]]
            if len(need):
                self._read_units(name, section, need)
                section.checked[need] = True
                self._keep()
            return image

    def _read_units(self, name: str, section: _Section, need: np.ndarray) -> None:
        """Read the units ``need`` (none of them checked yet) into the section's image and
        check them."""
        image = section.image
        assert image is not None
        row, part = np.divmod(need, section.parts)
        lo, hi = section.edges[part], section.edges[part + 1]
        total = section.rows * section.width
        if len(need) * _SMALL_READ > total:
            stored = np.frombuffer(self._read(section.sums, 8 * len(section.checked)), "<u8")
            stored = stored[need]
            if not section.checked.any():  # nothing checked to keep: straight into the image
                target = memoryview(image.reshape(-1))  # type: ignore[arg-type]
                got = os.preadv(self._fd, [target], section.offset)
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
                got = os.preadv(self._fd, [target], section.offset + r * section.width + a)
                self.bytes_read += got
                if got != b - a:
                    raise HierarchyUnusable(f"hierarchy companion {self.path} is truncated")
                stored[i] = int.from_bytes(self._read(section.sums + 8 * unit, 8), "little")
                section.written = min(total, section.written + got)
        # Checked a part at a time: its units are one width.
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

    def _pairs(self, hashes: np.ndarray) -> tuple[np.ndarray, np.ndarray, int | None]:
        """:meth:`probe_each` of distinct hashes: each level probed for all of them together
        (array operations, no loop over values or blocks), its units read at once
        (:meth:`_units`). Also the number of fragments whose filters may hold one of them
        (None: the dataset filter rules every one out).

        One value reads what a loop over values read (its dataset chunk, its fragment
        block row, its candidate fragments' zone slices) and costs about what the loop did;
        100 values, cold, 5.0 ms against 8.5 ms by a loop over their block numbers (20M
        rows, 200 fragments)."""
        empty = np.zeros(0, np.int64), np.zeros(0, np.int64)
        if not self.num_zones:
            return *empty, None
        count = len(self.fragments)
        # Dataset level.
        chunk = min(self.dataset_bytes, _DATASET_CHUNK)
        blocks = sbbf.block_of(hashes, self.dataset_bytes // _BLOCK)
        data = self._units("dataset", distinct(blocks // (chunk // _BLOCK)))
        present = sbbf.check_blocks(data.reshape(-1, _BLOCK)[blocks], hashes)
        kept = np.flatnonzero(present)
        hashes = hashes[kept]
        if not len(hashes):
            return *empty, None
        # Fragment level: (value, fragment) pairs, a chunk of values at a time.
        rows = self.fragment_bytes // _BLOCK
        blocks = sbbf.block_of(hashes, rows)
        by_fragment = self._units("fragments", distinct(blocks)).reshape(rows, count, _BLOCK)
        step = max(1, _BULK_PAIRS // count)
        candidates = np.zeros((len(hashes), count), bool)
        for first in range(0, len(hashes), step):
            these = slice(first, first + step)
            gathered = by_fragment[blocks[these]].reshape(-1, _BLOCK)
            repeated = np.repeat(hashes[these], count)
            candidates[these] = sbbf.check_blocks(gathered, repeated).reshape(-1, count)
        value, fragment = np.nonzero(candidates)
        if not len(value):
            return *empty, 0
        # Zone level: every zone of each candidate fragment, at the value's block row (a
        # unit: a fragment's zones in one block row).
        zone_rows = self.zone_bytes // _BLOCK
        blocks = sbbf.block_of(hashes, zone_rows)
        edges = np.array([*self._first_zone, self.num_zones], np.int64)
        data = self._units("zones", distinct(blocks[value] * count + fragment))
        sizes = edges[fragment + 1] - edges[fragment]
        pair = np.repeat(np.arange(len(value)), sizes)
        zone = np.arange(len(pair)) - np.repeat(np.cumsum(sizes) - sizes, sizes)
        zone += edges[fragment][pair]
        by_zone = data.reshape(zone_rows, self.num_zones, _BLOCK)
        hits = sbbf.check_blocks(by_zone[blocks[value][pair], zone], hashes[value][pair])
        touched = len(distinct(fragment))
        return kept[value[pair[hits]]].astype(np.int64), zone[hits].astype(np.int64), touched


def write_hierarchy_of(
    index_file: str | os.PathLike[str],
    index: ZoneIndex,
    fresh: Mapping[int, FragmentCoarse],
    previous: Coarse | None = None,
    kept: Mapping[int, int] | None = None,
) -> Path | str:
    """The companion of ``index`` (just written to ``index_file``), or why the index cannot
    have one (filters of several sizes; fragments whose values are unknown)."""
    if not isinstance(index.filter_data, np.ndarray):
        return "its zone filters are not all one size"
    return write_hierarchy(
        index_file,
        column=index.column,
        items=index.items,
        probability=index.probability,
        fragment_id=index.fragment_id,
        zone_start=index.zone_start,
        zone_length=index.zone_length,
        has_null=index.has_null,
        filters=index.filter_data,
        fresh=fresh,
        files=index.files,
        previous=previous,
        kept=kept,
        value_type=index.value_type,
    )


def open_index(index_file: str | os.PathLike[str], column: str = "") -> ZoneIndex:
    """The index in ``index_file`` for probing: through its companion when it has a usable
    one (nothing but the companion's zones read now), else read whole, with the reason in
    ``hierarchy_note``.

    Raises:
        IndexFormatError: no usable companion, and the index file is damaged.
    """
    try:
        opened = Hierarchy(index_file)
    except HierarchyUnusable as err:
        index = read_index_file(index_file, column)
        index.hierarchy_note = str(err)
        return index
    return ZoneIndex(
        column=column or opened.column,
        items=opened.items,
        probability=opened.probability,
        fragment_id=opened.fragment_id,
        zone_start=opened.zone_start,
        zone_length=opened.zone_length,
        has_null=opened.has_null,
        filter_data=None,
        files=opened.files,
        value_type=opened.value_type,
        hierarchy=opened,
        plain=lambda: read_index_file(index_file, column),
    )
