"""Writing the companion: the coarse filters' shares and sizes, and the file itself
(:mod:`pruner.index.hierarchy`)."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import xxhash

from pruner import sbbf, storage
from pruner.index.fileformat import (
    encode_files,
    index_fingerprint,
)
from pruner.index.hierarchy.layout import (
    _BLOCK,
    _DATASET_CHUNK,
    _PREFIX,
    MAGIC,
    VERSION,
    _block_major,
    _part_checksums,
    _row_checksums,
    companion_path,
    zones_codec,
)
from pruner.index.model import FragmentFile, ZoneIndex

_PIECE_BYTES = 32 << 20
"""A companion's block-major sections are made and written this many bytes at a time."""
_FLUSH_VALUES = 1 << 23
"""A build's :class:`DatasetFill` fills the dataset filter whenever this many values' hashes
(64 MB) wait."""
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
        return cls.with_zones(hashes, probability, None, 0)[0]

    @classmethod
    def with_zones(
        cls, hashes: np.ndarray, probability: float, zone_bounds: np.ndarray | None, zone_bytes: int
    ) -> tuple[FragmentCoarse, np.ndarray]:
        """:meth:`of`, and the fragment's zone filters of ``zone_bytes`` (``zone_bounds``
        as :func:`pruner.sbbf.insert` takes them) from the same pass: a value's bits are
        computed once for both (a build's fragment: 1.2 ms against 2.0 ms in two passes
        per 100,000 values)."""
        size = sbbf.optimal_num_bytes(_size_class(len(hashes)), probability)
        ordered, bits, ones, zones = sbbf.ordered_insert(
            hashes, size, _ORDER_BITS, zone_bounds, zone_bytes
        )
        return cls(ordered, bits, sbbf.count_from_fill(size * 8, ones, len(ordered))), zones


def _size_class(values: int) -> int:
    """``values`` rounded up to one of 8 steps per power of two, what a fragment's coarse
    filter is sized for: within 12.5% of its values (the filter is the size its values
    call for, but where a step crosses a size), and a few hundred counts at most, each
    sized once (:func:`pruner.sbbf.min_log2_bytes` costs 3-4 ms a count). Sized for the
    next power of two, a fragment of 100,000 values held a 512 KiB filter to the end of
    the build, twice the 256 KiB the companion stores (500 MB held at 100M rows).

    >>> [_size_class(n) for n in (1, 7, 8, 9, 100_000, 131_072)]
    [1, 8, 8, 9, 106496, 131072]
    """
    bits = max(values - 1, 0).bit_length()
    if bits <= 3:
        return 1 << bits
    step = 1 << (bits - 4)
    return -(-values // step) * step


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
        return "fragments were indexed without their values' hashes"
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
    fill: DatasetFill | None = None,
) -> tuple[list[np.ndarray], np.ndarray]:
    """The fragment filters (one per fragment) and the dataset filter of a companion,
    of the sizes :func:`_coarse_counts`' counts give: the fragment filters' from the
    largest, the dataset filter's from their sum.

    Each fragment's filter is its share's (``fresh``) or, for a fragment an update kept,
    ``previous``'s; the dataset filter is then the old one with the new values added.
    Every filter is resized to its size (:func:`pruner.sbbf.resize`: halving ORs pairs of
    blocks, which is inserting at that size; doubling keeps the filter's own rate); the
    dataset filter gets every fresh value. When the sizes are unchanged and no fragment was
    dropped or re-indexed, the result is a full build's, bit for bit; else a superset of it
    (values of dropped fragments stay in the dataset filter). ``fill``: the fresh values'
    dataset filter as the build filled it, when their shares no longer hold their hashes.
    """
    ids = [int(f) for f in fragments]
    fragment_filters = []  # not copied into one array: written block-major from here
    for f in ids:
        if f in fresh:
            own = fresh[f].filter
        else:
            assert previous is not None
            own = previous.fragment_filters[kept[f]]
        fragment_filters.append(sbbf.resize(own[None, :], fragment_bytes)[0])
    if fill is None:  # the fresh shares hold their hashes
        fill = DatasetFill()
        for f in ids:
            if f in fresh:
                fill.add(fresh[f].hashes)
    dataset_filter = fill.result(dataset_bytes)
    if previous is not None and any(f not in fresh for f in ids):
        dataset_filter |= sbbf.resize(previous.dataset_filter[None, :], dataset_bytes)[0]
    return fragment_filters, dataset_filter


def _dataset_filter(runs: list[np.ndarray], num_bytes: int) -> np.ndarray:
    """A filter of ``num_bytes`` holding every hash of ``runs`` (each in the order of its
    top bits, :class:`FragmentCoarse`): :func:`_fill_regions` of a zeroed one."""
    words = np.zeros((1, num_bytes // 4), "<u4")
    _fill_regions(runs, words)
    return words.view(np.uint8)[0]


def _fill_regions(runs: list[np.ndarray], words: np.ndarray) -> None:
    """Add every hash of ``runs`` (each in the order of its top bits) to the one filter
    ``words`` ((1, bytes / 4) uint32), a region of :data:`_REGION_BYTES` at a time: the
    hashes of one region, from every run, go in together while it is in cache, the first
    half of the regions and the second side by side in two threads (their blocks are
    disjoint). Filled run after run, each run swept the whole filter: 5M values into 16 MiB
    took 0.12-0.14 s. The compiled loop takes each region's pieces of every run where they
    lie in one array of the runs (copying them together region by region first cost 0.15 s
    of 0.35 at 20M values)."""
    num_bytes = words.shape[1] * 4
    log2_regions = min(max(num_bytes // _REGION_BYTES, 1).bit_length() - 1, _ORDER_BITS)
    regions = 1 << log2_regions
    hashes = np.concatenate(runs) if runs else np.zeros(0, np.uint64)
    run_starts = np.cumsum([0, *(len(run) for run in runs)])[:-1]
    cuts = np.arange(regions + 1, dtype=np.uint64)
    # edges[i, r]: where region r of run i starts in ``hashes``
    edges = np.array(
        [
            start + np.searchsorted(run >> np.uint64(64 - log2_regions), cuts)
            if log2_regions
            else np.array([start, start + len(run)])
            for start, run in zip(run_starts, runs, strict=True)
        ],
        np.int64,
    ).reshape(len(runs), regions + 1)
    starts, stops = edges[:, :-1].T.ravel(), edges[:, 1:].T.ravel()  # region by region
    half = (regions // 2 or 1) * len(runs)
    with ThreadPoolExecutor(max_workers=2) as pool:
        done = [
            pool.submit(sbbf.insert_pieces, words, hashes, starts[part], stops[part])
            for part in (slice(0, half), slice(half, None))
        ]
        for future in done:
            future.result()


class DatasetFill:
    """The dataset filter of a build's fresh fragments, filled as the fragments come: a
    fragment's hashes wait (:meth:`add`) until :data:`_FLUSH_VALUES` of them do, and then go
    into a filter of ``num_bytes`` (default the largest size, :data:`pruner.sbbf.MAX_BYTES`;
    a full build's: the size for its rows, which its distinct values never pass), which
    :meth:`result` folds to the size the counts give (halving ORs pairs of blocks, which is
    inserting at half the size: the same bits). A build held every hash to the end: 800 MB
    at 100M rows, twice that while they were copied together. A build of fewer values fills
    the filter at its size once, at the end, as before. (20M rows: 64 MiB filled, not 128.)"""

    def __init__(self, num_bytes: int = sbbf.MAX_BYTES) -> None:
        self._runs: list[np.ndarray] = []
        self._waiting = 0
        self._words: np.ndarray | None = None
        self._bytes = num_bytes

    def add(self, hashes: np.ndarray) -> None:
        """A fresh fragment's hashes (in the order of their top bits)."""
        if len(hashes):
            self._runs.append(hashes)
            self._waiting += len(hashes)
        if self._waiting >= _FLUSH_VALUES:
            self._flush()

    def _flush(self) -> None:
        if self._words is None:
            self._words = np.zeros((1, self._bytes // 4), "<u4")
        _fill_regions(self._runs, self._words)
        self._runs, self._waiting = [], 0

    def result(self, num_bytes: int) -> np.ndarray:
        """The filter of ``num_bytes`` (at most :data:`pruner.sbbf.MAX_BYTES`) holding
        every hash added (larger than the size it was filled at: that filter doubled, which
        keeps its rate, as an update's dataset filter is)."""
        if self._words is None:
            return _dataset_filter(self._runs, num_bytes)
        self._flush()
        assert self._words is not None
        return sbbf.resize(self._words.view(np.uint8), num_bytes)[0]


def write_hierarchy(
    index_file: storage.PathLike,
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
    fingerprint: tuple[int, str] | None = None,
    fill: DatasetFill | None = None,
    after: Future[None] | None = None,
) -> storage.Location | str:
    """Write the companion of ``index_file`` (already written) atomically beside it; or
    say why it can have none. ``fingerprint``: the index file's fingerprint as its writer wrote
    it (else it is read from the file now, which another writer may have replaced).
    ``after``: the index file's publish, still under way (IndexFileWriter.finish): the
    companion is computed meanwhile, and published once the index is in place, so a reader
    never finds a companion newer than its index.

    Args:
        filters: (zones, bytes) uint8, every zone's filter, one size, in file order.
        value_type: the index's ``ZoneIndex.value_type`` (what its values were hashed as).
        fresh: per fragment id just indexed, its share of the coarse filters.
        previous, kept: an update's old companion's coarse filters, and which fragments
            (new id -> old id) take theirs from it: the ones missing from ``fresh``.
        fill: the fresh values' dataset filter as the build filled it (:class:`DatasetFill`),
            when ``fresh`` no longer holds their hashes.
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
    meta = np.frombuffer(
        zones_codec().compress(
            np.concatenate(
                [
                    fragment_id.astype("<u8").view(np.uint8),
                    np.asarray(zone_start, "<u8").view(np.uint8),
                    np.asarray(zone_length, "<u8").view(np.uint8),
                    np.asarray(has_null, np.uint8),
                ]
            ),
            asbytes=True,
        ),
        np.uint8,
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
    size, tail = fingerprint or index_fingerprint(storage.location(index_file))
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
        "zones_stored": meta.nbytes,
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
    storage.remove_leftovers(target)
    temporary = storage.temporary_path(target)
    output = storage.NewFile(temporary)
    try:
        # A section is written (by offset, in a thread) as soon as it is made, while the
        # next is made: writing a 207 MB companion to this disk took as long as making it.
        with ThreadPoolExecutor(max_workers=1) as writer:
            written: deque[Future[None]] = deque()
            put_bytes = dict.fromkeys(sizes, 0)

            def put(name: str, data: np.ndarray) -> None:
                """The next bytes of section ``name``; at most two pieces wait to be
                written, so a section made piece by piece is never all in memory."""
                flat = np.ascontiguousarray(data).reshape(-1).view(np.uint8)
                at = offsets[name] + put_bytes[name]
                put_bytes[name] += flat.nbytes
                if put_bytes[name] > sizes[name]:
                    raise AssertionError(f"companion section {name}: {put_bytes[name]} B")
                written.append(writer.submit(_write_at, output, flat, at))
                while len(written) > 2:
                    written.popleft().result()

            def put_block_major(
                name: str,
                sums_name: str,
                filters: np.ndarray | list[np.ndarray],
                num_bytes: int,
                edges: list[int],
            ) -> None:
                """Section ``name``, the filters block-major (:func:`_block_major`), made
                and written :data:`_PIECE_BYTES` at a time, and its checksums (one per row
                and part: ``edges`` cut a row into parts): at 100M rows a whole copy of the
                zones' filters held 400 MB more while it was written."""
                count, blocks = len(filters), num_bytes // _BLOCK
                step = max(1, _PIECE_BYTES // max(1, count * _BLOCK))
                sums = np.empty((blocks, len(edges) - 1), np.uint64)
                for first in range(0, blocks, step):
                    stop = min(blocks, first + step)
                    rows = _block_major(filters, first, stop)
                    sums[first:stop] = _part_checksums(rows, edges)
                    put(name, rows)
                put(sums_name, sums.astype("<u8"))

            put("zones", meta)
            # The dataset filter first, while its two threads have the cores to themselves.
            fragment_filters, dataset_filter = _coarse_filters(
                fragments, fresh, previous, kept or {}, fragment_bytes, dataset_bytes, fill
            )
            dataset_blocks = dataset_filter.reshape(-1, chunk)
            put("dataset", dataset_blocks)
            put("dataset_sums", _row_checksums(dataset_blocks).astype("<u8"))
            del dataset_filter, dataset_blocks
            put_block_major(
                "fragments",
                "fragment_sums",
                fragment_filters,
                fragment_bytes,
                [0, len(fragments) * _BLOCK],
            )
            del fragment_filters
            # One checksum per (zone row, fragment): a probe reads one fragment's zones of
            # a row.
            zone_edges = [z * _BLOCK for z in [*first_zone.tolist(), len(fragment_id)]]
            put_block_major("zone_rows", "zone_sums", filters, zone_bytes, zone_edges)
            if put_bytes != sizes:
                raise AssertionError(f"companion sections {put_bytes}, not {sizes}")
            prefix = MAGIC + len(text).to_bytes(4, "little") + checksum + text
            put_header = writer.submit(_write_at, output, np.frombuffer(prefix, np.uint8), 0)
            for done in [*written, put_header]:
                done.result()
        output.close()
        if after is not None:
            after.result()
        storage.publish(temporary, target)
    finally:
        output.close()  # closing twice does nothing
        storage.remove(temporary)
    return target


def _write_at(output: storage.NewFile, data: np.ndarray, offset: int) -> None:
    """All of ``data`` (uint8) at ``offset`` of the file being written."""
    view = memoryview(data.data)
    while view.nbytes:
        count = output.write_at(view, offset)
        view, offset = view[count:], offset + count


def write_hierarchy_of(
    index_file: storage.PathLike,
    index: ZoneIndex,
    fresh: Mapping[int, FragmentCoarse],
    previous: Coarse | None = None,
    kept: Mapping[int, int] | None = None,
    fill: DatasetFill | None = None,
    after: Future[None] | None = None,
) -> storage.Location | str:
    """The companion of ``index`` (just written to ``index_file``, or being published:
    ``after``, see :func:`write_hierarchy`), or why the index cannot have one (filters of
    several sizes; fragments whose values are unknown)."""
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
        fingerprint=index.written_fingerprint,
        fill=fill,
        after=after,
    )
